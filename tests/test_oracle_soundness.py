"""Soundness of the rigorous oracle: never certain-but-wrong, against mpmath at 6000 bits.

Each family cancels catastrophically: its exact value is far below the size of its intermediate
results, so evaluating it needs from a few hundred to a few thousand bits (the largest float64 spans
2,098 binary orders of magnitude; float32 about 280). The reference is mpmath at 6000 bits on the exact
inputs, rounded to the dtype independently (``Fraction`` arithmetic, not the module under test): 6000
bits exceed every cancellation below by more than 1,800 bits. Claims checked:

* every element the oracle calls certain equals the reference, bit for bit (NaN where the reference is
  NaN: out of the real domain);
* with the default cap (4096 bits) every element here is certain (none needs more than ~2,200 bits);
  with a cap too low they are uncertain, never wrong;
* an element's answer (value, certainty, settling precision) is the same alone and in any batch.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from fractions import Fraction
from typing import Any

import jax
import jax.numpy as jnp
import mpmath
import numpy as np
import pytest

from pytest_jaxstab import oracles

REF_BITS = 6000
F32, F64 = np.float32, np.float64


# ------------------------------------------------------------------------------------- reference
def _round(v: mpmath.mpf, dtype) -> float:
    """``v`` rounded to ``dtype`` (nearest, ties to even, subnormals, overflow to inf), via Fraction."""
    if mpmath.isnan(v):
        return float("nan")
    if mpmath.isinf(v):
        return float(v)
    if v == 0:
        return 0.0
    info = np.finfo(dtype)
    p, emin = info.nmant + 1, int(info.minexp)
    _, e = mpmath.frexp(v)  # |v| in [2**(e-1), 2**e)
    if e > int(info.maxexp) + 1:  # far beyond the largest float (no Fraction of 2**(10**300) bits)
        return float("inf") if v > 0 else float("-inf")
    if e < emin - p - 1:  # below half the smallest subnormal
        return 0.0 if v > 0 else -0.0
    man, ex = v.man_exp
    exact = Fraction(int(man)) * Fraction(2) ** int(ex) * (-1 if v < 0 else 1)
    q = max(int(e) - 1, emin) - p + 1
    n = round(exact / Fraction(2) ** q)  # half to even
    value = Fraction(n) * Fraction(2) ** q
    if abs(value) > Fraction(float(info.max)):
        return float("inf") if value > 0 else float("-inf")
    return float(value)


def reference(ref: Callable[..., mpmath.mpf], dtype, *arrays: np.ndarray) -> np.ndarray:
    out = []
    with mpmath.workprec(REF_BITS):
        for items in zip(*(np.asarray(a).ravel().tolist() for a in arrays)):
            out.append(_round(ref(*(mpmath.mpf(float(i)) for i in items)), dtype))
    return np.asarray(out, dtype=dtype).reshape(np.shape(arrays[0]))


def nan_unless(ok: bool, value: Callable[[], mpmath.mpf]) -> mpmath.mpf:
    return value() if ok else mpmath.nan


def mlog(v: mpmath.mpf) -> mpmath.mpf:
    return mpmath.log(v) if v > 0 else (-mpmath.inf if v == 0 else mpmath.nan)


def msqrt(v: mpmath.mpf) -> mpmath.mpf:
    return mpmath.mpf(mpmath.sqrt(v)) if v >= 0 else mpmath.nan


def mdiv(a: mpmath.mpf, b: mpmath.mpf) -> mpmath.mpf:
    return a / b if b != 0 else mpmath.nan


# --------------------------------------------------------------------------------------- families
# (name, jax function, mpmath reference, float32 hard inputs, float64 hard inputs); one argument unless
# the inputs are tuples of arrays.
FAMILIES = [
    ("exp(x)-1", lambda x: jnp.exp(x) - 1, lambda x: mpmath.expm1(x),
     [1e-38, -3e-39, 1e-45, 2.0**-100], [1e-160, -2.0**-589, 1e-300, 5e-324, -1e-200]),
    ("log(1+x)", lambda x: jnp.log(1 + x), lambda x: mlog(1 + x),
     [1e-38, -2.0**-120, 1e-45, -1.0, -2.0], [-2.0**-589, 1e-200, 1e-300, 5e-324, -1.0, -3.0]),
    ("(1+x)-1", lambda x: (1 + x) - 1, lambda x: x, [1e-38, -1e-40, 1e-45], [1e-300, -2.0**-1000, 5e-324]),
    ("x*x-(x+1)*(x-1)", lambda x: x * x - (x + 1) * (x - 1), lambda x: mpmath.mpf(1),
     [1e19, 3e38, -2e30], [1e40, 1e150, -3e153]),
    ("sqrt(x+1)-sqrt(x)", lambda x: jnp.sqrt(x + 1) - jnp.sqrt(x),
     lambda x: nan_unless(x >= 0, lambda: msqrt(x + 1) - msqrt(x)), [1e30, 3e38, -0.5], [1e200, 1e300, -0.5]),
    ("1-cos(x)", lambda x: 1 - jnp.cos(x), lambda x: 1 - mpmath.cos(x), [1e-30, 1e-40, -3e-20],
     [1e-100, 1e-160, -2.0**-500]),
    ("x-sin(x)", lambda x: x - jnp.sin(x), lambda x: x - mpmath.sin(x), [1e-30, -1e-40, 1e-44],
     [1e-100, -1e-150, 2.0**-600]),
    ("1/(x+1)-1/x", lambda x: 1 / (x + 1) - 1 / x,
     lambda x: mdiv(mpmath.mpf(1), x + 1) - mdiv(mpmath.mpf(1), x),
     [1e19, 3e38, -1e30], [1e150, 1e300, -3e200]),
    ("log(x+1)-log(x)", lambda x: jnp.log(x + 1) - jnp.log(x), lambda x: mlog(x + 1) - mlog(x),
     [1e30, 3e38, 1e-40], [1e200, 1e300, 5e-324]),
    # Families of our own: higher-order cancellations and other operations.
    ("cosh(x)-1-x*x/2", lambda x: jnp.cosh(x) - 1 - x * x / 2, lambda x: mpmath.cosh(x) - 1 - x * x / 2,
     [1e-10, 1e-20, -3e-15], [1e-50, 1e-75, -2.0**-200]),
    ("atan(x)-x", lambda x: jnp.arctan(x) - x, lambda x: mpmath.atan(x) - x, [1e-20, -1e-30],
     [1e-80, -1e-120]),
    ("(1+x)**3-1-3x", lambda x: (1 + x) ** 3 - 1 - 3 * x, lambda x: (1 + x) ** 3 - 1 - 3 * x,
     [1e-20, -1e-25], [1e-100, -1e-150]),
    ("tanh(x)-x", lambda x: jnp.tanh(x) - x, lambda x: mpmath.tanh(x) - x, [1e-20, 3e-30],
     [1e-100, -1e-140]),
    ("exp(log(x))-x", lambda x: jnp.exp(jnp.log(x)) - x, lambda x: mpmath.mpf(0) if x > 0 else mlog(x),
     [3.0, 1e30, -1.0], [3.0, 1e300, 5e-324]),
]
PAIRS = [
    ("(x+y)-x", lambda x, y: (x + y) - x, lambda x, y: y,
     ([3e38, 1e20, -3e38], [1e-4, 1e-45, 1e-40]),
     ([1e300, 1e300, 1e308, -1e200], [1e220, 1e-300, 5e-324, 1e-250])),
    ("sum([x, y, -x])", lambda x, y: jnp.sum(jnp.concatenate([x[None], y[None], -x[None]]), axis=0),
     lambda x, y: y,
     ([3e38, 1e20], [1e-40, -1e-45]), ([1e300, -1e308], [1e-300, 5e-324])),
]


def _x64(dtype) -> AbstractContextManager[Any]:
    return jax.enable_x64(dtype == F64)


def _check_sound(fn, ref, dtype, *arrays, max_precision: int = oracles.DEFAULT_MAX_PRECISION):
    with _x64(dtype):
        got = oracles.evaluate(fn, *arrays, max_precision=max_precision)
    values, certain = np.asarray(got.values), np.asarray(got.certain)
    expected = reference(ref, dtype, *arrays)
    assert values.dtype == np.dtype(dtype)
    wrong = certain & ~((values == expected) | (np.isnan(values) & np.isnan(expected)))
    assert not wrong.any(), f"certain but wrong at {np.asarray(arrays[0])[wrong]}: {values[wrong]} " \
                            f"vs {expected[wrong]}"
    return got, expected


def _cases(dtype):
    for name, fn, ref, f32, f64 in FAMILIES:
        yield name, fn, ref, (np.asarray(f32 if dtype == F32 else f64, dtype),)
    for name, fn, ref, f32, f64 in PAIRS:
        xs, ys = f32 if dtype == F32 else f64
        yield name, fn, ref, (np.asarray(xs, dtype), np.asarray(ys, dtype))


CASES = [(dtype, *c) for dtype in (F32, F64) for c in _cases(dtype)]


@pytest.mark.parametrize(("dtype", "name", "fn", "ref", "arrays"), CASES,
                         ids=[f"{np.dtype(c[0]).name}-{c[1]}" for c in CASES])
def test_hard_inputs_certain_and_correct(dtype, name, fn, ref, arrays):
    got, _ = _check_sound(fn, ref, dtype, *arrays)
    assert np.all(got.certain), f"uncertain below the cap: {arrays[0][~np.asarray(got.certain)]}"


@pytest.mark.parametrize(("dtype", "name", "fn", "ref", "arrays"), CASES,
                         ids=[f"{np.dtype(c[0]).name}-{c[1]}" for c in CASES])
def test_cap_too_low_is_uncertain_never_wrong(dtype, name, fn, ref, arrays):
    got, _ = _check_sound(fn, ref, dtype, *arrays, max_precision=96)
    assert np.all(np.asarray(got.precisions) <= 96)


@pytest.mark.parametrize("dtype", [F32, F64])
def test_mixed_batch_equals_elements_alone(dtype):
    """An element's value, certainty and settling precision do not depend on its batch."""
    for name, fn, ref, (x,) in [(*c[:3], c[3]) for c in _cases(dtype) if len(c[3]) == 1]:
        easy = np.asarray([0.5, 2.0, -0.25], dtype)
        batch = np.concatenate([easy, x, easy])
        got, _ = _check_sound(fn, ref, dtype, batch)
        for i, v in enumerate(batch):
            with _x64(dtype):
                alone = oracles.evaluate(fn, np.asarray([v], dtype))
            assert np.asarray(alone.certain)[0] == np.asarray(got.certain)[i], (name, v)
            np.testing.assert_array_equal(np.asarray(alone.values)[0], np.asarray(got.values)[i])
            assert np.asarray(alone.precisions)[0] == np.asarray(got.precisions)[i], (name, v)


@pytest.mark.parametrize("dtype", [F32, F64])
def test_random_bit_patterns_never_certain_but_wrong(dtype):
    """Inputs uniform over the finite floats' bit patterns (the issue's FPBench measurement), all
    families in one batch each: every certain element is right."""
    rng = np.random.default_rng(7)
    info = np.finfo(dtype)
    uint = np.uint32 if dtype == F32 else np.uint64
    bits = rng.integers(0, np.iinfo(uint).max, size=24, dtype=uint, endpoint=True)
    x = bits.view(dtype)
    x = x[np.isfinite(x)]
    assert x.size > 16 and np.abs(x).max() > info.max / 1e6
    for name, fn, ref, _, _ in FAMILIES:
        got, _ = _check_sound(fn, ref, dtype, x)
        assert np.asarray(got.certain).mean() > 0.9, name


def test_exact_values_are_mpmath_and_precisions_recorded():
    got = oracles.evaluate(lambda x: jnp.exp(x) - 1, np.asarray([1e-30, 0.5], F32))
    exact = got.exact
    assert all(isinstance(v, mpmath.mpf) for v in exact)
    with mpmath.workprec(200):
        assert abs(exact[0] - mpmath.expm1(mpmath.mpf(float(F32(1e-30))))) < mpmath.mpf(2) ** -150
    prec = np.asarray(got.precisions)
    assert prec[1] == 53 and prec[0] > 56  # the easy element settled by the fast path (float64 intervals)
    assert got.decided_fast == 1 and got.escalated == 1
    arb = np.asarray(oracles.evaluate(lambda x: jnp.exp(x) - 1, np.asarray([1e-30, 0.5], F32),
                                      fast=False).precisions)
    assert arb[1] == 56  # without it, at the first precision
