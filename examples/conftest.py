"""Shared fixtures of the example suite. pytest-jaxstab needs nothing here: installed, it is a plugin."""

from __future__ import annotations

import jax.numpy as jnp
import pytest


@pytest.fixture
def labels() -> jnp.ndarray:
    """One-hot labels of a batch of four examples over four classes."""
    return jnp.eye(4, dtype=jnp.float32)[jnp.array([0, 2, 1, 3])]
