"""The exact oracle against references computed here, independently, with mpmath at 1000 bits.

References are rounded to the dtype by ``rounded`` below (integer arithmetic on ``Fraction``: half-even,
subnormals, overflow), not by the module under test. Comparisons are exact (``assert_array_equal``:
NaN equals NaN, 0 bits of error) because the oracle's contract is the correctly rounded exact result.
Structural operations (slicing, gathers, transposes...) do not round, so JAX's own float result is an
independent reference for them.
"""

from __future__ import annotations

import os
from fractions import Fraction
from typing import Any

import jax
import jax.numpy as jnp
import mpmath
import mpmath.libmp
import numpy as np
import pytest
from jax import lax

from pytest_jaxstab import _compat
from pytest_jaxstab.oracles import (
    SUPPORTED_PRIMITIVES,
    OracleError,
    UnsupportedPrimitive,
    error_bits,
    evaluate,
)
from pytest_jaxstab.oracles.interpreter import _interpreter

F32 = np.float32
INF, NAN = float("inf"), float("nan")
REF_BITS = 1000
THIS_FILE = os.path.basename(__file__)


# ------------------------------------------------------------------------------- reference helpers
def exact(x: float | np.floating) -> mpmath.mpf:
    """The exact value of a float as an mpf (mpf(float) is exact: 53 bits)."""
    return mpmath.mpf(float(x))


def frac(v: mpmath.mpf) -> Fraction:
    """The exact value of a finite mpf as a Fraction."""
    man, ex = mpmath.mpf(v).man_exp  # man is unsigned
    return (-1 if v < 0 else 1) * Fraction(int(man)) * Fraction(2) ** int(ex)


def round_fraction(v: mpmath.mpf, p: int, emin: int, largest: Fraction) -> mpmath.mpf:
    """``v`` rounded to ``p`` significant bits, nearest-even, quantum fixed below ``2**emin``, overflow."""
    if mpmath.isnan(v) or mpmath.isinf(v) or v == 0:
        return mpmath.mpf(v)
    _, e = mpmath.frexp(v)  # v = m * 2**e with 0.5 <= |m| < 1
    q = max(int(e) - 1, emin) - p + 1  # the quantum at v
    n = round(frac(v) / Fraction(2) ** q)  # Fraction rounds half to even
    value = Fraction(n) * Fraction(2) ** q
    if abs(value) > largest:
        return mpmath.inf if value > 0 else -mpmath.inf
    return mpmath.mpf(value.numerator) / value.denominator  # exact: a few bits, callers run at 1000


def rounded(v: Any, dtype) -> np.generic:  # v: an mpmath number (mpf, constant) or an int
    """``v`` correctly rounded to ``dtype`` (nearest, ties to even), independently of the oracle."""
    dtype = np.dtype(dtype)
    info = np.finfo(dtype)
    with mpmath.workprec(REF_BITS):
        r = round_fraction(v, info.nmant + 1, int(info.minexp), Fraction(float(info.max)))
    # r has at most 53 significant bits and is in range: float() and the cast are exact.
    return dtype.type(float(r))


def rounded_format(v: mpmath.mpf, exponent_bits: int, mantissa_bits: int) -> mpmath.mpf:
    """Reference for reduce_precision: ``v`` rounded to the binary format with these field widths."""
    emax = 2 ** (exponent_bits - 1) - 1
    largest = (2 - Fraction(1, 2**mantissa_bits)) * Fraction(2) ** emax
    return round_fraction(v, mantissa_bits + 1, 1 - emax, largest)


def reference(fn, *arrays, dtype: Any = F32) -> np.ndarray:
    """``fn`` applied elementwise to the exact inputs at 1000 bits, rounded to ``dtype``."""
    arrays = np.broadcast_arrays(*(np.asarray(a) for a in arrays))
    out = []
    with mpmath.workprec(REF_BITS):
        for items in zip(*(a.ravel().tolist() for a in arrays)):
            v = fn(*(exact(i) if isinstance(i, float) else i for i in items))
            out.append(v if isinstance(v, bool | np.bool_) else rounded(v, dtype))
    return np.asarray(out).reshape(arrays[0].shape)


def assert_identical(actual, expected) -> None:
    """Same dtype and the same values (NaN == NaN): 0 bits of error, and error_bits agrees."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    np.testing.assert_array_equal(actual, expected)
    if actual.dtype.kind == "f":
        bits = error_bits(actual, expected)
        assert np.all(np.isnan(bits) | (bits == 0))


def nan_unless(cond: bool, value):
    return value if cond else mpmath.nan


def lgamma_ref(x):
    if x <= 0 and x == mpmath.floor(x):
        return mpmath.inf
    return mpmath.log(abs(mpmath.gamma(x)))


# -------------------------------------------------------------------------- elementwise primitive table
U = np.array([-2.5, -1.0, -0.5, 0.0, 0.25, 0.5, 1.0, 3.0, 100.0], F32)
UNIT = np.array([-1.0, -0.75, -0.1, 0.0, 0.3, 0.999, 1.0, 1.5], F32)
POS = np.array([0.0, 1e-30, 0.5, 1.0, 2.0, 1e30], F32)
SPECIAL = np.array([-INF, -1.0, 0.0, 1.0, INF, NAN], F32)
TIES = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.7, -3.2], F32)
A = np.array([1.0, -2.0, 3.5, 0.0, 1e8, -0.75, NAN], F32)
B = np.array([3.0, -2.0, 0.25, 0.0, -1.0, 2.0, 1.0], F32)

ELEMENTWISE = [
    # (primitive reached, jax function, reference on mpf, inputs)
    ("neg", lambda x: -x, lambda x: -x, (U,)),
    ("abs", jnp.abs, abs, (U,)),
    ("sign", jnp.sign, mpmath.sign, (U,)),
    ("floor", jnp.floor, mpmath.floor, (TIES,)),
    ("ceil", jnp.ceil, mpmath.ceil, (TIES,)),
    ("round", jnp.round, lambda x: mpmath.mpf(round(frac(x))), (TIES,)),
    ("round", lax.round, lambda x: mpmath.sign(x) * mpmath.floor(abs(x) + 0.5), (TIES,)),
    ("is_finite", jnp.isfinite, lambda x: bool(mpmath.isfinite(x)), (SPECIAL,)),
    ("exp", jnp.exp, mpmath.exp, (U,)),
    ("exp2", jnp.exp2, lambda x: mpmath.power(2, x), (U,)),
    ("log", jnp.log, lambda x: mpmath.log(x) if x > 0 else (-mpmath.inf if x == 0 else mpmath.nan), (U,)),
    ("log1p", jnp.log1p, lambda x: mpmath.log1p(x) if x > -1 else (-mpmath.inf if x == -1 else mpmath.nan),
     (np.array([-2, -1, -0.5, 1e-20, 0, 3], F32),)),
    ("expm1", jnp.expm1, mpmath.expm1, (np.array([-30, -1e-20, 0, 1e-7, 2], F32),)),
    ("sqrt", jnp.sqrt, lambda x: nan_unless(x >= 0, mpmath.sqrt(abs(x))), (U,)),
    ("rsqrt", lax.rsqrt, lambda x: mpmath.inf if x == 0 else nan_unless(x > 0, 1 / mpmath.sqrt(abs(x))),
     (U,)),
    ("cbrt", lax.cbrt, lambda x: mpmath.sign(x) * mpmath.cbrt(abs(x)), (U,)),
    ("square", jnp.square, lambda x: x * x, (U,)),
    ("integer_pow", lambda x: x**3, lambda x: x**3, (U,)),
    ("integer_pow", lambda x: lax.integer_pow(x, -2), lambda x: mpmath.inf if x == 0 else x**-2, (U,)),
    ("pow", lax.pow, lambda x, y: nan_unless(x > 0 or y == int(y), mpmath.power(x, y) if x != 0 else 0),
     (np.array([2.0, 0.5, -2.0, -2.0, 10.0, 0.0], F32), np.array([0.5, -3.0, 3.0, 0.5, 40.0, 2.0], F32))),
    ("sin", jnp.sin, mpmath.sin, (U,)),
    ("cos", jnp.cos, mpmath.cos, (U,)),
    ("tan", jnp.tan, mpmath.tan, (U,)),
    ("asin", jnp.arcsin, lambda x: nan_unless(abs(x) <= 1, mpmath.asin(x) if abs(x) <= 1 else 0), (UNIT,)),
    ("acos", jnp.arccos, lambda x: nan_unless(abs(x) <= 1, mpmath.acos(x) if abs(x) <= 1 else 0), (UNIT,)),
    ("atan", jnp.arctan, mpmath.atan, (U,)),
    ("atan2", jnp.arctan2, mpmath.atan2, (np.array([1, -1, 0, 3e-5], F32), np.array([-2, -1, 5, -7], F32))),
    ("sinh", jnp.sinh, mpmath.sinh, (U,)),
    ("cosh", jnp.cosh, mpmath.cosh, (U,)),
    ("tanh", jnp.tanh, mpmath.tanh, (U,)),
    ("asinh", jnp.arcsinh, mpmath.asinh, (U,)),
    ("acosh", jnp.arccosh, lambda x: nan_unless(x >= 1, mpmath.acosh(x) if x >= 1 else 0), (U,)),
    ("atanh", jnp.arctanh,
     lambda x: mpmath.sign(x) * mpmath.inf if abs(x) == 1 else nan_unless(abs(x) < 1, mpmath.atanh(x)
                                                                          if abs(x) < 1 else 0), (UNIT,)),
    ("logistic", jax.nn.sigmoid, lambda x: 1 / (1 + mpmath.exp(-x)), (np.array([-100, -1, 0, 2, 30], F32),)),
    ("erf", lax.erf, mpmath.erf, (U,)),
    ("erfc", lax.erfc, mpmath.erfc, (U,)),
    ("erf_inv", lax.erf_inv,
     lambda x: mpmath.sign(x) * mpmath.inf if abs(x) == 1 else nan_unless(abs(x) < 1, mpmath.erfinv(x)
                                                                          if abs(x) < 1 else 0), (UNIT,)),
    ("lgamma", lax.lgamma, lgamma_ref, (U,)),
    ("digamma", lax.digamma, lambda x: nan_unless(not (x <= 0 and x == int(x)),
                                                  mpmath.digamma(x) if not (x <= 0 and x == int(x)) else 0),
     (U,)),
    ("add", lax.add, lambda a, b: a + b, (A, B)),
    ("sub", lax.sub, lambda a, b: a - b, (A, B)),
    ("mul", lax.mul, lambda a, b: a * b, (A, B)),
    ("div", lax.div, lambda a, b: a / b if b != 0 else mpmath.nan, (A, B)),
    ("rem", lax.rem, lambda a, b: mpmath.nan if b == 0 or mpmath.isnan(a) else a - b * int(a / b),
     (A, B)),  # C's fmod: the dividend's sign
    ("max", lax.max, lambda a, b: mpmath.nan if mpmath.isnan(a) else max(a, b), (A, B)),
    ("min", lax.min, lambda a, b: mpmath.nan if mpmath.isnan(a) else min(a, b), (A, B)),
    ("eq", lax.eq, lambda a, b: bool(a == b), (A, B)),
    ("ne", lax.ne, lambda a, b: bool(a != b), (A, B)),
    ("lt", lax.lt, lambda a, b: bool(a < b), (A, B)),
    ("le", lax.le, lambda a, b: bool(a <= b), (A, B)),
    ("gt", lax.gt, lambda a, b: bool(a > b), (A, B)),
    ("ge", lax.ge, lambda a, b: bool(a >= b), (A, B)),
    ("and", lambda a, b: (a > 0) & (b > 0), lambda a, b: bool(a > 0 and b > 0), (A, B)),
    ("or", lambda a, b: (a > 0) | (b > 0), lambda a, b: bool(a > 0 or b > 0), (A, B)),
    ("not", lambda a: ~(a > 0), lambda a: not a > 0, (A,)),
    ("select_n", lambda a, b: lax.select_n(a > b, a, b), lambda a, b: b if a > b else a, (A, B)),
    ("clamp", lambda x: lax.clamp(F32(-1), x, F32(2)), lambda x: min(max(x, -1), 2), (U,)),
    ("convert_element_type", lambda x: x.astype(jnp.int32).astype(jnp.float32) + (x > 0).astype(jnp.float32),
     lambda x: (mpmath.floor(x) if x >= 0 else mpmath.ceil(x)) + (1 if x > 0 else 0), (TIES,)),
    ("reduce_precision", lambda x: lax.reduce_precision(x * 3, exponent_bits=5, mantissa_bits=2),
     lambda x: rounded_format(3 * x, 5, 2), (np.array([0.3, 1.1, 100, 1e-6, 1e6], F32),)),
]


@pytest.mark.parametrize(("name", "fn", "ref", "inputs"), ELEMENTWISE,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(ELEMENTWISE)])
def test_elementwise_primitive(name, fn, ref, inputs):
    closed, _, _ = _compat.trace(fn, *inputs)
    assert name in {_compat.primitive_name(e) for _, e in _compat.walk(closed)}
    result = evaluate(fn, *inputs)
    out_dtype = np.asarray(fn(*inputs)).dtype
    expected = reference(ref, *inputs, dtype=out_dtype if out_dtype.kind == "f" else F32)
    assert_identical(result.values, expected.astype(out_dtype))
    assert np.all(result.certain)


def test_nextafter_is_the_float_operation_on_rounded_operands():
    a = np.array([1.0, 0.0, -1.5, 3e38], F32)
    b = np.array([2.0, -1.0, 0.0, INF], F32)
    assert_identical(evaluate(lax.nextafter, a, b).values, np.nextafter(a, b))


# ------------------------------------------------------------------------- precision and semantics
def test_no_intermediate_overflow():
    x = F32(100.0)
    got = evaluate(lambda x: jnp.exp(x) * jnp.exp(1 - x), x)
    with np.errstate(over="ignore"):
        assert not np.isfinite(np.exp(x) * np.exp(F32(1) - x))  # float32 overflows to inf
    with mpmath.workprec(REF_BITS):
        assert_identical(got.values, rounded(mpmath.e, F32))


def test_catastrophic_cancellation_is_exact():
    x = F32(1e8)
    assert (x + F32(1)) - x == 0  # what float32 computes
    got = evaluate(lambda x: (x + 1) - x, x)
    assert_identical(got.values, F32(1.0))
    assert got.certain


def test_subnormal_result():
    x = np.array([1e-10, 3e-9, 7e-16], F32)
    got = evaluate(lambda x: x * F32(1e-30), x)
    expected = reference(lambda v: v * exact(F32(1e-30)), x)
    assert np.all(np.abs(expected) < np.finfo(F32).tiny)  # subnormal range
    assert_identical(got.values, expected)


def test_ties_round_half_even():
    a = np.array([1.0, 1.0 + 2.0**-23, 3.0], F32)
    b = np.array([2.0**-24, 2.0**-24, 2.0**-23], F32)
    got = evaluate(lambda a, b: a + b, a, b)
    # 1 + 2**-24 is halfway between 1 and its successor: down to the even 1.0; the next one up.
    expected = reference(lambda x, y: x + y, a, b)
    assert_identical(got.values, expected)
    assert got.values[0] == F32(1.0) and got.values[1] == F32(1.0 + 2.0**-22)


def test_convert_element_type_between_floats_is_identity():
    x = F32(3e38)
    with jax.enable_x64(True):
        got = evaluate(lambda x: (x.astype(jnp.float16) * 2).astype(jnp.float32) / 4, x)
    assert_identical(got.values, rounded(exact(x) / 2, F32))


def test_out_of_domain_is_nan_not_error():
    x = np.array([-1.0, 4.0], F32)
    fn = lambda x: (jnp.sqrt(x), jnp.log(x), jnp.arccosh(x / 8), x / (x - x), x * jnp.inf - x * jnp.inf)
    got = evaluate(fn, x)
    sq, lg, ac, zz, ii = got.values
    assert np.isnan(sq[0]) and sq[1] == F32(2.0)
    assert np.isnan(lg[0]) and lg[1] == rounded(mpmath.log(4), F32)
    assert np.all(np.isnan(ac)) and np.all(np.isnan(zz)) and np.all(np.isnan(ii))
    assert all(np.all(c) for c in got.certain)


def test_uncertain_when_precision_cap_is_too_low():
    fn = lambda x: (x + F32(2.0**-80)) - x  # needs more than 80 bits
    x = F32(1.0)
    low = evaluate(fn, x, max_precision=64)
    assert not low.certain
    high = evaluate(fn, x)
    assert high.certain and high.values == F32(2.0**-80) and high.precision > 80


def test_precision_escalates_until_settled():
    # (x + 2**-120) - x needs 121 bits: float32 starts at 24 + 32 = 56 bits and doubles: 56, 112, 224.
    got = evaluate(lambda x, c: (x + c) - x, F32(1.0), F32(2.0**-120))
    assert got.certain and got.values == F32(2.0**-120) and got.precision == 224
    assert got.precisions == 224


def test_beyond_reach_is_uncertain():
    got = evaluate(lambda x: jnp.sin(jnp.exp(jnp.exp(x))), F32(100.0))
    assert not got.certain


def test_max_precision_validated():
    with pytest.raises(ValueError, match="max_precision"):
        evaluate(jnp.exp, F32(1.0), max_precision=4)


# ------------------------------------------------------------------------------------ sub-jaxprs
def test_nested_jit():
    inner = jax.jit(lambda x: jnp.log1p(x) * 3)
    outer = jax.jit(lambda x: inner(x) - inner(x / 2))
    x = np.array([1e-8, 0.5, 7.0], F32)
    expected = reference(lambda v: 3 * mpmath.log1p(v) - 3 * mpmath.log1p(v / 2), x)
    assert_identical(evaluate(outer, x).values, expected)


@pytest.mark.parametrize("reverse", [False, True])
def test_scan_carry_and_stacked_outputs(reverse):
    xs = np.array([1e8, 1.0, -1e8, 0.25, 3.0], F32)

    def fn(xs):
        return lax.scan(lambda c, x: (c + x, c * x), F32(0.5), xs, reverse=reverse)

    carry, ys = evaluate(fn, xs).values
    seq = list(xs[::-1] if reverse else xs)
    with mpmath.workprec(REF_BITS):
        c, outs = exact(0.5), []
        for x in seq:
            outs.append(c * exact(x))
            c = c + exact(x)
        outs = outs[::-1] if reverse else outs
        assert_identical(carry, rounded(c, F32))
        assert_identical(ys, np.array([rounded(o, F32) for o in outs]))


def test_while_with_fixed_count():
    def fn(x):
        return lax.while_loop(lambda s: s[0] < 5, lambda s: (s[0] + 1, s[1] * 1.5 + 1e-9), (0, x))

    count, val = evaluate(fn, F32(1e-3)).values
    with mpmath.workprec(REF_BITS):
        v = exact(F32(1e-3))
        for _ in range(5):
            v = v * mpmath.mpf(1.5) + exact(F32(1e-9))
    assert count == 5
    assert_identical(val, rounded(v, F32))


def test_while_that_never_ends_exactly_is_an_error(monkeypatch):
    monkeypatch.setattr(_interpreter, "MAX_WHILE_ITERATIONS", 200)

    def fn(x):  # ends in float32 once eps is below half an ulp; never with exact values
        return lax.while_loop(lambda s: s[0] + s[1] != s[0], lambda s: (s[0], s[1] / 2), (x, x))[1]

    assert fn(F32(1.0)) > 0
    with pytest.raises(OracleError, match="still running after 200 iterations"):
        evaluate(fn, F32(1.0))


def test_cond_and_switch_choose_on_exact_values():
    def fn(x):
        a = lax.cond((x + 1) - x > 0.5, lambda y: y * 2, lambda y: -y, x)  # float32: (x+1)-x == 0
        b = lax.switch(jnp.int32(7), [jnp.sin, jnp.cos], x)  # clamped to the last branch
        return a, b

    a, b = evaluate(fn, F32(1e8)).values
    assert a == F32(2e8)
    assert_identical(b, rounded(mpmath.cos(exact(F32(1e8))), F32))


def test_custom_jvp_softplus_and_relu():
    x = np.array([-100.0, -1.0, 0.0, 1e-6, 30.0], F32)
    expected = reference(lambda v: mpmath.log1p(mpmath.exp(v)), x)
    assert_identical(evaluate(jax.nn.softplus, x).values, expected)
    assert_identical(evaluate(jax.nn.relu, x).values, np.maximum(x, 0))


def test_custom_vjp_primal_body():
    @jax.custom_vjp
    def f(x):
        return jnp.log(jnp.exp(x) + 1) - x

    f.defvjp(lambda x: (f(x), x), lambda x, g: (g * -jax.nn.sigmoid(-x),))
    x = np.array([-5.0, 0.0, 20.0], F32)
    assert_identical(evaluate(f, x).values, reference(lambda v: mpmath.log(mpmath.exp(v) + 1) - v, x))


# ---------------------------------------------------------------------------- pytrees and dtypes
def test_pytrees_in_and_out():
    def fn(d):
        return {"sum": d["a"] + d["b"][0], "parts": [d["b"][1] * 2, jnp.argmax(d["a"])]}

    args = {"a": np.array([1.0, 3.0], F32), "b": (np.array([0.5, 0.25], F32), F32(4.0))}
    got = evaluate(fn, args)
    assert set(got.values) == {"sum", "parts"} and set(got.certain) == {"sum", "parts"}
    assert_identical(got.values["sum"], np.array([1.5, 3.25], F32))
    assert_identical(got.values["parts"][0], F32(8.0))
    assert got.values["parts"][1] == 1
    assert jax.tree_util.tree_structure(got.certain) == jax.tree_util.tree_structure(fn(args))


def test_float64_under_x64():
    with jax.enable_x64(True):
        x = np.array([1e-300, 1.0, 1e300], np.float64)
        got = evaluate(lambda x: jnp.sqrt(x * x + 1.0) - 1.0, x)
        assert got.values.dtype == np.float64
        expected = reference(lambda v: mpmath.sqrt(v * v + 1) - 1, x, dtype=np.float64)
        assert_identical(got.values, expected)
    assert jnp.ones(1).dtype == jnp.float32  # the context restored the default


def test_rem_across_the_float64_range():
    a = np.array([1e308, -3e300, 7.5], np.float64)
    b = np.array([5e-324, 1.1e-300, -2.0], np.float64)
    with jax.enable_x64(True):
        got = evaluate(lax.rem, a, b)
    for x, y, r in zip(a, b, got.values):
        fa, fb = Fraction(float(x)), Fraction(float(y))
        q = abs(fa / fb).__floor__()
        expected = (abs(fa) - q * abs(fb)) * (1 if fa > 0 else -1)  # C's fmod: exact, dividend's sign
        assert Fraction(float(r)) == expected  # fmod is exact: no rounding at all


def test_dtype_argument_rounds_outputs():
    got = evaluate(lambda x: x / 3, F32(1.0), dtype="bfloat16")
    assert got.values.dtype.name == "bfloat16"
    with mpmath.workprec(REF_BITS):
        third = round_fraction(mpmath.mpf(1) / 3, 8, -126, Fraction(3, 1) * 2**126)
    assert float(got.values) == float(third)


def test_closed_jaxpr_with_flat_args():
    closed, _, _ = _compat.trace(lambda x, y: (x * y, x - y), F32(1), F32(2))
    got = evaluate(closed, F32(1e8), F32(1.0 + 2.0**-23))
    assert isinstance(got.values, list) and len(got.values) == 2
    with mpmath.workprec(REF_BITS):
        assert_identical(got.values[0], rounded(exact(F32(1e8)) * exact(F32(1.0 + 2.0**-23)), F32))
    with pytest.raises(TypeError, match="takes 2 flat arguments"):
        evaluate(closed, F32(1))


def test_inputs_are_taken_in_the_programs_dtype():
    # Without x64 the program sees float32(0.1), not the float64 value passed.
    got = evaluate(lambda x: x * 3, np.float64(0.1))
    assert_identical(got.values, rounded(3 * exact(F32(0.1)), F32))


def test_derivative_and_batched_programs():
    x = np.array([100.0, -3.0, 88.5, 1e-4], F32)
    grad = evaluate(jax.grad(jax.nn.logsumexp), x)
    with mpmath.workprec(REF_BITS):
        total = mpmath.fsum(mpmath.exp(exact(v)) for v in x)
        expected = np.array([rounded(mpmath.exp(exact(v)) / total, F32) for v in x])
    assert_identical(grad.values, expected)  # the gradient of logsumexp is softmax
    # A value read twice: its two cotangents meet in add_any on every JAX version (reverse mode's fan-in;
    # whether logsumexp's own derivative has one is its release's lowering: 0.12.1's has none).
    twice = jax.grad(lambda v: jnp.sum(jnp.exp(v) * v))
    y = np.array([0.5, -3.0, 20.0, 1e-4], F32)
    closed, _, _ = _compat.trace(twice, y)
    assert "add_any" in {_compat.primitive_name(e) for _, e in _compat.walk(closed)}
    assert_identical(evaluate(twice, y).values, reference(lambda v: mpmath.exp(v) * (v + 1), y))
    m = x.reshape(2, 2)
    batched = evaluate(jax.vmap(lambda v: jnp.dot(v, v) - v[0] * v[0]), m)
    assert_identical(batched.values, np.array([rounded(exact(v[1]) ** 2, F32) for v in m]))


def test_polyval_and_tile():
    x = np.array([0.5, -2.0, 1e3], F32)
    coeffs = np.array([1.0, -3.0, 0.25], F32)
    got = evaluate(lambda c, x: (jnp.polyval(c, x), jnp.tile(x, 2)), coeffs, x)
    expected = reference(lambda v: exact(coeffs[0]) * v * v + exact(coeffs[1]) * v + exact(coeffs[2]), x)
    assert_identical(got.values[0], expected)
    assert_identical(got.values[1], np.tile(x, 2))


# ------------------------------------------------------------------------------------- errors
def test_unsupported_primitive_names_primitive_and_line():
    # approx_top_k stays refused (see the refusal list in docs/architecture.md); bessel_i1e, the example
    # here before, is now evaluated exactly.
    def fn(x):
        return jnp.sin(x) + lax.approx_max_k(x, 1)[0]  # the unsupported line

    line = fn.__code__.co_firstlineno + 1
    with pytest.raises(UnsupportedPrimitive, match=rf"'approx_top_k'.*{THIS_FILE}:{line}") as info:
        evaluate(fn, np.ones(2, F32))
    assert info.value.name == "approx_top_k" and str(info.value.location).endswith(f"{THIS_FILE}:{line}")
    assert "approx_top_k" not in SUPPORTED_PRIMITIVES


def test_unsupported_inside_jit_points_at_user_line():
    @jax.jit
    def fn(x):
        return lax.approx_max_k(x, 1)[0] * 2

    line = fn.__wrapped__.__code__.co_firstlineno + 2  # pyright: ignore[reportAttributeAccessIssue]
    with pytest.raises(UnsupportedPrimitive, match=rf"{THIS_FILE}:{line}"):
        evaluate(fn, np.ones(2, F32))


def test_complex_primitives_without_a_rule_are_unsupported():
    # Complex values are evaluated in Arb's complex balls (tests/test_complex.py); a primitive on them
    # without a complex rule (complex linear algebra, lu here) is refused with the reason, never
    # evaluated in floats.
    def fn(x):
        z = jnp.fft.fft(x)
        return jnp.abs(jnp.linalg.solve(jnp.eye(2, dtype=z.dtype) + z.reshape(2, 2), z[:2]))

    with pytest.raises(UnsupportedPrimitive, match="complex"):
        evaluate(fn, np.ones(4, F32))


def test_gmpy_backend():
    assert mpmath.libmp.BACKEND == "gmpy"  # python-backed mpmath is several times slower


# ------------------------------------------------------------- structural: JAX's float result is exact
M = (np.arange(12, dtype=F32).reshape(3, 4) * F32(1.5) + F32(0.25)) * np.array([1, -1, 1, -1], F32)
V = np.array([0.5, -1.25, 3.0, 1e-3, 7.0], F32)
IDX = np.array([4, 0, -1, 2, 9], np.int32)

STRUCTURAL = [
    ("broadcast_in_dim", lambda m: jnp.broadcast_to(m[:, None, :], (3, 2, 4)), (M,)),
    ("reshape", lambda m: m.reshape(4, 3).T.reshape(2, 6), (M,)),
    ("squeeze", lambda m: jnp.squeeze(m[:1], 0), (M,)),
    ("broadcast_in_dim", lambda v: jnp.expand_dims(v, 0), (V,)),  # jnp.expand_dims emits it
    ("transpose", lambda m: m.T, (M,)),
    ("concatenate", lambda m, v: jnp.concatenate([m.ravel(), v]), (M, V)),
    ("split", lambda v: jnp.split(v, [2])[1], (V,)),
    ("slice", lambda m: m[1:, ::2], (M,)),
    ("dynamic_slice", lambda m, i: lax.dynamic_slice(m, (i, i - 1), (2, 2)), (M, np.int32(5))),
    ("dynamic_update_slice", lambda m, i: lax.dynamic_update_slice(m, -m[:2, :2], (i, i)), (M, np.int32(7))),
    ("slice", lambda v: v[1], (V,)),
    ("dynamic_slice", lambda v, i: v[i], (V, np.int32(-2))),
    ("gather", lambda v, idx: v[idx], (V, IDX)),
    ("dynamic_slice", lambda m, i: m[:, i], (M, np.int32(2))),
    ("gather", lambda m, idx: m[idx[:3] % 3, 1:3], (M, IDX)),
    ("gather", lambda v, idx: v.at[idx].get(mode="fill", fill_value=-7.0), (V, IDX)),
    ("scatter", lambda v, idx: v.at[idx[:2]].set(F32(9.5)), (V, IDX)),
    ("scatter-add", lambda v, idx: v.at[idx].add(F32(0.25)), (V, IDX)),
    ("pad", lambda m: lax.pad(m, F32(-1), [(1, -1, 1), (0, 2, 0)]), (M,)),
    ("rev", lambda m: jnp.flip(m, (0, 1)), (M,)),
    ("iota", lambda v: v + jnp.arange(5.0, dtype=jnp.float32), (V,)),
    ("iota", lambda v: lax.iota(jnp.int32, 4) * 2, (V,)),
    ("copy", jnp.copy, (V,)),
    ("stop_gradient", lax.stop_gradient, (V,)),
]


@pytest.mark.parametrize(("name", "fn", "inputs"), STRUCTURAL,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(STRUCTURAL)])
def test_structural_primitive(name, fn, inputs):
    closed, _, _ = _compat.trace(fn, *inputs)
    assert name in {_compat.primitive_name(e) for _, e in _compat.walk(closed)}
    assert_identical(evaluate(fn, *inputs).values, np.asarray(fn(*(jnp.asarray(a) for a in inputs))))


# ------------------------------------------------------------------------------------- reductions
R = np.array([[1e8, 1.0, -1e8, 1e-3], [0.5, -2.0, 3.0, 0.75], [NAN, 1.0, 2.0, -1.0]], F32)
R_FINITE = R[:2]


def exact_rows(fn, arr, dtype=F32):
    """``fn`` of each row's exact values at 1000 bits, rounded."""
    with mpmath.workprec(REF_BITS):
        return np.array([rounded(fn([exact(v) for v in row]), dtype) for row in arr.tolist()], dtype)


def mp_max(vals):
    return mpmath.nan if any(mpmath.isnan(v) for v in vals) else max(vals)


def mp_min(vals):
    return mpmath.nan if any(mpmath.isnan(v) for v in vals) else min(vals)


def cumulative(fn, row):
    return [fn(row[: i + 1]) for i in range(len(row))]


REDUCTIONS = [
    ("reduce_sum", lambda r: jnp.sum(r, axis=1), mpmath.fsum),
    ("reduce_prod", lambda r: jnp.prod(r, axis=1), mpmath.fprod),
    ("reduce_max", lambda r: jnp.max(r, axis=1), mp_max),
    ("reduce_min", lambda r: jnp.min(r, axis=1), mp_min),
]


@pytest.mark.parametrize(("name", "fn", "ref"), REDUCTIONS)
def test_reductions(name, fn, ref):
    got = evaluate(fn, R)
    assert_identical(got.values, exact_rows(ref, R))
    assert float(np.asarray(fn(R))[0]) != float(got.values[0]) or name != "reduce_sum"  # float32 is off


def test_reduce_over_several_axes_and_integers():
    got = evaluate(lambda r, n: (jnp.sum(r), jnp.sum(n), jnp.all(r > 0), jnp.any(r > 1e7)), R_FINITE,
                   np.arange(6, dtype=np.int32))
    total, n, all_pos, any_big = got.values
    with mpmath.workprec(REF_BITS):
        assert_identical(total, rounded(mpmath.fsum(exact(v) for v in R_FINITE.ravel()), F32))
    assert n == 15 and not all_pos and any_big


def test_argmax_argmin_first_extremum_and_nan():
    r = np.array([[1.0, 3.0, 3.0, -1.0], [NAN, 1.0, NAN, 0.0], [2.0, -5.0, 2.0, -5.0]], F32)
    amax, amin = evaluate(lambda r: (jnp.argmax(r, axis=1), jnp.argmin(r, axis=1)), r).values
    np.testing.assert_array_equal(amax, np.argmax(r, axis=1))  # numpy: first extremum, NaN wins
    np.testing.assert_array_equal(amin, np.argmin(r, axis=1))


CUMULATIVE = [
    ("cumsum", lax.cumsum, mpmath.fsum),
    ("cumprod", lax.cumprod, mpmath.fprod),
    ("cummax", lax.cummax, mp_max),
    ("cummin", lax.cummin, mp_min),
    ("cumlogsumexp", lax.cumlogsumexp, lambda vs: mpmath.log(mpmath.fsum(mpmath.exp(v) for v in vs))),
]


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize(("name", "fn", "ref"), CUMULATIVE)
def test_cumulative(name, fn, ref, reverse):
    x = np.array([1e8, 1.0, -1e8, 0.5, 100.0], F32) if name != "cumlogsumexp" else \
        np.array([100.0, -3.0, 100.0, 0.5, -1e4], F32)
    got = evaluate(lambda x: fn(x, reverse=reverse), x)
    seq = x[::-1] if reverse else x
    with mpmath.workprec(REF_BITS):
        expected = np.array([rounded(v, F32) for v in cumulative(ref, [exact(v) for v in seq])], F32)
    assert_identical(got.values, expected[::-1] if reverse else expected)


def test_dot_general_batched_and_contracted_exactly():
    a = np.array([[[1e8, 1.0, -1e8], [0.5, 0.25, 2.0]]], F32)  # (1, 2, 3)
    b = np.array([[[1.0, 2.0], [3.0, -1.0], [1.0, 0.5]]], F32)  # (1, 3, 2)
    got = evaluate(lambda a, b: (jnp.einsum("bij,bjk->bik", a, b), a[0] @ a[0].T), a, b)
    with mpmath.workprec(REF_BITS):
        ea = [[exact(v) for v in r] for r in a[0]]
        eb = [[exact(v) for v in r] for r in b[0]]
        bik = [[rounded(mpmath.fsum(ea[i][j] * eb[j][k] for j in range(3)), F32) for k in range(2)]
               for i in range(2)]
        gram = [[rounded(mpmath.fsum(ea[i][j] * ea[k][j] for j in range(3)), F32) for k in range(2)]
                for i in range(2)]
    assert_identical(got.values[0], np.array([bik], F32))
    assert_identical(got.values[1], np.array(gram, F32))


def test_sort_multi_operand_with_keys():
    k1 = np.array([2.0, 1.0, 2.0, NAN, 1.0, -INF], F32)
    k2 = np.array([0.5, 3.0, -1.0, 0.0, 2.0, 9.0], F32)
    v = np.arange(6, dtype=np.int32)
    got = evaluate(lambda a, b, c: lax.sort((a, b, c), num_keys=2), k1, k2, v).values
    order = sorted(range(6), key=lambda i: (math_isnan(k1[i]), 0.0 if math_isnan(k1[i]) else k1[i], k2[i]))
    for out, src in zip(got, (k1, k2, v)):
        np.testing.assert_array_equal(out, src[order])
    assert_identical(evaluate(jnp.sort, V).values, np.sort(V))


def math_isnan(x) -> bool:
    return bool(np.isnan(x))


# ------------------------------------------------------------------------------------- dtypes
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_narrow_dtypes(dtype):
    x = jnp.asarray([0.1, 3.0, 60000.0], dtype=dtype)
    got = evaluate(lambda x: jnp.exp(x / 8) - 1, x)
    assert got.values.dtype == x.dtype
    info = jnp.finfo(x.dtype)
    largest = Fraction(float(info.max))
    with mpmath.workprec(REF_BITS):
        expected = [
            float(round_fraction(mpmath.exp(exact(v) / 8) - 1, info.nmant + 1, int(info.minexp), largest))
            for v in np.asarray(x, np.float64)
        ]
    np.testing.assert_array_equal(np.asarray(got.values, np.float64), np.asarray(expected))


# ------------------------------------------------------------------------------------- coverage
# expand_dims and copy_p are not primitives in the supported JAX versions (see STRUCTURAL).
REQUIRED = {
    "neg", "abs", "sign", "floor", "ceil", "round", "is_finite", "exp", "exp2", "log", "log1p", "expm1",
    "sqrt", "rsqrt", "cbrt", "square", "integer_pow", "pow", "sin", "cos", "tan", "asin", "acos", "atan",
    "atan2", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "logistic", "erf", "erfc", "erf_inv",
    "lgamma", "digamma", "add", "sub", "mul", "div", "rem", "max", "min", "nextafter", "eq", "ne", "lt",
    "le", "gt", "ge", "and", "or", "not", "select_n", "clamp", "broadcast_in_dim", "reshape", "squeeze",
    "transpose", "concatenate", "split", "slice", "dynamic_slice", "dynamic_update_slice", "gather", "pad",
    "rev", "iota", "convert_element_type", "copy", "stop_gradient", "reduce_precision", "reduce_sum",
    "reduce_max", "reduce_min", "reduce_prod", "reduce_and", "reduce_or", "argmax", "argmin", "cumsum",
    "cumprod", "cummax", "cummin", "cumlogsumexp", "dot_general", "sort",
}


def test_every_listed_primitive_is_supported_and_reached_by_these_tests():
    programs = [(fn, inputs) for _, fn, _, inputs in ELEMENTWISE]
    programs += [(fn, inputs) for _, fn, inputs in STRUCTURAL]
    programs += [(fn, (R,)) for _, fn, _ in REDUCTIONS]
    programs += [(fn, (V,)) for _, fn, _ in CUMULATIVE]
    programs += [  # as in the tests above
        (lax.nextafter, (V, V)),
        (lambda r: (jnp.argmax(r, axis=1), jnp.argmin(r, axis=1)), (R,)),
        (lambda r: (jnp.all(r > 0), jnp.any(r > 1e7)), (R,)),
        (lambda a, b: jnp.einsum("bij,bjk->bik", a, b), (np.ones((1, 2, 3), F32), np.ones((1, 3, 2), F32))),
        (lambda a, b, c: lax.sort((a, b, c), num_keys=2), (V, V, V)),
    ]
    reached = set()
    for fn, inputs in programs:
        closed, _, _ = _compat.trace(fn, *inputs)
        reached |= {_compat.primitive_name(e) for _, e in _compat.walk(closed)}
    assert sorted(REQUIRED - SUPPORTED_PRIMITIVES) == []
    assert sorted(REQUIRED - reached) == []
