"""Every alternative of every rule is sound, as Herbie tests its rule database (issue 38).

``jst.verify_rule`` builds, for each alternative of a rule's pattern, the smallest program that
matches it (or takes one of the rule's examples), runs it under jit, vmap, grad, inside a sum and with
the matched intermediate used elsewhere, and checks with the exact oracle that the rewritten program is
never worse than the program as written beyond rounding (``_check/_verify.py``: more than 2 bits past
the original's error and 5 bits in all, beyond what the problem's conditioning explains, or
non-finite where the original is finite). The catalogue is enumerated here, so a new rule or a new
alternative is checked without anyone listing it: one that has no program fails.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import pytest_jaxstab as jst
from pytest_jaxstab import _compat
from pytest_jaxstab._check._verify import Verification, _fires
from pytest_jaxstab.rewrites import PERFORMANCE, STABILITY, STABILITY_FAST, Rule, get, registered
from pytest_jaxstab.rewrites import pattern as p
from pytest_jaxstab.rewrites.engine._instances import alternatives
from pytest_jaxstab.rewrites.engine._pattern import AnyOf, Op, Param
from pytest_jaxstab.rewrites.forms._stats import exp_scaled

OLD_JAX = tuple(int(v) for v in jax.__version__.split(".")[:2]) < (0, 11)
# The mean rule is opt-in but registered: users name it, so it is held to the same rule.
CATALOGUE = list(dict.fromkeys([*STABILITY, *STABILITY_FAST, *PERFORMANCE, registered()["mean"]]))


# Alternatives no program of a JAX generation contains: jax 0.10 inlines ndtri into its own equations
# (newer JAX calls it), so ndtri_complement's call spelling cannot be built there; it is on newer JAX,
# where this set is empty and every alternative must be built.
NOT_ON_THIS_JAX = {("ndtri_complement", "custom_jvp_call(sub(1.0, p))")} if OLD_JAX else set()
# Likewise the calls of library functions that only some releases make (jax 0.12.1 calls logsumexp
# and softmax; 0.10 and 0.12.0 inline them, or call softmax with a second operand where
# jax_softmax_custom_jvp is set): asked of the running JAX, not of its version, so an alternative is
# excused only where this JAX lowers the function another way, and every call this JAX makes must
# be built (on 0.12.1 all but the older softmax call's).
LIBRARY = {"logsumexp": jax.nn.logsumexp, "softmax": jax.nn.softmax, "log_softmax": jax.nn.log_softmax}


def _lowered_calls():
    """``(function, operands)`` of the library calls this JAX makes for LIBRARY's functions."""
    found = set()
    for name, fn in LIBRARY.items():
        closed = jax.make_jaxpr(fn)(jnp.ones((4, 8), jnp.float32))
        found |= {(name, len(e.invars)) for _, e in _compat.walk(closed)
                  if _compat.library_function(e) == name}
    return found


CALLED = _lowered_calls()


def _makes_a_call(fn, prim):
    """Whether this JAX's trace of ``fn`` holds a ``prim`` equation (a call of its own, not inlined)."""
    closed = jax.make_jaxpr(fn)(jnp.ones(8, jnp.float32))
    return any(e.primitive.name == prim for _, e in _compat.walk(closed))


# jax 0.10 inlines ndtr and ndtri into the caller's equations (0.12.1 calls them): the patterns' call
# spellings (`{tag}lib=True`: ndtr's; normal_interval_quantile's root: ndtri's) cannot be built there
NDTR_CALLED = _makes_a_call(jax.scipy.special.ndtr, "jit")
NDTRI_CALLED = _makes_a_call(jax.scipy.special.ndtri, "custom_jvp_call")


def _fires_on_jax_log_ndtr():
    rule = registered()["log_normal_cdf"]
    return _fires(rule.name, jax.scipy.special.log_ndtr, [rule], [jax.ShapeDtypeStruct((8,), jnp.float32)])


# Alternatives no program of any JAX makes the rule fire on, each for a stated reason (the pattern
# holds them for the rules that build on it):
# - normal_cdf alone on JAX's own ndtr call: its gate leaves the call alone (jax 0.12.1's is as
#   accurate as the form); the call is matched for the complement and for log Φ, checked there;
# - log_normal_mass's sign as a `jnp.where` call beside a Φ spelled with a float64 constant: under x64
#   `jnp.where(c, 1.0, -1.0)` is a weak float64 that JAX converts before the product, so the product
#   the pattern names is not there (the rule's gap on x64 programs; float32 programs are checked).
NEVER_FIRES = {("normal_cdf", "jit|pjit(px, plib=True)")}
# JAX's log_ndtr, a custom_jvp call: inaccurate in jax 0.10 to 0.12.0 and replaced there; 0.12.1's
# (the call inside a jit) is accurate, and the gate leaves it alone (`_stability_special._jax_own`)
if not _fires_on_jax_log_ndtr():
    NOT_ON_THIS_JAX |= {("log_normal_cdf", "custom_jvp_call(lx)")}


def _where_sign_beside_x64(rule, alt):
    return (rule.name == "log_normal_mass" and alt.pattern.startswith("log(mul(jit|pjit(sc, st, sf)")
            and "convert_element_type" in alt.pattern)


def _library_calls(tree):
    """The ``(function, operands)`` library calls an alternative's tree names (``library_axes``)."""
    found, stack = set(), [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, Op):
            stack.extend(node.args)
            found.update(getattr(v.read, "library", None) for _, v in node.params if isinstance(v, Param))
    return found - {None}


def _absent(rule, alt):
    """Whether no program of this JAX can hold the alternative, or the rule never fires on it (see
    NOT_ON_THIS_JAX, NEVER_FIRES, CALLED)."""
    if (rule.name, alt.pattern) in NOT_ON_THIS_JAX | NEVER_FIRES or _where_sign_beside_x64(rule, alt):
        return True
    if not NDTR_CALLED and "lib=True" in alt.pattern:
        return True
    ndtri_call = rule.name == "normal_interval_quantile" and alt.pattern.startswith("custom_jvp_call(")
    if not NDTRI_CALLED and ndtri_call:
        return True
    return rule.pattern is not None and bool(_library_calls(alternatives(rule.pattern)[alt.index]) - CALLED)




def _verify(rule, **options):
    # a composable rule is judged among the rules that continue its result, as jst.stabilize applies it
    return jst.verify_rule(rule, companions=STABILITY if rule.composable else (), **options)


# `make test` (the fast tier): the first alternative of each rule judged in value (`jit`) and
# derivative (`grad`), the two contexts that read the rule's mathematics; CI's slow tier (`make
# test-slow`) runs every alternative in those and inside a `sum` and with the matched intermediate
# `shared` (how the engine splices a replacement into its surroundings, which depends on the
# alternative's nodes), so every alternative is checked in them before a change lands. Every context
# runs batched over its inputs (`vmap(stabilize(f))`); the `vmap` context, the rewrite of the batched
# program (`stabilize(vmap(f))`), is checked per rule in both orders by test_rules_in_transforms.py,
# not per alternative here: it was a quarter of the slow tier's largest test (issue 48).
FAST_CONTEXTS = ("jit", "grad")
SLOW_CONTEXTS = ("jit", "grad", "sum", "shared")


@pytest.mark.parametrize("rule", CATALOGUE, ids=lambda r: r.name)
def test_the_first_alternative_of_every_rule_is_sound_in_value_and_gradient(rule):
    report = _verify(rule, alternatives=[0], contexts=FAST_CONTEXTS)
    assert report.unsound == [], str(report)
    if report.alternatives and not _absent(rule, report.alternatives[0]):
        assert report.alternatives[0].status == "sound", str(report)


#: Alternatives per slow-tier test: a rule with more is checked in several tests of this many, so that
#: pytest-xdist shares one rule's alternatives out (normal_interval_quantile's 25 took 244 s in one
#: test, which, started late, was the slow tier's last 4 minutes on one worker; issue 48).
CHUNK = 8


def _chunks():
    for rule in CATALOGUE:
        n = 1 if rule.pattern is None else len(alternatives(rule.pattern))
        if n <= CHUNK:
            yield pytest.param(rule, None, id=rule.name)
            continue
        for start in range(0, n, CHUNK):
            stop = min(n, start + CHUNK)
            yield pytest.param(rule, list(range(start, stop)), id=f"{rule.name}[{start}-{stop - 1}]")


@pytest.mark.slow
@pytest.mark.parametrize(("rule", "which"), list(_chunks()))
def test_every_alternative_of_every_rule_is_sound_in_value_gradient_sum_and_shared(rule, which):
    n = 1 if rule.pattern is None else len(alternatives(rule.pattern))
    chosen = list(range(n)) if which is None else which
    # The first alternative in value and gradient is test_the_first_alternative_...'s (the fast tier's,
    # or the slow tier's for the costliest rules, conftest.SLOW_ONLY): here it runs in the contexts
    # that test leaves out; CI runs both tiers, so every alternative is checked in all four.
    found = []
    if 0 in chosen:
        first = _verify(rule, contexts=[c for c in SLOW_CONTEXTS if c not in FAST_CONTEXTS], alternatives=[0])
        found += [a for a in first.alternatives if not _fired_nowhere(a)]
    if len(chosen) > (0 in chosen):
        found += _verify(rule, contexts=SLOW_CONTEXTS, alternatives=[i for i in chosen if i]).alternatives
    _assert_sound(rule, Verification(rule.name, found), first_only=chosen == [0])


def _fired_nowhere(alt):
    # the rule fires in the first alternative's program (its own test asserts it sound in jit and grad)
    # but in no context here: no intermediate to share, and no match inside a sum
    return alt.status == "not checked" and alt.detail == "the rule fired in no context"


def _assert_sound(rule, report, first_only=False):
    assert report.unsound == [], str(report)
    missing = [a for a in report.not_built if not _absent(rule, a)]
    assert missing == [], str(report)
    if first_only and not report.alternatives:
        return
    checked = [a for a in report.alternatives if a.status == "sound"]
    if all(_absent(rule, a) for a in report.alternatives):
        pytest.skip(f"{rule.name}: no program of jax {jax.__version__} holds its pattern (NOT_ON_THIS_JAX)")
    assert checked, f"no alternative of {rule.name} was checked:\n{report}"


# ------------------------------------------------------------------ the verifier finds a wrong rule
_E = p.op("exp", p.var("a"), name="e", recompute=True)


def _fallthrough(a, k=None, c=None, **_):
    # the exp_power defect as shipped: its mul and square alternatives captured no power, so they
    # fell through to the sqrt case's 0.5
    return exp_scaled(a, float(k if k is not None else (c if c is not None else 0.5)))


FALLTHROUGH = Rule("fallthrough_exp_power", p.any_of(
    p.op("integer_pow", _E, y=p.param("k")), p.op("square", _E), p.op("mul", _E, _E),
    p.op("pow", _E, p.const(math.isfinite, name="c")), p.op("sqrt", _E)), _fallthrough, composable=True)


def test_the_verifier_finds_the_fall_through_of_a_defaulted_capture():
    report = jst.verify_rule(FALLTHROUGH)
    status = {a.pattern: a.status for a in report.alternatives}
    assert status == {"integer_pow(exp(a))": "sound", "square(exp(a))": "unsound",
                      "mul(exp(a), exp(a))": "unsound", "pow(exp(a), c)": "sound",
                      "sqrt(exp(a))": "sound"}, str(report)
    assert not report.ok
    text = str(report)
    assert "square b" in text and "mul b b" in text  # each failing program is printed


def test_a_rule_wrong_only_in_its_gradient_is_unsound():
    # value right, derivative rule wrong: d/dx log(x) as 2/x
    @jax.custom_jvp
    def bad_log(x):
        return jnp.log(x)

    bad_log.defjvp(lambda primals, tangents: (bad_log(primals[0]), 2 * tangents[0] / primals[0]))
    rule = Rule("bad_log_derivative", p.op("log", p.op("sqrt", p.var("x"))), lambda x: 0.5 * bad_log(x),
                example_domain=(0.0, 1e4))
    report = jst.verify_rule(rule)
    (alt,) = report.alternatives
    assert alt.status == "unsound" and "'grad'" in alt.detail, str(report)


def test_a_correct_user_rule_is_sound_in_every_context():
    rule = Rule("user_log_sqrt", p.op("log", p.op("sqrt", p.var("x"))), lambda x: 0.5 * jnp.log(x),
                example_domain=(0.0, 1e4))
    report = jst.verify_rule(rule)
    assert report.ok, str(report)
    (alt,) = report.alternatives
    assert set(alt.contexts) == {"jit", "vmap", "grad", "sum", "shared"}


def test_an_alternative_nothing_can_build_is_reported_not_built():
    rule = Rule("unbuildable", p.any_of(p.op("log1p", p.var("x")),
                                        p.op("log", p.op("no_such_primitive", p.var("x")))),
                lambda x: jnp.log1p(x), example_domain=(0.0, 10.0))
    report = jst.verify_rule(rule)
    assert [a.status for a in report.alternatives] == ["sound", "not built"], str(report)
    assert not report.ok


def test_verify_refuses_what_is_not_a_rule():
    with pytest.raises(TypeError, match=r"expected a jst\.rewrites\.Rule"):
        jst.verify_rule(lambda x: x)  # pyright: ignore[reportArgumentType]
    with pytest.raises(TypeError, match="unknown"):
        jst.verify_rule(get("log1p"), contexts=("pmap",))


# --------------------------------------------------------------------- exp_power and `fixed`
@pytest.mark.parametrize(("spelling", "power"), [
    (lambda a: jnp.exp(a) * jnp.exp(a), 2.0),
    (lambda a: jnp.square(jnp.exp(a)), 2.0),
    (lambda a: jnp.exp(a) ** 2, 2.0),
    (lambda a: jnp.exp(a) ** 3, 3.0),
    (lambda a: jnp.exp(a) ** 2.0, 2.0),
    (lambda a: jnp.exp(a) ** -1.5, -1.5),
    (lambda a: jnp.sqrt(jnp.exp(a)), 0.5),
], ids=["mul", "square", "int2", "int3", "pow2.0", "pow-1.5", "sqrt"])
def test_exp_power_keeps_the_value_of_every_spelling(spelling, power):
    a = np.array([-3.0, -0.5, 0.0, 0.25, 1.0, 2.0, 10.0], np.float32)
    f = jst.stabilize(spelling)
    assert [r.rule for r in jst.explain(spelling, a)] == ["exp_power"]
    # reference: exp(power * a) in float64 (numpy, not the product), within 4 ulps of float32
    want = np.exp(power * a.astype(np.float64))
    for run in (f, jax.jit(f), jax.vmap(f)):
        got = np.asarray(run(a), np.float64)
        np.testing.assert_allclose(got, want, rtol=4 * 2.0 ** -23)
    g = jax.grad(lambda v: jnp.sum(f(v)))(a)
    np.testing.assert_allclose(np.asarray(g, np.float64), power * want, rtol=8 * 2.0 ** -23)


def test_fixed_binds_a_capture_per_alternative():
    x = p.var("x")
    pat = p.any_of(p.fixed(p.op("square", x), k=2.0), p.fixed(p.op("sqrt", x), k=0.5))
    rule = Rule("power_of", pat, lambda x, k: x ** k)
    f = lambda v: jnp.square(v) + jnp.sqrt(v)
    g = jst.stabilize(f, rules=[rule])
    v = np.array([0.25, 4.0, 9.0], np.float32)
    np.testing.assert_allclose(np.asarray(g(v)), v.astype(np.float64) ** 2 + np.sqrt(v.astype(np.float64)),
                               rtol=2.0 ** -21)


def test_fixed_refuses_a_clash_and_an_empty_binding():
    x = p.var("x")
    with pytest.raises(ValueError, match="at least one capture"):
        p.fixed(p.op("square", x))
    with pytest.raises(ValueError, match="already fixed"):
        p.fixed(p.fixed(p.op("square", x), k=2.0), k=3.0)
    with pytest.raises(ValueError, match="op"):
        p.fixed(x, k=1.0)  # pyright: ignore[reportArgumentType]


def test_a_fixed_value_that_disagrees_with_a_captured_parameter_refuses_the_match():
    x = p.var("x")
    rule = Rule("cube_only", p.fixed(p.op("integer_pow", x, y=p.param("k")), k=3), lambda x, k: x * x * x)
    assert jst.explain(lambda v: v ** 2, np.float32(2.0), rules=[rule]) == []
    assert [a.rule for a in jst.explain(lambda v: v ** 3, np.float32(2.0), rules=[rule])] == ["cube_only"]


def test_a_rule_wrong_in_value_is_caught_in_the_sum_read_from_the_gradients_program():
    # grad and the sum share one program (value_and_grad): the value is still judged, and first
    rule = Rule("wrong_log_sqrt", p.op("log", p.op("sqrt", p.var("x"))), lambda x: 0.6 * jnp.log(x),
                example_domain=(0.0, 1e4))
    report = jst.verify_rule(rule, contexts=("grad", "sum"))
    (alt,) = report.alternatives
    assert alt.status == "unsound" and "context 'sum'" in alt.detail, str(report)
    right = Rule("right_log_sqrt", p.op("log", p.op("sqrt", p.var("x"))), lambda x: 0.5 * jnp.log(x),
                 example_domain=(0.0, 1e4))
    (alt,) = jst.verify_rule(right, contexts=("grad", "sum")).alternatives
    assert alt.status == "sound" and sorted(alt.contexts) == ["grad", "sum"], alt


def test_programs_that_print_alike_but_compute_differently_are_told_apart():
    # the key that lets the jit context run a variant once when the alternative alone rewrites as the
    # rule does: nested jits of one name with other constants, and other closed-over arrays
    from pytest_jaxstab._check._verify import _program_key

    def scaled(c):
        return jax.jit(lambda x: x * c)

    def two(c):
        return jax.make_jaxpr(lambda x: scaled(c)(x) + 1.0)(1.0)

    assert _program_key(two(2.0)) == _program_key(two(2.0))
    assert _program_key(two(2.0)) != _program_key(two(3.0))
    w1, w2 = np.arange(3.0, dtype=np.float32), np.arange(3.0, dtype=np.float32)[::-1].copy()
    k1 = _program_key(jax.make_jaxpr(lambda x: x * w1)(np.ones(3, np.float32)))
    k2 = _program_key(jax.make_jaxpr(lambda x: x * w2)(np.ones(3, np.float32)))
    assert k1 != k2


# ------------------------------------------------------------------ which trees stand for a pattern
def _taken(pat, tree, out):
    """Records in ``out`` the ``(any_of text, branch)`` pairs ``tree`` takes in ``pat``; False if
    ``tree`` is not a concrete tree of ``pat``."""
    if isinstance(pat, AnyOf):
        for i, branch in enumerate(pat.alternatives):
            sub = set()
            if _taken(branch, tree, sub):
                out |= sub | {(pat.describe(), i)}
                return True
        return False
    if isinstance(pat, Op):
        return (isinstance(tree, Op) and tree.prim == pat.prim and tree.params == pat.params
                and len(tree.args) == len(pat.args)
                and all(_taken(a, b, out) for a, b in zip(pat.args, tree.args)))
    return tree is pat


def _branches(pat, out):
    """Every ``(any_of text, branch)`` pair of ``pat``."""
    if isinstance(pat, AnyOf):
        out |= {(pat.describe(), i) for i in range(len(pat.alternatives))}
        for branch in pat.alternatives:
            _branches(branch, out)
    elif isinstance(pat, Op):
        for a in pat.args:
            _branches(a, out)
    return out


@pytest.mark.parametrize("rule", [r for r in CATALOGUE if r.pattern is not None], ids=lambda r: r.name)
def test_the_trees_take_every_branch_of_every_any_of(rule):
    trees = alternatives(rule.pattern)
    taken = set()
    for tree in trees:
        assert _taken(rule.pattern, tree, taken), tree.describe()
    assert taken == _branches(rule.pattern, set())


def test_normal_cdf_trees_take_all_of_phis_written_forms():
    # until issue 48 the trees were the combinations in order, cut at 64: the first two of Φ's forms
    pattern = registered()["normal_cdf"].pattern
    assert pattern is not None
    forms = alternatives(pattern)
    heads = {t.describe().split("erf")[0] for t in forms}
    assert len(forms) <= 32 and len(heads) >= 20, sorted(heads)


def test_an_any_of_reused_is_covered_once_and_a_named_operand_takes_one_branch():
    x = p.var("x")
    arg = p.any_of(p.op("neg", x), p.op("abs", x), p.op("sqrt", x))
    # the same spellings under two forms: three trees take each form and each spelling
    trees = alternatives(p.any_of(p.op("exp", arg), p.op("log", arg)))
    assert [t.describe() for t in trees] == ["exp(neg(x))", "log(abs(x))", "exp(sqrt(x))"]
    # one spelling read twice is one equation: both operands take the same branch in each tree
    named = p.any_of(p.op("exp", x, name="e"), p.op("expm1", x, name="e"))
    assert [t.describe() for t in alternatives(p.op("mul", named, named))] == [
        "mul(exp(x), exp(x))", "mul(expm1(x), expm1(x))"]


def test_a_pattern_needing_more_trees_than_the_limit_is_refused():
    x = p.var("x")
    wide = p.any_of(*(p.op(prim, x) for prim in ("exp", "log", "sin", "cos", "tan")))
    assert len(alternatives(wide)) == 5
    with pytest.raises(jst.ArgumentError, match="split it into rules"):
        alternatives(wide, limit=4)
