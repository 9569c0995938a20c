"""Precision plans in the baseline: each case's kept lines (``tune_precision=True``), and their gate.

A baseline entry of a bfloat16/float16 case checked with ``tune_precision=True`` holds the optional key
``"precision"``::

    {"dtype": "float16", "high": "float32",
     "lines": [{"location": "src/m.py:12", "function": "Block.__call__", "text": "v = jnp.mean(x * x)",
                "occurrence": 1}, ...]}

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

__all__ = ["InvalidPlan", "PlanEntry", "compare_plans", "plan_from_json"]

PlanStatus = Literal["regressed", "improved", "unchanged", "new"]


class InvalidPlan(Exception):
    """A malformed ``"precision"`` value of a baseline entry: where in it, and what is wrong."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(where, problem)
        self.where = where
        self.problem = problem


@dataclasses.dataclass
class PlanEntry:
    """What the baseline remembers of a case's precision plan: its dtypes and kept lines."""

    dtype: str
    high: str
    lines: list[KeptLine]

    @classmethod
    def from_record(cls, record: PrecisionRecord | None) -> PlanEntry | None:
        """The entry of a plan; None without one (or when none could be made: nothing to compare)."""
        if record is None or record.error:
            return None
        return cls(record.dtype, record.high, list(record.lines))

    def to_json(self) -> dict[str, Any]:
        return {"dtype": self.dtype, "high": self.high, "lines": [k.to_json() for k in self.lines]}


def plan_from_json(raw: Any) -> PlanEntry:
    """A validated :class:`PlanEntry`; :class:`InvalidPlan` names the key and the problem."""
    if not isinstance(raw, dict):
        raise InvalidPlan("", f"expected an object, got {type(raw).__name__}")
    for key in ("dtype", "high"):
        if not isinstance(raw.get(key), str):
            raise InvalidPlan(f".{key}", f"expected a string, got {raw.get(key)!r}"
                              if key in raw else "missing key")
    lines = raw.get("lines")
    if not isinstance(lines, list):
        raise InvalidPlan(".lines", "missing key" if "lines" not in raw
                          else f"expected a list, got {lines!r}")
    kept = []
    for i, line in enumerate(lines):
        at = f".lines[{i}]"
        if not isinstance(line, dict):
            raise InvalidPlan(at, f"expected an object, got {type(line).__name__}")
        if "location" not in line:
            raise InvalidPlan(f"{at}.location", "missing key")
        if line["location"] is not None and not isinstance(line["location"], str):
            raise InvalidPlan(f"{at}.location", f"expected a string or null, got {line['location']!r}")
        for key in ("function", "text"):
            if not isinstance(line.get(key), str):
                raise InvalidPlan(f"{at}.{key}", "missing key" if key not in line
                                  else f"expected a string, got {line[key]!r}")
        n = line.get("occurrence")
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise InvalidPlan(f"{at}.occurrence", f"expected an integer >= 1, got {n!r}")
        kept.append(KeptLine.from_json(line))
    return PlanEntry(raw["dtype"], raw["high"], kept)


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
    before = {k.key: k for k in old.lines}
    after = {k.key: k for k in now.lines}
    added = [k for key, k in after.items() if key not in before]
    gone = [k for key, k in before.items() if key not in after]
    if added:
        more = f"; no longer kept: {', '.join(map(str, gone))}" if gone else ""
        return "regressed", (f"precision plan: {len(added)} new line(s) must stay {now.high}: "
                             f"{', '.join(map(str, added))} (the baseline kept {len(old.lines)}){more}")
    if gone:
        return "improved", (f"precision plan: {len(gone)} line(s) no longer must stay {old.high}: "
                            f"{', '.join(map(str, gone))} ({len(now.lines)} kept now)")
    moved = [f"{before[key].location} -> {k.location}" for key, k in after.items()
             if before[key].location != k.location]
    where = f" (moved: {', '.join(moved)})" if moved else ""
    return "unchanged", f"precision plan: the same {len(now.lines)} line(s) kept in {now.high}{where}"
