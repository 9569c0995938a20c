"""Exact facts about an exact operand, in rational arithmetic: rank, null spaces, repeated eigenvalues.

A matrix whose entries are exact balls (the program's inputs, or exact arithmetic on them) is a matrix
of rationals, so its rank, the null space of ``A - lambda I`` for a rational ``lambda``, and orthogonal
projections onto it are computed exactly (python-flint's ``fmpq_mat``), where ball arithmetic can never
prove an equality. ``_eigen`` uses them for what balls leave open: that the zero eigenvalues and
singular values are exactly 0 (``nullity``), that a cluster of eigenvalues is one repeated eigenvalue
(``repeated``), and a basis of such an eigenspace (or of a null space, for ``svd``'s zero singular
values) chosen as the one nearest the program's: Gram-Schmidt on the exact projections of the
program's own vectors (``projected_basis``).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np
from flint import arb, fmpq, fmpq_mat

from ..core import _arb
from ..core._common import INDET, ZERO

__all__ = ["exact", "exact_zeros", "nullity", "projected_basis", "rational", "repeated", "singular", "unit"]

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


def projected_basis(rows: list[list[Fraction]], refs: list[np.ndarray], dim: int | None = None,
                    ) -> list[list[Any]] | None:
    """Gram-Schmidt, in ball arithmetic, on the exact orthogonal projections of the program's vectors
    ``refs`` onto the null space of the rational matrix ``rows``: an orthonormal set in that space, the
    one nearest the program's. None where the null space's dimension is not ``dim`` (when given) or is
    smaller than the number of vectors, or a projection vanishes."""
    basis = _null_space(rows)
    if (dim is not None and len(basis) != dim) or len(basis) < len(refs) or not refs:
        return None if refs else []
    size = len(basis[0])
    nb = _qmat([list(r) for r in zip(*basis)])  # size x dim
    vp = _qmat([[Fraction(float(ref[r])) for ref in refs] for r in range(size)])
    nbt = nb.transpose()
    proj = nb * (nbt * nb).solve(nbt * vp)  # the projections P v_i, exactly
    q_cols: list[list[Any]] = []
    for c in range(len(refs)):
        col = [arb(proj[r, c]) for r in range(size)]
        for q in q_cols:
            d = sum((x * y for x, y in zip(col, q)), ZERO)
            col = [x - d * y for x, y in zip(col, q)]
        u = unit(col)
        if not all(x.is_finite() for x in u):
            return None
        q_cols.append(u)
    return q_cols


def _shifted(rows: list[list[Fraction]], lam: Fraction) -> list[list[Fraction]]:
    return [[x - lam if i == j else x for j, x in enumerate(row)] for i, row in enumerate(rows)]


def _groups(values: list[Any], todo: list[bool]) -> list[range]:
    """Runs of consecutive values whose balls overlap, of two or more, with a member in ``todo``."""
    out, k, n = [], 0, len(values)
    while k < n:
        end = k + 1
        while end < n and values[end - 1].overlaps(values[end]):
            end += 1
        if end - k >= 2 and any(todo[k:end]):
            out.append(range(k, end))
        k = end
    return out


def _proven(values: list[Any], group: range, lam: Fraction) -> arb | None:
    """``lam`` as an exact ball when it lies in each of ``group``'s balls and in no other."""
    point = arb(fmpq(lam.numerator, lam.denominator))
    inside = all(values[i].contains(point) for i in group)
    elsewhere = any(values[i].contains(point) for i in range(len(values)) if i not in group)
    return point if inside and not elsewhere else None


def repeated(rows: list[list[arb]], values: list[Any], cols: list[Any], ref: np.ndarray) -> None:
    """In place: each cluster of overlapping eigenvalues whose vectors are not isolated, proven an exactly
    repeated eigenvalue ``lambda`` (an exact operand, ``rank(A - lambda I) = n - g`` over the rationals
    for a ``lambda`` inside each of the cluster's ``g`` balls and outside the others), takes the value
    ``lambda`` exactly and the basis of its eigenspace nearest the program's (``projected_basis``)."""
    exact_rows = rational(rows)
    if exact_rows is None:
        return
    for group in _groups(values, [c is None for c in cols]):
        for lam in _candidates(values[group[0]]):
            point = _proven(values, group, lam)
            q_cols = None if point is None else projected_basis(
                _shifted(exact_rows, lam), [ref[:, i] for i in group], len(group))
            if point is None or q_cols is None:
                continue
            for i, q in zip(group, q_cols):
                values[i] = point
                cols[i] = ("fixed", q)
            break


def singular(rows: list[list[arb]], s: list[Any], pairs: list[Any], ref_u: np.ndarray, ref_vt: np.ndarray,
             u_cols: int, v_rows: int) -> tuple[dict[int, list[Any]], dict[int, list[Any]]]:
    """For an exact operand, in place on ``s`` and ``pairs``: the zero singular values exactly 0 (past
    the exact rank), and the singular vectors balls cannot fix, as the ones nearest the program's: the
    ``U`` columns from the rank on (those of a zero singular value and ``full_matrices``' completion)
    an orthonormal basis of ``null(A^T)``, the ``V^T`` rows of ``null(A)``; a proven repeated
    ``sigma > 0`` (``sigma^2`` a rational eigenvalue of ``A^T A`` of the cluster's multiplicity) the
    right vectors in its eigenspace and ``u = A v / sigma``. Returns those ``U`` columns and ``V^T``
    rows by index."""
    exact_rows = rational(rows)
    if exact_rows is None:
        return {}, {}
    m, n = len(rows), len(rows[0])
    rank = n - (nullity(rows) or 0)
    for i in range(rank, len(s)):
        s[i] = ZERO
        pairs[i] = None
    transposed = [list(c) for c in zip(*exact_rows)]
    u_fixed: dict[int, list[Any]] = {}
    v_fixed: dict[int, list[Any]] = {}
    u_null = projected_basis(transposed, [ref_u[:, i] for i in range(rank, u_cols)])
    v_null = projected_basis(exact_rows, [ref_vt[i, :] for i in range(rank, v_rows)])
    u_fixed.update(zip(range(rank, u_cols), u_null or []))
    v_fixed.update(zip(range(rank, v_rows), v_null or []))
    gram = [[sum((transposed[i][k] * transposed[j][k] for k in range(m)), Fraction(0)) for j in range(n)]
            for i in range(n)]
    squares = [x * x for x in s[:rank]]
    for group in _groups(squares, [pairs[i] is None for i in range(rank)]):
        for lam in _candidates(squares[group[0]]):
            point = _proven(squares, group, lam)
            vs = None if point is None else projected_basis(
                _shifted(gram, lam), [ref_vt[i, :] for i in group], len(group))
            if point is None or vs is None:
                continue
            sigma = _SQRT(point)
            for i, v in zip(group, vs):
                s[i] = sigma
                u_fixed[i] = [_DIV(sum((arb(fmpq(x.numerator, x.denominator)) * y for x, y in zip(row, v)),
                                       ZERO), sigma) for row in exact_rows]
                v_fixed[i] = v
            break
    return u_fixed, v_fixed
