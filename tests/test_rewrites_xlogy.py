"""Zero times log zero (``catalogue/_stability_xlogy.py``, forms in ``forms/_xlogy.py``).

KL divergences, cross-entropies, entropies and G statistics with zero targets or empty bins, in the
spellings users and libraries write, are NaN as written (``0 * log 0``) where the value is the limit
0. After ``jst.stabilize`` each is judged against mpmath (200 bits, the convention 0·log 0 = 0):

- value within 4 ulps: the forms are the program's own operations on the same inputs (a guarded log
  argument only where it was 0), so the error is the written expression's rounding: at most four
  products and logs summed in these cases (each within 1 ulp, the sum's rounding on top);
- gradient in the predictions ``p`` within 4 ulps of ``-t/p`` (0 where t = 0), the same argument;
- away from the zeros the rewritten program is bit-for-bit the written one;
- the rule defers: ``t * log(softmax(z))`` stays the log-softmax rules', the Poisson deviance
  ``x*log(x/y) - x + y`` stays ``bregman``'s.
"""

from __future__ import annotations

import contextlib

import jax
import jax.numpy as jnp
import mpmath as mp
import numpy as np
import pytest

import pytest_jaxstab as jst
from pytest_jaxstab._compat import enable_x64
from pytest_jaxstab.rewrites import forms  # noqa: F401  (the public forms import cleanly)
from pytest_jaxstab.rewrites.forms import _xlogy as fx


def _xlogy(x, y):
    return mp.mpf(0) if x == 0 else mp.mpf(x) * mp.log(y)


def _ulps(got, ref, dtype):
    got = np.atleast_1d(np.asarray(got, np.float64))
    out = []
    for g, r in zip(got, ref):
        r = mp.mpf(r)
        assert np.isfinite(g), f"{g} where the exact value is {r}"
        scale = max(abs(float(r)), float(np.finfo(dtype).tiny))
        out.append(float(abs(mp.mpf(g) - r)) / float(np.spacing(np.array(scale, dtype))))
    return max(out)


def _rules(fn, *args):
    return {a.rule for a in jst.explain(fn, *args)}


T = [0.0, 0.25, 0.75, 0.0, 1e-3]
P = [0.0, 0.5, 0.4, 1e-20, 0.1]

# (name, fn of (t, p), exact value, exact d/dp per element); each is NaN as written at the zeros
CASES = [
    ("kl_logdiff", lambda t, p: jnp.sum(t * (jnp.log(t) - jnp.log(p))),
     lambda t, p: mp.fsum(_xlogy(a, a) - _xlogy(a, b) for a, b in zip(t, p))),
    ("kl_ratio", lambda t, p: jnp.sum(t * jnp.log(t / p)),
     lambda t, p: mp.fsum(_xlogy(a, mp.mpf(a) / b) if a else 0 for a, b in zip(t, p))),
    ("cross_entropy", lambda t, p: -jnp.sum(t * jnp.log(p)),
     lambda t, p: -mp.fsum(_xlogy(a, b) for a, b in zip(t, p))),
    ("cross_entropy_neg_log", lambda t, p: jnp.sum(t * -jnp.log(p)),
     lambda t, p: -mp.fsum(_xlogy(a, b) for a, b in zip(t, p))),
    ("log_first", lambda t, p: -jnp.sum(jnp.log(p) * t),
     lambda t, p: -mp.fsum(_xlogy(a, b) for a, b in zip(t, p))),
    ("kl_log_predictions", lambda t, p: jnp.sum(t * (jnp.log(t) - jnp.log(p))),
     lambda t, p: mp.fsum(_xlogy(a, a) - _xlogy(a, b) for a, b in zip(t, p))),
    ("g_statistic", lambda t, p: 2 * jnp.sum(t * jnp.log(t / p)),
     lambda t, p: 2 * mp.fsum(_xlogy(a, mp.mpf(a) / b) if a else 0 for a, b in zip(t, p))),
]


def _grad_ref(name, t, p):
    """d/dp of each case: -t/p (twice that for the G statistic), 0 where t = 0 (the limit)."""
    scale = 2 if name == "g_statistic" else 1
    return [mp.mpf(0) if a == 0 else -scale * a / b for a, b in zip(t, p)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize(("name", "fn", "ref"), CASES, ids=[c[0] for c in CASES])
def test_products_with_zero_targets_have_the_limit_and_finite_gradients(name, fn, ref, dtype):
    with enable_x64() if dtype == np.float64 else contextlib.nullcontext():
        t, p = jnp.asarray(T, dtype), jnp.asarray(P, dtype)
        assert np.isnan(fn(t, p)), "as written the case must be NaN, or it tests nothing"
        fixed = jst.stabilize(fn)
        tm = [mp.mpf(float(v)) for v in np.asarray(t)]
        pm = [mp.mpf(float(v)) for v in np.asarray(p)]
        with mp.workprec(200):
            assert _ulps(fixed(t, p), [ref(tm, pm)], dtype) <= 4
            g = jax.grad(fixed, argnums=1)(t, p)
            assert _ulps(g, _grad_ref(name, tm, pm), dtype) <= 4


def _binary_entropy(p):
    return -(p * jnp.log(p) + (1 - p) * jnp.log(1 - p))


def _bce(t, p):
    return -(t * jnp.log(p) + (1 - t) * jnp.log(1 - p))


def _bce_log1p(t, p):
    return -(t * jnp.log(p) + (1 - t) * jnp.log1p(-p))


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_binary_entropy_is_0_at_both_ends_and_exact_inside(dtype):
    with enable_x64() if dtype == np.float64 else contextlib.nullcontext():
        p = jnp.asarray([0.0, 1.0, 0.3, 1e-6, 0.5], dtype)
        assert np.isnan(_binary_entropy(p)[:2]).all()
        got = jst.stabilize(_binary_entropy)(p)
        with mp.workprec(200):
            ref = [-(_xlogy(v, v) + _xlogy(1 - mp.mpf(v), 1 - mp.mpf(v)))
                   for v in (mp.mpf(float(x)) for x in np.asarray(p))]
            assert _ulps(got, ref, dtype) <= 4
        assert "xlogy" in _rules(_binary_entropy, p)


@pytest.mark.parametrize("fn", [_bce, _bce_log1p], ids=["log(1-p)", "log1p(-p)"])
def test_binary_cross_entropy_on_saturated_probabilities(fn):
    t = jnp.asarray([1.0, 0.0, 1.0, 0.0], jnp.float32)
    p = jnp.asarray([1.0, 0.0, 0.7, 1e-7], jnp.float32)
    assert np.isnan(fn(t, p)[:2]).all()
    fixed = jst.stabilize(fn)
    got = fixed(t, p)
    with mp.workprec(200):
        ref = [-(_xlogy(a, b) + _xlogy(1 - mp.mpf(a), 1 - mp.mpf(b)))
               for a, b in zip((mp.mpf(float(v)) for v in np.asarray(t)),
                               (mp.mpf(float(v)) for v in np.asarray(p)))]
        assert _ulps(got, ref, np.float32) <= 4
    g = jax.grad(lambda p: jnp.sum(fixed(t, p)))(p)
    assert np.isfinite(np.asarray(g)).all()
    # where t = 1, p = 0.7: d/dp = -1/0.7; where t = 0, p = 1e-7: 1/(1 - 1e-7)
    np.testing.assert_allclose(np.asarray(g)[2:], [-1 / 0.7, 1 / (1 - 1e-7)], rtol=4e-7)


def test_jensen_shannon_with_disjoint_supports():
    def js(p, q):
        m = 0.5 * (p + q)
        return 0.5 * jnp.sum(p * jnp.log(p / m)) + 0.5 * jnp.sum(q * jnp.log(q / m))

    p = jnp.asarray([0.5, 0.5, 0.0, 0.0], jnp.float32)
    q = jnp.asarray([0.0, 0.0, 0.5, 0.5], jnp.float32)
    assert np.isnan(js(p, q))
    got = float(jst.stabilize(js)(p, q))
    assert abs(got - np.log(2.0)) <= 2 * np.spacing(np.float32(np.log(2.0)))  # disjoint: log 2


def test_away_from_zeros_the_rewrite_is_the_written_program():
    def kl(t, p):
        return t * jnp.log(t / p) + t * (jnp.log(t) - jnp.log(p)) - t * jnp.log(p)

    rng = np.random.default_rng(0)
    t = jnp.asarray(rng.uniform(1e-3, 1, 64), jnp.float32)
    p = jnp.asarray(rng.uniform(1e-3, 1, 64), jnp.float32)
    assert "xlogy" in _rules(kl, t, p)
    np.testing.assert_array_equal(jax.jit(jst.stabilize(kl))(t, p), jax.jit(kl)(t, p))


def test_defers_to_the_rules_that_fix_the_log():
    def xent_softmax(t, z):
        return -jnp.sum(t * jnp.log(jax.nn.softmax(z)))

    def poisson(x, y):
        return x * jnp.log(x / y) - x + y

    t = jnp.asarray([0.0, 1.0, 0.0], jnp.float32)
    z = jnp.asarray([-200.0, 0.0, 10.0], jnp.float32)
    text = _rules(xent_softmax, t, z)
    # one-hot targets: one_hot_nll, the log-softmax form for labels (tests/test_rewrites_gather.py)
    assert "xlogy" not in text and text & {"log_softmax", "one_hot_nll"}
    x = jnp.asarray([1.0, 2.0], jnp.float32)
    text = _rules(poisson, x, x * 1.0001)
    assert "xlogy" not in text and "bregman" in text


def test_forms_at_the_corner():
    z = jnp.zeros(())
    assert float(fx.xlogy(z, z)) == 0 and float(fx.xlog1py(z, -1.0 + z)) == 0
    assert float(fx.xlog_ratio(z, z, z)) == 0 and float(fx.xlogy_difference(z, z, z)) == 0
    gx, gy = jax.grad(fx.xlogy, argnums=(0, 1))(z, z)
    assert np.isfinite(float(gx)) and float(gy) == 0
    # d/dx x·log(y) = log(y) at x = 0 (y > 0): the limit is kept, not zeroed
    assert float(jax.grad(fx.xlogy)(z, jnp.asarray(0.5))) == pytest.approx(np.log(0.5))


@pytest.mark.parametrize("fn", [
    lambda t, x: t * jnp.log(x * x + 2.0),            # x² + 2 >= 2
    lambda t, x: t * jnp.log(jnp.abs(x) + 1e-3),      # |x| + eps > 0
    lambda t, x: t * jnp.log(jnp.sqrt(x * x + 1.0)),  # sqrt of a positive
], ids=["square-plus-2", "abs-plus-eps", "sqrt"])
def test_a_log_of_a_positive_argument_is_left_as_written(fn):
    # never 0·log 0 there: the guard would only cost (and hide the program from jst.improve's terms)
    t = jnp.ones(4, jnp.float32)
    assert "xlogy" not in _rules(fn, t, t)


def test_a_log_of_an_argument_that_can_be_zero_is_guarded():
    t = jnp.ones(4, jnp.float32)
    assert "xlogy" in _rules(lambda t, x: t * jnp.log(x * x), t, t)  # x² is 0 at x = 0
    assert "xlogy" in _rules(lambda t, x: t * jnp.log(jnp.exp(x) + x), t, t)  # may be 0


# ------------------------------------------------------------------- log-space targets: exp(a)·(a - b)
def _kl_log_targets(log_p, log_t):
    return jnp.sum(jnp.exp(log_t) * (log_t - log_p), axis=-1)


def _kl_log_targets_swapped(log_p, log_t):
    return jnp.sum((log_t - log_p) * jnp.exp(log_t), axis=-1)


@pytest.mark.parametrize("fn", [_kl_log_targets, _kl_log_targets_swapped], ids=["exp_first", "exp_last"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_kl_with_log_targets_at_a_masked_class(fn, dtype):
    # targets from a log-softmax over a masked vocabulary: -inf at the masked classes
    rng = np.random.default_rng(11)
    logits = rng.normal(size=(4, 7)) * 3
    mask = rng.random((4, 7)) > 0.3
    mask[:, 0] = True
    with enable_x64() if dtype == np.float64 else contextlib.nullcontext():
        log_t = np.asarray(jax.nn.log_softmax(jnp.where(mask, logits, -jnp.inf).astype(dtype)))
        log_p = np.asarray(jax.nn.log_softmax(jnp.asarray(rng.normal(size=(4, 7)), dtype)))
        assert "exp_xlogy" in _rules(fn, log_p, log_t)
        assert np.isnan(np.asarray(fn(log_p, log_t))).all()  # 0 * -inf in every row, as written
        got = jst.stabilize(fn)(log_p, log_t)
        g_p, g_t = jax.grad(lambda a, b: jnp.sum(jst.stabilize(fn)(a, b)), argnums=(0, 1))(log_p, log_t)
    with mp.workdps(60):
        for row in range(4):
            terms = [mp.exp(mp.mpf(float(t))) * (mp.mpf(float(t)) - mp.mpf(float(p)))
                     for t, p, keep in zip(log_t[row], log_p[row], mask[row]) if keep]
            assert _ulps(got[row], [mp.fsum(terms)], dtype) <= 4  # seven products summed, 1 ulp each
            for k in range(7):
                t = mp.exp(mp.mpf(float(log_t[row, k]))) if mask[row, k] else mp.mpf(0)
                # d/dlog_p = -t; d/dlog_t = t·(log t - log p + 1): 0 at a masked class
                assert _ulps([g_p[row, k]], [-t], dtype) <= 1
                lt, lp = mp.mpf(float(log_t[row, k])), mp.mpf(float(log_p[row, k]))
                ref = t * (lt - lp + 1) if mask[row, k] else 0
                assert _ulps([g_t[row, k]], [ref], dtype) <= 4


def test_exp_xlogy_away_from_minus_inf_is_the_written_product():
    a = np.array([-3.0, 0.5, 2.0], np.float32)
    b = np.array([-1.0, -0.25, 1.0], np.float32)
    assert np.array_equal(np.asarray(jst.stabilize(_kl_log_targets)(b, a)), np.asarray(_kl_log_targets(b, a)))
