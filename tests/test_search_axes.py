"""The search reads new axes, counts and NaN guards (issue 47, item 1): ``x[:, None]`` broadcasts
(pairwise kernels, polynomial features), a count of booleans (``nanmean``'s ``sum(~isnan(a))``) and a
library's ``where(c, nan, v)``.

Each lowering is checked against the program it came from, run by JAX on the same inputs (not the
term's own evaluator alone); what is still refused is checked to name the operation.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import mpmath
import numpy as np
import pytest

import pytest_jaxstab as jst
from pytest_jaxstab._search._expr import is_array_program, subterms
from pytest_jaxstab._search._judge import jax_function
from pytest_jaxstab._search._lower import Unsupported, lower_program

_C = np.random.default_rng(3).normal(size=(5, 2)).astype(np.float32)
_W = np.array([0.5, -1.0, 2.0], np.float32)


def _lowered(fn, *shapes):
    closed = jax.make_jaxpr(fn)(*(jnp.ones(s, jnp.float32) for s in shapes))
    return lower_program(closed)[0]


def _kinds(term):
    return {t[0] for t in subterms(term)}


#: Programs whose axes the traced program places where trailing broadcasting would not:
#: name -> (function, input shapes).
_AXES = {
    "polynomial-features": (lambda x: jnp.sum(x[..., None] ** jnp.arange(4, dtype=x.dtype), axis=-1), [(6,)]),
    # squared distances, not their kernel: exp would amplify a fused rounding of its argument past 4 ULPs
    "pairwise-distances": (lambda x: jnp.sum((x[:, None, :] - _C[None, :, :]) ** 2, axis=-1), [(4, 2)]),
    "outer-difference": (lambda x, y: jnp.sum(jnp.abs(x[:, None] - y[None, :]), axis=1), [(3,), (4,)]),
    "column-times-row": (lambda x: jnp.log(jnp.sum(jnp.exp(x.reshape(-1, 1) * _W.reshape(1, -1)), axis=0)),
                         [(5,)]),
    "squeezed-back": (lambda x: jnp.squeeze(jnp.sum(x[:, None] * _W, axis=1, keepdims=True), 1) * x, [(5,)]),
}


@pytest.mark.parametrize("case", sorted(_AXES))
def test_new_axes_lower_to_terms_that_compute_the_same(case):
    fn, shapes = _AXES[case]
    term = _lowered(fn, *shapes)
    assert is_array_program(term)
    assert any(k.startswith("rs_") for k in _kinds(term)), term  # the axis is placed, not assumed trailing
    rng = np.random.default_rng(7)
    xs = [rng.normal(size=(6, *s)).astype(np.float32) for s in shapes]
    out_shape = jax.eval_shape(fn, *(jnp.ones(s, jnp.float32) for s in shapes)).shape
    want = np.stack([np.asarray(jax.jit(fn)(*(x[i] for x in xs))) for i in range(6)])
    got = np.asarray(jax.vmap(jax_function(term, np.float32, out_shape))(*xs))
    assert got.shape == want.shape
    # The same operations on the same elements: the same floats up to XLA fusing them otherwise (4 ULPs).
    np.testing.assert_array_max_ulp(got, want, maxulp=4)


def test_a_squeezed_selection_keeps_its_axis_as_reductions_keep_theirs():
    # q[..., 0] is a selection whose term keeps its axis (4, 1), as sum(., -1) keeps its own: squeezing it
    # is left to that convention (placing it as (4,) would meet the kept (4, 1) of the sum: a (4, 4)
    # term, refused). Then [..., None] puts the axis back where the kept term already has it.
    def rotation_factor(q):
        w, n2 = q[..., 0], jnp.sum(q[..., 1:] ** 2, axis=-1)
        return (jnp.where(n2 < 0.5, w, 2.0 * w) / (1.0 + n2))[..., None] * q[..., 1:]

    term = _lowered(rotation_factor, (4, 3))
    xs = np.random.default_rng(9).normal(size=(6, 4, 3)).astype(np.float32)
    want = np.stack([np.asarray(jax.jit(rotation_factor)(x)) for x in xs])
    got = np.asarray(jax.vmap(jax_function(term, np.float32, (4, 2)))(xs))
    np.testing.assert_array_max_ulp(got, want, maxulp=4)


def test_a_trailing_broadcast_stays_as_it_was():
    # x (5,) against a (3, 5) constant needs no placing: the lowering is unchanged (no rs_ node).
    m = np.arange(15, dtype=np.float32).reshape(3, 5)
    assert not any(k.startswith("rs_") for k in _kinds(_lowered(lambda x: jnp.sum(x * m, axis=1), (5,))))
    assert not any(k.startswith("rs_") for k in _kinds(_lowered(lambda x: x[None, :] * m, (5,))))


def _nanmean(a):
    total = jnp.sum(jnp.where(jnp.isnan(a), 0.0, a), axis=-1)
    count = jnp.sum(~jnp.isnan(a), axis=-1, dtype=jnp.int32)
    return total / count.astype(a.dtype)


def _nanstd_guarded(a):
    n = jnp.sum(~jnp.isnan(a), axis=-1) - 1  # ddof=1, jnp.nanvar's guard against n <= 0
    centred = jnp.where(jnp.isnan(a), 0.0, a - _nanmean(a)[..., None])
    var = jnp.sum(centred * centred, axis=-1)
    var = jnp.where(n <= 0, jnp.nan, var)
    return jnp.sqrt(var / jnp.where(n <= 0, 1, n).astype(a.dtype))


def _positive_part_mean(a):  # an indicator cast to the float dtype, then a count cast from int
    return jnp.sum((a > 0).astype(a.dtype) * a, axis=-1) / jnp.sum(a > 0, axis=-1).astype(a.dtype)


@pytest.mark.parametrize("fn", [_nanmean, _nanstd_guarded, _positive_part_mean],
                         ids=["nanmean", "nanstd-ddof1", "positive-part-mean"])
def test_counts_and_nan_guards_lower_to_terms_that_compute_the_same(fn):
    term = _lowered(fn, (3, 6))
    assert "nanif" in _kinds(term) or fn is not _nanstd_guarded
    rng = np.random.default_rng(11)
    xs = rng.normal(size=(5, 3, 6)).astype(np.float32)
    xs[0, 1, :5] = np.nan  # one value left: ddof=1 has no variance there, the guard's NaN
    xs[1, 2, :] = np.nan   # nothing left: 0/0 in the mean
    xs[2, 0, 3] = np.nan
    if fn is _positive_part_mean:  # no NaN input: XLA folds 0.0 * NaN away in its select form
        xs = np.where(np.isnan(xs), -1.0, xs).astype(np.float32)
        xs[3, 1] = -2.0  # a row with nothing positive: 0/0
    want = np.stack([np.asarray(jax.jit(fn)(x)) for x in xs])
    with jax.numpy_dtype_promotion("strict"):  # booleans read as booleans, never promoted with floats
        got = np.asarray(jax.vmap(jax_function(term, np.float32, (3,)))(xs))
    assert np.array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_max_ulp(np.nan_to_num(got), np.nan_to_num(want), maxulp=4)


def test_a_nan_branch_is_one_guard_and_other_nan_constants_are_still_refused():
    term = _lowered(lambda x: jnp.where(x < -1.0, jnp.nan, jnp.log(1.0 + x)), ())
    assert term[0] == "nanif" and not any(t[0] == "const" and t[1] != t[1] for t in subterms(term))
    with pytest.raises(Unsupported, match="NaN"):
        _lowered(lambda x: jnp.where(x < 0, jnp.nan, jnp.nan * x), ())


@pytest.mark.parametrize(("fn", "word"), [
    (lambda x: x * (jnp.sum(x > 0, dtype=jnp.int32) // 2).astype(jnp.float32), "int32 operation 'div'"),
    (lambda x: x * (jnp.sum(x > 0, dtype=jnp.int32) % 3).astype(jnp.float32), "int32 operation 'rem'"),
    (lambda x: x * jnp.floor(x).astype(jnp.int32).astype(jnp.float32), "conversion to int32"),
])
def test_integer_arithmetic_that_floats_would_not_reproduce_is_refused(fn, word):
    with pytest.raises(Unsupported, match=word):
        _lowered(fn, (4,))


def _bits(got, want, eps):
    return np.log2(1 + np.abs(got - want) / np.maximum(np.abs(want), 1e-300) / eps)


@pytest.mark.slow
def test_improve_repairs_under_a_nan_guard_and_keeps_the_guard():
    # A library's log-density with its own NaN outside the support: log(1 + x) cancels for tiny x. The
    # search rewrites under the guard (log1p) and the offer still answers NaN where the original did.
    fn = lambda x: jnp.where(x <= -1.0, jnp.nan, jnp.log(1.0 + x) / x)
    imp = jst.improve(fn, shapes=[()], dtype="float32", domain=(-2.0, 1.0), time_limit=10)
    assert imp.improved, imp.status
    assert np.isnan(float(imp.fn(jnp.float32(-1.5))))
    x = np.array([1e-6, -3e-7, 2e-5, 0.25], np.float32)
    want = np.array([float(mpmath.log1p(mpmath.mpf(float(v))) / mpmath.mpf(float(v))) for v in x])
    got = np.asarray([float(imp.fn(jnp.float32(v))) for v in x])
    assert np.all(_bits(got, want, 2.0 ** -23) <= 3.0), got  # 3 bits: log1p, a division, their roundings


@pytest.mark.slow
def test_improve_searches_through_a_new_axis():
    # A per-row log-sum-exp over features x[:, None] * w (a tiny linear layer's partition function):
    # exp overflows past 88.7 in float32; through the placed axis the search finds the shifted form.
    w = np.array([1.0, 2.0, 3.0], np.float32)
    fn = lambda x: jnp.log(jnp.sum(jnp.exp(x[:, None] * w[None, :]), axis=1))
    imp = jst.improve(fn, shapes=[(4,)], dtype="float32", domain=(-60.0, 60.0), time_limit=10)
    assert imp.improved, imp.status
    x = np.array([50.0, -50.0, 0.5, 40.0], np.float32)
    want = np.array([float(mpmath.log(mpmath.fsum(mpmath.exp(mpmath.mpf(float(v)) * float(k)) for k in w)))
                     for v in x])
    got = np.asarray(imp.fn(jnp.asarray(x)), np.float64)
    assert np.all(_bits(got, want, 2.0 ** -23) <= 3.0), got
