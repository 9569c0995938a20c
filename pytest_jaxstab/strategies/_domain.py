"""Input domains (FPBench-style preconditions): an interval, open or closed at each end, plus a predicate."""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeAlias, cast

import numpy as np

from .._dtypes import DtypeInfo, from_ordinal, to_ordinal
from .._errors import ArgumentError, ArgumentTypeError

__all__ = ["Domain", "DomainLike", "ResolvedDomain", "as_domain", "per_argument_domains"]


@dataclasses.dataclass(frozen=True)
class Domain:
    """The set of inputs a function is meant for: the interval from `lo` to `hi`, filtered by `where`.

    Bounds are closed unless `open_lo` / `open_hi` say otherwise. Bounds beyond a dtype's range are
    clipped to it, and a bound that is not representable in the dtype is rounded inwards, so every drawn
    value satisfies `lo <= x <= hi` (strictly, at an open end) exactly.

    NaN and ±inf are never drawn by default, even when a bound is infinite: an infinite bound means
    "unbounded". `allow_infinity=True` adds +inf when `hi` is +inf and -inf when `lo` is -inf (unless
    that end is open); `allow_nan=True` adds NaN. The finite part of the domain may never be empty.

    `where` is a predicate for everything an interval cannot say (`x != 0`, `x % 1 != 0`). It receives one
    numpy scalar of the dtype and returns something truthy; strategies apply it with Hypothesis's
    `.filter`, so values it rejects are redrawn a few times and then the example is discarded. A predicate
    that rejects most of the interval makes Hypothesis's `filter_too_much` health check fail: that is the
    intended signal to narrow the interval instead.

    Args:
        lo, hi: the bounds; None means unbounded. Anything `float()` accepts.
        open_lo, open_hi: exclude the bound itself.
        where: optional predicate over one scalar.
        allow_nan, allow_infinity: see above.

    Raises:
        ValueError: a NaN bound, `lo > hi`, or `lo == hi` with an open end (an empty domain). Emptiness
            that depends on the dtype (no representable float strictly between two bounds, or no finite
            value of the dtype in the interval) is raised when a strategy is built.

    Example:
        >>> unit = Domain(0.0, 1.0, open_lo=True)  # (0, 1]
        >>> nonzero = Domain(-10, 10, where=lambda x: x != 0)
    """

    lo: float | None = None
    hi: float | None = None
    open_lo: bool = False
    open_hi: bool = False
    where: Callable[[Any], Any] | None = None
    allow_nan: bool = False
    allow_infinity: bool = False

    def __post_init__(self) -> None:
        lo = -math.inf if self.lo is None else _to_float(self.lo, "lo")
        hi = math.inf if self.hi is None else _to_float(self.hi, "hi")
        object.__setattr__(self, "lo", lo)
        object.__setattr__(self, "hi", hi)
        if self.where is not None and not callable(self.where):
            raise ArgumentTypeError(f"Domain(where={self.where!r}): expected a predicate (callable) or None")
        if lo > hi or (lo == hi and (self.open_lo or self.open_hi)):
            raise ArgumentError(f"empty domain {self}: no value satisfies {self._interval_text()}")

    def _interval_text(self) -> str:
        left = "(" if self.open_lo else "["
        right = ")" if self.open_hi else "]"
        return f"{left}{self.lo!r}, {self.hi!r}{right}"

    def __repr__(self) -> str:
        extras = []
        if self.where is not None:
            extras.append(f"where={getattr(self.where, '__name__', self.where)!s}")
        if self.allow_nan:
            extras.append("allow_nan=True")
        if self.allow_infinity:
            extras.append("allow_infinity=True")
        return f"Domain{self._interval_text()}" + (f" {' '.join(extras)}" if extras else "")

    def resolve(self, info: DtypeInfo) -> ResolvedDomain:
        """Rounds the domain to `info`'s dtype: the ordinals of the smallest and largest member.

        Raises:
            ValueError: naming the domain and the dtype when no finite value of the dtype lies in it.
        """
        # __post_init__ made both bounds floats.
        lo, hi = cast(float, self.lo), cast(float, self.hi)
        lo_ord = _inner_ordinal(lo, info, open_=self.open_lo, upward=True)
        hi_ord = _inner_ordinal(hi, info, open_=self.open_hi, upward=False)
        if lo_ord > hi_ord:
            raise ArgumentError(
                f"empty domain {self!r} for {info.name}: no finite {info.name} value lies in it "
                f"({info.name} values lie in [{-float(info.max)!r}, {float(info.max)!r}])"
            )
        return ResolvedDomain(
            info=info,
            lo_ord=lo_ord,
            hi_ord=hi_ord,
            neg_inf=self.allow_infinity and lo == -math.inf and not self.open_lo,
            pos_inf=self.allow_infinity and hi == math.inf and not self.open_hi,
            nan=self.allow_nan,
            where=self.where,
            source=self,
        )


def _to_float(value: Any, name: str) -> float:
    try:
        result = float(value)
    except (TypeError, ValueError, OverflowError) as exc:
        raise ArgumentError(f"Domain({name}={value!r}): expected a real number or None") from exc
    if math.isnan(result):
        raise ArgumentError(f"Domain({name}=nan): expected a real number or None, not NaN")
    return result


def _inner_ordinal(bound: float, info: DtypeInfo, *, open_: bool, upward: bool) -> int:
    """The ordinal of the first dtype value inside the domain, seen from `bound` going `upward` or down."""
    limit = float(info.max)
    if bound > limit:
        # Above the dtype's range: as an upper bound it clips to max; as a lower one nothing is inside.
        return info.max_ordinal if not upward else info.max_ordinal + 1
    if bound < -limit:
        return -info.max_ordinal if upward else -info.max_ordinal - 1
    ordinal = int(to_ordinal(bound, info.dtype))
    value = float(from_ordinal(ordinal, info.dtype))
    # Rounding to the dtype may have moved the bound outwards: step back inside.
    if upward and value < bound:
        ordinal += 1
    elif not upward and value > bound:
        ordinal -= 1
    if open_ and float(from_ordinal(ordinal, info.dtype)) == bound:
        ordinal += 1 if upward else -1
    return ordinal


@dataclasses.dataclass(frozen=True)
class ResolvedDomain:
    """A domain rounded to one dtype: finite members are exactly the ordinals in [lo_ord, hi_ord]."""

    info: DtypeInfo
    lo_ord: int
    hi_ord: int
    neg_inf: bool
    pos_inf: bool
    nan: bool
    where: Callable[[Any], Any] | None
    source: Domain

    def contains(self, values: np.ndarray) -> np.ndarray:
        """Elementwise: is each value (of the dtype) in the domain, the predicate left aside."""
        values = np.asarray(values, dtype=self.info.dtype)
        finite = np.isfinite(values)
        ords = np.where(finite, to_ordinal(np.where(finite, values, 0), self.info.dtype), 0)
        inside = finite & (ords >= self.lo_ord) & (ords <= self.hi_ord)
        inside |= np.isnan(values) & self.nan
        inside |= (values == np.inf) & self.pos_inf
        inside |= (values == -np.inf) & self.neg_inf
        return inside

    def accepts(self, value: Any) -> bool:
        """Is one scalar in the domain, predicate included."""
        if not bool(self.contains(np.asarray(value))):
            return False
        return self.where is None or bool(self.where(value))


#: What `domain=` accepts: None (everything finite), a Domain, a (lo, hi) pair, or a predicate.
DomainLike: TypeAlias = Domain | tuple[float | None, float | None] | Callable[[Any], Any] | None


def _is_bound(value: Any) -> bool:
    return value is None or (isinstance(value, numbers.Real) and not isinstance(value, bool))


def _is_pair(spec: Any) -> bool:
    """Whether `spec` is a (lo, hi) pair of bounds rather than a sequence of domains."""
    return (
        isinstance(spec, Sequence)
        and not isinstance(spec, str)
        and len(spec) == 2
        and all(map(_is_bound, spec))
    )


def as_domain(spec: Any) -> Domain:
    """Coerces a `domain=` argument for one function argument to a `Domain`.

    Accepts None (all finite values), a `Domain`, a `(lo, hi)` pair of numbers or None (closed), or a
    callable (a predicate over all finite values).

    Raises:
        TypeError: for anything else.
        ValueError: for an empty interval.

    Example:
        >>> as_domain((-1, 1)) == Domain(-1.0, 1.0)
        True
    """
    if spec is None:
        return Domain()
    if isinstance(spec, Domain):
        return spec
    if _is_pair(spec):
        return Domain(spec[0], spec[1])
    if callable(spec):
        return Domain(where=spec)
    raise ArgumentTypeError(f"domain must be None, a Domain, a (lo, hi) pair or a predicate, got {spec!r}")


def per_argument_domains(spec: Any, count: int) -> list[Domain]:
    """Coerces the `domain=` of a multi-argument strategy to one `Domain` per argument.

    `spec` is one domain for all arguments (anything `as_domain` accepts), a sequence of `count` of them,
    or a mapping from argument position to one (positions left out get the default domain).

    Raises:
        ValueError: a sequence of the wrong length, or a position out of range.
        TypeError: for a spec of the wrong kind.
    """
    if isinstance(spec, Mapping):
        bad = [key for key in spec if not isinstance(key, int) or not 0 <= key < count]
        if bad:
            raise ArgumentError(f"domain positions {bad!r} out of range for {count} arguments")
        return [as_domain(spec.get(i)) for i in range(count)]
    if isinstance(spec, Sequence) and not isinstance(spec, str) and not _is_pair(spec):
        if len(spec) != count:
            raise ArgumentError(f"domain: {len(spec)} domains given for {count} arguments; one per argument")
        return [as_domain(item) for item in spec]
    return [as_domain(spec)] * count
