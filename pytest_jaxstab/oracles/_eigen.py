"""``eigh`` and ``svd``: exact eigenvalues of symmetric matrices and exact singular values, as Arb balls.

Values. The eigenvalues of a real symmetric matrix and the singular values of any real matrix are
functions of the matrix, so they are evaluated like any other result: enclosed rigorously, rounded, and
escalated until settled. Arb's ``acb_mat_eig_multiple_rump`` (python-flint's ``acb_mat.eig(multiple=True,
algorithm="rump")``) encloses every eigenvalue of a ball matrix with multiplicities, clusters included;
a symmetric matrix's eigenvalues are real, so the real part of each enclosure holds one. JAX's order
(ascending for ``eigh``, descending for ``svd``) comes from order statistics: if each ``lambda_i`` lies in
``[l_i, u_i]``, the ``k``-th smallest ``lambda`` lies in ``[k-th smallest l, k-th smallest u]``, so the
sorted values are enclosed even where the balls of a cluster overlap (a repeated eigenvalue settles as
any other value). Singular values are the ``min(m, n)`` largest eigenvalues of the symmetric embedding
``[[0, A], [A^T, 0]]`` (eigenvalues ``+-sigma_i`` and ``|m - n|`` zeros), not square roots of the
eigenvalues of ``A^T A``: the embedding's enclosures are absolute in ``||A||`` like those of ``A``
itself, where squaring would make a small ``sigma`` cost twice its bits (``A^T A``'s enclosure of
``sigma^2`` is absolute in ``||A||^2``).

Factors. Eigenvectors and singular vectors are unique only up to a sign per column (a pair ``u_i, v_i``
shares one), and not at all for a repeated value. The oracle's convention: the exact unit vector whose
sign is nearest the program's own routine (the same primitive, bound on the operand's exact value
rounded to the program's dtype), i.e. the sign that makes the dot product with that routine's vector
positive, decided on the balls. So sign-invariant uses (``V diag(w) V^T``, projections, ``pinv``,
``lstsq``) are judged exactly, and a returned factor is judged against the exact factor it stands for.
Where a factor is not determined, its elements are indeterminate, so they end *uncertain* (excluded from
verdicts and counted), never guessed: eigenvalues not isolated at the working precision (a repeated
value, or a cluster the precision does not resolve), a zero singular value's vectors, the columns that
``full_matrices=True`` adds to complete a basis, a dot product with the program's vector whose sign the
balls do not decide. Vectors come from Arb's ``acb_mat_eig_simple_rump`` (rigorous enclosures of
eigenvectors for isolated eigenvalues), normalised in ball arithmetic; singular vectors from those of
``A^T A`` (or ``A A^T`` for a wide ``A``), the other side as ``A v / sigma``.
"""

from __future__ import annotations

import itertools
from fractions import Fraction
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flint import acb_mat, arb, arb_mat

from .. import _compat
from . import _arb
from ._ball_util import cls
from ._common import INDET, ZERO, Rule, ints_to_arb, out_aval

__all__ = ["RULES"]

_ADD, _MUL, _DIV = _arb.add, _arb.mul, _arb.div
_SQRT = _arb.FUNCTIONS["sqrt"]


# ----------------------------------------------------------------------------------- ball helpers
def _exact(x: arb) -> Fraction:
    """The value of an exact (radius-0, finite) ball as a fraction."""
    man, exp = x.man_exp()
    man, exp = int(man), int(exp)
    return Fraction(man * 2**exp) if exp >= 0 else Fraction(man, 2**-exp)


def _bounds(x: arb) -> tuple[Fraction, Fraction]:
    m, r = _exact(x.mid()), _exact(x.rad())
    return m - r, m + r


def _order_statistics(balls: list[arb]) -> list[arb]:
    """Enclosures of the sorted (ascending) values, each ``balls[i]`` holding one value: the ``k``-th is
    the hull of the ``k``-th smallest lower end and the ``k``-th smallest upper end."""
    ends = [_bounds(b) for b in balls]
    by_low = sorted(range(len(balls)), key=lambda i: ends[i][0])
    by_high = sorted(range(len(balls)), key=lambda i: ends[i][1])
    return [balls[i].lower().union(balls[j].upper()) for i, j in zip(by_low, by_high)]


def _isolated_order(balls: list[arb]) -> list[int] | None:
    """The ascending order of pairwise disjoint balls, or None where two overlap."""
    ends = [_bounds(b) for b in balls]
    order = sorted(range(len(balls)), key=lambda i: ends[i][0])
    if any(ends[a][1] >= ends[b][0] for a, b in itertools.pairwise(order)):
        return None
    return order


def _classify(rows: list[list[Any]]) -> str:
    """``"nan"`` (an entry with no real value), ``"indet"`` (an unbounded ball) or ``"ok"``."""
    flat = [v for row in rows for v in row]
    if any(v is None or cls(v) in ("+inf", "-inf") for v in flat):
        return "nan"  # LAPACK answers NaN; the exact matrix has no finite decomposition
    return "indet" if any(not v.is_finite() for v in flat) else "ok"


def _unit(col: list[arb]) -> list[Any]:
    """``col / ||col||`` in ball arithmetic (indeterminate where the norm's ball holds 0)."""
    sq = ZERO
    for c in col:
        sq = _ADD(sq, _MUL(c, c))
    if not sq > 0:
        return [INDET] * len(col)
    n = _SQRT(sq)
    return [_DIV(c, n) for c in col]


def _oriented(cols: list[list[Any]], refs: list[np.ndarray | None]) -> list[list[Any]]:
    """Each exact unit vector (a list of blocks, e.g. ``[u, v]`` of one singular pair) with the sign
    whose dot product with the program's vector (``refs``, the same blocks) is positive."""
    out = []
    for blocks, ref in zip(cols, refs):
        if ref is None or not np.isfinite(ref).all():
            out.append([[INDET] * len(b) for b in blocks])
            continue
        flat = [x for b in blocks for x in b]
        dot = ZERO
        for x, r in zip(flat, ref.tolist()):
            dot = _ADD(dot, _MUL(x, arb(float(r))))
        if dot > 0:
            out.append(blocks)
        elif dot < 0:
            out.append([[-x for x in b] for b in blocks])
        else:
            out.append([[INDET] * len(b) for b in blocks])
    return out


# ---------------------------------------------------------------------------- symmetric eigenvalues
def _approx_basis(a: arb_mat, n: int) -> arb_mat | None:
    """An approximately orthonormal basis of approximate eigenvectors of the midpoint matrix, as exact
    numbers (Arb's unverified QR algorithm, then Gram-Schmidt at the working precision)."""
    try:
        _, vecs = acb_mat(a.mid()).eig(right=True, algorithm="approx")
    except ValueError:
        return None
    cols: list[list[arb]] = []
    for j in range(n):
        c = [vecs[i, j].real.mid() for i in range(n)]
        for q in cols:
            d = sum((x * y for x, y in zip(c, q)), ZERO)
            c = [(x - d * y).mid() for x, y in zip(c, q)]
        norm = sum((x * x for x in c), ZERO).sqrt()
        if not norm > 0:
            return None
        cols.append([(x / norm).mid() for x in c])
    return arb_mat([[cols[j][i] for j in range(n)] for i in range(n)])


def _frobenius_bound(entries: list[arb]) -> arb:
    """A ball whose upper end bounds ``sqrt(sum x^2)`` over every point of the balls ``entries``."""
    total = ZERO
    for x in entries:
        top = abs(x).upper()  # a ball around the largest |x|: squaring it stays non-negative
        total += top * top
    return total.sqrt()


def _eigenvalues(rows: list[list[arb]]) -> list[arb]:
    """The ascending eigenvalues of a real symmetric ball matrix, with multiplicities.

    With ``X`` exact and nearly orthogonal (``_approx_basis``) and ``B = X^T A X`` in ball arithmetic:
    Weyl's inequality puts the ``k``-th eigenvalue of ``B`` within ``e = ||B - D||_F`` of the ``k``-th
    smallest ``d_k`` of ``D = diag(mid B)``; Ostrowski's theorem gives ``lambda_k(B) = theta_k
    lambda_k(A)`` with ``theta_k`` in ``[1 - delta, 1 + delta]``, ``delta = ||X^T X - I||_F < 1``. Both
    hold for any multiplicity, so a repeated eigenvalue is enclosed like any other; each ball's radius is
    about the working precision's unit times ``||A||``."""
    n = len(rows)
    a = arb_mat(rows)
    x = _approx_basis(a, n)
    if x is None:
        return [INDET] * n
    xt = x.transpose()
    b = xt * a * x
    g = xt * x
    delta = _frobenius_bound([g[i, j] - (1 if i == j else 0) for i in range(n) for j in range(n)])
    if not delta < 1:
        return [INDET] * n
    mids = sorted((b[i, i].mid() for i in range(n)), key=_exact)
    e = _frobenius_bound([b[i, j] if i != j else b[i, i] - b[i, i].mid() for i in range(n) for j in range(n)])
    theta = (1 / (1 - delta)).union(1 / (1 + delta))  # 1/theta_k, whatever theta_k's place in the range
    return [((d - e).union(d + e)) * theta for d in mids]


def _eigen_pairs(rows: list[list[arb]]) -> tuple[list[arb], list[list[Any]] | None]:
    """Ascending eigenvalues and, where every eigenvalue is isolated, the unit eigenvectors (columns,
    signs as Arb gives them); None for the vectors otherwise."""
    try:
        values, vecs = acb_mat(arb_mat(rows)).eig(right=True, algorithm="rump")
    except ValueError:  # a repeated or unresolved cluster: the vectors are not determined here
        return _eigenvalues(rows), None
    reals = [v.real for v in values]
    order = _isolated_order(reals)
    if order is None:
        return _order_statistics(reals), None
    n = len(rows)
    cols = [_unit([vecs[i, j].real for i in range(n)]) for j in order]
    return [reals[j] for j in order], cols


# ------------------------------------------------------------------------- the program's own factors
def _rounded_mids(a: np.ndarray, dtype: Any) -> np.ndarray | None:
    """The operand's exact values rounded to the program's dtype (None where one is not finite)."""
    flat = a.reshape(-1).tolist()
    if any(v is None or not v.is_finite() for v in flat):
        return None
    return np.asarray([float(v.mid()) for v in flat], dtype=np.float64).astype(dtype).reshape(a.shape)


def _program_factors(eqn: Any, a: np.ndarray) -> list[np.ndarray] | None:
    """The primitive's own results on the rounded exact operand (one matrix): the sign references."""
    mids = _rounded_mids(a, np.dtype(_compat.aval(eqn.invars[0]).dtype))
    if mids is None:
        return None
    params = dict(eqn.params)
    if "subset_by_index" in params:  # not run by XLA on CPU: the whole factor, sliced by the caller
        params["subset_by_index"] = None
    with jax.ensure_compile_time_eval():
        outs = _compat.bind(eqn, [jnp.asarray(mids)], params)
    return [np.asarray(o, dtype=np.float64) for o in outs]


# ---------------------------------------------------------------------------------------- rules
def _subset(eqn: Any, n: int) -> tuple[int, int]:
    sub = eqn.params.get("subset_by_index")
    if sub is None:
        return 0, n
    lo, hi = (int(s) for s in sub)
    return lo, hi


def _as_balls(a: np.ndarray) -> np.ndarray:
    return a if a.dtype == object else ints_to_arb(a)


def _eigh_one(ctx: Any, eqn: Any, a: np.ndarray, vectors: bool) -> tuple[np.ndarray, np.ndarray]:
    n = a.shape[-1]
    lower = bool(eqn.params.get("lower", True))
    rows = [[a[i, j] if (j <= i if lower else j >= i) else a[j, i] for j in range(n)] for i in range(n)]
    lo, hi = _subset(eqn, n)
    k = hi - lo
    w = np.empty(k, dtype=object)
    v = np.empty((n, k), dtype=object)
    state = _classify(rows)
    if state != "ok":
        fill = None if state == "nan" else INDET
        w.fill(fill)
        v.fill(fill)
        return v, w
    if not vectors:
        w[:] = _eigenvalues(rows)[lo:hi]
        v.fill(INDET)
        return v, w
    values, cols = _eigen_pairs(rows)
    w[:] = values[lo:hi]
    refs = _program_factors(eqn, a) if cols is not None else None
    if cols is None or refs is None:
        v.fill(INDET)
        return v, w
    ref_v = refs[0]  # eigh's results: vectors, values (all of them: see _program_factors)
    picked = _oriented([[c] for c in cols[lo:hi]], [ref_v[:, j] for j in range(lo, hi)])
    for j, (col,) in enumerate(picked):
        v[:, j] = col
    return v, w


def _eigh(ctx: Any, eqn: Any, a: np.ndarray) -> list[np.ndarray]:
    if not eqn.params.get("sort_eigenvalues", True):
        raise ctx.unsupported(eqn, "sort_eigenvalues=False: the order of the eigenvalues is the routine's "
                                   "choice, not a function of the matrix")
    a = _as_balls(a)
    vectors = not _compat.is_dropvar(eqn.outvars[0])
    v_out = np.empty(tuple(out_aval(eqn, 0).shape), dtype=object)
    w_out = np.empty(tuple(out_aval(eqn, 1).shape), dtype=object)
    for idx in np.ndindex(*a.shape[:-2]):
        v_out[idx], w_out[idx] = _eigh_one(ctx, eqn, a[idx], vectors)
    return [v_out, w_out]


def _singular_values(rows: list[list[arb]], m: int, n: int) -> list[Any]:
    """The ``min(m, n)`` singular values, descending: the largest eigenvalues of [[0, A], [A^T, 0]]."""
    size = m + n
    emb = [[ZERO] * size for _ in range(size)]
    for i in range(m):
        for j in range(n):
            emb[i][m + j] = emb[m + j][i] = rows[i][j]
    values = _eigenvalues(emb)[::-1][: min(m, n)]
    out: list[Any] = []
    for s in values:
        if not s.is_finite():
            out.append(INDET)
        elif s < 0 or s > 0 or s.is_zero():
            out.append(s)
        else:  # holds 0: sigma >= 0, so only the non-negative part
            out.append(ZERO.union(s.upper()))
    return out


def _gram(rows: list[list[arb]], m: int, n: int) -> list[list[arb]]:
    """``A^T A`` (n x n) in ball arithmetic."""
    g = [[ZERO] * n for _ in range(n)]
    for i in range(n):
        for j in range(i, n):
            acc = ZERO
            for r in range(m):
                acc = _ADD(acc, _MUL(rows[r][i], rows[r][j]))
            g[i][j] = g[j][i] = acc
    return g


def _singular_vectors(rows: list[list[arb]], m: int, n: int, s: list[Any]) -> list[tuple[list, list]] | None:
    """The pairs ``(u_i, v_i)`` for the descending singular values ``s`` (signs as Arb gives them), or
    None where the values are not isolated or one holds 0."""
    tall = m >= n
    a = rows if tall else [list(c) for c in zip(*rows)]  # work on the tall one: A or A^T
    mm, nn = (m, n) if tall else (n, m)
    _, cols = _eigen_pairs(_gram(a, mm, nn))
    if cols is None or any(not (x > 0) for x in s):
        return None
    pairs = []
    for col, sigma in zip(reversed(cols), s):  # descending
        other = []
        for r in range(mm):
            acc = ZERO
            for c in range(nn):
                acc = _ADD(acc, _MUL(a[r][c], col[c]))
            other.append(_DIV(acc, sigma))
        pairs.append((other, col) if tall else (col, other))
    return pairs


def _svd_one(ctx: Any, eqn: Any, a: np.ndarray, uv: bool) -> list[np.ndarray]:
    m, n = a.shape
    p = min(m, n)
    lo, hi = _subset(eqn, p)
    full = bool(eqn.params.get("full_matrices", False))
    rows = [list(r) for r in a]
    s_out = np.empty(hi - lo, dtype=object)
    u_cols = m if full else hi - lo
    v_rows = n if full else hi - lo
    u_out = np.empty((m, u_cols), dtype=object)
    vt_out = np.empty((v_rows, n), dtype=object)
    u_out.fill(INDET)  # the columns `full_matrices` adds complete a basis: any completion is valid
    vt_out.fill(INDET)
    state = _classify(rows)
    if state != "ok":
        fill = None if state == "nan" else INDET
        for x in (s_out, u_out, vt_out):
            x.fill(fill)
        return [s_out, u_out, vt_out] if uv else [s_out]
    s = _singular_values(rows, m, n)
    s_out[:] = s[lo:hi]
    if not uv:
        return [s_out]
    pairs = _singular_vectors(rows, m, n, s)
    refs = _program_factors(eqn, a) if pairs is not None else None
    if pairs is None or refs is None:
        return [s_out, u_out, vt_out]
    _, ref_u, ref_vt = refs  # svd's results: s, u, vt
    picked = _oriented([list(pq) for pq in pairs[lo:hi]],
                       [np.concatenate([ref_u[:, j], ref_vt[j, :]]) for j in range(lo, hi)])
    for j, (u, v) in enumerate(picked):
        u_out[:, j] = u
        vt_out[j, :] = v
    return [s_out, u_out, vt_out]


def _svd(ctx: Any, eqn: Any, a: np.ndarray) -> list[np.ndarray]:
    if eqn.params.get("subset_by_index") is not None and eqn.params.get("full_matrices"):
        raise ctx.unsupported(eqn, "subset_by_index with full_matrices=True")
    a = _as_balls(a)
    uv = bool(eqn.params.get("compute_uv", True))
    outs = [np.empty(tuple(out_aval(eqn, i).shape), dtype=object) for i in range(len(eqn.outvars))]
    for idx in np.ndindex(*a.shape[:-2]):
        for o, r in zip(outs, _svd_one(ctx, eqn, a[idx], uv)):
            o[idx] = r
    return outs


RULES: dict[str, Rule] = {"eigh": _eigh, "svd": _svd}
