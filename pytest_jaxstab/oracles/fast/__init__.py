"""The oracle's fast path: the program once over float64 midpoint-radius intervals, before any Arb ball.

Rival, Herbie's sampler, starts cheap and escalates; so does ``oracles.evaluate``. This stage walks the
jaxpr once over whole numpy arrays of intervals (``_interval``: a float64 midpoint and a radius rounded
upward; every primitive a rigorous enclosure: correctly rounded IEEE operations bounded by their exact
rounding error, library functions by a generous relative error, sums and products by Higham's
``gamma_n``), and decides each output element whose interval rounds to one float of the target dtype
(``_decide``, the conventions of ``core/_balls.round_balls``). Only the elements it cannot decide go to
the Arb escalation (``interpreter/_evaluate``). Nothing it decides can be wrong: an element is decided
only when every real in its enclosure rounds to that float.

``_interval`` (the numbers and their arithmetic), ``_elementwise`` (elementwise primitives, decisions,
casts), ``_arrays`` (reductions, ``dot_general``, structural primitives through the Arb path's own
rules), ``_walk`` (the walk; None for a program it does not cover), ``_decide`` (rounding to the
target). See docs/architecture.md, "The oracle".
"""

from ._decide import decide as decide
from ._interval import Exact as Exact
from ._interval import Interval as Interval
from ._walk import Tape as Tape
from ._walk import covers as covers
from ._walk import enclose as enclose
from ._walk import run as run

#: The precision the fast path works at, in bits (float64's significand): what ``precisions`` reports
#: for the elements it decides.
FAST_PRECISION = 53

__all__ = ["FAST_PRECISION", "Exact", "Interval", "Tape", "covers", "decide", "enclose", "run"]
