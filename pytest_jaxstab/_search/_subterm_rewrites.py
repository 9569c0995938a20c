"""The identities of ``_rules_identities`` applied directly at every sub-term of the written program.

The e-graph saturates the sub-term local error points at (a division's numerator alone, where Smith's
division needs the whole quotient) and may stop at its node limit before a rule whose left side is large
matches. Here each rule is matched at every sub-term of the program as written, modulo the order of the
operands of ``+``, ``*``, ``hypot``, ``max``, ``min``; one-input rational sub-terms are normalised
(``_rational``) and one-input sub-terms with a cancellation expanded (``_series.subterm_series``). Every
result is a candidate like the e-graph's: judged by the oracle, re-checked, never offered where it loses.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from ._expr import Term, replace, subterms, variables
from ._rational import rational_form
from ._rules import RULES
from ._rules_identities import IDENTITY_SOURCE
from ._series import subterm_series

__all__ = ["identity_candidates"]

_COMMUTATIVE = frozenset({"add", "mul", "hypot", "max", "min"})
#: Candidates :func:`identity_candidates` returns at most (each is compiled and judged).
_LIMIT = 12


def _matches(pattern: Term, term: Term, binding: dict[str, Term]) -> Iterator[dict[str, Term]]:
    """Every binding under which ``pattern`` matches ``term``, the operands of commutative operators in
    either order (``a*c + b*d`` matches ``c*a + d*b``)."""
    kind = pattern[0]
    if kind == "pvar":
        bound = binding.get(pattern[1])
        if bound is None:
            yield {**binding, pattern[1]: term}
        elif bound == term:
            yield binding
        return
    if kind == "const":
        if term[0] == "const" and term[1] == pattern[1]:
            yield binding
        return
    if term[0] != kind or len(term) != len(pattern):
        return
    orders = [pattern[1:]]
    if kind in _COMMUTATIVE:
        orders.append(pattern[1:][::-1])
    seen: list[dict[str, Term]] = []
    for operands in orders:
        partial = [binding]
        for p, t in zip(operands, term[1:]):
            partial = [b2 for b in partial for b2 in _matches(p, t, b)]
        for b in partial:
            if b not in seen:
                seen.append(b)
                yield b


def _instantiate(pattern: Term, binding: dict[str, Term]) -> Term:
    if pattern[0] == "pvar":
        return binding[pattern[1]]
    if pattern[0] == "const":
        return pattern
    return (pattern[0], *(_instantiate(p, binding) for p in pattern[1:]))


def _tidy(term: Term) -> Term:
    """``(p + q) - p`` as ``q`` (either order), bottom-up: the difference of a power's bases written as
    ``x + 1`` and ``x`` is 1, exactly, never ``(x + 1) - x`` rounded."""
    if term[0] in ("var", "const"):
        return term
    term = (term[0], *(_tidy(c) for c in term[1:]))
    if term[0] == "sub" and term[1][0] == "add":
        p, q = term[1][1], term[1][2]
        if p == term[2]:
            return q
        if q == term[2]:
            return p
    return term


def identity_candidates(term: Term, array: bool = False, focus: Term | None = None) -> list[tuple[Term, str]]:
    """``term`` with one sub-term rewritten by a rule of :data:`IDENTITY_SOURCE` (modulo commutativity),
    normalised as a rational function of one input (``_rational``), or (a scalar program) one of
    ``focus``'s sub-terms replaced by its series at 0 or infinity (``_series.subterm_series``; none
    without ``focus``: a series is an approximation, kept to the sub-term local error points at), each
    with its kind (``"rewrite"``, ``"series"``): at most :data:`_LIMIT` rewrites, largest sub-terms
    first, and the series."""
    rules = [r for r in RULES if r.family in IDENTITY_SOURCE]
    out: list[Term] = []
    subs = sorted((t for t in dict.fromkeys(subterms(term)) if t[0] not in ("var", "const")),
                  key=lambda t: -len(subterms(t)))
    for sub in subs:
        for rule in rules:
            for binding in itertools.islice(_matches(rule.lhs, sub, {}), 4):
                new = replace(term, sub, _tidy(_instantiate(rule.rhs, binding)))
                if new != term and new not in out:
                    out.append(new)
        if len(variables(sub)) == 1 and not array:
            normal = rational_form(sub)
            if normal is not None and normal != sub:
                new = replace(term, sub, normal)
                if new not in out:
                    out.append(new)
        if len(out) >= _LIMIT:
            break
    found = [(u, "rewrite") for u in out[:_LIMIT]]
    if array or focus is None:
        return found
    return found + [(replace(term, focus, u), "series") for u in subterm_series(focus)]
