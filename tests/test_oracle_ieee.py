"""JAX 0.12.1's IEEE 754-2019 primitives (sinpi, cospi, tanpi, asinpi, acospi, atanpi, atan2pi, exp2m1,
log2p1, fma, fmuladd) and its new library routines (betaln, gamma, ndtri_exp, jn, yn, iv, kn) in the
exact oracle.

References are independent of the oracle: mpmath at 3000 bits (its ``sinpi``/``cospi``, ``asin``,
``atan2``, ``beta``, ``gamma``, ``erfinv``, ``besselj``/``bessely``/``besseli``/``besselk``), exact
rational arithmetic for ``fma``, and IEEE 754-2019's table of exact values (9.2.1). Two layers: each
scalar rule must enclose the exact value on every JAX version (soundness: the rules exist whatever the
release), and on a JAX that has the primitives the oracle's rounded values equal the references.
"""

from __future__ import annotations

from fractions import Fraction

import jax
import mpmath
import numpy as np
import pytest
from flint import arb
from flint import ctx as flint_ctx
from jax import lax
from test_oracle import rounded

from pytest_jaxstab import oracles
from pytest_jaxstab.oracles.primitives._ieee import FUNCTIONS_IEEE

NEW_JAX = hasattr(lax, "sinpi")
new_jax = pytest.mark.skipif(not NEW_JAX, reason="JAX 0.12.1 made these primitives")
REF_BITS = 3000


def _mp(x: float) -> mpmath.mpf:
    return mpmath.mpf(float(x))


def _ball(x: float) -> arb:
    """The float ``x`` as an exact ball (``arb(float)`` goes through decimal digits)."""
    x = float(x)
    if not np.isfinite(x):
        return arb("inf") if x > 0 else arb("-inf")
    n, d = x.as_integer_ratio()
    return arb((n, -(d.bit_length() - 1)))


def _atan2pi_ref(y, x):
    if y == 0 and x == 0:
        return mpmath.nan
    return mpmath.atan2(y, x) / mpmath.pi


# name -> (mpmath reference on exact operands, operand tuples)
XS = [0.0, 1.0, -3.0, 0.5, 1.5, -0.5, -2.5, 2.0**60, 2.0**60 + 2**8, 1e-300, -1e-300, 0.25, 1 / 3,
      123456.789, -7.25, 1e15 + 0.5]
UNIT = [0.0, 1.0, -1.0, 0.5, -0.5, 1e-300, 0.3, -0.999999, 1.5, -2.0]
CASES = {
    "sinpi": (mpmath.sinpi, [(x,) for x in XS]),
    "cospi": (mpmath.cospi, [(x,) for x in XS]),
    "tanpi": (lambda x: mpmath.sinpi(x) / mpmath.cospi(x), [(x,) for x in XS if (2 * x) % 2 != 1]),
    "asinpi": (lambda x: mpmath.asin(x) / mpmath.pi if abs(x) <= 1 else mpmath.nan, [(x,) for x in UNIT]),
    "acospi": (lambda x: mpmath.acos(x) / mpmath.pi if abs(x) <= 1 else mpmath.nan, [(x,) for x in UNIT]),
    "atanpi": (lambda x: mpmath.atan(x) / mpmath.pi, [(x,) for x in [*XS, 1e300, -1e300]]),
    "atan2pi": (_atan2pi_ref, [(1.0, 1.0), (1.0, -1.0), (-1.0, -1.0), (-1.0, 1.0), (0.0, 1.0), (3.0, 4.0),
                               (-1e-300, 1e300), (1e300, -1e-300), (2.0, 0.0), (-2.0, 0.0), (0.0, 0.0)]),
    "exp2m1": (lambda x: mpmath.power(2, x) - 1,
               [(x,) for x in [0.0, 1e-30, -1e-30, 1e-300, 54.0, -54.0, 25.0, 0.5, -0.75, 1023.5, -1074.0]]),
    "log2p1": (lambda x: mpmath.log(1 + x, 2) if x >= -1 else mpmath.nan,
               [(x,) for x in [0.0, 1e-30, -1e-30, 1e-300, -1.0, -2.0, 2.0**53 - 1, 3.0, 0.5, -0.75, 1e300]]),
    "fma": (lambda a, b, c: a * b + c, [(1 + 2**-52, 1 - 2**-52, -1.0), (0.1, 10.0, -1.0), (3.0, 5.0, -15.0),
                                        (1e300, 1e10, -1e300), (2.0**-600, 2.0**-600, 0.0),
                                        (-0.0, 5.0, 0.0), (1e308, 10.0, -1e308)]),
}
CASES["fmuladd"] = CASES["fma"]


def _encloses(ball, v: mpmath.mpf) -> bool:
    """Whether ``ball`` (None: NaN) encloses the reference ``v`` (NaN: no value), up to the reference's own
    2^-2990 relative error."""
    if ball is None or not mpmath.isfinite(v):
        if ball is None or mpmath.isnan(v):
            return ball is None and mpmath.isnan(v)
        return ball.is_exact() and not ball.is_finite() and (ball > 0) == (v > 0)
    if not ball.is_finite():
        return False
    man, exp = v.man_exp if v != 0 else (0, 0)  # the magnitude's (the sign is apart), at v's own precision
    ref = arb((int(man) if v > 0 else -int(man), int(exp)))
    slack = abs(ref) * arb((1, -2990)) if v != 0 else arb(0)
    return bool(ball.overlaps(ref + arb(0, slack.upper())) if v != 0 else ball.contains(0))


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("prec", [64, 300])
def test_every_rule_encloses_the_exact_value(name, prec):
    # The scalar rules, on every JAX: at a low and a higher working precision each ball contains the
    # exact value (an exact zero and the IEEE infinities exactly), and a finite ball at 300 bits is
    # narrow (the rule does not give up).
    ref, args = CASES[name]
    fn = FUNCTIONS_IEEE[name]
    old = flint_ctx.prec
    flint_ctx.prec = prec
    try:
        for xs in args:
            with mpmath.workprec(REF_BITS):
                want = ref(*(_mp(x) for x in xs))
            got = fn(*(_ball(x) for x in xs))
            assert _encloses(got, want), (name, xs, got, want)
            if want == 0:
                assert got is not None and got.is_exact() and got.is_zero(), (name, xs, got)
            elif got is not None and got.is_finite() and prec == 300:
                assert got.rad() <= abs(got.mid()) * arb((1, -250)), (name, xs, got)
    finally:
        flint_ctx.prec = old


@pytest.fixture
def _prec_85():
    old = flint_ctx.prec
    flint_ctx.prec = 85
    yield
    flint_ctx.prec = old


@pytest.mark.usefixtures("_prec_85")
def test_ieee_exact_values_are_exact():
    # IEEE 754-2019 9.2.1: the values named exactly (zeros, poles, quarter turns) are exact balls, since a
    # ball around them would never round to one float; exp2m1 at an integer is the exact 2^n - 1.
    f = FUNCTIONS_IEEE
    inf = arb("inf")
    assert f["sinpi"](arb(-7)).is_zero() and f["sinpi"](arb(2.0**70)).is_zero()
    assert f["cospi"](arb(2.5)).is_zero() and f["tanpi"](arb(-4)).is_zero()
    assert f["tanpi"](arb(0.5)) == inf and f["tanpi"](arb(1.5)) == -inf
    assert f["tanpi"](arb(-0.5)) == -inf and f["tanpi"](arb(-1.5)) == inf  # odd: tanpi(-x) = -tanpi(x)
    assert f["sinpi"](inf) is None and f["cospi"](-inf) is None and f["tanpi"](inf) is None
    assert f["atanpi"](inf) == arb(0.5) and f["atanpi"](-inf) == arb(-0.5)
    assert f["acospi"](arb(1)).is_zero() and f["acospi"](arb(-1)) == arb(1) and f["asinpi"](arb(2)) is None
    assert f["atan2pi"](inf, inf) == arb(0.25) and f["atan2pi"](-inf, -inf) == arb(-0.75)
    assert f["atan2pi"](arb(0), arb(0)) is None  # the origin has no angle (as atan2)
    # the negative x axis: +1 or -1 by the sign of a zero the reals do not have: never decided
    assert f["atan2pi"](arb(0), arb(-1)).is_nan() and f["atan2pi"](arb(0), -inf).is_nan()
    assert f["exp2m1"](arb(54)) == arb(2**54 - 1) and f["exp2m1"](arb(54)).is_exact()
    assert f["exp2m1"](-inf) == arb(-1) and f["log2p1"](arb(-1)) == -inf and f["log2p1"](arb(-1.5)) is None
    assert f["fma"](arb(0), inf, arb(1)) is None and f["fma"](inf, arb(1), -inf) is None  # 0 * inf, inf - inf


def _oracle(fn, *cols, dtype):
    with jax.enable_x64(dtype is np.float64):
        res = oracles.evaluate(fn, *(np.asarray(c, dtype) for c in cols))
        jax_values = np.asarray(fn(*(np.asarray(c, dtype) for c in cols)))
    return np.asarray(res.values), np.asarray(res.certain), jax_values


PRIMITIVES = {
    "sinpi": lambda x: lax.sinpi(x), "cospi": lambda x: lax.cospi(x), "tanpi": lambda x: lax.tanpi(x),
    "asinpi": lambda x: lax.asinpi(x), "acospi": lambda x: lax.acospi(x), "atanpi": lambda x: lax.atanpi(x),
    "atan2pi": lambda y, x: lax.atan2pi(y, x), "exp2m1": lambda x: lax.exp2m1(x),
    "log2p1": lambda x: lax.log2p1(x), "fma": lambda a, b, c: lax.fma(a, b, c),
    "fmuladd": lambda a, b, c: lax.fmuladd(a, b, c),
}


@new_jax
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(PRIMITIVES))
def test_primitives_round_to_the_exact_values(name, dtype):
    ref, args = CASES[name]
    # operands that are this dtype's floats (finite), and the exact value of each, rounded once
    wide = [np.asarray(c, np.float64) for c in zip(*args)]
    keep = np.all([np.abs(c) <= np.finfo(dtype).max for c in wide], axis=0)  # this dtype's finite floats
    cols = [c[keep].astype(dtype) for c in wide]
    got, certain, _ = _oracle(PRIMITIVES[name], *cols, dtype=dtype)
    with mpmath.workprec(REF_BITS):
        want = [rounded(ref(*(_mp(v) for v in xs)), dtype) for xs in zip(*cols)]
    on_cut = (name == "atan2pi") & (cols[0] == 0) & (cols[-1] < 0)
    assert certain[~on_cut].all() and not certain[on_cut].any()
    np.testing.assert_array_equal(got[~on_cut], np.asarray(want, dtype)[~on_cut])


def _nan_ref(v):
    return v if mpmath.isfinite(v) or mpmath.isinf(v) else mpmath.nan


def test_fma_rounds_once():
    # fma(a, b, c) = a b + c rounded once (exact rationals): the product's low half survives the
    # cancellation, where a * b + c rounds the product first and returns 0
    a, b, c = 1 + 2.0**-52, 1 - 2.0**-52, -1.0
    assert float(Fraction(a) * Fraction(b) + Fraction(c)) == -(2.0**-104)
    old = flint_ctx.prec
    flint_ctx.prec = 128  # the product's 106 bits: exact (at float64's first pass, 85 bits, the ball
    try:  # holds 0 and the oracle escalates)
        assert FUNCTIONS_IEEE["fma"](_ball(a), _ball(b), _ball(c)) == arb((-1, -104))
    finally:
        flint_ctx.prec = old


@new_jax
def test_special_values_are_jaxs_ieee_values():
    # Where IEEE 754-2019 names a value (and JAX returns it), the oracle's exact value is the same float:
    # a correctly implemented primitive is judged 0 bits wrong there.
    x = np.array([0.0, 3.0, -4.0, 0.5, 1.5, -0.5, -1.5, 2.0**60, 1e300], np.float64)
    for fn in (lax.sinpi, lax.cospi, lax.tanpi):
        got, certain, jax_values = _oracle(fn, x, dtype=np.float64)
        assert certain.all()
        np.testing.assert_array_equal(got, jax_values)
    y = np.array([1.0, -1.0, 0.0, np.inf, -np.inf, 1.0, -1.0])
    xx = np.array([1.0, -1.0, 5.0, np.inf, -np.inf, np.inf, -np.inf])
    got, certain, jax_values = _oracle(lax.atan2pi, y, xx, dtype=np.float64)
    assert certain.all()
    np.testing.assert_array_equal(got, jax_values)  # 1/4, -3/4, 0, 1/4, -3/4, 0, -1
    e = np.array([0.0, 54.0, -54.0, 1024.0, -np.inf, np.inf])
    got, certain, jax_values = _oracle(lax.exp2m1, e, dtype=np.float64)
    assert certain.all()
    np.testing.assert_array_equal(got, jax_values)  # 2^54 - 1: a tie, to even 2^54
    np.testing.assert_array_equal(got, [0.0, 2.0**54, -1.0, np.inf, -1.0, np.inf])


# ---------------------------------------------------------------------------------- library routines
ROUTINE_REF_BITS = 320  # mpmath's Bessel functions at 3000 bits take seconds each; 320 bits round float64


def _routine(fn, ref, *cols, bits=ROUTINE_REF_BITS):
    with jax.enable_x64(True), jax.numpy_dtype_promotion("standard"):
        res = oracles.evaluate(fn, *(np.asarray(c, np.float64) for c in cols))
    with mpmath.workprec(bits):
        want = [rounded(_nan_ref(ref(*(_mp(v) for v in xs))), np.float64) for xs in zip(*cols)]
    assert np.asarray(res.certain).all()
    np.testing.assert_array_equal(np.asarray(res.values), np.asarray(want, np.float64))


def test_gamma_and_betaln_are_their_functions():
    # Every JAX: on 0.12.1 recognised (gamma_real, _betaln: Stirling's series in double-word arithmetic),
    # before evaluated through bodies that are these formulas (b < 8 keeps old betaln off its series).
    import jax.scipy.special as sp

    _routine(sp.gamma, mpmath.gamma, [0.5, 3.0, -2.5, 30.2, 5.0, 1e-3])
    _routine(sp.betaln, lambda a, b: mpmath.log(abs(mpmath.beta(a, b))), [0.5, 3.0, 2.5, -2.5, 1e-3],
             [2.0, 4.0, 7.5, 1.2, 7.0])


@new_jax
def test_new_routines_are_their_functions():
    import jax.scipy.special as sp

    _routine(sp.gamma, mpmath.gamma, [171.5, -170.5, 1e-310])  # near overflow, past it in 1/x
    _routine(sp.betaln, lambda a, b: mpmath.log(abs(mpmath.beta(a, b))), [1e6, 2.5, 20.0, 1e-300],
             [1e6, 1e10, 30.5, 3.0])
    # log|B| at the poles, JAX's conventions: +inf at a pole of one argument, -inf at a pole of the sum,
    # the finite limit where the poles of Gamma(p) and Gamma(p + q) cancel: B(-3, 2) = 1/((-3)(-2)) = 1/6
    with jax.enable_x64(True):
        res = oracles.evaluate(sp.betaln, np.array([-2.0, 0.5, -3.0, -1.5, 0.0]),
                               np.array([0.5, -2.5, 2.0, 0.5, 3.0]))
    assert np.asarray(res.certain).all()
    with mpmath.workprec(REF_BITS):
        sixth = rounded(mpmath.log(mpmath.mpf(1) / 6), np.float64)
    np.testing.assert_array_equal(np.asarray(res.values), [np.inf, -np.inf, sixth, -np.inf, np.inf])
    _routine(sp.ndtri_exp, lambda y: mpmath.sqrt(2) * mpmath.erfinv(2 * mpmath.exp(y) - 1),
             [-1e-20, -0.5, -3.0, -700.0, -1e-300, -40.0], bits=REF_BITS)  # 2 e^y - 1 loses 1000 bits
    bessel = [(sp.jn, mpmath.besselj, [0.25, 3.0, -7.5, 100.0, 1e-5]),
              (sp.yn, mpmath.bessely, [0.25, 3.0, 7.5, 100.0, 1e-5]),
              (sp.iv, mpmath.besseli, [0.25, 3.0, -7.5, 100.0]),
              (sp.kn, mpmath.besselk, [0.25, 3.0, 7.5, 100.0, 1e-5])]
    for fn, ref, xs in bessel:
        for n in (0, 1, 2, 5, -3):
            _routine(lambda z, fn=fn, n=n: fn(n, z), lambda x, ref=ref, n=n: ref(n, x), xs)


def _inverse_gammainc(a, y, upper, guess):
    """The root of mpmath's regularized incomplete gamma (in ``t = log x``, by its Illinois solver on a
    bracket around JAX's float value)."""
    def f(t):  # log P - log y: relative, since y may be 1e-300
        x = mpmath.exp(t)
        return mpmath.log(mpmath.gammainc(a, x, mpmath.inf, regularized=True) if upper
                          else mpmath.gammainc(a, 0, x, regularized=True)) - mpmath.log(y)
    t0 = mpmath.log(guess)
    return mpmath.exp(mpmath.findroot(f, (t0 - mpmath.mpf(1) / 8, t0 + mpmath.mpf(1) / 8), solver="illinois",
                                      tol=mpmath.mpf(2) ** -600))


@new_jax
def test_gammaincinv_is_the_inverse():
    # x with P(a, x) = p (Q for gammainccinv): mpmath's findroot on its own gammainc (Newton in its
    # arithmetic, from JAX's value) is the reference; JAX's conventions at the edges: 0 and +inf at the
    # ends of [0, 1], NaN outside and for a = 0
    import jax.scipy.special as sp

    a = np.array([0.5, 2.0, 100.0, 1e-3, 3.0, 2.5])
    y = np.array([0.3, 0.9, 0.01, 0.5, 1e-300, 0.75])
    for fn, upper in ((sp.gammaincinv, False), (sp.gammainccinv, True)):
        with jax.enable_x64(True):
            res = oracles.evaluate(fn, a, y)
            guess = np.asarray(fn(a, y))
        with mpmath.workprec(ROUTINE_REF_BITS):
            want = [rounded(_inverse_gammainc(_mp(ai), _mp(yi), upper, _mp(g)), np.float64)
                    for ai, yi, g in zip(a, y, guess)]
        assert np.asarray(res.certain).all(), fn
        np.testing.assert_array_equal(np.asarray(res.values), np.asarray(want), err_msg=str(fn))
    with jax.enable_x64(True):
        edges = oracles.evaluate(sp.gammaincinv, np.array([2.0, 2.0, 0.0, 2.0, -1.0]),
                                 np.array([0.0, 1.0, 0.5, 1.5, 0.5]))
    np.testing.assert_array_equal(np.asarray(edges.values), [0.0, np.inf, np.nan, np.nan, np.nan])


@new_jax
def test_new_routines_have_exact_derivatives():
    # The gradient's reference (each routine call one jaxstab_exact equation carrying its partials):
    # d/da log|B| = psi(a) - psi(a + b), Gamma' = Gamma psi, d/dy ndtri(e^y) = e^y / phi(ndtri(e^y)),
    # J_2' = (J_1 - J_3)/2, K_2' = -(K_1 + K_3)/2, I_2' = (I_1 + I_3)/2, Y_2' = (Y_1 - Y_3)/2
    import jax.scipy.special as sp
    from test_library_gradients import _reference_gradient

    def _d_gammaincinv(a, p):
        with jax.enable_x64(True):
            guess = float(sp.gammaincinv(a, float(p)))
        x = _inverse_gammainc(mpmath.mpf(a), p, False, mpmath.mpf(guess))
        return mpmath.gamma(a) * x ** (1 - a) * mpmath.exp(x)

    def d_ndtri_exp(y):
        q = mpmath.sqrt(2) * mpmath.erfinv(2 * mpmath.exp(y) - 1)
        return mpmath.exp(y) * mpmath.sqrt(2 * mpmath.pi) * mpmath.exp(q * q / 2)

    fns = {
        "betaln": (lambda a: sp.betaln(a, 2.5), lambda a: mpmath.digamma(a) - mpmath.digamma(a + 2.5)),
        "gamma": (sp.gamma, lambda x: mpmath.gamma(x) * mpmath.digamma(x)),
        "ndtri_exp": (lambda y: sp.ndtri_exp(-y), lambda y: -d_ndtri_exp(-y)),
        "jn": (lambda z: sp.jn(2, z), lambda x: (mpmath.besselj(1, x) - mpmath.besselj(3, x)) / 2),
        "yn": (lambda z: sp.yn(2, z), lambda x: (mpmath.bessely(1, x) - mpmath.bessely(3, x)) / 2),
        "iv": (lambda z: sp.iv(2, z), lambda x: (mpmath.besseli(1, x) + mpmath.besseli(3, x)) / 2),
        "kn": (lambda z: sp.kn(2, z), lambda x: -(mpmath.besselk(1, x) + mpmath.besselk(3, x)) / 2),
        # dx/dp = 1 / P'(x) = Gamma(a) x^(1-a) e^x at x = gammaincinv(a, p), with p = x / 20 here
        "gammaincinv": (lambda p: sp.gammaincinv(2.5, p / 20), lambda p: _d_gammaincinv(2.5, p / 20) / 20),
    }
    for name, (fn, ref) in fns.items():
        for x in (0.75, 3.0, 12.5):
            (g,), (sure,), kept = _reference_gradient(fn, [x])
            with mpmath.workprec(ROUTINE_REF_BITS):
                want = rounded(ref(_mp(x)), np.float64)
            assert sure and not kept, (name, x)
            assert float(g) == float(want), (name, x)
