"""Losses: classification cross-entropy and a Gaussian negative log-likelihood."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def cross_entropy_naive(logits: jax.Array, labels: jax.Array) -> jax.Array:
    """Mean cross-entropy of one-hot ``labels`` under ``softmax(logits)``, as first written."""
    probs = jnp.exp(logits) / jnp.sum(jnp.exp(logits), axis=-1, keepdims=True)
    return -jnp.mean(jnp.sum(labels * jnp.log(probs), axis=-1))


def cross_entropy(logits: jax.Array, labels: jax.Array) -> jax.Array:
    """Mean cross-entropy of one-hot ``labels`` under ``softmax(logits)``, via ``log_softmax``."""
    return -jnp.mean(jnp.sum(labels * jax.nn.log_softmax(logits, axis=-1), axis=-1))


def gaussian_nll(x: jax.Array, mu: jax.Array, log_sigma: jax.Array) -> jax.Array:
    """Negative log-likelihood of ``x`` under N(mu, exp(log_sigma)**2), summed over elements."""
    sigma = jnp.exp(log_sigma)
    return jnp.sum(0.5 * jnp.log(2 * jnp.pi * sigma**2) + (x - mu) ** 2 / (2 * sigma**2))
