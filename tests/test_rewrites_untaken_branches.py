"""Untaken branches and overflowing reciprocals in the backward pass (issue 47, item 2).

- ``masked_where`` on a branch guarded by a test of its own value for NaN or inf (``isnan(c)``
  guarding ``c``: nothing in the cone has an infinite derivative, but a NaN input makes every one
  NaN), the cone copied because the test reads it too;
- ``masked_clip``: ``max``/``min``/``clamp``/``jnp.clip`` of a log or root with a constant bound, a
  where in disguise;
- ``pow_derivative`` (derivative only): ``x ** y`` with a floating exponent array holding 0;
- ``reciprocal_expm1``: ``a / expm1(u)`` and ``a / (exp(u) - 1)`` past ``expm1``'s overflow.

References are mpmath's (60 digits) from textbook derivatives, or mathematics where the derivative
is exactly 0 or a short exact expression. Bounds, in bits (``error_bits``: log2(1 + ulps)):

- values the masks and ``pow_derivative`` keep are compared bit for bit with the program as
  written (they bind the same primitives on the same values);
- gradients the masks keep are compared bit for bit with JAX's wherever JAX's are finite (the
  masked operand carries the same derivative where its branch is taken, none where it is not);
- ``a / expm1(u)`` and its derivative: 3 bits (``exp``, ``expm1`` faithful to an ulp each in XLA,
  a quotient and a product rounded: four roundings);
- each test also asserts that the program as written is wrong there (NaN or 0 for a nonzero
  derivative), so it cannot pass vacuously.
"""

from __future__ import annotations

import contextlib

import jax
import jax.numpy as jnp
import mpmath as mp
import numpy as np
import pytest
from rewrite_helpers import bits, identical

import pytest_jaxstab as jst
from pytest_jaxstab._compat import enable_x64

F32 = np.float32


@pytest.fixture(autouse=True)
def _precision():
    with mp.workdps(60):
        yield




def _applied(fn, *args):
    return {a.rule for a in jst.explain(fn, *args)}


# --------------------------------------------------------------- a branch guarded by its own NaN test
def _masked_mse(pred, target):
    """A mean squared error that skips missing targets by testing the squared residual itself."""
    sq = (pred - target) ** 2
    return jnp.sum(jnp.where(jnp.isnan(sq), 0.0, sq)) / jnp.sum(~jnp.isnan(target)).astype(sq.dtype)


def _finite_part(pred, target):
    d = pred - target
    return jnp.sum(jnp.where(jnp.isfinite(d), d * d, 0.0), axis=-1)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_a_nan_tested_branch_gets_the_gradient_of_the_observed_entries(dtype):
    rng = np.random.default_rng(4)
    pred = rng.normal(size=(6, 9)).astype(dtype)
    target = rng.normal(size=(6, 9)).astype(dtype)
    target[rng.random((6, 9)) < 0.2] = np.nan
    target[0, 0] = np.nan
    observed = ~np.isnan(target)
    with enable_x64() if dtype == np.float64 else contextlib.nullcontext():
        assert "masked_where" in _applied(_masked_mse, pred, target)
        before = jax.grad(_masked_mse)(pred, target)
        after = jax.grad(jst.stabilize(_masked_mse))(pred, target)
        assert np.isnan(np.asarray(before)[~observed]).all()  # 0 · 2·NaN, as written
        # exact: 2 (p - t) / n on observed entries (one rounding of p - t, exact doublings, one
        # division: JAX's own arithmetic there, which the mask keeps bit for bit), 0 on the others
        assert identical(np.asarray(after)[observed], np.asarray(before)[observed])
        assert (np.asarray(after)[~observed] == 0).all()
        assert identical(jst.stabilize(_masked_mse)(pred, target), _masked_mse(pred, target))


def test_an_isfinite_test_of_a_cone_member_masks_the_branch_under_vmap_and_jit():
    pred = np.array([[1.0, 2.0, 3.0], [0.5, -1.0, 4.0]], F32)
    target = np.array([[np.inf, 1.0, np.nan], [0.0, -np.inf, 2.0]], F32)
    g_before = jax.vmap(jax.grad(_finite_part))(pred, target)
    g_after = jax.jit(jax.vmap(jax.grad(jst.stabilize(_finite_part))))(pred, target)
    finite = np.isfinite(target)
    assert np.isnan(np.asarray(g_before)[~finite]).all()
    assert np.array_equal(np.asarray(g_after)[finite], 2 * (pred - target)[finite])  # exact in f32
    assert (np.asarray(g_after)[~finite] == 0).all()


def test_a_nan_test_read_elsewhere_with_a_derivative_is_left_as_written():
    # the squared residual is also returned: the cone's value has another use that carries a
    # derivative, so copying the cone for the where would leave that use's NaN as it is anyway
    def both(p, t):
        sq = (p - t) ** 2
        return jnp.sum(jnp.where(jnp.isnan(sq), 0.0, sq)) + jnp.sum(sq * 0.5)

    x = np.ones(4, F32)
    assert "masked_where" not in _applied(both, x, x)


def _masked_entropy(s, mask):
    """The entropy of a softmax over the allowed actions, the shifted scores also read by the log."""
    m = jnp.max(jnp.where(mask, s, -jnp.inf), axis=-1, keepdims=True)
    z = s - m
    e = jnp.where(mask, jnp.exp(z), 0.0)
    tot = jnp.sum(e, axis=-1, keepdims=True)
    logp = z - jnp.log(tot)
    return -jnp.sum(jnp.where(mask, (e / tot) * logp, 0.0), axis=-1)


def test_a_masked_exp_whose_operand_is_read_elsewhere_is_masked_alone():
    rng = np.random.default_rng(7)
    s = rng.normal(size=(5, 6)).astype(F32)
    mask = rng.random((5, 6)) > 0.3
    mask[:, 0] = True
    large = np.where(mask, s, F32(250.0))  # disallowed actions with scores past exp's overflow
    quiet = np.where(mask, s, F32(0.0))  # the same function of the allowed scores, no overflow
    assert "masked_where" in _applied(_masked_entropy, large, mask)
    grad = jax.grad(lambda s, m: jnp.sum(_masked_entropy(s, m)))
    before = np.asarray(grad(large, mask))
    assert np.isnan(before[~mask]).all()  # 0 * exp'(z) = 0 * inf, as written
    masked = jst.stabilize(_masked_entropy, rules=["masked_where"])
    masked_grad = jax.grad(lambda s, m: jnp.sum(masked(s, m)))
    after = np.asarray(masked_grad(large, mask))
    # the masked scores do not enter the function: its gradient is the one at the quiet scores, bit
    # for bit (the same program on the same allowed values), 0 on the disallowed actions, and as
    # accurate as JAX's own at the quiet scores against mpmath (dH/ds_i = -p_i (log p_i + H)), within
    # a bit: the entries cancel (tens of ulps between jitted and eager), so no ulp bound of its own
    assert identical(after, masked_grad(quiet, mask))
    assert (after[~mask] == 0).all()
    exact = []
    for row, keep in zip(s.astype(float), mask):
        z = [mp.exp(mp.mpf(v)) if k else mp.mpf(0) for v, k in zip(row, keep)]
        p = [t / mp.fsum(z) for t in z]
        h = -mp.fsum(q * mp.log(q) for q in p if q)
        exact.extend(-q * (mp.log(q) + h) if q else mp.mpf(0) for q in p)
    written = np.asarray(grad(quiet, mask)).ravel()
    assert np.max(bits(after.ravel(), exact)) <= np.max(bits(written, exact)) + 1
    assert identical(masked(large, mask), _masked_entropy(large, mask))
    # the whole catalogue (which also takes p·log p) keeps it finite, 0 on the disallowed actions
    whole = np.asarray(jax.grad(lambda s, m: jnp.sum(jst.stabilize(_masked_entropy)(s, m)))(large, mask))
    assert np.isfinite(whole).all() and (whole[~mask] == 0).all()


# ---------------------------------------------------------------------------------- clipped cones
def _bce(p, y):
    """Binary cross-entropy with clamped logs, as PyTorch's BCELoss clamps them at -100."""
    return -(y * jnp.clip(jnp.log(p), -100.0) + (1 - y) * jnp.clip(jnp.log(1 - p), -100.0))


def test_clamped_log_loss_has_the_clipped_functions_gradient_at_saturated_probabilities():
    p = np.array([0.0, 1.0, 0.0, 1.0, 0.25, 0.9, 1e-30], F32)
    y = np.array([0.0, 1.0, 1.0, 0.0, 1.0, 0.0, 0.0], F32)
    before = jax.vmap(jax.grad(_bce))(p, y)
    after = jax.vmap(jax.grad(jst.stabilize(_bce)))(p, y)
    assert np.isnan(np.asarray(before)[:4]).any()
    # exact: -y/p + (1 - y)/(1 - p) where no clip is active; 0 where a clip takes the bound (log p
    # below -100: the clipped function is flat there); a term times y = 0 contributes 0
    exact = []
    for pv, yv in zip(p.astype(float), y.astype(float)):
        d = mp.mpf(0)
        if yv and pv > mp.exp(-100):
            d -= mp.mpf(yv) / pv
        if (1 - yv) and 1 - pv > mp.exp(-100):
            d += mp.mpf(1 - yv) / (1 - mp.mpf(pv))
        exact.append(d)
    # 1 bit: the exact quotients round once, JAX's 1/p (p = 0.25, 0.9) rounds once more
    assert np.max(bits(after, exact)) <= 1
    # the value: bit for bit where only the clips are rewritten (the catalogue also takes log(1 - p)
    # to log1p(-p), a value change of its own)
    assert identical(jst.stabilize(_bce, rules=["masked_clip"])(p, y), _bce(p, y))


@pytest.mark.parametrize("clip", [
    lambda u: jnp.maximum(u, 1e-3),
    lambda u: -jnp.minimum(-u, -1e-3),
    lambda u: jnp.clip(u, 1e-3, 1.5),
    lambda u: jax.lax.clamp(np.float32(1e-3), u, np.float32(1.5)),
], ids=["max", "min", "clip", "clamp"])
def test_every_clip_spelling_of_a_root_keeps_jax_gradient_wherever_it_is_finite(clip):
    def f(v):
        return clip(jnp.sqrt(v)) * 3.0

    # 0 and 1e-20 (root below the lower bound), a tie at each bound (1e-6 -> 1e-3, 2.25 -> 1.5), inside, above
    v = np.array([0.0, 1e-20, 1e-6, 0.25, 2.25, 9.0], F32)
    assert "masked_clip" in _applied(f, v)
    before = np.asarray(jax.vmap(jax.grad(f))(v))
    after = np.asarray(jax.jit(jax.vmap(jax.grad(jst.stabilize(f))))(v))
    finite = np.isfinite(before)
    assert identical(after[finite], before[finite])  # ties included: JAX's half share is kept
    root = np.sqrt(v)
    bound_taken = np.asarray(clip(root)) != root
    assert (~finite & bound_taken).any()  # the case: sqrt'(0) = inf times the clip's 0, NaN as written
    assert (after[~finite & bound_taken] == 0).all()  # the clipped function is flat there
    genuine = ~finite & ~bound_taken  # sqrt'(0) = inf where no bound is taken: the function's own
    assert identical(after[genuine], before[genuine])
    assert identical(jst.stabilize(f)(v), f(v))


def test_a_clip_of_plain_arithmetic_is_left_as_written():
    x = np.ones(4, F32)
    assert "masked_clip" not in _applied(lambda x: jnp.clip(2 * x + 1, 0.0, 1.0), x)
    assert "masked_clip" not in _applied(lambda x, b: jnp.maximum(jnp.log(x), b), x, x)  # bound not constant


# ------------------------------------------------------------------------------ x ** y at y = 0
def _poly(x):
    return jnp.sum(x[..., None] ** jnp.arange(4, dtype=x.dtype), axis=-1)  # 1 + x + x² + x³


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_a_polynomial_in_powers_of_arange_has_its_derivative_at_zero(dtype):
    x = np.array([0.0, 0.0, 0.5, 2.0, -1.5], dtype)
    with enable_x64() if dtype == np.float64 else contextlib.nullcontext():
        assert "pow_derivative" in _applied(jax.grad(lambda x: _poly(x).sum()), x)
        before = jax.vmap(jax.grad(_poly))(x)
        after = jax.vmap(jax.grad(jst.stabilize(_poly)))(x)
        assert np.isnan(np.asarray(before)[:2]).all()
        exact = [1 + 2 * mp.mpf(float(v)) + 3 * mp.mpf(float(v)) ** 2 for v in x]
        assert np.max(bits(after[:2], exact[:2], dtype)) == 0  # exactly 1
        finite = np.isfinite(np.asarray(before))
        assert identical(np.asarray(after)[finite], np.asarray(before)[finite])  # JAX's elsewhere
        assert identical(jst.stabilize(_poly)(x), _poly(x))


def test_pow_derivative_in_the_exponent_and_its_gates():
    x = np.array([0.0, 2.0, 0.0], F32)
    y = np.array([0.0, 1.5, 2.0], F32)
    f = jst.stabilize(lambda x, y: jnp.sum(x ** y))
    gx, gy = jax.grad(f, argnums=(0, 1))(x, y)
    # d/dx: 0 (x**0 is 1), 1.5·2^0.5, 2·0; d/dy: x^y·log x, 0 at x = 0
    assert np.array_equal(np.asarray(gx), np.array([0.0, 1.5 * np.sqrt(F32(2)), 0.0], F32))
    assert np.asarray(gy)[0] == 0 and np.asarray(gy)[2] == 0
    assert abs(float(np.asarray(gy)[1]) - 2 ** 1.5 * np.log(2)) <= 4 * np.spacing(F32(2 ** 1.5 * np.log(2)))
    # a scalar exponent is pow_zero's (0) or needs nothing; a closed-over array without a 0 needs nothing
    assert "pow_derivative" not in _applied(lambda x: x ** 2.5, x)
    w = jnp.array([1.0, 2.0, 3.0])
    assert "pow_derivative" not in _applied(lambda x: x ** w, x)


# --------------------------------------------------------------------------------- a / expm1(u)
def _planck(u):
    return 1.0 / (jnp.exp(u) - 1.0)  # a Bose-Einstein occupancy


@pytest.mark.parametrize(("fn", "value", "slope"), [
    (_planck, lambda u: 1 / mp.expm1(u), lambda u: -mp.exp(u) / mp.expm1(u) ** 2),
    (lambda u: u / jnp.expm1(u), lambda u: u / mp.expm1(u),
     lambda u: (mp.expm1(u) - u * mp.exp(u)) / mp.expm1(u) ** 2),
], ids=["one_over_exp_minus_one", "x_over_expm1"])
def test_reciprocal_expm1_value_and_derivative_past_overflow(fn, value, slope):
    u = np.array([-30.0, -1.0, 1e-3, 0.5, 3.0, 20.0, 45.0, 60.0, 85.0], F32)
    exact_v = [value(mp.mpf(float(v))) for v in u]
    exact_d = [slope(mp.mpf(float(v))) for v in u]
    before = np.asarray(jax.vmap(jax.grad(fn))(u))
    after_v = jst.stabilize(fn)(u)
    after_d = jax.vmap(jax.grad(jst.stabilize(fn)))(u)
    assert "reciprocal_expm1" in _applied(fn, u)
    assert np.max(bits(before, exact_d)) >= 20  # expm1(u)² overflows past u = 44: 0 or NaN
    assert np.max(bits(after_v, exact_v)) <= 3
    # the derivative away from 0: below |u| ~ 0.5, u·(1/expm1)' + 1/expm1 cancels in autodiff's
    # product rule, as written and after alike (about 9 bits at 1e-3); not what this rule repairs
    away = np.abs(u) >= 0.5
    assert np.max(bits(np.asarray(after_d)[away], np.array(exact_d, dtype=object)[away])) <= 3
