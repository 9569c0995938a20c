"""Array draws: element draws as `floats`, plus whole-array shapes of trouble, and related argument tuples."""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from hypothesis import strategies as st

from .._dtypes import DtypeInfo, from_ordinal, to_ordinal
from ._domain import Domain, DomainLike, per_argument_domains
from ._floats import Sampler, Side, index

__all__ = ["arguments", "arrays"]

# Elements drawn one by one at most, per array; a larger array repeats its drawn block cyclically
# (np.resize), so a test over a (1000,) array costs no more Hypothesis choices than one over (64,).
MAX_DRAWN = 64
# Elements drawn one by one at most over all the arguments of `arguments`: Hypothesis gives up on examples
# that need more than 8 KiB of choices, and one float64 element takes about 30 bytes.
MAX_DRAWN_TOTAL = 128
# Largest ulp distance of the "all near one large value" pattern.
_NEAR_ULPS = 8


def _normalize_shape(shape: Any) -> tuple[int, ...]:
    if isinstance(shape, int | np.integer):
        shape = (shape,)
    try:
        dims = tuple(operator.index(d) for d in shape)
    except TypeError as exc:
        raise TypeError(f"shape must be an int or a tuple of ints, got {shape!r}") from exc
    if any(d < 0 for d in dims):
        raise ValueError(f"shape {shape!r} has a negative dimension")
    return dims


class _ArrayPlan:
    """One dtype, domain and shape: which trouble patterns apply and the binades they draw from."""

    def __init__(self, sampler: Sampler, shape: tuple[int, ...], max_drawn: int = MAX_DRAWN) -> None:
        self.sampler = sampler
        self.shape = shape
        self.size = math.prod(shape)
        self.drawn = min(self.size, max_drawn)
        patterns: list[Callable[[st.DrawFn], list[Any]]] = [self._independent]
        if self.drawn >= 2:
            patterns += [self._all_equal, self._near_large, self._one_huge, self._spanning]
            if len(sampler.sides) == 2:
                patterns.append(self._alternating)
        self.patterns = patterns
        self.elements = sampler.strategy()

    @staticmethod
    def _large(side: Side) -> tuple[int, int]:
        """The side's top sixteenth of binades."""
        return max(0, side.count - max(1, side.count // 16)), side.count - 1

    def _small(self, side: Side) -> tuple[int, int]:
        """The side's binades nearest magnitude 1, a sixteenth of them."""
        one = int(to_ordinal(1.0, self.sampler.info.dtype))
        centre = min(max(side.index_of(one), 0), side.count - 1)
        half = max(1, side.count // 32)
        return max(0, centre - half), min(side.count - 1, centre + half)

    def _independent(self, draw: st.DrawFn) -> list[Any]:
        return [draw(self.elements) for _ in range(self.drawn)]

    def _all_equal(self, draw: st.DrawFn) -> list[Any]:
        return [draw(self.elements)] * self.drawn

    def _near_large(self, draw: st.DrawFn) -> list[Any]:
        # Cancellation: every element within a few ulps of one large value of the domain.
        side = self.sampler.draw_side(draw)
        base = int(to_ordinal(self.sampler.draw_in(draw, side, *self._large(side)), self.sampler.info.dtype))
        lo, hi = self.sampler.resolved.lo_ord, self.sampler.resolved.hi_ord
        offsets = [index(draw, 2 * _NEAR_ULPS + 1) for _ in range(self.drawn)]
        # 0, 1, 2, 3, ... -> 0, +1, -1, +2, ...: shrinking moves towards the base value.
        ordinals = [min(max(base + (k + 1) // 2 * (1 if k % 2 else -1), lo), hi) for k in offsets]
        return list(from_ordinal(np.asarray(ordinals, dtype=np.int64), self.sampler.info.dtype))

    def _one_huge(self, draw: st.DrawFn) -> list[Any]:
        sampler = self.sampler
        values = []
        for _ in range(self.drawn):
            side = sampler.draw_side(draw)
            values.append(sampler.draw_in(draw, side, *self._small(side)))
        side = sampler.draw_side(draw)
        values[index(draw, self.drawn)] = sampler.draw_in(draw, side, *self._large(side))
        return values

    def _spanning(self, draw: st.DrawFn) -> list[Any]:
        # Magnitudes from the domain's smallest binade to its largest, evenly spaced, in a drawn order.
        values = []
        for i in range(self.drawn):
            side = self.sampler.draw_side(draw)
            binade = round(i * (side.count - 1) / (self.drawn - 1))
            values.append(self.sampler.draw_in(draw, side, binade, binade))
        order = draw(st.permutations(range(self.drawn)))
        return [values[i] for i in order]

    def _alternating(self, draw: st.DrawFn) -> list[Any]:
        sides = self.sampler.sides
        return [self.sampler.draw_in(draw, sides[i % 2]) for i in range(self.drawn)]

    def draw(self, draw: st.DrawFn) -> np.ndarray:
        if self.size == 0:
            return np.zeros(self.shape, dtype=self.sampler.info.dtype)
        pattern = self.patterns[index(draw, len(self.patterns))]
        block = np.asarray(pattern(draw), dtype=self.sampler.info.dtype)
        return self.repair(draw, np.resize(block, self.size).reshape(self.shape))

    def repair(self, draw: st.DrawFn, array: np.ndarray) -> np.ndarray:
        """Replaces the elements outside the domain (interval or predicate) with fresh element draws."""
        flat = array.reshape(-1)
        bad = ~self.sampler.resolved.contains(flat)
        if self.sampler.domain.where is not None:
            bad |= ~np.fromiter((self.sampler.accepts(v) for v in flat), dtype=bool, count=flat.size)
        for position in np.flatnonzero(bad):
            flat[position] = draw(self.elements)
        return flat.reshape(array.shape)


@st.composite
def _arrays(draw: st.DrawFn, plan: _ArrayPlan) -> np.ndarray:
    return plan.draw(draw)


def arrays(
    dtype: Any, shape: int | Sequence[int], *, domain: DomainLike | Domain = None
) -> st.SearchStrategy[np.ndarray]:
    """Hypothesis strategy for numpy arrays of a float dtype, element draws as `floats` plus trouble shapes.

    Each draw is one of: independent elements (as `floats`; the pattern shrinking prefers), all elements
    equal, all within a few ulps of one large value (cancellation), one huge element among values near 1,
    magnitudes evenly spanning the domain's binades from smallest to largest, or alternating signs (when
    the domain has both). Elements outside the domain's predicate are redrawn as `floats` draws, so every
    element lies in `domain`. Arrays with more than 64 elements repeat a drawn block of 64 cyclically.

    Args:
        dtype: "float16", "bfloat16", "float32", "float64" or an equivalent numpy/jax dtype.
        shape: an int or a tuple of ints; `()` gives a 0-d array.
        domain: as for `floats`, applied to every element.

    Returns:
        A strategy of numpy arrays of `dtype` and `shape`.

    Raises:
        ValueError: for an unsupported dtype, a negative dimension, or an empty domain.

    Example:
        >>> import numpy as np
        >>> from hypothesis import given
        >>> @given(arrays("float32", (16,), domain=(-1e4, 1e4)))
        ... def test_logsumexp(x):
        ...     assert np.isfinite(np.log(np.sum(np.exp(x - x.max()))))
    """
    return _arrays(_ArrayPlan(Sampler(dtype, domain), _normalize_shape(shape)))


def _project(x: np.ndarray, shape: tuple[int, ...]) -> np.ndarray | None:
    """An array of `shape` whose elements broadcast against `x`'s equal `x`'s, or None if incompatible."""
    try:
        common = np.broadcast_shapes(x.shape, shape)
    except ValueError:
        return None
    full = np.broadcast_to(x, common)
    extra = len(common) - len(shape)
    selector = (0,) * extra + tuple(
        slice(None) if want == have else slice(0, 1) for want, have in zip(shape, common[extra:])
    )
    return np.array(full[selector], copy=True).reshape(shape)


def _ulps_away(x: np.ndarray, steps: int) -> np.ndarray:
    finite = np.isfinite(x)
    moved = from_ordinal(to_ordinal(np.where(finite, x, 0), x.dtype) + steps, x.dtype)
    return np.where(finite, moved, x)


# How argument j may be derived from an earlier argument x: (x, x), (x, -x), (x, nextafter(x)), ...
_RELATIONS: tuple[Callable[[np.ndarray, DtypeInfo], np.ndarray], ...] = (
    lambda x, info: x,
    lambda x, info: -x,
    lambda x, info: _ulps_away(x, 1),
    lambda x, info: _ulps_away(x, -1),
    lambda x, info: x + info.tiny,
    lambda x, info: _ulps_away(x, 4),
)


@st.composite
def _arguments(draw: st.DrawFn, plans: list[_ArrayPlan]) -> tuple[np.ndarray, ...]:
    drawn: list[np.ndarray] = []
    for plan in plans:
        sources = [p for p in (_project(x, plan.shape) for x in drawn if x.size) if p is not None]
        # Half the time derive from an earlier argument; shrinking prefers drawing independently.
        if not (sources and plan.size and draw(st.booleans())):
            drawn.append(plan.draw(draw))
            continue
        source = sources[index(draw, len(sources))]
        relation = _RELATIONS[index(draw, len(_RELATIONS))]
        with np.errstate(all="ignore"):
            derived = np.asarray(relation(source, plan.sampler.info), dtype=plan.sampler.info.dtype)
        drawn.append(plan.repair(draw, derived.reshape(plan.shape).copy()))
    return tuple(drawn)


def arguments(
    dtype: Any,
    shapes: Sequence[int | Sequence[int]],
    *,
    domain: DomainLike | Domain | Sequence[DomainLike | Domain] | dict[int, DomainLike | Domain] = None,
) -> st.SearchStrategy[tuple[np.ndarray, ...]]:
    """Hypothesis strategy for the array arguments of one function, drawn together as a tuple.

    Each argument is drawn as by `arrays`, or, half the time when an earlier argument's shape broadcasts
    with its own, derived from that argument: equal (x, x), negated (x, -x), one ulp up or down
    (x, nextafter(x)), plus the dtype's tiny (x, x + tiny), or 4 ulps up. Broadcasting pairs element
    with element (shapes (3, 4) and (4,) relate row 0 of the first with the second). Derived elements that
    leave the argument's domain are redrawn, so every argument stays inside its domain. At most 128
    elements are drawn one by one over all arguments (64 per argument); larger arguments repeat their
    drawn block cyclically, as in `arrays`.

    Args:
        dtype: "float16", "bfloat16", "float32", "float64" or an equivalent numpy/jax dtype.
        shapes: one shape per argument (an int or a tuple; `()` gives a 0-d array).
        domain: one domain for all arguments (anything `floats` accepts), a sequence with one per
            argument, or a dict from argument position to domain (missing positions are unconstrained).
            A pair of numbers is always one `(lo, hi)` for every argument.
            For preconditions relating several arguments, filter the tuple: `arguments(...).filter(...)`.

    Returns:
        A strategy of tuples of numpy arrays, one per shape.

    Raises:
        ValueError: for an unsupported dtype, a bad shape, an empty domain, or domains that do not
            match the number of shapes.

    Example:
        >>> import numpy as np
        >>> from hypothesis import given
        >>> @given(arguments("float32", [(8,), (8,)], domain=[(-1, 1), Domain(0, 10, open_lo=True)]))
        ... def test_div(args):
        ...     x, y = args
        ...     assert np.all(np.isfinite(x / y))
    """
    normalized = [_normalize_shape(shape) for shape in shapes]
    domains = per_argument_domains(domain, len(normalized))
    budget = min(MAX_DRAWN, max(4, MAX_DRAWN_TOTAL // max(1, len(normalized))))
    plans = [_ArrayPlan(Sampler(dtype, dom), shape, budget) for dom, shape in zip(domains, normalized)]
    return _arguments(plans)
