"""Derivative-only rules (issue 39): ``logistic``, ``tanh`` and soft sign keep their value bit for bit
and get an accurate derivative (``catalogue/_stability_gradients.py``; the walk that found them:
``benchmarks/bench_library_gradients.py``).

References are mpmath's (60 digits), from the textbook derivatives written out here. Bounds:

- values: bit-identical to JAX's (the same primitive computes them), on a spread of bit patterns with
  the specials, with and without ``jit``;
- first derivatives within 4 ulps of mpmath: ``s(x)·s(-x)`` is two logistic evaluations (each within
  an ulp on XLA) and one rounding; ``4e/(1 + e)²`` is one ``exp`` (an ulp, its error not amplified:
  ``d log f / d log e = (1 - e)/(1 + e) <= 1``) and three roundings; ``r·r``, ``r = 1/(|x| + 1)``,
  is three roundings. Each asserted where JAX's own derivative is 0 (so the test cannot pass as
  written);
- second derivatives (JAX differentiates the forms' rules) within 16 ulps at moderate and large |x|:
  a product of two or three rounded factors, each with JAX's own derivative of ``logistic``/``exp``.

A derivative-only rewrite is listed by ``jst.explain`` ("derivative only") and in a check's gradient
result, not in the check of the value it leaves unchanged.

jax 0.12.1 writes ``jax.nn.soft_sign`` as a ``custom_jvp`` whose rule is the exact ``1/(|x| + 1)²``
(``EXACT_IN_JAX``, asked of the running JAX): there the same bounds are asserted of JAX's own
derivative, which no rule touches, and the written quotient still gets the rule.
"""

from __future__ import annotations

import contextlib

import jax
import jax.numpy as jnp
import jax.scipy.special as sp
import jax.scipy.stats as st
import mpmath as mp
import numpy as np
import pytest

import pytest_jaxstab as jst
from pytest_jaxstab import _compat
from pytest_jaxstab._compat import enable_x64
from pytest_jaxstab.rewrites.forms import _core as forms

DTYPES = pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])


@pytest.fixture(autouse=True)
def _precision():
    with mp.workdps(60):
        yield


def _x64(dtype):
    return enable_x64() if dtype == np.float64 else contextlib.nullcontext()


def _sig(x):
    return 1 / (1 + mp.exp(-x))


def _dsig(x):
    return _sig(x) * _sig(-x)


def _sech2(x):
    return 1 / mp.cosh(x) ** 2


# name -> (function, its rule, its exact derivative, its exact second derivative)
CASES = {
    "sigmoid": (jax.nn.sigmoid, "logistic_derivative", _dsig,
                lambda x: _dsig(x) * (_sig(-x) - _sig(x))),
    "expit": (sp.expit, "logistic_derivative", _dsig, None),
    "logistic_cdf": (st.logistic.cdf, "logistic_derivative", _dsig, None),
    "logistic_sf": (st.logistic.sf, "logistic_derivative", lambda x: -_dsig(x), None),
    "tanh": (jnp.tanh, "tanh_derivative", _sech2, lambda x: -2 * mp.tanh(x) * _sech2(x)),
    "nn_tanh": (jax.nn.tanh, "tanh_derivative", _sech2, None),
    "soft_sign": (jax.nn.soft_sign, "soft_sign_derivative", lambda x: 1 / (1 + abs(x)) ** 2,
                  lambda x: -2 * mp.sign(x) / (1 + abs(x)) ** 3),
    "soft_sign_written": (lambda x: x / (1 + jnp.abs(x)), "soft_sign_derivative",
                          lambda x: 1 / (1 + abs(x)) ** 2, None),
}
# where JAX's derivative is 0 or cancels and the exact one is a normal float (the logistic's at
# x > 0 only: below, s is small and 1 - s exact)
LARGE = {
    np.float32: {"logistic_derivative": [20.0, 50.0, 80.0],
                 "tanh_derivative": [10.0, 20.0, 40.0, -10.0, -40.0],
                 "soft_sign_derivative": [1e8, 1e15, -1e18]},
    np.float64: {"logistic_derivative": [40.0, 100.0, 500.0, 700.0],
                 "tanh_derivative": [20.0, 100.0, 300.0, -20.0, -300.0],
                 "soft_sign_derivative": [1e16, 1e50, -1e150]},
}
MODERATE = [0.0, 1e-30, 1e-3, -0.5, 1.0, 3.0, -7.0]
# jax 0.12.1's soft_sign is a custom_jvp (``_soft_sign_and_scale``) whose rule is the exact
# 1/(|x| + 1)²: nothing to fix, and no rule rewrites it (0.10 and 0.12.0 differentiate the quotient,
# which the rule fixes). Asked of the running JAX, by the function its call wraps.
EXACT_IN_JAX = {"soft_sign"} if any(
    _compat.library_function(e) == "soft_sign_and_scale"
    for _, e in _compat.walk(jax.make_jaxpr(jax.nn.soft_sign)(jnp.ones(3, np.float32)))) else set()


def _rule_for(name):
    """The rule expected to rewrite CASES[name] on this JAX (None: JAX's own derivative is exact)."""
    return None if name in EXACT_IN_JAX else CASES[name][1]


def _ulps(got, exact, dtype):
    got = np.atleast_1d(np.asarray(got, np.float64))
    worst = 0.0
    for g, r in zip(got, exact):
        assert np.isfinite(g), f"{g} where the exact value is {mp.nstr(r, 8)}"
        ulp = float(np.spacing(np.array(max(abs(float(r)), float(np.finfo(dtype).tiny)), dtype)))
        worst = max(worst, float(abs(mp.mpf(float(g)) - r)) / ulp)
    return worst


def _bit_patterns(dtype):
    """Every binade's edges and a random spread of bit patterns, with ±0, ±inf, NaN, subnormals."""
    rng = np.random.default_rng(0)
    info = np.finfo(dtype)
    uint = np.uint32 if dtype == np.float32 else np.uint64
    top = 0x7F800000 if dtype == np.float32 else 0x7FF0000000000000
    bits = rng.integers(0, top, 2000, dtype=np.int64 if dtype == np.float32 else np.uint64)
    x = np.asarray(bits, uint).view(dtype)
    special = np.asarray([0.0, info.tiny, info.smallest_subnormal, info.max, np.inf, np.nan, 1.0,
                          17.0, 9.0, 88.0, 710.0], dtype)
    x = np.concatenate([x, special])
    return np.concatenate([x, -x])


def _same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    view = np.uint32 if a.dtype == np.float32 else np.uint64
    return np.array_equal(a.view(view), b.view(view))


@DTYPES
@pytest.mark.parametrize("name", list(CASES))
def test_the_value_is_bit_identical(name, dtype):
    fn, rule = CASES[name][0], _rule_for(name)
    with _x64(dtype):
        x = jnp.asarray(_bit_patterns(dtype))
        fired = {a.rule for a in jst.explain(fn, x)}
        assert rule in fired if rule is not None else fired == set()
        fixed = jst.stabilize(fn)
        assert _same_bits(fixed(x), fn(x))
        assert _same_bits(jax.jit(fixed)(x), jax.jit(fn)(x))


@DTYPES
@pytest.mark.parametrize("name", list(CASES))
def test_the_derivative_is_accurate_where_jax_loses_it(name, dtype):
    fn, rule, slope, _ = CASES[name]
    xs = LARGE[dtype][rule]
    if name == "logistic_sf":  # sf(x) = s(-x): its derivative is lost at the other end
        xs = [-v for v in xs]
    with _x64(dtype):
        x = jnp.asarray(xs, dtype)
        exact = [slope(mp.mpf(v)) for v in xs]
        as_jax = np.asarray(jax.vmap(jax.grad(fn))(x), np.float64)
        if name in EXACT_IN_JAX:  # JAX's own rule is right here: the test would see it lost
            assert _ulps(as_jax, exact, dtype) <= 4
        else:  # as JAX differentiates it: 0 (s or t rounds to ±1) or a cancellation hundreds of ulps off
            assert all(g == 0 or abs(g - float(e)) > 100 * np.spacing(np.array(float(e), dtype))
                       for g, e in zip(as_jax, exact))
        fixed = jst.stabilize(fn)
        assert _ulps(jax.vmap(jax.grad(fixed))(x), exact, dtype) <= 4


@DTYPES
@pytest.mark.parametrize("name", list(CASES))
def test_the_derivative_stays_accurate_where_jax_is_right(name, dtype):
    fn, rule, slope, _ = CASES[name]
    points = MODERATE
    if rule == "logistic_derivative":  # the tail where s(x)·(1 - s(x)) was right
        points = MODERATE + [(1 if name == "logistic_sf" else -1) * v for v in LARGE[dtype][rule]]
    with _x64(dtype):
        x = jnp.asarray(points, dtype)
        exact = [slope(mp.mpf(float(v))) for v in np.asarray(x)]
        fixed = jst.stabilize(fn)
        assert _ulps(jax.vmap(jax.grad(fixed))(x), exact, dtype) <= 4


@DTYPES
def test_grad_vmap_and_jit_compose(dtype):
    def loss(x):  # a layer's worth: one of each, through a sum
        return jnp.sum(jax.nn.sigmoid(x) * jnp.tanh(0.5 * x) + jax.nn.soft_sign(x))

    with _x64(dtype):
        x = jnp.asarray([[0.3, -20.0, 40.0], [1e-3, 25.0, -60.0]], dtype)
        fixed = jst.stabilize(loss)
        fired = {a.rule for a in jst.explain(loss, x)}
        assert {"logistic_derivative", "tanh_derivative"} <= fired
        assert ("soft_sign_derivative" in fired) == ("soft_sign" not in EXACT_IN_JAX)
        g = np.asarray(jax.grad(fixed)(x))
        assert _same_bits(jax.jit(jax.grad(fixed))(x), g)
        assert _same_bits(jax.vmap(jax.grad(fixed))(x), g)  # the loss is a sum over rows
        assert _same_bits(jax.grad(jst.stabilize(jax.jit(loss)))(x), g)
        flat = [float(v) for v in np.asarray(x).ravel()]
        exact = [_dsig(mp.mpf(v)) * mp.tanh(mp.mpf(v) / 2) + _sig(mp.mpf(v)) * _sech2(mp.mpf(v) / 2) / 2
                 + 1 / (1 + abs(mp.mpf(v))) ** 2 for v in flat]
        # three terms, each within 4 ulps of itself, added: 8 ulps of the result
        assert _ulps(g.ravel(), exact, dtype) <= 8


@pytest.mark.parametrize("name", [n for n, c in CASES.items() if c[3] is not None])
def test_second_derivatives_are_sane(name):
    # JAX differentiates the forms' own rules: s(x)·s(-x) through logistic's, 4e/(1 + e)² through
    # exp's, r·r through the quotient's. Not exact everywhere, but finite and close where the
    # first derivative was 0 as JAX wrote it.
    fn, rule, _, second = CASES[name]
    xs = [0.5, 3.0, -7.0, *LARGE[np.float32][rule][:2]]
    x = jnp.asarray(xs, np.float32)
    g2 = jax.vmap(jax.grad(jax.grad(jst.stabilize(fn))))(x)
    assert _ulps(g2, [second(mp.mpf(v)) for v in xs], np.float32) <= 16


def test_a_derivative_only_rewrite_is_said_to_be_one():
    x = jnp.ones(3, np.float32)
    (applied,) = jst.explain(jax.nn.sigmoid, x)
    assert applied.rule == "logistic_derivative" and applied.derivative_only
    assert "(derivative only)" in str(applied)
    assert not any(a.derivative_only for a in jst.explain(lambda v: jnp.log(1 + v), x))


def test_a_check_lists_it_only_where_it_judges_the_derivative():
    r = jst.check(jax.nn.sigmoid, shapes=[(4,)], dtype="float32", domain=(-60.0, 60.0),
                  max_examples=30, grad=True, seed=1)
    assert r.original.verdict == "pass" and r.rewrites == []  # the value: nothing changed
    g = r.gradient
    assert g is not None and [w.rule for w in g.rewrites] == ["logistic_derivative"]
    assert g.original.verdict == "fail" and g.rewritten.verdict == "pass"
    plain = jst.check(jnp.tanh, shapes=[(4,)], dtype="float32", domain=(-60.0, 60.0),
                      max_examples=10, seed=1)
    assert plain.rewrites == [] and plain.gradient is None


# ------------------------------------------------------------------------------ where they stay off
def test_a_value_rule_takes_the_logistic_it_reads():
    x = jnp.ones(3, np.float32)
    assert [a.rule for a in jst.explain(lambda v: jnp.log(jax.nn.sigmoid(v)), x)] == ["log_sigmoid"]
    assert [a.rule for a in jst.explain(lambda v: 1 - jax.nn.sigmoid(v), x)] == ["one_minus_sigmoid"]


def test_a_custom_derivatives_body_is_left_alone():
    # the catalogue's own forms.sigmoid (what 'sigmoid' produces) and a user's custom_jvp whose primal
    # has a tanh: the derivative there is the rule's, never the primitive's
    @jax.custom_jvp
    def squash(v):
        return jnp.tanh(v)

    squash.defjvp(lambda p, t: (squash(p[0]), t[0]))
    x = jnp.ones(3, np.float32)
    assert [a.rule for a in jst.explain(lambda v: 1 / (1 + jnp.exp(-v)), x)] == ["sigmoid"]
    assert jst.explain(forms.sigmoid, x).rules == []
    assert jst.explain(squash, x).rules == []
    assert float(jax.grad(jst.stabilize(squash))(jnp.float32(30.0))) == 1.0


@pytest.mark.parametrize("fn", [lambda x: x / (jnp.abs(x) + 2.0), lambda x: x / (jnp.abs(x[::-1]) + 1),
                                lambda x: x / (jnp.abs(x) - 1), lambda x: 1 / (jnp.abs(x) + 1)],
                         ids=["plus_2", "other_variable", "minus_1", "numerator_1"])
def test_near_misses_of_soft_sign_are_left_alone(fn):
    assert "soft_sign_derivative" not in jst.explain(fn, jnp.full(4, 3.0, np.float32)).rules


def test_a_constant_logistic_is_not_matched():
    x = jnp.ones(3, np.float32)
    assert jst.explain(lambda v: v * jax.nn.sigmoid(jnp.float32(2.0)), x).rules == []


def test_a_precision_plan_does_not_list_it():
    # jst.tune_precision judges values: a derivative-only rewrite changed none
    def layer(x):
        return jnp.sum(jnp.tanh(x) * jax.nn.sigmoid(x))

    plan = jst.tune_precision(layer, shapes=(16,), dtype="bfloat16", domain=(-4.0, 4.0))
    assert not {"tanh_derivative", "logistic_derivative"} & {rule for rule, _ in plan.rewrites}
    assert {"tanh_derivative", "logistic_derivative"} <= set(
        jst.explain(layer, jnp.ones(16, jnp.bfloat16)).rules)
