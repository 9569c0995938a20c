"""Constants a program computes from constants alone, folded for matching (issue 47).

Library code builds its constants with array operations: ``jnp.full_like(x, 2.0) / 2 - 1`` (a
coefficient that is exactly 0), ``jnp.where(loc >= low, 1.0, -1.0)`` on closed-over numbers (a sign that
is exactly 1). A pattern's ``const`` would see only a literal or a broadcast of one, and the rules
(``log(Φ(b) - Φ(a))``, ``x·log(y)``) would not meet the form the program computes. :func:`constant`
evaluates, with numpy, the equations whose operands are all literals or constants of the program,
so that ``const`` patterns and ``Graph.head`` see the value the program computes.

Only operations whose IEEE result numpy reproduces bit for bit are folded (arithmetic, comparisons,
selections, conversions, glue, and calls of such equations such as ``jnp.where``'s ``jit``); a
square root (a rule may read ``jnp.sqrt(2.0)`` as √2 itself), a transcendental function (whose last
bit may differ by backend), a reduction, or a
result that is subnormal (flushed to zero by XLA on CPU, kept by numpy) is not folded. Folding only
informs matching: the equations stay in the program (a replacement that needs the value reads the
program's own atom, or the Python number a ``const`` captured, which is the same number).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ... import _compat

__all__ = ["FOLDABLE", "MAX_ELEMENTS", "constant"]

#: The most elements a folded value holds once materialised (a broadcast of one value stays one).
MAX_ELEMENTS = 4096
#: The most equations of a call's body that are folded (``jnp.where``'s ``jit`` has one to three).
_MAX_BODY = 32

_BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "max": np.maximum, "min": np.minimum,
    "eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
    "ge": np.greater_equal, "and": np.logical_and, "or": np.logical_or,
}
# not ``sqrt``: ``jnp.sqrt(2.0)`` means √2 itself to the rules that read a scale (``_stability_special``
# captures its radicand); folded, it would be its rounding
_UNARY = {"neg": np.negative, "abs": np.abs, "not": np.logical_not, "sign": np.sign, "floor": np.floor,
          "ceil": np.ceil, "square": np.square}
_IDENTITY = frozenset({"copy", "copy_p", "stop_gradient", "optimization_barrier"})
_CALLS = frozenset({"jit", "pjit", "closed_call"})


class _NotConstant(Exception):
    pass


def constant(g: Any, atom: Any) -> np.ndarray | None:
    """The value of ``atom`` when the program computes it from constants alone, else None.

    The value is a numpy array of the atom's rank whose axes are either full or of size 1 (a value
    broadcast along an axis keeps it at size 1), of the atom's dtype. ``g`` is the rewrite pass's
    ``Graph``; results are kept on it (``g.folded``), one evaluation per atom and pass.
    """
    literal = _compat.is_literal(atom)
    if not literal and atom not in g.from_constants:  # what the graph's walk found (most atoms)
        return None
    memo: dict[Any, Any] = g.folded
    key = _key(atom)
    if key in memo:
        return memo[key]
    # an explicit stack (a program's chain of equations can be longer than Python's recursion)
    stack: list[Any] = [atom]
    while stack:
        a = stack[-1]
        k = _key(a)
        if k in memo:
            stack.pop()
            continue
        leaf = _leaf(g, a)
        if leaf is not _PENDING:
            memo[k] = leaf
            stack.pop()
            continue
        _, eqn = g.producer_eqn(a)
        missing = [b for b in eqn.invars if _key(b) not in memo]
        if any(memo.get(_key(b), 0) is None for b in eqn.invars):
            memo[k] = None
            stack.pop()
            continue
        if missing:
            stack.extend(missing)
            continue
        stack.pop()
        try:
            memo[k] = _evaluate(eqn, [memo[_key(b)] for b in eqn.invars], a)
        except (_NotConstant, ArithmeticError, TypeError, ValueError):
            memo[k] = None
    return memo[key]


_PENDING = object()


def _key(atom: Any) -> Any:
    # literals are compared by value, not identity (a program repeats 1.0 in many equations)
    return ("lit", id(atom)) if _compat.is_literal(atom) else atom


def _leaf(g: Any, atom: Any) -> Any:
    """The value of a literal or constant, None for an input or a value the pass cannot fold, or
    ``_PENDING`` when the equation producing it may be folded."""
    if _compat.is_literal(atom):
        return _compact(np.asarray(_compat.literal_value(atom), _compat.aval(atom).dtype),
                        _compat.aval(atom).shape)
    if atom in g.const_values:
        val = g.const_values[atom]
        if _compat.is_tracer(val):  # an enclosing trace's value: not a constant here
            return None
        try:
            return _compact(np.asarray(val), _compat.aval(atom).shape)
        except (TypeError, ValueError):
            return None
    prod = g.producer_eqn(atom)
    if prod is None or not _foldable(prod[1]):
        return None
    return _PENDING


def _foldable(eqn: Any) -> bool:
    name = _compat.primitive_name(eqn)
    if len(eqn.outvars) != 1 or eqn.effects:
        return False
    if name in _CALLS:
        subs = _compat.subjaxprs(eqn)
        return len(subs) == 1 and len(_compat.eqns(subs[0][1])) <= _MAX_BODY
    return name in FOLDABLE


_SHAPES = frozenset({"broadcast_in_dim", "reshape", "squeeze", "expand_dims"})
#: The primitives :func:`constant` evaluates (a call only where its body is small and foldable too).
FOLDABLE = frozenset({*_BINARY, *_UNARY, *_IDENTITY, *_SHAPES, *_CALLS,
                      "div", "select_n", "convert_element_type", "integer_pow", "clamp"})


def _compact(val: np.ndarray, shape: tuple[int, ...]) -> np.ndarray | None:
    """``val`` (broadcastable to ``shape``) as an array of ``shape``'s rank with each axis full or 1:
    an axis along which every element is the same is kept at size 1. None where too large."""
    shape = tuple(shape)
    if val.ndim > len(shape):
        return None
    val = val.reshape((1,) * (len(shape) - val.ndim) + val.shape)
    if val.size > 1:
        for ax in range(val.ndim):
            if val.shape[ax] > 1 and _uniform_along(val, ax):
                val = val.take([0], axis=ax)
    if val.size > MAX_ELEMENTS:
        return None
    if val.dtype.kind == "f" and val.size:
        tiny = np.finfo(val.dtype).tiny
        mags = np.abs(val)
        if np.any((mags > 0) & (mags < tiny)):  # XLA flushes it on CPU, numpy keeps it
            return None
    return val


def _uniform_along(val: np.ndarray, ax: int) -> bool:
    first = val.take([0], axis=ax)
    with np.errstate(invalid="ignore"):
        same = (val == first) | (np.isnan(val) & np.isnan(first)) if val.dtype.kind in "fc" else val == first
    return bool(np.all(same))


def _full(val: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    if math.prod(shape) > MAX_ELEMENTS:
        raise _NotConstant
    return np.broadcast_to(val, shape)


def _evaluate(eqn: Any, vals: list[np.ndarray], out: Any) -> np.ndarray | None:
    """One equation on folded operands (each of its operand's rank, axes full or 1)."""
    name = _compat.primitive_name(eqn)
    out_aval = _compat.aval(out)
    dtype, shape = np.dtype(out_aval.dtype), tuple(out_aval.shape)
    if name in _CALLS:
        (_, body), = _compat.subjaxprs(eqn)
        res = _call(body, vals)
    elif name in _BINARY:
        with np.errstate(all="ignore"):
            res = _BINARY[name](*vals)
    elif name in _UNARY:
        with np.errstate(all="ignore"):
            res = _UNARY[name](vals[0])
    elif name in _IDENTITY:
        res = vals[0]
    elif name == "div":
        if dtype.kind != "f":  # integer division rounds toward zero in XLA
            raise _NotConstant
        with np.errstate(all="ignore"):
            res = np.divide(*vals)
    elif name == "integer_pow":
        res = _integer_pow(vals[0], int(eqn.params["y"]))
    elif name == "clamp":
        with np.errstate(all="ignore"):
            res = np.minimum(np.maximum(vals[1], vals[0]), vals[2])
    elif name == "select_n":
        pred, cases = vals[0], vals[1:]
        if pred.dtype == np.bool_:
            pred = pred.astype(np.int32)
        arrays = np.broadcast_arrays(pred, *cases)
        res = np.choose(arrays[0], arrays[1:])
    elif name == "convert_element_type":
        src = vals[0]
        if dtype.kind in "iu" and src.dtype.kind == "f" and not np.all(np.isfinite(src)):
            raise _NotConstant  # a NaN or an infinity converted to an integer: XLA's is not numpy's
        with np.errstate(all="ignore"):
            res = src.astype(dtype)
    elif name == "broadcast_in_dim":
        res = _broadcast(vals[0], shape, tuple(eqn.params["broadcast_dimensions"]))
    else:  # reshape, squeeze, expand_dims: the same elements in another shape
        v = vals[0]
        if v.size == 1:
            res = v.reshape(())
        elif name == "reshape" and eqn.params.get("dimensions") is not None:
            raise _NotConstant
        else:
            res = _full(v, tuple(_compat.aval(eqn.invars[0]).shape)).reshape(shape)
    res = np.asarray(res)
    if res.dtype != dtype:
        with np.errstate(all="ignore"):
            res = res.astype(dtype)
    return _compact(res, shape)


def _integer_pow(v: np.ndarray, y: int) -> np.ndarray:
    # repeated products in the order XLA's expansion rounds them is not guaranteed: only the exact
    # powers (0, 1, 2 as a single product) are folded
    if y == 0:
        return np.ones_like(v)
    if y == 1:
        return v
    if y == 2:
        with np.errstate(all="ignore"):
            return v * v
    raise _NotConstant


def _broadcast(v: np.ndarray, shape: tuple[int, ...], dims: tuple[int, ...]) -> np.ndarray:
    """``lax.broadcast_in_dim`` on a compact value: operand axis k becomes output axis dims[k]."""
    new = [1] * len(shape)
    for k, d in enumerate(dims):
        new[d] = v.shape[k]
    return v.reshape(new)


def _call(body: Any, vals: list[np.ndarray]) -> np.ndarray:
    """A call's single result, its body folded equation by equation."""
    env: dict[Any, np.ndarray] = {}
    for v, c in zip(_compat.constvars(body), body.consts):
        if _compat.is_tracer(c):
            raise _NotConstant
        got = _compact(np.asarray(c), _compat.aval(v).shape)
        if got is None:
            raise _NotConstant
        env[v] = got
    env.update(zip(_compat.invars(body), vals))

    def read(a: Any) -> np.ndarray:
        if _compat.is_literal(a):
            got = _compact(np.asarray(_compat.literal_value(a), _compat.aval(a).dtype), _compat.aval(a).shape)
            if got is None:
                raise _NotConstant
            return got
        return env[a]

    for e in _compat.eqns(body):
        if not _foldable(e):
            raise _NotConstant
        got = _evaluate(e, [read(a) for a in e.invars], e.outvars[0])
        if got is None:
            raise _NotConstant
        env[e.outvars[0]] = got
    outs = _compat.outvars(body)
    if len(outs) != 1:
        raise _NotConstant
    return read(outs[0])
