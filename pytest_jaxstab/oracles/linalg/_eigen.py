"""``eigh`` and ``svd``: exact eigenvalues of symmetric matrices and exact singular values, as Arb balls.

Values. The eigenvalues of a real symmetric matrix and the singular values of any real matrix are
functions of the matrix, so they are evaluated like any other result: enclosed rigorously, rounded, and
escalated until settled. ``_spectrum`` encloses every eigenvalue, with multiplicities, around an exact,
nearly orthogonal basis of approximate eigenvectors (Weyl's inequality and Ostrowski's theorem), so a
repeated eigenvalue is enclosed like any other; where the operand is exact, its exact rank (over the
rationals) makes the zero eigenvalues exactly 0. JAX's order: ascending for ``eigh``, descending for
``svd``. Singular values are the ``min(m, n)`` largest eigenvalues of the symmetric embedding
``[[0, A], [A^T, 0]]`` (eigenvalues ``+-sigma_i`` and ``|m - n|`` zeros), not square roots of the
eigenvalues of ``A^T A``: the embedding's enclosures are absolute in ``||A||`` like those of ``A``
itself, where ``A^T A``'s enclosure of ``sigma^2`` is absolute in ``||A||^2`` and would cost a small
``sigma`` twice its bits (still rigorous, settled at about twice the precision).

Factors. Eigenvectors and singular vectors are unique only up to a sign per column (a pair ``u_i, v_i``
shares one), and not at all for a repeated value. The oracle's convention: the exact unit vector whose
sign is nearest the program's own routine (the same primitive, bound on the operand's exact value
rounded to the program's dtype), i.e. the sign that makes the dot product with that routine's vector
positive, decided on the balls. So sign-invariant uses (``V diag(w) V^T``, projections, ``pinv``,
``lstsq``) are judged exactly, and a returned factor is judged against the exact factor it stands for.
Each isolated eigenvalue's vector is enclosed by the gap theorem (``_vector``); the embedding's vector
for ``sigma > 0`` is ``(u, v) / sqrt(2)``. Where a factor is not determined (a repeated value or a
cluster the precision does not resolve, a zero singular value, the columns ``full_matrices=True`` adds
to complete a basis, a sign the balls do not decide), each of its entries is the ball ``[-1, 1]``
(``ANY_ENTRY``), which holds every valid choice: it never settles, so the entry ends *uncertain*
(excluded from verdicts and counted), never guessed, and what is computed from it settles only where
the choice does not matter (``pinv`` multiplies a zero singular value's vectors by an exact 0). An
exactly repeated eigenvalue of an exact operand is proven so in rational arithmetic (``repeated``) and
gets the basis of its eigenspace nearest the program's.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flint import acb_mat, arb, arb_mat, fmpq

from ... import _compat
from ..core import _arb
from ..core._ball_util import cls
from ..core._common import INDET, ZERO, Rule, ints_to_arb, out_aval
from ._eigenspace import exact, exact_zeros, nullity, repeated, singular, unit

__all__ = ["RULES"]

_ADD, _MUL, _DIV = _arb.add, _arb.mul, _arb.div
#: An entry of a unit vector the oracle does not pin down (a basis of a repeated value's space, a sign it
#: cannot decide): every such entry lies in [-1, 1], so this ball holds every valid choice. It never
#: settles, and what is computed from it settles only where the choice does not matter (a column
#: multiplied by an exact zero, as ``pinv`` does with a zero singular value's vectors).
ANY_ENTRY = arb(0, 1)
_SQRT = _arb.FUNCTIONS["sqrt"]


# ----------------------------------------------------------------------------------- ball helpers
def _bounds(x: arb) -> tuple[Fraction, Fraction]:
    m, r = exact(x.mid()), exact(x.rad())
    return m - r, m + r


def classify(rows: list[list[Any]]) -> str:
    """``"nan"`` (an entry with no real value), ``"indet"`` (an unbounded ball) or ``"ok"``."""
    flat = [v for row in rows for v in row]
    if any(v is None or cls(v) in ("+inf", "-inf") for v in flat):
        return "nan"  # LAPACK answers NaN; the exact matrix has no finite decomposition
    return "indet" if any(not v.is_finite() for v in flat) else "ok"


def oriented(cols: list[list[Any]], refs: list[np.ndarray | None]) -> list[list[Any] | None]:
    """Each exact factor column (a list of blocks: ``[u, v]`` of one singular pair, ``[q, r]`` of a QR
    pair) with the sign whose dot product with the program's own (``refs``, the same blocks
    concatenated) is positive; None where a block is missing (None entries) or the sign is not decided."""
    out: list[list[Any] | None] = []
    for blocks, ref in zip(cols, refs):
        if ref is None or not np.isfinite(ref).all() or any(x is None for b in blocks for x in b):
            out.append(None)
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
            out.append(None)
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


def _spectrum(rows: list[list[arb]], vectors: bool) -> tuple[list[Any], list[list[Any] | None]]:
    """The ascending eigenvalues of a real symmetric ball matrix, with multiplicities, and (``vectors``)
    for each isolated one an enclosure of its unit eigenvector (None for the others).

    Values: with ``X`` exact and nearly orthogonal (``_approx_basis``) and ``B = X^T A X`` in ball
    arithmetic, Weyl's inequality puts the ``k``-th eigenvalue of ``B`` within ``e = ||B - D||_F`` of
    the ``k``-th smallest ``d_k`` of ``D = diag(mid B)``; Ostrowski's theorem gives ``lambda_k(B) =
    theta_k lambda_k(A)``, ``theta_k`` in ``[1 - delta, 1 + delta]``, ``delta = ||X^T X - I||_F < 1``.
    Both hold for any multiplicity, so a repeated eigenvalue is enclosed like any other; each radius is
    about the working precision's unit times ``||A||``. Vectors: ``_vector``."""
    n = len(rows)
    a = arb_mat(rows)
    x = _approx_basis(a, n)
    nothing: list[list[Any] | None] = [None] * n
    if x is None:
        return [INDET] * n, nothing
    xt = x.transpose()
    b = xt * a * x
    g = xt * x
    delta = _frobenius_bound([g[i, j] - (1 if i == j else 0) for i in range(n) for j in range(n)])
    if not delta < 1:
        return [INDET] * n, nothing
    order = sorted(range(n), key=lambda i: exact(b[i, i].mid()))
    e = _frobenius_bound([b[i, j] if i != j else b[i, i] - b[i, i].mid() for i in range(n) for j in range(n)])
    theta = (1 / (1 - delta)).union(1 / (1 + delta))  # 1/theta_k, whatever theta_k's place in the range
    values = [(b[i, i].mid() - e).union(b[i, i].mid() + e) * theta for i in order]
    if not vectors:
        return values, nothing
    return values, [_vector(a, [x[r, i] for r in range(n)], values, k) for k, i in enumerate(order)]


def _vector(a: arb_mat, x: list[arb], values: list[Any], k: int) -> list[Any] | None:
    """An enclosure of the unit eigenvector of ``values[k]`` nearest the approximation ``x`` (the sign
    with ``x . v >= 0``), or None where ``values[k]`` is not isolated from the others.

    The gap theorem (Parlett, *The Symmetric Eigenvalue Problem*, 11.7.1): for a unit ``x``, its
    Rayleigh quotient ``rho`` and residual ``r = A x - rho x``, the eigenvector ``z`` of the eigenvalue
    nearest ``rho`` satisfies ``sin(x, z) <= ||r|| / gap``, ``gap`` the distance from ``rho`` to the
    other eigenvalues; with ``x . z >= 0``, ``||z - x|| <= sqrt(2) sin(x, z)`` bounds every component."""
    n = len(x)
    xhat = unit(x)
    col = arb_mat([[u] for u in xhat])
    ax = a * col
    rho = sum((xhat[i] * ax[i, 0] for i in range(n)), ZERO)
    res = _frobenius_bound([ax[i, 0] - rho * xhat[i] for i in range(n)])
    if not (rho.is_finite() and res.is_finite()):
        return None
    lo, hi = _bounds(rho)
    own_lo, own_hi = _bounds(values[k])
    nearest = max(hi - own_lo, own_hi - lo)  # the farthest rho can be from values[k]
    gap: Fraction | None = None
    for j, v in enumerate(values):
        if j == k:
            continue
        v_lo, v_hi = _bounds(v)
        d = v_lo - hi if v_lo > hi else lo - v_hi if v_hi < lo else Fraction(0)
        gap = d if gap is None else min(gap, d)
    if gap is not None and not gap > nearest:
        return None  # another eigenvalue may be as near: not isolated at this precision
    if gap is None:  # a 1 x 1 matrix: its eigenvector is +-1
        return [arb(1) if xhat[0] > 0 else arb(-1)] if xhat[0] > 0 or xhat[0] < 0 else None
    radius = res.upper() * arb(2).sqrt() / arb(fmpq(gap.numerator, gap.denominator))
    return [(u - radius).union(u + radius) for u in xhat]


# ------------------------------------------------------------------------- the program's own factors
def _rounded_mids(a: np.ndarray, dtype: Any) -> np.ndarray | None:
    """The operand's exact values rounded to the program's dtype (None where one is not finite)."""
    flat = a.reshape(-1).tolist()
    if any(v is None or not v.is_finite() for v in flat):
        return None
    return np.asarray([float(v.mid()) for v in flat], dtype=np.float64).astype(dtype).reshape(a.shape)


def program_factors(eqn: Any, a: np.ndarray) -> list[np.ndarray] | None:
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


def _eigh_one(eqn: Any, a: np.ndarray, vectors: bool) -> tuple[np.ndarray, np.ndarray]:
    n = a.shape[-1]
    lower = bool(eqn.params.get("lower", True))
    rows = [[a[i, j] if (j <= i if lower else j >= i) else a[j, i] for j in range(n)] for i in range(n)]
    lo, hi = _subset(eqn, n)
    w = np.empty(hi - lo, dtype=object)
    v = np.empty((n, hi - lo), dtype=object)
    v.fill(ANY_ENTRY)
    state = classify(rows)
    if state != "ok":
        fill = None if state == "nan" else INDET
        w.fill(fill)
        v.fill(fill)
        return v, w
    values, cols = _spectrum(rows, vectors)
    values = exact_zeros(values, nullity(rows))
    refs = program_factors(eqn, a) if vectors else None
    if refs is not None:
        repeated(rows, values, cols, refs[0])  # eigh's results: vectors (all of them), values
    w[:] = values[lo:hi]
    if refs is None:
        return v, w
    ref_v = refs[0]
    for j, i in enumerate(range(lo, hi)):
        col = cols[i]
        if isinstance(col, tuple):  # an exactly repeated eigenvalue's basis, already the program's choice
            v[:, j] = col[1]
            continue
        picked = oriented([[col if col is not None else [None] * n]], [ref_v[:, i]])[0]
        if picked is not None:
            v[:, j] = picked[0]
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
        v_out[idx], w_out[idx] = _eigh_one(eqn, a[idx], vectors)
    return [v_out, w_out]


def _singular(rows: list[list[arb]], m: int, n: int, vectors: bool) -> tuple[list[Any], list[Any]]:
    """The ``min(m, n)`` singular values, descending, and for each nonzero isolated one the pair
    ``(u, v)`` (None for the others): the largest eigenvalues of ``H = [[0, A], [A^T, 0]]``, whose
    unit eigenvector for ``sigma > 0`` is ``(u, v) / sqrt(2)``."""
    size = m + n
    emb = [[ZERO] * size for _ in range(size)]
    for i in range(m):
        for j in range(n):
            emb[i][m + j] = emb[m + j][i] = rows[i][j]
    values, cols = _spectrum(emb, vectors)
    p = min(m, n)
    zeros = nullity(rows)
    s: list[Any] = []
    for v in exact_zeros(values[::-1][:p], None if zeros is None else zeros - max(n - m, 0)):
        if not v.is_finite():
            s.append(INDET)
        elif v < 0 or v > 0 or v.is_zero():
            s.append(v)
        else:  # holds 0: sigma >= 0, so only the non-negative part
            s.append(ZERO.union(v.upper()))
    root2 = arb(2).sqrt()
    pairs: list[Any] = []
    for sigma, col in zip(s, cols[::-1][:p]):
        if col is None or not sigma > 0:
            pairs.append(None)  # a zero or repeated singular value: its vectors are not unique
        else:
            pairs.append(([root2 * c for c in col[:m]], [root2 * c for c in col[m:]]))
    return s, pairs


def _svd_one(eqn: Any, a: np.ndarray, uv: bool) -> list[np.ndarray]:
    m, n = a.shape
    lo, hi = _subset(eqn, min(m, n))
    full = bool(eqn.params.get("full_matrices", False))
    rows = [list(r) for r in a]
    s_out = np.empty(hi - lo, dtype=object)
    u_out = np.empty((m, m if full else hi - lo), dtype=object)
    vt_out = np.empty((n if full else hi - lo, n), dtype=object)
    u_out.fill(ANY_ENTRY)  # the columns `full_matrices` adds complete a basis: any completion is valid
    vt_out.fill(ANY_ENTRY)
    state = classify(rows)
    if state != "ok":
        fill = None if state == "nan" else INDET
        for x in (s_out, u_out, vt_out):
            x.fill(fill)
        return [s_out, u_out, vt_out] if uv else [s_out]
    s, pairs = _singular(rows, m, n, uv)
    s_out[:] = s[lo:hi]
    if not uv:
        return [s_out]
    refs = program_factors(eqn, a)
    if refs is None:
        return [s_out, u_out, vt_out]
    _, ref_u, ref_vt = refs  # svd's results: s, u, vt
    u_fixed: dict[int, list[Any]] = {}
    v_fixed: dict[int, list[Any]] = {}
    if (lo, hi) == (0, min(m, n)):  # the zero and repeated singular values' vectors, where exact
        u_fixed, v_fixed = singular(rows, s, pairs, ref_u, ref_vt, u_out.shape[1], vt_out.shape[0])
        s_out[:] = s
    wanted = pairs[lo:hi]
    blocks = [list(pq) if pq is not None else [[None] * m, [None] * n] for pq in wanted]
    picked = oriented(blocks, [np.concatenate([ref_u[:, j], ref_vt[j, :]]) for j in range(lo, hi)])
    for j, pair in enumerate(picked):
        if pair is not None:
            u_out[:, j], vt_out[j, :] = pair
    for j, u in u_fixed.items():
        u_out[:, j] = u
    for j, v in v_fixed.items():
        vt_out[j, :] = v
    return [s_out, u_out, vt_out]


def _svd(ctx: Any, eqn: Any, a: np.ndarray) -> list[np.ndarray]:
    if eqn.params.get("subset_by_index") is not None and eqn.params.get("full_matrices"):
        raise ctx.unsupported(eqn, "subset_by_index with full_matrices=True")
    a = _as_balls(a)
    uv = bool(eqn.params.get("compute_uv", True))
    outs = [np.empty(tuple(out_aval(eqn, i).shape), dtype=object) for i in range(len(eqn.outvars))]
    for idx in np.ndindex(*a.shape[:-2]):
        for o, r in zip(outs, _svd_one(eqn, a[idx], uv)):
            o[idx] = r
    return outs


RULES: dict[str, Rule] = {"eigh": _eigh, "svd": _svd}
