"""Candidates for ``s1*b + s2*sqrt(b*b + r)``: the conjugate form and a discriminant that cannot overflow.

The roots of a quadratic, ``(-b +- sqrt(b*b - 4*a*c)) / (2*a)`` and its spellings (``b**2``, ``sqrt(..) -
b``, a ``b2*b2 - a*c`` half-discriminant, a sum in any order), lose in three independent ways over the
whole float range (FPBench's quadp/quadm/quad2p/quad2m, every finite input):

- where ``s1*b`` and ``s2*sqrt(..)`` have opposite signs they cancel; the conjugate
  ``-r / (s1*b - s2*sqrt(b*b + r))`` does not, and its ``r / q`` (``4*a*c / (2*a)``) is simplified by the
  common factors, so that ``4*a*c`` is never formed;
- ``b*b`` and ``4*a*c`` overflow or underflow long before the root does (``|b| > 1.3e154``): the
  discriminant's root is computed scaled, ``hypot(b, t)`` where ``r >= 0`` and ``sqrt(|b| - t) * sqrt(|b| +
  t)`` where ``r < 0``, with ``t = sqrt|r|`` taken as written where ``|r|`` is a normal float and as the
  product of the factors' roots (``2 * sqrt|a| * sqrt|c|``) where it is not;
- which of the two forms is right depends on the sign of ``b``: the regime inference (``_regimes``) joins
  them, judged by the oracle. The e-graph reaches the conjugate only after many steps, each a chance
  to exhaust the node limit (the quadratics were unsolved for it).

Every ``where`` here feeds its untaken branch a harmless argument (``1``), so neither the value nor the
gradient of the branch not taken is NaN (the double-where trick).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._dtypes import dtype_info
from ._expr import Term, const, is_number, replace, signed_terms, subterms

__all__ = ["root_candidates"]


def _square_of(term: Term) -> Term | None:
    if term[0] == "mul" and term[1] == term[2]:
        return term[1]
    if term[0] == "pow" and term[2] == const(2.0):
        return term[1]
    return None


def _factors(term: Term) -> tuple[float, list[Term]]:
    """``term`` as ``coefficient * product(factors)`` (products, negations and constants read through)."""
    if is_number(term):
        return float(term[1]), []
    if term[0] == "neg":
        c, f = _factors(term[1])
        return -c, f
    if term[0] == "mul":
        c1, f1 = _factors(term[1])
        c2, f2 = _factors(term[2])
        return c1 * c2, f1 + f2
    return 1.0, [term]


def _product(coef: float, factors: list[Term]) -> Term:
    out: Term | None = None
    for f in factors:
        out = f if out is None else ("mul", out, f)
    if out is None:
        return const(coef)
    return out if coef == 1.0 else ("neg", out) if coef == -1.0 else ("mul", const(coef), out)


def _sum(parts: list[tuple[float, Term]]) -> Term:
    out: Term | None = None
    for sign, t in parts:
        if out is None:
            out = t if sign > 0 else ("neg", t)
        else:
            out = ("add" if sign > 0 else "sub", out, t)
    assert out is not None
    return out


def _where_safe(cond: Term, arg: Term) -> Term:
    """``arg`` where ``cond``, else 1: the argument of a function whose branch is not taken elsewhere."""
    return ("where", cond, arg, const(1.0))


def _root_abs(r: Term, tiny: float, huge: float) -> Term:
    """``sqrt(|r|)`` with no overflow or underflow of ``|r|`` where ``r`` is a product."""
    absr: Term = ("abs", r)
    coef, factors = _factors(r)
    direct: Term = ("sqrt", absr)
    if len(factors) < 2 and abs(coef) == 1.0:
        return direct
    split: Term | None = None
    for f in factors:
        piece: Term = ("sqrt", ("abs", f))
        split = piece if split is None else ("mul", split, piece)
    c = abs(coef) ** 0.5
    split = const(c) if split is None else split if c == 1.0 else ("mul", const(c), split)
    # |r| clamped into the normal floats (``tiny``: the smallest, below which |r| is flushed or inexact):
    # the same where it is taken, finite (with a finite gradient) where it is not.
    direct = ("sqrt", ("min", ("max", absr, const(tiny)), const(huge)))
    return ("where", ("lt", const(tiny), absr), ("where", ("lt", absr, const(huge)), direct, split), split)


def scaled_root(b: Term, r: Term, dtype: Any) -> Term:
    """``sqrt(b*b + r)`` computed without forming ``b*b`` or ``r`` where they overflow or underflow."""
    info = dtype_info(np.dtype(dtype))
    t = _root_abs(r, float(info.tiny), float(info.max))
    absb: Term = ("abs", b)
    negative: Term = ("lt", r, const(0.0))
    # r < 0: b*b - t*t = (|b| - t)(|b| + t), each factor's root apart (no product to overflow).
    diff: Term = ("mul", ("sqrt", _where_safe(negative, ("sub", absb, t))), ("sqrt", ("add", absb, t)))
    return ("where", negative, diff, ("hypot", b, t))


def _discriminant(sq: Term) -> tuple[Term, Term] | None:
    """``(b, r)`` when ``sq`` is ``sqrt(b*b + r)`` (one square with coefficient +1, any other terms)."""
    if sq[0] != "sqrt":
        return None
    parts: list[tuple[float, Term]] = []
    signed_terms(sq[1], 1.0, parts)
    squares = [(i, _square_of(t)) for i, (s, t) in enumerate(parts) if s > 0 and _square_of(t) is not None]
    if len(squares) != 1 or len(parts) < 2:
        return None
    i, b = squares[0]
    assert b is not None
    return b, _sum([p for j, p in enumerate(parts) if j != i])


def _numerator(term: Term) -> tuple[float, Term, float, Term, Term] | None:
    """``(s1, b, s2, sqrt_term, r)`` when ``term`` is ``s1*b + s2*sqrt(b*b + r)`` (two signed terms)."""
    parts: list[tuple[float, Term]] = []
    signed_terms(term, 1.0, parts)
    if len(parts) != 2:
        return None
    for (s1, b), (s2, sq) in (parts, parts[::-1]):
        disc = _discriminant(sq)
        if disc is not None and disc[0] == b:
            return s1, b, s2, sq, disc[1]
    return None


def _over(num: Term, rc: float, rf: list[Term], q: Term | None, scale: float = 1.0) -> Term:
    """``rc * product(rf) / (num * q) * scale``: the factors ``rf`` shares with ``q`` cancelled symbolically
    (``4*a*c / (2*a)`` is ``2*c``: the product that overflows is never formed) and the constant applied
    last, to the quotient (``2*c`` overflows where ``c > 9e307``; ``c / num * 2`` only where the root
    does)."""
    qc, qf = _factors(q) if q is not None else (1.0, [])
    left = list(qf)
    kept = []
    for f in rf:
        if f in left:
            left.remove(f)
        else:
            kept.append(f)
    out: Term = ("div", _product(1.0, kept), num)
    if left:
        out = ("div", out, _product(1.0, left))
    coef = rc / qc * scale
    return out if coef == 1.0 else ("mul", out, const(coef))


def _rewrites(s1: float, b: Term, s2: float, sq: Term, r: Term, q: Term | None, dtype: Any) -> list[Term]:
    """``(s1*b + s2*sq) / q`` (``sq = sqrt(b*b + r)``) scaled, conjugated and scaled, conjugated.

    Scaled: in quarters, ``B = b/4`` and ``S = sqrt(B*B + r/16)`` (a quarter of the root), so that
    neither ``b + sqrt(..)`` nor ``2*a`` nor ``2*c`` overflows where the inputs are near the largest float
    (halves are not enough: ``b/2 + hypot(b/2, sqrt|a*c|)`` overflows at ``b = 1.6e308, a*c = -3e615``):
    ``(s1*B + s2*S) / a * (4 / 2)``. Conjugated: ``s1*b + s2*sq = -r / (s1*b - s2*sq)``, in quarters
    ``c / (s1*B - s2*S) * (2 / 4)``. Every constant factor scales the quotient, last: scaling ``c`` or
    ``a`` first makes them subnormal (flushed to 0) near the smallest normal float, or overflows them
    near the largest. Scaling by a power of two is exact."""
    rc, rf = _factors(r)
    h = 0.25
    part_b: Term = ("mul", const(h), b)
    part_root = scaled_root(part_b, _product(rc * h * h, rf), dtype)
    qc, qf = _factors(q) if q is not None else (1.0, [])
    naive: Term = _sum([(s1, part_b), (s2, part_root)])
    if qf:
        naive = ("div", naive, _product(1.0, qf))
    naive = ("mul", naive, const(1.0 / (qc * h)))
    conj_scaled = _over(_sum([(s1, part_b), (-s2, part_root)]), -rc, rf, q, h)
    conj = _over(_sum([(s1, b), (-s2, sq)]), -rc, rf, q)
    return [naive, conj_scaled, conj]


def root_candidates(term: Term, dtype: Any) -> list[Term]:
    """``term`` with each ``s1*b + s2*sqrt(b*b + r)`` (over ``q`` where it is divided) rewritten: scaled,
    conjugated and scaled, conjugated as written (:func:`_rewrites`). Empty when there is none."""
    out: list[Term] = []
    subs = list(dict.fromkeys(subterms(term)))
    divided = {s[1] for s in subs if s[0] == "div" and _numerator(s[1]) is not None}
    for sub in subs:
        if sub in divided:
            continue  # taken with its divisor, whose common factors with r cancel
        q: Term | None = None
        num = sub
        if sub[0] == "div":
            num, q = sub[1], sub[2]
        found = _numerator(num)
        if found is None:
            continue
        s1, b, s2, sq, r = found
        for new in _rewrites(s1, b, s2, sq, r, q, dtype):
            cand = replace(term, sub, new)
            if cand != term and cand not in out:
                out.append(cand)
    return out
