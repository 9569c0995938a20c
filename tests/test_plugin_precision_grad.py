"""``grad=True`` with ``tune_precision=True`` through pytester (issue 49, deliverable 3): the gradient's plan
in the failure text, the JSON (``precision.gradient``) and the HTML report, and the baseline gate failing on
a new line the gradient must keep in float32 (an old baseline file without the field still loads).

The program: ``y = tanh(x)`` in bfloat16 over (2, 4), with ``rules=()`` (upcasts only: the catalogue's
``tanh_derivative`` rule would otherwise fix it by a rewrite). Why its gradient needs the line in float32 in
both passes while its value needs nothing (mathematics, no figure of the package's):

- the value: ``tanh(x)`` rounded to bfloat16 is within half an ulp, inside the forward plan's 4 ulps;
- the gradient: JAX differentiates ``tanh`` as ``1 - y^2`` of the forward result ``y``. Over (2, 4),
  ``1 - y^2 = sech(x)^2`` lies in (1.3e-3, 7.1e-2) while bfloat16 rounds ``y`` (in (0.96, 1), ulp 2^-8) by
  up to 2^-9 = 2e-3, so ``1 - y^2`` is off by up to 4e-3: more than itself near x = 4 (above
  ``atanh(1 - 2^-9)`` = 3.5, ``y`` rounds to 1 and the gradient to 0), far past the 1e-2 norm-wise target.
  In float32 ``y`` is off by 2^-25, ``1 - y^2`` by 6e-8 relative to 1.3e-3: 5e-5, within it. The backward
  operations alone cannot fix it (they read the rounded ``y``): the line is kept in both passes.

A second ``z = tanh(x + 0.5)`` is the same kind of line: the gate's new one.
"""

from __future__ import annotations

import json

import pytest

from pytest_jaxstab._report import validate_report

# the HTML report needs matplotlib; imported once here, before any in-process run imports it (pytester
# restores sys.modules after each run, and matplotlib imported twice in one process mixes the classes of
# both imports)
pytest.importorskip("matplotlib.figure")

ARGS = ("--jaxstab-examples=10",)
SRC = '''import jax.numpy as jnp
import pytest


@pytest.mark.stabilize(dtype="bfloat16", shapes={"x": (8,)}, domain=(2.0, 4.0), grad=True,
                       tune_precision=True, rules=())
def test_mp(x):
    y = jnp.tanh(x)  # its derivative 1 - y^2 cancels
    return y
'''
KEPT = "y = jnp.tanh(x)"
ADDED = "z = jnp.tanh(x + 0.5)"


def _with_new_line() -> str:
    return SRC.replace("    return y\n", f"    {ADDED}\n    return y + z\n")


def _line(src: str, code: str) -> int:
    return 1 + next(i for i, t in enumerate(src.splitlines()) if t.strip().startswith(code))


def _case(path) -> dict:
    report = json.loads(path.read_text())
    validate_report(report)
    (case,) = report["cases"]
    return case


def test_the_gradient_plan_is_in_the_failure_text_the_json_and_the_html(pytester, run_jaxstab):
    pytester.makepyfile(test_mp=SRC)
    line = _line(SRC, KEPT)
    result = run_jaxstab(*ARGS, "--jaxstab-report=json:r.json", "--jaxstab-report=html:r.html")
    result.assert_outcomes(failed=1)  # the bfloat16 gradient fails the check
    result.stdout.fnmatch_lines([
        "precision plan (bfloat16 program, jst.tune_precision): 0 line(s) kept in float32 *",
        "gradient plan (grad=True, bfloat16 backward pass, *): 1 line(s) in float32 in both passes, 0 in the "
        "backward pass only *",
        f"  keep in float32: test_mp.py:{line} (test_mp: `{KEPT}`)",
        "  loss scale 2^0 (range 2^*..2^* on the samples; upper bound set by *; lower bound by x *",
        "  original: norm-wise relative error max * (as written, scale 1)",
        "  tuned:    norm-wise relative error max * (within 0.01 on * samples)",
    ])
    plan = _case(pytester.path / "r.json")["precision"]
    assert plan["lines"] == []  # the value needs nothing
    grad = plan["gradient"]
    assert grad["lines"] == [{"location": f"test_mp.py:{line}", "function": "test_mp", "text": KEPT,
                              "occurrence": 1}]
    assert grad["backward_lines"] == [] and grad["rewrites"] == [] and grad["reached"] is True
    # bfloat16 has float32's exponent range: no scale needed, and 1 lies inside the measured range
    assert grad["loss_scale"] == 1.0 and grad["scale_range"][0] <= 1.0 <= grad["scale_range"][1]
    assert grad["lower"]["name"] == "x" and grad["upper"]["location"] is None  # the loss's own cotangent
    # as written the gradient misses the target (module docstring), tuned it is within it
    assert grad["original"]["max_error"] is None or grad["original"]["max_error"] > grad["tolerance"]
    assert grad["tuned"]["max_error"] <= grad["tolerance"] == 1e-2 and grad["tuned"]["nonfinite"] == 0
    html = (pytester.path / "r.html").read_text()
    assert "Gradient plan: which lines must stay float32 for the gradient" in html
    assert f"<code>test_mp.py:{line}</code></td><td>both passes</td>" in html


# four runs (11 s on a 2-core CPU): the slow tier; the gate's decisions are unit-tested, cheaply, in
# test_precision_records.py
@pytest.mark.slow
def test_the_gate_fails_a_new_line_of_the_gradient_plan_and_loads_an_old_baseline(pytester, run_jaxstab):
    margin = "--jaxstab-compare-fail=bits:64"  # the figures may move: what fails here is the plan alone
    pytester.makepyfile(test_mp=SRC)
    run_jaxstab(*ARGS, "--jaxstab-save-baseline").assert_outcomes(failed=1)
    path = pytester.path / ".jaxstab" / "baseline.json"
    saved = json.loads(path.read_text())
    entry = saved["cases"]["test_mp.py::test_mp"]["precision"]
    assert entry["lines"] == [] and [k["text"] for k in entry["gradient"]["lines"]] == [KEPT]

    # a baseline written before the gradient's plan was stored: loads, the gradient's plan is "new"
    del entry["gradient"]
    path.write_text(json.dumps(saved))
    old = run_jaxstab(*ARGS, "--jaxstab-compare", margin)
    old.assert_outcomes(passed=1)  # a known instability, nothing new kept
    old.stdout.fnmatch_lines(["jaxstab baseline: 0 regressed, *"])
    run_jaxstab(*ARGS, "--jaxstab-save-baseline")

    pytester.makepyfile(test_mp=_with_new_line())
    new = run_jaxstab(*ARGS, "--jaxstab-compare", margin)
    new.assert_outcomes(failed=1)
    new.stdout.fnmatch_lines([
        "regressed against the jaxstab baseline: test_mp.py::test_mp (original function): gradient plan: 1 "
        f"new line(s) must stay float32: test_mp.py:{_line(_with_new_line(), ADDED)} (test_mp: `{ADDED}`) "
        "(the baseline kept 1); precision plan: the same 0 line(s) kept in float32*",
        "jaxstab baseline: 1 regressed, *",
    ])


# two xdist workers in-process: the slow tier (conftest.FAST_PLUGIN_RUNS)
@pytest.mark.slow
def test_the_gradient_plan_rides_to_the_xdist_controller_unchanged(pytester, run_jaxstab):
    pytest.importorskip("xdist")
    pytester.makepyfile(test_mp=SRC)
    plans = {}
    for run in ((), ("-n", "2")):
        run_jaxstab(*ARGS, "--jaxstab-seed=0", "--jaxstab-report=json:r.json", *run).assert_outcomes(failed=1)
        plans[run] = _case(pytester.path / "r.json")["precision"]["gradient"]
    assert plans[()] == plans[("-n", "2")] and plans[()]["lines"][0]["text"] == KEPT
