"""Equality saturation with egglog, and the e-graph read back as plain data for extraction.

The term language is declared once for egglog (``_Num`` and one function per operator of ``_expr.OPS``);
:data:`~pytest_jaxstab._search._rules.RULES` become egglog rewrites, plus constant folding of ``+ - *``
on constants. :func:`saturate` runs the rules one iteration at a time under node, iteration and time
limits, then serializes the e-graph into :class:`EGraphData` (classes of nodes), which
``_extract`` searches. Nothing from inside egglog escapes: any failure there is :class:`SaturationError`.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from typing import Any

import egglog

from ._expr import OPS, Table, Term, subterms
from ._rules import RULES, Rule, rules_for

__all__ = ["BASE_FAMILIES", "KIND_FAMILIES", "EGraphData", "SaturationError", "SaturationStats",
           "families_by_kind", "families_for", "saturate"]


class SaturationError(Exception):
    """egglog failed (a bug or a limit inside it); ``improve`` reports it as a search that found nothing."""


class _Num(egglog.Expr):
    def __init__(self, value: egglog.f64Like) -> None: ...

    @classmethod
    def var(cls, index: egglog.i64Like) -> _Num: ...


class _Root(egglog.Expr):
    def __init__(self, term: _Num) -> None: ...


def _declare(name: str, arity: int) -> Any:
    # egglog reads the Python signature's annotations to type the function.
    if arity == 1:
        def f1(a: _Num) -> _Num: ...
        fn: Any = f1
    elif arity == 2:
        def f2(a: _Num, b: _Num) -> _Num: ...
        fn = f2
    else:
        def f3(a: _Num, b: _Num, c: _Num) -> _Num: ...
        fn = f3
    fn.__name__ = fn.__qualname__ = f"op_{name}"
    return egglog.function(egg_fn=f"op_{name}")(fn)


_FUNCS: dict[str, Any] = {name: _declare(name, op.arity) for name, op in OPS.items()}


def _func(kind: str) -> Any:
    """The egglog function of operator ``kind`` (a reduction's is declared on first use)."""
    hit = _FUNCS.get(kind)
    if hit is None:
        hit = _FUNCS[kind] = _declare(kind, 1)
    return hit


#: Rule families used only when the searched expression has one of these operators (the others are
#: always on): fewer rules, a smaller e-graph per second, so several-argument losses saturate further.
_TRIGGERS: dict[str, frozenset[str]] = {
    "trigonometric": frozenset({"sin", "cos", "tan", "atan", "asin", "acos", "atan2"}),
    "hyperbolic": frozenset({"sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "exp"}),
    "sqrt-cbrt": frozenset({"sqrt", "cbrt", "pow", "hypot"}),
    "exp-log": frozenset({"exp", "log", "expm1", "log1p", "pow", "logaddexp", "softplus", "logistic",
                          "xlogy", "xlog1py"}),
    "exp-scaling": frozenset({"exp", "div"}),
    "logistic-softplus": frozenset({"logistic", "softplus", "logaddexp"}),
    "special": frozenset({"xlogy", "xlog1py", "erf", "erfc", "lgamma", "log_ndtr", "erf_inv", "digamma",
                          "ndtr", "ndtri", "i0", "i1", "i0e", "i1e", "gammainc", "gammaincc", "betainc"}),
    "piecewise": frozenset({"max", "min", "sign", "abs", "where"}),
}


def families_for(term: Term) -> frozenset[str]:
    """The rule families worth saturating ``term`` with: the always-on ones and those its operators
    trigger (``logistic-softplus`` also when it takes the log of an exp-based ratio)."""
    ops = {t[0] for t in subterms(term)}
    chosen = {r.family for r in RULES if r.family not in _TRIGGERS}
    chosen |= {fam for fam, trig in _TRIGGERS.items() if ops & trig}
    if {"exp", "log"} <= ops or {"exp", "log1p"} <= ops:
        chosen.add("logistic-softplus")
    return frozenset(chosen)


#: The rule families that address each kind of loss ``jst.local_error`` reports (``_local_error.KINDS``),
#: the most direct first. A cancellation is removed by an identity that does the subtraction exactly or
#: not at all (``expm1``/``log1p``, difference of squares, conjugates, half-angle and sum-to-product
#: forms, ``softplus(a) - softplus(-a) = a``, ``erfc`` for ``1 - erf``); an absorption by the same forms
#: that keep a small term apart; an overflow or underflow by scaling (``x / exp(a) = x exp(-a)``,
#: ``exp(a)**2 = exp(2a)``, Smith's division), log space (``log(ab) = log a + log b``, ``log1pexp``,
#: ``log_ndtr``) and ``hypot``; a function near its pole or zero by moving the subtraction out of its
#: argument (``log(1 + a) = log1p(a)``, ``1 - cos``, ``tan`` of half angles); a routine that misses its
#: mathematics by the special-function identities. The reduction identities (log-sum-exp, scaled norms,
#: log of products) are always on: they are few, and chosen by the reductions present.
KIND_FAMILIES: dict[str, tuple[str, ...]] = {
    "cancellation": ("exp-log", "squares-cubes", "sqrt-cbrt", "fractions", "trigonometric", "hyperbolic",
                     "logistic-softplus", "special"),
    "absorption": ("exp-log", "logistic-softplus", "fractions", "squares-cubes", "sqrt-cbrt"),
    "overflow": ("exp-scaling", "exp-log", "logistic-softplus", "sqrt-cbrt", "pow", "special"),
    "underflow": ("exp-scaling", "exp-log", "logistic-softplus", "pow", "special"),
    "near pole/zero": ("exp-log", "fractions", "trigonometric", "hyperbolic", "sqrt-cbrt", "special"),
    "approximation": ("special", "exp-log"),
}
#: Families every phase keeps: the algebra that lets the others' left sides match a written form.
BASE_FAMILIES = frozenset({"commutativity", "associativity", "distributivity", "identities"})


def families_by_kind(term: Term, kinds: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    """Per kind of loss in ``kinds`` (the local error's, worst first), the families of
    :data:`KIND_FAMILIES` worth saturating ``term`` with: those its operators can use
    (:func:`families_for`), in the kind's order. Kinds with no family of their own (``rounding``) and
    kinds whose families the operators rule out are left out.

    >>> from pytest_jaxstab._search._rules import parse
    >>> families_by_kind(parse("(sub (exp (mul 2 a)) (exp b))"), ("overflow",))["overflow"][:2]
    ('exp-scaling', 'exp-log')
    """
    usable = families_for(term)
    out: dict[str, tuple[str, ...]] = {}
    for kind in dict.fromkeys(kinds):
        chosen = tuple(f for f in KIND_FAMILIES.get(kind, ()) if f in usable)
        if chosen:
            out[kind] = chosen
    return out


#: An array constant (``_expr.Table``) enters egglog as an input numbered from here (its j-th as
#: ``_TABLE_BASE + j``): an opaque leaf no rule folds or merges with a number, read back as the constant.
_TABLE_BASE = 1 << 40


def _tables(term: Term) -> list[Table]:
    """The array constants of ``term``, in a fixed order (their egglog leaves' numbering)."""
    return list(dict.fromkeys(t[1] for t in subterms(term) if t[0] == "const" and isinstance(t[1], Table)))


def _to_egg(term: Term, pvars: dict[str, Any] | None = None, tables: list[Table] | None = None) -> Any:
    kind = term[0]
    if kind == "var":
        return _Num.var(int(term[1]))
    if kind == "const":
        if isinstance(term[1], Table):
            assert tables is not None
            return _Num.var(_TABLE_BASE + tables.index(term[1]))
        return _Num(float(term[1]))
    if kind == "pvar":
        assert pvars is not None
        return pvars[term[1]]
    return _func(kind)(*(_to_egg(c, pvars, tables) for c in term[1:]))


def _ruleset(rules: tuple[Rule, ...]) -> Any:
    pv = {n: egglog.var(n, _Num) for n in "abcd"}
    x, y = egglog.var("x", egglog.f64), egglog.var("y", egglog.f64)
    rewrites = []
    for r in rules:
        # A cancellation by a factor that is 0 would merge 0/0 with everything: the divisor must not be
        # known to be 0 (Herbie's e-graph keeps such rules out for the same reason).
        guard = [egglog.ne(_to_egg(d, pv)).to(_Num(0.0)) for d in _denominators(r)]
        rewrites.append(egglog.rewrite(_to_egg(r.lhs, pv)).to(_to_egg(r.rhs, pv), *guard))
    rewrites += [
        egglog.rewrite(_FUNCS["add"](_Num(x), _Num(y))).to(_Num(x + y)),
        egglog.rewrite(_FUNCS["sub"](_Num(x), _Num(y))).to(_Num(x - y)),
        egglog.rewrite(_FUNCS["mul"](_Num(x), _Num(y))).to(_Num(x * y)),
        egglog.rewrite(_FUNCS["neg"](_Num(x))).to(_Num(-x)),
    ]
    global _NAMES
    _NAMES += 1
    return egglog.ruleset(*rewrites, name=f"jaxstab_real_identities_{_NAMES}")


_NAMES = 0
_CACHE: dict[tuple[Rule, ...], Any] = {}


def _cached_ruleset(rules: tuple[Rule, ...]) -> Any:
    hit = _CACHE.get(rules)
    if hit is None:
        if len(_CACHE) > 256:
            _CACHE.clear()
        hit = _CACHE[rules] = _ruleset(rules)
    return hit


def _unguarded(rule: Rule) -> bool:
    """Whether the right side divides by a compound term the left side does not have."""
    left = set(subterms(rule.lhs))
    return any(t[0] == "div" and t[2][0] not in ("pvar", "const") and t[2] not in left
               for t in subterms(rule.rhs))


def _denominators(rule: Rule) -> list[Term]:
    """The divisors of ``rule`` that must not be known to be 0: every one on the left side, and the
    pattern variables the right side divides by. (A compound divisor only on the right side does not
    exist in the e-graph before the rule fires, so it cannot be tested; the consistency check after
    each iteration covers those.)"""
    out: list[Term] = []
    for side in (rule.lhs, rule.rhs):
        for t in subterms(side):
            d = t[2] if t[0] == "div" else None
            if d is None or (d[0] == "const" and d[1] != 0) or d in out:
                continue
            if side is rule.lhs or d[0] == "pvar":
                out.append(d)
    return out


@dataclasses.dataclass
class EGraphData:
    """The saturated e-graph as data: ``classes[c]`` lists the nodes ``(op, child classes)`` of class ``c``.

    A node's op is an ``OPS`` name, ``"var"`` (payload: the input index) or ``"const"`` (payload: the
    value), stored as ``(op, payload_or_children)``.
    """

    classes: dict[str, list[tuple[str, tuple[Any, ...]]]]
    root: str


@dataclasses.dataclass
class SaturationStats:
    """What the saturation did: iterations run, e-nodes at the end, seconds, and why it stopped."""

    iterations: int = 0
    nodes: int = 0
    seconds: float = 0.0
    stopped: str = "saturated"


def saturate(term: Term, *, node_limit: int, iter_limit: int, time_limit: float, match_limit: int = 2000,
             families: frozenset[str] | None = None, counts: dict[str, int] | None = None,
             ) -> tuple[EGraphData, SaturationStats]:
    """Saturate ``term`` under the limits; the e-graph read back and what happened.

    The rules are :data:`RULES` of ``families`` (default: :func:`families_for` the term) plus the
    reduction identities for the term's axes, run by egglog's backoff scheduler one iteration at a
    time. An iteration that merges two different constants or inputs is rolled back. The usual cause is
    a rule that divides by a term its left side does not have (``flip-sub`` turns ``x - (-x)`` into
    ``0 / 0``), whose damage is done iterations before the merge shows: saturation then starts again
    without those rules, and the e-graph that got further is kept.

    Raises:
        SaturationError: egglog failed.
    """
    t0 = time.perf_counter()
    chosen = families_for(term) if families is None else families
    active = tuple(r for r in RULES if r.family in chosen) + rules_for(term, counts)
    try:
        data, stats = _phase(term, active, node_limit, iter_limit, t0 + time_limit, match_limit)
        if stats.stopped.startswith("inconsistent") and time.perf_counter() < t0 + time_limit:
            safe = tuple(r for r in active if not _unguarded(r))
            data2, stats2 = _phase(term, safe, node_limit, iter_limit, t0 + time_limit, match_limit)
            stats2.stopped += " (restarted without the rules that divide by a new term)"
            if stats2.iterations >= stats.iterations:
                data, stats = data2, stats2
    except Exception as exc:  # egglog's own errors have no common base class
        raise SaturationError(f"egglog failed: {type(exc).__name__}: {exc}") from None
    stats.seconds = time.perf_counter() - t0
    return data, stats


def _phase(term: Term, rules: tuple[Rule, ...], node_limit: int, iter_limit: int, deadline: float,
           match_limit: int) -> tuple[EGraphData, SaturationStats]:
    stats = SaturationStats()
    eg = egglog.EGraph()
    # The divisor guards compare with the class of 0, and an egglog guard only holds for terms in the
    # e-graph: without a 0 there, no rule that divides would ever fire.
    tables = _tables(term)
    eg.register(_Root(_to_egg(term, tables=tables)), _Num(0.0))
    data = _read(eg, tables)
    ruleset = _cached_ruleset(rules)
    schedule = egglog.back_off(match_limit=match_limit)
    while True:
        if stats.iterations >= iter_limit:
            stats.stopped = "iteration limit"
            break
        if time.perf_counter() > deadline:
            stats.stopped = "time limit"
            break
        eg.push()
        report = eg.run(egglog.run(ruleset, scheduler=schedule))
        new = _read(eg, tables)
        if not _consistent(new):
            eg.pop()
            stats.stopped = "inconsistent merge (rolled back one iteration)"
            break
        stats.iterations += 1
        data = new
        before, stats.nodes = stats.nodes, sum(len(v) for v in data.classes.values())
        if not report.updated:
            stats.stopped = "saturated"
            break
        if stats.nodes > node_limit:
            stats.stopped = "node limit"
            break
        # One iteration cannot be interrupted: when growing at this rate the next would end far past
        # the node limit (seconds of egglog on a 40,000-node e-graph), stop now.
        if before and stats.nodes * stats.nodes / before > 4 * node_limit:
            stats.stopped = "node limit (the next iteration would pass it fourfold)"
            break
    return data, stats


def _consistent(data: EGraphData) -> bool:
    """No class holds two different constants, two inputs, or an input and a constant."""
    for nodes in data.classes.values():
        leaves = {(op, payload) for op, payload in nodes if op in ("var", "const")}
        if len(leaves) > 1 and not _roundings(leaves):
            return False
    return True


def _roundings(leaves: set[tuple[str, tuple[Any, ...]]]) -> bool:
    """Constants that differ only by the rounding of folding ``+ - *`` in floats (``0.1 - (0.2 - 0.3)``
    and ``(0.1 - 0.2) + 0.3``): one real number, not an inconsistency."""
    if any(op != "const" or isinstance(p[0], Table) for op, p in leaves):
        return False
    values = [float(p[0]) for _, p in leaves]
    lo, hi = min(values), max(values)
    return math.isclose(lo, hi, rel_tol=1e-12, abs_tol=1e-300)


def _read(eg: Any, tables: list[Table]) -> EGraphData:
    raw = json.loads(eg._serialize(max_calls_per_function=None).to_json())
    nodes = raw["nodes"]
    classes: dict[str, list[tuple[str, tuple[Any, ...]]]] = {}
    root = None
    for node in nodes.values():
        op, cls = node["op"], node["eclass"]
        children = [nodes[c] for c in node["children"]]
        if op == "_Root" or op.endswith("_Root"):
            root = children[0]["eclass"]
            continue
        if not cls.endswith(tuple(f"Num-{i}" for i in range(10))) and "Num-" not in cls:
            continue  # primitive payloads (f64, i64) are read with their parent
        if op.endswith("Num.var"):
            index = int(children[0]["op"])
            entry: tuple[str, tuple[Any, ...]] = (("const", (tables[index - _TABLE_BASE],))
                                                  if index >= _TABLE_BASE else ("var", (index,)))
        elif op.endswith("Num"):
            value = float(children[0]["op"])
            if not math.isfinite(value):
                continue
            entry = ("const", (0.0 if value == 0 else value,))
        elif op.startswith("op_"):
            entry = (op[3:], tuple(c["eclass"] for c in children))
        else:
            continue
        classes.setdefault(cls, []).append(entry)
    if root is None:
        raise SaturationError("the root term is missing from the serialized e-graph")
    return EGraphData(classes, root)
