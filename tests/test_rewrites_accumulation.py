"""The engine sees through the float32 accumulation ``jnp.sum`` inserts for float16 and bfloat16.

``jnp.sum(v)`` of a low dtype is ``convert(low -> f32) -> reduce_sum -> convert(f32 -> low)``. Rules
written against the float32 spelling (``logsumexp``, ``norm``) must match it, and must not where the
float32 values are the user's (read elsewhere, or the result kept in float32): swallowing the
conversions there would change what the program returns.

References: mpmath at 40 digits on the low-precision inputs, rounded to the dtype through float64 (one
ulp of double rounding at most). Bound 2 ulps: the output's rounding, the stable form's few roundings in
the low dtype (its sums accumulate in float32, as ``jnp.sum``'s do).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import mpmath as mp
import numpy as np
import pytest

import pytest_jaxstab as jst

mp.mp.dps = 40
LOW = [jnp.float16, jnp.bfloat16]
IDS = ["float16", "bfloat16"]
BOUND_ULPS = 2


def _ulps(got, ref, dtype) -> float:
    r = np.asarray(np.asarray(ref, np.float64), dtype)
    return float(np.max(np.exp2(jst.oracles.error_bits(np.asarray(got, dtype), r)) - 1.0))


def log_sum_exp(x):
    return jnp.log(jnp.sum(jnp.exp(x)))


def l2_norm(g):
    return jnp.sqrt(jnp.sum(g * g))


def _rules(fn, x) -> list[str]:
    return [a.rule for a in jst.explain(fn, x)]


@pytest.mark.parametrize("dtype", LOW, ids=IDS)
def test_logsumexp_fires_through_the_accumulation_and_fixes_the_overflow(dtype):
    x = np.linspace(11.0, 13.0, 16).astype(dtype)  # exp(11.1) overflows float16
    assert _rules(log_sum_exp, x) == ["logsumexp"]
    ref = mp.log(mp.fsum(mp.exp(mp.mpf(float(v))) for v in x.astype(np.float64)))
    assert _ulps(jst.stabilize(log_sum_exp)(x), float(ref), dtype) <= BOUND_ULPS
    # gradient: softmax, every component in (0, 1) and finite, against mpmath
    g = np.asarray(jax.grad(lambda v: jst.stabilize(log_sum_exp)(v).astype(jnp.float32))(x), np.float64)
    want = [float(mp.exp(mp.mpf(float(v)) - ref)) for v in x.astype(np.float64)]
    assert _ulps(g, want, dtype) <= 4  # the gradient's own exp and division: two roundings more


@pytest.mark.parametrize("dtype", LOW, ids=IDS)
def test_norm_fires_through_the_accumulation_and_fixes_overflow_and_underflow(dtype):
    rng = np.random.default_rng(0)
    for scale in (40.0, 1e-22):  # float16's rounded sum overflows; bfloat16's squares underflow
        g = (rng.normal(0.0, 1.0, 256) * scale).astype(dtype)
        if not np.all(np.isfinite(g.astype(np.float32))) or not np.any(g.astype(np.float32)):
            continue  # 1e-22 is 0 in float16: nothing to measure
        assert _rules(l2_norm, g) == ["norm"]
        ref = mp.mpf(mp.sqrt(mp.fsum(mp.mpf(float(v)) ** 2 for v in g.astype(np.float64))))
        assert _ulps(jst.stabilize(l2_norm)(g), float(ref), dtype) <= BOUND_ULPS


@pytest.mark.parametrize("dtype", [LOW[0], pytest.param(LOW[1], marks=pytest.mark.slow)], ids=IDS)
@pytest.mark.parametrize("fn", [pytest.param(log_sum_exp, marks=pytest.mark.slow), l2_norm],
                         ids=["logsumexp", "norm"])
def test_the_rewrite_is_no_worse_where_the_program_does_not_overflow(dtype, fn):
    # The catalogue's soundness rule (tests/test_catalogue_soundness.py), in the low dtype and where the
    # program as written is fine: over the draws, the rewrite's worst error exceeds the program's by at
    # most 1 bit. The form is computed in float32 and rounded once (engine `_replace(wide=True)`): in
    # float16 its own roundings cancelled near logsumexp = 0 (max + log1p(sum - 1): measured 6 ulps
    # where the program as written, whose sum is float32, was within 1).
    ref_of = {log_sum_exp: lambda v: mp.log(mp.fsum(mp.exp(t) for t in v)),
              l2_norm: lambda v: mp.sqrt(mp.fsum(t * t for t in v))}[fn]
    rng = np.random.default_rng(1)
    stable = jax.jit(jst.stabilize(fn))
    worst = {"original": 0.0, "rewritten": 0.0}
    for _ in range(60):
        x = rng.normal(0.0, 1.0, int(rng.integers(2, 40))).astype(dtype)
        ref = float(ref_of([mp.mpf(float(v)) for v in x.astype(np.float64)]))
        for name, f in (("original", fn), ("rewritten", stable)):
            got = np.asarray(np.asarray(f(x)), dtype)
            bits = float(jst.oracles.error_bits(got, np.asarray(np.float64(ref), dtype)))
            worst[name] = max(worst[name], bits)
    assert worst["rewritten"] <= worst["original"] + 1.0, worst
    assert worst["rewritten"] <= 1.0, worst  # and absolutely: float32 rounded once, within an ulp


@pytest.mark.parametrize("dtype", LOW, ids=IDS)
def test_a_float32_sum_the_user_keeps_is_not_seen_through(dtype):
    # near misses: the float32 sum is the user's (a result in float32, or read by a second output);
    # swallowing the conversions would return a low-precision value where float32 was asked for
    def in_float32(x):
        return jnp.log(jnp.sum(jnp.exp(x).astype(jnp.float32)))

    def also_read(x):
        s = jnp.sum(jnp.exp(x).astype(jnp.float32))
        return jnp.log(s.astype(x.dtype)), s

    x = np.linspace(1.0, 2.0, 8).astype(dtype)
    assert "logsumexp" not in _rules(in_float32, x)
    assert "logsumexp" not in _rules(also_read, x)
    assert jst.stabilize(in_float32)(x).dtype == jnp.float32
    np.testing.assert_array_equal(np.asarray(jst.stabilize(also_read)(x)[1]), np.asarray(also_read(x)[1]))


def test_a_float32_program_is_matched_as_before():
    x = np.linspace(80.0, 90.0, 8).astype(np.float32)  # exp(88.8) overflows float32
    assert _rules(log_sum_exp, x) == ["logsumexp"]
    assert np.isfinite(float(jst.stabilize(log_sum_exp)(x)))
