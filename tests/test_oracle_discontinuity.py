"""Discontinuous operations in the rigorous oracle: decided on proof, uncertain otherwise, never guessed.

Every program here branches, rounds to an integer, breaks a tie or leaves a loop on a quantity whose
exact value sits on (or very near) the decision point, so low-precision balls straddle it. Two kinds:

* decidable: the exact value is off the point, or exactly on it and reachable exactly at some finite
  precision; the oracle must escalate and return the exact program's answer, certain;
* undecidable: the exact value is on the point but no finite precision makes its ball exact
  (``exp(log(x)) - x`` is exactly 0); the oracle must say uncertain, and never pick a side.

References are worked out by hand or with mpmath at 6000 bits.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import mpmath
import numpy as np
import pytest
from jax import lax

from pytest_jaxstab import oracles

F32, F64 = np.float32, np.float64
BIG = np.asarray([1e19, 3e30, -2e25], F32)  # (x + 1) - x is 1, but x + 1 needs ~100 bits


def _certain(got) -> np.ndarray:
    return np.asarray(got.certain)


def test_where_decided_only_at_high_precision():
    fn = lambda x: jnp.where((x + 1) - x > 0.5, x * 2, -x)
    got = oracles.evaluate(fn, BIG)
    assert _certain(got).all()
    np.testing.assert_array_equal(got.values, BIG * 2)  # the exact branch (float32 takes the other)
    assert np.asarray(fn(BIG) == -BIG).all()
    assert np.asarray(got.precisions).min() > 56


def test_where_on_an_exact_tie_that_no_precision_reaches_is_uncertain():
    x = np.asarray([3.0, 0.7, 1e10], F32)
    got = oracles.evaluate(lambda x: jnp.where(jnp.exp(jnp.log(x)) - x > 0, 1.0, -1.0), x)
    assert not _certain(got).any()  # exp(log(x)) - x is exactly 0: its ball never excludes 0
    low = oracles.evaluate(lambda x: jnp.where(jnp.exp(jnp.log(x)) - x >= 0, 1.0, -1.0), x,
                           max_precision=300)
    assert not _certain(low).any() and np.asarray(low.precisions).max() == 300


def test_where_takes_the_side_an_element_is_on_whatever_its_neighbours():
    x = np.asarray([1e-20, -1e-20, 0.5, 3.0, -2.0], F32)
    fn = lambda x: jnp.where(jnp.exp(x) - 1 - x > 0, jnp.sqrt(x * x), -1.0)  # exp(x)-1-x = x^2/2 + ...
    got = oracles.evaluate(fn, x)
    assert _certain(got).all()
    np.testing.assert_array_equal(got.values, np.abs(x))


def test_floor_ceil_round_sign_on_exact_integers_and_half_integers():
    fns = {
        "floor": (lambda x: jnp.floor((x + 1) - x), 1.0),
        "ceil": (lambda x: jnp.ceil((x + 1) - x - 1), 0.0),
        "round_even": (lambda x: jnp.round((x + 0.5) - x), 0.0),  # 0.5 exactly: to even
        "round_away": (lambda x: lax.round((x + 2.5) - x), 3.0),
        "sign": (lambda x: jnp.sign((x + 1) - x - 1), 0.0),
        "to_int": (lambda x: ((x + 3) - x).astype(jnp.int32).astype(jnp.float32), 3.0),
        "clamp": (lambda x: jnp.clip((x + 1) - x, 1.0, 2.0), 1.0),
    }
    for name, (fn, expected) in fns.items():
        got = oracles.evaluate(fn, BIG)
        assert _certain(got).all(), name
        np.testing.assert_array_equal(got.values, np.full(BIG.shape, expected, F32), err_msg=name)


def test_floor_of_an_unreachable_integer_is_uncertain():
    x = np.asarray([3.0, 7.0], F32)
    got = oracles.evaluate(lambda x: jnp.floor(jnp.exp(jnp.log(x)) / x), x)  # exactly 1, never exact
    assert not _certain(got).any()
    conv = oracles.evaluate(lambda x: (jnp.exp(jnp.log(x)) / x).astype(jnp.int32), x)
    assert not _certain(conv).any()


def test_max_min_argmax_at_exact_ties():
    a = lambda x: x * x
    b = lambda x: (x + 1) * (x - 1) + 1  # equal to x*x, exactly
    got = oracles.evaluate(lambda x: (jnp.maximum(a(x), b(x)), jnp.minimum(a(x), b(x))), BIG)
    with mpmath.workprec(6000):
        squares = [float(mpmath.mpf(float(v)) ** 2) for v in BIG]  # exact in float64: 48 bits
    with np.errstate(over="ignore"):
        sq = np.asarray(squares).astype(F32)  # 9e60 overflows float32: inf, as the oracle must say
    for out, sure in zip(got.values, got.certain):
        assert np.asarray(sure).all()
        np.testing.assert_array_equal(out, sq)
    arg = oracles.evaluate(lambda x: jnp.argmax(jnp.stack([b(x), a(x), a(x) - 1]), axis=0), BIG)
    assert _certain(arg).all()
    np.testing.assert_array_equal(arg.values, [0, 0, 0])  # a tie: the first
    near = oracles.evaluate(lambda x: jnp.argmax(jnp.stack([a(x), b(x) + 1e-30]), axis=0), BIG)
    assert _certain(near).all()
    np.testing.assert_array_equal(near.values, [1, 1, 1])  # off by 1e-30 relative 1e-68: decided


def test_argmax_and_sort_never_guess_an_unreachable_tie():
    x = np.asarray([3.0], F32)
    fn = lambda x: jnp.argmax(jnp.concatenate([jnp.exp(jnp.log(x)), x]))
    assert not _certain(oracles.evaluate(fn, x)).any()
    s = oracles.evaluate(lambda x: lax.sort((jnp.concatenate([jnp.exp(jnp.log(x)), x]),
                                             jnp.arange(2)), num_keys=1), x)
    assert not np.asarray(s.certain[1]).any()  # which index comes first is not decided


def test_cond_predicate_decided_at_high_precision():
    fn = lambda x: lax.cond((x + 1e-30) - x > 0, lambda v: v + 1, lambda v: v - 1, x)
    got = oracles.evaluate(fn, F32(1.0))
    assert bool(got.certain) and got.values == F32(2.0)
    assert fn(F32(1.0)) == F32(0.0)  # float32 takes the other branch
    undecidable = lambda x: lax.cond(jnp.exp(jnp.log(x)) - x > 0, lambda v: v + 1, lambda v: v - 1, x)
    assert not bool(oracles.evaluate(undecidable, F32(3.0)).certain)


def _loop(t0):
    # Halve t until expm1(t) - t (about t**2 / 2) drops to 1e-300; float64 stops near t = 1e-8, where
    # exp(t) - 1 - t rounds to 0, while the exact loop runs ~500 times and its last exits need ~1000 bits.
    def cond(s):
        return jnp.exp(s[1]) - 1 - s[1] > 1e-300

    return lax.while_loop(cond, lambda s: (s[0] + 1, s[1] / 2), (0, t0))


def test_while_whose_exit_is_decided_only_at_high_precision():
    with jax.enable_x64(True):
        t0 = F64(1.0)
        got = oracles.evaluate(_loop, t0)
        float_count = int(_loop(t0)[0])
        low = oracles.evaluate(_loop, t0, max_precision=256)
    with mpmath.workprec(6000):
        limit, t, n = mpmath.mpf(float(F64(1e-300))), mpmath.mpf(1), 0
        while mpmath.expm1(t) - t > limit:
            t, n = t / 2, n + 1
    count, value = got.values
    assert all(np.asarray(c).all() for c in got.certain)
    assert int(count) == n and float(value) == float(t) and n > 400
    assert float_count < 100  # the float program leaves far earlier
    assert not any(np.asarray(c).any() for c in low.certain)  # below what it needs: uncertain


@pytest.mark.parametrize("dtype", [F32, F64])
def test_comparisons_of_provably_different_values_never_escalate(dtype):
    x = np.asarray([0.5, -3.0, 1e-3, 7.0], dtype)
    with jax.enable_x64(dtype == F64):
        got = oracles.evaluate(lambda x: jnp.where(x > 0, jnp.sqrt(x), jnp.log(-x)), x)
    assert _certain(got).all()
    # settled by the fast path (53: float64 intervals decide float32) or at the first precision
    assert np.asarray(got.precisions).max() == (53 if dtype == F32 else np.finfo(dtype).nmant + 1 + 32)
