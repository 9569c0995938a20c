"""Losses. The array parameters named in `shapes` are drawn by pytest-jaxstab; `labels` is a fixture."""

from __future__ import annotations

import pytest
from mlkit import losses


# Logits of a badly scaled model easily reach a few hundred: exp overflows, and log(0) follows.
@pytest.mark.stabilize(dtype="float32", shapes={"logits": (4, 4)}, domain=(-300, 300))
def test_cross_entropy_naive(logits, labels):
    return losses.cross_entropy_naive(logits, labels)


@pytest.mark.stabilize(dtype="float32", shapes={"logits": (4, 4)}, domain=(-300, 300))
def test_cross_entropy(logits, labels):
    return losses.cross_entropy(logits, labels)


# The outputs of an unconstrained network head: sigma**2 overflows once log_sigma passes ~44.
@pytest.mark.stabilize(dtype="float32", shapes={"x": (8,), "mu": (8,), "log_sigma": (8,)}, domain=(-100, 100))
def test_gaussian_nll(x, mu, log_sigma):
    return losses.gaussian_nll(x, mu, log_sigma)
