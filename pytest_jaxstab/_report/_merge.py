"""The shard merge: N JSON reports of one suite split over CI jobs, read back as one run's cases.

`python -m pytest_jaxstab merge` (``__main__.py``) reads the shards here, then writes the same reports
and baseline a serial run of the whole suite writes: a serial run's cases are sorted by node id and its
baseline is sorted by node id, so the merge needs no knowledge of the order shards ran in. Everything is
checked before anything is written: a shard that is not a complete report (a truncated upload), shards
of different runs (seed, number of examples, lens, jax or pytest-jaxstab version) or shards that ran the
same case raise :class:`~pytest_jaxstab.ReportMergeError`, naming the files and what to do.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from .._errors import ReportMergeError
from .._results import CaseResult
from ._json import validate_report

__all__ = ["MergedRun", "merge_reports", "run_merge"]

# Top-level keys that must agree between shards: they decide the figures (or say who computed them).
_SAME = ("jax_version", "jaxstab_version", "run", "judge", "lens")


class MergedRun:
    """The merged shards: `cases` sorted by node id (a serial run's order), and the run's platform."""

    def __init__(self, cases: list[CaseResult], jax_version: str, backends: list[str],
                 run: dict[str, Any] | None) -> None:
        self.cases = cases
        self.jax_version = jax_version
        self.backends = backends
        self.run = run


def merge_reports(paths: Sequence[str | os.PathLike[str]]) -> MergedRun:
    """Reads and checks shard reports, and returns their cases as one run.

    Args:
        paths: the JSON reports (``--jaxstab-report=json:PATH``) of the shards, at least one.

    Returns:
        The :class:`MergedRun`; a case id appears once.

    Raises:
        ReportMergeError: a file missing, not JSON (a truncated file is this), not a version-1 report,
            shards disagreeing on a setting that decides the figures, or a case in two shards.
    """
    if not paths:
        raise ReportMergeError("jaxstab merge: no report given; pass the JSON report of every shard")
    reports = [(str(p), _load(p)) for p in paths]
    first_path, first = reports[0]
    for path, report in reports[1:]:
        for key in _SAME:
            if report.get(key) != first.get(key):
                raise ReportMergeError(
                    f"jaxstab merge: {path} and {first_path} are from different runs: {key} is "
                    f"{report.get(key)!r} in one and {first.get(key)!r} in the other; run every shard "
                    f"with the same settings (same --jaxstab-seed, same versions) and merge again")
    run = first.get("run")
    if isinstance(run, dict) and run.get("draws") == "random" and len(reports) > 1:
        raise ReportMergeError(
            "jaxstab merge: the shards ran without a fixed seed, so their figures are not those of one "
            "run; run every shard with the same --jaxstab-seed=N (or --jaxstab-save-baseline/compare)")
    owner: dict[str, str] = {}
    cases: list[CaseResult] = []
    backends: list[str] = []
    for path, report in reports:
        for raw in report["cases"]:
            nodeid = raw["nodeid"]
            if nodeid in owner:
                raise ReportMergeError(
                    f"jaxstab merge: {nodeid} is in {owner[nodeid]} and in {path}: the shards overlap; "
                    f"split the suite so each test runs in one shard (pytest-split --splits N --group K)")
            owner[nodeid] = path
            cases.append(CaseResult.from_json(raw))
        backends += [b for b in report["backends"] if b not in backends]
    cases.sort(key=lambda c: c.nodeid)
    return MergedRun(cases, first["jax_version"], backends, first.get("run"))


def _load(path: str | os.PathLike[str]) -> dict[str, Any]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ReportMergeError(f"jaxstab merge: {path}: no such file; pass the JSON report of each "
                               "shard (--jaxstab-report=json:PATH)") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ReportMergeError(f"jaxstab merge: {path}: cannot be read ({e})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ReportMergeError(f"jaxstab merge: {path}: not valid JSON ({e}), e.g. truncated by an "
                               "interrupted shard or upload; run that shard again") from None
    try:
        validate_report(data)
    except ValueError as e:
        raise ReportMergeError(f"jaxstab merge: {path}: {e}; run that shard again") from None
    for i, case in enumerate(data["cases"]):  # what from_json reads beyond the schema's keys
        try:
            CaseResult.from_json(case)
        except (KeyError, TypeError, ValueError) as e:
            raise ReportMergeError(f"jaxstab merge: {path}: cases[{i}]: cannot be read ({e!r}); "
                                   "run that shard again") from None
    return data


def run_merge(paths: Sequence[str | os.PathLike[str]], *, reports: Sequence[str] = ("term",),
              save_baseline: Path | None = None, compare: Path | None = None,
              compare_fail: str | None = None, out: TextIO) -> int:
    """Merges shard reports and writes what a serial run of the whole suite writes.

    Everything is read and checked first (shards, the baselines, the report targets); only then are the
    files written, each atomically: a bad input leaves every file as it was.

    Args:
        paths: the shards' JSON reports.
        reports: ``term``, ``json:PATH``, ``html:PATH``, as ``--jaxstab-report``.
        save_baseline: the baseline to write: the merged cases replace their entries, every other entry
            of the existing file is kept (as a save from a serial run without ``--jaxstab-prune``).
        compare: a baseline to compare with; the gate's decisions go into the reports.
        compare_fail: regression margins (``bits:2,overflows:0``), as ``--jaxstab-compare-fail``.
        out: where the terminal table and notes go.

    Returns:
        0, or 1 when a case regressed against `compare`.

    Raises:
        ReportMergeError: a bad shard or report target (see :func:`merge_reports`).
        BaselineError: a baseline file that cannot be read.
    """
    from .._baseline import compare as compare_cases
    from .._baseline import format_baseline_summary, load_baseline, parse_compare_fail
    from .._baseline import save_baseline as write_baseline

    targets = [_target(spec) for spec in reports]
    merged = merge_reports(paths)
    checks = None
    if compare_fail is not None:
        try:
            checks = parse_compare_fail(compare_fail)
        except ValueError as e:
            raise ReportMergeError(f"jaxstab merge: --compare-fail: {e}") from None
    existing = load_baseline(save_baseline) if save_baseline is not None and save_baseline.exists() else None
    comparison = None
    if compare is not None:
        comparison = compare_cases(merged.cases, load_baseline(compare), checks,
                                   collected_nodeids=[c.nodeid for c in merged.cases])
    gate = None if comparison is None else {c.nodeid: c.status for c in comparison.cases}
    gradient_gate = None if comparison is None else {
        c.nodeid: c.gradient for c in comparison.cases if c.gradient is not None}
    notes = [f"merged {len(paths)} reports: {len(merged.cases)} cases"]
    if save_baseline is not None:
        kept = len([n for n in (existing.entries if existing else {}) if n not in
                    {c.nodeid for c in merged.cases}])
        write_baseline(save_baseline, merged.cases, existing=existing)
        notes.append(f"baseline saved: {save_baseline} ({len(merged.cases)} cases from the shards); "
                     f"{kept} other entries kept")
    for kind, path in targets:
        if kind == "json" and path is not None:
            from ._json import build_report, write_json

            write_json(path, build_report(merged.cases, jax_version=merged.jax_version,
                                          backends=merged.backends, gate=gate,
                                          gradient_gate=gradient_gate, run=merged.run))
        elif kind == "html" and path is not None:
            from ._html import write_html

            write_html(path, merged.cases, jax_version=merged.jax_version, backends=merged.backends,
                       gate=gate, gradient_gate=gradient_gate)
        else:
            from ._term import format_table

            timed = sorted({t.backend for case in merged.cases for t in case.timing})
            print(format_table(merged.cases, timed, gate=gate, gradient_gate=gradient_gate), file=out)
        if path is not None:
            notes.append(f"{kind} report written: {path}")
    if comparison is not None:
        print(format_baseline_summary(comparison), file=out)
    for note in notes:
        print(note, file=out)
    return 1 if comparison is not None and comparison.failed else 0


def _target(spec: str) -> tuple[str, Path | None]:
    kind, _, path = spec.partition(":")
    if kind == "term" and not path:
        return kind, None
    if kind in ("json", "html") and path:
        if kind == "html":
            try:
                import matplotlib  # noqa: F401  # pyright: ignore[reportUnusedImport]
            except ImportError:
                raise ReportMergeError("jaxstab merge: --report=html needs matplotlib: "
                                       "pip install 'pytest-jaxstab[html]'") from None
        return kind, Path(path)
    raise ReportMergeError(f"jaxstab merge: --report={spec!r}: expected term, json:PATH or html:PATH")
