"""Infinite and NaN inputs and results at domain edges: the oracle's documented limits, all certain.

Expected values follow the conventions in ``oracles/core/_arb.py`` (NaN outside the real domain, one-sided
limits at the edges, NaN where the limit depends on the side), written out by hand here.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from pytest_jaxstab import oracles

F32 = np.float32
INF, NAN = np.inf, np.nan

CASES = [
    # (name, function, inputs, expected)
    ("inf+1", lambda x: x + 1, [INF, -INF, NAN], [INF, -INF, NAN]),
    ("inf-inf", lambda x: x - x, [INF, 2.0], [NAN, 0.0]),
    ("inf*x", lambda x: x * 3, [INF, -INF], [INF, -INF]),
    ("0*inf", lambda x: x * jnp.inf, [0.0, -2.0], [NAN, -INF]),
    ("1/x", lambda x: 1 / x, [0.0, INF, -INF, 4.0], [NAN, 0.0, 0.0, 0.25]),
    ("inf/inf", lambda x: x / x, [INF, 0.0], [NAN, NAN]),
    ("exp", jnp.exp, [INF, -INF, 1e30, -1e30], [INF, 0.0, INF, 0.0]),
    ("log", jnp.log, [0.0, INF, -INF, -1.0], [-INF, INF, NAN, NAN]),
    ("log1p", jnp.log1p, [-1.0, -1.5, INF], [-INF, NAN, INF]),
    ("sqrt", jnp.sqrt, [INF, -INF, -1e-45, 0.0], [INF, NAN, NAN, 0.0]),
    ("rsqrt", lax.rsqrt, [0.0, INF, -1.0], [INF, 0.0, NAN]),
    ("sin", jnp.sin, [INF, -INF], [NAN, NAN]),
    ("atan", jnp.arctan, [INF, -INF], [np.float32(np.pi / 2), -np.float32(np.pi / 2)]),
    ("tanh", jnp.tanh, [INF, -INF, 1e30], [1.0, -1.0, 1.0]),
    ("atanh", jnp.arctanh, [1.0, -1.0, 2.0, INF], [INF, -INF, NAN, NAN]),
    ("erf_inv", lax.erf_inv, [1.0, -1.0, 1.5], [INF, -INF, NAN]),
    ("lgamma", lax.lgamma, [0.0, -3.0, INF, -INF], [INF, INF, INF, NAN]),
    ("digamma", lax.digamma, [0.0, -3.0, INF], [NAN, NAN, INF]),
    ("logistic", lambda x: lax.logistic(x), [INF, -INF, -1e30, 1e30], [1.0, 0.0, 0.0, 1.0]),
    ("exp2", jnp.exp2, [INF, -INF, 200.0, -200.0], [INF, 0.0, INF, 0.0]),
    ("cbrt", lax.cbrt, [-8.0, -INF, 0.0], [-2.0, -INF, 0.0]),
    ("x**-1", lambda x: lax.integer_pow(x, -1), [0.0, INF], [NAN, 0.0]),
    ("x**-2", lambda x: lax.integer_pow(x, -2), [0.0, -INF], [INF, 0.0]),
    ("rem", lambda x: lax.rem(x, F32(0.0)) + lax.rem(F32(5.0), x), [2.0, INF], [NAN, NAN]),
    ("max-nan", lambda x: jnp.maximum(x, 1.0), [NAN, INF, -INF], [NAN, INF, 1.0]),
    ("isfinite", lambda x: jnp.where(jnp.isfinite(x), 1.0, 0.0), [INF, NAN, 3.0], [0.0, 0.0, 1.0]),
    ("nan-compare", lambda x: jnp.where(x > 0, 1.0, 0.0) + jnp.where(x != x, 2.0, 0.0), [NAN, 1.0],
     [2.0, 1.0]),
    ("to-int", lambda x: x.astype(jnp.int32).astype(jnp.float32), [NAN, 1e10, -1e10, -2.5],
     [0.0, 2147483647.0, -2147483648.0, -2.0]),
]


@pytest.mark.parametrize(("name", "fn", "inputs", "expected"), CASES, ids=[c[0] for c in CASES])
def test_special_values(name, fn, inputs, expected):
    got = oracles.evaluate(fn, np.asarray(inputs, F32))
    np.testing.assert_array_equal(got.values, np.asarray(expected, F32))
    assert np.asarray(got.certain).all()


def test_pow_limits():
    x = np.asarray([0.0, 0.0, -2.0, 2.0, 0.5, -INF, INF, 1.0, -8.0], F32)
    y = np.asarray([-1.0, 0.0, 0.5, INF, INF, 3.0, -1.0, INF, 1e9], F32)
    got = oracles.evaluate(lax.pow, x, y)
    # 0**-1: sides differ (NaN); 0**0 = 1; (-2)**0.5 complex; 2**inf; 0.5**inf; (-inf)**3; inf**-1;
    # 1**inf = 1; (-8)**1e9 (an even integer) overflows.
    np.testing.assert_array_equal(got.values, np.asarray([NAN, 1, NAN, INF, 0, -INF, 0, 1, INF], F32))
    assert np.asarray(got.certain).all()
