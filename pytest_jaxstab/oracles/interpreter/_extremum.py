"""Comparisons of a value with its own row's extremum: ``eq(x, max(x, axis))`` (issue 47).

JAX's derivative of ``reduce_max`` (``jnp.max``, a hand-written max-shifted softmax or log-sum-exp
whose max is not behind a ``stop_gradient``) marks where the maximum sits with ``eq(x, m)``, ``m`` the
reduction moved back to ``x``'s shape. Where ``x`` is computed (not an exact input) its balls have a
radius, so the ball of the maximum overlaps the ball of the element it came from, and the comparison
rule cannot decide ``eq(x_i, m)``: every derivative element was uncertain at every precision.

The mathematics decides it: where one element's ball lies strictly above every other element's of its
row (below, for ``reduce_min``), that element's exact value is the row's exact maximum, so comparing it
with the maximum compares a real with itself (``eq``, ``le``, ``ge`` hold; ``ne``, ``lt``, ``gt`` do
not). Every other element is left to the comparison rule, which decides it where its ball lies apart
from the maximum's. A row without such a strict leader (a real tie, or balls not yet narrow enough; an
element without a value, NaN) is left to the comparison rule entirely: undecided, as before, never a
guess.

The pattern is proven on the jaxpr, not assumed: the comparison's other operand must be the very
reduction of the same variable, moved back by ``reshape``/``broadcast_in_dim``/``squeeze`` only, and
the moves are run on the reduction's element indices to check that every position of ``x`` reads its
own row's result (:func:`find`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from ... import _compat
from ..._primitives import ELEMENTWISE, GLUE, REDUCTIONS
from ..core._arb_binary import BINARY
from ..core._common import is_float

__all__ = ["Extremum", "compare", "find"]

#: The comparisons handled, and whether each holds between a real and itself.
_REFLEXIVE = {"eq": True, "le": True, "ge": True, "ne": False, "lt": False, "gt": False}
_REDUCTIONS = {"reduce_max": "max", "reduce_min": "min"}
_MOVES = frozenset({"reshape", "broadcast_in_dim", "squeeze"})
#: Primitives whose exact result is a function of their operands and params alone: two equations of
#: one of them, with equal params and operands of equal value, give equal values (``_same``).
_PURE = (ELEMENTWISE | GLUE | REDUCTIONS) - {"random_gamma_grad"}
#: How deep ``_same`` follows two expressions before giving up (a "no" is always safe).
_DEPTH = 24
#: Jaxprs analysed, by id (holding the jaxpr so that its id stays unique); bounded.
_CACHE: dict[int, tuple[Any, dict[int, Extremum]]] = {}
_CACHE_SIZE = 64


@dataclasses.dataclass(frozen=True)
class Extremum:
    """A comparison ``cmp(x, m)`` (``side`` 0) or ``cmp(m, x)`` (``side`` 1) where ``m`` is the
    ``kind`` ("max" or "min") of ``x`` over ``axes``, moved back to ``x``'s shape."""

    side: int
    kind: str
    axes: tuple[int, ...]


def find(closed: Any) -> dict[int, Extremum]:
    """The comparisons of ``closed``'s own equations (not its sub-jaxprs') that compare a variable with
    its extremum over some axes, by ``id`` of the equation (cached per jaxpr)."""
    jaxpr = closed.jaxpr if hasattr(closed, "jaxpr") else closed
    hit = _CACHE.get(id(jaxpr))
    if hit is not None and hit[0] is jaxpr:
        return hit[1]
    producer = {v: e for e in _compat.eqns(closed) for v in e.outvars if not _compat.is_dropvar(v)}
    found: dict[int, Extremum] = {}
    for eqn in _compat.eqns(closed):
        if _compat.primitive_name(eqn) not in _REFLEXIVE or any(_compat.is_literal(a) for a in eqn.invars):
            continue
        for side in (0, 1):
            ex = _match(eqn, side, producer)
            if ex is not None:
                found[id(eqn)] = ex
                break
    if len(_CACHE) >= _CACHE_SIZE:
        _CACHE.pop(next(iter(_CACHE)))
    _CACHE[id(jaxpr)] = (jaxpr, found)
    return found


def _match(eqn: Any, side: int, producer: dict[Any, Any]) -> Extremum | None:
    x, cur = eqn.invars[side], eqn.invars[1 - side]
    shape = tuple(_compat.aval(x).shape)
    # real values only: complex ones are ordered lexicographically by their own rules (``complex``)
    if not is_float(_compat.aval(x).dtype) or tuple(_compat.aval(eqn.outvars[0]).shape) != shape:
        return None
    moves = []
    while (p := producer.get(cur)) is not None and _compat.primitive_name(p) in _MOVES:
        moves.append(p)
        cur = p.invars[0]
        if _compat.is_literal(cur):
            return None
    p = producer.get(cur)
    if p is None or _compat.primitive_name(p) not in _REDUCTIONS or not _same(p.invars[0], x, producer):
        return None
    axes = tuple(int(a) for a in p.params["axes"])
    reduced = tuple(_compat.aval(cur).shape)
    index = np.arange(int(np.prod(reduced, dtype=np.int64))).reshape(reduced)
    try:
        for move in reversed(moves):
            index = _move(move, index)
        moved = np.broadcast_to(index, shape)
    except (ValueError, KeyError, TypeError):  # a move this check does not follow: not the pattern
        return None
    rows = np.arange(int(np.prod(reduced, dtype=np.int64))).reshape(reduced)
    own = np.broadcast_to(np.expand_dims(rows, axes), shape)  # each position: its own row's result
    if not np.array_equal(moved, own):
        return None
    return Extremum(side, _REDUCTIONS[_compat.primitive_name(p)], axes)


def _same(u: Any, v: Any, producer: dict[Any, Any], depth: int = _DEPTH) -> bool:
    """Whether ``u`` and ``v`` provably hold the same exact values: the same variable, equal literals,
    or results of pure equations (``_PURE``) of the same primitive, params and avals over operands that
    are the same in turn (a user's ``tanh(x) == max(tanh(x))`` traces ``tanh`` twice). False when
    unsure."""
    if u is v:
        return True
    if _compat.is_literal(u) or _compat.is_literal(v):
        if not (_compat.is_literal(u) and _compat.is_literal(v)):
            return False
        au, av = _compat.aval(u), _compat.aval(v)
        lu, lv = np.asarray(_compat.literal_value(u)), np.asarray(_compat.literal_value(v))
        return au.dtype == av.dtype and lu.shape == lv.shape and lu.tobytes() == lv.tobytes()  # bitwise
    pu, pv = producer.get(u), producer.get(v)
    if depth <= 0 or pu is None or pv is None or pu.primitive is not pv.primitive:
        return False
    if _compat.primitive_name(pu) not in _PURE or len(pu.outvars) != 1 or len(pv.outvars) != 1:
        return False
    if _compat.aval(u) != _compat.aval(v) or len(pu.invars) != len(pv.invars):
        return False
    try:
        if pu.params != pv.params:
            return False
    except Exception:  # params that do not compare (arrays): not provably equal
        return False
    return all(_same(a, b, producer, depth - 1) for a, b in zip(pu.invars, pv.invars))


def _move(eqn: Any, index: np.ndarray) -> np.ndarray:
    """A move equation applied to an array of element indices (numpy, the primitive's semantics)."""
    name, params = _compat.primitive_name(eqn), eqn.params
    out_shape = tuple(_compat.aval(eqn.outvars[0]).shape)
    if name == "reshape":
        if params.get("dimensions") is not None:
            raise ValueError("a reshape with a transpose")
        return index.reshape(out_shape)
    if name == "squeeze":
        return np.squeeze(index, axis=tuple(int(d) for d in params["dimensions"]))
    dims = tuple(int(d) for d in params["broadcast_dimensions"])  # broadcast_in_dim
    if list(dims) != sorted(set(dims)):  # JAX requires them increasing; a reshape cannot transpose
        raise ValueError("broadcast dimensions out of order")
    expanded = index.reshape([index.shape[dims.index(k)] if k in dims else 1 for k in range(len(out_shape))])
    return np.broadcast_to(expanded, out_shape)


def compare(ex: Extremum, name: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``name(a, b)`` elementwise (balls), deciding the positions that hold their row's strict leader
    (module docstring); every other position by the comparison rule, which raises ``Undecided`` as
    it always does."""
    x = a if ex.side == 0 else b
    a, b = np.broadcast_arrays(a, b)
    leader = _leaders(np.asarray(x), ex)
    fn: Callable[[Any, Any], bool] = BINARY[name]
    out = np.empty(a.shape, dtype=bool)
    for pos in np.ndindex(a.shape):
        out[pos] = _REFLEXIVE[name] if leader[pos] else fn(a[pos], b[pos])
    return out


def _leaders(x: np.ndarray, ex: Extremum) -> np.ndarray:
    """Where an element is provably its row's extremum: its ball strictly beyond every other ball of
    the row (the element with the extreme midpoint is the only candidate)."""
    axes = ex.axes
    rows = np.moveaxis(x, axes, tuple(range(x.ndim - len(axes), x.ndim)))
    width = int(np.prod([x.shape[k] for k in axes], dtype=np.int64))
    flat = rows.reshape(-1, width)
    lead = np.zeros(flat.shape, dtype=bool)
    for r in range(flat.shape[0]):
        row = flat[r]
        if width == 0 or any(v is None for v in row):
            continue
        if ex.kind == "max":
            best = max(range(width), key=lambda j: row[j].mid())
            lead[r, best] = all(bool(row[j] < row[best]) for j in range(width) if j != best)
        else:
            best = min(range(width), key=lambda j: row[j].mid())
            lead[r, best] = all(bool(row[j] > row[best]) for j in range(width) if j != best)
    back = lead.reshape(rows.shape)
    return np.moveaxis(back, tuple(range(x.ndim - len(axes), x.ndim)), axes)
