"""The rigorous oracle: what a JAX program computes over the reals, correctly rounded, each value proven.

``evaluate`` interprets a function's jaxpr over **Arb balls** (``flint.arb`` from python-flint: a
midpoint and a radius, every operation returning a ball that provably contains the exact result) and
returns the exact results correctly rounded to a float dtype; ``error_bits`` measures a float result
against them in bits. Complex values are Arb complex balls (``flint.acb``, ``_complex``): each part is
rounded on its own and an element is certain when both parts are. Nothing here knows about pytest or
Hypothesis.

How escalation works (after Rival, Herbie's real evaluator). The jaxpr is evaluated at a working
precision of ``significand + 32`` bits (56 for float32, 85 for float64). An output element is *settled*
when both ends of its ball round to the same float of the target dtype: every real in the ball, the
exact result included, then rounds to it. The two zeros count as one value; ends beyond the largest
float round to +-inf; NaN is returned only where the exact result provably does not exist (the whole
ball is outside the function's real domain: ``sqrt`` of a ball entirely below 0, ``0/0``,
``inf - inf``). Unsettled elements are evaluated again at twice the precision, up to ``max_precision``
(default 4096 bits, enough for any cancellation between two float64 values, whose exponents span 2,098
bits). An elementwise program re-runs only its unsettled elements, as a vector of their own, so an
element's answer (value, certainty, settling precision) is the same in any batch or alone; other
programs re-run whole and only unsettled elements take the new results.

The fast path. Before any ball, the program runs once over float64 midpoint-radius intervals on whole
numpy arrays (``fast/``: every operation a rigorous enclosure), and every element whose interval
already rounds to one float is settled there (``precisions`` 53); only the rest escalate, and a
row-separable program (a layer norm, a log-sum-exp over the last axis) re-runs only the rows they are
in. ``OracleResult.decided_fast`` and ``escalated`` count the two; ``evaluate(..., fast=False)`` skips
it. Float64 results are settled there only where they are exact.

What "certain" means. ``certain`` is True exactly where the value is proven: the element's ball rounded
to that one float. False means undecided at ``max_precision`` (a cancellation deeper than the cap, or an
exact tie no finite precision resolves, such as ``exp(log(x)) - x > 0``); callers exclude those
elements from verdicts and count them. ``precisions`` says at which precision each element settled.

How control flow and other discontinuities are decided. Comparisons, ``is_finite`` and float -> int or
-> bool conversion return a definite answer only when the balls prove it (``a < b`` for every point of
both balls, or exact equality of exact balls); otherwise the pass raises ``Undecided`` and the affected
elements escalate. The index of ``cond``/``switch``, the predicate of ``while``, ``select_n``'s mask,
``argmax``/``argmin`` and ``sort``'s order and LU's pivot choice all come from such decisions, so a
branch is taken only when it is provably the exact program's branch, and at the cap the elements are
uncertain, never guessed. Continuous-valued jumps (``floor``, ``ceil``, ``round``, ``sign``, ``max``/
``min`` at ties, ``clamp``, ``rem``) return a ball covering every candidate, which the final rounding
refuses to settle until the ball shrinks to one side. A ``while`` loop that does not end with exact
values (``while x + eps != x``) becomes undecided once ``eps`` drops below the working precision, or
raises ``OracleError`` after ``MAX_WHILE_ITERATIONS`` iterations.

What the oracle evaluates is the mathematics the program stands for. A call to a known library routine
(``jax.scipy.special.log_ndtr``, ``ndtri``, the ``jax.nn`` activations, ...) is evaluated by its
definition, not by the approximation in its body (``library/``); users declare their own routines with
:func:`define`. ``jst.check`` also takes limits where a value is undefined and derivatives at JAX's
ties from the exact neighbours of the point (``interpreter/_limits``; docs/architecture.md, "The oracle").

What it covers. Beyond arithmetic, reductions, control flow and linear algebra (solves, LU, Cholesky;
eigenvalues and singular values, their vectors under a stated sign convention: ``linalg/``): complex
values (Arb's ``acb``; ``complex/``), the special functions of ``jax.lax`` (incomplete gamma and
beta, scaled Bessel, zeta, polygamma; ``primitives/_special``), convolutions, pooling and
``top_k``, PRNG keys and integer bit arithmetic (bound eagerly: JAX's own exact integer arithmetic;
``primitives/_random``), value-neutral effects such as ``jax.debug.print`` and one-device
``shard_map``/``pmap`` (``primitives/_effects``). Everything else is refused with a reason
(``REFUSED_PRIMITIVES``: the short ``REFUSED_NUMERIC`` list of numeric primitives, and the
``REFUSED_CATEGORIES`` of primitives with nothing numeric to judge), before any evaluation.

mpmath keeps two roles: ``OracleResult.exact`` hands out the exact values as ``mpmath.mpf`` (the
midpoint of each final ball), and the test suite checks the oracle against mpmath at 6000 bits.

Example:
  >>> import numpy as np
  >>> from pytest_jaxstab import oracles
  >>> x = np.float32(1e8)
  >>> result = oracles.evaluate(lambda x: (x + 1) - x, x)  # float32 itself gives 0.0
  >>> result.values, bool(result.certain)
  (array(1., dtype=float32), True)
  >>> round(float(oracles.error_bits(np.float32(0.0), result.values)), 2)  # the floats between 0 and 1
  29.99
"""

from .core._common import OracleError as OracleError
from .core._common import UnsupportedPrimitive as UnsupportedPrimitive
from .core._metrics import error_bits as error_bits
from .core._metrics import ordinals as ordinals
from .core._metrics import summarize as summarize
from .core._rounding import round_to_dtype as round_to_dtype
from .core._rounding import to_mpf_array as to_mpf_array
from .interpreter._evaluate import DEFAULT_MAX_PRECISION as DEFAULT_MAX_PRECISION
from .interpreter._evaluate import OracleResult as OracleResult
from .interpreter._evaluate import evaluate as evaluate
from .interpreter._interpreter import MAX_WHILE_ITERATIONS as MAX_WHILE_ITERATIONS
from .interpreter._interpreter import SUPPORTED_PRIMITIVES as SUPPORTED_PRIMITIVES
from .library._define import define as define
from .primitives._refusals import REFUSED_CATEGORIES as REFUSED_CATEGORIES
from .primitives._refusals import REFUSED_NUMERIC as REFUSED_NUMERIC
from .primitives._refusals import REFUSED_PRIMITIVES as REFUSED_PRIMITIVES

__all__ = [
    "DEFAULT_MAX_PRECISION",
    "MAX_WHILE_ITERATIONS",
    "SUPPORTED_PRIMITIVES",
    "OracleError",
    "OracleResult",
    "REFUSED_CATEGORIES",
    "REFUSED_NUMERIC",
    "REFUSED_PRIMITIVES",
    "UnsupportedPrimitive",
    "define",
    "error_bits",
    "evaluate",
    "ordinals",
    "round_to_dtype",
    "summarize",
    "to_mpf_array",
]


def __dir__() -> list[str]:
    return sorted(__all__)
