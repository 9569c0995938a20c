"""Checks at the sizes ML code runs (issue 46): what a check reports about its oracle's fast path, and
that the stability lens's verdicts hold at a batch where they used to take minutes."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

import pytest_jaxstab as jst
from pytest_jaxstab._results import CaseResult


def _layer_norm_one_pass(x):
    m = jnp.mean(x, -1, keepdims=True)
    v = jnp.mean(x * x, -1, keepdims=True) - m * m
    return (x - m) * jax.lax.rsqrt(v + 1e-5)


def _layer_norm(x):
    m = jnp.mean(x, -1, keepdims=True)
    v = jnp.mean(jnp.square(x - m), -1, keepdims=True)
    return (x - m) * jax.lax.rsqrt(v + 1e-5)


def test_the_share_the_fast_path_escalated_is_reported_and_travels_in_json():
    # tanh over moderate inputs: every element is decided by the float64 intervals
    fast = jst.check(jnp.tanh, shapes=[(8, 16)], dtype="float32", domain=(-3.0, 3.0), seed=0, max_examples=10)
    assert fast.escalated == 0.0
    # sin has no fast-path rule: every element goes to the ball arithmetic
    arb = jst.check(jnp.sin, shapes=[(8,)], dtype="float32", domain=(-3.0, 3.0), seed=0, max_examples=10)
    assert arb.escalated == 1.0
    assert CaseResult.from_json(fast.to_json()).escalated == 0.0
    assert "escalated" in arb.to_json()


@pytest.mark.parametrize(("fn", "verdict"), [(_layer_norm_one_pass, "failed"), (_layer_norm, "passed")])
def test_a_layer_norm_verdict_at_a_batch_of_sixteen_rows(fn, verdict):
    # (16, 128) at the defaults (the stability lens, 100 inputs): the one-pass variance cancels in a
    # clustered row (the per-row draw classes find one) while the two-pass form is stable; the slow
    # tier's twin runs (32, 512).
    r = jst.check(fn, shapes=[(16, 128)], dtype="float32", domain=(-1e3, 1e3), seed=0)
    assert r.outcome == verdict, r.message


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize(("fn", "verdict"), [(_layer_norm_one_pass, "failed"), (_layer_norm, "passed")])
def test_a_layer_norm_verdict_at_32_by_512(fn, verdict, seed):
    r = jst.check(fn, shapes=[(32, 512)], dtype="float32", domain=(-1e3, 1e3), seed=seed)
    assert r.outcome == verdict, r.message
