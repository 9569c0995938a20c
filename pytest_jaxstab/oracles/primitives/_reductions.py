"""Rigorous semantics of reductions, cumulative operations, ``dot_general`` and ``sort``.

Sums, products and dot products fold the ball operations of ``_arb`` (NaN and infinities included), so
a cancelling sum such as a variance simply needs a higher precision, which escalation provides. Maxima
and minima of balls are continuous and need no decision. NaN propagates through ``reduce_max``,
``reduce_min`` and ``cummax``/``cummin`` as it does in XLA. ``argmax``/``argmin`` pick the first NaN,
else the first extremum, as ``jnp.argmax`` does; ``sort`` puts NaN last. Those two *decide* an order: a
ball that overlaps a competitor without being provably equal to it raises ``Undecided``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import reduce
from typing import Any

import numpy as np
from flint import arb_mat

from ..core import _arb
from ..core._common import NEG_INF, ONE, POS_INF, ZERO, Rule, Undecided, ints_to_arb, is_float, obj, out_aval

__all__ = ["RULES"]

_add, _mul, _max, _min = _arb.add, _arb.mul, _arb.maximum, _arb.minimum


def _rows(x: np.ndarray, axes: Sequence[int]) -> tuple[np.ndarray, tuple[int, ...]]:
    """``x`` with ``axes`` moved last and flattened: ``(rows, kept_shape)`` (zero sizes included)."""
    axes = tuple(int(a) % max(x.ndim, 1) for a in axes)
    kept = [d for d in range(x.ndim) if d not in axes]
    moved = np.transpose(x, kept + list(axes))
    kept_shape = tuple(x.shape[d] for d in kept)
    k = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
    n = int(np.prod(kept_shape, dtype=np.int64))
    return moved.reshape(n, k), kept_shape


def _reduce_float(x: np.ndarray, axes: Sequence[int], fn: Callable[[Any, Any], Any],
                  start: Any) -> np.ndarray:
    rows, kept_shape = _rows(x, axes)
    out = np.empty(len(rows), dtype=object)
    out[:] = [reduce(fn, row, start) for row in rows]
    return out.reshape(kept_shape)


def _reduction(kind: str) -> Rule:
    int_fns = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min,
               "and": np.bitwise_and.reduce, "or": np.bitwise_or.reduce, "xor": np.bitwise_xor.reduce}

    def rule(ctx: Any, eqn: Any, x: np.ndarray) -> np.ndarray:
        axes = tuple(int(a) for a in eqn.params["axes"])
        if x.dtype != object:
            with np.errstate(all="ignore"):
                return np.asarray(int_fns[kind](x, axis=axes) if axes else x)
        fn, start = {"sum": (_add, ZERO), "prod": (_mul, ONE), "max": (_max, NEG_INF),
                     "min": (_min, POS_INF)}[kind]
        return _reduce_float(x, axes, fn, start)

    return rule


def _arg_row(row: Sequence[Any], better: Callable[[Any, Any], bool],
             not_worse: Callable[[Any, Any], bool]) -> int:
    """The index of the first NaN, else of the first extremum; Undecided when the balls do not tell."""
    for i, v in enumerate(row):
        if v is None:
            return i
    best = 0
    for i in range(1, len(row)):
        if better(row[i], row[best]):
            best = i
        elif not not_worse(row[best], row[i]):
            raise Undecided  # overlapping balls, not provably equal: the order is not decided
    return best


def _arg_extremum(maximum: bool, np_fn: Callable[..., Any]) -> Rule:
    def better(a: Any, b: Any) -> bool:  # a strictly beats b, provably
        return bool(a > b) if maximum else bool(a < b)

    def not_worse(a: Any, b: Any) -> bool:  # a provably at least as good as b
        return bool(a >= b) if maximum else bool(a <= b)

    def rule(ctx: Any, eqn: Any, x: np.ndarray) -> np.ndarray:
        (axis,) = eqn.params["axes"]
        dtype = np.dtype(eqn.params["index_dtype"])
        if x.dtype != object:
            return np.asarray(np_fn(x, axis=int(axis))).astype(dtype)
        rows, kept_shape = _rows(x, (axis,))
        out = [_arg_row(list(row), better, not_worse) for row in rows]
        return np.asarray(out, dtype=dtype).reshape(kept_shape)

    return rule


def _cumulative(kind: str) -> Rule:
    int_fns = {"cumsum": np.cumsum, "cumprod": np.cumprod, "cummax": np.maximum.accumulate,
               "cummin": np.minimum.accumulate}

    def rule(ctx: Any, eqn: Any, x: np.ndarray) -> np.ndarray:
        axis = int(eqn.params["axis"]) % max(x.ndim, 1)
        reverse = bool(eqn.params.get("reverse", False))
        if reverse:
            x = np.flip(x, axis)
        if x.dtype != object:
            if kind == "cumlogsumexp":
                raise ctx.unsupported(eqn, "integer operand")
            with np.errstate(all="ignore"):
                out = np.asarray(int_fns[kind](x, axis=axis)).astype(x.dtype)
        else:
            moved = np.moveaxis(x, axis, -1)
            n = int(np.prod(moved.shape[:-1], dtype=np.int64))
            out = _cumulate_float(kind, moved.reshape(n, moved.shape[-1]))
            out = np.moveaxis(out.reshape(moved.shape), -1, axis)
        return np.flip(out, axis) if reverse else out

    return rule


def _cumulate_float(kind: str, rows: np.ndarray) -> np.ndarray:
    out = np.empty(rows.shape, dtype=object)
    if kind == "cumlogsumexp":
        rows = obj(_arb.ufunc("exp")(rows)) if rows.size else rows
    fn = {"cumsum": _add, "cumlogsumexp": _add, "cumprod": _mul, "cummax": _max, "cummin": _min}[kind]
    for i, row in enumerate(rows):
        acc: Any = None
        for j, v in enumerate(row):
            acc = v if j == 0 else fn(acc, v)
            out[i, j] = acc
    if kind == "cumlogsumexp" and out.size:
        out = obj(_arb.ufunc("log")(out))
    return out


def _dot_general(ctx: Any, eqn: Any, lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    lc, rc, lb, rb = ([int(d) for d in ds] for ds in (lc, rc, lb, rb))
    lfree = [d for d in range(lhs.ndim) if d not in lc and d not in lb]
    rfree = [d for d in range(rhs.ndim) if d not in rc and d not in rb]
    out_float = is_float(out_aval(eqn).dtype)
    if out_float or lhs.dtype == object or rhs.dtype == object:
        lhs = lhs if lhs.dtype == object else ints_to_arb(lhs)
        rhs = rhs if rhs.dtype == object else ints_to_arb(rhs)
    batch_shape = [lhs.shape[d] for d in lb]
    lfree_shape = [lhs.shape[d] for d in lfree]
    rfree_shape = [rhs.shape[d] for d in rfree]
    b = int(np.prod(batch_shape, dtype=np.int64))
    m = int(np.prod(lfree_shape, dtype=np.int64))
    n = int(np.prod(rfree_shape, dtype=np.int64))
    k = int(np.prod([lhs.shape[d] for d in lc], dtype=np.int64))
    left = np.transpose(lhs, lb + lfree + lc).reshape(b, m, k)
    right = np.transpose(rhs, rb + rc + rfree).reshape(b, k, n)
    out_shape = batch_shape + lfree_shape + rfree_shape
    if lhs.dtype != object:
        dtype = np.dtype(out_aval(eqn).dtype)
        with np.errstate(all="ignore"):
            return np.matmul(left.astype(dtype), right.astype(dtype)).reshape(out_shape)
    out = np.empty((b, m, n), dtype=object)
    for bi in range(b):
        # A row with a missing operand (None: no real value, or a row a pass leaves out) has no value
        # anywhere: what the element loop would find, one product at a time.
        missing = np.equal(left[bi], None).any(axis=1) if k else np.zeros(m, dtype=bool)
        done = _matmul(left[bi], right[bi], out[bi], missing) | missing
        rows = [list(row) for row in left[bi]]
        cols = [list(col) for col in right[bi].T]
        for mi, row in enumerate(rows):
            if not done[mi]:
                out[bi, mi, :] = [_dot(row, col) for col in cols]
    return out.reshape(out_shape)


def _matmul(left: np.ndarray, right: np.ndarray, out: np.ndarray, skip: np.ndarray) -> np.ndarray:
    """The rows of ``left @ right`` by Arb's own matrix product (``arb_mat``, in C: about 70x the element
    loop at 64 x 64), each entry a rigorous enclosure of its exact sum of products, as the loop's is.
    Fills the rows of ``out`` it settles and returns which: every row not in ``skip`` whose entries all
    came out finite. A finite entry had only finite operands (an infinite or indeterminate one makes its
    term, so the sum, non-finite in Arb); the other rows are left to the loop, which knows IEEE's limits
    (``0 * inf``, ``inf - inf``). A missing operand in ``right`` (None) leaves every row to the loop."""
    m, k = left.shape
    n = right.shape[1]
    done = np.zeros(m, dtype=bool)
    rows = np.flatnonzero(~skip)
    if not (len(rows) and k and n) or np.equal(right, None).any():
        return done
    try:
        product = (arb_mat(len(rows), k, left[rows].reshape(-1).tolist())
                   * arb_mat(k, n, right.reshape(-1).tolist()))
    except TypeError:  # an operand that is not a ball (an integer array's value): the loop takes it
        return done
    values = np.empty(len(rows) * n, dtype=object)
    values[:] = product.entries()
    values = values.reshape(len(rows), n)
    finite = np.fromiter((all(v.is_finite() for v in row) for row in values), dtype=bool, count=len(rows))
    out[rows[finite]] = values[finite]
    done[rows[finite]] = True
    return done


def _dot(row: list[Any], col: list[Any]) -> Any:
    acc: Any = ZERO
    for a, c in zip(row, col):
        acc = _add(acc, _mul(a, c))
    return acc


def _key_less(a: Any, b: Any) -> bool | None:
    """Whether ball ``a`` sorts before ``b`` (NaN last): True, False, or None when provably equal."""
    if a is None or b is None:
        return None if a is None and b is None else b is None
    if not isinstance(a, np.generic | int | bool):
        if a < b:
            return True
        if a > b:
            return False
        if _arb.eq(a, b):  # raises Undecided unless provably equal or provably different
            return None
        raise Undecided
    return None if a == b else bool(a < b)


def _sort(ctx: Any, eqn: Any, *operands: np.ndarray) -> list[np.ndarray]:
    import functools

    dim = int(eqn.params["dimension"]) % max(operands[0].ndim, 1)
    num_keys = int(eqn.params.get("num_keys", 1))
    moved = [np.moveaxis(op, dim, -1) for op in operands]
    shape = moved[0].shape
    n = int(np.prod(shape[:-1], dtype=np.int64))
    flat = [m.reshape(n, shape[-1]) for m in moved]
    outs = [np.empty_like(f) for f in flat]
    for i in range(flat[0].shape[0]):
        keys = [f[i].tolist() for f in flat[:num_keys]]

        def compare(p: int, q: int, keys: list[list[Any]] = keys) -> int:
            for k in keys:
                less = _key_less(k[p], k[q])
                if less is not None:
                    return -1 if less else 1
                # provably equal on this key: the next key decides, else the original order (stable)
            return -1 if p < q else (1 if p > q else 0)

        order = sorted(range(shape[-1]), key=functools.cmp_to_key(compare))
        for f, o in zip(flat, outs):
            o[i] = f[i][order]
    return [np.moveaxis(o.reshape(shape), -1, dim) for o in outs]


RULES: dict[str, Rule] = {
    "reduce_sum": _reduction("sum"),
    "reduce_prod": _reduction("prod"),
    "reduce_max": _reduction("max"),
    "reduce_min": _reduction("min"),
    "reduce_and": _reduction("and"),
    "reduce_or": _reduction("or"),
    "reduce_xor": _reduction("xor"),
    "argmax": _arg_extremum(True, np.argmax),
    "argmin": _arg_extremum(False, np.argmin),
    "cumsum": _cumulative("cumsum"),
    "cumprod": _cumulative("cumprod"),
    "cummax": _cumulative("cummax"),
    "cummin": _cumulative("cummin"),
    "cumlogsumexp": _cumulative("cumlogsumexp"),
    "dot_general": _dot_general,
    "sort": _sort,
}
