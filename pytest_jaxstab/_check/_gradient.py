"""Gradients as a checked output (``jst.check(..., grad=True)``): the derivative programs.

The derivative of a function is a program too. For the function as written, JAX's reverse mode
(``jax.vjp``, cotangent ones: ``jax.grad`` for a scalar output) builds a jaxpr of
ordinary primitives; the oracle evaluates that jaxpr exactly, and since automatic differentiation
over the reals gives the real derivative, its exact value is the exact gradient of the function as
written. Where the function calls a library routine judged by its mathematics (``log_ndtr``,
``ndtri``, one declared with ``jst.oracles.define``), the reference is the derivative of that exact
function instead (``oracles/library/_reference.py``), never the derivative of the routine's body.
The rewritten function's derivative is JAX's derivative of the *rewritten* program (custom
derivative rules of the stable forms included), i.e. what ``jax.grad(jst.stabilize(fn))`` runs,
never a rewrite of the derivative program. Both then go through the same pipeline as values do:
scored against the oracle, NaN/Inf origins found in the backward pass, figures and witnesses.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .. import _compat
from ._trace import TracedCase

__all__ = ["Derivative", "derivative_case", "derivative_program", "with_gradient"]


def derivative_program(closed: Any, judged_outputs: list[int]) -> Any:
    """The closed jaxpr of the VJP of ``closed``'s floating outputs with cotangent ones.

    Its inputs are ``closed``'s inputs; its outputs, one per input, the gradient of the sum of the
    judged outputs (``jax.grad`` of a scalar function).
    """
    fun = _compat.as_fun(closed)

    def gradient(*args: Any) -> list[Any]:
        def floats(*a: Any) -> list[Any]:
            outs = fun(*a)
            return [outs[i] for i in judged_outputs]

        outs, vjp = jax.vjp(floats, *args)
        return list(vjp([jnp.ones_like(o) for o in outs]))

    avals = [jax.ShapeDtypeStruct(_compat.aval(v).shape, _compat.aval(v).dtype)
             for v in _compat.invars(closed)]
    return jax.make_jaxpr(gradient)(*avals)


@dataclasses.dataclass
class Derivative:
    """The derivative programs of a case.

    Attributes:
      case: the original's derivative (what ``jax.grad`` of the function runs) as a TracedCase.
      rewritten: the rewritten program's derivative.
      reference: the program the oracle evaluates exactly: ``case.closed`` itself unless the function
        calls library routines, which it differentiates by their exact derivatives
        (``oracles/library/_reference.py``).
      note: what the reference leaves to a body's derivative (empty when nothing).
    """

    case: TracedCase
    rewritten: Any
    reference: Any
    note: str = ""


#: The note of a gradient whose reference keeps a routine's body derivative: its start and its end
#: (the routines' names go between); the case's own note repeats it (``with_gradient``).
_BODY_NOTE = ("The gradient's reference for ",
              " is the derivative of the routine's body evaluated exactly, not the derivative of the "
              "function it stands for (no exact derivative is known to the oracle: declare one with "
              "jst.oracles.define(..., derivative=...)).")


def derivative_case(traced: TracedCase, rewritten: Any) -> Derivative:
    """The derivative programs of ``traced`` and of its ``rewritten`` program, and the reference."""
    from ..oracles.library._reference import reference_primal

    grad_closed = derivative_program(traced.closed, traced.judged_outputs)
    grad_rewritten = (grad_closed if rewritten is traced.closed
                      else derivative_program(rewritten, traced.judged_outputs))
    primal, kept = reference_primal(traced.closed)
    reference = grad_closed if primal is traced.closed else derivative_program(primal, traced.judged_outputs)
    note = "" if not kept else f"{_BODY_NOTE[0]}{', '.join(kept)}{_BODY_NOTE[1]}"
    n = len(_compat.outvars(grad_closed))
    out_dtypes = [np.dtype(_compat.aval(v).dtype) for v in _compat.outvars(grad_closed)]
    grad_case = dataclasses.replace(
        traced, fn=_compat.as_fun(grad_closed), closed=grad_closed,
        out_tree=jax.tree_util.tree_structure(list(range(n))), judged_outputs=list(range(n)),
        out_dtypes=out_dtypes)
    return Derivative(grad_case, grad_rewritten, reference, note)


def with_gradient(judge_case: Callable[..., Any], case: Any, settings: Any, run: Any) -> Any:
    """``judge_case`` for the values, then for the gradients (``result.gradient``).

    ``case`` is the validated case, ``run`` its ``RunContext``. The gradient's check re-checks
    ``run.gradient_witnesses`` (a baseline's worst inputs of the gradient) first, then the values'
    witnesses; the values' check never sees the gradient's.

    The case fails when either fails; the message then says which (the gradient's names the
    backward-pass origin of a NaN/Inf, as a value's does).
    """
    result = judge_case(case, settings, run)
    grad_case = dataclasses.replace(case, case_id=f"{result.nodeid}[grad]")
    grad_run = dataclasses.replace(run, witnesses=(*run.gradient_witnesses, *run.witnesses))  # inputs
    gradient = judge_case(grad_case, settings, grad_run, derivative=True)
    gradient.nodeid = result.nodeid
    result.gradient = gradient
    start = gradient.note.find(_BODY_NOTE[0])
    if start >= 0:  # said on the case too (reports show the case's note): never silently
        end = gradient.note.find(_BODY_NOTE[1], start) + len(_BODY_NOTE[1])
        result.note = f"{result.note} {gradient.note[start:end]}".strip()
    if gradient.outcome == "failed":
        result.outcome = "failed"
        note = "The gradient (jax.grad, a VJP with ones for non-scalar outputs) fails:\n"
        result.message = (result.message + "\n\n" if result.message else "") + note + gradient.message
    return result
