"""Array classes drawn in bulk: what users' data looks like, at the cost of two or three choices per array.

A Hypothesis choice costs tens of microseconds, so an array is not drawn element by element. Each array is
the class choice plus one bytes choice, the *header*, whose fields (sign, offset, mode, noise level,
position, binade distance, a noise seed) each take their own bytes; only the `independent` class adds
one bytes choice with a few bytes per element. Every field is decoded monotonically from its bytes and
zero bytes are the simplest case (positive sign, smallest offset of its window, mode 0, no noise), so
Hypothesis's shrinker, which lowers bytes towards zero one at a time, removes the noise and then
binary-searches the offset, or an independent element, down to the float where a failure starts.
Per-element noise comes from a numpy generator seeded by the header; a zero seed means no noise.

Classes work on ordinals (`_dtypes.to_ordinal`): noise, ulp steps and binade shifts are integer
arithmetic, exact for every dtype, and results are clamped to the domain's ordinal interval, so no class
produces a value outside the domain's interval or one the dtype cannot hold. Values computed as reals
(linear-uniform draws, sums, exp-space gaps) are clipped to the domain's ends before being rounded to
the dtype. Offsets come from normal binades only: XLA flushes subnormal inputs to zero, so a subnormal
offset would only give an all-zero array.
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections.abc import Callable
from typing import Any

import numpy as np
from hypothesis import strategies as st

from .._dtypes import from_ordinal, to_ordinal
from .._hypothesis_compat import record_fixed_integer
from ._floats import Sampler, Side, index
from ._plan import ArrayPlan
from ._source import source_of

__all__ = ["CLASSES", "FAR_BINADES", "Header", "clamp", "independent", "noise_ordinals", "values_to_ordinals"]

# Binade distance of the dominant class's other elements, and of the "x >> y" relation (inclusive).
FAR_BINADES = (8, 60)
# Noise levels: relative noise 2^-1 down to 2^-(significand bits + 10).
EXTRA_NOISE_LEVELS = 10
# Largest ulp distance of the near-ties and "all near one large value" shapes.
_NEAR_ULPS = 8
# The "user scale" window of a bounded side: its top binades; of an unbounded one: 2^-4 .. 2^12.
_SCALE_BINADES = 8
_SCALE_RANGE = (-4, 12)
# Default header size: the largest class's (see CLASSES).
HEADER_BYTES = 28
# One shrinkable value in _WIDE is Hypothesis's own choice (see `shrinkable`).
_WIDE = 8


@functools.lru_cache(maxsize=512)
def _bytes_strategy(size: int) -> st.SearchStrategy[bytes]:
    return st.binary(min_size=size, max_size=size)


def draw_bytes(draw: st.DrawFn, size: int) -> bytes:
    """`size` bytes as ONE Hypothesis choice."""
    if size <= 0:
        return b""
    source = source_of(draw)
    return draw(_bytes_strategy(size)) if source is None else source.bytes(size)


@functools.lru_cache(maxsize=1024)
def _integers(lo: int, hi: int) -> st.SearchStrategy[int]:
    return st.integers(lo, hi)


def integer(draw: st.DrawFn, lo: int, hi: int) -> int:
    """An integer in [lo, hi], Hypothesis's own choice (its distribution; shrinks by binary search)."""
    source = source_of(draw)
    return int(draw(_integers(lo, hi))) if source is None else source.integer(lo, hi)


def reseeder(draw: st.DrawFn) -> Callable[[int], int] | None:
    """How a scenario's sibling re-seeds per-element randomness (`_scenario`), or None (a Hypothesis
    draw, or a source whose draws are new already)."""
    source = source_of(draw)
    return source.reseed if source is not None and source.renews_elements else None


class Header:
    """Parameters of one draw, decoded field by field from one bytes choice; zero bytes are the simplest."""

    def __init__(self, draw: st.DrawFn, size: int = HEADER_BYTES) -> None:
        self.raw = draw_bytes(draw, size)
        self.pos = 0
        self.reseed = reseeder(draw)

    def take(self, count: int) -> int:
        """The next `count` bytes as a big-endian integer (0 once the header is used up)."""
        chunk = self.raw[self.pos : self.pos + count]
        self.pos += count
        return int.from_bytes(chunk, "big") << 8 * (count - len(chunk))

    def below(self, n: int) -> int:
        """A field in [0, n), monotone in its two bytes."""
        return (self.take(2) * n) >> 16 if n > 1 else 0

    def scaled(self, lo: int, hi: int) -> int:
        """An integer in [lo, hi], uniform and monotone in its eight bytes."""
        return lo + ((self.take(8) * (hi - lo + 1)) >> 64)

    def rng(self) -> Noise | None:
        """Per-element randomness, or None (no noise) when the seed bytes are zero."""
        seed = self.take(8)
        return self.noise(seed) if seed else None

    def noise(self, seed: int) -> Noise:
        """Per-element randomness from `seed`; a scenario's sibling re-seeds it (same scenario, new
        elements)."""
        return Noise(seed if self.reseed is None else self.reseed(seed))


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
_S27, _S30, _S31 = np.uint64(27), np.uint64(30), np.uint64(31)


@functools.lru_cache(maxsize=256)
def _steps(n: int) -> np.ndarray:
    steps = _GOLDEN * np.arange(1, n + 1, dtype=np.uint64)
    steps.flags.writeable = False
    return steps


class Noise:
    """Uniform words for per-element randomness from a 64-bit seed (splitmix64: cheap for short arrays,
    where building a numpy Generator would cost more than the whole draw)."""

    def __init__(self, seed: int) -> None:
        self.state = np.uint64(seed)

    def words(self, n: int) -> np.ndarray:
        # Array arithmetic on uint64 wraps silently (only scalar arithmetic warns), as splitmix64 wants.
        z = _steps(n) + self.state
        self.state = z[-1] if n else self.state
        z = (z ^ (z >> _S30)) * _M1
        z = (z ^ (z >> _S27)) * _M2
        return z ^ (z >> _S31)

    def random(self, n: int) -> np.ndarray:
        return (self.words(n) >> np.uint64(11)).astype(np.float64) * 2.0**-53


def _uniform(rng: Noise | None, n: int) -> np.ndarray:
    return rng.random(n) if rng is not None else np.zeros(n)


def _words(rng: Noise | None, n: int) -> np.ndarray:
    return rng.words(n) if rng is not None else np.zeros(n, dtype=np.uint64)


def clamp(plan: ArrayPlan, ordinals: np.ndarray) -> np.ndarray:
    """Ordinals clamped to the domain's interval."""
    resolved = plan.sampler.resolved
    # np.minimum/np.maximum: np.clip's dispatch costs more than the clamping of a short array.
    return np.minimum(np.maximum(np.asarray(ordinals, dtype=np.int64), resolved.lo_ord), resolved.hi_ord)


def bounds(sampler: Sampler) -> tuple[float, float]:
    """The domain's smallest and largest finite member, as floats (cached on the sampler)."""
    cached = sampler.__dict__.get("_class_bounds")
    if cached is None:
        resolved = sampler.resolved
        cached = (float(from_ordinal(resolved.lo_ord, sampler.info.name)),
                  float(from_ordinal(resolved.hi_ord, sampler.info.name)))
        sampler.__dict__["_class_bounds"] = cached
    return cached


def values_to_ordinals(plan: ArrayPlan, values: np.ndarray) -> np.ndarray:
    """Real values (float64) clipped to the domain's ends, rounded to the dtype, as clamped ordinals."""
    sampler = plan.sampler
    lo, hi = bounds(sampler)
    finite = np.nan_to_num(np.asarray(values, dtype=np.float64), nan=0.0, posinf=hi, neginf=lo)
    rounded = np.clip(finite, lo, hi).astype(sampler.info.dtype)
    return clamp(plan, to_ordinal(rounded, sampler.info.name))


def noise_ordinals(rng: Noise | None, n: int, level: int, mantissa_bits: int) -> np.ndarray:
    """Ordinal steps of relative noise about 2^-level: uniform in +-2^(mantissa_bits - level) ulps (an
    ulp step is a relative step within a binade). Noise below half an ulp rounds stochastically: most
    elements keep the offset, a few move one ulp. No generator, no noise."""
    if rng is None:
        return np.zeros(n, dtype=np.int64)
    scaled = (2.0 * rng.random(n) - 1.0) * 2.0 ** (mantissa_bits - level)
    return np.floor(scaled + rng.random(n)).astype(np.int64)


def noise_level(header: Header, significand_bits: int) -> int:
    """A noise level from 1 (2^-1) to significand + 10: half the time uniform over all of them, half
    the time uniform over the moderately clustered window, p/3 to 2p/3 (8..16 for float32).

    The window is where a formula's error can show beyond the conditioning: a one-pass variance
    of values clustered with relative spread 2^-k loses ~2k bits to cancellation where its
    conditioning explains ~k, so it is flagged for k > 8 (the tolerance) until cond + tolerance
    fills the format (k ~ p - 8); below the window everything is well conditioned and exact, above
    it every formula looks ill-conditioned. Uniform over 34 levels alone, an input landed there
    one time in six (issue 35: the fast variance was missed at 2 of seeds 0-4 with 100 inputs)."""
    levels = significand_bits + EXTRA_NOISE_LEVELS
    k = header.below(2 * levels)  # one field: zero bytes still give level 1, the simplest
    if k < levels:
        return 1 + k
    lo, hi = max(1, significand_bits // 3), max(1, (2 * significand_bits) // 3)
    return lo + ((k - levels) * (hi - lo + 1)) // levels


def far_binades(header: Header) -> int:
    return FAR_BINADES[0] + header.below(FAR_BINADES[1] - FAR_BINADES[0] + 1)


def _normal_first(sampler: Sampler, side: Side) -> int:
    """Index of the side's first binade of normal numbers."""
    tiny = int(to_ordinal(sampler.info.tiny, sampler.info.name))
    return min(max(side.index_of(tiny), 0), side.count - 1)


def window(sampler: Sampler, side: Side, which: str) -> tuple[int, int]:
    """Cached `_window`."""
    cache: dict[tuple[Side, str], tuple[int, int]] = sampler.__dict__.setdefault("_class_windows", {})
    key = (side, which)
    if key not in cache:
        cache[key] = _window(sampler, side, which)
    return cache[key]


def _window(sampler: Sampler, side: Side, which: str) -> tuple[int, int]:
    """Binade indices lo..hi of one side for an offset: 'all' normal binades, the user's 'scale', 'small'
    (significand + 3 binades below 1 and lower), 'large' (top sixteenth) or 'one' (around 1)."""
    first, last = _normal_first(sampler, side), side.count - 1
    if which == "all":
        return first, last
    if which == "large":
        return max(first, last - max(1, side.count // 16)), last
    one = side.index_of(sampler.one_ordinal)
    if which == "one":
        half = max(1, side.count // 32)
        return min(max(one - half, first), last), max(min(one + half, last), first)
    if which == "small":
        top = one - (sampler.info.mantissa_bits + 3)
        return (first, top) if first <= top <= last else (first, first)
    # 'scale': where a user's values live. A bounded side: its top binades; else magnitudes near 1.
    bounded = (side.last >> side.shift) < (sampler.info.max_ordinal >> side.shift)
    if bounded:
        return max(first, last - _SCALE_BINADES + 1), last
    lo, hi = max(one + _SCALE_RANGE[0], first), min(one + _SCALE_RANGE[1], last)
    return (lo, hi) if lo <= hi else (first, last)


def fixed(draw: st.DrawFn, value: int) -> int:
    """Records `value` as a single-valued choice, as `_floats.fixed` does, without building (and caching)
    an `st.integers(value, value)` per value, which cost more than the rest of a bulk draw: inside a
    composite strategy `draw` is the example's own method, whose `draw_integer` records the same choice
    (private Hypothesis API, behind `_hypothesis_compat`)."""
    source = source_of(draw)
    if source is not None:
        return source.fixed(value)
    recorded = record_fixed_integer(draw, value)
    return recorded if recorded is not None else int(draw(st.integers(value, value)))


def wide(draw: st.DrawFn) -> bool:
    """Whether a shrinkable value is Hypothesis's own choice this time (one in `_WIDE`): never for a
    `Source` that does not record single-valued choices, whose shrinking is not Hypothesis's."""
    source = source_of(draw)
    if source is not None and not source.records_fixed:
        return False
    return index(draw, _WIDE) == 0


def shrinkable(draw: st.DrawFn, lo: int, hi: int, value: int) -> int:
    """`value` recorded so that Hypothesis can shrink it by binary search over [lo, hi].

    One time in `_WIDE` Hypothesis picks the value itself (its own distribution, the shrunk form);
    otherwise `value` is recorded as a single-valued choice, which lowering the first choice to 0
    replays as the same value of the wide form (as `floats` does with its magnitudes).
    """
    if wide(draw):
        return integer(draw, lo, hi)
    return fixed(draw, value)


def offset(draw: st.DrawFn, header: Header, sampler: Sampler, which: str | None = None) -> int:
    """An offset's signed ordinal: a sign, then (unless `which` says) half the time the user's scale,
    half any normal binade, then a magnitude uniform over that window's bit patterns; shrinkable."""
    side = sampler.sides[header.below(len(sampler.sides))]
    if which is None:
        which = ("scale", "all")[header.below(2)]
    lo, hi = window(sampler, side, which)
    first, last = side.binade(lo)[0], side.binade(hi)[1]
    magnitude = shrinkable(draw, first, last, header.scaled(first, last))
    return -magnitude if side.negative else magnitude


def _binade_bounds(side: Side, binades: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Vectorised `Side.binade`: first and last magnitude ordinal of each binade index."""
    field = (side.first >> side.shift) + binades.astype(np.int64)
    start = np.maximum(side.first, field << side.shift)
    stop = np.minimum(side.last, ((field + 1) << side.shift) - 1)
    return start, stop


def in_binades(side: Side, binades: np.ndarray, words: np.ndarray) -> np.ndarray:
    """Signed ordinals of values in the given binades of one side, mantissas uniform from `words`."""
    start, stop = _binade_bounds(side, binades)
    magnitude = start + (words % (stop - start + 1).astype(np.uint64)).astype(np.int64)
    return -magnitude if side.negative else magnitude


def _by_side(sides: list[Side], choice: np.ndarray, per_side: Callable[[Side], np.ndarray]) -> np.ndarray:
    """Per element, the ordinal `per_side` gives for the side `choice` picks."""
    out = np.zeros(choice.shape, dtype=np.int64)
    for i, side in enumerate(sides):
        out = np.where(choice == i, per_side(side), out)
    return out


def _special_ordinals(sampler: Sampler) -> np.ndarray:
    """The sampler's finite special values as ordinals (NaN and infinities left out), cached."""
    cached = sampler.__dict__.get("_class_specials")
    if cached is None:
        specials = np.asarray(sampler.specials, dtype=sampler.info.dtype)
        cached = to_ordinal(specials[np.isfinite(specials)], sampler.info.name)
        sampler.__dict__["_class_specials"] = cached
    return cached


# --- the classes --------------------------------------------------------------------------------------


def independent(plan: ArrayPlan, draw: st.DrawFn) -> np.ndarray:
    """Every element on its own, Herbie-style: its bit pattern uniform over the domain's magnitudes (so
    binades uniformly, subnormals included), one in four a special value. Each element is recorded as a
    code (positive magnitudes first, then negative ones) that shrinks as a `shrinkable` value does, so a
    failure shrinks, element by element, to the float where it starts."""
    sampler, n = plan.sampler, plan.drawn
    sides = sampler.sides
    spans = [side.last - side.first + 1 for side in sides]
    header = Header(draw, 8)
    seed = header.take(8) or 1
    # One choice per element: Hypothesis's own (one array in _WIDE, the shrunk form), or the code computed
    # here recorded as a single-valued choice that the wide form replays (see `shrinkable`).
    # (A scenario's draws never take the wide form, `wide`: its siblings re-seed `seed` for new codes.)
    if wide(draw):
        codes = [integer(draw, 0, sum(spans) - 1) for _ in range(n)]
        side_list = [int(code >= spans[0]) for code in codes]
        within = np.asarray([code - s * spans[0] for code, s in zip(codes, side_list)], dtype=np.int64)
        return _independent_ordinals(sides, np.asarray(side_list, dtype=np.int64), within)
    side, within = _independent_draw(sampler, spans, header.noise(seed), n)
    first = spans[0]
    for s, w in zip(side.tolist(), within.tolist()):
        fixed(draw, s * first + w)
    return _independent_ordinals(sides, side, within)


def _independent_draw(sampler: Sampler, spans: list[int], rng: Noise,
                      n: int) -> tuple[np.ndarray, np.ndarray]:
    """Per element its side (an index into `sampler.sides`) and magnitude offset within that side."""
    sides = sampler.sides
    words, picks = rng.words(n), rng.words(n)
    side = (picks >> np.uint64(63)).astype(np.int64) if len(sides) == 2 else np.zeros(n, dtype=np.int64)
    within = (words % np.asarray(spans, dtype=np.uint64)[side]).astype(np.int64)
    specials = _special_ordinals(sampler)
    if specials.size:
        special = picks % np.uint64(4) == 0
        value = specials[((picks >> np.uint64(2)) % np.uint64(specials.size)).astype(np.int64)]
        special_side = ((value < 0) & (len(sides) == 2)).astype(np.int64)
        firsts = np.asarray([s.first for s in sides], dtype=np.int64)
        side = np.where(special, special_side, side)
        within = np.where(special, np.abs(value) - firsts[special_side], within)
    return side, within


def _independent_ordinals(sides: list[Side], side: np.ndarray, within: np.ndarray) -> np.ndarray:
    firsts = np.asarray([s.first for s in sides], dtype=np.int64)
    signs = np.asarray([-1 if s.negative else 1 for s in sides], dtype=np.int64)
    return signs[side] * (firsts[side] + within)


def element_bytes(draw: st.DrawFn, count: int) -> bytes:
    """`count` bytes of per-element values as one choice; a scenario's sibling gets new ones (the same
    class and mode, new elements), seeded by the example's."""
    raw = draw_bytes(draw, count)
    reseed = reseeder(draw)
    if reseed is None or not count:
        return raw
    seed = int.from_bytes(hashlib.blake2b(raw, digest_size=8).digest(), "big")
    return Noise(reseed(seed)).words((count + 7) // 8).astype(">u8").tobytes()[:count]


def _element_words(draw: st.DrawFn, sampler: Sampler, n: int) -> tuple[np.ndarray, int]:
    """One word per element from one bytes choice, as few bytes as the dtype's ordinals need (zero
    bytes shrink an element towards the smallest magnitude); returns the words and their bit width."""
    width = 8 if sampler.info.max_ordinal >= 1 << 32 else 4 if sampler.info.max_ordinal >= 1 << 16 else 2
    raw = element_bytes(draw, n * width)
    return np.frombuffer(raw, dtype=f">u{width}").astype(np.uint64), 8 * width


def _scale_words(words: np.ndarray, bits: int, span: int) -> np.ndarray:
    """floor(word * span / 2^bits) for each word: uniform over [0, span) and monotone in the word."""
    if bits <= 32 and span <= 1 << 32:  # the product fits in 64 bits
        return ((words * np.uint64(span)) >> np.uint64(bits)).astype(np.int64)
    return np.asarray([(int(w) * span) >> bits for w in words.tolist()], dtype=np.int64)


def spread(plan: ArrayPlan, draw: st.DrawFn, header: Header) -> np.ndarray:
    """Per-element magnitude spread: bit patterns uniform over the domain (binades uniformly, as Herbie),
    magnitudes spanning the binades evenly from the smallest to the largest in a shuffled order, or
    alternating signs. Each element's bytes shrink on their own, towards small positive magnitudes."""
    sampler, n = plan.sampler, plan.drawn
    sides = sampler.sides
    mode = header.below(3) if n >= 2 else 0
    rng = header.rng()
    words, bits = _element_words(draw, sampler, n)
    if mode == 0:
        # Positive magnitudes first, then negative ones (Python ints: float64's codes pass 2^63).
        spans = [side.last - side.first + 1 for side in sides]
        total = sum(spans)
        out = []
        for w in words.tolist():
            code = (int(w) * total) >> bits
            side = sides[0] if code < spans[0] else sides[1]
            magnitude = side.first + (code if code < spans[0] else code - spans[0])
            out.append(-magnitude if side.negative else magnitude)
        return np.asarray(out, dtype=np.int64)
    choice = np.arange(n) % len(sides) if mode == 2 else np.zeros(n, dtype=np.int64)
    order = np.argsort(_words(rng, n), kind="stable") if rng is not None else np.arange(n)

    def per_side(side: Side) -> np.ndarray:
        if mode == 1:
            binades = np.rint(order * (side.count - 1) / max(n - 1, 1)).astype(np.int64)
        else:
            binades = np.minimum(_scale_words(words, bits, side.count), side.count - 1)
        start, stop = _binade_bounds(side, binades)
        # Spanning: the whole word is the mantissa; alternating: the bits below the binade's.
        fraction = words if mode == 1 else (words << np.uint64(16)) & np.uint64((1 << bits) - 1)
        widths = (stop - start + 1).tolist()
        magnitude = start + np.asarray([(int(f) * w) >> bits for f, w in zip(fraction.tolist(), widths)],
                                       dtype=np.int64)
        return -magnitude if side.negative else magnitude

    return _by_side(sides, choice, per_side)


def offset_noise(plan: ArrayPlan, draw: st.DrawFn, header: Header) -> np.ndarray:
    """An offset at any binade plus relative noise of 2^-1 down to 2^-(significand + 10)."""
    info = plan.sampler.info
    base = offset(draw, header, plan.sampler)
    level = noise_level(header, info.significand_bits)
    return base + noise_ordinals(header.rng(), plan.drawn, level, info.mantissa_bits)


def constant(plan: ArrayPlan, draw: st.DrawFn, header: Header) -> np.ndarray:
    """Every element equal: an offset, or (one in four) a special value."""
    specials = _special_ordinals(plan.sampler)
    if header.below(4) == 3 and specials.size:
        return np.full(plan.drawn, specials[header.below(specials.size)], dtype=np.int64)
    return np.full(plan.drawn, offset(draw, header, plan.sampler), dtype=np.int64)


def linear(plan: ArrayPlan, draw: st.DrawFn, header: Header) -> np.ndarray:
    """Uniform in linear scale over the domain (half the time), or over [-B, B] within it, B an offset:
    on each side of zero (or the domain's point nearest it), uniform, each element from its own bytes,
    which shrink towards that point."""
    sampler = plan.sampler
    lo, hi = bounds(sampler)
    if header.below(2) == 1:
        bound = abs(float(from_ordinal(offset(draw, header, sampler), sampler.info.name)))
        lo, hi = max(lo, -bound), min(hi, bound)
        if lo > hi:  # the domain lies beyond B on one side: its end nearest zero
            lo = hi = lo if lo > 0 else hi
    words, bits = _element_words(draw, sampler, plan.drawn)
    centre = min(max(0.0, lo), hi)
    down = ((words >> np.uint64(bits - 1)) == 1) & (centre > lo) | (centre == hi)
    fraction = (words & np.uint64((1 << (bits - 1)) - 1)).astype(np.float64) * 2.0 ** (1 - bits)
    values = np.where(down, centre - fraction * (centre - lo), centre + fraction * (hi - centre))
    return values_to_ordinals(plan, values)


def dominant(plan: ArrayPlan, draw: st.DrawFn, header: Header) -> np.ndarray:
    """One dominant element, the rest 8 to 60 binades below it: in magnitude (a sum's terms), or in
    exp-space (below it by 8 to 60 times ln 2, as logsumexp and softmax see them, the dominant value near
    zero half the time); or one huge element among values near 1."""
    sampler, n, info = plan.sampler, plan.drawn, plan.sampler.info
    mode = (0, 1, 1, 2)[header.below(4)]  # exp-space twice as often: softmax and logsumexp are everywhere
    where = header.below(n)
    if mode == 2:
        top = offset(draw, header, sampler, "large")
        rng = header.rng()
        words = _words(rng, n)
        choice = (words & np.uint64(1)).astype(np.int64) % len(sampler.sides)

        def near_one(side: Side) -> np.ndarray:
            lo, hi = window(sampler, side, "one")
            binades = lo + ((words >> np.uint64(40)) % np.uint64(hi - lo + 1)).astype(np.int64)
            return in_binades(side, binades, words >> np.uint64(1))

        ordinals = _by_side(sampler.sides, choice, near_one)
        ordinals[where] = top
        return ordinals
    far = far_binades(header)
    if mode == 0:
        top = offset(draw, header, sampler)
        same_sign = header.below(2) == 0
        rng = header.rng()
        words = _words(rng, n)
        below = far + (words >> np.uint64(62)).astype(np.int64) % 3  # the rest within 3 binades
        mantissa = (words % np.uint64(1 << info.mantissa_bits)).astype(np.int64)
        magnitude = np.clip(abs(top) - (below << info.mantissa_bits) + mantissa, 0, abs(top))
        flips = np.logical_and(not same_sign, (words >> np.uint64(61)) & np.uint64(1) == 1)
        ordinals = np.where(flips, -1, 1) * (1 if top >= 0 else -1) * magnitude
    else:
        top = offset(draw, header, sampler, ("small", None)[header.below(2)])
        rng = header.rng()
        gaps = (far + 3.0 * _uniform(rng, n)) * math.log(2.0)
        ordinals = values_to_ordinals(plan, float(from_ordinal(top, info.name)) - gaps)
    ordinals[where] = top
    return ordinals


def near_ties(plan: ArrayPlan, draw: st.DrawFn, header: Header) -> np.ndarray:
    """Near-ties around the maximum (half the elements within a few ulps below it, the rest up to eight
    binades below), or every element within a few ulps of one large value (cancellation)."""
    sampler, n, info = plan.sampler, plan.drawn, plan.sampler.info
    if header.below(2) == 1:
        base = offset(draw, header, sampler, "large")
        steps = (_words(header.rng(), n) % np.uint64(2 * _NEAR_ULPS + 1)).astype(np.int64)
        # 0, 1, 2, 3, ... -> 0, +1, -1, +2, ...
        return base + (steps + 1) // 2 * np.where(steps % 2 == 1, 1, -1)
    top = offset(draw, header, sampler)
    where = header.below(n)
    words = _words(header.rng(), n)
    tie = (words >> np.uint64(63)) == 0
    ulps = (words % np.uint64(_NEAR_ULPS + 1)).astype(np.int64)
    below = ((words >> np.uint64(8)) % np.uint64(8 << info.mantissa_bits)).astype(np.int64)
    ordinals = top - np.where(tie, ulps, below)
    ordinals[where] = top
    return ordinals


def cancelling(plan: ArrayPlan, draw: st.DrawFn, header: Header) -> np.ndarray:
    """Sign-cancelling pairs (x, -x (1 + noise)), in place or shuffled; or a sum that cancels: elements of
    mixed signs around an offset, one of them minus the sum of the others."""
    sampler, n, info = plan.sampler, plan.drawn, plan.sampler.info
    mode = header.below(2)
    base = offset(draw, header, sampler)
    level = noise_level(header, info.significand_bits)
    shuffled = header.below(2) == 1
    where = header.below(n)
    rng = header.rng()
    words = _words(rng, n)
    spread_binades = (words >> np.uint64(61)).astype(np.int64)  # 0..7 binades below the offset
    mantissa = (words % np.uint64(1 << info.mantissa_bits)).astype(np.int64)
    below = (spread_binades << info.mantissa_bits) - mantissa * (spread_binades > 0)
    magnitude = np.maximum(abs(base) - below, 0)
    if mode == 0:
        ordinals = magnitude.copy()
        half = n // 2
        ordinals[1 : 2 * half : 2] = -(magnitude[0 : 2 * half : 2]
                                       + noise_ordinals(rng, half, level, info.mantissa_bits))
        if shuffled and rng is not None:
            ordinals = ordinals[np.argsort(rng.words(n), kind="stable")]
        return ordinals
    sign = np.where((words >> np.uint64(60)) & np.uint64(1) == 1, -1, 1)
    values = from_ordinal(sign * magnitude, info.name).astype(np.float64)
    values[where] = 0.0
    values[where] = -math.fsum(values.tolist())
    return values_to_ordinals(plan, values)


#: (name, draw, fewest drawn elements, needs both signs, weight, header bytes): the bulk classes
#: `ArrayPlan` picks from after its `independent` one (which has weight 1). The header holds exactly
#: the fields a class reads (two bytes per choice among a few, eight per offset magnitude and per noise
#: seed, four more per offset for its sign and window): bytes it never read would only give Hypothesis
#: choices to mutate without changing the input.
CLASSES: tuple[tuple[str, Callable[[Any, st.DrawFn, Header], np.ndarray], int, bool, int, int], ...] = (
    ("spread", spread, 1, False, 2, 10),
    ("offset_noise", offset_noise, 1, False, 4, 22),
    ("constant", constant, 2, False, 2, 14),
    ("linear", linear, 1, False, 2, 14),
    ("dominant", dominant, 2, False, 4, 28),
    ("near_ties", near_ties, 2, False, 2, 24),
    ("cancelling", cancelling, 2, True, 2, 28),
)
