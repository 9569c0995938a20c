"""JAX's library functions as calls, in the pattern language: whichever way a release lowers them.

jax 0.12.1 wraps ``jax.nn.logsumexp`` and ``jax.nn.softmax`` in ``custom_jvp`` calls (0.10 and 0.12.0
inline their equations), and ``jax.nn.log_softmax`` is a ``jit`` on every release. A rule that reads
one of them matches both: the equations a release inlines (its own alternatives, kept) and the call,
recognised by the function it wraps (``_compat.library_function``: by name and defining file, never by
the call's equations), with the reduction's axes read from the body. A call's derivative is JAX's rule
for the function (exact: ``softmax`` for ``logsumexp``, ``y·(dx - sum(y·dx))`` for ``softmax``), so
the call means the mathematical function over those axes. A call not recognised is not matched: the
rule does not fire (never a wrong rewrite). The operands are the function's argument and nothing
else (the softmax's ``initial`` of 0.10 to 0.12.0 at its default -inf): ``where=`` and logsumexp's
``b=`` make calls of other arities, which no pattern here matches.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ... import _compat
from ..engine._pattern import AnyOf, Op, any_of, const, op, param

__all__ = ["library_axes", "log_softmax_call", "logsumexp_call", "softmax_call"]

_CALLS = ("jit", "pjit")


def library_axes(name: str, operands: int = 1) -> Callable[[Any], tuple[int, ...] | None]:
    """A ``param(read=...)`` function: the axes a call's body reduces over when the call computes
    the library function ``name`` from ``operands`` operands (its one ``reduce_sum``, and the
    ``reduce_max`` of the shift, if any, over the same axes); None otherwise."""

    def read(body: Any) -> tuple[int, ...] | None:
        if _compat.library_function(body) != name:
            return None
        closed = _compat.as_closed(body)
        if len(_compat.invars(closed)) != operands or len(_compat.outvars(closed)) != 1:
            return None
        found: dict[str, set[tuple[int, ...]]] = {"reduce_sum": set(), "reduce_max": set()}
        count = 0
        for eqn in _compat.eqns(closed):
            prim = _compat.primitive_name(eqn)
            if prim in found:
                found[prim].add(tuple(int(a) for a in eqn.params["axes"]))
                count += prim == "reduce_sum"
        if count != 1 or not found["reduce_max"] <= found["reduce_sum"]:
            return None
        (axes,) = found["reduce_sum"]
        return axes

    # which lowering an alternative needs: tests excuse those the running JAX does not make
    read.library = (name, operands)  # type: ignore[attr-defined]
    return read


def softmax_call(v: Any, axes: str = "axes", **kw: Any) -> AnyOf:
    """``jax.nn.softmax(v)`` as a ``custom_jvp_call`` of ``_softmax``: of ``v`` (jax 0.12.1), or of
    ``v`` and ``initial = -inf`` (0.10 to 0.12.0 with ``jax_softmax_custom_jvp``)."""
    return any_of(op("custom_jvp_call", v, call_jaxpr=param(axes, read=library_axes("softmax")), **kw),
                  op("custom_jvp_call", v, const(-math.inf),
                     call_jaxpr=param(axes, read=library_axes("softmax", 2)), **kw))


def logsumexp_call(v: Any, axes: str = "axes", **kw: Any) -> Op:
    """``jax.nn.logsumexp(v)`` as jax 0.12.1 lowers it: a ``custom_jvp_call`` of ``_logsumexp_impl``."""
    return op("custom_jvp_call", v, call_jaxpr=param(axes, read=library_axes("logsumexp")), **kw)


def log_softmax_call(v: Any, axes: str = "axes", **kw: Any) -> Op:
    """``jax.nn.log_softmax(v)``: a ``jit`` on every supported release."""
    return op(_CALLS, v, jaxpr=param(axes, read=library_axes("log_softmax")), **kw)
