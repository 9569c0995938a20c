"""The conditioning at linear cost (issue 46): float64 reverse passes give the figure the exact finite
differences through the oracle gave, and the stability lens asks only for the elements that matter."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pytest_jaxstab._check import _conditioning
from pytest_jaxstab._check._conditioning import _finite_differences, conditioning_lower, conditioning_ulps
from pytest_jaxstab._check._evaluate import Evaluator, StageTimes
from pytest_jaxstab._check._stability import RATIONED_CALLS, ROWS_PER_ROUND
from pytest_jaxstab._check._verdict import judge_elements
from pytest_jaxstab.oracles import evaluate

F32 = np.dtype("float32")


def _one_pass_norm(x):
    m = jnp.mean(x, -1, keepdims=True)
    v = jnp.mean(x * x, -1, keepdims=True) - m * m
    return (x - m) * jax.lax.rsqrt(v + 1e-5)


def _cross_entropy(logits, labels):
    lp = logits - jax.nn.logsumexp(logits, axis=-1, keepdims=True)
    return -jnp.take_along_axis(lp, labels[:, None], axis=-1)[:, 0]


# Smooth programs (no decision an ulp can flip at these inputs) with inputs where they cancel, overflow
# float32 intermediates or are tame; each input is a tuple of arrays.
_RNG = np.random.default_rng(7)
CASES = {
    "difference_of_squares": (lambda a, b: a * a - b * b,
                              (np.asarray([1.25, 3.0, -7.5], F32), np.asarray([1.2499, 2.0, 7.5001], F32))),
    "x_minus_sin": (lambda x: x - jnp.sin(x), (np.asarray([1e-3, 0.5, 3.0, -2e-2], F32),)),
    "log_sum_exp": (lambda x: jnp.log(jnp.sum(jnp.exp(x), -1)),
                    (np.asarray([[0.1, -3.0, 2.0, 1.0], [-20.0, -20.5, -19.0, -40.0]], F32),)),
    "one_pass_norm": (_one_pass_norm,
                      ((1000.0 + _RNG.standard_normal((3, 8)) * np.asarray([[1e-2], [1.0], [30.0]], F32)
                        ).astype(np.float32),)),
    "softmax": (lambda x: jax.nn.softmax(x, axis=-1), (_RNG.standard_normal((2, 5)).astype(np.float32) * 4,)),
    "cross_entropy": (_cross_entropy, (_RNG.standard_normal((3, 6)).astype(np.float32) * 5,
                                       np.asarray([0, 5, 2], np.int32))),
    "tanh_matmul": (lambda x, w: jnp.tanh(x @ w), (_RNG.standard_normal((2, 4)).astype(np.float32),
                                                   _RNG.standard_normal((4, 3)).astype(np.float32))),
    "quotient": (lambda a, b: (a - b) / (a + b),
                 (np.asarray([1.0, 1e4, -3.0], F32), np.asarray([0.999, 1e-4, 2.5], F32))),
}


def _exact(closed, args):
    return [np.asarray(v) for v in jax.tree_util.tree_leaves(evaluate(closed, *args).values)]


@pytest.fixture
def passes(monkeypatch):
    """The float64 passes even for these small programs (which take finite differences outright)."""
    monkeypatch.setattr(_conditioning, "SMALL", 0)


@pytest.mark.parametrize("name", sorted(CASES))
def test_reverse_passes_give_the_finite_differences_figure(name, passes):
    fn, args = CASES[name]
    closed = jax.make_jaxpr(fn)(*args)
    exact = _exact(closed, args)
    dtypes = [e.dtype for e in exact]
    got = conditioning_ulps(closed, list(args), exact, [0], dtypes)[0]
    want = _finite_differences(closed, list(args), exact, [0], dtypes)[0]
    both = np.isfinite(got) & np.isfinite(want)
    assert both.mean() >= 0.99, (got, want)
    # Bits of allowance log2(1 + cond): a one-float step differs from the derivative by second-order
    # terms (~u relative) and the float64 roundings of the moved exact results (2^-29 relative of the
    # move for float32 programs): far below 0.1 bit wherever the figure is above one ulp.
    g, w = np.log2(1 + got[both]), np.log2(1 + want[both])
    assert np.max(np.abs(g - w)) <= 0.1, (name, g, w)


def test_only_the_wanted_elements_are_computed_and_a_columns_rows_come_free(passes):
    # The one-pass norm is row-separable (each row reads its own row): one reverse pass per column
    # gives that column in every row, so asking for elements 3 and 17 of a (3, 8) output fills
    # columns 3 and 1 in all three rows, and nothing else.
    fn, args = CASES["one_pass_norm"]
    closed = jax.make_jaxpr(fn)(*args)
    exact = _exact(closed, args)
    full = conditioning_ulps(closed, list(args), exact, [0], [F32])[0]
    part = conditioning_ulps(closed, list(args), exact, [0], [F32], wanted=[np.array([3, 17])])[0]
    filled = ~np.isnan(part)
    assert np.array_equal(np.flatnonzero(filled.any(axis=0)), [1, 3]) and filled[:, [1, 3]].all()
    assert np.array_equal(part[filled], full[filled])


def test_the_lower_bound_is_below_every_elements_figure(passes):
    for name, (fn, args) in CASES.items():
        closed = jax.make_jaxpr(fn)(*args)
        exact = _exact(closed, args)
        dtypes = [e.dtype for e in exact]
        full = conditioning_ulps(closed, list(args), exact, [0], dtypes)[0]
        low = conditioning_lower(closed, list(args), exact, [0], dtypes)[0]
        ok = np.isfinite(full)
        # |sum_i s_i a_i| <= sum_i |a_i| for every sign pattern; both sums in float64 (a few ulps).
        assert np.all(low[ok] <= full[ok] * (1 + 2.0**-40) + 2.0**-40), name
        # and it is not vacuous: it sees most of the figure where there is one (Khintchine)
        big = ok & (full > 4)
        assert np.all(low[big] >= full[big] / 64), name


def test_a_row_the_float64_pass_cannot_vouch_for_falls_back_to_finite_differences(monkeypatch, passes):
    # exp(x) - exp(x - 1e-7 * x) at x = 700: float64 exp overflows nowhere, but exp(750) does:
    # the float64 forward value is inf where the exact one is finite, so the row is not trusted; the
    # program is small, so finite differences give the figure.
    fn = lambda x: jnp.exp(x) * jnp.exp(-x)
    x = np.asarray([1.0, 720.0], F32)
    closed = jax.make_jaxpr(fn)(x)
    exact = _exact(closed, (x,))
    calls = []
    real = _conditioning._finite_differences
    monkeypatch.setattr(_conditioning, "_finite_differences", lambda *a: calls.append(1) or real(*a))
    cond = conditioning_ulps(closed, [np.asarray(x)], exact, [0], [F32])[0]
    assert calls == [1]
    assert cond[0] < 1.0 and cond[1] < 1.0  # exp(x) exp(-x) = 1: no input moves it


def test_a_small_program_takes_the_exact_finite_differences_outright(monkeypatch):
    calls = []
    real = _conditioning._finite_differences
    monkeypatch.setattr(_conditioning, "_finite_differences", lambda *a: calls.append(1) or real(*a))
    fn, args = CASES["difference_of_squares"]
    closed = jax.make_jaxpr(fn)(*args)
    exact = _exact(closed, args)
    assert sum(a.size for a in args) <= _conditioning.SMALL
    conditioning_ulps(closed, list(args), exact, [0], [F32])
    assert calls == [1]


def test_the_lens_computes_few_rows_where_the_error_is_large_everywhere(monkeypatch):
    # (x + c) - c with c = 1 at x ~ 1e-4 absorbs ~13 bits of every element while the problem is
    # perfectly conditioned (f = x): the first round of rows (the largest errors) shows a failure as
    # large as any later element's forward error, so few more rows are computed: never one per element.
    # (c is an input: JAX 0.10.2's XLA folds a constant's (x + 1) - 1 to x.)
    computed = []
    real = _conditioning.conditioning_ulps

    def counting(*a, wanted=None, **k):
        assert wanted is not None
        computed.append(sum(len(w) for w in wanted))
        return real(*a, wanted=wanted, **k)

    monkeypatch.setattr("pytest_jaxstab._check._stability.conditioning_ulps", counting)
    x = (1e-4 * (1 + np.random.default_rng(3).random((64, 64)))).astype(np.float32)
    c = np.ones_like(x)
    closed = jax.make_jaxpr(lambda x, c: (x + c) - c)(x, c)
    ev = Evaluator(closed, closed, [0], None, StageTimes(), judge="stability", tolerance_bits=8.0)
    o = ev((x, c)).outcomes["original"]
    assert o.bits > 12 and o.beyond_bits is not None and o.beyond_bits > 12
    assert computed[0] == ROWS_PER_ROUND and sum(computed) < x.size // 2, computed
    # and the figures are the ones every row gives
    every = [np.asarray(e) for e in jax.tree_util.tree_leaves(evaluate(closed, x, c).values)]
    cond = conditioning_ulps(closed, [x, c], every, [0], [F32])
    full = judge_elements(o.values, every, o.element_bits, cond, 1, 8.0)
    assert (full.beyond_bits, full.conditioning_bits) == (o.beyond_bits, o.conditioning_bits)


def test_rows_the_float64_pass_cannot_vouch_for_are_all_given_in_turn():
    # relu(x @ w) where every row cancels to ~1e-20 (1 + t - 1): float64 cannot vouch for one of them
    # (its value is 0 or 1e-16 off), float32 rounds each to 0 (every element ~all bits off), yet the
    # problem's conditioning (sum |x w| / |t| ~ 1e20) explains all of it: a stable program. Far more
    # elements than one call of the oracle's exact rows serves (EXACT_ROWS), and more float inputs than
    # finite differences take (FD_LIMIT): the lens must ask again until each has its figure, never leave
    # one with its lower bound of 0 (a false failure, as a relu layer's at (32, 128) had).
    # More elements than one call serves, within what RATIONED_CALLS calls do.
    rows = _conditioning.EXACT_ROWS + 7
    assert rows <= _conditioning.EXACT_ROWS * RATIONED_CALLS
    t = np.float64(1e-20) * (1 + np.arange(rows))
    x = np.zeros((rows, 4), np.float64)
    x[:, 0], x[:, 1], x[:, 2] = 1.0, t, -1.0
    x = x.astype(np.float32)  # t survives in float32 (1e-20 is a normal float32)
    w = np.ones((4, 1), np.float32)
    assert x.size + w.size > _conditioning.FD_LIMIT
    closed = jax.make_jaxpr(lambda x, w: jax.nn.relu(x @ w))(x, w)
    ev = Evaluator(closed, closed, [0], None, StageTimes(), judge="stability", tolerance_bits=8.0)
    o = ev((x, w)).outcomes["original"]
    assert o.bits > 20  # every element lost (0 for ~1e-20)
    assert o.beyond_bits is not None and o.beyond_bits <= 8.0, o.beyond_bits


def test_exact_rows_take_the_fast_paths_bounds_and_the_oracle_only_where_they_are_wide(monkeypatch, passes):
    # relu(x @ w): rows at ordinary inputs are pinned by the float64 bounds (no Arb ball), a row whose
    # pre-activation cancels to 1e-20 (float64 cannot tell its sign) goes to the oracle; both give the
    # first-order figure, here known in closed form: d relu(z_rj)/dx_ri = w_ij, /dw_ij = x_ri where the
    # exact z_rj > 0, so the weighted row sum is 2 sum_i |x_ri w_ij| there and 0 elsewhere.
    from pytest_jaxstab._check import _derivatives
    rng = np.random.default_rng(11)
    x = rng.uniform(-4, 4, (6, 5)).astype(np.float32)
    x[0, :3] = [1.0, 1e-20, -1.0]  # row 0, column 0: 1 + 1e-20 - 1 with w = 1 below
    x[0, 3:] = 0.0
    w = rng.uniform(-4, 4, (5, 3)).astype(np.float32)
    w[:, 0] = [1.0, 1.0, 1.0, 0.0, 0.0]
    closed = jax.make_jaxpr(lambda x, w: jax.nn.relu(x @ w))(x, w)
    calls = []
    real = _derivatives.evaluate
    monkeypatch.setattr(_derivatives, "evaluate", lambda *a, **k: calls.append(len(a[-1])) or real(*a, **k))
    exact = _exact(closed, (x, w))[0].reshape(-1)
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    want = np.where(exact > 0, 2 * (np.abs(x64)[:, :, None] * np.abs(w64)[None]).sum(1).reshape(-1), 0.0)
    d = _derivatives.Derivatives(closed, [0])
    negligible = np.full(want.size, 1e-30)  # far below any of these sums but the zero ones
    ordinary = np.arange(1, 6) * 3 + 1  # rows 1-5, column 1
    got = d.exact_rows([x, w], 0, ordinary, negligible[ordinary])
    assert calls == []
    np.testing.assert_allclose(got, want[ordinary], rtol=_derivatives.ROW_WIDTH, atol=1e-30)
    got = d.exact_rows([x, w], 0, np.asarray([0, 4]), negligible[[0, 4]])
    assert calls == [1]  # only the cancelling row's sum goes to the oracle
    assert exact[0] > 0 and want[0] == 4.0  # 2 (|1| + |1e-20| + |-1|): 1e-20 is lost in float64
    np.testing.assert_allclose(got, want[[0, 4]], rtol=_derivatives.ROW_WIDTH, atol=1e-30)


def test_rows_the_reference_loses_in_float64_come_from_the_stabilized_variant(monkeypatch):
    # log(sum(exp(x))) at x ~ 800: float64's exp overflows, so the reference's pass vouches for no row
    # and each would cost the oracle's exact derivative; the max-shifted variant computes the same
    # function, and so the same derivative, in float64. Its rows must give the oracle's figures.
    from pytest_jaxstab._check import _derivatives
    x = (800.0 + np.random.default_rng(5).uniform(-3, 3, (8, 40))).astype(np.float32)
    assert x.size > _conditioning.FD_LIMIT
    naive = jax.make_jaxpr(lambda x: jnp.log(jnp.sum(jnp.exp(x), -1)))(x)
    shifted = jax.make_jaxpr(lambda x: jax.nn.logsumexp(x, -1))(x)
    exact = _exact(naive, (x,))
    reference = conditioning_ulps(naive, [x], exact, [0], [F32])[0]  # the oracle's rows
    calls = []
    real = _derivatives.Derivatives.exact_rows
    monkeypatch.setattr(_derivatives.Derivatives, "exact_rows",
                        lambda *a, **k: calls.append(1) or real(*a, **k))
    via = conditioning_ulps(naive, [x], exact, [0], [F32], alternate=shifted)[0]
    assert calls == []
    assert np.all(reference > 0)
    # The float64 rows and the exact ones: the same figure to far below the bit it is read to.
    np.testing.assert_allclose(via, reference, rtol=2 * _derivatives.ROW_WIDTH)
