"""Where the array strategies' draws come from: Hypothesis, or a `Source` of ours (see `_scenario`).

The classes draw through five helpers only (`_floats.index`, `_classes.draw_bytes`, `_classes.integer`,
`_classes.fixed` and the element redraws of `_arrays._ArrayPlan.repair`). Each asks `source_of(draw)`
first: inside a Hypothesis strategy `draw` is the example's own method and the answer is None (the
choice goes to Hypothesis); when `draw` is a bound method of a `Source`, the source answers instead
(recording, replaying, or drawing from a seeded generator).
"""

from __future__ import annotations

from typing import Any, cast

from hypothesis import strategies as st

from .._errors import ArgumentTypeError

__all__ = ["Source", "source_of"]


class Source:
    """Answers the array strategies' draws in place of Hypothesis. `draw` is the callable handed to the
    classes as their `draw`; the other methods are the five kinds of draw."""

    #: Whether per-element randomness is re-seeded (`_classes.Header.noise`, `_classes.element_bytes`).
    renews_elements = False
    #: Whether single-valued choices (and the "wide" choice that lets Hypothesis's shrinker replay them
    #: as its own, `_classes.wide`) are recorded; a check shrinks with its own shrinker instead.
    records_fixed = False

    def draw(self, strategy: Any) -> Any:
        raise ArgumentTypeError(f"the array strategies draw through their helpers, not draw({strategy!r})")

    @property
    def draw_fn(self) -> st.DrawFn:
        """`draw`, typed as the `draw` argument the strategies take."""
        return cast(st.DrawFn, self.draw)

    def index(self, n: int) -> int:
        raise NotImplementedError

    def bytes(self, size: int) -> bytes:
        raise NotImplementedError

    def integer(self, lo: int, hi: int) -> int:
        raise NotImplementedError

    def fixed(self, value: int) -> int:
        raise NotImplementedError

    def element(self, plan: Any) -> Any:
        """A value of `plan`'s domain (its predicate included) in place of one the predicate rejects."""
        raise NotImplementedError

    def repaired(self) -> None:
        """Called after an array's rejected elements were replaced."""

    def reseed(self, seed: int) -> int:
        """The seed per-element randomness uses where the example's used `seed`."""
        return seed


def source_of(draw: Any) -> Source | None:
    """The `Source` behind `draw`, or None for a Hypothesis draw."""
    owner = getattr(draw, "__self__", None)
    return owner if isinstance(owner, Source) else None
