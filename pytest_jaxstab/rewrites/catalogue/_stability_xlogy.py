"""Zero times log zero: ``t·log(p)``, ``t·log(t/p)``, ``t·(log t - log p)`` as ``xlogy``-style forms.

KL divergences, cross-entropies and entropies with probabilities or counts (one-hot or sparse
targets, a distribution with empty bins, a binary entropy at p = 0 or 1) multiply a factor that is
exactly 0 by a log whose argument is 0 there: ``0 · -inf`` is NaN, and a sum over the distribution is
NaN where its value is the limit 0. The rule ``xlogy`` (rooted at the product) rewrites the product
to ``forms/_xlogy.py``'s forms, which feed the log 1 exactly where both are 0 and are the program's
own expression elsewhere: same value, and a derivative that is finite where the program's was NaN.

It is a structural rule (``Rule(matcher=...)``): it runs after the pattern rules, so a log that
another rule fixes (``log(softmax)``, ``log(sigmoid)``, ``log(1 + exp)``, Φ's logs) is that rule's
final, finite equations by then, which the pattern does not read; ``log1p``'s ``log1p(-p)`` is read
and rewritten here too. ``bregman`` (structural, earlier in the catalogue's order, and rooted at the
sum, which the pass visits first) takes the products of sums it rewrites (the Poisson deviance reads
``x·log(x/y)``) before this rule sees them. A product inside a ``where`` is read after
``guarded_where``/``masked_where`` re-bound the branch (both composable). A constant factor is a
product's factor where it is 0 somewhere: log-densities with a closed-over shape compute
``(k - 1)·log(x)`` from constants (chi² with two degrees of freedom, a gamma of shape 1, a
``Beta(1, b)``), and ``0·log 0`` at the support's edge is NaN where the density's limit is finite
(``engine/_fold`` gives the value the program computes).
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np

from ... import _compat
from ..engine import _fold
from ..engine._guards import scalar_constant
from ..engine._match import Graph, Match, match_root
from ..engine._pattern import any_of, const, fixed, op, var
from ..engine._rule import Rule
from ..forms import _xlogy as _fx
from ._stability_written import _named

__all__ = ["EXP_XLOGY", "XLOGY"]

ONE = const(1.0)
_X, _Y, _A, _B, _C = var("x"), var("y"), var("a"), var("b"), var("c")


def _xlogy(x: Any, y: Any = None, m: Any = None, a: Any = None, b: Any = None, c: Any = None,
           kind: str = "log", sign: float = 1.0) -> Any:
    """x·log(y) = xlogy(x, y);  x·log(1 - m) = x·log1p(-m) = xlog1py(x, -m);  x·log(a/b);
    x·(log a - log b), x·(log a - c) and their negatives; -(x·log y): each 0 where x and the log's
    argument are 0 (the limit along x = 0; written, 0·log 0 is NaN), the written value elsewhere."""
    if kind == "log":
        return sign * _fx.xlogy(x, y)
    if kind == "log1m":
        return sign * _fx.xlog1py(x, -m)
    if kind == "ratio":
        return _fx.xlog_ratio(x, a, b)
    return _fx.xlogy_difference(x, a, b=b, c=c, sign=sign)


_LOG_Y = op("log", _Y)
# ``log1p``'s own result, final by the structural phase, is read (``recompute``) and rewritten here
_LOG_1M = any_of(op("log", op("sub", ONE, var("m"), recompute=True)),
                 op("log1p", op("neg", var("m"), recompute=True), recompute=True))
_LOG_A, _LOG_B = op("log", _A), op("log", _B)
# the specific spellings first: ``log(1 - m)`` and ``log(a / b)`` are also logs of a ``y``
_PATTERN = any_of(
    fixed(op("mul", _X, _LOG_1M), kind="log1m"),
    fixed(op("mul", _X, op("log", op("div", _A, _B))), kind="ratio"),
    fixed(op("mul", _X, op("sub", _LOG_A, _LOG_B)), kind="diff"),
    fixed(op("mul", _X, op("sub", _LOG_A, _C)), kind="diff"),
    fixed(op("mul", _X, op("sub", _C, _LOG_A)), kind="diff", sign=-1.0),
    fixed(op("mul", _X, _LOG_Y), kind="log"),
    fixed(op("mul", _X, op("neg", _LOG_Y)), kind="log", sign=-1.0),
)


# ------------------------------------------------------------------------------------- the matcher
_FACTORS = frozenset({"log", "log1p", "neg", "sub"})


def _match(g: Graph, i: int) -> Match | None:
    """The pattern at the product ``i``, in the structural phase (after the pattern rules): a log
    another rule fixed is that rule's final equations by now, which the pattern does not read (its
    stable log is finite: the product needs nothing); ``log1p(-m)`` is read where the ``log1p``
    rule wrote it (``recompute``). A constant factor with no zero element is refused (it is never
    0·log 0, and ``0.5·(r - 1 - log r)`` is a sum ``bregman`` reads); a constant that is 0 somewhere,
    as the program computes it from constants (``jnp.full_like(y, df) / 2 - 1`` at ``df = 2``:
    chi²'s kernel with two degrees of freedom, ``_fold``), is the factor of an ``xlogy``."""
    eqn = g.eqns[i]
    # the cheap look first: every spelling's second factor is a log, log1p, its negation or a
    # difference (``_PATTERN``), which most products (``x * 1.01``) do not have
    if len(eqn.invars) != 2 or not any(g.head(a)[0] in _FACTORS for a in eqn.invars):
        return None
    if any(_never_zero_constant(g, a) for a in eqn.invars):
        return None
    if not jnp.issubdtype(_compat.aval(eqn.outvars[0]).dtype, jnp.floating):
        return None
    m = next(iter(match_root(g, _PATTERN, i)), None)
    if m is None or _log_never_zero(g, m):
        return None
    return m


def _never_zero_constant(g: Graph, atom: Any) -> bool:
    """A constant operand (a literal, a constant of the program, or computed from constants alone)
    that is not 0 anywhere, or whose value the pass cannot fold."""
    if _compat.is_literal(atom):  # most constant factors (``0.5 * x``): no fold needed
        value = _compat.literal_value(atom)
        try:
            return float(value) != 0  # a scalar, read without building an array
        except TypeError:
            return not bool(np.any(np.asarray(value) == 0))
    if not g.head(atom)[1]:
        return False
    value = _fold.constant(g, atom)
    return value is None or not bool(np.any(value == 0))


def _log_never_zero(g: Graph, m: Match) -> bool:
    """The log's argument is positive wherever it is computed (``log(x*x + 2)``): the product is never
    0·log 0, and the guard would only cost (and hide the program from the search's term language)."""
    caps = m.atoms
    kind = m.captures.get("kind")
    if kind == "log":
        return _positive(g, caps["y"])
    if kind == "ratio":
        return _positive(g, caps["a"])
    if kind == "diff":
        return _positive(g, caps["a"]) and ("b" not in caps or _positive(g, caps["b"]))
    return False


def _positive(g: Graph, atom: Any, depth: int = 4) -> bool:
    """> 0 wherever it is computed, by its producers alone (a positive constant, a sum of a positive
    and a nonnegative term, products and quotients of positives, their square roots)."""
    c = scalar_constant(g, atom)
    if c is not None:
        return c > 0
    prod = g.producer_past_glue(atom)
    if prod is None or depth == 0:
        return False
    name, args = _compat.primitive_name(prod), prod.invars
    if name == "add":
        return ((_positive(g, args[0], depth - 1) and _nonnegative(g, args[1], depth - 1))
                or (_nonnegative(g, args[0], depth - 1) and _positive(g, args[1], depth - 1)))
    if name in ("mul", "div"):
        return all(_positive(g, a, depth - 1) for a in args)
    if name == "sqrt":
        return _positive(g, args[0], depth - 1)
    if name == "custom_jvp_call" and _named("hypot")(prod.params.get("call_jaxpr")):
        # forms.hypot(x, c), c > 0: what hypot_constant makes of sqrt(x² + c)
        return any(_positive(g, a, depth - 1) for a in args)
    return False


def _nonnegative(g: Graph, atom: Any, depth: int) -> bool:
    c = scalar_constant(g, atom)
    if c is not None:
        return c >= 0
    prod = g.producer_past_glue(atom)
    if prod is None or depth == 0:
        return False
    name, args = _compat.primitive_name(prod), prod.invars
    if name in ("abs", "exp", "sqrt", "square"):
        return True
    if name == "integer_pow":
        return prod.params.get("y", 1) % 2 == 0
    if name == "mul" and len(args) == 2 and args[0] is args[1]:
        return True
    if name in ("add", "mul"):
        return all(_nonnegative(g, a, depth - 1) for a in args)
    return _positive(g, atom, depth)


XLOGY = Rule(
    # the pattern is what the matcher matches: jst.verify_rule spells out its alternatives
    "xlogy", _PATTERN, _xlogy, matcher=_match, roots=frozenset({"mul"}),
    example=lambda t, p: t * jnp.log(p), example_shapes=((8,), (8,)), example_domain=(0.0, 1e4),
)


def _exp_xlogy(a: Any, b: Any) -> Any:
    """exp(a)·(a - b) = t·log(t/p) for a = log t, b = log p: 0 where a = -inf (t = 0; written,
    0·-inf is NaN), the written product elsewhere."""
    return _fx.exp_times_difference(a, b)


_EXP_A = op("exp", _A)
# The KL divergence with log targets, exp(log t)·(log t - log p): a pattern rule (no log to wait for)
EXP_XLOGY = Rule(
    "exp_xlogy", any_of(op("mul", _EXP_A, op("sub", _A, _B)), op("mul", op("sub", _A, _B), _EXP_A)),
    _exp_xlogy, where=lambda m: all(jnp.issubdtype(m.aval(n).dtype, jnp.floating) for n in ("a", "b")),
    example=lambda a, b: jnp.exp(a) * (a - b), example_shapes=((8,), (8,)), example_domain=(-80.0, 80.0),
)
