"""Identities of static selections (``x[0]``, ``x[..., k]``, ``lax.dynamic_slice`` at constant starts).

The selection of an elementwise expression is the expression of the selections: ``f(x)[k] = f(x[k])``
for every elementwise ``f``, and ``g(x[k], y[k]) = g(x, y)[k]``, also where the other operand is a
constant or a reduction (both broadcast over the selected axes). Moving a selection inward computes
less; moving it outward exposes the whole-array forms the reduction identities are written over: a
positive logit's log-probability ``log(exp(s[0]) / sum(exp(s)))`` becomes ``(s - lse(s))[0]`` through the
softmax and log-softmax identities. Written per selection operator of the term (its name carries the
indices), like the reduction identities per axes (``_rules.rules_for``); each candidate is judged on
whole arrays by the oracle, as every other.
"""

from __future__ import annotations

from ._expr import OPS, Term, is_number, is_reduction, is_selection, reduction_axes

__all__ = ["selection_rules"]

#: Unary operators moved across a selection in both directions, besides those the term has: the ones
#: the identities introduce on the way to a stable form.
_UNARY = ("neg", "exp", "log", "expm1", "log1p", "softplus", "logistic", "sqrt", "abs")
#: Binary operators whose selected operands are moved out (the selection taken of the whole result).
_BINARY = ("add", "sub", "mul", "div", "pow", "max", "min", "logaddexp", "hypot", "xlogy", "xlog1py")


def selection_rules(term: Term) -> list[tuple[str, str, str]]:
    """``(name, lhs, rhs)`` s-expressions of the selection identities for the selections in ``term``."""
    kinds: set[str] = set()
    consts: set[float] = set()
    reductions: set[str] = set()
    stack = [term]
    while stack:
        t = stack.pop()
        if t[0] == "const":
            if is_number(t):
                consts.add(float(t[1]))
            continue
        if t[0] == "var":
            continue
        kinds.add(t[0])
        stack.extend(t[1:])
    selections = sorted(k for k in kinds if is_selection(k))
    if not selections:
        return []
    reductions = {k for k in kinds if is_reduction(k)}
    unary = sorted({k for k in kinds if k in OPS and OPS[k].arity == 1} | set(_UNARY))
    binary = sorted({k for k in kinds if k in _BINARY} | {"add", "sub", "mul", "div"})
    out: list[tuple[str, str, str]] = []
    for s in selections:
        for u in unary:
            out.append((f"{s}-{u}-in", f"({s} ({u} a))", f"({u} ({s} a))"))
            out.append((f"{s}-{u}-out", f"({u} ({s} a))", f"({s} ({u} a))"))
        for b in binary:
            out.append((f"{s}-{b}-out", f"({b} ({s} a) ({s} b))", f"({s} ({b} a b))"))
            for c in sorted(consts):
                out.append((f"{s}-{b}-{c!r}-right", f"({b} ({s} a) {c!r})", f"({s} ({b} a {c!r}))"))
                out.append((f"{s}-{b}-{c!r}-left", f"({b} {c!r} ({s} a))", f"({s} ({b} {c!r} a))"))
            for r in sorted(reductions):
                out.append((f"{s}-{b}-{r}-right", f"({b} ({s} a) ({r} b))", f"({s} ({b} a ({r} b)))"))
                out.append((f"{s}-{b}-{r}-left", f"({b} ({r} b) ({s} a))", f"({s} ({b} ({r} b) a))"))
        for r in sorted(reductions):
            parsed = reduction_axes(r)
            if parsed is None or parsed[0] != "sum":
                continue
            lse = "lse" + r[len("sum"):]
            # The log-probability and probability of a selected entry of a softmax, in one step.
            out.append((f"{s}-log-softmax-{r}", f"(log (div ({s} (exp a)) ({r} (exp a))))",
                        f"(sub ({s} a) ({lse} a))"))
            out.append((f"{s}-softmax-{r}", f"(div ({s} (exp a)) ({r} (exp a)))",
                        f"(exp (sub ({s} a) ({lse} a)))"))
    return out
