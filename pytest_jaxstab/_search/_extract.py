"""Candidates out of the saturated e-graph: the cheapest term, and an accuracy-guided beam search.

The cheapest term of each class (op-cost model of ``_expr``) is found by a fixed point over the classes.
The smallest term is rarely the most accurate one, so :func:`candidates` also walks the e-graph from
the original program: at every position of a term it tries each alternative node of that position's
class (its operands extracted cheapest), keeps the few most accurate terms (the beam) and repeats. The
walk also applies each identity literally at each position (its right side written out, as Herbie
rewrites before simplifying), so shapes the cheapest extraction would never pick stay reachable. The
caller supplies the accuracy (``score``: mean error bits on the samples, judged by the oracle), so every
term returned was derived by the identities and measured.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from ._egraph import EGraphData
from ._expr import Term
from ._expr import op as op_of
from ._rules import RULES, Rule, apply_at_root

__all__ = ["Extractor"]


class Extractor:
    """Cheapest terms and alternatives of an :class:`EGraphData`."""

    def __init__(self, data: EGraphData, rules: tuple[Rule, ...] = RULES) -> None:
        self.data = data
        self.rules = rules
        self.best_cost: dict[str, float] = {}
        self.best_node: dict[str, tuple[str, tuple[object, ...]]] = {}
        self._fixpoint()
        self.key_class: dict[tuple[object, ...], str] = {}
        for cls, nodes in data.classes.items():
            for op, payload in nodes:
                self.key_class[(op, *payload)] = cls
        self._terms: dict[str, Term] = {}

    def _node_cost(self, kind: str, payload: tuple[object, ...]) -> float:
        if kind in ("var", "const"):
            return 0.0
        total = op_of(kind).cost
        for child in payload:
            total += self.best_cost.get(str(child), math.inf)
        return total

    def _fixpoint(self) -> None:
        changed = True
        while changed:
            changed = False
            for cls, nodes in self.data.classes.items():
                for op, payload in nodes:
                    c = self._node_cost(op, payload)
                    if c < self.best_cost.get(cls, math.inf):
                        self.best_cost[cls] = c
                        self.best_node[cls] = (op, payload)
                        changed = True

    def term(self, cls: str) -> Term:
        """The cheapest term of class ``cls``."""
        hit = self._terms.get(cls)
        if hit is None:
            hit = self._build(*self.best_node[cls])
            self._terms[cls] = hit
        return hit

    def _build(self, op: str, payload: tuple[object, ...]) -> Term:
        if op in ("var", "const"):
            return (op, *payload)
        return (op, *(self.term(str(c)) for c in payload))

    def nodes(self, cls: str, limit: int) -> list[tuple[str, tuple[object, ...]]]:
        """Up to ``limit`` nodes of class ``cls`` (those with a finite cost), the cheapest of each operator
        first, then by cost: a class holds many near-copies of one shape (commuted, reassociated) that
        would crowd out the one that changes the numerics (a root class of ``log(prod(x) / prod(y))``
        holds 200 nodes, its ``sub`` of two logs past the first 40 in the e-graph's order)."""
        nodes = [n for n in self.data.classes.get(cls, []) if math.isfinite(self._node_cost(*n))]
        nodes.sort(key=lambda n: self._node_cost(*n))
        firsts, rest, ops = [], [], set()
        for n in nodes:
            (rest if n[0] in ops else firsts).append(n)
            ops.add(n[0])
        return (firsts + rest)[:limit]

    def alternatives(self, cls: str, limit: int) -> list[Term]:
        """Up to ``limit`` terms of class ``cls``, one per node (operands cheapest; :meth:`nodes`)."""
        return [self._build(*n) for n in self.nodes(cls, limit)]

    def fold(self, term: Term) -> Term:
        """``term`` with every operator sub-term that the e-graph proves equal to a constant or an input
        replaced by it (``(x + 1) - x`` by ``1``): the simplification after a literal rewrite."""
        if term[0] in ("var", "const"):
            return term
        cls = self.class_of(term)
        if cls is not None:
            for op, payload in self.data.classes.get(cls, []):
                if op in ("var", "const"):
                    return (op, *payload)
        return (term[0], *(self.fold(c) for c in term[1:]))

    def class_of(self, term: Term) -> str | None:
        """The class holding ``term`` (None when the e-graph does not have it)."""
        if term[0] in ("var", "const"):
            return self.key_class.get(term)
        kids = []
        for child in term[1:]:
            c = self.class_of(child)
            if c is None:
                return None
            kids.append(c)
        return self.key_class.get((term[0], *kids))

    def candidates(self, start: Term, score: Callable[[Term], float], *, beam: int, rounds: int,
                   per_class: int, max_cost: float, deadline: float) -> dict[Term, float]:
        """Accuracy-guided beam search from ``start``; every term scored, with its score.

        Stops at ``deadline`` (a ``time.perf_counter()`` value) with what it has.
        """
        scored: dict[Term, float] = {}

        def judge(t: Term) -> None:
            if t not in scored and _cost(t) <= max_cost:
                scored[t] = score(t)

        judge(start)
        root = self.class_of(start)
        if root is not None:
            judge(self.term(root))
            for alt in self.alternatives(root, per_class):
                judge(alt)
        frontier = sorted(scored, key=lambda t: (scored[t], _cost(t)))[:beam]
        seen_beams: set[Term] = set()
        for _ in range(rounds):
            for current in frontier:
                if current in seen_beams:
                    continue
                seen_beams.add(current)
                for path, sub in _positions(current):
                    if time.perf_counter() > deadline:
                        return scored
                    # A rule's right side written out as it stands (Herbie rewrites so, then simplifies),
                    # and the other nodes of this position's class.
                    for alt in apply_at_root(sub, self.rules):
                        judge(self.fold(_replace(current, path, alt)))
                    cls = self.class_of(sub)
                    if cls is None:
                        continue
                    for alt in self.alternatives(cls, per_class):
                        if alt != sub:
                            judge(_replace(current, path, alt))
            new = sorted(scored, key=lambda t: (scored[t], _cost(t)))[:beam]
            if new == frontier:
                break
            frontier = new
        return scored


def _cost(term: Term) -> float:
    if term[0] in ("var", "const"):
        return 0.0
    return op_of(term[0]).cost + sum(_cost(c) for c in term[1:])


def _positions(term: Term, path: tuple[int, ...] = ()) -> list[tuple[tuple[int, ...], Term]]:
    out = [(path, term)]
    if term[0] not in ("var", "const"):
        for i, child in enumerate(term[1:], start=1):
            out.extend(_positions(child, (*path, i)))
    return out


def _replace(term: Term, path: tuple[int, ...], new: Term) -> Term:
    if not path:
        return new
    i = path[0]
    return (*term[:i], _replace(term[i], path[1:], new), *term[i + 1:])
