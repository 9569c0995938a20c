"""The mixed pass: the Arb escalation of what the fast path left, recomputing only what it must.

When the fast walk (``oracles/fast``) leaves some output elements of a program that is not elementwise
undecided, the whole-program escalation (``_evaluate``) recomputes every element of their rows (or of
the program) in Arb object arithmetic, about a microsecond per element and operation, at each
precision. Mostly a few intermediates cancel or overflow float64 (``1 - sigmoid(z)`` for ``z > 37``,
``1 + tanh(v)`` in a tanh-gelu's tail, ``log`` of an underflowed ``exp``) while the fast walk enclosed
the rest tightly. This pass runs at the same precisions; at each:

1. the demand (``_demand``): the elements the pending outputs read, and of those the ones to recompute
   in Arb: not tight in the fast walk (nor a tight ball of an earlier pass), or demanded accurate;
2. the walk (``_walker``): the tight elements are taken from their intervals as balls (``arb(mid,
   rad)``: a rigorous enclosure of a rigorous enclosure) or from the earlier ball; the others are
   computed by the Arb path's own rules from their operands' balls, each distinct computation once;
3. the pending outputs are rounded as any pass's are (``_Outputs.update_one``).

Soundness: every ball of the walk encloses the exact value of its element (each source does, and the
Arb rules preserve enclosure), so a ball that rounds to one float proves it, as in any pass; an element
is computed only from elements given a ball this pass; a missing one makes what reads it missing,
never a value. An element's ball depends only on its own dependencies' fast enclosures and balls, so
what is decided does not depend on what else is in the batch.

When fast widths stop a decision. A ball is *tainted* where it leans on an inexact fast enclosure
(not where it is non-finite because an untainted operand already was: precision is what that needs).
An output element still undecided, tainted or missing, whose radius did not shrink by
:data:`NARROWING` since the previous pass (the precision doubled) leaves the mixed pass. After it the
whole-program escalation runs as before for whatever is undecided, unless all of it is untainted
elements at the last precision: the whole program would compute their balls from the same exact
inputs by the same rules, no narrower.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np
from flint import ctx as flint_ctx

from ..fast import Tape
from ._demand import Analysis, plan
from ._walker import Walker

__all__ = ["NARROWING", "STRICT", "Mixed", "escalate_mixed"]

#: Raise the mixed pass's own errors instead of handing the pass to the whole program (tests set it).
STRICT = False
#: An undecided, tainted output element whose ball's radius shrank by less than this factor from one
#: pass to the next (the working precision doubled) is held back by fast enclosures: it leaves the pass.
NARROWING = 2.0 ** -8


@dataclasses.dataclass
class Mixed:
    """What the mixed pass did: the last precision it used, whether the whole-program escalation must
    still run (``leftover``), how many output elements it decided, and how many element operations it
    computed in Arb (an elementwise result 1, a reduced or dot-product result its number of terms;
    each distinct computation once)."""

    last: int
    leftover: bool
    decided: int = 0
    operations: int = 0


def escalate_mixed(closed: Any, tape: Tape, flat_args: Sequence[Any], state: Any, precs: list[int],
                   tight_bits: int) -> Mixed:
    """Runs the mixed pass at the precisions ``precs`` over ``state`` (``_evaluate._Outputs``), whose
    undecided elements the fast walk ``tape`` of ``closed`` on ``flat_args`` left; a fast enclosure is
    tight with a relative radius of at most ``2^-tight_bits``. Arb's working precision is restored."""
    saved = flint_ctx.prec
    analysis = Analysis(tight_bits)
    walker = Walker(analysis, closed, flat_args)
    before = sum(int(d.sum()) for d in state.decided)
    active = [~d for d in state.decided]
    flagged = [np.zeros(d.shape, dtype=bool) for d in state.decided]
    previous = [np.full(d.shape, np.nan) for d in state.decided]
    last = precs[0]
    try:
        for prec in precs:
            need = [a & ~d for a, d in zip(active, state.decided)]
            if not any(n.any() for n in need):
                break
            last = walker.prec = flint_ctx.prec = prec
            demand = plan(analysis, closed, tape, need, walker.interp)
            outs = walker.run(demand, walker.inputs(demand))
            for i, (held, n) in enumerate(zip(outs, need)):
                missing = np.broadcast_to(held.missing, n.shape)
                where = np.flatnonzero(n & ~missing)
                state.update_one(i, np.broadcast_to(held.values, n.shape).reshape(-1)[where], prec, where)
                pending = n & ~state.decided[i]
                flag = (np.broadcast_to(held.taint, n.shape) | missing) & pending
                radius = _radii(state.balls[i], pending & ~missing)
                stuck = flag & ~np.isnan(previous[i]) & ~(radius <= previous[i] * NARROWING)
                active[i] = active[i] & ~stuck
                previous[i] = np.where(pending, radius, np.nan)
                flagged[i] = flag
        leftover = any((~d & (~a | f)).any() for d, a, f in zip(state.decided, active, flagged))
    except Exception:  # a gap of the mixed pass must never cost a result: the whole program takes over
        if STRICT:
            raise
        leftover = True
    finally:
        flint_ctx.prec = saved
    return Mixed(last, leftover, sum(int(d.sum()) for d in state.decided) - before, walker.operations)


def _radii(balls: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The radii of the balls at ``mask`` as floats (inf for a non-finite one, and off the mask)."""
    out = np.full(mask.shape, np.inf)
    flat, at = balls.reshape(-1), np.flatnonzero(mask)
    out.reshape(-1)[at] = [float(b.rad()) if b is not None and b.is_finite() else np.inf for b in flat[at]]
    return out
