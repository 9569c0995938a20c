"""The harness refuses to hide a wrong rewrite (issue 38, item 4).

A check runs the function as written and the rewritten one on the same inputs. Where the rewritten
variant fails and the original does not, by more than the tolerance under the case's lens, the case
fails whatever ``apply`` and ``judge`` say, names the rule and the user's line, and fails the baseline
gate even when the baseline holds it. The rules here are the tests' own (a deliberately wrong
``exp(x) -> exp(x/2)`` and correct controls), never the catalogue's, whose rules change on main.
"""

from __future__ import annotations

import inspect
import json
from typing import Any

import jax
import jax.numpy as jnp
import mpmath
import numpy as np
import pytest

import pytest_jaxstab as jst
from pytest_jaxstab._baseline import compare, load_baseline, save_baseline
from pytest_jaxstab._check import check_case
from pytest_jaxstab._report import build_report, format_table, validate_report, write_html
from pytest_jaxstab._results import CaseResult, Witness
from pytest_jaxstab.rewrites import Rule, pattern

#: Wrong: exp(x) is not exp(x/2) (off by a factor exp(x/2): 1.6x at x = 1, 150x at x = 10).
HALVE = Rule("halve", pattern.op("exp", pattern.var("x")), lambda x: jnp.exp(x / 2))
#: Right: exp(x) = 1/exp(-x), two roundings instead of one (at most ~1.5 ulp: ~1.3 bits).
RECIPROCAL = Rule("reciprocal_exp", pattern.op("exp", pattern.var("x")), lambda x: 1 / jnp.exp(-x))
#: Right in value, wrong in derivative: the gradient of the rewritten function is 0.
NO_GRADIENT = Rule("frozen_exp", pattern.op("exp", pattern.var("x")),
                   lambda x: jnp.exp(jax.lax.stop_gradient(x)))
#: Two rules right alone, wrong together: A writes exp as exp2 (right, composable so B may match its
#: result); B drops the base change of an exp2 (wrong, but it finds no exp2 in a program without A).
AS_EXP2 = Rule("as_exp2", pattern.op("exp", pattern.var("x")),
               lambda x: jnp.exp2(x * np.float32(np.log2(np.e))), composable=True)
EXP2_AS_EXP = Rule("exp2_as_exp", pattern.op("exp2", pattern.var("y")), lambda y: jnp.exp(y))

#: The tolerance (the default): a wrong rewrite must be worse than the original by more than this.
TOL = 8.0
COMMON = {"dtype": "float32", "seed": 0, "max_examples": 30}


def _exp(x):
    return jnp.exp(x)


def _exp_plus_log(x, y):
    return jnp.exp(x) + jnp.log(1 + y)


def _line_of(fn, text: str) -> str:
    """``file.py:N`` of the line of ``fn`` holding ``text`` (what a rewrite's location names)."""
    lines, start = inspect.getsourcelines(fn)
    n = next(start + i for i, line in enumerate(lines) if text in line)
    return f"test_rewrite_regression.py:{n}"


def _ulp_bits(a: Any, b: Any) -> np.ndarray:
    """Herbie's bits between float32 arrays (log2 of 1 + ordinal distance), computed here, apart from
    the code under test."""
    def ordinal(v: Any) -> np.ndarray:
        i = np.asarray(v, np.float32).view(np.int32).astype(np.int64)
        return np.where(i < 0, -(i & 0x7FFFFFFF), i)
    return np.log2(1.0 + np.abs(ordinal(a) - ordinal(b)))


@pytest.mark.parametrize("judge", ["stability", "accuracy"])
@pytest.mark.parametrize("apply", [False, True])
def test_a_wrong_rule_fails_the_case_whatever_apply_and_judge(apply, judge):
    result = jst.check(_exp, shapes=[(4,)], domain=(-10, 10), rules=[HALVE], apply=apply, judge=judge,
                       **COMMON)
    assert result.original.verdict == "pass"  # the function as written is fine...
    assert result.outcome == "failed"  # ...and the case fails anyway
    reg = result.rewrite_regression
    assert reg is not None and reg.rule_names == ["halve"] and reg.isolated and reg.judge == judge
    where = _line_of(_exp, "return jnp.exp(x)")
    assert [str(r.location).endswith(where) for r in reg.rules] == [True]
    assert result.message.startswith(f"{result.nodeid}: rewrite `halve` at ")
    assert f"{where} makes this function worse: {reg.rewritten_bits:.1f} bits where the original has " \
           f"{reg.original_bits:.1f} bits" in result.message
    assert "arg0 = float32[4]" in result.message  # the input, as other failures show theirs
    # The definition: the rewritten variant fails there, the original does not, by more than TOL.
    assert reg.original_bits <= TOL < reg.rewritten_bits - reg.original_bits
    # Independently of the check: the rule's result at the recorded input is that far from exp's.
    x = reg.inputs[0]
    forward = float(_ulp_bits(np.exp(x.astype(np.float64) / 2).astype(np.float32),
                              np.exp(x.astype(np.float64)).astype(np.float32)).max())
    # Under accuracy the figure is this forward error (within 1 bit: float32 exp rounds once more);
    # under stability it is what is left beyond exp's conditioning (|x| ulps: at most log2(11) bits).
    if judge == "accuracy":
        assert abs(reg.rewritten_bits - forward) <= 1.0
    else:
        assert forward - np.log2(11) - 1.0 <= reg.rewritten_bits <= forward + 1.0
    # The input is re-checked first by a baseline comparison.
    assert any(all(np.array_equal(a, b) for a, b in zip(w.args, reg.inputs)) for w in result.witnesses)


def test_the_culprit_is_named_when_a_right_and_a_wrong_rule_fired():
    result = jst.check(_exp_plus_log, shapes=[(4,), (4,)], domain=[(-10, 10), (0.5, 2)],
                       rules=[HALVE, "log1p"], **COMMON)
    assert {r.rule for r in result.rewrites} == {"halve", "log1p"}  # both fired
    reg = result.rewrite_regression
    assert reg is not None and reg.rule_names == ["halve"] and reg.isolated
    assert str(reg.rules[0].location).endswith(_line_of(_exp_plus_log, "jnp.exp(x)"))
    assert "log1p" not in result.message.splitlines()[0]
    assert "A rule of your own (halve)" in result.message


def test_rules_wrong_only_together_are_both_named():
    # A's rewrite alone is right, B alone finds nothing to match: no rule alone reproduces it, and
    # leaving either out removes it, so both are named.
    assert jst.explain(_exp, np.ones(4, np.float32), rules=[AS_EXP2, EXP2_AS_EXP]).rules == \
        ["as_exp2", "exp2_as_exp"]
    result = jst.check(_exp, shapes=[(4,)], domain=(-10, 10), rules=[AS_EXP2, EXP2_AS_EXP], **COMMON)
    reg = result.rewrite_regression
    assert reg is not None and result.outcome == "failed"
    assert reg.rule_names == ["as_exp2", "exp2_as_exp"] and reg.isolated
    assert "rewrites `as_exp2` at" in result.message and "make this function worse" in result.message
    alone = jst.check(_exp, shapes=[(4,)], domain=(-10, 10), rules=[AS_EXP2], **COMMON)
    assert alone.rewrite_regression is None and alone.outcome == "passed"


def test_a_rule_wrong_only_in_its_derivative_fails_the_gradient():
    def f(x):
        return jnp.sum(jnp.exp(x))

    result = jst.check(f, shapes=[(4,)], domain=(-5, 5), rules=[NO_GRADIENT], grad=True, **COMMON)
    assert result.rewrite_regression is None  # the value is exp itself
    grad = result.gradient
    assert grad is not None and grad.rewrite_regression is not None
    assert grad.rewrite_regression.rule_names == ["frozen_exp"]
    assert result.outcome == "failed" and grad.original.verdict == "pass"
    assert "The gradient (jax.grad" in result.message and "rewrite `frozen_exp` at" in result.message
    back = CaseResult.from_json(json.loads(json.dumps(result.to_json())))
    assert back.gradient is not None and back.gradient.rewrite_regression is not None


# --- reports and the gate --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def wrong() -> CaseResult:
    return jst.check(_exp, shapes=[(4,)], domain=(-10, 10), rules=[HALVE], name="t.py::test_exp", **COMMON)


@pytest.fixture(scope="module")
def right() -> CaseResult:
    return jst.check(_exp, shapes=[(4,)], domain=(-10, 10), rules=[RECIPROCAL], name="t.py::test_ok",
                     **COMMON)


def test_json_carries_the_wrong_rewrite_and_round_trips(wrong, right):
    report = json.loads(json.dumps(build_report([wrong, right], jax_version=jax.__version__,
                                                backends=["cpu"])))
    validate_report(report)
    reg = report["cases"][0]["rewrite_regression"]
    assert [r["rule"] for r in reg["rules"]] == ["halve"] and report["cases"][0]["outcome"] == "failed"
    assert "rewrite_regression" not in report["cases"][1]  # only where a rewrite made it worse
    back, then = CaseResult.from_json(report["cases"][0]).rewrite_regression, wrong.rewrite_regression
    assert back is not None and then is not None
    assert (back.rules, back.original_bits, back.rewritten_bits, back.judge, back.isolated) == \
        (then.rules, then.original_bits, then.rewritten_bits, then.judge, then.isolated)
    assert all(a.tobytes() == b.tobytes() and a.dtype == b.dtype for a, b in zip(back.inputs, then.inputs))
    report["cases"][0]["outcome"] = "passed"  # a wrong rewrite never passes
    with pytest.raises(ValueError, match="rewrite_regression has failed"):
        validate_report(report)


def test_terminal_and_html_show_the_wrong_rewrite(wrong, right, tmp_path):
    table = format_table([wrong, right], [])
    row = next(line for line in table.splitlines() if line.startswith("t.py::test_exp"))
    assert "bad rule/s" in row
    assert f"  t.py::test_exp: {wrong.rewrite_regression}" in table
    assert str(wrong.rewrite_regression).startswith("wrong rewrite `halve` at ")
    assert "bad rule/s" not in next(line for line in table.splitlines() if line.startswith("t.py::test_ok"))
    pytest.importorskip("matplotlib")
    path = tmp_path / "r.html"
    write_html(path, [wrong, right], jax_version=jax.__version__, backends=[])
    page = path.read_text()
    assert "wrong rewrite `halve`" in page and "1 made worse by a wrong rewrite" in page


def test_the_gate_fails_a_wrong_rewrite_even_when_the_baseline_holds_it(wrong, right, tmp_path):
    path = tmp_path / "baseline.json"
    save_baseline(path, [wrong, right], existing=None)  # the wrong rewrite's figures are the baseline's
    comparison = compare([wrong, right], load_baseline(path), collected_nodeids=[wrong.nodeid, right.nodeid])
    decided = {c.nodeid: c for c in comparison.cases}
    assert decided[wrong.nodeid].status == "regressed" and comparison.failed
    assert "wrong rewrite `halve`" in decided[wrong.nodeid].message
    assert decided[right.nodeid].status == "unchanged"  # the control: same figures, nothing wrong
    # The same figures without the record are within the baseline: the record alone fails the gate.
    plain = CaseResult.from_json({**wrong.to_json(), "outcome": "passed"})
    plain.rewrite_regression = None
    assert compare([plain], load_baseline(path), collected_nodeids=[plain.nodeid]).cases[0].status != \
        "regressed"


# --- controls: no false alarm ----------------------------------------------------------------------


@pytest.mark.parametrize("judge", ["stability", "accuracy"])
def test_a_right_rule_on_a_passing_case_still_passes(judge):
    result = jst.check(_exp, shapes=[(4,)], domain=(-10, 10), rules=[RECIPROCAL], judge=judge, **COMMON)
    assert [r.rule for r in result.rewrites] == ["reciprocal_exp"]
    assert result.rewrite_regression is None and result.outcome == "passed"


def test_a_rewrite_that_fixes_a_failing_original_is_not_blamed():
    def lse(x):
        return jnp.log(jnp.sum(jnp.exp(x)))

    # Every element in [85, 100]: exp overflows float32 above ~88.7; the catalogue's logsumexp fixes it.
    written = jst.check(lse, shapes=[(8,)], domain=(85, 100), **COMMON)
    shipped = jst.check(lse, shapes=[(8,)], domain=(85, 100), apply=True, **COMMON)
    assert written.original.overflows > 0 and written.rewritten.verdict == "pass"
    assert written.rewrite_regression is None and shipped.rewrite_regression is None
    assert written.outcome == "failed" and shipped.outcome == "passed"


#: log(sum(exp(x))) ~ 4e-8 here (x shifted so the result is near 0): ill-conditioned (the inputs are
#: O(1), the result tiny). The catalogue's logsumexp (max + log(sum(exp(x - max)))) lands 29.7 bits
#: from the float32-rounded exact value, the naive form 20.5: 9.2 bits worse, more than TOL, by forward
#: error, and both well within what the conditioning explains.
ILL_CONDITIONED = np.array([-0.8874017000198364, -0.7671161890029907, -2.088074207305908], np.float32)


def test_a_sound_rewrite_on_ill_conditioned_inputs_is_no_false_alarm():
    def lse(x):
        return jnp.log(jnp.sum(jnp.exp(x)))

    mp: Any = mpmath.mp.clone()  # a private context: the precision set here stays here
    mp.prec = 200
    exact = np.float32(float(mp.log(sum(mp.exp(mp.mpf(float(v))) for v in ILL_CONDITIONED))))
    written = np.asarray(jax.jit(lse)(ILL_CONDITIONED))
    rewritten = np.asarray(jax.jit(jst.stabilize(lse))(ILL_CONDITIONED))
    # Forward errors alone would blame the rewrite: it is worse by more than the tolerance here.
    assert _ulp_bits(rewritten, exact) - _ulp_bits(written, exact) > TOL
    result = check_case(lse, shapes=[(3,)], domain=(-4, 1), witnesses=[Witness([ILL_CONDITIONED],
                       "rewritten", 0.0, False)], **COMMON)
    assert [r.rule for r in result.rewrites] == ["logsumexp"]
    assert result.rewrite_regression is None
    assert result.judge == "stability" and result.outcome == "passed"


def test_the_variance_rule_on_clustered_data_is_no_false_alarm():
    def variance(x):
        return jnp.mean(x * x) - jnp.mean(x) ** 2

    # Clustered: every element within 1e-2 of 1000 (the one-pass form cancels ~2^27-fold).
    result = jst.check(variance, shapes=[(8,)], domain=(1000, 1000.01), **COMMON)
    assert [r.rule for r in result.rewrites] == ["variance"]
    assert result.rewrite_regression is None
    assert result.rewritten.verdict == "pass"


# --- through the plugin ----------------------------------------------------------------------------

SUITE = '''
import jax.numpy as jnp
import pytest
from pytest_jaxstab.rewrites import Rule, pattern

HALVE = Rule("halve", pattern.op("exp", pattern.var("x")), lambda x: jnp.exp(x / 2))
RECIPROCAL = Rule("reciprocal_exp", pattern.op("exp", pattern.var("x")), lambda x: 1 / jnp.exp(-x))

@pytest.mark.stabilize(dtype="float32", shapes={"x": (4,)}, domain=(-10, 10), rules=[HALVE])
def test_wrong(x):
    return jnp.exp(x)

@pytest.mark.stabilize(dtype="float32", shapes={"x": (4,)}, domain=(-10, 10), rules=[RECIPROCAL])
def test_right(x):
    return jnp.exp(x)

def scaled(x):
    return 2 * jnp.exp(x)

def test_fixture(jaxstab):
    jaxstab.check(scaled, shapes=[(4,)], dtype="float32", domain=(-10, 10), rules=[HALVE])
'''


@pytest.mark.parametrize("way", [(), pytest.param(("-n", "2"), marks=pytest.mark.slow)], ids=["serial", "n2"])
def test_the_plugin_fails_the_test_saves_and_still_fails_when_compared(pytester, run_jaxstab, way):
    if way:
        pytest.importorskip("xdist")
    pytester.makepyfile(test_wrong=SUITE)
    lines = SUITE.lstrip("\n").splitlines()
    body = lines.index("def test_wrong(x):") + 2
    helper = lines.index("def scaled(x):") + 2
    args = ("--jaxstab-examples=20", *way)
    saved = run_jaxstab(*args, "--jaxstab-save-baseline", "--jaxstab-report=json:r.json", "-rA")
    saved.assert_outcomes(passed=1, failed=2)
    out = saved.stdout.str()
    assert f"rewrite `halve` at test_wrong.py:{body} makes this function worse" in out
    assert f"rewrite `halve` at test_wrong.py:{helper} makes this function worse" in out
    report = json.loads((pytester.path / "r.json").read_text())
    by_id = {c["nodeid"]: c for c in report["cases"]}
    assert by_id["test_wrong.py::test_wrong"]["rewrite_regression"]["rules"] == [
        {"rule": "halve", "location": f"test_wrong.py:{body}"}]
    assert "rewrite_regression" not in by_id["test_wrong.py::test_right"]
    # The baseline now holds the wrong rewrite's figures; comparing with it still fails the tests.
    compared = run_jaxstab(*args, "--jaxstab-compare", "--jaxstab-report=json:c.json")
    compared.assert_outcomes(passed=1, failed=2)
    compared.stdout.fnmatch_lines(["*regressed against the jaxstab baseline: test_wrong.py::test_wrong "
                                   "(original function): wrong rewrite `halve` at test_wrong.py:*",
                                   "*jaxstab baseline: 2 regressed*"])
    assert compared.ret == pytest.ExitCode.TESTS_FAILED
    gated = {c["nodeid"]: c["gate"] for c in json.loads((pytester.path / "c.json").read_text())["cases"]}
    assert gated["test_wrong.py::test_wrong"] == "regressed"
    assert gated["test_wrong.py::test_right"] != "regressed"
