"""Layers. Production code ships `jst.stabilize(attention)`, so its test judges the rewritten function."""

from __future__ import annotations

import pytest
from mlkit import layers


# Values come after a ReLU (non-negative); queries and keys are unnormalised activations.
@pytest.mark.stabilize(dtype="float32", shapes={"q": (4, 8), "k": (4, 8), "v": (4, 8)},
                       domain=[(-10, 10), (-10, 10), (0, 10)], apply=True)
def test_attention(q, k, v):
    return layers.attention(q, k, v)


def test_rms_norm(jaxstab):
    # A function defined elsewhere, checked through the fixture.
    jaxstab.check(layers.rms_norm, shapes=[(16,)], dtype="float32", domain=(-1e3, 1e3))
