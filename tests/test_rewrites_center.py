"""Centering (issue 35): ``x - mean(x)`` in the spellings of normalisation code becomes
``forms.center``: exact 0 for a constant slice, deviations accurate for data clustered far from 0,
and the derivative of the formula. References: mpmath at 60 digits on the inputs as rounded."""

from __future__ import annotations

import contextlib

import jax
import jax.numpy as jnp
import mpmath
import numpy as np
import pytest
from jax import lax

import pytest_jaxstab as jst
from pytest_jaxstab._compat import enable_x64
from pytest_jaxstab.rewrites import forms

mpmath.mp.dps = 60
EPS = 1e-5


def _x64(dtype):
    return enable_x64() if np.dtype(dtype) == np.float64 else contextlib.nullcontext()


def _ulps(got, exact, dtype):
    """Distance in ulps of the exact value (at least the dtype's smallest normal's ulp)."""
    got, exact = np.asarray(got, np.float64), np.asarray(exact, np.float64)
    spacing = np.spacing(np.abs(exact).astype(dtype)).astype(np.float64)
    return np.abs(got - exact) / np.maximum(spacing, np.spacing(np.finfo(dtype).tiny))


def _ulps_of_row(got, exact, dtype):
    """Distance in ulps of the largest exact value of the same row (last axis). A deviation far
    smaller than the spread (x_i next to the mean) is known only to the mean's rounding, an ulp of
    the spread: no working-precision formula gives it to an ulp of itself, so the contract is
    stated against the row's scale."""
    got, exact = np.asarray(got, np.float64), np.asarray(exact, np.float64)
    scale = np.max(np.abs(exact), axis=-1, keepdims=True).astype(dtype)
    spacing = np.maximum(np.spacing(scale).astype(np.float64), np.spacing(np.finfo(dtype).tiny))
    return np.abs(got - exact) / spacing


def _rows(a, axis):
    """``a`` with the reduced axes last, one row per slice."""
    if isinstance(axis, tuple):
        return a.reshape(1, -1)
    return np.moveaxis(a, axis, -1).reshape(-1, a.shape[axis])


def _centered(row):
    vals = [mpmath.mpf(float(v)) for v in row]
    m = mpmath.fsum(vals) / len(vals)
    return [v - m for v in vals]


def _normalised(row, eps=EPS):
    dev = _centered(row)
    var = mpmath.fsum(d * d for d in dev) / len(dev)
    inv = 1 / mpmath.sqrt(var + mpmath.mpf(eps))
    return [float(d * inv) for d in dev]


# normalisation as libraries write it; each reduces over the last axis
def nn_standardize(x):
    return jax.nn.standardize(x, axis=-1, epsilon=EPS)


def one_pass_batch_norm(x):  # haiku's BatchNorm: mean of squares minus the squared mean
    mean = jnp.mean(x, -1, keepdims=True)
    var = jnp.mean(jnp.square(x), -1, keepdims=True) - jnp.square(mean)
    return (x - mean) * lax.rsqrt(var + EPS)


def layer_norm_var(x):  # jnp.var for the variance, mean without keepdims and expanded again
    mu = jnp.mean(x, axis=-1)
    return (x - jnp.expand_dims(mu, -1)) * lax.rsqrt(jnp.var(x, axis=-1, keepdims=True) + EPS)


def written_out(x):  # two-pass, every mean as sum / n
    n = x.shape[-1]
    m = jnp.sum(x, axis=-1, keepdims=True) / n
    d = x - m
    return d / jnp.sqrt(jnp.sum(d * d, axis=-1, keepdims=True) / n + EPS)


SPELLINGS = [nn_standardize, one_pass_batch_norm, layer_norm_var, written_out]
rng = np.random.default_rng(2035)
DATA = {
    "15 values within 1e-4 of -1753.93": lambda dt: -1753.93 + 1e-4 * rng.standard_normal((3, 15)),
    "mean 1e4, std 1": lambda dt: 1e4 + rng.standard_normal((3, 15)),
    "mean -300, std 0.01": lambda dt: -300 + 0.01 * rng.standard_normal((3, 15)),
    "a constant row": lambda dt: np.full((3, 15), 0.1),
}


@pytest.mark.parametrize("dtype", ["float32", pytest.param("float64", marks=pytest.mark.slow)])
@pytest.mark.parametrize("data", DATA)
@pytest.mark.parametrize("fn", SPELLINGS, ids=lambda f: f.__name__)
def test_normalisation_is_accurate_after_stabilize(fn, data, dtype):
    # 4 ulps of the row's largest output: the deviations carry the shifted mean's rounding (an ulp of
    # the spread) and one of their own, the variance and rsqrt one each. As written these lose
    # 15-30 bits (float32) on the clustered rows: the mean's rounding is an ulp of the mean.
    with _x64(dtype):
        x = np.asarray(DATA[data](dtype), dtype)
        got = np.asarray(jax.jit(jst.stabilize(fn))(jnp.asarray(x)))
    exact = np.array([_normalised(r) for r in x])
    assert _ulps_of_row(got, exact, dtype).max() <= 4, (got[0, :4], exact[0, :4])
    if data == "a constant row":
        assert np.all(got == 0)


def test_as_written_the_clustered_rows_are_far_off():
    # the test above measures a fix: the same spellings as written miss by far more than 4 ulps
    x = np.asarray(DATA["15 values within 1e-4 of -1753.93"]("float32"), np.float32)
    exact = np.array([_normalised(r) for r in x])
    for fn in SPELLINGS:
        assert _ulps_of_row(np.asarray(jax.jit(fn)(jnp.asarray(x))), exact, np.float32).max() > 2 ** 10


@pytest.mark.parametrize("axis", [0, 1, -1, (0, 1)])
def test_center_form_matches_the_exact_deviations(axis):
    x = np.asarray(7e3 + 0.5 * rng.standard_normal((6, 5)), np.float32)
    got = _rows(np.asarray(forms.center(jnp.asarray(x), axis)), axis)
    exact = np.array([[float(v) for v in _centered(r)] for r in _rows(x, axis)])
    # the shifted values are exact; the shifted mean's rounding and one of each deviation: 2 ulps
    # of the spread (as written: up to half an ulp of 7e3, 2^10 ulps of the spread)
    assert _ulps_of_row(got, exact, np.float32).max() <= 2
    written = _rows(np.asarray(x - jnp.mean(jnp.asarray(x), axis, keepdims=True)), axis)
    assert _ulps_of_row(written, exact, np.float32).max() > 8


def test_center_gradient_is_the_formulas():
    # d/dx sum(w * (x - mean(x))) = w - mean(w), exactly representable here (w has mean 2)
    w = jnp.asarray([1.0, 2.0, 3.0, 2.0], jnp.float32)
    x = jnp.asarray([1e4, 1e4 + 1, 1e4 - 3, 1e4 + 0.5], jnp.float32)
    f = jst.stabilize(lambda x: jnp.sum(w * (x - jnp.mean(x))))
    np.testing.assert_array_equal(np.asarray(jax.grad(f)(x)), np.asarray(w - 2.0))
    # and a second-order use: the Hessian of sum((x - mean)^2) is 2(I - 1/n)
    h = jax.hessian(jst.stabilize(lambda x: jnp.sum((x - jnp.mean(x)) ** 2)))(x)
    np.testing.assert_allclose(np.asarray(h), 2 * (np.eye(4) - 0.25), atol=2 ** -20)


@pytest.mark.parametrize("values", [[3e38, -3e38, 1.0, 2.0], [3e38, -3e38, -3e38, 3e38, 1.0],
                                    [-1e38, 2e38, 5.0, -2.5e38]])
def test_center_does_not_overflow_where_the_written_form_does_not(values):
    # shifted values 3e38 - (-3e38), and their sum, would overflow: near the float max the data is
    # scaled by 2^-k first (k from the count alone), which flushes nothing of 1.0 or 5.0
    x = jnp.asarray(values, jnp.float32)
    def f(x):
        return x - jnp.mean(x)

    exact = [float(v) for v in _centered(np.asarray(x))]
    got = np.asarray(jst.stabilize(f)(x))
    assert np.all(np.isfinite(got))
    # the row-scale contract (an ulp of 3e38 is 2e31: the small deviations are rounding noise at
    # this scale, as the written mean's sum guarantees them no better)
    assert _ulps_of_row(got, exact, np.float32).max() <= 2


def test_center_keeps_the_mean_for_its_other_uses():
    def stats(x):  # batch norm returns the batch mean for its running average
        mean = jnp.mean(x, 0)
        return x - mean, mean

    x = jnp.asarray(np.full((8, 3), 0.1, np.float32))
    centred, mean = jst.stabilize(stats)(x)
    assert np.all(np.asarray(centred) == 0)
    np.testing.assert_array_equal(np.asarray(mean), np.asarray(jnp.mean(x, 0)))
    assert [a.rule for a in jst.explain(stats, x)] == ["center"]


@pytest.mark.parametrize("fn", [
    lambda x, y: x - jnp.mean(y),                          # another array's mean
    lambda x, y: x - jnp.sum(x) / (x.shape[0] + 1),        # not the count
    lambda x, y: x - jnp.max(x),                           # not a mean
    lambda x, y: jnp.mean(x) - x,                          # the other order: left as written
], ids=["other-array", "wrong-count", "max", "reversed"])
def test_near_misses_are_not_rewritten(fn):
    x = jnp.ones(8, jnp.float32)
    assert "center" not in [a.rule for a in jst.explain(fn, x, x)]


@pytest.mark.slow  # 7 s, a whole check: the fast tier keeps the rewrite's own accuracy tests
def test_the_verdict_sees_the_fix():
    # jst.check judges both: as written the clustered standardisation fails the default verdict
    # (stability lens), rewritten it is within the tolerance
    r = jst.check(nn_standardize, shapes=[(4, 16)], dtype="float32",
                  domain=(-1753.9305, -1753.9295), seed=0, max_examples=30)
    assert r.rewritten.max_error_bits <= 3
    assert r.original.max_error_bits > r.rewritten.max_error_bits + 8
