"""The normal distribution's tails (issue 39): the log of a difference of CDFs, survival functions,
and the oracle's reading of JAX's own ``ndtr``.

``log(Φ(b) - Φ(a))`` (the truncated normal's log normaliser) is -inf as written once both bounds
are past 5.4 / 8.3 sigma (float32 / float64); ``log_normal_mass`` rewrites it, in every spelling of
Φ, into ``forms/_mass.log_ndtr_diff``. ``1 - ndtr(x)`` cancels to 0; ``normal_cdf`` rewrites it
into Φ(-x) without the rounded 1/√2 JAX's ``ndtr`` inlines. Everything is judged against mpmath at
200 bits (Φ(b) - Φ(a) mirrored to Φ(-a) - Φ(-b) where a >= 0, so the reference itself does not
cancel). Tolerances, in ulps of the result's dtype:

- the log mass within 6 ulps, value and both partial derivatives: every branch is a sum, product
  or quotient of four or five terms each within an ulp or two (log_ndtr's, erfcx's, the
  Gauss-Legendre sum's, whose truncation is below 1e-21 relative, the density ratio's from exact
  squares), with no cancellation (measured over 1,600 random pairs: 3.9 ulps value, 4.5 gradient);
- Φ(-x) and its derivative within 3 ulps (erfcx within 1, the exponential of an exactly split
  square within 1, one product; measured 1.1 bits).
"""

from __future__ import annotations

import contextlib

import jax
import jax.numpy as jnp
import mpmath as mp
import numpy as np
import pytest
from jax.scipy.special import erf, ndtr
from jax.scipy.stats import norm

import pytest_jaxstab as jst
from pytest_jaxstab import oracles
from pytest_jaxstab._compat import enable_x64
from pytest_jaxstab.rewrites.forms import _mass as fm

F32, F64 = np.float32, np.float64
DTYPES = pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])
#: float64 in the slow tier where a test runs every spelling and region (float32 carries the rewrite)
DTYPES_FAST = pytest.mark.parametrize("dtype", [F32, pytest.param(F64, marks=pytest.mark.slow)],
                                      ids=["f32", "f64"])


@pytest.fixture(autouse=True)
def _precision():
    with mp.workprec(200):
        yield


def _ulps(got, ref, dtype):
    """Largest distance of ``got`` from the exact ``ref`` values, in ulps of ``dtype`` at ``ref``."""
    worst = 0.0
    for g, r in zip(np.atleast_1d(np.asarray(got, np.float64)), ref):
        r = mp.mpf(r)
        assert np.isfinite(g), f"{g} where the exact value is {mp.nstr(r, 8)}"
        scale = max(abs(float(r)), float(np.finfo(dtype).tiny))
        worst = max(worst, float(abs(mp.mpf(g) - r)) / float(np.spacing(np.array(scale, dtype))))
    return worst


def _x64(dtype):
    return enable_x64() if dtype is F64 else contextlib.nullcontext()


def _q(x):
    return mp.ncdf(-mp.mpf(x))


def _mass(a, b):
    a, b = mp.mpf(a), mp.mpf(b)
    return _q(a) - _q(b) if a >= 0 else mp.ncdf(b) - mp.ncdf(a)


def _rules(fn, *args):
    return {a.rule for a in jst.explain(fn, *args)}


# the spellings of log(Φ(b) - Φ(a))
SPELLINGS = {
    "ndtr": lambda a, b: jnp.log(ndtr(b) - ndtr(a)),
    "norm_cdf": lambda a, b: jnp.log(norm.cdf(b) - norm.cdf(a)),
    "erf": lambda a, b: jnp.log(0.5 * (1 + erf(b / jnp.sqrt(2.0))) - 0.5 * (1 + erf(a / jnp.sqrt(2.0)))),
    "complements": lambda a, b: jnp.log((1 - ndtr(a)) - (1 - ndtr(b))),
}

# (a, b) per region and dtype; float32's lower tail stops where Φ is its smallest normal (-13)
REGIONS = {
    "upper": {F32: ([5.0, 6.0, 8.0, 10.0], [6.0, 7.5, 9.0, 11.0]),
              F64: ([8.0, 12.0, 20.0, 30.0], [9.0, 13.0, 24.0, 32.0])},
    "lower": {F32: ([-12.0, -10.0, -7.0, -13.0], [-11.0, -9.0, -5.0, -12.5]),
              F64: ([-12.0, -10.0, -7.0, -40.0], [-11.0, -9.0, -5.0, -38.0])},
    # h·(a + h) <= 1: the Gauss-Legendre branch (a log-diff-exp would lose a/h ulps here)
    "close": {F32: ([8.0, 12.0, -1.001, -0.002], [8.001, 12.0001, -1.0, -0.001]),
              F64: ([8.0, 20.0, -30.00001, 1e-3], [8.001, 20.00001, -30.0, 2e-3])},
    # a < 0 < b: both tails small, then a narrow mass near 0 (two CDFs near 1/2 as written)
    "centre": {F32: ([-3e-4, -1.0, -40.0, -0.5], [4e-4, 2.0, 1.0, 50.0]),
               F64: ([-3e-4, -1.0, -40.0, -1e-9], [4e-4, 2.0, 1.0, 3e-9])},
}


# The fast tier runs every region (a branch of the form) with the first spelling and every spelling
# (the matcher) in the upper region; the rest of the grid is the slow tier's (issue 48).
_FIRST = next(iter(SPELLINGS))
GRID = [pytest.param(s, r, id=f"{s}-{r}",
                     marks=() if s == _FIRST or r == "upper" else pytest.mark.slow)
        for s in SPELLINGS for r in REGIONS]


@DTYPES_FAST
@pytest.mark.parametrize(("spelling", "region"), GRID)
def test_log_normal_mass_value_and_gradient(spelling, region, dtype):
    fn = SPELLINGS[spelling]
    a0, b0 = REGIONS[region][dtype]
    with _x64(dtype):
        a, b = np.asarray(a0, dtype), np.asarray(b0, dtype)
        assert "log_normal_mass" in _rules(fn, a, b)
        st = jst.stabilize(fn)
        value = st(a, b)
        ga, gb = jax.vmap(jax.grad(st, argnums=(0, 1)))(a, b)
        written = np.asarray(fn(a, b))
    pairs = list(zip(a.tolist(), b.tolist()))
    masses = [_mass(x, y) for x, y in pairs]
    assert _ulps(value, [mp.log(m) for m in masses], dtype) <= 6
    assert _ulps(ga, [-mp.npdf(x) / m for (x, _), m in zip(pairs, masses)], dtype) <= 6
    assert _ulps(gb, [mp.npdf(y) / m for (_, y), m in zip(pairs, masses)], dtype) <= 6
    if region == "upper" or (region == "lower" and dtype is F64):  # as written: -inf there
        assert not np.all(np.isfinite(written))


@DTYPES_FAST
def test_log_ndtr_diff_on_random_bounds(dtype):
    # bounds over the whole range where Φ is a normal number, their gap from 1e-7 to 10 (close
    # bounds, the Gauss-Legendre branch, and far ones), a third of them near 0 (across 0): the form
    # itself, value and gradient, against mpmath (the far bound's derivative is the one that lost
    # 235 ulps while exp(-(y² - x²)/2) was formed from a rounded exponent)
    rng = np.random.default_rng(39)
    lim = 13.0 if dtype is F32 else 38.0
    kind = rng.integers(0, 3, 90)
    a = rng.uniform(-lim, lim, 90) * np.where(kind == 2, 1e-3, 1.0)
    b = a + np.where(kind == 0, 10 ** rng.uniform(-7, 1, 90), np.abs(rng.normal(0, 3, 90)))
    a, b = a.astype(dtype), b.astype(dtype)
    keep = b > a
    a, b = a[keep], b[keep]
    with _x64(dtype):
        value = fm.log_ndtr_diff(a, b)
        ga, gb = jax.vmap(jax.grad(fm.log_ndtr_diff, argnums=(0, 1)))(a, b)
    pairs = list(zip(a.tolist(), b.tolist()))
    masses = [_mass(x, y) for x, y in pairs]
    tiny = float(np.finfo(dtype).tiny)
    assert _ulps(value, [mp.log(m) for m in masses], dtype) <= 6
    for g, ref in ((ga, [-mp.npdf(x) / m for (x, _), m in zip(pairs, masses)]),
                   (gb, [mp.npdf(y) / m for (_, y), m in zip(pairs, masses)])):
        normal = [i for i, r in enumerate(ref) if abs(r) >= tiny]  # a subnormal exact value aside
        assert _ulps(np.asarray(g)[normal], [ref[i] for i in normal], dtype) <= 6


def test_truncated_normal_log_prob_8_to_32_sigma():
    # norm.logpdf(x) - log Z: log Z is now within 6 ulps; the written subtraction of two values near
    # -x²/2 is what remains, conditioned by |logpdf|/|result| (2^7 at 31 sigma): within 2^-44 relative
    fn = lambda x, lo, hi: norm.logpdf(x) - jnp.log(norm.cdf(hi) - norm.cdf(lo))
    x, lo, hi = [8.5, 12.0, 20.0, 31.0], [8.0, 11.0, 16.0, 30.0], [9.0, 13.0, 24.0, 32.0]
    with enable_x64():
        args = [np.asarray(v, F64) for v in (x, lo, hi)]
        assert not np.all(np.isfinite(fn(*args)))
        got = np.asarray(jst.stabilize(fn)(*args))
    for g, xi, low, high in zip(got, x, lo, hi):
        ref = -mp.mpf(xi) ** 2 / 2 - mp.log(mp.sqrt(2 * mp.pi)) - mp.log(_mass(low, high))
        assert abs(mp.mpf(float(g)) / ref - 1) < 2.0**-44


@DTYPES
def test_reversed_bounds_stay_nan(dtype):
    # b < a: the mass is negative and its log does not exist; the rewrite must not invent a number
    # (as written: NaN, or -inf where both CDFs round to the same value)
    fn = SPELLINGS["ndtr"]
    with _x64(dtype):
        a, b = np.asarray([1.0, 9.0, -20.0, 0.5], dtype), np.asarray([0.5, 8.0, -21.0, -0.5], dtype)
        assert "log_normal_mass" in _rules(fn, a, b)
        assert np.all(np.isnan(jst.stabilize(fn)(a, b)))
        same = np.asarray([3.0, -9.0], dtype)
        assert np.all(jst.stabilize(fn)(same, same) == -np.inf)  # equal bounds: no mass


@DTYPES
def test_infinite_bounds(dtype):
    fn = SPELLINGS["ndtr"]
    with _x64(dtype):
        a = np.asarray([-np.inf, -np.inf, 3.0, -2.0], dtype)
        b = np.asarray([-5.0, 1.0, np.inf, np.inf], dtype)
        got = jst.stabilize(fn)(a, b)
    want = [mp.log(mp.ncdf(-5)), mp.log(mp.ncdf(1)), mp.log(_q(3)), mp.log(mp.ncdf(2))]
    assert _ulps(got, want, dtype) <= 4


def test_near_misses_do_not_fire():
    with enable_x64():
        x = np.asarray([9.0, -9.0, 1.0], F64)
        # a constant subtracted, a sum, a difference of a CDF and a density: not a normal mass
        for fn in (lambda b, a: jnp.log(ndtr(b) - 0.25), lambda b, a: jnp.log(ndtr(b) + ndtr(a)),
                   lambda b, a: jnp.log(ndtr(b) - norm.pdf(a))):
            assert "log_normal_mass" not in _rules(fn, x, x - 1)


# ------------------------------------------------------------------------------- survival functions
SURVIVAL = {
    "1-ndtr": (lambda x: 1 - ndtr(x), lambda x: _q(x), lambda x: -mp.npdf(x), [5.0, 8.0, 12.0, 20.0]),
    "norm.sf": (lambda x: norm.sf(x), lambda x: _q(x), lambda x: -mp.npdf(x), [5.0, 8.0, 12.0, 20.0]),
    "1-norm.cdf(x,1,2)": (lambda x: 1 - norm.cdf(x, 1.0, 2.0), lambda x: _q((mp.mpf(x) - 1) / 2),
                          lambda x: -mp.npdf((mp.mpf(x) - 1) / 2) / 2, [5.0, 9.0, 17.0, 25.0]),
    "ndtr lower": (lambda x: ndtr(x), lambda x: mp.ncdf(x), lambda x: mp.npdf(x), [-5.0, -9.0, -12.0, -12.9]),
}


def _ulps_or_inf(got, ref, dtype):
    """:func:`_ulps`, with a non-finite value counted as infinitely far (a measurement, not a check)."""
    return _ulps(got, ref, dtype) if np.all(np.isfinite(np.asarray(got, np.float64))) else np.inf


@DTYPES
@pytest.mark.parametrize("name", list(SURVIVAL))
def test_survival_without_the_rounded_inverse_sqrt2(name, dtype):
    # `1 - ndtr(x)` cancels to 0 whichever ndtr is installed: normal_cdf rewrites it into Φ(-x), on
    # every JAX. A bare ndtr or norm.sf is JAX's own routine: jax 0.10 to 0.12.0 inline it as
    # erfc(-x·(1/√2 rounded))/2, whose tail carries that rounding times x² (up to 7.7 bits at x = 20 in
    # float64), and the rewrite means Φ itself; jax 0.12.1's is accurate and left alone. So: the result
    # is within 3 ulps, value and derivative, on every JAX, and wherever the installed JAX's own value
    # is not (measured here against mpmath, independently of the oracle and of the rule), the rule fires.
    fn, ref, dref, xs = SURVIVAL[name]
    if dtype is F64 and name == "ndtr lower":
        xs = [-5.0, -12.0, -20.0, -37.0]
    with _x64(dtype):
        x = np.asarray(xs, dtype)
        fired = "normal_cdf" in _rules(fn, x)
        own, own_grad = fn(x), jax.vmap(jax.grad(fn))(x)
        st = jst.stabilize(fn)
        value, grad = st(x), jax.vmap(jax.grad(st))(x)
    refs, drefs = [ref(v) for v in x.tolist()], [dref(v) for v in x.tolist()]
    own_error = max(_ulps_or_inf(own, refs, dtype), _ulps_or_inf(own_grad, drefs, dtype))
    if name.startswith("1-") or own_error > 3:
        assert fired, f"JAX's own is {own_error:.1f} ulps off and the rule did not fire"
    assert _ulps(value, refs, dtype) <= 3
    assert _ulps(grad, drefs, dtype) <= 3


def test_a_hand_written_rounded_constant_keeps_its_meaning():
    # 0.5·erfc(-x·c) with c = float32(1/√2) written by hand is that formula, not Φ: the rewrite keeps
    # the constant's exact value (the oracle evaluates it as written, so must the rewrite)
    c = np.float32(1 / np.sqrt(2.0))
    fn = lambda x: 0.5 * jax.scipy.special.erfc(-x * c)
    x = np.asarray([-9.0, -12.0, -12.9], F32)
    got = jst.stabilize(fn)(x)
    want = [mp.erfc(-mp.mpf(v) * mp.mpf(float(c))) / 2 for v in x.tolist()]
    assert _ulps(got, want, F32) <= 3


# ------------------------------------------------------------------------------ the oracle's ndtr
@DTYPES
@pytest.mark.parametrize("spelling", ["ndtr", "norm.cdf", "norm.sf"])
def test_oracle_judges_jax_ndtr_as_phi(spelling, dtype):
    # JAX inlines ndtr as erfc(-x·(1/√2 rounded))/2; evaluated exactly, that formula is up to 800
    # ulps from Φ at -38 (float64): the oracle recognises the routine by its source location and
    # evaluates Φ, so its certain value is Φ correctly rounded (within half an ulp)
    fn = {"ndtr": ndtr, "norm.cdf": norm.cdf, "norm.sf": lambda x: norm.sf(-x)}[spelling]
    xs = np.linspace(-38.0, 8.0, 185)
    with _x64(dtype):
        res = oracles.evaluate(fn, xs.astype(dtype))
    assert np.all(np.asarray(res.certain))
    got = np.asarray(res.values, np.float64)
    for g, x in zip(got, xs.astype(dtype).tolist()):
        r = mp.ncdf(x)
        spacing = float(np.spacing(np.array(max(abs(float(r)), float(np.finfo(dtype).smallest_subnormal)),
                                            dtype)))
        assert float(abs(mp.mpf(g) - r)) <= 0.5 * spacing, (x, g, r)


# ---------------------------------------------------------------------------------- the logistic
def _sig(x):
    return 1 / (1 + mp.exp(-mp.mpf(x)))


def _logistic_mass(a, b):
    a, b = mp.mpf(a), mp.mpf(b)
    return _sig(-a) - _sig(-b) if a >= 0 else _sig(b) - _sig(a)


LOGISTIC = {
    "logistic.cdf": lambda a, b: jnp.log(jax.scipy.stats.logistic.cdf(b) - jax.scipy.stats.logistic.cdf(a)),
    "sigmoid": lambda a, b: jnp.log(jax.nn.sigmoid(b) - jax.nn.sigmoid(a)),
    "logistic.sf": lambda a, b: jnp.log(jax.scipy.stats.logistic.sf(a) - jax.scipy.stats.logistic.sf(b)),
}
# upper tail (0 as written past 17 / 37), lower tail, close bounds, across 0
LOGISTIC_AB = {F32: ([20.0, 30.0, -80.0, -1.0, 5.0, -2e-3], [21.0, 30.001, -79.0, 2.0, 5.0001, 1e-3]),
               F64: ([40.0, 300.0, -700.0, -1.0, 5.0, -2e-9],
                     [41.0, 300.00001, -690.0, 2.0, 5.0000001, 1e-9])}


@DTYPES
@pytest.mark.parametrize("spelling", list(LOGISTIC))
def test_log_logistic_mass_value_and_gradient(spelling, dtype):
    # three logs of factors in (0, 1] summed (each within an ulp: softplus, log1mexp), so 4 ulps;
    # the derivative sig(-b) + 1/expm1(b - a) is two positive terms, each within an ulp or two
    fn = LOGISTIC[spelling]
    with _x64(dtype):
        a, b = (np.asarray(v, dtype) for v in LOGISTIC_AB[dtype])
        assert "log_logistic_mass" in _rules(fn, a, b)
        assert not np.all(np.isfinite(fn(a, b)))
        st = jst.stabilize(fn)
        value = st(a, b)
        ga, gb = jax.vmap(jax.grad(st, argnums=(0, 1)))(a, b)
    pairs = list(zip(a.tolist(), b.tolist()))
    masses = [_logistic_mass(x, y) for x, y in pairs]
    density = lambda t: _sig(t) * _sig(-t)
    assert _ulps(value, [mp.log(m) for m in masses], dtype) <= 4
    assert _ulps(ga, [-density(x) / m for (x, _), m in zip(pairs, masses)], dtype) <= 4
    assert _ulps(gb, [density(y) / m for (_, y), m in zip(pairs, masses)], dtype) <= 4


@DTYPES
def test_log_logistic_mass_reversed_bounds_and_near_misses(dtype):
    fn = LOGISTIC["sigmoid"]
    with _x64(dtype):
        a, b = np.asarray([1.0, 30.0, 0.0], dtype), np.asarray([0.5, 20.0, 0.0], dtype)
        got = np.asarray(jst.stabilize(fn)(a, b))
        assert np.all(np.isnan(got[:2])) and got[2] == -np.inf  # b < a: no number; a = b: no mass
        x = np.asarray([3.0, 40.0], dtype)
        for miss in (lambda a, b: jnp.log(jax.nn.sigmoid(b) - 0.25),
                     lambda a, b: jnp.log(jax.nn.sigmoid(b) + jax.nn.sigmoid(a))):
            assert "log_logistic_mass" not in _rules(miss, x, x + 1)


@DTYPES
def test_logistic_survival_is_already_the_sigmoid_rules(dtype):
    # 1 - logistic.cdf(x) and log(logistic.cdf(x)) need no rule of their own: one_minus_sigmoid and
    # log_sigmoid rewrite them (measured: 23.6 / 52.6 bits as written, 0.5 / 1.1 after)
    with _x64(dtype):
        x = np.asarray([20.0, 35.0, -30.0], dtype)
        sf = jst.stabilize(lambda x: 1 - jax.scipy.stats.logistic.cdf(x))(x)
        logcdf = jst.stabilize(lambda x: jnp.log(jax.scipy.stats.logistic.cdf(x)))(-x)
    assert _ulps(sf, [_sig(-v) for v in x.tolist()], dtype) <= 2
    assert _ulps(logcdf, [mp.log(_sig(-v)) for v in x.tolist()], dtype) <= 2


def test_bounds_beyond_the_tail_clamp():
    # the forms clamp |x| at 1e4 where Q underflows; log Φ must not: log Φ(-2e4) is -2e8 (the clamp
    # gave -5e7, the value at -1e4, for log_ndtr and the mass alike)
    with enable_x64():
        a, b = np.asarray([2e4, -1e5, -3e4], F64), np.asarray([3e4, -9e4, -2e4], F64)
        mass = jst.stabilize(SPELLINGS["ndtr"])(a, b)
        x = np.asarray([-2e4, -1e5], F64)
        log_phi = jst.stabilize(jax.scipy.special.log_ndtr)(x)
        slope = jax.vmap(jax.grad(jst.stabilize(jax.scipy.special.log_ndtr)))(x)
    assert _ulps(mass, [mp.log(_mass(x, y)) for x, y in zip(a.tolist(), b.tolist())], F64) <= 4
    assert _ulps(log_phi, [mp.log(mp.ncdf(v)) for v in x.tolist()], F64) <= 4
    assert _ulps(slope, [mp.npdf(v) / mp.ncdf(v) for v in x.tolist()], F64) <= 4
