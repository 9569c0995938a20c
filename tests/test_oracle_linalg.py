"""The oracle on linear algebra and on the library functions people stabilize, against mpmath at 1000 bits.

References use mpmath's own algorithms (``lu_solve``, ``inverse``, ``cholesky``, ``det``) on the exact
input entries at 1000 bits, far beyond what the condition numbers here can lose, then are rounded to
the dtype independently of the oracle (``rounded`` from test_oracle).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import jax.scipy.special as jss
import mpmath
import numpy as np
import pytest
from test_oracle import REF_BITS, assert_identical, exact, reference, rounded

from pytest_jaxstab import _compat
from pytest_jaxstab.oracles import evaluate

F32 = np.float32
WELL = np.array([[4.0, 1.0, 2.0], [1.0, 5.0, 1.0], [2.0, 1.0, 6.0]], F32)
RHS = np.array([1.0, -2.0, 3.0], F32)


def mp_matrix(a: np.ndarray) -> mpmath.matrix:
    return mpmath.matrix([[exact(v) for v in row] for row in a.tolist()])


def round_matrix(m: mpmath.matrix, shape, dtype) -> np.ndarray:
    return np.array([rounded(v, dtype) for row in m.tolist() for v in row], dtype).reshape(shape)


def primitives(fn, *args) -> set[str]:
    closed, _, _ = _compat.trace(fn, *args)
    return {_compat.primitive_name(e) for _, e in _compat.walk(closed)}


def hilbert(n: int) -> np.ndarray:
    return np.array([[1.0 / (i + j + 1) for j in range(n)] for i in range(n)], np.float64)


@pytest.mark.parametrize(("a", "b", "dtype"), [(WELL, RHS, F32), (hilbert(6), np.ones(6), np.float64)],
                         ids=["well-conditioned-f32", "hilbert6-f64"])
def test_solve_and_inv(a, b, dtype):
    with jax.enable_x64(dtype == np.float64):
        a, b = a.astype(dtype), b.astype(dtype)
        solve, inv = evaluate(lambda a, b: (jnp.linalg.solve(a, b), jnp.linalg.inv(a)), a, b).values
        floats = np.asarray(jnp.linalg.solve(a, b))
    with mpmath.workprec(REF_BITS):
        ma = mp_matrix(a)
        x = mpmath.lu_solve(ma, mp_matrix(b[:, None]))
        expected_inv = round_matrix(mpmath.inverse(ma), a.shape, dtype)
    assert_identical(solve, round_matrix(x, b.shape, dtype))
    assert_identical(inv, expected_inv)
    if dtype == np.float64:  # cond(H6) ~ 1.5e7: float64 itself is off, the oracle is not
        assert not np.array_equal(floats, solve)


def test_linalg_primitives_reached():
    reached = primitives(lambda a, b: (jnp.linalg.solve(a, b), jnp.linalg.inv(a)), WELL, RHS)
    assert {"lu", "triangular_solve", "custom_linear_solve", "gather", "sort"} <= reached
    assert "lu_pivots_to_permutation" in primitives(lambda a: jax.lax.linalg.lu(a)[2], WELL) | \
        primitives(lambda a: jax.lax.linalg.lu_pivots_to_permutation(jax.lax.linalg.lu(a)[1], 3), WELL)


def test_lu_outputs_and_pivots_to_permutation():
    a = np.array([[1.0, 2.0, 0.5], [4.0, -1.0, 2.0], [-6.0, 0.0, 1.0]], F32)

    def fn(a):
        lu, piv, perm = jax.lax.linalg.lu(a)
        return lu, piv, perm, jax.lax.linalg.lu_pivots_to_permutation(piv, 3)

    lu, piv, perm, perm2 = evaluate(fn, a).values
    _, jpiv, jperm = jax.lax.linalg.lu(a)
    np.testing.assert_array_equal(piv, jpiv)  # the pivots are chosen the same way here
    np.testing.assert_array_equal(perm, jperm)
    np.testing.assert_array_equal(perm2, jperm)
    with mpmath.workprec(REF_BITS):  # P a = L U, with this permutation, exactly
        pa = mp_matrix(a[np.asarray(perm)])
        n = 3
        low = mpmath.matrix(n, n)
        up = mpmath.matrix(n, n)
        for j in range(n):
            for i in range(n):
                if i > j:
                    s = pa[i, j] - mpmath.fsum(low[i, k] * up[k, j] for k in range(j))
                    low[i, j] = s / up[j, j]
                else:
                    up[i, j] = pa[i, j] - mpmath.fsum(low[i, k] * up[k, j] for k in range(i))
            low[j, j] = 1
        packed = [[low[i, j] if i > j else up[i, j] for j in range(n)] for i in range(n)]
    expected = np.array([[rounded(v, F32) for v in row] for row in packed], F32)
    assert_identical(lu, expected)


def test_batched_solve_and_singular_system():
    a = np.stack([WELL, WELL.T * 2, np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [0.0, 1.0, 1.0]], F32)])
    b = np.stack([RHS, RHS, RHS])[..., None]
    got = evaluate(jnp.linalg.solve, a, b)
    with mpmath.workprec(REF_BITS):
        for k in range(2):
            x = mpmath.lu_solve(mp_matrix(a[k]), mp_matrix(b[k]))
            assert_identical(got.values[k], round_matrix(x, (3, 1), F32))
    assert np.all(np.isnan(got.values[2]))  # singular: no real solution
    assert np.all(got.certain)


def test_cholesky():
    a = WELL @ WELL.T
    got = evaluate(jnp.linalg.cholesky, a)
    assert "cholesky" in primitives(jnp.linalg.cholesky, a)
    with mpmath.workprec(REF_BITS):
        low = mpmath.cholesky(mp_matrix(a))
    assert_identical(got.values, round_matrix(low, a.shape, F32))


def test_det_via_lu():
    a = np.array([[2.0, 1.0, 0.0, 1e-3], [1.0, 3.0, 1.0, 0.0], [0.0, 1.0, 4.0, 1.0], [5.0, 0.0, 1.0, 5.0]],
                 F32)
    got = evaluate(jnp.linalg.det, a)
    with mpmath.workprec(REF_BITS):
        assert_identical(got.values, rounded(mpmath.det(mp_matrix(a)), F32))


# ------------------------------------------------------------------ library functions, both JAX versions
X = np.array([100.0, -3.0, 88.5, 1e-4, -1e4], F32)


def mp_logsumexp(vs):
    return mpmath.log(mpmath.fsum(mpmath.exp(v) for v in vs))


@pytest.mark.parametrize(("fn", "ref"), [
    (jax.nn.logsumexp, mp_logsumexp),
    (jss.logsumexp, mp_logsumexp),
    (jax.nn.softmax, lambda vs: [mpmath.exp(v) / mpmath.fsum(mpmath.exp(w) for w in vs) for v in vs]),
    (jax.nn.log_softmax, lambda vs: [v - mp_logsumexp(vs) for v in vs]),
    (jnp.var, lambda vs: mpmath.fsum((v - mpmath.fsum(vs) / len(vs)) ** 2 for v in vs) / len(vs)),
    (jnp.linalg.norm, lambda vs: mpmath.sqrt(mpmath.fsum(v * v for v in vs))),
], ids=["nn.logsumexp", "scipy.logsumexp", "softmax", "log_softmax", "var", "norm"])
def test_library_reductions(fn, ref):
    got = evaluate(fn, X)
    with mpmath.workprec(REF_BITS):
        out = ref([exact(v) for v in X])
        many = isinstance(out, list)
        expected = np.array([rounded(v, F32) for v in out], F32) if many else rounded(out, F32)
    assert_identical(got.values, expected)
    assert np.all(got.certain)


@pytest.mark.parametrize(("fn", "ref"), [
    (jax.nn.softplus, lambda v: mpmath.log1p(mpmath.exp(v))),
    (jax.nn.sigmoid, lambda v: 1 / (1 + mpmath.exp(-v))),
    (jax.nn.relu, lambda v: max(v, 0)),
], ids=["softplus", "sigmoid", "relu"])
def test_library_elementwise(fn, ref):
    assert_identical(evaluate(fn, X).values, reference(ref, X))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_symmetric_product_and_cholesky_update(dtype):
    from jax import lax

    a = np.array([[1.0, 2.0], [3.0, -4.0], [0.1, 6.0]], dtype)
    c = np.array([[2.0, 0.5, 0.0], [0.5, 1.0, -1.0], [0.0, -1.0, 3.0]], dtype)
    r = np.array([[2.0, 1.0, -0.5], [0.0, 3.0, 0.25], [0.0, 0.0, 0.1]], dtype)  # upper, positive diagonal
    w = np.array([1.0, -1.0, 1e-3], dtype)
    with jax.enable_x64(dtype == np.float64):
        got = evaluate(lambda a, c, r, w: (lax.linalg.symmetric_product(a, c, alpha=0.1, beta=-2.0),
                                           lax.linalg.cholesky_update(r, w)), a, c, r, w)
    with mpmath.workprec(REF_BITS):
        alpha, beta = exact(dtype(0.1)), exact(dtype(-2.0))  # the scalars as the program holds them
        ma, mc, mr, mw = mp_matrix(a), mp_matrix(c), mp_matrix(r), mp_matrix(w[:, None])
        prod = alpha * ma * ma.T + beta * mc
        chol = mpmath.cholesky(mr.T * mr + mw * mw.T).T  # the upper factor with a positive diagonal
    assert np.asarray(got.certain[0]).all() and np.asarray(got.certain[1]).all()
    assert_identical(got.values[0], round_matrix(prod, (3, 3), dtype))
    assert_identical(got.values[1], round_matrix(chol, (3, 3), dtype))
