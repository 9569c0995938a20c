"""``jst.tune_precision`` draws half its samples by value, as a model's data looks (issue 34).

The check's draws are built to find where a formula breaks (bit patterns uniform over the domain, classes
of extreme structure); over a 64-element dot product they are dominated by tiny values, so a softmax of
the logits came out exactly uniform on every sample and a bfloat16 attention looked exact although the
logits' rounding costs several ulps on ordinary data. Judged here on inputs drawn with numpy (never the
plan's), references by mpmath at 60 digits on the low-precision inputs, tolerance 4 ulps of the low dtype
(the plan's own target).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import mpmath as mp
import numpy as np
import pytest
from precision_helpers import marked_line as _line
from precision_helpers import ulps as _ulps

import pytest_jaxstab as jst
from pytest_jaxstab._precision._search import _by_value
from pytest_jaxstab.strategies._arrays import plans_for

mp.mp.dps = 60
TOL_ULPS = 4


def attention_weights(q, k):
    logits = k @ q / jnp.sqrt(jnp.asarray(q.shape[-1], q.dtype))  # logits
    return jax.nn.softmax(logits)


def _attention_ref(q, k):
    d = len(q)
    qs = [mp.mpf(float(v)) for v in np.asarray(q, np.float64)]
    lg = [mp.fsum(qs[j] * mp.mpf(float(row[j])) for j in range(d)) / mp.sqrt(d)
          for row in np.asarray(k, np.float64)]
    top = max(lg)
    e = [mp.exp(t - top) for t in lg]
    s = mp.fsum(e)
    return np.array([float(t / s) for t in e])


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_attention_logits_are_kept_high_and_the_plan_holds_on_ordinary_data(dtype):
    dt = jnp.dtype(dtype)
    plan = jst.tune_precision(attention_weights, shapes=[(64,), (8, 64)], dtype=dtype, domain=(-4.0, 4.0))
    # On data of the domain's values the rounding of the logits costs more than 4 ulps of the softmax:
    # the plan keeps that line (in float32) or reports not reaching the target, never "nothing to keep".
    assert plan.original.max_ulps > TOL_ULPS, str(plan)
    assert _line(attention_weights, "logits") in plan.lines, str(plan)
    rng = np.random.default_rng(3434)
    worst_before = worst_after = 0.0
    for _ in range(12):
        q = jnp.asarray(rng.uniform(-4, 4, 64), dt)
        k = jnp.asarray(rng.uniform(-4, 4, (8, 64)), dt)
        ref = _attention_ref(q, k)
        worst_before = max(worst_before, float(_ulps(attention_weights(q, k), ref, dt).max()))
        worst_after = max(worst_after, float(_ulps(plan.fn(q, k), ref, dt).max()))
    assert worst_after <= TOL_ULPS, (worst_before, worst_after, str(plan))
    assert worst_before > TOL_ULPS  # the independent draws see the loss the plan removes


def test_by_value_draws_cover_the_declared_interval_and_unbounded_domains_at_a_scale():
    rng = np.random.default_rng(0)
    drawn = _by_value(plans_for(jnp.bfloat16, [(4096,)], (5.0, 15.0)), rng)
    assert drawn is not None
    (x,) = drawn
    x = np.asarray(x, np.float32)
    assert x.min() >= 5.0 and x.max() <= 15.0
    # Uniform over the values: each fifth of the interval holds about a fifth of 4096 (> 15% each).
    counts = np.histogram(x, bins=5, range=(5.0, 15.0))[0]
    assert counts.min() > 0.15 * 4096, counts
    # One-sided: from the bounded end; unbounded: both signs; never beyond the dtype's range.
    checks = (((0.0, None), lambda v: v.min() >= 0.0), ((None, None), lambda v: v.min() < 0 < v.max()))
    for domain, check in checks:
        drawn = _by_value(plans_for(jnp.float16, [(512,)], domain), rng)
        assert drawn is not None
        (y,) = drawn
        y = np.asarray(y, np.float32)
        assert np.isfinite(y).all() and check(y)
    # A domain predicate that rejects a value gives None (the check's draw takes that sample).
    picky = jst.strategies.Domain(-1.0, 1.0, where=lambda v: v != 0 and abs(v) > 0.999)
    assert _by_value(plans_for(jnp.bfloat16, [(64,)], picky), rng) is None


def shifted(x):
    return (x + 1024) - 1024  # absorbed


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_the_plan_holds_op_by_op_where_jit_keeps_excess_precision(dtype):
    # JAX 0.10's CPU jit keeps float16 intermediates in float32: judged jitted there, this program looked
    # exact and nothing was kept, while the program as written (op by op, or on a backend that rounds)
    # loses everything. The plan must keep the line on every JAX, and hold both ways.
    dt = jnp.dtype(dtype)
    plan = jst.tune_precision(shifted, shapes=[(16,)], dtype=dtype, domain=(0.5, 1.0))
    assert plan.lines == (_line(shifted, "absorbed"),), str(plan)
    x = jnp.asarray(np.random.default_rng(7).uniform(0.5, 1.0, 16), dt)
    ref = np.asarray(x, np.float64)  # exact: x + 1024 - 1024 = x
    for run in (plan.fn, jax.jit(plan.fn)):
        assert _ulps(run(x), ref, dt).max() <= TOL_ULPS, str(plan)
    assert _ulps(shifted(x), ref, dt).max() > TOL_ULPS  # op by op, the program as written loses it
