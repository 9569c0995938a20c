"""The baseline store: the figures and witnesses of each case, committed by users and compared against.

File format (version 1, default path `.jaxstab/baseline.json`)::

    {"version": 1, "jaxstab_version": "0.1.0",
     "cases": {nodeid: {"dtype", "samples", "original": VariantStats, "rewritten": VariantStats,
                        "witnesses": [Witness.to_json(), ...],
                        "gradient": {"dtype", "samples", "original", "rewritten", "witnesses"},
                        "precision": {"dtype", "high", "lines": [{"location", "function", "text",
                                                                  "occurrence"}],
                                      "gradient": {"lines": [...], "backward_lines": [...]}}}}}

``"gradient"`` is optional (a case checked with ``grad=True``): the same figures and witnesses for the
gradient of both variants. ``"precision"`` is optional (a bfloat16/float16 case checked with
``tune_precision=True``): the lines its precision plan keeps in float32, keyed by function and source
text (``_plans``), and with ``grad=True`` its optional ``"gradient"``: the gradient plan's lines. Files
written before any of these existed load unchanged, so the version stays 1.

Witness inputs are stored exactly, as the hex of each float's bits (`_results.encode_array`). The file is
validated on load (a bad file is a :class:`BaselineError`, never silently replaced) and written atomically.
Saving writes the cases that ran and keeps every other entry (as syrupy's `--snapshot-update`); stale
entries go only when the caller prunes them. The comparison lives beside it, in the gate (`_gate.py`).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Collection, Iterable
from pathlib import Path
from typing import Any

from .._errors import BaselineError
from .._files import jaxstab_version, write_text_atomic
from .._results import CaseResult, VariantStats, Witness
from ._plans import InvalidPlan, PlanEntry, plan_from_json

__all__ = [
    "BASELINE_VERSION",
    "DEFAULT_BASELINE_PATH",
    "Baseline",
    "BaselineEntry",
    "BaselineError",
    "load_baseline",
    "owner_test",
    "save_baseline",
    "stale_nodeids",
]

BASELINE_VERSION = 1
DEFAULT_BASELINE_PATH = ".jaxstab/baseline.json"

_FIX = "re-create it with --jaxstab-save-baseline"
# Figures are JSON floats that round-trip exactly; the epsilon only absorbs summation-order noise.


def _baseline_error(path: str | os.PathLike[str], problem: str) -> BaselineError:
    return BaselineError(path, problem, _FIX)


@dataclasses.dataclass
class BaselineEntry:
    """What the baseline remembers of one case."""

    dtype: str
    samples: int
    original: VariantStats
    rewritten: VariantStats
    witnesses: list[Witness]
    # The gradient's figures and witnesses (a case checked with grad=True), or None.
    gradient: BaselineEntry | None = None
    # The lines the case's precision plan keeps in float32 (tune_precision=True), or None.
    precision: PlanEntry | None = None

    @classmethod
    def from_case(cls, case: CaseResult) -> BaselineEntry:
        gradient = cls.from_case(case.gradient) if case.gradient is not None else None
        return cls(case.dtype, case.samples, dataclasses.replace(case.original),
                   dataclasses.replace(case.rewritten), list(case.witnesses), gradient,
                   PlanEntry.from_record(case.precision))

    def stats(self, variant: str) -> VariantStats:
        return self.rewritten if variant == "rewritten" else self.original

    def to_json(self) -> dict[str, Any]:
        return {"dtype": self.dtype, "samples": self.samples, "original": self.original.to_json(),
                "rewritten": self.rewritten.to_json(), "witnesses": [w.to_json() for w in self.witnesses],
                **({"gradient": self.gradient.to_json()} if self.gradient is not None else {}),
                **({"precision": self.precision.to_json()} if self.precision is not None else {})}


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
        >>> import tempfile
        >>> case = CaseResult("tests/test_loss.py::test_lse", "float32", original=VariantStats(1.5))
        >>> with tempfile.TemporaryDirectory() as d:
        ...     path = Path(d, "baseline.json")
        ...     _ = save_baseline(path, [case], existing=None)
        ...     baseline = load_baseline(path)
        >>> baseline.entries["tests/test_loss.py::test_lse"].original.max_error_bits
        1.5
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise _baseline_error(path, "no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise _baseline_error(path, f"cannot be read ({e})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise _baseline_error(path, f"not valid JSON ({e})") from None
    return _from_json(data, path)


def _from_json(data: Any, path: str | os.PathLike[str]) -> Baseline:
    def fail(where: str, problem: str) -> BaselineError:
        return _baseline_error(path, f"{where}: {problem}")

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


def _entry_from_json(raw: Any, where: str = "", *, nested: bool = False) -> BaselineEntry:
    dtype = _get(raw, "dtype", "str", where)
    samples = _get(raw, "samples", "count", where)
    stats = {}
    for variant in ("original", "rewritten"):
        d = _get(raw, variant, "dict", where)
        where_v = f"{where}.{variant}"
        _get(d, "max_error_bits", "bits", where_v)
        _get(d, "mean_error_bits", "bits", where_v)
        _get(d, "overflows", "count", where_v)
        if _get(d, "verdict", "str", where_v) not in ("pass", "fail"):
            raise _Invalid(f"{where_v}.verdict", f"expected 'pass' or 'fail', got {d['verdict']!r}")
        stats[variant] = VariantStats.from_json(d)
    witnesses = [_witness_from_json(w, f"{where}.witnesses[{i}]")
                 for i, w in enumerate(_get(raw, "witnesses", "list", where))]
    gradient = None
    if not nested and raw.get("gradient") is not None:  # optional: cases checked with grad=True
        gradient = _entry_from_json(_get(raw, "gradient", "dict", where), f"{where}.gradient", nested=True)
    precision = None
    if not nested and raw.get("precision") is not None:  # optional: cases checked with tune_precision
        try:
            precision = plan_from_json(raw["precision"])
        except InvalidPlan as e:
            raise _Invalid(f"{where}.precision{e.where}", e.problem) from None
    return BaselineEntry(dtype, samples, stats["original"], stats["rewritten"], witnesses, gradient,
                         precision)


def _witness_from_json(raw: Any, where: str) -> Witness:
    # Lazy: the strategies package pulls in Hypothesis, which loading the plugin should not need.
    from .._dtypes import resolve_dtype

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
    existing: Baseline | None,
    prune: Iterable[str] = (),
) -> Baseline:
    """Writes the baseline: the entries of `cases` and every other entry of `existing`, as it was.

    A save never loses an accepted case: entries of tests that did not run (deselected, skipped, not
    selected, another file) are kept. Only the entries named in `prune` are removed: the caller passes
    the stale ones (:func:`stale_nodeids`) when the user asked to prune in a run of the whole suite.
    The write is atomic (temporary file, fsync, `os.replace`; the directory is created if missing): a
    crash leaves the old file intact.

    Args:
        path: the file (default location `.jaxstab/baseline.json`).
        cases: the results of this run; each replaces its entry.
        existing: the baseline loaded from `path`, or None to start a new one (also how a corrupt file
            is re-created: the caller decides, after :func:`load_baseline` raised).
        prune: entries to remove (stale ones), none by default.

    Returns:
        The baseline as written.

    Example:
        >>> import tempfile
        >>> a, b = CaseResult("t.py::test_a", "float32"), CaseResult("t.py::test_b", "float32")
        >>> with tempfile.TemporaryDirectory() as d:
        ...     p = os.path.join(d, "baseline.json")
        ...     _ = save_baseline(p, [a, b], existing=None)
        ...     # a later run of test_a alone keeps test_b's entry
        ...     kept = save_baseline(p, [a], existing=load_baseline(p))
        >>> sorted(kept.entries)
        ['t.py::test_a', 't.py::test_b']
    """
    entries = dict(existing.entries) if existing is not None else {}
    for nodeid in prune:
        entries.pop(nodeid, None)
    for case in cases:
        entries[case.nodeid] = BaselineEntry.from_case(case)
    baseline = Baseline(entries, jaxstab_version(), str(path))
    # Serialised first: a value JSON cannot hold (NaN bits) fails here, before the disk is touched.
    text = json.dumps(baseline.to_json(), indent=2, allow_nan=False) + "\n"
    write_text_atomic(path, text)
    return baseline


def owner_test(nodeid: str, tests: Collection[str]) -> str | None:
    """The test a baseline entry belongs to, among `tests`, or None.

    A marked test's entry is its own node id; a ``jaxstab.check`` case is named
    ``<test node id>::<name>`` and belongs to that test (the longest prefix, cut at ``::``, that is one
    of `tests`).

    Example:
        >>> owner_test("t.py::test_loss::mse", {"t.py::test_loss"})
        't.py::test_loss'
    """
    if nodeid in tests:
        return nodeid
    parts = nodeid.split("::")
    for i in range(len(parts) - 1, 1, -1):
        prefix = "::".join(parts[:i])
        if prefix in tests:
            return prefix
    return None


def stale_nodeids(baseline: Baseline, collected_nodeids: Iterable[str], *,
                  rootdir: str | os.PathLike[str] | None = None,
                  completed: Iterable[str] = (), produced: Iterable[str] = ()) -> list[str]:
    """Baseline entries whose case no longer exists, sorted.

    An entry is stale when its test (see :func:`owner_test`) was not collected although its test file
    was (or, with `rootdir`, the file is gone), or when its test's body ran to its end without
    producing it (a ``jaxstab.check`` call removed or renamed). Entries of test files this run did not
    collect are left alone, and so are those of skipped and deselected tests, and of tests that stopped
    early (an error before their checks).

    Args:
        baseline: the loaded baseline.
        collected_nodeids: every test id collected in the session, deselected ones included.
        rootdir: pytest's rootdir, the base of node ids; lets deleted test files count as stale.
        completed: the tests whose body ran to its end in this run (passed, or failed by their checks).
        produced: the case ids this run produced.

    Example:
        >>> entry = BaselineEntry("float32", 200, VariantStats(), VariantStats(), [])
        >>> baseline = Baseline({"tests/test_a.py::test_kept": entry, "tests/test_a.py::test_removed": entry})
        >>> stale_nodeids(baseline, ["tests/test_a.py::test_kept"])
        ['tests/test_a.py::test_removed']
    """
    collected = set(collected_nodeids)
    finished = set(completed)
    made = set(produced)
    files = {_file_of(n) for n in collected}
    stale = []
    for nodeid in baseline.entries:
        owner = owner_test(nodeid, collected)
        if owner is not None:
            if owner in finished and nodeid not in made:
                stale.append(nodeid)
            continue
        file = _file_of(nodeid)
        if file in files or (rootdir is not None and not (Path(rootdir) / file).exists()):
            stale.append(nodeid)
    return sorted(stale)


def _file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]
