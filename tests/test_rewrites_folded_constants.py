"""Constants the program computes, and the signs and zero coefficients they hide (issue 47).

Library code builds its constants with array operations: ``jnp.full_like(x, k) / 2 - 1`` is a
coefficient that is exactly 0 at ``k = 2``; ``jnp.where(cond, 1.0, -1.0)`` is a sign. The matcher
folds what is computed from constants alone (``rewrites/engine/_fold.py``), so a rule meets the value
the program computes; the mass between two bounds is read through a sign (``_stability_mass.py``);
``xlogy`` takes a constant coefficient that is 0 somewhere, also inside a ``where`` that
``masked_where`` re-binds. Each function is written as user code writes it and judged in float32
against mpmath (50 digits):

- a folded constant that completes a pattern: the rewritten ``log1p`` within 1 ulp (one correctly
  rounded operation, half an ulp, plus the reference's half);
- the log mass between two bounds in either order within 6 ulps, value and gradient: the bound of
  ``tests/test_rewrites_normal_tails.py`` for the same form (four or five terms of an ulp or two,
  no cancellation); the sign only orders the bounds;
- a zero coefficient: within 2 ulps, the program's own operations with the log's argument made 1 where
  coefficient and argument are both 0 (a log and a sum, each half an ulp, and the reference's half);
- and where each must not fire: a folded constant that is not the pattern's, a sign that is not ±1,
  a constant coefficient that is never 0.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import mpmath as mp
import numpy as np
import pytest
from jax.scipy.special import ndtr

import pytest_jaxstab as jst
from pytest_jaxstab.rewrites.engine import _fold
from pytest_jaxstab.rewrites.engine._graph import Graph

mp.mp.dps = 50
F32 = np.float32


def _ulps(got, refs):
    """Largest distance of ``got`` from the exact values, in float32 ulps (inf where not finite)."""
    worst = 0.0
    for g, r in zip(np.atleast_1d(np.asarray(got, np.float64)), refs):
        if not np.isfinite(g):
            return np.inf
        scale = max(abs(float(r)), float(np.finfo(F32).tiny))
        worst = max(worst, float(abs(mp.mpf(g) - r)) / float(np.spacing(F32(scale))))
    return worst


def _rules(fn, *args):
    return jst.explain(fn, *args).rules


# ------------------------------------------------------------------------- folded constants
def _log_one_plus(x):
    return jnp.log(jnp.ones_like(x) + x)


def _log_half_of_two_plus(x):
    return jnp.log(jnp.full_like(x, 2.0) / 2 + x)


def test_what_the_matcher_folds_and_what_it_leaves():
    def program(x):
        sign = jnp.where(jnp.asarray(2.0) > 1.0, 1.0, -1.0)  # a call of jnp.where on constants
        half = jnp.full_like(x, 3.0) / 2
        root = jnp.sqrt(jnp.full_like(x, 2.0))  # √2 itself to the rules that read it: not its rounding
        tiny = jnp.full_like(x, 1e-30) * 1e-10  # subnormal: XLA flushes it on CPU, numpy would not
        return sign, half, root, tiny, x * 2.0

    closed = jax.make_jaxpr(program)(jnp.ones(3, F32))
    g = Graph(closed)
    sign, half, root, tiny, data = (_fold.constant(g, v) for v in closed.jaxpr.outvars)
    assert sign is not None and sign.shape == () and float(sign) == 1.0
    assert half is not None and half.shape == (1,) and float(half[0]) == 1.5  # one value, kept once
    assert root is None and tiny is None and data is None


@pytest.mark.parametrize("fn", [_log_one_plus, _log_half_of_two_plus])
def test_a_constant_the_program_computes_completes_a_pattern(fn):
    x = jnp.asarray([1e-10, -3e-9, 0.5], F32)
    assert _rules(fn, x) == ["log1p"]
    refs = [mp.log1p(mp.mpf(float(v))) for v in np.asarray(x)]
    assert _ulps(jst.stabilize(fn)(x), refs) <= 1.0
    assert _ulps(fn(x), refs) > 2.0 ** 8  # written: 1 + 1e-10 rounds to 1, the log to 0


def test_a_folded_constant_that_is_not_the_patterns_is_left_alone():
    x = jnp.asarray([1e-10, 0.5], F32)
    assert _rules(lambda v: jnp.log(jnp.full_like(v, 3.0) / 2 + v), x) == []


# ----------------------------------------------------------------- the mass between two bounds
def _interval_log_mass(a, b):
    """The normal mass between two cut points given in either order."""
    sign = jnp.where(b >= a, 1.0, -1.0)
    return jnp.log(sign * (ndtr(b) - ndtr(a)))


LOW, HIGH = 8.0, 9.0


def _fixed_orientation_log_mass(z):
    """A truncation whose bounds are closed over; the sign folds to 1 from constants."""
    sign = jnp.where(jnp.asarray(HIGH) >= LOW, 1.0, -1.0)
    return jnp.log(sign * (ndtr(HIGH - z) - ndtr(LOW - z)))


def _mass(a, b):
    lo, hi = (a, b) if a <= b else (b, a)
    if lo >= 0:  # mirrored, so the reference itself does not cancel
        return mp.ncdf(-lo) - mp.ncdf(-hi)
    return mp.ncdf(hi) - mp.ncdf(lo)


def test_the_log_mass_between_bounds_in_either_order():
    a = jnp.asarray([8.0, 9.0, -31.0, -30.0, -1.0], F32)
    b = jnp.asarray([9.0, 8.0, -30.0, -31.0, 2.0], F32)
    assert _rules(_interval_log_mass, a, b) == ["log_normal_mass"]
    pairs = [(mp.mpf(float(u)), mp.mpf(float(v))) for u, v in zip(np.asarray(a), np.asarray(b))]
    masses = [_mass(u, v) for u, v in pairs]
    stable = jst.stabilize(_interval_log_mass)
    assert _ulps(stable(a, b), [mp.log(m) for m in masses]) <= 6
    # d/da of log|Φ(b) - Φ(a)| is -φ(a)/(Φ(b) - Φ(a)) in either order
    ga, gb = jax.grad(lambda u, v: jnp.sum(stable(u, v)), argnums=(0, 1))(a, b)
    signs = [1 if v >= u else -1 for u, v in pairs]
    assert _ulps(ga, [-s * mp.npdf(u) / m for s, (u, _), m in zip(signs, pairs, masses)]) <= 6
    assert _ulps(gb, [s * mp.npdf(v) / m for s, (_, v), m in zip(signs, pairs, masses)]) <= 6
    assert not np.isfinite(np.asarray(_interval_log_mass(a, b))[:4]).any()  # written: log 0


def test_a_sign_folded_from_constants_orders_the_bounds():
    z = jnp.asarray([0.0, -0.5, 1.0], F32)
    assert _rules(_fixed_orientation_log_mass, z) == ["log_normal_mass"]
    refs = [mp.log(_mass(LOW - mp.mpf(float(v)), HIGH - mp.mpf(float(v)))) for v in np.asarray(z)]
    assert _ulps(jst.stabilize(_fixed_orientation_log_mass)(z), refs) <= 6


def test_a_negated_difference_and_a_logistic_mass():
    a = jnp.asarray([20.0, -3.0], F32)
    b = jnp.asarray([21.0, -2.0], F32)

    def negated(u, v):  # log(-(Φ(a) - Φ(b))) = log(Φ(b) - Φ(a))
        return jnp.log(-(ndtr(u) - ndtr(v)))

    def logistic_either_order(u, v):
        return jnp.log(jnp.where(v >= u, 1.0, -1.0) * (jax.nn.sigmoid(v) - jax.nn.sigmoid(u)))

    assert _rules(negated, a, b) == ["log_normal_mass"]
    assert _rules(logistic_either_order, b, a) == ["log_logistic_mass"]
    pairs = [(mp.mpf(float(u)), mp.mpf(float(v))) for u, v in zip(np.asarray(a), np.asarray(b))]
    assert _ulps(jst.stabilize(negated)(a, b), [mp.log(_mass(u, v)) for u, v in pairs]) <= 6
    # sig(b) - sig(a) = sig(b)·sig(-a)·(1 - e^-(b - a)): three factors of 1 ulp or two, one sum of logs
    sig = lambda t: 1 / (1 + mp.exp(-t))
    refs = [mp.log(sig(v) - sig(u)) for u, v in pairs]
    assert _ulps(jst.stabilize(logistic_either_order)(b, a), refs) <= 6


def test_a_factor_that_is_not_a_sign_is_left_alone():
    a, b = jnp.asarray([8.0], F32), jnp.asarray([9.0], F32)
    assert "log_normal_mass" not in _rules(
        lambda u, v: jnp.log(jnp.where(v >= u, 2.0, -1.0) * (ndtr(v) - ndtr(u))), a, b)


# ------------------------------------------------------------------------- zero coefficients
SHAPE_K = 1.0  # a gamma shape of 1: the exponential distribution


def _gamma_log_density(x):
    """A gamma log-density with its shape and rate closed over, written as library code builds it."""
    k = jnp.full_like(x, SHAPE_K)
    rate = jnp.ones_like(x) * 2.0
    # the normaliser from Python (XLA's lgamma(1) is a few ulps of 1 off zero on jax 0.10)
    return (k - 1) * jnp.log(x) - rate * x + k * jnp.log(rate) - math.lgamma(SHAPE_K)


def _beta_log_density(x):
    """A Beta(1, 3) log-density whose first exponent is the literal 0.0 Python computes."""
    a, b = 1.0, 3.0
    return (a - 1) * jnp.log(x) + (b - 1) * jnp.log1p(-x) + np.log(3.0)


def _guarded_gamma_log_density(x):
    return jnp.where(x < 0, -jnp.inf, _gamma_log_density(x))


@pytest.mark.parametrize(("fn", "exact"), [
    (_gamma_log_density, lambda x: -2 * x + mp.log(2)),
    (_beta_log_density, lambda x: 2 * mp.log1p(-x) + mp.mpf(float(F32(np.log(3.0))))),
    (_guarded_gamma_log_density, lambda x: -2 * x + mp.log(2)),
], ids=["computed", "literal", "inside_where"])
def test_a_zero_coefficient_times_log_zero_is_zero(fn, exact):
    x = jnp.asarray([0.0, 0.25, 0.75], F32)
    assert "xlogy" in _rules(fn, x)
    refs = [exact(mp.mpf(float(v))) for v in np.asarray(x)]
    assert _ulps(jst.stabilize(fn)(x), refs) <= 2.0
    assert np.isnan(np.asarray(fn(x))[0])  # written: 0 * log(0) = 0 * -inf
    # away from 0 the derivative is the written one's: finite, the density's
    g = jax.grad(lambda v: jnp.sum(jst.stabilize(fn)(v)))(x[1:])
    assert np.isfinite(np.asarray(g)).all()


def test_a_constant_coefficient_that_is_never_zero_is_left_alone():
    x = jnp.asarray([0.5, 2.0], F32)
    assert "xlogy" not in _rules(lambda v: (jnp.full_like(v, 3.0) - 1) * jnp.log(v), x)
    assert "xlogy" not in _rules(lambda v: 2.5 * jnp.log(v), x)
