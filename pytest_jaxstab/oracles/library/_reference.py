"""The gradient's reference: the derivative of the exact function, where the program calls routines.

``jst.check(..., grad=True)`` runs JAX's derivative program and judges it against an exact reference.
For ordinary primitives that reference is the derivative program evaluated exactly (automatic
differentiation over the reals is exact). A library routine (``_library``) is different: JAX
differentiates its *body* (``ndtri``'s rational approximations, ``i0``'s Chebyshev series), or a
custom rule built on its float value (``log_ndtr``'s ``exp(log_pdf - log_ndtr)``), and neither is the
derivative of the function the routine stands for.

So the reference is built from a copy of the function in which each routine call is one equation of
an oracle-only primitive, ``jaxstab_exact``, whose JVP is the same primitive carrying the routine's
exact partial derivative (``_derivatives``, or the ``derivative=`` a user gave
:func:`~pytest_jaxstab.oracles.define`); JAX's reverse mode over that copy gives a program whose exact
value is the derivative of the exact function. The program JAX runs is not touched. A routine without
a known derivative (a ``define`` without ``derivative=``, ``expn`` with a variable order) keeps the
derivative of its body, and the check says so (:func:`reference_primal`'s
second result).
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np

from ... import _compat
from ..._primitives import CALLS, CUSTOM_DERIVATIVES
from ._exact import EXACT, partials_of
from ._routines import Routine, lookup

__all__ = ["partials_of", "reference_primal"]


def _match(g: Any, i: int) -> Any:
    from ...rewrites.engine._match import Match

    eqn = g.eqns[i]
    name = _compat.primitive_name(eqn)
    if name not in CALLS and name not in CUSTOM_DERIVATIVES:
        return None
    routine = lookup(eqn)
    if routine is None or _blocked(routine, eqn):
        return None
    out = _compat.aval(eqn.outvars[0])
    lead = _compat.leading_consts(eqn)
    ops = eqn.invars[lead:lead + routine.nargs]
    captures: dict[str, Any] = {"routine": routine, "shape": tuple(out.shape), "dtype": np.dtype(out.dtype),
                                "n": len(ops)}
    atoms: dict[str, Any] = {}
    for k, a in enumerate(ops):
        if _compat.is_literal(a):
            captures[f"x{k}"] = np.asarray(_compat.literal_value(a), dtype=_compat.aval(a).dtype)
        else:
            captures[f"x{k}"] = atoms[f"x{k}"] = a
    # a routine of several results (sici, fresnel): the others are the match's extra outputs
    return Match(i, captures, atoms, {i}, extra_outputs=tuple(eqn.outvars[1:]))


def _blocked(routine: Routine, eqn: Any) -> bool:
    """Whether the routine's call keeps its body's derivative: no exact derivative for an argument that
    is not a literal."""
    parts = partials_of(routine)
    if parts is None:
        return True
    lead = _compat.leading_consts(eqn)
    ops = eqn.invars[lead:lead + routine.nargs]
    return any(p is None and not _compat.is_literal(a) for p, a in zip(parts, ops))


def _replace(routine: Routine, shape: tuple[int, ...], dtype: np.dtype[Any], n: int, **ops: Any) -> Any:
    """A routine call as one ``jaxstab_exact`` equation (its exact value; its exact derivative)."""
    outs = EXACT.bind(*(jnp.asarray(ops[f"x{k}"]) for k in range(n)), routine=routine, shape=shape,
                      dtype=dtype)
    return outs[0] if routine.nout == 1 else (outs[0], list(outs[1:]))


def reference_primal(closed: Any) -> tuple[Any, list[str]]:
    """``closed`` with every routine call that has an exact derivative as a ``jaxstab_exact`` equation,
    and the names of the routines it calls whose gradient reference stays their body's derivative
    (sorted, once each). ``closed`` itself when it calls no routine with an exact derivative."""
    from ...rewrites.engine._engine import rewrite_jaxpr
    from ...rewrites.engine._rule import Rule
    from ._inline import inline_routines

    closed = inline_routines(closed)
    kept: set[str] = set()
    found = False
    for routine, eqn in _routine_calls(closed):
        if _blocked(routine, eqn):
            kept.add(routine.name)
        else:
            found = True
    if not found:
        return closed, sorted(kept)
    rule = Rule("exact_routine", None, _replace, matcher=_match, complex_ok=True)  # the same function
    new, _ = rewrite_jaxpr(closed, [rule])
    return new, sorted(kept)


def _routine_calls(closed: Any) -> list[tuple[Routine, Any]]:
    """The routine calls of ``closed`` and of its sub-jaxprs, never looking inside a routine's body
    (the oracle never enters it)."""
    out: list[tuple[Routine, Any]] = []
    for eqn in _compat.eqns(closed):
        routine = lookup(eqn)
        if routine is not None:
            out.append((routine, eqn))
            continue
        for _, sub in _compat.subjaxprs(eqn):
            out.extend(_routine_calls(sub))
    return out
