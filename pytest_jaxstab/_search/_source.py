"""A term printed as JAX source: the body of the ``def`` an :class:`Improvement` offers."""

from __future__ import annotations

import keyword
from collections import Counter
from collections.abc import Mapping, Sequence

from ._expr import Table, Term, is_selection, op, size, subterms
from ._special import HELPERS

__all__ = ["expression", "function_source"]

_PRECEDENCE = {"add": 1, "sub": 1, "mul": 2, "div": 2, "lt": 0, "le": 0, "eq": 0, "ne": 0}


def _literal(value: float) -> str:
    if value in (float("inf"), float("-inf")):  # a finiteness test (``_rules_identities``)
        return "jnp.inf" if value > 0 else "-jnp.inf"
    if value == int(value) and abs(value) < 1e16:
        return f"{int(value)}.0"
    return repr(float(value))


def expression(term: Term, names: Sequence[str], bound: Mapping[Term, str] | None = None) -> str:
    """``term`` as a Python expression over ``jnp`` and the argument ``names``; a proper sub-term in
    ``bound`` prints as its local name."""
    named = bound or {}

    def go(t: Term, parent: int, right: bool) -> str:
        kind = t[0]
        if t in named and t is not term:
            return named[t]
        if kind == "var":
            return names[int(t[1])]
        if kind == "const":
            if isinstance(t[1], Table):  # a closed-over array or a regime's example, exactly
                return f"jnp.asarray({t[1].nested()!r})"
            text = _literal(t[1])
            return f"({text})" if t[1] < 0 else text
        if kind in ("add", "sub") and t[2][0] == "const" and isinstance(t[2][1], float) and t[2][1] < 0:
            # x - (-1.0) is x + 1.0 bit for bit (IEEE negation is exact): print the familiar one.
            t = ("sub" if kind == "add" else "add", t[1], ("const", -t[2][1]))
            kind = t[0]
        spec = op(kind)
        if spec.infix:
            mine = _PRECEDENCE[kind]
            # A right operand of - and / needs parentheses at equal precedence.
            text = spec.source.format(go(t[1], mine, False), go(t[2], mine + (kind in ("sub", "div")), True))
            return f"({text})" if mine < parent or (right and mine == parent and parent) else text
        if kind == "neg":
            return f"-{go(t[1], 3, False)}"
        return spec.source.format(*(go(c, 0, False) for c in t[1:]))

    return go(term, 0, False)


def function_source(term: Term, names: Sequence[str], name: str, shape: tuple[int, ...] | None = None) -> str:
    """A pasteable ``def name(*names): return ...`` computing ``term`` with ``jax.numpy as jnp``.

    With ``shape`` (an array program, whose reductions and selections keep their axes), the result is
    reshaped to it.
    Operators without a library function (``log_gamma_difference``) get their helper ``def`` first.
    """
    fname = name if name.isidentifier() and not keyword.iskeyword(name) else "improved"
    bound = _bindings(term, names)
    lets = "".join(f"    {local} = {expression(t, names, bound)}\n" for t, local in bound.items())
    body = expression(term, names, bound)
    per_axis = any(t[0].partition("_ax")[1] or is_selection(t[0]) for t in subterms(term)
                   if t[0] not in ("var", "const"))
    if shape is not None and per_axis:
        body = f"jnp.reshape({body}, {shape!r})"  # the per-axis reductions kept their axes
    helpers = "".join(HELPERS[k] + "\n\n" for k in sorted({t[0] for t in subterms(term)} & set(HELPERS)))
    return (f"{helpers}def {fname}({', '.join(names)}):\n"
            f"{lets}    return {body}\n")


#: A sub-term repeated in the printed program gets a local name when it has this many operators: a
#: regime's guarded inputs and split key recur in every branch (one name each, not pages of copies).
_BIND_SIZE = 2


def _bindings(term: Term, names: Sequence[str]) -> dict[Term, str]:
    """Local names for the sub-terms ``term`` prints more than once, definitions in dependency order.

    Greedy, largest first: a sub-term is named when it still occurs twice in the program with the names
    chosen so far taken as leaves (the parts of a named repeat are then printed once, in its definition).
    """
    chosen: set[Term] = set()
    while True:
        counts = _occurrences(term, chosen)
        repeated = [t for t, n in counts.items() if n > 1 and t not in chosen and size(t) >= _BIND_SIZE]
        if not repeated:
            break
        chosen.add(max(repeated, key=lambda t: (size(t), repr(t))))
    taken = set(names)
    out: dict[Term, str] = {}
    for t in sorted(chosen, key=lambda t: (size(t), repr(t))):  # a part is smaller than its whole
        k = len(out)
        while f"t{k}" in taken:
            k += 1
        out[t] = f"t{k}"
        taken.add(out[t])
    return out


def _occurrences(term: Term, chosen: set[Term]) -> Counter[Term]:
    """How often each sub-term is printed, the ``chosen`` ones printed as names (their definitions once)."""
    counts: Counter[Term] = Counter()
    expanded: set[Term] = set()
    stack = [term]
    while stack:
        t = stack.pop()
        if t[0] in ("var", "const"):
            continue
        for child in t[1:]:
            counts[child] += 1
            if child not in chosen:
                stack.append(child)
            elif child not in expanded:
                expanded.add(child)
                stack.append(child)
    return counts
