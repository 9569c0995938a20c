"""Library functions however a JAX release lowers them (issue 45): ``_compat.library_function`` and the
rules that read ``jax.nn.logsumexp``, ``softmax`` and ``log_softmax`` as calls or as inlined equations.

jax 0.12.1 calls ``_logsumexp_impl`` and ``_softmax`` (``custom_jvp``); 0.10 and 0.12.0 inline them.
``jax_softmax_custom_jvp`` chooses the softmax's lowering on every supported release, so both spellings
of each softmax loss are run here on whatever JAX is installed, against mpmath (200 bits): the value
within 4 ulps (the rules' forms: a few roundings of positive terms, as in test_rewrites_gather.py) and
the same rules firing. Near misses: a call of another function with the same name, a masked call
(``where=``, two operands), a weighted logsumexp (``b=``) are never taken for the library function.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import mpmath as mp
import numpy as np
import pytest

import pytest_jaxstab as jst
from pytest_jaxstab import _compat

ROWS = np.asarray([[22, 0, 1, -3], [0, 5, -3, 2], [0, 0, 30, 3], [7, 7, -1, 0]], np.float32)
LABELS = np.asarray([0, 0, 2, 1], np.int32)


@pytest.fixture(params=[True, False], ids=["softmax_call", "softmax_inlined"])
def softmax_lowering(request):
    """jax.nn.softmax as a custom_jvp call (0.12.1's default) or inlined (0.10, 0.12.0's default)."""
    before = jax.config.jax_softmax_custom_jvp
    jax.config.update("jax_softmax_custom_jvp", request.param)
    try:
        yield request.param
    finally:
        jax.config.update("jax_softmax_custom_jvp", before)


def _library(fn, *args):
    closed = jax.make_jaxpr(fn)(*args)
    return {_compat.library_function(e) for _, e in _compat.walk(closed)} - {None}


def _rules(fn, *args):
    return {a.rule for a in jst.explain(fn, *args)}


def _lse(row):
    return mp.log(mp.fsum(mp.exp(mp.mpf(float(v))) for v in row))


def _ulps(got, exact):
    got = np.ravel(np.asarray(got, np.float64))
    worst = 0.0
    for g, e in zip(got, exact):
        assert np.isfinite(g), (g, e)
        ulp = float(np.spacing(np.float32(max(abs(float(e)), float(np.finfo(np.float32).tiny)))))
        worst = max(worst, float(abs(mp.mpf(g) - e)) / ulp)
    return worst


# --------------------------------------------------------------------------- what a call computes
def test_library_function_names_jax_calls_by_the_function_they_wrap(softmax_lowering):
    x = jnp.ones((2, 3), jnp.float32)
    assert _library(jax.nn.log_softmax, x) == {"log_softmax"}
    assert ("softmax" in _library(jax.nn.softmax, x)) == softmax_lowering
    # logsumexp: a call on this JAX or equations, never anything else
    assert _library(jax.nn.logsumexp, x) <= {"logsumexp"}


def test_a_users_function_of_the_same_name_is_not_jaxs():
    @functools.partial(jax.custom_jvp, nondiff_argnums=(1,))
    def _softmax(x, axis=-1):  # the same name as JAX's, defined here
        e = jnp.exp(x - jnp.max(x, axis, keepdims=True))
        return e / jnp.sum(e, axis, keepdims=True)

    @_softmax.defjvp
    def _softmax_jvp(axis, primals, tangents):
        return _softmax(primals[0], axis), tangents[0]  # deliberately not the softmax's derivative

    @jax.jit
    def log_softmax(x):  # a user's jit of the library's name
        return x - jnp.log(jnp.sum(jnp.exp(x)))

    x, k = jnp.asarray(ROWS[0]), jnp.asarray(0, jnp.int32)
    assert _library(_softmax, x) == set() and _library(log_softmax, x) == set()
    assert "log_select_softmax" not in _rules(lambda a, i: -jnp.log(_softmax(a)[i]), x, k)
    assert "select_log_softmax" not in _rules(lambda a, i: -log_softmax(a)[i], x, k)


# ---------------------------------------------------------------- both lowerings, the same result
def _tutorial(x, y):
    return -jnp.log(jnp.take_along_axis(jax.nn.softmax(x, axis=-1), y[:, None], axis=-1))[:, 0]


def _one_hot(x, y):
    return -jnp.sum(jax.nn.one_hot(y, x.shape[-1], dtype=x.dtype) * jnp.log(jax.nn.softmax(x)), -1)


@pytest.mark.parametrize(("fn", "rule"), [(_tutorial, "log_select_softmax"), (_one_hot, "one_hot_nll")],
                         ids=["take_along_axis", "one_hot"])
def test_softmax_losses_whichever_the_lowering(softmax_lowering, fn, rule):
    x, y = jnp.asarray(ROWS), jnp.asarray(LABELS)
    assert rule in _rules(fn, x, y)
    with mp.workprec(200):
        exact = [_lse(r) - mp.mpf(float(r[k])) for r, k in zip(ROWS, LABELS)]
        assert _ulps(jst.stabilize(fn)(x, y), exact) <= 4


def test_log_of_softmax_and_entropy_whichever_the_lowering(softmax_lowering):
    x = jnp.asarray(ROWS)
    log_p = lambda a: jnp.log(jax.nn.softmax(a))
    entropy = lambda a: (lambda p: -jnp.sum(p * jnp.log(p), -1))(jax.nn.softmax(a))
    assert "log_softmax" in _rules(log_p, x) and "sum_p_log_p" in _rules(entropy, x)
    with mp.workprec(200):
        exact = [mp.mpf(float(v)) - _lse(r) for r in ROWS for v in r]
        assert _ulps(jst.stabilize(log_p)(x), exact) <= 4
        h = []
        for r in ROWS:
            logs = [mp.mpf(float(v)) - _lse(r) for v in r]
            h.append(-mp.fsum(mp.exp(v) * v for v in logs))
        # a sum of n = 4 terms p·log p, each within a few roundings: 8 ulps of the entropy
        assert _ulps(jst.stabilize(entropy)(x), h) <= 8


# ---------------------------------------------------------------------------------- logsumexp
@pytest.mark.parametrize("keepdims", [False, True])
def test_logsumexp_is_accurate_in_value_and_under_differentiation(keepdims):
    # [1e-20, -20 x 15]: jax.nn.logsumexp loses the small terms (~28 bits); the rule's form keeps
    # them, also as the value of value_and_grad (a rewrite inside the call's body would not: JAX's
    # rule recomputes its own primal there)
    x = jnp.asarray([[1e-20] + [-20.0] * 15, [3.0, 1.0, -2.0, 0.5] * 4], jnp.float32)
    f = lambda a: jax.nn.logsumexp(a, axis=-1, keepdims=keepdims)
    assert "logsumexp" in _rules(f, x)
    fixed = jst.stabilize(f)
    value, grad = jax.value_and_grad(lambda a: jnp.sum(fixed(a)))(x)
    with mp.workprec(200):
        rows = [_lse(r) for r in np.asarray(x)]
        assert np.shape(fixed(x)) == np.shape(f(x))
        assert _ulps(fixed(x), rows) <= 1
        assert _ulps(value, [mp.fsum(rows)]) <= 2
        soft = [mp.exp(mp.mpf(float(v)) - lse) for r, lse in zip(np.asarray(x), rows) for v in r]
        assert _ulps(grad, soft) <= 4


def test_a_weighted_or_masked_call_is_not_the_function():
    x = jnp.asarray(ROWS)
    w = jnp.asarray(np.abs(ROWS) + 1)
    for fn in (lambda a: jax.nn.logsumexp(a, axis=-1, b=w), lambda a: jax.nn.logsumexp(a, -1, where=a > -2),
               lambda a: jnp.log(jax.nn.softmax(a, where=a > -2))):
        fired = _rules(fn, x)
        assert not fired & {"logsumexp", "log_softmax"}, fired


# --------------------------------------------------------------------- the softmax form's derivative
def test_the_softmax_forms_gradient_of_its_sum_is_exactly_zero():
    # d sum(softmax(x))/dx = 0: its derivative reads the cotangent relative to the row's maximal
    # entry's, so a constant cotangent gives exactly 0 (JAX's div rule of 0.12.1 left an ulp of
    # 1 - sum(y) in the autodiff'd form, 25 bits against the exact 0)
    x = jnp.asarray(np.random.default_rng(0).normal(0, 8, (16, 8)), jnp.float32)
    written = lambda a: jnp.exp(a) / jnp.sum(jnp.exp(a), -1, keepdims=True)
    g = jax.grad(lambda a: jnp.sum(jst.stabilize(written)(a)))(x)
    assert np.all(np.asarray(g) == 0)
