"""Shrinking a failing input to a readable one, inside the domain, with a bounded number of runs.

Hypothesis's shrinker works on its choice sequences and needs the failure to be the test's exception,
which would stop the exploration that gives the case its figures. Here the failure is already known,
as arrays. First, one candidate keeps only the elements the worst output element depends on (its
*support*: the nonzero or non-finite entries of that element's reverse-mode derivative, at the input and
at a benign point, ``_support``) and zeroes every other element of every argument at once: at real
sizes (a (32, 1000) batch, a 256-wide layer) the failure lives in one row or one column, and delta
debugging would spend its whole budget of full evaluations halving the rest. Then elements are zeroed in
halving blocks (as delta debugging does), then each remaining element is replaced by a simpler value (0,
±1, one or two significant digits, its integer part, three digits) whenever the judged variant still
fails. Every candidate stays inside the argument's domain. The shrinker is deterministic and bounded by a
count of runs; once they are spent no candidate is built (``exhausted``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ._evaluate import SampleResult
from ._shrink_support import support_masks

__all__ = ["Shrinker", "run_budget"]

# Runs of both variants and the oracle the shrinker may spend at most. A count, not a time budget: a
# comparison run must shrink to the same input as the run that saved the baseline.
MAX_RUNS = 120

# At real sizes every run is a full evaluation of a failing input (the oracle over every element, the
# conditioning of the elements over tolerance): 0.1-0.4 s at (32, 256) @ (256, 256), so 100 runs cost
# more than the check's verdict. The runs are bounded by input elements too: at most ``ELEMENT_RUNS``
# elements evaluated in all (100 runs of a 10,000-element input), never fewer than ``MIN_RUNS`` runs.
# Still a count, so still reproducible; the support cut (``_keep_support``) has already brought the
# failure down to the elements one output element reads before the budget matters.
ELEMENT_RUNS = 1 << 20
MIN_RUNS = 16
# The support cut is tried from this many input elements on: below, delta debugging reaches the same
# inputs within its runs, and the shrunk inputs of small cases stay what they were.
SUPPORT_FROM = 4096


def run_budget(max_runs: int, elements: int) -> int:
    """The runs a shrink of an input of ``elements`` elements may spend, given the case's ``max_runs``."""
    cap = min(int(max_runs), MAX_RUNS)
    return min(cap, max(MIN_RUNS, ELEMENT_RUNS // max(int(elements), 1)))


class Shrinker:
    """Shrinks failing inputs of one case.

    Args:
        evaluate: runs both variants and the oracle on an input.
        fails: whether an evaluated input still fails the judged variant.
        dtype: the inputs' dtype.
        domains: the case's domain of each argument, resolved for ``dtype`` (``Case.domains``).
        max_runs: the most evaluations to spend (capped at ``MAX_RUNS``, and by the input's size,
            ``run_budget``).
        program: the closed jaxpr judged and the indices of its judged outputs, for the support
            candidate; by default read from ``evaluate`` (an ``Evaluator``), None to skip it.
    """

    def __init__(self, evaluate: Callable[[Sequence[np.ndarray]], SampleResult],
                 fails: Callable[[SampleResult], bool],
                 dtype: np.dtype[Any], domains: Sequence[Any], *, max_runs: int = MAX_RUNS,
                 program: tuple[Any, Sequence[int]] | str | None = "evaluator") -> None:
        self.evaluate = evaluate
        if program == "evaluator":
            closed = getattr(evaluate, "closed", None)
            program = None if closed is None else (closed, getattr(evaluate, "judged_outputs", [0]))
        self.program = program if not isinstance(program, str) else None
        self.support_kept: bool | None = None  # whether the support candidate still failed (None: not tried)
        self.fails = fails
        self.dtype = dtype
        self.domains = list(domains)
        self.runs = 0
        self._tried: set[bytes] = set()  # the candidates judged by the current shrink
        self._max_runs = min(int(max_runs), MAX_RUNS)
        self.max_runs = self._max_runs  # for the input being shrunk: ``run_budget``

    @property
    def exhausted(self) -> bool:
        """Whether the runs are spent: the shrink stopped at its bound, not where nothing simpler fails."""
        return self.runs >= self.max_runs

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
        key = hashlib.blake2b(b"".join(np.ascontiguousarray(a).tobytes() for a in args),
                              digest_size=16).digest()
        if key in self._tried:  # a candidate met again (the all-zero one at every level): no run spent
            return None
        self._tried.add(key)
        self.runs += 1
        ex = self.evaluate(tuple(args))
        return ex if self.fails(ex) else None

    def shrink(self, example: SampleResult) -> SampleResult:
        """The simplest failing input found from ``example`` (``example`` itself if nothing simpler fails)."""
        self.runs = 0
        self._tried = set()
        self.support_kept = None
        elements = sum(int(np.size(a)) for a in example.args)
        self.max_runs = run_budget(self._max_runs, elements)
        best = self._keep_support(example) if elements >= SUPPORT_FROM else example
        for i in range(len(best.args)):
            best = self._zero_blocks(best, i)
        for i in range(len(best.args)):
            best = self._simplify_elements(best, i)
        return best

    def _keep_support(self, best: SampleResult) -> SampleResult:
        """``best`` with every element outside the worst output element's support zeroed, if that still
        fails (one run); ``best`` otherwise."""
        if self.program is None or self.max_runs < 1:
            return best
        masks = support_masks(self.program[0], list(self.program[1]), best, self.dtype)
        if masks is None:
            return best
        args = []
        for i, (a, keep) in enumerate(zip(best.args, masks)):
            flat = np.array(a, copy=True).reshape(-1)
            if keep is not None and np.issubdtype(flat.dtype, np.floating):
                flat[~keep.reshape(-1)] = 0
                if not self._inside(i, flat):
                    return best
            args.append(flat.reshape(np.shape(a)))
        if all(np.array_equal(a, b) for a, b in zip(args, best.args)):
            return best
        self.runs += 1
        ex = self.evaluate(tuple(args))
        self.support_kept = bool(self.fails(ex))
        return ex if self.support_kept else best

    def _zero_blocks(self, best: SampleResult, i: int) -> SampleResult:
        size = best.args[i].size
        block = max(size // 2, 1)
        while size and block >= 1 and not self.exhausted:
            for start in range(0, size, block):
                if self.exhausted:
                    break
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
            if self.exhausted:
                break
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
