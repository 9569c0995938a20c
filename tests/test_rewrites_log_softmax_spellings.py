"""``x - logsumexp(x)`` in the spellings JAX lowers it to, as one log-softmax (issue 47).

Normalising log-weights or scores as ``x - logsumexp(x)`` adds the max's log-sum before subtracting:
with a large common offset (log-weights around -1e8, scores around 1e6 in float32) ``m + log(n)`` is
absorbed into ``m`` and the normalised values come out 0, or a few ulps of the offset off. The
``log_softmax`` rule reads ``x - logsumexp(x)`` over the same axes (jax 0.12.1's ``logsumexp`` call,
its body inlined by jax 0.10 and 0.12.0 with the max under ``stop_gradient``, a user's own
``m + log(sum(exp(x - m)))`` with ``m`` the max or a scalar) as ``(x - m) - log1p(rest)``. Judged in
float32 against mpmath (50 digits):

- within 2 ulps: ``x - m`` is exact or rounded once, the ``log1p`` of the other terms is within an
  ulp, and the difference of the two rounds once (the reference rounds too: half an ulp);
- as written the same inputs are off by far more (the offset's log-sum absorbed);
- not rewritten where the shift is not one number per reduced slice (an element-wise shift, or a max
  over other axes than the sum's): the identity does not hold there.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import mpmath as mp
import numpy as np
import pytest
from jax.scipy.special import logsumexp

import pytest_jaxstab as jst

mp.mp.dps = 50
F32 = np.float32


def _ulps(got, refs):
    worst = 0.0
    for g, r in zip(np.asarray(got, np.float64).ravel(), refs):
        if not np.isfinite(g):
            return np.inf
        scale = max(abs(float(r)), float(np.finfo(F32).tiny))
        worst = max(worst, float(abs(mp.mpf(g) - r)) / float(np.spacing(F32(scale))))
    return worst


def _exact(x, axis):
    """x - logsumexp(x) over ``axis`` (None: all), flattened in C order."""
    x = np.asarray(x, np.float64)
    moved = np.moveaxis(x, axis, -1) if axis is not None else x.reshape(1, -1)
    out = np.empty(moved.shape, dtype=object)
    for idx in np.ndindex(moved.shape[:-1]):
        row = [mp.mpf(float(v)) for v in moved[idx]]
        lse = mp.log(mp.fsum(mp.exp(v) for v in row))
        out[idx] = [v - lse for v in row]
    out = np.moveaxis(out, -1, axis) if axis is not None else out.reshape(x.shape)
    return list(out.ravel())


def _scores_over_candidates(s):
    """Log-probabilities of candidates (rows of ``s``) for each query (columns)."""
    return s - logsumexp(s, axis=0, keepdims=True)


def _particle_weights(logw):
    return logw - jax.nn.logsumexp(logw)


def _expanded_rows(s):
    return s - jax.nn.logsumexp(s, axis=1)[:, None]


def _by_hand(s):
    top = jnp.max(s, axis=-1, keepdims=True)
    return s - (top + jnp.log(jnp.sum(jnp.exp(s - top), axis=-1, keepdims=True)))


def _by_hand_stopped(s):
    top = jax.lax.stop_gradient(jnp.max(s, axis=-1, keepdims=True))
    return s - (jnp.log(jnp.sum(jnp.exp(s - top), axis=-1, keepdims=True)) + top)


OFFSET = np.asarray([[1e6, 1e6 + 0.0625, 1e6 - 0.125, 1e6],
                     [-3e7, -3e7, -3e7 - 4.0, -3e7 + 2.0]], F32)

CASES = [
    (_scores_over_candidates, OFFSET.T, 0),
    (_particle_weights, OFFSET[0], None),
    (_expanded_rows, OFFSET, 1),
    (_by_hand, OFFSET, 1),
    (_by_hand_stopped, OFFSET, 1),
]


@pytest.mark.parametrize(("fn", "x", "axis"), CASES, ids=[c[0].__name__ for c in CASES])
def test_x_minus_its_logsumexp_is_a_log_softmax(fn, x, axis):
    x = jnp.asarray(x)
    assert "log_softmax" in jst.explain(fn, x).rules
    refs = _exact(x, axis)
    assert _ulps(jst.stabilize(fn)(x), refs) <= 2.0
    assert _ulps(fn(x), refs) > 2.0 ** 8  # written: the offset absorbs log(n)


def test_the_gradient_is_the_log_softmax_one():
    x = jnp.asarray(OFFSET[1])
    cot = jnp.asarray([1.0, 0.0, 0.0, 0.0], F32)
    g = jax.grad(lambda v: jnp.vdot(jst.stabilize(_particle_weights)(v), cot))(x)
    row = [mp.mpf(float(v)) for v in np.asarray(x)]
    total = mp.fsum(mp.exp(v - row[3]) for v in row)
    soft = [mp.exp(v - row[3]) / total for v in row]
    assert _ulps(g, [(1 if i == 0 else 0) - p for i, p in enumerate(soft)]) <= 4.0


@pytest.mark.parametrize("fn", [
    # a shift that differs along the summed axis: not the identity
    lambda s, m: s - (jnp.log(jnp.sum(jnp.exp(s - m), axis=-1, keepdims=True)) + m),
    # a max over another axis than the sum's
    lambda s, m: s - (jnp.max(s, axis=0, keepdims=True)
                      + jnp.log(jnp.sum(jnp.exp(s - jnp.max(s, axis=0, keepdims=True)), axis=-1,
                                        keepdims=True))),
], ids=["elementwise_shift", "other_axes"])
def test_a_shift_that_is_not_one_number_per_slice_is_left_alone(fn):
    s = jnp.asarray(OFFSET)
    assert "log_softmax" not in jst.explain(fn, s, s * 0.5).rules
