"""Opt-in performance rules (filled by the reduce_into_scan work, issue 8)."""

from __future__ import annotations

from ._rule import Rule

#: Opt-in rules that restructure the program for speed; they may reorder floating-point sums.
PERFORMANCE: tuple[Rule, ...] = ()
