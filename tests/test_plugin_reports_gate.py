"""Reports show the stability verdict and the gate's decision as two things (issue 14, item 15), with
the discarded and uncertain counts (issue 13), in the terminal table, the JSON report and the HTML
report; the terminal table has a time column only when timing was asked for."""

from __future__ import annotations

import html
import json
import re

import pytest

pytest.importorskip("matplotlib")
# Imported here, outside the in-process runs: pytester restores sys.modules after each run, and a
# matplotlib imported twice in one process mixes the classes of both imports.
pytest.importorskip("matplotlib.figure")
pytest.importorskip("matplotlib.backends.backend_svg")

ARGS = ("--jaxstab-examples=10",)

SUITE = '''
import jax.numpy as jnp
import pytest

@pytest.mark.stabilize(dtype="float32", shapes={"x": (4,)}, domain=(-5, 5))
def test_known(x):
    return jnp.log(jnp.sum(jnp.exp(x * 30.0)))

# arccosh is real on [1, inf) only: the draws in (0.9, 1) are discarded, a share of the domain (5% by
# measure) small enough that the case is judged on the rest.
@pytest.mark.stabilize(dtype="float32", shapes={"x": (4,)}, domain=(0.9, 3))
def test_partly_defined(x):
    return jnp.arccosh(x)
'''


def test_verdict_and_gate_are_two_columns_everywhere(pytester, run_jaxstab):
    pytester.makepyfile(test_models=SUITE)
    run_jaxstab(*ARGS, "--jaxstab-save-baseline")
    result = run_jaxstab(*ARGS, "--jaxstab-compare", "--jaxstab-report", "--jaxstab-report=json:r.json",
                         "--jaxstab-report=html:r.html")
    assert result.ret == pytest.ExitCode.OK  # the instability is known: the gate passes the run
    lines = result.outlines
    header = next(line for line in lines if line.startswith("case "))
    # The verdict, then the stability lens's figure (bits beyond conditioning), then the gate's decision.
    assert re.search(r"\bdisc/unc\b.*\bverdict\s+beyond\s+gate\b", header)
    assert "time" not in header.split()  # not timed: no time column
    known = next(line for line in lines if "test_known" in line and "float32" in line)
    assert re.search(r"\bunstable/s\s+\d+\.\d\s+known\b", known)
    partly = next(line for line in lines if "test_partly_defined" in line and "float32" in line)
    counts = re.search(r"\s(\d+)/(\d+)\s", partly)
    assert counts is not None, partly
    discarded = int(counts.group(1))
    assert discarded > 0
    assert re.search(r"\bstable/s\s+\d+\.\d\s+unchanged\b", partly)

    report = json.loads((pytester.path / "r.json").read_text())
    cases = {c["nodeid"]: c for c in report["cases"]}
    assert cases["test_models.py::test_known"]["outcome"] == "failed"  # the verdict ...
    assert cases["test_models.py::test_known"]["gate"] == "known"  # ... and the decision, apart
    assert cases["test_models.py::test_partly_defined"]["discarded"] == discarded
    assert cases["test_models.py::test_partly_defined"]["uncertain"] >= 0
    assert report["gate"] == {"regressed": 0, "known": 1, "improved": 0, "unchanged": 1, "new": 0}

    page = html.unescape((pytester.path / "r.html").read_text())
    assert "2 cases, 1 failed" not in page
    assert "stability verdict: 1 stable, 1 unstable" in page
    gate = "baseline gate: 0 regressed, 1 known, 0 improved, 1 unchanged, 0 new (no case fails the run)"
    assert gate in page
    assert "<th>discarded</th>" in page and "<th>uncertain</th>" in page


def test_reports_without_a_comparison_have_no_gate_and_timing_adds_the_time_column(pytester, run_jaxstab):
    pytester.makepyfile(test_models=SUITE)
    result = run_jaxstab(*ARGS, "--jaxstab-report", "--jaxstab-report=json:r.json", "--jaxstab-timing",
                         "-k", "partly")
    header = next(line for line in result.outlines if line.startswith("case "))
    assert "gate" not in header.split() and "verdict" in header.split()
    assert header.split()[-1] == "time"
    row = next(line for line in result.outlines if "test_partly_defined" in line and "float32" in line)
    assert re.search(r"cpu \d+\.\d\dx", row)
    report = json.loads((pytester.path / "r.json").read_text())
    assert report["gate"] is None and report["cases"][0]["gate"] is None
