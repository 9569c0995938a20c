"""Array draws: element draws as `floats`, plus whole-array shapes of trouble, and related argument tuples."""

from __future__ import annotations

import math
import operator
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from hypothesis import strategies as st

from .._dtypes import from_ordinal, is_complex_dtype
from .._errors import ArgumentError, ArgumentTypeError
from ._classes import CLASSES, Header, clamp, independent
from ._complex import ComplexPlan, combine
from ._domain import Domain, DomainLike, per_argument_domains
from ._floats import Sampler, index
from ._related import derive
from ._rows import ROW_CLASSES, batched
from ._source import source_of

__all__ = ["arguments", "arrays"]

# Elements drawn one by one at most, per array; a larger array repeats its drawn block cyclically
# (np.resize), so a test over a (1000,) array costs no more Hypothesis choices than one over (64,).
MAX_DRAWN = 64
# Elements drawn one by one at most over all the arguments of `arguments`: Hypothesis gives up on examples
# that need more than 8 KiB of choices, and one float64 element takes about 30 bytes.
MAX_DRAWN_TOTAL = 128
#: Callables `observer(class_name, values)` told of every array class or argument relation drawn (the
#: statistics hook of the tests and of `benchmarks/bench_harness.py`); empty in normal use.
DRAW_OBSERVERS: list[Callable[[str, np.ndarray], None]] = []
#: Seconds spent inside `arguments` draws since import (this module's code plus Hypothesis recording the
#: choices it makes), summed over every thread: `jst.check` reads it around its exploration to split
#: its `draw` stage into the strategy's share and Hypothesis's engine's.
DRAW_SECONDS = [0.0]


def _normalize_shape(shape: Any) -> tuple[int, ...]:
    if isinstance(shape, int | np.integer):
        shape = (shape,)
    try:
        dims = tuple(operator.index(d) for d in shape)
    except TypeError as exc:
        raise ArgumentTypeError(f"shape={shape!r}: expected an int or a tuple of ints, e.g. (8, 4)") from exc
    if any(d < 0 for d in dims):
        raise ArgumentError(f"shape={shape!r}: a negative dimension; dimensions are ints >= 0")
    return dims


class _ArrayPlan:
    """One dtype, domain and shape: the classes of arrays that apply, and how each is drawn."""

    def __init__(self, sampler: Sampler, shape: tuple[int, ...], max_drawn: int = MAX_DRAWN) -> None:
        self.sampler = sampler
        self.shape = shape
        self.size = math.prod(shape)
        self.drawn = min(self.size, max_drawn)
        # Class 0 draws element by element (the form shrinking prefers); the bulk classes follow, each
        # taking `weight` slots of the class choice.
        self.class_names = ["independent"]
        self.slots: list[tuple[str, Any, int]] = [("independent", None, 0)]
        for name, fn, least, both_signs, weight, header_bytes in CLASSES:
            if self.drawn >= least and (len(sampler.sides) == 2 or not both_signs):
                self.class_names.append(name)
                self.slots += [(name, fn, header_bytes)] * weight
        # A batched array (rank 2 or more, larger than the drawn block) also draws rows of their own.
        if batched(self):
            for name, fn, weight, header_bytes in ROW_CLASSES:
                self.class_names.append(name)
                self.slots += [(name, fn, header_bytes)] * weight
        self.elements = sampler.strategy()

    def draw(self, draw: st.DrawFn) -> np.ndarray:
        if self.size == 0:
            return np.zeros(self.shape, dtype=self.sampler.info.dtype)
        name, pattern, header_bytes = self.slots[index(draw, len(self.slots))]
        if pattern is None:
            ordinals = independent(self, draw)
        else:
            ordinals = pattern(self, draw, Header(draw, header_bytes))
        drawn = from_ordinal(clamp(self, ordinals), self.sampler.info.name)
        for observer in DRAW_OBSERVERS:
            observer(name, drawn)
        if drawn.size != self.size:
            drawn = np.resize(drawn, self.size)
        return self.repair(draw, drawn.reshape(self.shape))

    def repair(self, draw: st.DrawFn, array: np.ndarray) -> np.ndarray:
        """Replaces the elements outside the domain (interval or predicate) with fresh element draws.

        Every class clamps to the domain's interval already; the interval is checked again only when
        the domain holds non-finite values (whose ordinals the classes do not produce)."""
        flat = array.reshape(-1)
        resolved, where = self.sampler.resolved, self.sampler.domain.where
        if where is None and not (resolved.nan or resolved.pos_inf or resolved.neg_inf):
            return array
        bad = ~resolved.contains(flat)
        if where is not None:
            bad |= ~np.fromiter((self.sampler.accepts(v) for v in flat), dtype=bool, count=flat.size)
        source = source_of(draw)
        for position in np.flatnonzero(bad):
            flat[position] = draw(self.elements) if source is None else source.element(self)
        if source is not None:
            source.repaired()
        return flat.reshape(array.shape)


@st.composite
def _arrays(draw: st.DrawFn, plan: _ArrayPlan) -> np.ndarray:
    return plan.draw(draw)


def arrays(
    dtype: Any, shape: int | Sequence[int], *, domain: DomainLike | Domain = None
) -> st.SearchStrategy[np.ndarray]:
    """Hypothesis strategy for numpy arrays of a float dtype: the shapes users' data and numerics take.

    Each draw is one class (every class appears in a run of a couple of hundred examples): independent
    elements (bit patterns uniform over the domain, specials one in four; the class shrinking prefers),
    a per-element spread over the binades (uniform, evenly spanning, or alternating signs), an offset at
    any binade plus relative noise from 2^-1 down to 2^-(significand + 10), constant arrays, values
    uniform in linear scale, one dominant element with the rest 8 to 60 binades below it (in magnitude
    or in exp-space, as logsumexp sees it) or one huge value among values near 1, near-ties around the
    maximum or values a few ulps apart, and (when the domain has both signs) sign-cancelling pairs and
    sums. Every element lies in `domain` and is a finite value of the dtype; elements the predicate
    rejects are redrawn as `floats` draws. Arrays with more than 64 elements repeat a drawn block of 64
    cyclically; a batched one (rank 2 or more) also draws rows of their own, every element drawn: a
    clustered row among ordinary ones, a dominant element in each row, rows at very different
    magnitudes, or each row its own class (`strategies/_rows.py`). Failing examples shrink towards the
    float where a failure starts (per element, or the offset of a clustered class).

    Args:
        dtype: "float16", "bfloat16", "float32", "float64" or an equivalent numpy/jax dtype; or
            "complex64"/"complex128", whose two parts are drawn together by the complex classes (polar,
            near-real, near-imaginary, diagonal, unit circle, both parts as real arrays; see
            `strategies/_complex.py`), `domain` applying to each part.
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
    if is_complex_dtype(dtype):
        return _arguments(plans_for(dtype, [shape], domain)).map(lambda parts: combine(*parts))
    return _arrays(_ArrayPlan(Sampler(dtype, domain), _normalize_shape(shape)))


@st.composite
def _arguments(draw: st.DrawFn, plans: list[_ArrayPlan]) -> tuple[np.ndarray, ...]:
    started = time.perf_counter()
    try:
        return _draw_arguments(draw, plans)
    finally:
        DRAW_SECONDS[0] += time.perf_counter() - started


def _broadcasts(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    return a == b or all(x == y or x == 1 or y == 1 for x, y in zip(reversed(a), reversed(b)))


def _draw_arguments(draw: st.DrawFn, plans: Sequence[Any]) -> tuple[np.ndarray, ...]:
    """The arguments' arrays; a complex argument (`ComplexPlan`) gives two, its real and imaginary
    parts (`arguments` combines them; a check judges the parts as the function's real inputs)."""
    drawn: list[np.ndarray] = []
    pairs: list[tuple[np.ndarray, np.ndarray]] = []
    for plan in plans:
        if isinstance(plan, ComplexPlan):
            pair = plan.draw_parts(draw, pairs, DRAW_OBSERVERS)
            pairs.append(pair)
            drawn.extend(pair)
            continue
        # The earlier arguments this one can be derived from (their shapes broadcast with its own).
        sources = [x for x in drawn if x.size and _broadcasts(x.shape, plan.shape)] if plan.size else []
        derived = derive(plan, draw, sources) if sources else None
        if derived is None:
            drawn.append(plan.draw(draw))
            continue
        name, values = derived
        for observer in DRAW_OBSERVERS:
            observer(name, values)
        drawn.append(plan.repair(draw, values.reshape(plan.shape).copy()))
    return tuple(drawn)


def arguments(
    dtype: Any,
    shapes: Sequence[int | Sequence[int]],
    *,
    domain: DomainLike | Domain | Sequence[DomainLike | Domain] | dict[int, DomainLike | Domain] = None,
) -> st.SearchStrategy[tuple[np.ndarray, ...]]:
    """Hypothesis strategy for the array arguments of one function, drawn together as a tuple.

    Each argument is drawn as by `arrays`, or, about three times in four when an earlier argument's shape
    broadcasts with its own, derived from that argument: equal (x, x), negated (x, -x), a few ulps away
    (x, nextafter(x)), plus the dtype's tiny, x (1 + noise) and -x (1 + noise) with relative noise
    from 2^-1 down to 2^-(significand + 10), or x scaled by 2^-k or 2^k, k from 8 to 60 (x >> y, x << y).
    Broadcasting pairs element with element (shapes (3, 4) and (4,) relate row 0 of the first with the
    second). Derived values are clamped to the argument's own domain, and those its predicate rejects
    are redrawn, so every argument stays inside its domain. At most 128 elements are drawn over all
    arguments (64 per argument); larger arguments repeat their drawn block cyclically, as in `arrays`.

    Args:
        dtype: "float16", "bfloat16", "float32", "float64" or an equivalent numpy/jax dtype; or
            "complex64"/"complex128" (as for `arrays`; a later complex argument may also be equal to,
            the conjugate or negation of, or close to an earlier one).
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
    if is_complex_dtype(dtype):
        return _arguments(plans_for(dtype, shapes, domain)).map(
            lambda parts: tuple(combine(parts[i], parts[i + 1]) for i in range(0, len(parts), 2)))
    return _arguments(plans_for(dtype, shapes, domain))


def plans_for(dtype: Any, shapes: Sequence[int | Sequence[int]], domain: Any) -> list[Any]:
    """One `_ArrayPlan` per argument of `arguments` (the elements drawn one by one shared among them);
    one `ComplexPlan` per argument for complex64/complex128 (strategies/_complex.py)."""
    normalized = [_normalize_shape(shape) for shape in shapes]
    domains = per_argument_domains(domain, len(normalized))
    if is_complex_dtype(dtype):  # two parts per argument share the budget
        budget = min(MAX_DRAWN, max(4, MAX_DRAWN_TOTAL // max(1, 2 * len(normalized))))
        return [ComplexPlan(dtype, shape, dom, budget, _ArrayPlan) for dom, shape in zip(domains, normalized)]
    budget = min(MAX_DRAWN, max(4, MAX_DRAWN_TOTAL // max(1, len(normalized))))
    return [_ArrayPlan(Sampler(dtype, dom), shape, budget) for dom, shape in zip(domains, normalized)]
