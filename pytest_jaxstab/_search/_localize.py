"""Pipeline step 1: where to search, chosen by local error (Herbie's localize).

The program is lowered whole (``_lower.lower_program``): elementwise operators and whole-array
reductions. Its *regions* are the largest sub-terms without a reduction that read an input: what the
search can judge per element on scalar samples. ``jst.local_error`` (``_diagnostics._local_error``)
runs on the user's function at the drawn points; the worst (user line, primitive) that maps to an
operator inside a region picks the region (the one judged) and, inside it, the sub-term rooted at that
operator (the one saturated: a smaller e-graph, and the lines that lose nothing are left as written).
Lines losing at least half as many bits as the worst count too: the sub-term searched is the smallest
holding all of them. When no line loses :data:`NARROW_BITS` or more, the largest region is searched
whole.

Not searched: the part of a program above its reductions (``jnp.sum(e) / n``: the division by the count
is kept as written), and regions that read a reduction's result.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._diagnostics._local_error import LineError, analyse
from .._errors import JaxstabError
from ._expr import OPS, Term, is_reduction, reduction_axes, size, subterms, variables
from ._lower import Sites, Unsupported

__all__ = ["NARROW_BITS", "Focus", "localize", "localize_whole", "regions"]

#: A line losing fewer bits than this on its own is not worth narrowing the search to: the whole
#: region is searched (the loss, if any, is spread over several operations).
NARROW_BITS = 4.0
#: Points per input for the local-error analysis (elements of one batch, or batches of array inputs).
_LOCAL_POINTS = 64
_MAX_BATCHES = 4
_OPAQUE = frozenset({"lt", "le", "eq", "ne", "where", "nanif"})
_PRIMITIVE = {"sum": "reduce_sum", "prod": "reduce_prod", "max": "reduce_max", "min": "reduce_min",
              "lse": "logsumexp"}


@dataclasses.dataclass(frozen=True)
class Focus:
    """What to search: ``region`` (judged per element) and ``sub`` inside it (saturated).

    ``line`` is the local error's line that chose ``sub`` (None when the whole region is searched);
    ``kinds`` the kinds of loss (cancellation, overflow, ...) of the serious lines inside ``sub``, worst
    first: they choose the rule families searched first (``_egraph.families_by_kind``).
    """

    region: Term
    sub: Term
    line: LineError | None
    kinds: tuple[str, ...] = ()

    def describe(self) -> str:
        if self.line is None:
            return ""
        where = self.line.location or "<no source location>"
        return (f"; localized: {self.line.primitive} at {where} loses up to {self.line.max_bits:.1f} bits on "
                f"its own")


def regions(term: Term) -> list[Term]:
    """The largest sub-terms of ``term`` without a reduction that read an input, left to right."""
    if not any(is_reduction(t[0]) for t in subterms(term)):
        return [term] if variables(term) and size(term) > 0 else []
    out: list[Term] = []
    for child in term[1:]:
        out.extend(regions(child))
    return out


def localize(whole: Term, sites: Sites, closed: Any, batches: Sequence[Sequence[np.ndarray]]) -> Focus:
    """The region and sub-term to search in ``whole``, from the local error of ``closed`` on ``batches``.

    Raises:
        Unsupported: ``whole`` has no elementwise region that reads an input.
    """
    regs = regions(whole)
    if not regs:
        used = sorted({_PRIMITIVE[_base(t[0])] for t in subterms(whole) if is_reduction(t[0])})
        raise Unsupported("the program has no elementwise sub-expression of its inputs to search"
                          + (f" (its operations read the result of {', '.join(used)})" if used else ""))
    default = Focus(max(regs, key=size), max(regs, key=size), None)
    try:
        lines = analyse(closed, batches).lines
    except JaxstabError:  # the oracle cannot evaluate some operation: no localisation, search whole
        return default
    # lines come ranked by where the loss is born, not by bits: the threshold is half the most bits
    serious = [x for x in lines if x.max_bits >= max(NARROW_BITS, max(y.max_bits for y in lines) / 2)]
    for line in serious:
        for region in regs:
            inside = subterms(region)
            if not _matches(sites, line, inside):
                continue
            # Every serious line inside this region (the worst's), each line by all its operations of
            # that primitive (the local error is per line: ``1 / (x - 1) - 1 / (x + 1)`` has two subs):
            # the smallest sub-term holding them all is searched. Several lines lose bits together in
            # ``sqrt(x * x + 1) - x`` (the square overflows, the difference cancels): the fix needs both.
            found = [t for other in serious for t in _matches(sites, other, inside)]
            common = [t for t in inside if all(f in subterms(t) for f in found)]
            return Focus(region, min(common, key=size), line, _kinds(sites, serious, inside))
    return default


def localize_whole(whole: Term, sites: Sites, closed: Any, batches: Sequence[Sequence[np.ndarray]]
                   ) -> Focus:
    """An array program judged whole (reductions included): the sub-term holding every serious line.

    The search then saturates that sub-term, reductions and all (``log(sum(exp(x)) / n)``), and judges
    each candidate program on whole arrays.
    """
    default = Focus(whole, whole, None)
    try:
        lines = analyse(closed, batches).lines
    except JaxstabError:
        return default
    # lines come ranked by where the loss is born, not by bits: the threshold is half the most bits
    serious = [x for x in lines if x.max_bits >= max(NARROW_BITS, max(y.max_bits for y in lines) / 2)]
    inside = subterms(whole)
    found = [t for line in serious for t in _matches(sites, line, inside)]
    if not found:
        return default
    common = [t for t in inside if all(f in subterms(t) for f in found)]
    line = next(x for x in serious if _matches(sites, x, inside))
    return Focus(whole, min(common, key=size), line, _kinds(sites, serious, inside))


def _kinds(sites: Sites, serious: list[LineError], inside: list[Term]) -> tuple[str, ...]:
    """The kinds of loss of the ``serious`` lines (worst first) that map into ``inside``, once each."""
    return tuple(dict.fromkeys(x.kind for x in serious if _matches(sites, x, inside)))


def _base(kind: str) -> str:
    parsed = reduction_axes(kind)
    return parsed[0] if parsed else kind


def _matches(sites: Sites, line: LineError, inside: list[Term]) -> list[Term]:
    return [t for t in sites.get((line.location, line.primitive), [])
            if (t[0] in OPS or is_reduction(t[0])) and t[0] not in _OPAQUE and t in inside]


def batches_for(points: Sequence[np.ndarray], shapes: Sequence[tuple[int, ...]]
                ) -> tuple[list[tuple[int, ...]], list[list[np.ndarray]]]:
    """Shapes to trace the function with for the analysis, and batches of the drawn scalar ``points``.

    Scalar inputs become vectors of up to :data:`_LOCAL_POINTS` points (when every input is a scalar,
    the function is elementwise over them); array inputs are filled with the points, cycling.
    """
    n = len(points[0]) if points else 0
    if n == 0:
        return list(shapes), []
    if all(s == () for s in shapes):
        k = min(n, _LOCAL_POINTS)
        return [(k,)] * len(shapes), [[p[:k] for p in points]]
    largest = max(math.prod(s) for s in shapes)
    count = max(1, min(_MAX_BATCHES, math.ceil(n / max(largest, 1))))
    out: list[list[np.ndarray]] = []
    for b in range(count):
        out.append([np.resize(np.roll(p, -b * largest), s).astype(p.dtype) for p, s in zip(points, shapes)])
    return list(shapes), out
