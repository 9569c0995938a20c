"""``jst.improve`` on array programs and special functions (issue 26): one test per family of identities.

Each family has forms of our own, several spellings each, none of them an example of the issue. For
every form: the original loses bits on inputs of our own (numpy draws, not the search's), and the
improved program (``jst.improve``: the catalogue's rewrite first, then the search) is at most 2 bits mean
and 8 bits max on them, never more than 2 bits worse than the original at any of them, and finite
wherever the exact result is (no overflow). The exact results are mpmath's at 300 digits, from a
formula we write here (an independent reference, not the oracle of the code under test).

The search budget per form is small (``LIMITS``): these run in CI.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import mpmath
import numpy as np
import pytest
from jax.scipy.special import digamma, gammaln

import pytest_jaxstab as jst
from pytest_jaxstab import oracles
from pytest_jaxstab._check._trace import x64_scope

# The slow tier (`make test-slow`, run in full by CI; `make test` leaves it out): docs/architecture.md,
# "Tests and their tiers".
pytestmark = pytest.mark.slow

LIMITS: dict[str, Any] = dict(max_examples=48, time_limit=20.0, seed=3)
MEAN_BITS = 2.0  # the bar (Herbie's "accurate")
MAX_BITS = 8.0
NOISE_BITS = 2.0  # never worse than the original by more than rounding noise (3 ulps)
SECONDS = 60.0  # per form, with the oracle and compile time on a shared two-core machine

mp = mpmath


def _lu(rng: np.random.Generator, lo: float, hi: float, shape: tuple[int, ...]) -> np.ndarray:
    """Log-uniform magnitudes in [lo, hi]."""
    return np.exp(rng.uniform(np.log(lo), np.log(hi), shape))


def _signed(rng: np.random.Generator, lo: float, hi: float, shape: tuple[int, ...]) -> np.ndarray:
    return _lu(rng, lo, hi, shape) * rng.choice([-1.0, 1.0], shape)


# name -> (function, shapes, domain, inputs(rng) -> list of argument tuples, exact(mp args) -> mp value
# per output element (flattened)).
Form = tuple[Callable[..., Any], list[tuple[int, ...]], Any, Callable[[np.random.Generator], list[tuple]],
             Callable[..., list[Any]]]


def _many(count: int, make: Callable[[np.random.Generator], tuple]) -> Callable[[np.random.Generator], list]:
    return lambda rng: [make(rng) for _ in range(count)]


def _sigmoid(z):
    return 1 / (1 + mp.exp(-z))


FORMS: dict[str, Form] = {
    # log of products, quotients and powers
    "log-prod": (lambda x: jnp.log(jnp.prod(x)), [(8,)], (1e-200, 1e200),
                 _many(24, lambda r: (_lu(r, 1e-200, 1e200, (8,)),)),
                 lambda x: [mp.fsum(mp.log(v) for v in x)]),
    "log-prod-ratio": (lambda x, y: jnp.log(jnp.prod(x) / jnp.prod(y)), [(6,), (6,)], (1e-150, 1e150),
                       _many(24, lambda r: (_lu(r, 1e-150, 1e150, (6,)), _lu(r, 1e-150, 1e150, (6,)))),
                       lambda x, y: [mp.fsum(mp.log(v) for v in x) - mp.fsum(mp.log(v) for v in y)]),
    "log-prod-ratio-rows": (lambda a, b: jnp.log(jnp.prod(a, axis=1) / jnp.prod(b, axis=1)), [(2, 5), (2, 5)],
                            (1e-120, 1e120),
                            _many(16, lambda r: (_lu(r, 1e-120, 1e120, (2, 5)),
                                                 _lu(r, 1e-120, 1e120, (2, 5)))),
                            lambda a, b: [mp.fsum(mp.log(v) for v in ra) - mp.fsum(mp.log(v) for v in rb)
                                          for ra, rb in zip(a, b)]),
    "geometric-mean": (lambda x: jnp.prod(x) ** 0.125, [(8,)], (1e-200, 1e200),
                       _many(24, lambda r: (_lu(r, 1e-200, 1e200, (8,)),)),
                       lambda x: [mp.exp(mp.fsum(mp.log(v) for v in x) / 8)]),
    # log-mean-exp, per row and whole
    "log-mean-exp-rows": (lambda x: jnp.log(jnp.mean(jnp.exp(x), axis=1)), [(3, 4)], (-1400.0, 1400.0),
                          _many(16, lambda r: (r.uniform(-1400, 1400, (3, 4)),)),
                          lambda x: [mp.log(mp.fsum(mp.exp(v) for v in row) / 4) for row in x]),
    "log-sum-exp-scaled": (lambda x: jnp.log(jnp.sum(jnp.exp(3.0 * x))), [(5,)], (-300.0, 300.0),
                           _many(24, lambda r: (r.uniform(-300, 300, (5,)),)),
                           lambda x: [mp.log(mp.fsum(mp.exp(3 * v) for v in x))]),
    # softmax / log-softmax algebra: a cross-entropy against soft targets
    "cross-entropy": (lambda x, y: -jnp.sum(y * jnp.log(jnp.exp(x) / jnp.sum(jnp.exp(x)))), [(6,), (6,)],
                      [(-800.0, 800.0), (0.0, 1.0)],
                      _many(24, lambda r: (r.uniform(-800, 800, (6,)), r.uniform(0, 1, (6,)))),
                      lambda x, y: [-mp.fsum(b * (a - mp.log(mp.fsum(mp.exp(v) for v in x)))
                                             for a, b in zip(x, y))]),
    "log-softmax-library": (lambda x: jnp.sum(jnp.log(jax.nn.softmax(x))), [(5,)], (-800.0, 800.0),
                            _many(24, lambda r: (r.uniform(-800, 800, (5,)),)),
                            lambda x: [mp.fsum(a - mp.log(mp.fsum(mp.exp(v) for v in x)) for a in x)]),
    # logistic / softplus algebra: a weighted BCE sharing p = sigmoid(z), and a logit
    "bce-shared-sigmoid": (lambda z, y: _bce(z, y), [(), ()], [(-700.0, 700.0), (0.0, 1.0)],
                           _many(1, lambda r: (r.uniform(-700, 700, 64), r.uniform(0, 1, 64))),
                           lambda z, y: [-(b * mp.log(_sigmoid(a)) + (1 - b) * mp.log(_sigmoid(-a)))
                                         for a, b in zip(z, y)]),
    "logit-of-sigmoid": (lambda z: jnp.log(jax.nn.sigmoid(z) / (1 - jax.nn.sigmoid(z))), [()],
                         (-30.0, 30.0),
                         _many(1, lambda r: (r.uniform(-30, 30, 64),)), lambda z: list(z)),
    # exp of sums and scaled logs: a KL divergence between normals with log-scales (four arguments)
    "kl-log-scales": (lambda m1, l1, m2, l2: jnp.sum(_kl(m1, l1, m2, l2)), [(8,)] * 4,
                      [(-10.0, 10.0), (-600.0, 600.0), (-10.0, 10.0), (-600.0, 600.0)],
                      _many(12, lambda r: _kl_inputs(r)),
                      lambda m1, l1, m2, l2: [mp.fsum(_kl_mp(*v) for v in zip(m1, l1, m2, l2))]),
    # a Gaussian negative log-likelihood with log-scales, two spellings: the variance overflows
    # (exp(s)**2 past s = 355, exp(s) past 709) where the loss is finite
    "gaussian-nll-log-scale": (lambda x, mu, s: jnp.sum(((x - mu) ** 2 / jnp.exp(s) ** 2
                                                         + jnp.log(jnp.exp(s) ** 2)) / 2),
                               [(8,)] * 3, [(-10.0, 10.0), (-10.0, 10.0), (-400.0, 400.0)],
                               _many(12, lambda r: (r.uniform(-10, 10, 8), r.uniform(-10, 10, 8),
                                                    r.uniform(360, 700, 8))),
                               lambda x, mu, s: [mp.fsum((a - m) ** 2 / (2 * mp.exp(2 * v)) + v
                                                         for a, m, v in zip(x, mu, s))]),
    "gaussian-nll-mean-sigma": (lambda x, mu, s: jnp.mean(jnp.log(jnp.exp(s))
                                                          + 0.5 * ((x - mu) / jnp.exp(s)) ** 2),
                                [(6,)] * 3, [(-10.0, 10.0), (-10.0, 10.0), (-800.0, 800.0)],
                                _many(12, lambda r: (r.uniform(-10, 10, 6), r.uniform(-10, 10, 6),
                                                     r.uniform(710, 800, 6))),
                                lambda x, mu, s: [mp.fsum(v + (a - m) ** 2 / (2 * mp.exp(2 * v))
                                                          for a, m, v in zip(x, mu, s)) / 6]),
    # norm rescaling
    "rms": (lambda x: jnp.sqrt(jnp.mean(x ** 2)), [(8,)], (-1e300, 1e300),
            _many(24, lambda r: (_signed(r, 1e-300, 1e300, (8,)),)),
            lambda x: [mp.sqrt(mp.fsum(v * v for v in x) / 8)]),
    "rms-rows": (lambda x: jnp.sqrt(jnp.mean(x * x, axis=1)), [(2, 4)], (-1e300, 1e300),
                 _many(16, lambda r: (_signed(r, 1e-300, 1e300, (2, 4)),)),
                 lambda x: [mp.sqrt(mp.fsum(v * v for v in row) / 4) for row in x]),
    "norm-rows": (lambda x: jnp.sqrt(jnp.sum(x * x, axis=1)), [(2, 4)], (-1e300, 1e300),
                  _many(24, lambda r: (_signed(r, 1e-300, 1e300, (2, 4)),)),
                  lambda x: [mp.sqrt(mp.fsum(v * v for v in row)) for row in x]),
    # a p-norm and a power mean with a traced p (power-sum-root, power-mean): |x|**p overflows for
    # large |x| and p; mean(x**p) is 1 + O(p) for small p, and its power 1/p multiplies the rounding by 1/p
    "p-norm": (lambda x, p: jnp.sum(jnp.abs(x) ** p) ** (1 / p), [(8,), ()], [(-1e200, 1e200), (1.0, 8.0)],
               _many(24, lambda r: (_signed(r, 1e-200, 1e200, (8,)), r.uniform(1.0, 8.0))),
               lambda x, p: [mp.fsum(abs(v) ** p for v in x) ** (1 / p)]),
    "power-mean": (lambda x, p: jnp.mean(x ** p) ** (1 / p), [(8,), ()], [(1e-3, 1e3), (1e-8, 60.0)],
                   _many(24, lambda r: (_lu(r, 1e-3, 1e3, (8,)), float(_lu(r, 1e-8, 60.0, ())))),
                   lambda x, p: [(mp.fsum(v ** p for v in x) / 8) ** (1 / p)]),
    # log-gamma differences for large x
    "lgamma-difference": (lambda x: gammaln(x + 2.5) - gammaln(x), [()], (1.0, 1e15),
                          _many(1, lambda r: (_lu(r, 10.0, 1e15, (64,)),)),
                          lambda x: [mp.loggamma(v + mp.mpf(2.5)) - mp.loggamma(v) for v in x]),
    # the log of a complementary error function: erfc underflows past x = 27 (float64) where its log is
    # a finite -x**2 - log(x sqrt(pi)) - ...; written with erfc and with 1 - erf
    "log-erfc": (lambda x: jnp.log(jax.scipy.special.erfc(x)), [()], (0.0, 1e3),
                 _many(1, lambda r: (np.concatenate([r.uniform(0.0, 5.0, 16), _lu(r, 5.0, 1e3, (48,))]),)),
                 lambda x: [mp.log(mp.erfc(v)) for v in x]),
    "log-one-minus-erf": (lambda x: jnp.log(1.0 - jax.scipy.special.erf(0.5 * x)), [()], (0.0, 2e3),
                          _many(1, lambda r: (np.concatenate([r.uniform(0.0, 10.0, 16),
                                                              _lu(r, 10.0, 2e3, (48,))]),)),
                          lambda x: [mp.log(mp.erfc(v / 2)) for v in x]),
    # a digamma difference for large x (digamma(x + 1) - digamma(x) = 1/x cancels to its last bits)
    "digamma-difference": (lambda x: digamma(2.0 * x + 1.0) - digamma(2.0 * x),
                           [()], (1.0, 1e15),
                           _many(1, lambda r: (_lu(r, 10.0, 1e15, (64,)),)),
                           lambda x: [1 / (2 * v) for v in x]),
    "digamma-difference-back": (lambda x: digamma(x) - digamma(x - 1.0), [()], (2.0, 1e15),
                                _many(1, lambda r: (_lu(r, 10.0, 1e15, (64,)),)),
                                lambda x: [1 / (v - 1) for v in x]),
    # exp-difference cancellations
    "exp-difference": (lambda x: jnp.exp(x) - jnp.exp(-x), [()], (-700.0, 700.0),
                       _many(1, lambda r: (_signed(r, 1e-12, 700.0, (64,)),)),
                       lambda x: [mp.exp(v) - mp.exp(-v) for v in x]),
    "exp-difference-ratio": (lambda x: (jnp.exp(2 * x) - 1) / (2 * jnp.exp(x)), [()], (-300.0, 300.0),
                             _many(1, lambda r: (_signed(r, 1e-12, 300.0, (64,)),)),
                             lambda x: [mp.sinh(v) for v in x]),
    # overflow that needs scaling: the imaginary part of a complex division, written out
    # Magnitudes 1e-50 to 1e200: the squares overflow, the ratios Smith's algorithm takes do not
    # underflow (below that, XLA's flush of subnormals to zero breaks any scaling).
    "complex-division-im": (lambda xr, xi, yr, yi: (xi * yr - xr * yi) / (yr * yr + yi * yi), [()] * 4,
                            [(-1e200, 1e200)] * 4,
                            _many(1, lambda r: tuple(_signed(r, 1e-50, 1e200, (64,)) for _ in range(4))),
                            lambda xr, xi, yr, yi: [(b * c - a * d) / (c * c + d * d)
                                                    for a, b, c, d in zip(xr, xi, yr, yi)]),
}


def _bce(z, y):
    p = jax.nn.sigmoid(z)
    return -(y * jnp.log(p) + (1 - y) * jnp.log(1 - p))


def _kl(m1, l1, m2, l2):
    s1, s2 = jnp.exp(l1), jnp.exp(l2)
    return jnp.log(s2 / s1) + (s1 ** 2 + (m1 - m2) ** 2) / (2 * s2 ** 2) - 0.5


def _kl_mp(m1, l1, m2, l2):
    return l2 - l1 + (mp.exp(2 * l1) + (m1 - m2) ** 2) / (2 * mp.exp(2 * l2)) - mp.mpf(1) / 2


def _kl_inputs(rng: np.random.Generator) -> tuple:
    l1 = rng.uniform(-600, 600, 8)
    return (rng.uniform(-10, 10, 8), l1, rng.uniform(-10, 10, 8), l1 + rng.uniform(-5, 5, 8))


def _errors(fn: Callable[..., Any], form: Form, rng: np.random.Generator
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Bits of error of ``fn`` on our inputs, its results, and the exact results (float64)."""
    _, _, _, inputs, exact = form
    got, ref = [], []
    for args in inputs(rng):
        with x64_scope(np.dtype(np.float64)):
            out = np.asarray(jax.jit(fn)(*(jnp.asarray(a, jnp.float64) for a in args)), np.float64)
        got.extend(np.ravel(out))
        with mpmath.workdps(300):
            mp_args = [mp.mpf(float(a)) if np.ndim(a) == 0 else
                       [mp.mpf(float(v)) for v in np.ravel(a)] if np.ndim(a) == 1 else
                       [[mp.mpf(float(v)) for v in row] for row in a] for a in args]
            ref.extend(float(v) for v in exact(*mp_args))
    exact_f, got_f = np.array(ref), np.array(got)
    return oracles.error_bits(got_f, exact_f), got_f, exact_f


def _pasted(source: str) -> Callable[..., Any]:
    scope: dict[str, Any] = {"jnp": jnp, "jax": jax, "jst": jst}
    exec(source, scope)
    name = source.split("def ")[-1].split("(")[0]
    return scope[name]


#: Forms the search does not fix yet at these limits (issue 26, reported as not done): kept in the table
#: so that the bench and a later search can try them; not run here.
NOT_YET = {
    "kl-log-scales": "each term's fix is found, but the sum cancels where KL is near 0 (re-check rejects)",
    "complex-division-im": "Smith's division is worse than the original beyond rounding at some samples",
    "digamma-difference-back": "digamma(x) - digamma(x - 1): nothing the search offers holds up on fresh "
                               "samples (1 / (x - 1) needs x = (x - 1) + 1 first); not investigated further",
    "log-one-minus-erf": "1 - erf(x/2) is rewritten to erfc, but log(erfc) through log_ndtr is not joined "
                         "in (10 bits mean; the e-graph stops at an inconsistent merge and restarts)",
}


#: Fixed on the newest JAX, not on the oldest we support (0.10). (log(mean(exp(x), axis=1)) left this
#: list when the search and its re-check came to draw from one bit-uniform sampler: offered on both.)
#: The two Gaussian NLLs: on 0.10 the search measures the original at 2.3 bits mean, max 42 on its own
#: samples (11-12 bits, max 62 on 0.12, same seed) and finds nothing better within the limit (node limit,
#: time limit hit); the cause of the different measurement is not found yet.
#: The power mean: JAX 0.10's log1p is 111 ulps off at -0.41 (-0.5283473900797547 against
#: -0.52834739007976577; 0.12 gives ...658), so the log-space form has 9.3 bits at one of the search's
#: samples where the original has fewer, and is refused there (measured 2026-11-28).
OLD_JAX_NOT_YET = {"gaussian-nll-log-scale", "gaussian-nll-mean-sigma", "power-mean"}
OLD_JAX = tuple(int(v) for v in jax.__version__.split(".")[:2]) < (0, 11)


@pytest.mark.parametrize("name", [
    pytest.param(n, marks=pytest.mark.xfail(reason="jax 0.10: see OLD_JAX_NOT_YET"))
    if OLD_JAX and n in OLD_JAX_NOT_YET else n
    for n in FORMS if n not in NOT_YET])
def test_improve_brings_the_form_under_two_bits(name):
    form = FORMS[name]
    fn, shapes, domain = form[0], form[1], form[2]
    t0 = time.perf_counter()
    imp = jst.improve(fn, shapes=shapes, dtype="float64", domain=domain, **LIMITS)
    seconds = time.perf_counter() - t0
    assert imp.improved, imp.report()
    before, _, exact = _errors(fn, form, np.random.default_rng(7))
    after, values, _ = _errors(imp.fn, form, np.random.default_rng(7))
    assert before.mean() > MEAN_BITS + 2, f"{name}: the original is already accurate on our inputs"
    assert after.mean() <= MEAN_BITS, f"{name}: {after.mean():.2f} bits mean\n{imp.report()}"
    assert after.max() <= MAX_BITS, f"{name}: {after.max():.2f} bits max\n{imp.report()}"
    assert np.all(after <= before + NOISE_BITS), f"{name}: worse than the original somewhere\n{imp.report()}"
    finite = np.isfinite(exact)
    assert np.all(np.isfinite(values[finite])), f"{name}: overflow where the exact result is finite"
    if imp.source.lstrip().startswith(("def", "import")):  # a pasteable def (not jst.stabilize(...))
        pasted, _, _ = _errors(_pasted(imp.source), form, np.random.default_rng(7))
        assert pasted.mean() <= MEAN_BITS, imp.source
    assert seconds <= SECONDS, f"{name}: {seconds:.1f} s"


def test_the_per_sub_term_search_survives_classes_that_read_no_input():
    # log(x + 1) - log(x): the e-graph proves sub-terms equal to constants (log(1) = 0), whose exact
    # values are scalars; judging the class's other terms against them once raised from numpy.
    fn = lambda x: jnp.log(x + 1) - jnp.log(x)
    imp = jst.improve(fn, shapes=[()], dtype="float64", domain=(1e-300, 1e300), max_examples=48,
                      time_limit=15.0, seed=0)
    assert imp.improved, imp.report()
    xs = _lu(np.random.default_rng(5), 1e-300, 1e300, (64,))
    with x64_scope(np.dtype(np.float64)):
        got = np.asarray(jax.jit(imp.fn)(jnp.asarray(xs)))
    with mpmath.workdps(400):
        exact = np.array([float(mp.log1p(1 / mp.mpf(float(v)))) for v in xs])
    assert oracles.error_bits(got, exact).mean() <= MEAN_BITS
