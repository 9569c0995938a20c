"""Lowerings (``rewrites/engine/_lowering.py``): a rule's replacement differentiates as well as what it
replaced on every JAX generation (``expm1`` on JAX 0.10 is differentiated as ``expm1(x) + 1``)."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import pytest_jaxstab as jst

# exp(x) at the points where expm1(x) + 1 loses: all bits below -16 in float32, 14 at -12, and the
# points next to 0 where it rounds to 1 + ulp. XLA's float32 exp is within 1 ulp on CPU; the tangent
# is that value times a cotangent of exactly 1, so 2 ulps allows one more rounding and no more.
POINTS = [-20.0, -17.5, -12.0, -7.8, -1e-3, 3e-7, 0.5]
ULPS = 2


def _ulps(got: float, exact: float) -> float:
    return abs(got - exact) / float(np.spacing(np.float32(abs(exact))))


@pytest.mark.parametrize("sign", [1.0, -1.0], ids=["exp(x)-1", "1-exp(x)"])
def test_expm1_rule_result_differentiates_as_exp(sign):
    f = jst.stabilize(lambda x: jnp.sum(sign * (jnp.exp(x) - 1)))
    x = jnp.asarray(POINTS, jnp.float32)
    grads = np.asarray(jax.jit(jax.grad(f))(x))
    for v, g in zip(POINTS, grads):
        exact = sign * math.exp(float(np.float32(v)))  # float64: 2^-52 relative, far below an ulp
        assert _ulps(float(g), exact) <= ULPS, (v, float(g), exact)


def test_lowered_program_still_reports_and_vectorises_the_rule():
    fn = lambda x: jnp.exp(x) - 1
    assert [a.rule for a in jst.explain(fn, jnp.ones(3))] == ["expm1"]
    x = jnp.asarray([[1e-7, -20.0], [2.0, -3.0]], jnp.float32)
    per_row = jax.vmap(jax.grad(lambda r: jnp.sum(jst.stabilize(fn)(r))))(x)
    np.testing.assert_allclose(np.asarray(per_row), np.exp(np.asarray(x, np.float64)), rtol=2 ** -22)
