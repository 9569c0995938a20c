"""``tridiagonal_solve`` in the exact oracle against mpmath's LU solve at 200 bits, rounded once."""

from __future__ import annotations

import mpmath as mp
import numpy as np
import pytest
from jax.lax import linalg

from pytest_jaxstab import oracles

F32 = np.float32


def _reference(dl, d, du, b):
    m = len(d)
    with mp.workprec(200):
        a = mp.matrix(m, m)
        for i in range(m):
            a[i, i] = mp.mpf(float(d[i]))
            if i:
                a[i, i - 1] = mp.mpf(float(dl[i]))
            if i < m - 1:
                a[i, i + 1] = mp.mpf(float(du[i]))
        cols = [mp.lu_solve(a, mp.matrix([mp.mpf(float(v)) for v in b[:, j]])) for j in range(b.shape[1])]
        exact = [[cols[j][i] for j in range(b.shape[1])] for i in range(m)]
    with mp.workprec(24):
        return np.asarray([[float(+v) for v in row] for row in exact], F32)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_tridiagonal_solve_is_correctly_rounded(seed):
    rng = np.random.default_rng(seed)
    m = 6
    dl, d, du = (rng.uniform(-1, 1, m).astype(F32) for _ in range(3))
    d = (d + F32(0.5)).astype(F32)  # not diagonally dominant: cancellation happens in the elimination
    dl[0] = du[-1] = 0
    b = rng.uniform(-1, 1, (m, 2)).astype(F32)
    got = oracles.evaluate(linalg.tridiagonal_solve, dl, d, du, b)
    assert np.asarray(got.certain).all()
    np.testing.assert_array_equal(np.asarray(got.values), _reference(dl, d, du, b))


def test_a_zero_pivot_is_uncertain_not_guessed():
    # d[0] = 0: the system is solvable (with a row exchange) but elimination without pivoting is not.
    dl = np.asarray([0.0, 1.0, 1.0], F32)
    d = np.asarray([0.0, 1.0, 2.0], F32)
    du = np.asarray([1.0, 1.0, 0.0], F32)
    b = np.ones((3, 1), F32)
    got = oracles.evaluate(linalg.tridiagonal_solve, dl, d, du, b, max_precision=128)
    assert not np.asarray(got.certain).any()
