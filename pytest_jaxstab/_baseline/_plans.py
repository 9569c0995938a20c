"""Precision plans in the baseline: each case's kept lines (``tune_precision=True``), and their gate.

A baseline entry of a bfloat16/float16 case checked with ``tune_precision=True`` holds the optional key
``"precision"``::

    {"dtype": "float16", "high": "float32",
     "lines": [{"location": "src/m.py:12", "function": "Block.__call__", "text": "v = jnp.mean(x * x)",
                "occurrence": 1}, ...]}

With ``grad=True`` too, ``"gradient"`` (optional: a file saved before it, or without ``grad=True``, has
none and loads as before) holds the gradient plan's lines, ``{"lines": [...], "backward_lines": [...]}``
(kept in both passes; backward operations only), each as above.

A kept line is keyed by ``file::function::text`` (``KeptLine.key``; ``#N`` for the Nth identical line of
that function), never by its number: an edit above the line (or above its function) moves the number and
not the key, so it reads as the same line. ``location`` is for display. The gate
(:func:`compare_plans`): a key the baseline did not list is a regression (one more line must stay
float32), a key gone is an improvement; a line whose number moved is reported, never failed.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

from .._results import KeptLine, PrecisionRecord

__all__ = ["GradientEntry", "InvalidPlan", "PlanEntry", "compare_plans", "plan_from_json"]

PlanStatus = Literal["regressed", "improved", "unchanged", "new"]


class InvalidPlan(Exception):
    """A malformed ``"precision"`` value of a baseline entry: where in it, and what is wrong."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(where, problem)
        self.where = where
        self.problem = problem


@dataclasses.dataclass
class GradientEntry:
    """What the baseline remembers of a case's gradient plan: its kept lines (both passes, backward only)."""

    lines: list[KeptLine]
    backward_lines: list[KeptLine]

    def ranks(self) -> dict[str, tuple[int, KeptLine]]:
        """Each key's rank (2: both passes, 1: backward only) and line."""
        out = {k.key: (1, k) for k in self.backward_lines}
        out.update({k.key: (2, k) for k in self.lines})
        return out

    def to_json(self) -> dict[str, Any]:
        return {"lines": [k.to_json() for k in self.lines],
                "backward_lines": [k.to_json() for k in self.backward_lines]}


@dataclasses.dataclass
class PlanEntry:
    """What the baseline remembers of a case's precision plan: its dtypes and kept lines (and with
    ``grad=True`` the gradient's, ``gradient``; None in a file saved without it)."""

    dtype: str
    high: str
    lines: list[KeptLine]
    gradient: GradientEntry | None = None

    @classmethod
    def from_record(cls, record: PrecisionRecord | None) -> PlanEntry | None:
        """The entry of a plan; None without one (or when none could be made: nothing to compare)."""
        if record is None or record.error:
            return None
        grad = record.gradient
        gradient = (GradientEntry(list(grad.lines), list(grad.backward_lines))
                    if grad is not None and not grad.error else None)
        return cls(record.dtype, record.high, list(record.lines), gradient)

    def to_json(self) -> dict[str, Any]:
        return {"dtype": self.dtype, "high": self.high, "lines": [k.to_json() for k in self.lines],
                **({"gradient": self.gradient.to_json()} if self.gradient is not None else {})}


def _lines_from_json(lines: Any, at: str) -> list[KeptLine]:
    if not isinstance(lines, list):
        raise InvalidPlan(at, f"expected a list, got {lines!r}")
    kept = []
    for i, line in enumerate(lines):
        here = f"{at}[{i}]"
        if not isinstance(line, dict):
            raise InvalidPlan(here, f"expected an object, got {type(line).__name__}")
        if "location" not in line:
            raise InvalidPlan(f"{here}.location", "missing key")
        if line["location"] is not None and not isinstance(line["location"], str):
            raise InvalidPlan(f"{here}.location", f"expected a string or null, got {line['location']!r}")
        for key in ("function", "text"):
            if not isinstance(line.get(key), str):
                raise InvalidPlan(f"{here}.{key}", "missing key" if key not in line
                                  else f"expected a string, got {line[key]!r}")
        n = line.get("occurrence")
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise InvalidPlan(f"{here}.occurrence", f"expected an integer >= 1, got {n!r}")
        kept.append(KeptLine.from_json(line))
    return kept


def plan_from_json(raw: Any) -> PlanEntry:
    """A validated :class:`PlanEntry`; :class:`InvalidPlan` names the key and the problem."""
    if not isinstance(raw, dict):
        raise InvalidPlan("", f"expected an object, got {type(raw).__name__}")
    for key in ("dtype", "high"):
        if not isinstance(raw.get(key), str):
            raise InvalidPlan(f".{key}", f"expected a string, got {raw.get(key)!r}"
                              if key in raw else "missing key")
    if "lines" not in raw:
        raise InvalidPlan(".lines", "missing key")
    kept = _lines_from_json(raw["lines"], ".lines")
    gradient = None
    if raw.get("gradient") is not None:  # optional: a plan saved with grad=True
        grad = raw["gradient"]
        if not isinstance(grad, dict):
            raise InvalidPlan(".gradient", f"expected an object, got {type(grad).__name__}")
        for key in ("lines", "backward_lines"):
            if key not in grad:
                raise InvalidPlan(f".gradient.{key}", "missing key")
        gradient = GradientEntry(_lines_from_json(grad["lines"], ".gradient.lines"),
                                 _lines_from_json(grad["backward_lines"], ".gradient.backward_lines"))
    return PlanEntry(raw["dtype"], raw["high"], kept, gradient)


def compare_plans(old: PlanEntry | None, new: PrecisionRecord | None) -> tuple[PlanStatus, str] | None:
    """The gate's decision on a case's kept lines and why, or None when this run made no plan.

    "regressed": a line must stay ``high`` that the baseline did not list; "improved": a listed line
    no longer must (and none is new); "unchanged": the same lines (a moved number is named);
    "new": the baseline entry has no plan (saved before ``tune_precision=True``).

    Example:
        >>> kept = KeptLine("m.py:3", "norm", "n = jnp.sqrt(jnp.sum(g * g))")
        >>> moved = KeptLine("m.py:5", "norm", "n = jnp.sqrt(jnp.sum(g * g))")
        >>> compare_plans(PlanEntry("float16", "float32", [kept]), PrecisionRecord("float16", lines=[moved]))
        ('unchanged', 'precision plan: the same 1 line(s) kept in float32 (moved: m.py:3 -> m.py:5)')
    """
    now = PlanEntry.from_record(new)
    if now is None:
        return None
    if old is None:
        return "new", (f"precision plan not in the baseline yet ({len(now.lines)} line(s) kept in "
                       f"{now.high}); add it with --jaxstab-save-baseline")
    forward = _compare_lines({k.key: (2, k) for k in old.lines}, {k.key: (2, k) for k in now.lines},
                             "precision plan", now.high)
    decisions: list[tuple[PlanStatus, str]] = [forward]
    if now.gradient is not None:
        if old.gradient is None:
            decisions.append(("new", f"gradient plan not in the baseline yet ({len(now.gradient.lines)} "
                                     f"line(s) kept in {now.high} in both passes, "
                                     f"{len(now.gradient.backward_lines)} backward only); add it with "
                                     "--jaxstab-save-baseline"))
        else:
            decisions.append(_compare_lines(old.gradient.ranks(), now.gradient.ranks(), "gradient plan",
                                            now.high))
    # the worst decision first: its reason leads the message and it is the plan's status (the value's
    # plan is never "new" here, so a gradient plan new to the baseline fails nothing)
    order: tuple[PlanStatus, ...] = ("regressed", "improved", "unchanged", "new")
    decisions.sort(key=lambda d: order.index(d[0]))
    return decisions[0][0], "; ".join(text for _, text in decisions)


_PASS = {1: " (backward only)", 2: ""}


def _compare_lines(before: dict[str, tuple[int, KeptLine]], after: dict[str, tuple[int, KeptLine]],
                   what: str, high: str) -> tuple[PlanStatus, str]:
    """One plan's lines against the baseline's: each key with its rank (2: kept in every pass, 1: in
    the backward pass only); a rank up from the baseline's (0: not kept) is a new line."""
    def rank(table: dict[str, tuple[int, KeptLine]], key: str) -> int:
        return table[key][0] if key in table else 0

    def shown(k: KeptLine, r: int, was: int) -> str:
        return f"{k}{_PASS[r]}" + (" (was backward only)" if was == 1 else "")

    added = [shown(k, r, rank(before, key)) for key, (r, k) in after.items() if r > rank(before, key)]
    gone = [f"{k}" + (" (now backward only)" if rank(after, key) == 1 else "")
            for key, (r, k) in before.items() if r > rank(after, key)]
    if added:
        more = f"; no longer kept: {', '.join(gone)}" if gone else ""
        return "regressed", (f"{what}: {len(added)} new line(s) must stay {high}: {', '.join(added)} (the "
                             f"baseline kept {len(before)}){more}")
    if gone:
        return "improved", (f"{what}: {len(gone)} line(s) no longer must stay {high}: {', '.join(gone)} "
                            f"({len(after)} kept now)")
    moved = [f"{before[key][1].location} -> {k.location}" for key, (_, k) in after.items()
             if before[key][1].location != k.location]
    where = f" (moved: {', '.join(moved)})" if moved else ""
    return "unchanged", f"{what}: the same {len(after)} line(s) kept in {high}{where}"
