"""Summary statistics."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def variance(x: jax.Array) -> jax.Array:
    """Population variance, the one-pass textbook formula E[x²] - E[x]²."""
    return jnp.mean(x**2) - jnp.mean(x) ** 2


def l2_norm(x: jax.Array) -> jax.Array:
    """Euclidean norm."""
    return jnp.sqrt(jnp.sum(x * x))
