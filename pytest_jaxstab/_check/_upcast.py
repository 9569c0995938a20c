"""The upcast transformation: a low-precision program with some of its source lines computed in ``high``.

An interpreter over the program's jaxpr (JAX's "Writing custom interpreters"; the same binding as the
rewrite pass, each equation bound inside its own ``source_info`` so the tuned program still points at
the user's lines). An equation whose user line (``file:line``) is in the plan is bound on operands
converted to ``high``, with the dtype it names (``convert_element_type``'s ``new_dtype``,
``dot_general``'s ``preferred_element_type``) raised too; its results stay in ``high``. A value is
converted back to its declared low dtype only where an equation NOT in the plan reads it, and at the
program's outputs. So a chain of planned lines rounds once, where the low program reads its result,
not after each step: rounding the intermediate between two planned lines would throw away what the
first line gained (a one-pass variance needs ``mean(x)`` and ``mean(x * x)`` unrounded to cancel well).

What is entered: ``jit`` calls and the primal bodies of ``custom_jvp``/``custom_vjp`` functions are
inlined when one of their equations is planned (their lines are the user's lines that called them,
``_compat.refine_source``), otherwise bound whole as they were. An inlined custom-derivative body is
differentiated by AD (its rule was written for the low-precision body). ``scan``, ``while`` and ``cond``
are bound whole in their declared dtypes (their bodies' types are fixed); a plan never names them.

Nothing here chooses lines: ``_precision/_search`` does, ``_precision/_plan`` packages the result. The
check uses it too: with ``lines=None`` every float equation is raised, the program computed in float64
for the conditioning's derivatives (``_conditioning``). It lives in ``_check`` so both can reach it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .. import _compat as C
from .._primitives import ACCUMULATING, CALLS, CUSTOM_DERIVATIVES, REDUCTIONS

__all__ = ["FloatSite", "body_of", "enterable", "float_sites", "is_float", "run_upcast", "source_of",
           "upcast_fn", "work"]

#: Parameters that name the dtype of an equation's result: raised with its operands.
_DTYPE_PARAMS = ("new_dtype", "preferred_element_type", "dtype", "accumulation_type")
_ENTERED = CALLS | CUSTOM_DERIVATIVES
#: Never bound in ``high``: their meaning is the bit layout or the rounding of the declared dtype (a
#: stable form builds ``2^k`` by a bitcast of the low dtype's exponent field; ``reduce_precision`` is a
#: rounding the user asked for), or they hold sub-programs of fixed types.
_KEEP_DECLARED = frozenset({"bitcast_convert_type", "reduce_precision", "nextafter", "scan", "while", "cond"})


def is_float(dtype: Any) -> bool:
    try:
        return bool(jnp.issubdtype(dtype, jnp.floating))
    except TypeError:
        return False


def source_of(outer: Any, eqn: Any, nested: bool) -> Any:
    return C.refine_source(outer, eqn) if nested else C.source_line(eqn)


def body_of(eqn: Any) -> tuple[Any, int]:
    """The body an entered equation runs, and how many of its operands precede the body's inputs."""
    if C.primitive_name(eqn) in CUSTOM_DERIVATIVES:
        body, _ = C.custom_call_parts(eqn)
        return body, 0
    return C.subjaxprs(eqn)[0][1], 0


def enterable(eqn: Any) -> bool:
    if C.primitive_name(eqn) not in _ENTERED:
        return False
    try:
        body, _ = body_of(eqn)
    except Exception:  # an unfamiliar parameter layout: bound whole
        return False
    return len(C.invars(body)) == len(eqn.invars)


# ------------------------------------------------------------------------------------------ work
class FloatSite:
    """One float equation of the program (calls entered): its user line and its work."""

    __slots__ = ("location", "primitive", "work")

    def __init__(self, location: str | None, primitive: str, work: int) -> None:
        self.location, self.primitive, self.work = location, primitive, work


def work(eqn: Any) -> int:
    """The floating-point work of one equation, for ``PrecisionPlan.high_share``: the element count of
    its outputs; a reduction counts its input elements, a ``dot_general`` its multiply-adds (output
    elements times the contracted size): the work a float unit does, not the data it writes."""
    outs = [C.aval(v) for v in eqn.outvars]
    n_out = sum(math.prod(a.shape) for a in outs if hasattr(a, "shape"))
    name = C.primitive_name(eqn)
    if name == "dot_general":
        (lhs_contract, _), _ = eqn.params["dimension_numbers"]
        lhs = C.aval(eqn.invars[0]).shape
        return max(n_out, 1) * max(math.prod(lhs[d] for d in lhs_contract), 1)
    if name in REDUCTIONS or name in ACCUMULATING:
        return max(sum(math.prod(C.aval(v).shape) for v in eqn.invars if hasattr(C.aval(v), "shape")), n_out)
    return n_out


def float_sites(closed: Any) -> list[FloatSite]:
    """Every float equation of ``closed`` with its line and work, ``jit`` and custom-derivative bodies
    entered (their equations counted, not the call), in program order."""
    return list(_sites(closed, None, False))


def _sites(closed: Any, outer: Any, nested: bool) -> Iterator[FloatSite]:
    for eqn in C.eqns(closed):
        src = source_of(outer, eqn, nested)
        if enterable(eqn):
            yield from _sites(body_of(eqn)[0], src, True)
            continue
        if any(is_float(C.aval(v).dtype) for v in eqn.outvars if hasattr(C.aval(v), "dtype")):
            yield FloatSite(None if src is None else str(src), C.primitive_name(eqn), work(eqn))


# ---------------------------------------------------------------------------------- interpreter
def run_upcast(closed: Any, lines: frozenset[str] | None, high: np.dtype[Any], args: Sequence[Any], *,
               declared: bool = True) -> list[Any]:
    """Evaluate ``closed`` on ``args`` with the equations of ``lines`` in ``high`` (see the module).

    ``lines=None`` raises every float equation (those of ``_KEEP_DECLARED`` aside), whatever its line.
    Traceable (jit, grad, vmap); with no lines it binds the program as written. The outputs have the
    program's declared dtypes, or stay in ``high`` with ``declared=False``.
    """
    outs = _run(closed, lines, np.dtype(high), list(args), None, False)
    if not declared:
        return outs
    return [_to(x, C.aval(v).dtype) for x, v in zip(outs, C.outvars(closed))]


def _to(x: Any, dtype: Any) -> Any:
    if not is_float(dtype) or jnp.result_type(x) == dtype:
        return x
    return lax.convert_element_type(x, dtype)


def _planned(eqn: Any, lines: frozenset[str] | None, src: Any) -> bool:
    if C.primitive_name(eqn) in _KEEP_DECLARED or not any(is_float(C.aval(v).dtype) for v in eqn.outvars):
        return False
    return lines is None or (src is not None and str(src) in lines)


def _touches(closed: Any, lines: frozenset[str] | None, outer: Any, nested: bool) -> bool:
    """Whether a planned line has an equation inside ``closed`` (then a call is entered)."""
    for eqn in C.eqns(closed):
        src = source_of(outer, eqn, nested)
        if enterable(eqn) and _touches(body_of(eqn)[0], lines, src, True):
            return True
        if _planned(eqn, lines, src):
            return True
    return False


def _run(closed: Any, lines: frozenset[str] | None, high: np.dtype[Any], args: list[Any], outer: Any,
         nested: bool) -> list[Any]:
    _, consts = C.parts(closed)
    env: dict[Any, Any] = {}
    for v, x in zip(C.constvars(closed), consts):
        env[v] = x
    for v, x in zip(C.invars(closed), args):
        env[v] = x

    def read(atom: Any) -> Any:
        return C.literal_value(atom) if C.is_literal(atom) else env[atom]

    for eqn in C.eqns(closed):
        src = source_of(outer, eqn, nested)
        invals = [read(a) for a in eqn.invars]
        if enterable(eqn) and _touches(body_of(eqn)[0], lines, src, True):
            body, _ = body_of(eqn)
            with C.user_context(eqn):
                outs = _run(body, lines, high, invals, src, True)
        elif _planned(eqn, lines, src):
            outs = _bind_high(eqn, invals, high)
        else:
            declared = [C.aval(a).dtype for a in eqn.invars]
            outs = C.bind(eqn, [_to(x, d) for x, d in zip(invals, declared)])
        for v, x in zip(eqn.outvars, outs):
            if not C.is_dropvar(v):
                env[v] = x
    return [read(v) for v in C.outvars(closed)]


def _bind_high(eqn: Any, invals: list[Any], high: np.dtype[Any]) -> list[Any]:
    """Bind ``eqn`` with its float operands and result dtypes raised to ``high`` (never lowered: an
    operand already wider than ``high``, float64 under x64, keeps its dtype)."""
    raised = []
    for atom, x in zip(eqn.invars, invals):
        d = np.dtype(C.aval(atom).dtype)
        raised.append(_to(x, high) if is_float(d) and d.itemsize < high.itemsize else x)
    params = dict(eqn.params)
    for key in _DTYPE_PARAMS:
        d = params.get(key)
        if d is not None and is_float(d) and np.dtype(d).itemsize < high.itemsize:
            params[key] = high
    if C.primitive_name(eqn) == "convert_element_type" and params.get("weak_type"):
        params["weak_type"] = False
    return C.bind(eqn, raised, params)


def upcast_fn(closed_of: Callable[..., tuple[Any, Any, Any]], lines: frozenset[str], high: np.dtype[Any]
              ) -> Callable[..., Any]:
    """The tuned function: trace (``closed_of(*args, **kwargs)`` -> closed jaxpr, in and out trees; the
    rewrites applied there), then :func:`run_upcast` on the flat arguments. Traced per call, as
    ``jst.stabilize`` does, so it works at any shape and inside ``jit``/``grad``/``vmap``."""

    def tuned(*args: Any, **kwargs: Any) -> Any:
        closed, _, out_tree = closed_of(*args, **kwargs)
        leaves = jax.tree_util.tree_leaves((args, kwargs))
        return jax.tree_util.tree_unflatten(out_tree, run_upcast(closed, lines, high, leaves))

    return tuned
