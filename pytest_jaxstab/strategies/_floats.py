"""Scalar draws: every binade of a dtype inside a domain, plus the values where numerics break.

How a value is drawn, and why it shrinks well. Hypothesis shrinks a failing example by making its
sequence of choices shorter, then lexicographically smaller, mostly one choice at a time (a binary
search on each). Every value of one Sampler costs the same sequence of choices:

1. `kind`: 0 lets Hypothesis choose `magnitude` with its own distribution (the form examples shrink to);
   1 to 11 compute it from `digits`; 12 to 15 take a special value (one draw in four).
2. `digits`: uniform bits. Kinds 1 to 11 pick a binade of the chosen sign inside the domain uniformly
   from the first ones (as Herbie samples bit patterns uniformly) and the mantissa's top 16 bits from
   the rest (lower bits, float64's only, are left to Hypothesis); special kinds pick the special value.
   Hypothesis's own integer distribution is far from uniform over wide ranges, hence bytes.
3. `sign`: 0 for +, 1 for - (only when the domain has both signs).
4. `magnitude`: the value's ordinal without the sign (its bit pattern, less the sign bit), over every
   magnitude of that sign inside the domain.

Kinds 1 to 15 record `magnitude` (and special values their `sign`) as single-valued choices, so lowering
`kind` to 0 keeps the same value, and from there the shrinker binary-searches `magnitude` itself. A
failure that starts at a threshold therefore shrinks to the exact float where it starts (the first
float32 whose `exp` overflows, 88.72284), one that fails everywhere to 0.0.

Free choices other than `magnitude` are drawn with `sampled_from(range(n))`, whose Hypothesis label
depends on n: Hypothesis's generator copies choices between draws of the same label, and a copy that
does not fit the target's range degenerates to the simplest choice, which would flood the draws with
kind 0 and subnormals.
"""

from __future__ import annotations

import functools
import math
from typing import Any, NamedTuple, cast

import numpy as np
from hypothesis import strategies as st

from .._dtypes import DtypeInfo, dtype_info, from_ordinal, to_ordinal
from ._domain import Domain, DomainLike, ResolvedDomain, as_domain
from ._source import source_of

__all__ = ["Sampler", "Side", "fixed", "floats", "index"]

# Ordinal neighbours kept around each special value ("log(max) and neighbours").
_SPREAD = 3
# kind: 0 is Hypothesis's distribution (the shrunk form), 1.._SPECIAL_KIND - 1 uniform, the rest special.
_KINDS = 16
_SPECIAL_KIND = 12


@functools.lru_cache(maxsize=512)
def _below(n: int) -> st.SearchStrategy[int]:
    return st.sampled_from(range(n))


def index(draw: st.DrawFn, n: int) -> int:
    """A choice in [0, n) that shrinks towards 0 (no choice at all when n is 1)."""
    if n <= 1:
        return 0
    source = source_of(draw)
    return draw(_below(n)) if source is None else source.index(n)


def fixed(draw: st.DrawFn, value: int) -> int:
    """Records `value` as a single-valued choice; replayed into `index` or `integers` it gives `value`."""
    return draw(st.integers(value, value))


def _bytes(draw: st.DrawFn, count: int) -> int:
    """`count` bytes as one integer."""
    value = 0
    for _ in range(count):
        value = value << 8 | index(draw, 256)
    return value


def _scale(digits: int, bits: int, n: int) -> int:
    """Maps `bits` uniform bits to [0, n) uniformly (up to rounding)."""
    return (digits * n) >> bits


def _bytes_for(n: int) -> int:
    return max(1, (max(n - 1, 1).bit_length() + 7) // 8)


class Side(NamedTuple):
    """The values of one sign inside a domain: magnitude ordinals `first..last`, over `count` binades."""

    negative: bool
    first: int
    last: int
    shift: int  # mantissa bits: a magnitude's binade field is `magnitude >> shift`

    @property
    def count(self) -> int:  # pyright: ignore[reportIncompatibleMethodOverride]  (shadows tuple.count)
        return (self.last >> self.shift) - (self.first >> self.shift) + 1

    def binade(self, k: int) -> tuple[int, int]:
        """Magnitude ordinals of binade k of this side (0 is the side's smallest), clipped to the domain."""
        field = (self.first >> self.shift) + k
        return max(self.first, field << self.shift), min(self.last, ((field + 1) << self.shift) - 1)

    def index_of(self, magnitude: int) -> int:
        """The binade index holding a magnitude ordinal of this side."""
        return (magnitude >> self.shift) - (self.first >> self.shift)


def _sides(resolved: ResolvedDomain) -> list[Side]:
    shift = resolved.info.mantissa_bits
    sides = []
    if resolved.hi_ord >= 0:
        sides.append(Side(False, max(resolved.lo_ord, 0), resolved.hi_ord, shift))
    if resolved.lo_ord < 0:
        # -0.0 has ordinal 0 like +0.0; the positive side owns it.
        sides.append(Side(True, max(1, -resolved.hi_ord), -resolved.lo_ord, shift))
    return sides


def _special_magnitudes(info: DtypeInfo) -> set[int]:
    """Magnitude ordinals of the values where numerics break, with their neighbours."""

    def ordinal(x: float) -> int:
        return abs(int(to_ordinal(x, info.dtype)))

    top = float(info.max)
    centres = {
        0,
        1,
        ordinal(float(info.tiny)),  # smallest normal; its lower neighbours are the largest subnormals
        info.max_ordinal,
        ordinal(1.0),
        ordinal(float(info.eps)),
        ordinal(math.log(top)),  # exp, expm1 overflow
        ordinal(math.log(top) + math.log(2.0)),  # cosh, sinh overflow
        ordinal(math.log(float(info.smallest_subnormal))),  # exp underflows to 0
        ordinal(math.log(float(info.tiny))),  # exp goes subnormal
        ordinal(math.sqrt(top)),  # x * x overflows
        ordinal(math.sqrt(float(info.tiny))),  # x * x goes subnormal
        ordinal(2.0 ** (info.mantissa_bits + 1)),  # consecutive integers end here
    }
    result = {c + k for c in centres for k in range(-_SPREAD, _SPREAD + 1)}
    # Integers and halves, and pi's neighbourhood of periodic functions.
    exact = [n / 2 for n in range(1, 33)] + [math.pi / 2, math.pi, 2 * math.pi, 10.0, 100.0, 1000.0]
    result.update(ordinal(x) for x in exact if x <= top)
    return {m for m in result if 0 <= m <= info.max_ordinal}


def _specials(resolved: ResolvedDomain) -> np.ndarray:
    info = resolved.info
    lo, hi = resolved.lo_ord, resolved.hi_ord
    signed = {s * m for m in _special_magnitudes(info) for s in (1, -1)}
    # The domain's own ends are where preconditions are tested hardest.
    signed.update(range(lo, min(lo + _SPREAD, hi) + 1))
    signed.update(range(max(hi - _SPREAD, lo), hi + 1))
    ordinals = sorted((o for o in signed if lo <= o <= hi), key=lambda o: (abs(o), o < 0))
    values = list(from_ordinal(np.asarray(ordinals, dtype=np.int64), info.dtype))
    if ordinals and ordinals[0] == 0 and lo < 0:
        values.insert(1, -info.dtype.type(0))
    # Asked-for NaN and infinities each take about one special draw in sixteen.
    repeat = max(1, len(values) // 16)
    wanted = ((np.inf, resolved.pos_inf), (-np.inf, resolved.neg_inf), (np.nan, resolved.nan))
    values += [info.dtype.type(v) for v, on in wanted if on for _ in range(repeat)]
    return np.asarray(values, dtype=info.dtype)


class Sampler:
    """Draws scalars of one dtype inside one domain; `floats`, `arrays` and `arguments` share it.

    Every value a Sampler draws lies in the domain's interval; only `where` is left to the caller
    (`strategy()` applies it). Building one validates the dtype and the domain (ValueError).
    """

    def __init__(self, dtype: Any, domain: DomainLike | Domain = None) -> None:
        self.info = dtype_info(dtype)
        self.domain = as_domain(domain)
        self.resolved = self.domain.resolve(self.info)
        self.sides = _sides(self.resolved)
        self.specials: list[np.floating[Any]] = list(_specials(self.resolved))
        self.special_choices = [self._choices_of(value) for value in self.specials]
        self.binade_bytes = _bytes_for(max(side.count for side in self.sides))
        self.fraction_bytes = min(2, _bytes_for(1 << self.info.mantissa_bits))
        self.low_bits = max(0, self.info.mantissa_bits - 16)
        self.fraction_bits = 8 * self.fraction_bytes + self.low_bits
        self.one_ordinal = int(to_ordinal(1.0, self.info.dtype))

    def __repr__(self) -> str:
        return f"floats({self.info.name!r}, domain={self.domain!r})"

    def _choices_of(self, value: np.floating[Any]) -> tuple[int, int]:
        """The (sign, magnitude) choices that produce `value`; those of +0.0 for -0.0, inf, NaN."""
        ordinal = int(to_ordinal(value, self.info.dtype)) if np.isfinite(value) else 0
        sign = next(i for i, side in enumerate(self.sides) if side.negative == (ordinal < 0) or ordinal == 0)
        return sign, max(abs(ordinal), self.sides[sign].first)

    def _value(self, side: Side, magnitude: int) -> np.floating[Any]:
        value = from_ordinal(-magnitude if side.negative else magnitude, self.info.dtype)[()]
        return cast(np.floating[Any], value)

    def draw_side(self, draw: st.DrawFn) -> Side:
        """The sign choice: positive first."""
        return self.sides[index(draw, len(self.sides))]

    def _digits(self, draw: st.DrawFn) -> tuple[int, int]:
        """Choice 2 of the module docstring: (binade bits, fraction bits)."""
        binade = _bytes(draw, self.binade_bytes)
        fraction = _bytes(draw, self.fraction_bytes)
        if self.low_bits:
            fraction = fraction << self.low_bits | index(draw, 1 << self.low_bits)
        return binade, fraction

    def _magnitude(
        self, draw: st.DrawFn, side: Side, lo: int, hi: int, kind: int, digits: tuple[int, int]
    ) -> int:
        """Choice 4 of the module docstring, over binades lo..hi of `side`; returns the ordinal."""
        if kind == 0:
            return draw(st.integers(side.binade(lo)[0], side.binade(hi)[1]))
        # Bytes of 0 (Hypothesis's favourite) pick the binade holding 1.0 rather than the smallest.
        count = hi - lo + 1
        home = min(max(side.index_of(self.one_ordinal) - lo, 0), count - 1)
        binade = lo + (_scale(digits[0], 8 * self.binade_bytes, count) + home) % count
        start, stop = side.binade(binade)
        return fixed(draw, start + _scale(digits[1], self.fraction_bits, stop - start + 1))

    def draw_in(self, draw: st.DrawFn, side: Side, lo: int = 0, hi: int | None = None) -> np.floating[Any]:
        """A value of `side` from its binades lo..hi (default all): choices 1, 2 and 4, no special."""
        hi = side.count - 1 if hi is None else hi
        kind = index(draw, _SPECIAL_KIND)
        digits = self._digits(draw)
        return self._value(side, self._magnitude(draw, side, lo, hi, kind, digits))

    def draw(self, draw: st.DrawFn) -> np.floating[Any]:
        """One value: a special value with odds 1 in 4, else a binade value (module docstring)."""
        kind = index(draw, _KINDS)
        digits = self._digits(draw)
        if kind < _SPECIAL_KIND:
            side = self.draw_side(draw)
            return self._value(side, self._magnitude(draw, side, 0, side.count - 1, kind, digits))
        bits = 8 * self.binade_bytes + self.fraction_bits
        slot = _scale(digits[0] << self.fraction_bits | digits[1], bits, len(self.specials))
        sign, magnitude = self.special_choices[slot]
        if len(self.sides) == 2:
            fixed(draw, sign)
        fixed(draw, magnitude)
        return self.specials[slot]

    def accepts(self, value: Any) -> bool:
        """Whether `where` (if any) accepts a value; the interval is the Sampler's own business."""
        return self.domain.where is None or bool(self.domain.where(value))

    def strategy(self) -> st.SearchStrategy[np.floating[Any]]:
        """The Hypothesis strategy drawing `draw`'s values, filtered by the domain's predicate."""
        strategy = _scalars(self)
        return strategy.filter(self.accepts) if self.domain.where is not None else strategy


@st.composite
def _scalars(draw: st.DrawFn, sampler: Sampler) -> np.floating[Any]:
    return sampler.draw(draw)


def floats(dtype: Any, *, domain: DomainLike | Domain = None) -> st.SearchStrategy[np.floating[Any]]:
    """Hypothesis strategy for scalars of a float dtype, over every binade and the values that break numerics.

    Draws are numpy scalars of the dtype (`np.float32`, `ml_dtypes.bfloat16`, ...), so always exactly
    representable. About two in three are drawn as Herbie does: a sign, then a binade (subnormals
    included) uniformly among those that meet the domain, then the mantissa uniformly (its top 16 bits;
    float64's lower bits are left to Hypothesis). One in sixteen leaves the magnitude to Hypothesis's own
    integer distribution, which favours small magnitudes (subnormals, 0). One in four is a *special*
    value: 0, -0, ±smallest subnormal, ±tiny and the largest subnormals, ±max, 1 and 1 ± eps, eps,
    integers and halves up to 16, 10, 100, 1000, the overflow thresholds of exp/expm1 (log(max)) and
    cosh/sinh (log(2 max)), the underflow thresholds of exp (log(smallest subnormal), log(tiny)),
    sqrt(max), sqrt(tiny), 2**(mantissa_bits + 1) where integers stop being exact, pi/2, pi, 2 pi, and the
    domain's own ends, most with their three nearest neighbours on each side.

    NaN and ±inf appear only when the domain asks for them (`Domain(allow_nan=True, allow_infinity=True)`),
    then each in about one special draw in sixteen. A failing example shrinks towards smaller magnitudes
    and the positive sign, exactly to the float where the failure starts (the first float32 whose `exp`
    overflows, say), and to 0.0 if everything fails.

    Args:
        dtype: "float16", "bfloat16", "float32", "float64" or an equivalent numpy/jax dtype.
        domain: None (all finite values), a `Domain`, a closed `(lo, hi)` pair or a predicate.

    Returns:
        A strategy of numpy scalars of `dtype`, all inside `domain`.

    Raises:
        ValueError: for an unsupported dtype, or a domain holding no finite value of the dtype.

    Example:
        >>> import numpy as np
        >>> from hypothesis import given
        >>> @given(floats("float32", domain=Domain(0, 100, open_lo=True)))
        ... def test_log_is_finite(x):
        ...     assert np.isfinite(np.log(x))
    """
    return Sampler(dtype, domain).strategy()
