"""The fast path's run: one walk of a closed jaxpr over float64 intervals, whole arrays at a time.

The same program the Arb path interprets (``interpreter/_evaluate`` hands over the jaxpr after
``library/_inline``), the same dispatch: ``jit`` calls and the primal bodies of ``custom_jvp`` /
``custom_vjp`` are entered, a recognised library routine (``library/_routines.lookup``) is evaluated
by its formula where this module has one (``softplus``, ``log_sigmoid``, ``silu``) and otherwise sends
the whole program to the Arb path. So does any primitive without a rule here, a complex value, a PRNG
key, a loop or a branch: :func:`run` returns None for them, it never raises for a program's content.

Where ``logistic`` or ``tanh`` saturates, ``1 - sigmoid(z)``, ``1 + tanh(v)`` and ``log(sigmoid(z))``
are also enclosed by exact identities of the reals from the saturating function's operand, and the
narrower enclosure kept (``_identities``).

A :class:`Tape` passed to :func:`run` keeps what the walk saw: every variable's enclosure, and the walks
of the calls it entered. The Arb escalation's mixed pass (``interpreter/_mixed``) takes the tight ones
as balls and recomputes only the rest.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ... import _compat
from ..._primitives import CALLS, CUSTOM_DERIVATIVES
from ..core._common import is_complex, is_float
from ..library._inline import inline_routines
from ..library._routines import EXACT_PRIMITIVE, lookup
from ..primitives._random import is_key
from ._arrays import RULES as ARRAY_RULES
from ._elementwise import FLOAT_RULES, ROUTINES, to_interval
from ._identities import SATURATING, Origin, origin, refine
from ._interval import Exact, Interval, NotCovered, Value
from ._interval import ends as _ends

__all__ = ["covers", "enclose", "run"]


class _Context:
    """What the Arb path's structural rules ask of their context: only how to refuse."""

    prec = 53

    def unsupported(self, eqn: Any, reason: str | None = None) -> NotCovered:
        return NotCovered(f"{_compat.primitive_name(eqn)}: {reason}")

    def call(self, closed: Any, args: Sequence[Any]) -> list[Any]:
        raise NotCovered("a rule that calls a sub-jaxpr")


_CTX = _Context()


class Tape:
    """One walk of one jaxpr: ``env``, every variable's value (inputs, consts and each equation's
    results); ``calls``, the walk of each call it entered, by the equation's index."""

    def __init__(self) -> None:
        self.env: dict[Any, Value] = {}
        self.calls: dict[int, Tape] = {}


def run(closed: Any, args: Sequence[Any], tape: Tape | None = None) -> list[Value] | None:
    """The enclosures of ``closed``'s outputs on the concrete ``args`` (its flat inputs), or None when
    the program is not covered (see the module docstring). ``tape``, when given, is filled with the
    walk (:class:`Tape`)."""
    try:
        inputs = [_input(x, _compat.aval(v)) for x, v in zip(args, _compat.invars(closed))]
        with np.errstate(all="ignore"):
            return _call(closed, inputs, tape)
    except NotCovered:
        return None


def enclose(closed: Any, args: Sequence[Any]) -> list[tuple[np.ndarray, np.ndarray]] | None:
    """Float64 bounds ``(lo, hi)`` of each float output of ``closed`` on ``args`` (its flat inputs), the
    library routines inlined as the oracle inlines them; NaN bounds where an element is undecided;
    None when the program is not covered or an output is not a float. For a caller that needs a few
    correct bits of every element (a conditioning figure), not the correctly rounded value: the Arb
    escalation is then owed only to the elements whose bounds are too wide for it."""
    try:
        outs = run(inline_routines(closed), args)
    except Exception:  # a gap of the fast path costs only the fallback, never a figure
        return None
    if outs is None:
        return None
    floats = [o for o in outs if isinstance(o, Interval)]
    if len(floats) != len(outs):
        return None
    with np.errstate(all="ignore"):
        return [_ends(o) for o in floats]


def covers(closed: Any) -> bool:
    """Whether every equation of ``closed`` has a rule here (calls entered, library routines by their
    formula where there is one), from the program alone: what the check's cost estimate asks before
    any input exists. A covered program can still be sent whole to the Arb path by a value (:func:`run`
    decides that); an uncovered one always is."""
    for eqn in _compat.eqns(closed):
        name = _compat.primitive_name(eqn)
        if any(is_complex(_compat.aval(a).dtype) or is_key(_compat.aval(a).dtype)
               for a in (*eqn.invars, *eqn.outvars)):
            return False
        if name in CALLS or name in CUSTOM_DERIVATIVES or name == EXACT_PRIMITIVE:
            routine = lookup(eqn)
            if routine is not None:
                if ROUTINES.get(routine.name) is None or routine.origin != "jax.nn":
                    return False
                continue
            if name == EXACT_PRIMITIVE:
                return False
            body = (_compat.custom_call_parts(eqn)[0] if name in CUSTOM_DERIVATIVES
                    else _compat.subjaxprs(eqn)[0][1])
            if not covers(body):
                return False
        elif name not in FLOAT_RULES and name not in ARRAY_RULES:
            return False
    return True


def _input(x: Any, aval: Any) -> Value:
    """An input, const or literal, as the program sees it (cast to its dtype, as ``to_value`` does)."""
    if is_key(aval.dtype) or is_complex(aval.dtype):
        raise NotCovered("a complex value or a PRNG key")
    arr = np.asarray(x)
    if is_float(aval.dtype):
        if np.iscomplexobj(arr):
            raise NotCovered("a complex value for a real input")
        if not is_float(arr.dtype):
            return to_interval(Exact(arr))
        return Interval.exact(arr.astype(aval.dtype, copy=False).astype(np.float64))
    return Exact(arr.astype(aval.dtype, copy=False))


def _call(closed: Any, args: Sequence[Value], tape: Tape | None = None) -> list[Value]:
    env: dict[Any, Value] = {v: _input(c, _compat.aval(v))
                             for v, c in zip(_compat.constvars(closed), _compat.parts(closed)[1])}
    env.update(zip(_compat.invars(closed), args))
    if tape is not None:
        tape.env = env

    def read(atom: Any) -> Value:
        if _compat.is_literal(atom):
            return _input(_compat.literal_value(atom), _compat.aval(atom))
        return env[atom]

    # What a logistic/tanh result remembers of its operand, for the identities of ``_identities``.
    origins: dict[Any, Origin] = {}
    for i, eqn in enumerate(_compat.eqns(closed)):
        args = [read(a) for a in eqn.invars]
        outs = _apply(eqn, args, tape, i)
        if origins or _compat.primitive_name(eqn) in SATURATING:
            outs[0] = _remember(eqn, args, outs[0], origins)
        for var, val in zip(eqn.outvars, outs):
            if not _compat.is_dropvar(var):
                env[var] = _conform(val, _compat.aval(var))
    return [read(a) for a in _compat.outvars(closed)]


def _remember(eqn: Any, args: list[Value], out: Value, origins: dict[Any, Origin]) -> Value:
    """``out`` narrowed by an identity of the saturating functions (``_identities``), and the origin its
    variable carries recorded in ``origins``."""
    name = _compat.primitive_name(eqn)
    if len(eqn.outvars) != 1 or _compat.is_dropvar(eqn.outvars[0]):
        return out
    held = [None if _compat.is_literal(a) else origins.get(a) for a in eqn.invars]
    carried = origin(name, args)
    if name == "convert_element_type" and isinstance(out, Interval):
        carried = held[0]  # between floats the identity on the reals
    elif carried is None and any(h is not None for h in held):
        out, carried = refine(name, args, held, out)
    if carried is not None:
        origins[eqn.outvars[0]] = carried
    return out


def _apply(eqn: Any, args: list[Value], tape: Tape | None = None, index: int = 0) -> list[Value]:
    name = _compat.primitive_name(eqn)
    if name in CALLS or name in CUSTOM_DERIVATIVES or name == EXACT_PRIMITIVE:
        routine = lookup(eqn)
        if routine is not None:
            return [_routine(routine, eqn, args)]
        if name == EXACT_PRIMITIVE:
            raise NotCovered(name)
        body = (_compat.custom_call_parts(eqn)[0] if name in CUSTOM_DERIVATIVES
                else _compat.subjaxprs(eqn)[0][1])
        sub = None
        if tape is not None:
            sub = tape.calls[index] = Tape()
        return _call(body, args, sub)
    for atom in (*eqn.invars, *eqn.outvars):
        dtype = _compat.aval(atom).dtype
        if is_complex(dtype) or is_key(dtype):
            raise NotCovered("a complex value or a PRNG key")
    out: Any
    if name in FLOAT_RULES:
        out = FLOAT_RULES[name](eqn, *args)
    elif name in ARRAY_RULES:
        out = ARRAY_RULES[name](_CTX, eqn, *args)
    else:
        raise NotCovered(name)
    return list(out) if eqn.primitive.multiple_results else [out]


def _routine(routine: Any, eqn: Any, args: list[Value]) -> Value:
    """A library routine's exact function, where it is simple enough to enclose here."""
    fn = ROUTINES.get(routine.name) if routine.origin == "jax.nn" else None
    if fn is None or routine.nargs != 1 or routine.nout != 1:
        raise NotCovered(f"the library routine {routine.name}")
    lead = _compat.leading_consts(eqn)
    return fn(to_interval(args[lead]))


def _conform(val: Value, aval: Any) -> Value:
    """A rule's result as a value of ``aval``'s kind and shape."""
    shape = tuple(aval.shape)
    if is_float(aval.dtype):
        val = to_interval(val)
        return val.broadcast(shape)
    if not isinstance(val, Exact):
        raise NotCovered("a float result for an integer variable")
    value = np.asarray(val.value)
    if value.dtype != np.dtype(aval.dtype):
        value = value.astype(aval.dtype)
    return Exact(value, val.unknown).broadcast(shape)
