"""Related arguments: argument j drawn from an earlier one, as functions of several arguments meet them.

x ~= y (relative noise 2^-1 down to 2^-(significand + 10)), x ~= -y, x >> y and x << y (8 to 60 binades
apart), the same array twice, its negation, a few ulps away, x's pairs turned a quarter (x·y cancels
pair by pair), and broadcast partners (a (4,) argument
related to row 0 of an earlier (3, 4) one). Every relation is ordinal arithmetic clamped to the derived
argument's own domain, so it never leaves that domain's interval nor the dtype's finite range.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from hypothesis import strategies as st

from .._dtypes import from_ordinal, to_ordinal
from ._classes import Header, clamp, far_binades, noise_level, noise_ordinals, values_to_ordinals
from ._floats import index
from ._plan import ArrayPlan

__all__ = ["RELATIONS", "derive", "project"]

# Slots of the relation choice: "independent" two, "approx" two, the others one each: about one
# argument in four is drawn on its own (the form shrinking prefers, slot 0), the rest derived.
_INDEPENDENT_SLOTS = 2


def project(x: np.ndarray, shape: tuple[int, ...]) -> np.ndarray | None:
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


def _same(plan: ArrayPlan, header: Header, ords: np.ndarray) -> np.ndarray:
    return ords


def _negated(plan: ArrayPlan, header: Header, ords: np.ndarray) -> np.ndarray:
    return -ords


def _ulps(plan: ArrayPlan, header: Header, ords: np.ndarray) -> np.ndarray:
    """One ulp up or down (nextafter), four up or down, or plus the dtype's smallest normal."""
    step = header.below(5)
    if step == 4:
        values = from_ordinal(ords, plan.sampler.info.dtype).astype(np.float64)
        return values_to_ordinals(plan, values + float(plan.sampler.info.tiny))
    return ords + (1, -1, 4, -4)[step]


def _approx(plan: ArrayPlan, header: Header, ords: np.ndarray) -> np.ndarray:
    """x (1 + noise), the noise's level from 2^-1 down to 2^-(significand + 10)."""
    info = plan.sampler.info
    level = noise_level(header, info.significand_bits)
    return ords + noise_ordinals(header.rng(), ords.size, level, info.mantissa_bits).reshape(ords.shape)


def _approx_negated(plan: ArrayPlan, header: Header, ords: np.ndarray) -> np.ndarray:
    return -_approx(plan, header, ords)


def _scaled(plan: ArrayPlan, header: Header, ords: np.ndarray) -> np.ndarray:
    """x * 2^-k (x >> y) or x * 2^k (x << y), k from 8 to 60 binades, half the time negated (a label
    times a logit of the other sign: -y z large and positive); magnitudes stop at 0 and at max."""
    up = header.below(2) == 1
    sign = 1 - 2 * header.below(2)
    shift = far_binades(header) << plan.sampler.info.mantissa_bits
    top = plan.sampler.info.max_ordinal
    # Saturating in int64: |ords| + shift can pass 2^63 near float64's max ordinal, which wraps
    # silently on arrays (a huge x << y became 0) and warns on 0-d ones. min(m, top - shift) + shift
    # is min(m + shift, top) with no intermediate past top; max(m, shift) - shift is max(m - shift, 0).
    magnitude = np.abs(np.asarray(ords, dtype=np.int64))
    if up:
        magnitude = np.minimum(magnitude, top - shift) + shift
    else:
        magnitude = np.maximum(magnitude, shift) - shift
    return sign * np.sign(ords) * magnitude


def _rotated(plan: ArrayPlan, header: Header, ords: np.ndarray) -> np.ndarray:
    """Pairs of elements turned a quarter: (x0, x1, x2, x3, ...) -> (x1, -x0, x3, -x2, ...) times
    (1 + noise), so that sum(x * y) cancels pair by pair: a dot product, a cosine or a covariance
    whose partial sums cancel (exactly 0 without noise, rounding noise as computed). An odd last
    element is kept."""
    flat = np.asarray(ords, dtype=np.int64).reshape(-1).copy()
    pairs = flat.size // 2 * 2
    turned = flat.copy()
    turned[0:pairs:2], turned[1:pairs:2] = flat[1:pairs:2], -flat[0:pairs:2]
    return _approx(plan, header, turned.reshape(np.shape(ords)))


#: name -> how argument j is derived from an earlier argument's ordinals (projected to j's shape).
RELATIONS: dict[str, Callable[[ArrayPlan, Header, np.ndarray], np.ndarray]] = {
    "same": _same,
    "negated": _negated,
    "ulps": _ulps,
    "approx": _approx,
    "approx_negated": _approx_negated,
    "scaled": _scaled,
    "rotated": _rotated,
}
_SLOTS: tuple[str | None, ...] = (None,) * _INDEPENDENT_SLOTS + ("approx",) + tuple(RELATIONS)


def derive(plan: ArrayPlan, draw: st.DrawFn, sources: list[np.ndarray]) -> tuple[str, np.ndarray] | None:
    """Argument values derived from one of `sources` (earlier arguments whose shapes broadcast with the
    plan's), and the relation's name; None when the argument is to be drawn on its own."""
    name = _SLOTS[index(draw, len(_SLOTS))] if sources else None
    if name is None:
        return None
    source = sources[index(draw, len(sources))]
    if source.shape != plan.shape:
        projected = project(source, plan.shape)
        assert projected is not None  # the caller passes broadcasting sources only
        source = projected
    info = plan.sampler.info
    source = np.asarray(source, dtype=info.dtype)
    finite = np.isfinite(source)
    everywhere = bool(finite.all())  # the common case: no masking
    ords = to_ordinal(source if everywhere else np.where(finite, source, 0), info.dtype)
    derived = from_ordinal(clamp(plan, RELATIONS[name](plan, Header(draw, 12), ords)), info.name)
    return name, derived if everywhere else np.where(finite, derived, source).astype(info.dtype)
