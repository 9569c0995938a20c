"""A rewrite that makes the function worse: found on the inputs both variants ran on, named, and made
to fail the case whatever ``apply`` and ``judge`` say (docs/architecture.md, "The gate").

The check runs the function as written and the rewritten one on every input. A rewrite is *worse
beyond the tolerance* at an input when, under the case's lens, the rewritten variant fails there (its
judged bits exceed ``tolerance_bits``, or it overflows where the exact result is finite) while the
function as written does not, and the rewritten variant's judged bits exceed the original's by more
than ``tolerance_bits`` (or it overflows where the original is finite). The judged bits are the lens's:
bits beyond what the problem's conditioning explains under ``judge="stability"``, the forward error
under ``judge="accuracy"``. An ill-conditioned input gives both variants large forward errors that
differ at random; its conditioning excuses them, so comparing forward errors there would blame sound
rewrites.

Which rule: the one regressing input (the worst found) is run again with each rule that fired alone;
those that make it worse alone are named. When none does alone (two rules that are only wrong
together), each is left out in turn and those whose absence removes the regression are named; failing
that, every rule that fired.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .._files import short_path
from .._results import CaseResult, RewriteRecord, RewriteRegression, Witness
from ._evaluate import SampleResult, _simplicity
from ._message import _worst_element, format_array

__all__ = ["RegressionWatch", "apply_regression", "find_culprits", "regresses"]


def regresses(ex: SampleResult, tolerance_bits: float) -> bool:
    """Whether the rewritten variant is worse than the original beyond the tolerance at this input
    (the module docstring's definition, under the lens the evaluator judged with)."""
    o, r = ex.outcomes["original"], ex.outcomes["rewritten"]
    if o.fails(tolerance_bits) or not r.fails(tolerance_bits):
        return False
    if r.overflow:  # the original does not fail here, so it is finite where the exact result is
        return True
    return r.judged_bits - o.judged_bits > tolerance_bits


def _severity(ex: SampleResult) -> tuple[bool, float]:
    o, r = ex.outcomes["original"], ex.outcomes["rewritten"]
    return r.overflow, r.judged_bits - o.judged_bits


class RegressionWatch:
    """Keeps the worst regressing input seen (an overflow first, then the largest gap; the simplest
    on a tie, so the choice does not depend on the order inputs arrived in)."""

    def __init__(self, tolerance_bits: float) -> None:
        self.tolerance_bits = float(tolerance_bits)
        self.worst: SampleResult | None = None

    def see(self, ex: SampleResult) -> None:
        if not regresses(ex, self.tolerance_bits):
            return
        if self.worst is None or _key(ex) < _key(self.worst):
            self.worst = ex


def _key(ex: SampleResult) -> tuple[Any, ...]:
    overflow, gap = _severity(ex)
    return (not overflow, -gap, _simplicity(ex))


def find_culprits(applied: Sequence[Any], rules: Sequence[Any],
                  run_with: Callable[[Sequence[Any]], SampleResult],
                  tolerance_bits: float) -> tuple[list[RewriteRecord], bool]:
    """The fired rewrites to blame, and whether they were isolated.

    Args:
        applied: the rewrites that fired (``rewrites.Applied``: ``rule``, ``location``).
        rules: the rule objects the check rewrote with.
        run_with: evaluates the regressing input with the program rewritten by only the given rules.
        tolerance_bits: the case's tolerance.

    Returns:
        ``(records, isolated)``: the culprits' records (every location each fired at), and True when
        a re-run confirmed them (or only one rule fired), False when every fired rule is named.
    """
    fired: list[str] = list(dict.fromkeys(str(a.rule) for a in applied))
    by_name: dict[str, Any] = {str(getattr(r, "name", "")): r for r in rules}

    def records(names: Sequence[str]) -> list[RewriteRecord]:
        return [RewriteRecord(a.rule, a.location) for a in applied if a.rule in names]

    if len(fired) <= 1:
        return records(fired), True
    alone = [n for n in fired if n in by_name and regresses(run_with([by_name[n]]), tolerance_bits)]
    if alone:
        return records(alone), True
    needed = [n for n in fired if not regresses(
        run_with([r for r in rules if getattr(r, "name", None) != n]), tolerance_bits)]
    if needed:
        return records(needed), True
    return records(fired), False


def _builtin(rules: Sequence[Any]) -> set[str]:
    """The names of the rules among ``rules`` that are pytest-jaxstab's own (by identity: a user's
    rule that borrows a catalogue name is still the user's)."""
    from ..rewrites.catalogue import MEAN, PERFORMANCE, RESULT_CHANGING, STABILITY, STABILITY_FAST

    ours = {id(r) for r in (*STABILITY, *PERFORMANCE, *RESULT_CHANGING, *STABILITY_FAST, MEAN)}
    return {r.name for r in rules if id(r) in ours}


def _where(records: Sequence[RewriteRecord]) -> str:
    """```halve` at f.py:3, f.py:5 and `other` at f.py:9``."""
    by_rule: dict[str, list[str]] = {}
    for r in records:
        by_rule.setdefault(r.rule, [])
        at = short_path(r.location) if r.location else "<no source location>"
        if at not in by_rule[r.rule]:
            by_rule[r.rule].append(at)
    parts = [f"`{rule}` at {', '.join(at)}" for rule, at in by_rule.items()]
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def _figure(bits: float, overflow: bool) -> str:
    return "a non-finite result where the exact one is finite" if overflow else f"{bits:.1f} bits"


def regression_message(nodeid: str, reg: RewriteRegression, ex: SampleResult, names: Sequence[str],
                       tolerance_bits: float, builtin: set[str]) -> str:
    """The failure text: which rewrite, at which line, how much worse, on which input, what to do."""
    rules = reg.rule_names
    verb = "makes" if len(rules) == 1 else "make"
    what = "rewrite" if len(rules) == 1 else "rewrites"
    lens = ("bits beyond what conditioning explains, judge='stability'" if reg.judge == "stability"
            else "forward error, judge='accuracy'")
    ours = [r for r in rules if r in builtin]
    theirs = [r for r in rules if r not in builtin]
    advice = "report it" if ours else "fix the rule or leave it out of rules="
    head = (f"{nodeid}: {what} {_where(reg.rules)} {verb} this function worse: "
            f"{_figure(reg.rewritten_bits, reg.rewritten_overflow)} where the original has "
            f"{_figure(reg.original_bits, reg.original_overflow)} ({lens}; tolerance "
            f"{tolerance_bits:g} bits); {advice}.")
    lines = [head]
    if not reg.isolated:
        lines.append("No fired rule makes it worse on its own, nor does leaving one out remove it: every "
                     "rule that fired is named.")
    if ours:
        lines.append(f"A wrong rewrite of pytest-jaxstab's catalogue ({', '.join(ours)}): report it with "
                     "this message, and leave the rule out meanwhile (rules=[r for r in "
                     f"jst.rewrites.STABILITY if r.name != {ours[0]!r}]).")
    if theirs:
        lines.append(f"A rule of your own ({', '.join(theirs)}): its identity does not hold here, or it "
                     "loses precision the function as written keeps.")
    lines.append("A known instability may be tolerated by a baseline; a wrong rewrite never is. Input:")
    for name, a in zip(names, reg.inputs):
        lines.append(f"    {name} = {format_array(a)}")
    lines.append("On it:")
    lines.append(f"    {_worst_element(ex, 'original')}")
    lines.append(f"    {_worst_element(ex, 'rewritten')}")
    return "\n".join(lines)


def apply_regression(result: CaseResult, ex: SampleResult, applied: Sequence[Any], rules: Sequence[Any],
                     run_with: Callable[[Sequence[Any]], SampleResult], names: Sequence[str]) -> None:
    """Fails ``result`` for the rewrite that made it worse at ``ex``: the record, the message first
    (the judged variant's own failure, if any, after it) and the input among the witnesses."""
    o, r = ex.outcomes["original"], ex.outcomes["rewritten"]
    culprits, isolated = find_culprits(applied, rules, run_with, result.tolerance_bits)
    reg = RewriteRegression(culprits, float(o.judged_bits), float(r.judged_bits),
                            [np.array(a, copy=True) for a in ex.args], result.judge,
                            bool(o.overflow), bool(r.overflow), isolated)
    result.rewrite_regression = reg
    result.outcome = "failed"
    text = regression_message(result.nodeid, reg, ex, names, result.tolerance_bits, _builtin(rules))
    result.message = f"{text}\n\n{result.message}" if result.message else text
    if not any(_same(w.args, ex.args) for w in result.witnesses):  # re-checked first by a comparison
        result.witnesses.append(Witness([np.array(a, copy=True) for a in ex.args], "rewritten",
                                        float(r.bits), bool(r.overflow)))


def _same(a: Sequence[np.ndarray], b: Sequence[np.ndarray]) -> bool:
    return len(a) == len(b) and all(np.asarray(x).tobytes() == np.asarray(y).tobytes()
                                    and np.shape(x) == np.shape(y) for x, y in zip(a, b))

