"""The plugin's state for one pytest session (as pytest-benchmark's session object): options, the
baseline, every case's result, and what is written at the end (reports, baseline).

Results reach it only through test reports (``pytest_runtest_logreport``), where they ride as plain
JSON under :data:`RESULT_KEY`: in a serial run and on a pytest-xdist controller alike, so both write
the same reports and baselines. Workers never write files.
"""

from __future__ import annotations

import dataclasses
import os
import textwrap
from pathlib import Path
from typing import Any

import pytest

from ._options import Options, ReportTarget

__all__ = ["CASES_KEY", "COMPLETE_KEY", "COMPLETE_REPORT_KEY", "PENDING_KEY", "RESULT_KEY", "SESSION_KEY",
           "JaxstabSession", "pending_failures"]

_MOVE_AWAY = "move it away and run again to start a new baseline (its entries are then lost)"

#: Key of the list of case results (``CaseResult.to_json()``) on a test report's ``__dict__``.
RESULT_KEY = "jaxstab_cases"
#: Set (True) on a test report when the test's body ran to its end: every check it makes was recorded.
COMPLETE_REPORT_KEY = "jaxstab_complete"
#: Where the session object lives on ``config.stash``.
SESSION_KEY: pytest.StashKey[JaxstabSession] = pytest.StashKey()

# The keys on ``item.stash`` live here, not in ``_run``: the plugin's per-test hooks read them for every
# test, and importing ``_run`` imports the whole check pipeline (JAX, Hypothesis, python-flint).
#: The results of the cases one test checked, on ``item.stash``.
CASES_KEY: pytest.StashKey[list[Any]] = pytest.StashKey()
#: Set when a test's body ran to its end (its checks all recorded): entries of it it did not produce
#: are stale.
COMPLETE_KEY: pytest.StashKey[bool] = pytest.StashKey()
#: Failures of ``jaxstab.check`` calls, raised once the test's body has finished (every check runs).
PENDING_KEY: pytest.StashKey[list[str]] = pytest.StashKey()


def pending_failures(item: pytest.Item) -> list[str]:
    """The deferred failures of the item's ``jaxstab.check`` calls, taken off the item."""
    pending = item.stash.get(PENDING_KEY, [])
    item.stash[PENDING_KEY] = []
    return pending


class JaxstabSession:
    """Owns one session's jaxstab state; registered as a plugin, its ``pytest_*`` methods are hooks."""

    def __init__(self, config: pytest.Config, options: Options) -> None:
        self.config = config
        self.options = options
        self.is_worker = hasattr(config, "workerinput")
        self.baseline: Any = None
        self.checks: list[Any] | None = None
        self.cases: dict[str, Any] = {}
        self.ran: set[str] = set()
        self.completed: set[str] = set()  # tests whose body ran to its end
        self.collected: set[str] = set()
        self.partial: list[str] = []  # why this run did not cover the whole suite (for pruning)
        self.comparison: Any = None
        self.notes: list[str] = []
        self._load_baseline()
        if not self.is_worker and any(t.kind == "html" for t in options.reports):
            try:
                import matplotlib  # noqa: F401
            except ImportError:
                raise pytest.UsageError("--jaxstab-report=html needs matplotlib: "
                                        "pip install 'pytest-jaxstab[html]'") from None

    # --- baseline ------------------------------------------------------------------------------------
    def _load_baseline(self) -> None:
        opts = self.options
        if opts.compare_fail is None and opts.compare is None and opts.save_baseline is None:
            return  # no baseline option: ``_baseline`` (and numpy through ``_results``) stays unimported
        from .._baseline import load_baseline, parse_compare_fail
        from .._errors import BaselineError

        if opts.compare_fail is not None:
            self.checks = parse_compare_fail(opts.compare_fail)
        if opts.compare is not None:
            try:
                self.baseline = load_baseline(opts.compare)
            except BaselineError as exc:
                raise pytest.UsageError(f"--jaxstab-compare: {exc}") from None
        if opts.save_baseline is not None and Path(opts.save_baseline).exists() and not self.is_worker:
            # Saving merges into the existing file: a damaged one must be fixed, not overwritten.
            try:
                load_baseline(opts.save_baseline)
            except BaselineError as exc:
                # Not "re-create it with --jaxstab-save-baseline": that is what is being run.
                raise pytest.UsageError(
                    f"--jaxstab-save-baseline: {BaselineError(exc.path, exc.problem, _MOVE_AWAY)}") from None

    def witnesses(self, nodeid: str) -> list[Any]:
        """The baseline's worst inputs of a case, to re-check first (comparison runs only)."""
        if self.baseline is None:
            return []
        entry = self.baseline.entries.get(nodeid)
        return list(entry.witnesses) if entry is not None else []

    def gradient_witnesses(self, nodeid: str) -> list[Any]:
        """The baseline's worst inputs of a ``grad=True`` case's gradient (comparison runs only)."""
        if self.baseline is None:
            return []
        entry = self.baseline.entries.get(nodeid)
        return list(entry.gradient.witnesses) if entry is not None and entry.gradient is not None else []

    def compare_case(self, case: Any) -> Any:
        """How one case compares with the baseline, or None when not comparing."""
        if self.baseline is None:
            return None
        from .._baseline import compare
        from .._report._paths import relative_locations

        if case.precision is not None:
            # The plan's locations as the end of the session compares them (relative to the rootdir): a
            # kept line's key holds its file, and must read the same here as in the saved baseline.
            # (Only the plan's: the message's other locations stay as the check gave them.)
            plan = relative_locations(case, self.config.rootpath).precision
            case = dataclasses.replace(case, precision=plan)
        return compare([case], self.baseline, self.checks, collected_nodeids=[]).cases[0]

    # --- results -------------------------------------------------------------------------------------
    def record_report(self, report: pytest.TestReport) -> None:
        """Takes the results riding on a test report (serial run, or xdist controller)."""
        if report.when == "call":  # ran: skipped tests and setup errors keep their baseline entries
            self.ran.add(report.nodeid)
            if report.passed or report.__dict__.get(COMPLETE_REPORT_KEY):
                self.completed.add(report.nodeid)
        raw = report.__dict__.get(RESULT_KEY)
        if not raw:
            return
        from .._report._paths import relative_locations
        from .._results import CaseResult

        for d in raw:
            # Locations relative to the rootdir: the reports are read on other machines (issue 23).
            case = relative_locations(CaseResult.from_json(d), self.config.rootpath)
            self.cases[case.nodeid] = case

    def record_collected(self, nodeids: Any) -> None:
        self.collected.update(nodeids)

    def sorted_cases(self) -> list[Any]:
        return [self.cases[k] for k in sorted(self.cases)]

    # --- hooks ---------------------------------------------------------------------------------------
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.record_report(report)

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        self.record_collected(item.nodeid for item in items)

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        self.record_collected(item.nodeid for item in items)
        if items and "deselected" not in self.partial:
            self.partial.append("deselected")

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed and "collection errors" not in self.partial:
            self.partial.append("collection errors")

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        self.record_collected(ids)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        # Workers send every id they collected, deselected ones included (see pytest_sessionfinish).
        output = getattr(node, "workeroutput", {})
        self.record_collected(output.get("jaxstab_collected", ()))
        self.partial.extend(p for p in output.get("jaxstab_partial", ()) if p not in self.partial)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.is_worker:
            workeroutput = getattr(self.config, "workeroutput", None)
            if workeroutput is not None:
                workeroutput["jaxstab_collected"] = sorted(self.collected)
                workeroutput["jaxstab_partial"] = list(self.partial)
            return
        if exitstatus == pytest.ExitCode.INTERRUPTED:
            self.partial.append("interrupted")
        if not self.finish():
            session.exitstatus = pytest.ExitCode.INTERNAL_ERROR

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        self.summary(terminalreporter)

    # --- end of session ------------------------------------------------------------------------------
    def finish(self) -> bool:
        """Compares, saves the baseline and writes the file reports (controller / serial run only).

        Returns False when a file could not be written (the reason is in the notes).
        """
        if self.is_worker:
            return True
        cases = self.sorted_cases()
        rootdir = self.config.rootpath
        if self.baseline is not None:
            from .._baseline import compare

            self.comparison = compare(cases, self.baseline, self.checks,
                                      collected_nodeids=sorted(self.collected), rootdir=rootdir,
                                      completed=sorted(self.completed))
        ok = True
        try:
            if self.options.save_baseline is not None:
                self._save(cases)
            files = [t for t in self.options.reports if t.kind != "term"]
            if files and cases:
                self._write_reports(files, cases)
            elif files:
                self.notes.append("no @pytest.mark.stabilize test or jaxstab fixture ran: no report written")
        except OSError as exc:  # checked at start-up; the disk may still fill up or vanish
            self.notes.append(f"error: could not write {_shown(exc.filename or '?')}: {exc.strerror or exc}")
            ok = False
        return ok

    def _save(self, cases: list[Any]) -> None:
        from .._baseline import PRUNE_ADVICE, load_baseline, save_baseline, stale_nodeids

        path = self.options.save_baseline
        assert path is not None
        existing = load_baseline(path) if Path(path).exists() else None
        stale: list[str] = []
        if existing is not None:
            stale = stale_nodeids(existing, sorted(self.collected), rootdir=self.config.rootpath,
                                  completed=sorted(self.completed), produced=[c.nodeid for c in cases])
        prune: list[str] = []
        if self.options.prune and stale:
            if self.partial:
                why = ", ".join(self.partial)
                self.notes.append(f"stale entries not pruned: this run was partial ({why})")
            else:
                prune = stale
        if not cases and not prune:
            # A run that checked nothing (--collect-only, a selection without jaxstab tests) changes
            # nothing: the file is left as it was, byte for byte.
            self.notes.append(f"baseline not saved: no case ran ({_shown(path)} left as it was)")
            return
        produced = {c.nodeid for c in cases}
        kept = [n for n in (existing.entries if existing is not None else ()) if n not in produced
                and n not in prune]
        save_baseline(path, cases, existing=existing, prune=prune)
        self.notes.append(f"baseline saved: {_shown(path)} ({len(cases)} cases from this run); "
                          f"{len(kept)} other entries kept")
        if prune:
            self.notes.append(f"pruned {len(prune)} stale entries: {', '.join(prune)}")
        elif stale:
            self.notes.append(f"{len(stale)} stale entries kept ({PRUNE_ADVICE}): {', '.join(stale)}")

    def _write_reports(self, targets: list[ReportTarget], cases: list[Any]) -> None:
        jax_version, backends = _platform()
        for target in targets:
            assert target.path is not None
            if target.kind == "json":
                from .._report import build_report, write_json

                write_json(target.path, build_report(cases, jax_version=jax_version, backends=backends,
                                                     gate=self.decisions(),
                                                     gradient_gate=self.gradient_decisions(),
                                                     run=self.run_settings()))
            else:
                from .._report import write_html

                write_html(target.path, cases, jax_version=jax_version, backends=backends,
                           gate=self.decisions(), gradient_gate=self.gradient_decisions())
            self.notes.append(f"{target.kind} report written: {_shown(target.path)}")

    def run_settings(self) -> dict[str, Any]:
        """The settings that decide a run's figures, recorded in the JSON report for the shard merge.

        `draws`: "seeded" (--jaxstab-seed), "derandomized" (saving or comparing a baseline: each case's
        draws keyed by its id alone) or "random" (figures of one run only: shards cannot be merged).
        """
        opts = self.options
        draws = "seeded" if opts.seed is not None else "derandomized" if opts.derandomize else "random"
        return {"seed": opts.seed, "draws": draws, "examples": opts.examples}

    def decisions(self) -> dict[str, str] | None:
        """The gate's decision per case nodeid, or None when the run did not compare with a baseline."""
        if self.comparison is None:
            return None
        return {c.nodeid: c.status for c in self.comparison.cases}

    def gradient_decisions(self) -> dict[str, str] | None:
        """The gate's decision on each ``grad=True`` case's gradient, or None when not comparing."""
        if self.comparison is None:
            return None
        return {c.nodeid: c.gradient for c in self.comparison.cases if c.gradient is not None}

    def summary(self, terminal: Any) -> None:
        """The "jaxstab" section of the terminal summary."""
        if self.is_worker:
            return
        wants_table = any(t.kind == "term" for t in self.options.reports)
        if not (wants_table or self.comparison is not None or self.notes):
            return
        terminal.section("jaxstab")
        # pytest's width (COLUMNS, else the terminal's): no line of the section is longer.
        width = self.config.get_terminal_writer().fullwidth
        if wants_table:
            from .._report import format_table

            cases = self.sorted_cases()
            # Timing columns only for the backends cases were timed on (none without --jaxstab-timing).
            timed = sorted({t.backend for case in cases for t in case.timing})
            terminal.write_line(format_table(cases, timed, gate=self.decisions(),
                                             gradient_gate=self.gradient_decisions(), width=width,
                                             verbose=self.config.get_verbosity() > 0))
        lines: list[str] = []
        if self.comparison is not None:
            from .._baseline import format_baseline_summary

            lines += format_baseline_summary(self.comparison).splitlines()
        lines += self.notes
        for line in lines:
            for part in _wrapped(line, width):
                terminal.write_line(part)


def _platform() -> tuple[str, list[str]]:
    import jax

    backends = []
    for name in ("cpu", "gpu", "tpu"):
        try:
            if jax.devices(name):
                backends.append(name)
        except RuntimeError:
            continue
    return jax.__version__, backends


def _shown(path: Path | str) -> str:
    try:
        return os.path.relpath(path)
    except ValueError:  # another drive on Windows
        return str(path)


def _wrapped(line: str, width: int) -> list[str]:
    """``line`` wrapped at ``width``, continuations indented two spaces more than it."""
    indent = " " * (len(line) - len(line.lstrip(" ")) + 2)
    return textwrap.wrap(line, width, subsequent_indent=indent, break_on_hyphens=False) or [""]
