"""The oracle on ``eigh``, ``svd`` and ``qr``: exact eigenvalues and singular values, and factors under the
stated sign convention, against mpmath computed independently at 1000 bits.

References: ``mpmath.eigsy`` (Jacobi rotations), ``mpmath.svd_r`` and ``mpmath.qr`` (Householder) on
the exact input entries at 1000 bits, far beyond what the gaps and condition numbers here can lose
(the closest eigenvalues below differ by 2**-30 relative), sorted as JAX orders them and rounded to the
dtype independently of the oracle (``rounded`` from test_oracle). Factors: the reference's column signed
to agree with JAX's own column (dot product > 0), the convention docs/architecture.md states. Every
value asserted here is also asserted *certain*: the oracle proved it.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import mpmath
import numpy as np
import pytest
from jax import lax
from test_oracle import REF_BITS, assert_identical, exact, rounded

import pytest_jaxstab as jst
from pytest_jaxstab import UnsupportedPrimitive
from pytest_jaxstab.oracles import evaluate

F32, F64 = np.float32, np.float64


def mp_matrix(a: np.ndarray) -> mpmath.matrix:
    return mpmath.matrix([[exact(v) for v in row] for row in a.tolist()])


def sym_eig(a: np.ndarray) -> tuple[list, list]:
    """Ascending eigenvalues and the matching unit eigenvectors (columns), at REF_BITS."""
    with mpmath.workprec(REF_BITS):
        e, q = mpmath.eigsy(mp_matrix(a))
        order = sorted(range(len(e)), key=lambda i: e[i])
        n = a.shape[0]
        return [e[i] for i in order], [[q[r, i] for r in range(n)] for i in order]


def singular(a: np.ndarray) -> list:
    with mpmath.workprec(REF_BITS):
        s = mpmath.svd_r(mp_matrix(a), compute_uv=False)
        return sorted((s[i] for i in range(len(s))), reverse=True)


def signed_like(col: list, program: np.ndarray) -> list:
    """``col`` with the sign that makes its dot product with the program's column positive."""
    with mpmath.workprec(REF_BITS):
        dot = sum(c * exact(p) for c, p in zip(col, program.tolist()))
        return col if dot > 0 else [-c for c in col]


def as_dtype(a: np.ndarray, dtype) -> np.ndarray:
    return np.asarray(a, dtype=np.float64).astype(dtype)


def all_certain(result) -> bool:
    return all(np.asarray(c).all() for c in jax.tree_util.tree_leaves(result.certain))


# Symmetric matrices of each kind that loses accuracy somewhere, as float64 entries; cast per dtype.
_ORD = np.array([[4.0, 1.0, 2.0], [1.0, 5.0, 1.0], [2.0, 1.0, 6.0]])
_D = np.diag([1.0, 1e-6, 1e-12])
SYMMETRIC = {
    "ordinary": _ORD,
    "graded": _D @ _ORD @ _D,  # eigenvalues over 24 decades: relative accuracy of the small ones
    "nearly-singular": np.array([[1.0, 1.0], [1.0, 1.0 + 2.0**-20]]),  # lambda_min ~ 2**-21
    "clustered": np.array([[1.0, 2.0**-31, 0.0], [2.0**-31, 1.0, 0.0], [0.0, 0.0, 3.0]]),  # 1 +- 2**-31
    "indefinite": np.array([[0.0, 3.0, -1.5], [3.0, -2.0, 0.25], [-1.5, 0.25, 7.0]]),
}
EXTREME = {np.dtype(F32): (1e-30, 1e30), np.dtype(F64): (1e-300, 1e300)}


def symmetric_cases():
    for dtype in (F32, F64):
        for name, a in SYMMETRIC.items():
            yield pytest.param(as_dtype(a, dtype), id=f"{name}-{np.dtype(dtype).name}")
        for scale in EXTREME[np.dtype(dtype)]:  # products of entries over/underflow in the float program
            yield pytest.param(as_dtype(_ORD * scale, dtype), id=f"scaled-{scale:g}-{np.dtype(dtype).name}")


@pytest.mark.parametrize("a", list(symmetric_cases()))
def test_eigenvalues_correctly_rounded_and_certain(a):
    with jax.enable_x64(a.dtype == F64):
        got = evaluate(lambda m: (jnp.linalg.eigvalsh(m), jnp.linalg.eigh(m)[0]), a)
    values, _ = sym_eig(a)
    expected = np.array([rounded(v, a.dtype) for v in values], a.dtype)
    assert all_certain(got)
    assert_identical(got.values[0], expected)
    assert_identical(got.values[1], expected)


# General matrices for the singular values: square, tall, wide, rank-deficient up to 2**-40.
GENERAL = {
    "square": np.array([[2.0, -1.0, 0.5], [0.25, 3.0, 1.0], [-1.0, 0.0, 4.0]]),
    "tall": np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.5]]),
    "wide": np.array([[1.0, -2.0, 3.0], [0.5, 0.25, -4.0]]),
    "nearly-rank-1": np.array([[1.0, 2.0], [2.0, 4.0 + 2.0**-20]]),  # sigma_min ~ 2**-22: cancels
    "graded": np.diag([1.0, 1e-5, 1e-10]) @ np.array([[2.0, 1.0, 0.5], [1.0, 3.0, 1.0], [0.5, 1.0, 4.0]]),
}


def general_cases():
    for dtype in (F32, F64):
        for name, a in GENERAL.items():
            yield pytest.param(as_dtype(a, dtype), id=f"{name}-{np.dtype(dtype).name}")
        for scale in EXTREME[np.dtype(dtype)]:
            yield pytest.param(as_dtype(GENERAL["square"] * scale, dtype),
                               id=f"scaled-{scale:g}-{np.dtype(dtype).name}")


@pytest.mark.parametrize("a", list(general_cases()))
def test_singular_values_norm_and_cond_correctly_rounded(a):
    fns = (lambda m: jnp.linalg.svd(m, compute_uv=False), lambda m: jnp.linalg.norm(m, ord=2),
           lambda m: jnp.linalg.svd(m)[1])
    with jax.enable_x64(a.dtype == F64):
        got = evaluate(lambda m: tuple(f(m) for f in fns), a)
    s = singular(a)
    expected = np.array([rounded(v, a.dtype) for v in s], a.dtype)
    assert all_certain(got)
    assert_identical(got.values[0], expected)
    assert_identical(got.values[1], np.asarray(expected[0]))
    assert_identical(got.values[2], expected)
    if a.shape[0] == a.shape[1]:
        with jax.enable_x64(a.dtype == F64):
            cond = evaluate(jnp.linalg.cond, a)
        with mpmath.workprec(REF_BITS):
            assert_identical(cond.values, np.asarray(rounded(s[0] / s[-1], a.dtype)))
        assert all_certain(cond)


@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("name", ["ordinary", "graded", "clustered", "indefinite"])
def test_eigenvectors_signed_like_the_program_and_reconstruction_exact(name, dtype):
    a = as_dtype(SYMMETRIC[name], dtype)
    with jax.enable_x64(dtype == F64):
        got = evaluate(lambda m: (jnp.linalg.eigh(m)[1], jnp.linalg.eigh(m)[1] * jnp.linalg.eigh(m)[0]
                                  @ jnp.linalg.eigh(m)[1].T), a)
        program = np.asarray(jnp.linalg.eigh(a)[1])
    _, cols = sym_eig(a)
    expected = np.empty(a.shape, dtype)
    for j, col in enumerate(cols):
        expected[:, j] = [rounded(v, dtype) for v in signed_like(col, program[:, j])]
    assert all_certain(got)
    assert_identical(got.values[0], expected)
    # V diag(w) V^T is the matrix itself, exactly, whatever the signs: the input's own floats.
    assert_identical(got.values[1], a)


@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("name", ["square", "tall", "wide", "graded"])
def test_singular_vectors_signed_like_the_program(name, dtype):
    a = as_dtype(GENERAL[name], dtype)
    with jax.enable_x64(dtype == F64):
        got = evaluate(lambda m: jnp.linalg.svd(m, full_matrices=False), a)
        pu, _, pvt = (np.asarray(x) for x in jnp.linalg.svd(a, full_matrices=False))
    m, n = a.shape
    with mpmath.workprec(REF_BITS):
        u_ref, s_ref, v_ref = mpmath.svd_r(mp_matrix(a), full_matrices=False)
        order = sorted(range(min(m, n)), key=lambda i: -s_ref[i])
        exp_u, exp_vt = np.empty(pu.shape, dtype), np.empty(pvt.shape, dtype)
        for j, i in enumerate(order):
            u, v = [u_ref[r, i] for r in range(m)], [v_ref[i, c] for c in range(n)]
            dot = sum(x * exact(y) for x, y in zip(u + v, np.concatenate([pu[:, j], pvt[j]]).tolist()))
            sign = 1 if dot > 0 else -1
            exp_u[:, j] = [rounded(sign * x, dtype) for x in u]
            exp_vt[j] = [rounded(sign * x, dtype) for x in v]
    assert all_certain(got)
    assert_identical(got.values[0], exp_u)
    assert_identical(got.values[2], exp_vt)


@pytest.mark.parametrize("dtype", [F32, F64])
def test_pinv_and_lstsq_of_a_nonsingular_matrix_are_the_exact_inverse_and_solution(dtype):
    a = as_dtype(GENERAL["square"], dtype)
    b = as_dtype(np.array([1.0, -2.0, 0.5]), dtype)
    with jax.enable_x64(dtype == F64):
        got = evaluate(lambda m, y: (jnp.linalg.pinv(m), jnp.linalg.lstsq(m, y)[0]), a, b)
    with mpmath.workprec(REF_BITS):
        inv = mpmath.inverse(mp_matrix(a))
        x = mpmath.lu_solve(mp_matrix(a), mp_matrix(b[:, None]))
        exp_inv = np.array([[rounded(inv[i, j], dtype) for j in range(3)] for i in range(3)], dtype)
        exp_x = np.array([rounded(x[i], dtype) for i in range(3)], dtype)
    assert all_certain(got)
    assert_identical(got.values[0], exp_inv)
    assert_identical(got.values[1], exp_x)


def test_an_exactly_repeated_eigenvalue_gets_the_basis_nearest_the_programs():
    # ones(3): eigenvalue 0 twice (the plane x + y + z = 0), 3 once. The oracle proves the repetition
    # (rank(A - 0 I) = 1 over the rationals) and takes Gram-Schmidt of the exact projections of the
    # program's own two vectors onto that plane: the reference does the same at 1000 bits with the
    # projector I - J/3, independently.
    a = np.ones((3, 3), F32)
    got = evaluate(lambda m: (*jnp.linalg.eigh(m), jnp.linalg.svd(m, compute_uv=False),
                              jnp.linalg.eigh(m)[1] * jnp.linalg.eigh(m)[0] @ jnp.linalg.eigh(m)[1].T), a)
    program = np.asarray(jnp.linalg.eigh(a)[1])
    with mpmath.workprec(REF_BITS):
        proj = mpmath.eye(3) - mpmath.ones(3, 3) / 3
        basis: list = []
        for j in range(2):
            col = proj * mpmath.matrix([exact(v) for v in program[:, j]])
            for q in basis:
                col = col - (q.T * col)[0] * q
            basis.append(col / mpmath.norm(col))
        third = signed_like([1 / mpmath.sqrt(3)] * 3, program[:, 2])
        expected = np.array([[rounded(basis[0][r], F32), rounded(basis[1][r], F32), rounded(third[r], F32)]
                             for r in range(3)], F32)
    assert all_certain(got)
    assert_identical(got.values[0], np.array([0.0, 0.0, 3.0], F32))
    assert_identical(got.values[1], expected)
    assert_identical(got.values[2], np.array([3.0, 0.0, 0.0], F32))
    assert_identical(got.values[3], a)  # V diag(w) V^T: the matrix itself


def test_an_unprovable_repetition_leaves_its_vectors_uncertain_not_guessed():
    # sqrt(2) I: the operand is not exact (sqrt(2) is a ball), so the repetition is not proven; any
    # orthonormal basis of the plane would be an answer, so no element of the vectors is claimed.
    x = np.array([2.0, 5.0], F32)
    got = evaluate(lambda x: jnp.linalg.eigh(jnp.diag(jnp.sqrt(jnp.stack([x[0], x[0], x[1]])))), x)
    root2, root5 = rounded(mpmath.sqrt(2), F32), rounded(mpmath.sqrt(5), F32)
    assert_identical(got.values[0], np.array([root2, root2, root5], F32))
    assert np.asarray(got.certain[0]).all()
    certain = np.asarray(got.certain[1])
    assert not certain[:, :2].any() and certain[:, 2].all()  # the isolated sqrt(5)'s vector is e_3


def test_pinv_and_lstsq_of_an_exactly_rank_deficient_matrix_are_exact():
    # A = x y^T: pinv(A) = y x^T / (|x|^2 |y|^2), whatever basis the zero singular value's vectors take
    # (pinv multiplies them by an exact 0); lstsq's minimum-norm solution is pinv(A) b.
    x, y = np.array([1.0, 2.0, -1.0], F32), np.array([0.5, 1.0, 3.0], F32)
    a, b = np.outer(x, y).astype(F32), np.array([1.0, 0.0, -2.0], F32)
    assert np.array_equal(a.astype(F64), np.outer(x.astype(F64), y.astype(F64)))  # exactly rank 1
    got = evaluate(lambda m, r: (jnp.linalg.pinv(m), jnp.linalg.lstsq(m, r)[0]), a, b)
    with mpmath.workprec(REF_BITS):
        xs, ys, bs = ([exact(v) for v in arr] for arr in (x, y, b))
        scale = sum(v * v for v in xs) * sum(v * v for v in ys)
        exp_pinv = np.array([[rounded(ys[i] * xs[j] / scale, F32) for j in range(3)] for i in range(3)], F32)
        xb = sum(u * v for u, v in zip(xs, bs))
        exp_x = np.array([rounded(ys[i] * xb / scale, F32) for i in range(3)], F32)
    assert all_certain(got)
    assert_identical(got.values[0], exp_pinv)
    assert_identical(got.values[1], exp_x)


def projected_gram_schmidt(projector: mpmath.matrix, program_cols: list[np.ndarray]) -> list:
    """The reference for a basis the oracle picks nearest the program's: Gram-Schmidt on the exact
    projections of the program's vectors (at REF_BITS, the projector computed by the caller)."""
    basis: list = []
    for col in program_cols:
        v = projector * mpmath.matrix([exact(x) for x in col])
        for q in basis:
            v = v - (q.T * v)[0] * q
        basis.append(v / mpmath.norm(v))
    return basis


def test_full_matrices_completion_is_the_null_space_basis_nearest_the_programs():
    a = as_dtype(GENERAL["tall"], F32)  # 4 x 2: U's last two columns complete a basis, any way
    got = evaluate(lambda m: jnp.linalg.svd(m, full_matrices=True)[0], a)
    program = np.asarray(jnp.linalg.svd(a, full_matrices=True)[0])
    thin = evaluate(lambda m: jnp.linalg.svd(m, full_matrices=False)[0], a)
    assert_identical(got.values[:, :2], thin.values)
    with mpmath.workprec(REF_BITS):
        ma = mp_matrix(a)
        null_projector = mpmath.eye(4) - ma * mpmath.inverse(ma.T * ma) * ma.T  # onto null(A^T)
        basis = projected_gram_schmidt(null_projector, [program[:, 2], program[:, 3]])
        expected = np.array([[rounded(q[r], F32) for q in basis] for r in range(4)], F32)
    assert np.asarray(got.certain).all()
    assert_identical(got.values[:, 2:], expected)


def test_a_repeated_singular_value_gets_the_basis_nearest_the_programs():
    # A signed permutation of diag(2, 2, 1): sigma = 2 twice. The oracle proves sigma^2 = 4 an
    # eigenvalue of A^T A of multiplicity 2 and takes V's rows nearest the program's, U = A V / 2;
    # pinv is exact (the inverse: A is orthogonal times diag(2, 2, 1)).
    a = np.array([[0.0, 2.0, 0.0], [-2.0, 0.0, 0.0], [0.0, 0.0, 1.0]], F32)
    got = evaluate(lambda m: (*jnp.linalg.svd(m), jnp.linalg.pinv(m)), a)
    _, _, pvt = (np.asarray(x) for x in jnp.linalg.svd(a))
    with mpmath.workprec(REF_BITS):
        ma = mp_matrix(a)
        eigenspace = mpmath.matrix([[1, 0, 0], [0, 1, 0], [0, 0, 0]])  # of A^T A = diag(4, 4, 1)
        vs = projected_gram_schmidt(eigenspace, [pvt[0], pvt[1]])
        exp_vt = np.array([[rounded(v[c], F32) for c in range(3)] for v in vs], F32)
        exp_u = np.array([[rounded((ma * v)[r] / 2, F32) for v in vs] for r in range(3)], F32)
    assert all_certain(got)
    assert_identical(got.values[1], np.array([2.0, 2.0, 1.0], F32))
    assert_identical(got.values[2][:2], exp_vt)
    assert_identical(got.values[0][:, :2], exp_u)
    assert_identical(got.values[3], np.array([[0.0, -0.5, 0.0], [0.5, 0.0, 0.0], [0.0, 0.0, 1.0]], F32))


def test_a_zero_singular_value_is_exact_and_the_rank_decided():
    a = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]], F32)  # rank 2 exactly
    got = evaluate(lambda m: (jnp.linalg.svd(m, compute_uv=False), jnp.linalg.matrix_rank(m),
                              *jnp.linalg.svd(m)), a)
    s = singular(a)
    assert all_certain(got)
    assert_identical(got.values[0], np.array([rounded(s[0], F32), rounded(s[1], F32), 0.0], F32))
    assert int(got.values[1]) == 2
    # The zero singular value's vectors: null(A^T) is spanned by (2, -1, 0), null(A) by (1, 1, -1),
    # each with the program's sign.
    pu, _, pvt = (np.asarray(x) for x in jnp.linalg.svd(a))
    with mpmath.workprec(REF_BITS):
        u = signed_like([v / mpmath.sqrt(5) for v in (2, -1, 0)], pu[:, 2])
        v = signed_like([x / mpmath.sqrt(3) for x in (1, 1, -1)], pvt[2])
        exp_u, exp_v = (np.array([rounded(x, F32) for x in w], F32) for w in (u, v))
    assert_identical(got.values[2][:, 2], exp_u)
    assert_identical(got.values[4][2], exp_v)


def test_batched_and_subset_match_one_matrix_at_a_time():
    a = as_dtype(SYMMETRIC["indefinite"], F32)
    batch = np.stack([a, a * F32(0.5), a.T])
    got = evaluate(jax.vmap(jnp.linalg.eigvalsh), batch)
    for i in range(3):
        single = evaluate(jnp.linalg.eigvalsh, batch[i])
        assert_identical(got.values[i], single.values)
    sub = evaluate(lambda m: lax.linalg.eigh(m, subset_by_index=(1, 3))[1], a)
    assert_identical(sub.values, evaluate(jnp.linalg.eigvalsh, a).values[1:3])


def test_unsorted_eigenvalues_are_refused_with_the_reason():
    a = as_dtype(SYMMETRIC["ordinary"], F32)
    with pytest.raises(UnsupportedPrimitive, match="sort_eigenvalues=False"):
        evaluate(lambda m: lax.linalg.eigh(m, sort_eigenvalues=False)[1], a)


def _charpoly_min(a, b, d):
    """The smaller eigenvalue of [[a, b], [b, d]] from the characteristic polynomial: cancels."""
    return ((a + d) - jnp.sqrt((a - d) ** 2 + 4 * b * b)) / 2


def _eigvalsh_min(a, b, d):
    return jnp.linalg.eigvalsh(jnp.stack([jnp.stack([a, b]), jnp.stack([b, d])]))[0]


def test_check_of_a_function_using_eigh_runs_and_finds_the_cancellation():
    opts = {"shapes": [(), (), ()], "dtype": "float32", "domain": (-1e3, 1e3), "seed": 0,
            "judge": "stability", "max_examples": 100}
    naive = jst.check(_charpoly_min, **opts)
    library = jst.check(_eigvalsh_min, **opts)
    # The closed form loses its bits to the subtraction beyond what the problem's conditioning explains
    # (measured 28 bits beyond); LAPACK's syevd, judged against the exact eigenvalue, stays within the
    # 8-bit tolerance of it (measured 6.5).
    assert naive.outcome == "failed" and naive.original.beyond_bits > 20
    assert library.outcome == "passed", library.message
    assert library.original.beyond_bits < naive.original.beyond_bits - 10


# ------------------------------------------------------------------------------------------------ QR
def qr_reference(a: np.ndarray, program_q: np.ndarray, program_r: np.ndarray) -> tuple[np.ndarray, ...]:
    """Reduced QR of ``a`` at REF_BITS (mpmath's Householder ``qr`` on the leading columns, ``R = Q^T A``),
    each pair (column of Q, row of R) signed to agree with the program's pair."""
    m, n = a.shape
    k = min(m, n)
    with mpmath.workprec(REF_BITS):
        q, _ = mpmath.qr(mp_matrix(a[:, :k]), mode="skinny")
        ma = mp_matrix(a)
        exp_q, exp_r = np.empty((m, k), a.dtype), np.zeros((k, n), a.dtype)
        for j in range(k):
            qj = [q[i, j] for i in range(m)]
            rj = [sum(qj[i] * ma[i, c] for i in range(m)) for c in range(j, n)]
            ref = np.concatenate([program_q[:, j], program_r[j, j:]]).tolist()
            sign = 1 if sum(x * exact(y) for x, y in zip(qj + rj, ref)) > 0 else -1
            exp_q[:, j] = [rounded(sign * x, a.dtype) for x in qj]
            exp_r[j, j:] = [rounded(sign * x, a.dtype) for x in rj]
    return exp_q, exp_r


@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("name", ["square", "tall", "wide", "graded", "nearly-rank-1"])
def test_qr_factors_signed_like_the_program_and_reconstruction_exact(name, dtype):
    a = as_dtype(GENERAL[name], dtype)
    with jax.enable_x64(dtype == F64):
        got = evaluate(lambda m: (*jnp.linalg.qr(m), jnp.matmul(*jnp.linalg.qr(m),
                                                              precision=lax.Precision.HIGHEST)), a)
        pq, pr = (np.asarray(x) for x in jnp.linalg.qr(a))
    exp_q, exp_r = qr_reference(a, pq, pr)
    assert all_certain(got)
    assert_identical(got.values[0], exp_q)
    assert_identical(got.values[1], exp_r)
    assert_identical(got.values[2], a)  # Q R is the matrix itself, whatever the signs


def test_qr_complete_mode_leaves_the_completion_uncertain_and_r_exact():
    a = as_dtype(GENERAL["tall"], F32)
    got = evaluate(lambda m: jnp.linalg.qr(m, mode="complete"), a)
    pq, pr = (np.asarray(x) for x in jnp.linalg.qr(a))
    exp_q, exp_r = qr_reference(a, pq, pr)
    q_certain = np.asarray(got.certain[0])
    assert q_certain[:, :2].all() and not q_certain[:, 2:].any()
    assert_identical(got.values[0][:, :2], exp_q)
    assert np.asarray(got.certain[1]).all()
    assert_identical(got.values[1], np.concatenate([exp_r, np.zeros((2, 2), F32)]))


def test_qr_of_dependent_columns_is_exact_up_to_them_and_uncertain_after():
    a = np.array([[1.0, 2.0, 1.0], [2.0, 4.0, 0.0], [3.0, 6.0, 1.0]], F32)  # column 2 = 2 x column 1
    got = evaluate(jnp.linalg.qr, a)
    pq = np.asarray(jnp.linalg.qr(a)[0])
    q_certain, r_certain = (np.asarray(c) for c in got.certain)
    assert q_certain[:, 0].all() and not q_certain[:, 1:].any()
    assert r_certain[0].all() and not r_certain[1, 1:].any()
    with mpmath.workprec(REF_BITS):
        norm = mpmath.sqrt(14)
        sign = 1 if pq[0, 0] > 0 else -1  # the program's first column is +-(1, 2, 3)/sqrt(14)
        q0 = np.array([rounded(sign * v / norm, F32) for v in (1, 2, 3)], F32)
        r0 = np.array([rounded(sign * v / norm, F32) for v in (14, 28, 4)], F32)
    assert_identical(got.values[0][:, 0], q0)
    assert_identical(got.values[1][0], r0)


def test_qr_with_pivoting_is_refused_with_the_reason():
    a = as_dtype(GENERAL["square"], F32)
    with pytest.raises(UnsupportedPrimitive, match="pivoting=True"):
        evaluate(lambda m: jax.scipy.linalg.qr(m, pivoting=True)[0], a)


@pytest.mark.parametrize("seed", [0, pytest.param(1, marks=pytest.mark.slow)])
def test_random_audit_no_certain_value_is_wrong(seed):
    """Random shapes (1-5), rows scaled over up to 40 decades, both dtypes: every value the oracle calls
    certain (eigenvalues, singular values, eigenvectors, Q and R) equals the mpmath reference rounded,
    and none is left uncertain (no input here is degenerate)."""
    rng = np.random.default_rng(seed)
    for trial in range(12):
        dtype = (F32, F64)[trial % 2]
        n, m = (int(k) for k in rng.integers(1, 6, size=2))
        rows = 10.0 ** rng.uniform(-20, 20, size=(n, 1)) if trial % 3 == 0 else 1.0
        g = rng.standard_normal((n, n)) * rows
        s = (g + g.T).astype(dtype)
        a = (rng.standard_normal((m, n)) * 10.0 ** rng.uniform(-5, 5)).astype(dtype)
        with jax.enable_x64(dtype == F64):
            got = evaluate(lambda s, a: (jnp.linalg.eigvalsh(s), jnp.linalg.eigh(s)[1],
                                         jnp.linalg.svd(a, compute_uv=False), *jnp.linalg.qr(a)), s, a)
            pv = np.asarray(jnp.linalg.eigh(s)[1])
            pq, pr = (np.asarray(x) for x in jnp.linalg.qr(a))
        values, cols = sym_eig(s)
        exp_v = np.empty(s.shape, dtype)
        for j, col in enumerate(cols):
            exp_v[:, j] = [rounded(v, dtype) for v in signed_like(col, pv[:, j])]
        exp_q, exp_r = qr_reference(a, pq, pr)
        expected = (np.array([rounded(v, dtype) for v in values], dtype), exp_v,
                    np.array([rounded(v, dtype) for v in singular(a)], dtype), exp_q, exp_r)
        assert all_certain(got), trial
        for value, ref in zip(got.values, expected):
            assert_identical(value, ref)


@pytest.mark.parametrize("lower", [True, False])
def test_eigh_reads_only_the_triangle_it_is_told_to(lower):
    # symmetrize_input=False hands eigh a non-symmetric matrix: LAPACK's syevd reads one triangle only.
    a = np.array([[4.0, 100.0, -7.0], [1.0, 5.0, 50.0], [2.0, 1.0, 6.0]], F32)
    got = evaluate(lambda m: lax.linalg.eigh(m, lower=lower, symmetrize_input=False)[1], a)
    tri = np.tril(a) if lower else np.triu(a)
    sym = tri + tri.T - np.diag(np.diag(a))
    values, _ = sym_eig(sym)
    assert np.asarray(got.certain).all()
    assert_identical(got.values, np.array([rounded(v, F32) for v in values], F32))
