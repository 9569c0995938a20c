"""``STABILITY_FAST``: the documented speed/accuracy choice for logsumexp and log_softmax.

The accurate forms (default) keep the small terms and cost ~1.8x ``jax.nn`` on XLA:CPU; the fast
ones are the library's formulas: no overflow, ``jax.nn``'s speed (benchmarks/bench_rewrite.py
prints both), the small terms lost. References: mpmath at 256 bits.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import mpmath
import numpy as np

import pytest_jaxstab as jst
from pytest_jaxstab.oracles import error_bits
from pytest_jaxstab.oracles.core._rounding import round_to_dtype
from pytest_jaxstab.rewrites import STABILITY, STABILITY_FAST

MP: Any = mpmath.mp.clone()  # a private context: the precision set here stays here
MP.prec = 256
HEADLINE = np.array([1e-20] + [-20.0] * 15, np.float32)


def _lse_exact(x: np.ndarray) -> np.ndarray:
    v = MP.log(MP.fsum(MP.exp(MP.mpf(float(t))) for t in x))
    return round_to_dtype(np.array(v, dtype=object), np.float32)


def lse(x):
    return jnp.log(jnp.sum(jnp.exp(x)))


def test_fast_catalogue_differs_only_in_the_two_rules():
    names = [r.name for r in STABILITY]
    fast = [r.name for r in STABILITY_FAST]
    assert [a for a, b in zip(names, fast) if a != b] == ["log_softmax", "logsumexp"]
    assert [b for a, b in zip(names, fast) if a != b] == ["log_softmax_fast", "logsumexp_fast"]
    assert jst.rewrites.get("logsumexp_fast").doc  # documented


def test_fast_rule_fixes_overflow_accurate_rule_also_keeps_small_terms():
    big = np.array([1000.0, 999.0, -5.0], np.float32)
    fast = jst.stabilize(lse, rules=STABILITY_FAST)
    assert jst.explain(lse, big, rules=STABILITY_FAST).rules == ["logsumexp_fast"]
    assert error_bits(np.asarray(fast(big)), _lse_exact(big)) <= 1  # no overflow
    # the trade-off, measured: the accurate default is exact on the headline input, the fast one
    # loses the sum of the small terms (~28 bits), as jax.nn.logsumexp does
    assert error_bits(np.asarray(jst.stabilize(lse)(HEADLINE)), _lse_exact(HEADLINE)) == 0
    assert error_bits(np.asarray(fast(HEADLINE)), _lse_exact(HEADLINE)) >= 20


def test_fast_log_softmax_on_rows():
    x = np.random.default_rng(0).normal(0, 30, (3, 5)).astype(np.float32)
    f = lambda x: x - jnp.log(jnp.sum(jnp.exp(x), axis=-1, keepdims=True))
    got = np.asarray(jst.stabilize(f, rules=STABILITY_FAST)(x))
    exact = np.empty_like(x, dtype=object)
    for i, row in enumerate(x):
        s = MP.log(MP.fsum(MP.exp(MP.mpf(float(t))) for t in row))
        exact[i] = [MP.mpf(float(t)) - s for t in row]
    exact = round_to_dtype(exact, np.float32)
    # (x - m) - log(s): two roundings and the sum's; entries far below the max are large and exact
    # to a few ulps, the max's entry (near 0) is where the fast form may lose more: finite always
    assert np.isfinite(got).all()
    assert error_bits(got, exact)[np.abs(exact.astype(np.float64)) > 1].max() <= 2
