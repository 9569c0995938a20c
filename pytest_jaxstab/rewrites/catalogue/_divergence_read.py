"""Reading a sum in a jaxpr as a linear combination of leaves, and a leaf's logarithm as a linear form.

The structural ``bregman`` rule (``_stability_divergence.py``) reads ``add``/``sub``/``neg``, constant
factors and divisors, and quotients (distributed over their numerator's terms) from one root, and
the log of a leaf through ``exp``, products, quotients and powers. A term is ``("v", atom)`` or
``("q", term | None, atom)``; a log form's keys are terms (from exponents) and ``("log", atom)``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ... import _compat
from ..._dtypes import is_real_kind
from ..engine._match import Graph

MAX_TERMS = 16
MAX_DEPTH = 12
LINEAR = frozenset({"add", "sub", "neg", "mul", "div"})

def _constant(g: Graph, atom: Any) -> float | None:
    """The scalar every element of ``atom`` equals (through broadcasts and conversions), or None."""
    for _ in range(6):
        if _compat.is_literal(atom):
            v = _compat.literal_value(atom)
        elif atom in g.const_values:
            v = g.const_values[atom]
        else:
            prod = g.producer_eqn(atom)
            if prod is None:
                return None
            e = prod[1]
            if _compat.primitive_name(e) not in ("broadcast_in_dim", "convert_element_type", "reshape",
                                                 "copy", "squeeze", "expand_dims"):
                return None
            atom = e.invars[0]
            continue
        if _compat.is_tracer(v):
            return None
        try:
            arr = np.asarray(v)
        except (TypeError, ValueError):
            return None
        if not is_real_kind(arr.dtype) or arr.size == 0:
            return None
        first = float(arr.reshape(-1)[0])
        return first if bool(np.all(arr == first)) and math.isfinite(first) else None
    return None


def _through(g: Graph, atom: Any) -> tuple[Any, int | None, Any]:
    """``(atom, index, eqn)`` of the first non-glue producer of ``atom`` (glue that keeps the shape
    and dtype is seen through); index None for an input."""
    for _ in range(8):
        prod = g.producer_eqn(atom)
        if prod is None:
            return atom, None, None
        i, e = prod
        same = (g.is_glue(e) and _compat.primitive_name(e) in ("copy", "copy_p", "convert_element_type",
                                                                  "reshape", "broadcast_in_dim")
                and tuple(_compat.aval(e.invars[0]).shape) == tuple(_compat.aval(atom).shape))
        if not same:
            return atom, i, e
        atom = e.invars[0]
    return atom, None, None


class _Reader:
    """Reads atoms of one graph as linear forms ``({term: coefficient}, constant)``.

    A term is ``("v", atom)`` (a leaf) or ``("q", term | None, atom)`` (a leaf, or 1, over a
    denominator atom: quotients are distributed over their numerator's terms). ``visited`` collects
    the equations a read walked through (candidates to swallow)."""

    def __init__(self, g: Graph) -> None:
        self.g = g
        self.visited: set[int] = set()

    def lin(self, atom: Any, depth: int = 0) -> tuple[dict[Any, float], float] | None:
        c = _constant(self.g, atom)
        if c is not None:
            return {}, c
        base, i, e = _through(self.g, atom)
        if e is None:
            # a literal no constant reader takes (a complex one): no leaf of a linear form
            return None if _compat.is_literal(base) else ({("v", base): 1.0}, 0.0)
        if depth > MAX_DEPTH:
            return None
        name = _compat.primitive_name(e)
        if name not in LINEAR or len(e.outvars) != 1:
            return ({("v", base): 1.0}, 0.0)
        args = e.invars
        if name == "neg":
            got = self.lin(args[0], depth + 1)
            return None if got is None else self._mark(i, _scale(got, -1.0))
        if name in ("add", "sub"):
            x, y = self.lin(args[0], depth + 1), self.lin(args[1], depth + 1)
            if x is None or y is None:
                return None
            out = _add(x, y, -1.0 if name == "sub" else 1.0)
            return None if len(out[0]) > MAX_TERMS else self._mark(i, out)
        if name == "mul":
            for k, other in ((0, 1), (1, 0)):
                ck = _constant(self.g, args[k])
                if ck is not None:
                    got = self.lin(args[other], depth + 1)
                    return None if got is None else self._mark(i, _scale(got, ck))
            return ({("v", base): 1.0}, 0.0)
        # div
        cd = _constant(self.g, args[1])
        if cd is not None and cd != 0:
            got = self.lin(args[0], depth + 1)
            return None if got is None else self._mark(i, _scale(got, 1.0 / cd))
        k, den = self.strip(args[1])
        num = self.lin(args[0], depth + 1)
        if num is None or len(num[0]) > MAX_TERMS:
            return None
        terms: dict[Any, float] = {}
        for t, v in num[0].items():
            if t[0] != "v":
                return ({("v", base): 1.0}, 0.0)
            terms[("q", t, den)] = v / k
        if num[1]:
            terms[("q", None, den)] = num[1] / k
        return self._mark(i, (terms, 0.0))

    def strip(self, atom: Any) -> tuple[float, Any]:
        """``(k, a)`` with ``atom = k·a``, k a constant factor (1 if none)."""
        base, _, e = _through(self.g, atom)
        if e is not None and _compat.primitive_name(e) == "mul":
            for k, other in ((0, 1), (1, 0)):
                ck = _constant(self.g, e.invars[k])
                if ck is not None and ck != 0:
                    return ck, _through(self.g, e.invars[other])[0]
        return 1.0, base

    def _mark(self, i: int | None, form: Any) -> Any:
        if i is not None and i not in self.g.claimed:
            self.visited.add(i)
        return form

    def head(self, atom: Any) -> tuple[str | None, Any]:
        e = _through(self.g, atom)[2]
        return (None, None) if e is None else (_compat.primitive_name(e), e)

    def log_form(self, term: Any) -> tuple[dict[Any, float], float] | None:
        """``log`` of a term as a linear form over keys ``("log", atom)`` and the terms of exponents."""
        if term[0] == "q":
            num = ({}, 0.0) if term[1] is None else self.log_form(term[1])
            den = self.log_atom(term[2])
            return None if num is None or den is None else _add(num, den, -1.0)
        return self.log_atom(term[1])

    def log_atom(self, atom: Any, depth: int = 0) -> tuple[dict[Any, float], float] | None:
        c = _constant(self.g, atom)
        if c is not None:
            return ({}, math.log(c)) if c > 0 else None
        base, _, e = _through(self.g, atom)
        opaque = ({("log", base): 1.0}, 0.0)
        if e is None or depth > 6:
            return opaque
        name = _compat.primitive_name(e)
        a = e.invars
        if name == "exp":
            return self.lin(a[0])
        if name in ("mul", "div"):
            x, y = self.log_atom(a[0], depth + 1), self.log_atom(a[1], depth + 1)
            if x is None or y is None:
                return None
            return _add(x, y, -1.0 if name == "div" else 1.0)
        power = {"square": 2.0, "sqrt": 0.5}.get(name)
        if name == "integer_pow":
            power = float(e.params["y"])
        if name == "pow":
            power = _constant(self.g, a[1])
        if power is not None:
            inner = self.log_atom(a[0], depth + 1)
            return None if inner is None else _scale(inner, power)
        return opaque


def _scale(form: Any, k: float) -> tuple[dict[Any, float], float]:
    return {t: v * k for t, v in form[0].items()}, form[1] * k


def _add(x: Any, y: Any, sign: float) -> tuple[dict[Any, float], float]:
    out = dict(x[0])
    for t, v in y[0].items():
        out[t] = out.get(t, 0.0) + sign * v
    return {t: v for t, v in out.items() if v != 0.0}, x[1] + sign * y[1]


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-9 * max(abs(a), abs(b))
