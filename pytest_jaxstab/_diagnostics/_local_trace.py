"""The instrumented program behind ``jst.local_error``: every intermediate of a jaxpr as an output.

:func:`instrument` re-traces a closed jaxpr through a small interpreter that binds each equation's
primitive on tracers and returns, besides nothing else, every value the program computes (its inputs
included). Evaluating that program with the exact oracle gives the exact value of every intermediate,
rounded to its dtype, in one call. While tracing, it records one :class:`Site` per equation: the
primitive, where its operands and results sit among the outputs, and the user's source line.

How sub-programs are handled (the contract of ``local_error``):

* ``jit`` (and ``closed_call``, ``remat``) and the primal bodies of ``custom_jvp``/``custom_vjp`` are
  inlined: their equations are sites of their own, attributed through the calls to the user's line
  (``_compat.refine_source``), and their inputs are not rounded at the call boundary.
* ``scan``: re-traced as a ``lax.scan`` whose body also returns every body intermediate as an extra
  stacked output, so each body equation is scored at every iteration on its exact inputs (exact carries,
  not the float ones). A site inside ``d`` nested scans has ``depth == d``: its values carry ``d``
  leading iteration axes (operands computed outside the loop have fewer).
* ``cond`` and ``while`` are one site each here. ``_local_error`` enters those outside loops on each
  sample: the branch the exact index picks, and the body once per iteration the exact condition
  allows (at most ``MAX_WHILE_STEPS``), each as a program of its own whose inputs are the exact
  operands (carries) rounded to their dtype. Inside a ``scan`` body, or past the step limit, the whole
  equation is scored as one primitive (the float branch/loop on the exact inputs rounded, against the
  exact results) and a loss in it is reported at the ``cond``/``while`` line.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp

from .. import _compat as C
from .._primitives import CALLS, CUSTOM_DERIVATIVES
from ..oracles.library._routines import routine_name

__all__ = ["Instrumented", "Site", "Slot", "instrument"]


class Slot:
    """A value of the instrumented program: ``index`` among its outputs, ``depth`` loop axes."""

    __slots__ = ("depth", "escapes", "index", "value")

    def __init__(self, value: Any, depth: int) -> None:
        self.value = value  # a tracer while tracing; the stacked tracer after an enclosing scan
        self.depth = depth
        self.index = -1
        # read by something other than a site (a result of the program, a scan's operand or a scan
        # body's result): every element counts as reaching the result
        self.escapes = False


@dataclasses.dataclass
class Site:
    """One equation of the program as written: its operands (Slot, or a literal value) and results."""

    eqn: Any
    ins: list[Any]  # Slot | ("literal", value)
    outs: list[Slot | None]
    depth: int
    source: C.SourceLine | None
    path: tuple[str, ...]

    @property
    def primitive(self) -> str:
        """The primitive's name; a library routine's own (``log_ndtr``) for its call."""
        return self.routine or C.primitive_name(self.eqn)

    @property
    def routine(self) -> str | None:
        """The library routine this site calls (``oracles/library/_routines.py``), else None."""
        name = C.primitive_name(self.eqn)
        return routine_name(self.eqn) if name in CALLS or name in CUSTOM_DERIVATIVES else None


@dataclasses.dataclass
class Instrumented:
    """The program returning every slot's value, and the sites that read them."""

    closed: Any
    slots: list[Slot]
    sites: list[Site]
    outputs: list[Any]  # per output of the original program: its Slot, ("literal", value) or None


def _exportable(v: Any) -> bool:
    """Real and complex numbers, integers and booleans (bfloat16 included); not PRNG keys or float0."""
    try:
        dt = C.aval(v).dtype if hasattr(v, "aval") else v.dtype
        return bool(jnp.issubdtype(dt, jnp.inexact) or jnp.issubdtype(dt, jnp.integer)
                    or jnp.issubdtype(dt, jnp.bool_))
    except TypeError:  # extended dtypes
        return False


class _Frame:
    def __init__(self, depth: int) -> None:
        self.depth = depth
        self.slots: list[Slot] = []
        self.sites: list[Site] = []

    def slot(self, value: Any) -> Slot | None:
        if not _exportable(value):
            return None
        s = Slot(value, self.depth)
        self.slots.append(s)
        return s


def instrument(closed: Any, source: C.SourceLine | None = None, path: tuple[str, ...] = ()) -> Instrumented:
    """Trace the instrumented program of ``closed`` (see the module docstring).

    ``source``/``path``: the position of the equation that runs ``closed`` when it is a sub-program (a
    ``cond`` branch, a ``while`` body), so its equations are attributed through it.
    """
    top = _Frame(0)
    avals = [C.aval(v) for v in C.invars(closed)]
    results: list[tuple[Any, Slot | None]] = []

    def program(*args: Any) -> list[Any]:
        top.slots.clear()
        top.sites.clear()
        ins = [(a, top.slot(a)) for a in args]
        results[:] = _run(closed, ins, top, source, path)
        _escape(results)
        return [s.value for s in top.slots]

    specs = [jax.ShapeDtypeStruct(tuple(a.shape), a.dtype, weak_type=a.weak_type) for a in avals]
    traced = jax.make_jaxpr(program)(*specs)
    for i, s in enumerate(top.slots):
        s.index = i
    # A result that is no slot is a literal (or a PRNG key and the like: None, not a value of ours).
    outputs = [s if s is not None else (("literal", v) if not C.is_tracer(v) else None) for v, s in results]
    return Instrumented(traced, list(top.slots), list(top.sites), outputs)


def _run(closed: Any, args: Sequence[tuple[Any, Slot | None]], frame: _Frame,
         outer: C.SourceLine | None, path: tuple[str, ...]) -> list[tuple[Any, Slot | None]]:
    env: dict[Any, tuple[Any, Slot | None]] = {}
    _, consts = C.parts(closed)
    for v, c in zip(C.constvars(closed), consts):
        env[v] = (c, None)  # constants are exact: read as literals
    for v, a in zip(C.invars(closed), args):
        env[v] = a
    for eqn in C.eqns(closed):
        ins = [(C.literal_value(a), None) if C.is_literal(a) else env[a] for a in eqn.invars]
        src = C.source_line(eqn) if outer is None and not path else C.refine_source(outer, eqn)
        name = C.primitive_name(eqn)
        here = (*path, C.eqn_name(eqn))
        outs: list[tuple[Any, Slot | None]] | None = None
        if (name in CALLS or name in CUSTOM_DERIVATIVES) and routine_name(eqn) is not None:
            pass  # a library routine: one site, judged against its mathematics (oracles/library/_routines.py)
        elif name in CALLS:
            subs = C.subjaxprs(eqn)
            if len(subs) == 1 and len(C.invars(subs[0][1])) == len(ins):
                outs = _run(subs[0][1], ins, frame, src, here)
        elif name in CUSTOM_DERIVATIVES:
            body, _ = C.custom_call_parts(eqn)
            if len(C.invars(body)) == len(ins):
                outs = _run(body, ins, frame, src, here)
        elif name == "scan":
            outs = _scan(eqn, ins, frame, src, here)
        if outs is None:  # a leaf: one site
            vals = C.bind(eqn, [v for v, _ in ins])
            outs = [(v, frame.slot(v)) for v in vals]
            site_ins = [s if s is not None else ("literal", v) for v, s in ins]
            frame.sites.append(Site(eqn, site_ins, [s for _, s in outs], frame.depth, src, here))
        for var, o in zip(eqn.outvars, outs):
            if not C.is_dropvar(var):
                env[var] = o
    return [(C.literal_value(a), None) if C.is_literal(a) else env[a] for a in C.outvars(closed)]


def _scan(eqn: Any, ins: list[tuple[Any, Slot | None]], frame: _Frame, src: C.SourceLine | None,
          path: tuple[str, ...]) -> list[tuple[Any, Slot | None]]:
    sp = C.scan_parts(eqn)
    nc, nk = len(sp.consts), len(sp.carry)
    consts, carry, xs = ins[:nc], ins[nc:nc + nk], ins[nc + nk:]
    _escape(ins)
    inner = _Frame(frame.depth + 1)
    n_y = len(sp.ys)

    def body(c: Any, x: Any) -> Any:
        inner.slots.clear()  # a re-trace (weak types) starts afresh
        inner.sites.clear()
        args = [*consts, *((v, inner.slot(v)) for v in c), *((v, inner.slot(v)) for v in x)]
        outs = _run(sp.body, args, inner, src, path)
        _escape(outs)
        return tuple(v for v, _ in outs[:nk]), (tuple(v for v, _ in outs[nk:]),
                                                  tuple(s.value for s in inner.slots))

    init = tuple(v for v, _ in carry)
    xs_vals = tuple(v for v, _ in xs)
    carry_out, (ys, extras) = C.scan(body, init, xs_vals, length=sp.length, reverse=sp.reverse,
                                     unroll=sp.unroll)
    for s, stacked in zip(inner.slots, extras):
        s.value = stacked
    frame.slots.extend(inner.slots)
    frame.sites.extend(inner.sites)
    assert len(ys) == n_y
    return [(v, frame.slot(v)) for v in (*carry_out, *ys)]


def _escape(values: Sequence[tuple[Any, Slot | None]]) -> None:
    for _, s in values:
        if s is not None:
            s.escapes = True
