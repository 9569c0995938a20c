"""The one module that touches Hypothesis's private API (``hypothesis.internal``, private attributes).

``_compat.py`` plays this role for JAX. Everything else uses Hypothesis's public API only, so a
Hypothesis release that moves an internal changes this file and nothing else; every function here
degrades to "no change" on a Hypothesis without the internal it needs. Tested on the Hypothesis of
``make test`` and ``make test-compat`` (6.170).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

__all__ = ["without_local_constants"]


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
