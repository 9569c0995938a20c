"""The terminal report: the "jaxstab" table (one row per case) and the baseline comparison summary.

Pure text over :class:`~pytest_jaxstab._results.CaseResult`; the plugin prints it in
`pytest_terminal_summary` under its own section, as Hypothesis prints its statistics.
"""

from __future__ import annotations

import dataclasses
import re
import textwrap
from collections.abc import Callable, Mapping, Sequence

from .._results import CaseResult, VariantStats

__all__ = ["format_table"]

ELLIPSIS = "…"

_SEP = "  "
_GRAD_LABEL = "  ∇ grad"  # the case cell of a gradient's row, under its case
#: Widest a column grows to (its cells are cut with an ellipsis beyond); narrowest a cut column gets.
_CASE_CAP, _CASE_MIN, _CASE_PREFERRED = 48, 12, 32
#: Narrowest the case column is cut to for a column beyond the first ranks.
_CASE_READABLE = 24
#: Ranks of the columns every table shows first: the case, the verdict, both max errors, the rules (the fix).
_FIRST_RANKS = 3
_TEXT_CAP, _TEXT_MIN = 30, 12


@dataclasses.dataclass(eq=False)
class _Column:
    """One column of the table: its cells (one per row, uncut), how they are cut and aligned, its rank.

    `rank` orders the columns by what a reader needs first: the case, the verdict, both variants' max
    error and the rules that fired (the fix) are shown first; the rest as the width allows."""

    key: str
    title: str
    cells: list[str]
    rank: int
    right: bool = False
    group: str = ""  # "original" / "rewritten": the heading over the figures of one variant
    cap: int = 0  # 0: as wide as its widest cell
    least: int = 0  # narrowest it is cut to (0: never cut below its widest cell)
    cut: Callable[[str, int], str] = dataclasses.field(default=lambda text, width: _fit(text, width))

    @property
    def widest(self) -> int:
        return max([len(self.title), *(len(c) for c in self.cells)])

    @property
    def natural(self) -> int:
        return min(self.widest, self.cap) if self.cap else self.widest

    @property
    def narrowest(self) -> int:
        return min(self.natural, max(self.least, len(self.title))) if self.least else self.natural


def format_table(cases: Sequence[CaseResult], backends: Sequence[str],
                 gate: Mapping[str, str] | None = None,
                 gradient_gate: Mapping[str, str] | None = None, *,
                 width: int | None = None, verbose: bool = False) -> str:
    """Formats the "jaxstab" terminal table: one row per case, as many columns as `width` holds.

    Columns, in the order a reader needs them (shown first when the width is short): the case (nodeid
    without its directories, cut in the middle when long), the verdict (the judged variant: stable or
    unstable, and its lens: ``/s`` stability, ``/a`` accuracy), the max error bits of the function as
    written and of the rewritten one, the rules that fired (the fix); with `gate`, the baseline gate's
    decision (known, regressed, new, improved, unchanged); where the judged variant's first NaN/Inf was
    born (`primitive @ file:line`); the judged variant's max bits beyond conditioning (``-`` under the
    accuracy lens); both variants' overflow counts; where the function as written loses the most bits
    (`primitive @ file:line`, from `jst.local_error`); both variants' mean error bits; dtype; samples;
    discarded (inputs outside the real domain) / uncertain inputs (`disc/unc`); and, for each backend in
    `backends` only, the jitted time ratio rewritten/original (`cpu 0.98x`). They are laid out in the
    order case, dtype, samples, disc/unc, original max/mean/ovf, rewritten max/mean/ovf, verdict, beyond,
    gate, rules fired, NaN origin, bits lost at, time. Columns that do not fit are named under the table;
    with `verbose` they follow in further tables, each led by the case column. Long cells are cut with an
    ellipsis. A case checked with ``grad=True`` has a second row, ``  ∇ grad``, with the same columns for
    its gradient (its NaN origin is a line of the backward pass). A case that a rewrite makes worse than
    written shows ``bad rule`` as its verdict, and a line under the table names the rules, their lines
    and both figures.

    Args:
        cases: the results to show, in order.
        backends: the backends to give a timing column, e.g. `["cpu", "gpu"]`; none: no time column.
        gate: the gate's decision per case nodeid, when the run compared with a baseline.
        gradient_gate: the gate's decision on the gradient per case nodeid (shown in the ``∇`` rows).
        width: the terminal's width: no line is longer (the legend is wrapped). None: every column, no
            wrapping (for files and tests).
        verbose: the columns that do not fit follow in further tables instead of being named.

    Returns:
        The table as lines joined by newlines (no trailing newline), header first, a legend last.

    Example:
        >>> case = CaseResult("tests/test_loss.py::test_lse", "float32", samples=200, outcome="failed",
        ...                   original=VariantStats(32.0, 4.5, 7, "fail"), rewritten=VariantStats(1.0, 0.2))
        >>> rows = format_table([case], ["cpu"]).splitlines()
        >>> [row for row in rows if "test_lse" in row][0].split()[:5]
        ['test_loss.py::test_lse', 'float32', '200', '0/0', '32.0']
        >>> narrow = format_table([case], ["cpu"], width=60).splitlines()
        >>> max(len(line) for line in narrow) <= 60
        True
    """
    if not cases:
        return "jaxstab: no cases checked"
    rows: list[tuple[CaseResult, CaseResult | None]] = []
    for case in cases:
        rows.append((case, None))
        if case.gradient is not None:
            rows.append((case.gradient, case))
    columns = _columns(rows, backends, gate, gradient_gate)
    limit = width if width is not None else sum(c.natural for c in columns) + len(_SEP) * len(columns)
    lines: list[str] = []
    pending = columns
    shown: list[_Column] = []
    first = True
    while pending:
        chosen, widths = _fit_columns(pending, limit)
        if not first:
            lines.append("")
        lines += _render(chosen, widths)
        shown += chosen
        pending = [c for c in pending if c not in chosen]
        if pending:
            pending = [columns[0], *pending]  # each further table is led by the case column
        first = False
        if pending and not verbose:
            break
    hidden = [c for c in columns if c not in shown]
    notes: list[str] = []
    if hidden:
        names = ", ".join(dict.fromkeys(c.title if not c.group else f"{c.group} {c.title}" for c in hidden))
        notes.append(f"not shown at this width ({limit} columns): {names}; pytest -v shows them in a second "
                     "table, and the JSON and HTML reports have every figure")
    wrong = _wrong_rewrites(cases)
    if wrong:
        notes.append("wrong rewrites (each fails its test, whatever apply=, judge= and the baseline say):")
        notes.extend(wrong)
    notes += _legend(cases, {c.key for c in shown}, gate is not None, bool(wrong))
    lines += _wrapped(notes, width)
    return "\n".join(lines)


def _columns(rows: Sequence[tuple[CaseResult, CaseResult | None]], backends: Sequence[str],
             gate: Mapping[str, str] | None, gradient_gate: Mapping[str, str] | None) -> list[_Column]:
    """Every column, in display order, with its cells for `rows` (a case, or a gradient under its case)."""

    def each(cell: Callable[[CaseResult, CaseResult | None], str]) -> list[str]:
        return [cell(case, of) for case, of in rows]

    def gate_cell(case: CaseResult, of: CaseResult | None) -> str:
        # The gradient's own gate decision, under the case's (a gate column without one: "-").
        decisions = gate if of is None else (gradient_gate or {})
        return (decisions or {}).get(case.nodeid, "-")

    time_cells = [(b, len(b) + 7) for b in backends]  # "cpu 12.34x"
    cols = [
        _Column("case", "case",
                each(lambda c, of: _short_nodeid(c.nodeid, 10**6) if of is None else _GRAD_LABEL), 0,
                cap=_CASE_CAP, least=_CASE_MIN, cut=_cut_case),
        _Column("dtype", "dtype", each(lambda c, of: c.dtype if of is None else ""), 10),
        _Column("samples", "samples", each(lambda c, of: str(c.samples)), 11, right=True),
        _Column("counts", "disc/unc", each(lambda c, of: f"{c.discarded}/{c.uncertain}"), 12, right=True),
    ]
    for group, rank, attr in (("original", (2, 9, 7), "original"), ("rewritten", (2, 9, 7), "rewritten")):
        cols += [
            _Column(f"{attr}_max", "max", each(lambda c, of, a=attr: f"{getattr(c, a).max_error_bits:.1f}"),
                    rank[0], right=True, group=group),
            _Column(f"{attr}_mean", "mean",
                    each(lambda c, of, a=attr: f"{getattr(c, a).mean_error_bits:.2f}"), rank[1], right=True,
                    group=group),
            _Column(f"{attr}_ovf", "ovf", each(lambda c, of, a=attr: str(getattr(c, a).overflows)), rank[2],
                    right=True, group=group),
        ]
    cols += [
        _Column("verdict", "verdict", each(lambda c, of: _verdict(c) + _lens(c.judged_stats)), 1),
        _Column("beyond", "beyond", each(lambda c, of: _beyond(c.judged_stats)), 6, right=True),
    ]
    if gate is not None:
        cols.append(_Column("gate", "gate", each(gate_cell), 4))
    cols += [
        _Column("rules", "rules fired", each(lambda c, of: _rules(c) if of is None else ""), 3, cap=_TEXT_CAP,
                least=_TEXT_MIN),
        _Column("nan", "NaN origin", each(lambda c, of: _nan_origin(c)), 5, cap=_TEXT_CAP, least=_TEXT_MIN,
                cut=_cut_location),
        _Column("lost", "bits lost at", each(lambda c, of: _bits_lost_at(c)), 8, cap=_TEXT_CAP,
                least=_TEXT_MIN, cut=_cut_location),
    ]
    if time_cells:
        cols.append(_Column("time", "time", each(lambda c, of: "" if of is not None else " ".join(
            _left(_timing(c, b), w) for b, w in time_cells).rstrip()), 13))
    return cols


def _layout_width(cols: Sequence[_Column], widths: Mapping[str, int]) -> int:
    """The width of a table of `cols` (display order) at `widths`, a group's heading included."""
    total = sum(widths[c.key] for c in cols) + len(_SEP) * (len(cols) - 1)
    for group in {c.group for c in cols if c.group}:
        members = [c for c in cols if c.group == group]
        span = sum(widths[c.key] for c in members) + len(_SEP) * (len(members) - 1)
        total += max(len(group) - span, 0)  # the heading widens its group's first column
    return total


def _fit_columns(pending: Sequence[_Column], width: int) -> tuple[list[_Column], dict[str, int]]:
    """The columns of one table, in display order, and their widths.

    The case column first, then the others rank by rank (columns of one rank, both variants' figure,
    together) while they fit in `width`. Every column starts at its natural width, the case at most
    :data:`_CASE_PREFERRED`; to make room for the first ranks (verdict, max errors, the fix) the case
    and the rules are cut towards their narrowest (the wider first), for a later text column it and the
    case (to :data:`_CASE_READABLE`).
    What is left
    widens what was cut, the case last (to its whole names)."""
    order = {c.key: i for i, c in enumerate(pending)}
    case = next(c for c in pending if c.key == "case")
    widths = {c.key: c.natural for c in pending}
    widths["case"] = min(case.natural, _CASE_PREFERRED)
    chosen = [case]
    for rank in sorted({c.rank for c in pending if c is not case}):
        cols = [c for c in pending if c.rank == rank]
        trial = sorted([*chosen, *cols], key=lambda c: order[c.key])
        before = dict(widths)
        over = _layout_width(trial, widths) - width
        # Who gives way: for the first ranks the case and the rules, for a later one its own text.
        first = rank <= _FIRST_RANKS
        flexible = [case, *(c for c in trial if c.key == "rules")] if first else [*cols, case]
        floor = {c.key: c.narrowest if first or c is not case else min(case.natural, _CASE_READABLE)
                 for c in flexible}
        while over > 0:  # one character at a time from the widest that can give, so both stay readable
            able = [c for c in flexible if c.least and widths[c.key] > floor[c.key]]
            if not able:
                break
            widths[max(able, key=lambda c: widths[c.key]).key] -= 1
            over -= 1
        if over <= 0 or len(chosen) == 1:  # a table holds at least one column beside the case
            chosen = trial
        else:
            widths = before
    for col in sorted(chosen, key=lambda c: (c is case, c.rank)):  # what was cut gets room, the case last
        room = width - _layout_width(chosen, widths)
        if room > 0:  # the case past its cap too: a wide terminal shows whole names
            widths[col.key] = min(col.widest if col is case else col.natural, widths[col.key] + room)
    return chosen, widths


def _render(cols: Sequence[_Column], widths: Mapping[str, int]) -> list[str]:
    """The group heading (when a column has one), the titles, a rule and one line per row."""
    widths = dict(widths)
    for group in dict.fromkeys(c.group for c in cols if c.group):
        members = [c for c in cols if c.group == group]
        span = sum(widths[c.key] for c in members) + len(_SEP) * (len(members) - 1)
        widths[members[0].key] += max(len(group) - span, 0)

    def cell(col: _Column, text: str) -> str:
        cut = col.cut(text, widths[col.key])
        return cut.rjust(widths[col.key]) if col.right else cut.ljust(widths[col.key])

    heading: list[tuple[str, int]] = []  # (group or "", width) spans
    for col in cols:
        if col.group and heading and col.group == heading[-1][0]:
            heading[-1] = (col.group, heading[-1][1] + len(_SEP) + widths[col.key])
        else:
            heading.append((col.group, widths[col.key]))
    lines: list[str] = []
    if any(c.group for c in cols):
        lines.append(_SEP.join(_center(g, w) if g else " " * w for g, w in heading).rstrip())
    lines.append(_SEP.join(cell(c, c.title) for c in cols).rstrip())
    rows = [_SEP.join(cell(c, c.cells[i]) for c in cols).rstrip() for i in range(len(cols[0].cells))]
    lines.append("-" * max(len(line) for line in [lines[-1], *rows]))
    return lines + rows


def _legend(cases: Sequence[CaseResult], shown: set[str], gated: bool, wrong: bool) -> list[str]:
    """What the shown columns mean (the verdict's lenses always)."""
    lines = []
    if "counts" in shown:
        lines.append("disc/unc: inputs outside the function's real domain / the exact oracle could not "
                     "decide (neither is judged)")
    figures = {k.split("_")[1] for k in shown if k.startswith(("original_", "rewritten_"))}
    if figures:
        named = "/".join(f for f in ("max", "mean") if f in figures)
        text = f"{named}: error in bits against the exact result over all samples" if named else ""
        if "ovf" in figures:
            text += ("; " if text else "") + "ovf: non-finite results where the exact one is finite"
        lines.append(text)
    lines.append("verdict/s: judged by the error beyond what the problem's conditioning explains "
                 "(judge='stability'); beyond: that figure for the judged variant, max bits over all samples")
    lines.append("verdict/a: judged by the max forward error (judge='accuracy'; beyond: -)")
    if wrong:
        lines.append("bad rule: the judged function may pass, but a rewrite makes it worse than written "
                     "(listed above the legend)")
    legend = "verdict: the judged function within the tolerance and without overflow (stable) or not"
    if gated and "gate" in shown:
        legend += ("; gate: the decision against the baseline (only 'regressed' fails the run; a known "
                   "instability is unstable and does not)")
    lines.append(legend)
    if "lost" in shown:
        lines.append("bits lost at: the operation and line of the function as written that loses the most "
                     "bits on its own (jst.local_error)")
    if "time" in shown:
        lines.append("time: jitted time of the rewritten function / the original one, per backend")
    if any(case.gradient is not None for case in cases):
        lines.append(f"{_GRAD_LABEL.strip()}: the gradient (jax.grad, a VJP with ones for non-scalar "
                     "outputs) of the case above, judged against the exact derivative; NaN origin: its "
                     "backward-pass line")
    return lines


def _wrapped(lines: Sequence[str], width: int | None) -> list[str]:
    """Each line wrapped at `width` (None: as is), its continuation indented under its first words."""
    if width is None:
        return list(lines)
    out = []
    for line in lines:
        indent = " " * (len(line) - len(line.lstrip(" ")) + 2)
        out += textwrap.wrap(line, width, subsequent_indent=indent, break_on_hyphens=False) or [""]
    return out


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


def _cut_case(text: str, width: int) -> str:
    return _short_nodeid(text, width)


def _cut_location(text: str, width: int) -> str:
    """``sub @ file.py:12`` cut from the start of its file (``sub @ …_file.py:12``), so that the line
    number stays visible."""
    head, at, where = text.rpartition(" @ ")
    room = width - len(head) - len(at)
    if len(text) <= width or not at or room < 6:
        return _fit(text, width)
    return head + at + ELLIPSIS + where[len(where) - room + 1:]


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
    """The worst line of the local error: ``sub @ file.py:12``; ``-`` when none."""
    if not case.local_error or not case.local_error[0].significant:
        return "-"
    worst = case.local_error[0]
    return f"{worst.primitive} @ {_short_location(worst.location)}"


def _ratio(ratio: float) -> str:
    if ratio != ratio or ratio in (float("inf"), float("-inf")):  # NaN or infinite
        return "?"
    return f"{ratio:.2f}x" if ratio < 100 else f"{ratio:.0f}x"


def _timing(case: CaseResult, backend: str) -> str:
    record = next((t for t in case.timing if t.backend == backend), None)
    return f"{backend} {_ratio(record.ratio) if record is not None else '-'}"
