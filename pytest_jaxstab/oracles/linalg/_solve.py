"""Rigorous semantics of the linear-algebra primitives behind ``jnp.linalg.solve``/``inv``/``cholesky``.

``lu`` is Gaussian elimination with partial pivoting (the largest magnitude, first on ties, as LAPACK's
``getrf``) in ball arithmetic; the pivot choice is a decision (``Undecided`` where magnitudes overlap).
``triangular_solve`` substitutes, ``cholesky`` is the textbook recurrence (``cholesky_update`` is the
factor of ``R^T R + w w^T``, ``symmetric_product`` is ``alpha A A^T + beta C``); ``custom_linear_solve`` runs
the program's own ``solve`` sub-jaxpr on those, which in exact arithmetic is ``A^-1 b``. A zero pivot
leaves the column unscaled, as LAPACK does, so a singular system ends in a division by zero: NaN, i.e.
no real result (a pivot ball that merely contains zero is indeterminate, and the division says so).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..core import _arb
from ..core._balls import to_arb_array
from ..core._common import ONE, ZERO, Rule, Undecided, ints_to_arb, out_aval

__all__ = ["RULES"]

_add, _sub, _mul, _div = _arb.add, _arb.sub, _arb.mul, _arb.div


def _to_obj(rows: list[list[Any]], shape: tuple[int, ...]) -> np.ndarray:
    out = np.empty(shape, dtype=object)
    for i, row in enumerate(rows):
        out[i, :] = row
    return out


def _batched(fn: Callable[..., tuple], core_ndims: tuple[int, ...], *arrays: np.ndarray) -> list[np.ndarray]:
    """Applies ``fn`` to each matrix of a batch (leading dims), stacking its outputs."""
    batch = arrays[0].shape[: arrays[0].ndim - core_ndims[0]]
    results: list[list[np.ndarray]] = []
    for idx in np.ndindex(*batch):
        results.append(list(fn(*(a[idx] for a in arrays))))
    if not batch:
        return results[0]
    n_out = len(results[0])
    return [np.stack([r[i] for r in results]).reshape(batch + results[0][i].shape) for i in range(n_out)]


def _lu_one(a: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    m, n = a.shape
    rows = [list(row) for row in a]
    perm = list(range(m))
    pivots = []
    for j in range(min(m, n)):
        p = _pivot([rows[i][j] for i in range(j, m)]) + j
        pivots.append(p)
        rows[j], rows[p] = rows[p], rows[j]
        perm[j], perm[p] = perm[p], perm[j]
        pivot = rows[j][j]
        if pivot is not None and pivot.is_zero():
            continue  # LAPACK leaves the column as is and reports a singular factor
        top = rows[j]
        for i in range(j + 1, m):
            row = rows[i]
            f = _div(row[j], pivot)
            row[j] = f
            for k in range(j + 1, n):
                row[k] = _sub(row[k], _mul(f, top[k]))
    out = np.empty((m, n), dtype=object)
    for i, row in enumerate(rows):
        out[i, :] = row
    return out, np.asarray(pivots, dtype=np.int32), np.asarray(perm, dtype=np.int32)


def _pivot(column: list) -> int:
    """LAPACK's choice: the first entry of largest magnitude (a NaN stops the search, as ``i?amax``)."""
    best = 0
    for i, v in enumerate(column):
        if v is None:
            return i
        if i == 0:
            continue
        cur = column[best]
        a, b = abs(v), abs(cur)
        if a > b:
            best = i
        elif not (b >= a):
            raise Undecided  # overlapping magnitudes: which row is swapped up is not decided
    return best


def _lu(ctx: Any, eqn: Any, a: np.ndarray) -> list[np.ndarray]:
    if a.dtype != object:
        raise ctx.unsupported(eqn, "integer operand")
    return _batched(_lu_one, (2,), a)


def _triangular_one(a: np.ndarray, b: np.ndarray, params: dict[str, Any]) -> tuple[np.ndarray]:
    m = a.shape[-1]
    lower = bool(params["lower"])
    tri = [list(row) for row in a]
    # Only the named triangle is read (an LU factor shares its storage with the other one).
    t = [[tri[i][j] if (j <= i if lower else j >= i) else ZERO for j in range(m)] for i in range(m)]
    if params.get("unit_diagonal", False):
        for i in range(m):
            t[i][i] = ONE
    if params.get("transpose_a", False):
        t = [list(col) for col in zip(*t)]
        lower = not lower
    rhs = b if params.get("left_side", False) else b.T
    if not params.get("left_side", False):
        # x op(a) = b  <=>  op(a)^T x^T = b^T
        t = [list(col) for col in zip(*t)]
        lower = not lower
    cols = [list(col) for col in rhs.T]
    order = range(m) if lower else range(m - 1, -1, -1)
    out_cols = []
    for col in cols:
        x: list[Any] = [ZERO] * m
        for i in order:
            known = range(i) if lower else range(i + 1, m)
            acc = col[i]
            for j in known:
                acc = _sub(acc, _mul(t[i][j], x[j]))
            x[i] = _div(acc, t[i][i])
        out_cols.append(x)
    out = _to_obj([list(r) for r in zip(*out_cols)], rhs.shape) if out_cols else np.empty(rhs.shape, object)
    return (out if params.get("left_side", False) else out.T,)


def _triangular_solve(ctx: Any, eqn: Any, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype != object:
        raise ctx.unsupported(eqn, "integer operand")
    params = dict(eqn.params)  # conjugate_a is a no-op on real values
    return _batched(lambda x, y: _triangular_one(x, y, params), (2, 2), a, b)[0]


def _cholesky_one(a: np.ndarray) -> tuple[np.ndarray]:
    n = a.shape[-1]
    rows = [list(row) for row in a]
    low: list[list[Any]] = [[ZERO] * n for _ in range(n)]
    sqrt = _arb.FUNCTIONS["sqrt"]
    for j in range(n):
        s = rows[j][j]
        for k in range(j):
            s = _sub(s, _mul(low[j][k], low[j][k]))
        d = sqrt(s)  # not positive definite: None, no real factor
        low[j][j] = d
        for i in range(j + 1, n):
            t = rows[i][j]
            for k in range(j):
                t = _sub(t, _mul(low[i][k], low[j][k]))
            low[i][j] = _div(t, d)
    return (_to_obj(low, (n, n)),)


def _cholesky(ctx: Any, eqn: Any, a: np.ndarray) -> np.ndarray:
    if a.dtype != object:
        raise ctx.unsupported(eqn, "integer operand")
    return _batched(_cholesky_one, (2,), a)[0]


def _lu_pivots_to_permutation(ctx: Any, eqn: Any, pivots: np.ndarray) -> np.ndarray:
    size = int(eqn.params["permutation_size"])
    piv = np.asarray(pivots)
    batch = piv.shape[:-1]
    out = np.empty((*batch, size), dtype=piv.dtype)
    for idx in np.ndindex(*batch):
        perm = list(range(size))
        for i, p in enumerate(piv[idx].tolist()):
            perm[i], perm[p] = perm[p], perm[i]
        out[idx] = perm
    return out


def _custom_linear_solve(ctx: Any, eqn: Any, *operands: np.ndarray) -> list[np.ndarray]:
    from ... import _compat

    lengths = eqn.params["const_lengths"]
    jaxprs = eqn.params["jaxprs"]
    n_mv, n_vm, n_solve, n_tsolve = (int(lengths.matvec), int(lengths.vecmat), int(lengths.solve),
                                     int(lengths.transpose_solve))
    start = n_mv + n_vm
    solve_consts = list(operands[start : start + n_solve])
    b = list(operands[start + n_solve + n_tsolve :])
    return ctx.call(_compat.as_closed(jaxprs.solve), solve_consts + b)


def _symmetric_product(ctx: Any, eqn: Any, a: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``alpha A A^T + beta C``, every element (XLA's CPU kernel fills both triangles)."""
    a, c = (x if x.dtype == object else ints_to_arb(x) for x in (a, c))
    dtype = np.dtype(out_aval(eqn).dtype)  # the scalars as the program holds them, in its dtype
    alpha, beta = (to_arb_array(np.asarray(float(eqn.params[k]), dtype=dtype))[()] for k in ("alpha", "beta"))
    out = np.empty(c.shape, dtype=object)
    for idx in np.ndindex(*c.shape[:-2]):
        rows = a[idx].tolist()
        m = len(rows)
        for i in range(m):
            for j in range(m):
                acc = ZERO
                for x, y in zip(rows[i], rows[j]):
                    acc = _add(acc, _mul(x, y))
                out[(*idx, i, j)] = _add(_mul(alpha, acc), _mul(beta, c[(*idx, i, j)]))
    return out


def _cholesky_update(ctx: Any, eqn: Any, r: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The upper Cholesky factor of ``R^T R + w w^T``: JAX's Givens rotations make every diagonal entry
    ``hypot(r_kk, w_k) >= 0``, so (the sum being positive definite) theirs is the unique such factor."""
    if r.ndim != 2:
        raise ctx.unsupported(eqn, "a batch of Cholesky updates (JAX defines the primitive on one matrix)")
    r, w = (x if x.dtype == object else ints_to_arb(x) for x in (r, w))
    n = r.shape[-1]
    rows = r.tolist()
    vec = w.tolist()
    gram = [[ZERO] * n for _ in range(n)]
    for i in range(n):
        for j in range(n):
            acc = _mul(vec[i], vec[j])
            for k in range(n):
                acc = _add(acc, _mul(rows[k][i], rows[k][j]))
            gram[i][j] = acc
    (low,) = _cholesky_one(_to_obj(gram, (n, n)))
    return low.T.copy()


RULES: dict[str, Rule] = {
    "symmetric_product": _symmetric_product,
    "cholesky_update": _cholesky_update,
    "lu": _lu,
    "triangular_solve": _triangular_solve,
    "cholesky": _cholesky,
    "lu_pivots_to_permutation": _lu_pivots_to_permutation,
    "custom_linear_solve": _custom_linear_solve,
}
