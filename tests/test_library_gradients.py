"""Gradients of library routines judged against the derivative of the exact function.

References are mpmath's, at 2000 bits, from closed forms of the derivatives (stated per case) or from
``mpmath.diff`` of mpmath's own function (numerical differentiation at that precision, not the formulas
the oracle uses). The oracle's reference must be certain and correctly rounded: equal to mpmath's value
rounded once to the dtype.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import jax.scipy.special as sp
import mpmath
import numpy as np
import pytest
from flint import arb

import pytest_jaxstab as jst
from pytest_jaxstab import _compat, oracles
from pytest_jaxstab._check._gradient import derivative_program
from pytest_jaxstab._errors import ArgumentError, OracleError
from pytest_jaxstab.oracles.library._reference import reference_primal
from tests.test_oracle_library import _mp_bits, _round, series_log_ndtr

_MPC: Any = mpmath.mpc  # its stubs take ints only


@pytest.fixture(autouse=True)
def _high_precision():
    with mpmath.workprec(2000):
        yield


def _reference_gradient(fn, args, dtype=np.float64):
    """The gradient reference a ``grad=True`` check uses, evaluated by the oracle: one value per argument."""
    with jax.enable_x64(dtype is np.float64), jax.numpy_dtype_promotion("standard"):
        xs = [np.asarray(a, dtype) for a in args]
        closed, _, _ = _compat.trace(fn, *xs)
        primal, kept = reference_primal(closed)
        res = oracles.evaluate(derivative_program(primal, [0]), *xs)
    return [np.asarray(v) for v in res.values], [bool(c) for c in res.certain], kept


def _sigma(x):
    return 1 / (1 + mpmath.exp(-x))


def _ndtri(p):
    return mpmath.sqrt(2) * mpmath.erfinv(2 * p - 1)


def _d(f):
    """``f``'s derivative by mpmath.diff at the working precision (an independent numerical reference)."""
    return lambda x: mpmath.diff(f, x)


# (routine, derivative reference, arguments): closed forms where they are textbook (phi/Phi, 1/phi(q),
# I0' = I1, d/dx E_n = -E_{n-1}, d/dx 1F1(a;b;x) = a/b 1F1(a+1;b+1;x)), mpmath.diff elsewhere.
ONE_ARG = [
    (sp.log_ndtr, lambda x: mpmath.npdf(x) / mpmath.ncdf(x),
     [-1e10, -1e4, -40.0, -20.0, -3.0, 0.0, 5.0, 30.0]),
    (sp.ndtri, lambda p: 1 / mpmath.npdf(_ndtri(p)), [1e-300, 1e-10, 0.3, 0.5, 0.999]),
    (sp.erfcx, _d(lambda x: mpmath.exp(x * x) * mpmath.erfc(x)), [-3.0, 0.5, 2.0, 9.0, 30.0]),
    (sp.erfcx, lambda x: 2 * x * mpmath.exp(x * x) * mpmath.erfc(x) - 2 / mpmath.sqrt(mpmath.pi),
     [1e3, 1e10, 1e100]),
    (sp.expi, _d(mpmath.ei), [-3.0, 0.5, 10.0]),
    (sp.dawsn, _d(lambda x: mpmath.sqrt(mpmath.pi) / 2 * mpmath.exp(-x * x) * mpmath.erfi(x)),
     [-2.0, 0.5, 3.0, 30.0]),
    (sp.i0, lambda x: mpmath.besseli(1, x), [-2.0, 0.5, 3.0, 50.0]),
    (sp.i1, _d(lambda x: mpmath.besseli(1, x)), [-2.0, 0.0, 0.5, 3.0, 50.0]),
    (sp.exp1, lambda x: -mpmath.exp(-x) / x, [1e-5, 0.5, 3.0, 100.0]),
    (jax.nn.softplus, _sigma, [-40.0, 0.0, 3.0, 40.0]),
    (jax.nn.log_sigmoid, lambda x: _sigma(-x), [-40.0, 0.0, 3.0]),
    (jax.nn.silu, _d(lambda x: x * _sigma(x)), [-30.0, -1.0, 1.5, 20.0]),
    (jax.nn.mish, _d(lambda x: x * mpmath.tanh(mpmath.log1p(mpmath.exp(x)))), [-20.0, -1.0, 0.0, 2.0, 30.0]),
    (jax.nn.log1mexp, _d(lambda x: mpmath.log(-mpmath.expm1(-x))), [1e-5, 0.5, 40.0]),
]


if hasattr(sp, "erfcinv"):  # newer than jax 0.10
    # d/dy erfcinv(y) = -sqrt(pi)/2 exp(erfcinv(y)^2), erfcinv(y) = erfinv(1 - y)
    ONE_ARG.append((sp.erfcinv, lambda y: -mpmath.sqrt(mpmath.pi) / 2 * mpmath.exp(mpmath.erfinv(1 - y) ** 2),
                    [1e-300, 1e-5, 0.5, 1.0, 1.7]))


@pytest.mark.parametrize(("fn", "ref", "xs"), ONE_ARG,
                         ids=[f"{f.__name__}-{k}" for k, (f, _, _) in enumerate(ONE_ARG)])
def test_gradient_reference_is_the_exact_derivative(fn, ref, xs):
    for x in xs:
        (g,), (sure,), kept = _reference_gradient(fn, [x])
        assert sure and not kept, x
        assert float(g) == _round(ref(mpmath.mpf(x))), (x, float(g), mpmath.nstr(ref(mpmath.mpf(x)), 20))


@pytest.mark.parametrize(("fn", "refs", "argsets"), [
    # d/dz (z)_m = (z)_m (psi(z+m) - psi(z)); d/dm (z)_m = (z)_m psi(z+m)
    (sp.poch, (lambda z, m: mpmath.rf(z, m) * (mpmath.digamma(z + m) - mpmath.digamma(z)),
               lambda z, m: mpmath.rf(z, m) * mpmath.digamma(z + m)), [(1.5, 2.0), (3.0, 0.5), (-2.5, 1.25)]),
    # Owen's T by mpmath.diff of its defining integral (mpmath.quad)
    (sp.owens_t, (lambda h, a: mpmath.diff(lambda t: _owens(t, a), h),
                  lambda h, a: mpmath.diff(lambda t: _owens(h, t), a)), [(0.5, 2.0), (3.0, -0.7)]),
], ids=["poch", "owens_t"])
def test_partial_derivatives_of_two_argument_routines(fn, refs, argsets):
    for args in argsets:
        grads, sure, kept = _reference_gradient(fn, args)
        assert all(sure) and not kept
        with mpmath.workprec(200):  # mpmath.quad/diff of the quadrature: 200 bits is far beyond float64
            want = [_round(r(*map(mpmath.mpf, args))) for r in refs]
        assert [float(g) for g in grads] == want, args


def _owens(h, a):
    return mpmath.quad(lambda x: mpmath.exp(-h * h * (1 + x * x) / 2) / (1 + x * x), [0, a]) / (2 * mpmath.pi)


def test_constant_parameters_and_variable_x():
    # d/dx E_3(x) = -E_2(x); d/dx 1F1(1/2; 3/2; x) = 1/3 1F1(3/2; 5/2; x): the order and the parameters
    # are literals of the program, so their missing partials are never needed
    (g,), (sure,), kept = _reference_gradient(lambda x: sp.expn(3, x), [0.5])
    assert sure and not kept and float(g) == _round(-mpmath.expint(2, mpmath.mpf(0.5)))
    (g,), (sure,), kept = _reference_gradient(lambda x: sp.hyp1f1(0.5, 1.5, x), [-20.0])
    want = mpmath.hyp1f1(1.5, 2.5, -20) / 3
    assert sure and not kept and float(g) == _round(want)


def test_variable_parameters_keep_the_body_derivative_and_say_so():
    # hyp1f1's partials in a and b have no closed form: with a variable a, the routine keeps its body's
    # derivative, named in the second result (the check's note)
    _, _, kept = _reference_gradient(lambda a, x: sp.hyp1f1(a, 1.5, x), [0.5, 2.0])
    assert kept == ["hyp1f1"]


@pytest.mark.parametrize(("fn", "ref"), [
    # Si' = sin x / x, d/dx Ci(|x|) = cos x / x, S' = sin(pi x^2/2), C' = cos(pi x^2/2) (DLMF 6.2, 7.2)
    (lambda x: sp.sici(x)[0], lambda x: mpmath.sin(x) / x),
    (lambda x: sp.sici(x)[1], lambda x: mpmath.cos(x) / x),
    (lambda x: sp.sici(x)[0] * sp.sici(x)[1],
     lambda x: mpmath.sin(x) / x * mpmath.ci(abs(x)) + mpmath.si(x) * mpmath.cos(x) / x),
    (lambda x: sp.fresnel(x)[0], lambda x: mpmath.sin(mpmath.pi * x * x / 2)),
    (lambda x: sp.fresnel(x)[1], lambda x: mpmath.cos(mpmath.pi * x * x / 2)),
], ids=["Si", "Ci", "Si*Ci", "S", "C"])
def test_two_result_routines_have_exact_derivatives(fn, ref):
    for x in [0.5, 3.0, -2.0, 1e3]:
        (g,), (sure,), kept = _reference_gradient(fn, [x])
        assert sure and not kept
        assert float(g) == _round(ref(mpmath.mpf(x))), x


@pytest.mark.parametrize("x", [-20.0, -40.0])
def test_grad_log_ndtr_far_left_is_judged_against_the_exact_derivative(x):
    # jax 0.10 to 0.12.0 differentiate log_ndtr as exp(log_pdf(x) - log_ndtr(x)) with their own
    # (truncated-series) log_ndtr, whose absolute error of ~1e-9 becomes the gradient's relative error:
    # 16-25 bits in float64; 0.12.1's derivative is accurate. The reference is phi(x)/Phi(x) (mpmath.npdf/
    # ncdf at 2000 bits), rounded once, for the installed log_ndtr and for that series written by hand
    # (declared as log Phi with its exact derivative), whose gradient is >12 bits off on every JAX.
    want = _round(mpmath.npdf(x) / mpmath.ncdf(x))
    for fn in (sp.log_ndtr, series_log_ndtr):
        (g,), (sure,), kept = _reference_gradient(fn, [x])
        assert sure and not kept and float(g) == want, fn
    with jax.enable_x64(True):
        series = np.float64(jax.grad(series_log_ndtr)(np.float64(x)))
    assert _mp_bits(series, mpmath.npdf(x) / mpmath.ncdf(x)) > 12


def test_grad_check_of_log_ndtr_agrees_with_mpmath_on_the_far_left():
    # the gradient check's verdict on the installed log_ndtr is mpmath's measurement of jax.grad at its
    # worst input (failed up to jax 0.12.0, 24 bits at -20; passed on 0.12.1); the series (the premise,
    # on every JAX) fails
    options = {"shapes": [()], "dtype": "float64", "domain": (-45.0, -19.5), "max_examples": 20, "seed": 0,
               "grad": True, "judge": "accuracy"}
    result = jst.check(sp.log_ndtr, **options)
    series = jst.check(series_log_ndtr, **options)
    assert result.gradient is not None and series.gradient is not None
    worst = max((w for w in result.gradient.witnesses if w.variant == "original"), key=lambda w: w.error_bits)
    at = float(worst.args[0])
    with jax.enable_x64(True):
        got = np.float64(jax.grad(sp.log_ndtr)(np.float64(at)))
    measured = _mp_bits(got, mpmath.npdf(at) / mpmath.ncdf(at))
    assert worst.error_bits == result.gradient.original.max_error_bits == measured
    assert (result.gradient.outcome == "failed") == (measured > result.gradient.tolerance_bits)
    assert series.gradient.outcome == "failed" and series.gradient.original.max_error_bits > 12


# A user's approximation of erf (Abramowitz & Stegun 7.1.26, |error| <= 1.5e-7 for x >= 0).
_AS = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)


def _erf_as(x):
    t = 1.0 / (1.0 + 0.3275911 * x)
    poly = t * (_AS[0] + t * (_AS[1] + t * (_AS[2] + t * (_AS[3] + t * _AS[4]))))
    return 1.0 - poly * jnp.exp(-x * x)


def _erf_exact(x):
    return x.erf()


def _erf_slope(x):  # d/dx erf(x) = 2/sqrt(pi) exp(-x^2)
    return 2 / arb.pi().sqrt() * (-(x * x)).exp()


def test_defined_routine_gradient_judged_against_its_declared_derivative():
    with_d = oracles.define(_erf_as, exact=_erf_exact, derivative=_erf_slope, name="erf_as")
    (g,), (sure,), kept = _reference_gradient(with_d, [0.75])
    assert sure and not kept
    assert float(g) == _round(2 / mpmath.sqrt(mpmath.pi) * mpmath.exp(-mpmath.mpf(0.75) ** 2))
    result = jst.check(with_d, shapes=[()], dtype="float64", domain=(0.1, 3.0), max_examples=20, seed=0,
                       grad=True, judge="accuracy")
    # the approximation's slope is off by ~1e-6 relative (its error's derivative): ~30 bits in float64
    assert result.gradient is not None and result.gradient.outcome == "failed"
    assert result.gradient.original.max_error_bits > 20


def test_defined_routine_without_derivative_says_its_gradient_is_the_bodys():
    plain = oracles.define(lambda x: _erf_as(x), exact=_erf_exact, name="erf_as_plain")
    result = jst.check(plain, shapes=[()], dtype="float64", domain=(0.1, 3.0), max_examples=20, seed=0,
                       grad=True, judge="accuracy")
    assert result.gradient is not None
    # the body's derivative evaluated exactly agrees with JAX's gradient of the body: it passes, and says why
    assert result.gradient.outcome == "passed"
    note = result.gradient.note
    assert "derivative of the routine's body" in note and "erf_as_plain" in note
    assert "derivative of the routine's body" in result.note and "erf_as_plain" in result.note  # the case too


def test_defined_derivative_of_two_arguments():
    f = oracles.define(lambda a, b: jnp.sqrt(a * a + b * b), exact=lambda a, b: (a * a + b * b).sqrt(),
                       derivative=lambda a, b: (a / (a * a + b * b).sqrt(), b / (a * a + b * b).sqrt()),
                       name="hyp")
    grads, sure, _ = _reference_gradient(f, [3.0, 4.0])
    assert all(sure) and [float(g) for g in grads] == [0.6, 0.8]


def test_define_rejects_a_bad_derivative():
    with pytest.raises(ArgumentError, match="derivative must be a function"):
        oracles.define(lambda x: x, exact=lambda x: x, derivative=2.0)  # pyright: ignore[reportArgumentType]
    f = oracles.define(lambda a, b: a * b, exact=lambda a, b: a * b, derivative=lambda a, b: b, name="prod")
    with pytest.raises(OracleError, match="tuple of 2"):
        _reference_gradient(f, [3.0, 4.0])


def test_unsupported_primitive_message_names_the_file_relative_to_the_rootdir():
    # Messages name files as pytest's node ids do (relative to the rootdir); the attribute keeps the
    # full location for tools.
    import os

    from jax import lax

    from pytest_jaxstab.oracles import UnsupportedPrimitive

    def fn(x):
        return lax.approx_max_k(x, 1)[0]

    line = fn.__code__.co_firstlineno + 1
    with pytest.raises(UnsupportedPrimitive) as info:
        jst.check(fn, shapes=[(2,)], dtype="float32", max_examples=5, seed=0)
    text = str(info.value)
    assert os.path.abspath(__file__) not in text
    assert f"tests/{os.path.basename(__file__)}:{line}" in text
    assert str(info.value.location).endswith(f"{os.path.basename(__file__)}:{line}")


# ------------------------------------------------------------------------------------------ spence
# JAX's spence(x) = int_1^x log(t)/(1 - t) dt = Li2(1 - x) for x >= 0 (its docstring; SciPy's
# convention), NaN below 0. The reference is mpmath.polylog(2, 1 - x) at 2000 bits; -inf at +inf.
SPENCE_ARGS = [0.0, 1e-30, 1e-10, 0.25, 0.5, 1.0, 1.0 + 2.0**-20, 1.5, 2.0, 7.0, 1e5, 1e30, 3e38]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_spence_is_judged_by_the_dilogarithm(dtype):
    xs = [x for x in SPENCE_ARGS if dtype is np.float64 or x < 3.4e38]
    with jax.enable_x64(dtype is np.float64):
        res = oracles.evaluate(sp.spence, np.asarray([*xs, np.inf, -1.0], dtype))
    want = [*(_round(mpmath.polylog(2, 1 - mpmath.mpf(float(dtype(x)))), dtype) for x in xs), -np.inf, np.nan]
    assert np.asarray(res.certain).all()
    np.testing.assert_array_equal(np.asarray(res.values), np.asarray(want, dtype))


def test_spence_of_jax_is_judged_where_it_is_wrong():
    # JAX's rational approximation returns NaN at +inf (the function tends to -inf) and its gradient at
    # exactly 1 is 0 (the branch x == 1 is a constant), where d/dx spence = log(x)/(1 - x) -> -1.
    with jax.enable_x64(True):
        assert np.isnan(float(sp.spence(jnp.asarray(np.inf, jnp.float64))))
        assert float(jax.grad(sp.spence)(np.float64(1.0))) == 0.0
    (g,), (sure,), kept = _reference_gradient(sp.spence, [1.0])
    assert sure and not kept and float(g) == -1.0
    for x in [0.5, 3.0, 1e10]:
        (g,), (sure,), _ = _reference_gradient(sp.spence, [x])
        xm = mpmath.mpf(x)
        assert sure and float(g) == _round(mpmath.log(xm) / (1 - xm)), x


# -------------------------------------------------------------------------------------------- wofz
# The Faddeeva function w(z) = exp(-z^2) erfc(-iz) (jax.scipy.special.wofz, on jax 0.10 too); the
# reference is mpmath's exp and erfc at 2000 bits, each part rounded once.
WOFZ_ARGS = [0.5 + 0.5j, -3 + 0.1j, 10 + 10j, 1e-3j, -2 - 3j, 30 - 0.5j, 5.0 + 0j, 1e-20 + 1e-20j, 0j]


def _wofz_ref(z):
    z = _MPC(z.real, z.imag)
    return mpmath.exp(-z * z) * mpmath.erfc(-1j * z)


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_wofz_is_judged_by_the_faddeeva_function(dtype):
    part = np.float32 if dtype is np.complex64 else np.float64
    zs = np.asarray(WOFZ_ARGS, dtype)
    with jax.enable_x64(dtype is np.complex128):
        res = oracles.evaluate(sp.wofz, zs)
    assert np.asarray(res.certain).all()
    for z, got in zip(zs, np.asarray(res.values)):
        w = _wofz_ref(complex(z))
        assert (float(got.real), float(got.imag)) == (_round(w.real, part), _round(w.imag, part)), z


def test_wofz_of_jax_is_judged_wrong_on_the_real_axis():
    # Re w(5) = exp(-25) = 1.3887943864964021e-11; JAX's rational approximation returns 1.385e-11 (the
    # correction 2 exp(-z^2) - w_upper cancels there): the oracle's reference is the function.
    with jax.enable_x64(True):
        z = np.complex128(5.0)
        res = oracles.evaluate(sp.wofz, z)
        got = np.complex128(sp.wofz(jnp.asarray(z)))
    assert float(np.asarray(res.values).real) == _round(mpmath.exp(-25))
    assert float(oracles.error_bits(np.float64(got.real), np.float64(np.asarray(res.values).real))) > 8


def test_wofz_gradient_reference_is_its_complex_derivative():
    # JAX's VJP of a holomorphic function with cotangent 1 is f'(z); the reference is w'(z), checked
    # against mpmath.diff of mpmath's w (numerical differentiation at 2000 bits, along the real axis)
    for z in [0.5 + 0.5j, -2 - 3j, 3 + 0.25j]:
        with jax.enable_x64(True):
            closed, _, _ = _compat.trace(sp.wofz, np.complex128(z))
            primal, kept = reference_primal(closed)
            res = oracles.evaluate(derivative_program(primal, [0]), np.complex128(z))
        assert not kept and bool(np.asarray(res.certain[0]))
        d = mpmath.diff(_wofz_ref, _MPC(z.real, z.imag))
        got = complex(np.asarray(res.values[0]))
        assert (got.real, got.imag) == (_round(d.real), _round(d.imag)), z


# ------------------------------------------------------------------------- audit at random points
# Each routine's gradient reference at 12 points drawn (fixed seed) log-uniformly over its domain's
# binades, both signs where defined, against mpmath (closed forms and mpmath.diff as above). Every
# certain value must be correctly rounded; at least 11 of 12 must be certain (an element the escalation
# cannot settle is uncertain, never wrong).
AUDIT = [
    (sp.log_ndtr, lambda x: mpmath.npdf(x) / mpmath.ncdf(x), (-1e6, 1e2)),
    (sp.erfcx, _d(lambda x: mpmath.exp(x * x) * mpmath.erfc(x)), (-20.0, 1e6)),
    (sp.i0, lambda x: mpmath.besseli(1, x), (-300.0, 300.0)),
    (sp.i1, _d(lambda x: mpmath.besseli(1, x)), (-300.0, 300.0)),
    (sp.dawsn, _d(lambda x: mpmath.sqrt(mpmath.pi) / 2 * mpmath.exp(-x * x) * mpmath.erfi(x)), (-1e3, 1e3)),
    (sp.spence, lambda x: mpmath.log(x) / (1 - x), (1e-20, 1e20)),
    (jax.nn.mish, _d(lambda x: x * mpmath.tanh(mpmath.log1p(mpmath.exp(x)))), (-80.0, 80.0)),
    (jax.nn.silu, _d(lambda x: x * _sigma(x)), (-700.0, 700.0)),
]


def _draw(rng, lo, hi, n):
    """Log-uniform magnitudes over [lo, hi]'s binades (both signs when lo < 0 < hi)."""
    out = []
    for _ in range(n):
        if lo < 0 < hi:
            neg = rng.random() < 0.5
            top = -lo if neg else hi
            x = -(10.0 ** rng.uniform(-6, np.log10(top))) if neg else 10.0 ** rng.uniform(-6, np.log10(top))
        else:
            x = 10.0 ** rng.uniform(np.log10(lo), np.log10(hi))
        out.append(float(x))
    return out


@pytest.mark.parametrize(("fn", "ref", "domain"), AUDIT, ids=[f.__name__ for f, _, _ in AUDIT])
def test_gradient_reference_audit(fn, ref, domain):
    rng = np.random.default_rng(27)
    certain = 0
    for x in _draw(rng, domain[0], domain[1], 12):
        (g,), (sure,), _ = _reference_gradient(fn, [x])
        if not sure:
            continue
        certain += 1
        with mpmath.workprec(600):  # mpmath.diff's step at 600 bits: its error far below 2^-53
            want = _round(ref(mpmath.mpf(x)))
        assert float(g) == want, (x, float(g), want)
    assert certain >= 11
