"""Row classes: batched arrays whose rows each have a character of their own.

ML code works row by row: a layer norm, a softmax or a log-sum-exp over the last axis of a (batch,
features) or (batch, tokens, features) input fails on the one row that is clustered about a large
offset, or whose largest term dominates the rest. A whole-array class (`_classes`) draws a block of at
most `_arrays.MAX_DRAWN` elements and repeats it, so every row of a (32, 512) array is alike and holds
eight copies of each drawn value: its one dominant element becomes eight tied ones in each row, which a
naive log-sum-exp computes accurately. A row class draws every element, row by row, for O(elements)
numpy work and the Hypothesis choices of a whole-array class (the class, one header, a shrinkable
offset). The header's fields set what the array's rows share (the mode, an offset, a level, a special
row); a *structure* seed in it sets the rows' own parameters (which rows, their offsets, levels, gaps,
positions, classes), and a noise seed their elements. A scenario's variant re-seeds only the noise
(`Header.noise`): the same rows, new elements. Zero header bytes are the simplest array of each class.

A row is a slice along the leading axes: an array of shape (..., F) has prod(...) rows of F features. A
(B, T, D) activation has B·T rows; a (D, H) weight has D rows, each of which then looks like a draw of
a whole-array class. Row classes apply to `batched` arrays: rank 2 or more, two rows and two features
at least, and more elements than the drawn block (a smaller array's whole-array classes already draw
every element, and the fuzzer's detection on them stays as it is).

- `rows_clustered`: one row, or about one row in eight, clustered about an offset (relative noise 2^-1
  down to 2^-(significand + 10), as `offset_noise`) among ordinary rows (uniform in linear scale within
  the offset's magnitude: the clustered rows stand out by their spread only); or every row clustered,
  each about its own offset in the user's scale (`_classes.window`), at its own level; or every
  feature so across the rows (statistics over the leading axes, as a batch norm takes them).
- `rows_dominant`: in every row one element dominates, at the row's own position, the rest 8 to 60
  binades below it (the gap the row's own): in exp-space (the top near zero half the time, where a
  log-sum-exp is log(1 + s) with s tiny), or in magnitude.
- `rows_scaled`: rows at very different magnitudes: every row at an offset in the user's scale but
  one, 8 to 60 binades above or below; or rows spanning the binades evenly, in a shuffled order, from
  2^-(significand + 2) (where a value is lost beside 1) to the domain's largest. A row's elements lie
  within half a binade of its magnitude, of its sign or of mixed signs. (Rows far below that, all of
  whose results underflow, cost the stability lens's conditioning seconds per input and show nothing
  the whole-array classes' tiny offsets do not.)
- `rows_mixed`: every row one of the whole-array classes (`_classes.CLASSES`) drawn at full row length:
  up to `_TEMPLATES` rows, each its own class, header and offset, answered from the structure seed
  (`_RowSource`), assigned to the rows and rotated by a shift of each row's own.

Every class works on ordinals clamped to the domain (values computed as reals go through
`values_to_ordinals`), as the whole-array classes do.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from hypothesis import strategies as st

from .._dtypes import from_ordinal
from ._classes import (
    CLASSES,
    EXTRA_NOISE_LEVELS,
    FAR_BINADES,
    Header,
    Noise,
    bounds,
    clamp,
    far_binades,
    in_binades,
    noise_level,
    offset,
    reseeder,
    values_to_ordinals,
    window,
)
from ._floats import Sampler, Side
from ._plan import ArrayPlan
from ._source import Source

__all__ = ["ROW_CLASSES", "batched"]

# Rows of a mixed array drawn by a whole-array class; the other rows repeat them, rotated.
_TEMPLATES = 8
# Clustered rows among ordinary ones (mode 1): about one row in this many.
_SOME = 8
_LN2 = math.log(2.0)


def batched(plan: ArrayPlan) -> bool:
    """Whether the row classes apply: rank 2 or more, two rows and two features at least, and more
    elements than a whole-array class draws (whose block would repeat, every row alike)."""
    shape = plan.shape
    return len(shape) >= 2 and shape[-1] >= 2 and plan.size // shape[-1] >= 2 and plan.size > plan.drawn


def _grid(plan: ArrayPlan) -> tuple[int, int]:
    """(rows, features)."""
    return plan.size // plan.shape[-1], plan.shape[-1]


def _structure(header: Header) -> Noise | None:
    """The rows' own parameters, from eight header bytes; unlike `Header.rng`, a variant does not
    re-seed it (it keeps the example's rows). Zero bytes: every row the simplest (no generator)."""
    seed = header.take(8)
    return Noise(seed) if seed else None


def _elements(header: Header) -> np.random.Generator | None:
    """Per-element randomness, seeded as `Header.rng` is (a variant re-seeds it): a numpy generator,
    cheaper than `Noise` over the thousands of elements of a batched array. Zero bytes: no noise."""
    seed = header.take(8)
    return np.random.default_rng(int(header.noise(seed).state)) if seed else None


def _words(rng: Noise | None, n: int) -> np.ndarray:
    """Per-row words of the structure (no generator: zeros)."""
    return rng.words(n) if rng is not None else np.zeros(n, dtype=np.uint64)


def _raw(rng: np.random.Generator | None, rows: int, features: int) -> np.ndarray:
    """A uniform 64-bit word per element (no generator: zeros)."""
    if rng is None:
        return np.zeros((rows, features), dtype=np.uint64)
    return rng.bit_generator.random_raw(rows * features).reshape(rows, features)


def _uniform(rng: np.random.Generator | None, rows: int, features: int) -> np.ndarray:
    return rng.random((rows, features)) if rng is not None else np.zeros((rows, features))


def _below(words: np.ndarray, n: int, shift: int = 0) -> np.ndarray:
    """Per word a field in [0, n) from its bits above `shift`."""
    return ((words >> np.uint64(shift)) % np.uint64(max(n, 1))).astype(np.int64)


def _levels(words: np.ndarray, significand_bits: int) -> np.ndarray:
    """A noise level per word, distributed as `noise_level`'s: half uniform over 1..significand + 10,
    half over the moderately clustered window p/3..2p/3."""
    levels = significand_bits + EXTRA_NOISE_LEVELS
    k = _below(words, 2 * levels, 16)
    lo, hi = max(1, significand_bits // 3), max(1, (2 * significand_bits) // 3)
    return np.where(k < levels, 1 + k, lo + (np.maximum(k - levels, 0) * (hi - lo + 1)) // levels)


def _noise(rng: np.random.Generator | None, levels: np.ndarray, shape: tuple[int, int],
           mantissa_bits: int) -> np.ndarray:
    """Ordinal steps of relative noise about 2^-level (`noise_ordinals`), `levels` broadcast to `shape`
    (a level per row, or per feature); no generator, no noise."""
    if rng is None:
        return np.zeros(shape, dtype=np.int64)
    scale = 2.0 ** (mantissa_bits - np.asarray(levels, dtype=np.float64))
    u = rng.random((2, *shape))
    return np.floor((2.0 * u[0] - 1.0) * scale + u[1]).astype(np.int64)


def _shifted(magnitude: Any, shift: Any, top: int) -> np.ndarray:
    """Magnitude ordinals moved by `shift` ordinals (a binade count << mantissa bits, either sign),
    saturating at 0 and at `top` with no intermediate past either (float64's ordinals near its max plus
    a few binades would pass 2^63)."""
    magnitude, shift = np.asarray(magnitude, dtype=np.int64), np.asarray(shift, dtype=np.int64)
    up, down = np.maximum(shift, 0), np.maximum(-shift, 0)
    return np.maximum(np.minimum(magnitude, top - up) + up, down) - down


def _side_of(sampler: Sampler, ordinal: int) -> Side:
    """The side holding a signed ordinal (the positive side holds 0)."""
    for side in sampler.sides:
        if side.negative == (ordinal < 0):
            return side
    return sampler.sides[0]


# --- the classes --------------------------------------------------------------------------------------


def rows_clustered(plan: ArrayPlan, draw: st.DrawFn, header: Header) -> np.ndarray:
    """One row clustered about the offset among ordinary rows; or that row and about one in eight
    others, each about an offset of its own; or every row so; or every feature (column) so, the rows
    alike up to the noise."""
    sampler, info = plan.sampler, plan.sampler.info
    rows, features = _grid(plan)
    mode = (0, 1, 2, 2, 3)[header.below(5)]  # one clustered row, some, every row (twice), every feature
    base = offset(draw, header, sampler)
    level = noise_level(header, info.significand_bits)
    where = header.below(rows)
    structure = _structure(header)
    words = _words(structure, rows)
    rng = _elements(header)
    # The rows' own offsets, in the user's scale and of the array offset's sign, and noise levels.
    side = _side_of(sampler, base)
    lo, hi = window(sampler, side, "scale")
    if mode == 3:  # the same per feature: every feature clustered across the rows (a batch norm's view)
        columns = _words(structure, features)
        centres = in_binades(side, lo + _below(columns, hi - lo + 1, 40), _words(structure, features))
        levels = _levels(columns, info.significand_bits)
        centres[where % features], levels[where % features] = base, level
        noise = _noise(rng, levels[None, :], (rows, features), info.mantissa_bits)
        return (centres[None, :] + noise).reshape(-1)
    centres = in_binades(side, lo + _below(words, hi - lo + 1, 40), _words(structure, rows))
    levels = _levels(words, info.significand_bits)
    centres[where], levels[where] = base, level
    clustered = np.full(rows, mode == 2) | (mode == 1) & (_below(words, _SOME) == 0)
    clustered[where] = True
    # Ordinary rows: uniform in linear scale over [-B, B] within the domain, B the offset's magnitude.
    bound = abs(float(from_ordinal(base, info.name)))
    lo_value, hi_value = bounds(sampler)
    lo_value, hi_value = max(lo_value, -bound), min(hi_value, bound)
    if lo_value > hi_value:  # the domain lies beyond B on one side: its end nearest zero
        lo_value = hi_value = lo_value if lo_value > 0 else hi_value
    centre = min(max(0.0, lo_value), hi_value)
    out = np.empty((rows, features), dtype=np.int64)
    ordinary = ~clustered
    if ordinary.any():
        s = 2.0 * _uniform(rng, int(ordinary.sum()), features) - 1.0 if rng is not None else 0.0
        values = np.where(s < 0, centre + s * (centre - lo_value), centre + s * (hi_value - centre))
        out[ordinary] = values_to_ordinals(plan, np.broadcast_to(values, (int(ordinary.sum()), features)))
    count = int(clustered.sum())
    out[clustered] = centres[clustered][:, None] + _noise(rng, levels[clustered][:, None], (count, features),
                                                          info.mantissa_bits)
    return out.reshape(-1)


def rows_dominant(plan: ArrayPlan, draw: st.DrawFn, header: Header) -> np.ndarray:
    """In every row one dominant element at the row's own position, the rest 8 to 60 binades below it
    (each row its own gap): in exp-space (twice as often; the top near zero half the time), or in
    magnitude (of the top's sign, or of mixed signs)."""
    sampler, info = plan.sampler, plan.sampler.info
    rows, features = _grid(plan)
    exp_space = header.below(3) > 0
    top = offset(draw, header, sampler, ("small", None)[header.below(2)] if exp_space else None)
    same_sign = header.below(2) == 0
    words = _words(_structure(header), rows)
    rng = _elements(header)
    position = _below(words, features)
    far = FAR_BINADES[0] + _below(words, FAR_BINADES[1] - FAR_BINADES[0] + 1, 32)
    if exp_space:
        gaps = (far[:, None] + 3.0 * _uniform(rng, rows, features)) * _LN2
        ordinals = values_to_ordinals(plan, float(from_ordinal(top, info.name)) - gaps)
    else:
        noise = _raw(rng, rows, features)
        below = far[:, None] + (noise >> np.uint64(62)).astype(np.int64) % 3  # within 3 binades
        mantissa = (noise % np.uint64(1 << info.mantissa_bits)).astype(np.int64)
        magnitude = _shifted(abs(top), -(below << info.mantissa_bits), info.max_ordinal) + mantissa
        magnitude = np.minimum(magnitude, abs(top))
        flips = np.logical_and(not same_sign, (noise >> np.uint64(61)) & np.uint64(1) == 1)
        ordinals = np.where(flips, -1, 1) * (1 if top >= 0 else -1) * magnitude
    ordinals[np.arange(rows), position] = top
    return ordinals.reshape(-1)


def rows_scaled(plan: ArrayPlan, draw: st.DrawFn, header: Header) -> np.ndarray:
    """Rows at very different magnitudes: all at an offset in the user's scale but one, 8 to 60 binades
    above or below; or spanning the binades from 2^-(significand + 2) to the domain's largest evenly,
    shuffled. Each row's elements lie within half a binade of its magnitude, of the offset's sign or
    (when the domain has both) of mixed signs."""
    sampler, info = plan.sampler, plan.sampler.info
    rows, features = _grid(plan)
    spanning = header.below(2) == 1
    base = offset(draw, header, sampler, "scale")  # the contrast between rows, at the user's scale
    mixed = header.below(2) == 1 and len(sampler.sides) == 2
    where = header.below(rows)
    far = far_binades(header) << info.mantissa_bits
    up = header.below(2) == 1
    structure = _structure(header)
    rng = _elements(header)
    if spanning:
        # From the binade where a value is lost beside 1 (2^-(p + 2)) to the domain's largest: rows far
        # enough apart to swamp each other, none so tiny that every result underflows.
        side = _side_of(sampler, base)
        first, last = window(sampler, side, "small")[1], window(sampler, side, "all")[1]
        shuffle = _words(structure, rows)
        order = np.argsort(shuffle, kind="stable") if structure is not None else np.arange(rows)
        binades = first + np.rint(order * (last - first) / (rows - 1)).astype(np.int64)
        magnitude = np.abs(in_binades(side, binades, _words(structure, rows)))
    else:
        magnitude = np.full(rows, abs(base), dtype=np.int64)
        magnitude[where] = _shifted(abs(base), far if up else -far, info.max_ordinal)
    levels = np.ones(1, dtype=np.int64)  # relative noise up to 2^-1: within half a binade
    elements = np.maximum(magnitude[:, None] + _noise(rng, levels, (rows, features), info.mantissa_bits), 0)
    sign = np.full((rows, features), 1 if base >= 0 else -1, dtype=np.int64)
    if mixed:
        sign = np.where(_raw(rng, rows, features) >> np.uint64(63) == 1, -sign, sign)
    return (sign * elements).reshape(-1)


class _RowPlan:
    """A row of a mixed array, as a whole-array class sees its plan: every feature drawn."""

    def __init__(self, sampler: Sampler, features: int) -> None:
        self.sampler, self.shape, self.size, self.drawn = sampler, (features,), features, features


class _RowSource(Source):
    """Answers the draws of a mixed array's row templates from the structure seed (uniform choices and
    bytes; no seed, the simplest: zeros), so the templates cost no Hypothesis choice; passes on the
    re-seeding of per-element randomness of the draw it serves (a variant renews the templates'
    elements, their classes and offsets stay)."""

    def __init__(self, seed: int, reseed: Callable[[int], int] | None) -> None:
        self.noise = Noise(seed) if seed else None
        self._reseed = reseed
        self.renews_elements = reseed is not None

    def _word(self) -> int:
        return int(self.noise.words(1)[0]) if self.noise is not None else 0

    def index(self, n: int) -> int:
        return (self._word() * n) >> 64

    def bytes(self, size: int) -> bytes:
        if self.noise is None:
            return bytes(size)
        return self.noise.words((size + 7) // 8).astype(">u8").tobytes()[:size]

    def integer(self, lo: int, hi: int) -> int:
        return lo + ((self._word() * (hi - lo + 1)) >> 64)

    def fixed(self, value: int) -> int:
        return value

    def reseed(self, seed: int) -> int:
        return self._reseed(seed) if self._reseed is not None else seed


def rows_mixed(plan: ArrayPlan, draw: st.DrawFn, header: Header) -> np.ndarray:
    """Every row one of the whole-array classes at full row length: up to `_TEMPLATES` rows drawn, each
    its own class (by the classes' weights), header and offset; every row one of them, rotated."""
    sampler = plan.sampler
    rows, features = _grid(plan)
    source = _RowSource(header.take(8), reseeder(draw))
    row = _RowPlan(sampler, features)
    slots = [(fn, size) for _, fn, least, both_signs, weight, size in CLASSES
             if features >= least and (len(sampler.sides) == 2 or not both_signs) for _ in range(weight)]
    count = min(rows, _TEMPLATES)
    templates = np.empty((count, features), dtype=np.int64)
    for t in range(count):
        fn, size = slots[source.index(len(slots))]
        templates[t] = clamp(plan, fn(row, source.draw_fn, Header(source.draw_fn, size)))
    words = _words(source.noise, rows)
    pick = np.arange(rows) % count
    pick[count:] = _below(words[count:], count, 32)
    shift = np.where(np.arange(rows) < count, 0, _below(words, features))
    columns = (np.arange(features)[None, :] + shift[:, None]) % features
    return templates[pick[:, None], columns].reshape(-1)


#: (name, draw, weight, header bytes): the row classes `_arrays._ArrayPlan` adds after the whole-array
#: ones for a `batched` array. A row class returns every element's ordinal (the plan's `size`), not a
#: block to repeat. Header bytes as in `_classes.CLASSES`: exactly the fields a class reads.
ROW_CLASSES: tuple[tuple[str, Callable[[Any, st.DrawFn, Header], np.ndarray], int, int], ...] = (
    ("rows_clustered", rows_clustered, 3, 34),
    ("rows_dominant", rows_dominant, 3, 34),
    ("rows_scaled", rows_scaled, 2, 36),
    ("rows_mixed", rows_mixed, 2, 8),
)
