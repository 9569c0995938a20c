"""Accuracy against cost (Herbie's Pareto output): the frontier, the most accurate candidate and the
cheapest one within :data:`CHEAPEST_WITHIN_BITS` of it, each with its jitted time.

``jst.improve``'s pick (``_choose.choose``: the cheapest candidate that fixes the program) answers "what
should I paste"; these two answer the trade-off a user weighs next: how much accuracy the search can
reach at all, and what the cheapest program nearly as accurate costs. Both are re-checked on the same
fresh samples as the pick and obey the same never-worse rule (a candidate the re-check refuses is never
offered here either); the cheapest one must also keep the most accurate one's worst case within
:data:`~pytest_jaxstab._search._choose.NEVER_WORSE_MAX_BITS` (a cheap program 1 bit worse on average
but 40 bits worse at one input is not "nearly as accurate").

The times are ``jax.jit`` latencies of one call over the re-check's points (one array per input, all
points at once), measured by ``jst.time_backends`` on every backend present, in the same run, so their
ratios are what to compare; the op-cost model (``Candidate.cost``) ranks candidates before any is timed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .._diagnostics._timing import time_backends
from .._errors import JaxstabError
from ._choose import FALLBACK_RECHECKS, NEVER_WORSE_MAX_BITS, NOISE_BITS, Rechecked
from ._result import Candidate

__all__ = ["CHEAPEST_WITHIN_BITS", "cheapest_within", "frontier", "most_accurate", "offers", "timed"]

#: How much mean error (bits, on the worse of the search's and the re-check's samples) the cheapest
#: offer may give up against the most accurate one: Herbie's "within 1 bit" of the best.
CHEAPEST_WITHIN_BITS = 1.0
# Timing budget per program and backend (seconds): enough for a stable median of a few repeats of a
# sub-millisecond call, small against the search's own seconds.
_TARGET_S = 0.05
_REPEATS = 3


def frontier(cands: Sequence[Candidate]) -> list[Candidate]:
    """The candidates no other beats on both mean error (to the noise of the samples) and cost, most
    accurate first."""
    out: list[Candidate] = []
    for c in sorted(cands, key=lambda c: (_quantize(c.mean_bits), c.cost)):
        if not out or c.cost < out[-1].cost:
            out.append(c)
    return out


def most_accurate(safe: Sequence[Candidate], checked: Callable[[Candidate], Rechecked | None],
                  pick: Rechecked) -> Rechecked:
    """The candidate with the lowest mean error on both sample sets among the most accurate few on the
    search's samples and ``pick``; means within :data:`~pytest_jaxstab._search._choose.NOISE_BITS` of the
    lowest are a tie (a difference the samples cannot tell), broken by the lower max, then the cheaper."""
    pool = sorted(safe, key=lambda c: (_quantize(c.mean_bits), c.max_bits, c.cost))[:FALLBACK_RECHECKS]
    held = [pick, *(r for r in map(checked, pool) if r is not None)]
    lowest = min(r.mean for r in held)
    return min((r for r in held if r.mean <= lowest + NOISE_BITS), key=lambda r: (r.max, r.cand.cost))


def cheapest_within(safe: Sequence[Candidate], checked: Callable[[Candidate], Rechecked | None],
                    best: Rechecked) -> Rechecked:
    """The cheapest candidate whose mean error on both sample sets is within
    :data:`CHEAPEST_WITHIN_BITS` of ``best``'s and whose max is within the never-worse slack of
    ``best``'s; ``best`` itself when none is cheaper."""
    limit = best.mean + CHEAPEST_WITHIN_BITS
    for c in sorted(safe, key=lambda c: (c.cost, _quantize(c.mean_bits))):
        if c.cost >= best.cand.cost:
            break
        if c.mean_bits > limit:
            continue
        r = checked(c)
        if r is not None and r.mean <= limit and r.max <= best.max + NEVER_WORSE_MAX_BITS:
            return r
    return best


def offers(safe: Sequence[Candidate], checked: Callable[[Candidate], Rechecked | None], pick: Rechecked,
           original: Callable[..., Any], program: Callable[[Candidate], Callable[..., Any]],
           args: Sequence[Any]) -> tuple[tuple[Rechecked, Rechecked], dict[int, dict[str, float]]]:
    """The most accurate and the cheapest-within-1-bit candidates, and the jitted times of the original
    (key 0) and of ``pick`` and those two (key ``id`` of each :class:`Rechecked`), each distinct program
    timed once, all in one run over ``args``."""
    accurate = most_accurate(safe, checked, pick)
    cheap = cheapest_within(safe, checked, accurate)
    distinct = {id(r): r for r in (pick, accurate, cheap)}
    secs = timed({0: original, **{k: program(r.cand) for k, r in distinct.items()}}, args)
    return (accurate, cheap), secs


def timed(programs: dict[Any, Callable[..., Any]], args: Sequence[Any]) -> dict[Any, dict[str, float]]:
    """Jitted seconds per call of each program over ``args``, by backend: ``{key: {backend: s}}``.

    Timed in one run with the same inputs. A program that cannot be timed (it does not compile for a
    backend) gets no figure rather than failing the search."""
    out: dict[Any, dict[str, float]] = {}
    for name, fn in programs.items():
        try:
            recs = time_backends(fn, *args, min_repeats=_REPEATS, target_s=_TARGET_S)
        except (JaxstabError, RuntimeError, ValueError, TypeError):  # a figure beside the result, not its end
            out[name] = {}
            continue
        out[name] = {r.backend: r.original_s for r in recs}
    return out


def _quantize(bits: float) -> float:
    return round(bits / NOISE_BITS) * NOISE_BITS if np.isfinite(bits) else bits
