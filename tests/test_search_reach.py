"""The search reaches library code (issue 47): closed-over arrays, index masks, piecewise and special
operators, and their identities.

References are mpmath's or the exact oracle's (an interpreter independent of the term evaluator), never
the code under test's own output.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import jax.scipy.special as jss
import mpmath
import numpy as np
import pytest

import pytest_jaxstab as jst
from pytest_jaxstab import oracles
from pytest_jaxstab._check._trace import x64_scope
from pytest_jaxstab._search._expr import OPS, Table, evaluate_jax, evaluate_mp, is_array_program, subterms
from pytest_jaxstab._search._judge import jax_function
from pytest_jaxstab._search._lower import Unsupported, lower, lower_program
from pytest_jaxstab._search._rules import RULES, Rule, parse
from pytest_jaxstab._search._rules_special import SPECIAL_SOURCE

F64 = np.dtype(np.float64)


def _term(fn, *shapes):
    return lower_program(jax.make_jaxpr(fn)(*(jnp.ones(s, jnp.float32) for s in shapes)))[0]


def _ops(term):
    return {t[0] for t in subterms(term)}


# --- the term evaluator's exact values of the new operators, against the oracle's --------------------

#: Operator -> (arity, sampler of one operand tuple): points inside each function's real domain.
_DOMAINS = {
    "i0": (1, lambda r: (r.uniform(-30, 30),)), "i1": (1, lambda r: (r.uniform(-30, 30),)),
    "i0e": (1, lambda r: (r.uniform(-300, 300),)), "i1e": (1, lambda r: (r.uniform(-300, 300),)),
    "gammainc": (2, lambda r: (r.uniform(0.1, 20), r.uniform(0, 30))),
    "gammaincc": (2, lambda r: (r.uniform(0.1, 20), r.uniform(0, 30))),
    "betainc": (3, lambda r: (r.uniform(0.2, 8), r.uniform(0.2, 8), r.uniform(0, 1))),
    "floor": (1, lambda r: (r.uniform(-5, 5),)), "ceil": (1, lambda r: (r.uniform(-5, 5),)),
    "round_even": (1, lambda r: (r.choice([r.uniform(-5, 5), r.integers(-5, 5) + 0.5]),)),
    "round_away": (1, lambda r: (r.choice([r.uniform(-5, 5), r.integers(-5, 5) + 0.5]),)),
    "sign": (1, lambda r: (r.choice([r.uniform(-5, 5), 0.0]),)),
    "ndtr": (1, lambda r: (r.choice([r.uniform(-5, 5), r.uniform(-38, -5)]),)),
}


@pytest.mark.parametrize("name", sorted(_DOMAINS))
def test_new_operators_exact_values_match_the_oracle(name):
    # evaluate_mp (the search's exact semantics) and the oracle's exact evaluation of the operator's JAX
    # form, both correctly rounded to float64, must be the same float at every point (0 ULPs: two
    # roundings of one real number).
    arity, draw = _DOMAINS[name]
    rng = np.random.default_rng(7)
    points = [draw(rng) for _ in range(12)]
    args = [np.array([p[i] for p in points], np.float64) for i in range(arity)]
    term = (name, *(("var", i) for i in range(arity)))
    with x64_scope(F64):
        ref = oracles.evaluate(lambda *a: evaluate_jax(term, a, np.float64), *args, dtype=np.float64)
    vals, certain = np.asarray(ref.values), np.asarray(ref.certain)
    assert certain.sum() >= 10
    with mpmath.workdps(40):
        mine = np.array([float(evaluate_mp(term, [mpmath.mpf(float(a[i])) for a in args]))
                         for i in range(len(points))])
    assert np.array_equal(mine[certain], vals[certain]), (name, mine[certain], vals[certain])


def test_boolean_operators_decide_like_numpy():
    x = np.array([-1.0, 0.0, 2.0, np.inf, -np.inf, np.nan])
    term = ("and", ("isfinite", ("var", 0)), ("not", ("lt", ("var", 0), ("const", 0.0))))
    want = np.isfinite(x) & ~(x < 0)
    assert np.array_equal(np.asarray(evaluate_jax(term, [jnp.asarray(x)], np.float64)), want)
    assert [evaluate_mp(term, [mpmath.mpf(float(v))]) for v in x[:5]] == list(want[:5])
    assert evaluate_mp(("or", ("const", 0.0), ("const", 1.0)), []) is True


# --- identities: values by tests/test_search_rules.py, gradients here --------------------------------

_NEW = {name for entries in SPECIAL_SOURCE.values() for name, *_ in entries}
_NEW_RULES = [r for r in RULES if r.name.removesuffix("-rev") in _NEW]


def test_every_new_identity_is_a_rule_checked_by_the_rule_test():
    # tests/test_search_rules.py checks every rule of RULES (values, exact oracle, random points).
    assert {r.name.removesuffix("-rev") for r in _NEW_RULES} == _NEW
    assert {"i0", "i0e", "gammainc", "gammaincc", "betainc", "erfc", "max", "sign"} <= {
        op for r in _NEW_RULES for op in _ops(r.lhs) | _ops(r.rhs)}


def _rename(t):
    if t[0] == "pvar":
        return ("var", "abcd".index(t[1]))
    return t if t[0] == "const" else (t[0], *(_rename(c) for c in t[1:]))


def _grad_points(rule):
    """Points inside the identity's domain: positive parameters, betainc's x in (0, 1)."""
    rng = np.random.default_rng(3)
    n = 16
    if "betainc" in repr(rule.lhs) + repr(rule.rhs):
        return [rng.uniform(0.5, 6, n), rng.uniform(0.5, 6, n), rng.uniform(0.05, 0.95, n), np.ones(n)]
    if "gamma" in repr(rule.lhs) + repr(rule.rhs):
        return [rng.uniform(0.5, 8, n), rng.uniform(0.2, 12, n), np.ones(n), np.ones(n)]
    return [np.concatenate([rng.uniform(0.1, 20, n // 2), rng.uniform(-20, -0.1, n // 2)])
            for _ in range(4)]


#: Derivative programs are JAX's own formulas (custom JVPs, the incomplete gamma's series in ``a``),
#: evaluated exactly by the oracle: two exact derivatives of one function agree to rounding, and a
#: series truncated inside JAX's rule to about float64's precision; a false identity is off by far more.
_GRAD_REL = 2.0 ** -40


def _gradients_compared(rule):
    """(operands whose derivative was compared, operands where the two sides' derivatives differ)."""
    left, right = _rename(rule.lhs), _rename(rule.rhs)
    used = sorted({t[1] for t in subterms(left) if t[0] == "var"})
    points = _grad_points(rule)
    checked, differing = 0, []
    for i in used:
        sides = []
        for side in (left, right):
            def d(*a, t=side, i=i):
                return jax.vmap(jax.grad(lambda *b: evaluate_jax(t, b, np.float64), argnums=i))(*a)
            try:
                with x64_scope(F64):
                    sides.append(oracles.evaluate(d, *points, dtype=np.float64))
            except Exception:  # JAX has no derivative in this operand (betainc's a, b)
                sides = []
                break
        if not sides:
            continue
        lv, rv = (np.asarray(s.values) for s in sides)
        ok = (np.asarray(sides[0].certain) & np.asarray(sides[1].certain) & np.isfinite(lv) & np.isfinite(rv))
        if ok.sum() < 4:
            continue
        checked += 1
        scale = np.maximum(np.abs(lv[ok]), np.abs(rv[ok]))
        if not np.all(np.abs(lv[ok] - rv[ok]) <= _GRAD_REL * np.maximum(scale, 1e-300)):
            differing.append(i)
    return checked, differing


@pytest.mark.parametrize("rule", _NEW_RULES, ids=[r.name for r in _NEW_RULES])
def test_new_identity_gradients_agree(rule):
    checked, differing = _gradients_compared(rule)
    assert not differing, f"{rule.name}: the derivatives differ in operands {differing}"
    if rule.lhs[0] != "where":  # a where's condition has no derivative
        assert checked >= 1, f"{rule.name}: no operand with a derivative on both sides"


def test_the_gradient_check_catches_a_false_identity():
    # exp(x) i0e(x) is I0(x) only for x >= 0 (the scaling is by exp(|x|)): half the points are negative.
    wrong = Rule("i0-scaled-unsigned", "special", parse("(i0 a)"), parse("(mul (exp a) (i0e a))"))
    checked, differing = _gradients_compared(wrong)
    assert checked == 1 and differing == [0]


# --- lowering: library code becomes terms that compute the same --------------------------------------

_LIBRARY = {
    "clip": (lambda x: jnp.clip(x, -1.0, 2.0), {"min", "max"}),
    "floor-ceil-round": (lambda x: jnp.floor(x) + jnp.ceil(x) + jnp.round(x) + jax.lax.round(x),
                         {"floor", "ceil", "round_even", "round_away"}),
    "sign": (lambda x: jnp.sign(x) * x, {"sign"}),
    "isfinite-and-not": (lambda x: jnp.where(jnp.isfinite(x) & ~(x < -1.0), x, 0.0),
                         {"isfinite", "and", "not"}),
    "or": (lambda x: jnp.where((x < -1.0) | (x > 1.0), 1.0, x), {"or"}),
    # JAX 0.12 names i0's call (the operator i0); 0.10.2 inlines exp(|x|) * i0e(x): either way an operator
    "i0": (lambda x: jnp.log(jss.i0(x)), {"i0"} if hasattr(jax.lax, "polynomial") else {"i0e", "exp"}),
    "i1e": (lambda x: jss.i1e(x) + jss.i0e(x), {"i1e", "i0e"}),
    "gammainc": (lambda x: jss.gammaincc(2.5, jnp.abs(x)) + jss.gammainc(1.5, jnp.abs(x)),
                 {"gammainc", "gammaincc"}),
    "betainc": (lambda x: jss.betainc(2.0, 3.0, jax.nn.sigmoid(x)), {"betainc"}),
    "polynomial": (lambda x: jax.lax.polynomial(x, [1.0, 5.0, 2.0, -0.5]), {"add", "mul"}),
    # JAX 0.12.1 calls ndtr (the operator); 0.10.2 inlines its erfc form
    "ndtr": (lambda x: jss.ndtr(x), {"ndtr"} if hasattr(jax.lax, "polynomial") else {"erfc"}),
}


#: Compiling the incomplete gamma and beta functions takes seconds: slow tier.
_SLOW_COMPILE = {"gammainc", "betainc"}


@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.slow) if c in _SLOW_COMPILE else c
                                  for c in sorted(_LIBRARY)])
def test_library_operations_lower_to_operators_that_compute_the_same(case):
    if case == "polynomial" and not hasattr(jax.lax, "polynomial"):
        pytest.skip("jax.lax.polynomial arrived after JAX 0.10.2")
    fn, ops = _LIBRARY[case]
    term = _term(fn, ())
    assert ops <= _ops(term)
    x = np.random.default_rng(1).uniform(-4, 4, 64).astype(np.float32)
    x[:4] = [0.5, -1.5, 2.5, 0.0]  # halves: the two roundings differ there
    want = np.asarray(jax.jit(fn)(x))
    got = np.asarray(jax.jit(jax_function(term, np.float32))(x))
    # Same operations in the same order: the same floats, up to XLA fusing them differently (4 ULPs).
    np.testing.assert_array_max_ulp(got, want, maxulp=4)


def test_a_closed_over_array_is_a_constant_leaf_judged_on_whole_arrays():
    w = np.array([0.5, 1.0, 2.0, 4.0], np.float32)
    term = _term(lambda x: jnp.log(1 + jnp.exp(x - w)), (4,))
    tables = [t[1] for t in subterms(term) if t[0] == "const" and isinstance(t[1], Table)]
    assert [tables[0].values] == [tuple(float(v) for v in w)] and tables[0].shape == (4,)
    assert is_array_program(term)
    # The scalar lowering (per point, no positions) still refuses it, saying what it is.
    with pytest.raises(Unsupported, match="non-uniform array constant"):
        lower(jax.make_jaxpr(lambda x: x * w)(jnp.ones(4)))


_W = np.random.default_rng(5).normal(size=(4, 3)).astype(np.float32)
_C = np.random.default_rng(6).normal(size=(4, 1)).astype(np.float32)
#: Programs over closed-over arrays (a weight matrix, a column of offsets, one row as a fixed point).
_CLOSED = {
    "weighted-sum": (lambda x: jnp.sum(_W * x), (3,)),
    "matvec": (lambda x: _W @ x, (3,)),
    "column-offsets": (lambda x: jnp.log(jnp.sum(jnp.exp(x + _C), axis=1)), (4, 3)),
    "distances": (lambda x: jnp.sqrt(jnp.sum((x - _W) ** 2, axis=-1)), (3,)),
    "one-row": (lambda x: jnp.exp(-jnp.sum((x - _W[1]) ** 2)), (3,)),
    "slices": (lambda x: x * _W.T[:, 1] + _W[:, 1:3].sum() + jnp.concatenate([_W[0, :2], _W[2, 2:]]), (3,)),
}


@pytest.mark.parametrize("case", sorted(_CLOSED))
def test_closed_over_arrays_lower_to_terms_that_compute_the_same(case):
    fn, shape = _CLOSED[case]
    term = _term(fn, shape)
    assert is_array_program(term)
    if case == "slices":  # moving a constant's elements rounds nothing: folded to constants
        assert not any(t[0].startswith(("sel_", "concatenate")) for t in subterms(term))
    out_shape = jax.eval_shape(fn, jnp.ones(shape, jnp.float32)).shape
    xs = np.random.default_rng(2).normal(size=(6, *shape)).astype(np.float32)
    want = np.stack([np.asarray(fn(x)) for x in xs])
    got = np.asarray(jax.vmap(jax_function(term, np.float32, out_shape))(xs))
    # The constants' exact values in the same operations: the same floats up to XLA's fusion (4 ULPs),
    # except where a sum's terms cancel: XLA's dot and a reduce_sum may add them in other orders (and
    # fuse the products, FMA), and two orders of n terms differ by up to n ulps of the sum of their
    # magnitudes (Higham's gamma_{n-1} bound, both ways, plus the products' rounding), not of the result
    # (49 ULPs of the result on one CPU for matvec).
    bound = 4 * np.spacing(np.abs(want))
    if case in _TERMS:
        magnitude, n = _TERMS[case]
        bound = np.maximum(bound, n * np.spacing(np.stack([magnitude(x) for x in xs])))
    assert np.all(np.abs(got - want) <= bound), (got, want, bound)


#: The cancelling sums among _CLOSED: the sum of their terms' magnitudes, and how many terms.
_TERMS = {
    "weighted-sum": (lambda x: np.sum(np.abs(_W * x)), _W.size),
    "matvec": (lambda x: np.abs(_W) @ np.abs(x), _W.shape[1]),
}


def test_an_index_mask_is_folded_to_a_constant():
    term = _term(lambda x: jnp.sum(jnp.where(jnp.arange(5) < 2, x, 0.0)), (5,))
    (mask,) = [t[1] for t in subterms(term) if t[0] == "const" and isinstance(t[1], Table)]
    assert mask.values == (1.0, 1.0, 0.0, 0.0, 0.0)
    # nextafter of constants is folded; of a computed value, an operator the oracle judges.
    assert _ops(_term(lambda x: jnp.nextafter(x, 2.0), ())) == {"nextafter", "var", "const"}
    assert _term(lambda x: x * jnp.nextafter(jnp.float32(1), jnp.float32(2)), ()) == (
        "mul", ("var", 0), ("const", float(np.nextafter(np.float32(1), np.float32(2)))))


@pytest.mark.parametrize(("fn", "word"), [
    (lambda x: jnp.sort(x) * x, "sort"),
    (lambda x: jnp.cumsum(x) * x, "cumsum"),
    (lambda x: x * (jnp.asarray(x > 0, jnp.int32) & 1).astype(jnp.float32), "int32"),
])
def test_what_is_still_refused_names_the_primitive(fn, word):
    with pytest.raises(Unsupported, match=word):
        _term(fn, (3,))


# --- the search end to end ---------------------------------------------------------------------------

def _bits(got, want):
    return np.log2(1 + np.abs(got - want) / np.maximum(np.abs(want), 1e-300) / 2.0 ** -23)


@pytest.mark.slow
def test_improve_over_closed_weights_runs_with_their_real_values():
    # softplus(x - w) written log(1 + exp(x - w)), w a fixed array of offsets (a layer's biases): searched
    # as an array program, and the offer computes with w's values (mpmath's reference, float32 inputs).
    w = np.array([0.5, -1.0, 2.0, 8.0], np.float32)
    fn = lambda x: jnp.log(1 + jnp.exp(x - w))
    imp = jst.improve(fn, shapes=[(4,)], dtype="float32", time_limit=10)
    assert imp.improved, imp.status
    assert "8.0" in imp.source and "0.5" in imp.source
    x = np.array([-40.0, -20.0, 3.0, 60.0], np.float32)
    want = np.array([float(mpmath.log1p(mpmath.exp(mpmath.mpf(float(a)) - float(b)))) for a, b in zip(x, w)])
    assert np.all(_bits(np.asarray(imp.fn(jnp.asarray(x)), np.float64), want) <= 2.0)  # 2 bits: one op


@pytest.mark.slow
def test_improve_takes_a_closed_over_mask_with_minus_infinity():
    # log(sum(where(m, exp(x), 0))) over a fixed boolean mask (padding): the masked log-sum-exp, which
    # puts -inf at the dropped entries; judged against mpmath's log-sum-exp of the kept entries.
    m = np.array([True, True, False, True, False])
    imp = jst.improve(lambda x: jnp.log(jnp.sum(jnp.where(m, jnp.exp(x), 0.0))), shapes=[(5,)],
                      dtype="float32", time_limit=10)
    assert imp.improved, imp.status
    x = np.array([-120.0, -130.0, 0.0, -125.0, 50.0], np.float32)
    with mpmath.workdps(30):
        want = float(mpmath.log(mpmath.fsum(mpmath.exp(float(v)) for v, k in zip(x, m) if k)))
    assert _bits(np.float64(imp.fn(jnp.asarray(x))), want) <= 2.0  # a log-sum-exp of three: 2 bits


@pytest.mark.slow
def test_improve_rescales_the_log_of_a_bessel_function():
    # log(i0(x)) overflows for |x| > 88 in float32; |x| + log(i0e(x)) does not.
    imp = jst.improve(lambda x: jnp.log(jss.i0(x)), shapes=[()], dtype="float32", time_limit=10)
    assert imp.improved, imp.status
    x = np.array([100.0, -300.0, 1000.0, 0.5], np.float32)
    with mpmath.workdps(30):
        want = np.array([float(mpmath.log(mpmath.besseli(0, float(v)))) for v in x])
    assert np.all(_bits(np.asarray(imp.fn(jnp.asarray(x)), np.float64), want) <= 3.0)  # a sum of two


def _truncated_normal_log_mass(scale):
    # numpyro's TwoSidedTruncatedDistribution(Normal(1.35, scale), low=-20, high=-1) before its fix
    # (pyro-ppl/numpyro#1492): log(cdf(high) - cdf(low)), both CDFs underflow for a small scale
    return jnp.log(jss.ndtr((-1.0 - 1.35) / scale) - jss.ndtr((-20.0 - 1.35) / scale))


@pytest.mark.slow
def test_improve_takes_the_log_of_a_difference_of_normal_cdfs_into_log_space():
    imp = jst.improve(_truncated_normal_log_mass, shapes=[()], dtype="float32", domain=(0.01, 10.0),
                      time_limit=20)
    assert imp.improved, imp.status
    scale = np.array([0.01, 0.05, 0.1, 0.5, 2.0, 9.0], np.float32)
    with mpmath.workdps(60):
        want = np.array([float(mpmath.log(mpmath.ncdf((-1 - mpmath.mpf(1.35)) / float(s))
                                          - mpmath.ncdf((-20 - mpmath.mpf(1.35)) / float(s))))
                         for s in scale])
    got = np.asarray(imp.fn(jnp.asarray(scale)), np.float64)
    assert not np.isfinite(np.asarray(_truncated_normal_log_mass(jnp.asarray(scale)))).all()  # as written
    # a sum of three rounded terms and log_ndtr's own few ulps: 4 bits (16 ulps) at every scale
    assert np.all(_bits(got, want) <= 4.0), (got, want)


def test_the_operator_table_has_each_new_operator_once():
    assert {"i0", "i1", "i0e", "i1e", "gammainc", "gammaincc", "betainc", "floor", "ceil", "round_even",
            "round_away", "sign", "isfinite", "and", "or", "not", "ndtr"} <= set(OPS)
