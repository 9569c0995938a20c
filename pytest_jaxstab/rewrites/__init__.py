"""Rewrites: the pattern DSL, the rule registry and the built-in catalogues.

- ``STABILITY``: the default catalogue ``jst.stabilize`` applies (numerical stability, same math).
- ``PERFORMANCE``: opt-in rules that change the program's shape for speed (e.g. moving a reduction
  into the ``scan`` that produces its input); they may reorder float sums.
- ``RESULT_CHANGING``: rules that change results on purpose (``inv_jitter``); applied only when named.
- ``"mean"`` (registered, opt-in: ``rules=[*STABILITY, "mean"]``): ``sum(x) / n`` re-summed scaled by
  a power of two where the sum overflows (a second reduction on every mean).
- ``STABILITY_FAST``: the default catalogue with ``logsumexp_fast``/``log_softmax_fast`` (the
  library's formulas: no overflow, ``jax.nn`` speed) in place of the accurate ``logsumexp`` and
  ``log_softmax`` (about 1.8x slower on CPU, but they keep the small terms): ``rules=STABILITY_FAST``.

Write your own rule with :mod:`pattern` and :class:`Rule`, then pass it (``rules=[...]``) or
:func:`register` it to name it, and check it with ``jst.verify_rule`` (the check stage's, since it
needs the oracle): every alternative of its pattern, in the smallest program that matches it, is never
worse than the program as written.
"""

# This module is the stage's public face: it re-exports the engine, the forms and the catalogue, and
# imports nothing of a later stage (a rule's verifier, which needs the oracle, is `jst.verify_rule`,
# from `_check`). No module of the package imports it: the stages import `rewrites.engine`,
# `rewrites.catalogue`, `rewrites.forms` directly.
from . import forms as forms
from .catalogue import PERFORMANCE as PERFORMANCE
from .catalogue import RESULT_CHANGING as RESULT_CHANGING
from .catalogue import STABILITY as STABILITY
from .catalogue import STABILITY_FAST as STABILITY_FAST
from .engine import _pattern as pattern
from .engine._engine import Applied as Applied
from .engine._engine import Explanation as Explanation
from .engine._engine import rewrite_jaxpr as rewrite_jaxpr
from .engine._match import Match as Match
from .engine._rule import Rule as Rule
from .engine._rule import get as get
from .engine._rule import register as register
from .engine._rule import registered as registered


def __dir__() -> list[str]:
    return sorted(__all__)

__all__ = [
    "RESULT_CHANGING",
    "PERFORMANCE",
    "STABILITY",
    "STABILITY_FAST",
    "Applied",
    "Explanation",
    "Match",
    "Rule",
    "forms",
    "get",
    "pattern",
    "register",
    "registered",
    "rewrite_jaxpr",
]
