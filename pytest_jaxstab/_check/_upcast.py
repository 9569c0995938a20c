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
with a planned equation inside are rebuilt with their bodies interpreted the same way, and a loop carry
that a planned equation writes is widened to ``high`` for the whole loop (``_upcast_loops``; the others
keep their declared dtypes); without one they are bound whole as written.

Gradients. In a derivative program (``jax.vjp``'s, traced) the backward pass's equations carry the
user's lines of the forward equations they differentiate, under JAX's ``transpose`` transform
(``_compat.in_transpose``; inside a transposed loop body the loop's answer holds). A plan's key
``"file:line"`` raises every equation of that line, forward and backward (what ``jax.grad`` of a
program with the line in float32 computes); ``"file:line (backward)"`` (:func:`backward_key`) raises
only its backward equations, the forward ones staying low.

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
from .._primitives import ACCUMULATING, CALLS, CUSTOM_DERIVATIVES, GLUE, REDUCTIONS
from ._upcast_loops import LOOPS, WidenedCarry, bodies, run_loop

__all__ = ["BACKWARD", "FloatSite", "WidenedCarry", "backward_key", "body_of", "enterable", "float_sites",
           "is_float", "run_upcast", "source_of", "upcast_fn", "widened_carries", "work"]

#: The suffix of a plan key that raises a line's backward-pass equations only (:func:`backward_key`).
BACKWARD = " (backward)"

#: Parameters that name the dtype of an equation's result: raised with its operands.
_DTYPE_PARAMS = ("new_dtype", "preferred_element_type", "dtype", "accumulation_type")
_ENTERED = CALLS | CUSTOM_DERIVATIVES
#: Never bound in ``high``: their meaning is the bit layout or the rounding of the declared dtype (a
#: stable form builds ``2^k`` by a bitcast of the low dtype's exponent field; ``reduce_precision`` is a
#: rounding the user asked for), or they hold sub-programs (rebuilt by ``_upcast_loops`` instead).
_KEEP_DECLARED = frozenset({"bitcast_convert_type", "reduce_precision", "nextafter"}) | LOOPS


#: Operations that move values without computing (exact in any precision): bound in the precision their
#: operands come in (``_bind_high``), never raised on their own.
_MOVES = GLUE | frozenset({"transpose", "slice", "dynamic_slice", "gather", "concatenate", "rev", "pad",
                           "dynamic_update_slice", "select_n"})


def backward_key(line: str) -> str:
    """The plan key that raises only the backward-pass equations of ``line`` (``"file:line"``)."""
    return line + BACKWARD


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
    """One float equation of the program (calls and loop bodies entered): its user line, its work, and
    whether the backward pass made it (``key``: the plan key that raises it alone, its line or, for a
    backward equation, :func:`backward_key` of it; ``keys``: every key that raises it)."""

    __slots__ = ("backward", "location", "primitive", "work")

    def __init__(self, location: str | None, primitive: str, work: int, backward: bool = False) -> None:
        self.location, self.primitive, self.work, self.backward = location, primitive, work, backward

    @property
    def keys(self) -> tuple[str, ...]:
        if self.location is None:
            return ()
        return (self.location, backward_key(self.location)) if self.backward else (self.location,)


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
    entered (their equations counted, not the call), loop and branch bodies too (a scan body's work
    times its length; a while body's once: its trip count is not known; every branch), in program
    order."""
    return list(_sites(closed, None, False, False, 1))


def _sites(closed: Any, outer: Any, nested: bool, backward: bool, times: int) -> Iterator[FloatSite]:
    for eqn in C.eqns(closed):
        src = source_of(outer, eqn, nested)
        bwd = backward or C.in_transpose(eqn)
        if enterable(eqn):
            yield from _sites(body_of(eqn)[0], src, True, bwd, times)
            continue
        name = C.primitive_name(eqn)
        if name in LOOPS:
            n = times * int(eqn.params.get("length", 1)) if name == "scan" else times
            for body in bodies(eqn):
                yield from _sites(body, src, True, bwd, n)
            continue
        if any(is_float(C.aval(v).dtype) for v in eqn.outvars if hasattr(C.aval(v), "dtype")):
            yield FloatSite(None if src is None else str(src), name, work(eqn) * times, bwd)


# ---------------------------------------------------------------------------------- interpreter
#: ``observe(eqn, line, backward, outs)``: called with each equation bound outside loop bodies.
Observer = Callable[[Any, "C.SourceLine | None", bool, list[Any]], None]


class _Ctx:
    """What one run of the interpreter shares: the plan, the precision, what it records."""

    __slots__ = ("high", "lines", "notes", "observe")

    def __init__(self, lines: frozenset[str] | None, high: np.dtype[Any],
                 notes: dict[Any, WidenedCarry] | None, observe: Observer | None) -> None:
        self.lines, self.high, self.notes, self.observe = lines, high, notes, observe


def run_upcast(closed: Any, lines: frozenset[str] | None, high: np.dtype[Any], args: Sequence[Any], *,
               declared: bool = True, carries: dict[Any, WidenedCarry] | None = None,
               observe: Observer | None = None) -> list[Any]:
    """Evaluate ``closed`` on ``args`` with the equations of ``lines`` in ``high`` (see the module).

    ``lines=None`` raises every float equation (those of ``_KEEP_DECLARED`` aside, loop bodies
    entered), whatever its line. Traceable (jit, grad, vmap); with no lines it binds the program as
    written. The outputs have the program's declared dtypes, or stay in ``high`` with
    ``declared=False``. ``carries``, a dict, receives the loop carries widened (:class:`WidenedCarry`);
    ``observe`` is called on each equation bound outside loop bodies with its results (the loss
    scale's magnitudes).
    """
    ctx = _Ctx(lines, np.dtype(high), carries, observe)
    outs = _run(ctx, closed, list(args), None, False, False)
    if not declared:
        return outs
    return [_to(x, C.aval(v).dtype) for x, v in zip(outs, C.outvars(closed))]


def widened_carries(closed: Any, lines: frozenset[str], high: np.dtype[Any]) -> tuple[WidenedCarry, ...]:
    """The loop carries the plan ``lines`` widens in ``closed``, in program order (traced, not run)."""
    notes: dict[Any, WidenedCarry] = {}
    if not _touches(closed, lines, None, False, False, here=False):
        return ()
    specs = [jax.ShapeDtypeStruct(C.aval(v).shape, C.aval(v).dtype) for v in C.invars(closed)]
    jax.eval_shape(lambda *a: run_upcast(closed, lines, high, a, carries=notes), *specs)
    return tuple(notes.values())


def _to(x: Any, dtype: Any) -> Any:
    if not is_float(dtype) or jnp.result_type(x) == dtype:
        return x
    return lax.convert_element_type(x, dtype)


def _planned(eqn: Any, lines: frozenset[str] | None, src: Any, backward: bool = False) -> bool:
    if C.primitive_name(eqn) in _KEEP_DECLARED or not any(is_float(C.aval(v).dtype) for v in eqn.outvars):
        return False
    if lines is None:
        return True
    if src is None:
        return False
    line = str(src)
    return line in lines or (backward and backward_key(line) in lines)


def _touches(closed: Any, lines: frozenset[str] | None, outer: Any, nested: bool, backward: bool = False, *,
             here: bool = True) -> bool:
    """Whether a planned line has an equation inside ``closed`` (then a call or loop is entered);
    ``here=False``: only inside one of its loops or branches (calls entered)."""
    for eqn in C.eqns(closed):
        src = source_of(outer, eqn, nested)
        bwd = backward or C.in_transpose(eqn)
        if enterable(eqn) and _touches(body_of(eqn)[0], lines, src, True, bwd, here=here):
            return True
        if C.primitive_name(eqn) in LOOPS and any(_touches(b, lines, src, True, bwd) for b in bodies(eqn)):
            return True
        if here and _planned(eqn, lines, src, bwd):
            return True
    return False


def _run(ctx: _Ctx, closed: Any, args: list[Any], outer: Any, nested: bool, backward: bool,
         in_loop: bool = False) -> list[Any]:
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
        bwd = backward or C.in_transpose(eqn)
        invals = [read(a) for a in eqn.invars]
        name = C.primitive_name(eqn)
        if enterable(eqn) and _touches(body_of(eqn)[0], ctx.lines, src, True, bwd):
            body, _ = body_of(eqn)
            with C.user_context(eqn):
                outs = _run(ctx, body, invals, src, True, bwd, in_loop)
        elif name in LOOPS and any(_touches(b, ctx.lines, src, True, bwd) for b in bodies(eqn)):
            def run(body: Any, args: list[Any], src: Any = src, bwd: bool = bwd) -> list[Any]:
                return _run(ctx, body, args, src, True, bwd, True)

            with C.user_context(eqn):
                outs = run_loop(eqn, invals, run, ctx.high, src, bwd, ctx.notes)
        elif _planned(eqn, ctx.lines, src, bwd):
            outs = _bind_high(eqn, invals, ctx.high)
        else:
            declared = [C.aval(a).dtype for a in eqn.invars]
            outs = C.bind(eqn, [_to(x, d) for x, d in zip(invals, declared)])
        if ctx.observe is not None and not in_loop:
            ctx.observe(eqn, src, bwd, outs)
        for v, x in zip(eqn.outvars, outs):
            if not C.is_dropvar(v):
                env[v] = x
    return [read(v) for v in C.outvars(closed)]


def _bind_high(eqn: Any, invals: list[Any], high: np.dtype[Any]) -> list[Any]:
    """Bind ``eqn`` with its float operands and result dtypes raised to ``high`` (never lowered: an
    operand already wider than ``high``, float64 under x64, keeps its dtype).

    An operation that only moves values (:data:`_MOVES`: a slice, a broadcast) computes nothing to
    round: it runs in the widest precision its operands come in, so ``x[i]`` on a kept line inside a
    loop does not convert the whole of ``x`` at every step; the kept operation that reads its result
    raises it, to the same values."""
    if C.primitive_name(eqn) in _MOVES:
        widest = max((jnp.result_type(x) for atom, x in zip(eqn.invars, invals)
                      if is_float(C.aval(atom).dtype)),
                     key=lambda d: np.dtype(d).itemsize, default=None)
        declared = [C.aval(a).dtype for a in eqn.invars]
        wide = widest is not None and any(np.dtype(widest).itemsize > np.dtype(d).itemsize
                                          for d in declared if is_float(d))
        if not wide:
            return C.bind(eqn, [_to(x, d) for x, d in zip(invals, declared)])
        high = np.dtype(widest)
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
