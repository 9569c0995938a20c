"""Derivatives that lose where the value does not (issue 39; ``catalogue/_stability_gradients.py``,
forms in ``forms/_gradients.py``).

Each case is judged against mpmath (60 digits) on its value and on its derivative (the derivative of
the mathematical function, written out here), in float32 and float64:

- softplus through kinks: value within 2 ulps (the written form and ``logaddexp`` are each within an
  ulp), derivative within 2 ulps of ``sigmoid(x)`` (one logistic, correctly rounded to an ulp), and
  exactly 1/2 at x = 0 where autodiff gives 0 or -1/2 as written;
- ``x / norm(x)`` and optax's cosine similarity on tiny vectors (and optax 0.2.8's spelling, the sum of
  squares floored by ``clip``, on huge ones too): gradients finite and within 16 ulps
  of the largest component (a difference of two terms that size, each a few roundings);
- ``sqrt``/``rsqrt(x² + c)``: value within 2 ulps (hypot and one division), derivative within 4;
- a user's ``custom_jvp`` rule: rewritten by the catalogue (JAX's old asinh rule: 0 past 1.8e19 in
  float32, 1/|x| after) and kept in meaning: a straight-through estimator, a derivative chosen at a
  kink and a stop-gradient rule give what they gave.

Near misses (another variable, another constant, no ``abs``) must not fire.
"""

from __future__ import annotations

import contextlib

import jax
import jax.numpy as jnp
import mpmath as mp
import numpy as np
import pytest
from jax import lax

import pytest_jaxstab as jst
from pytest_jaxstab._compat import enable_x64
from pytest_jaxstab.rewrites.forms import _gradients as fg

DTYPES = pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])


@pytest.fixture(autouse=True)
def _precision():
    # 60 digits for the references of this file only (mpmath's precision is global state)
    with mp.workdps(60):
        yield


def _x64(dtype):
    return enable_x64() if dtype == np.float64 else contextlib.nullcontext()


def _ulps(got, ref, dtype, scale=None):
    """The largest error in ulps of each reference (of ``scale`` if given), tiny at the least."""
    got = np.atleast_1d(np.asarray(got, np.float64))
    worst = 0.0
    for g, r in zip(got, ref):
        assert np.isfinite(g), f"{g} where the exact value is {mp.nstr(r, 8)}"
        s = max(abs(float(r)) if scale is None else scale, float(np.finfo(dtype).tiny))
        worst = max(worst, float(abs(mp.mpf(float(g)) - r)) / float(np.spacing(np.array(s, dtype))))
    return worst


def _rules(fn, *args):
    return {a.rule for a in jst.explain(fn, *args)}


def _elementwise_grad(fn):
    return jax.vmap(jax.grad(fn))


# ------------------------------------------------------------------------------ softplus by kinks
def _tail(x):
    return jnp.log1p(jnp.exp(-jnp.abs(x)))


def _tail_log(x):
    return jnp.log(1 + jnp.exp(-jnp.abs(x)))


KINKS = {
    "relu+log1p": lambda x: jax.nn.relu(x) + _tail(x),
    "where+log": lambda x: jnp.where(x > 0, x, 0.0) + _tail_log(x),
    "maximum+log1p": lambda x: jnp.maximum(x, 0) + _tail(x),
    "maximum0x": lambda x: jnp.maximum(0.0, x) + _tail(x),
    "tail_first": lambda x: _tail(x) + jax.nn.relu(x),
    "where_ge": lambda x: jnp.where(x >= 0, x, 0.0) + _tail(x),
    "where_lt": lambda x: jnp.where(x < 0, 0.0, x) + _tail_log(x),
    "abs_as_max": lambda x: jax.nn.relu(x) + jnp.log1p(jnp.exp(-jnp.maximum(x, -x))),
    "neg_abs_as_min": lambda x: jnp.maximum(x, 0) + jnp.log1p(jnp.exp(jnp.minimum(x, -x))),
}
POINTS = [0.0, 1e-3, -1e-3, 0.5, -2.0, 5.0, 30.0, -30.0, 80.0, -80.0]


@DTYPES
@pytest.mark.parametrize("name", list(KINKS))
def test_softplus_through_kinks_has_the_derivative_sigmoid(name, dtype):
    fn = KINKS[name]
    with _x64(dtype):
        x = jnp.asarray(POINTS, dtype)
        assert "softplus_kink" in _rules(fn, x)
        fixed = jst.stabilize(fn)
        exact = [mp.log1p(mp.exp(mp.mpf(v))) for v in POINTS]
        slope = [1 / (1 + mp.exp(-mp.mpf(v))) for v in POINTS]
        assert _ulps(fixed(x), exact, dtype) <= 2
        grad = _elementwise_grad(fixed)(x)
        assert _ulps(grad, slope, dtype) <= 2
        assert float(grad[0]) == 0.5


NEAR_MISSES = {
    "other_variable": lambda x: jax.nn.relu(x) + _tail(x[::-1]),
    "max_with_1": lambda x: jnp.maximum(x, 1.0) + _tail(x),
    "where_at_1": lambda x: jnp.where(x > 1, x, 0.0) + _tail(x),
    "where_swapped": lambda x: jnp.where(x > 0, 0.0, x) + _tail(x),
    "no_abs": lambda x: jax.nn.relu(x) + jnp.log1p(jnp.exp(-x)),
    "difference": lambda x: jax.nn.relu(x) - _tail(x),
}


@pytest.mark.parametrize("name", list(NEAR_MISSES))
def test_near_misses_of_the_kinked_softplus_are_left_alone(name):
    x = jnp.asarray(POINTS, np.float32)
    assert "softplus_kink" not in _rules(NEAR_MISSES[name], x)


# ------------------------------------------------------------------------------- x / norm(x)
WEIGHTS = [1.0, 2.0, 3.0, 4.0]


def _unit_sum(x):
    return jnp.sum(x / jnp.sqrt(jnp.sum(x * x)) * jnp.asarray(WEIGHTS, x.dtype))


def _unit_sum_exact(xs):
    xs = [mp.mpf(v) for v in xs]
    n = mp.sqrt(mp.fsum(v * v for v in xs))
    wx = mp.fsum(w * v for w, v in zip(WEIGHTS, xs))
    return wx / n, [w / n - wx * v / n**3 for w, v in zip(WEIGHTS, xs)]


@DTYPES
def test_a_tiny_vector_over_its_norm_has_a_finite_exact_gradient(dtype):
    tiny = 1e-30 if dtype == np.float32 else 1e-160
    xs = [tiny, -2 * tiny, 0.3 * tiny, 0.0]
    with _x64(dtype):
        x = jnp.asarray(xs, dtype)
        xs = [float(v) for v in np.asarray(x)]  # the inputs as rounded to the dtype
        value, grad = _unit_sum_exact(xs)
        assert not np.all(np.isfinite(jax.grad(_unit_sum)(x)))  # as written: d^-2 overflows
        fixed = jst.stabilize(_unit_sum)
        assert {"norm", "norm_quotient"} <= _rules(_unit_sum, x)
        assert _ulps(fixed(x), [value], dtype) <= 4
        g = jax.grad(fixed)(x)
        assert _ulps(g, grad, dtype, scale=max(abs(float(v)) for v in grad)) <= 16


def _safe_norm(x, min_norm, ord=None, axis=None, keepdims=False):  # optax's, as written there
    norm = jnp.linalg.norm(x, ord=ord, axis=axis, keepdims=True)
    x = jnp.where(norm <= min_norm, jnp.ones_like(x), x)
    norm = jnp.squeeze(norm, axis=axis) if not keepdims else norm
    masked_norm = jnp.linalg.norm(x, ord=ord, axis=axis, keepdims=keepdims)
    return jnp.where(norm <= min_norm, min_norm, masked_norm)


def _cosine_similarity(predictions, targets, epsilon=0.0):  # optax.losses.cosine_similarity
    batched_norm_fn = jnp.vectorize(_safe_norm, signature="(k)->()", excluded={1})
    unit_targets = targets / jnp.expand_dims(batched_norm_fn(targets, epsilon), axis=-1)
    unit_predictions = predictions / jnp.expand_dims(batched_norm_fn(predictions, epsilon), axis=-1)
    return jnp.sum(unit_targets * unit_predictions, axis=-1)


def test_optax_cosine_similarity_of_tiny_vectors_has_its_value_and_gradient():
    p = jnp.asarray([1e-25, 2e-25, -3e-25, 4e-26], np.float32)
    t = jnp.asarray([2e-25, 1e-25, -1e-25, 5e-26], np.float32)
    ps, ts = [mp.mpf(float(v)) for v in np.asarray(p)], [mp.mpf(float(v)) for v in np.asarray(t)]
    npn = mp.sqrt(mp.fsum(v * v for v in ps))
    ntn = mp.sqrt(mp.fsum(v * v for v in ts))
    cos = mp.fsum(a * b for a, b in zip(ps, ts)) / (npn * ntn)
    grad = [b / (npn * ntn) - cos * a / npn**2 for a, b in zip(ps, ts)]

    def fn(q):
        return _cosine_similarity(q, t)

    assert not np.all(np.isfinite(jax.grad(fn)(p)))  # as written: inf / NaN
    fixed = jst.stabilize(fn)
    assert "norm_quotient" in _rules(fn, p)
    assert _ulps(fixed(p), [cos], np.float32) <= 4
    g = jax.grad(fixed)(p)
    assert _ulps(g, grad, np.float32, scale=max(abs(float(v)) for v in grad)) <= 16


def _cosine_similarity_clip(a, b, epsilon=0.0):  # optax 0.2.8's losses.cosine_similarity, as written
    a_norm = jnp.sqrt(jnp.square(a).sum(axis=-1, keepdims=True).clip(epsilon))
    b_norm = jnp.sqrt(jnp.square(b).sum(axis=-1, keepdims=True).clip(epsilon))
    return (a / a_norm * (b / b_norm)).sum(axis=-1)


def _cosine_exact(ps, ts):
    ps, ts = [mp.mpf(float(v)) for v in ps], [mp.mpf(float(v)) for v in ts]
    npn, ntn = mp.sqrt(mp.fsum(v * v for v in ps)), mp.sqrt(mp.fsum(v * v for v in ts))
    cos = mp.fsum(a * b for a, b in zip(ps, ts)) / (npn * ntn)
    return cos, [b / (npn * ntn) - cos * a / npn**2 for a, b in zip(ps, ts)]


@pytest.mark.parametrize("scale", [1e25, 1e-25], ids=["huge", "tiny"])
def test_a_clipped_norm_neither_overflows_nor_underflows(scale):
    # The floored sum of squares (``clip(eps)``) overflows past 1.8e19 and underflows below 1e-19 in
    # float32, where the cosine (a ratio of norms) is an ordinary number: norm_floor takes
    # sqrt(max(c, S)) = max(sqrt(c), |x|) with the scaled norm, norm_quotient its derivative.
    p = jnp.asarray(np.array([1.0, 2.0, -3.0, 0.4]) * scale, np.float32)
    t = jnp.asarray(np.array([2.0, 1.0, -1.0, 0.5]) * scale, np.float32)
    cos, grad = _cosine_exact(np.asarray(p), np.asarray(t))

    def fn(q):
        return _cosine_similarity_clip(q[None], t[None])[0]

    assert not np.isfinite(fn(p)) or _ulps(fn(p), [cos], np.float32) > 2**10  # as written: lost
    assert {"norm_floor", "norm_quotient"} <= _rules(fn, p)
    fixed = jst.stabilize(fn)
    # a handful of roundings in the norms, the quotients and the sum: 4 ulps
    assert _ulps(fixed(p), [cos], np.float32) <= 4
    g = jax.grad(fixed)(p)
    assert _ulps(g, grad, np.float32, scale=max(abs(float(v)) for v in grad)) <= 16


def test_a_clip_with_a_ceiling_or_a_negative_floor_is_not_a_floored_norm():
    x = jnp.ones((2, 4), np.float32)
    capped = lambda v: jnp.sqrt(jnp.square(v).sum(-1).clip(1e-8, 1e8))
    negative = lambda v: jnp.sqrt(jnp.maximum(jnp.sum(v * v, -1), -1.0))
    assert "norm_floor" not in _rules(capped, x)
    assert "norm_floor" not in _rules(negative, x)


@pytest.mark.parametrize("fn", [jnp.linalg.norm, lambda x: jnp.sqrt(jnp.sum(x**2))],
                         ids=["linalg_norm", "written"])
def test_the_gradient_of_a_norm_at_zero_stays_zero(fn):
    g = jax.grad(jst.stabilize(fn))(jnp.zeros(4, np.float32))
    assert np.array_equal(np.asarray(g), np.zeros(4, np.float32))


def test_the_quotient_form_keeps_the_value_bit_for_bit():
    x = jnp.asarray(np.random.default_rng(0).standard_normal(64), np.float32)
    y = jnp.asarray(np.random.default_rng(1).uniform(1e-3, 1e3, 64), np.float32)
    assert np.array_equal(np.asarray(fg.quotient(x, y)), np.asarray(x / y))


def test_a_quotient_by_a_sum_with_a_root_is_left_alone():
    x = jnp.ones(4, np.float32)
    assert "norm_quotient" not in _rules(lambda v: v / (jnp.sqrt(v) + 1e-8), x)
    assert "norm_quotient" not in _rules(lambda v: v / jnp.exp(v), x)


# ------------------------------------------------------------------------- sqrt(x² + c), rsqrt
HYPOTS = {
    "rsqrt": (lambda x: lax.rsqrt(x * x + 1), 1, True),
    "one_over_sqrt": (lambda x: 1 / jnp.sqrt(x**2 + 1), 1, True),
    "sqrt": (lambda x: jnp.sqrt(x * x + 1), 1, False),
    "sqrt_half": (lambda x: jnp.sqrt(jnp.square(x) + 0.5), 0.5, False),
}


@DTYPES
@pytest.mark.parametrize("name", list(HYPOTS))
def test_roots_of_x_squared_plus_a_constant_do_not_overflow(name, dtype):
    fn, c, inverse = HYPOTS[name]
    big = 1e20 if dtype == np.float32 else 1e160
    xs = [0.0, 1e-3, -3.0, 1e10, big, -big]
    with _x64(dtype):
        x = jnp.asarray(xs, dtype)
        xs = [mp.mpf(float(v)) for v in np.asarray(x)]
        assert "hypot_constant" in _rules(fn, x)
        root = [mp.sqrt(v * v + mp.mpf(c)) for v in xs]
        value = [1 / r for r in root] if inverse else root
        slope = [-v / r**3 for v, r in zip(xs, root)] if inverse else [v / r for v, r in zip(xs, root)]
        fixed = jst.stabilize(fn)
        assert _ulps(fixed(x), value, dtype) <= 2
        # where the exact derivative is normal (a subnormal one is flushed on some backends)
        keep = [k for k, s in enumerate(slope) if s == 0 or abs(s) > np.finfo(dtype).tiny]
        g = np.asarray(_elementwise_grad(fixed)(x))
        assert _ulps(g[keep], [slope[k] for k in keep], dtype) <= 4


@pytest.mark.parametrize("fn", [lambda x: jnp.sqrt(x * x + x), lambda x: jnp.sqrt(x * x - 1),
                                lambda x: lax.rsqrt(x * x[::-1] + 1), lambda x: jnp.sqrt(x * x + 0.0)],
                         ids=["variable", "minus", "two_variables", "zero"])
def test_near_misses_of_hypot_constant_are_left_alone(fn):
    assert "hypot_constant" not in _rules(fn, jnp.full(4, 3.0, np.float32))


# --------------------------------------------------------------------------- custom_jvp rules
@jax.custom_jvp
def _asinh_old(x):
    return jnp.arcsinh(x)


@_asinh_old.defjvp
def _asinh_old_jvp(primals, tangents):  # JAX's asinh rule before it was fixed
    (x,), (t,) = primals, tangents
    return _asinh_old(x), t * lax.rsqrt(x * x + 1)


@DTYPES
def test_a_users_rule_that_overflows_is_rewritten_by_the_catalogue(dtype):
    big = [1e20, -1e30] if dtype == np.float32 else [1e160, -1e300]
    with _x64(dtype):
        x = jnp.asarray([0.0, 1e-3, 3.0, *big], dtype)
        xs = [mp.mpf(float(v)) for v in np.asarray(x)]
        assert float(jax.grad(_asinh_old)(x[3])) == 0.0  # as written: x*x overflows
        assert "jvp_rule" in _rules(_asinh_old, x)
        fixed = jst.stabilize(_asinh_old)
        assert _ulps(fixed(x), [mp.asinh(v) for v in xs], dtype) <= 1
        slope = [1 / mp.sqrt(v * v + 1) for v in xs]
        assert _ulps(_elementwise_grad(fixed)(x), slope, dtype) <= 2
        assert _ulps(jax.jit(_elementwise_grad(fixed))(x), slope, dtype) <= 2


@jax.custom_jvp
def _ste_round(x):  # a straight-through estimator: the rule is not round's derivative, on purpose
    return jnp.round(x)


_ste_round.defjvp(lambda p, t: (_ste_round(p[0]), t[0]))


@jax.custom_jvp
def _relu_half(x):  # a derivative chosen at the kink: 1/2 at 0
    return jnp.maximum(x, 0.0)


_relu_half.defjvp(lambda p, t: (_relu_half(p[0]), t[0] * jnp.where(p[0] > 0, 1.0, jnp.where(
    p[0] == 0, 0.5, 0.0)).astype(p[0].dtype)))


@jax.custom_jvp
def _frozen(x):  # stop_gradient as a rule
    return jnp.exp(x)


_frozen.defjvp(lambda p, t: (_frozen(p[0]), jnp.zeros_like(t[0])))


@jax.custom_jvp
def _identity_with_asinh_rule(x):  # a rule that is not the primal's derivative, on purpose
    return x


_identity_with_asinh_rule.defjvp(lambda p, t: (p[0], t[0] * lax.rsqrt(p[0] * p[0] + 1)))


@pytest.mark.parametrize(("fn", "point", "want"), [
    (_ste_round, 0.3, 1.0), (_relu_half, 0.0, 0.5), (_frozen, 2.0, 0.0),
    (_identity_with_asinh_rule, 3.0, 10**-0.5),
    (_identity_with_asinh_rule, 1e20, 1e-20),
], ids=["straight_through", "kink_choice", "stop_gradient", "rule_not_primal", "rule_not_primal_big"])
def test_a_users_rule_keeps_its_meaning_by_default(fn, point, want):
    x = jnp.float32(point)
    got = float(jax.grad(jst.stabilize(fn))(x))
    assert got == pytest.approx(want, rel=2**-22)
    # only a rule the catalogue changes is rewritten at all
    assert ("jvp_rule" in _rules(fn, x)) == (fn is _identity_with_asinh_rule)


def test_library_rules_are_not_traced_again():
    # jax.nn.relu's rule is JAX's (relu'(0) = 0 on purpose): never a user's rule to stabilise
    assert _rules(jax.nn.relu, jnp.zeros(3, np.float32)) == set()
    assert float(jax.grad(jst.stabilize(jax.nn.relu))(jnp.float32(0.0))) == 0.0


def test_custom_derivatives_primal_still_differentiates_the_primal():
    fixed = jst.stabilize(_identity_with_asinh_rule, custom_derivatives="primal")
    assert float(jax.grad(fixed)(jnp.float32(1e20))) == 1.0
