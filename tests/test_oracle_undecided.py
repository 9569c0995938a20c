"""Gradients the exact oracle used to leave without a verdict (issue 47), now decided, never guessed.

Two mechanisms made every element of such gradients uncertain at every precision:

* dead equations: JAX's derivative of ``reduce_max`` writes ``eq(x, max(x))`` and a count even where
  the max is behind a ``stop_gradient`` (``jax.nn.logsumexp(a, b=w)``), and an undecidable comparison
  there stopped the whole-program pass; the interpreter now skips what no output reads
  (``interpreter/_live``);
* ``eq(x, max(x))`` where it is read (a hand-written max-shifted log-sum-exp or softmax, ``jnp.max``
  itself, a max-pool): the max is one of the operands, a comparison the balls cannot settle but the
  mathematics does where one element's ball lies strictly above its row's others
  (``interpreter/_extremum``).

References are computed here with mpmath at 200 bits from the float32 inputs and constants, and rounded
to float32 in one step (``_f32``): the oracle's certain values are correctly rounded, so they must equal
these bit for bit (0 ulps; a 200-bit value is that far from a float32 rounding boundary only by
accident, and these inputs are fixed). A real tie stays uncertain.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import mpmath
import numpy as np
import pytest

from pytest_jaxstab import oracles
from pytest_jaxstab.oracles.interpreter import _extremum
from pytest_jaxstab.oracles.library._exact import differentiable
from pytest_jaxstab.oracles.library._reference import reference_primal

REF_BITS = 200
W = np.asarray([1.0, 0.0, 2.0, 0.5], np.float32)  # a zero weight: the one `logsumexp` replaces by -inf
MASK = np.asarray([True, False, True, True])
LOGW = np.log(np.asarray([0.2, 0.3, 0.1, 0.4], np.float32))  # float32 constants: the oracle sees these
MU = np.asarray([-1.0, 0.5, 2.0, 3.0], np.float32)
SIG = np.asarray([0.7, 1.3, 0.9, 2.1], np.float32)
LOGS = np.log(SIG)


def _x(shape: tuple[int, ...], seed: int) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-4.0, 4.0, shape).astype(np.float32)


def _f32(v: object) -> np.float32:
    """``v`` (a real mpf) correctly rounded to float32 in one step (the values here are normal or 0)."""
    assert isinstance(v, mpmath.mpf)
    with mpmath.workprec(24):
        return np.float32(float(+v))


def _real(v: object) -> mpmath.mpf:
    assert isinstance(v, mpmath.mpf)
    return v


def _m(a: np.ndarray) -> list[list[mpmath.mpf]]:
    return [[mpmath.mpf(float(v)) for v in row] for row in np.asarray(a)]


def _judge(fn: Callable[..., object], x: np.ndarray, reference: np.ndarray, most: float = 0.9) -> None:
    """The oracle certain on at least ``most`` of the elements, and equal to ``reference`` there."""
    r = oracles.evaluate(fn, x)
    certain = np.asarray(r.certain)
    assert certain.mean() >= most, f"certain on {certain.mean():.0%} only"
    got = np.asarray(r.values)[certain]
    want = reference[certain]
    assert np.array_equal(got, want), f"differs at {np.flatnonzero(got != want)}: {got} vs {want}"


# -------------------------------------------------------------------------- the dead comparison
def _weighted_lse(x: jax.Array) -> jax.Array:
    return jnp.sum(jax.nn.logsumexp(3.0 * jnp.sin(x), b=jnp.asarray(W), axis=-1))


def test_weighted_logsumexp_with_a_zero_weight_has_a_gradient_verdict() -> None:
    x = _x((5, 4), 0)
    ref = np.zeros(x.shape, np.float32)
    with mpmath.workprec(REF_BITS):
        for i, row in enumerate(_m(x)):
            e = [mpmath.mpf(float(W[j])) * mpmath.exp(3 * mpmath.sin(v)) for j, v in enumerate(row)]
            s = mpmath.fsum(e)
            for j, v in enumerate(row):
                ref[i, j] = _f32(e[j] / s * 3 * mpmath.cos(v))
    _judge(jax.grad(_weighted_lse), x, ref)


# -------------------------------------------------------------------------- the live comparison
def _components(x: jax.Array) -> jax.Array:
    # a division: inexact balls, as a real log-density's (a sum of float32 terms is often exact)
    return jnp.asarray(LOGW) - jnp.asarray(LOGS) - 0.5 * ((x - jnp.asarray(MU)) / jnp.asarray(SIG)) ** 2


def _hand_lse(z: jax.Array) -> jax.Array:
    m = jnp.max(z, axis=-1, keepdims=True)  # no stop_gradient: `eq(z, max(z))` is read
    return jnp.squeeze(m, -1) + jnp.log(jnp.sum(jnp.exp(z - m), axis=-1))


def _mixture(x: jax.Array) -> jax.Array:
    return jnp.sum(_hand_lse(jnp.where(jnp.asarray(MASK), _components(x), -jnp.inf)))


def test_mixture_log_density_with_a_masked_component() -> None:
    x = _x((6, 4), 1)
    ref = np.zeros(x.shape, np.float32)
    with mpmath.workprec(REF_BITS):
        for i, row in enumerate(_m(x)):
            mu, sig = [mpmath.mpf(float(m)) for m in MU], [mpmath.mpf(float(s)) for s in SIG]
            z = [mpmath.mpf(float(LOGW[j])) - mpmath.mpf(float(LOGS[j])) - ((v - mu[j]) / sig[j]) ** 2 / 2
                 for j, v in enumerate(row)]
            s = mpmath.fsum(mpmath.exp(z[j]) for j in range(4) if MASK[j])
            for j, v in enumerate(row):
                ref[i, j] = _f32(mpmath.exp(z[j]) / s * (mu[j] - v) / sig[j] ** 2) if MASK[j] else 0.0
    _judge(jax.grad(_mixture), x, ref)


def _hand_softmax_first(x: jax.Array) -> jax.Array:
    z = jnp.sin(x)
    e = jnp.exp(z - jnp.max(z, axis=-1, keepdims=True))
    return jnp.sum((e / jnp.sum(e, axis=-1, keepdims=True))[:, 0])


def test_hand_written_softmax_gradient() -> None:
    x = _x((5, 4), 2)
    ref = np.zeros(x.shape, np.float32)
    with mpmath.workprec(REF_BITS):
        for i, row in enumerate(_m(x)):
            e = [mpmath.exp(mpmath.sin(v)) for v in row]
            s = mpmath.fsum(e)
            p = [t / s for t in e]
            for j, v in enumerate(row):
                ref[i, j] = _f32(p[0] * ((1 if j == 0 else 0) - p[j]) * mpmath.cos(v))
    _judge(jax.grad(_hand_softmax_first), x, ref)


def _max_pool(x: jax.Array) -> jax.Array:
    return jnp.sum(jnp.max(jnp.tanh(x).reshape(3, 2, 4), axis=1) ** 2)


def test_max_pool_gradient_and_a_users_argmax_mask() -> None:
    x = _x((6, 4), 3)
    ref = np.zeros(x.shape, np.float32)
    with mpmath.workprec(REF_BITS):
        t = [[_real(mpmath.tanh(v)) for v in row] for row in _m(x)]
        for k in range(3):
            for j in range(4):
                top = 2 * k if t[2 * k][j] > t[2 * k + 1][j] else 2 * k + 1
                ref[top, j] = _f32(2 * t[top][j] * (1 - t[top][j] ** 2))
    _judge(jax.grad(_max_pool), x, ref)

    # `tanh` traced twice: two variables of one value, matched as the same (``_extremum._same``)
    def picked(x: jax.Array) -> jax.Array:
        return jnp.sum(jnp.where(jnp.tanh(x) == jnp.max(jnp.tanh(x), axis=1, keepdims=True), x, 0.0))

    rows = _m(x)
    with mpmath.workprec(REF_BITS):  # six float32 values: their sum is exact here
        total = mpmath.fsum(rows[i][max(range(4), key=lambda j: t[i][j])] for i in range(6))
    _judge(picked, x, np.asarray(_f32(total)), most=1.0)


# -------------------------------------------------------------------------------- what stays open
def test_a_real_tie_stays_uncertain() -> None:
    """``max(sin x, sin x)``: two equal values, neither strictly above: each derivative is 1/2 in JAX's
    convention, but no ball can prove which side ties; the oracle must not guess."""

    def tie(x: jax.Array) -> jax.Array:
        return jnp.sum(jnp.max(jnp.stack([jnp.sin(x), jnp.sin(x)]), axis=0))

    r = oracles.evaluate(jax.grad(tie), _x((3, 4), 4), max_precision=256)
    assert not np.asarray(r.certain).any()


@pytest.mark.parametrize("case", ["other_value", "wrong_axis", "literal"])
def test_only_a_variables_own_extremum_is_matched(case: str) -> None:
    """The pattern is proven on the jaxpr: a max of another value, a max moved to the wrong rows (row
    ``j``'s max compared with row ``i``), or a comparison with a literal is left to the comparison rule."""
    fns = {
        "other_value": lambda x: jnp.sin(x) == jnp.max(jnp.cos(x), axis=1, keepdims=True),
        "wrong_axis": lambda x: jnp.sin(x) == jnp.max(jnp.sin(x), axis=1)[None, :],
        "literal": lambda x: jnp.sin(x) == 0.5,
    }
    closed = jax.make_jaxpr(fns[case])(jnp.zeros((4, 4), jnp.float32))
    assert _extremum.find(closed) == {}


def test_own_extremum_is_matched_through_its_moves() -> None:
    closed = jax.make_jaxpr(lambda x: jnp.sin(x) <= jnp.min(jnp.sin(x), axis=0))(
        jnp.zeros((4, 4), jnp.float32))
    (found,) = _extremum.find(closed).values()
    assert found.kind == "min" and found.axes == (0,)


def test_a_gradient_reference_is_not_differentiable_again() -> None:
    """The check's conditioning of a gradient differentiates the gradient's reference, whose routines'
    partials have no derivative: ``differentiable`` says so before JAX's tracing would raise."""
    closed = jax.make_jaxpr(lambda x: jax.nn.log_sigmoid(x) * x)(jnp.zeros(3, jnp.float32))
    primal, _ = reference_primal(closed)
    assert differentiable(primal)
    from pytest_jaxstab import _compat

    grad = jax.make_jaxpr(jax.grad(lambda x: jnp.sum(_compat.as_fun(primal)(x)[0])))(
        jnp.zeros(3, jnp.float32))
    assert not differentiable(grad)
