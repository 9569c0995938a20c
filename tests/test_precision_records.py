# pyright: reportOptionalMemberAccess=false, reportOptionalSubscript=false, reportGeneralTypeIssues=false
# (compare_plans and a record's gradient are Optional: the test's own assertions fail first)
"""The gradient plan as data (issue 49, deliverable 3), without pytest runs: its JSON round trip (what rides
to the xdist controller and into the report), the report's validation, the baseline entry (an old file
without it loads) and the gate's decisions on the gradient's kept lines. The pytester scenarios are in
``test_plugin_precision_grad.py``. No figure here is computed: the records are written by hand, and what
is tested is where each field goes and what the gate decides."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from pytest_jaxstab._baseline import PlanEntry, compare_plans
from pytest_jaxstab._baseline._plans import InvalidPlan, plan_from_json
from pytest_jaxstab._report import build_report, validate_report
from pytest_jaxstab._report._paths import relative_locations
from pytest_jaxstab._results import (
    CaseResult,
    GradErrorFigures,
    GradientPlanRecord,
    KeptLine,
    PrecisionRecord,
    ScaleBound,
)

NORM = KeptLine("/root/src/m.py:12", "loss", "n = jnp.sqrt(jnp.sum(g * g))")
BIAS = KeptLine("/root/src/m.py:20", "loss", "b = jnp.sum(h, axis=0)")


def _gradient(lines=(NORM,), backward=(BIAS,)) -> GradientPlanRecord:
    return GradientPlanRecord(
        "float16", lines=list(lines), backward_lines=list(backward), loss_scale=2.0 ** 10,
        scale_range=(2.0 ** 4, 2.0 ** 14),
        upper=ScaleBound(3.5, "/root/src/m.py:12", "integer_pow"), lower=ScaleBound(2e-9, name="params['w']"),
        original=GradErrorFigures(math.inf, 0.3, 5, 32), scaled=GradErrorFigures(0.2, 0.05, 0, 32),
        tuned=GradErrorFigures(4e-3, 1e-3, 0, 32))


def _record(gradient=None) -> PrecisionRecord:
    return PrecisionRecord("float16", samples=64, gradient=gradient if gradient is not None else _gradient())


def test_the_gradient_plan_round_trips_through_json_and_validates():
    case = CaseResult("t.py::test_loss", "float16", precision=_record())
    raw = json.loads(json.dumps(case.to_json()))  # JSON has no infinity: the error as written is null
    assert raw["precision"]["gradient"]["original"]["max_error"] is None
    assert CaseResult.from_json(raw) == case  # what a worker sends is what the controller reads
    report = build_report([case], jax_version="0", backends=["cpu"])
    validate_report(report)
    report["cases"][0]["precision"]["gradient"]["backward_lines"][0]["function"] = 3
    with pytest.raises(ValueError, match=r"gradient\.backward_lines\[0\]\.function: expected a string"):
        validate_report(report)


def test_the_failure_text_names_each_pass_the_scale_and_its_bounds():
    text = _record().describe()
    assert any(row.startswith("gradient plan (grad=True, float16 backward pass") for row in text.splitlines())
    assert "  keep in float32, backward only: /root/src/m.py:20 (loss: `b = jnp.sum(h, axis=0)`)" in text
    assert ("loss scale 2^10 (range 2^4..2^14 on the samples; upper bound set by /root/src/m.py:12 "
            "(integer_pow, up to 3.5 at scale 1); lower bound by params['w'] (smallest entry the target "
            "sees: 2e-09))") in text
    assert "  scaled:   norm-wise relative error max 2.00e-01" in text  # shown only when scaled


def test_relative_locations_reach_the_gradient_plan():
    case = relative_locations(CaseResult("t.py::f", "float16", precision=_record()), "/root")
    grad = case.precision.gradient
    assert [k.location for k in grad.lines + grad.backward_lines] == ["src/m.py:12", "src/m.py:20"]
    assert grad.upper.location == "src/m.py:12"


def test_an_old_baseline_entry_without_the_gradient_loads_and_the_gradient_is_new():
    old = plan_from_json({"dtype": "float16", "high": "float32", "lines": []})
    assert old.gradient is None
    status, text = compare_plans(old, _record())
    assert status == "unchanged" and "gradient plan not in the baseline yet" in text  # reported, not failed
    entry = PlanEntry.from_record(_record())
    assert plan_from_json(json.loads(json.dumps(entry.to_json()))) == entry
    with pytest.raises(InvalidPlan) as info:
        plan_from_json({**entry.to_json(), "gradient": {"lines": []}})
    assert (info.value.where, info.value.problem) == (".gradient.backward_lines", "missing key")


def test_the_gate_ranks_both_passes_above_the_backward_pass_only():
    saved = PlanEntry.from_record(_record())
    moved = dataclasses.replace(NORM, location="/root/src/m.py:15")  # an edit above: the same line
    assert compare_plans(saved, _record(_gradient(lines=(moved,))))[0] == "unchanged"
    status, text = compare_plans(saved, _record(_gradient(lines=(NORM, BIAS), backward=())))
    assert status == "regressed"  # the bias line now needs its forward operations in float32 too
    assert text.startswith("gradient plan: 1 new line(s) must stay float32: /root/src/m.py:20 (loss: "
                           "`b = jnp.sum(h, axis=0)`) (was backward only)")
    status, text = compare_plans(saved, _record(_gradient(lines=(), backward=(NORM, BIAS))))
    assert status == "improved" and "(now backward only)" in text
    extra = KeptLine("/root/src/m.py:30", "loss", "e = jnp.exp(z)")
    assert compare_plans(saved, _record(_gradient(backward=(BIAS, extra))))[0] == "regressed"
    # a gradient plan that could not be made gates nothing
    failed = GradientPlanRecord("float16", error="ArgumentError: no batch")
    assert compare_plans(saved, _record(failed))[0] == "unchanged"
