"""Precision plans in the baseline and the gate (issue 34, deliverable 2), without pytest runs: how a kept
line is keyed (so an edit above it is a move, not a new line), what the gate decides, malformed entries,
the JSON schema of the plan and the option's validation. The plugin scenarios are in
``test_plugin_precision.py``."""

from __future__ import annotations

import json

import pytest

import pytest_jaxstab as jst
from pytest_jaxstab._baseline import (
    Baseline,
    BaselineEntry,
    PlanEntry,
    compare,
    compare_plans,
    format_baseline_summary,
    load_baseline,
    save_baseline,
)
from pytest_jaxstab._errors import BaselineError, SettingsError
from pytest_jaxstab._files import source_anchor
from pytest_jaxstab._report import build_report, validate_report
from pytest_jaxstab._results import CaseResult, KeptLine, PlanFigures, PrecisionRecord, VariantStats

MODEL = '''\
import jax.numpy as jnp


class Block:
    def __call__(self, x):
        def inner(y):
            y = y + 1.0
            y = y + 1.0  # the same code again
            return y
        v = jnp.mean(x * x)  # variance
        return inner(v)
'''
#: The same module after an unrelated edit above the lines: a helper and a comment added.
EDITED = MODEL.replace("class Block:", "def helper():\n    return 2\n\n\nclass Block:\n    # added").replace(
    "# variance", "# the variance, reworded")


def _line_of(text: str, code: str, nth: int = 1) -> int:
    hits = [i + 1 for i, t in enumerate(text.splitlines()) if t.strip().startswith(code)]
    return hits[nth - 1]


def test_a_kept_line_is_keyed_by_function_and_code_not_by_number(tmp_path):
    path = tmp_path / "model.py"
    path.write_text(MODEL)
    before = source_anchor(f"{path}:{_line_of(MODEL, 'v = jnp.mean')}")
    assert before == ("Block.__call__", "v = jnp.mean(x * x)", 1)  # the comment is not part of the code
    assert source_anchor(f"{path}:{_line_of(MODEL, 'y = y + 1.0', 2)}") == (
        "Block.__call__.<locals>.inner", "y = y + 1.0", 2)  # Python's __qualname__; the 2nd identical line
    path.write_text(EDITED)  # read again although linecache holds the old text (checkcache)
    after_line = _line_of(EDITED, "v = jnp.mean")
    assert after_line != _line_of(MODEL, "v = jnp.mean")
    assert source_anchor(f"{path}:{after_line}") == before
    # near miss: the line itself edited is another line
    path.write_text(EDITED.replace("jnp.mean(x * x)", "jnp.mean(x * x * 2)"))
    assert source_anchor(f"{path}:{after_line}")[1] == "v = jnp.mean(x * x * 2)"


def test_an_unreadable_location_is_keyed_by_itself():
    assert source_anchor("<stdin>:3") == ("", "", 0)
    assert source_anchor(None) == ("", "", 0)
    assert KeptLine("<stdin>:3").key == "<stdin>:3"


def _kept(line: int, code: str = "v = jnp.mean(x * x)", function: str = "Block.__call__") -> KeptLine:
    return KeptLine(f"src/model.py:{line}", function, code, 1)


def _plan(*lines: KeptLine, error: str = "") -> PrecisionRecord:
    return PrecisionRecord("bfloat16", lines=list(lines), error=error, samples=64,
                           original=PlanFigures(16.0, 9.0, float("inf"), 3),
                           tuned=PlanFigures(1.0, 0.5, 1.0, 0))


def test_the_plan_gate_moved_new_gone_and_absent():
    saved = PlanEntry("bfloat16", "float32", [_kept(10)])
    moved = compare_plans(saved, _plan(_kept(14)))
    assert moved == ("unchanged", "precision plan: the same 1 line(s) kept in float32 "
                                  "(moved: src/model.py:10 -> src/model.py:14)")
    got = compare_plans(saved, _plan(_kept(14), _kept(15, "m = jnp.mean(x)")))
    assert got is not None
    status, text = got
    assert status == "regressed" and "1 new line(s) must stay float32: src/model.py:15" in text
    assert "`m = jnp.mean(x)`" in text
    # the same code in another function is another line
    got = compare_plans(saved, _plan(_kept(10, function="Block.norm")))
    assert got is not None
    status, _ = got
    assert status == "regressed"
    got = compare_plans(PlanEntry("bfloat16", "float32", [_kept(10), _kept(11, "m = jnp.mean(x)")]),
                        _plan(_kept(10)))
    assert got is not None
    status, text = got
    assert status == "improved" and "no longer must stay float32: src/model.py:11" in text
    first = compare_plans(None, _plan(_kept(10)))
    assert first is not None and first[0] == "new"  # a baseline saved before tune_precision
    assert compare_plans(saved, None) is None  # this run made no plan: nothing to compare
    assert compare_plans(saved, _plan(error="TraceError: ...")) is None


def _case(plan: PrecisionRecord | None, bits: float = 2.0) -> CaseResult:
    return CaseResult("tests/test_m.py::test_block", "bfloat16", samples=50,
                      original=VariantStats(max_error_bits=bits), precision=plan)


def test_the_gate_fails_a_case_on_a_new_kept_line_and_names_it_first():
    entry = BaselineEntry.from_case(_case(_plan(_kept(10))))
    baseline = Baseline({"tests/test_m.py::test_block": entry})
    ids = ["tests/test_m.py::test_block"]
    regressed = compare([_case(_plan(_kept(12), _kept(13, "m = jnp.mean(x)")))], baseline,
                        collected_nodeids=ids)
    assert regressed.failed
    message = regressed.cases[0].message
    assert message.startswith("tests/test_m.py::test_block (original function): precision plan: 1 new line")
    assert "figures: within the baseline" in message
    assert "regressions (these fail the run)" in format_baseline_summary(regressed)
    moved = compare([_case(_plan(_kept(12)))], baseline, collected_nodeids=ids)
    assert not moved.failed and moved.cases[0].status == "unchanged"
    improved = compare([_case(_plan())], baseline, collected_nodeids=ids)
    assert improved.cases[0].status == "improved" and not improved.failed
    # the figures still gate: a rise of the error regresses a case whose kept lines are the same
    worse = compare([_case(_plan(_kept(12)), bits=5.0)], baseline, collected_nodeids=ids)
    assert worse.failed and "max error rose" in worse.cases[0].message


def test_kept_lines_round_trip_through_the_baseline_file(tmp_path):
    path = tmp_path / "baseline.json"
    save_baseline(path, [_case(_plan(_kept(10), _kept(11, "y = y + 1.0")))], existing=None)
    entry = load_baseline(path).entries["tests/test_m.py::test_block"]
    assert entry.precision is not None
    assert [k.key for k in entry.precision.lines] == [
        "src/model.py::Block.__call__::v = jnp.mean(x * x)", "src/model.py::Block.__call__::y = y + 1.0"]
    # a case without a plan (or whose plan failed) stores none: the next compare calls its plan new
    save_baseline(path, [_case(_plan(error="TraceError: x"))], existing=None)
    assert load_baseline(path).entries["tests/test_m.py::test_block"].precision is None


@pytest.mark.parametrize(("change", "where", "problem"), [
    (lambda p: p["lines"][0].update(occurrence="1"), "precision.lines[0].occurrence", "an integer >= 1"),
    (lambda p: p["lines"][0].pop("text"), "precision.lines[0].text", "missing key"),
    (lambda p: p.update(lines={"a": 1}), "precision.lines", "expected a list"),
    (lambda p: p.update(high=32), "precision.high", "expected a string"),
])
def test_a_malformed_plan_entry_is_a_clear_error_and_the_file_is_kept(tmp_path, change, where, problem):
    path = tmp_path / "baseline.json"
    save_baseline(path, [_case(_plan(_kept(10)))], existing=None)
    data = json.loads(path.read_text())
    change(data["cases"]["tests/test_m.py::test_block"]["precision"])
    path.write_text(json.dumps(data))
    text = path.read_text()
    with pytest.raises(BaselineError) as info:
        load_baseline(path)
    assert f"cases['tests/test_m.py::test_block'].{where}" in str(info.value)
    assert problem in str(info.value)
    assert path.read_text() == text  # loading never rewrites


def test_the_json_report_carries_the_plan_and_validates_it():
    report = build_report([_case(_plan(_kept(10)))], jax_version="0.12.0", backends=["cpu"])
    validate_report(report)
    plan = report["cases"][0]["precision"]
    assert plan["lines"] == [{"location": "src/model.py:10", "function": "Block.__call__",
                              "text": "v = jnp.mean(x * x)", "occurrence": 1}]
    assert plan["original"]["max_ulps"] is None  # an overflow's inf ulps: JSON null
    assert CaseResult.from_json(json.loads(json.dumps(report["cases"][0]))).precision == _case(
        _plan(_kept(10))).precision
    plan["reached"] = "yes"
    with pytest.raises(ValueError, match=r"cases\[0\]\.precision\.reached: expected true or false"):
        validate_report(report)


def test_the_option_is_validated_naming_it():
    assert jst.settings(tune_precision=True).tune_precision is True
    assert jst.settings().tune_precision is False
    with pytest.raises(SettingsError, match=r"tune_precision='yes': expected True or False"):
        jst.settings(tune_precision="yes")
