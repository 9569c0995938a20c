"""Exact semantics of the linear-algebra primitives behind ``jnp.linalg.solve``/``inv``/``cholesky``.

``lu`` is Gaussian elimination with partial pivoting (the largest magnitude, first on ties, as LAPACK's
``getrf``) at the working precision; ``triangular_solve`` substitutes with exact inner products rounded
once per entry; ``custom_linear_solve`` runs the program's own ``solve`` sub-jaxpr on those, which in
exact arithmetic is ``A^-1 b``. A zero pivot leaves the column unscaled, as LAPACK does, so a singular
system ends in a division by zero: NaN, i.e. no real result.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from mpmath import libmp
from mpmath.libmp import ComplexResult, fnan, fone, fzero

from ._common import RND, Rule, make

__all__ = ["RULES"]

_mpf_sum, _mpf_mul, _mpf_div, _mpf_neg, _mpf_abs, _mpf_gt = (
    libmp.mpf_sum, libmp.mpf_mul, libmp.mpf_div, libmp.mpf_neg, libmp.mpf_abs, libmp.mpf_gt)


def _raw_matrix(a: np.ndarray) -> list[list[tuple]]:
    return [[v._mpf_ for v in row] for row in a]


def _to_obj(rows: list[list[tuple]], shape: tuple[int, ...]) -> np.ndarray:
    out = np.empty(shape, dtype=object)
    for i, row in enumerate(rows):
        out[i, :] = [make(r) for r in row]
    return out


def _div(a: tuple, b: tuple, prec: int) -> tuple:
    return fnan if b == fzero else _mpf_div(a, b, prec, RND)


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


def _lu_one(a: np.ndarray, prec: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    m, n = a.shape
    rows = _raw_matrix(a)
    perm = list(range(m))
    pivots = []
    for j in range(min(m, n)):
        p, best = j, _mpf_abs(rows[j][j])
        for i in range(j + 1, m):
            cand = _mpf_abs(rows[i][j])
            if _mpf_gt(cand, best):
                p, best = i, cand
        pivots.append(p)
        rows[j], rows[p] = rows[p], rows[j]
        perm[j], perm[p] = perm[p], perm[j]
        pivot = rows[j][j]
        if pivot == fzero:
            continue  # LAPACK leaves the column as is and reports a singular factor
        top = rows[j]
        for i in range(j + 1, m):
            row = rows[i]
            f = _mpf_div(row[j], pivot, prec, RND)
            row[j] = f
            nf = _mpf_neg(f)
            for k in range(j + 1, n):
                row[k] = libmp.mpf_add(row[k], _mpf_mul(nf, top[k]), prec, RND)
    return (_to_obj(rows, (m, n)), np.asarray(pivots, dtype=np.int32), np.asarray(perm, dtype=np.int32))


def _lu(ctx: Any, eqn: Any, a: np.ndarray) -> list[np.ndarray]:
    if a.dtype != object:
        raise ctx.unsupported(eqn, "integer operand")
    return _batched(lambda x: _lu_one(x, ctx.prec), (2,), a)


def _triangular_one(a: np.ndarray, b: np.ndarray, params: dict[str, Any], prec: int) -> tuple[np.ndarray]:
    m = a.shape[-1]
    lower = bool(params["lower"])
    tri = _raw_matrix(a)
    # Only the named triangle is read (an LU factor shares its storage with the other one).
    t = [[tri[i][j] if (j <= i if lower else j >= i) else fzero for j in range(m)] for i in range(m)]
    if params.get("unit_diagonal", False):
        for i in range(m):
            t[i][i] = fone
    if params.get("transpose_a", False):
        t = [list(col) for col in zip(*t)]
        lower = not lower
    rhs = b if params.get("left_side", False) else b.T
    if not params.get("left_side", False):
        # x op(a) = b  <=>  op(a)^T x^T = b^T
        t = [list(col) for col in zip(*t)]
        lower = not lower
    cols = [[v._mpf_ for v in col] for col in rhs.T]
    order = range(m) if lower else range(m - 1, -1, -1)
    out_cols = []
    for col in cols:
        x: list[tuple] = [fzero] * m
        for i in order:
            known = range(i) if lower else range(i + 1, m)
            terms = [col[i]] + [_mpf_neg(_mpf_mul(t[i][j], x[j])) for j in known]
            x[i] = _div(_mpf_sum(terms, prec + 20, RND), t[i][i], prec)
        out_cols.append(x)
    out = _to_obj([list(r) for r in zip(*out_cols)], rhs.shape) if out_cols else np.empty(rhs.shape, object)
    return (out if params.get("left_side", False) else out.T,)


def _triangular_solve(ctx: Any, eqn: Any, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype != object:
        raise ctx.unsupported(eqn, "integer operand")
    params = dict(eqn.params)  # conjugate_a is a no-op on real values
    return _batched(lambda x, y: _triangular_one(x, y, params, ctx.prec), (2, 2), a, b)[0]


def _cholesky_one(a: np.ndarray, prec: int) -> tuple[np.ndarray]:
    n = a.shape[-1]
    rows = _raw_matrix(a)
    low = [[fzero] * n for _ in range(n)]
    for j in range(n):
        s = _mpf_sum([rows[j][j]] + [_mpf_neg(_mpf_mul(low[j][k], low[j][k])) for k in range(j)],
                     prec + 20, RND)
        try:
            d = libmp.mpf_sqrt(s, prec, RND)
        except ComplexResult:
            d = fnan  # not positive definite: no real factor
        low[j][j] = d
        for i in range(j + 1, n):
            t = _mpf_sum([rows[i][j]] + [_mpf_neg(_mpf_mul(low[i][k], low[j][k])) for k in range(j)],
                         prec + 20, RND)
            low[i][j] = _div(t, d, prec)
    return (_to_obj(low, (n, n)),)


def _cholesky(ctx: Any, eqn: Any, a: np.ndarray) -> np.ndarray:
    if a.dtype != object:
        raise ctx.unsupported(eqn, "integer operand")
    return _batched(lambda x: _cholesky_one(x, ctx.prec), (2,), a)[0]


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
    from .. import _compat

    lengths = eqn.params["const_lengths"]
    jaxprs = eqn.params["jaxprs"]
    n_mv, n_vm, n_solve, n_tsolve = (int(lengths.matvec), int(lengths.vecmat), int(lengths.solve),
                                     int(lengths.transpose_solve))
    start = n_mv + n_vm
    solve_consts = list(operands[start : start + n_solve])
    b = list(operands[start + n_solve + n_tsolve :])
    return ctx.call(_compat.as_closed(jaxprs.solve), solve_consts + b)


RULES: dict[str, Rule] = {
    "lu": _lu,
    "triangular_solve": _triangular_solve,
    "cholesky": _cholesky,
    "lu_pivots_to_permutation": _lu_pivots_to_permutation,
    "custom_linear_solve": _custom_linear_solve,
}
