"""The decision: which elements of a float64 interval round to one float of the target dtype.

The same test as the Arb path's ``core/_balls.round_balls``, on float64 bounds instead of a ball's
exact ends: an element is decided when both ends of its interval (rounded outward, ``_interval.ends``)
round, to nearest with ties to even, to the same float of the target format; then every real in the
interval, the exact result included, rounds to it. The conventions are ``round_balls``':

* the rounding is one step from float64 to the target (:func:`round_to_format`: integer significands
  scaled by powers of two, so no double rounding; gradual underflow below the smallest normal; ends at
  or beyond the largest float plus half an ulp round to +-inf);
* the two zeros count as one value: where both ends round to a zero, the result is -0 when both ends
  are negative, +0 when both are non-negative (an exact 0 is +0: Arb's zero is unsigned), and
  otherwise the sign of ``lo + hi`` (the midpoint's) as ``round_balls`` does with its ball's ends.
  Where the interval straddles 0 the two paths' midpoints may differ, so may that sign: the metric
  gives both zeros one ordinal;
* an exact infinity is that infinity; an undecided element is not decided (no NaN is ever decided
  here: where the exact value does not exist the Arb path says so).

float64 targets: a float64 interval cannot decide a float64 rounding unless it is a point, so only
exact results (radius 0) are decided there; the rest escalate (``evaluate`` skips the fast path when
every output is float64).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..._dtypes import dtype_info
from ._interval import Interval, ends

__all__ = ["decide", "round_to_format"]


def round_to_format(x: np.ndarray, p: int, emin: int, emax: int) -> np.ndarray:
    """Float64 values rounded to nearest (ties to even) into the binary format of ``p`` significand bits
    and normal exponents ``emin..emax``, as float64 (exactly representable there); +-inf on overflow.

    ``x = r * 2^(top - p + 1)`` with ``top`` the exponent of ``x`` (``emin`` below the normal range),
    so ``rint`` (the current rounding mode, nearest-even) on the exactly scaled significand is the one
    rounding step."""
    with np.errstate(all="ignore"):
        a = np.abs(x)
        _, e = np.frexp(a)  # a = f 2^e, f in [0.5, 1)
        top = np.maximum(e.astype(np.int64) - 1, emin)
        r = np.rint(np.ldexp(a, (p - 1 - top).astype(np.int32)))
        out = np.ldexp(r, (top - p + 1).astype(np.int32))
        largest = np.ldexp(2.0 - 2.0 ** (1 - p), emax)
        out = np.where(out > largest, np.inf, out)
        return np.copysign(out, x)


def decide(value: Interval, target: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(rounded, decided)``: each element's value in ``target`` (float16, bfloat16, float32, float64)
    where its interval decides it, and where it does (NaN in ``rounded`` elsewhere)."""
    fmt = dtype_info(target)
    mid, rad = value.mid, value.rad
    infinite = np.isinf(mid) & (rad == 0)
    if fmt.significand_bits >= 53:
        decided = (rad == 0) & ~np.isnan(mid)
        out = np.where(decided, np.where(mid == 0, 0.0, mid), np.nan)  # an exact 0 is +0
        return out.astype(fmt.dtype), decided
    lo, hi = ends(value)
    p, emin, emax = fmt.significand_bits, fmt.min_exponent, fmt.max_exponent
    rlo, rhi = round_to_format(lo, p, emin, emax), round_to_format(hi, p, emin, emax)
    with np.errstate(invalid="ignore"):
        decided = (rlo == rhi) & ~np.isnan(mid)
        zero = decided & (rlo == 0)
        negative = (lo < 0) & ((hi < 0) | (lo + hi < 0))
    out = np.where(zero, np.where(negative, -0.0, 0.0), rlo)
    out = np.where(infinite, mid, np.where(decided, out, np.nan))
    return out.astype(fmt.dtype), decided | infinite
