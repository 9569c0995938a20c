"""Text of matched expressions and of replacements, for ``jst.explain`` and ``describe=True``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ... import _compat
from ._match import Graph, Match

__all__ = ["render", "render_jaxpr", "shorten"]


def render(g: Graph, root: int, m: Match) -> str:
    """The matched expression as text, leaves named by their capture names: ``log(reduce_sum(exp(x)))``."""
    def inside(a: Any) -> bool:
        prod = g.producer_eqn(a)
        return prod is not None and prod[0] in m.swallowed

    names = {id(a): n for n, a in m.atoms.items() if not inside(a)}

    def atom_text(a: Any, depth: int) -> str:
        if _compat.is_literal(a):
            return _num(_compat.literal_value(a))
        if id(a) in names:
            return names[id(a)]
        prod = g.producer_eqn(a)
        if prod is not None and prod[0] in m.swallowed and depth < 12:
            return eqn_text(prod[0], depth + 1)
        if a in g.const_values:
            return "const"
        return "…"

    def eqn_text(i: int, depth: int) -> str:
        eqn = g.eqns[i]
        if g.is_glue(eqn) and i != root:
            return atom_text(eqn.invars[0], depth)
        args = ", ".join(atom_text(a, depth) for a in eqn.invars)
        return f"{_compat.primitive_name(eqn)}({args})"

    return shorten(eqn_text(root, 0))


def render_jaxpr(closed: Any, names: Sequence[str]) -> str:
    """A single-output jaxpr as one nested expression (shared sub-terms inlined), for ``explain``."""
    env = {id(v): n for v, n in zip(_compat.invars(closed), names)}
    for v in _compat.constvars(closed):
        env[id(v)] = "const"
    for eqn in _compat.eqns(closed):
        args = [(_num(_compat.literal_value(a)) if _compat.is_literal(a) else env.get(id(a), "…"))
                for a in eqn.invars]
        name = _compat.primitive_name(eqn)
        if name in ("convert_element_type", "broadcast_in_dim", "reshape", "squeeze", "expand_dims",
                    "copy", "copy_p") and args:
            text = args[0]
        elif name == "jit" and eqn.params.get("name") == "_where":
            text = f"where({', '.join(args)})"
        elif _compat.subjaxprs(eqn):
            text = f"{_compat.eqn_name(eqn)}({', '.join(args)})"
        else:
            text = f"{name}({', '.join(args)})"
        for v in eqn.outvars:  # capped: a shared sub-term inlined at every use doubles per level;
            env[id(v)] = text[:_RENDER_CAP]  # a prefix of each part keeps the shortened prefix exact
    outs = [(_num(_compat.literal_value(a)) if _compat.is_literal(a) else env.get(id(a), "…"))
            for a in _compat.outvars(closed)]
    return ", ".join(outs)


_RENDER_CAP = 400  # > _shorten's limit


def _num(v: Any) -> str:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return "const"
    return repr(int(f)) if f.is_integer() and abs(f) < 1e15 else f"{f:g}"


def shorten(s: str, limit: int = 160) -> str:
    return s if len(s) <= limit else s[: limit - 1] + "…"
