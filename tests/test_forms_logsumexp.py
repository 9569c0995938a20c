"""The accurate logsumexp / log_softmax forms (``rewrites.forms``), whose implementation issue 24 made
faster: still exact on the small-term inputs, no overflow, ties counted, infinities handled, the
gradient softmax. References from mpmath at 256 bits, rounded once to the dtype; errors in bits
(docs/architecture.md, "The error metric")."""

from __future__ import annotations

import contextlib

import jax
import jax.numpy as jnp
import mpmath
import numpy as np
import pytest

from pytest_jaxstab.oracles._metrics import error_bits
from pytest_jaxstab.oracles._rounding import round_to_dtype
from pytest_jaxstab.rewrites import forms

MP = mpmath.mp.clone()
MP.prec = 256  # pyright: ignore[reportAttributeAccessIssue]


def _x64(dtype: type = np.float64) -> contextlib.AbstractContextManager[object]:
    """float64 needs JAX's x64 mode (off by default), as a context for the test's JAX calls."""
    return jax.enable_x64(True) if dtype == np.float64 else contextlib.nullcontext()


def _lse_exact(row: np.ndarray) -> mpmath.mpf:
    return MP.log(MP.fsum(MP.exp(MP.mpf(float(v))) for v in row))  # pyright: ignore[reportAttributeAccessIssue]


def _rounded(values: list, dtype: np.dtype) -> np.ndarray:
    return round_to_dtype(np.array(values, dtype=object), dtype)


ROWS = {
    # issue 3: the result is ~3e-8; log(1 + 3e-8) is 0 in float32
    "small terms": [1e-20] + [-20.0] * 15,
    # my own: the small terms spread over several binades below the max, and a negative max
    "small spread": [-3.0, -30.0, -25.0, -21.0, -40.0, -19.5],
    # ties of the max: each counts exp(0) = 1 (the result is log(3) + tiny)
    "three ties": [0.5, 0.5, 0.5, -18.0, -22.0],
    # would overflow exp in float32 (exp(100) = inf)
    "large": [100.0, 99.0, 80.0, 95.5],
    "large negative": [-120.0, -130.0, -119.0, -200.0],
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", list(ROWS))
def test_logsumexp_is_correctly_rounded_on_rows(name, dtype):
    x = np.array([ROWS[name], ROWS[name][::-1]], dtype)  # the max first and last
    with _x64(dtype):
        got = np.asarray(jax.jit(lambda v: forms.logsumexp(v, -1))(x))
    assert got.dtype == dtype
    want = _rounded([_lse_exact(r) for r in x], np.dtype(dtype))
    # within 1 ULP (the form rounds a few times; the naive formula loses 28+ bits on "small terms")
    assert error_bits(got, want).max() <= 1.0, (got, want)


@pytest.mark.parametrize("name", ["small terms", "small spread", "three ties", "large"])
def test_log_softmax_keeps_the_small_terms(name):
    x = np.array([ROWS[name]], np.float32)
    got = np.asarray(jax.jit(lambda v: forms.log_softmax(v, -1))(x))
    lse = _lse_exact(x[0])
    want = _rounded([[MP.mpf(float(v)) - lse for v in x[0]]], np.dtype(np.float32))
    # 3 bits: (x - m) is exact and only the log1p term is subtracted; jax.nn loses ~29 bits here
    assert error_bits(got, want).max() <= 3.0, (got, want)


def test_the_small_term_case_is_exact_where_the_library_is_not():
    x = np.array([ROWS["small terms"]], np.float32)
    want = _rounded([_lse_exact(x[0])], np.dtype(np.float32))
    assert error_bits(np.asarray(forms.logsumexp(x, -1)), want).max() == 0.0
    assert error_bits(np.asarray(jax.nn.logsumexp(x, axis=-1)), want).max() > 20  # the reason for the form


def test_infinities():
    inf = np.inf
    x = np.array([[-inf, -inf, -inf], [inf, 0.0, 1.0], [-inf, 2.0, -inf], [inf, inf, 0.0]], np.float32)
    got = np.asarray(forms.logsumexp(x, -1))
    np.testing.assert_array_equal(got, np.array([-inf, inf, 2.0, inf], np.float32))
    ls = np.asarray(forms.log_softmax(x[2:3], -1))
    np.testing.assert_array_equal(ls, np.array([[-inf, 0.0, -inf]], np.float32))


@pytest.mark.parametrize("axes", [(0,), (1,), (0, 1), None])
def test_reductions_over_any_axes(axes):
    rng = np.random.default_rng(7)
    x = rng.normal(0.0, 4.0, (5, 6))
    x[2, 3] = x[2, 4] = x.max() + 1.0  # a tie of the global max
    with _x64():
        got = np.asarray(forms.logsumexp(jnp.asarray(x), axes))
    with _x64():
        want = np.asarray(jax.scipy.special.logsumexp(x, axis=axes))  # float64: agrees to ~1e-15
    np.testing.assert_allclose(got, want, rtol=4e-15, atol=0)


@pytest.mark.parametrize("name", ["small spread", "three ties", "large"])
def test_the_gradient_is_softmax(name):
    x = np.array(ROWS[name], np.float64)
    with _x64():
        got = np.asarray(jax.grad(lambda v: forms.logsumexp(v, -1))(x))
        edge = np.asarray(jax.grad(lambda v: forms.logsumexp(v, -1))(np.array([-np.inf, 0.0, 1.0])))
    assert got.dtype == np.float64
    lse = _lse_exact(x)
    want = np.array([float(MP.exp(MP.mpf(float(v)) - lse))  # pyright: ignore[reportAttributeAccessIssue, reportArgumentType]
                     for v in x])
    np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-300)
    # softmax of [-inf, 0, 1]: [0, 1/(1+e), e/(1+e)], finite (no 0 * inf from the infinite entry)
    e = np.e
    np.testing.assert_allclose(edge, [0.0, 1 / (1 + e), e / (1 + e)], rtol=1e-14)
