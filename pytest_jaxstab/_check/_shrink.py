"""Shrinking a failing input to a readable one, inside the domain, with a bounded number of runs.

Hypothesis's shrinker works on its choice sequences and needs the failure to be the test's exception,
which would stop the exploration that gives the case its figures. Here the failure is already known,
as arrays: elements are zeroed in halving blocks (as delta debugging does), then each remaining
element is replaced by a simpler value (0, ±1, one or two significant digits, its integer part, three
digits) whenever the judged variant still fails. Every candidate stays inside the argument's domain.
The shrinker is deterministic and bounded by a count of runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ._evaluate import SampleResult

__all__ = ["Shrinker"]

# Runs of both variants and the oracle the shrinker may spend at most. A count, not a time budget: a
# comparison run must shrink to the same input as the run that saved the baseline.
MAX_RUNS = 120


class Shrinker:
    """Shrinks failing inputs of one case.

    Args:
        evaluate: runs both variants and the oracle on an input.
        fails: whether an evaluated input still fails the judged variant.
        dtype: the inputs' dtype.
        domains: the case's domain of each argument, resolved for ``dtype`` (``Case.domains``).
        max_runs: the most evaluations to spend (capped at ``MAX_RUNS``).
    """

    def __init__(self, evaluate: Callable[[Sequence[np.ndarray]], SampleResult],
                 fails: Callable[[SampleResult], bool],
                 dtype: np.dtype[Any], domains: Sequence[Any], *, max_runs: int = MAX_RUNS) -> None:
        self.evaluate = evaluate
        self.fails = fails
        self.dtype = dtype
        self.domains = list(domains)
        self.runs = 0
        self.max_runs = min(int(max_runs), MAX_RUNS)

    def _inside(self, i: int, values: np.ndarray) -> bool:
        dom = self.domains[i]
        if not bool(dom.contains(values).all()):
            return False
        return dom.where is None or all(bool(dom.where(v)) for v in values.reshape(-1))

    def _try(self, current: SampleResult, i: int, flat: np.ndarray) -> SampleResult | None:
        if self.runs >= self.max_runs:
            return None
        if not self._inside(i, flat):
            return None
        args = list(current.args)
        args[i] = flat.reshape(current.args[i].shape)
        self.runs += 1
        ex = self.evaluate(tuple(args))
        return ex if self.fails(ex) else None

    def shrink(self, example: SampleResult) -> SampleResult:
        """The simplest failing input found from ``example`` (``example`` itself if nothing simpler fails)."""
        self.runs = 0
        best = example
        for i in range(len(best.args)):
            best = self._zero_blocks(best, i)
        for i in range(len(best.args)):
            best = self._simplify_elements(best, i)
        return best

    def _zero_blocks(self, best: SampleResult, i: int) -> SampleResult:
        size = best.args[i].size
        block = max(size // 2, 1)
        while size and block >= 1:
            for start in range(0, size, block):
                flat = np.array(best.args[i], copy=True).reshape(-1)
                if not flat[start:start + block].any():
                    continue
                flat[start:start + block] = 0
                found = self._try(best, i, flat)
                if found is not None:
                    best = found
            if block == 1:
                break
            block //= 2
        return best

    def _simplify_elements(self, best: SampleResult, i: int) -> SampleResult:
        size = best.args[i].size
        for k in range(size):
            value = best.args[i].reshape(-1)[k]
            for candidate in self._simpler(value):
                flat = np.array(best.args[i], copy=True).reshape(-1)
                flat[k] = candidate
                found = self._try(best, i, flat)
                if found is not None:
                    best = found
                    break  # candidates are simplest first: the first that fails is kept
        return best

    def _simpler(self, value: Any) -> list[Any]:
        v = float(value)
        if v == 0.0 or not np.isfinite(v):
            return []
        raw = [0.0, float(np.sign(v)), float(f"{v:.1g}"), float(f"{v:.2g}")]
        if abs(v) >= 1:
            raw.append(float(np.trunc(v)))
        raw.append(float(f"{v:.3g}"))
        out: list[Any] = []
        with np.errstate(all="ignore"):
            for c in raw:
                cast = np.asarray(c).astype(self.dtype)
                if np.isfinite(cast) and cast != value and all(cast != o for o in out):
                    out.append(cast)
        return out
