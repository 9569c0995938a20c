"""Array primitives on intervals: reductions, cumulative sums, ``dot_general``, and what moves values.

Sums and products of many terms are bounded as a whole, not term by term (Higham, *Accuracy and
Stability*, 4.2 and 3.1): a float64 sum of ``n`` terms in any order, pairwise and blocked (NumPy) or
with FMAs (BLAS) included, is within ``gamma_n sum |x_i|`` of the exact sum of the midpoints,
``gamma_n = n u / (1 - n u)``; a dot product of length ``k`` within ``gamma_k sum |a_i b_i|`` plus ``k``
half-subnormals for products that underflow. The radii add the operands' own: ``sum r_i`` for a sum,
Rump's ``|A| rB + rA (|B| + rB)`` for a product ("Fast and parallel interval arithmetic", BIT 1999). Each
of these sums of non-negative terms is itself computed in float64 and then enlarged by ``1 + 2
gamma_n`` (and ``n`` subnormals for products), which bounds its exact value. The standard BLAS
computes each entry of a matrix product as such a dot product; a Strassen-type product would not be
covered by this bound (NumPy's BLAS is not one). NaN entries are cleared before the products and
their rows and columns marked undecided afterwards, since a BLAS may skip a product by an exact 0.

Structural primitives (shapes, slices, padding, ``gather``) only move values: the Arb path's own
rules (``primitives/_structural``), which are numpy code, move the midpoints and the radii alike, and
``gather`` moves the positions of the operand's elements (so out-of-bounds fills and clamping are
exactly the Arb path's).
"""

from __future__ import annotations

import types
from typing import Any

import numpy as np

from ... import _compat
from ..primitives import _reductions as _arb_reductions
from ..primitives import _structural as _arb_structural
from ._elementwise import to_interval, unknown_of
from ._interval import (
    ETA,
    Exact,
    Interval,
    NotCovered,
    U,
    Value,
    add_up,
    ends,
    from_ends,
    mul_up,
    neg,
    up,
)

__all__ = ["RULES"]

_MAX_TERMS = 2 ** 33  # gamma_n's bound below needs n u <= 2^-20


def _gamma(n: int) -> float:
    """An upper bound of ``gamma_n = n u / (1 - n u)``."""
    if n > _MAX_TERMS:
        raise NotCovered(f"a sum of {n} terms")
    return float(up(np.float64(n) * U * (1.0 + 2.0 ** -10)))


def _upper(total: np.ndarray, n: int, products: bool = False) -> np.ndarray:
    """An upper bound of the exact sum of ``n`` non-negative terms whose float64 sum is ``total``
    (with ``products``: terms that are float64 products, each possibly underflowed by 2^-1075)."""
    if products:
        total = add_up(total, np.float64(n * ETA))
    return mul_up(total, np.float64(up(1.0 + 2.0 * _gamma(n))))


def _last(a: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """``a`` with ``axes`` moved last and flattened into one."""
    kept = [d for d in range(a.ndim) if d not in axes]
    k = int(np.prod([a.shape[d] for d in axes], dtype=np.int64))
    return np.transpose(a, kept + list(axes)).reshape((*(a.shape[d] for d in kept), k))


def _axes(eqn: Any, ndim: int) -> tuple[int, ...]:
    return tuple(int(a) % max(ndim, 1) for a in eqn.params["axes"])


def _integers(eqn: Any, *args: Value, whole: bool = True) -> Exact:
    """An integer equation with a rule of the Arb path's (numpy on the values); unknown everywhere
    where any operand element is (``whole``), as a reduction mixes them."""
    if not all(isinstance(a, Exact) for a in args):
        raise NotCovered(f"{eqn.primitive.name} on floats and integers")
    rule = _arb_reductions.RULES[_compat.primitive_name(eqn)]
    out = np.asarray(rule(None, eqn, *[np.asarray(a.value) for a in args]))  # type: ignore[union-attr]
    unknown = unknown_of(*args)
    return Exact(out, None if unknown is None else np.full(out.shape, True))


# ------------------------------------------------------------------------------------- reductions
def _reduce_sum(ctx: Any, eqn: Any, x: Value) -> Value:
    if isinstance(x, Exact):
        return _integers(eqn, x)
    x = x.finite()
    axes = _axes(eqn, x.mid.ndim)
    n = max(int(np.prod([x.shape[a] for a in axes])), 1)
    with np.errstate(all="ignore"):
        mid, rounding = _compensated_sum(_last(x.mid, axes))
        spread = _upper(np.sum(x.rad, axis=axes), n)
    return Interval.make(mid, add_up(spread, rounding))


def _two_sum(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Knuth's TwoSum: ``s = fl(a + b)`` and ``e`` with ``a + b = s + e`` exactly (no overflow)."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _compensated_sum(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The sums of the last axis and a bound on their errors, made tight by keeping the additions'
    errors (Ogita, Rump and Oishi's Sum2, pairwise): a tree of TwoSums gives ``S`` and the exact errors
    ``e_j`` (``sum x = S + sum e_j``); their float sum is within ``gamma_m sum |e_j|``, and the last
    addition's error is exact again. The bound is about ``u^2 n sum |x|`` rather than ``u n sum |x|``,
    and 0 where every addition is exact."""
    v = rows
    if v.shape[-1] == 0:
        return np.zeros(v.shape[:-1]), np.zeros(v.shape[:-1])
    width = 1 << (v.shape[-1] - 1).bit_length()  # padded with exact zeros to a power of two
    if width != v.shape[-1]:
        v = np.concatenate([v, np.zeros((*v.shape[:-1], width - v.shape[-1]))], axis=-1)
    errors = []
    while v.shape[-1] > 1:
        v, e = _two_sum(v[..., 0::2], v[..., 1::2])
        errors.append(e)
    if not errors:
        return v[..., 0], np.zeros(v.shape[:-1])
    e = np.concatenate(errors, axis=-1)
    m = e.shape[-1]
    total, last = _two_sum(v[..., 0], np.sum(e, axis=-1))
    bound = mul_up(np.float64(_gamma(m)), _upper(np.sum(np.abs(e), axis=-1), m))
    return total, add_up(np.abs(last), bound)


def _extreme(x: Interval, axes: tuple[int, ...], maximum: bool) -> Interval:
    """The maximum (or minimum) over ``axes``: the hull of the ends, or the one element that dominates
    the rest as it is."""
    sign = 1.0 if maximum else -1.0
    mid, rad = _last(x.mid, axes) * sign, _last(x.rad, axes)
    if mid.shape[-1] == 0:
        return Interval.exact(np.full(mid.shape[:-1], -np.inf * sign))
    lo, hi = ends(Interval(mid, rad))
    with np.errstate(invalid="ignore"):
        top_lo, top_hi = lo.max(axis=-1), hi.max(axis=-1)
        c = np.argmax(lo, axis=-1)[..., None]
        own = np.take_along_axis(hi, c, -1)[..., 0] >= top_hi
        both = from_ends(top_lo, top_hi, infinite=True)
        out_mid = np.where(own, np.take_along_axis(mid, c, -1)[..., 0], both.mid)
        out_rad = np.where(own, np.take_along_axis(rad, c, -1)[..., 0], both.rad)
        out_mid = np.where(np.isnan(mid).any(axis=-1), np.nan, out_mid)
    out = Interval.make(out_mid, out_rad, infinite=True)
    return out if maximum else neg(out)


def _reduce_extreme(maximum: bool) -> Any:
    def rule(ctx: Any, eqn: Any, x: Value) -> Value:
        if isinstance(x, Exact):
            return _integers(eqn, x)
        return _extreme(x, _axes(eqn, x.mid.ndim), maximum)

    return rule


def _arg_extreme(maximum: bool) -> Any:
    def rule(ctx: Any, eqn: Any, x: Value) -> Value:
        """The first index of the extremum, decided where that element's interval beats every earlier
        one strictly and every later one or ties it (``primitives/_reductions._arg_row``'s choice)."""
        if isinstance(x, Exact):
            return _integers(eqn, x)
        (axis,) = _axes(eqn, x.mid.ndim)
        mid, rad = _last(x.mid, (axis,)), _last(x.rad, (axis,))
        lo, hi = ends(Interval(mid, rad) if maximum else neg(Interval(mid, rad)))
        with np.errstate(invalid="ignore"):
            c = np.argmax(np.where(np.isnan(lo), -np.inf, lo), axis=-1)
            best = np.take_along_axis(lo, c[..., None], -1)
            pos = np.arange(mid.shape[-1])
            before, after = pos < c[..., None], pos > c[..., None]
            decided = ~(before & ~(best > hi)).any(axis=-1) & ~(after & ~(best >= hi)).any(axis=-1)
            decided &= ~np.isnan(mid).any(axis=-1)
        value = c.astype(np.dtype(eqn.params["index_dtype"]))
        return Exact(value, None if decided.all() else ~decided)

    return rule


def _cumulative(kind: str) -> Any:
    def rule(ctx: Any, eqn: Any, x: Value) -> Value:
        axis = int(eqn.params["axis"]) % max(len(x.shape), 1)
        reverse = bool(eqn.params.get("reverse", False))
        if isinstance(x, Exact):
            out = _arb_reductions.RULES[kind](None, eqn, np.asarray(x.value))
            if x.unknown is None:
                return Exact(out)
            mask = np.flip(x.mask(), axis) if reverse else x.mask()
            mask = np.logical_or.accumulate(mask, axis=axis)
            return Exact(out, np.flip(mask, axis) if reverse else mask)
        if reverse:
            x = Interval(np.flip(x.mid, axis), np.flip(x.rad, axis))
        with np.errstate(all="ignore"):
            if kind == "cumsum":
                x = x.finite()
                n = max(x.shape[axis], 1)
                spread = _upper(np.cumsum(x.rad, axis=axis), n)
                rounding = mul_up(np.float64(_gamma(n)), _upper(np.cumsum(np.abs(x.mid), axis=axis), n))
                out = Interval.make(np.cumsum(x.mid, axis=axis), add_up(spread, rounding))
            else:
                sign = 1.0 if kind == "cummax" else -1.0
                lo, hi = ends(x if sign > 0 else neg(x))
                out = from_ends(np.maximum.accumulate(lo, axis=axis), np.maximum.accumulate(hi, axis=axis),
                                infinite=True)
                out = out if sign > 0 else neg(out)
        return Interval(np.flip(out.mid, axis), np.flip(out.rad, axis)) if reverse else out

    return rule


def _dot_general(ctx: Any, eqn: Any, lhs: Value, rhs: Value) -> Value:
    """Rump's midpoint-radius product, entry by entry a dot product of length ``k``."""
    out_aval = _compat.aval(eqn.outvars[0])
    if isinstance(lhs, Exact) and isinstance(rhs, Exact) and np.dtype(out_aval.dtype).kind in "biu":
        return _integers(eqn, lhs, rhs)
    a, b = to_interval(lhs).finite(), to_interval(rhs).finite()
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    lc, rc, lb, rb = ([int(d) for d in ds] for ds in (lc, rc, lb, rb))
    lfree = [d for d in range(a.mid.ndim) if d not in lc and d not in lb]
    rfree = [d for d in range(b.mid.ndim) if d not in rc and d not in rb]
    k = int(np.prod([a.shape[d] for d in lc], dtype=np.int64))
    out_shape = tuple(a.shape[d] for d in lb + lfree) + tuple(b.shape[d] for d in rfree)

    def arrange(v: np.ndarray, order: list[int], shape: tuple[int, int, int]) -> np.ndarray:
        return np.transpose(v, order).reshape(shape)

    nb = int(np.prod([a.shape[d] for d in lb], dtype=np.int64))
    m = int(np.prod([a.shape[d] for d in lfree], dtype=np.int64))
    n = int(np.prod([b.shape[d] for d in rfree], dtype=np.int64))
    am, ar = (arrange(v, lb + lfree + lc, (nb, m, k)) for v in (a.mid, a.rad))
    bm, br = (arrange(v, rb + rc + rfree, (nb, k, n)) for v in (b.mid, b.rad))
    bad = np.isnan(am).any(axis=-1)[:, :, None] | np.isnan(bm).any(axis=-2)[:, None, :]
    am, ar = np.where(np.isnan(am), 0.0, am), np.where(np.isnan(am), 0.0, ar)
    bm, br = np.where(np.isnan(bm), 0.0, bm), np.where(np.isnan(bm), 0.0, br)
    with np.errstate(all="ignore"):
        mid = np.matmul(am, bm)
        aa, ab = np.abs(am), np.abs(bm)
        rad = mul_up(np.float64(_gamma(k + 1)), _upper(np.matmul(aa, ab), k, products=True))
        if br.any():
            rad = add_up(rad, _upper(np.matmul(aa, br), k, products=True))
        if ar.any():
            rad = add_up(rad, _upper(np.matmul(ar, add_up(ab, br)), k, products=True))
        rad = add_up(rad, np.float64(k * ETA))  # the midpoint's own underflowed products
    mid = np.where(bad, np.nan, mid)
    return Interval.make(mid.reshape(out_shape), rad.reshape(out_shape))


# ------------------------------------------------------------------------------------- movement
#: Where an equation's index operands start (the rest before them are moved data).
_INDEX_FROM = {"dynamic_slice": 1, "dynamic_update_slice": 2, "gather": 1}
_MOVES = ("broadcast_in_dim", "reshape", "squeeze", "expand_dims", "transpose", "concatenate", "slice",
          "rev", "pad", "tile", "dynamic_slice", "dynamic_update_slice", "split", "copy", "copy_p",
          "stop_gradient", "optimization_barrier", "device_put", "sharding_constraint")


def _indices(eqn: Any, args: tuple[Value, ...]) -> tuple[list[Value], list[np.ndarray]]:
    start = _INDEX_FROM.get(_compat.primitive_name(eqn), len(args))
    index = args[start:]
    return list(args[:start]), [_decided(i) for i in index]


def _decided(index: Value) -> np.ndarray:
    """An index operand's values, known exactly, or NotCovered (the walk cannot move elements by it)."""
    if not isinstance(index, Exact) or index.unknown is not None:
        raise NotCovered("an index that depends on an undecided decision")
    return np.asarray(index.value)


def _move(ctx: Any, eqn: Any, *args: Value) -> Any:
    rule = _arb_structural.RULES[_compat.primitive_name(eqn)]
    data, index = _indices(eqn, args)
    many = eqn.primitive.multiple_results
    if any(isinstance(d, Interval) for d in data):
        data = [to_interval(d) for d in data]
        mids = rule(ctx, eqn, *[d.mid for d in data], *index)
        rads = rule(ctx, eqn, *[d.rad for d in data], *index)  # type: ignore[union-attr]
        if many:
            return [Interval(np.asarray(m), np.asarray(r)) for m, r in zip(mids, rads)]
        return Interval(np.asarray(mids), np.asarray(rads))
    values = rule(ctx, eqn, *[np.asarray(d.value) for d in data], *index)  # type: ignore[union-attr]
    if unknown_of(*data) is None:
        return [Exact(np.asarray(v)) for v in values] if many else Exact(np.asarray(values))
    masks = rule(ctx, eqn, *[d.mask() for d in data], *index)  # type: ignore[union-attr]
    if many:
        return [Exact(np.asarray(v), np.asarray(k)) for v, k in zip(values, masks)]
    return Exact(np.asarray(values), np.asarray(masks))


def _proxy(eqn: Any, result: Any, **params: Any) -> Any:
    """``eqn`` as the Arb path's rules read it (params, result aval), with an integer result and the
    ``params`` changed: so that its rule moves positions instead of values."""
    shape = tuple(_compat.aval(eqn.outvars[0]).shape)
    aval = types.SimpleNamespace(shape=shape, dtype=np.dtype(result))
    return types.SimpleNamespace(params={**eqn.params, **params}, outvars=[types.SimpleNamespace(aval=aval)],
                                 primitive=eqn.primitive)


def _gather(ctx: Any, eqn: Any, operand: Value, indices: Value) -> Value:
    (data,), (idx,) = _indices(eqn, (operand, indices))
    if not _arb_structural._is_fill_mode(eqn.params.get("mode")):  # clamped: values move as they are
        return _move(ctx, eqn, data, indices)
    shape = data.shape
    positions = np.arange(int(np.prod(shape, dtype=np.int64)), dtype=np.int64).reshape(shape)
    # Out-of-bounds windows in FILL_OR_DROP mode get int64's least value, any other mode clamps.
    pos = _arb_structural.RULES["gather"](ctx, _proxy(eqn, np.int64, fill_value=None), positions, idx)
    inside = pos >= 0
    at = np.where(inside, pos, 0)
    if isinstance(data, Exact):
        values = _arb_structural.RULES["gather"](ctx, eqn, np.asarray(data.value), idx)
        unknown = None if data.unknown is None else inside & data.mask().reshape(-1)[at]
        return Exact(np.asarray(values), unknown)
    fill = eqn.params.get("fill_value")
    fill = np.nan if fill is None else float(fill)  # no fill value: NaN (the Arb path's None)
    mid = np.where(inside, data.mid.reshape(-1)[at], fill)
    rad = np.where(inside, data.rad.reshape(-1)[at], 0.0)
    return Interval.make(mid, rad, infinite=True)


def _scatter(ctx: Any, eqn: Any, operand: Value, indices: Value, updates: Value) -> Value:
    """``scatter`` (``x.at[i].set(v)``): values move, in the Arb path's order (its rule)."""
    rule = _arb_structural.RULES[eqn.primitive.name]
    idx = _decided(indices)
    if isinstance(operand, Exact) and isinstance(updates, Exact):
        out = np.asarray(rule(ctx, eqn, np.asarray(operand.value), idx, np.asarray(updates.value)))
        if unknown_of(operand, updates) is None:
            return Exact(out)
        return Exact(out, np.asarray(rule(ctx, eqn, operand.mask(), idx, updates.mask())))
    op, up_ = to_interval(operand), to_interval(updates)
    mid = rule(ctx, eqn, op.mid, idx, up_.mid)
    return Interval(np.asarray(mid), np.asarray(rule(ctx, eqn, op.rad, idx, up_.rad)))


def _scatter_add(ctx: Any, eqn: Any, operand: Value, indices: Value, updates: Value) -> Value:
    """``scatter-add`` in the Arb path's order (its rule, numpy's additions): each element a sum of its
    contributions, bounded as a sum of that many terms (the most any element receives)."""
    rule = _arb_structural.RULES[eqn.primitive.name]
    idx = _decided(indices)
    if isinstance(operand, Exact) and isinstance(updates, Exact):
        out = np.asarray(rule(ctx, eqn, np.asarray(operand.value), idx, np.asarray(updates.value)))
        return Exact(out, None if unknown_of(operand, updates) is None else np.full(out.shape, True))
    op, up_ = to_interval(operand).finite(), to_interval(updates).finite()
    with np.errstate(all="ignore"):
        mid = rule(ctx, eqn, op.mid, idx, up_.mid)
        count = rule(ctx, eqn, np.zeros(op.shape, np.int64), idx, np.ones(up_.shape, np.int64))
        n = int(np.max(count, initial=0)) + 1
        magnitude = _upper(rule(ctx, eqn, np.abs(op.mid), idx, np.abs(up_.mid)), n)
        spread = _upper(rule(ctx, eqn, op.rad, idx, up_.rad), n)
        rad = add_up(spread, mul_up(np.float64(_gamma(n)), magnitude))
    return Interval.make(mid, rad)


def _iota(ctx: Any, eqn: Any, *dyn: Value) -> Value:
    if dyn:
        raise NotCovered("dynamic shapes")
    dtype = np.dtype(eqn.params["dtype"])
    if dtype.kind in "biu":
        return Exact(np.asarray(_arb_structural.RULES["iota"](ctx, eqn)))
    counts = _arb_structural.RULES["iota"](ctx, _proxy(eqn, np.int64, dtype=np.dtype(np.int64)))
    return Interval.exact(np.asarray(counts, dtype=np.float64))


RULES: dict[str, Any] = {name: _move for name in _MOVES}
RULES.update({
    "gather": _gather,
    "scatter": _scatter,
    "scatter-add": _scatter_add,
    "scatter_add": _scatter_add,
    "iota": _iota,
    "reduce_sum": _reduce_sum,
    "reduce_max": _reduce_extreme(True),
    "reduce_min": _reduce_extreme(False),
    "argmax": _arg_extreme(True),
    "argmin": _arg_extreme(False),
    "cumsum": _cumulative("cumsum"),
    "cummax": _cumulative("cummax"),
    "cummin": _cumulative("cummin"),
    "dot_general": _dot_general,
    "reduce_and": lambda ctx, eqn, x: _integers(eqn, x),
    "reduce_or": lambda ctx, eqn, x: _integers(eqn, x),
    "reduce_xor": lambda ctx, eqn, x: _integers(eqn, x),
})
