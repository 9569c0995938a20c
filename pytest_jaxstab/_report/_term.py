"""The terminal report: the "jaxstab" table (one row per case) and the baseline comparison summary.

Pure text over :class:`~pytest_jaxstab._results.CaseResult`; the plugin prints it in
`pytest_terminal_summary` under its own section, as Hypothesis prints its statistics.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from .._results import CaseResult, VariantStats

__all__ = ["format_table"]

ELLIPSIS = "…"

# Column widths; a row is ~193 characters without timing, ~203 with one timed backend.
_CASE_W = 32
_RULES_W = 24
_NAN_W = 22
_LOST_W = 20
_VERDICT_W = 10  # "unstable/s": the verdict and its lens (s: stability, a: accuracy)
_BEYOND_W = 6  # "beyond": the judged variant's max bits beyond conditioning (stability lens)
_GATE_W = 9
_COUNTS_W = 9  # "disc/unc": inputs outside the real domain / undecided
_FIG_TITLES = (("max", 5), ("mean", 5), ("ovf", 5))
_GRAD_LABEL = "  ∇ grad"  # the case cell of a gradient's row, under its case


def format_table(cases: Sequence[CaseResult], backends: Sequence[str],
                 gate: Mapping[str, str] | None = None,
                 gradient_gate: Mapping[str, str] | None = None) -> str:
    """Formats the "jaxstab" terminal table: one row per case, fixed-width columns.

    Columns: case (nodeid without its directories), dtype, samples, discarded (inputs outside the real
    domain) / uncertain inputs (`disc/unc`), max/mean error bits and overflows of the function as written
    and of the rewritten one, the verdict (the judged variant: stable or unstable, and its lens: ``/s``
    stability, ``/a`` accuracy), the judged variant's max bits beyond conditioning (``-`` under the
    accuracy lens), with `gate` the
    baseline gate's decision (known, regressed, new, improved, unchanged) in its own column, the rules
    that fired, where the judged variant's first NaN/Inf was born (`primitive @ file:line`), where the
    function as written loses the most bits (`primitive @ file:line`, from `jst.local_error`), and, for
    each backend in `backends` only, the jitted time ratio rewritten/original (`cpu 0.98x`). Long cells
    are cut with an ellipsis. A case checked with ``grad=True`` has a second row, ``  ∇ grad``, with the
    same columns for its gradient (its NaN origin is a line of the backward pass). A case that a rewrite
    makes worse than written shows ``bad rule`` as its verdict, and a line under the table names the
    rules, their lines and both figures.

    Args:
        cases: the results to show, in order.
        backends: the backends to give a timing column, e.g. `["cpu", "gpu"]`; none: no time column.
        gate: the gate's decision per case nodeid, when the run compared with a baseline.
        gradient_gate: the gate's decision on the gradient per case nodeid (shown in the ``∇`` rows).

    Returns:
        The table as lines joined by newlines (no trailing newline), header first, a legend last.

    Example:
        >>> case = CaseResult("tests/test_loss.py::test_lse", "float32", samples=200, outcome="failed",
        ...                   original=VariantStats(32.0, 4.5, 7, "fail"), rewritten=VariantStats(1.0, 0.2))
        >>> rows = format_table([case], ["cpu"]).splitlines()
        >>> [row for row in rows if "test_lse" in row][0].split()[:5]
        ['test_loss.py::test_lse', 'float32', '200', '0/0', '32.0']
    """
    if not cases:
        return "jaxstab: no cases checked"
    sep = "  "
    fig_w = sum(w for _, w in _FIG_TITLES) + len(_FIG_TITLES) - 1
    time_cells = [(b, len(b) + 7) for b in backends]  # "cpu 12.34x"
    time_w = sum(w for _, w in time_cells) + max(len(time_cells) - 1, 0)
    lead_w = _CASE_W + 2 + 8 + 2 + 7 + 2 + _COUNTS_W
    group = sep.join([" " * lead_w, _center("original", fig_w), _center("rewritten", fig_w)]).rstrip()
    figures_title = " ".join(t.rjust(w) for t, w in _FIG_TITLES)
    titles = [_left("case", _CASE_W), _left("dtype", 8), _right("samples", 7), _right("disc/unc", _COUNTS_W),
              figures_title, figures_title, _left("verdict", _VERDICT_W), _right("beyond", _BEYOND_W)]
    if gate is not None:
        titles.append(_left("gate", _GATE_W))
    titles += [_left("rules fired", _RULES_W), _left("NaN origin", _NAN_W), _left("bits lost at", _LOST_W)]
    if time_cells:
        titles.append(_left("time", time_w))
    header = sep.join(titles).rstrip()
    lines = [group, header, "-" * len(header)]
    for case in cases:
        lines.append(sep.join(_row(case, gate, time_cells)).rstrip())
        if case.gradient is not None:
            # The gradient's own gate decision, under the case's (a gate column without one: "-").
            grad_gate = None if gate is None else (gradient_gate or {})
            lines.append(sep.join(_row(case.gradient, grad_gate, [], gradient_of=case)).rstrip())
    lines[2] = "-" * max(len(line) for line in lines[1:])
    wrong = _wrong_rewrites(cases)
    if wrong:
        lines.append("wrong rewrites (each fails its test, whatever apply=, judge= and the baseline say):")
        lines.extend(wrong)
    lines.append("disc/unc: inputs outside the function's real domain / the exact oracle could not decide "
                 "(neither is judged)")
    lines.append("max/mean: error in bits against the exact result over all samples; ovf: non-finite results "
                 "where the exact one is finite")
    legend = "verdict: the judged function within the tolerance and without overflow (stable) or not"
    lines.append("verdict/s: judged by the error beyond what the problem's conditioning explains "
                 "(judge='stability'); beyond: that figure for the judged variant, max bits over all samples")
    lines.append("verdict/a: judged by the max forward error (judge='accuracy'; beyond: -)")
    if wrong:
        lines.append("bad rule: the judged function may pass, but a rewrite makes it worse than written "
                     "(listed above the legend)")
    if gate is not None:
        legend += ("; gate: the decision against the baseline (only 'regressed' fails the run; a known "
                   "instability is unstable and does not)")
    lines.append(legend)
    lines.append("bits lost at: the operation and line of the function as written that loses the most bits "
                 "on its own (jst.local_error)")
    if time_cells:
        lines.append("time: jitted time of the rewritten function / the original one, per backend")
    if any(case.gradient is not None for case in cases):
        lines.append(f"{_GRAD_LABEL.strip()}: the gradient (jax.grad, a VJP with ones for non-scalar "
                     "outputs) of the case above, judged against the exact derivative; NaN origin: its "
                     "backward-pass line")
    return "\n".join(lines)


def _row(case: CaseResult, gate: Mapping[str, str] | None, time_cells: Sequence[tuple[str, int]],
         gradient_of: CaseResult | None = None) -> list[str]:
    """One row's cells: a case, or (``gradient_of`` its case) the gradient's row under it."""
    if gradient_of is None:
        name, rules = _short_nodeid(case.nodeid, _CASE_W), _rules(case)
    else:
        name, rules = _GRAD_LABEL, ""
    cells = [
        _left(name, _CASE_W),
        _left(case.dtype if gradient_of is None else "", 8),
        _right(str(case.samples), 7),
        _right(f"{case.discarded}/{case.uncertain}", _COUNTS_W),
        _figures(case.original),
        _figures(case.rewritten),
        _left(_verdict(case) + _lens(case.judged_stats), _VERDICT_W),
        _right(_beyond(case.judged_stats), _BEYOND_W),
    ]
    if gate is not None:
        cells.append(_left(gate.get(case.nodeid, "-"), _GATE_W))
    cells += [_left(rules, _RULES_W), _left(_nan_origin(case), _NAN_W), _left(_bits_lost_at(case), _LOST_W)]
    if time_cells:
        cells.append(" ".join(_left(_timing(case, b), w) for b, w in time_cells))
    return cells


def _verdict(case: CaseResult) -> str:
    if case.rewrite_regression is not None:
        return "bad rule"
    return "unstable" if case.outcome == "failed" else "stable"


def _wrong_rewrites(cases: Sequence[CaseResult]) -> list[str]:
    """One line per value or gradient a rewrite makes worse: node id, rules at their lines, figures."""
    out = []
    for case in cases:
        for what, c in (("", case), (" (gradient)", case.gradient)):
            if c is not None and c.rewrite_regression is not None:
                out.append(f"  {case.nodeid}{what}: {c.rewrite_regression}")
    return out


def _fit(text: str, width: int) -> str:
    # Cut at the end with an ellipsis; never wider than `width`.
    return text if len(text) <= width else text[: max(width - 1, 0)] + ELLIPSIS


def _left(text: str, width: int) -> str:
    return _fit(text, width).ljust(width)


def _right(text: str, width: int) -> str:
    return _fit(text, width).rjust(width)


def _center(text: str, width: int) -> str:
    return _fit(text, width).center(width)


def _short_nodeid(nodeid: str, width: int) -> str:
    """Drops the test file's directories, then if still too long the file itself; then cuts the middle,
    so that the end of the test's name (its parametrization) stays visible."""
    file, sep, rest = nodeid.partition("::")
    short = re.split(r"[/\\]", file)[-1] + sep + rest
    if len(short) <= width:
        return short
    if rest:
        short = rest
        if len(short) <= width:
            return short
    head = (width - 1) * 2 // 3
    tail = width - 1 - head
    return short[:head] + ELLIPSIS + (short[-tail:] if tail else "")


def _figures(stats: VariantStats) -> str:
    values = (f"{stats.max_error_bits:.1f}", f"{stats.mean_error_bits:.2f}", str(stats.overflows))
    return " ".join(_right(v, w) for v, (_, w) in zip(values, _FIG_TITLES))


def _beyond(stats: VariantStats) -> str:
    return f"{stats.beyond_bits:.1f}" if stats.judge == "stability" else "-"


def _lens(stats: VariantStats) -> str:
    return "/s" if stats.judge == "stability" else "/a"


def _rules(case: CaseResult) -> str:
    names = list(dict.fromkeys(r.rule for r in case.rewrites))  # dedup, first-fired order
    return ", ".join(names) or "-"


def _short_location(location: str | None) -> str:
    if not location:
        return "?"
    return re.split(r"[/\\]", location)[-1]


def _nan_origin(case: CaseResult) -> str:
    origin = next((o for o in case.nan_origins if o.variant == case.judged), None)
    if origin is None:
        return "-"
    return f"{origin.primitive} @ {_short_location(origin.location)}"


def _bits_lost_at(case: CaseResult) -> str:
    """The worst line of the local error: ``sub @ file.py:12``, the file cut from its start to fit
    (``sub @ …_file.py:12``) so that the line number stays visible; ``-`` when none."""
    if not case.local_error or not case.local_error[0].significant:
        return "-"
    worst = case.local_error[0]
    head = f"{worst.primitive} @ "
    where = _short_location(worst.location)
    room = _LOST_W - len(head)
    if len(where) > room:
        where = ELLIPSIS + where[len(where) - room + 1:]
    return head + where


def _ratio(ratio: float) -> str:
    if ratio != ratio or ratio in (float("inf"), float("-inf")):  # NaN or infinite
        return "?"
    return f"{ratio:.2f}x" if ratio < 100 else f"{ratio:.0f}x"


def _timing(case: CaseResult, backend: str) -> str:
    record = next((t for t in case.timing if t.backend == backend), None)
    return f"{backend} {_ratio(record.ratio) if record is not None else '-'}"
