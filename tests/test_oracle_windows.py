"""Windowed reductions (average and max pooling) and jax.random.gamma in the exact oracle.

References: JAX's own float64 reduce_window on float32 inputs in [1, 2) (a sum of at most 9 such values is
exact in float64, so rounding it once to float32 gives the correctly rounded exact sum: independent of the
oracle), and JAX's results on small integers (exact in any order) for the window geometry.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from pytest_jaxstab import oracles

F32 = np.float32
GEOMETRIES = [  # (window, strides, padding, base_dilation, window_dilation)
    ((1, 2, 2, 1), (1, 2, 2, 1), "SAME", None, None),
    ((1, 3, 3, 1), (1, 1, 1, 1), ((0, 0), (1, 1), (1, 1), (0, 0)), (1, 2, 1, 1), (1, 1, 2, 1)),
    ((1, 3, 2, 1), (1, 2, 1, 2), ((0, 0), (-1, 2), (1, 0), (0, 1)), None, None),
    ((2, 1, 3, 1), (1, 1, 2, 1), "VALID", None, (1, 1, 1, 1)),
]


def _pool(op, init, geometry):
    window, strides, padding, base, wdil = geometry
    return lambda x: lax.reduce_window(x, init, op, window, strides, padding, base_dilation=base,
                                       window_dilation=wdil)


@pytest.mark.parametrize("geometry", GEOMETRIES)
@pytest.mark.parametrize(("op", "init"), [(lax.add, 0.0), (lax.max, -np.inf), (lax.min, np.inf)])
def test_window_geometry_on_integers(op, init, geometry):
    x = np.random.default_rng(0).integers(-50, 50, (2, 5, 6, 3)).astype(F32)
    f = _pool(op, F32(init), geometry)
    got = oracles.evaluate(f, x)
    np.testing.assert_array_equal(np.asarray(got.values), np.asarray(f(x)))
    assert np.asarray(got.certain).all()


@pytest.mark.parametrize("geometry", GEOMETRIES[:2])
def test_window_sum_is_correctly_rounded(geometry):
    x = np.random.default_rng(1).uniform(1, 2, (1, 5, 6, 2)).astype(F32)
    got = oracles.evaluate(_pool(lax.add, F32(0.0), geometry), x)
    with jax.enable_x64(True):
        exact = np.asarray(_pool(lax.add, 0.0, geometry)(x.astype(np.float64)))
    np.testing.assert_array_equal(np.asarray(got.values), exact.astype(F32))


def test_integer_windows_use_integer_arithmetic():
    x = np.arange(30, dtype=np.int32).reshape(5, 6)
    f = lambda v: lax.reduce_window(v, np.int32(0), lax.add, (2, 2), (1, 2), "VALID")
    np.testing.assert_array_equal(np.asarray(oracles.evaluate(f, x).values), np.asarray(f(x)))


def test_gamma_samples_are_evaluated_exactly():
    # jax.random.gamma: JAX's rejection sampler run exactly. The float sampler's value is within a few
    # ulps of the exact one for these shapes (no acceptance test sits near its threshold here).
    alphas = np.asarray([0.5, 2.0, 30.0], F32)
    f = lambda a: jax.random.gamma(jax.random.key(0), a)
    got = oracles.evaluate(f, alphas)
    assert np.asarray(got.certain).all()
    floats = np.asarray(f(alphas))
    assert np.all(np.abs(np.asarray(got.values) - floats) <= 8 * np.spacing(floats))
    assert np.all(np.asarray(got.values) > 0)


POOLS = [("SAME", (2, 2)), ("VALID", (1, 1)), (((1, 1), (0, 1)), (2, 1))]


@pytest.mark.parametrize(("padding", "strides"), POOLS)
@pytest.mark.parametrize(("op", "init"), [(lax.max, -np.inf), (lax.min, np.inf)])
def test_pool_derivatives_keep_xla_tie_rule(op, init, padding, strides):
    # Small integers: many exact ties, which XLA breaks by keeping the first element of the window.
    rng = np.random.default_rng(3)
    x, t = (rng.integers(-9, 9, (5, 6)).astype(F32) for _ in range(2))
    pool = lambda v: lax.reduce_window(v, F32(init), op, (2, 3), strides, padding)
    grad = jax.grad(lambda v: jnp.sum(pool(v) ** 2))
    tangent = lambda v, dv: jax.jvp(pool, (v,), (dv,))[1]
    np.testing.assert_array_equal(np.asarray(oracles.evaluate(grad, x).values), np.asarray(grad(x)))
    got = oracles.evaluate(tangent, x, t).values
    np.testing.assert_array_equal(np.asarray(got), np.asarray(tangent(x, t)))


def test_max_pool_gradient_marks_each_windows_argmax():
    # Distinct values, non-overlapping 2x2 windows: d sum(maxpool(x)) / dx is 1 at each window's argmax
    # (numpy's argmax, the independent reference) and 0 elsewhere.
    x = np.random.default_rng(4).permutation(16).astype(F32).reshape(4, 4)
    grad = jax.grad(lambda v: jnp.sum(lax.reduce_window(v, -jnp.inf, lax.max, (2, 2), (2, 2), "VALID")))
    want = np.zeros((4, 4), F32)
    for i in range(2):
        for j in range(2):
            block = x[2 * i:2 * i + 2, 2 * j:2 * j + 2]
            a, b = np.unravel_index(np.argmax(block), (2, 2))
            want[2 * i + a, 2 * j + b] = 1
    np.testing.assert_array_equal(np.asarray(oracles.evaluate(grad, x).values), want)
