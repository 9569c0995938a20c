"""``top_k`` in the exact oracle: XLA's order (descending, NaN first, ties by index), decided on balls;
and ``scatter-sub`` (``x.at[i].subtract``), added with it."""

from __future__ import annotations

import numpy as np
import pytest
from jax import lax

from pytest_jaxstab import oracles

F32 = np.float32


@pytest.mark.parametrize("k", [1, 3, 6])
def test_top_k_matches_a_stable_descending_argsort(k):
    x = np.random.default_rng(k).integers(-4, 4, (3, 6)).astype(F32)  # many ties
    got = oracles.evaluate(lambda v: lax.top_k(v, k), x)
    order = np.argsort(-x, axis=-1, kind="stable")[:, :k]  # numpy: the independent reference
    np.testing.assert_array_equal(np.asarray(got.values[1]), order)
    np.testing.assert_array_equal(np.asarray(got.values[0]), np.take_along_axis(x, order, -1))


def test_top_k_ranks_nan_first_and_infinities_in_order():
    x = np.asarray([1.0, np.nan, 3.0, -np.inf, np.inf], F32)
    values, indices = oracles.evaluate(lambda v: lax.top_k(v, 4), x).values
    np.testing.assert_array_equal(np.asarray(indices), [1, 4, 2, 0])
    np.testing.assert_array_equal(np.asarray(values), np.asarray([np.nan, np.inf, 3.0, 1.0], F32))


def test_top_k_orders_by_the_exact_values():
    # 1 + 2^-24 rounds to 1 in float32, so the float program sees a tie between x[0] + 2^-24 and x[1]
    # and keeps index order; the exact values differ and the larger one (index 0) comes first.
    x = np.asarray([1.0, 1.0], F32)
    got = oracles.evaluate(lambda v: lax.top_k(v + np.asarray([2.0**-24, 0.0], F32), 1)[1], x)
    np.testing.assert_array_equal(np.asarray(got.values), [0])
    got = oracles.evaluate(lambda v: lax.top_k(v + np.asarray([0.0, 2.0**-24], F32), 1)[1], x)
    np.testing.assert_array_equal(np.asarray(got.values), [1])  # float32 would say 0


def test_scatter_subtract_is_exact():
    # x.at[i].subtract(u) with a repeated index: both updates land, exactly (float32 would round twice).
    import jax.numpy as jnp

    x = np.asarray([1.0, 2.0, 3.0], F32)
    f = lambda v: v.at[jnp.asarray([0, 0, 2])].subtract(jnp.asarray([2.0**-25, 2.0**-25, 0.5], F32))
    got = oracles.evaluate(f, x)
    np.testing.assert_array_equal(np.asarray(got.values), np.asarray([1 - 2.0**-24, 2.0, 2.5], F32))
