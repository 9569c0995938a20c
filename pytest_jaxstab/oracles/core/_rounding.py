"""Exact conversions between mpmath numbers and the float dtypes the oracle judges.

The oracle computes in mpmath and must hand back *the* float nearest to the exact result: the error
metric (docs/architecture.md, "The error metric") counts ulps against it, so one wrong rounding is one
bit of phantom error.
Going through float64 (``np.float32(float(x))``) rounds twice, which is wrong for float32 ties and for
float64 subnormals, so :func:`round_to_dtype` rounds once, with integer arithmetic on the mpf's
``(sign, mantissa, exponent)`` and writes the IEEE bit pattern directly.
"""

from __future__ import annotations

import math
from typing import Any

import ml_dtypes
import mpmath
import numpy as np
from mpmath import libmp

from ..._dtypes import DtypeInfo, dtype_info
from ..._errors import ArgumentTypeError

__all__ = ["round_to_dtype", "to_mpf_array"]


def _format(dtype: Any) -> DtypeInfo:
    """The format facts of ``dtype`` (a dtype, a scalar type or a name such as ``"bfloat16"``).

    Raises:
      ValueError: ``dtype`` is not float16, bfloat16, float32 or float64.
    """
    return dtype_info(dtype)


_FNAN, _FINF, _FNINF = libmp.fnan, libmp.finf, libmp.fninf


def _raw(value: Any) -> tuple | None:
    """The raw mpf tuple ``(sign, man, exp, bc)`` of a real ``value``, or None when it has no real value.

    Exact for every accepted type: ints are taken whole (``mpmath.mpf(int)`` would round to the
    context's precision), floats are exact in 53 bits.
    """
    raw = getattr(value, "_mpf_", None)  # any mpmath context's mpf
    if raw is not None:
        return raw
    if value is None or hasattr(value, "_mpc_") or isinstance(value, complex | np.complexfloating):
        return None
    if isinstance(value, bool | int | np.integer):
        v = int(value)
        return (int(v < 0), abs(v), 0, abs(v).bit_length())
    if isinstance(value, float | np.floating | ml_dtypes.bfloat16):
        if isinstance(value, np.floating) and value.dtype.itemsize > 8:
            raise ArgumentTypeError(f"cannot round {value.dtype} exactly: float() would round it first")
        f = float(value)
        # mpmath's zero is unsigned; keep the sign of a float -0.0 (_round_all reads a signed raw zero).
        return (int(math.copysign(1.0, f) < 0), 0, 0, 0) if f == 0 else libmp.from_float(f)
    raise ArgumentTypeError(f"cannot round a {type(value).__name__} to a float dtype: {value!r}")


def shift_nearest_even(man: int, bc: int, shift: int) -> int:
    """``man * 2**-shift`` rounded to an integer, nearest with ties to even (``bc``: ``man``'s bit length).

    ``shift`` counts the bits of ``man`` below the target quantum; a negative one scales up exactly.
    The one rounding step shared by the float rounding here and the ball rounding of ``_balls``.
    """
    if shift <= 0:
        return man << -shift
    if shift > bc:
        return 0  # below 2**(bc - 1) quanta <= half a quantum, and not equal to it: rounds to zero
    m = man >> shift
    rest = man - (m << shift)
    half = 1 << (shift - 1)
    if rest > half or (rest == half and m & 1):
        m += 1
    return m


def _round_all(raws: Any, fmt: DtypeInfo) -> list[int]:
    """The bit patterns of raw mpf tuples correctly rounded (nearest, ties to even) into ``fmt``.

    One loop with the format's constants hoisted: this runs once per element of every oracle result.
    """
    p, emin, emax = fmt.significand_bits, fmt.min_exponent, fmt.max_exponent
    inf_bits = (emax - emin + 2) << (p - 1)  # biased exponent all ones, fraction zero
    nan_bits = inf_bits | (1 << (p - 2))  # the quiet NaN numpy itself produces
    sign_mask = 1 << (fmt.bits - 1)
    out = []
    for raw in raws:
        if raw is None:
            out.append(nan_bits)
            continue
        sign, man, exp, bc = raw
        sign_bit = sign_mask if sign else 0
        if not man:
            if raw == _FNAN:
                out.append(nan_bits)
            elif raw in (_FINF, _FNINF):
                out.append(sign_bit | inf_bits)
            else:
                out.append(sign_bit)  # zero; mpmath's is unsigned, a raw tuple with sign 1 gives -0
            continue
        top = exp + bc - 1  # the value lies in [2**top, 2**(top + 1))
        if top > emax:
            # Checked before any shift so that mpf('1e100000') costs nothing.
            out.append(sign_bit | inf_bits)
            continue
        if top < emin:
            top = emin  # gradual underflow: below the normal range the grid stays at the subnormal quantum
        m = shift_nearest_even(man, bc, (top - p + 1) - exp)
        # Positive bit patterns are monotone in the value: (top - emin) << (p - 1) plus the significand
        # counts the implicit bit for normals, and a carry out of the significand (to 2**p, or 2**(p-1)
        # for the largest subnormal) lands exactly on the next binade's pattern, up to Inf itself.
        bits = ((top - emin) << (p - 1)) + int(m)
        out.append(sign_bit | (bits if bits < inf_bits else inf_bits))
    return out


def round_to_dtype(values: Any, dtype: Any) -> np.ndarray:
    """Rounds exact values to ``dtype``, correctly (to nearest, ties to even), subnormals included.

    This is how the oracle turns its mpmath results into the reference floats of the error metric.
    Rounding is done once, in integer arithmetic, so no double rounding can occur; values at or beyond
    the largest finite float plus half an ulp become +-Inf as IEEE 754 prescribes, and negative values
    that round to zero give -0.0.

    Args:
      values: a scalar or an array-like (any shape) of ``mpmath.mpf`` from any mpmath context, Python
        or numpy ints and floats, mpmath ``nan``/``inf``/``-inf``. ``None`` and complex values
        (``mpmath.mpc``, ``complex``) mean "no real value" and give NaN.
      dtype: float16, bfloat16 (``ml_dtypes.bfloat16``), float32 or float64, as a dtype, a scalar type or
        its name.

    Returns:
      A numpy array of ``dtype`` with the shape of ``values`` (0-d for a scalar).

    Raises:
      ValueError: ``dtype`` is not one of the four supported.
      TypeError: an element is of a type that cannot be rounded exactly.

    Example:
      >>> round_to_dtype([mpmath.mpf(1) + mpmath.mpf(2) ** -24], "float32")  # a tie: rounds to even
      array([1.], dtype=float32)
    """
    fmt = _format(dtype)
    arr = np.asarray(values, dtype=object)
    bits = _round_all(map(_raw, arr.flat), fmt)
    return np.array(bits, dtype=fmt.uint_dtype).reshape(arr.shape).view(fmt.dtype)


def to_mpf_array(x: Any, ctx: Any = None) -> np.ndarray:
    """Converts a float array to an object array of the exact same values as mpmath numbers.

    The oracle's interpreter uses it on a function's inputs. No rounding happens whatever the context's
    precision: every float16/bfloat16/float32/float64 value is exact in 53 bits.

    Args:
      x: an array-like of float16, bfloat16, float32 or float64 (a numpy or JAX array, or a scalar).
      ctx: the mpmath context whose ``mpf`` type to build; ``mpmath.mp`` when None.

    Returns:
      An object array of ``x``'s shape holding mpf values; NaN and +-Inf map to mpmath's ``nan`` and
      ``+-inf``. -0.0 becomes mpmath's zero, which is unsigned.

    Raises:
      ValueError: ``x``'s dtype is not one of the four supported.

    Example:
      >>> to_mpf_array(np.array([0.1], np.float32))[0] == mpmath.mpf(13421773) / 2**27
      True
    """
    ctx = mpmath.mp if ctx is None else ctx
    arr = np.asarray(x)
    _format(arr.dtype)
    make = ctx.make_mpf  # builds from the raw tuple as is, without rounding to ctx.prec
    # float16/bfloat16/float32 widen to float64 exactly.
    floats = arr.astype(np.float64).ravel().tolist()
    out = np.empty(len(floats), dtype=object)
    out[:] = [make(libmp.from_float(v)) for v in floats]
    return out.reshape(arr.shape)
