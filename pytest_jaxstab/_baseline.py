"""The baseline store: the figures and witnesses of each case, committed by users and compared against.

File format (version 1, default path `.jaxstab/baseline.json`)::

    {"version": 1, "jaxstab_version": "0.1.0",
     "cases": {nodeid: {"dtype", "samples", "original": VariantStats, "rewritten": VariantStats,
                        "witnesses": [Witness.to_json(), ...]}}}

Witness inputs are stored exactly, as the hex of each float's bits (`_results.encode_array`). The file is
validated on load (a bad file is a :class:`BaselineError`, never silently replaced) and written atomically.
Saving touches only the entries of the tests that ran (as syrupy's `--snapshot-update`); comparing
follows pytest-benchmark's `--benchmark-compare-fail`: the margins are parsed into :class:`Check` objects
and each regression message names the test, the figure, and by how much it moved.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

from ._report_json import jaxstab_version, write_text_atomic
from ._results import CaseResult, VariantStats, Witness

__all__ = [
    "BASELINE_VERSION",
    "DEFAULT_BASELINE_PATH",
    "Baseline",
    "BaselineEntry",
    "BaselineError",
    "CaseComparison",
    "Check",
    "Comparison",
    "compare",
    "load_baseline",
    "parse_compare_fail",
    "save_baseline",
    "stale_nodeids",
]

BASELINE_VERSION = 1
DEFAULT_BASELINE_PATH = ".jaxstab/baseline.json"

_FIX = "re-create it with --jaxstab-save-baseline"
# Figures are JSON floats that round-trip exactly; the epsilon only absorbs summation-order noise.
_EPS = 1e-9


class BaselineError(Exception):
    """A baseline file that cannot be used: missing, not JSON, wrong version or wrong content.

    Attributes:
        path: the file.
        problem: what is wrong with it.
    """

    def __init__(self, path: str | os.PathLike[str], problem: str) -> None:
        self.path = str(path)
        self.problem = problem
        super().__init__(f"jaxstab baseline {self.path}: {problem}; fix it, or {_FIX}")


@dataclasses.dataclass
class BaselineEntry:
    """What the baseline remembers of one case."""

    dtype: str
    samples: int
    original: VariantStats
    rewritten: VariantStats
    witnesses: list[Witness]

    @classmethod
    def from_case(cls, case: CaseResult) -> BaselineEntry:
        return cls(case.dtype, case.samples, dataclasses.replace(case.original),
                   dataclasses.replace(case.rewritten), list(case.witnesses))

    def stats(self, variant: str) -> VariantStats:
        return self.rewritten if variant == "rewritten" else self.original

    def to_json(self) -> dict[str, Any]:
        return {"dtype": self.dtype, "samples": self.samples, "original": self.original.to_json(),
                "rewritten": self.rewritten.to_json(), "witnesses": [w.to_json() for w in self.witnesses]}


@dataclasses.dataclass
class Baseline:
    """A loaded baseline: `entries` by nodeid; `jaxstab_version` of the writer."""

    entries: dict[str, BaselineEntry] = dataclasses.field(default_factory=dict)
    jaxstab_version: str = ""
    path: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"version": BASELINE_VERSION, "jaxstab_version": self.jaxstab_version,
                # Sorted so the committed file diffs cleanly between runs and between xdist layouts.
                "cases": {nodeid: self.entries[nodeid].to_json() for nodeid in sorted(self.entries)}}


# --- load / save -------------------------------------------------------------------------------------


def load_baseline(path: str | os.PathLike[str] = DEFAULT_BASELINE_PATH) -> Baseline:
    """Reads and validates a baseline file.

    Args:
        path: the file (default `.jaxstab/baseline.json`).

    Returns:
        The :class:`Baseline`, witnesses decoded bit-exactly.

    Raises:
        BaselineError: the file is missing or unreadable, not JSON, of another version, or has a missing
            key or a value of the wrong type; the message names the file, the problem and what to do.

    Example:
        >>> baseline = load_baseline(".jaxstab/baseline.json")
        >>> baseline.entries["tests/test_loss.py::test_logsumexp"].original.max_error_bits
        1.5
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BaselineError(path, "no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise BaselineError(path, f"cannot be read ({e})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise BaselineError(path, f"not valid JSON ({e})") from None
    return _from_json(data, path)


def _from_json(data: Any, path: str | os.PathLike[str]) -> Baseline:
    def fail(where: str, problem: str) -> BaselineError:
        return BaselineError(path, f"{where}: {problem}")

    if not isinstance(data, dict):
        raise fail("top level", f"expected an object, got {type(data).__name__}")
    version = data.get("version")
    if version != BASELINE_VERSION or isinstance(version, bool):
        raise fail("version",
                   f"this pytest-jaxstab reads version {BASELINE_VERSION}, the file has {version!r}")
    writer = data.get("jaxstab_version")
    if not isinstance(writer, str):
        raise fail("jaxstab_version", f"expected a string, got {writer!r}")
    cases = data.get("cases")
    if not isinstance(cases, dict):
        raise fail("cases", f"expected an object keyed by test id, got {type(cases).__name__}")
    entries = {}
    for nodeid, raw in cases.items():
        where = f"cases[{nodeid!r}]"
        try:
            entries[nodeid] = _entry_from_json(raw)
        except _Invalid as e:
            raise fail(f"{where}{e.where}", e.problem) from None
    return Baseline(entries, writer, str(path))


class _Invalid(Exception):
    def __init__(self, where: str, problem: str) -> None:
        super().__init__(where, problem)
        self.where = where
        self.problem = problem


def _get(d: Any, key: str, kind: str, where: str = "") -> Any:
    if not isinstance(d, dict):
        raise _Invalid(where, f"expected an object, got {type(d).__name__}")
    if key not in d:
        raise _Invalid(f"{where}.{key}", "missing key")
    value = d[key]
    ok = {
        "str": isinstance(value, str),
        "count": isinstance(value, int) and not isinstance(value, bool) and value >= 0,
        "bits": isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value < math.inf,
        "bool": isinstance(value, bool),
        "list": isinstance(value, list),
        "dict": isinstance(value, dict),
    }[kind]
    if not ok:
        expected = {"str": "a string", "count": "a non-negative integer", "bits": "a finite number >= 0",
                    "bool": "true or false", "list": "a list", "dict": "an object"}[kind]
        raise _Invalid(f"{where}.{key}", f"expected {expected}, got {value!r}")
    return value


def _entry_from_json(raw: Any) -> BaselineEntry:
    dtype = _get(raw, "dtype", "str")
    samples = _get(raw, "samples", "count")
    stats = {}
    for variant in ("original", "rewritten"):
        d = _get(raw, variant, "dict")
        where = f".{variant}"
        _get(d, "max_error_bits", "bits", where)
        _get(d, "mean_error_bits", "bits", where)
        _get(d, "overflows", "count", where)
        if _get(d, "verdict", "str", where) not in ("pass", "fail"):
            raise _Invalid(f"{where}.verdict", f"expected 'pass' or 'fail', got {d['verdict']!r}")
        stats[variant] = VariantStats.from_json(d)
    witnesses = [_witness_from_json(w, f".witnesses[{i}]")
                 for i, w in enumerate(_get(raw, "witnesses", "list"))]
    return BaselineEntry(dtype, samples, stats["original"], stats["rewritten"], witnesses)


def _witness_from_json(raw: Any, where: str) -> Witness:
    # Lazy: the strategies package pulls in Hypothesis, which loading the plugin should not need.
    from .strategies._dtypes import resolve_dtype

    args = _get(raw, "args", "list", where)
    if _get(raw, "variant", "str", where) not in ("original", "rewritten"):
        raise _Invalid(f"{where}.variant", f"expected 'original' or 'rewritten', got {raw['variant']!r}")
    _get(raw, "error_bits", "bits", where)
    _get(raw, "overflow", "bool", where)
    for i, arg in enumerate(args):
        at = f"{where}.args[{i}]"
        _get(arg, "dtype", "str", at)
        shape = _get(arg, "shape", "list", at)
        hexes = _get(arg, "hex", "list", at)
        if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape):
            raise _Invalid(f"{at}.shape", f"expected a list of non-negative integers, got {shape!r}")
        if len(hexes) != math.prod(shape):
            raise _Invalid(f"{at}.hex", f"{len(hexes)} values for shape {tuple(shape)}")
        if not all(isinstance(h, str) for h in hexes):
            raise _Invalid(f"{at}.hex", "expected hex strings")
        try:
            width = 2 * resolve_dtype(arg["dtype"]).itemsize
        except ValueError as e:
            raise _Invalid(f"{at}.dtype", str(e)) from None
        if any(len(h) != width for h in hexes):
            raise _Invalid(f"{at}.hex", f"expected {width} hex digits per {arg['dtype']} value")
    try:
        witness = Witness.from_json(raw)
    except (ValueError, TypeError, OverflowError) as e:  # bad hex digits
        raise _Invalid(where, f"cannot decode the witness ({e})") from None
    return witness


def save_baseline(
    path: str | os.PathLike[str],
    cases: Iterable[CaseResult],
    *,
    selected_nodeids: Iterable[str],
    existing: Baseline | None,
    collected_nodeids: Iterable[str] | None = None,
    rootdir: str | os.PathLike[str] | None = None,
) -> Baseline:
    """Writes the baseline, touching only the entries of the tests that ran.

    Entries of `cases` are written (replacing old ones); entries of `selected_nodeids` without a result
    are removed (the test no longer checks stability); with `collected_nodeids`, stale entries (see
    :func:`stale_nodeids`) are removed too; every other entry of `existing` is kept as it was.
    The write is atomic (temporary file, fsync, `os.replace`; the directory is created if missing): a
    crash leaves the old file intact.

    Args:
        path: the file (default location `.jaxstab/baseline.json`).
        cases: the results of this run.
        selected_nodeids: the tests that ran in this run. Leave out skipped tests, so that e.g. a
            GPU-only test skipped on a CPU machine keeps its entry.
        existing: the baseline loaded from `path`, or None to start a new one (also how a corrupt file
            is re-created: the caller decides, after :func:`load_baseline` raised).
        collected_nodeids, rootdir: as for :func:`compare`; None keeps stale entries.

    Returns:
        The baseline as written.

    Example:
        >>> old = load_baseline(p) if os.path.exists(p) else None
        >>> save_baseline(p, results, selected_nodeids=[r.nodeid for r in results], existing=old)
    """
    entries = dict(existing.entries) if existing is not None else {}
    dropped = set(selected_nodeids)
    if existing is not None and collected_nodeids is not None:
        dropped.update(stale_nodeids(existing, collected_nodeids, rootdir=rootdir))
    for nodeid in dropped:
        entries.pop(nodeid, None)
    for case in cases:
        entries[case.nodeid] = BaselineEntry.from_case(case)
    baseline = Baseline(entries, jaxstab_version(), str(path))
    # Serialised first: a value JSON cannot hold (NaN bits) fails here, before the disk is touched.
    text = json.dumps(baseline.to_json(), indent=2, allow_nan=False) + "\n"
    write_text_atomic(path, text)
    return baseline


# --- compare -----------------------------------------------------------------------------------------

Figure = Literal["bits", "overflows"]
_ACCEPTED = "accepted: 'bits:N' (max error may grow by N >= 0 bits), 'overflows:N' (N >= 0 new overflows)"


@dataclasses.dataclass(frozen=True)
class Check:
    """One `--jaxstab-compare-fail` margin: how much a figure of the judged variant may grow.

    `bits`: the max error in bits may grow by at most `margin`; `overflows`: the overflow count may grow
    by at most `margin` (0: any growth fails). `overflows` with `margin=None` (the default when the
    expression does not mention it) fails only on a *new* overflow: a case with none in the baseline
    that has some now. Counts of an already-overflowing case depend on which inputs Hypothesis
    draws, which changes with Hypothesis and strategy upgrades; a count margin is for pinned setups.
    """

    figure: Figure
    margin: float | None

    def __str__(self) -> str:
        if self.margin is None:
            return f"{self.figure}:new"
        margin = int(self.margin) if self.figure == "overflows" else f"{self.margin:g}"
        return f"{self.figure}:{margin}"

    def problem(self, old: VariantStats, new: VariantStats) -> str | None:
        """Describes how `new` got worse than `old` beyond the margin, or None when it did not."""
        if self.figure == "bits":
            before, after = old.max_error_bits, new.max_error_bits
            if after - before > (self.margin or 0.0) + _EPS:
                return (f"max error rose {before:.2f} -> {after:.2f} bits (+{after - before:.2f} bits, "
                        f"--jaxstab-compare-fail allows {self})")
            return None
        if self.margin is None:
            if old.overflows == 0 and new.overflows > 0:
                return (f"new overflow: {new.overflows} non-finite results where the exact one is finite "
                        f"(the baseline had none)")
            return None
        if new.overflows - old.overflows > self.margin:
            grown = new.overflows - old.overflows
            return (f"overflows rose {old.overflows} -> {new.overflows} (+{grown} non-finite results "
                    f"where the exact one is finite, --jaxstab-compare-fail allows {self})")
        return None


#: Margins used for figures `--jaxstab-compare-fail` does not mention: any growth of the max error
#: fails, and so does a new overflow (none in the baseline, some now).
DEFAULT_CHECKS: tuple[Check, ...] = (Check("bits", 0.0), Check("overflows", None))


def parse_compare_fail(expr: str) -> list[Check]:
    """Parses a `--jaxstab-compare-fail` expression into checks.

    Args:
        expr: comma-separated `figure:N`; `bits:N` (N a float >= 0) and `overflows:N` (N an integer
            >= 0). Each figure at most once.

    Returns:
        The checks, in order of appearance.

    Raises:
        ValueError: naming the expression, the bad part and the accepted forms.

    Example:
        >>> parse_compare_fail("bits:2,overflows:0")
        [Check(figure='bits', margin=2.0), Check(figure='overflows', margin=0)]
    """
    checks: list[Check] = []
    parts = [p.strip() for p in str(expr).split(",")]
    for part in parts:
        def bad(problem: str, part: str = part) -> ValueError:
            return ValueError(f"--jaxstab-compare-fail={expr!r}: {problem} in {part!r}; {_ACCEPTED}")

        figure, sep, number = (s.strip() for s in part.partition(":"))
        if not sep:
            raise bad("expected figure:N")
        if figure not in ("bits", "overflows"):
            raise bad(f"unknown figure {figure!r}")
        if any(c.figure == figure for c in checks):
            raise bad(f"{figure!r} given twice")
        if figure == "bits":
            try:
                margin: float = float(number)
            except ValueError:
                raise bad(f"{number!r} is not a number") from None
            if not (0.0 <= margin < math.inf):
                raise bad(f"{number!r} is not a finite number >= 0")
        else:
            if not number.isdigit():
                raise bad(f"{number!r} is not an integer >= 0")
            margin = int(number)
        checks.append(Check(figure, margin))  # type: ignore[arg-type]  # figure narrowed above
    return checks


Status = Literal["regressed", "known", "improved", "unchanged", "new"]


@dataclasses.dataclass
class CaseComparison:
    """How one case compares with its baseline entry.

    `status`: "regressed" (fails the run), "known" (still above tolerance or overflowing, not worse),
    "improved", "unchanged", or "new" (no comparable baseline entry). `message` names the case, the
    figures and how they moved.
    """

    nodeid: str
    status: Status
    message: str
    variant: str = "original"


@dataclasses.dataclass
class Comparison:
    """The outcome of :func:`compare`: one :class:`CaseComparison` per case, and the stale entries."""

    cases: list[CaseComparison]
    stale: list[str]
    checks: list[Check]

    def _with(self, status: str) -> list[CaseComparison]:
        return [c for c in self.cases if c.status == status]

    @property
    def regressions(self) -> list[CaseComparison]:
        return self._with("regressed")

    @property
    def known(self) -> list[CaseComparison]:
        return self._with("known")

    @property
    def improved(self) -> list[CaseComparison]:
        return self._with("improved")

    @property
    def new(self) -> list[CaseComparison]:
        return self._with("new")

    @property
    def unchanged(self) -> list[CaseComparison]:
        return self._with("unchanged")

    @property
    def failed(self) -> bool:
        """True when a case regressed: the run must fail."""
        return bool(self.regressions)

    def get(self, nodeid: str) -> CaseComparison | None:
        """The comparison of one case, or None when it was not compared."""
        return next((c for c in self.cases if c.nodeid == nodeid), None)


def compare(
    cases: Iterable[CaseResult],
    baseline: Baseline,
    checks: Sequence[Check] | None = None,
    *,
    collected_nodeids: Iterable[str],
    rootdir: str | os.PathLike[str] | None = None,
) -> Comparison:
    """Compares this run's results with a baseline, case by case, on the judged variant.

    A case regresses when its judged variant (`CaseResult.judged`) has more overflows or a larger max
    error than its baseline entry, beyond the margins of `checks` (figures not in `checks` use
    :data:`DEFAULT_CHECKS`: any growth fails). A case that is still unstable but not worse is "known":
    reported, not failed.

    Args:
        cases: this run's results.
        baseline: the loaded baseline.
        checks: from :func:`parse_compare_fail`, or None for the defaults.
        collected_nodeids: every test id collected in the session, deselected ones included. Entries of
            the baseline whose test is gone are reported as stale: those of a test file that was
            collected but no longer has that test, and (with `rootdir`) those whose test file is gone.
            Entries of test files this run did not collect are left alone, as syrupy does.
        rootdir: pytest's rootdir, the base of nodeids; lets deleted test files count as stale.

    Returns:
        A :class:`Comparison`; `.failed` tells whether the run must fail, `.regressions` why.

    Example:
        >>> result = compare(results, load_baseline(), parse_compare_fail("bits:2"),
        ...                  collected_nodeids=[item.nodeid for item in session.items])
        >>> result.failed
        False
    """
    margins = {c.figure: c for c in DEFAULT_CHECKS}
    margins.update({c.figure: c for c in checks or ()})
    compared = [_compare_case(case, baseline.entries.get(case.nodeid), list(margins.values()))
                for case in cases]
    stale = stale_nodeids(baseline, collected_nodeids, rootdir=rootdir)
    return Comparison(compared, stale, list(margins.values()))


def stale_nodeids(baseline: Baseline, collected_nodeids: Iterable[str], *,
                  rootdir: str | os.PathLike[str] | None = None) -> list[str]:
    """Baseline entries whose test no longer exists (see :func:`compare`), sorted.

    Example:
        >>> stale_nodeids(baseline, ["tests/test_a.py::test_kept"])
        ['tests/test_a.py::test_removed']
    """
    collected = set(collected_nodeids)
    files = {_file_of(n) for n in collected}
    stale = []
    for nodeid in baseline.entries:
        if nodeid in collected:
            continue
        file = _file_of(nodeid)
        if file in files or (rootdir is not None and not (Path(rootdir) / file).exists()):
            stale.append(nodeid)
    return sorted(stale)


def _file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def _figures(stats: VariantStats) -> str:
    return f"max error {stats.max_error_bits:.2f} bits, {stats.overflows} overflows"


def _compare_case(case: CaseResult, entry: BaselineEntry | None, checks: list[Check]) -> CaseComparison:
    variant = case.judged
    label = f"{case.nodeid} ({variant} function)"
    if entry is None:
        return CaseComparison(case.nodeid, "new", f"{label}: not in the baseline yet ("
                              f"{_figures(case.judged_stats)}); add it with --jaxstab-save-baseline", variant)
    if entry.dtype != case.dtype:
        return CaseComparison(case.nodeid, "new", f"{label}: dtype changed {entry.dtype} -> {case.dtype}, "
                              "so the baseline entry does not apply; update it with --jaxstab-save-baseline",
                              variant)
    old, new = entry.stats(variant), case.judged_stats
    problems = [p for p in (c.problem(old, new) for c in checks) if p is not None]
    if problems:
        return CaseComparison(case.nodeid, "regressed", f"{label}: " + "; ".join(problems), variant)
    moved = f"{_figures(old)} -> {_figures(new)}"
    better = (new.max_error_bits < old.max_error_bits - _EPS or new.overflows < old.overflows)
    unstable = new.verdict == "fail" or new.overflows > 0
    if better:
        note = "; still above tolerance" if unstable else ""
        return CaseComparison(case.nodeid, "improved", f"{label}: improved, {moved}{note}", variant)
    if unstable:
        return CaseComparison(case.nodeid, "known", f"{label}: known instability, not worse than the "
                              f"baseline ({moved})", variant)
    return CaseComparison(case.nodeid, "unchanged", f"{label}: within the baseline ({moved})", variant)
