"""``tune_precision=True`` through pytester (issue 34, deliverable 2), in bfloat16 and float16: the plan in
the failure text, the JSON and the HTML report; usage errors; the baseline gate failing on a new line that
must stay float32 and not on a line that moved.

The programs are chosen so that the line must stay float32 on both JAX generations:

- bfloat16: ``(x + 1024.0) - 1024.0`` for ``x`` in (0.5, 1) is 0 in bfloat16 (the ulp of 1024 is 8) and
  exact in float32 (1024 plus an 8-bit ``x`` needs 19 bits).
- float16: ``sum(x) / 2048`` over 2048 elements of (150, 250): the sum (at least 307200) is past
  float16's 65504 and the mean inf where it is about 200; kept in float32, exact. No catalogue rule fixes
  it (a norm would be: the engine now sees through ``jnp.sum``'s float32 accumulation and the plan
  prefers the ``norm`` rewrite to a kept line). The absorption is no float16 example for the check: jax
  0.10's XLA on the CPU keeps a jitted chain of float16 operations in float32 (excess precision), so
  ``(x + 1024.0) - 1024.0`` passes the check there; a reduction's result is converted to float16 on
  both generations.

The figures the plan reports are jst.tune_precision's own (tested against mpmath in
``test_tune_precision.py``); here what is tested is which line the reports name and what the gate does.
"""

from __future__ import annotations

import json

import pytest

from pytest_jaxstab._report import validate_report

DTYPES = ["float16", "bfloat16"]
ARGS = ("--jaxstab-examples=10",)

HEAD = '''import jax.numpy as jnp
import pytest


def helper():
    return 1{above}


'''
PROGRAMS = {
    "bfloat16": ('''@pytest.mark.stabilize(dtype="bfloat16", shapes={{"x": (8,)}}, domain=(0.5, 1.0),
                       tune_precision=True)
def test_mp(x):{inside}
    y = (x + 1024.0) - 1024.0  # absorbed in the low dtype
    return y * 3.0
''', "y = (x + 1024.0) - 1024.0", ("    return y * 3.0", "    z = (x + 2048.0) - 2048.0\n    return y * z"),
        "z = (x + 2048.0) - 2048.0"),
    "float16": ('''@pytest.mark.stabilize(dtype="float16", shapes={{"x": (2048,)}}, domain=(150.0, 250.0),
                       tune_precision=True)
def test_mp(x):{inside}
    y = jnp.sum(x) / 2048.0  # past 65504 in the low dtype
    return y * 0.5
''', "y = jnp.sum(x) / 2048.0",
        ("    return y * 0.5", "    z = jnp.sum(x * 0.5) / 1024.0\n    return y * z"),
        "z = jnp.sum(x * 0.5) / 1024.0"),
}


def _source(dtype: str, *, moved: bool = False, new_line: bool = False) -> str:
    """The test module; moved: an unrelated edit above the kept line (a function above the test, a comment
    inside it); new_line: one more line that must stay float32 (the gate's regression)."""
    body, _, (old, new), _ = PROGRAMS[dtype]
    above = "\n\n\ndef unrelated():\n    return 2" if moved else ""
    inside = "\n    # an unrelated comment above the kept line" if moved else ""
    text = (HEAD + body).format(above=above, inside=inside)
    return text.replace(old, new) if new_line else text


def _line(dtype: str, code: str, **kw: bool) -> int:
    lines = _source(dtype, **kw).splitlines()
    return 1 + next(i for i, t in enumerate(lines) if t.strip().startswith(code))


def _cases(path) -> dict:
    report = json.loads(path.read_text())
    validate_report(report)
    return {c["nodeid"]: c for c in report["cases"]}


@pytest.mark.parametrize("dtype", DTYPES)
def test_the_plan_is_in_the_failure_text_the_json_and_the_html(pytester, run_jaxstab, dtype):
    kept = PROGRAMS[dtype][1]
    pytester.makepyfile(test_mp=_source(dtype))
    line = _line(dtype, kept)
    result = run_jaxstab(*ARGS, "--jaxstab-report=json:r.json", "--jaxstab-report=html:r.html")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        f"precision plan ({dtype} program, jst.tune_precision): 1 line(s) kept in float32 *",
        f"  keep in float32: test_mp.py:{line} (test_mp: `{kept}`)",
        "  original: max *",
        "  tuned:    max * (within 4 ulps on * samples)",
    ])
    plan = _cases(pytester.path / "r.json")["test_mp.py::test_mp"]["precision"]
    assert plan["dtype"] == dtype and plan["high"] == "float32" and plan["reached"] is True
    assert plan["lines"] == [{"location": f"test_mp.py:{line}", "function": "test_mp", "text": kept,
                              "occurrence": 1}]
    assert plan["rewrites"] == []
    # the figures are the plan's: the program as written is far off, the tuned one within the target
    assert plan["original"]["max_ulps"] is None or plan["original"]["max_ulps"] > 4
    assert plan["tuned"]["max_ulps"] <= 4 and plan["tuned"]["overflows"] == 0
    assert 0 < plan["high_share"] < 1  # the line's work only (not tanh's, not the product's)
    html = (pytester.path / "r.html").read_text()
    assert "Precision plan: which lines must stay float32" in html
    assert f"<code>test_mp.py:{line}</code>" in html and f"<code>{kept}</code>" in html


# two xdist workers in-process (9 s): the slow tier holds the xdist runs (conftest.FAST_PLUGIN_RUNS)
@pytest.mark.slow
def test_the_plan_rides_to_the_xdist_controller_unchanged(pytester, run_jaxstab):
    pytest.importorskip("xdist")
    pytester.makepyfile(test_mp=_source("bfloat16"))
    plans = {}
    for run in ((), ("-n", "2")):
        run_jaxstab(*ARGS, "--jaxstab-seed=0", "--jaxstab-report=json:r.json", *run).assert_outcomes(failed=1)
        plans[run] = _cases(pytester.path / "r.json")["test_mp.py::test_mp"]["precision"]
    assert plans[()] == plans[("-n", "2")] and plans[()]["lines"][0]["text"] == PROGRAMS["bfloat16"][1]


def test_a_passing_case_carries_its_plan_and_the_session_option_skips_float32(pytester, run_jaxstab):
    pytester.makepyfile(test_ok='''
import jax.numpy as jnp
import pytest

@pytest.mark.stabilize(dtype="float32", shapes={"x": (4,)}, domain=(-3, 3))
def test_f32(x):
    return jnp.tanh(x)

def test_fixture(jaxstab):
    jaxstab.check(jnp.tanh, shapes=[(4,)], dtype="float16", domain=(-3, 3), name="tanh")
''')
    result = run_jaxstab(*ARGS, "--jaxstab-tune-precision", "--jaxstab-report=json:r.json", "-v")
    result.assert_outcomes(passed=2)  # session-wide: applied to low-precision cases only, no error
    result.stdout.fnmatch_lines(["jaxstab: *tune-precision*"])
    cases = _cases(pytester.path / "r.json")
    assert "precision" not in cases["test_ok.py::test_f32"]
    plan = cases["test_ok.py::test_fixture::tanh"]["precision"]
    assert plan["lines"] == [] and plan["rewrites"] == [] and plan["reached"] is True
    off = run_jaxstab(*ARGS, "--jaxstab-report=json:r.json")  # near miss: option off, no plan
    off.assert_outcomes(passed=2)
    assert "precision" not in _cases(pytester.path / "r.json")["test_ok.py::test_fixture::tanh"]


def test_asking_for_a_plan_of_a_float32_case_is_a_usage_error_naming_the_fix(pytester, run_jaxstab):
    pytester.makepyfile(test_bad='''
import jax.numpy as jnp
import pytest

@pytest.mark.stabilize(dtype="float32", shapes={"x": (4,)}, tune_precision=True)
def test_marker(x):
    return x

@pytest.mark.stabilize(dtype="float16", shapes={"x": (4,)}, tune_precision="yes")
def test_bad_value(x):
    return x

def test_fixture(jaxstab):
    jaxstab.check(jnp.tanh, shapes=[(4,)], dtype="float64", tune_precision=True)
''')
    result = run_jaxstab(*ARGS, "--continue-on-collection-errors")
    result.assert_outcomes(failed=1, errors=2)
    result.stdout.fnmatch_lines([
        "*test_bad.py::test_marker: bad @pytest.mark.stabilize: tune_precision=True finds which lines of a "
        "bfloat16/float16 program must stay float32, and this case is dtype='float32'. Check the "
        "low-precision program (dtype=\"bfloat16\" or dtype=\"float16\"), or drop tune_precision=True.",
        "*test_bad.py::test_bad_value: bad @pytest.mark.stabilize: tune_precision='yes': expected True or "
        "False",
    ])
    result.stdout.fnmatch_lines(["*test_bad.py::test_fixture: ArgumentError: tune_precision=True * "
                                 "this case is dtype='float64'*"])


@pytest.mark.parametrize("dtype", [DTYPES[0], pytest.param(DTYPES[1], marks=pytest.mark.slow)])
def test_the_gate_fails_a_new_kept_line_and_not_a_moved_one(pytester, run_jaxstab, dtype):
    _, kept, _, added = PROGRAMS[dtype]
    # bits:64 lets the figures move as they like: what fails here is the plan alone
    margin = "--jaxstab-compare-fail=bits:64"
    pytester.makepyfile(test_mp=_source(dtype))
    run_jaxstab(*ARGS, "--jaxstab-save-baseline").assert_outcomes(failed=1)  # the verdict, as saved
    saved = json.loads((pytester.path / ".jaxstab" / "baseline.json").read_text())
    entry = saved["cases"]["test_mp.py::test_mp"]["precision"]
    assert [(k["function"], k["text"]) for k in entry["lines"]] == [("test_mp", kept)]

    pytester.makepyfile(test_mp=_source(dtype, moved=True))
    assert _line(dtype, kept, moved=True) == _line(dtype, kept) + 5
    moved = run_jaxstab(*ARGS, "--jaxstab-compare", margin, "--jaxstab-report=json:r.json")
    moved.assert_outcomes(passed=1)  # a known instability with the same kept line, five lines lower
    case = _cases(pytester.path / "r.json")["test_mp.py::test_mp"]
    assert case["gate"] in ("known", "unchanged") and case["precision"]["lines"][0]["text"] == kept
    moved.stdout.fnmatch_lines(["jaxstab baseline: 0 regressed, *"])

    pytester.makepyfile(test_mp=_source(dtype, moved=True, new_line=True))
    new = run_jaxstab(*ARGS, "--jaxstab-compare", margin)
    new.assert_outcomes(failed=1)
    new.stdout.fnmatch_lines([
        "regressed against the jaxstab baseline: test_mp.py::test_mp (original function): precision "
        f"plan: 1 new line(s) must stay float32: test_mp.py:{_line(dtype, added, moved=True, new_line=True)} "
        f"(test_mp: `{added}`) (the baseline kept 1)*",
        "jaxstab baseline: 1 regressed, *",
    ])

    # the other way: a line that no longer must stay float32 is an improvement, reported, not failed
    run_jaxstab(*ARGS, "--jaxstab-save-baseline")
    pytester.makepyfile(test_mp=_source(dtype))
    better = run_jaxstab(*ARGS, "--jaxstab-compare", margin)
    better.assert_outcomes(passed=1)
    better.stdout.fnmatch_lines([
        "jaxstab baseline: 0 regressed, 0 known, 1 improved, *",
        f"*precision plan: 1 line(s) no longer must stay float32: test_mp.py:* (test_mp: `{added}`)*",
    ])


def test_a_malformed_plan_in_the_baseline_stops_the_run_and_the_file_is_kept(pytester, run_jaxstab):
    pytester.makepyfile(test_mp=_source("bfloat16"))
    run_jaxstab(*ARGS, "--jaxstab-save-baseline")
    path = pytester.path / ".jaxstab" / "baseline.json"
    data = json.loads(path.read_text())
    data["cases"]["test_mp.py::test_mp"]["precision"]["lines"][0]["occurrence"] = 0
    path.write_text(json.dumps(data))
    text = path.read_text()
    for option in ("--jaxstab-compare", "--jaxstab-save-baseline"):
        result = run_jaxstab(*ARGS, option)
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        err = result.stderr.str()  # (fnmatch would read "[0]" as a character class)
        assert f"ERROR: {option}: jaxstab baseline " in err
        assert ("cases['test_mp.py::test_mp'].precision.lines[0].occurrence: expected an integer >= 1, "
                "got 0") in err
        assert path.read_text() == text  # never overwritten: the baseline is not lost
