"""The derivative as a program: ``jst.stabilize(fn, derivatives="program")`` rewrites the JVP too.

The rewrite pass stabilises the primal program; autodiff then differentiates it with each
primitive's JVP rule (and each ``custom_jvp`` rule). Those rules are expressions too, and they lose
the way programs do: ``expm1(x) + 1`` for ``exp(x)``, ``0 · x^-1`` for the derivative of ``x**0``,
``x·x + 1`` under a root. Here the stabilised function's JVP is traced to a jaxpr (primals and
tangents in, primal and tangent outputs out), the catalogue's rules (and the tangent-only
``structural_zero``) are applied to THAT program, and where they change it the rewritten tangent
program is installed as the function's ``jax.custom_jvp`` rule. Values are the stabilised primal's,
bit for bit (the rule returns them from the primal program, not from the rewritten JVP); grad, jit
and vmap compose. A second derivative differentiates the installed tangent program as autodiff
does (its own JVP is not rewritten: not done yet).

The tangent program is built on the first differentiation per input signature, never on a plain
call. It is installed only when it stays linear in the tangents (checked by tracing its transpose:
reverse mode transposes it), and never for a program holding a ``custom_vjp`` (JAX does not
forward-differentiate those).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .. import _compat
from .engine._engine import rewrite_jaxpr
from .engine._pattern import const, op, var
from .engine._rule import Rule

__all__ = ["STRUCTURAL_ZERO", "has_custom_vjp", "tangent_rules", "with_tangent_program"]


def _structural_zero(y: Any) -> Any:
    """0 · y = 0 in a derivative program: the literal 0 is a partial derivative that vanishes
    identically (``d/dx x**0``'s coefficient), whose product with an infinite partial (``x^-1`` at 0)
    contributes nothing; ``0 · inf = NaN`` there is an artefact of evaluating the chain rule."""
    return jnp.zeros_like(y)


#: Tangent programs only (never a primal: ``0 · inf`` is NaN there by IEEE, and a user may mean it).
STRUCTURAL_ZERO = Rule("structural_zero", op("mul", const(0.0), var("y")), _structural_zero)


def tangent_rules(chosen: tuple[Rule, ...]) -> tuple[Rule, ...]:
    """The rules a tangent program is rewritten with: the chosen value rules (a derivative-only rule
    already gave the primal its derivative; in a JVP program it would only re-wrap it) and
    ``structural_zero``."""
    return (*(r for r in chosen if not r.derivative_only), STRUCTURAL_ZERO)


def has_custom_vjp(closed: Any) -> bool:
    """Whether the program (nested calls included) holds a ``custom_vjp`` call."""
    return any(_compat.primitive_name(e).startswith("custom_vjp") for _, e in _compat.walk(closed))


def _differentiable(aval: Any) -> bool:
    return bool(jnp.issubdtype(aval.dtype, jnp.inexact))


def _build(run: Callable[..., list[Any]], avals: list[Any], rules: tuple[Rule, ...]) -> Any:
    """The rewritten JVP program of ``run`` at these input avals, or None where no rule changes it,
    it cannot be traced, or the rewrite is not linear in the tangents."""
    diff = [k for k, a in enumerate(avals) if _differentiable(a)]
    n_in = len(avals)

    def jvp_program(*flat: Any) -> list[Any]:
        primals, tangents = list(flat[:n_in]), list(flat[n_in:])
        full = [np.zeros(a.shape, jax.dtypes.float0) for a in avals]
        for k, t in zip(diff, tangents):
            full[k] = t
        outs, outs_t = jax.jvp(lambda *p: run(*p), primals, full)
        return [*outs, *(t for o, t in zip(outs, outs_t) if _differentiable(_compat.typeof(o)))]

    specs = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in avals]
    try:
        closed, _, _ = _compat.trace(jvp_program, *specs, *(specs[k] for k in diff))
    except Exception:  # any failure to forward-differentiate (JAX raises several types): keep AD's
        return None
    new, applied = rewrite_jaxpr(closed, rules, describe=True)
    if not applied:
        return None
    n_primal = len(jax.eval_shape(lambda *p: run(*p), *specs))
    t_specs = [specs[k] for k in diff]

    def tangent_part(p: list[Any], *t: Any) -> list[Any]:
        return _compat.eval_jaxpr(new, *p, *t)[n_primal:]

    try:  # reverse mode transposes the tangent program: it must stay linear in the tangents
        outs_spec = jax.eval_shape(lambda p, *t: tangent_part(p, *t), specs, *t_specs)
        jax.eval_shape(lambda p, ct: jax.linear_transpose(lambda *t: tangent_part(p, *t), *t_specs)(ct),
                       specs, outs_spec)
    except Exception:  # not transposable (JAX raises several types): keep AD's derivative
        return None
    return new


def with_tangent_program(run: Callable[..., list[Any]], avals: list[Any], rules: tuple[Rule, ...]
                         ) -> Callable[..., list[Any]]:
    """``run`` (the stabilised program, flat leaves in, flat outputs out) with its JVP rewritten by
    ``rules`` where that changes it; ``run`` itself elsewhere. The tangent program is built lazily,
    on the first differentiation."""
    built: list[Any] = []

    @jax.custom_jvp
    def wrapped(*leaves: Any) -> list[Any]:
        return run(*leaves)

    @wrapped.defjvp
    def _wrapped_jvp(primals: Any, tangents: Any) -> Any:
        if not built:
            built.append(_build(run, avals, rules))
        prog = built[0]
        if prog is None:  # nothing to repair: autodiff's own JVP of the stabilised program
            return jax.jvp(lambda *p: run(*p), list(primals), list(tangents))
        outs = run(*primals)  # the values from the primal program, bit for bit
        diff = [t for a, t in zip(avals, tangents) if _differentiable(a)]
        got = _compat.eval_jaxpr(prog, *primals, *diff)[len(outs):]
        out_t, it = [], iter(got)
        for o in outs:
            aval = _compat.typeof(o)
            out_t.append(next(it) if _differentiable(aval) else np.zeros(aval.shape, jax.dtypes.float0))
        return outs, out_t

    return wrapped
