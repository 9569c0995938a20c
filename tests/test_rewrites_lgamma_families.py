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


# ------------------------------------------- betaln calls read by lgamma_sum, with a paired derivative
# A beta-binomial's log-pmf written with jax.scipy.special.betaln: the calls' lgamma terms cancel
# against the others at large counts. lgamma_sum reads each call as lgamma(P) + lgamma(Q) - lgamma(P + Q)
# and pairs across the calls (value), and its derivative is paired per variable (forms._gamma_sum):
# each element takes the pairing of digamma terms with the least magnitude, the calls' own
# (psi(P) - psi(P + Q), JAX's derivative) among them. References: mpmath from the lgamma terms.
def _beta_binomial(n, k, a, b):
    return (jss.gammaln(n + 1) - jss.gammaln(k + 1) - jss.gammaln(n - k + 1)
            + jss.betaln(k + a, n - k + b) - jss.betaln(a, b))


# its terms: (sign, {argument: coefficient}, constant) over (n, k, a, b)
_BB_TERMS = ((1, {0: 1}, 1), (-1, {1: 1}, 1), (-1, {0: 1, 1: -1}, 1), (1, {1: 1, 2: 1}, 0),
             (1, {0: 1, 1: -1, 3: 1}, 0), (-1, {0: 1, 2: 1, 3: 1}, 0), (-1, {2: 1}, 0), (-1, {3: 1}, 0),
             (1, {2: 1, 3: 1}, 0))
# large counts (the value loses 12-18 bits as written, the derivatives 11-30) and ordinary ones
_BB_LARGE = [[1e6, 3e5, 2.5, 7.0], [3e4, 1.0, 0.3, 4e3], [2e5, 1e5, 40.0, 0.5], [4e4, 17.0, 1e3, 2.5]]
_BB_ORDINARY = [[10.0, 3.0, 0.5, 1.5], [25.0, 9.0, 2.0, 3.5]]


def _arg(term, row):
    return mp.fsum(c * M(row[v]) for v, c in term[1].items()) + term[2]


def _bb_value(row):
    return mp.fsum(s * mp.loggamma(_arg((s, f, c), row)) for s, f, c in _BB_TERMS)


def _bb_derivative(row, v):
    return mp.fsum(s * f.get(v, 0) * mp.digamma(_arg((s, f, c), row)) for s, f, c in _BB_TERMS)


def _cols(rows, dtype):
    x = np.array(rows, dtype)
    return [x[:, j] for j in range(x.shape[1])]


@pytest.mark.slow  # two betaln calls (600 equations each) and the forms compiled: 7-10 s per dtype
@pytest.mark.parametrize("dtype", [F32, F64], ids=["float32", "float64"])
def test_beta_binomial_with_betaln_calls_at_large_counts(dtype):
    with jax.enable_x64(dtype == F64):
        cols = _cols(_BB_LARGE, dtype)
        ref = [_bb_value(r) for r in np.array(_BB_LARGE, dtype)]
        assert _bits(jax.jit(_beta_binomial)(*cols), ref, dtype).max() > 11
        assert "lgamma_sum" in _fired(_beta_binomial, *cols)
        # three or four groups of one sign each within a few ulps; where they still cancel among
        # themselves (log2(sum |g| / |sum g|) <= 2 bits here) that is added: 5 bits in all
        assert _bits(jax.jit(jst.stabilize(_beta_binomial))(*cols), ref, dtype).max() <= 5


@pytest.mark.slow  # the stabilised program's derivative compiled in two dtypes: about 6 s
@pytest.mark.parametrize("dtype", [F32, F64], ids=["float32", "float64"])
def test_beta_binomial_derivative_is_paired_and_never_worse_than_as_written(dtype):
    rows = _BB_LARGE + _BB_ORDINARY
    with jax.enable_x64(dtype == F64):
        cols = _cols(rows, dtype)
        grad = lambda f: jax.jit(jax.grad(lambda *c: jnp.sum(f(*c)), argnums=(0, 1, 2, 3)))
        written, fixed = grad(_beta_binomial)(*cols), grad(jst.stabilize(_beta_binomial))(*cols)
        exact = np.array(rows, dtype)
        before = np.stack([_bits(written[v], [_bb_derivative(r, v) for r in exact], dtype) for v in range(4)])
        after = np.stack([_bits(fixed[v], [_bb_derivative(r, v) for r in exact], dtype) for v in range(4)])
    large = slice(0, len(_BB_LARGE))
    assert before[:, large].max() > 20  # as written: psi(n + 1) - psi(n - k + 1) and across the calls
    # the paired pieces are each within a few ulps; at [1e6, 3e5, 2.5, 7] the best pairing's two pieces
    # (-8.5e-6 and 8.6e-6) still cancel to 7e-8, 8 bits that only a second difference would remove
    assert after[:, large].max() <= 8.5
    # nowhere worse beyond rounding: where the written derivative is already a sum of accurate pieces
    # that cancel (the ordinary points, psi differences of 0.39 and 0.36 summing to 0.02), one ulp of a
    # piece is 4 bits of the result, whichever program rounds it
    assert np.all(after <= np.maximum(before, 2.0) + 2.0), (before, after)


@pytest.mark.slow  # the rewritten program with its two betaln calls compiled: about 8 s
def test_a_betaln_call_outside_its_domain_keeps_the_written_value():
    # n - k + b <= 0: the second call's argument is not positive, the sum is the written one there
    cols = _cols([[4.0, 9.0, 1.5, 2.0], [30.0, 40.0, 2.0, 3.0], [1e5, 2e4, 3.0, 5.0]], F32)
    got = np.asarray(jax.jit(jst.stabilize(_beta_binomial))(*cols))
    written = np.asarray(jax.jit(_beta_binomial)(*cols))
    np.testing.assert_array_equal(got[:2], written[:2])
    assert _bits(got[2:], [_bb_value(np.array(r, F32)) for r in [[1e5, 2e4, 3.0, 5.0]]], F32).max() <= 3


def test_a_lone_betaln_call_is_left_to_jax():
    # a Beta log-density's one call: nothing pairs across calls, JAX's betaln is accurate
    if tuple(int(v) for v in jax.__version__.split(".")[:2]) < (0, 11):
        pytest.skip("jax 0.10 inlines betaln: its lgamma terms are the program's own, read as any others")
    fn = lambda x, a, b: (a - 1) * jnp.log(x) + (b - 1) * jnp.log1p(-x) - jss.betaln(a, b)
    cols = _cols([[0.3, 2.0, 5.0], [0.9, 40.0, 1.5]], F32)
    assert "lgamma_sum" not in _fired(fn, *cols)


def test_log_binomial_derivative_in_k_is_paired():
    # d/dk [lgamma(n + 1) - lgamma(k + 1) - lgamma(n - k + 1)] = psi(n - k + 1) - psi(k + 1): near
    # k = n/2 the written derivative subtracts two digammas of 13; paired, it is
    # digamma_difference(k + 1, n - 2k) with n - 2k exact (integers below 2^24): within 2 bits
    fn = lambda n, k: jss.gammaln(n + 1) - jss.gammaln(k + 1) - jss.gammaln(n - k + 1)
    n, k = np.array([1e6, 4e6, 2e5], F32), np.array([5e5 - 3, 2e6 - 50, 1e5 - 1], F32)
    dref = [mp.digamma(M(a) - M(b) + 1) - mp.digamma(M(b) + 1) for a, b in zip(n, k)]
    written = jax.grad(lambda k: jnp.sum(fn(n, k)))(k)
    fixed = jax.jit(jax.grad(lambda k: jnp.sum(jst.stabilize(fn)(n, k))))(k)
    assert _bits(written, dref, F32).max() > 10
    assert _bits(fixed, dref, F32).max() <= 2


_RATIO = lambda a, b, c: jss.betaln(a + c, b) - jss.betaln(a, b)  # log B(a + c, b) / B(a, b)


@pytest.mark.slow  # the soundness machinery over 12 inputs in three contexts: about 30 s each
@pytest.mark.parametrize(("fn", "shapes", "domain"), [
    (_beta_binomial, ((8,),) * 4, (0.5, 1e5)),
    (_RATIO, ((8,),) * 3, (-20.0, 20.0)),  # poles, negative arguments: the written value and derivative
], ids=["beta_binomial", "betaln_ratio"])
def test_reading_betaln_calls_is_sound_in_value_and_gradient(fn, shapes, domain):
    import dataclasses

    from pytest_jaxstab.rewrites import STABILITY, get

    # lgamma_sum's own example has no betaln call (the verifier builds one program per structural
    # rule): the same rule, judged on programs with calls
    rule = dataclasses.replace(get("lgamma_sum"), example=fn, example_shapes=shapes, example_domain=domain)
    report = jst.verify_rule(rule, companions=STABILITY, contexts=("jit", "grad", "sum"))
    assert report.unsound == [], str(report)
    assert [a.status for a in report.alternatives] == ["sound"], str(report)
