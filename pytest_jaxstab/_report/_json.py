"""The JSON report, schema version 1: build it, validate it, write it atomically.

The schema is in docs/architecture.md, "The pytest surface".

Pure Python over :class:`~pytest_jaxstab._results.CaseResult`; the plugin calls it at the end of the
session.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .._files import jaxstab_version, write_text_atomic
from .._results import CaseResult

__all__ = ["GATE_DECISIONS", "REPORT_VERSION", "build_report", "validate_report", "write_json"]

#: The schema version this module writes and validates.
REPORT_VERSION = 1

#: The baseline gate's decisions a report may show beside each case's stability verdict.
GATE_DECISIONS = ("regressed", "known", "improved", "unchanged", "new")

_OUTCOMES = ("passed", "failed")
_VERDICTS = ("pass", "fail")
_VARIANTS = ("original", "rewritten")


def build_report(cases: Iterable[CaseResult], *, jax_version: str, backends: Sequence[str],
                 gate: Mapping[str, str] | None = None,
                 gradient_gate: Mapping[str, str] | None = None,
                 run: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Builds the JSON report of a session: schema version 1 of docs/architecture.md ("The pytest surface").

    Each case's `outcome` is its stability verdict ("passed"/"failed": the judged variant within the
    tolerance and without overflow, or not). The gate's decision is another thing, in the extra key
    `"gate"`: "known", "regressed", "new", "improved" or "unchanged" when the run compared with a
    baseline, null otherwise. A known instability is `"outcome": "failed", "gate": "known"`, and does not
    fail the run; `samples`, `discarded` (inputs outside the real domain) and `uncertain` say how much
    was judged.

    Args:
        cases: the results of every checked case, in the order they should appear.
        jax_version: `jax.__version__` of the run.
        backends: the JAX backends present (`"cpu"`, `"gpu"`, ...), the ones timings refer to.
        gate: the gate's decision per case nodeid, when the run compared with a baseline.
        gradient_gate: the gate's decision on the gradient of each ``grad=True`` case, when compared.
        run: the settings that decide the figures (`seed`, `examples`, and `lens` once the run has one),
            written as the extra key `"run"`; `python -m pytest_jaxstab merge` refuses to merge shards
            whose `"run"` differ.

    A case checked with ``grad=True`` has the extra key `"gradient"`: the same figures for its gradient
    (a case object without its own `"gradient"`), with its own `"gate"`. A case (or gradient) that a
    rewrite makes worse than written has the extra key `"rewrite_regression"` (its `"outcome"` is then
    "failed", whatever the judged variant's verdict; its `"gate"`, when compared, "regressed").
    A bfloat16/float16 case checked with ``tune_precision=True`` has the extra key `"precision"`: its
    precision plan (`PrecisionRecord.to_json`; the schema is in docs/architecture.md); with ``grad=True``
    too, its `"gradient"` holds the gradient's plan (`GradientPlanRecord.to_json`).

    Returns:
        `{"version": 1, "jax_version", "backends", "cases": [CaseResult.to_json() + {"gate"}, ...]}`,
        plus the extra keys `"jaxstab_version"` and `"gate"` (the count of each decision, or null);
        plain JSON types only.

    Example:
        >>> report = build_report([CaseResult("t.py::test_f", "float32")], jax_version="0.12.0",
        ...                       backends=["cpu"])
        >>> report["version"], report["cases"][0]["original"]["verdict"]
        (1, 'pass')
    """
    cases = list(cases)
    return {
        "version": REPORT_VERSION,
        "jax_version": str(jax_version),
        "backends": [str(b) for b in backends],
        "cases": [_case_json(case, gate, gradient_gate) for case in cases],
        # extra keys (allowed by the schema): which pytest-jaxstab wrote the file; the gate's counts.
        "jaxstab_version": jaxstab_version(),
        "gate": None if gate is None else {d: sum(1 for c in cases if gate.get(c.nodeid) == d)
                                           for d in GATE_DECISIONS},
        **({"run": dict(run)} if run is not None else {}),
    }


def _case_json(case: CaseResult, gate: Mapping[str, str] | None,
               gradient_gate: Mapping[str, str] | None) -> dict[str, Any]:
    d = {**case.to_json(), "gate": None if gate is None else gate.get(case.nodeid)}
    if "gradient" in d:
        d["gradient"] = {**d["gradient"],
                         "gate": None if gradient_gate is None else gradient_gate.get(case.nodeid)}
    return d


def write_json(path: str | os.PathLike[str], report: Mapping[str, Any]) -> None:
    """Writes a report as JSON, atomically: readers see the old file or the new one, never half of one.

    Args:
        path: the file to write; its directory is created if missing.
        report: what :func:`build_report` returned.

    Example:
        >>> import tempfile
        >>> report = build_report([CaseResult("t.py::test_f", "float32")], jax_version="0.12.0",
        ...                       backends=["cpu"])
        >>> with tempfile.TemporaryDirectory() as d:
        ...     write_json(os.path.join(d, "reports", "jaxstab.json"), report)
        ...     with open(os.path.join(d, "reports", "jaxstab.json"), encoding="utf-8") as f:
        ...         back = json.load(f)
        >>> back == report
        True
    """
    # Serialise before touching the disk so an unserialisable value leaves no trace. NaN/Infinity are
    # allowed (as pytest-benchmark's JSON does): a timing ratio may be infinite, and Python reads them back.
    text = json.dumps(report, indent=2) + "\n"
    write_text_atomic(path, text)


# --- validation --------------------------------------------------------------------------------------


def validate_report(d: Any) -> None:
    """Checks that `d` follows the JSON report schema, version 1 (docs/architecture.md, "The pytest surface").

    Extra keys are allowed.

    Args:
        d: a decoded JSON report.

    Raises:
        ValueError: naming the first problem by its key path, e.g.
            `"jaxstab report: cases[2].original.overflows: expected a non-negative integer, got -1"`.

    Example:
        >>> report = build_report([CaseResult("t.py::test_f", "float32")], jax_version="0.12.0",
        ...                       backends=["cpu"])
        >>> validate_report(report)  # no error: the report follows the schema
        >>> report["cases"][0]["original"]["overflows"] = -1
        >>> validate_report(report)
        Traceback (most recent call last):
        ValueError: jaxstab report: cases[0].original.overflows: expected a non-negative integer, got -1
    """
    _require_mapping(d, "report")
    version = _key(d, "version", "report")
    if version != REPORT_VERSION or isinstance(version, bool):
        _fail("version", f"expected {REPORT_VERSION}, got {version!r}")
    _require_str(_key(d, "jax_version", "report"), "jax_version")
    backends = _key(d, "backends", "report")
    _require_list(backends, "backends")
    for i, backend in enumerate(backends):
        _require_str(backend, f"backends[{i}]")
    cases = _key(d, "cases", "report")
    _require_list(cases, "cases")
    for i, case in enumerate(cases):
        _validate_case(case, f"cases[{i}]")


def _validate_case(case: Any, where: str, *, nested: bool = False) -> None:
    _require_mapping(case, where)
    _require_str(_key(case, "nodeid", where), f"{where}.nodeid")
    _require_str(_key(case, "dtype", where), f"{where}.dtype")
    for count in ("samples", "discarded", "uncertain"):
        _require_count(_key(case, count, where), f"{where}.{count}")
    _require_choice(_key(case, "outcome", where), _OUTCOMES, f"{where}.outcome")
    if case.get("gate") is not None:  # extra key: the gate's decision, when compared
        _require_choice(case["gate"], GATE_DECISIONS, f"{where}.gate")
    for variant in _VARIANTS:
        _validate_stats(_key(case, variant, where), f"{where}.{variant}")
    rewrites = _key(case, "rewrites", where)
    _require_list(rewrites, f"{where}.rewrites")
    for j, rewrite in enumerate(rewrites):
        at = f"{where}.rewrites[{j}]"
        _require_mapping(rewrite, at)
        _require_str(_key(rewrite, "rule", at), f"{at}.rule")
        _require_optional_str(_key(rewrite, "location", at), f"{at}.location")
    origins = _key(case, "nan_origins", where)
    _require_list(origins, f"{where}.nan_origins")
    for j, origin in enumerate(origins):
        at = f"{where}.nan_origins[{j}]"
        _require_mapping(origin, at)
        _require_choice(_key(origin, "variant", at), _VARIANTS, f"{at}.variant")
        _require_str(_key(origin, "primitive", at), f"{at}.primitive")
        _require_optional_str(_key(origin, "location", at), f"{at}.location")
    timing = _key(case, "timing", where)
    _require_list(timing, f"{where}.timing")
    for j, record in enumerate(timing):
        at = f"{where}.timing[{j}]"
        _require_mapping(record, at)
        _require_str(_key(record, "backend", at), f"{at}.backend")
        for figure in ("original_s", "rewritten_s", "ratio"):
            _require_number(_key(record, figure, at), f"{at}.{figure}")
    _validate_local_error(case, where)
    _validate_rewrite_regression(case, where)
    _validate_precision(case, where)
    if case.get("gradient") is not None:  # extra key: the gradient's figures (grad=True)
        if nested:
            _fail(f"{where}.gradient", "a gradient's figures have no gradient of their own")
        _validate_case(case["gradient"], f"{where}.gradient", nested=True)


def _validate_rewrite_regression(case: Any, where: str) -> None:
    """The optional ``rewrite_regression`` (a rewrite that makes the function worse): its culprit
    rules with their locations, both variants' judged bits at the input, and the case failed."""
    reg = case.get("rewrite_regression")
    if reg is None:
        return
    at = f"{where}.rewrite_regression"
    _require_mapping(reg, at)
    rules = _key(reg, "rules", at)
    _require_list(rules, f"{at}.rules")
    if not rules:
        _fail(f"{at}.rules", "expected at least one rule")
    for j, rule in enumerate(rules):
        _require_mapping(rule, f"{at}.rules[{j}]")
        _require_str(_key(rule, "rule", f"{at}.rules[{j}]"), f"{at}.rules[{j}].rule")
        _require_optional_str(_key(rule, "location", f"{at}.rules[{j}]"), f"{at}.rules[{j}].location")
    for figure in ("original_bits", "rewritten_bits"):
        _require_number(_key(reg, figure, at), f"{at}.{figure}")
    if case.get("outcome") != "failed":
        _fail(f"{where}.outcome", "a case with a rewrite_regression has failed")


def _validate_precision(case: Any, where: str) -> None:
    """The optional ``precision`` (``tune_precision=True`` on a bfloat16/float16 case): the kept lines
    with their anchors, the rewrites, both programs' figures, the share and whether it is reached."""
    plan = case.get("precision")
    if plan is None:
        return
    at = f"{where}.precision"
    _require_mapping(plan, at)
    for key in ("dtype", "high", "note", "error"):
        _require_str(_key(plan, key, at), f"{at}.{key}")
    _validate_kept_lines(_key(plan, "lines", at), f"{at}.lines")
    rewrites = _key(plan, "rewrites", at)
    _require_list(rewrites, f"{at}.rewrites")
    for j, rewrite in enumerate(rewrites):
        here = f"{at}.rewrites[{j}]"
        _require_mapping(rewrite, here)
        _require_str(_key(rewrite, "rule", here), f"{here}.rule")
        _require_optional_str(_key(rewrite, "location", here), f"{here}.location")
    for program in ("original", "tuned"):
        figures = _key(plan, program, at)
        here = f"{at}.{program}"
        _require_mapping(figures, here)
        for figure in ("max_bits", "mean_bits"):
            _require_number(_key(figures, figure, here), f"{here}.{figure}")
        if _key(figures, "max_ulps", here) is not None:  # null: an output overflowed
            _require_number(figures["max_ulps"], f"{here}.max_ulps")
        _require_count(_key(figures, "overflows", here), f"{here}.overflows")
    for figure in ("high_share", "tolerance_ulps"):
        _require_number(_key(plan, figure, at), f"{at}.{figure}")
    if not isinstance(_key(plan, "reached", at), bool):
        _fail(f"{at}.reached", f"expected true or false, got {plan['reached']!r}")
    _require_count(_key(plan, "samples", at), f"{at}.samples")
    if plan.get("gradient") is not None:  # grad=True: the gradient's plan beside the value's
        _validate_gradient_plan(plan["gradient"], f"{at}.gradient")


def _validate_kept_lines(lines: Any, at: str) -> None:
    _require_list(lines, at)
    for j, line in enumerate(lines):
        here = f"{at}[{j}]"
        _require_mapping(line, here)
        _require_optional_str(_key(line, "location", here), f"{here}.location")
        _require_str(_key(line, "function", here), f"{here}.function")
        _require_str(_key(line, "text", here), f"{here}.text")
        _require_count(_key(line, "occurrence", here), f"{here}.occurrence")


def _validate_gradient_plan(plan: Any, at: str) -> None:
    """``precision.gradient`` (``GradientPlanRecord.to_json``): kept lines of both passes and of the
    backward pass only, the loss scale with its range and bounds, the norm-wise figures (null: an
    infinite error, a non-finite entry)."""
    _require_mapping(plan, at)
    for key in ("dtype", "high", "note", "error"):
        _require_str(_key(plan, key, at), f"{at}.{key}")
    for key in ("lines", "backward_lines"):
        _validate_kept_lines(_key(plan, key, at), f"{at}.{key}")
    _require_list(_key(plan, "carries", at), f"{at}.carries")
    rewrites = _key(plan, "rewrites", at)
    _require_list(rewrites, f"{at}.rewrites")
    for j, rewrite in enumerate(rewrites):
        _require_mapping(rewrite, f"{at}.rewrites[{j}]")
        _require_str(_key(rewrite, "rule", f"{at}.rewrites[{j}]"), f"{at}.rewrites[{j}].rule")
    scale = _key(plan, "loss_scale", at)
    _require_number(scale, f"{at}.loss_scale")
    if not scale > 0:
        _fail(f"{at}.loss_scale", f"expected a power of two > 0, got {scale!r}")
    span = _key(plan, "scale_range", at)
    if not isinstance(span, list) or len(span) != 2:
        _fail(f"{at}.scale_range", f"expected [low, high], got {span!r}")
    for bound in ("upper", "lower"):
        _require_mapping(_key(plan, bound, at), f"{at}.{bound}")
        _require_optional_str(_key(plan[bound], "location", f"{at}.{bound}"), f"{at}.{bound}.location")
        _require_str(_key(plan[bound], "name", f"{at}.{bound}"), f"{at}.{bound}.name")
    for program in ("original", "scaled", "tuned"):
        figures, here = _key(plan, program, at), f"{at}.{program}"
        _require_mapping(figures, here)
        for figure in ("max_error", "mean_error"):
            if _key(figures, figure, here) is not None:  # null: infinite (a non-finite entry)
                _require_number(figures[figure], f"{here}.{figure}")
        for count in ("nonfinite", "samples"):
            _require_count(_key(figures, count, here), f"{here}.{count}")
    for figure in ("high_share", "tolerance"):
        _require_number(_key(plan, figure, at), f"{at}.{figure}")
    if not isinstance(_key(plan, "reached", at), bool):
        _fail(f"{at}.reached", f"expected true or false, got {plan['reached']!r}")
    _require_count(_key(plan, "excused", at), f"{at}.excused")


def _validate_local_error(case: Any, where: str) -> None:
    """The optional ``local_error`` list (issue 17): worst line first, each with its figures."""
    if "local_error" not in case:
        return
    entries = case["local_error"]
    _require_list(entries, f"{where}.local_error")
    for j, entry in enumerate(entries):
        at = f"{where}.local_error[{j}]"
        _require_mapping(entry, at)
        _require_optional_str(_key(entry, "location", at), f"{at}.location")
        _require_str(_key(entry, "primitive", at), f"{at}.primitive")
        _require_str(_key(entry, "kind", at), f"{at}.kind")
        for figure in ("max_bits", "mean_bits", "share_over_tolerance"):
            _require_number(_key(entry, figure, at), f"{at}.{figure}")


def _validate_stats(stats: Any, where: str) -> None:
    _require_mapping(stats, where)
    for figure in ("max_error_bits", "mean_error_bits"):
        value = _key(stats, figure, where)
        _require_number(value, f"{where}.{figure}")
        if not (0.0 <= value < math.inf):  # NaN fails this too
            _fail(f"{where}.{figure}", f"expected a finite number of bits >= 0, got {value!r}")
    _require_count(_key(stats, "overflows", where), f"{where}.overflows")
    _require_choice(_key(stats, "verdict", where), _VERDICTS, f"{where}.verdict")


def _fail(where: str, problem: str) -> None:
    raise ValueError(f"jaxstab report: {where}: {problem}")


def _key(d: Mapping[str, Any], key: str, where: str) -> Any:
    if key not in d:
        _fail(f"{where}.{key}" if where != "report" else key, "missing key")
    return d[key]


def _require_mapping(value: Any, where: str) -> None:
    if not isinstance(value, Mapping):
        _fail(where, f"expected an object, got {type(value).__name__}")


def _require_list(value: Any, where: str) -> None:
    if not isinstance(value, list):
        _fail(where, f"expected a list, got {type(value).__name__}")


def _require_str(value: Any, where: str) -> None:
    if not isinstance(value, str):
        _fail(where, f"expected a string, got {value!r}")


def _require_optional_str(value: Any, where: str) -> None:
    if value is not None and not isinstance(value, str):
        _fail(where, f"expected a string or null, got {value!r}")


def _require_number(value: Any, where: str) -> None:
    # bool is an int subclass; True is not a number of bits.
    if isinstance(value, bool) or not isinstance(value, int | float):
        _fail(where, f"expected a number, got {value!r}")


def _require_count(value: Any, where: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        _fail(where, f"expected a non-negative integer, got {value!r}")


def _require_choice(value: Any, choices: Sequence[str], where: str) -> None:
    if value not in choices or not isinstance(value, str):
        _fail(where, f"expected one of {', '.join(map(repr, choices))}, got {value!r}")
