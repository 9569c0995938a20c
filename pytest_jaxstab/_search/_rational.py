"""A rational function of one input, normalised exactly: common factors cancelled, the rest factored.

``1/(x + 1) - 2/x + 1/(x - 1)`` is ``2 / (x (x - 1) (x + 1))``: the three terms cancel to a constant
numerator, which no local rewrite finds (the e-graph reaches ``((x/(x+1) - 2)(x-1) + x) / (x (x-1))`` and
keeps the cancellation). Here the sub-term's numerator and denominator are computed as polynomials with
exact rational coefficients (python-flint's ``fmpq_poly``; each float constant is its exact value), the
greatest common divisor is cancelled, and both are factored over the rationals. The result is written as
the constant divided and multiplied by one factor at a time (``((2 / x) / (x - 1)) / (x + 1)``: no product
of factors overflows where the quotient does not), each factor by Horner's rule (a linear one as ``x + k``,
where ``x - 1`` near 1 is exact). Herbie's polynomial simplification does the same.
"""

from __future__ import annotations

from fractions import Fraction

import flint

from ._expr import Term, const, is_number, variables

__all__ = ["rational_form"]

#: Degrees above this are not normalised (the factors would be long, and slow to find).
_MAX_DEGREE = 12
_ARITH = frozenset({"add", "sub", "mul", "div", "neg"})

Ratio = tuple[flint.fmpq_poly, flint.fmpq_poly]


def _ratio(term: Term, var: Term) -> Ratio | None:
    kind = term[0]
    one = flint.fmpq_poly([1])
    if term == var:
        return flint.fmpq_poly([0, 1]), one
    if kind == "const":
        if not is_number(term):  # an array constant is no rational function of one input
            return None
        f = Fraction(term[1])
        return flint.fmpq_poly([flint.fmpq(f.numerator, f.denominator)]), one
    if kind == "pow" and is_number(term[2]) and float(term[2][1]).is_integer() and abs(term[2][1]) <= 4:
        base = _ratio(term[1], var)
        if base is None:
            return None
        n = int(term[2][1])
        num, den = (base if n >= 0 else base[::-1])
        return num ** abs(n), den ** abs(n)
    if kind not in _ARITH:
        return None
    parts = [_ratio(c, var) for c in term[1:]]
    if any(p is None for p in parts):
        return None
    if kind == "neg":
        return -parts[0][0], parts[0][1]  # type: ignore[index]
    (n1, d1), (n2, d2) = parts  # type: ignore[misc]
    if kind in ("add", "sub"):
        num = n1 * d2 + n2 * d1 if kind == "add" else n1 * d2 - n2 * d1
        out = (num, d1 * d2)
    elif kind == "mul":
        out = (n1 * n2, d1 * d2)
    else:
        if n2 == 0:
            return None
        out = (n1 * d2, d1 * n2)
    if out[0].degree() > _MAX_DEGREE or out[1].degree() > _MAX_DEGREE:
        return None
    g = out[0].gcd(out[1])
    return (out[0] // g, out[1] // g) if g.degree() > 0 else out


def _horner(poly: flint.fmpq_poly, var: Term) -> Term:
    coeffs = [float(Fraction(int(c.p), int(c.q))) for c in poly.coeffs()]
    if len(coeffs) == 2 and coeffs[1] == 1.0:
        return ("add", var, const(coeffs[0])) if coeffs[0] else var
    out: Term = const(coeffs[-1])
    for c in reversed(coeffs[:-1]):
        out = ("mul", out, var)
        if c:
            out = ("add", out, const(c))
    return out


def rational_form(term: Term) -> Term | None:
    """``term`` (of one input, arithmetic and integer powers only) as its normalised rational function,
    or None when it is not one, or nothing cancels (the numerator's and denominator's degrees as written
    are not lowered) or the result is constant."""
    if len(variables(term)) != 1 or term[0] in ("var", "const"):
        return None
    var: Term = ("var", next(iter(variables(term))))
    ratio = _ratio(term, var)
    if ratio is None:
        return None
    num, den = ratio
    if num == 0 or (num.degree() <= 0 and den.degree() <= 0):
        return None
    if num.degree() + den.degree() >= _written_degree(term):
        return None  # nothing cancelled: the written form is as short
    c_num, f_num = num.factor()
    c_den, f_den = den.factor()
    scale = Fraction(int(c_num.p), int(c_num.q)) / Fraction(int(c_den.p), int(c_den.q))
    ups = [p for p, e in f_num for _ in range(int(e))]
    downs = [p for p, e in f_den for _ in range(int(e))]
    out: Term = const(float(scale))
    for k in range(max(len(ups), len(downs))):  # alternate so that the magnitude stays moderate
        if k < len(downs):
            out = ("div", out, _horner(downs[k], var))
        if k < len(ups):
            out = ("mul", out, _horner(ups[k], var))
    return out


def _written_degree(term: Term) -> int:
    """The sum of the degrees of numerator and denominator the written form computes without cancelling
    (each sum over a common denominator), an upper bound the normal form must beat."""
    def go(t: Term) -> tuple[int, int]:
        if t[0] == "var":
            return 1, 0
        if t[0] == "const":
            return 0, 0
        if t[0] == "pow":
            n, d = go(t[1])
            k = int(abs(t[2][1]))
            return (n * k, d * k) if t[2][1] >= 0 else (d * k, n * k)
        if t[0] == "neg":
            return go(t[1])
        (n1, d1), (n2, d2) = go(t[1]), go(t[2])
        if t[0] in ("add", "sub"):
            return max(n1 + d2, n2 + d1), d1 + d2
        return (n1 + n2, d1 + d2) if t[0] == "mul" else (n1 + d2, d1 + n2)

    n, d = go(term)
    return n + d
