"""The gate: compares a run's cases with the baseline under `--jaxstab-compare-fail` margins.

Follows pytest-benchmark's `--benchmark-compare-fail`: the margins are parsed into
:class:`RegressionMargin` objects and each regression message names the test, the figure, and by how
much it moved. The gate decides (known, regressed, new, improved, unchanged); the stability verdict of
each case is the check's, and the two are reported as two things.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Iterable, Sequence
from typing import Literal

from .._results import CaseResult, VariantStats
from ._plans import compare_plans
from ._store import Baseline, BaselineEntry, stale_nodeids

_EPS = 1e-9
#: How a user drops stale entries (the plugin's option; the gate only names it).
PRUNE_ADVICE = ("drop them with --jaxstab-save-baseline --jaxstab-prune-baseline in a run of the whole "
                "suite")  # figures are floats from JSON: equal within this is unchanged

__all__ = [
    "DEFAULT_MARGINS",
    "CaseComparison",
    "Comparison",
    "RegressionMargin",
    "compare",
    "format_baseline_summary",
    "parse_compare_fail",
]

# --- compare -----------------------------------------------------------------------------------------

Figure = Literal["bits", "overflows"]
_ACCEPTED = ("accepted: 'bits:N' (the lens's error figure may grow by N >= 0 bits), "
             "'overflows:N' (N >= 0 new overflows)")


@dataclasses.dataclass(frozen=True)
class RegressionMargin:
    """One `--jaxstab-compare-fail` margin: how much a figure of the judged variant may grow.

    `bits`: the lens's error figure in bits (the max forward error under ``judge="accuracy"``, the
    max bits beyond conditioning under ``judge="stability"``) may grow by at most `margin`;
    `overflows`: the overflow count may grow by at most `margin` (0: any growth fails). `overflows` with
    `margin=None` (the default when the expression does not mention it) fails only on a *new* overflow:
    a case with none in the baseline that has some now. Counts of an already-overflowing case depend on
    which inputs Hypothesis draws, which changes with Hypothesis and strategy upgrades; a count margin is
    for pinned setups.
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
            # The lens's figure: the forward error under judge="accuracy", the bits beyond what the
            # problem's conditioning explains under judge="stability" (a forward error that grows on an
            # ill-conditioned input is not a regression of the formula). Both entries share one lens:
            # `_compare_case` refuses a mismatch before any margin is applied.
            before, after = old.judged_bits, new.judged_bits
            what = "bits beyond conditioning" if new.judge == "stability" else "max error"
            if after - before > (self.margin or 0.0) + _EPS:
                return (f"{what} rose {before:.2f} -> {after:.2f} bits (+{after - before:.2f} bits, "
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


#: Margins used for figures `--jaxstab-compare-fail` does not mention: any growth of the lens's error
#: figure fails, and so does a new overflow (none in the baseline, some now).
DEFAULT_MARGINS: tuple[RegressionMargin, ...] = (
    RegressionMargin("bits", 0.0), RegressionMargin("overflows", None),
)


def parse_compare_fail(expr: str) -> list[RegressionMargin]:
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
        [RegressionMargin(figure='bits', margin=2.0), RegressionMargin(figure='overflows', margin=0)]
    """
    checks: list[RegressionMargin] = []
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
        checks.append(RegressionMargin(figure, margin))  # type: ignore[arg-type]  # figure narrowed above
    return checks


Status = Literal["regressed", "known", "improved", "unchanged", "new"]


@dataclasses.dataclass
class CaseComparison:
    """How one case compares with its baseline entry.

    `status`: "regressed" (fails the run; also any case a rewrite makes worse than written, whatever
    its entry holds), "known" (still above tolerance or overflowing, not worse),
    "improved", "unchanged", or "new" (no comparable baseline entry). `message` names the case, the
    figures and how they moved. With a gradient (``grad=True``) the gradient's figures are compared
    under the same margins and the message says what the gradient did; the case regresses when its
    value or its gradient does.
    """

    nodeid: str
    status: Status
    message: str
    variant: str = "original"
    #: The gradient's own decision (a case checked with ``grad=True``), None otherwise. The case's
    #: `status` is "regressed" when either regressed; a gradient "new" to the baseline is judged
    #: by its own verdict (as a case new to the baseline is), not by the gate.
    gradient: Status | None = None


@dataclasses.dataclass
class Comparison:
    """The outcome of :func:`compare`: one :class:`CaseComparison` per case, and the stale entries."""

    cases: list[CaseComparison]
    stale: list[str]
    checks: list[RegressionMargin]

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
    checks: Sequence[RegressionMargin] | None = None,
    *,
    collected_nodeids: Iterable[str],
    rootdir: str | os.PathLike[str] | None = None,
    completed: Iterable[str] = (),
) -> Comparison:
    """Compares this run's results with a baseline, case by case, on the judged variant.

    A case regresses when its judged variant (`CaseResult.judged`) has more overflows or a larger max
    error than its baseline entry, beyond the margins of `checks` (figures not in `checks` use
    :data:`DEFAULT_MARGINS`: any growth fails), and whenever a rewrite made it (or its gradient)
    worse than written (`CaseResult.rewrite_regression`), entry or not: a wrong rewrite is never
    a known instability. A case that is still unstable but not worse is "known":
    reported, not failed. A case checked with ``grad=True`` has its gradient's figures compared the
    same way, under the same margins: the case regresses when its value or its gradient does, and the
    message names the gradient. A gradient the baseline has no figures of is new: the gate does
    not fail it, and the test judges it by its verdict, as it judges a new case.

    Args:
        cases: this run's results.
        baseline: the loaded baseline.
        checks: from :func:`parse_compare_fail`, or None for the defaults.
        collected_nodeids: every test id collected in the session, deselected ones included. Entries of
            the baseline whose test is gone are reported as stale: those of a test file that was
            collected but no longer has that test, and (with `rootdir`) those whose test file is gone.
            Entries of test files this run did not collect are left alone, as syrupy does.
        rootdir: pytest's rootdir, the base of nodeids; lets deleted test files count as stale.
        completed: the tests whose body ran to its end: their entries that this run did not produce are stale
            (see :func:`stale_nodeids`). A ``jaxstab.check`` entry (``<test>::<name>``) of a collected
            test is never stale otherwise.

    Returns:
        A :class:`Comparison`; `.failed` tells whether the run must fail, `.regressions` why.

    Example:
        >>> from pytest_jaxstab._baseline import Baseline, BaselineEntry
        >>> from pytest_jaxstab._results import CaseResult
        >>> then = VariantStats(max_error_bits=3.0, mean_error_bits=0.5)
        >>> baseline = Baseline({"t.py::test_f": BaselineEntry("float32", 200, then, then, [])})
        >>> now = CaseResult("t.py::test_f", "float32", original=VariantStats(max_error_bits=4.0))
        >>> result = compare([now], baseline, parse_compare_fail("bits:2"),
        ...                  collected_nodeids=["t.py::test_f"])
        >>> result.failed, result.cases[0].status
        (False, 'unchanged')
    """
    margins = {c.figure: c for c in DEFAULT_MARGINS}
    margins.update({c.figure: c for c in checks or ()})
    cases = list(cases)
    compared = [_compare_case(case, baseline.entries.get(case.nodeid), list(margins.values()))
                for case in cases]
    stale = stale_nodeids(baseline, collected_nodeids, rootdir=rootdir, completed=completed,
                          produced=[c.nodeid for c in cases])
    return Comparison(compared, stale, list(margins.values()))


def _figures(stats: VariantStats) -> str:
    beyond = (f", {stats.beyond_bits:.2f} bits beyond conditioning [judge=stability]"
              if stats.judge == "stability" else "")  # accuracy: the forward error, as version 1 said
    return f"max error {stats.max_error_bits:.2f} bits{beyond}, {stats.overflows} overflows"


#: How a case's decision is made of its value's and its gradient's: the first of these that either has.
_PRECEDENCE: tuple[Status, ...] = ("regressed", "improved", "known", "unchanged")
_GRADIENT = "gradient (jax.grad)"


def _compare_case(case: CaseResult, entry: BaselineEntry | None,
                  checks: list[RegressionMargin]) -> CaseComparison:
    """The figures' decision; a rewrite that makes the function (or its gradient) worse than written
    then makes it "regressed" whatever the entry holds: a known instability is tolerated, a wrong
    rewrite never is (docs/architecture.md, "The gate")."""
    decided = _with_plan(_compare_figures(case, entry, checks), case, entry)
    wrong = [(what, c.rewrite_regression) for what, c in (("", case), (f"{_GRADIENT}: ", case.gradient))
             if c is not None and c.rewrite_regression is not None]
    if not wrong:
        return decided
    label = f"{case.nodeid} ({case.judged} function)"
    said = "; ".join(f"{what}{reg}" for what, reg in wrong)
    rest = decided.message[len(label) + 2:] if decided.message.startswith(label) else decided.message
    gradient = decided.gradient
    if case.gradient is not None and case.gradient.rewrite_regression is not None:
        gradient = "regressed"
    return CaseComparison(case.nodeid, "regressed", f"{label}: {said} (a wrong rewrite fails the gate "
                          f"whatever the baseline holds); figures: {rest}", decided.variant, gradient)


def _with_plan(decided: CaseComparison, case: CaseResult, entry: BaselineEntry | None) -> CaseComparison:
    """The figures' decision with the precision plan's (``tune_precision=True``): a new line that must
    stay float32 regresses the case, a line no longer kept improves it (docs/architecture.md, "The
    gate"). A case new to the baseline (or of another dtype) stays new."""
    if decided.status == "new" or entry is None:
        return decided
    plan = compare_plans(entry.precision, case.precision)
    if plan is None:
        return decided
    status, text = plan
    combined: Status = decided.status
    if status in ("regressed", "improved"):
        combined = next(s for s in _PRECEDENCE if s in (decided.status, status))
    message = f"{decided.message}; {text}"
    if status == "regressed" and decided.status != "regressed":  # the reason first
        label = f"{case.nodeid} ({decided.variant} function)"
        rest = decided.message[len(label) + 2:] if decided.message.startswith(label) else decided.message
        message = f"{label}: {text}; figures: {rest}"
    return dataclasses.replace(decided, status=combined, message=message)


def _compare_figures(case: CaseResult, entry: BaselineEntry | None,
                     checks: list[RegressionMargin]) -> CaseComparison:
    variant = case.judged
    label = f"{case.nodeid} ({variant} function)"
    if entry is None:
        return CaseComparison(case.nodeid, "new", f"{label}: not in the baseline yet ("
                              f"{_figures(case.judged_stats)}); add it with --jaxstab-save-baseline", variant,
                              gradient="new" if case.gradient is not None else None)
    if entry.dtype != case.dtype:
        return CaseComparison(case.nodeid, "new", f"{label}: dtype changed {entry.dtype} -> {case.dtype}, "
                              "so the baseline entry does not apply; update it with --jaxstab-save-baseline",
                              variant, gradient="new" if case.gradient is not None else None)
    saved_lens, lens = entry.stats(variant).judge, case.judged_stats.judge
    if saved_lens != lens:
        # Figures of two lenses are not comparable: a clear failure, never a silent reinterpretation.
        return CaseComparison(case.nodeid, "regressed", f"{label}: the baseline entry was saved under "
                              f"judge={saved_lens!r} and this run judges under judge={lens!r}: their figures "
                              "are not comparable. Re-save the baseline under this lens "
                              f"(--jaxstab-save-baseline), or run with --jaxstab-judge={saved_lens}.",
                              variant, gradient="regressed" if case.gradient is not None else None)
    status, text = _compare_stats(entry.stats(variant), case.judged_stats, checks)
    if case.gradient is None:
        return CaseComparison(case.nodeid, status, f"{label}: {text}", variant)
    grad = case.gradient
    if entry.gradient is None:
        # Checked with grad=True since the baseline was saved (or saved by an older pytest-jaxstab):
        # the gradient is new, which is not a regression; its figures are named so it can be saved.
        grad_status: Status = "new"
        grad_text = (f"not in the baseline yet ({_figures(grad.judged_stats)}); add it with "
                     "--jaxstab-save-baseline")
    else:
        grad_status, grad_text = _compare_stats(entry.gradient.stats(grad.judged), grad.judged_stats, checks)
    if grad_status == "regressed" and status != "regressed":  # the reason first
        message = f"{label}: {_GRADIENT}: {grad_text}; the value: {text}"
    else:
        message = f"{label}: {text}; {_GRADIENT}: {grad_text}"
    combined: Status = next(s for s in _PRECEDENCE if s in (status, grad_status))
    return CaseComparison(case.nodeid, combined, message, variant, gradient=grad_status)


def _compare_stats(old: VariantStats, new: VariantStats,
                   checks: list[RegressionMargin]) -> tuple[Status, str]:
    """The decision on one set of figures (the value's or the gradient's) and why, without the label."""
    problems = [p for p in (c.problem(old, new) for c in checks) if p is not None]
    if problems:
        return "regressed", "; ".join(problems)
    moved = f"{_figures(old)} -> {_figures(new)}"
    better = (new.judged_bits < old.judged_bits - _EPS or new.overflows < old.overflows)
    unstable = new.verdict == "fail" or new.overflows > 0
    if better:
        note = "; still above tolerance" if unstable else ""
        return "improved", f"improved, {moved}{note}"
    if unstable:
        return "known", f"known instability, not worse than the baseline ({moved})"
    return "unchanged", f"within the baseline ({moved})"


# --- terminal summary -----------------------------------------------------------------------------

_SECTIONS = (
    ("regressed", "regressions (these fail the run)"),
    ("known", "known instabilities (not worse than the baseline)"),
    ("improved", "improved (save the baseline to lock the gains in)"),
    ("new", "new cases (not in the baseline)"),
)


def format_baseline_summary(comparison: Comparison) -> str:
    """Formats the outcome of `compare` for the terminal: regressions first, then known instabilities,
    improvements, new cases and stale entries (baseline entries whose test is gone).

    Args:
        comparison: what `compare` returned.

    Returns:
        Lines joined by newlines, no trailing newline; the first line counts each status.

    Example:
        >>> from pytest_jaxstab._baseline import Baseline, BaselineEntry
        >>> from pytest_jaxstab._results import CaseResult
        >>> then = VariantStats(max_error_bits=3.0)
        >>> baseline = Baseline({"t.py::test_f": BaselineEntry("float32", 200, then, then, [])})
        >>> now = CaseResult("t.py::test_f", "float32", original=VariantStats(max_error_bits=4.0))
        >>> comparison = compare([now], baseline, collected_nodeids=["t.py::test_f"])
        >>> print(format_baseline_summary(comparison))  # doctest: +ELLIPSIS
        jaxstab baseline: 1 regressed, 0 known, 0 improved, 0 unchanged, 0 new, 0 stale (compare-fail ...)
        regressions (these fail the run):
          t.py::test_f (original function): max error rose 3.00 -> 4.00 bits (+1.00 bits, ...)
    """
    counts = [f"{len(comparison.regressions)} regressed", f"{len(comparison.known)} known",
              f"{len(comparison.improved)} improved", f"{len(comparison.unchanged)} unchanged",
              f"{len(comparison.new)} new", f"{len(comparison.stale)} stale"]
    margins = ", ".join(str(c) for c in comparison.checks)
    lines = [f"jaxstab baseline: {', '.join(counts)} (compare-fail {margins})"]
    by_status: dict[str, list[CaseComparison]] = {}
    for case in comparison.cases:
        by_status.setdefault(case.status, []).append(case)
    for case in comparison.cases:  # a case within its baseline whose gradient is new: listed as new
        if case.gradient == "new" and case.status == "unchanged":
            by_status.setdefault("new", []).append(case)
    for status, title in _SECTIONS:
        entries = by_status.get(status, [])
        if entries:
            lines.append(f"{title}:")
            lines.extend(f"  {c.message}" for c in entries)
    if comparison.stale:
        lines.append(f"stale entries (their test or check is gone; {PRUNE_ADVICE}):")
        lines.extend(f"  {nodeid}" for nodeid in comparison.stale)
    return "\n".join(lines)
