"""Exact semantics of reductions, cumulative operations, ``dot_general`` and ``sort``.

Sums and dot products are computed exactly and rounded once to the working precision (mpmath's
``mpf_sum``), so a cancelling sum such as a variance costs no extra precision; products, maxima and the
cumulative operations round at each step (they do not cancel). NaN propagates through ``reduce_max``,
``reduce_min`` and ``cummax``/``cummin`` as it does in XLA; ``argmax``/``argmin`` pick the first NaN,
else the first extremum, as ``jnp.argmax`` does; ``sort`` puts NaN last.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from mpmath import libmp
from mpmath.libmp import fnan, fninf, fone

from ._common import RND, Rule, ints_to_mpf, is_float, make, obj, out_aval
from ._scalar import ufunc

__all__ = ["RULES"]

_finf = libmp.finf
_mpf_sum, _mpf_mul, _mpf_add, _mpf_gt, _mpf_lt = (libmp.mpf_sum, libmp.mpf_mul, libmp.mpf_add,
                                                   libmp.mpf_gt, libmp.mpf_lt)


def _rows(x: np.ndarray, axes: Sequence[int]) -> tuple[np.ndarray, tuple[int, ...]]:
    """``x`` with ``axes`` moved last and flattened: ``(rows, kept_shape)``."""
    axes = tuple(int(a) % max(x.ndim, 1) for a in axes)
    kept = [d for d in range(x.ndim) if d not in axes]
    moved = np.transpose(x, kept + list(axes))
    kept_shape = tuple(x.shape[d] for d in kept)
    k = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
    return moved.reshape(-1, k), kept_shape


def _reduce_float(x: np.ndarray, axes: Sequence[int], fn: Callable[[list[tuple]], tuple]) -> np.ndarray:
    rows, kept_shape = _rows(x, axes)
    out = np.empty(len(rows), dtype=object)
    out[:] = [make(fn([v._mpf_ for v in row])) for row in rows]
    return out.reshape(kept_shape)


def _max_raw(raws: list[tuple], greater: Callable[[tuple, tuple], bool], start: tuple) -> tuple:
    best = start
    for r in raws:
        if r == fnan:
            return fnan
        if greater(r, best):
            best = r
    return best


def _reduction(kind: str) -> Rule:
    int_fns = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min,
               "and": np.bitwise_and.reduce, "or": np.bitwise_or.reduce, "xor": np.bitwise_xor.reduce}

    def rule(ctx: Any, eqn: Any, x: np.ndarray) -> np.ndarray:
        axes = tuple(int(a) for a in eqn.params["axes"])
        if x.dtype != object:
            with np.errstate(all="ignore"):
                return np.asarray(int_fns[kind](x, axis=axes) if axes else x)
        prec = ctx.prec
        if kind == "sum":
            return _reduce_float(x, axes, lambda rs: _mpf_sum(rs, prec, RND))
        if kind == "max":
            return _reduce_float(x, axes, lambda rs: _max_raw(rs, _mpf_gt, fninf))
        if kind == "min":
            return _reduce_float(x, axes, lambda rs: _max_raw(rs, _mpf_lt, _finf))

        def prod(rs: list[tuple]) -> tuple:
            acc = fone
            for r in rs:
                acc = _mpf_mul(acc, r, prec, RND)
            return acc

        return _reduce_float(x, axes, prod)

    return rule


def _arg_extremum(greater: Callable[[tuple, tuple], bool], np_fn: Callable[..., Any]) -> Rule:
    def rule(ctx: Any, eqn: Any, x: np.ndarray) -> np.ndarray:
        (axis,) = eqn.params["axes"]
        dtype = np.dtype(eqn.params["index_dtype"])
        if x.dtype != object:
            return np.asarray(np_fn(x, axis=int(axis))).astype(dtype)
        rows, kept_shape = _rows(x, (axis,))
        out = []
        for row in rows:
            best_i, best = 0, None
            for i, v in enumerate(row):
                r = v._mpf_
                if r == fnan:
                    best_i = i
                    break
                if best is None or greater(r, best):
                    best_i, best = i, r
            out.append(best_i)
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
            out = _cumulate_float(kind, moved.reshape(-1, moved.shape[-1]), ctx.prec)
            out = np.moveaxis(out.reshape(moved.shape), -1, axis)
        return np.flip(out, axis) if reverse else out

    return rule


def _cumulate_float(kind: str, rows: np.ndarray, prec: int) -> np.ndarray:
    out = np.empty(rows.shape, dtype=object)
    wide = 2 * prec + 64  # running sums keep extra bits; each output is rounded to prec
    if kind == "cumlogsumexp":
        rows = obj(ufunc("exp", prec + 20)(rows)) if rows.size else rows
    log = ufunc("log", prec)
    for i, row in enumerate(rows):
        acc: tuple | None = None
        for j, v in enumerate(row):
            r = v._mpf_
            if acc is None:
                acc = r
            elif kind in ("cumsum", "cumlogsumexp"):
                acc = _mpf_add(acc, r, wide, RND)
            elif kind == "cumprod":
                acc = _mpf_mul(acc, r, prec, RND)
            elif acc == fnan or r == fnan:
                acc = fnan
            elif (_mpf_gt if kind == "cummax" else _mpf_lt)(r, acc):
                acc = r
            out[i, j] = make(libmp.mpf_pos(acc, prec, RND))
    if kind == "cumlogsumexp" and out.size:
        out = obj(log(out))
    return out


def _dot_general(ctx: Any, eqn: Any, lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    lc, rc, lb, rb = ([int(d) for d in ds] for ds in (lc, rc, lb, rb))
    lfree = [d for d in range(lhs.ndim) if d not in lc and d not in lb]
    rfree = [d for d in range(rhs.ndim) if d not in rc and d not in rb]
    out_float = is_float(out_aval(eqn).dtype)
    if out_float or lhs.dtype == object or rhs.dtype == object:
        lhs = lhs if lhs.dtype == object else ints_to_mpf(lhs)
        rhs = rhs if rhs.dtype == object else ints_to_mpf(rhs)
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
    prec = ctx.prec
    out = np.empty((b, m, n), dtype=object)
    for bi in range(b):
        rows = [[v._mpf_ for v in row] for row in left[bi]]
        cols = [[v._mpf_ for v in col] for col in right[bi].T]
        for mi, row in enumerate(rows):
            # Exact products, summed exactly, rounded once.
            out[bi, mi, :] = [make(_mpf_sum([_mpf_mul(a, c) for a, c in zip(row, col)], prec, RND))
                              for col in cols]
    return out.reshape(out_shape)


def _sort_key(v: Any) -> Any:
    if hasattr(v, "_mpf_"):
        r = v._mpf_
        return (r == fnan, v if r != fnan else 0)  # NaN last, as jnp.sort
    return (False, v)


def _sort(ctx: Any, eqn: Any, *operands: np.ndarray) -> list[np.ndarray]:
    dim = int(eqn.params["dimension"]) % max(operands[0].ndim, 1)
    num_keys = int(eqn.params.get("num_keys", 1))
    moved = [np.moveaxis(op, dim, -1) for op in operands]
    shape = moved[0].shape
    flat = [m.reshape(-1, shape[-1]) for m in moved]
    outs = [np.empty_like(f) for f in flat]
    for i in range(flat[0].shape[0]):
        keys = [f[i].tolist() for f in flat[:num_keys]]
        order = sorted(range(shape[-1]), key=lambda j: tuple(_sort_key(k[j]) for k in keys))  # stable
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
    "argmax": _arg_extremum(_mpf_gt, np.argmax),
    "argmin": _arg_extremum(_mpf_lt, np.argmin),
    "cumsum": _cumulative("cumsum"),
    "cumprod": _cumulative("cumprod"),
    "cummax": _cumulative("cummax"),
    "cummin": _cumulative("cummin"),
    "cumlogsumexp": _cumulative("cumlogsumexp"),
    "dot_general": _dot_general,
    "sort": _sort,
}
