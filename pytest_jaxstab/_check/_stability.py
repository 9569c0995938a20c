"""The stability lens over one input: which elements get a conditioning figure, and the verdict's figures.

docs/architecture.md, "Two lenses: stability and accuracy". An element's figure is its forward error
less what the problem's conditioning explains (``_verdict``); the conditioning of an element costs one
float64 reverse pass (``_conditioning``), so it is computed only where it can change a variant's
figures, largest forward error first (branch and bound: an element's bits beyond the conditioning never
exceed its forward error, so once a variant's worst figure reaches an element's error, that element
cannot raise it). Every element over the tolerance is computed until the variant has a failing element
(the verdict needs no more), each variant's element of largest error always (its conditioning is
reported beside that error), and elements within the tolerance for every variant, which only refine a
passing figure, up to :data:`FIGURE_ROWS`. Then joint moves (``joint_conditioning``) for the computed
elements first order leaves unexplained; where they explain the worst ones, the next ones are computed.
The figures are the ones the finite differences over every element gave (``tests/test_conditioning.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ._conditioning import SMALL, conditioning_lower, conditioning_ulps, joint_conditioning
from ._verdict import element_beyond, judge_elements

__all__ = ["FIGURE_ROWS", "RATIONED_CALLS", "ROWS_PER_ROUND", "StabilityLens"]

#: Conditioning rows computed in one round before the figures are updated.
ROWS_PER_ROUND = 1024
#: Elements whose error is within the tolerance for every variant get a conditioning row only to refine
#: a passing figure: at most this many per input (the rest count their forward error, itself within it).
FIGURE_ROWS = 1024
#: Rounds of first order and joint moves (joint moves may explain the worst elements).
_ROUNDS = 3
#: Calls whose elements the oracle's exact rows served in part (``_conditioning.EXACT_ROWS`` each) after
#: which the elements still not given keep their lower bound: a passing verdict with more elements
#: that float64 cannot vouch for than these calls serve (128 at 64 a call, ~1-3 s each at (32, 512))
#: turns conservative (that variant fails on them) rather than slow. Measured: a one-pass layer norm
#: at (32, 512), whose stabilized variant's clustered rows all ask, took 31-87 s a check with 8.
RATIONED_CALLS = 2


class StabilityLens:
    """The stability lens of one program (the reference the oracle evaluates) and its judged outputs."""

    def __init__(self, reference: Any, judged_outputs: Sequence[int], out_dtypes: Sequence[np.dtype[Any]],
                 terms: int, tolerance_bits: float, alternate: Any = None) -> None:
        self.reference = reference
        # The stabilized variant, the same function: rows the reference's float64 passes lose
        # (``_conditioning.conditioning_ulps``'s ``alternate``).
        self.alternate = alternate
        self.judged_outputs = list(judged_outputs)
        self.out_dtypes = list(out_dtypes)
        self.terms = terms
        self.tolerance_bits = tolerance_bits

    def judge(self, args: Sequence[np.ndarray], exact: list[np.ndarray], outcomes: dict[str, Any],
              over: Sequence[str]) -> None:
        """Sets ``beyond_bits``, ``conditioning_bits`` and ``underflow`` on each variant of ``over`` (the
        variants whose forward error exceeds the tolerance without overflowing)."""
        # Lower bounds everywhere first (a few forward passes); exact figures where they matter. A small
        # program gets the exact figures at once (``_conditioning.SMALL``): every element is done.
        cond = conditioning_lower(self.reference, args, exact, self.judged_outputs, self.out_dtypes)
        small = sum(int(np.size(a)) for a in args if np.issubdtype(np.asarray(a).dtype, np.floating)) <= SMALL
        done = [np.full(np.shape(e), small, dtype=bool) for e in exact]
        for _ in range(_ROUNDS):
            if not self._first_order(args, exact, outcomes, over, cond, done) and not small:
                break
            unexplained = [np.zeros(np.shape(c), dtype=bool) for c in cond]
            for v in over:
                for t, (bits, c) in enumerate(zip(outcomes[v].element_bits, cond)):
                    with np.errstate(all="ignore"):
                        allowed = np.log2(1.0 + self.terms * np.where(np.isnan(c), 0.0, c))
                        unexplained[t] |= done[t] & (np.nan_to_num(bits - allowed) > self.tolerance_bits)
            cond = joint_conditioning(self.reference, list(args), exact, self.judged_outputs, self.out_dtypes,
                                      cond, unexplained)
            if small:
                break
        for v in over:
            o = outcomes[v]
            j = judge_elements(o.values, exact, o.element_bits, cond, self.terms, self.tolerance_bits)
            o.beyond_bits, o.conditioning_bits, o.underflow = j.beyond_bits, j.conditioning_bits, j.underflow

    def _first_order(self, args: Sequence[np.ndarray], exact: list[np.ndarray], outcomes: dict[str, Any],
                     over: Sequence[str], cond: list[np.ndarray], done: list[np.ndarray]) -> bool:
        """Computes ``cond`` exactly where an element can still change a figure (module docstring):
        ``cond`` holds a lower bound elsewhere, so the bits beyond it bound the element's from above,
        and an element whose bound does not exceed each variant's worst exact figure so far is skipped.
        ``done`` marks the exact ones. Returns whether anything was computed."""
        must = [np.zeros(c.size, dtype=bool) for c in cond]
        for v in over:
            for t, b in enumerate(outcomes[v].element_bits):
                flat = np.asarray(b, np.float64).reshape(-1)
                if flat.size and not np.isnan(flat).all():
                    k = int(np.nanargmax(flat))
                    must[t][k] = not done[t].reshape(-1)[k]  # its conditioning is reported
        computed, figure_rows, rationed = False, 0, 0
        while True:
            bound = {v: [self._beyond(outcomes[v], exact, t, cond) for t in range(len(cond))] for v in over}
            worst = {v: max([float(b[d.reshape(-1)].max()) for b, d in zip(bound[v], done) if d.any()],
                            default=0.0) for v in over}
            # Variants with no failing element yet come first: a pass must explain each of their
            # elements over the tolerance, while a failing variant's other elements only refine its figure.
            unsettled = [v for v in over if worst[v] <= self.tolerance_bits]
            wanted: list[np.ndarray] = []
            for t in range(len(cond)):
                score = np.fmax.reduce([bound[v][t] for v in unsettled or over])
                useful = must[t].copy()
                for v in over:
                    useful |= bound[v][t] > worst[v]
                useful &= ~done[t].reshape(-1)
                idx = np.flatnonzero(useful)
                idx = idx[np.argsort(-score[idx], kind="stable")]
                figure = np.flatnonzero(~must[t][idx] & (score[idx] <= self.tolerance_bits))
                idx = np.delete(idx, figure[max(FIGURE_ROWS - figure_rows, 0):])
                take = idx[:ROWS_PER_ROUND]
                figure_rows += int((~must[t][take] & (score[take] <= self.tolerance_bits)).sum())
                wanted.append(take)
            if not any(len(w) for w in wanted):
                return computed
            fresh = conditioning_ulps(self.reference, args, exact, self.judged_outputs, self.out_dtypes,
                                      wanted=wanted, alternate=self.alternate)
            # An element asked for and not given (the oracle's rows are rationed per call,
            # ``_conditioning.EXACT_ROWS``) is asked again, in its turn, while a call still gives
            # some figure and the element could make a variant with no failing element yet fail (a
            # pass must explain it). Any other element keeps its lower bound: it only refines a
            # failing variant's figure, which the bound overstates, never understates; and when a
            # call gives none, nobody can vouch for the rest.
            progress = any(bool(np.any(~np.isnan(f.reshape(-1)[w]))) for f, w in zip(fresh, wanted))
            if any(bool(np.any(np.isnan(f.reshape(-1)[w]))) for f, w in zip(fresh, wanted)):
                rationed += 1
                progress &= rationed < RATIONED_CALLS
            for t, (f, w) in enumerate(zip(fresh, wanted)):
                got = ~np.isnan(f.reshape(-1))  # what the passes gave (a column's pass: every row)
                flat, mark = cond[t].reshape(-1), done[t].reshape(-1)
                flat[got] = np.fmax(flat[got], f.reshape(-1)[got])  # a joint move's figure stands
                mark[got] = True
                again = np.zeros(len(w), dtype=bool)
                if progress:
                    for v in unsettled:
                        again |= bound[v][t][w] > self.tolerance_bits
                mark[w[~again]] = True
                must[t][w[got[w]]] = False
            computed = True

    def _beyond(self, outcome: Any, exact: list[np.ndarray], t: int, cond: list[np.ndarray]) -> np.ndarray:
        """One variant's bits beyond ``cond`` on leaf ``t``, flat (-1 where not judged)."""
        beyond, _, _ = element_beyond(outcome.values[t], exact[t], outcome.element_bits[t], cond[t],
                                      self.terms, self.tolerance_bits)
        return np.nan_to_num(np.asarray(beyond, np.float64).reshape(-1), nan=-1.0)
