"""Bits of error between a float and the exact result, as Herbie (docs/architecture.md, "The error metric").

Error is counted in ulps, on a log scale: the distance between two floats is how many representable
values lie between them, so it means the same at every magnitude and for every dtype.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..._dtypes import dtype_info, to_ordinal
from ..._errors import ArgumentError

__all__ = ["complex_error_bits", "error_bits", "ordinals", "summarize"]


def ordinals(x: Any) -> np.ndarray:
    """Maps floats to integers that count representable values: adjacent floats differ by one.

    The map is monotone over the extended reals, -0.0 and +0.0 share ordinal 0, and +-Inf sit one step
    beyond +-max (the dtype table's ``to_ordinal``, taken in ``x``'s own dtype).

    Example:
      >>> ordinals(np.array([-np.float32(1e-45), -0.0, 0.0, 1e-45], np.float32))
      array([-1,  0,  0,  1])
    """
    return to_ordinal(x)


def error_bits(approx: Any, exact: Any) -> np.ndarray:
    """Bits of error of ``approx`` against ``exact``: ``log2(1 + |ord(approx) - ord(exact)|)``.

    ``exact`` is the true result already rounded to the dtype (see ``round_to_dtype``), so a correctly
    rounded ``approx`` scores 0 and an adjacent float 1. Special cases (docs/architecture.md, "The error
    metric"):

    - ``exact`` finite, ``approx`` NaN or +-Inf: the dtype's full width (16, 32 or 64 bits).
    - ``exact`` +-Inf (the true result overflows the dtype): 0 for the same infinity, the full width
      for anything else.
    - ``exact`` NaN (the true result is not real: the input is outside the function's domain): NaN.
      Such samples are not errors; callers discard and count them (``summarize`` does).

    Finite results are clipped to the full width, so it is a true upper bound even for -max vs +max.
    Complex arrays are scored by :func:`complex_error_bits` (normwise, in ulps of the larger part).

    Args:
      approx: the computed values, an array-like of float16, bfloat16, float32 or float64.
      exact: the reference values, of the same dtype; broadcast against ``approx`` like numpy does.

    Returns:
      A float64 array of the broadcast shape.

    Raises:
      ValueError: the two dtypes differ, or are not among the four supported.

    Example:
      >>> one = np.float32(1)
      >>> error_bits(np.array([one, np.nextafter(one, np.float32(2)), np.inf], np.float32), one)
      array([ 0.,  1., 32.])
    """
    a, e = np.asarray(approx), np.asarray(exact)
    if np.iscomplexobj(a) or np.iscomplexobj(e):
        return complex_error_bits(a, e)
    if a.dtype != e.dtype:
        raise ArgumentError(f"error_bits needs one dtype, got approx {a.dtype} and exact {e.dtype}")
    width = float(dtype_info(a.dtype).bits)
    a, e = np.broadcast_arrays(a, e)
    # Wrapping uint64 arithmetic: the true distance is below 2**64 but -max to +max overflows int64.
    # The ordinals' two's-complement bits subtract modulo 2**64, so the larger minus the smaller is exact.
    oa = np.atleast_1d(ordinals(a))
    oe = np.atleast_1d(ordinals(e))
    ua, ue = oa.view(np.uint64), oe.view(np.uint64)
    distance = np.where(oa >= oe, np.subtract(ua, ue), np.subtract(ue, ua)).reshape(a.shape)
    # Exact up to 2**53; beyond, the float rounding is far below the precision of a count of bits.
    bits = np.minimum(np.log2(distance.astype(np.float64) + 1.0), width)

    a_finite, e_finite = np.isfinite(a), np.isfinite(e)
    e_nan, e_inf = np.isnan(e), np.isinf(e)
    # Against an overflowed truth, a finite value, NaN or the other infinity gets the full width; the
    # same infinity already scores 0 from the ordinals.
    wrong_inf = e_inf & (a != e)
    bits = np.where((e_finite & ~a_finite) | wrong_inf, width, bits)
    return np.where(e_nan, np.nan, bits)


def complex_error_bits(approx: Any, exact: Any) -> np.ndarray:
    """Bits of error of a complex result: the distance to the exact value in ulps of its larger part.

    With ``m = max(|Re e|, |Im e|)`` and ``ulp(m)`` the part dtype's spacing there (the subnormal
    spacing at most, below ``tiny``)::

        bits = log2(1 + max(|Re a - Re e|, |Im a - Im e|) / ulp(m))

    clipped to the part's width (32 for complex64, 64 for complex128). A relative distance, normwise,
    not part by part, for the reason error analysis of complex arithmetic is normwise (Higham, *Accuracy
    and Stability of Numerical Algorithms*, sec. 3.6: ``fl(z op w) = (z op w)(1 + d)``, ``|d|`` a few
    units roundoff): a correctly implemented product whose real part cancels (``Re(z w) = ac - bd``
    with ``ac ~ bd``) is accurate to the complex number's magnitude but not in that part, and nothing
    short of a different problem does better; a part by part metric would fail it, and every library.
    A part far below the other (near-real and near-imaginary results) is judged at the larger part's
    scale. On a real result (both imaginary parts zero) this is the real metric's ulp distance (the
    ordinal distance, up to 1 bit where the two straddle a power of two).

    Special cases (docs/architecture.md, "The error metric"): ``exact`` with a NaN part (no value:
    outside the function's domain, or a branch cut's undecided side): NaN, not judged; ``exact`` with
    an infinite part (the result overflows): 0 when ``approx`` has the same infinities in those parts
    and no NaN (its finite parts carry no weight against an infinite modulus), the width otherwise;
    ``exact`` finite and ``approx`` with a NaN or infinite part: the width.

    Args:
      approx, exact: complex64 or complex128 arrays of one dtype (broadcast like numpy).

    Returns:
      A float64 array of the broadcast shape.

    Raises:
      ValueError: the two dtypes differ, or are not complex64/complex128.

    Example:
      >>> e = np.complex64(1 + 1e-30j)  # near-real: the tiny imaginary part is judged at |Re|'s scale
      >>> complex_error_bits(np.complex64(1 + 0j), e)
      array(0.)
    """
    a, e = np.asarray(approx), np.asarray(exact)
    if a.dtype != e.dtype or a.dtype not in (np.complex64, np.complex128):
        raise ValueError(f"complex_error_bits needs one complex dtype, got {a.dtype} and {e.dtype}")
    part = np.float32 if a.dtype == np.complex64 else np.float64
    width = float(dtype_info(part).bits)
    a, e = np.broadcast_arrays(a, e)
    ar, ai, er, ei = np.real(a), np.imag(a), np.real(e), np.imag(e)
    with np.errstate(all="ignore"):
        m = np.maximum(np.abs(er), np.abs(ei))
        s = np.spacing(np.where(np.isfinite(m), m, 0).astype(part)).astype(np.float64)  # a power of two
        # Scaled by the power of two first: exact in float64 (float32 parts) or off by one rounding of
        # 2**-53 relative, far below a count of bits; an overflow here means an error beyond the width.
        d = np.maximum(np.abs(ar.astype(np.float64) / s - er.astype(np.float64) / s),
                       np.abs(ai.astype(np.float64) / s - ei.astype(np.float64) / s))
        bits = np.minimum(np.log2(1.0 + d), width)
    e_nan = np.isnan(er) | np.isnan(ei)
    e_inf = (np.isinf(er) | np.isinf(ei)) & ~e_nan
    a_finite = np.isfinite(ar) & np.isfinite(ai)
    a_nan = np.isnan(ar) | np.isnan(ai)
    inf_match = ((~np.isinf(er)) | (ar == er)) & ((~np.isinf(ei)) | (ai == ei)) & ~a_nan
    bits = np.where(e_inf, np.where(inf_match, 0.0, width), bits)
    bits = np.where(~e_inf & ~e_nan & ~a_finite, width, bits)
    bits = np.where(np.isnan(bits) & ~e_nan, width, bits)
    return np.where(e_nan, np.nan, bits)


def summarize(bits: Any) -> tuple[float, float, int]:
    """Max and mean of ``error_bits`` results, leaving out the NaNs of out-of-domain samples.

    Args:
      bits: an array-like of error bits, as ``error_bits`` returns.

    Returns:
      ``(max_bits, mean_bits, discarded)``: ``discarded`` counts the NaN entries. With nothing left
      (all NaN, or empty) max and mean are 0.0: no error was observed.

    Example:
      >>> summarize([0.0, 2.0, float("nan")])
      (2.0, 1.0, 1)
    """
    arr = np.asarray(bits, dtype=np.float64)
    nan = np.isnan(arr)
    kept = arr[~nan]
    if kept.size == 0:
        return 0.0, 0.0, int(nan.sum())
    return float(kept.max()), float(kept.mean()), int(nan.sum())
