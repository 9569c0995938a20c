"""Collectives over a vmapped axis: ``jax.vmap(f, axis_name=...)`` turns ``lax.psum``/``pmax``/``pmin``/
``pmean`` over that axis into the primitive over a positional axis; the oracle reduces over it exactly
(it used to take every ``psum`` as the one-participant identity, and a vmapped ``pmean`` crashed)."""

from __future__ import annotations

from fractions import Fraction

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import pytest_jaxstab as jst

# Values 1e8 + k/8 apart by tiny steps: float64 sums of them round, exact Fractions do not.
X = (np.float32(1e8) + np.arange(12, dtype=np.float32).reshape(4, 3) * np.float32(8.0)).astype(np.float32)


def _exact(rows: np.ndarray, op: str) -> list[Fraction]:
    cols = [[Fraction(float(v)) for v in rows[:, j]] for j in range(rows.shape[1])]
    pick = {"sum": sum, "max": max, "min": min, "mean": lambda c: sum(c) / len(c)}[op]
    return [pick(c) for c in cols]


@pytest.mark.parametrize(("name", "op"), [(lax.psum, "sum"), (lax.pmax, "max"), (lax.pmin, "min"),
                                          (lax.pmean, "mean")], ids=["psum", "pmax", "pmin", "pmean"])
def test_a_vmapped_collective_reduces_over_its_axis_exactly(name, op):
    fn = jax.vmap(lambda v: name(v, "batch"), axis_name="batch")
    result = jst.oracles.evaluate(fn, X, dtype="float64")
    want = np.broadcast_to(np.array([float(v) for v in _exact(X, op)]), X.shape)
    assert np.asarray(result.certain).all()
    np.testing.assert_array_equal(np.asarray(result.values), want)


def test_a_tuple_psum_reduces_each_operand():
    fn = jax.vmap(lambda v: lax.psum((v, v * v), "batch"), axis_name="batch")
    result = jst.oracles.evaluate(fn, X, dtype="float64")
    squares = np.array([float(sum(Fraction(float(v)) ** 2 for v in X[:, j])) for j in range(3)])
    np.testing.assert_array_equal(np.asarray(result.values[1]), np.broadcast_to(squares, X.shape))


def test_check_judges_a_cross_device_one_pass_variance():
    # flax BatchNorm(axis_name=...) statistics under vmap: the one-pass variance of clustered data fails.
    def per_device(xd):
        mean = lax.pmean(jnp.mean(xd, axis=0), "batch")
        mean2 = lax.pmean(jnp.mean(jnp.square(xd), axis=0), "batch")
        return jnp.maximum(0.0, mean2 - jnp.square(mean))

    fn = jax.vmap(per_device, axis_name="batch")
    result = jst.check(fn, shapes=[(4, 8, 3)], dtype="float32", domain=(-1e3, 1e3), seed=0)
    assert result.original.verdict == "fail", result.message
