"""Backward passes repaired (issue 47): derivatives that cancel or meet ``0 · inf`` where the true
derivative is a normal float (``catalogue/_stability_backward.py``, ``forms/_backward.py``,
``rewrites/_tangent.py``, ``masked_where`` in ``engine/_guards.py``).

References are mpmath's (60 digits) from textbook derivatives, or mathematics where the derivative is
exactly 0 or 1. Bounds, in ulps against the reference rounded to the dtype (``error_bits``: bits =
log2(1 + ulps)):

- values the rules keep are compared bit for bit with the program as written;
- ``exp(x)`` for ``expm1(x) + 1``: 1 ulp (one correctly rounded-or-faithful ``exp``, 2 bits allowed
  for XLA's ``exp`` being faithful, not correctly rounded);
- ``sin(y)/y``'s derivative: 4 bits (the series or the closed form: a few roundings, and the closed
  form at ``|y| >= 1`` cancels by at most a factor 3);
- ``I0' = exp|x| · i1e(x)``: 4 bits (XLA's ``i1e`` is a polynomial fit good to a few ulps, times
  an ``exp`` and one rounding);
- each test also asserts that the derivative as written is wrong there (NaN, 0, or off by more
  than the bound), so it cannot pass vacuously.
"""

from __future__ import annotations

import contextlib

import jax
import jax.numpy as jnp
import mpmath as mp
import numpy as np
import pytest
from jax import lax
from rewrite_helpers import bits, identical

import pytest_jaxstab as jst
from pytest_jaxstab._compat import enable_x64

F32 = np.float32


@pytest.fixture(autouse=True)
def _precision():
    with mp.workdps(60):
        yield


_bits, _identical = bits, identical


# ------------------------------------------------------------------------ expm1(x) + 1 -> exp(x)
@jax.custom_jvp
def _expm1_old_rule(x):
    return lax.expm1(x)


@_expm1_old_rule.defjvp
def _expm1_old_rule_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    ans = lax.expm1(x)
    return ans, t * (ans + 1.0)  # the textbook spelling of expm1' (JAX's own rule before 0.4)


def _celu(x):
    return jnp.where(x > 0, x, _expm1_old_rule(jnp.where(x > 0, 0.0, x)))


def test_expm1_plus_one_repairs_a_custom_rule_through_jvp_rule():
    x = np.array([-30.0, -20.0, -17.5, -3.0, -0.5, -1e-3], F32)
    exact = [mp.exp(mp.mpf(float(v))) for v in x]
    before = jax.vmap(jax.grad(_celu))(x)
    after = jax.vmap(jax.grad(jst.stabilize(_celu)))(x)
    assert np.max(_bits(before, exact)) > 20  # ans + 1 rounds to 1 - 1... then 0: all bits lost
    assert np.max(_bits(after, exact)) <= 2
    assert _identical(jst.stabilize(_celu)(x), _celu(x))  # the value: the same expm1


def test_expm1_plus_one_value_is_exp():
    x = np.array([-40.0, -20.0, -1.0, 0.0, 1e-5, 3.0, 80.0], F32)
    got = jst.stabilize(lambda x: jnp.expm1(x) + 1)(x)
    assert np.max(_bits(got, [mp.exp(mp.mpf(float(v))) for v in x])) <= 2
    assert jst.explain(lambda x: jnp.expm1(x) + 1, x).rules == ["expm1_plus_one"]


# -------------------------------------------------------------------------------- pow(x, 0) -> 1
def _focal(x):
    # a focal loss's modulating factor (1 - p)**gamma with gamma = 0, times a cross-entropy
    return jnp.sum((1 - jax.nn.sigmoid(x)) ** 0.0 * jax.nn.softplus(-x))


def test_pow_zero_keeps_the_value_and_drops_the_infinite_partial():
    x = np.array([0.0, 0.0, 1.0, np.inf, np.nan, -2.0], F32)
    f = jst.stabilize(lambda x: x ** 0.0)
    assert _identical(f(x), x ** 0.0) and _identical(f(x), jnp.ones_like(x))
    assert np.isnan(jax.grad(lambda x: x ** 0.0)(F32(0.0)))
    assert jax.grad(f)(F32(0.0)) == 0.0


def test_pow_zero_fixes_a_saturated_focal_loss():
    x = np.array([40.0, 2.0, -3.0], F32)  # sigmoid(40) = 1 in float32: (1 - p) = 0
    exact = [-1 / (1 + mp.exp(mp.mpf(float(v)))) for v in x]  # d softplus(-x)/dx = -sigmoid(-x)
    assert np.isnan(jax.grad(_focal)(x)[0])
    assert np.max(_bits(jax.grad(jst.stabilize(_focal))(x), exact)) <= 2


# ------------------------------------------------------------------------------------ sin(y) / y
def _dsinc(y):
    y = mp.mpf(float(y))
    return (y * mp.cos(y) - mp.sin(y)) / (y * y)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_sin_quotient_derivative_near_zero_and_away(dtype):
    with enable_x64() if dtype == np.float64 else contextlib.nullcontext():
        y = np.array([1e-6, -3e-4, 1e-2, 0.3, -0.999, 1.0, 2.5, -7.0], dtype)
        fn = lambda y: jnp.sin(y) / y
        exact = [_dsinc(v) for v in y]
        before = jax.vmap(jax.grad(fn))(y)
        after = jax.vmap(jax.grad(jst.stabilize(fn)))(y)
        if dtype == np.float32:
            assert np.max(_bits(before, exact, dtype)) > 8
        assert np.max(_bits(after, exact, dtype)) <= 4
        assert _identical(jst.stabilize(fn)(y), fn(y))


# ------------------------------------------------------------------------- exp(|x|) · i0e(x) = I0
def test_i0_scaled_derivative_is_i1():
    x = np.array([1e-7, -1e-6, 1e-3, 0.5, -2.0, 10.0], F32)
    fn = lambda x: jnp.exp(jnp.abs(x)) * lax.bessel_i0e(x)
    exact = [mp.besseli(1, mp.mpf(float(v))) for v in x]
    before = jax.vmap(jax.grad(fn))(x)
    after = jax.vmap(jax.grad(jst.stabilize(fn)))(x)
    assert np.max(_bits(before, exact)) > 8
    assert np.max(_bits(after, exact)) <= 4
    assert _identical(jst.stabilize(fn)(x), fn(x))


# ------------------------------------------------------------------------- a · sqrt(b), a = 0
def _column(v):
    # a Cholesky-style column: entries above the diagonal are structurally 0, each scaled by the
    # root of what is left of its row's unit norm (exhausted, 0, for a finished row)
    a = jnp.array([0.0, 1.0, 1.0], F32) * v
    rest = 1 - jnp.array([1.0, 0.25, 0.0], F32) * v * v
    return jnp.sum(a * jnp.sqrt(rest))


def test_mul_sqrt_zero_structural_zero_has_zero_partial():
    v = F32(1.0)
    # d/dv [v sqrt(1 - v²/4) + v] at 1: sqrt(3/4) - (1/4)/sqrt(3/4) + 1, in mpmath
    exact = mp.sqrt(mp.mpf(3) / 4) - mp.mpf(1) / 4 / mp.sqrt(mp.mpf(3) / 4) + 1
    assert np.isnan(jax.grad(_column)(v))
    got = jax.grad(jst.stabilize(_column))(v)
    assert np.max(_bits([got], [exact])) <= 2


def test_mul_sqrt_zero_leaves_ordinary_gradients_as_jax_computes_them():
    fn = lambda a, b: jnp.sum(a * jnp.sqrt(b))
    a = np.array([0.5, -2.0, 3.0], F32)
    b = np.array([0.25, 4.0, 1e-3], F32)
    g0, g1 = jax.grad(fn, (0, 1))(a, b), jax.grad(jst.stabilize(fn), (0, 1))(a, b)
    assert _identical(g0[0], g1[0]) and _identical(g0[1], g1[1])


# ------------------------------------------------------------------ masked where, keepdims operand
def test_masked_where_sees_through_a_keepdims_operand():
    mask = np.array([True, False, True])

    def lse(a):  # the max over the kept entries, keepdims, subtracted before exp
        m = lax.stop_gradient(jnp.max(a, where=mask, initial=-np.inf, keepdims=True))
        return jnp.log(jnp.sum(lax.exp(lax.sub(a, m)), where=mask)) + m[0]

    a = np.array([1.0, 200.0, 2.0], F32)
    kept = [mp.mpf(1), mp.mpf(2)]
    z = mp.fsum(mp.exp(k) for k in kept)
    exact = [mp.exp(kept[0]) / z, mp.mpf(0), mp.exp(kept[1]) / z]
    assert np.isnan(jax.grad(lse)(a)[1])
    assert np.max(_bits(jax.grad(jst.stabilize(lse))(a), exact)) <= 2


# -------------------------------------------------------------- the derivative as a program
def test_derivative_program_repairs_the_jvp_and_composes():
    def f(x):
        return jnp.sum(x ** 0.0 * jnp.log1p(x))

    x = np.array([0.0, 1.0, 3.0], F32)
    exact = [1 / (1 + mp.mpf(float(v))) for v in x]
    plain = jst.stabilize(f, exclude=["pow_zero"])  # the primal rule off: only the JVP can fix it
    prog = jst.stabilize(f, exclude=["pow_zero"], derivatives="program")
    assert np.isnan(jax.grad(plain)(x)[0])
    for g in (jax.grad(prog), jax.jit(jax.grad(prog))):
        assert np.max(_bits(g(x), exact)) <= 2
    batched = jax.vmap(jax.grad(prog))(np.stack([x, x]))
    assert np.max(_bits(batched[1], exact)) <= 2
    assert _identical(prog(x), plain(x))  # values bit for bit


def test_derivative_program_repairs_a_custom_rule_without_jvp_rule():
    x = np.array([-20.0, -1.0], F32)
    exact = [mp.exp(mp.mpf(float(v))) for v in x]
    prog = jst.stabilize(_celu, exclude=["jvp_rule"], derivatives="program")
    assert np.max(_bits(jax.vmap(jax.grad(jst.stabilize(_celu, exclude=["jvp_rule"])))(x), exact)) > 20
    assert np.max(_bits(jax.vmap(jax.grad(prog))(x), exact)) <= 2


def test_derivative_program_with_integer_inputs_and_custom_vjp():
    @jax.custom_vjp
    def cv(x):
        return jnp.sin(x)

    cv.defvjp(lambda x: (jnp.sin(x), x), lambda r, g: (g * jnp.cos(r),))
    x = np.array([0.0, 1.0], F32)
    f = jst.stabilize(lambda x, n: jnp.sum(x ** 0.0 * n.astype(x.dtype) + cv(x)), exclude=["pow_zero"],
                      derivatives="program")
    # the custom_vjp keeps JAX's derivative (no JVP program): cos(x), and x**0's NaN stays
    g = jax.grad(f)(x, np.arange(2))
    assert g[1] == np.cos(F32(1.0))


def test_derivatives_option_is_checked():
    with pytest.raises(jst.ArgumentError, match="derivatives='tangent'"):
        jst.stabilize(jnp.sin, derivatives="tangent")


# ------------------------------------------------------------------ log_softmax's cotangent
def test_log_softmax_cotangent_keeps_the_complement_of_a_dominant_entry():
    # d/dz_j sum_i w_i log_softmax(z)_i = w_j - s_j sum(w): for the dominant entry with w = e_j it
    # is 1 - s_j = sum of the others' probabilities, ~1e-9 here, which autodiff rounds to 0
    w = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]], F32)
    z = np.array([[20.0, 1.0, -2.0], [0.5, 0.1, 25.0]], F32)

    def loss(z):
        return jnp.sum(jax.nn.log_softmax(z, axis=-1) * w)

    exact = []
    for row, wr in zip(z, w):
        zs = [mp.mpf(float(v)) for v in row]
        total = mp.fsum(mp.exp(v) for v in zs)
        exact += [mp.mpf(float(wj)) - mp.exp(zj) / total * mp.fsum(mp.mpf(float(v)) for v in wr)
                  for zj, wj in zip(zs, wr)]
    before = np.ravel(jax.grad(loss)(z))
    after = np.ravel(jax.grad(jst.stabilize(loss))(z))
    assert np.max(_bits(before, exact)) > 20
    assert np.max(_bits(after, exact)) <= 2
    forward = np.ravel(jax.jacfwd(jst.stabilize(loss))(z))  # the same linear map, forward
    assert np.max(_bits(forward, exact)) <= 2
