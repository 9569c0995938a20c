"""Which lines a low-precision gradient needs in float32: greedy by what each line alone fixes, pruned.

The plan's keys (``_upcast``): ``"file:line"`` computes the line in ``high`` in both passes (what
``jax.grad`` of a program with that line in float32 computes: the derivative of a float32 operation is
float32), ``"file:line (backward)"`` its backward operations only (the forward ones stay low: a bias
gradient summed over the batch in bfloat16, the transposed ``dot`` of a layer whose forward pass is
fine). The search (:func:`search_gradient`), at the loss scale chosen (``_loss_scale``):

1. the gradient as written; within the target: nothing kept;
2. the catalogue's rewrite of the loss, differentiated (its stable forms' derivative rules included):
   within the target, the plan is the rewrites; no worse, the search goes on from it;
3. each candidate line alone, measured; lines in the order of what they fix alone (fewest non-finite
   entries, then the smallest error), ties nearest the output first (a rounded ``mean(x)`` spoils a
   one-pass variance without fixing anything alone);
4. greedy: added in that order until within the target; pruned: each dropped again, last added first,
   when the plan holds without it;
5. narrowed: a kept line whose backward operations alone suffice is kept backward only;
6. the rewrites dropped when the kept lines alone suffice.

When even every line in ``high`` misses the target, a sample is judged against what ``high`` can do (the
target, or the better of the program as written and every line kept, whichever is larger): never worse
than the program as written where it was within the target, as ``_search`` does for values.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._check._upcast import backward_key
from ._grad_program import GradFigures, GradSamples, measure
from ._search import fewest_lines

__all__ = ["GradOutcome", "search_gradient"]

#: Candidate lines screened one by one (each a compiled program); beyond it, program order only.
_SCREEN_LIMIT = 24


@dataclasses.dataclass
class GradOutcome:
    """What :func:`search_gradient` found."""

    grad_closed: Any
    rewritten: bool
    lines: list[str]
    backward: list[str]
    original: GradFigures
    scaled: GradFigures
    tuned: GradFigures
    reached: bool
    tried: int
    note: str = ""
    excused: int = 0
    #: each sample's norm-wise error under the plan found (None: nothing kept)
    errors: np.ndarray | None = None

    @property
    def keys(self) -> frozenset[str]:
        return frozenset([*self.lines, *(backward_key(b) for b in self.backward)])


def search_gradient(grad_closed: Any, rewritten: Any | None, candidates: Sequence[str],
                    with_backward: set[str], smp: GradSamples, dtype: np.dtype[Any], high: np.dtype[Any],
                    scale: float, tolerance: float) -> GradOutcome:
    """The plan for the gradient program ``grad_closed`` (``rewritten``: the rewritten loss's, None when
    no rule fires); ``candidates``: the loss's float lines, nearest the output first; ``with_backward``:
    those with backward operations (module docstring)."""
    tried = 0
    # Each measurement compiles its program (about 2 s for a 32-step GRU's scan on a 2-core CPU); the
    # search asks for some twice (every line kept, then ok() of every line; a line alone, then the
    # greedy's first step): the same program, keys and scale on the same samples give the same figures,
    # so they are measured once.
    seen: dict[tuple[int, frozenset[str], float], tuple[GradFigures, np.ndarray]] = {}

    def run(program: Any, keys: frozenset[str], s: float = scale) -> tuple[GradFigures, np.ndarray]:
        nonlocal tried
        key = (id(program), keys, s)
        if key not in seen:
            tried += 1
            seen[key] = measure(program, keys, high, smp, s, dtype)
        return seen[key]

    none: frozenset[str] = frozenset()
    original, orig_err = run(grad_closed, none, 1.0)
    scaled, scaled_err = (original, orig_err) if scale == 1.0 else run(grad_closed, none)
    if scaled.within(tolerance):
        return GradOutcome(grad_closed, False, [], [], original, scaled, scaled, True, tried)
    base, base_fig, is_rewritten = grad_closed, scaled, False
    if rewritten is not None:
        fig, errs = run(rewritten, none)
        if fig.within(tolerance):
            return GradOutcome(rewritten, True, [], [], original, scaled, fig, True, tried)
        if (fig.nonfinite, fig.max_error) <= (scaled.nonfinite, scaled.max_error):
            base, base_fig, is_rewritten, scaled_err = rewritten, fig, True, errs
    every, every_err = run(base, frozenset(candidates))
    reachable = every.within(tolerance)
    allow = np.maximum(tolerance, np.minimum(scaled_err, every_err))

    def ok(keys: Sequence[str]) -> tuple[bool, GradFigures, np.ndarray]:
        fig, errs = run(base, frozenset(keys))
        if reachable:
            return fig.within(tolerance), fig, errs
        return bool(np.all(errs <= allow)), fig, errs

    good, fig, errs = ok(list(candidates))
    if not good:
        note = (f"no plan: with every line in {high.name} the gradient still misses the target and is worse "
                "than the program as written on some samples; nothing is kept high")
        return GradOutcome(base, is_rewritten, [], [], original, scaled, base_fig, False, tried, note)
    order = list(candidates)
    if 2 < len(order) <= _SCREEN_LIMIT:
        alone = {line: run(base, frozenset([line]))[0] for line in order}
        rank = {line: k for k, line in enumerate(order)}
        order.sort(key=lambda ln: (alone[ln].nonfinite, alone[ln].max_error, rank[ln]))
    chosen, (_, fig, errs) = fewest_lines(order, ok)
    backward: list[str] = []
    for line in list(chosen):
        if line not in with_backward:
            continue
        keys = [x for x in chosen if x != line] + [backward_key(b) for b in [*backward, line]]
        good, f, e = ok(keys)
        if good:
            chosen.remove(line)
            backward.append(line)
            fig, errs = f, e
    reached = fig.within(tolerance)
    # A sample on which the gradient misses the target even with every line in ``high`` is a limit of
    # ``high`` (a bit-pattern batch whose gradient cancels in float32 too), not of the plan: excused, as
    # the value plan excuses an element, when the plan is no worse there than ``high`` throughout and
    # within the target everywhere else. Counted and named, never hidden.
    beyond = every_err > tolerance
    excused = 0
    if not reached and fig.nonfinite == 0 and bool(np.all(errs[~beyond] <= tolerance)):
        excused = int(beyond.sum())  # the chosen keys passed ``ok``: no worse than ``high`` there
    if excused:
        reached = True
    if reached and is_rewritten:
        plain, plain_errs = run(grad_closed, frozenset([*chosen, *(backward_key(b) for b in backward)]))
        if plain.within(tolerance):
            base, is_rewritten, fig, errs, excused = grad_closed, False, plain, plain_errs, 0
    note = "" if reached else (f"even with every line in {high.name} the gradient misses the target on some "
                               "samples: the plan reaches what it can, never worse than the program as "
                               "written where that was within it")
    if excused:
        note = (f"{excused} of {smp.count} sample(s) excused: the gradient misses the target there even with "
                f"every line in {high.name}; the plan is no worse there, and within the target elsewhere")
    return GradOutcome(base, is_rewritten, chosen, backward, original, scaled, fig, reached, tried, note,
                       excused, errs)
