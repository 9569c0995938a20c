"""Scenarios: one Hypothesis example of `arguments`, and siblings of it that cost no Hypothesis example.

A Hypothesis example costs a few hundred microseconds of engine work (choice bookkeeping, the example
tree, the targeting hill-climb running the strategy again) besides the strategy's own code: as much as
judging the input. `jst.check` therefore judges each example together with a few *siblings* that our
own code draws without Hypothesis:

- **variants** (`Scenario.variant`) replay the example's draws and re-seed its per-element randomness:
  the same classes, relations and parameters (offsets, noise levels, binade distances, modes), which
  Hypothesis chose and `target()` steers, with new elements (other noise around the same offset, other
  far-below elements beside the same dominant one, other bit patterns of an `independent` array);
- **fresh draws** (`Scenario.fresh`) draw every choice, class included, from a generator seeded by the
  example's draws: uniform choices and bytes, as the classes are designed for (Hypothesis's generation
  is close to that), for the breadth that rare shapes of data (one dominant element near zero in
  exp-space) need.

How. `Scenario` draws the arguments through a `_Recorder`, which passes each draw to Hypothesis and logs
it. A variant draws them again from a `_Replay` of that log (each draw must ask for what the log holds:
the same kind and bounds); its `reseed` changes the seeds of the per-element randomness
(`_classes.Header.noise`, `_classes.element_bytes`). A scenario without per-element randomness (a
constant array, zero noise), or whose randomness does not survive (noise below half an ulp, elements
clamped to the domain's end), has no variants: they would repeat it. `_Fresh` answers from
`random.Random`. Elements a domain predicate rejects are redrawn, for a sibling, uniformly over the
domain's bit patterns until the predicate accepts one (`_redraw`); a sibling whose redraws all fail (a
predicate that rejects nearly everything) is dropped. Siblings are pure functions of the example's
logged draws and their number (no object ids), so a fixed-seed run draws the same inputs in every
process.
"""

from __future__ import annotations

import hashlib
import random
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
from hypothesis import strategies as st

from .._dtypes import from_ordinal
from ._arrays import DRAW_SECONDS, _ArrayPlan, _draw_arguments, plans_for
from ._classes import draw_bytes, integer
from ._floats import index
from ._source import Source

__all__ = ["Scenario", "scenarios"]

_GOLDEN = 0x9E3779B97F4A7C15
_MASK = (1 << 64) - 1
_FRESH_SALT = 0x5EED_F2E5_0000_0001  # keeps fresh draws' seeds apart from the variants'


class _Unanswerable(Exception):
    """A sibling asked for a draw its source cannot answer."""


class _Recorder(Source):
    """Passes the draws to Hypothesis's `draw` (the same calls as a plain `arguments` draw) and logs them."""

    def __init__(self, draw: st.DrawFn) -> None:
        self._draw = draw
        self.log: list[tuple[str, Any, Any]] = []

    def _note(self, kind: str, key: Any, value: Any) -> Any:
        self.log.append((kind, key, value))
        return value

    def index(self, n: int) -> int:
        return self._note("index", n, index(self._draw, n))

    def bytes(self, size: int) -> bytes:
        return self._note("bytes", size, draw_bytes(self._draw, size))

    def integer(self, lo: int, hi: int) -> int:
        return self._note("integer", (lo, hi), integer(self._draw, lo, hi))

    def fixed(self, value: int) -> int:
        # Not a Hypothesis choice: single-valued choices only let Hypothesis's shrinker keep a value it
        # then shrinks itself, and a check shrinks with its own shrinker (`_check._shrink`); each would
        # cost the engine as much as a free choice.
        return self._note("fixed", None, value)

    def element(self, plan: _ArrayPlan) -> Any:
        # Keyed by nothing process-specific (not the strategy's id): the log's digest seeds the siblings,
        # which must be the same in every process (xdist workers, a later run).
        return self._note("element", None, self._draw(plan.elements))


class _Replay(Source):
    """Answers with the logged draws, in order; re-seeds per-element randomness (a variant)."""

    renews_elements = True

    def __init__(self, log: Sequence[tuple[str, Any, Any]], salt: int) -> None:
        self.log, self.pos, self.salt = log, 0, salt & _MASK
        self.reseeded = False  # whether the example has per-element randomness at all
        self._rng: random.Random | None = None  # for element redraws

    def _next(self, kind: str, key: Any) -> Any:
        if self.pos >= len(self.log):
            raise _Unanswerable
        logged_kind, logged_key, value = self.log[self.pos]
        if logged_kind != kind or logged_key != key:
            raise _Unanswerable
        self.pos += 1
        return value

    def index(self, n: int) -> int:
        return self._next("index", n)

    def bytes(self, size: int) -> bytes:
        return self._next("bytes", size)

    def integer(self, lo: int, hi: int) -> int:
        return self._next("integer", (lo, hi))

    def fixed(self, value: int) -> int:
        self._next("fixed", None)
        return value  # the value the class computed from the variant's draws (new where its noise is)

    def element(self, plan: _ArrayPlan) -> Any:
        # The variant's own elements may be rejected where the example's were not: its redraws are its
        # own, and the example's logged redraws are passed over (`repaired`).
        if self.pos < len(self.log) and self.log[self.pos][0] == "element":
            self.pos += 1
        if self._rng is None:
            self._rng = random.Random(self.salt)
        return _redraw(plan, self._rng)

    def repaired(self) -> None:
        while self.pos < len(self.log) and self.log[self.pos][0] == "element":
            self.pos += 1

    def reseed(self, seed: int) -> int:
        self.reseeded = True
        return seed ^ self.salt


class _Fresh(Source):
    """Answers every draw from a seeded generator: uniform choices, uniform bytes."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def index(self, n: int) -> int:
        return self.rng.randrange(n)

    def bytes(self, size: int) -> bytes:
        return self.rng.randbytes(size)

    def integer(self, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi)

    def fixed(self, value: int) -> int:
        return value

    def element(self, plan: _ArrayPlan) -> Any:
        return _redraw(plan, self.rng)


# Tries of `_redraw` before a sibling is given up: a predicate that rejects nearly every value.
_REDRAW_TRIES = 64


def _redraw(plan: _ArrayPlan, rng: random.Random) -> Any:
    """A value of the plan's domain that its predicate accepts: bit patterns uniform over the domain's
    interval (as the `independent` class draws them), rejected until the predicate accepts one."""
    sampler = plan.sampler
    resolved = sampler.resolved
    for _ in range(_REDRAW_TRIES):
        value = from_ordinal(rng.randint(resolved.lo_ord, resolved.hi_ord), sampler.info.name)[()]
        if sampler.accepts(value):
            return value
    raise _Unanswerable


class Scenario:
    """One Hypothesis example of `arguments`: its arguments, their variants and fresh draws (see the
    module); every sibling is deterministic in the example's draws and its number."""

    def __init__(self, plans: list[_ArrayPlan], args: tuple[np.ndarray, ...],
                 log: list[tuple[str, Any, Any]]) -> None:
        self.plans, self.args, self._log = plans, args, log
        #: True once a replay showed that the example has no per-element randomness, or none that
        #: changes its arguments (then it has no variants).
        self.repeats = False
        self._digest: int | None = None

    @property
    def digest(self) -> int:
        """64 bits of the example's draws: two examples that drew differently have different siblings,
        even when they drew the same arguments (which Hypothesis's mutations often do)."""
        if self._digest is None:
            hashed = hashlib.blake2b(repr(self._log).encode(), digest_size=8).digest()
            self._digest = int.from_bytes(hashed, "big")
        return self._digest

    def _draw(self, source: Source) -> tuple[np.ndarray, ...] | None:
        started = time.perf_counter()
        try:
            return _draw_arguments(source.draw_fn, self.plans)
        except _Unanswerable:
            return None
        finally:
            DRAW_SECONDS[0] += time.perf_counter() - started

    def variant(self, salt: int) -> tuple[np.ndarray, ...] | None:
        """Variant number `salt` (1, 2, ...); None when its draws diverge from the example's, or when
        the example has no per-element randomness that changes it (then `repeats` is set)."""
        if self.repeats:
            return None
        replay = _Replay(self._log, self.digest ^ (salt * _GOLDEN))
        args = self._draw(replay)
        if args is not None and (not replay.reseeded or all(map(np.array_equal, args, self.args))):
            # No per-element randomness, or none that survives the domain's clamping (noise below half
            # an ulp, elements all clamped to an end): every variant would repeat the example.
            self.repeats = True
            return None
        return args

    def fresh(self, salt: int) -> tuple[np.ndarray, ...] | None:
        """Fresh draw number `salt` (1, 2, ...); None when it needs a domain predicate's redraw."""
        return self._draw(_Fresh(self.digest ^ (salt * _GOLDEN) ^ _FRESH_SALT))

    def __repr__(self) -> str:  # what Hypothesis prints for a falsifying example
        return f"Scenario(args={self.args!r})"


@st.composite
def _scenarios(draw: st.DrawFn, plans: list[_ArrayPlan]) -> Scenario:
    started = time.perf_counter()
    try:
        recorder = _Recorder(draw)
        args = _draw_arguments(recorder.draw_fn, plans)
        return Scenario(plans, args, recorder.log)
    finally:
        DRAW_SECONDS[0] += time.perf_counter() - started


def scenarios(dtype: Any, shapes: Sequence[Any], *, domain: Any = None) -> st.SearchStrategy[Scenario]:
    """Hypothesis strategy of `Scenario`s: the arguments drawn as by `arguments`, less its single-valued
    choices (`_Recorder.fixed`), with their siblings on demand. Raises as `arguments` does."""
    return _scenarios(plans_for(dtype, shapes, domain))
