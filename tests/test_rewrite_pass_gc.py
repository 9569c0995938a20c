"""The rewrite pass pauses Python's cyclic collector while it runs (its cost was superlinear in the
program's size) and leaves the collector as it found it, also when the pass raises."""

from __future__ import annotations

import gc

import jax
import jax.numpy as jnp
import pytest

from pytest_jaxstab.rewrites import STABILITY, Rule, rewrite_jaxpr


def _closed():
    return jax.make_jaxpr(lambda x: jnp.log(jnp.sum(jnp.exp(x))))(jnp.ones(4, jnp.float32))


@pytest.mark.parametrize("enabled", [True, False])
def test_the_collector_is_left_as_it_was(enabled):
    was = gc.isenabled()
    try:
        (gc.enable if enabled else gc.disable)()
        _, applied = rewrite_jaxpr(_closed(), tuple(STABILITY))
        assert [a.rule for a in applied] == ["logsumexp"]
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()


def test_the_collector_is_paused_during_the_pass_and_back_after_an_error():
    seen = []

    class Boom(Exception):
        pass

    def matcher(graph, i):
        seen.append(gc.isenabled())
        raise Boom

    rule = Rule(name="boom", pattern=None, replacement=lambda: None, matcher=matcher)
    assert gc.isenabled()
    with pytest.raises(Boom):
        rewrite_jaxpr(_closed(), (rule,))
    assert seen and not any(seen)
    assert gc.isenabled()
