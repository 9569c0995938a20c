"""The accurate logsumexp / log_softmax forms (``rewrites.forms``), whose implementation issue 24 made
faster: still exact on the small-term inputs, no overflow, ties counted, infinities handled, the
gradient softmax. References from mpmath at 256 bits, rounded once to the dtype; errors in bits
(docs/architecture.md, "The error metric")."""

from __future__ import annotations

import contextlib
from typing import Any

import jax
import jax.numpy as jnp
import mpmath
import numpy as np
import pytest

from pytest_jaxstab.oracles.core._metrics import error_bits
from pytest_jaxstab.oracles.core._rounding import round_to_dtype
from pytest_jaxstab.rewrites import forms

# The slow tier (`make test-slow`, run in full by CI; `make test` leaves it out): docs/architecture.md,
# "Tests and their tiers".
pytestmark = pytest.mark.slow

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


# ------------------------------------------------------------------ the fast sum and the re-summed rows
# forms._rest takes the fast sum first and sums again (masked) only the rows where it is below 1/2:
# none, a few (gathered), or most (every row re-summed). Each batch below drives one of those paths;
# every row must come out as accurate as the single-row tests above require, whichever path it took.
def _dyadic(v: Any) -> Any:
    """``v`` rounded to multiples of 2^-10: with |v| < 64 every difference of two is exact in float32,
    so the shift x - m adds no error, which exp would amplify by |x - m| (conditioning, not the form)."""
    return np.round(np.asarray(v) * 1024.0) / 1024.0


def _batch(n_small: int, rows: int = 48, seed: int = 0) -> np.ndarray:
    """``rows`` rows of 12: the first ``n_small`` dominated by one term (r < 1/2: re-summed), the
    rest spread, tied, or with infinities (r >= 1/2 or not finite: the fast sum), shuffled."""
    rng = np.random.default_rng(seed)
    out = []
    for k in range(rows):
        if k < n_small:  # one term dominating, the rest 20-60 below: r ~ 1e-9 .. 1e-26; the top
            # dyadic or below 1e-20 (then x - top rounds to x: exact to 1e-20 relative)
            tiny = rng.choice([-1, 1]) * 10.0 ** -rng.integers(20, 37)
            top = _dyadic(rng.uniform(-2.0, 2.0)) if k % 2 else tiny
            row = np.concatenate([[top], _dyadic(-rng.uniform(20.0, 60.0, 11))])
        elif k % 4 == 0:  # a tie of the max and small terms: r = 1 + tiny
            row = np.concatenate([[0.25, 0.25], _dyadic(-rng.uniform(20.0, 40.0, 10))])
        elif k % 4 == 1:  # -inf entries and an all -inf row
            row = (np.full(12, -np.inf) if k % 8 == 1
                   else np.concatenate([[1.5, -np.inf], _dyadic(rng.normal(0, 1, 10))]))
        else:  # spread logits
            row = _dyadic(rng.normal(0.0, 3.0, 12))
        out.append(rng.permutation(row))
    return np.array(out)[rng.permutation(rows)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n_small", [0, 1, 3, 40])  # 48 rows: 3 = the gathered share, 40 > it
def test_every_path_gives_the_correctly_rounded_rows(n_small, dtype):
    x = _batch(n_small).astype(dtype)
    with _x64(dtype):
        got = np.asarray(jax.jit(lambda v: forms.logsumexp(v, -1))(x))
        lsm = np.asarray(jax.jit(lambda v: forms.log_softmax(v, -1))(x))
    want = _rounded([_lse_exact(r) for r in x], np.dtype(dtype))
    bits = error_bits(got, want)
    # 3 bits (8 ULP): a sum of 12 terms rounded at 1 + r, log1p, the final addition, each an ULP or
    # two at most (the shifts are exact on these inputs); the naive formula loses 28+ bits here
    assert bits.max() <= 3.0, (x[bits.argmax()], got[bits.argmax()], want[bits.argmax()])
    finite = np.isfinite(x).all(axis=1)
    lsm_want = _rounded([[MP.mpf(float(v)) - _lse_exact(r) for v in r] for r in x[finite]], np.dtype(dtype))
    # 3 bits for log_softmax, as above: (x - m) exact, only the log1p term subtracted
    assert error_bits(lsm[finite], lsm_want).max() <= 3.0


def test_the_dominated_rows_are_exact_where_the_fast_sum_is_not():
    # the case the re-summing exists for: max 0, the rest e^-40: the fast sum gives fl(1 + 6e-17) - 1 = 0
    x = np.zeros((20, 16), np.float32) - 40.0
    x[:, 0] = 0.0
    x[5:, 0] = np.linspace(-3.0, 3.0, 15)  # other rows: a nonzero max, all re-summed too
    want = _rounded([_lse_exact(r) for r in x], np.dtype(np.float32))
    # 1 ULP: exp(-40) rounded and 15 equal terms summed; the fast sum loses every digit of 6e-17
    assert error_bits(np.asarray(forms.logsumexp(jnp.asarray(x), -1)), want).max() <= 1.0
    assert error_bits(np.asarray(forms.logsumexp_fast(jnp.asarray(x), -1)), want).max() > 20


@pytest.mark.parametrize("axes", [(1,), (0, 2)])
def test_re_summed_rows_over_inner_axes(axes):
    # reduced axes that are not the last ones: the re-summed rows are gathered from a transpose
    rng = np.random.default_rng(3)
    x = _dyadic(rng.normal(0.0, 3.0, (6, 20, 5)))
    x[2, 7, 1] = 80.0  # dominates its row for axes (1,), and the (0, 2) slice 7
    x[4, 3, 0] = x[4, 9, 0] = 70.0  # a tie in one (1,)-row
    with _x64():
        got = np.asarray(forms.logsumexp(jnp.asarray(x), axes))
    moved = np.moveaxis(x, axes, tuple(range(x.ndim - len(axes), x.ndim)))
    flat = moved.reshape(-1, int(np.prod([x.shape[a] for a in axes])))
    want = _rounded([_lse_exact(r) for r in flat], np.dtype(np.float64)).reshape(got.shape)
    assert error_bits(got, want).max() <= 3.0  # as for the rows above


@pytest.mark.parametrize("n_small", [0, 2, 40])
def test_the_gradient_is_softmax_on_every_path(n_small):
    x = _batch(n_small, seed=1)
    x = x[np.isfinite(x).all(axis=1)]  # the gradient of an infinite row is NaN, as for jax.nn
    with _x64():
        got = np.asarray(jax.grad(lambda v: forms.logsumexp(v, -1).sum())(jnp.asarray(x)))
        w = jnp.arange(12.0)
        lsm = np.asarray(jax.grad(lambda v: (forms.log_softmax(v, -1) * w).sum())(jnp.asarray(x)))
        lsm_nn = np.asarray(jax.grad(lambda v: (jax.nn.log_softmax(v, -1) * w).sum())(jnp.asarray(x)))
    want = np.array([[float(MP.exp(MP.mpf(float(v)) - _lse_exact(r))) for v in r] for r in x])  # pyright: ignore[reportAttributeAccessIssue, reportArgumentType]
    np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-300)
    # d/dx of sum(w * log_softmax(x)) = w - softmax(x) * sum(w): the library's (same formula) to rounding
    np.testing.assert_allclose(lsm, lsm_nn, rtol=1e-12, atol=1e-12)


def test_under_vmap_every_branch_is_a_select_and_still_exact():
    x = np.stack([_batch(n, rows=8, seed=n) for n in (0, 1, 8)]).astype(np.float32)  # (3, 8, 12)
    got = np.asarray(jax.vmap(lambda v: forms.logsumexp(v, -1))(jnp.asarray(x)))
    want = _rounded([_lse_exact(r) for r in x.reshape(-1, 12)], np.dtype(np.float32)).reshape(3, 8)
    assert error_bits(got, want).max() <= 3.0  # as for the rows above


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("off", [-2, -1, 1, 2])
def test_a_maximal_term_a_few_ulps_off_one_is_still_the_maximum(dtype, off):
    # Under jit, XLA may compute the exp pass's ``x - m`` from an ``x`` it recomputes with other
    # roundings than the max pass's (an FMA-contracted ``3.0 * v - m``), so the maximal term is
    # exp(+-a few ulps), not exactly 1. The masked re-sum must still drop it: a mask at exactly 1
    # counted it and returned log(2) too much (found by the search's re-check on
    # ``log(sum(exp(3.0 * x)))``). Emulated exactly: the shift moved ``off`` ulps off the max.
    from pytest_jaxstab.rewrites.forms._core import _rest

    row = np.array([1.0, -30.0, -41.5, -25.0, -60.0], dtype)
    shift = np.asarray(row[:1], dtype)
    for _ in range(abs(off)):
        shift = np.nextafter(shift, np.array(np.inf if off > 0 else -np.inf, dtype))
    with _x64(dtype):
        got = np.asarray(_rest(jnp.asarray(row[None]), jnp.asarray(shift[None]), (1,)))[0, 0]
    sh = MP.mpf(float(shift[0]))
    exact = MP.fsum(MP.exp(MP.mpf(float(v)) - sh) for v in row[1:])  # the terms below the maximum
    # the re-sum is 4 positive terms, each exp rounded by XLA (about an ulp), then summed: within 3 ulps
    # (2 bits); the mask at exactly 1 gave r = 1 (over 30 bits), a negative r_f was never re-summed
    assert error_bits(np.array([got]), _rounded([exact], np.dtype(dtype))) <= 2.0, (got, exact)
