"""What a check will cost, said before it runs: the oracle budget and the long-check warning (issue 46).

A check's cost is the exact evaluation of every drawn input: ``oracle_cost`` (elements x equations, a
loop body once) per input. Where every equation has a rule on the oracle's fast path (``oracles.fast``:
float64 intervals over whole arrays) most of that runs vectorised, and the measured cost of a whole check
per scalar operation (oracle, its escalations, the conditioning, the draws; ``benchmarks/
bench_check_scale.py``) is about :data:`FAST_SECONDS`; otherwise every operation is an Arb ball in Python,
about :data:`ARB_SECONDS`. The ``oracle_budget`` option counts operations at the Arb path's price (its
unit since it was introduced): a fast-path program's operations count :data:`FAST_SHARE` of one. A case
over the budget fails before anything runs; one under it whose estimate passes :data:`LONG_SECONDS`
runs with a ``CheckWarning`` that gives the estimate and the ways to cut it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from .. import _compat
from .._primitives import CALLS
from ..oracles.fast import covers

__all__ = ["ARB_SECONDS", "FAST_SECONDS", "FAST_SHARE", "LONG_SECONDS", "Estimate", "estimate", "oracle_cost",
           "over_budget", "long_check"]

#: Seconds per scalar operation and input of a check on the Arb path alone (10-30 µs measured).
ARB_SECONDS = 15e-6
#: Seconds per scalar operation and input of a whole check whose program the fast path covers (0.2 µs
#: for a layer norm to 1.6 µs for a cross-entropy whose every row escalates, measured at (32, 1000)).
FAST_SECONDS = 1e-6
#: What one fast-path operation counts against ``oracle_budget`` (in Arb-path operations).
FAST_SHARE = FAST_SECONDS / ARB_SECONDS
#: Above this estimate a check that fits the budget still warns before it runs.
LONG_SECONDS = 60.0


class Estimate:
    """One case's estimate: operations per input, whether the fast path covers the program, and the
    budget's count and the seconds for ``examples`` inputs."""

    __slots__ = ("cost", "covered", "examples")

    def __init__(self, cost: int, covered: bool, examples: int) -> None:
        self.cost, self.covered, self.examples = cost, covered, examples

    @property
    def counted(self) -> float:
        """What the case counts against ``oracle_budget``."""
        return self.cost * self.examples * (FAST_SHARE if self.covered else 1.0)

    @property
    def seconds(self) -> float:
        return self.cost * self.examples * (FAST_SECONDS if self.covered else ARB_SECONDS)


def oracle_cost(closed: Any) -> int:
    """The estimated cost of one exact evaluation of a program, in scalar operations: the elements each
    equation reads or writes (the larger), summed over every equation, sub-programs included once
    (a loop body counts once, whatever its trip count)."""
    total = 0
    for _, eqn in _compat.walk(closed):
        if _compat.primitive_name(eqn) in CALLS:
            continue
        sizes = [math.prod(getattr(_compat.aval(v), "shape", ()) or ()) for v in (*eqn.invars, *eqn.outvars)]
        total += max(sizes, default=1)
    return max(total, 1)


def estimate(closed: Any, examples: int) -> Estimate:
    """The case's :class:`Estimate` for ``examples`` inputs."""
    try:
        covered = covers(closed)
    except Exception:  # an unfamiliar parameter layout: priced as the Arb path
        covered = False
    return Estimate(oracle_cost(closed), covered, int(examples))


def _ways(est: Estimate, shapes: Sequence[tuple[int, ...]], fit: int, judge: str) -> list[str]:
    shown = ", ".join(str(s) for s in shapes)
    ways = [f"smaller shapes (now {shown}: the cost grows with the number of elements)"]
    ways.append(f"fewer examples (max_examples={fit} fits)" if 0 < fit < est.examples else
                "fewer examples (not enough here: one example is already over the budget)" if fit < 1
                else "fewer examples")
    if judge == "stability":
        ways.append('judge="accuracy" (no conditioning to compute: the forward error alone)')
    return ways


def over_budget(case_id: str, est: Estimate, budget: float, shapes: Sequence[tuple[int, ...]],
                judge: str) -> str:
    """The message of a case whose estimate is over ``oracle_budget``."""
    per = est.counted / max(est.examples, 1)
    fit = int(budget // per) if per else est.examples
    ways = _ways(est, shapes, fit, judge)
    ways.append("a larger budget: oracle_budget= on jst.check / the marker / jaxstab.check, or "
                "--jaxstab-oracle-budget=N (none: no limit)")
    path = (f"the oracle's fast path covers the program: its operations count {FAST_SHARE:.2g} of one"
            if est.covered else "the exact oracle's ball arithmetic: ~10-30 µs each")
    return (f"{case_id}: the exact oracle would take about {est.counted:.3g} scalar operations "
            f"({est.cost:.3g} per input, elements x equations, x {est.examples} examples; {path}), over "
            f"the budget of {budget:.3g}: about {est.seconds / 60:.0f} minutes or more. Ways out: "
            + "; ".join(ways) + ".")


def long_check(case_id: str, est: Estimate, shapes: Sequence[tuple[int, ...]], judge: str) -> str | None:
    """The warning of a case that fits the budget but will take more than :data:`LONG_SECONDS`."""
    if est.seconds <= LONG_SECONDS:
        return None
    fit = max(1, int(LONG_SECONDS // max(est.seconds / max(est.examples, 1), 1e-9)))
    arb = "" if est.covered else (", on the exact ball arithmetic: the oracle's fast path does not cover "
                                  "every primitive of the program")
    return (f"{case_id}: this check will take about {est.seconds:.0f} s ({est.cost:.3g} scalar operations "
            f"per input x {est.examples} examples{arb}). To cut it: "
            + "; ".join(_ways(est, shapes, fit, judge)) + ".")
