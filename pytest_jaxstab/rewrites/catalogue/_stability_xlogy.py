"""Zero times log zero: ``t·log(p)``, ``t·log(t/p)``, ``t·(log t - log p)`` as ``xlogy``-style forms.

KL divergences, cross-entropies and entropies with probabilities or counts (one-hot or sparse
targets, a distribution with empty bins, a binary entropy at p = 0 or 1) multiply a factor that is
exactly 0 by a log whose argument is 0 there: ``0 · -inf`` is NaN, and a sum over the distribution is
NaN where its value is the limit 0. The rule ``xlogy`` (rooted at the product) rewrites the product
to ``forms/_xlogy.py``'s forms, which feed the log 1 exactly where both are 0 and are the program's
own expression elsewhere: same value, and a derivative that is finite where the program's was NaN.

It defers to the rules that fix the log itself: where another pattern rule of the catalogue matches
the log (``log(softmax)``, ``log(sigmoid)``, ``log(1 + exp)``, Φ's logs; ``log1p``'s ``log(1 - p)``
excepted, which this rule writes as ``log1p`` too), that rule's stable log is finite and the product
needs nothing; and to ``bregman``, whose Poisson deviance reads ``x·log(x/y)`` in its sum.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp

from ... import _compat
from ..engine._match import Graph
from ..engine._pattern import any_of, const, fixed, op, var
from ..engine._rule import Rule, registered
from ..forms import _xlogy as _fx

__all__ = ["XLOGY"]

ONE = const(1.0)
_X, _Y, _A, _B, _C = var("x"), var("y"), var("a"), var("b"), var("c")
_LOGS = frozenset({"log", "log1p"})


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
_LOG_1M = any_of(op("log", op("sub", ONE, var("m"), recompute=True)), op("log1p", op("neg", var("m"))))
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


# ---------------------------------------------------------------------------------------- the gate
def _producer(g: Graph, atom: Any) -> tuple[int, Any] | None:
    """``(index, equation)`` producing ``atom`` past glue (None for an input or a literal)."""
    for _ in range(16):
        prod = g.producer_eqn(atom)
        if prod is None or not g.is_glue(prod[1]):
            return prod
        atom = prod[1].invars[0]
    return None


def _logs_under(g: Graph, eqn: Any) -> list[int]:
    """The indices of the log/log1p equations the product's operands are (or hold under a neg/sub)."""
    found = []
    for a in eqn.invars:
        prod = _producer(g, a)
        if prod is None:
            continue
        name = _compat.primitive_name(prod[1])
        if name in _LOGS:
            found.append(prod[0])
        elif name in ("neg", "sub"):
            for b in prod[1].invars:
                inner = _producer(g, b)
                if inner is not None and _compat.primitive_name(inner[1]) in _LOGS:
                    found.append(inner[0])
    return found


def _other_log_rules() -> tuple[Rule, ...]:
    """The registered pattern rules rooted at a log (the catalogue registers its rules on import;
    read at call time, so this module imports nothing above it)."""
    return tuple(r for r in registered().values() if r.pattern is not None
                 and r.name not in ("xlogy", "log1p") and (r.root_primitives or frozenset()) & _LOGS)


_CACHE: list[tuple[Rule, ...]] = []


def _fixed_elsewhere(g: Graph, j: int) -> bool:
    """Another rule of the catalogue rewrites the log at ``j`` into a stable (finite) log."""
    if not _CACHE:
        _CACHE.append(_other_log_rules())
    prim = _compat.primitive_name(g.eqns[j])
    return any(prim in (r.root_primitives or ()) and r.find(g, j) is not None for r in _CACHE[0])


_SUMS = frozenset({"add", "sub", "neg", "mul", "div", "add_any"})


def _read_by_bregman(g: Graph, i: int) -> bool:
    """``bregman`` (which runs after the pattern rules) takes this product into a sum it rewrites:
    the Poisson deviance ``x·log(x/y) - x + y`` and its kin."""
    from ._stability_divergence import BREGMAN

    m = BREGMAN.find(g, i)  # a constant times a bracket is read as a sum too
    if m is not None and i in m.swallowed:
        return True
    frontier, seen = [i], set()
    for _ in range(8):
        consumers = []
        for k in frontier:
            outs = set(g.eqns[k].outvars)
            consumers += [n for n in range(k + 1, len(g.eqns)) if n not in seen
                          and any(v in outs for v in g.eqns[n].invars if not _compat.is_literal(v))]
        consumers = [n for n in dict.fromkeys(consumers)
                     if g.is_glue(g.eqns[n]) or _compat.primitive_name(g.eqns[n]) in _SUMS]
        for n in consumers:
            seen.add(n)
            if not g.is_glue(g.eqns[n]):
                m = BREGMAN.find(g, n)
                if m is not None and i in m.swallowed:
                    return True
        if not consumers:
            return False
        frontier = consumers
    return False


def _gate(g: Graph, i: int) -> bool:
    eqn = g.eqns[i]
    logs = _logs_under(g, eqn)
    # a constant factor is never 0 (and ``0.5·(r - 1 - log r)`` is a sum ``bregman`` reads)
    if not logs or any(_compat.is_literal(a) or g.head(a)[1] for a in eqn.invars):
        return False
    if not jnp.issubdtype(_compat.aval(eqn.outvars[0]).dtype, jnp.floating):
        return False
    return not any(_fixed_elsewhere(g, j) for j in logs) and not _read_by_bregman(g, i)


XLOGY = Rule(
    "xlogy", _PATTERN, _xlogy, gate=_gate,
    example=lambda t, p: t * jnp.log(p), example_shapes=((8,), (8,)), example_domain=(0.0, 1e4),
)
