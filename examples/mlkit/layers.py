"""Layers: scaled dot-product attention and an RMS norm."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def attention(q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array:
    """Softmax attention of queries ``q`` over keys ``k`` and values ``v`` (one head, no mask)."""
    scores = q @ k.T / jnp.sqrt(q.shape[-1])
    weights = jnp.exp(scores) / jnp.sum(jnp.exp(scores), axis=-1, keepdims=True)
    return weights @ v


def rms_norm(x: jax.Array, eps: float = 1e-6) -> jax.Array:
    """``x`` divided by its root mean square (plus ``eps``)."""
    return x / (jnp.sqrt(jnp.mean(x**2)) + eps)
