"""Log-gamma families of real densities (issue 47): a Dirichlet's log-normaliser, the incomplete gamma's
lower tail, ``jax.scipy.stats.gamma.logsf`` through its ``where``.

Each case is written as a user (or the library) writes it, at inputs where the written program fails
(checked here, so a test cannot pass vacuously), and judged against mpmath (40 digits) in value and
derivative:

- ``log_beta_multivariate``: ``sum(gammaln(alpha)) - gammaln(sum(alpha))`` (numpyro's Dirichlet
  ``normalize_term``) and its negation. The form is a sum of ``n - 1`` betaln terms of one sign
  (each within about 2 ulps: Stirling's form with ``log1p``): within 3 bits, its derivative
  ``digamma(alpha_j) - digamma(sum)`` (the terms' own derivatives, telescoping) within 3. A row with a
  non-positive element keeps the written form bit for bit (a property, not a figure).
- ``log_gamma_lower``: ``log(gammainc(a, x))`` (``gamma.logcdf``) far below the mean, -inf as
  written: a series of terms of one sign and a prefactor without cancellation, within 2 bits; its
  derivative ``x^(a-1) e^-x / (Gamma(a) P)`` within 3 (autodiff of the same terms).
- ``log_gamma_tail`` through ``log_where``: ``gamma.logsf`` is ``log(where(y < 0, 1, Q))``; past Q's
  underflow it is -inf as written and within 2 bits here, its derivative within 2 bits where JAX's
  own is.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import jax.scipy.special as jss
import jax.scipy.stats as st
import mpmath as mp
import numpy as np
import pytest

import pytest_jaxstab as jst

mp.mp.dps = 40
F32, F64 = np.float32, np.float64
M = lambda v: mp.mpf(float(v))


def _bits(got, refs, dtype):
    """Bits of error per element (``jst.oracles.error_bits``) against mpmath values."""
    exact = np.array([float(r) for r in refs], np.float64).astype(dtype)
    return jst.oracles.error_bits(np.asarray(got, dtype).ravel(), exact)


def _fired(fn, *args):
    return {r.rule for r in jst.explain(fn, *args)}


def _grad(fn, argnum=0):
    return jax.grad(lambda *a: jnp.sum(fn(*a)), argnums=argnum)


# --------------------------------------------------------------------------- log_beta_multivariate
def _dirichlet_normalize_term(alpha):
    """numpyro's Dirichlet: ``sum(gammaln(c), -1) - gammaln(sum(c, -1))``."""
    return jnp.sum(jss.gammaln(alpha), axis=-1) - jss.gammaln(jnp.sum(alpha, axis=-1))


# one large concentration among small ones: log B is tens or hundreds, its terms 1e7
_ALPHA = np.array([[1e6, 0.5, 2.0, 0.1], [4e5, 7.5, 30.0, 0.3], [3e4, 1.0, 3e4, 1.0]], F32)


def _log_beta(row):
    return mp.fsum(mp.loggamma(M(v)) for v in row) - mp.loggamma(mp.fsum(M(v) for v in row))


def test_dirichlet_log_normaliser_at_large_concentrations():
    fn = _dirichlet_normalize_term
    ref = [_log_beta(r) for r in _ALPHA]
    assert _bits(jax.jit(fn)(_ALPHA), ref, F32).max() > 12
    assert "log_beta_multivariate" in _fired(fn, _ALPHA)
    assert _bits(jax.jit(jst.stabilize(fn))(_ALPHA), ref, F32).max() <= 3


@pytest.mark.slow  # three compiled programs (the derivatives): about 2 s
def test_dirichlet_log_normaliser_derivative():
    fn = _dirichlet_normalize_term
    fixed = jst.stabilize(fn)
    # d/dalpha_j = digamma(alpha_j) - digamma(sum(alpha)); as written digamma(sum) cancels too
    dref = [mp.digamma(M(v)) - mp.digamma(mp.fsum(M(u) for u in r)) for r in _ALPHA for v in r]
    assert _bits(jax.jit(_grad(fn))(_ALPHA), dref, F32).max() > 10
    assert _bits(jax.jit(_grad(fixed))(_ALPHA), dref, F32).max() <= 3


def test_dirichlet_log_normaliser_negated_in_float64():
    fn = lambda a: jss.gammaln(jnp.sum(a, -1)) - jnp.sum(jss.gammaln(a), -1)
    with jax.enable_x64(True):
        alpha = np.array([[3e12, 0.25, 2.5], [1e9, 1.0, 0.5]], F64)
        ref = [-_log_beta(r) for r in alpha]
        assert _bits(fn(alpha), ref, F64).max() > 16
        assert _bits(jax.jit(jst.stabilize(fn))(alpha), ref, F64).max() <= 3


def test_a_row_outside_the_dirichlet_domain_keeps_the_written_form():
    alpha = np.array([[2.5, -0.5, 4.0], [3.0, 0.0, 1.0], [1.5, 2.0, 3.0]], F32)
    got = np.asarray(jax.jit(jst.stabilize(_dirichlet_normalize_term))(alpha))
    written = np.asarray(jax.jit(_dirichlet_normalize_term)(alpha))
    np.testing.assert_array_equal(got[:2], written[:2])
    assert _bits(got[2:], [_log_beta(alpha[2])], F32).max() <= 2


# ------------------------------------------------------------------ gamma.logsf through its where
def test_gamma_logsf_past_the_tails_underflow():
    x = np.array([120.0, 250.0, 1e3, -1.0], F32)
    a = np.array([3.0, 40.0, 300.0, 2.0], F32)
    fn = lambda x, a: st.gamma.logsf(x, a)

    def q(p, s):
        return mp.gammainc(M(s), M(p), mp.inf, regularized=True)

    ref = [mp.log(q(p, s)) for p, s in zip(x[:3], a[:3])] + [0.0]
    assert np.all(np.isinf(np.asarray(fn(x, a))[:3]))
    assert {"log_where", "log_gamma_tail"} <= _fired(fn, x, a)
    fixed = jst.stabilize(fn)
    assert _bits(jax.jit(fixed)(x, a), ref, F32).max() <= 2


@pytest.mark.slow  # the incomplete gamma kernels compiled again for the derivative: about 2 s
def test_gamma_logsf_derivative_past_the_tails_underflow():
    x = np.array([120.0, 250.0, 1e3], F32)
    a = np.array([3.0, 40.0, 300.0], F32)
    fixed = jst.stabilize(lambda x, a: st.gamma.logsf(x, a))

    def q(p, s):
        return mp.gammainc(M(s), M(p), mp.inf, regularized=True)

    # d/dx log Q = -x^(a-1) e^-x / (Gamma(a) Q); as written -inf - -inf = NaN
    dref = [-mp.exp(-M(p) + (M(s) - 1) * mp.log(M(p)) - mp.loggamma(M(s))) / q(p, s)
            for p, s in zip(x, a)]
    assert _bits(jax.jit(_grad(fixed))(x, a), dref, F32).max() <= 2


# ------------------------------------------------------------- log(gammainc) below its underflow
def _lower(p, s):
    return mp.gammainc(M(s), 0, M(p), regularized=True)


_XL = np.array([1.0, 1e-25, 10.0, 3e-5], F32)
_AL = np.array([50.0, 2.0, 300.0, 12.0], F32)


def test_gamma_logcdf_below_the_lower_tails_underflow():
    fn = lambda x, a: st.gamma.logcdf(x, a)
    ref = [mp.log(_lower(p, s)) for p, s in zip(_XL, _AL)]
    assert np.all(np.isinf(np.asarray(jax.jit(fn)(_XL, _AL))))
    assert "log_gamma_lower" in _fired(fn, _XL, _AL)
    assert _bits(jax.jit(jst.stabilize(fn))(_XL, _AL), ref, F32).max() <= 2


@pytest.mark.slow  # the incomplete gamma kernels compiled again for the derivative: about 2 s
def test_log_gammainc_derivative_below_the_underflow():
    fixed = jst.stabilize(lambda x, a: jnp.log(jss.gammainc(a, x)))
    dref = [mp.exp(-M(p) + (M(s) - 1) * mp.log(M(p)) - mp.loggamma(M(s))) / _lower(p, s)
            for p, s in zip(_XL, _AL)]
    assert _bits(jax.jit(_grad(fixed))(_XL, _AL), dref, F32).max() <= 3
