"""Cross-entropies with integer labels: a gather by input-derived indices (``catalogue/_stability_select.py``,
form in ``forms/_labels.py``; issue 39).

optax's ``softmax_cross_entropy_with_integer_labels`` (``logsumexp(x) - take_along_axis(x, labels)``),
the tutorial's ``-log(take_along_axis(softmax(x), labels))``, a pick from ``jax.nn.log_softmax``,
fancy indexing ``x[rows, labels]`` and ``jnp.take``: where the label's logit dominates its row, the
written loss cancels to 0 and its derivative in the label's logit, ``softmax_label - 1``, cancels
too (all 23 bits in float32). After
``jst.stabilize`` each is judged against mpmath (200 bits):

- value within 4 ulps: with integer logits every ``x_j - x_label`` is exact, and the loss is
  ``log1p(exp(m)·sum exp(z_j - m))``, at most n + 3 roundings of positive terms (n = 4 here: the
  relative error of a sum of positive terms is at most its number of roundings, each half an ulp);
- gradient within 4 ulps, entry by entry, by the same count (``exp(z_j)/(1 + r)`` and ``-r/(1 + r)``);
  an entry whose exact value is subnormal in float32 is only required to be within the smallest
  normal number of it: XLA:CPU flushes subnormal results to zero, so no program can return it;
- batched (2-D logits, 1-D labels), under ``vmap`` on either side of ``jst.stabilize``;
- near misses: a selection from another array, a pick from another row, an out-of-range label, and
  non-finite logits keep the program's value (NaN stays NaN, inf stays inf).
"""

from __future__ import annotations

import contextlib

import jax
import jax.numpy as jnp
import mpmath as mp
import numpy as np
import pytest

import pytest_jaxstab as jst
from pytest_jaxstab._compat import enable_x64

F32_F64 = pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
#: float64 in the slow tier for the costliest (a value and a gradient check per loss and dtype)
F32_FAST = pytest.mark.parametrize("dtype", [np.float32, pytest.param(np.float64, marks=pytest.mark.slow)],
                                   ids=["f32", "f64"])


def _x64(dtype):
    return enable_x64() if dtype == np.float64 else contextlib.nullcontext()


def _exact(row, label):
    """logsumexp(row) - row[label] and its gradient, softmax - onehot (the label's entry as minus the
    sum of the other softmax entries, which has no cancellation)."""
    with mp.workprec(200):
        v = [mp.mpf(float(a)) for a in row]
        lse = mp.log(mp.fsum(mp.exp(a) for a in v))
        s = [mp.exp(a - lse) for a in v]
        grad = list(s)
        grad[label] = -mp.fsum(a for j, a in enumerate(s) if j != label)
        return lse - v[label], grad


def _ulps(got, ref, dtype):
    """The largest error in ulps of the exact value; an exact value below the smallest normal
    number counts in units of that number (subnormal results are flushed to zero on XLA:CPU)."""
    info = np.finfo(dtype)
    worst = 0.0
    for g, r in zip(np.ravel(np.asarray(got, np.float64)), np.ravel(np.array(ref, dtype=object))):
        assert np.isfinite(g), f"{g} where the exact value is {r}"
        with mp.workprec(200):
            err = float(abs(mp.mpf(g) - r))
        if abs(float(r)) < float(info.tiny):
            worst = max(worst, err / float(info.tiny))
        else:
            worst = max(worst, err / float(np.spacing(np.array(abs(float(r)), dtype))))
    return worst


def _rules(fn, *args):
    return {a.rule for a in jst.explain(fn, *args)}


def optax_ce(logits, labels):
    """optax's softmax_cross_entropy_with_integer_labels with the label's logit picked by indexing."""
    label_logits = jnp.take_along_axis(logits, labels[..., None], axis=-1)[..., 0]
    log_normalizers = jax.nn.logsumexp(logits, axis=-1)
    return log_normalizers - label_logits


def optax_ce_take(logits, labels, axis=-1):
    """optax 0.2.8's own spelling: ``.take(0, axis=axis)`` after take_along_axis, a second library call
    (a gather of index 0) where indexing gives a squeeze."""
    label_logits = jnp.take_along_axis(logits, jnp.expand_dims(labels, axis), axis=axis).take(0, axis=axis)
    return jax.nn.logsumexp(logits, axis=axis) - label_logits


def tutorial_nll(logits, labels):
    return -jnp.log(jnp.take_along_axis(jax.nn.softmax(logits, axis=-1), labels[:, None], axis=-1))[:, 0]


def tutorial_nll_keepdims(logits, labels):  # the (n, 1) result as the tutorial leaves it
    return -jnp.log(jnp.take_along_axis(jax.nn.softmax(logits, axis=-1), labels[:, None], axis=-1))


def fancy_index(logits, labels):
    return jax.nn.logsumexp(logits, axis=-1) - logits[jnp.arange(logits.shape[0]), labels]


def fancy_softmax(logits, labels):
    return -jnp.log(jax.nn.softmax(logits, axis=-1)[jnp.arange(logits.shape[0]), labels])


def log_softmax_take(logits, labels):  # flax/haiku examples: pick from jax.nn.log_softmax
    return -jnp.take_along_axis(jax.nn.log_softmax(logits), labels[:, None], axis=-1)[:, 0]


def written_log_softmax_index(logits, labels):
    ls = logits - jnp.log(jnp.sum(jnp.exp(logits), axis=-1, keepdims=True))
    return -ls[jnp.arange(logits.shape[0]), labels]


def one_hot_product(logits, labels):  # the log_softmax rule's (value only; see the module docstring)
    k = logits.shape[-1]
    return -jnp.sum(jax.nn.one_hot(labels, k, dtype=logits.dtype) * jnp.log(jax.nn.softmax(logits)), -1)


BATCHED = [optax_ce, optax_ce_take, tutorial_nll, tutorial_nll_keepdims, fancy_index, fancy_softmax,
           log_softmax_take, written_log_softmax_index]

# each row's label logit dominates it but one (row 1: the label is not the max; row 3: a tie with
# another entry; row 4: -inf among the others); float64 rows spread further, to cancel its 53 bits
ROWS = {np.float32: [[22, 0, 1, -3], [0, 5, -3, 2], [0, 0, 30, 3], [7, 7, -1, 0], [16, -np.inf, 0, 1]],
        np.float64: [[40, 0, 1, -3], [0, 5, -3, 2], [0, 0, 60, 3], [7, 7, -1, 0], [37, -np.inf, 0, 1]]}
LABELS = [0, 0, 2, 1, 0]


@F32_FAST
@pytest.mark.parametrize("fn", BATCHED, ids=lambda f: f.__name__)
def test_batched_losses_value_and_gradient(fn, dtype):
    with _x64(dtype):
        x, y = jnp.asarray(ROWS[dtype], dtype), jnp.asarray(LABELS, jnp.int32)
        refs = [_exact(r, k) for r, k in zip(ROWS[dtype], LABELS)]
        grad = jax.grad(lambda a, f: jnp.sum(f(a, y)), argnums=0)
        # as written, the dominated rows' loss and gradient are wrong: the test would see the fix
        assert _ulps(grad(x, fn)[0], refs[0][1], dtype) > 2**10
        fixed = jst.stabilize(fn)
        got = np.reshape(fixed(x, y), (len(LABELS),))
        assert _ulps(got, [v for v, _ in refs], dtype) <= 4
        g = grad(x, fixed)
        for row, (_, ref) in zip(g, refs):
            assert _ulps(row, ref, dtype) <= 4


def test_the_issue_example_with_subnormal_gradient_entries():
    # [90, 0, -20, 3]: the loss 1.7e-38 is normal in float32, its term e^-90 is not (the sum keeps it:
    # exp(m)·sum exp(z - m)); the gradient's entry e^-90/(1 + r) is subnormal and flushed to zero
    x = jnp.asarray([[90.0, 0.0, -20.0, 3.0]] * 2, jnp.float32)
    y = jnp.asarray([0, 2], jnp.int32)
    for fn in (tutorial_nll, optax_ce):
        fixed = jst.stabilize(fn)
        g = jax.grad(lambda a, f=fixed: jnp.sum(f(a, y)))(x)
        for i, k in enumerate([0, 2]):
            val, ref = _exact([90, 0, -20, 3], k)
            assert _ulps(fixed(x, y)[i], [val], np.float32) <= 4
            assert _ulps(g[i], ref, np.float32) <= 4


@F32_F64
@pytest.mark.parametrize("fn", [optax_ce, tutorial_nll], ids=lambda f: f.__name__)
def test_large_logits_that_nearly_tie(fn, dtype):
    # the label one ulp below (row 0) or above (row 1) the other large logits: the loss is near
    # log 4, and a rounded logsumexp near 6e3 minus the label's logit would lose 10 bits of it
    with _x64(dtype):
        big = np.asarray(5958.54617045, dtype)
        lo, hi = np.nextafter(big, dtype(0)), np.nextafter(big, dtype(1e4))
        rows = [[lo, big, big, big, 27.4], [hi, big, big, big, 27.4]]
        x, y = jnp.asarray(rows, dtype), jnp.asarray([0, 0], jnp.int32)
        refs = [_exact(r, 0) for r in rows]
        fixed = jst.stabilize(fn)
        _assert_value_and_gradient(fixed, x, y, refs, dtype)


def _assert_value_and_gradient(fixed, x, y, refs, dtype) -> None:
    """``fixed(x, y)`` row by row within 4 ulps of ``refs`` (value, gradient in x), the bound above."""
    assert _ulps(fixed(x, y), [v for v, _ in refs], dtype) <= 4
    g = jax.grad(lambda a: jnp.sum(fixed(a, y)))(x)
    for row, (_, ref) in zip(g, refs):
        assert _ulps(row, ref, dtype) <= 4

@F32_F64
def test_vmap_on_either_side_of_stabilize(dtype):
    def per_example(logits, label):  # one row, a scalar label: a gather of one element
        return jax.nn.logsumexp(logits) - jnp.take_along_axis(logits, label[None], axis=-1)[0]

    with _x64(dtype):
        x, y = jnp.asarray(ROWS[dtype], dtype), jnp.asarray(LABELS, jnp.int32)
        refs = [_exact(r, k) for r, k in zip(ROWS[dtype], LABELS)]
        for fn in (jax.vmap(jst.stabilize(per_example)), jst.stabilize(jax.vmap(per_example))):
            assert _ulps(fn(x, y), [v for v, _ in refs], dtype) <= 4
            g = jax.grad(lambda a, f=fn: jnp.sum(f(a, y)))(x)
            for row, (_, ref) in zip(g, refs):
                assert _ulps(row, ref, dtype) <= 4


@F32_F64
@pytest.mark.parametrize("spelling", ["take", "index", "log_softmax_index"])
def test_one_row_with_a_computed_label(spelling, dtype):
    fns = {"take": lambda a, k: jax.nn.logsumexp(a) - jnp.take(a, k),
           "index": lambda a, k: jax.nn.logsumexp(a) - a[k],
           "log_softmax_index": lambda a, k: -jnp.log(jax.nn.softmax(a)[k])}
    fn = fns[spelling]
    with _x64(dtype):
        row = ROWS[dtype][0]
        x, k = jnp.asarray(row, dtype), jnp.asarray(0, jnp.int32)
        fixed = jst.stabilize(fn)
        val, ref = _exact(row, 0)
        assert _ulps(fixed(x, k), [val], dtype) <= 4
        assert _ulps(jax.grad(fixed)(x, k), ref, dtype) <= 4


def one_hot_log_softmax(logits, labels):
    return -jnp.sum(jax.nn.one_hot(labels, logits.shape[-1], dtype=logits.dtype)
                    * jax.nn.log_softmax(logits), axis=-1)


def lse_minus_one_hot(logits, labels):  # jaxopt's multiclass_logistic_loss before google/jaxopt#245
    one_hot = jax.nn.one_hot(labels, logits.shape[-1], dtype=logits.dtype)
    return jax.nn.logsumexp(logits, axis=-1) - jnp.sum(logits * one_hot, axis=-1)


def one_hot_times_logits(logits, labels):  # the product the other way round, scipy's name
    one_hot = jax.nn.one_hot(labels, logits.shape[-1], dtype=logits.dtype)
    return jax.scipy.special.logsumexp(logits, axis=-1) - jnp.sum(one_hot * logits, axis=-1)


#: the rule that reads each one-hot spelling: a product with a log-softmax, or the logits' weighted sum
#: subtracted from their logsumexp
ONE_HOT_RULE = {one_hot_product: "one_hot_nll", one_hot_log_softmax: "one_hot_nll",
                lse_minus_one_hot: "lse_minus_weighted", one_hot_times_logits: "lse_minus_weighted"}


@F32_F64
@pytest.mark.parametrize("fn", list(ONE_HOT_RULE), ids=lambda f: f.__name__)
def test_the_one_hot_spellings(fn, dtype):
    # the rows above (a dominant label, a label below the max, a tie, a -inf logit)
    with _x64(dtype):
        x, y = jnp.asarray(ROWS[dtype], dtype), jnp.asarray(LABELS, jnp.int32)
        refs = [_exact(r, k) for r, k in zip(ROWS[dtype], LABELS)]
        assert ONE_HOT_RULE[fn] in _rules(fn, x, y)
        fixed = jst.stabilize(fn)
        # the -inf row is NaN as written (0 * log 0, 0 * -inf); its loss is finite and exact after
        _assert_value_and_gradient(fixed, x, y, refs, dtype)


@F32_F64
def test_one_hot_targets_keep_their_derivative(dtype):
    # d/dt of -sum(t·log_softmax(x)) is -log_softmax(x): the label form must not lose it
    def loss(t, x):
        return -jnp.sum(t * jax.nn.log_softmax(x), axis=-1)

    with _x64(dtype):
        rows = ROWS[dtype][:4]
        x = jnp.asarray(rows, dtype)
        t = jax.nn.one_hot(jnp.asarray(LABELS[:4]), 4, dtype=dtype)
        assert "one_hot_nll" in _rules(loss, t, x)
        g = jax.grad(lambda a: jnp.sum(jst.stabilize(loss)(a, x)))(t)
        with mp.workprec(200):
            want = [[mp.log(mp.fsum(mp.exp(mp.mpf(float(b))) for b in r)) - mp.mpf(float(a)) for a in r]
                    for r in rows]
        for row, ref in zip(g, want):
            assert _ulps(row, ref, dtype) <= 4


def test_soft_targets_and_entropies_are_not_labels():
    def smoothed(t, x):  # label smoothing: not one-hot, the log-softmax sum as before
        return -jnp.sum(t * jax.nn.log_softmax(x), axis=-1)

    def entropy(x):
        p = jax.nn.softmax(x)
        return -jnp.sum(p * jnp.log(p), axis=-1)

    x = jnp.asarray([[22.0, 0, 1, -3], [1, 2, 3, 4]], jnp.float32)
    t = jnp.asarray([[0.925, 0.025, 0.025, 0.025], [0.025, 0.025, 0.025, 0.925]], jnp.float32)
    got = jst.stabilize(smoothed)(t, x)
    with mp.workprec(200):
        ref = [-mp.fsum(mp.mpf(float(a)) * (mp.mpf(float(v)) - mp.log(mp.fsum(mp.exp(mp.mpf(float(b)))
                                                                               for b in r)))
                        for a, v in zip(tr, r)) for tr, r in zip(np.asarray(t), np.asarray(x))]
    assert _ulps(got, ref, np.float32) <= 4
    assert "one_hot_nll" not in _rules(entropy, x) and "sum_p_log_p" in _rules(entropy, x)


# -------------------------------------------------- logsumexp minus a one-hot weighted sum
# (its spellings on the rows above: test_the_one_hot_spellings)
def test_a_one_hot_sum_under_a_large_shared_offset():
    # jaxopt#243: [1e9, 1e9] with label 0 is log 2 (written: 0); logits sharing an offset of 1e4 in
    # float32 (an ulp of 2^-10) lose the loss's low bits to the rounded logsumexp, and its derivative
    rng = np.random.default_rng(243)
    rows = np.concatenate([np.full((1, 4), 1e9), 1e4 + 2.0 * rng.normal(size=(7, 4))]).astype(np.float32)
    labels = np.concatenate([[0], np.argmax(rows[1:], axis=-1)]).astype(np.int32)
    refs = [_exact(r, k) for r, k in zip(rows, labels)]
    x, y = jnp.asarray(rows), jnp.asarray(labels)
    assert float(lse_minus_one_hot(x, y)[0]) == 0.0  # as reported
    _assert_value_and_gradient(jst.stabilize(lse_minus_one_hot), x, y, refs, np.float32)


def test_one_hot_weights_keep_their_derivative_and_soft_ones_their_sum():
    def loss(t, x):
        return jax.nn.logsumexp(x, axis=-1) - jnp.sum(x * t, axis=-1)

    rows = np.asarray(ROWS[np.float32][:4], np.float32)
    t = jax.nn.one_hot(jnp.asarray(LABELS[:4]), 4, dtype=jnp.float32)
    g = jax.grad(lambda a: jnp.sum(jst.stabilize(loss)(a, jnp.asarray(rows))))(t)
    assert np.array_equal(np.asarray(g), -rows)  # d/dt = -x, exactly
    soft = jnp.asarray([[0.7, 0.1, 0.1, 0.1], [0.25, 0.25, 0.25, 0.25]], jnp.float32)
    x = jnp.asarray(rows[:2])
    got = jst.stabilize(loss)(soft, x)
    with mp.workprec(200):
        ref = [mp.log(mp.fsum(mp.exp(mp.mpf(float(b))) for b in r))
               - mp.fsum(mp.mpf(float(a)) * mp.mpf(float(b)) for a, b in zip(w, r))
               for w, r in zip(np.asarray(soft), rows[:2])]
    # not labels: the logsumexp (a few roundings) minus the weighted sum (4 products, 3 additions),
    # of a loss no smaller than a tenth of its terms here: well within 16 ulps of the result
    assert _ulps(got, ref, np.float32) <= 16


# ------------------------------------------------------------------------------------ near misses
def test_a_selection_from_another_array_is_not_the_label_form():
    def other(logits, targets, labels):
        return jax.nn.logsumexp(logits, -1) - jnp.take_along_axis(targets, labels[:, None], -1)[:, 0]

    x = jnp.asarray([[22.0, 0, 1, -3], [1, 2, 3, 4]], jnp.float32)
    t = jnp.asarray([[21.0, 0, 0, 0], [0, 0, 0, -4.5]], jnp.float32)  # no cancellation: 4 ulps hold
    y = jnp.asarray([0, 3], jnp.int32)
    assert "lse_minus_selected" not in _rules(other, x, t, y)
    got = jst.stabilize(other)(x, t, y)
    with mp.workprec(200):
        refs = [_exact(r, k)[0] + mp.mpf(float(r[k])) - mp.mpf(float(tr[k]))
                for r, tr, k in zip(np.asarray(x), np.asarray(t), [0, 3])]
    assert _ulps(got, refs, np.float32) <= 4


def test_a_pick_from_another_row_keeps_the_programs_value():
    # rows reversed: each loss subtracts another row's logit; the label form must not be used
    def crossed(logits, labels):
        n = logits.shape[0]
        return jax.nn.logsumexp(logits, -1) - logits[n - 1 - jnp.arange(n), labels]

    x = jnp.asarray([[22.0, 0, 1, -3], [1, 2, 3, 4]], jnp.float32)
    y = jnp.asarray([0, 0], jnp.int32)
    assert "lse_minus_selected" in _rules(crossed, x, y)
    got = jst.stabilize(crossed)(x, y)
    g = jax.grad(lambda a: jnp.sum(jst.stabilize(crossed)(a, y)))(x)
    xs = np.asarray(x)
    with mp.workprec(200):
        refs = [_exact(xs[0], 0)[0] + mp.mpf(float(xs[0, 0])) - mp.mpf(float(xs[1, 0])),
                _exact(xs[1], 0)[0] + mp.mpf(float(xs[1, 0])) - mp.mpf(float(xs[0, 0]))]
        soft = [[mp.exp(mp.mpf(float(a))) / mp.fsum(mp.exp(mp.mpf(float(b))) for b in r) for a in r]
                for r in xs]
    assert _ulps(got, refs, np.float32) <= 4
    # d/dx[0, 0] = softmax - 1 through the other row's loss: a cancellation this program keeps (no
    # label form applies); the other entries are each one softmax, accurate
    want = [[s - (1 if j == 0 else 0) for j, s in enumerate(row)] for row in soft]
    assert _ulps(np.ravel(g)[1:], np.ravel(np.array(want, dtype=object))[1:], np.float32) <= 4


def test_a_masked_log_softmax_is_not_taken_for_jax_nns():
    # log_softmax(x, where=mask) has another body: the selection of it is left to the other rules
    def masked(logits, labels):
        ls = jax.nn.log_softmax(logits, where=logits > -100)
        return -jnp.take_along_axis(ls, labels[:, None], axis=-1)[:, 0]

    x = jnp.asarray([[22.0, 0, 1, -3], [1, 2, 3, 4]], jnp.float32)
    y = jnp.asarray([0, 3], jnp.int32)
    assert "select_log_softmax" not in _rules(masked, x, y)
    assert "select_log_softmax" in _rules(log_softmax_take, x, y)
    np.testing.assert_array_equal(jst.stabilize(masked)(x, y), masked(x, y))


def test_an_out_of_range_label_stays_nan():
    x = jnp.asarray([[22.0, 0, 1, -3], [1, 2, 3, 4]], jnp.float32)
    y = jnp.asarray([7, 1], jnp.int32)
    for fn in (optax_ce, tutorial_nll, log_softmax_take):
        written, fixed = fn(x, y), jst.stabilize(fn)(x, y)
        assert np.isnan(written[0]) and np.isnan(fixed[0])
        assert _ulps(fixed[1:], [_exact([1, 2, 3, 4], 1)[0]], np.float32) <= 4


def test_non_finite_logits_keep_the_programs_value():
    x = jnp.asarray([[np.inf, 0, 1, -3], [np.nan, 0, 1, 2], [5, np.inf, 0, 1], [-np.inf] * 4], jnp.float32)
    y = jnp.asarray([0, 1, 0, 0], jnp.int32)
    written, fixed = np.asarray(optax_ce(x, y)), np.asarray(jst.stabilize(optax_ce)(x, y))
    np.testing.assert_array_equal(np.isnan(fixed), np.isnan(written))
    np.testing.assert_array_equal(fixed[~np.isnan(written)], written[~np.isnan(written)])
    assert np.isnan(written).any() and np.isinf(written).any()  # the rows test both kinds


# ------------------------------------------------------------------- 1 - softmax: the other classes' mass
def poly1_loss(logits, onehot, epsilon=2.0):  # optax's poly_loss_cross_entropy, as written there
    one_minus_pt = jnp.sum(onehot * (1 - jax.nn.softmax(logits, axis=-1)), axis=-1)
    ce = -jnp.sum(onehot * jax.nn.log_softmax(logits, axis=-1), axis=-1)
    return ce + epsilon * one_minus_pt


def focal_term(logits, onehot):  # a softmax focal loss's (1 - p_t)^2, written from probabilities
    p = jnp.exp(logits) / jnp.sum(jnp.exp(logits), axis=-1, keepdims=True)
    return jnp.sum(onehot * (1.0 - p) ** 2, axis=-1)


def _others(row, label):
    """1 - softmax(row)[label] = sum of the other classes' probabilities (no cancellation)."""
    with mp.workprec(200):
        v = [mp.mpf(float(a)) for a in row]
        lse = mp.log(mp.fsum(mp.exp(a) for a in v))
        return mp.fsum(mp.exp(a - lse) for j, a in enumerate(v) if j != label), lse - v[label]


@pytest.mark.parametrize("fn", [poly1_loss, focal_term], ids=lambda f: f.__name__)
def test_one_minus_a_dominant_softmax_keeps_the_other_classes_mass(fn):
    # the label's logit dominates each row by 12..30: softmax rounds to 1 in float32 and 1 - p to 0,
    # where the other classes' mass is 1e-13..1e-6; rewritten, -expm1(log_softmax) keeps it to a few
    # roundings (expm1, the log1p of the rest, the sums): 8 ulps
    rows = np.array([[30, 0, 1, -3], [12, 0, -1, 2], [0, 0, 25, 3]], np.float32)
    labels = [0, 0, 2]
    x, onehot = jnp.asarray(rows), jax.nn.one_hot(jnp.asarray(labels), 4)
    refs = []
    for r, k in zip(rows, labels):
        rest, nll = _others(r, k)
        refs.append(nll + 2 * rest if fn is poly1_loss else rest**2)
    assert _ulps(fn(x, onehot), refs, np.float32) > 2**10  # as written: 1 - p rounds to 0
    assert "one_minus_softmax" in _rules(fn, x, onehot)
    assert _ulps(jst.stabilize(fn)(x, onehot), refs, np.float32) <= 8


def test_the_complement_of_a_balanced_softmax_stays_accurate():
    # ordinary logits, where 1 - softmax does not cancel: the form is as accurate as the program's own
    # few roundings (4 ulps: the log-softmax, expm1 and the sum inside)
    rows = np.random.default_rng(3).normal(size=(4, 8)).astype(np.float32)
    refs = [_others(r, k)[0] for r in rows for k in range(8)]
    got = jst.stabilize(lambda v: 1 - jax.nn.softmax(v))(jnp.asarray(rows))
    assert _ulps(got, refs, np.float32) <= 4
