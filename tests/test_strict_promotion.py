"""The test configuration runs every test under JAX's strict dtype promotion (tests/conftest.py)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest


def test_implicit_promotion_is_an_error_in_tests():
    assert jax.config.jax_numpy_dtype_promotion == "strict"  # pyright: ignore[reportAttributeAccessIssue]
    with pytest.raises(jax.dtypes.TypePromotionError, match="strict"):
        _ = jnp.ones(2, jnp.float32) + jnp.ones(2, jnp.float16)
    # weakly typed Python scalars still combine with any float dtype
    assert (jnp.ones(2, jnp.bfloat16) * 2.0).dtype == jnp.bfloat16
