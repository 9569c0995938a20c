"""Identities real library code needs (issue 47): logs of products, complements of the regularised
incomplete functions, logs of the modified Bessel functions, masked classes under a label weight.

Each case is written as a user writes it, at inputs where the written program fails (checked here,
so a test cannot pass vacuously), and judged against mpmath (40 digits) in value and derivative:

- ``log_factors``: ``log(a·b·c)``, ``log(x**12)``, ``log(1/(2B)**d)``, ``log(s/prod(x))`` whose
  product is 0 or inf; the form is a sum of ``k·log|f|`` (each log within half an ulp, the sum of a
  few terms of one sign): within 2 bits. Where the product is a normal float the program's own
  ``log(p)`` is kept bit for bit (a property, not a figure).
- ``incomplete_gamma_complement`` / ``betainc_complement``: ``1 - P(a, x)``, ``1 - Q``,
  ``log1p(-P)``, ``1 - I_x(a, b)`` near ``x = 1``: the complement is JAX's own ``igammac``/``betainc``,
  whose accuracy bounds the result; the tolerance is what JAX's function itself reaches at those
  points (measured against mpmath in the same test) plus 1 bit. ``log_gamma_tail``: ``log Q`` past
  Q's underflow within 2 bits (a continued fraction's log and a prefactor without cancellation).
- ``log_bessel``: ``log(i0(x))`` and ``log(i1(x))`` where ``I`` overflows, and ``log(i0(x))`` near 0
  (the series); ``log(2π·i0(k))`` through ``log_factors``: within 2 bits, derivatives ``I1/I0`` and
  ``I0/I1 - 1/x`` within 3 (a quotient of two library values, each within an ulp or two).
- ``masked_log_prob`` (and ``one_hot_nll``'s soft-label rows): ``-sum(t·log_softmax(x))`` with
  ``-inf`` logits weighted 0 is the cross-entropy over the other classes, not NaN.
- ``jst.stabilize(jax.scipy.special.betaln)`` runs (``masked_where`` left a branch's shared equation
  unbound: a KeyError at lowering).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import jax.scipy.special as jss
import mpmath as mp
import numpy as np
import pytest

import pytest_jaxstab as jst

mp.mp.dps = 40
F32, F64 = np.float32, np.float64


def _bits(got, refs, dtype):
    """Bits of error per element (``jst.oracles.error_bits``) against mpmath values."""
    exact = np.array([float(r) for r in refs], np.float64).astype(dtype)
    return jst.oracles.error_bits(np.asarray(got, dtype).ravel(), exact)


def _fired(fn, *args):
    return {r.rule for r in jst.explain(fn, *args)}


def _together(*fns):
    """One jitted program computing every function on the same arguments: the incomplete gamma and
    beta kernels are compiled once for all of them (each compile costs about half a second)."""
    return jax.jit(lambda *args: tuple(f(*args) for f in fns))


def _grad(fn, argnum=0):
    return jax.grad(lambda *a: jnp.sum(fn(*a)), argnums=argnum)


M = lambda v: mp.mpf(float(v))


# ------------------------------------------------------------------------------------ log_factors
def _likelihood_of_independent_factors(a, b, c):
    """A likelihood written as the log of the product of per-factor probabilities."""
    return jnp.log(a * b * c)


def test_log_of_a_product_that_underflows_is_the_sum_of_the_logs():
    a = np.array([1e-20, 3e-25, 2e-30, 0.5], F32)
    b = np.array([2e-30, 1e-20, 1e-15, 0.25], F32)
    c = np.array([5e-10, 1e-3, 1e-10, 3.0], F32)
    fn = _likelihood_of_independent_factors
    ref = [mp.log(M(p)) + mp.log(M(q)) + mp.log(M(r)) for p, q, r in zip(a, b, c)]
    assert _bits(fn(a, b, c), ref, F32).max() == 32  # as written: log(0) = -inf
    fixed = jst.stabilize(fn)
    assert "log_factors" in _fired(fn, a, b, c)
    assert _bits(jax.jit(fixed)(a, b, c), ref, F32).max() <= 2
    # d/da log(a·b·c) = 1/a (as written: the product's 1/p·b·c is inf·0 or inf)
    assert _bits(_grad(fixed)(a, b, c), [1 / M(p) for p in a], F32).max() <= 2


def _uniform_box_log_density(b, d=12):
    """The log-density of a uniform box [-B, B]^d, written as the density's log."""
    return jnp.log(1.0 / (2.0 * b) ** d)


def test_log_of_a_power_that_overflows_keeps_its_value_and_derivative():
    b = np.array([1e3, 5e4, 1e5, 0.7], F32)
    ref = [-12 * mp.log(2 * M(v)) for v in b]
    assert _bits(jax.jit(_uniform_box_log_density)(b), ref, F32).max() == 32
    fixed = jst.stabilize(_uniform_box_log_density)
    assert _bits(jax.jit(fixed)(b), ref, F32).max() <= 2
    # d/dB = -12/B; as written the overflowed (2B)**12 makes it 0·inf = NaN
    assert not np.all(np.isfinite(_grad(_uniform_box_log_density)(b)))
    assert _bits(jax.jit(_grad(fixed))(b), [-12 / M(v) for v in b], F32).max() <= 2


@pytest.mark.parametrize("spelling", [
    lambda x: jnp.log(x ** 12),
    lambda x: -jnp.log(x ** -12),
    lambda x: 6 * jnp.log(jnp.square(x) * x ** 10) / 6,
], ids=["pow", "neg-pow", "square-times-pow"])
def test_every_spelling_of_a_large_power_under_a_log(spelling):
    x = np.array([-3e4, 2e-9, 1e5], F32)
    ref = [12 * mp.log(abs(M(v))) for v in x]
    fixed = jst.stabilize(spelling)
    assert _bits(jax.jit(fixed)(x), ref, F32).max() <= 2
    assert _bits(jax.jit(_grad(fixed))(x), [12 / M(v) for v in x], F32).max() <= 2


def test_log_of_a_quotient_by_a_product_and_its_sign():
    s = np.array([3.0, -3.0], F32)
    x = np.full((2, 16), 1e5, F32)
    fn = lambda s, x: jnp.log(s / jnp.prod(x, axis=-1))
    got = np.asarray(jax.jit(jst.stabilize(fn))(s, x))
    ref = mp.log(3) - 16 * mp.log(M(1e5))
    assert _bits(got[:1], [ref], F32).max() <= 2
    assert np.isnan(got[1])  # the log of a negative quotient stays NaN, as written
    g = np.asarray(_grad(jst.stabilize(fn), 1)(s[:1], x[:1]))
    assert _bits(g, [-1 / M(1e5)] * 16, F32).max() <= 2


def test_a_product_in_range_keeps_the_programs_log_bit_for_bit():
    rng = np.random.default_rng(0)
    a, b, c = (rng.uniform(0.01, 100.0, 64).astype(F32) for _ in range(3))
    fn = _likelihood_of_independent_factors
    np.testing.assert_array_equal(np.asarray(jax.jit(jst.stabilize(fn))(a, b, c)),
                                  np.asarray(jax.jit(fn)(a, b, c)))


def test_a_single_factor_is_left_to_the_program():
    x = np.ones(4, F32)
    assert "log_factors" not in _fired(lambda x: jnp.log(2.0 * x), x)
    assert "log_factors" not in _fired(lambda x: jnp.log(x / 3.0), x)


# ---------------------------------------------------------------------- incomplete gamma and beta
# chi² and gamma upper tails written 1 - cdf: 1 - P rounds to 0 or keeps an ulp of 1
_A = np.array([1.5, 2.0, 5.0, 0.5], F32)
_X = np.array([30.0, 50.0, 40.0, 20.0], F32)


def _survival(a, x):
    return 1 - jss.gammainc(a, x)


def test_survival_function_written_as_one_minus_the_cdf():
    ref = [mp.gammainc(M(p), M(q), regularized=True) for p, q in zip(_A, _X)]
    written, library, got = _together(_survival, lambda a, x: jss.gammaincc(a, x),
                                      jst.stabilize(_survival))(_A, _X)
    assert _bits(written, ref, F32).max() > 20
    assert "incomplete_gamma_complement" in _fired(_survival, _A, _X)
    # JAX's own Q bounds the result
    assert _bits(got, ref, F32).max() <= _bits(library, ref, F32).max() + 1


def test_survival_function_derivative_in_x():
    # d/dx (1 - P) = -x^(a-1) e^-x / Γ(a); JAX's Q differentiated bounds it
    dref = [-(M(q) ** (M(p) - 1)) * mp.exp(-M(q)) / mp.gamma(M(p)) for p, q in zip(_A, _X)]
    fixed = jst.stabilize(_survival)
    got = jax.jit(_grad(lambda x, a: fixed(a, x)))(_X, _A)
    library = jax.jit(_grad(lambda x, a: -jss.gammaincc(a, x)))(_X, _A)
    assert _bits(got, dref, F32).max() <= max(_bits(library, dref, F32).max(), 2) + 1


_A2 = np.array([2.0, 3.0, 0.5], F32)
_X2 = np.array([1e-4, 1e-3, 1e-9], F32)
_LOWER = [mp.gammainc(M(p), 0, M(q), regularized=True) for p, q in zip(_A2, _X2)]


def test_log_of_one_minus_the_upper_function_is_the_log_of_the_lower():
    # log1p(-Q) where Q is near 1 (x small) keeps none of P; log(P) keeps P's digits
    fn = lambda a, x: jnp.log1p(-jss.gammaincc(a, x))
    ref = [mp.log(v) for v in _LOWER]
    written, lower, got = _together(fn, lambda a, x: jss.gammainc(a, x), jst.stabilize(fn))(_A2, _X2)
    assert _bits(written, ref, F32).max() > 8
    # JAX's own P bounds the log: log P carries P's relative error, or less
    assert _bits(got, ref, F32).max() <= _bits(lower, _LOWER, F32).max() + 1


def test_log_of_one_minus_a_tiny_lower_function_stays_log1p():
    small = lambda a, x: jnp.log1p(-jss.gammainc(a, x))
    got = jax.jit(jst.stabilize(small))(_A2, _X2)
    # log1p(-P) ~ -P: P's relative error (JAX's igamma, measured here), not log(Q)'s 0
    library = _bits(jss.gammainc(_A2, _X2), _LOWER, F32).max()
    assert _bits(got, [mp.log(1 - v) for v in _LOWER], F32).max() <= library + 1


def test_log_survival_function_past_the_underflow():
    # chi2(3).logsf and log(1 - P) far in the tail: Q underflows, its log is -inf as written
    a = np.array([1.5, 1.5, 30.0, 1e3], F32)
    x = np.array([200.0, 1e3, 300.0, 1600.0], F32)
    upper = [mp.gammainc(M(p), M(q), regularized=True) for p, q in zip(a, x)]
    ref = [mp.log(v) for v in upper]
    # d/dx log Q = -x^(a-1) e^-x / (Γ(a) Q)
    dref = [-(M(q) ** (M(p) - 1)) * mp.exp(-M(q)) / mp.gamma(M(p)) / v for p, q, v in zip(a, x, upper)]
    logsf = lambda a, x: jnp.log(jss.gammaincc(a, x))
    written = lambda a, x: jnp.log(1 - jss.gammainc(a, x))
    grad = lambda f: _grad(lambda x, a: f(a, x))
    as_written, got, got_written, dgot = _together(
        logsf, jst.stabilize(logsf), jst.stabilize(written),
        lambda a, x: grad(jst.stabilize(logsf))(x, a))(a, x)
    assert np.all(np.isinf(as_written))
    # the continued fraction's log and its prefactor: a few roundings each
    assert _bits(got, ref, F32).max() <= 2
    assert _bits(got_written, ref, F32).max() <= 2
    assert _bits(dgot, dref, F32).max() <= 3


_XB = np.array([0.999999, 0.99999999, 0.9999, 0.6])


def _beta_survival(x):
    return 1 - jss.betainc(2.0, 3.0, x)


def test_upper_tail_of_a_beta_written_as_one_minus_betainc():
    with jax.enable_x64(True):
        x = _XB.astype(F64)
        ref = [1 - mp.betainc(2, 3, 0, M(v), regularized=True) for v in x]
        # below 1/2 the written form stays (1 - x would round: the derivative would lose)
        low = np.array([0.1, 0.3], F64)
        x = np.concatenate([x, low])
        written, library, got = _together(_beta_survival, lambda x: jss.betainc(3.0, 2.0, 1 - x),
                                          jst.stabilize(_beta_survival))(x)
        assert _bits(written[:4], ref, F64).max() > 20
        assert _bits(got[:4], ref, F64).max() <= _bits(library[:4], ref, F64).max() + 1
        np.testing.assert_array_equal(np.asarray(got[4:]), np.asarray(written[4:]))


def test_upper_tail_of_a_beta_derivative():
    with jax.enable_x64(True):
        x = _XB.astype(F64)
        dref = [-(M(v) ** 1) * (1 - M(v)) ** 2 / mp.beta(2, 3) for v in x]
        library = _bits(jax.jit(_grad(_beta_survival))(x), dref, F64).max()
        got = jax.jit(_grad(jst.stabilize(_beta_survival)))(x)
        assert _bits(got, dref, F64).max() <= max(library, 2) + 1


def test_log_of_the_complement_keeps_a_tiny_betainc():
    x = np.array([1e-4, 0.01, 0.3], F32)
    fn = lambda x: jnp.log(1 - jss.betainc(5.0, 2.0, x))
    lower = [mp.betainc(5, 2, 0, M(v), regularized=True) for v in x]
    ref = [mp.log(1 - v) for v in lower]
    assert _bits(fn(x), ref, F32).max() > 8  # log(1 - I) with I ~ 1e-19: 0
    # log1p(-I) ~ -I carries JAX's betainc's relative error, or less
    library = _bits(jss.betainc(5.0, 2.0, x), lower, F32).max()
    assert _bits(jax.jit(jst.stabilize(fn))(x), ref, F32).max() <= library + 1


# ------------------------------------------------------------------------------------- Bessel logs
def _von_mises_log_normaliser(k):
    return jnp.log(2 * jnp.pi * jss.i0(k))


@pytest.mark.parametrize(("fn", "ref", "dref"), [
    (lambda x: jnp.log(jss.i0(x)), lambda v: mp.log(mp.besseli(0, v)),
     lambda v: mp.besseli(1, v) / mp.besseli(0, v)),
    (lambda x: jnp.log(jnp.exp(jnp.abs(x)) * jax.lax.bessel_i0e(x)), lambda v: mp.log(mp.besseli(0, v)),
     lambda v: mp.besseli(1, v) / mp.besseli(0, v)),
    (lambda x: jnp.log(jss.i1(x)), lambda v: mp.log(mp.besseli(1, v)),
     lambda v: mp.besseli(0, v) / mp.besseli(1, v) - 1 / v),
    (_von_mises_log_normaliser, lambda v: mp.log(2 * mp.pi * mp.besseli(0, v)),
     lambda v: mp.besseli(1, v) / mp.besseli(0, v)),
], ids=["log-i0", "log-exp-i0e", "log-i1", "log-2pi-i0"])
def test_log_of_a_bessel_function_that_overflows(fn, ref, dref):
    # (not near I1(x) = 1, x = 1.59, where log I1 is ill-conditioned: 12 ulps of it per ulp of x)
    x = np.array([100.0, 500.0, 3000.0, 3.0, 0.3], F32)
    refs = [ref(M(v)) for v in x]
    assert _bits(fn(x), refs, F32).max() == 32
    fixed = jst.stabilize(fn)
    assert _bits(jax.jit(fixed)(x), refs, F32).max() <= 2
    assert _bits(jax.jit(_grad(fixed))(x), [dref(M(v)) for v in x], F32).max() <= 3


def test_log_i0_near_zero_is_the_series():
    # log(i0e(x)) + |x| cancels near 0; log(i0(x)) = log(1 + x²/4 + ...) rounds x²/4 against 1
    x = np.array([1e-3, -0.01, 0.2, 1.99], F32)
    refs = [mp.log(mp.besseli(0, M(v))) for v in x]
    fixed = jst.stabilize(lambda x: jnp.log(jss.i0(x)))
    assert _bits(jax.jit(fixed)(x), refs, F32).max() <= 2
    dref = [mp.besseli(1, M(v)) / mp.besseli(0, M(v)) for v in x]
    assert _bits(jax.jit(_grad(fixed))(x), dref, F32).max() <= 3


# ----------------------------------------------------------------------------- masked label weights
def _soft_cross_entropy(x, t):
    return -jnp.sum(t * jax.nn.log_softmax(x), axis=-1)


def _soft_cross_entropy_written(x, t):
    return -jnp.sum(t * (x - jss.logsumexp(x, axis=-1, keepdims=True)), axis=-1)


def _soft_cross_entropy_einsum(x, t):
    return -jnp.einsum("bi,bi->b", t, jax.nn.log_softmax(x))


@pytest.mark.parametrize("fn", [_soft_cross_entropy, _soft_cross_entropy_written, _soft_cross_entropy_einsum],
                         ids=["log_softmax", "x-logsumexp", "einsum"])
def test_a_masked_class_with_zero_weight_adds_nothing(fn):
    x = np.array([[2.0, -np.inf, 0.5, -np.inf], [1.0, 3.0, -np.inf, 0.0]], F32)
    t = np.array([[0.7, 0.0, 0.3, 0.0], [0.1, 0.8, 0.0, 0.1]], F32)

    def exact(row, w):
        finite = [M(v) for v in row if np.isfinite(v)]
        lse = mp.log(mp.fsum(mp.exp(v) for v in finite))
        loss = -mp.fsum(M(wi) * (M(v) - lse) for v, wi in zip(row, w) if np.isfinite(v))
        sm = [mp.exp(M(v) - lse) if np.isfinite(v) else mp.mpf(0) for v in row]
        total = mp.fsum(M(wi) for wi in w)
        return loss, [total * s - M(wi) for s, wi in zip(sm, w)]

    refs = [exact(r, w) for r, w in zip(x, t)]
    assert np.all(np.isnan(fn(x, t)))
    fixed = jst.stabilize(fn)
    assert _bits(jax.jit(fixed)(x, t), [r[0] for r in refs], F32).max() <= 2
    # d/dx: (sum t)·softmax - t, 0 at the masked classes
    assert _bits(jax.jit(_grad(fixed))(x, t), [g for r in refs for g in r[1]], F32).max() <= 3


# ------------------------------------------------------------------------------------------ betaln
def test_stabilize_runs_on_betaln():
    a = np.array([500.0, 2.5], F32)
    b = np.array([1.2e5, 7.0], F32)
    got = jax.jit(jst.stabilize(jss.betaln))(a, b)
    ref = [mp.log(mp.beta(M(p), M(q))) for p, q in zip(a, b)]
    library = _bits(jss.betaln(a, b), ref, F32).max()
    assert _bits(got, ref, F32).max() <= library


# ------------------------------------------------------------------- every example of the matchers
def _examples(rule):
    found = [(rule.example, tuple(rule.example_shapes), rule.example_domain)]
    return found + [e if not callable(e) else (e, tuple(rule.example_shapes), rule.example_domain)
                    for e in rule.examples]


_STRUCTURAL = [(name, k) for name in ("log_factors", "masked_log_prob")
               for k in range(len(_examples(jst.rewrites.get(name))))]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "k"), _STRUCTURAL, ids=[f"{n}-{k}" for n, k in _STRUCTURAL])
def test_every_example_of_a_structural_rule_is_sound(name, k):
    # jst.verify_rule judges a structural rule on its first example that fires; each spelling here
    # is judged on its own (a copy of the rule whose only example it is)
    rule = jst.rewrites.get(name)
    fn, shapes, domain = _examples(rule)[k]
    one = dataclasses.replace(rule, example=fn, example_shapes=shapes, example_domain=domain, examples=())
    report = jst.verify_rule(one)
    assert report.ok and [a.status for a in report.alternatives] == ["sound"], str(report)
