"""Sums of ``lgamma`` terms whose arguments differ by a few terms: paired into ``lgammadiff``.

A log binomial coefficient ``lgamma(n + 1) - lgamma(k + 1) - lgamma(n - k + 1)`` (and a Beta function, a
Poisson or negative-binomial log-likelihood) subtracts two large ``lgamma`` values whose arguments differ
by ``k``: for ``n = 1e15`` each is about ``3e16`` and the difference keeps almost no bits.
``lgamma(x + a) - lgamma(x)`` is ``lgammadiff(x, a)`` (``_special.lgamma_difference``, no cancellation),
but the e-graph must first reorder the sum to bring the pair together and rewrite ``n + 1`` as
``(n - k + 1) + k``: several associativity steps each, which blow the node limit before they meet.

Here the sum is flattened into signed terms, each argument read as a linear form over its atoms (inputs
and non-linear sub-terms, with constant coefficients), and a positive ``lgamma(A)`` is paired with a
negative ``lgamma(B)`` when ``A - B`` has fewer atoms than ``A`` and ``B`` together (an atom cancels):
the difference comes out symbolically
(``k``, never ``(n + 1) - (n - k + 1)`` rounded). The pairs with the simplest differences are taken first.
"""

from __future__ import annotations

from ._expr import Term, const, is_number, replace, signed_terms, subterms

__all__ = ["lgamma_pairings"]

Linear = dict[Term, float]  # atom -> coefficient; the constant under the key ("const", 1.0)
_ONE: Term = ("const", 1.0)


def _linear(term: Term) -> Linear:
    out: Linear = {}
    parts: list[tuple[float, Term]] = []
    signed_terms(term, 1.0, parts)
    for sign, t in parts:
        coef, atom = sign, t
        if t[0] == "mul" and is_number(t[1]):
            coef, atom = sign * t[1][1], t[2]
        elif t[0] == "mul" and is_number(t[2]):
            coef, atom = sign * t[2][1], t[1]
        if is_number(atom):
            coef, atom = coef * atom[1], _ONE
        out[atom] = out.get(atom, 0.0) + coef
    return {a: c for a, c in out.items() if c != 0.0}


def _term(lin: Linear) -> Term:
    acc: Term | None = None
    for atom, coef in sorted(lin.items(), key=lambda kv: kv[0] == _ONE):  # the constant last
        piece = const(coef) if atom == _ONE else atom if abs(coef) == 1.0 else ("mul", const(abs(coef)), atom)
        negative = coef < 0 and atom != _ONE
        if acc is None:
            acc = ("neg", piece) if negative else piece
        else:
            acc = ("sub", acc, piece) if negative else ("add", acc, piece)
    return acc if acc is not None else const(0.0)


def _atoms(lin: Linear) -> int:
    return sum(1 for a in lin if a != _ONE)


def _paired(term: Term) -> Term | None:
    parts: list[tuple[float, Term]] = []
    signed_terms(term, 1.0, parts)
    lg = [i for i, (_, t) in enumerate(parts) if t[0] == "lgamma"]
    if len(lg) < 2:
        return None
    options = []
    for i in lg:
        for j in lg:
            if parts[i][0] > 0 > parts[j][0]:
                a, b = _linear(parts[i][1][1]), _linear(parts[j][1][1])
                diff = {k: a.get(k, 0.0) - b.get(k, 0.0) for k in set(a) | set(b)}
                diff = {k: v for k, v in diff.items() if v != 0.0}
                if diff and _atoms(diff) < _atoms({**a, **b}):  # some atom cancelled between them
                    options.append((_atoms(diff), len(diff), i, j, diff))
    if not options:
        return None
    used: set[int] = set()
    out: list[tuple[float, Term]] = []
    for _, _, i, j, diff in sorted(options, key=lambda o: o[:4]):
        if i in used or j in used:
            continue
        used |= {i, j}
        out.append((1.0, ("lgammadiff", parts[j][1][1], _term(diff))))
    out += [p for k, p in enumerate(parts) if k not in used]
    acc: Term | None = None
    for sign, t in out:
        if acc is None:
            acc = t if sign > 0 else ("neg", t)
        else:
            acc = ("add", acc, t) if sign > 0 else ("sub", acc, t)
    return acc


def lgamma_pairings(term: Term) -> list[Term]:
    """``term`` with each maximal sum of terms in which two ``lgamma`` pair up rewritten (see the module
    doc); an empty list when none does."""
    tops = [t for t in subterms(term) if t[0] in ("add", "sub")]
    inner = {c for t in subterms(term) if t[0] in ("add", "sub", "neg") for c in t[1:]}
    out = []
    current = term
    for top in tops:
        if top in inner and top[0] in ("add", "sub"):
            continue  # part of a larger sum: paired there
        new = _paired(top)
        if new is not None:
            current = replace(current, top, new)
    if current != term:
        out.append(current)
    return out

