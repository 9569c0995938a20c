"""Gradients as a checked output: ``jst.check(..., grad=True)`` and ``@pytest.mark.stabilize(grad=True)``.

The gradient of the function as written and of the rewritten one are judged against the oracle's
exact evaluation of the original's derivative program (AD over the reals is the real derivative).
Expected figures are not taken from the code under test: the derivatives below are known in closed
form (checked against mpmath where a value is asserted).
"""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import mpmath
import numpy as np
import pytest

import pytest_jaxstab as jst
from pytest_jaxstab._check import check_case
from pytest_jaxstab._check._gradient import derivative_program
from pytest_jaxstab._results import CaseResult, Witness

F32 = np.float32


def _guarded(x):
    return jnp.sum(jnp.where(x < 20, jnp.log(jnp.expm1(x)), x))


def test_where_guard_gradient_is_judged_and_its_nan_origin_found():
    # the forward value is fine; the gradient is NaN for x > 88.7 (the untaken branch's inf meets
    # a zero cotangent): only grad=True sees it
    r = jst.check(_guarded, shapes=[(4,)], dtype="float32", domain=(1e-3, 1e4), max_examples=30,
                  grad=True, seed=3)
    assert r.original.verdict == "pass"  # the values
    g = r.gradient
    assert g is not None and g.samples > 0
    assert g.original.overflows > 0 and g.original.verdict == "fail"
    assert g.rewritten.verdict == "pass" and g.rewritten.overflows == 0
    assert g.rewritten.max_error_bits <= 8
    assert r.outcome == "failed" and "gradient" in r.message
    origin = [o for o in g.nan_origins if o.variant == "original"]
    assert origin and origin[0].primitive in ("exp", "expm1", "div", "mul")  # in the backward pass
    assert origin[0].location is not None and "test_check_grad.py" in origin[0].location


def test_gradient_of_norm_with_zero_vector_witness():
    # safe_norm: at x = 0 the derivative does not exist (0/0): that sample is not held against
    # either variant (discarded); elsewhere the written gradient x / sqrt(sum x²) overflows or
    # underflows in the squares, the rewritten one does not
    zero = Witness([np.zeros(3, F32)], "original", 0.0, False)
    f = lambda x: jnp.sqrt(jnp.sum(x * x))
    r = check_case(f, shapes=[(3,)], dtype="float32", max_examples=30, grad=True, seed=1,
                  witnesses=[zero])
    g = r.gradient
    assert g is not None
    assert g.discarded >= 1
    assert g.original.verdict == "fail"
    assert g.rewritten.verdict == "pass" and g.rewritten.max_error_bits <= 8
    assert np.array_equal(np.asarray(jax.grad(jst.stabilize(f))(np.zeros(3, F32))), np.zeros(3, F32))


def test_derivative_program_is_the_vjp_with_ones():
    # non-scalar output: the gradient of the sum of the outputs; here d/dx sum(x * x) = 2x exactly
    closed = jax.make_jaxpr(lambda x: x * x)(np.ones(3, F32))
    grad = derivative_program(closed, [0])
    x = np.array([1.5, -2.0, 3e10], F32)
    (values,) = jst.oracles.evaluate(grad, x).values  # one gradient per input
    np.testing.assert_array_equal(np.asarray(values, F32), 2 * x)


def test_float64_gradient_of_a_bond_potential():
    # -log(1 - exp(-a)): d/da = -1/expm1(a); as written 1 - exp(-a) is 0 below a ~ 1e-16
    f = lambda a: jnp.sum(-jnp.log(1 - jnp.exp(-a)))
    r = jst.check(f, shapes=[(4,)], dtype="float64", domain=(1e-300, 700.0), max_examples=30,
                  grad=True, seed=2)
    g = r.gradient
    assert g is not None
    assert g.original.verdict == "fail"
    assert g.rewritten.verdict == "pass" and g.rewritten.max_error_bits <= 8
    with jax.enable_x64(True):
        a = np.array([1e-20, 0.5], np.float64)
        got = np.asarray(jax.grad(jst.stabilize(f))(a))
    exact = [float(-1 / mpmath.expm1(mpmath.mpf(v))) for v in a]
    np.testing.assert_allclose(got, exact, rtol=4 * np.finfo(np.float64).eps)


def test_gradient_figures_survive_json():
    r = jst.check(_guarded, shapes=[(4,)], dtype="float32", domain=(1e-3, 1e4), max_examples=10,
                  grad=True, seed=3)
    back = CaseResult.from_json(json.loads(json.dumps(r.to_json())))
    assert back.gradient is not None and r.gradient is not None
    assert back.gradient.to_json() == r.gradient.to_json()
    plain = jst.check(_guarded, shapes=[(4,)], dtype="float32", domain=(1e-3, 1e4), max_examples=5,
                      seed=3)
    assert plain.gradient is None and "gradient" not in plain.to_json()


def test_marker_grad_true(pytester: pytest.Pytester, run_jaxstab):
    pytester.makepyfile(test_g='''
import jax.numpy as jnp
import pytest

@pytest.mark.stabilize(dtype="float32", shapes={"x": (4,)}, domain=(1e-3, 1e4), grad=True)
def test_guard(x):
    return jnp.sum(jnp.where(x < 20, jnp.log(jnp.expm1(x)), x))

@pytest.mark.stabilize(dtype="float32", shapes={"x": (4,)}, domain=(1e-3, 1e4))
def test_guard_values_only(x):
    return jnp.sum(jnp.where(x < 20, jnp.log(jnp.expm1(x)), x))

@pytest.mark.stabilize(dtype="float32", shapes={"x": (4,)}, domain=(1e-3, 1e4), grad=True, apply=True)
def test_guard_shipped_stabilized(x):
    return jnp.sum(jnp.where(x < 20, jnp.log(jnp.expm1(x)), x))
''')
    result = run_jaxstab("--jaxstab-examples=20", "--jaxstab-seed=1", "--jaxstab-report=json:out.json")
    result.assert_outcomes(passed=2, failed=1)
    text = result.stdout.str()
    assert "FAILED test_g.py::test_guard " in text
    assert "gradient" in text
    # the JSON report carries the gradient figures beside the values'
    cases = {c["nodeid"]: c for c in json.loads((pytester.path / "out.json").read_text())["cases"]}
    guard = cases["test_g.py::test_guard"]
    assert guard["gradient"]["original"]["overflows"] > 0
    assert guard["gradient"]["rewritten"]["verdict"] == "pass"
    assert "gradient" not in cases["test_g.py::test_guard_values_only"]


def test_guard_gradient_fixed_by_the_double_where():
    # where(x < 20, x * exp(x), 0): the exact derivative is 0 for x >= 20; as written the untaken
    # branch's exp overflows past 88.7 and 0 * inf is NaN; rewritten, that branch sees x = 10.
    # x >= 0 keeps every term's sign the same: on (-100, 1000) the fuzzer draws terms that cancel in
    # the sum, which fails the values for a reason that has nothing to do with the guard.
    f = lambda x: jnp.sum(jnp.where(x < 20, x * jnp.exp(x), 0.0))
    r = jst.check(f, shapes=[(4,)], dtype="float32", domain=(0.0, 1000.0), max_examples=30,
                  grad=True, seed=5)
    assert r.original.verdict == "pass" and r.gradient is not None
    assert "guarded_where" in [w.rule for w in r.rewrites]
    assert r.gradient.original.overflows > 0
    assert r.gradient.rewritten.overflows == 0 and r.gradient.rewritten.max_error_bits <= 8


def test_guard_whose_untaken_branch_is_not_real_is_not_judged_there():
    # where(x > 0, sqrt(x), 0) at x < 0: the derivative program of the function as written takes
    # sqrt of a negative number, so its exact value is not real there and the oracle discards the
    # sample (docs/architecture.md, "The error metric"); the rewritten gradient is 0 there all the same
    f = lambda x: jnp.sum(jnp.where(x > 0, jnp.sqrt(x), 0.0))
    r = jst.check(f, shapes=[(4,)], dtype="float32", domain=(-10.0, 10.0), max_examples=20,
                  grad=True, seed=5)
    assert r.gradient is not None and r.gradient.discarded > 0
    assert r.gradient.rewritten.verdict == "pass"
    x = np.array([-1.0, 4.0], F32)
    np.testing.assert_array_equal(np.asarray(jax.grad(jst.stabilize(f))(x)), np.array([0.0, 0.25], F32))
