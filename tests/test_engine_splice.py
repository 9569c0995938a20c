"""The rewrite pass's two ways of building the new program agree: splicing replacements into the
jaxpr (the fast path for pattern rules) and re-tracing it (used for sub-jaxprs and structural rules)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pytest_jaxstab import _compat
from pytest_jaxstab.rewrites import STABILITY, rewrite_jaxpr
from pytest_jaxstab.rewrites.engine import _engine
from pytest_jaxstab.rewrites.engine._match import Graph


def _many(x, y):
    a = jnp.log(jnp.sum(jnp.exp(x)))  # logsumexp
    b = jnp.log(1 + jnp.exp(y))  # softplus, then used twice below
    c = x - jnp.log(jnp.sum(jnp.exp(x), axis=-1, keepdims=True))  # log_softmax
    d = jnp.log(jnp.exp(y))  # log_exp: the replacement is its operand itself
    e = jnp.exp(x) - 1  # expm1
    return a + b.sum() * 2.0, c, d + b, e, jnp.sqrt(x * x + y * y)  # hypot


_X = jnp.linspace(-3.0, 90.0, 8, dtype=jnp.float32)
_Y = jnp.linspace(-50.0, 50.0, 8, dtype=jnp.float32)
FUNCTIONS = [
    (_many, (_X, _Y)),
    (lambda x: jnp.exp(x) / jnp.sum(jnp.exp(x), axis=0, keepdims=True), (jnp.ones((4, 3)) * 50.0,)),
    (lambda x: jnp.mean(x * x) - jnp.mean(x) ** 2, (jnp.full((16,), 1e4, jnp.float32) + jnp.arange(16.0),)),
]


@pytest.mark.parametrize(("fn", "args"), FUNCTIONS)
def test_splice_matches_retrace_and_is_well_typed(fn, args):
    closed, _, _ = _compat.trace(fn, *args)
    g = Graph(closed)
    plan = _engine._plan(g, STABILITY)
    assert plan, "the example must contain at least one match"
    spliced = _engine._splice(g, plan, True, (), None)
    assert spliced is not None
    new_s, fired_s = spliced
    g2 = Graph(closed)
    new_r, fired_r = _engine._retrace(g2, _engine._plan(g2, STABILITY), {}, {}, True, (), None)
    _compat.check_jaxpr(new_s)
    assert [(a.rule, a.location) for a in fired_s] == [(a.rule, a.location) for a in fired_r]
    out_s = jax.jit(_compat.as_fun(new_s))(*args)
    out_r = jax.jit(_compat.as_fun(new_r))(*args)
    for a, b in zip(out_s, out_r):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))  # the same program: bit-identical


def test_spliced_equations_keep_the_user_line():
    x = jnp.ones(4)
    closed, _, _ = _compat.trace(_many, x, x)
    new, applied = rewrite_jaxpr(closed, STABILITY)
    assert {a.rule for a in applied} >= {"logsumexp", "softplus", "log_softmax", "log_exp", "expm1", "hypot"}
    lines = {_compat.location(e) for e in _compat.eqns(new) if "jaxstab_" in _compat.name_stack(e)}
    assert lines and all(loc is not None and loc.startswith(__file__) for loc in lines)


def test_gradients_through_the_spliced_program():
    x = jnp.array([1000.0, 0.0, -3.0])
    closed, _, _ = _compat.trace(lambda v: jnp.log(jnp.sum(jnp.exp(v))), x)
    new, _ = rewrite_jaxpr(closed, STABILITY)
    g = jax.grad(lambda v: _compat.eval_jaxpr(new, v)[0])(x)
    np.testing.assert_allclose(np.asarray(g), [1.0, 0.0, 0.0], atol=1e-30)  # softmax, exactly


@pytest.mark.parametrize(("fn", "args"), FUNCTIONS)
def test_the_splice_knows_which_equations_are_replacements(fn, args):
    # The pass hands the next pass's index the replacement equations the splice made, instead of
    # reading every equation's name stack; both must agree, also on a program that holds an earlier
    # rewrite's replacements (kept) next to new matches.
    closed, _, _ = _compat.trace(fn, *args)
    once, _ = rewrite_jaxpr(closed, STABILITY)

    def again(*xs):
        outs = _compat.eval_jaxpr(once, *xs)
        return [*outs, *(jnp.log(1 + jnp.exp(x)) for x in xs)]  # new softplus matches

    mixed, _, _ = _compat.trace(again, *args)
    assert Graph(mixed).claimed, "the earlier replacements must keep their scope"
    for program in (closed, mixed):
        g = Graph(program)
        plan = _engine._plan(g, STABILITY)
        assert plan
        known: set[int] = set()
        spliced = _engine._splice(g, plan, False, (), None, known)
        assert spliced is not None
        assert known == Graph(spliced[0]).claimed
