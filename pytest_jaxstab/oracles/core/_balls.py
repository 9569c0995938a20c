"""From floats to balls and back: exact inputs, and the rounding test that decides an element.

A ball is *decided* for a float format when both of its ends round (to nearest, ties to even) to the
same float: then every real number in it, the exact result included, rounds to that float, so it is
the correctly rounded result, proven. The two zeros count as one value (a ball straddling 0 inside the
underflow range is decided: the metric gives -0 and +0 the same ordinal). Ends beyond the largest float
round to +-inf as IEEE 754 prescribes. ``None`` (no real value) is decided: NaN. An indeterminate ball
is undecided.
"""

from __future__ import annotations

from typing import Any

import mpmath
import numpy as np
from flint import acb, arb
from mpmath import libmp

from ..._dtypes import dtype_info
from ._common import NEG_INF, POS_INF
from ._rounding import shift_nearest_even

__all__ = ["ball_to_mpf", "floats_to_mpf", "round_balls", "round_ball_to_format", "to_acb_array",
           "to_arb_array"]

#: A radius more than this many bits below the midpoint is widened to it (sound: a bigger ball), so that
#: aligning the two never shifts integers by astronomically many bits; no working precision comes close.
_ALIGN_LIMIT = 1 << 16


def _float_to_ball(v: float) -> Any:
    if v != v:
        return None
    if v == float("inf"):
        return POS_INF
    if v == float("-inf"):
        return NEG_INF
    return arb(v)  # exact: arb holds any double exactly


def to_arb_array(x: Any) -> np.ndarray:
    """A float array (float16/bfloat16/float32/float64) as an object array of exact balls (None: NaN)."""
    arr = np.asarray(x)
    wide = arr.astype(np.float64).ravel()  # the narrow floats widen exactly
    out = np.empty(len(wide), dtype=object)
    if np.isfinite(wide).all():
        out[:] = list(map(arb, wide.tolist()))  # exact: arb holds any double exactly
    else:
        out[:] = [_float_to_ball(v) for v in wide.tolist()]
    return out.reshape(arr.shape)


def _ends(v: arb) -> tuple[int, int, int] | None:
    """``(lo, hi, e)``: the ball is ``[lo * 2**e, hi * 2**e]``; None when indeterminate."""
    if not v.is_finite():
        return None
    mm, me = v.mid().man_exp()
    rm, re = v.rad().man_exp()
    mm, me, rm, re = int(mm), int(me), int(rm), int(re)
    if rm == 0:
        return mm, mm, me
    tm = me + abs(mm).bit_length()
    tr = re + rm.bit_length()
    if mm == 0 or tr > tm + _ALIGN_LIMIT:
        # Inside [-(|mid| + rad), |mid| + rad], within [-2 rad, 2 rad] here: a superset, still sound.
        r = rm << 1 if mm else rm
        return -r, r, re
    if tr < tm - _ALIGN_LIMIT:
        rm, re = 1, tm - _ALIGN_LIMIT
    e = min(me, re)
    m, r = mm << (me - e), rm << (re - e)
    return m - r, m + r, e


def _round_int(n: int, e: int, p: int, emin: int, emax: int) -> tuple[int, int, int]:
    """``n * 2**e`` rounded to ``p`` bits, nearest-even: ``(sign, top, m)``, value ``m * 2**(top-p+1)``.

    ``top`` is clamped to ``emin`` below the normal range (gradual underflow); ``top > emax`` or
    ``m == 2**p`` at ``top == emax`` means overflow (callers turn the encoding into inf)."""
    sign = 1 if n < 0 else 0
    man = -n if sign else n
    if not man:
        return sign, emin, 0
    bc = man.bit_length()
    top = e + bc - 1
    if top > emax:
        return sign, emax + 1, 0  # checked before any shift: huge exponents cost nothing
    if top < emin:
        top = emin
    return sign, top, shift_nearest_even(man, bc, (top - p + 1) - e)


def round_balls(values: np.ndarray, dtype: Any) -> tuple[np.ndarray, np.ndarray]:
    """Rounds balls to ``dtype``: ``(rounded, decided)``, arrays of ``values``' shape.

    Undecided elements hold NaN in ``rounded``.
    """
    fmt = dtype_info(dtype)
    p, emin, emax = fmt.significand_bits, fmt.min_exponent, fmt.max_exponent
    inf_bits = (emax - emin + 2) << (p - 1)
    nan_bits = inf_bits | (1 << (p - 2))
    sign_mask = 1 << (fmt.bits - 1)

    def encode(sign: int, top: int, m: int) -> int:
        if top > emax:
            return (sign_mask if sign else 0) | inf_bits
        bits = ((top - emin) << (p - 1)) + m
        return (sign_mask if sign else 0) | (bits if bits < inf_bits else inf_bits)

    arr = np.asarray(values, dtype=object)
    out: list[int] = []
    decided: list[bool] = []
    for v in arr.flat:
        if v is None:
            out.append(nan_bits)
            decided.append(True)
            continue
        ends = _ends(v)
        if ends is None:
            if v.is_exact() and not v.is_nan():  # an exact infinity
                out.append(inf_bits | (sign_mask if v < 0 else 0))
                decided.append(True)
            else:
                out.append(nan_bits)
                decided.append(False)
            continue
        lo, hi, e = ends
        a = encode(*_round_int(lo, e, p, emin, emax))
        if hi == lo:
            out.append(a)
            decided.append(True)
            continue
        b = encode(*_round_int(hi, e, p, emin, emax))
        if a == b:
            out.append(a)
            decided.append(True)
        elif (a | sign_mask) == (b | sign_mask) and (a & ~sign_mask) == 0:
            out.append(0 if lo + hi >= 0 else sign_mask)  # -0 and +0: one value
            decided.append(True)
        else:
            out.append(nan_bits)
            decided.append(False)
    bits = np.array(out, dtype=fmt.uint_dtype).reshape(arr.shape)
    return bits.view(fmt.dtype), np.array(decided, dtype=bool).reshape(arr.shape)


def round_ball_to_format(v: Any, exponent_bits: int, mantissa_bits: int) -> Any:
    """``v`` rounded to the binary format with these field widths (``lax.reduce_precision``), as an
    exact ball; None for None; an undecided rounding gives an indeterminate ball."""
    if v is None:
        return None
    ends = _ends(v)
    if ends is None:
        return v if v.is_exact() and not v.is_nan() else arb.nan()
    p = mantissa_bits + 1
    emax = (1 << (exponent_bits - 1)) - 1
    emin = 1 - emax
    lo, hi, e = ends
    a, b = _round_int(lo, e, p, emin, emax), _round_int(hi, e, p, emin, emax)

    def value(s: int, top: int, m: int) -> Any:
        if top > emax or (top == emax and m >> p):
            return NEG_INF if s else POS_INF
        return arb(((-m if s else m), top - p + 1))

    va, vb = value(*a), value(*b)
    if va.is_exact() and vb.is_exact() and (va == vb or (va.is_zero() and vb.is_zero())):
        return va
    return arb.nan()


def ball_to_mpf(values: np.ndarray) -> np.ndarray:
    """The midpoints of balls as exact ``mpmath.mpf`` (NaN for None and indeterminate balls)."""
    make = mpmath.mp.make_mpf

    def one(v: Any) -> Any:
        if v is None or v.is_nan():
            return make(libmp.fnan)
        if not v.is_finite():
            if not v.is_exact():
                return make(libmp.fnan)
            return make(libmp.finf if v > 0 else libmp.fninf)
        man, exp = v.mid().man_exp()
        return make(libmp.from_man_exp(int(man), int(exp)))

    arr = np.asarray(values, dtype=object)
    out = np.empty(arr.shape, dtype=object)
    for idx, v in np.ndenumerate(arr):
        out[idx] = one(v)
    return out


def floats_to_mpf(values: np.ndarray) -> np.ndarray:
    """float64 values as exact ``mpmath.mpf`` (NaN and infinities as mpmath's), an object array of their
    shape: the same numbers as ``ball_to_mpf`` of exact balls, the raw tuples made with numpy."""
    a = np.asarray(values, dtype=np.float64)
    finite = np.isfinite(a) & (a != 0)
    m, e = np.frexp(np.where(finite, a, 1.0))
    man = np.abs(m * 2.0**53).astype(np.int64)  # exact: |m| in [0.5, 1)
    low = man & -man
    tz = np.frexp(low.astype(np.float64))[1] - 1  # trailing zeros: mpf mantissas are odd
    man = man >> tz
    exp = e.astype(np.int64) - 53 + tz
    bc = np.frexp(man.astype(np.float64))[1]
    sign = np.signbit(a).astype(np.int64)
    make, mpz, from_float = mpmath.mp.make_mpf, libmp.MPZ, libmp.from_float
    flat = [make((s, mpz(k), x, b)) if f else make(from_float(v)) for s, k, x, b, f, v in
            zip(sign.ravel().tolist(), man.ravel().tolist(), exp.ravel().tolist(), bc.ravel().tolist(),
                finite.ravel().tolist(), a.ravel().tolist())]
    out = np.empty(a.shape, dtype=object)
    out.reshape(-1)[:] = flat
    return out


def _complex_to_ball(v: complex) -> acb | None:
    re, im = v.real, v.imag
    if not (np.isfinite(re) and np.isfinite(im)):
        return None  # an infinite or NaN part: no finite complex value the oracle can hold
    return acb(arb(re), arb(im))  # exact: arb holds any double exactly


def to_acb_array(x: Any) -> np.ndarray:
    """A complex64/complex128 array as an object array of exact complex balls (None: a non-finite part)."""
    arr = np.asarray(x).astype(np.complex128)  # complex64 widens exactly
    flat = arr.ravel().tolist()
    out = np.empty(len(flat), dtype=object)
    out[:] = [_complex_to_ball(v) for v in flat]
    return out.reshape(arr.shape)
