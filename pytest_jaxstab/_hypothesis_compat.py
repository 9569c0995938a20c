"""The one module that touches Hypothesis's private API (``hypothesis.internal``, private attributes).

``_compat/`` plays this role for JAX. Everything else uses Hypothesis's public API only, so a
Hypothesis release that moves an internal changes this file and nothing else; every function here
degrades to "no change" on a Hypothesis without the internal it needs. Tested on the Hypothesis of
``make test`` and ``make test-compat`` (6.170).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["record_fixed_integer", "without_local_constants"]


@contextlib.contextmanager
def without_local_constants() -> Iterator[None]:
    """Keeps the constants of the project's own modules out of Hypothesis's draws, for the block.

    Hypothesis (6.131+) draws about 5% of its choices from literals found in the loaded local modules.
    A fixed-seed run (a baseline being saved or compared) must draw the same inputs when unrelated code
    changes, so it sees only Hypothesis's built-in constants. On a Hypothesis without this machinery,
    nothing changes.
    """
    try:
        from hypothesis.internal.conjecture import providers
        from hypothesis.internal.constants_ast import Constants

        provider = providers.HypothesisProvider
        original = provider.__dict__["_local_constants"]
        cache = providers.CONSTANTS_CACHE.cache
    except (ImportError, AttributeError, KeyError):  # pragma: no cover - other Hypothesis versions
        yield
        return
    empty = Constants()
    provider._local_constants = property(lambda self: empty)  # type: ignore[assignment]
    cache.clear()  # it holds the constants allowed per kind of draw, local ones included
    try:
        yield
    finally:
        provider._local_constants = original  # type: ignore[assignment]
        cache.clear()


def record_fixed_integer(draw: Callable[..., Any], value: int) -> int | None:
    """Records ``value`` as a single-valued integer choice through the example's own ``draw_integer``
    (inside a composite strategy ``draw`` is a bound method of the example's data), without building a
    strategy per value. None where this Hypothesis has no such method: the caller draws
    ``st.integers(value, value)`` instead, which records the same choice, only slower."""
    draw_integer = getattr(getattr(draw, "__self__", None), "draw_integer", None)
    if draw_integer is None:
        return None
    return int(draw_integer(min_value=value, max_value=value))
