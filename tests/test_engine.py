"""``jst.stabilize`` / ``jst.explain`` as a JAX transformation, and the rewrite engine's matching rules.

Values are checked against references computed independently of the code under test: float64 NumPy
(29 more bits than the float32 results, and no overflow at the inputs used) or mpmath. Expected
source lines are found with ``inspect``, never hard-coded.
"""

from __future__ import annotations

import inspect
import os
from typing import Any

import jax
import jax.numpy as jnp
import mpmath
import numpy as np
import pytest
from jax import lax

import pytest_jaxstab as jst
from pytest_jaxstab import _compat
from pytest_jaxstab.oracles import error_bits
from pytest_jaxstab.oracles.core._rounding import round_to_dtype, to_mpf_array
from pytest_jaxstab.rewrites import Rule
from pytest_jaxstab.rewrites import pattern as p

# exp(100) overflows float32, so the naive forms are inf/NaN; the spread (80) keeps every softmax
# value a normal float32 (XLA on CPU flushes subnormal results to zero).
X = np.array([100.0, 99.0, 30.0, 20.5], np.float32)


def naive_lse(x):
    return jnp.log(jnp.sum(jnp.exp(x)))


def lse64(x, axis=None, keepdims=False) -> np.ndarray:
    """log(sum(exp(x))) in float64 NumPy (exp(100) is fine there), rounded to float32."""
    x64 = np.asarray(x, np.float64)
    return np.log(np.sum(np.exp(x64), axis=axis, keepdims=keepdims)).astype(np.float32)


def softmax64(x, axis=None) -> np.ndarray:
    e = np.exp(np.asarray(x, np.float64))
    return (e / np.sum(e, axis=axis, keepdims=True)).astype(np.float32)


def log_softmax_mp(x, axis=None) -> np.ndarray:
    """x - log(sum(exp(x))) in mpmath, rounded once to float32 (in float64 the subtraction cancels)."""
    with mpmath.workprec(256):
        mx = to_mpf_array(np.asarray(x, np.float32))
        total = np.sum(np.vectorize(mpmath.exp, otypes=[object])(mx), axis=axis, keepdims=True)
        out = mx - np.vectorize(mpmath.log, otypes=[object])(total)
    return round_to_dtype(out, np.float32)


def assert_close(got: Any, want: Any, max_bits: float = 2.0) -> None:
    """Within ``max_bits`` (≤ 3 ulps at 2 bits): the stable forms round a few times."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (got, want)
    assert np.isfinite(got).all(), got
    assert error_bits(got, want).max() <= max_bits, (got, want)


def line_of(fn, marker: str) -> tuple[str, int]:
    """(file, line) of the line of ``fn``'s source that carries ``# <marker>``."""
    lines, start = inspect.getsourcelines(fn)
    hits = [start + i for i, text in enumerate(lines) if text.rstrip().endswith(f"# {marker}")]
    assert len(hits) == 1
    file = inspect.getsourcefile(fn)
    assert file is not None
    return file, hits[0]


def same_place(location: str | None, file: str, line: int) -> bool:
    assert location is not None
    loc_file, loc_line = location.rsplit(":", 1)
    return os.path.samefile(loc_file, file) and int(loc_line) == line


# ---------------------------------------------------------------------------------- tracing cache
def test_traces_once_per_input_signature():
    traces = []

    def f(x):
        traces.append(x.shape)
        return naive_lse(x)

    g = jst.stabilize(f)
    g(X)
    g(X + 1.0)  # same shape and dtype: cached
    assert len(traces) == 1
    g(np.ones(3, np.float32))  # new shape: traced again
    assert len(traces) == 2
    g(np.ones(3, np.float32))
    assert len(traces) == 2


# ------------------------------------------------------------------------------------ composition
def test_jit_of_stabilize():
    assert_close(jax.jit(jst.stabilize(naive_lse))(X), lse64(X))
    assert not np.isfinite(naive_lse(X))  # the point of the rewrite


def test_stabilize_of_jit():
    assert_close(jst.stabilize(jax.jit(naive_lse))(X), lse64(X))


def test_grad_of_stabilize():
    g = jax.grad(jst.stabilize(naive_lse))(X)
    assert_close(g, softmax64(X))  # d logsumexp = softmax
    assert_close(jax.jit(jax.grad(jst.stabilize(naive_lse)))(X), softmax64(X))


def test_vmap_of_stabilize_and_stabilize_of_vmap():
    xs = np.stack([X, X - 50.0, X[::-1]])
    want = lse64(xs, axis=1)
    assert_close(jax.vmap(jst.stabilize(naive_lse))(xs), want)
    assert_close(jst.stabilize(jax.vmap(naive_lse))(xs), want)
    assert_close(jax.jit(jax.vmap(jst.stabilize(naive_lse)))(xs), want)


def test_stabilize_inside_an_outer_jit_closing_over_a_traced_value():
    @jax.jit
    def outer(x, shift):
        return jst.stabilize(lambda v: naive_lse(v + shift))(x)

    assert_close(outer(X, np.float32(1.0)), lse64(X + np.float32(1.0)))


def test_pytrees_and_keyword_arguments():
    def f(params, *, scale):
        return {"lse": naive_lse(params["x"]) * scale, "sp": (jnp.log(1 + jnp.exp(params["y"])),)}

    y = np.array([90.0, -2.0], np.float32)
    out = jst.stabilize(f)({"x": X, "y": y}, scale=np.float32(2.0))
    assert set(out) == {"lse", "sp"} and isinstance(out["sp"], tuple)
    assert_close(out["lse"], lse64(X) * np.float32(2.0))
    assert_close(out["sp"][0], np.logaddexp(0.0, y.astype(np.float64)).astype(np.float32))


# --------------------------------------------------------------------------------- sub-jaxprs
def test_nested_jit():
    inner = jax.jit(naive_lse)
    outer = jax.jit(lambda x: inner(x) * 2.0)
    assert jst.explain(outer, X).rules == ["logsumexp"]
    assert_close(jst.stabilize(outer)(X), lse64(X) * np.float32(2.0))


def test_scan_body():
    def f(xs):
        def body(carry, row):
            v = naive_lse(row)
            return carry + v, v

        return lax.scan(body, np.float32(0.0), xs)

    xs = np.stack([X, X - 1.0])
    assert jst.explain(f, xs).rules == ["logsumexp"]
    total, ys = jst.stabilize(f)(xs)
    assert_close(ys, lse64(xs, axis=1))
    assert_close(total, np.float32(ys[0] + ys[1]), 0)


def test_while_body():
    def f(x):
        body = lambda c: (c[0] + 1, c[1] + naive_lse(x))
        return lax.while_loop(lambda c: c[0] < 3, body, (0, np.float32(0.0)))[1]

    assert jst.explain(f, X).rules == ["logsumexp"]
    one = lse64(X)
    assert_close(jst.stabilize(f)(X), np.float32(np.float32(one + one) + one))


def test_cond_branches():
    def f(x, pick):
        return lax.cond(pick, naive_lse, lambda v: jnp.log(1 + jnp.exp(v[0])), x)

    assert sorted(jst.explain(f, X, True).rules) == ["logsumexp", "softplus"]
    g = jst.stabilize(f)
    assert_close(g(X, True), lse64(X))
    assert_close(g(X, False), np.float32(np.logaddexp(0.0, np.float64(X[0]))))


@jax.custom_jvp
def user_softplus(x):
    return jnp.log(1 + jnp.exp(x))


@user_softplus.defjvp
def _user_softplus_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    # Deliberately wrong by a factor 7, so a test can tell this rule from JAX's own derivative.
    return user_softplus(x), 7.0 * t


def test_custom_jvp_primal_is_rewritten_and_its_rule_kept():
    x = np.array([100.0, -3.0], np.float32)
    assert not np.isfinite(user_softplus(x)).all()
    assert jst.explain(user_softplus, x).rules == ["softplus"]
    g = jst.stabilize(user_softplus)
    assert_close(g(x), np.logaddexp(0.0, x.astype(np.float64)).astype(np.float32))
    grad = jax.grad(lambda v: jnp.sum(g(v)))(x)
    np.testing.assert_array_equal(grad, np.array([7.0, 7.0], np.float32))  # the user's rule, not sigmoid(x)


# ------------------------------------------------------------------------- what must not match
def test_no_match_when_an_intermediate_has_another_use():
    def f(x):
        e = jnp.exp(x)
        return jnp.log(jnp.sum(e)), e

    assert jst.explain(f, X).rules == []
    lse, e = jst.stabilize(f)(X)
    assert np.isinf(lse) and np.isinf(e[0])  # unchanged program: still overflows


def test_no_match_on_similar_expressions():
    rules = jst.explain(lambda x: jnp.log(jnp.sum(jnp.exp(x)) + 1), X).rules
    assert "logsumexp" not in rules  # log1p(sum(exp(x))) is fine, logsumexp is not
    assert jst.explain(lambda x, y: jnp.exp(x) / jnp.sum(jnp.exp(y)), X, X).rules == []


def test_no_match_when_a_broadcast_lines_elements_up_differently():
    # sum over axis 1 without keepdims, broadcast back along axis 0: a square matrix makes the
    # shapes fit, but this is not a softmax, and rewriting it would change the result.
    a = np.arange(9, dtype=np.float32).reshape(3, 3) / 3
    b = np.arange(3, dtype=np.float32) / 2
    cases = [
        (lambda a, b: jnp.exp(a) / jnp.sum(jnp.exp(a), axis=1), "softmax"),
        (lambda a, b: a - jnp.log(jnp.sum(jnp.exp(a), axis=1)), "log_softmax"),
        (lambda a, b: jnp.log(jnp.exp(a) + jnp.exp(b)[:, None]), "logaddexp"),
        (lambda a, b: jnp.exp(a) / (jnp.exp(a) + jnp.exp(b)[:, None]), "sigmoid_ratio"),
        (lambda a, b: jnp.sqrt(a * a + (b * b)[:, None]), "hypot"),
    ]
    for fn, rule in cases:
        assert rule not in jst.explain(fn, a, b).rules, rule
        np.testing.assert_allclose(jst.stabilize(fn)(a, b), fn(a, b), rtol=1e-6)


# ------------------------------------------------------------------------------ seeing through glue
@pytest.mark.parametrize("axis", [0, 1, (0, 2), None])
@pytest.mark.parametrize("keepdims", [False, True])
def test_any_reduction_axes(axis, keepdims):
    x = (np.arange(24, dtype=np.float32).reshape(2, 3, 4) * 3.5 + 10.0).astype(np.float32)  # to 90.5
    lse = lambda x: jnp.log(jnp.sum(jnp.exp(x), axis=axis, keepdims=keepdims))
    smx = lambda x: jnp.exp(x) / jnp.sum(jnp.exp(x), axis=axis, keepdims=True)
    lsm = lambda x: x - jnp.log(jnp.sum(jnp.exp(x), axis=axis, keepdims=True))
    assert jst.explain(lse, x).rules == ["logsumexp"]
    assert jst.explain(smx, x).rules == ["softmax"]
    assert jst.explain(lsm, x).rules == ["log_softmax"]
    assert_close(jst.stabilize(lse)(x), lse64(x, axis, keepdims))
    assert_close(jst.stabilize(smx)(x), softmax64(x, axis))
    assert_close(jst.stabilize(lsm)(x), log_softmax_mp(x, axis))


def test_reduction_without_keepdims_broadcast_back_along_the_reduced_axis():
    x = np.array([[100.0, 41.0, 2.0], [30.0, 90.0, 5.0]], np.float32)
    f = lambda x: x - jnp.log(jnp.sum(jnp.exp(x), axis=0))  # reduced axis 0 = leading
    assert jst.explain(f, x).rules == ["log_softmax"]
    assert_close(jst.stabilize(f)(x), log_softmax_mp(x, 0))


def test_sees_through_a_same_dtype_convert_element_type():
    f = lambda x: jnp.log(1 + jnp.exp(x).astype(jnp.float32))
    # A Python float argument is weakly typed: astype makes it strong with a same-dtype convert.
    assert "convert_element_type" in str(jax.make_jaxpr(f)(100.0))
    assert jst.explain(f, 100.0).rules == ["softplus"]
    assert_close(jst.stabilize(f)(100.0), np.float32(100.0))


def test_commutative_operands_in_either_order():
    for f in (lambda x: jnp.log(jnp.exp(x) + 1), lambda x: jnp.log(1 + jnp.exp(x))):
        assert jst.explain(f, X).rules == ["softplus"]
    for f in (lambda x: jnp.log(x + 1), lambda x: jnp.log(1 + x)):
        assert jst.explain(f, X).rules == ["log1p"]
    for f in (lambda a, b: jnp.exp(a) / (jnp.exp(b) + jnp.exp(a)),
              lambda a, b: jnp.exp(a) / (jnp.exp(a) + jnp.exp(b))):
        assert jst.explain(f, X, X).rules == ["sigmoid_ratio"]
    # mul, through a user rule: 0.5 * exp(x) and exp(x) * 0.5
    half_exp = Rule("half_exp", p.op("mul", p.const(0.5), p.op("exp", p.var("x"))),
                    lambda x: jnp.exp(x - jnp.log(2.0)))
    for f in (lambda x: 0.5 * jnp.exp(x), lambda x: jnp.exp(x) * 0.5):
        assert jst.explain(f, X, rules=[half_exp]).rules == ["half_exp"]


# ------------------------------------------------------------------------------- order and fixpoint
def test_softplus_wins_over_log1p():
    assert jst.explain(lambda x: jnp.log(1 + jnp.exp(x)), X).rules == ["softplus"]


def test_log_softmax_wins_over_logsumexp():
    assert jst.explain(lambda x: x - jnp.log(jnp.sum(jnp.exp(x))), X).rules == ["log_softmax"]


def test_rewriting_reaches_a_fixed_point():
    f = lambda x: jnp.log(1 + jnp.exp(jnp.log(jnp.sum(jnp.exp(x)))))  # nested patterns
    assert sorted(jst.explain(f, X).rules) == ["logsumexp", "softplus"]
    assert jst.explain(jst.stabilize(f), X).rules == []  # nothing left to rewrite
    assert_close(jst.stabilize(f)(X), np.float32(np.logaddexp(0.0, np.float64(lse64(X)))))


# --------------------------------------------------------------------------------- source info
def located(x):
    return jnp.log(1 + jnp.exp(x)) * 2.0  # LOCATED


def test_explain_reports_the_users_line():
    file, line = line_of(located, "LOCATED")
    explanation = jst.explain(located, X)
    assert explanation.rules == ["softplus"]
    assert same_place(explanation[0].location, file, line)
    text = str(explanation)
    assert "softplus" in text and f"{os.path.basename(file)}:{line}" in text
    assert "- log(add(1, exp(x)))" in text  # before
    assert "\n    + " in text and "logaddexp" in text  # after: the stable form, rendered


def test_rewritten_equations_keep_the_users_line():
    file, line = line_of(located, "LOCATED")
    closed = jax.make_jaxpr(jst.stabilize(located))(X)
    new = [e for e in _compat.eqns(closed) if "jaxstab_" in _compat.name_stack(e)]
    assert new, "the replacement's equations carry the rule's scope"
    for eqn in new:
        assert same_place(_compat.location(eqn), file, line), _compat.primitive_name(eqn)


def test_explain_of_nothing():
    explanation = jst.explain(lambda x: x * 2.0, X)
    assert explanation == [] and str(explanation) == "no rewrite applies"


# ------------------------------------------------------------------------------------ user rules
def _normalized_squares() -> Rule:
    """x² / sum(x²) rewritten as y² / sum(y²), y = x / max|x| (no overflow of the squares)."""
    x = p.var("x", where=lambda aval: aval.ndim >= 1)  # predicate on the operand
    sq = p.op("mul", x, x, name="sq")  # shared sub-term: the same x*x in both places
    pattern = p.op("div", sq, p.op("reduce_sum", sq, axes=p.param("axes")))  # captured param

    def replacement(x, axes):  # ordinary JAX code
        m = jnp.max(jnp.abs(x), axis=axes, keepdims=True)
        y = x / m
        return y * y / jnp.sum(y * y, axis=axes, keepdims=True)

    return Rule("test_normalized_squares", pattern, replacement,
                where=lambda m: len(m.captures["axes"]) == 1)  # predicate on the match


def test_user_rule_passed_directly():
    rule = _normalized_squares()
    f = lambda x: x * x / jnp.sum(x * x, axis=-1, keepdims=True)
    x = np.array([[3e20, 4e20], [1.0, 2.0]], np.float32)  # (3e20)² overflows float32
    assert not np.isfinite(f(jnp.asarray(x))).all()
    assert jst.explain(f, x, rules=[rule]).rules == ["test_normalized_squares"]
    x64 = x.astype(np.float64)
    want = (x64**2 / np.sum(x64**2, -1, keepdims=True)).astype(np.float32)
    assert_close(jst.stabilize(f, rules=[rule])(x), want)
    # The predicates hold it back: two axes (where=), a scalar (Var where=), different squares.
    assert jst.explain(lambda x: x * x / jnp.sum(x * x), x, rules=[rule]).rules == []
    assert jst.explain(lambda s: s * s / jnp.sum(s * s), np.float32(2.0), rules=[rule]).rules == []
    assert jst.explain(lambda x: x * x / jnp.sum(x * x + 0.0, axis=-1, keepdims=True), x,
                       rules=[rule]).rules == []


def test_user_rule_registered_by_name():
    rule = jst.rewrites.register(_normalized_squares(), replace=True)
    assert jst.rewrites.get("test_normalized_squares") is rule
    f = lambda x: x * x / jnp.sum(x * x, axis=0)
    x = np.array([3e20, 4e20], np.float32)
    assert jst.explain(f, x, rules=["test_normalized_squares"]).rules == ["test_normalized_squares"]
    g = jst.stabilize(f, rules=["test_normalized_squares", "logsumexp"])  # names and built-ins mix
    assert_close(g(x), np.array([0.36, 0.64], np.float32))
    with pytest.raises(ValueError, match="already registered"):
        jst.rewrites.register(_normalized_squares())


def test_exclude():
    f = lambda x: jnp.log(1 + jnp.exp(x))
    assert jst.explain(f, X, exclude=["softplus"]).rules == ["log1p"]  # the next rule in line
    assert jst.explain(f, X, exclude=("softplus", "log1p")).rules == []
    g = jst.stabilize(f, exclude=[jst.rewrites.get("softplus"), "log1p"])
    assert np.isinf(g(X)[0])


def test_unknown_rule_name_is_a_clear_key_error():
    with pytest.raises(KeyError, match=r"unknown rewrite rule 'softplsu'.*known rules: .*softplus"):
        jst.stabilize(naive_lse, rules=["softplsu"])
    with pytest.raises(KeyError, match="unknown rewrite rule 'nope'"):
        jst.explain(naive_lse, X, exclude=["nope"])


# ------------------------------------------------------------------------------------ trace errors
def python_branch(x):
    if x.sum() > 0:  # Python control flow on a traced value
        return x
    return -x


def test_untraceable_function_gives_a_short_trace_error():
    for call in (lambda: jst.stabilize(python_branch)(X), lambda: jst.explain(python_branch, X)):
        with pytest.raises(jst.TraceError) as info:
            call()
        message = str(info.value)
        assert "python_branch" in message
        assert "TracerBoolConversionError" in message  # JAX's reason
        assert "Hint:" in message and "lax.cond" in message
        assert len(message.splitlines()) < 15
