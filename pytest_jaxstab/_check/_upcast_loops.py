"""Loops and branches in the upcast transformation: a kept line inside a body widens the carry it writes.

``scan`` (``lax.scan``, ``fori_loop`` with static bounds), ``while`` (``while_loop``, ``fori_loop`` with
traced bounds) and ``cond`` (``lax.cond``/``switch``) hold bodies of fixed types: binding one whole keeps
its declared dtypes, so a kept line inside (a running sum ``acc = acc + x[i]``) would be computed in the
high precision and rounded back to the low carry at every step, exactly as wrong as before. Here such a
loop is rebuilt through the public ``lax.scan``/``while_loop``/``switch`` with its body interpreted by
``_upcast``'s interpreter (the caller's ``run``), and a carry is widened to ``high`` exactly where the
body returns it in ``high``: where it flows out of a kept equation, since a kept equation's results stay
``high`` until an equation not kept reads them. A carry no kept line writes stays in its declared dtype
(converted back where the body returns it), so the loop costs float32 only where the plan asked.

Which carries are widened is a fixed point: widening one changes what the body reads (a kept line
reading it keeps its result high, which may be another carry), so the body's result types are taken
(``jax.eval_shape``, no compilation) with the carries widened so far until no new one comes out high;
the set only grows, so it ends within one pass per carry. A branch's result is ``high`` when any
branch returns it so (``lax.switch`` needs one type). Each widened carry is recorded
(:class:`WidenedCarry`) so that a plan can name it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .. import _compat as C

__all__ = ["LOOPS", "WidenedCarry", "bodies", "run_loop"]

#: The primitives rebuilt here when a kept line is inside one of their bodies.
LOOPS = frozenset({"scan", "while", "cond"})

#: ``run(body, args) -> outs``: the interpreter on one body, in the loop's context (its line, its pass).
Runner = Callable[[Any, list[Any]], list[Any]]


@dataclasses.dataclass(frozen=True)
class WidenedCarry:
    """A loop carry computed in the high precision because a kept line writes it.

    Attributes:
        loop: ``file:line`` of the loop (where ``lax.scan``/``fori_loop``/``while_loop`` was called).
        kind: ``"scan"`` or ``"while"`` (a ``fori_loop`` is either, as JAX lowers it).
        index: the carry's position among the loop's carries (a ``fori_loop``'s index is carry 0).
        declared: the carry's declared type (``"bfloat16[8,32]"``); ``high``: the precision it runs in.
        writer: ``file:line`` of the kept line whose result the body returns as this carry.
        backward: True for a loop of the backward pass (the transposed scan of a gradient).
    """

    loop: str | None
    kind: str
    index: int
    declared: str
    high: str
    writer: str | None
    backward: bool = False

    def __str__(self) -> str:
        where = "the backward pass's " if self.backward else ""
        return (f"{where}{self.kind} at {self.loop or '<no user frame>'}: carry {self.index} "
                f"({self.declared}) in {self.high}, written by {self.writer or '<no user frame>'}")


def bodies(eqn: Any) -> list[Any]:
    """The closed bodies of a loop or branch equation (a while's condition too)."""
    name = C.primitive_name(eqn)
    if name == "scan":
        return [C.scan_parts(eqn).body]
    if name == "while":
        wp = C.while_parts(eqn)
        return [wp.cond, wp.body]
    return list(C.cond_parts(eqn)[2])


def _spec(x: Any) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct(jnp.shape(x), jnp.result_type(x))


def _is_float(dtype: Any) -> bool:
    try:
        return bool(jnp.issubdtype(dtype, jnp.floating))
    except TypeError:
        return False


def _wider(dtype: Any, than: Any) -> bool:
    return _is_float(dtype) and _is_float(than) and np.dtype(dtype).itemsize > np.dtype(than).itemsize


def _to(x: Any, dtype: Any) -> Any:
    if not _is_float(dtype) or jnp.result_type(x) == dtype:
        return x
    return lax.convert_element_type(x, dtype)


def _writer(body: Any, index: int, where: C.SourceLine | None) -> str | None:
    """The line of the equation whose result the body returns as its ``index``-th output."""
    target = C.outvars(body)[index]
    for eqn in C.eqns(body):
        if any(v is target for v in eqn.outvars):
            src = C.refine_source(where, eqn)
            return None if src is None else str(src)
    return None


def _widened(result_dtypes: Callable[[set[int]], Sequence[Any]], declared: Sequence[Any]) -> set[int]:
    """The fixed point: the carries whose body result comes out wider than declared."""
    wide: set[int] = set()
    while True:
        out = result_dtypes(wide)
        new = {i for i, (d, dec) in enumerate(zip(out, declared)) if _wider(d, dec)} - wide
        if not new:
            return wide
        wide |= new


def run_loop(eqn: Any, invals: list[Any], run: Runner, high: np.dtype[Any], where: C.SourceLine | None,
             backward: bool, notes: dict[Any, WidenedCarry] | None) -> list[Any]:
    """Bind the loop or branch ``eqn`` on ``invals`` with its bodies interpreted by ``run`` (module)."""
    name = C.primitive_name(eqn)
    if name == "scan":
        return _scan(eqn, invals, run, high, where, backward, notes)
    if name == "while":
        return _while(eqn, invals, run, high, where, backward, notes)
    return _cond(eqn, invals, run)


def _note(notes: dict[Any, WidenedCarry] | None, wide: set[int], declared: Sequence[Any], kind: str,
          body: Any, first: int, high: np.dtype[Any], where: C.SourceLine | None, backward: bool,
          carries: Sequence[Any]) -> None:
    if notes is None:
        return
    loop = None if where is None else str(where)
    for i in sorted(wide):
        a = C.aval(carries[i])
        text = f"{np.dtype(a.dtype).name}[{','.join(map(str, a.shape))}]"
        note = WidenedCarry(loop, kind, i, text, high.name, _writer(body, first + i, where), backward)
        notes.setdefault((loop, kind, i, note.writer, backward), note)


def _carried(values: Sequence[Any], declared: Sequence[Any], wide: set[int], high: np.dtype[Any]
             ) -> tuple[Any, ...]:
    """A loop's carry: the widened positions ``wide`` in ``high``, the others in their declared dtype."""
    return tuple(_to(v, high if i in wide else d) for i, (v, d) in enumerate(zip(values, declared)))


def _scan(eqn: Any, invals: list[Any], run: Runner, high: np.dtype[Any], where: C.SourceLine | None,
          backward: bool, notes: dict[Any, WidenedCarry] | None) -> list[Any]:
    sp = C.scan_parts(eqn)
    nc, nk = len(sp.consts), len(sp.carry)
    consts, carry, xs = invals[:nc], invals[nc:nc + nk], invals[nc + nk:]
    declared = [C.aval(v).dtype for v in sp.carry]

    def body_for(wide: set[int]) -> Callable[..., Any]:
        def body(c: Any, x: Any) -> Any:
            outs = run(sp.body, [*consts, *c, *x])
            return _carried(outs[:nk], declared, wide, high), tuple(outs[nk:])
        return body

    def init_for(wide: set[int]) -> tuple[Any, ...]:
        return _carried(carry, declared, wide, high)

    x_specs = tuple(jax.ShapeDtypeStruct(jnp.shape(x)[1:], jnp.result_type(x)) for x in xs)

    def result_dtypes(wide: set[int]) -> list[Any]:
        def raw(c: Any, x: Any) -> Any:
            return run(sp.body, [*consts, *c, *x])[:nk]
        specs = tuple(_spec(c) for c in init_for(wide))
        return [s.dtype for s in jax.eval_shape(raw, specs, x_specs)]

    wide = _widened(result_dtypes, declared)
    _note(notes, wide, declared, "scan", sp.body, 0, high, where, backward, sp.carry)
    carry_out, ys = C.scan(body_for(wide), init_for(wide), tuple(xs), length=sp.length, reverse=sp.reverse,
                           unroll=sp.unroll)
    return [*carry_out, *ys]


def _while(eqn: Any, invals: list[Any], run: Runner, high: np.dtype[Any], where: C.SourceLine | None,
           backward: bool, notes: dict[Any, WidenedCarry] | None) -> list[Any]:
    wp = C.while_parts(eqn)
    nc, nb = len(wp.cond_consts), len(wp.body_consts)
    cond_consts, body_consts, carry = invals[:nc], invals[nc:nc + nb], invals[nc + nb:]
    declared = [C.aval(v).dtype for v in wp.carry]

    def init_for(wide: set[int]) -> tuple[Any, ...]:
        return _carried(carry, declared, wide, high)

    def result_dtypes(wide: set[int]) -> list[Any]:
        specs = tuple(_spec(c) for c in init_for(wide))
        return [s.dtype for s in jax.eval_shape(lambda c: run(wp.body, [*body_consts, *c]), specs)]

    wide = _widened(result_dtypes, declared)
    _note(notes, wide, declared, "while", wp.body, 0, high, where, backward, wp.carry)

    def cond(c: Any) -> Any:
        return run(wp.cond, [*cond_consts, *c])[0]

    def body(c: Any) -> Any:
        outs = run(wp.body, [*body_consts, *c])
        return _carried(outs, declared, wide, high)

    return list(lax.while_loop(cond, body, init_for(wide)))


def _cond(eqn: Any, invals: list[Any], run: Runner) -> list[Any]:
    index, operands = invals[0], invals[1:]
    _, _, branches = C.cond_parts(eqn)
    specs = tuple(_spec(x) for x in operands)
    types = [jax.eval_shape(lambda *ops, b=b: run(b, list(ops)), *specs) for b in branches]
    dtypes = []
    for k, v in enumerate(eqn.outvars):
        found = [np.dtype(t[k].dtype) for t in types]
        dtypes.append(max(found, key=lambda d: d.itemsize) if _is_float(C.aval(v).dtype) else C.aval(v).dtype)

    def branch(b: Any) -> Callable[..., Any]:
        return lambda *ops: [_to(o, d) for o, d in zip(run(b, list(ops)), dtypes)]

    return list(lax.switch(index, [branch(b) for b in branches], *operands))
