"""The oracle's special functions against mpmath, computed independently at 240 bits.

Each case is an input where the exact value is a normal float of both dtypes, so the reference is mpmath's
value rounded once to the dtype's significand (``mp.workprec``: round to nearest), no oracle code involved.
The oracle must return exactly that float and call it certain: correctly rounded, proven. Cases cover
ordinary arguments and extreme ones (tiny and huge shapes, far tails, negative shifts, arguments next to
the poles and next to +-1 for ``erf_inv``).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import mpmath as mp
import numpy as np
import pytest
from flint import arb
from flint import ctx as flint_ctx
from jax import lax
from jax.scipy import special as jsp

from pytest_jaxstab import oracles
from pytest_jaxstab.oracles.primitives._special import FUNCTIONS_SPECIAL

DTYPES = [np.float32, np.float64]
SIG = {np.float32: 24, np.float64: 53}
REF_PREC = 240


def _rounded(v: mp.mpf, dtype: type) -> float:
    """mpmath's exact value rounded once, to nearest, to the dtype's significand (normal range)."""
    with mp.workprec(SIG[dtype]):
        return float(+v)


def _p(a, x):
    return mp.gammainc(a, 0, x, regularized=True)


def _q(a, x):
    return mp.gammainc(a, x, mp.inf, regularized=True)


def _dpda(a, x):
    # In the upper tail P is 1 - tiny: differentiate the tiny Q there (dP/da = -dQ/da), else P.
    if x > a:
        return -mp.diff(lambda t: _q(t, x), a)
    return mp.diff(lambda t: _p(t, x), a)


def _gamma_sample_grad(a, x):
    density = x ** (a - 1) * mp.exp(-x) / mp.gamma(a)
    return -_dpda(a, x) / density


# (name, jax function, reference on mpf arguments, argument tuples). Arguments are exact in float32.
CASES: list[tuple[str, Callable, Callable, list[tuple[float, ...]]]] = [
    ("igamma", lax.igamma, _p,
     [(0.5, 1.0), (2.0, 3.0), (1e-3, 1e-3), (100.0, 90.0), (1e4, 10050.0), (3.0, 0.015625), (0.25, 40.0),
      (1e-20, 1.0), (50.0, 1.0)]),
    ("igammac", lax.igammac, _q,
     [(0.5, 1.0), (2.0, 3.0), (1e-3, 1e-3), (100.0, 90.0), (1e4, 10050.0), (0.5, 60.0), (3.0, 0.25),
      (20.0, 70.0)]),
    ("betainc", lax.betainc, lambda a, b, x: mp.betainc(a, b, 0, x, regularized=True),
     [(0.5, 1.0, 0.5), (2.0, 3.0, 0.1), (1e-3, 1e-3, 0.9), (100.0, 90.0, 0.5), (1e4, 10050.0, 0.5),
      (5.0, 0.5, 0.001), (0.5, 5.0, 0.999), (30.0, 2.0, 0.25), (0.25, 640.0, 0.9921875)]),
    ("bessel_i0e", lax.bessel_i0e, lambda x: mp.besseli(0, x) * mp.exp(-abs(x)),
     [(0.0,), (1.0,), (-3.0,), (1e4,), (1e-30,), (700.0,), (-1e30,), (0.125,)]),
    ("bessel_i1e", lax.bessel_i1e, lambda x: mp.besseli(1, x) * mp.exp(-abs(x)),
     [(1.0,), (-3.0,), (1e4,), (1e-30,), (700.0,), (-1e30,), (-0.125,)]),
    ("zeta", lax.zeta, mp.zeta,
     [(2.0, 1.0), (3.0, -0.5), (1.5, 1e-3), (1.0009765625, 1.0), (50.0, 1.0), (4.0, -7.25), (2.0, 1e6),
      (30.0, 0.5), (200.0, 1.5), (70.0, 0.875), (65.0, 1.0), (100.0, -2.5)]),
    ("polygamma", lax.polygamma, lambda n, x: mp.polygamma(int(n), x),
     [(1.0, 1.0), (2.0, -0.5), (3.0, 1e-3), (1.0, -2.5), (0.0, 3.0), (1.0, 1e10), (4.0, 7.0),
      (2.0, -3.999)]),
    ("igamma_grad_a", lax.igamma_grad_a, _dpda,
     [(1.0, 1.0), (2.0, 3.0), (0.5, 1e-3), (10.0, 30.0), (1e-3, 2.0), (40.0, 35.0)]),
    ("erf_inv", lax.erf_inv, mp.erfinv,
     [(0.5,), (1 - 2.0**-24,), (-(1 - 2.0**-24),), (1e-30,), (0.9990234375,)]),
    ("erf_inv_f64_edge", lax.erf_inv, mp.erfinv, [(1 - 2.0**-53,), (-(1 - 2.0**-50),)]),
    ("lgamma_near_poles", lax.lgamma, mp.loggamma,
     [(-1 + 2.0**-20,), (-3.5,), (-2 - 2.0**-18,), (1e-30,), (1e30,)]),
    ("digamma_near_poles", lax.digamma, mp.digamma,
     [(-2 + 2.0**-20,), (-0.5,), (-1e-30,), (1e30,), (-5.75,)]),
]


def _args_fit(dtype: type, args: tuple[float, ...]) -> bool:
    return all(float(dtype(a)) == a for a in args)


PARAMS = [
    pytest.param(name, fn, ref, args, dtype, id=f"{name}-{np.dtype(dtype).name}")
    for name, fn, ref, cases in CASES
    for dtype in DTYPES
    for args in [[c for c in cases if _args_fit(dtype, c)]]
    if args
]


@pytest.fixture(autouse=True)
def _x64():
    with jax.enable_x64(True):
        yield


def _lgamma_ref(x: mp.mpf) -> mp.mpf:
    return mp.log(abs(mp.gamma(x)))


@pytest.mark.parametrize(("name", "fn", "ref", "cases", "dtype"), PARAMS)
def test_matches_mpmath_correctly_rounded(name, fn, ref, cases, dtype):
    columns = [np.asarray(col, dtype) for col in zip(*cases)]
    result = oracles.evaluate(fn, *columns)
    with mp.workprec(REF_PREC):
        if ref is mp.loggamma:
            ref = _lgamma_ref  # mpmath's loggamma is complex for negative arguments; lgamma is log|Gamma|
        want = [_rounded(ref(*(mp.mpf(a) for a in c)), dtype) for c in cases]
    got = np.asarray(result.values, dtype)
    assert np.asarray(result.certain).all(), f"{name}: uncertain at {np.asarray(cases)[~result.certain]}"
    np.testing.assert_array_equal(got, np.asarray(want, dtype), err_msg=f"{name} at {cases}")


# --------------------------------------------------------------- edges: the documented conventions
INF, NAN = np.inf, np.nan
EDGES = [
    # (name, function, argument columns, expected): conventions of oracles/primitives/_special.py, by hand.
    # The far tails (a = 1.36e38, x = 9.7e23; a = 1e30, x = 1e31) are beyond Arb's routines: the proven
    # tail bounds of _special decide them (P <= x^a e^-x / Gamma(a+1) / (1 - x/(a+1)), astronomically small).
    ("igamma", lax.igamma, ([0.0, 1.0, -1.0, 1.0, 1.0, INF, 0.0, INF, 2.0, 1.3583006e38, 1e30],
                            [1.0, 0.0, 1.0, -1.0, INF, 1.0, 0.0, INF, 1e30, 9.699709e23, 1e31]),
     [1.0, 0.0, NAN, NAN, 1.0, 0.0, NAN, NAN, 1.0, 0.0, 1.0]),
    ("igammac", lax.igammac, ([0.0, 1.0, -1.0, 1.0, INF, 3.0, 1.3583006e38, 1e30],
                              [1.0, 0.0, 1.0, INF, 1.0, 1e30, 9.699709e23, 1e31]),
     [0.0, 1.0, NAN, 0.0, 1.0, 0.0, 1.0, 0.0]),
    ("betainc", lax.betainc, ([0.0, 1.0, 2.0, 2.0, 1.0, INF, 2.0, 0.0, 1.0, 0.0],
                              [1.0, 0.0, 3.0, 3.0, 1.0, 2.0, INF, 1.0, 0.0, 0.0],
                              [0.5, 0.5, 0.0, 1.0, 1.5, 0.5, 0.5, 0.0, 1.0, 0.5]),
     [1.0, 0.0, 0.0, 1.0, NAN, 0.0, 1.0, NAN, NAN, NAN]),
    ("bessel_i0e", lax.bessel_i0e, ([INF, -INF, 0.0],), [0.0, 0.0, 1.0]),
    ("bessel_i1e", lax.bessel_i1e, ([INF, -INF, 0.0],), [0.0, 0.0, 0.0]),
    ("zeta", lax.zeta, ([1.0, 0.5, 2.0, 3.0, 2.5, INF, INF, INF, 2.0, -INF, 1e30, 1e30, 3e38],
                        [1.0, 1.0, 0.0, -1.0, -0.5, 2.0, 1.0, 0.5, INF, 1.0, 3.0, 0.5, 4317407.0]),
     [INF, NAN, INF, NAN, NAN, 0.0, 1.0, INF, 0.0, NAN, 0.0, INF, 0.0]),
    ("polygamma", lax.polygamma, ([1.0, 2.0, 0.5, -1.0, 3.0, 1.0], [0.0, 0.0, 1.0, 1.0, INF, -3.0]),
     [INF, NAN, NAN, NAN, 0.0, INF]),
    ("igamma_grad_a", lax.igamma_grad_a, ([1.0, -1.0, 2.0], [0.0, 1.0, INF]), [0.0, NAN, 0.0]),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("name", "fn", "cols", "expected"), EDGES, ids=[e[0] for e in EDGES])
def test_domain_edges(name, fn, cols, expected, dtype):
    result = oracles.evaluate(fn, *(np.asarray(c, dtype) for c in cols))
    np.testing.assert_array_equal(np.asarray(result.values), np.asarray(expected, dtype))
    assert np.asarray(result.certain).all()


def test_huge_shape_is_uncertain_not_wrong():
    # Arb cannot enclose P(1e30, 1e30) at any precision the oracle tries: the element must come back
    # uncertain (excluded from verdicts), never a guessed value called certain.
    result = oracles.evaluate(lax.igamma, np.float64(1e30), np.float64(1e30), max_precision=256)
    assert not bool(result.certain)


def test_jax_float32_igamma_large_shape_is_caught():
    # JAX's float32 igamma at a = 1e4 loses about 10 bits (its series runs in float32); the oracle's value
    # is mpmath's, rounded, so the error shows.
    a, x = np.float32(1e4), np.float32(10050.0)
    exact = oracles.evaluate(lax.igamma, a, x).values
    with jax.enable_x64(False):
        got = np.asarray(lax.igamma(a, x))
    assert float(oracles.error_bits(got, exact)) > 4


# --------------------------------------------------------------------------------- random_gamma_grad
# jax 0.12's lax.random_gamma_grad inlines JAX's own series (no primitive in the jaxpr); releases that
# bind the `random_gamma_grad` primitive reach the oracle's rule, so the rule is tested on balls directly.
@pytest.mark.parametrize("prec", [64, 200, 600])
@pytest.mark.parametrize(("a", "x"), [(1.0, 1.0), (2.0, 3.0), (0.5, 1e-3), (10.0, 30.0), (1e-2, 1e-30),
                                      (40.0, 35.0), (3.0, 200.0)])
def test_random_gamma_grad_ball_encloses_mpmath(a, x, prec):
    saved = flint_ctx.prec
    try:
        flint_ctx.prec = prec
        ball = FUNCTIONS_SPECIAL["random_gamma_grad"](arb(a), arb(x))
        ends = [v.man_exp() for v in (ball.lower(), ball.upper())] if ball.is_finite() else []
    finally:
        flint_ctx.prec = saved
    with mp.workprec(REF_PREC):
        want = _gamma_sample_grad(mp.mpf(a), mp.mpf(x))
        if not ball.is_finite():
            # Undecided is allowed only where the series' cancellation (terms up to e^x) needs more bits
            # than this precision has; escalation then goes higher.
            assert prec < x * 1.4427 + 64
            return
        lo, hi = (mp.ldexp(int(m), int(e)) for m, e in ends)  # the ball's ends, exactly
        slack = abs(want) * mp.mpf(2) ** (40 - REF_PREC)  # mpmath's numerical derivative is that good
        assert lo - slack <= want <= hi + slack, f"{ball} does not contain {want}"
        if prec >= 200 and x < 50:  # narrow where the alternating series cancels little (terms <= e^x)
            assert (hi - lo) <= abs(want) * mp.mpf(2) ** (-(prec - 40) // 2)


def test_random_gamma_grad_edges():
    f = FUNCTIONS_SPECIAL["random_gamma_grad"]
    assert f(arb(1), arb(0)).is_zero()  # x e^x (log x ...) -> 0 as x -> 0
    assert f(arb(0), arb(1)) is None and f(arb(-1), arb(1)) is None and f(arb(2), arb(-1)) is None
    assert f(None, arb(1)) is None


# ------------------------------------------------------------------------------ bitcast_convert_type
def test_bitcast_from_integers_is_exact():
    bits = np.asarray([0x3F800000, 0x3FFFFFFF, 0x00000001, 0x7F800000, 0xFF7FFFFF, 0x80000000], np.uint32)
    want = bits.view(np.float32)  # numpy's reinterpretation, the independent reference
    got = oracles.evaluate(lambda b: lax.bitcast_convert_type(b, jnp.float32), bits)
    np.testing.assert_array_equal(np.asarray(got.values), want)
    assert np.asarray(got.certain).all()


@pytest.mark.parametrize("dtype", DTYPES)
def test_bitcast_to_integers_reads_the_rounded_float(dtype):
    # x * 3 is exact in both dtypes for these inputs; x / 3 is not, and its bits are those of the correctly
    # rounded quotient (the operand rounded to its dtype, as for nextafter).
    x = np.asarray([1.5, -2.0, 1e-30, 7.0], dtype)
    itype = np.uint32 if dtype == np.float32 else np.uint64
    got = oracles.evaluate(lambda v: (lax.bitcast_convert_type(v * 3, itype),
                                      lax.bitcast_convert_type(v / 3, itype)), x)
    with mp.workprec(REF_PREC):
        thirds = np.asarray([_rounded(mp.mpf(float(v)) / 3, dtype) for v in x], dtype)
    np.testing.assert_array_equal(np.asarray(got.values[0]), (x * 3).view(itype))
    np.testing.assert_array_equal(np.asarray(got.values[1]), thirds.view(itype))


def test_bitcast_to_narrower_integers_adds_an_axis():
    x = np.asarray([1.0, -0.5], np.float32)
    got = oracles.evaluate(lambda v: lax.bitcast_convert_type(v, jnp.uint8), x)
    np.testing.assert_array_equal(np.asarray(got.values), x.view(np.uint8).reshape(2, 4))


@pytest.mark.parametrize("dtype", DTYPES)
def test_ndtri_is_evaluated(dtype):
    # jax.scipy.special.ndtri (it bitcasts on some paths) is evaluated exactly as JAX writes it: a rational
    # approximation, so within 2 ulps of the true quantile here, not necessarily correctly rounded
    # (judging library routines by their mathematics is a separate piece of work).
    p = np.asarray([0.3, 1e-30, 0.999755859375, 0.5, 2.0**-100], dtype)
    got = oracles.evaluate(jsp.ndtri, p)
    assert np.asarray(got.certain).all()
    with mp.workprec(REF_PREC):
        want = np.asarray([float(mp.sqrt(2) * mp.erfinv(2 * mp.mpf(float(v)) - 1)) for v in p])
    spacing = np.spacing(np.abs(want).astype(dtype)).astype(np.float64)
    assert np.all(np.abs(np.asarray(got.values, np.float64) - want) <= 2 * spacing)
