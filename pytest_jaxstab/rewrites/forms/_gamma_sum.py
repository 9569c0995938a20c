"""The derivative of a signed sum of log-gamma terms, paired as its value is (issue 47).

``lgamma_sum`` evaluates ``sum_i s_i lgamma(A_i)`` (each ``A_i`` a linear form over the program's
variables) as groups whose terms do not cancel. Automatic differentiation of those groups does not
pair the derivative: ``d/dv`` of the sum is ``sum_i s_i c_iv psi(A_i)`` (``c_iv`` the coefficient of
``v`` in ``A_i``), and a group ``lgamma(k + a) - lgamma(k + 1)`` contributes ``psi(k + a)`` alone to
``d/da``, which then cancels against a ``psi`` of another group (a beta-binomial's derivative in its
shape lost 6 bits where the written ``betaln`` calls' own derivatives lose 3). Here the derivative is
its own program, installed through ``custom_jvp``: for each variable, the terms' weights ``w_i = s_i
c_iv`` are paired (a positive weight with an equal negative one) into ``w (psi(A_p) - psi(A_q))``,
each by :func:`digamma_difference` with ``A_p - A_q`` from the symbolic forms (no rounded arguments
subtracted), the rest as ``w psi(A_i)``. Which pairing is best depends on the arguments' sizes, so
each element takes, among the candidate pairings (every maximal pairing while there are at most
``_MAX_PAIRINGS``, and always the program's own: a ``betaln(P, Q)`` call's ``psi(P) - psi(P + Q)``,
the other terms alone), the one whose pieces have the smallest sum of magnitudes: the bound
``eps * sum |piece|`` on the rounding error of the result, which therefore never exceeds the written
derivative's (up to the pieces' own few ulps).

Where a ``betaln`` call's arguments are not positive and finite (its poles, JAX's sign conventions)
the value and the derivative are the program's own: the call's result and its tangent, the other
terms' plain digammas.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

from ._gamma import digamma_difference

__all__ = ["Call", "Term", "linear_value", "with_paired_derivative"]

#: a linear form: ``((operand index, coefficient), ...), constant``
Form = tuple[tuple[tuple[int, float], ...], float]
_MAX_PAIRINGS = 8  # candidate pairings per variable (each costs a select; 2 for a beta-binomial)


@dataclasses.dataclass(frozen=True)
class Term:
    """``sign * lgamma(A)``, ``A`` the linear form ``form`` over the operands."""

    sign: int
    form: Form


@dataclasses.dataclass(frozen=True)
class Call:
    """A ``betaln(P, Q)`` call read as terms ``p`` (P), ``q`` (Q), ``r`` (P + Q) with ``sign``; its
    own result is operand ``out``."""

    sign: int
    out: int
    p: int
    q: int
    r: int


def linear_value(form: Form, ops: Sequence[Any]) -> Any:
    """The value of a linear form (a Python number where it has no variable: a static shift)."""
    terms, const = form
    if not terms:
        return int(const) if float(const).is_integer() else const
    total: Any = None
    for k, coef in terms:
        t = ops[k] if coef == 1 else -ops[k] if coef == -1 else coef * ops[k]
        total = t if total is None else total + t
    return total + const if const else total


def _coef(form: Form, k: int) -> float:
    return sum(c for j, c in form[0] if j == k)


def _minus(a: Form, b: Form) -> Form:
    out: dict[int, float] = {}
    for k, c in a[0]:
        out[k] = out.get(k, 0.0) + c
    for k, c in b[0]:
        out[k] = out.get(k, 0.0) - c
    return tuple((k, c) for k, c in out.items() if c != 0), a[1] - b[1]


Piece = tuple[str, float, int, int]  # ("pair", w, p, q): w (psi(A_p) - psi(A_q)); ("one", w, i, -1)


def _pairings(weights: list[tuple[int, float]]) -> list[frozenset[Piece]]:
    """Every maximal pairing of positive with equal negative weights (at most _MAX_PAIRINGS + 1)."""
    pos = [(i, w) for i, w in weights if w > 0]
    neg = [(i, w) for i, w in weights if w < 0]
    found: list[frozenset[Piece]] = []

    def extend(a: int, used: frozenset[int], pieces: tuple[Piece, ...]) -> None:
        if len(found) > _MAX_PAIRINGS:
            return
        if a == len(pos):
            rest = tuple(("one", w, i, -1) for j, (i, w) in enumerate(neg) if j not in used)
            found.append(frozenset(pieces + rest))
            return
        i, w = pos[a]
        options = [j for j, (_, wj) in enumerate(neg) if j not in used and wj == -w]
        if not options:
            extend(a + 1, used, (*pieces, ("one", w, i, -1)))
        for j in options:
            extend(a + 1, used | {j}, (*pieces, ("pair", w, i, neg[j][0])))

    extend(0, frozenset(), ())
    return found[:1] if len(found) > _MAX_PAIRINGS else found


def _written(k: int, terms: Sequence[Term], calls: Sequence[Call]) -> frozenset[Piece]:
    """The program's own derivative in variable ``k``: each call's ``c_P (psi(P) - psi(P + Q)) +
    c_Q (psi(Q) - psi(P + Q))`` (as JAX differentiates betaln), the other terms alone."""
    pieces: list[Piece] = []
    inside = set()
    for c in calls:
        inside |= {c.p, c.q, c.r}
        for t in (c.p, c.q):
            w = c.sign * _coef(terms[t].form, k)
            if w:
                pieces.append(("pair", w, t, c.r))
    for i, t in enumerate(terms):
        w = t.sign * _coef(t.form, k)
        if w and i not in inside:
            pieces.append(("one", w, i, -1))
    return frozenset(pieces)


def _plan(terms: Sequence[Term], calls: Sequence[Call]) -> dict[int, list[frozenset[Piece]]]:
    """The candidate pairings of each variable's derivative (static: from the forms alone)."""
    variables = sorted({k for t in terms for k, c in t.form[0] if c})
    out: dict[int, list[frozenset[Piece]]] = {}
    for k in variables:
        weights = [(i, t.sign * _coef(t.form, k)) for i, t in enumerate(terms)]
        weights = [(i, w) for i, w in weights if w]
        if not weights:
            continue
        cands = _pairings(weights)
        if calls:
            cands.append(_written(k, terms, calls))
        out[k] = list(dict.fromkeys(cands))
    return out


def _coefficients(xs: list[Any], args: list[Any], terms: Sequence[Term], calls: Sequence[Call],
                  ok: Any) -> dict[int, Any]:
    """``d(sum)/d(operand k)`` for each variable operand, each element from its best pairing."""
    plan = _plan(terms, calls)
    pairs = sorted({(p, q) for cands in plan.values() for c in cands for kind, _, p, q in c
                    if kind == "pair"})
    ones = sorted({p for cands in plan.values() for c in cands for kind, _, p, _ in c if kind == "one"})
    safe = (lambda v, s: v) if ok is None else (lambda v, s: jnp.where(ok, v, s))
    val: dict[tuple[str, int, int], Any] = {}
    if pairs:
        shape = args[0].shape
        hi = jnp.stack([safe(args[q], 1.0) for p, q in pairs])
        lo = jnp.stack([safe(args[p], 1.0) for p, q in pairs])
        d = jnp.stack([safe(jnp.broadcast_to(jnp.asarray(linear_value(
            _minus(terms[p].form, terms[q].form), xs), args[0].dtype), shape), 0.0) for p, q in pairs])
        # anchored at the argument of smaller magnitude (the other is anchor + d): psi' is largest
        # there, so its rounding (a computed P + Q, say) would cost the most if it were the sum's
        flip = jnp.abs(lo) < jnp.abs(hi)
        x, xa = jnp.where(flip, lo, hi), jnp.where(flip, hi, lo)
        got = jnp.where(flip, -1.0, 1.0) * digamma_difference(x, jnp.where(flip, -d, d), xa=xa)
        val.update({("pair", p, q): got[n] for n, (p, q) in enumerate(pairs)})
    if ones:
        got = lax.digamma(jnp.stack([args[i] for i in ones]))
        val.update({("one", i, -1): got[n] for n, i in enumerate(ones)})
    out: dict[int, Any] = {}
    for k, cands in plan.items():
        sums = [sum(w * val[(kind, p, q)] for kind, w, p, q in c) for c in cands]
        if len(sums) == 1:
            out[k] = sums[0]
            continue
        sizes = [sum(jnp.abs(w * val[(kind, p, q)]) for kind, w, p, q in c) for c in cands]
        sizes = [jnp.where(jnp.isnan(s), jnp.inf, s) for s in sizes]
        best = jnp.argmin(jnp.stack(sizes), axis=0)
        out[k] = sum(jnp.where(best == n, s, 0.0) for n, s in enumerate(sums))
    return out


def with_paired_derivative(value: Callable[[list[Any]], Any], args: Callable[[list[Any]], list[Any]],
                           ops: Sequence[Any], terms: Sequence[Term], calls: Sequence[Call] = ()) -> Any:
    """``value(ops)`` with the paired derivative of ``sum_i terms[i].sign * lgamma(A_i)``.

    Args:
      value: the sum's accurate value from the operand list (its derivative is not used).
      args: the terms' arguments ``A_i`` from the operand list (the program's own where it has them).
      ops: the operands (floating arrays of one dtype); the forms' indices refer to them.
      terms: the lgamma terms as linear forms over the operands.
      calls: ``betaln`` calls among the terms (see :class:`Call`): where one's arguments are not
        positive and finite, value and derivative are the written ones (``value`` must return the
        written value there itself).

    Returns:
      ``value(ops)``, whose JVP is ``sum_k d_k * t_k`` with ``d_k`` paired as described above.
    """

    @jax.custom_jvp
    def fn(*xs: Any) -> Any:
        return value(list(xs))

    def jvp(primals: tuple[Any, ...], tangents: tuple[Any, ...]) -> tuple[Any, Any]:
        xs = list(primals)
        out = value(xs)
        a = [jnp.broadcast_to(v, out.shape).astype(out.dtype) for v in args(xs)]
        ok = None
        if calls:
            ok = jnp.ones(out.shape, bool)
            for c in calls:
                for t in (c.p, c.q):
                    ok = ok & (a[t] > 0) & jnp.isfinite(a[t])
        coefs = _coefficients(xs, a, terms, calls, ok)
        tan = jnp.zeros_like(out)
        if ok is not None:
            inside = {t for c in calls for t in (c.p, c.q, c.r)}
            loose = [i for i in range(len(terms)) if i not in inside]
            plain = lax.digamma(jnp.stack([a[i] for i in loose])) if loose else None
            for k in coefs:
                w = sum((terms[i].sign * _coef(terms[i].form, k) * plain[n]  # type: ignore[index]
                         for n, i in enumerate(loose)), jnp.zeros_like(out))
                coefs[k] = jnp.where(ok, coefs[k], w)
            for c in calls:
                tan = tan + jnp.where(ok, 0.0, float(c.sign)) * tangents[c.out]
        for k, d in coefs.items():
            tan = tan + d * tangents[k]
        return out, tan

    fn.defjvp(jvp)
    return fn(*ops)
