"""Library routines judged by their mathematics (issue 27 item 2).

References are mpmath at 2,000 bits, computed from the definitions (``log(ncdf(x))``, ``erfinv``,
``besseli``, ``ei``, ``exp(x^2) erfc(x)``), never from the code under test. A reference is rounded to
the dtype by mpmath itself (one rounding, to the dtype's significand), so "equal" means the oracle's
value is the correctly rounded true value.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import jax.scipy.special as sp
import mpmath
import numpy as np
import pytest
from flint import arb

from pytest_jaxstab import oracles
from pytest_jaxstab._errors import ArgumentError, OracleError

# Routines are recognised by the calls JAX makes (docs/architecture.md, "The oracle"). The oldest
# JAX we support (0.10) inlines ndtri (no call of its own: recognised by its equations' frames, so
# routine_name, which reads calls, does not name it there), writes expn as a call of `expn` on (n, x)
# inside a custom_jvp of x alone (recognised), and makes other calls, so the list of JAX's calls
# differs. Those tests run on JAX >= 0.11 only.
OLD_JAX = tuple(int(v) for v in jax.__version__.split(".")[:2]) < (0, 11)
newer_jax = pytest.mark.skipif(OLD_JAX, reason="jax 0.10 writes this routine differently (see OLD_JAX)")


@pytest.fixture(autouse=True)
def _high_precision():
    with mpmath.workprec(2000):
        yield


def _round(v: Any, dtype: type = np.float64) -> float:
    """``v`` correctly rounded to ``dtype`` (one rounding, at the dtype's significand)."""
    bits = 53 if dtype is np.float64 else 24
    if mpmath.isinf(v):
        return float(v)
    with mpmath.workprec(bits):
        r = +v
    return float(dtype(float(r)))


def _oracle(fn, x, dtype):
    with jax.enable_x64(dtype is np.float64):
        res = oracles.evaluate(fn, np.asarray(x, dtype))
    return np.asarray(res.values), np.asarray(res.certain)


def _log_ndtr(x):
    return mpmath.log(mpmath.ncdf(mpmath.mpf(x)))


LOG_NDTR_ARGS = [-1e300, -1e150, -1e8, -1e4, -300.0, -38.5, -20.0, -19.5, -8.0, -3.0, -0.5, 0.0, 1.0, 5.0,
                 8.5, 20.0]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_log_ndtr_is_the_log_of_the_normal_cdf(dtype):
    args = [x for x in LOG_NDTR_ARGS if dtype is np.float64 or abs(x) < 3e38]
    got, certain = _oracle(sp.log_ndtr, args, dtype)
    want = [_round(_log_ndtr(x), dtype) for x in args]
    assert certain.all()
    np.testing.assert_array_equal(got, np.asarray(want, dtype))


def _mp_bits(value: Any, exact: Any, dtype: type = np.float64) -> float:
    """``log2(1 + floats between value and exact)``, ``exact`` (mpmath) rounded once to ``dtype``, the
    floats counted from their bit patterns: mpmath's measurement of an error, independent of the oracle."""
    itype, width = (np.int64, 64) if dtype is np.float64 else (np.int32, 32)
    magnitude = (1 << (width - 1)) - 1

    def order(v: float) -> int:
        i = int(np.asarray(v, dtype).view(itype))
        return i if i >= 0 else -(i & magnitude)

    return float(np.log2(1 + abs(order(float(value)) - order(_round(exact, dtype)))))


# jax 0.10 to 0.12.0's log_ndtr below -20 (float64), written by hand op for op: log Phi's asymptotic
# series cut after three terms, -203.91715537511897 at -20 where log Phi(-20) is -203.917155371097264,
# and its derivative rule exp(log phi(x) - log_ndtr(x)), which turns that value's absolute error into the
# gradient's relative error. Declared as log Phi (`oracles.define`), it is what those releases' log_ndtr
# was to the oracle: the premise of the tests of a truncated routine on every JAX (0.12.1's log_ndtr is
# accurate there; its tests below compare the verdict with mpmath's measurement instead).
_LOG_2PI = math.log(2 * math.pi)


@jax.custom_jvp
def _series_log_ndtr(x):
    x2 = x * x
    log_scale = -0.5 * x2 - jnp.log(-x) - 0.5 * _LOG_2PI
    return log_scale + jnp.log(1 + 3 / (x2 * x2) - (1 / x2 + 15 / (x2 * x2 * x2)))


@_series_log_ndtr.defjvp
def _series_log_ndtr_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    value = _series_log_ndtr(x)
    return value, jnp.exp(-0.5 * x * x - 0.5 * _LOG_2PI - value) * t


def _log_phi_ball(x: arb) -> arb:
    return ((-x / arb(2).sqrt()).erfc() / 2).log()


def _mills_ball(x: arb) -> arb:  # d/dx log Phi = phi / Phi
    return (-(x * x) / 2).exp() / (2 * arb.pi()).sqrt() / ((-x / arb(2).sqrt()).erfc() / 2)


@oracles.define(exact=_log_phi_ball, derivative=_mills_ball)
def series_log_ndtr(x):
    return _series_log_ndtr(x)


def test_log_ndtr_at_minus_20_is_judged_against_the_true_value():
    # A routine is judged by its mathematics, not its body: the series (jax 0.10 to 0.12.0's log_ndtr)
    # evaluated exactly agrees with its own float value (the old oracle's verdict), the function does
    # not. On every JAX: the oracle's value is the true one, certain; its verdict on the installed
    # log_ndtr is the error mpmath measures (17 bits up to 0.12.0, 0 on 0.12.1); the series is 17 bits off.
    with jax.enable_x64(True):
        x = np.float64(-20.0)
        jax_value = np.float64(sp.log_ndtr(x))
        res = oracles.evaluate(sp.log_ndtr, x)
        bits = float(oracles.error_bits(jax_value, res.values))
        series = np.float64(series_log_ndtr(x))
        series_res = oracles.evaluate(series_log_ndtr, x)
        series_bits = float(oracles.error_bits(series, series_res.values))
    exact = _log_ndtr(-20.0)
    assert float(res.values) == float(series_res.values) == _round(exact) == -203.91715537109727
    assert bool(res.certain) and bool(series_res.certain)
    assert bits == _mp_bits(jax_value, exact)
    assert series == -203.91715537511897
    # |series - true| = 4.0e-9, the ulp at 204 is 2.8e-14: about 1.4e5 ulps, i.e. 17 bits.
    assert series_bits == _mp_bits(series, exact) > 16


def test_log_ndtr_near_one_is_judged_by_its_error():
    # Phi(5) = 1 - 2.87e-7: the log of Phi(5) rounded near 1 keeps ~36 of the result's 53 bits (the
    # rounding of 1 - 2.87e-7 is 1.1e-16, 3.9e-10 of the result): ~19 bits off. That is jax 0.10 to
    # 0.12.0's log_ndtr (log(ndtr(x)) up to 8); 0.12.1's takes log1p(-Q(x)). On every JAX: the verdict
    # on the installed log_ndtr is mpmath's measurement, and log(ndtr(5)) written out is ~19 bits off.
    def written(x):
        return jnp.log(sp.ndtr(x))

    with jax.enable_x64(True):
        x = np.float64(5.0)
        res, got = oracles.evaluate(sp.log_ndtr, x), np.float64(sp.log_ndtr(x))
        wres, wgot = oracles.evaluate(written, x), np.float64(written(x))
    exact = _log_ndtr(5.0)
    assert float(res.values) == float(wres.values) == _round(exact, np.float64)
    assert float(oracles.error_bits(got, res.values)) == _mp_bits(got, exact)
    assert float(oracles.error_bits(wgot, wres.values)) == _mp_bits(wgot, exact) > 15


def test_log_ndtr_inside_a_user_function_and_in_a_check():
    def loss(x):
        return -jnp.sum(sp.log_ndtr(x))

    with jax.enable_x64(True):
        xs = np.array([-20.0, -25.0, -30.0])
        res = oracles.evaluate(loss, xs)
        want = _round(-sum(_log_ndtr(x) for x in xs), np.float64)
        assert float(res.values) == want
        result = jst_check(lambda x: sp.log_ndtr(x), domain=(-1e3, -21.0), judge="accuracy")
        series = jst_check(series_log_ndtr, domain=(-1e3, -21.0), judge="accuracy")
        # the check's verdict on the installed log_ndtr is mpmath's measurement at its worst input
        worst = max((w for w in result.witnesses if w.variant == "original"), key=lambda w: w.error_bits)
        at = float(worst.args[0])
        measured = _mp_bits(np.float64(sp.log_ndtr(np.float64(at))), _log_ndtr(at))
    assert worst.error_bits == result.original.max_error_bits == measured
    assert (result.outcome == "failed") == (measured > result.tolerance_bits)
    assert series.outcome == "failed" and series.original.max_error_bits > 8  # the truncated series is caught


def jst_check(fn, domain, **options):
    import pytest_jaxstab as jst

    return jst.check(fn, shapes=[()], dtype="float64", domain=domain, max_examples=30, seed=0, **options)


def _ndtri_ref(p):
    p = mpmath.mpf(p)
    if p < mpmath.mpf("1e-100"):  # deep tail: solve ncdf(x) = p on the log scale
        start = -mpmath.sqrt(-2 * mpmath.log(p))
        return mpmath.findroot(lambda x: mpmath.log(mpmath.ncdf(x)) - mpmath.log(p), start)
    return mpmath.sqrt(2) * mpmath.erfinv(2 * p - 1)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_ndtri_is_the_normal_quantile(dtype):
    # ndtri's body holds bitcast_convert_type, once unsupported; now it is never entered.
    ps = [1e-30, 1e-10, 0.01, 0.3, 0.5, 0.75, 0.999, 1 - 2.0**-20]
    if dtype is np.float64:
        ps += [1e-300, 1 - 2.0**-50]
    got, certain = _oracle(sp.ndtri, ps, dtype)
    want = [_round(_ndtri_ref(float(dtype(p))), dtype) for p in ps]
    assert certain.all()
    np.testing.assert_array_equal(got, np.asarray(want, dtype))


def test_ndtri_edges():
    got, certain = _oracle(sp.ndtri, [0.0, 1.0, -0.25, 1.5], np.float32)
    np.testing.assert_array_equal(got, np.asarray([-np.inf, np.inf, np.nan, np.nan], np.float32))
    assert certain.all()


@pytest.mark.parametrize(("fn", "ref", "args"), [
    (sp.erfcx, lambda x: mpmath.exp(x * x) * mpmath.erfc(x), [-5.0, -0.5, 0.0, 0.5, 3.0, 30.0, 1e5, 1e15,
                                                              1e300]),
    (sp.i0, lambda x: mpmath.besseli(0, x), [-50.0, -1.0, 0.0, 1e-3, 2.5, 30.0, 700.0]),
    (sp.i1, lambda x: mpmath.besseli(1, x), [-50.0, -1.0, 1e-3, 2.5, 30.0, 700.0]),
    (sp.expi, lambda x: mpmath.ei(x), [-40.0, -1.0, -1e-5, 1e-5, 0.5, 1.0, 40.0, 700.0, 1e300]),
    # jax.scipy.special.erfcinv is newer than the oldest JAX we support (0.10): skipped there
    pytest.param(getattr(sp, "erfcinv", None), lambda y: mpmath.erfinv(1 - y),
                 [1e-30, 1e-5, 0.3, 1.0, 1.7, 2 - 2.0**-30],
                 marks=pytest.mark.skipif(not hasattr(sp, "erfcinv"), reason="no jax.scipy.special.erfcinv")),
], ids=["erfcx", "i0", "i1", "expi", "erfcinv"])
def test_special_routines_float64(fn, ref, args):
    got, certain = _oracle(fn, args, np.float64)
    want = [_round(ref(mpmath.mpf(x)), np.float64) for x in args]
    assert certain.all()
    np.testing.assert_array_equal(got, np.asarray(want))


@pytest.mark.parametrize(("fn", "ref"), [
    (jax.nn.softplus, lambda x: mpmath.log1p(mpmath.exp(x))),
    (jax.nn.log_sigmoid, lambda x: -mpmath.log1p(mpmath.exp(-x))),
    (jax.nn.silu, lambda x: x / (1 + mpmath.exp(-x))),
    (jax.nn.mish, lambda x: x * mpmath.tanh(mpmath.log1p(mpmath.exp(x)))),
], ids=["softplus", "log_sigmoid", "silu", "mish"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_activations(fn, ref, dtype):
    args = [-80.0, -20.0, -1.5, 0.0, 1e-8, 0.75, 15.0, 80.0]
    got, certain = _oracle(fn, args, dtype)
    want = [_round(ref(mpmath.mpf(float(dtype(x)))), dtype) for x in args]
    assert certain.all()
    np.testing.assert_array_equal(got, np.asarray(want, dtype))


@newer_jax
def test_recognition_names_the_routine_and_its_file():
    from pytest_jaxstab.oracles.library._routines import routine_name

    def log_ndtr(x):  # a user's function of the same name is not JAX's routine
        return x * 2.0

    for fn, want in [(sp.log_ndtr, "log_ndtr"), (sp.ndtri, "ndtri"), (jax.nn.softplus, "softplus"),
                     (jax.jit(log_ndtr), None)]:
        eqn = jax.make_jaxpr(fn)(0.5).jaxpr.eqns[0]
        assert routine_name(eqn) == want
    # and its body is evaluated: 2 * 0.25, not log(Phi(0.25))
    assert float(oracles.evaluate(jax.jit(log_ndtr), np.float32(0.25)).values) == 0.5


# ------------------------------------------------------------------------------------ user routines
@oracles.define(exact=lambda x: x.exp().log1p())
def cheap_softplus(x):
    return jnp.where(x > 20.0, x, jnp.log1p(jnp.exp(x)))


def test_defined_routine_is_judged_by_its_definition():
    def model(x):
        return cheap_softplus(x) * 1.0

    with jax.enable_x64(True):
        x = np.array([30.0, 5.0, -3.0])
        res = oracles.evaluate(model, x)
        approx = np.asarray(model(x))
    want = [_round(mpmath.log1p(mpmath.exp(mpmath.mpf(v))), np.float64) for v in x]
    np.testing.assert_array_equal(np.asarray(res.values), want)
    # At 30 the approximation drops exp(-30) = 9.4e-14, 26 ulps of 30: over 4 bits.
    assert float(oracles.error_bits(approx[0], res.values[0])) > 4
    assert res.values[0] > 30.0


def test_define_as_a_call_with_a_name_and_two_arguments():
    def hypot_approx(a, b):
        return jnp.abs(a) + jnp.abs(b)  # deliberately wrong: the oracle must not agree with it

    h = oracles.define(hypot_approx, exact=lambda a, b: (a * a + b * b).sqrt(), name="hypot")
    res = oracles.evaluate(h, np.float32(3.0), np.float32(4.0))
    assert float(res.values) == 5.0 and bool(res.certain)


def test_define_rejects_bad_declarations():
    with pytest.raises(ArgumentError, match="exact must be"):
        oracles.define(lambda x: x, exact=3.0)  # pyright: ignore[reportArgumentType]
    with pytest.raises(ArgumentError, match="Python function"):
        oracles.define(np.sin, exact=lambda x: x.sin())

    def f(x):
        return x

    g = oracles.define(f, exact=lambda x: 1.0)
    with pytest.raises(OracleError, match=r"not a flint\.arb ball"):
        oracles.evaluate(g, np.float32(1.0))


def test_defined_exact_may_say_no_real_value():
    def my_sqrt(x):
        return jnp.sqrt(x)

    s = oracles.define(my_sqrt, exact=lambda x: x.sqrt() if x >= 0 else None)
    res = oracles.evaluate(s, np.asarray([-1.0, 4.0], np.float32))
    np.testing.assert_array_equal(res.values, np.asarray([np.nan, 2.0], np.float32))
    assert arb(4).sqrt() == 2  # the ball API the declaration uses


@pytest.mark.parametrize(("fn", "x", "ref"), [
    (sp.log_ndtr, -20.0, lambda x: mpmath.npdf(x) / mpmath.ncdf(x)),
    (sp.log_ndtr, -1e5, lambda x: mpmath.npdf(x) / mpmath.ncdf(x)),
    (sp.ndtri, 1e-10, lambda p: 1 / mpmath.npdf(mpmath.sqrt(2) * mpmath.erfinv(2 * p - 1))),
    (sp.erfcx, 30.0, lambda x: 2 * x * mpmath.exp(x * x) * mpmath.erfc(x) - 2 / mpmath.sqrt(mpmath.pi)),
    (jax.nn.softplus, 0.0, lambda x: 1 / (1 + mpmath.exp(-x))),
    # silu's linearized and transposed copies keep its name and source: they must not be mistaken
    # for silu itself (d/dx x s(x) = s(x) (1 + x (1 - s(x))), s the logistic function)
    (jax.nn.silu, 1.5, lambda x: (1 / (1 + mpmath.exp(-x))) * (1 + x * (1 - 1 / (1 + mpmath.exp(-x))))),
    (jax.nn.log_sigmoid, -3.0, lambda x: 1 - 1 / (1 + mpmath.exp(-x))),
], ids=["log_ndtr-20", "log_ndtr-1e5", "ndtri", "erfcx", "softplus", "silu", "log_sigmoid"])
def test_routine_gradients_are_the_derivatives_of_the_mathematics(fn, x, ref):
    # The gradient's reference (what grad=True judges against) differentiates each routine by its exact
    # derivative (oracles/library/_reference.py), not by JAX's rule or body: correctly rounded. (JAX's
    # rules evaluated exactly were within 1 ulp here, through the float constants they hold, and on
    # jax 0.10 erfcx's rule was not the routine's formula.)
    from pytest_jaxstab import _compat
    from pytest_jaxstab._check._gradient import derivative_program
    from pytest_jaxstab.oracles.library._reference import reference_primal

    with jax.enable_x64(True):
        closed, _, _ = _compat.trace(fn, np.float64(x))
        res = oracles.evaluate(derivative_program(reference_primal(closed)[0], [0]), np.float64(x))
    assert bool(res.certain[0])
    want = np.float64(_round(ref(mpmath.mpf(x)), np.float64))
    assert float(res.values[0]) == float(want)


@pytest.mark.parametrize(("fn", "ref", "argsets"), [
    (sp.dawsn, lambda x: mpmath.sqrt(mpmath.pi) / 2 * mpmath.exp(-x * x) * mpmath.erfi(x),
     [(-3.0,), (0.5,), (30.0,), (1e5,)]),
    (sp.exp1, lambda x: mpmath.expint(1, x), [(1e-5,), (0.5,), (3.0,), (100.0,)]),
    (sp.expn, lambda n, x: mpmath.expint(n, x), [(0.0, 1.5), (3.0, 0.5), (5.0, 2.0)]),
    (sp.hyp1f1, lambda a, b, x: mpmath.hyp1f1(a, b, x), [(1.5, 2.5, 0.7), (-2.5, 3.0, 10.0),
                                                        (0.5, 1.5, -20.0)]),
    (sp.poch, lambda z, m: mpmath.rf(z, m), [(1.5, 2.0), (3.0, 0.5), (-2.5, 1.25)]),
    (jax.nn.log1mexp, lambda x: mpmath.log(-mpmath.expm1(-x)), [(1e-5,), (0.5,), (40.0,)]),
], ids=["dawsn", "exp1", "expn", "hyp1f1", "poch", "log1mexp"])
def test_more_routines_float64(fn, ref, argsets):
    for args in argsets:
        # JAX's hyp1f1 mixes an int and a bool inside: it needs standard promotion to trace at all.
        with jax.enable_x64(True), jax.numpy_dtype_promotion("standard"):
            res = oracles.evaluate(fn, *(np.float64(a) for a in args))
        assert bool(res.certain)
        assert float(res.values) == _round(ref(*(mpmath.mpf(a) for a in args)), np.float64), args


def test_expn_edges():
    with jax.enable_x64(True):
        res = oracles.evaluate(sp.expn, np.asarray([2.0, 1.0, 2.5, 2.0]), np.asarray([0.0, 0.0, 1.0, -1.0]))
    # E_2(0) = 1/(2-1); E_1(0) = inf; a non-integer order and a negative argument have no value
    np.testing.assert_array_equal(res.values, [1.0, np.inf, np.nan, np.nan])


def test_hyp1f1_of_jax_is_judged_wrong_where_it_is():
    # 1F1(1/2; 3/2; -20) = sqrt(pi)/2 erf(sqrt 20)/sqrt 20 = 0.19816636482997366...; JAX's series
    # returns a value over 2**20 ulps away.
    with jax.enable_x64(True), jax.numpy_dtype_promotion("standard"):
        args = (np.float64(0.5), np.float64(1.5), np.float64(-20.0))
        res = oracles.evaluate(sp.hyp1f1, *args)
        got = np.float64(sp.hyp1f1(*args))
    s20 = mpmath.sqrt(20)
    assert float(res.values) == _round(mpmath.sqrt(mpmath.pi) / 2 * mpmath.erf(s20) / s20, np.float64)
    assert float(oracles.error_bits(got, res.values)) > 20


def test_a_defined_approximation_fails_its_check():
    import pytest_jaxstab as jst

    result = jst.check(cheap_softplus, shapes=[()], dtype="float64", domain=(20.5, 35.0), max_examples=30,
                       seed=0, judge="accuracy")
    # above 20 the code returns x; log(1 + e^x) = x + e^-x differs by up to e^-20.5 / ulp(20.5) ~ 348 ulps
    assert result.outcome == "failed" and result.original.max_error_bits > 6


@pytest.mark.parametrize(("fn", "refs"), [
    (sp.sici, (lambda x: mpmath.si(x), lambda x: mpmath.ci(abs(x)))),
    (sp.fresnel, (lambda x: mpmath.fresnels(x), lambda x: mpmath.fresnelc(x))),
], ids=["sici", "fresnel"])
def test_two_result_routines(fn, refs):
    xs = [-2.0, 1e-3, 1.0, 30.0, 1e10]
    with jax.enable_x64(True):
        res = oracles.evaluate(fn, np.asarray(xs))
    for values, certain, ref in zip(res.values, res.certain, refs):
        assert np.asarray(certain).all()
        np.testing.assert_array_equal(values, [_round(ref(mpmath.mpf(x)), np.float64) for x in xs])


def _jax_routines_called() -> dict[str, set[str]]:
    """Every function of JAX's own code that a jax.scipy.special or jax.nn function calls through a
    custom_jvp/jit boundary, with the public functions calling it."""
    import inspect

    from pytest_jaxstab import _compat

    seen: dict[str, set[str]] = {}
    for mod in (sp, jax.nn):
        for name in sorted(dir(mod)):
            f = getattr(mod, name)
            if name.startswith("_") or not callable(f) or inspect.isclass(f) or inspect.ismodule(f):
                continue
            closed = None
            # k float arrays, or a static integer order and one array (jn, yn, iv, kn on JAX 0.12.1+)
            for args in ([jnp.full(3, 0.5)], [jnp.full(3, 0.5)] * 2, [jnp.full(3, 0.5)] * 3):
                try:
                    with jax.numpy_dtype_promotion("standard"):
                        closed = jax.make_jaxpr(f)(*args)
                    break
                except Exception:  # not a function of these arrays
                    continue
            if closed is None:
                try:
                    with jax.numpy_dtype_promotion("standard"):
                        closed = jax.make_jaxpr(lambda z, f=f: f(2, z))(jnp.full(3, 0.5))
                except Exception:
                    pass
            if closed is None:
                continue
            for _, eqn in _compat.walk(closed):
                info = _compat.callee(eqn)
                if info is not None and "/jax/_src/" in info[1].replace("\\", "/"):
                    seen.setdefault(info[0], set()).add(name)
    return seen


@newer_jax
def test_every_jax_routine_is_covered_or_listed_with_a_reason():
    from pytest_jaxstab.oracles.library._routines import BUILTIN, EXACT_BODIES, NOT_COVERED, STATIC

    known = {fname for table in (BUILTIN, STATIC) for _, fname in table} | {*EXACT_BODIES, *NOT_COVERED}
    called = _jax_routines_called()
    assert "log_ndtr" in called and "softplus" in called  # the enumeration sees the routines
    if hasattr(sp, "jn"):  # and, on JAX 0.12.1+, those of a static order
        assert {"_jn", "_kn"} <= set(called)
    missing = {name: sorted(users) for name, users in called.items() if name not in known}
    assert not missing, f"JAX routines neither evaluated by their mathematics nor listed: {missing}"


def _owens_t_ref(h, a):
    h, a = mpmath.mpf(h), mpmath.mpf(a)
    if mpmath.isinf(a):
        return mpmath.sign(a) * mpmath.erfc(abs(h) / mpmath.sqrt(2)) / 4
    integral = mpmath.quad(lambda x: mpmath.exp(-h * h * (1 + x * x) / 2) / (1 + x * x), [0, a])
    return integral / (2 * mpmath.pi)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_owens_t_by_rigorous_quadrature(dtype):
    pairs = [(0.5, 0.3), (-2.0, 1.0), (10.0, -0.5), (0.1, 100.0), (1e-3, 1e-3), (3.0, np.inf), (5.0, 0.0)]
    hs, as_ = (np.asarray(c, dtype) for c in zip(*pairs))
    with jax.enable_x64(dtype is np.float64), mpmath.workprec(300):
        res = oracles.evaluate(sp.owens_t, hs, as_)
        want = [_round(_owens_t_ref(float(h), float(a)), dtype) for h, a in zip(hs, as_)]
    assert np.asarray(res.certain).all()
    np.testing.assert_array_equal(res.values, np.asarray(want, dtype))


def test_owens_t_of_computed_balls():
    # h = x / 3 and a = x * x are inexact balls: the derivative bounds cover their radii
    with jax.enable_x64(True), mpmath.workprec(300):
        res = oracles.evaluate(lambda x: sp.owens_t(x / 3.0, x * x), np.float64(1.1))
        want = _round(_owens_t_ref(mpmath.mpf(1.1) / 3, mpmath.mpf(1.1) ** 2), np.float64)
    assert bool(res.certain) and float(res.values) == want


def test_routine_recognised_when_a_transformation_folds_its_consts():
    # dawsn's call carries its coefficient tables as consts; in the derivative program JAX passes
    # them as ordinary operands (num_consts=0). d/dx F(x) = 1 - 2 x F(x), F Dawson's integral.
    from pytest_jaxstab import _compat
    from pytest_jaxstab._check._gradient import derivative_program
    from pytest_jaxstab.oracles.library._routines import routine_name

    with jax.enable_x64(True):
        closed, _, _ = _compat.trace(sp.dawsn, np.float64(2.5))
        grad = derivative_program(closed, [0])
        assert any(routine_name(e) == "dawsn" for _, e in _compat.walk(grad))
        res = oracles.evaluate(grad, np.float64(2.5))
    x = mpmath.mpf(2.5)
    dawson = mpmath.sqrt(mpmath.pi) / 2 * mpmath.exp(-x * x) * mpmath.erfi(x)
    assert float(res.values[0]) == _round(1 - 2 * x * dawson, np.float64)


def test_ndtri_is_judged_by_its_mathematics_on_every_jax():
    # At these p, Cephes' rational approximations (ndtri's body), evaluated exactly, round to another
    # float64 than the normal quantile sqrt(2) erfinv(2p - 1) does (mpmath at 2000 bits): the oracle's
    # value must be the quantile's. On jax 0.10 ndtri is inlined (no call): recognised by its frames
    # (oracles/library/_inline.py); on newer JAX by its call.
    ps = [4.2222947179297145e-19, 0.55740888009091, 0.8374714217984048, 0.3855872572300576]
    got, certain = _oracle(sp.ndtri, ps, np.float64)
    assert certain.all()
    want = [_round(mpmath.sqrt(2) * mpmath.erfinv(2 * mpmath.mpf(p) - 1), np.float64) for p in ps]
    np.testing.assert_array_equal(got, np.asarray(want))
    # two calls on one line are two routines, each judged by its mathematics
    two, _ = _oracle(lambda p: sp.ndtri(p) + sp.ndtri(p * 0.5), ps[1:2], np.float64)
    q = mpmath.mpf(ps[1])
    both = mpmath.sqrt(2) * (mpmath.erfinv(2 * q - 1) + mpmath.erfinv(q - 1))
    assert float(two[0]) == _round(both, np.float64)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_derivative_program_of_ndtr_is_the_density_not_the_cdf(dtype):
    # JAX traces ndtr's tangent equations under ndtr's frame (jax 0.10 inlines ndtr; 0.12.1 calls it
    # and its JVP rule multiplies the density): in jax.grad(ndtr) the primal is dead and the derivative
    # formed a region that reads x and leaves one value, and the oracle evaluated it as ndtr(x) (0.69
    # for 0.35 at x = 0.5). The region must have ndtr's own primitives (oracles/library/_inline.py).
    xs = [0.5, 2.0, -5.0, -12.0]  # the density at -12 (2.1e-32) is a normal float32
    density = np.array([float(mpmath.npdf(mpmath.mpf(x))) for x in xs])
    for fn, factor in ((jax.vmap(jax.grad(sp.ndtr)), 1.0),
                       (jax.vmap(jax.grad(lambda x: 3.0 * sp.ndtr(x))), 3.0)):
        got, certain = _oracle(fn, xs, dtype)
        assert certain.all()
        # JAX's JVP formula evaluated exactly: within 4 ulps of the density, plus, on jax 0.10 (the
        # derivative of erfc(-x c) / 2 with c = 1/sqrt(2) rounded to the dtype, relative error u), the
        # x^2 u that the rounded c moves exp(-(x c)^2) by; nowhere near the CDF (0.69, 0.98, 2.9e-7,
        # 1.8e-33)
        u = np.finfo(dtype).eps / 2
        ratio = got.astype(np.float64) / (factor * density)
        bound = 4 * np.finfo(dtype).eps + np.square(xs) * u
        assert np.all(np.abs(ratio - 1) <= bound), (got, factor * density)
