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
:func:`register` it to name it, and check it with :func:`verify`: every alternative of its pattern, in
the smallest program that matches it, is never worse than the program as written.
"""

# This module is the stage's public face, not part of the stage: it re-exports the engine, the forms
# and the catalogue, and `verify` calls the check stage (which needs the oracle). It sits above every
# stage (docs/architecture.md, "Stage order"), and no module of the package imports it: the stages
# import `rewrites.engine`, `rewrites.catalogue`, `rewrites.forms` directly.
from typing import Any as _Any

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


def verify(rule: Rule, **options: _Any) -> _Any:
    """Check every alternative of ``rule``'s pattern for soundness with the exact oracle.

    Each alternative gets the smallest program that matches it (built from the pattern, or one of the
    rule's ``examples``), run under ``jit``, ``vmap``, ``grad``, inside a sum and with the matched
    intermediate used elsewhere, as written and rewritten by ``rule`` alone, on inputs drawn in its
    ``example_domain``. An alternative is unsound when the rewritten program is worse than the original
    beyond rounding at some input (more than 2 bits beyond the original's error and 5 bits in all, past
    what the problem's conditioning explains; or non-finite where the original is finite).

    Args:
      rule: the :class:`Rule` to check.
      **options: ``examples`` (more programs made of the pattern), ``inputs`` (per context, default 12),
        ``seed`` (default 0), ``contexts`` (a subset of ``("jit", "vmap", "grad", "sum", "shared")``).

    Returns:
      A ``Verification``: ``.ok``, one report per alternative (``.alternatives``: status "sound",
      "unsound", "not built" or "not checked", the program and the failing input), and a readable
      ``str()``.

    Example::

        x = pattern.var("x")
        rule = Rule("log_sqrt", pattern.op("log", pattern.op("sqrt", x)), lambda x: 0.5 * jnp.log(x))
        report = jst.rewrites.verify(rule)
        assert report.ok, report
    """
    # The judge lives in the check stage (it needs the oracle and the fuzzer's draws): this namespace
    # sits above it (docs/architecture.md, "Stage order"), and imports it on call so that importing
    # the rewrites imports neither the oracle nor Hypothesis ("Data flow").
    from .._check._verify import verify_rule

    return verify_rule(rule, **options)



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
    "verify",
]
