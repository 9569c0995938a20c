"""``primal_derivative``: a custom derivative rule replaced by the derivative of the stabilised primal.

``jax.custom_jvp`` / ``jax.custom_vjp`` attach a hand-written derivative to a function. The rewrite
pass stabilises the primal body and keeps the rule (it still differentiates the same mathematical
function). Where the check's gradient report proves the rule wrong, or inaccurate where the primal
is now accurate, this opt-in rule inlines the (already stabilised) primal body in place of the call,
so that AD differentiates it instead. It changes gradients on purpose, so it is in
``RESULT_CHANGING`` and applies only when named (``jst.stabilize(f, custom_derivatives="primal")``
or ``rules=[*STABILITY, "primal_derivative"]``).
"""

from __future__ import annotations

from typing import Any

from ... import _compat
from ..._primitives import CUSTOM_DERIVATIVES
from ..engine._match import Graph, Match
from ..engine._rule import Rule

__all__ = ["PRIMAL_DERIVATIVE"]


def _match_custom(g: Graph, i: int) -> Match | None:
    eqn = g.eqns[i]
    if _compat.primitive_name(eqn) not in CUSTOM_DERIVATIVES or len(eqn.outvars) != 1:
        return None
    body = eqn.params.get("call_jaxpr")
    if body is None:
        return None
    captures: dict[str, Any] = {"body": _compat.as_closed(body), "n": len(eqn.invars)}
    atoms: dict[str, Any] = {}
    for k, a in enumerate(eqn.invars):
        if _compat.is_literal(a):
            captures[f"x{k}"] = _compat.literal_value(a)
        else:
            captures[f"x{k}"] = a
            atoms[f"x{k}"] = a
    return Match(i, captures, atoms, {i})


def _primal_derivative(body: Any, n: int, **operands: Any) -> Any:
    """custom_jvp_call(f, rule)(x) = f(x): the primal body, inlined, is differentiated by AD."""
    (out,) = _compat.eval_jaxpr(body, *(operands[f"x{k}"] for k in range(n)))
    return out


PRIMAL_DERIVATIVE = Rule("primal_derivative", None, _primal_derivative, matcher=_match_custom,
                         roots=CUSTOM_DERIVATIVES,
                         composable=True)
