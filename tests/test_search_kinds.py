"""The search chooses its first rule families by the kind of loss local error reports (issue 26, item 2).

Programs whose kind of loss is known by construction: a difference of two nearly equal cube roots
cancels (and overflows nowhere: the inputs stay below 1e300), the square of an input near the float
maximum overflows (and nothing cancels: both operands of the sum are positive). ``Improvement.families``
and its report say which kind chose which families; the choice must follow the kind, not the operators.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import mpmath
import numpy as np
import pytest

import pytest_jaxstab as jst
from pytest_jaxstab import oracles
from pytest_jaxstab._check._trace import x64_scope
from pytest_jaxstab._search._egraph import KIND_FAMILIES, families_by_kind
from pytest_jaxstab._search._rules import parse

# The slow tier (`make test-slow`, run in full by CI; `make test` leaves it out): docs/architecture.md,
# "Tests and their tiers".
pytestmark = pytest.mark.slow

LIMITS: dict[str, Any] = dict(dtype="float64", max_examples=48, time_limit=12.0, seed=0)


def test_one_program_gets_different_families_for_different_kinds():
    # One term, every family usable by its operators (exp, log, sqrt, div): the kind alone decides.
    term = parse("(div (sub (exp a) (log (add 1 b))) (sqrt (mul a a)))")
    over = families_by_kind(term, ("overflow",))["overflow"]
    canc = families_by_kind(term, ("cancellation",))["cancellation"]
    assert over[0] == "exp-scaling" and "exp-scaling" not in canc
    assert "squares-cubes" in canc and "squares-cubes" not in over
    assert families_by_kind(term, ("rounding",)) == {}  # no family addresses plain rounding


def test_families_the_operators_rule_out_are_not_chosen():
    # No trigonometric or exponential operator: a cancellation gets the algebraic families only.
    canc = families_by_kind(parse("(sub (cbrt (add a 1)) (cbrt a))"), ("cancellation",))["cancellation"]
    assert "sqrt-cbrt" in canc and "squares-cubes" in canc
    assert not {"trigonometric", "hyperbolic", "exp-log", "logistic-softplus"} & set(canc)
    assert list(canc) == [f for f in KIND_FAMILIES["cancellation"] if f in canc]  # the kind's order


def test_a_cancellation_is_searched_with_the_cancellation_families_and_fixed():
    fn = lambda x: jnp.cbrt(x + 1) - jnp.cbrt(x)
    imp = jst.improve(fn, shapes=[()], domain=(1.0, 1e200), **LIMITS)
    assert "cancellation" in imp.families and "overflow" not in imp.families, imp.report()
    assert "exp-scaling" not in imp.families["cancellation"]
    assert "rule families by kind of loss: cancellation -> " in imp.report()
    assert imp.improved, imp.report()
    xs = np.exp(np.random.default_rng(11).uniform(0, np.log(1e200), 48))
    with mpmath.workdps(300):
        exact = np.array([float(mpmath.cbrt(mpmath.mpf(v) + 1) - mpmath.cbrt(mpmath.mpf(v))) for v in xs])
    with x64_scope(np.dtype(np.float64)):
        got = np.asarray(imp.fn(jnp.asarray(xs)), np.float64)
    assert oracles.error_bits(got, exact).mean() <= 2.0  # the original loses up to 60 bits here


def test_an_overflow_is_searched_with_the_scaling_families():
    fn = lambda x: x * x / (x * x + 1.0)
    imp = jst.improve(fn, shapes=[()], domain=(-1e300, 1e300), **LIMITS)
    assert "overflow" in imp.families and "cancellation" not in imp.families, imp.report()
    assert imp.families["overflow"][0] == "exp-scaling" and "squares-cubes" not in imp.families["overflow"]
    assert "rule families by kind of loss: overflow -> " in imp.report()
