"""The report writers: JSON (schema version 1), HTML (self-contained, Herbie-style plot), terminal table."""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import os
import re
import sys
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from pytest_jaxstab._report import build_report, format_table, validate_report, write_html, write_json
from pytest_jaxstab._results import (
    CaseResult,
    NanOriginRecord,
    Point,
    RewriteRecord,
    TimingRecord,
    VariantStats,
    Witness,
)

LINE = "    return jnp.log(jnp.sum(jnp.exp(x)))"


def _points(n: int, seed: int) -> list[Point]:
    # What a float32 logsumexp looks like: exp overflows once the largest input passes ~88.7, so the
    # function as written has full-width (32-bit) error there; the rewritten one stays within a few bits.
    rng = np.random.default_rng(seed)
    magnitudes = 10.0 ** rng.uniform(-30, 38, n)
    original = np.where(magnitudes > 88.7, 32.0, rng.uniform(0, 2, n))
    rewritten = rng.uniform(0, 1.6, n)
    return [Point(float(m), float(o), float(r)) for m, o, r in zip(magnitudes, original, rewritten)]


def make_case(nodeid: str = "tests/numerics/test_loss.py::test_logsumexp[float32-16]", **kw) -> CaseResult:
    case = CaseResult(
        nodeid=nodeid,
        dtype="float32",
        samples=200,
        discarded=3,
        uncertain=1,
        outcome="failed",
        original=VariantStats(32.0, 4.71, 17, "fail"),
        rewritten=VariantStats(1.58, 0.21, 0, "pass"),
        rewrites=[RewriteRecord("logsumexp_shift", "tests/numerics/test_loss.py:12"),
                  RewriteRecord("log1p", "tests/numerics/test_loss.py:12"),
                  RewriteRecord("logsumexp_shift", "tests/numerics/test_loss.py:30")],
        nan_origins=[NanOriginRecord("original", "exp", "/home/u/proj/tests/numerics/test_loss.py:12",
                                     "overflow", LINE, "exp")],
        timing=[TimingRecord("cpu", 1.2e-5, 1.5e-5, 1.25)],
        witnesses=[Witness([np.array([88.75, -0.0, 1e-45, 3.0], dtype=np.float32)], "original", 32.0, True)],
        points=_points(40, seed=0),
        message="overflow at x=[88.75, -0.0, 1e-45, 3.0]",
    )
    return dataclasses.replace(case, **kw)


def stable_case() -> CaseResult:
    return make_case("tests/test_basic.py::test_hypot", dtype="float64", outcome="passed",
                     original=VariantStats(0.5, 0.01, 0, "pass"),
                     rewritten=VariantStats(0.5, 0.01, 0, "pass"),
                     rewrites=[], nan_origins=[], timing=[], witnesses=[], points=_points(10, seed=1),
                     message="")


# --- JSON --------------------------------------------------------------------------------------------


def test_report_follows_schema_version_1():
    cases = [make_case(), stable_case()]
    report = build_report(cases, jax_version="0.12.0", backends=["cpu"])
    decoded = json.loads(json.dumps(report))
    validate_report(decoded)
    assert decoded["version"] == 1
    assert decoded["jax_version"] == "0.12.0"
    assert decoded["backends"] == ["cpu"]
    assert [c["nodeid"] for c in decoded["cases"]] == [c.nodeid for c in cases]
    first = decoded["cases"][0]
    # docs/architecture.md, "The pytest surface" keys, with the values of the case.
    assert first["original"] == {"max_error_bits": 32.0, "mean_error_bits": 4.71, "overflows": 17,
                                 "verdict": "fail"}
    assert first["rewrites"][0] == {"rule": "logsumexp_shift", "location": "tests/numerics/test_loss.py:12"}
    assert {"variant", "primitive", "location"} <= set(first["nan_origins"][0])
    assert first["timing"][0]["ratio"] == 1.25


def _broken(mutate):
    report = json.loads(json.dumps(build_report([make_case()], jax_version="0.12.0", backends=["cpu"])))
    mutate(report)
    return report


@pytest.mark.parametrize(
    ("mutate", "named"),
    [
        (lambda r: r.pop("version"), "version: missing key"),
        (lambda r: r.update(version=2), "version: expected 1"),
        (lambda r: r.update(backends="cpu"), "backends: expected a list"),
        (lambda r: r["cases"][0].pop("nodeid"), "cases[0].nodeid: missing key"),
        (lambda r: r["cases"][0].update(samples=True), "cases[0].samples"),
        (lambda r: r["cases"][0].update(outcome="ok"), "cases[0].outcome"),
        (lambda r: r["cases"][0]["original"].update(overflows=-1), "cases[0].original.overflows"),
        (lambda r: r["cases"][0]["rewritten"].update(max_error_bits=math.nan),
         "cases[0].rewritten.max_error_bits"),
        (lambda r: r["cases"][0]["rewritten"].pop("verdict"), "cases[0].rewritten.verdict: missing key"),
        (lambda r: r["cases"][0]["rewrites"][1].update(rule=3), "cases[0].rewrites[1].rule"),
        (lambda r: r["cases"][0]["nan_origins"][0].update(variant="both"), "cases[0].nan_origins[0].variant"),
        (lambda r: r["cases"][0]["timing"][0].update(ratio="fast"), "cases[0].timing[0].ratio"),
        (lambda r: r.update(cases={}), "cases: expected a list"),
    ],
)
def test_validate_report_names_the_first_problem(mutate, named):
    with pytest.raises(ValueError, match=re.escape(named)):
        validate_report(_broken(mutate))


def test_validate_report_rejects_non_objects():
    with pytest.raises(ValueError, match="expected an object"):
        validate_report([])


def test_case_result_round_trips_through_json():
    case = make_case()
    back = CaseResult.from_json(json.loads(json.dumps(case.to_json())))
    # Witness arrays have no ==; compare them by bits, everything else by dataclass equality.
    assert dataclasses.replace(back, witnesses=[]) == dataclasses.replace(case, witnesses=[])
    assert len(back.witnesses) == len(case.witnesses)
    for got, want in zip(back.witnesses, case.witnesses):
        assert (got.variant, got.error_bits, got.overflow) == (want.variant, want.error_bits, want.overflow)
        for a, b in zip(got.args, want.args):
            assert a.dtype == b.dtype
            assert a.shape == b.shape
            assert np.array_equal(a.view(np.uint32), b.view(np.uint32))


def test_write_json_is_atomic_and_readable(tmp_path, monkeypatch):
    path = tmp_path / "reports" / "jaxstab.json"  # directory does not exist yet
    report = build_report([make_case()], jax_version="0.12.0", backends=["cpu"])
    write_json(path, report)
    validate_report(json.loads(path.read_text()))
    before = path.read_bytes()

    def crash(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="disk full"):
        write_json(path, build_report([], jax_version="0.12.0", backends=["cpu"]))
    assert path.read_bytes() == before
    assert sorted(p.name for p in path.parent.iterdir()) == ["jaxstab.json"]  # temp file removed


# --- HTML --------------------------------------------------------------------------------------------


def test_html_is_self_contained_and_escaped(tmp_path):
    pytest.importorskip("matplotlib")
    tricky = make_case('tests/test_cmp.py::test_less[a<b & "c"]',
                       nan_origins=[NanOriginRecord("original", "div", "tests/test_cmp.py:4", "nan",
                                                    "    return x / (y<z)", "div")])
    cases = [make_case(), tricky, stable_case()]
    path = tmp_path / "out" / "jaxstab.html"
    write_html(path, cases, jax_version="0.12.0", backends=["cpu"])
    text = path.read_text(encoding="utf-8")

    assert text.startswith("<!DOCTYPE html>")
    # No external resources: nothing fetched by src/href, no script, no stylesheet link.
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:|//)""", text, flags=re.IGNORECASE)
    assert "<script" not in text.lower()
    assert "<link" not in text.lower()
    # Text is escaped: the '<' of the nodeid and of the line text never reaches the page raw.
    assert "test_less[a&lt;b &amp; &quot;c&quot;]" in text
    assert "a<b" not in text
    assert "x / (y&lt;z)" in text
    # One inline plot per case, each well-formed XML, showing both variants.
    svgs = re.findall(r"<svg.*?</svg>", text, flags=re.DOTALL)
    assert len(svgs) == len(cases)
    for svg, case in zip(svgs, cases):
        ET.fromstring(svg)
        assert "original" in svg
        assert "rewritten" in svg
        # Each scatter point is one <use> of a marker: at least one per sample and variant.
        assert svg.count("<use ") >= 2 * len(case.points)
    # The figures and diagnostics of each case are on the page.
    assert "logsumexp_shift" in text
    assert "test_loss.py:12" in text
    assert "1.25x" in text
    assert text.count("<section") == len(cases)


def test_html_without_samples_says_so(tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "r.html"
    write_html(path, [make_case(points=[])], jax_version="0.12.0", backends=[])
    text = path.read_text(encoding="utf-8")
    assert "<svg" not in text
    assert "no samples to plot" in text


def test_html_without_matplotlib_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # makes `import matplotlib` raise ImportError
    path = tmp_path / "r.html"
    with pytest.raises(ImportError, match=re.escape("pip install 'pytest-jaxstab[html]'")):
        write_html(path, [make_case()], jax_version="0.12.0", backends=["cpu"])
    assert not path.exists()


# --- terminal ----------------------------------------------------------------------------------------


def test_table_has_one_row_per_case_with_the_figures():
    cases = [make_case(), stable_case()]
    table = format_table(cases, ["cpu", "gpu"])
    lines = table.splitlines()
    header = next(line for line in lines if line.startswith("case"))
    # The case column is as wide as its longest name allows (48): each name keeps its file.
    rows = [line for line in lines if line.startswith(("test_loss.py::test_logsumexp", "test_basic.py"))]
    assert len(rows) == len(cases)
    first, second = rows
    # Fixed-width columns: every row has its dtype where the header has "dtype".
    at = header.index("dtype")
    assert first[at:].startswith("float32")
    assert second[at:].startswith("float64")
    assert re.search(r"32\.0\s+4\.71\s+17\s+1\.6\s+0\.21\s+0\b", first)
    assert "200" in first
    assert first.count("logsumexp_shift") == 1
    assert "log1p" in first
    assert "exp @ test_loss.py:12" in first  # short location of the judged variant's origin
    assert "cpu 1.25x" in first
    assert "gpu -" in first
    assert "cpu -" in second
    # Verdict, disc/unc (issue 14), "bits lost at" (issue 17) and "beyond" (issue 22: the stability lens's
    # figure, 8 characters with its separator) columns: ~203 wide with one timed backend.
    assert max(len(line) for line in format_table(cases, ["cpu"]).splitlines()) <= 203


def test_table_nan_origin_follows_the_judged_variant():
    case = make_case(judged="rewritten",
                     nan_origins=[NanOriginRecord("original", "exp", "a.py:1"),
                                  NanOriginRecord("rewritten", "log", "b.py:2")])
    row = format_table([case], ["cpu"]).splitlines()[3]
    assert "log @ b.py:2" in row
    assert "exp @" not in row


def test_table_truncates_long_cells_with_an_ellipsis():
    long_id = "tests/test_loss.py::test_" + "very_" * 20 + "long[float32-(16, 1024)]"
    long_rules = [RewriteRecord(f"rule_number_{i}", None) for i in range(10)]
    table = format_table([make_case(long_id, rewrites=long_rules), make_case()], ["cpu"])
    lines = table.splitlines()
    header = next(line for line in lines if line.startswith("case"))
    first, second = (line for line in lines if line.startswith("test_"))
    assert "…" in first
    assert len(first) == len(second)  # same widths, whatever the content
    assert first[header.index("dtype"):].startswith("float32")
    assert first[header.index("rules fired"):].startswith("rule_number_0, rule")
    assert "(16, 1024)]" in first  # the parametrization's end stays visible


def test_table_of_nothing():
    assert "no cases" in format_table([], ["cpu"])


def test_report_inputs_are_not_mutated():
    case = make_case()
    before = copy.deepcopy(case.to_json())
    build_report([case], jax_version="0.12.0", backends=["cpu"])
    format_table([case], ["cpu"])
    assert case.to_json() == before
