"""Sharded runs merge into one run's report and baseline (issue 23, item 1), replayed through pytester.

The CI scenario of ci/github-workflow-shards.yml: the suite split in 3 shards by pytest-split (each
serial, or with two xdist workers inside), each writing its JSON report; `python -m pytest_jaxstab merge`
then writes the report and the baseline. The reference is the serial run of the whole suite with the
same seed: its baseline file, byte for byte, and its report's cases. Bad merges write nothing.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_jaxstab import ReportMergeError
from pytest_jaxstab._report._merge import run_merge

# The slow tier (`make test-slow`, run in full by CI; `make test` leaves it out): docs/architecture.md,
# "Tests and their tiers".
pytestmark = pytest.mark.slow

SEED = ("--jaxstab-seed=3", "--jaxstab-examples=8")

# Six cases over three files, two of them unstable, one a jaxstab.check case (node id with a name).
FILES = {
    "test_a": '''
import jax.numpy as jnp
import pytest

@pytest.mark.stabilize(dtype="float32", shapes={"x": (4,)}, domain=(-3, 3))
def test_tanh(x):
    return jnp.tanh(x)

# Unstable: exp overflows float32 above ~88.7.
@pytest.mark.stabilize(dtype="float32", shapes={"x": (4,)}, domain=(80, 100))
def test_softplus(x):
    return jnp.log(1.0 + jnp.exp(x))
''',
    "test_b": '''
import jax.numpy as jnp
import pytest

@pytest.mark.stabilize(dtype="float32", shapes={"x": (4,)}, domain=(85, 100))
def test_lse(x):
    return jnp.max(x) + jnp.log(jnp.sum(jnp.exp(x - jnp.max(x))))

def test_checks(jaxstab):
    jaxstab.check(jnp.expm1, shapes=[(4,)], dtype="float32", domain=(-1, 1), name="expm1")
''',
    "test_c": '''
import jax.numpy as jnp
import pytest

# Unstable: cancellation in 1 - cos(x) near 0 (relative error grows as x shrinks).
@pytest.mark.stabilize(dtype="float32", shapes={"x": (4,)}, domain=(1e-4, 1e-2))
def test_versine(x):
    return 1.0 - jnp.cos(x)

@pytest.mark.stabilize(dtype="float32", shapes={"x": (4,)}, domain=(0.5, 4))
def test_log(x):
    return jnp.log(x)
''',
}
ALL = sorted(["test_a.py::test_tanh", "test_a.py::test_softplus", "test_b.py::test_lse",
              "test_b.py::test_checks::expm1", "test_c.py::test_versine", "test_c.py::test_log"])


def _merge(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # The real command line, in a fresh interpreter: what the CI merge job runs.
    return subprocess.run([sys.executable, "-m", "pytest_jaxstab", "merge", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ,
                               "PYTHONPATH": str(Path(__file__).resolve().parents[1])})


def _cases(path: Path) -> list[dict]:
    return json.loads(path.read_text())["cases"]


@pytest.mark.parametrize("inside", [(), ("-n", "2")], ids=["serial-shards", "n2-shards"])
def test_three_shards_merge_into_the_serial_runs_report_and_baseline(pytester, run_jaxstab, inside):
    pytest.importorskip("pytest_split")
    if inside:
        pytest.importorskip("xdist")
    pytester.makepyfile(**FILES)
    # An entry of a case no shard runs (a GPU-only test, say): both saves must keep it unchanged.
    entry = {"dtype": "float32", "samples": 5, "witnesses": [],
             "original": {"max_error_bits": 1.0, "mean_error_bits": 0.5, "overflows": 0, "verdict": "pass"},
             "rewritten": {"max_error_bits": 1.0, "mean_error_bits": 0.5, "overflows": 0, "verdict": "pass"}}
    old = json.dumps({"version": 1, "jaxstab_version": "0.0.0", "cases": {"test_gpu.py::test_k": entry}})
    (pytester.path / "serial_baseline.json").write_text(old)
    (pytester.path / "merged_baseline.json").write_text(old)

    serial = run_jaxstab(*SEED, "-n", "0", "--jaxstab-report=json:serial.json")
    serial.assert_outcomes(passed=4, failed=2)
    # A save from the serial run; the figures come from the seed, so saving does not change them.
    run_jaxstab(*SEED, "-n", "0", "--jaxstab-save-baseline=serial_baseline.json").assert_outcomes(
        passed=4, failed=2)
    ran = 0
    for group in (1, 2, 3):
        shard = run_jaxstab(*SEED, *inside, "--splits", "3", "--group", str(group),
                            f"--jaxstab-report=json:shard{group}.json")
        ran += sum(shard.parseoutcomes().get(k, 0) for k in ("passed", "failed"))
        assert (pytester.path / f"shard{group}.json").exists()
    assert ran == 6  # every test in exactly one shard

    done = _merge("shard1.json", "shard2.json", "shard3.json", "--report=json:merged.json",
                  "--save-baseline=merged_baseline.json", cwd=pytester.path)
    assert done.returncode == 0, done.stderr
    assert "merged 3 reports: 6 cases" in done.stdout
    serial_base = (pytester.path / "serial_baseline.json").read_bytes()
    assert (pytester.path / "merged_baseline.json").read_bytes() == serial_base
    assert "test_gpu.py::test_k" in json.loads(serial_base)["cases"]
    merged, reference = _cases(pytester.path / "merged.json"), _cases(pytester.path / "serial.json")
    assert [c["nodeid"] for c in merged] == ALL
    assert merged == reference
    assert {c["nodeid"] for c in merged if c["outcome"] == "failed"} == {
        "test_a.py::test_softplus", "test_c.py::test_versine"}


def _shard(path: Path, nodeids: list[str], top: dict | None = None, **run: object) -> None:
    case = {"nodeid": "", "dtype": "float32", "samples": 8, "discarded": 0, "uncertain": 0,
            "outcome": "passed", "rewrites": [], "nan_origins": [], "timing": [],
            "original": {"max_error_bits": 0.5, "mean_error_bits": 0.25, "overflows": 0, "verdict": "pass"},
            "rewritten": {"max_error_bits": 0.5, "mean_error_bits": 0.25, "overflows": 0, "verdict": "pass"}}
    report = {"version": 1, "jax_version": "0.12.0", "backends": ["cpu"], "jaxstab_version": "1.0",
              "run": {"seed": 1, "draws": "seeded", "examples": None, **run},
              "cases": [{**case, "nodeid": n} for n in nodeids], **(top or {})}
    path.write_text(json.dumps(report, indent=2))


@pytest.mark.parametrize(("second", "run", "needle", "fix"), [
    (["t.py::test_b"], {"seed": 2}, "'seed': 2", "same --jaxstab-seed"),
    (["t.py::test_b"], {"lens": "accuracy"}, "'lens': 'accuracy'", "same settings"),
    (["t.py::test_a"], {}, "t.py::test_a is in", "pytest-split --splits N --group K"),
    (["t.py::test_b"], {"top": {"jax_version": "0.11.0"}}, "jax_version is '0.11.0'", "same versions"),
    (["t.py::test_b"], {"top": {"judge": "accuracy"}}, "judge is 'accuracy'", "same settings"),
], ids=["mixed-seeds", "mixed-lens", "overlap", "mixed-jax", "mixed-judge"])
def test_a_bad_merge_names_the_problem_and_writes_nothing(tmp_path, second, run, needle, fix):
    _shard(tmp_path / "s1.json", ["t.py::test_a"])
    _shard(tmp_path / "s2.json", second, **run)
    baseline = tmp_path / "baseline.json"
    baseline.write_text("{}")  # would fail to load too: the shards are checked first
    with pytest.raises(ReportMergeError) as info:
        run_merge([tmp_path / "s1.json", tmp_path / "s2.json"], reports=["json:out.json"],
                  save_baseline=tmp_path / "b2.json", out=io.StringIO())
    message = str(info.value)
    assert "s2.json" in message and "s1.json" in message
    assert needle in message and fix in message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["baseline.json", "s1.json", "s2.json"]


def test_a_truncated_report_is_refused_by_the_command_line_and_nothing_is_written(tmp_path):
    _shard(tmp_path / "s1.json", ["t.py::test_a"])
    _shard(tmp_path / "s2.json", ["t.py::test_b"])
    text = (tmp_path / "s2.json").read_text()
    (tmp_path / "s2.json").write_text(text[: len(text) // 2])  # an interrupted upload
    done = _merge("s1.json", "s2.json", "--report=json:out.json", "--save-baseline=b.json", cwd=tmp_path)
    assert done.returncode == 2
    assert "s2.json: not valid JSON" in done.stderr and "run that shard again" in done.stderr
    assert "Traceback" not in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s1.json", "s2.json"]


def test_shards_with_random_draws_are_refused(tmp_path):
    _shard(tmp_path / "s1.json", ["t.py::test_a"], seed=None, draws="random")
    _shard(tmp_path / "s2.json", ["t.py::test_b"], seed=None, draws="random")
    with pytest.raises(ReportMergeError, match="without a fixed seed"):
        run_merge([tmp_path / "s1.json", tmp_path / "s2.json"], out=io.StringIO())


def test_a_case_missing_a_schema_key_is_refused(tmp_path):
    _shard(tmp_path / "s1.json", ["t.py::test_a"])
    report = json.loads((tmp_path / "s1.json").read_text())
    del report["cases"][0]["original"]["overflows"]
    (tmp_path / "s1.json").write_text(json.dumps(report))
    with pytest.raises(ReportMergeError, match=r"s1.json: .*cases\[0\]\.original\.overflows: missing key"):
        run_merge([tmp_path / "s1.json"], out=io.StringIO())


def test_a_merge_compared_with_a_baseline_exits_1_on_a_regression_and_keeps_the_gate(tmp_path):
    _shard(tmp_path / "s1.json", ["t.py::test_a"])
    _shard(tmp_path / "s2.json", ["t.py::test_b"])
    # The baseline knew test_a at 0.25 bits; the shards measured 0.5 (_shard's figures): with the
    # default margin (any growth of the max error) it regressed; test_b has no entry: new.
    stats = {"max_error_bits": 0.25, "mean_error_bits": 0.25, "overflows": 0, "verdict": "pass"}
    baseline = {"version": 1, "jaxstab_version": "1.0", "cases": {"t.py::test_a": {
        "dtype": "float32", "samples": 8, "original": stats, "rewritten": stats, "witnesses": []}}}
    (tmp_path / "base.json").write_text(json.dumps(baseline))
    out = io.StringIO()
    status = run_merge([tmp_path / "s1.json", tmp_path / "s2.json"], compare=tmp_path / "base.json",
                       reports=["term", f"json:{tmp_path / 'merged.json'}"], out=out)
    assert status == 1
    merged = json.loads((tmp_path / "merged.json").read_text())
    assert {c["nodeid"]: c["gate"] for c in merged["cases"]} == {"t.py::test_a": "regressed",
                                                                 "t.py::test_b": "new"}
    assert merged["run"] == {"seed": 1, "draws": "seeded", "examples": None}
    assert "regressed" in out.getvalue()
