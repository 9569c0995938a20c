"""A dense layer's conditioning where a draw repeats rows or columns (issue 46): one figure per class of
equal elements (``_check/_equal_rows``), proven equivariance only, and the figure every element gets is
the one mathematics gives it."""

from __future__ import annotations

from fractions import Fraction

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pytest_jaxstab._check import _conditioning, _exact_many
from pytest_jaxstab._check._conditioning import _finite_differences, conditioning_ulps, ulp
from pytest_jaxstab._check._derivatives import Derivatives
from pytest_jaxstab._check._equal_rows import representatives, split_axes

F32 = np.dtype("float32")
U = 2.0**-24  # float32's unit roundoff
#: The float64 passes sum |x_i df/dx_i| over a few dozen positive terms: relative error <= n * 2^-53,
#: 2^-47 for these sizes; the bound below leaves room and is still far finer than the figure is read to
#: (a log2 allowance, one bit).
REL = 2.0**-40


def _layer(x, w, b):
    return jax.nn.relu(x @ w + b)


def _figure(x, w, b, r, c):
    """The conditioning of ``relu(x @ w + b)`` at ``(r, c)`` from its definition, in output ulps:
    ``(sum_k |x_rk w_kc| (the x's) + sum_k |w_kc x_rk| (the w's) + |b_c|) u / ulp(y)`` where the exact
    ``y > 0``, 0 where it is negative; ``y`` in rationals (float32 products and sums are exact there)."""
    terms = [Fraction(float(x[r, k])) * Fraction(float(w[k, c])) for k in range(x.shape[1])]
    y = sum(terms, Fraction(0)) + Fraction(float(b[c]))
    if y <= 0:
        return 0.0, 0.0
    total = 2 * sum(abs(t) for t in terms) + abs(Fraction(float(b[c])))
    exact = float(y)
    return float(total) * U / float(ulp(np.asarray(exact), F32)), exact


def _inputs(rows=8, n=16, seed=3):
    """Every row of ``x`` equal; ``w``'s columns (and ``b``) in two repeated groups."""
    rng = np.random.default_rng(seed)
    x = np.tile(rng.uniform(-2, 2, n).astype(np.float32), (rows, 1))
    cols = rng.uniform(-1, 1, (n, 2)).astype(np.float32)
    w = cols[:, np.arange(n) % 2]
    b = np.asarray([0.5, 1.5], np.float32)[np.arange(n) % 2]
    return x, w, b


def _exact_values(x, w, b):
    figures = [[_figure(x, w, b, r, c) for c in range(w.shape[1])] for r in range(x.shape[0])]
    return (np.asarray([[f for f, _ in row] for row in figures]),
            np.asarray([[e for _, e in row] for row in figures]))


def test_a_dense_layer_is_equivariant_along_its_batch_and_its_columns():
    closed = jax.make_jaxpr(_layer)(*_inputs())
    assert split_axes(closed, 0) == [(0, [0, None, None]), (1, [None, 1, 0])]


@pytest.mark.parametrize(("name", "fn", "refused"), [
    # a table that depends on the row's index (a positional encoding folded in as a constant)
    ("constant table", lambda x: x + jnp.asarray(np.linspace(0, 1, 8 * 16, dtype=np.float32).reshape(8, 16)),
     0),
    ("iota", lambda x: x * jnp.arange(8.0, dtype=jnp.float32)[:, None], 0),
    ("cumulative sum along the batch", lambda x: jnp.cumsum(x, axis=0), 0),
    ("reduction over the batch", lambda x: x - jnp.mean(x, axis=0), 0),
])
def test_a_program_that_tells_rows_apart_is_refused_that_axis(name, fn, refused):
    closed = jax.make_jaxpr(fn)(np.ones((8, 16), np.float32))
    assert refused not in [a for a, _ in split_axes(closed, 0)], name


def test_representatives_follow_the_equal_slices():
    x, w, b = _inputs(rows=4, n=6)
    closed = jax.make_jaxpr(_layer)(x, w, b)
    (leaders,) = representatives(closed, [x, w, b], [0])
    assert leaders is not None
    grid = leaders.reshape(4, 6)
    assert (grid == np.arange(6)[None, :] % 2).all()  # row 0, and the first column of each group
    x[2, 0] += 1  # row 2 now differs: its own class
    (leaders,) = representatives(closed, [x, w, b], [0])
    assert leaders is not None
    assert (leaders.reshape(4, 6)[2] == 2 * 6 + np.arange(6) % 2).all()


def test_every_element_gets_the_figure_mathematics_gives_it_one_row_per_class(monkeypatch):
    x, w, b = _inputs()
    closed = jax.make_jaxpr(_layer)(x, w, b)
    want, exact = _exact_values(x, w, b)
    asked: list[int] = []
    original = Derivatives.weighted_rows

    def counted(self, args, t, flat):
        asked.append(len(flat))
        return original(self, args, t, flat)

    monkeypatch.setattr(Derivatives, "weighted_rows", counted)
    (cond,) = conditioning_ulps(closed, [x, w, b], [exact.astype(np.float32)], [0], [F32])
    assert sum(asked) == 2  # two classes: one row of x, two groups of columns
    np.testing.assert_allclose(cond, want, rtol=REL, atol=0)


def test_the_shared_figure_equals_the_one_computed_element_by_element(monkeypatch):
    rng = np.random.default_rng(11)
    x, w, b = _inputs(seed=5)
    x[3] = rng.uniform(-2, 2, x.shape[1]).astype(np.float32)  # one row apart from the others
    closed = jax.make_jaxpr(_layer)(x, w, b)
    _, exact = _exact_values(x, w, b)
    args, e = [x, w, b], [exact.astype(np.float32)]
    (shared,) = conditioning_ulps(closed, args, e, [0], [F32])
    monkeypatch.setattr(_conditioning, "representatives", lambda closed, args, outs: [None] * len(outs))
    (each,) = conditioning_ulps(closed, args, e, [0], [F32])
    np.testing.assert_allclose(shared, each, rtol=REL, atol=0)


def test_a_row_the_float64_pass_loses_takes_one_exact_row_per_class(monkeypatch):
    """``y = 1e20 + 1 - 1e20``: float64 rounds the 1 away, so no float64 row is trusted at column 0, and
    the program (400 float inputs) is past finite differences: each such row is the oracle's. Eight equal
    rows of ``x`` take one."""
    n = 16
    row = np.zeros(n, np.float32)
    row[:3] = [1e20, 1.0, -1e20]
    x = np.tile(row, (8, 1))
    w = np.full((n, n), 0.25, np.float32)
    w[:3, 0] = 1.0
    b = np.zeros(n, np.float32)
    closed = jax.make_jaxpr(_layer)(x, w, b)
    assert x.size + w.size + b.size > _conditioning.FD_LIMIT
    want, exact = _exact_values(x, w, b)
    assert exact[0, 0] == 1.0
    rows: list[int] = []
    original = Derivatives.exact_rows

    def counted(self, args, t, flat, negligible=None):
        rows.append(len(flat))
        return original(self, args, t, flat, negligible)

    monkeypatch.setattr(Derivatives, "exact_rows", counted)
    wanted = [np.arange(0, x.shape[0] * n, n)]  # column 0 of every row
    (cond,) = conditioning_ulps(closed, [x, w, b], [exact.astype(np.float32)], [0], [F32], wanted=wanted)
    assert rows == [1]
    np.testing.assert_allclose(cond[:, 0], want[:, 0], rtol=2.0**-4)  # ``exact_rows``: ROW_WIDTH


def _softplus_sum(x, y):
    return jnp.sum(jax.nn.softplus(x * y), -1) - jnp.log1p(jnp.abs(x[..., 0]))


@pytest.mark.parametrize("stacked_fails", [False, True])
def test_stacked_exact_values_give_the_figure_separate_calls_give(monkeypatch, stacked_fails):
    """The finite differences' moved inputs go to the oracle stacked (``_exact_many``): the figure is the
    one one call per moved input gives, to the oracle's ``WITHIN_ULPS`` per value: each of the ``n``
    terms then moves by at most 2 * 2^-20 ulps times ``u / step`` <= 1, so ``n * 2^-19`` ulps in all. A
    program the stacked call cannot take gets the separate calls."""
    rng = np.random.default_rng(2)
    args = [(rng.standard_normal((3, 5)) * 4).astype(np.float32),
            rng.uniform(-3, 3, (3, 5)).astype(np.float32)]
    closed = jax.make_jaxpr(_softplus_sum)(*args)
    (exact,) = _exact_many.exact64(closed, args, [0], [F32])
    sizes: list[int] = []
    real = _exact_many._batch

    def counted(closed, sets, outs, dtypes):
        sizes.append(len(sets))
        return real(closed, sets, outs, dtypes)

    def broken(*a):
        raise NotImplementedError("a primitive the stacked walk cannot take")

    monkeypatch.setattr(_exact_many, "_batch", counted)
    if stacked_fails:
        monkeypatch.setattr(_exact_many, "_vmapped", broken)
    stacked = _finite_differences(closed, args, [exact], [0], [F32])[0]
    assert max(sizes) > 1  # the moved inputs went to the oracle together
    monkeypatch.setattr(_exact_many, "_batch", lambda closed, sets, outs, dtypes: [
        _exact_many.exact64(closed, s, outs, dtypes) for s in sets])
    each = _finite_differences(closed, args, [exact], [0], [F32])[0]
    n = sum(a.size for a in args)
    np.testing.assert_allclose(stacked, each, rtol=0, atol=n * 2.0**-19)
    assert np.nanmax(each) > 1  # figures large enough for a wrong value to show
