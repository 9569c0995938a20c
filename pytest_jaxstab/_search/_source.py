"""A term printed as JAX source: the body of the ``def`` an :class:`Improvement` offers."""

from __future__ import annotations

import keyword
from collections.abc import Sequence

from ._expr import Term, is_selection, op, subterms
from ._special import HELPERS

__all__ = ["expression", "function_source"]

_PRECEDENCE = {"add": 1, "sub": 1, "mul": 2, "div": 2, "lt": 0, "le": 0}


def _literal(value: float) -> str:
    if value in (float("inf"), float("-inf")):  # a finiteness test (``_rules_identities``)
        return "jnp.inf" if value > 0 else "-jnp.inf"
    if value == int(value) and abs(value) < 1e16:
        return f"{int(value)}.0"
    return repr(float(value))


def expression(term: Term, names: Sequence[str]) -> str:
    """``term`` as a Python expression over ``jnp`` and the argument ``names``."""
    def go(t: Term, parent: int, right: bool) -> str:
        kind = t[0]
        if kind == "var":
            return names[int(t[1])]
        if kind == "const":
            text = _literal(t[1])
            return f"({text})" if t[1] < 0 else text
        if kind in ("add", "sub") and t[2][0] == "const" and t[2][1] < 0:
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
    body = expression(term, names)
    per_axis = any(t[0].partition("_ax")[1] or is_selection(t[0]) for t in subterms(term)
                   if t[0] not in ("var", "const"))
    if shape is not None and per_axis:
        body = f"jnp.reshape({body}, {shape!r})"  # the per-axis reductions kept their axes
    helpers = "".join(HELPERS[k] + "\n\n" for k in sorted({t[0] for t in subterms(term)} & set(HELPERS)))
    return (f"{helpers}def {fname}({', '.join(names)}):\n"
            f"    return {body}\n")
