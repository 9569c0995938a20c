"""Gradient figures (``grad=True``) in the baseline, the gate and the reports (issue 16).

The baseline stores the gradient's figures and witnesses beside the value's; the gate compares them
under the same ``--jaxstab-compare-fail`` margins and names the gradient when it regresses; the
terminal table, the JSON report and the HTML report show them. The gate's unit tests use figures
written here by hand; the user's path (a marked test with ``grad=True``) runs through pytester.
"""

from __future__ import annotations

import json
from typing import Any

import jax.numpy as jnp
import numpy as np
import pytest

import pytest_jaxstab as jst
from pytest_jaxstab._baseline import (
    Baseline,
    BaselineEntry,
    compare,
    format_baseline_summary,
    load_baseline,
    parse_compare_fail,
    save_baseline,
)
from pytest_jaxstab._check import check_case
from pytest_jaxstab._errors import BaselineError
from pytest_jaxstab._report import build_report, format_table, validate_report
from pytest_jaxstab._report._html import write_html
from pytest_jaxstab._results import CaseResult, NanOriginRecord, VariantStats, Witness
from pytest_jaxstab.strategies import Domain

try:  # imported here, outside the in-process runs (see tests/test_plugin_reports_gate.py)
    import matplotlib.backends.backend_svg
    import matplotlib.figure  # noqa: F401

    HAVE_MATPLOTLIB = True
except ImportError:  # the HTML report is an optional extra
    HAVE_MATPLOTLIB = False

NODE = "t.py::test_f"
STABLE = VariantStats(1.0, 0.5)


def _case(value: VariantStats, gradient: VariantStats | None, *, grad_origin: bool = False) -> CaseResult:
    case = CaseResult(NODE, "float32", samples=20, original=value, rewritten=STABLE,
                      outcome="passed" if value.verdict == "pass" else "failed")
    if gradient is not None:
        case.gradient = CaseResult(NODE, "float32", samples=19, discarded=1, original=gradient,
                                   rewritten=STABLE, outcome="passed" if gradient.verdict == "pass"
                                   else "failed")
        if grad_origin:
            case.gradient.nan_origins = [NanOriginRecord("original", "mul", "t.py:7", "nan",
                                                         "return x * exp(x)")]
        if gradient.verdict == "fail":
            case.outcome = "failed"
    return case


def _entry(value: VariantStats, gradient: VariantStats | None) -> BaselineEntry:
    grad = BaselineEntry("float32", 19, gradient, STABLE, []) if gradient is not None else None
    return BaselineEntry("float32", 20, value, STABLE, [], grad)


def _compare(now: CaseResult, then: BaselineEntry, margins: str | None = None):
    checks = parse_compare_fail(margins) if margins else None
    return compare([now], Baseline({NODE: then}), checks, collected_nodeids=[NODE])


# --- the store -----------------------------------------------------------------------------------


def test_baseline_holds_gradient_figures_and_witnesses(tmp_path):
    case = _case(STABLE, VariantStats(32.0, 5.0, 3, "fail"))
    assert case.gradient is not None
    x = np.array([90.0, -1.0, 3e38], np.float32)
    case.gradient.witnesses = [Witness([x], "original", 32.0, True)]
    path = tmp_path / "baseline.json"
    save_baseline(path, [case], existing=None)
    raw = json.loads(path.read_text())["cases"][NODE]
    assert raw["gradient"]["original"] == {"max_error_bits": 32.0, "mean_error_bits": 5.0, "overflows": 3,
                                           "verdict": "fail"}
    entry = load_baseline(path).entries[NODE]
    assert entry.gradient is not None and entry.gradient.original.overflows == 3
    np.testing.assert_array_equal(entry.gradient.witnesses[0].args[0], x)  # bit-exact
    assert entry.gradient.gradient is None


def test_old_baseline_without_gradient_loads_and_bad_gradient_figures_are_named(tmp_path):
    path = tmp_path / "baseline.json"
    save_baseline(path, [_case(STABLE, None)], existing=None)
    data = json.loads(path.read_text())
    assert "gradient" not in data["cases"][NODE] and data["version"] == 1
    assert load_baseline(path).entries[NODE].gradient is None
    data["cases"][NODE]["gradient"] = {**data["cases"][NODE], "original": {
        "max_error_bits": 1.0, "mean_error_bits": 0.5, "overflows": -2, "verdict": "pass"}}
    path.write_text(json.dumps(data))
    with pytest.raises(BaselineError, match=r"gradient\.original\.overflows: expected a non-negative"):
        load_baseline(path)


# --- the gate ------------------------------------------------------------------------------------


def test_new_gradient_overflow_regresses_and_names_the_gradient():
    result = _compare(_case(STABLE, VariantStats(32.0, 5.0, 3, "fail")), _entry(STABLE, STABLE))
    case = result.cases[0]
    assert result.failed and case.status == "regressed" and case.gradient == "regressed"
    assert case.message.startswith(f"{NODE} (original function): gradient (jax.grad): ")
    assert "new overflow: 3 non-finite results" in case.message
    assert "the value: within the baseline" in case.message


def test_gradient_bits_growth_uses_the_same_margins():
    then = _entry(STABLE, VariantStats(10.0, 2.0, 0, "fail"))
    within = _compare(_case(STABLE, VariantStats(11.5, 2.0, 0, "fail")), then, "bits:2")
    assert not within.failed and within.cases[0].status == "known"
    beyond = _compare(_case(STABLE, VariantStats(12.5, 2.0, 0, "fail")), then, "bits:2")
    assert beyond.failed
    assert "gradient (jax.grad): max error rose 10.00 -> 12.50 bits" in beyond.cases[0].message
    better = _compare(_case(STABLE, VariantStats(4.0, 1.0)), then)
    assert better.cases[0].status == "improved" and better.cases[0].gradient == "improved"


def test_value_regression_is_still_reported_with_a_gradient():
    result = _compare(_case(VariantStats(9.0, 1.0, 0, "fail"), STABLE), _entry(STABLE, STABLE))
    case = result.cases[0]
    assert case.status == "regressed" and case.gradient == "unchanged"
    assert case.message.startswith(f"{NODE} (original function): max error rose 1.00 -> 9.00 bits")


def test_gradient_missing_from_the_baseline_is_new_not_a_failure():
    result = _compare(_case(STABLE, VariantStats(32.0, 5.0, 3, "fail")), _entry(STABLE, None))
    case = result.cases[0]
    assert not result.failed
    assert case.status == "unchanged" and case.gradient == "new"
    summary = format_baseline_summary(result)
    assert "new cases (not in the baseline):" in summary
    assert "gradient (jax.grad): not in the baseline yet (max error 32.00 bits, 3 overflows)" in summary


# --- the reports ---------------------------------------------------------------------------------


def test_terminal_table_has_a_gradient_row_under_its_case():
    case = _case(STABLE, VariantStats(32.0, 5.25, 3, "fail"), grad_origin=True)
    plain = CaseResult("t.py::test_g", "float32", samples=20)
    table = format_table([case, plain], [], gate={NODE: "regressed"}, gradient_gate={NODE: "regressed"})
    rows = table.splitlines()
    at = next(i for i, r in enumerate(rows) if r.startswith("t.py::test_f"))
    grad_row = rows[at + 1]
    assert grad_row.startswith("  ∇ grad")
    assert grad_row.split()[2:10] == ["19", "1/0", "32.0", "5.25", "3", "1.0", "0.50", "0"]
    assert "unstable" in grad_row and "regressed" in grad_row and "mul @ t.py:7" in grad_row
    assert not rows[at + 2].startswith("  ∇")  # the plain case has no gradient row
    assert max(len(r) for r in rows[:4]) <= len(rows[2])  # no row wider than the rule under the header
    assert any(r.startswith("∇ grad: the gradient") for r in rows)  # the legend says what it is


def test_json_report_carries_and_validates_the_gradient():
    case = _case(STABLE, VariantStats(32.0, 5.0, 3, "fail"))
    report = build_report([case], jax_version="0.12.0", backends=["cpu"], gate={NODE: "known"},
                          gradient_gate={NODE: "known"})
    validate_report(report)
    grad = report["cases"][0]["gradient"]
    assert grad["original"]["overflows"] == 3 and grad["gate"] == "known"
    report["cases"][0]["gradient"]["original"]["max_error_bits"] = -1.0
    with pytest.raises(ValueError, match=r"cases\[0\]\.gradient\.original\.max_error_bits"):
        validate_report(report)
    report["cases"][0]["gradient"] = {**grad, "original": grad["original"] | {"max_error_bits": 1.0},
                                      "gradient": grad}
    with pytest.raises(ValueError, match=r"cases\[0\]\.gradient\.gradient"):
        validate_report(report)


@pytest.mark.skipif(not HAVE_MATPLOTLIB, reason="the HTML report needs matplotlib")
def test_html_report_shows_the_gradient_beside_the_value(tmp_path):
    case = _case(STABLE, VariantStats(31.75, 5.0, 3, "fail"), grad_origin=True)
    path = tmp_path / "r.html"
    write_html(path, [case], jax_version="0.12.0", backends=["cpu"], gate={NODE: "known"},
               gradient_gate={NODE: "known"})
    page = path.read_text()
    section = page[page.index('<section id="case-0">'):]
    grad = section[section.index("<h3>Gradient"):]
    assert "<td>original (judged)</td><td class=\"num\">31.75</td>" in grad
    assert "NaN/Inf origins in the backward pass" in grad and "return x * exp(x)" in grad
    assert "gradient (judged) max bits" in page


# --- the user's path -----------------------------------------------------------------------------

# test_guard: as written, the untaken branch's exp overflows past 88.7 and 0 * inf is NaN in the
# gradient (the value, a sum of positive terms, is accurate: no cancellation for the fuzzer to find);
# test_clamped: the same value, a finite gradient (exp of min(x, 20)).
# Below -80 neither: exp(-80) ~ 1.8e-35 is still a normal float32, so the gradient loses no bits there.
GUARDS = '''
import jax.numpy as jnp
import pytest

@pytest.mark.stabilize(dtype="float32", shapes={"x": (4,)}, domain=(-100, 1000), grad=True)
def test_guard(x):
    return jnp.sum(jnp.where(x < 20, jnp.exp(x), 0.0))

@pytest.mark.stabilize(dtype="float32", shapes={"x": (3,)}, domain=(-80, 1000), grad=True)
def test_clamped(x):
    return jnp.where(x < 20, jnp.exp(jnp.minimum(x, 20.0)), 0.0)
'''
ARGS = ("--jaxstab-examples=20", "--jaxstab-seed=1")


def test_gradient_through_save_compare_and_regression(pytester, run_jaxstab):
    pytester.makepyfile(test_guards=GUARDS)
    saved = run_jaxstab(*ARGS, "--jaxstab-save-baseline")
    saved.assert_outcomes(passed=1, failed=1)  # test_guard's gradient fails its verdict
    cases = json.loads((pytester.path / ".jaxstab/baseline.json").read_text())["cases"]
    guard, clamped = cases["test_guards.py::test_guard"], cases["test_guards.py::test_clamped"]
    assert guard["original"]["overflows"] == 0 and guard["gradient"]["original"]["overflows"] > 0
    assert guard["gradient"]["witnesses"]
    assert clamped["gradient"]["original"]["overflows"] == 0

    html_report = ("--jaxstab-report=html:out.html",) if HAVE_MATPLOTLIB else ()
    known = run_jaxstab(*ARGS, "--jaxstab-compare", "--jaxstab-report=term",
                        "--jaxstab-report=json:out.json", *html_report)
    assert known.ret == pytest.ExitCode.OK
    text = known.stdout.str()
    assert "test_guards.py::test_guard (original function): within the baseline" in text
    assert "gradient (jax.grad): known instability" in text
    grad_rows = [r for r in text.splitlines() if r.startswith("  ∇ grad")]
    assert len(grad_rows) == 2 and any("known" in r and "unstable" in r for r in grad_rows)
    report = json.loads((pytester.path / "out.json").read_text())
    validate_report(report)
    by_id = {c["nodeid"]: c for c in report["cases"]}
    assert by_id["test_guards.py::test_guard"]["gradient"]["gate"] == "known"
    assert by_id["test_guards.py::test_guard"]["gradient"]["original"]["overflows"] > 0
    if HAVE_MATPLOTLIB:
        html = (pytester.path / "out.html").read_text()
        assert html.count("<h3>Gradient") == 2 and "NaN/Inf origins in the backward pass" in html

    # the clamp goes: the value stays the same, the gradient overflows where it did not
    pytester.makepyfile(test_guards=GUARDS.replace("jnp.exp(jnp.minimum(x, 20.0))", "jnp.exp(x)"))
    regressed = run_jaxstab(*ARGS, "--jaxstab-compare")
    assert regressed.ret == pytest.ExitCode.TESTS_FAILED
    regressed.assert_outcomes(passed=1, failed=1)
    regressed.stdout.fnmatch_lines([
        "*regressed against the jaxstab baseline: test_guards.py::test_clamped (original function): "
        "gradient (jax.grad): *new overflow: * the value: within the baseline*",
        "FAILED test_guards.py::test_clamped*",
    ])


def test_baseline_saved_without_gradients_then_grad_true_is_new(pytester, run_jaxstab):
    # A baseline from before grad=True was added to the tests: the gradients are new to it. The gate
    # does not call that a regression; like a case new to the baseline, each new gradient is judged by
    # its own verdict: test_guard's fails (its untaken branch overflows), test_clamped's passes.
    pytester.makepyfile(test_guards=GUARDS.replace(", grad=True", ""))
    run_jaxstab(*ARGS, "--jaxstab-save-baseline").assert_outcomes(passed=2)
    assert all("gradient" not in c for c in
               json.loads((pytester.path / ".jaxstab/baseline.json").read_text())["cases"].values())
    pytester.makepyfile(test_guards=GUARDS)
    result = run_jaxstab(*ARGS, "--jaxstab-compare")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([
        "*the gradient is not in the jaxstab baseline (saved before grad=True) and fails:*",
        "*0 regressed, 0 known, 0 improved, 2 unchanged, 0 new*",
        "new cases (not in the baseline):",
        "*test_guards.py::test_guard (original function): within the baseline*gradient (jax.grad): not in "
        "the baseline yet*",
    ])
    # Saving accepts the gradient's figures; the compare then passes with the instability known.
    run_jaxstab(*ARGS, "--jaxstab-save-baseline")
    run_jaxstab(*ARGS, "--jaxstab-compare").assert_outcomes(passed=2)


def test_gradient_witnesses_are_rechecked_by_the_gradient_only():
    f = lambda x: jnp.sum(jnp.where(x < 20, jnp.exp(x), 0.0))
    # an input on which the gradient as written is NaN (0 * exp(600) = 0 * inf), the value is not
    worst = Witness([np.array([600.0, 0.0, 1.0], np.float32)], "original", 32.0, True)
    # The domain admits the witness's 600 but no other value above 20, so no draw reaches exp's overflow
    # (past 88.7) in the untaken branch: only the witness can make the gradient NaN.
    domain = Domain(-80.0, 1000.0, where=lambda v: v < 20.0 or v == 600.0)
    kwargs: dict[str, Any] = dict(shapes=[(3,)], dtype="float32", domain=domain, max_examples=5,
                                  seed=2, grad=True)
    plain = jst.check(f, **kwargs)
    again = check_case(f, **kwargs, gradient_witnesses=[worst])
    assert plain.gradient is not None and again.gradient is not None
    assert plain.gradient.original.overflows == 0  # no draw passes 88.7 ...
    assert again.gradient.original.overflows >= 1  # ... the witness does
    assert again.samples == plain.samples and again.original == plain.original  # nor the value's check
