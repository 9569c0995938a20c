"""Exact facts about an exact operand, in rational arithmetic: rank, null spaces, repeated eigenvalues.

A matrix whose entries are exact balls (the program's inputs, or exact arithmetic on them) is a matrix
of rationals, so its rank, the null space of ``A - lambda I`` for a rational ``lambda``, and orthogonal
projections onto it are computed exactly (python-flint's ``fmpq_mat``), where ball arithmetic can never
prove an equality. ``_eigen`` uses them for what balls leave open: that the zero eigenvalues and
singular values are exactly 0 (``nullity``), that a cluster of eigenvalues is one repeated eigenvalue
(``repeated``), and a basis of such an eigenspace (or of a null space, for ``svd``'s zero singular
values) chosen as the one nearest the program's: Gram-Schmidt on the exact projections of the
program's own vectors (``basis_nearest``).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np
from flint import arb, fmpq, fmpq_mat

from . import _arb
from ._common import INDET, ZERO

__all__ = ["basis_nearest", "exact", "exact_zeros", "nullity", "rational", "repeated", "unit"]

_ADD, _MUL, _DIV = _arb.add, _arb.mul, _arb.div
_SQRT = _arb.FUNCTIONS["sqrt"]


def exact(x: arb) -> Fraction:
    """The value of an exact (radius-0, finite) ball as a fraction."""
    man, exp = x.man_exp()
    man, exp = int(man), int(exp)
    return Fraction(man * 2**exp) if exp >= 0 else Fraction(man, 2**-exp)


def unit(col: list[arb]) -> list[Any]:
    """``col / ||col||`` in ball arithmetic (indeterminate where the norm's ball holds 0)."""
    sq = ZERO
    for c in col:
        sq = _ADD(sq, _MUL(c, c))
    if not sq > 0:
        return [INDET] * len(col)
    n = _SQRT(sq)
    return [_DIV(c, n) for c in col]


def nullity(rows: list[list[arb]]) -> int | None:
    """The dimension of the null space of an exact matrix (rank over the rationals, exactly); None
    when an entry is not exact."""
    if not all(v.is_exact() for row in rows for v in row):
        return None
    fracs = [exact(v) for row in rows for v in row]
    mat = fmpq_mat(len(rows), len(rows[0]), [fmpq(f.numerator, f.denominator) for f in fracs])
    return len(rows[0]) - mat.rank()


def exact_zeros(values: list[Any], nullity: int | None) -> list[Any]:
    """``values`` with those that hold 0 set to exactly 0 where they are as many as the exact nullity
    says are 0 (a ball around 0 never rounds to one side of it, however narrow)."""
    if not nullity:
        return values
    holding = [i for i, v in enumerate(values) if v.contains(0)]
    if len(holding) != nullity:
        return values
    return [ZERO if i in holding else v for i, v in enumerate(values)]


# ------------------------------------------------------------------------ exactly repeated eigenvalues
def rational(rows: list[list[arb]]) -> list[list[Fraction]] | None:
    if not all(v.is_exact() for row in rows for v in row):
        return None
    return [[exact(v) for v in row] for row in rows]


def _qmat(rows: list[list[Fraction]]) -> fmpq_mat:
    return fmpq_mat(len(rows), len(rows[0]), [fmpq(f.numerator, f.denominator) for row in rows for f in row])


def _null_space(rows: list[list[Fraction]]) -> list[list[Fraction]]:
    """A basis (columns) of the null space of a rational matrix, exactly (from its reduced row form)."""
    n = len(rows[0])
    rref, rank = _qmat(rows).rref()
    pivots: list[int] = []
    for i in range(rank):
        pivots.append(next(j for j in range(n) if rref[i, j] != 0))
    basis = []
    for free in (j for j in range(n) if j not in pivots):
        vec = [Fraction(0)] * n
        vec[free] = Fraction(1)
        for i, p in enumerate(pivots):
            q = rref[i, free]
            vec[p] = -Fraction(int(q.p), int(q.q))
        basis.append(vec)
    return basis


def _candidates(ball: arb) -> list[Fraction]:
    """Rationals an exactly repeated eigenvalue of a float matrix is likely to be: the ball's midpoint
    rounded to a few significand widths (an entry, a sum or difference of two, ...)."""
    mid = exact(ball.mid())
    out = []
    for bits in (24, 53, 106):
        if mid == 0:
            return [Fraction(0)]
        e = mid.numerator.bit_length() - mid.denominator.bit_length() - bits
        scale = Fraction(2) ** -e
        out.append(Fraction(round(mid * scale)) / scale)
    return out


def basis_nearest(exact_rows: list[list[Fraction]], lam: Fraction, group: range,
                   ref: np.ndarray) -> list[list[Any]] | None:
    """Where ``lam`` is an eigenvalue of multiplicity ``len(group)`` (``rank(A - lam I)`` over the
    rationals), Gram-Schmidt on the exact projections onto its eigenspace of the program's vectors
    ``ref[:, group]``; None where it is not (or a projection vanishes)."""
    n = len(exact_rows)
    shifted = [[x - lam if i == j else x for j, x in enumerate(row)] for i, row in enumerate(exact_rows)]
    basis = _null_space(shifted)
    if len(basis) != len(group):
        return None
    nb = _qmat([list(r) for r in zip(*basis)])  # n x g
    vp = _qmat([[Fraction(float(ref[r, i])) for i in group] for r in range(n)])
    nbt = nb.transpose()
    proj = nb * (nbt * nb).solve(nbt * vp)  # the projections P v_i, exactly
    q_cols: list[list[Any]] = []
    for c in range(len(group)):
        col = [arb(proj[r, c]) for r in range(n)]
        for q in q_cols:
            d = sum((x * y for x, y in zip(col, q)), ZERO)
            col = [x - d * y for x, y in zip(col, q)]
        u = unit(col)
        if not all(x.is_finite() for x in u):
            return None
        q_cols.append(u)
    return q_cols


def repeated(rows: list[list[arb]], values: list[Any], cols: list[Any], ref: np.ndarray) -> None:
    """In place: each cluster of overlapping eigenvalues whose vectors are not isolated, proven an exactly
    repeated eigenvalue ``lambda`` (an exact operand, ``rank(A - lambda I) = n - g`` over the rationals
    for a ``lambda`` inside each of the cluster's ``g`` balls and outside the others), takes the value
    ``lambda`` exactly and the basis of its eigenspace nearest the program's (``basis_nearest``)."""
    exact_rows = rational(rows)
    n = len(rows)
    if exact_rows is None:
        return
    k = 0
    while k < n:
        end = k + 1
        while end < n and values[end - 1].overlaps(values[end]):
            end += 1
        group = range(k, end)
        k = end
        if len(group) < 2 or all(cols[i] is not None for i in group):
            continue
        for lam in _candidates(values[group[0]]):
            point = arb(fmpq(lam.numerator, lam.denominator))
            if not all(values[i].contains(point) for i in group) or any(
                    values[i].contains(point) for i in range(n) if i not in group):
                continue
            q_cols = basis_nearest(exact_rows, lam, group, ref)
            if q_cols is None:
                continue
            for i, q in zip(group, q_cols):
                values[i] = point
                cols[i] = ("fixed", q)
            break
