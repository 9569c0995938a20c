"""The JSON report against schema version 1 as docs/architecture.md states it, written out here.

The schema below is this test's own reading of the documentation, independent of
``_report._json.validate_report``: the reports the package builds and the file the plugin writes must
conform to it, and ``validate_report`` must reject what it rejects.
"""

from __future__ import annotations

import copy
import json
import math
from typing import Any

import pytest

from pytest_jaxstab import CaseResult, VariantStats
from pytest_jaxstab._report import build_report, validate_report
from pytest_jaxstab._results import NanOriginRecord, RewriteRecord, TimingRecord

DTYPES = {"float16", "bfloat16", "float32", "float64"}


def _count(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _bits(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0


def _seconds(v: Any) -> bool:  # a time or ratio; NaN/inf allowed where a figure could not be taken
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _text(v: Any) -> bool:
    return isinstance(v, str)


def _location(v: Any) -> bool:
    return v is None or isinstance(v, str)


def _one_of(*values: str):
    return lambda v: v in values


VARIANT = {"max_error_bits": _bits, "mean_error_bits": _bits, "overflows": _count,
           "verdict": _one_of("pass", "fail")}
CASE = {
    # the schema names no dtype values: the check takes the float dtypes only, and reports say which
    "nodeid": _text, "dtype": lambda v: v in DTYPES, "samples": _count, "discarded": _count,
    "uncertain": _count, "outcome": _one_of("passed", "failed"), "original": VARIANT, "rewritten": VARIANT,
    "rewrites": [{"rule": _text, "location": _location}],
    "nan_origins": [{"variant": _one_of("original", "rewritten"), "primitive": _text, "location": _location}],
    "timing": [{"backend": _text, "original_s": _seconds, "rewritten_s": _seconds, "ratio": _seconds}],
}
REPORT = {"version": lambda v: v == 1 and not isinstance(v, bool), "jax_version": _text,
          "backends": [_text], "cases": [CASE]}


def problems(value: Any, schema: Any = REPORT, path: str = "report") -> list[str]:
    """Where ``value`` departs from ``schema`` (extra keys are allowed); empty when it conforms."""
    if isinstance(schema, dict):
        if not isinstance(value, dict):
            return [f"{path}: not an object"]
        out = []
        for key, sub in schema.items():
            if key not in value:
                out.append(f"{path}.{key}: missing")
            else:
                out += problems(value[key], sub, f"{path}.{key}")
        return out
    if isinstance(schema, list):
        if not isinstance(value, list):
            return [f"{path}: not a list"]
        return [p for i, item in enumerate(value) for p in problems(item, schema[0], f"{path}[{i}]")]
    return [] if schema(value) else [f"{path}: {value!r}"]


def _cases() -> list[CaseResult]:
    unstable = CaseResult(
        "tests/test_loss.py::test_lse", "float32", samples=200, discarded=3, uncertain=1, outcome="failed",
        original=VariantStats(32.0, 5.25, 17, "fail"), rewritten=VariantStats(1.0, 0.25, 0, "pass"),
        rewrites=[RewriteRecord("logsumexp", "tests/test_loss.py:12"), RewriteRecord("softplus", None)],
        nan_origins=[NanOriginRecord("original", "exp", "tests/test_loss.py:12", kind="overflow")],
        timing=[TimingRecord("cpu", 1e-5, 1.2e-5, 1.2), TimingRecord("gpu", 2e-6, math.nan, math.nan)])
    stable = CaseResult("tests/test_act.py::test_tanh", "bfloat16", samples=50)
    return [unstable, stable]


def _json_report(cases: list[CaseResult]) -> dict[str, Any]:
    # NaN travels as JSON's NaN token, as the report file writes it
    return json.loads(json.dumps(build_report(cases, jax_version="0.12.0", backends=["cpu", "gpu"])))


def test_built_reports_conform():
    report = _json_report(_cases())
    assert problems(report) == []
    assert [c["nodeid"] for c in report["cases"]] == [c.nodeid for c in _cases()]
    assert report["cases"][0]["original"] == {"max_error_bits": 32.0, "mean_error_bits": 5.25,
                                              "overflows": 17, "verdict": "fail"}
    assert problems(_json_report([])) == []


def test_the_schema_here_is_not_vacuous():
    report = _json_report(_cases())
    del report["cases"][0]["rewritten"]["verdict"]
    report["cases"][1]["samples"] = -1
    assert problems(report) == ["report.cases[0].rewritten.verdict: missing", "report.cases[1].samples: -1"]


@pytest.mark.parametrize("mutate", [
    lambda r: r.update(version=True),
    lambda r: r.update(jax_version=12),
    lambda r: r.update(backends=[1]),
    lambda r: r["cases"][0].update(discarded=1.5),
    lambda r: r["cases"][0].pop("uncertain"),
    lambda r: r["cases"][0]["original"].update(mean_error_bits=-1.0),
    lambda r: r["cases"][0]["original"].update(max_error_bits=math.inf),
    lambda r: r["cases"][0]["rewritten"].update(verdict="ok"),
    lambda r: r["cases"][0]["rewrites"][0].update(location=12),
    lambda r: r["cases"][0]["nan_origins"][0].pop("primitive"),
    lambda r: r["cases"][0]["timing"][0].pop("backend"),
    lambda r: r["cases"][0].update(timing={}),
], ids=lambda f: "")
def test_validate_report_rejects_what_the_schema_rejects(mutate):
    report = copy.deepcopy(_json_report(_cases()))
    mutate(report)
    assert problems(report) != []
    with pytest.raises(ValueError, match="jaxstab report"):
        validate_report(report)


SUITE = '''
import jax.numpy as jnp
import pytest

@pytest.mark.stabilize(dtype="float32", shapes={"x": (8,)}, domain=(85, 100))
def test_overflow(x):
    return jnp.log(jnp.sum(jnp.exp(x)))

def test_fixture(jaxstab):
    jaxstab.check(jnp.tanh, shapes=[(4,)], dtype="float32", domain=(-3, 3), name="tanh")
'''


def test_the_file_the_plugin_writes_conforms(pytester, run_jaxstab):
    pytester.makepyfile(test_suite=SUITE)
    result = run_jaxstab("--jaxstab-examples=10", "--jaxstab-report=json:r.json")
    result.assert_outcomes(passed=1, failed=1)
    report = json.loads((pytester.path / "r.json").read_text())
    assert problems(report) == []
    by_id = {c["nodeid"]: c for c in report["cases"]}
    assert set(by_id) == {"test_suite.py::test_overflow", "test_suite.py::test_fixture::tanh"}
    assert by_id["test_suite.py::test_overflow"]["outcome"] == "failed"  # as pytest decided
    assert by_id["test_suite.py::test_fixture::tanh"]["outcome"] == "passed"
