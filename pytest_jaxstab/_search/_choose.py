"""Which candidate ``jst.improve`` offers: the fix criterion first, then the cost.

Every candidate offered to this step is already never worse than the original on the search's samples.
Each is re-checked on fresh samples (``recheck``); its figures are then the worse of the two sample sets
(mean and max bits), so what the result states is what both sets show, and a candidate whose search
samples missed where it breaks is ranked by where it breaks. The choice:

1. a candidate that *fixes* the program on both sets (mean <= :data:`FIX_MEAN_BITS`, max <=
   :data:`FIX_MAX_BITS`: an overflow where the exact value is finite is far above 8 bits, and never worse
   than the original, the ``recheck``'s own test) beats every candidate that does not, however cheap;
   among those that fix it, the cheapest (then the more accurate);
2. when none does: a bounded worst case (max <= :data:`FIX_MAX_BITS`) first, then the lower mean over
   both sets (to :data:`NOISE_BITS`), then on the search's samples, the lower max, the cheaper.

A cheap candidate with a 32-bit worst case is therefore never chosen over one within 8 bits everywhere
(``log(0.5 * erfc(-x / sqrt 2))`` against ``log_ndtr(x)``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from ._result import Candidate

__all__ = ["FIX_MAX_BITS", "FIX_MEAN_BITS", "NEVER_WORSE_MAX_BITS", "NEVER_WORSE_MEAN_BITS", "Rechecked",
           "WORSE_BITS", "choose", "fixes", "safe", "worse_than"]

#: The fix criterion (issue 26, Herbie's "accurate"): mean error at most this many bits ...
FIX_MEAN_BITS = 2.0
#: ... and max error at most this many (a finite exact value returned as inf is far above it).
FIX_MAX_BITS = 8.0
#: Differences of mean error below this are noise of the samples, not accuracy.
NOISE_BITS = 0.1
#: Candidates re-checked on fresh samples when none fixes the program (each compiles once).
FALLBACK_RECHECKS = 6
#: The never-worse rule (issue 36): on the re-check's fresh samples, with every point counted as it is
#: (none excused by the stability lens: what an independent measure of the offer sees), a candidate's
#: mean error may exceed the original's by at most this (:data:`NOISE_BITS`: below it, a difference of
#: means is noise of the samples) ...
NEVER_WORSE_MEAN_BITS = NOISE_BITS
#: ... and its max error by at most this: the rounding noise of a few more operations where the original
#: happens to be correctly rounded at its worst point (3 ulps = 2 bits), the per-point slack of the search.
NEVER_WORSE_MAX_BITS = 2.0


@dataclasses.dataclass(frozen=True)
class Rechecked:
    """A candidate that held up on fresh samples: its figures on them, and the worse of both sets."""

    cand: Candidate
    fresh_mean: float
    fresh_max: float
    excused: np.ndarray

    @property
    def mean(self) -> float:
        return max(self.cand.mean_bits, self.fresh_mean)

    @property
    def max(self) -> float:
        return max(self.cand.max_bits, self.fresh_max)

    @property
    def overall(self) -> float:
        """The mean over both sets (of equal size): what ranks candidates that do not fix the program."""
        return 0.5 * (self.cand.mean_bits + self.fresh_mean)


def fixes(mean: float, mx: float) -> bool:
    """Whether mean and max bits meet the fix criterion."""
    return bool(mean <= FIX_MEAN_BITS and mx <= FIX_MAX_BITS)


#: Rounding noise allowed per sample: a rewrite with a few more operations may lose up to this much
#: where the original happens to be correctly rounded (1 ulp = 1 bit, 3 ulps = 2 bits).
WORSE_BITS = 2.0


def safe(cand: np.ndarray, orig: np.ndarray, mantissa_bits: int) -> bool:
    """Whether errors ``cand`` are safe against the original's ``orig`` on the same points: better on
    average, no worse at the worst, and nowhere worse by more than :data:`WORSE_BITS`, except at points
    where the candidate is still within :data:`FIX_MAX_BITS` (accurate by the fix criterion's own worst
    case: a series a few ulps from exact where the original happened to be correctly rounded) or where the
    original has no correct bit (``mantissa_bits`` bits or more: off by a factor of 2, nothing to lose).
    With 512 fresh points, a rule without those exceptions refused ``(x - sin x) / (x - tan x)``'s 0.5-bit
    regime for 2.8 bits at a point where the original (48 bits mean) was exact."""
    ok = ~np.isnan(orig)
    if not ok.any():
        return False
    c, o = np.nan_to_num(cand[ok], nan=64.0), orig[ok]
    worse = (c > o + WORSE_BITS) & (c > FIX_MAX_BITS) & (o < mantissa_bits)
    return bool(c.mean() < o.mean() - 0.05 and c.max() <= o.max() and not worse.any())


def worse_than(cand: np.ndarray, orig: np.ndarray, *, mean: bool = True) -> str | None:
    """Why errors ``cand`` are worse than the original's ``orig`` at the same points (NaN: a point that
    does not count), by the never-worse rule; None when they are not. A candidate with no value where
    the original has one counts 64 bits there. ``mean=False`` judges the max only (a stratum drawn by
    value, where a rewrite that is far better elsewhere may cost the rounding of its few more operations
    on average: ``x / (sqrt(1 + x) + 1)`` is 0.5 bits where ``sqrt(1 + x) - 1`` is exact at huge x)."""
    ok = ~np.isnan(orig)
    if not ok.any():
        return "no point to judge it on"
    c, o = np.nan_to_num(cand[ok], nan=64.0), orig[ok]
    if mean and c.mean() > o.mean() + NEVER_WORSE_MEAN_BITS:
        return f"mean {c.mean():.2f} bits against the original's {o.mean():.2f}"
    if c.max() > o.max() + NEVER_WORSE_MAX_BITS:
        return f"max {c.max():.2f} bits against the original's {o.max():.2f}"
    return None


def _quantize(bits: float) -> float:
    return round(bits / NOISE_BITS) * NOISE_BITS if np.isfinite(bits) else bits


def choose(safe: list[Candidate], recheck: Callable[[Candidate], Rechecked | None]) -> Rechecked | None:
    """The candidate to offer among ``safe`` (never worse on the search's samples), or None when none
    holds up on fresh samples. ``recheck`` judges one on fresh samples: None when it is worse than the
    original there (or cannot be evaluated)."""
    done: dict[int, Rechecked | None] = {}

    def checked(c: Candidate) -> Rechecked | None:
        if id(c) not in done:
            done[id(c)] = recheck(c)
        return done[id(c)]

    # 1. The cheapest that fixes the program on both sets: try those fixing it on the search's, cheapest
    # first; the first that still does on fresh samples is the cheapest of all that do.
    for c in sorted((c for c in safe if fixes(c.mean_bits, c.max_bits)),
                    key=lambda c: (c.cost, _quantize(c.mean_bits), c.max_bits)):
        r = checked(c)
        if r is not None and fixes(r.mean, r.max):
            return r
    # 2. None does: the most accurate few, a bounded worst case first.
    pool = sorted(safe, key=lambda c: (_quantize(c.mean_bits), c.cost))
    for c in pool[:FALLBACK_RECHECKS]:
        checked(c)
    held = [r for r in done.values() if r is not None]
    if not held:  # the most accurate failed on fresh samples: the rest, in order, until one holds
        for c in pool[FALLBACK_RECHECKS:]:
            r = checked(c)
            if r is not None:
                return r
        return None
    return min(held, key=lambda r: (r.max > FIX_MAX_BITS, _quantize(r.overall), _quantize(r.cand.mean_bits),
                                    r.max, r.cand.cost))
