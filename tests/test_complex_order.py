"""Complex values in max/min, their reductions, the complex scatters, convolution and gradients.

JAX orders complex numbers lexicographically, real part first (``lax.max``'s docstring; the lowering
``select(re_x == re_y ? im_x > im_y : re_x > re_y, x, y)``). References here are independent of the
oracle: Python's ``max``/``min`` keyed on ``(re, im)``, Python complex arithmetic on small integers
(exact in floating point), and a hand-derived gradient.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import pytest_jaxstab as jst
from pytest_jaxstab import _compat, oracles
from pytest_jaxstab._check._gradient import derivative_program

DTYPES = [np.complex64, np.complex128]

A = [1 + 2j, 1 + 3j, -1 + 5j, 2 - 1j, 2 - 1j, 0j, -3.5 + 0j, 7 - 7j]
B = [1 + 3j, 1 + 2j, -1 + 4j, 1 + 9j, 2 - 1j, 1j, -3.5 - 1e-30j, 7 + 1e30j]


def _lex(values, pick):
    return pick(values, key=lambda z: (z.real, z.imag))


def _eval(fn, *args, dtype):
    with jax.enable_x64(dtype is np.complex128):
        res = oracles.evaluate(fn, *(np.asarray(a, dtype) for a in args))
    return np.asarray(res.values), np.asarray(res.certain)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("fn", "pick"), [(lax.max, max), (lax.min, min)], ids=["max", "min"])
def test_max_min_are_lexicographic(fn, pick, dtype):
    got, sure = _eval(fn, A, B, dtype=dtype)
    want = np.asarray([_lex([dtype(a), dtype(b)], pick) for a, b in zip(A, B)], dtype)
    assert sure.all()
    np.testing.assert_array_equal(got, want)
    with jax.enable_x64(dtype is np.complex128):  # and JAX agrees: the order is JAX's
        jax_says = jax.jit(fn)(np.asarray(A, dtype), np.asarray(B, dtype))
        np.testing.assert_array_equal(np.asarray(jax_says), want)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("fn", "pick"), [(lambda x: lax.reduce_max(x, (1,)), max),
                                          (lambda x: lax.reduce_min(x, (1,)), min),
                                          (lambda x: jnp.max(x, axis=1), max)],
                         ids=["reduce_max", "reduce_min", "jnp.max"])
def test_complex_reductions_pick_the_lexicographic_extreme(fn, pick, dtype):
    rows = np.asarray([A, B], dtype)
    got, sure = _eval(fn, rows, dtype=dtype)
    assert sure.all()
    np.testing.assert_array_equal(got, np.asarray([_lex(list(r), pick) for r in rows], dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", ["multiply", "max", "min"])
def test_complex_scatters(kind, dtype):
    # small Gaussian integers: every product is exact in both dtypes, so Python's complex arithmetic is
    # the exact reference; index 0 is hit twice (updates combine in order)
    base = [1 + 2j, 3 - 1j, -2 + 2j, 5 + 0j]
    idx = [0, 0, 2]
    upd = [2 + 1j, 1j, 3 + 0j]

    def fn(x, u):
        return getattr(x.at[jnp.asarray(idx)], kind)(u)

    want = [dtype(v) for v in base]
    for i, u in zip(idx, upd):
        u = dtype(u)
        want[i] = want[i] * u if kind == "multiply" else _lex([want[i], u], max if kind == "max" else min)
    got, sure = _eval(fn, base, upd, dtype=dtype)
    assert sure.all()
    np.testing.assert_array_equal(got, np.asarray(want, dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_complex_convolution(dtype):
    x = [(k % 5) - 2 + 1j * ((3 * k) % 7 - 3) for k in range(9)]
    w = [1 + 1j, 2 - 1j, -0.5j]

    def fn(x, w):
        return lax.conv_general_dilated(x.reshape(1, 1, -1), w.reshape(1, 1, -1), (1,), "VALID")[0, 0]

    # lax.conv is a correlation: out[i] = sum_k x[i + k] w[k]; Gaussian (half-)integers: exact sums
    want = [sum(x[i + k] * w[k] for k in range(3)) for i in range(len(x) - 2)]
    got, sure = _eval(fn, x, w, dtype=dtype)
    assert sure.all()
    np.testing.assert_array_equal(got, np.asarray(want, dtype))


def test_gradient_of_a_real_loss_of_a_complex_input():
    # JAX's gradient of a real f(x + iy) is df/dx - i df/dy (cotangent 1): for |z|^2, 2x - 2iy, so
    # 6 - 8j at 3 + 4j, derived by hand; the oracle's reference of JAX's derivative program agrees
    with jax.enable_x64(True):
        z = np.complex128(3 + 4j)
        closed, _, _ = _compat.trace(lambda z: jnp.abs(z) ** 2, z)
        res = oracles.evaluate(derivative_program(closed, [0]), z)
    assert bool(np.asarray(res.certain[0])) and complex(np.asarray(res.values[0])) == 6 - 8j


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_grad_check_on_complex_inputs(dtype):
    # a modulus written as sqrt(re^2 + im^2) overflows and underflows (values and gradient fail);
    # jnp.abs (hypot) passes both on magnitudes up to 1e30
    def naive(z):
        return jnp.sqrt(jnp.real(z) ** 2 + jnp.imag(z) ** 2)

    kw = {"shapes": [(3,)], "dtype": dtype, "domain": (-1e30, 1e30), "max_examples": 30, "seed": 0,
          "grad": True}
    bad = jst.check(naive, **kw)
    assert bad.gradient is not None and bad.outcome == "failed" and bad.gradient.outcome == "failed"
    good = jst.check(jnp.abs, **kw)
    assert good.gradient is not None and good.outcome == "passed" and good.gradient.outcome == "passed"


def test_grad_of_jnp_abs_near_the_top_of_complex128_is_judged_against_conj_z_over_abs_z():
    # d|z|/dx - i d|z|/dy = conj(z)/|z|: (1 - i)/sqrt(2) at z = 1.4e308 (1 + i), where |z| overflows.
    # Up to JAX 0.12.0.1 jnp.abs's derivative divides by the overflowed |z| and returns 0 there (the
    # gradient check found it); 0.12.1 differentiates through lax.hypot's rescaled unit vector and is
    # right. What holds on every version: the exact reference is conj(z)/|z| (mpmath, independent of the
    # oracle), and the check fails exactly when JAX's own derivative is off from it.
    import mpmath

    zs = np.array([1.4e308 * (1 + 1j), 1.7e308 + 1e307j, 1.2e308 - 1.3e308j, 3 + 4j], np.complex128)
    grad = jax.vmap(jax.grad(jnp.abs))
    with jax.enable_x64(True):
        exact = oracles.evaluate(grad, zs)
        jax_grad = np.asarray(grad(zs))
    with mpmath.workprec(200):
        want = []
        for z in zs:
            x, y = mpmath.mpf(z.real), mpmath.mpf(z.imag)
            r = mpmath.sqrt(x * x + y * y)
            want.append(complex(float(x / r), float(-y / r)))  # float(): rounded to nearest once
    assert np.asarray(exact.certain).all()
    np.testing.assert_array_equal(np.asarray(exact.values), np.asarray(want))
    # JAX's float derivative at the overflow point: 0 (<= 0.12.0.1) or within an ulp per part (0.12.1)
    jax_off = bool(np.any(np.abs(jax_grad - np.asarray(want)) > 2 * np.spacing(np.abs(np.asarray(want)))))
    # the domain puts every part near the top, where |z| overflows in about half the draws
    r = jst.check(jnp.abs, shapes=[(3,)], dtype="complex128", max_examples=30, seed=0, grad=True,
                  domain=(1e307, 1.7e308))
    assert r.gradient is not None
    if jax_off:
        assert r.gradient.outcome == "failed" and r.gradient.original.max_error_bits > 50
    else:
        assert r.gradient.outcome == "passed" and r.gradient.original.max_error_bits <= 2


@pytest.mark.parametrize("dtype", DTYPES)
def test_complex_sort_is_lexicographic_and_carries_other_operands(dtype):
    # lax.sort's docstring: complex keys sort lexicographically, real part first; stable
    zs = [dtype(z) for z in A + B]
    got, sure = _eval(jnp.sort, zs, dtype=dtype)
    assert sure.all()
    np.testing.assert_array_equal(got, np.asarray(sorted(zs, key=lambda z: (z.real, z.imag)), dtype))
    order = sorted(range(len(zs)), key=lambda k: (zs[k].real, zs[k].imag))  # Python's sort is stable
    with jax.enable_x64(dtype is np.complex128):
        res = oracles.evaluate(lambda z, v: lax.sort((z, v), num_keys=1)[1], np.asarray(zs, dtype),
                               np.arange(len(zs), dtype=np.int32))
    np.testing.assert_array_equal(np.asarray(res.values), np.asarray(order, np.int32))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("fn", "pick", "reverse"), [(lax.cummax, max, False), (lax.cummin, min, False),
                                                     (lambda z: lax.cummax(z, reverse=True), max, True)],
                         ids=["cummax", "cummin", "cummax-reverse"])
def test_complex_cumulative_extremes(fn, pick, reverse, dtype):
    zs = [dtype(z) for z in A]
    seq = zs[::-1] if reverse else zs
    want = [_lex(seq[: k + 1], pick) for k in range(len(seq))]
    got, sure = _eval(fn, zs, dtype=dtype)
    assert sure.all()
    np.testing.assert_array_equal(got, np.asarray(want[::-1] if reverse else want, dtype))


def test_stop_gradient_of_complex_values_is_the_value():
    got, sure = _eval(lambda z: lax.stop_gradient(z) * 2, A, dtype=np.complex128)
    assert sure.all()
    np.testing.assert_array_equal(got, np.asarray([2 * z for z in A], np.complex128))
