"""A tiny Elman RNN written with ``lax.scan``."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def rnn_loss(xs: jax.Array, w: jax.Array, targets: jax.Array) -> jax.Array:
    """Mean squared error of a scalar-state tanh RNN driven by ``xs`` against ``targets``."""

    def step(h: jax.Array, x: jax.Array) -> tuple[jax.Array, jax.Array]:
        h = jnp.tanh(w[0] * h + w[1] * x)
        return h, h

    _, hs = jax.lax.scan(step, jnp.zeros((), xs.dtype), xs)
    return jnp.mean((hs - targets) ** 2)
