"""``jaxstab_exact``: one oracle-only equation standing for a library routine, and its exact derivative.

The primitive both library passes write: the gradient's reference (``_reference``: a routine call
with an exact derivative) and the routines JAX inlines (``_inline``: a region of the routine's
equations). Its JVP is the same primitive carrying the routine's exact partial derivative
(``_derivatives``, or the ``derivative=`` a user gave :func:`~pytest_jaxstab.oracles.define`).
"""

from __future__ import annotations

import functools
from typing import Any

import jax.numpy as jnp
import numpy as np

from ... import _compat
from ..core._common import OracleError
from ._derivatives import DERIVATIVES
from ._routines import EXACT_PRIMITIVE, Routine

__all__ = ["EXACT", "differentiable", "partials_of"]


def partials_of(routine: Routine) -> tuple[Any, ...] | None:
    """The routine's exact partial derivatives (one per argument, None where there is none), or None."""
    if routine.origin == "user" or routine.partials is not None:  # a user's, or one per static order
        return routine.partials
    return DERIVATIVES.get(routine.name)


def differentiable(closed: Any) -> bool:
    """Whether JAX can differentiate ``closed``'s ``jaxstab_exact`` equations (sub-jaxprs included):
    each has an exact partial derivative for every operand that is not a literal. A gradient's
    reference holds the routines' partials (``d<name>/d(argument i)``), which have none: its own
    derivative (the check's conditioning of a gradient) cannot be built, and the caller must take
    another way (finite differences through the oracle) rather than meet the ``OracleError`` of
    ``_jvp`` while tracing."""
    for eqn in _compat.eqns(closed):
        if _compat.primitive_name(eqn) == EXACT_PRIMITIVE:
            parts = partials_of(eqn.params["routine"])
            if any((parts is None or i >= len(parts) or parts[i] is None) and not _compat.is_literal(a)
                   for i, a in enumerate(eqn.invars)):
                return False
            continue
        if not all(differentiable(sub) for _, sub in _compat.subjaxprs(eqn)):
            return False
    return True


@functools.cache
def _partial_routine(routine: Routine, i: int) -> Routine:
    parts = partials_of(routine)
    assert parts is not None and parts[i] is not None
    return Routine(f"d{routine.name}/d(argument {i})", parts[i], routine.nargs, routine.origin,
                   nout=routine.nout, complex=routine.complex)


def _abstract(*, routine: Routine, shape: tuple[int, ...], dtype: np.dtype[Any]) -> list[tuple[Any, Any]]:
    return [(shape, dtype)] * routine.nout


def _jvp(primals: Any, tangents: Any, *, routine: Routine, shape: tuple[int, ...], dtype: np.dtype[Any]
         ) -> list[Any]:
    parts = partials_of(routine)
    totals: list[Any] = [None] * routine.nout
    for i, t in enumerate(tangents):
        if t is None:
            continue
        if parts is None or i >= len(parts) or parts[i] is None:
            raise OracleError(f"no exact derivative of {routine.name} with respect to its argument {i}: "
                              "the reference program cannot be built")
        ds = EXACT.bind(*primals, routine=_partial_routine(routine, i), shape=shape, dtype=dtype)
        for k, d in enumerate(ds):
            term = jnp.broadcast_to(d * jnp.asarray(t).astype(dtype), shape)
            totals[k] = term if totals[k] is None else totals[k] + term
    return totals


EXACT = _compat.oracle_only_primitive(
    EXACT_PRIMITIVE, _abstract, _jvp,
    "jaxstab_exact stands for a library routine in a program only the exact oracle evaluates")
