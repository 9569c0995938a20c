"""The interpreter: walks a closed jaxpr over Arb balls at one working precision.

The interpreter gives a program its real-number meaning: every float operation is the exact real
operation, enclosed in a ball, so the float roundings and overflows of the program's dtype do not exist
in it. ``convert_element_type`` between floats is therefore the identity; float -> int truncates toward
zero as the program would; ``reduce_precision`` is applied, being a rounding the program asks for
explicitly. Control flow is decided on the balls: a ``cond`` index or a ``while`` predicate comes from
comparisons, which raise ``Undecided`` unless the balls settle them, so a branch is only ever taken when
it is provably the branch the exact program takes. A ``while`` whose exit depends on rounding
(``while x + eps != x``) does not end with exact values: it is undecided once ``eps`` drops below the
working precision, or an error after :data:`MAX_WHILE_ITERATIONS` iterations.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ... import _compat
from ..._primitives import CALLS, CUSTOM_DERIVATIVES
from ..complex import _values as _complex
from ..core._balls import to_arb_array
from ..core._common import OracleError, Rule, UnsupportedPrimitive, ints_to_arb, is_complex, is_float, obj
from ..library import _routines as _library
from ..linalg import _eigen, _qr, _tridiagonal
from ..linalg import _solve as _linalg
from ..primitives import (
    _conv,
    _effects,
    _elementwise,
    _hijax,
    _ieee,
    _random,
    _reductions,
    _special,
    _structural,
    _topk,
    _windows,
)
from ..primitives._refusals import REFUSED_PRIMITIVES
from . import _extremum, _live

__all__ = ["MAX_WHILE_ITERATIONS", "SUPPORTED_PRIMITIVES", "Interpreter", "check_supported", "to_value"]

#: A ``while`` loop still running after this many iterations of the exact evaluation is an error.
MAX_WHILE_ITERATIONS = 1_000_000

# ------------------------------------------------------------------------------------ interpreter
def _call(ctx: Interpreter, eqn: Any, *args: np.ndarray) -> list[np.ndarray]:
    routine = _library.lookup(eqn)  # a library routine: its mathematics, not its body
    if routine is not None:
        return _library.evaluate_call(routine, eqn, args)
    (_, sub), *_ = _compat.subjaxprs(eqn)
    return ctx.call(sub, args)


def _custom_call(ctx: Interpreter, eqn: Any, *args: np.ndarray) -> list[np.ndarray]:
    routine = _library.lookup(eqn)
    if routine is not None:
        return _library.evaluate_call(routine, eqn, args)
    body, _ = _compat.custom_call_parts(eqn)  # the primal body; derivative rules play no part
    return ctx.call(body, args)


def _at(x: np.ndarray, i: int) -> np.ndarray:
    """``x[i]`` along the leading axis, always an ndarray (a JAX array for PRNG keys)."""
    r = x[i]
    if not isinstance(x, np.ndarray):  # a key array
        return r
    if isinstance(r, np.ndarray):
        return r
    return obj(r) if x.dtype == object else np.asarray(r, dtype=x.dtype)


def _empty(aval: Any) -> np.ndarray:
    held = is_float(aval.dtype) or is_complex(aval.dtype)
    return np.empty(tuple(aval.shape), dtype=object if held else aval.dtype)


def _scan(ctx: Interpreter, eqn: Any, *args: np.ndarray) -> list[np.ndarray]:
    sp = _compat.scan_parts(eqn)
    nc, nk = len(sp.consts), len(sp.carry)
    consts, carry, xs = list(args[:nc]), list(args[nc : nc + nk]), list(args[nc + nk :])
    length = int(sp.length)
    ys: list[list[Any]] = [[None] * length for _ in sp.ys]
    for t in range(length):
        i = length - 1 - t if sp.reverse else t
        outs = ctx.call(sp.body, consts + carry + [_at(x, i) for x in xs])
        carry = outs[:nk]
        for j, y in enumerate(outs[nk:]):
            ys[j][i] = y
    stacked = [_random.stack(y) if length else _empty(_compat.aval(v)) for y, v in zip(ys, sp.ys)]
    return carry + stacked


def _while(ctx: Interpreter, eqn: Any, *args: np.ndarray) -> list[np.ndarray]:
    wp = _compat.while_parts(eqn)
    nc, nb = len(wp.cond_consts), len(wp.body_consts)
    cond_consts, body_consts, carry = list(args[:nc]), list(args[nc : nc + nb]), list(args[nc + nb :])
    for _ in range(MAX_WHILE_ITERATIONS):
        (pred,) = ctx.call(wp.cond, cond_consts + carry)
        pred = np.asarray(pred)
        if not pred.any():
            return carry
        new = ctx.call(wp.body, body_consts + carry)
        # A batched predicate (vmap of a while loop): only the elements still running take a step.
        carry = new if pred.ndim == 0 else [_random.select_leading(pred, n, o) for n, o in zip(new, carry)]
    raise OracleError(
        f"a while loop at {ctx.location(eqn) or 'an unknown location'} was still running after "
        f"{MAX_WHILE_ITERATIONS:,} iterations in the exact evaluation. Its exit condition may depend on "
        f"float rounding (e.g. `while x + eps != x`), which does not happen with exact values: bound the "
        f"loop by a count (lax.fori_loop), or leave this function out of oracle-checked cases."
    )


def _cond(ctx: Interpreter, eqn: Any, index: np.ndarray, *ops: np.ndarray) -> list[np.ndarray]:
    _, _, branches = _compat.cond_parts(eqn)
    i = min(max(int(np.asarray(index)), 0), len(branches) - 1)  # clamped, as lax.switch
    return ctx.call(branches[i], ops)


_CONTROL: dict[str, Rule] = {name: _call for name in CALLS}
_CONTROL.update({name: _custom_call for name in CUSTOM_DERIVATIVES})
_CONTROL.update({"scan": _scan, "while": _while, "cond": _cond})

_RULES: dict[str, Rule] = {
    **_elementwise.RULES, **_ieee.RULES, **_structural.RULES, **_reductions.RULES, **_linalg.RULES,
    **_eigen.RULES, **_qr.RULES, **_special.RULES, **_random.RULES, **_effects.RULES, **_windows.RULES,
    **_conv.RULES, **_topk.RULES, **_tridiagonal.RULES, **_hijax.RULES, **_library.RULES, **_CONTROL,
}

#: Names of the primitives the oracle evaluates exactly (anything else raises UnsupportedPrimitive);
#: on complex operands, those of ``_complex.RULES`` and ``_complex.PASS_THROUGH``.
SUPPORTED_PRIMITIVES: frozenset[str] = frozenset(_RULES) | frozenset(_complex.RULES)


def to_value(x: Any, aval: Any) -> np.ndarray:
    """An input, const or literal as an interpreter value (exact balls for floats)."""
    if is_complex(aval.dtype):
        return _complex.to_acb_array(np.asarray(x))
    if np.iscomplexobj(x):
        raise OracleError(f"complex value for an input of dtype {aval.dtype}")
    if _random.is_key(aval.dtype):
        return x  # a PRNG key array stays a JAX array (see _random)
    arr = np.asarray(x)
    if is_float(aval.dtype):
        if not is_float(arr.dtype):
            return ints_to_arb(arr)
        # The program sees its input cast to its own dtype (a float64 array passed without x64 enabled
        # is float32 to it): take that value, correctly rounded by numpy's cast.
        return to_arb_array(arr.astype(aval.dtype, copy=False))
    return arr.astype(aval.dtype, copy=False)


class Interpreter:
    """Walks closed jaxprs at one working precision; caches converted consts and literals across runs.

    ``flat``: the program is elementwise and runs on a subset of its elements (1-d), so results are not
    broadcast to the shapes the jaxpr declares (see ``_evaluate``)."""

    def __init__(self, flat: bool = False) -> None:
        self.prec = 0
        self.flat = flat
        self._stack: list[Any] = []
        self._converted: dict[int, tuple[Any, np.ndarray]] = {}
        self._rules: dict[int, tuple[Any, Rule | None]] = {}

    # Context protocol -----------------------------------------------------------------------------
    def call(self, closed: Any, args: Sequence[np.ndarray]) -> list[np.ndarray]:
        consts = [self._convert(c, _compat.aval(v)) for v, c in zip(_compat.constvars(closed),
                                                                     _compat.parts(closed)[1])]
        env: dict[Any, np.ndarray] = dict(zip(_compat.constvars(closed), consts))
        env.update(zip(_compat.invars(closed), args))
        ties, skip = _extremum.find(closed), _live.dead(closed)
        for eqn in _compat.eqns(closed):
            if skip and id(eqn) in skip:  # read by nothing: a decision it cannot make must not stop us
                continue
            invals = [self._read(env, a) for a in eqn.invars]
            tie = ties.get(id(eqn)) if ties else None
            if tie is not None and any(v.dtype == object for v in invals):  # ``eq(x, max(x))``
                (var,) = eqn.outvars
                if not _compat.is_dropvar(var):
                    env[var] = _conform(_extremum.compare(tie, _compat.primitive_name(eqn), *invals),
                                        _compat.aval(var), self.flat)
                continue
            if self.flat and _compat.primitive_name(eqn) == "broadcast_in_dim":
                # Flat mode admits only broadcasts of scalars, which numpy broadcasting does for us.
                env[eqn.outvars[0]] = invals[0]
                continue
            for var, val in zip(eqn.outvars, self.apply(eqn, invals)):
                if not _compat.is_dropvar(var):
                    env[var] = val
        return [self._read(env, a) for a in _compat.outvars(closed)]

    def apply(self, eqn: Any, invals: Sequence[np.ndarray], as_eqn: Any = None) -> list[np.ndarray]:
        """One equation on its operands' values: its results, each of its variable's kind (and shape,
        unless ``flat``). ``as_eqn``: what the rule reads in place of ``eqn`` (its params and result
        avals: the same primitive over a part of the operands, ``_mixed``)."""
        hit = self._rules.get(id(eqn))
        rule = hit[1] if hit is not None and hit[0] is eqn else self._remember_rule(eqn)
        if rule is None:  # the pre-scan makes this unreachable, kept for direct callers
            raise self.unsupported(eqn)
        self._stack.append(eqn)
        try:
            out = rule(self, eqn if as_eqn is None else as_eqn, *invals)
        finally:
            self._stack.pop()
        if as_eqn is not None:
            eqn = as_eqn
        outs = out if eqn.primitive.multiple_results else [out]
        return [val if _compat.is_dropvar(var) else _conform(val, _compat.aval(var), self.flat)
                for var, val in zip(eqn.outvars, outs)]

    def literal(self, atom: Any) -> np.ndarray:
        """A literal operand's value (converted once)."""
        return self._convert(atom, _compat.aval(atom), _compat.literal_value(atom))

    def const(self, key: Any, aval: Any) -> np.ndarray:
        """A constant's value (converted once)."""
        return self._convert(key, aval)

    def _remember_rule(self, eqn: Any) -> Rule | None:
        rule = _rule(eqn, _compat.primitive_name(eqn))
        self._rules[id(eqn)] = (eqn, rule)  # holds `eqn` so that its id stays unique
        return rule

    def unsupported(self, eqn: Any, reason: str | None = None) -> UnsupportedPrimitive:
        return UnsupportedPrimitive(_compat.primitive_name(eqn), self.location(eqn), reason)

    def location(self, eqn: Any) -> str | None:
        return _location(eqn, self._stack)

    # internals ------------------------------------------------------------------------------------
    def _read(self, env: dict[Any, np.ndarray], atom: Any) -> np.ndarray:
        if _compat.is_literal(atom):
            return self._convert(atom, _compat.aval(atom), _compat.literal_value(atom))
        return env[atom]

    def _convert(self, key: Any, aval: Any, value: Any = None) -> np.ndarray:
        hit = self._converted.get(id(key))
        if hit is not None and hit[0] is key:
            return hit[1]
        val = to_value(key if value is None else value, aval)
        self._converted[id(key)] = (key, val)  # holds `key` so that its id stays unique
        return val


def _rule(eqn: Any, name: str) -> Rule | None:
    """The rule for ``eqn``: its primitive's, or an eager bind where no real number is involved (keys,
    integers: exact integer arithmetic, see _random); complex values by ``_complex``'s rules."""
    if _complex.involves_complex(eqn):
        return _complex.rule_for(eqn, _RULES)
    integral = name not in _CONTROL and name not in _effects.RULES and _random.is_integral(eqn)
    if integral and (name not in _RULES or _random.involves_keys(eqn)):
        return _random.concrete
    return _RULES.get(name)


def _conform(val: Any, aval: Any, flat: bool = False) -> np.ndarray:
    """A rule's result as a value of ``aval``'s kind and shape (kind only in flat mode)."""
    if _random.is_key(aval.dtype):
        return val
    shape = tuple(aval.shape)
    if is_complex(aval.dtype):
        val = obj(val)
    elif is_float(aval.dtype):
        if isinstance(val, np.ndarray) and val.dtype != object:  # a rule returned plain numbers
            val = to_arb_array(val) if is_float(val.dtype) else ints_to_arb(val)
        val = obj(val)
    else:
        val = np.asarray(val)
        if val.dtype != aval.dtype:
            val = val.astype(aval.dtype)
    if val.shape != shape and not flat:
        val = np.broadcast_to(val, shape)
    return val


def _location(eqn: Any, stack: Sequence[Any]) -> str | None:
    """The user's ``file:line`` of ``eqn``, else of the nearest enclosing equation that has one."""
    for e in (eqn, *reversed(stack)):
        loc = _compat.location(e)
        if loc is not None:
            return loc
    return None


def _runnable_subjaxprs(eqn: Any) -> list[Any]:
    """The sub-jaxprs the interpreter will run for ``eqn`` (not derivative rules)."""
    name = _compat.primitive_name(eqn)
    if _library.lookup(eqn) is not None:
        return []  # evaluated by its mathematics: the body never runs
    if name == "custom_linear_solve":
        return [_compat.as_closed(eqn.params["jaxprs"].solve)]
    if name == "call_hi_primitive":
        closed = _hijax.expansion(eqn)
        return [] if closed is None else [closed]
    if name in CUSTOM_DERIVATIVES:
        return [_compat.custom_call_parts(eqn)[0]]
    return [sub for _, sub in _compat.subjaxprs(eqn)]


def check_supported(closed: Any, stack: tuple[Any, ...] = ()) -> None:
    """Raises UnsupportedPrimitive for the first equation the oracle cannot evaluate, before running."""
    for eqn in _compat.eqns(closed):
        name = _compat.primitive_name(eqn)
        if _rule(eqn, name) is None:
            reason = (_complex.unsupported_reason(eqn) if _complex.involves_complex(eqn)
                      else REFUSED_PRIMITIVES.get(name))
            raise UnsupportedPrimitive(name, _location(eqn, stack), reason)
        for sub in _runnable_subjaxprs(eqn):
            check_supported(sub, (*stack, eqn))


