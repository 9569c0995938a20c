"""``qr``: the exact QR factors of a real matrix, under the sign convention of ``_eigen``.

For an ``m x n`` matrix whose leading ``k = min(m, n)`` columns are independent, ``A = Q R`` with
``Q``'s ``k`` columns orthonormal and ``R`` upper triangular (trapezoidal when wide) is unique up to a
sign per column of ``Q`` (and the same sign on that row of ``R``): LAPACK's Householder ``geqrf``, which
JAX calls, may return a negative diagonal of ``R``. The exact factor with positive diagonal is modified
Gram-Schmidt in ball arithmetic (in exact arithmetic every Gram-Schmidt variant gives that factor; the
modified one keeps the balls narrow); then each pair (column of ``Q``, row of ``R``) takes the sign whose
dot product with the program's own pair (the same primitive bound on the operand's exact value rounded
to the program's dtype) is positive, as ``_eigen`` does for eigenvectors.

Not determined, so each entry is ``[-1, 1]`` for ``Q`` (every valid choice, ``_eigen.ANY_ENTRY``) and
indeterminate for ``R``, never guessed: from the first column whose remaining norm's ball holds 0 (a
rank-deficient leading block, or one the precision does not resolve) onwards, and the columns that
``full_matrices=True`` adds to complete ``Q`` (the rows they meet in ``R`` are exactly 0).
``pivoting=True`` (column pivoting, a sequence of norm comparisons) is refused.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core import _arb
from ..core._common import INDET, ZERO, Rule, ints_to_arb, out_aval
from ._eigen import ANY_ENTRY, classify, oriented, program_factors

__all__ = ["RULES"]

_ADD, _SUB, _MUL, _DIV = _arb.add, _arb.sub, _arb.mul, _arb.div
_SQRT = _arb.FUNCTIONS["sqrt"]


def _dot(x: list[Any], y: list[Any]) -> Any:
    acc = ZERO
    for a, b in zip(x, y):
        acc = _ADD(acc, _MUL(a, b))
    return acc


def _gram_schmidt(cols: list[list[Any]], k: int) -> tuple[list[list[Any]], list[list[Any]], int]:
    """Modified Gram-Schmidt on the first ``k`` columns, the others projected: ``(q, r, done)``, ``q``'s
    columns and ``r``'s rows as far as the remaining norms are proven positive (``done`` of them)."""
    n = len(cols)
    work = [list(c) for c in cols]
    q: list[list[Any]] = []
    r: list[list[Any]] = []
    for j in range(k):
        norm2 = _dot(work[j], work[j])
        if not norm2 > 0:  # a dependent (or not yet resolved) leading column: Q is not unique from here
            return q, r, j
        norm = _SQRT(norm2)
        qj = [_DIV(x, norm) for x in work[j]]
        row: list[Any] = [ZERO] * n
        row[j] = norm
        for c in range(j + 1, n):
            row[c] = _dot(qj, work[c])
            work[c] = [_SUB(x, _MUL(row[c], y)) for x, y in zip(work[c], qj)]
        q.append(qj)
        r.append(row)
    return q, r, k


def _qr_one(eqn: Any, a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    m, n = a.shape
    k = min(m, n)
    full = bool(eqn.params.get("full_matrices", False))
    q_out = np.empty((m, m if full else k), dtype=object)
    r_out = np.empty((m if full else k, n), dtype=object)
    q_out.fill(ANY_ENTRY)
    r_out.fill(INDET)
    for i in range(r_out.shape[0]):  # below the diagonal (and the rows past k): exactly 0
        r_out[i, : min(i, n)] = ZERO
    rows = [list(row) for row in a]
    state = classify(rows)
    if state != "ok":
        fill = None if state == "nan" else INDET
        q_out.fill(fill)
        r_out.fill(fill)
        return q_out, r_out
    q, r, done = _gram_schmidt([list(c) for c in zip(*rows)], k)
    if not done:
        return q_out, r_out
    refs = program_factors(eqn, a)
    if refs is None:
        return q_out, r_out
    ref_q, ref_r = refs[0], refs[1]  # qr's results: q, r
    picked = oriented([[qj, rj[j:]] for j, (qj, rj) in enumerate(zip(q, r))],
                      [np.concatenate([ref_q[:, j], ref_r[j, j:]]) for j in range(done)])
    for j, pair in enumerate(picked):
        if pair is None:  # the sign is not decided: from here on the factor stays undetermined
            break
        q_out[:, j], r_out[j, j:] = pair
    return q_out, r_out


def _qr(ctx: Any, eqn: Any, a: np.ndarray) -> list[np.ndarray]:
    if eqn.params.get("pivoting", False):
        raise ctx.unsupported(eqn, "qr with pivoting=True: the column order is a sequence of norm "
                                   "comparisons the oracle does not evaluate yet")
    a = a if a.dtype == object else ints_to_arb(a)
    q_out = np.empty(tuple(out_aval(eqn, 0).shape), dtype=object)
    r_out = np.empty(tuple(out_aval(eqn, 1).shape), dtype=object)
    for idx in np.ndindex(*a.shape[:-2]):
        q_out[idx], r_out[idx] = _qr_one(eqn, a[idx])
    return [q_out, r_out]


RULES: dict[str, Rule] = {"qr": _qr}
