"""Sums of log-gamma (and digamma) terms: paired so that no two large values cancel.

Statistics code writes normalisers as signed sums of ``lgamma`` terms: ``lgamma(n + 1) -
lgamma(k + 1) - lgamma(n - k + 1)``, ``lgamma((nu + 1) / 2) - lgamma(nu / 2)``, ``lgamma(a) + lgamma(b)
- lgamma(a + b)``. A structural rule (``Rule(matcher=...)``) reads the add/sub/neg tree rooted at an
``add`` or ``sub`` (any order, any nesting; terms that are not ``lgamma``/``digamma`` are kept as
they are), analyses each argument as a linear form over the program's variables with constant
coefficients (``n - k + 1`` is ``{n: 1, k: -1, 1: 1}``; ``(nu + 1) / 2`` is ``{nu: 1/2, 1: 1/2}``), and
forms groups whose arguments' difference simplifies symbolically:

- a pair of opposite signs, ``lgamma(A) - lgamma(B)`` with ``A - B = d`` exactly, becomes
  ``lgamma_difference(B, d)``, d computed from the symbolic form (``k``, ``0.5``, ``b``), never as
  ``fl(A) - fl(B)`` (that subtraction of two rounded arguments is off by ulp(A): at n = 1e7 in float64
  it costs ~18 bits of the result, the cancellation the rule exists to remove);
- three terms ``lgamma(P) + lgamma(Q) - lgamma(R)`` (or all negated) with ``P + Q - R = c`` a
  constant become ``betaln(P, Q) + lgamma_difference(R, c)`` (``c = 1``: ``log R``), which is
  accurate whichever of P and Q is large (the log binomial coefficient is ``-log(n + 1) -
  betaln(k + 1, n - k + 1)``).

A pair is formed only where the difference cancels at least one variable of the arguments
(``lgamma(x) - lgamma(y)`` with unrelated x and y is left as written: nothing symbolic is gained).
Where groups compete for a term (a beta-binomial has many), the choice is made per element at run
time: greedily, the group whose accurate value is smallest against the magnitudes of its terms
(the most cancellation removed) first; groups that share no term are all taken, with no run-time
choice. The remaining terms are summed as written.

A ``jax.scipy.special.betaln(P, Q)`` call in the tree is read as ``lgamma(P) + lgamma(Q) - lgamma(P +
Q)`` (a beta-binomial's two calls cancel against each other and the log binomial), its own three terms
a group whose value is the call's result; the reading is taken per element where it removes 2 bits
more cancellation than the calls as they are. A sum of lgamma terms alone carries a derivative paired
as its value is (``forms._gamma_sum``: per variable, the digamma terms paired, the calls' own pairing
among the candidates); where a call's arguments are not positive, value and derivative are written.

``log_beta_multivariate``: the Dirichlet log-normaliser ``sum(lgamma(alpha)) - lgamma(sum(alpha))``,
one reduction against one lgamma, which no add/sub tree shows: ``forms.log_beta_multivariate``.
"""

from __future__ import annotations

import dataclasses
import weakref
from fractions import Fraction
from typing import Any

import jax.numpy as jnp
import numpy as np
from jax import lax

from ... import _compat
from ..._dtypes import is_real_kind
from ..engine._match import Graph, Match
from ..engine._pattern import any_of, const, fixed, op, param, var
from ..engine._rule import Rule
from ..forms import _gamma as fg
from ..forms import _gamma_sum as gs

__all__ = ["GAMMA_RULES", "LGAMMA_SUM", "LOG_BETA_MULTIVARIATE"]

_KINDS = ("lgamma", "digamma")
_TREE = frozenset({"add", "sub", "neg"})
_MAX_TERMS = 16  # gamma terms in one tree (candidate groups grow with their square/cube)
_MAX_NODES = 64  # nodes of one add/sub tree a match walks
_MAX_CANDIDATES = 48

_HAS_GAMMA: weakref.WeakKeyDictionary[Graph, bool] = weakref.WeakKeyDictionary()
_ALONE: weakref.WeakKeyDictionary[Graph, bool] = weakref.WeakKeyDictionary()

Linear = dict[Any, Fraction]  # atom -> coefficient; None -> the constant


def _has_gamma(g: Graph) -> bool:
    got = _HAS_GAMMA.get(g)
    if got is None:
        got = _HAS_GAMMA[g] = any(_compat.primitive_name(e) in _KINDS or (_compat.primitive_name(e) in (
            "jit", "pjit") and _compat.library_function(e) == "betaln") for e in g.eqns)
    return got


def _shape(atom: Any) -> tuple[int, ...]:
    return tuple(_compat.aval(atom).shape)


def _fits(shape: tuple[int, ...], out: tuple[int, ...]) -> bool:
    """A scalar, or the same rank with each axis equal or 1 (a jaxpr's implicit broadcasting)."""
    return shape == () or (len(shape) == len(out) and all(s in (1, o) for s, o in zip(shape, out)))


def _constant(g: Graph, atom: Any) -> Fraction | None:
    """The exact value of a scalar constant (a literal or a captured constant), else None."""
    if _compat.is_literal(atom):
        v = _compat.literal_value(atom)
    elif atom in g.const_values and not _compat.is_tracer(g.const_values[atom]):
        v = g.const_values[atom]
    else:
        return None
    try:
        arr = np.asarray(v)
    except (TypeError, ValueError):
        return None
    if arr.size != 1 or not is_real_kind(arr.dtype):
        return None
    val = float(arr.reshape(()))
    return Fraction(val) if np.isfinite(val) else None


def _through_glue(g: Graph, atom: Any, swallow: set[int] | None) -> Any:
    """``atom`` with shape-keeping glue (or a scalar's broadcast) seen through. With ``swallow``, only
    glue whose result has no other use is passed, and it is recorded there."""
    for _ in range(8):
        prod = g.producer_eqn(atom)
        if prod is None:
            return atom
        j, eqn = prod
        if j in g.claimed or not g.is_glue(eqn) or len(eqn.invars) != 1:
            return atom
        inner = eqn.invars[0]
        if _shape(inner) not in ((), _shape(atom)):
            return atom
        if swallow is not None:
            if g.uses[atom] != 1:
                return atom
            swallow.add(j)
        atom = inner
    return atom


def _linear(g: Graph, atom: Any, depth: int = 0) -> Linear:
    """``atom`` as a linear form over the program's variables with exact rational coefficients."""
    c = _constant(g, atom)
    if c is not None:
        return {None: c}
    atom = _through_glue(g, atom, None)
    c = _constant(g, atom)
    if c is not None:
        return {None: c}
    prod = g.producer_eqn(atom)
    if prod is None or depth > 12:
        return {atom: Fraction(1)}
    eqn = prod[1]
    name = _compat.primitive_name(eqn)
    ins = eqn.invars
    if name in ("add", "sub") and len(ins) == 2:
        left, right = _linear(g, ins[0], depth + 1), _linear(g, ins[1], depth + 1)
        return _combine(left, right, 1 if name == "add" else -1)
    if name == "neg":
        return _scale(_linear(g, ins[0], depth + 1), Fraction(-1))
    if name == "mul" and len(ins) == 2:
        for k in (0, 1):
            c = _constant(g, ins[k])
            if c is not None:
                return _scale(_linear(g, ins[1 - k], depth + 1), c)
    if name == "div" and len(ins) == 2:
        c = _constant(g, ins[1])
        if c is not None and c != 0:
            return _scale(_linear(g, ins[0], depth + 1), 1 / c)
    return {atom: Fraction(1)}


def _combine(left: Linear, right: Linear, sign: int) -> Linear:
    out = dict(left)
    for k, v in right.items():
        out[k] = out.get(k, Fraction(0)) + sign * v
    return {k: v for k, v in out.items() if v != 0}


def _scale(form: Linear, c: Fraction) -> Linear:
    return {k: v * c for k, v in form.items() if v * c != 0}


def _variables(form: Linear) -> set[Any]:
    return {k for k in form if k is not None}


def _betaln_call(g: Graph, e: Any, out_shape: tuple[int, ...]) -> bool:
    """Whether ``e`` is a ``jax.scipy.special.betaln`` call (jax 0.12.1's ``jit`` of ``_betaln``) of
    real operands that broadcast to the tree's shape."""
    return (_compat.primitive_name(e) in ("jit", "pjit") and len(e.invars) == 2 and len(e.outvars) == 1
            and _compat.library_function(e) == "betaln"
            and all(_fits(_shape(a), out_shape) for a in e.invars)
            and jnp.issubdtype(_compat.aval(e.outvars[0]).dtype, jnp.floating))


def _walk(g: Graph, root: int) -> tuple[list[Any], list[Any], set[int], list[Any]] | None:
    """The signed terms of the add/sub/neg tree at ``root``: ``(gamma, others, swallowed, calls)``,
    gamma terms as ``(kind, sign, argument, eqn index)``, others as ``(sign, atom)``. A ``betaln(P, Q)``
    call is read as ``lgamma(P) + lgamma(Q) - lgamma(P + Q)`` (the last term's argument ``("sum", P,
    Q)``), recorded in ``calls`` as ``(sign, result, index of its first term)``; the call stays in the
    program (its result is the written value where its arguments are not positive)."""
    gamma: list[Any] = []
    others: list[Any] = []
    calls: list[Any] = []
    swallow: set[int] = {root}
    out_shape = _shape(g.eqns[root].outvars[0])
    todo: list[tuple[Any, int]] = []
    eqn = g.eqns[root]
    name = _compat.primitive_name(eqn)
    if name == "neg":
        return None
    todo.append((eqn.invars[0], 1))
    todo.append((eqn.invars[1], 1 if name == "add" else -1))
    nodes = 1
    while todo:
        atom, sign = todo.pop()
        if not _fits(_shape(atom), out_shape):
            return None
        inner = _through_glue(g, atom, swallow)
        prod = None if _compat.is_literal(inner) else g.producer_eqn(inner)
        if prod is None or prod[0] in g.claimed:
            others.append((sign, atom))
            continue
        j, e = prod
        kind = _compat.primitive_name(e)
        private = g.uses[inner] == 1
        if kind in _TREE and private and nodes < _MAX_NODES:
            nodes += 1
            swallow.add(j)
            if kind == "neg":
                todo.append((e.invars[0], -sign))
            else:
                todo.append((e.invars[0], sign))
                todo.append((e.invars[1], sign if kind == "add" else -sign))
        elif kind in _KINDS and len(e.invars) == 1:
            if private:
                swallow.add(j)
            gamma.append((kind, sign, e.invars[0], j))
        elif _betaln_call(g, e, out_shape):
            calls.append((sign, inner, len(gamma)))
            p, q = e.invars
            gamma += [("lgamma", sign, p, None), ("lgamma", sign, q, None),
                      ("lgamma", -sign, ("sum", p, q), None)]
        else:
            others.append((sign, atom))
    return gamma, others, swallow, calls


def _candidates(g: Graph, gamma: list[Any], forms: list[Linear],
                calls: list[Any]) -> list[tuple[Any, ...]]:
    """Pairs ``("pair", p, q, d)`` (sign_p = -sign_q, value sign_p * diff(arg_q, d)) and triples
    ``("beta", p, q, r, c)``; d and c as linear forms. A betaln call's own three terms are the triple
    ``("call", p, p + 1, p + 2, ci)`` (its own result); terms of calls pair also where d is 0 (the
    ``lgamma(b)`` of ``betaln(a + c, b) - betaln(a, b)``)."""
    out: list[tuple[Any, ...]] = []
    n = len(gamma)
    read = {c[2] + m for c in calls for m in range(3)}
    for p in range(n):
        for q in range(n):
            kp, sp, _, _ = gamma[p]
            kq, sq, _, _ = gamma[q]
            if p == q or kp != kq or sp != 1 or sq != -1:
                continue
            d = _combine(forms[p], forms[q], -1)
            if not d and {p, q} & read:
                out.append(("pair", p, q, d))
                continue
            if not d or _variables(d) >= _variables(forms[p]) | _variables(forms[q]):
                continue  # nothing cancels (or equal arguments: the compiler's business)
            out.append(("pair", p, q, d))
    for p in range(n):
        for q in range(p + 1, n):
            for r in range(n):
                kinds = {gamma[p][0], gamma[q][0], gamma[r][0]}
                if kinds != {"lgamma"} or r in (p, q):
                    continue
                if not gamma[p][1] == gamma[q][1] == -gamma[r][1]:
                    continue
                c = _combine(_combine(forms[p], forms[q], 1), forms[r], -1)
                if _variables(c) or abs(c.get(None, Fraction(0))) > 8:
                    continue
                own = [ci for ci, call in enumerate(calls) if (p, q, r) == (call[2], call[2] + 1,
                                                                              call[2] + 2)]
                out.append(("call", p, q, r, own[0]) if own else ("beta", p, q, r, c))
    return out[:_MAX_CANDIDATES]


def _match_gamma_sum(g: Graph, i: int) -> Match | None:
    eqn = g.eqns[i]
    if _compat.primitive_name(eqn) not in ("add", "sub") or not _has_gamma(g):
        return None
    out_aval = _compat.aval(eqn.outvars[0])
    if not jnp.issubdtype(out_aval.dtype, jnp.floating):
        return None
    walked = _walk(g, i)
    if walked is None:
        return None
    gamma, others, swallow, calls = walked
    if len(gamma) < 2 or len(gamma) > _MAX_TERMS:
        return None
    forms = [_combine(_linear(g, arg[1]), _linear(g, arg[2]), 1) if isinstance(arg, tuple)
             else _linear(g, arg) for _, _, arg, _ in gamma]
    cands = _candidates(g, gamma, forms, calls)
    if calls and any(kind != "lgamma" for kind, _, _, _ in gamma):
        return None  # a call among digamma terms: their derivative (trigamma) is not paired here
    source = {c[2] + m: ("call", ci) for ci, c in enumerate(calls) for m in range(3)}
    if not any(c[0] != "call" and len({source.get(t, t) for t in c[1:-1]}) > 1 for c in cands):
        return None  # nothing pairs across the calls and terms: each call is JAX's own betaln
    operands: list[Any] = []
    index: dict[Any, int] = {}

    def ref(atom: Any) -> int:
        key = id(atom) if _compat.is_literal(atom) else atom
        if key not in index:
            index[key] = len(operands)
            operands.append(atom)
        return index[key]

    def lin(form: Linear) -> tuple[tuple[tuple[int, float], ...], float]:
        return (tuple((ref(k), float(v)) for k, v in form.items() if k is not None),
                float(form.get(None, Fraction(0))))

    plan_terms = tuple((kind, sign, None if isinstance(arg, tuple) else ref(arg), lin(form))
                       for (kind, sign, arg, _), form in zip(gamma, forms))
    plan_others = tuple((sign, ref(atom)) for sign, atom in others)
    plan_cands = tuple(c if c[0] == "call" else (c[0], *c[1:-1], lin(c[-1])) for c in cands)
    plan_calls = tuple((sign, ref(out), first) for sign, out, first in calls)
    captures: dict[str, Any] = {f"o{k}": a for k, a in enumerate(operands)}
    atoms = dict(captures)
    for k in [k for k, a in atoms.items() if _compat.is_literal(a)]:
        captures[k] = _compat.literal_value(atoms.pop(k))
    captures["plan"] = (plan_terms, plan_others, plan_cands, plan_calls, len(operands))
    return Match(i, captures, atoms, swallow)


def _gamma_sum(plan: Any, **ops: Any) -> Any:
    """sum of ±lgamma(A_i) (± digamma) = sum over groups of lgamma_difference(B, A - B) (d exact,
    symbolic) and betaln(P, Q) + lgamma_difference(R, P + Q - R) (c constant), plus the rest. A sum
    of lgamma terms alone carries its paired derivative (``forms._gamma_sum``)."""
    terms, others, cands, calls, n_ops = plan
    o = [jnp.asarray(ops[f"o{k}"]) for k in range(n_ops)]
    shape = jnp.broadcast_shapes(*(jnp.shape(v) for v in o))
    dtype = jnp.result_type(*[o[k] for _, _, k, _ in terms if k is not None])
    x = [jnp.asarray(v, dtype) for v in o]  # the derivative's operands: one floating dtype

    def full(v: Any) -> Any:
        return jnp.broadcast_to(jnp.asarray(v, dtype), shape)

    def args(xs: list[Any]) -> list[Any]:  # the program's own argument, or P + Q of a betaln call
        return [full(xs[k] if k is not None else gs.linear_value(form, xs)) for _, _, k, form in terms]

    def value(xs: list[Any]) -> Any:
        a = args(xs)
        singles = []
        for (kind, sign, _, _), v in zip(terms, a):
            v = lax.lgamma(v) if kind == "lgamma" else lax.digamma(v)
            singles.append(v if sign > 0 else -v)
        groups = []
        for cand in cands:
            if cand[0] == "pair":
                _, p, q, d = cand
                groups.append(_Group(terms[p][0], (p, q), a[q], gs.linear_value(d, xs), a[p]))
            elif cand[0] == "call":
                _, p, q, r, ci = cand
                groups.append(_Group("call", (p, q, r), full(xs[calls[ci][1]]), 0, sign=calls[ci][0]))
            else:
                _, p, q, r, c = cand
                groups.append(_Group("beta", (p, q, r), a[r], gs.linear_value(c, xs), None, a[p], a[q],
                                     terms[p][1]))
        total, mag = _groups(groups, singles, dtype)
        if not calls:
            return total
        # the calls read across only where that removes 2 bits more cancellation than the calls as
        # JAX's own (accurate) betaln values, the other terms grouped among themselves: elsewhere the
        # two differ by the forms' few ulps, and a betaln minus a betaln (a ratio of beta functions,
        # a second difference) cancels either way
        inside = {first + m for _, _, first in calls for m in range(3)}
        alone, mag0 = _groups([g for g in groups if g.kind == "call" or not set(g.members) & inside],
                              singles, dtype)
        total = jnp.where(4 * mag <= mag0, total, alone)
        # where a call's arguments are not all positive and finite: the written value (its result)
        written = sum((singles[i] for i in range(len(terms)) if i not in inside), jnp.zeros(shape, dtype))
        ok = jnp.ones(shape, bool)
        for sign, out, first in calls:
            written = written + sign * full(xs[out])
            for t in (a[first], a[first + 1]):
                ok = ok & (t > 0) & jnp.isfinite(t)
        return jnp.where(ok, total, written)

    if all(kind == "lgamma" for kind, _, _, _ in terms):
        total = gs.with_paired_derivative(
            value, args, x, [gs.Term(sign, form) for _, sign, _, form in terms],
            [gs.Call(sign, out, first, first + 1, first + 2) for sign, out, first in calls])
    else:
        total = value(x)
    for sign, k in others:
        total = total + full(o[k] if sign > 0 else -o[k])
    return total


@dataclasses.dataclass
class _Group:
    """One group's operands: a pair ``sign * diff(v, d)`` (kind "lgamma"/"digamma", sign +1: the
    positive term is the first member) or a triple ``sign * (betaln(p, q) + lgamma_difference(v, d))``."""

    kind: str
    members: tuple[int, ...]
    v: Any
    d: Any
    xa: Any = None
    p: Any = None
    q: Any = None
    sign: int = 1

    def value(self) -> Any:
        if self.kind == "call":  # a betaln call's own result
            return self.v if self.sign > 0 else -self.v
        if self.kind == "digamma":
            return _anchored(fg.digamma_difference, self.v, self.d, self.xa)
        if self.kind == "lgamma":
            out = _anchored(fg.lgamma_difference, self.v, self.d, self.xa) if not _is_zero(self.d) else 0.0
            return out if self.sign > 0 else -out
        out = fg.lgamma_difference(self.v, self.d, xa=self.xa) if not _is_zero(self.d) else 0.0
        if self.kind == "beta":
            ab = self.v if _is_zero(self.d) else None
            out = fg.betaln(self.p, self.q, ab=ab) + out
        return out if self.sign > 0 else -out

    def estimate(self) -> Any:
        """A cheap estimate of ``|value|`` for ranking (the accurate value is computed once chosen);
        inf where the form falls back to the plain sum of its terms (a non-positive argument: a betaln
        of one subtracts lgamma values of 6e5 for a result of 2e3), which removes no cancellation."""
        if self.kind == "call":
            return jnp.abs(self.v)
        d = jnp.abs(jnp.asarray(self.d, self.v.dtype))
        span = d * (jnp.abs(jnp.log(jnp.maximum(jnp.abs(self.v), jnp.abs(self.v + self.d)) + 1)) + 1)
        plain = jnp.minimum(self.v, self.v + self.d) <= 0
        if self.kind != "beta":
            return jnp.where(plain, jnp.inf, span)
        lo, hi = jnp.minimum(self.p, self.q), jnp.maximum(self.p, self.q)
        plain = plain | (lo <= 0)
        lo = jnp.maximum(jnp.abs(lo), jnp.finfo(self.v.dtype).tiny)
        return jnp.where(plain, jnp.inf, lo * (jnp.log1p(jnp.abs(hi) / lo) + 1) + span)


def _anchored(diff: Any, v: Any, d: Any, xa: Any, mask: Any = True) -> Any:
    """``diff(v, d, xa=xa)`` (f(v + d) - f(v)), anchored per element at whichever argument is smaller in
    magnitude (``-diff(xa, -d, xa=v)``): the other is anchor + d, and the anchor's rounding (a
    computed ``P + Q``) costs least where the derivative is smallest. A static d keeps its form."""
    if isinstance(d, (int, float)) or xa is None:
        return diff(v, d, xa=xa)
    flip = (jnp.abs(xa) < jnp.abs(v)) & mask
    return jnp.where(flip, -1.0, 1.0) * diff(jnp.where(flip, xa, v), jnp.where(flip, -d, d),
                                             xa=jnp.where(flip, v, xa))


def _is_zero(d: Any) -> bool:
    return isinstance(d, (int, float)) and d == 0


def _groups(groups: list[_Group], singles: list[Any], dtype: Any) -> tuple[Any, Any]:
    """The sum of the chosen groups and of the terms no group took, and the sum of their magnitudes
    (the rounding error bound, over the result's magnitude the bits the sum still cancels)."""
    n = len(singles)
    counts = [sum(t in g.members for g in groups) for t in range(n)]
    total = jnp.zeros_like(singles[0])
    mag = jnp.zeros_like(singles[0])
    if all(c <= 1 for c in counts):  # disjoint groups: all taken, no run-time choice
        taken = {t for g in groups for t in g.members}
        for v in [g.value() for g in groups] + [singles[t] for t in range(n) if t not in taken]:
            total, mag = total + v, mag + jnp.abs(v)
        return total, mag
    # groups compete: per element, greedily the group whose value is smallest against its terms
    # (the most cancellation removed); each round evaluates one group, chosen per element
    tiny = jnp.finfo(dtype).tiny
    scores = [g.estimate() / (sum(jnp.abs(singles[t]) for t in g.members) + tiny) for g in groups]
    used = [jnp.zeros(singles[0].shape, bool) for _ in range(n)]
    one = jnp.ones_like(singles[0])
    rounds: dict[str, list[dict[str, Any]]] = {"lgamma": [], "digamma": []}
    for _ in range(n // 2):
        avail = [~_any([used[t] for t in g.members]) for g in groups]
        best = jnp.argmin(jnp.stack([jnp.where(a, s, jnp.inf) for a, s in zip(avail, scores)]), axis=0)
        picks = [(best == c) & avail[c] for c in range(len(groups))]
        for c, g in enumerate(groups):
            if g.kind == "call":
                v = jnp.where(picks[c], g.value(), 0.0)
                total, mag = total + v, mag + jnp.abs(v)
        for family in ("lgamma", "digamma"):
            mine = [(c, g) for c, g in enumerate(groups)
                    if g.kind != "call" and (g.kind == "digamma") == (family == "digamma")]
            if not mine:
                continue
            safe_v = 1.0 if family == "digamma" else 2.0
            fields: dict[str, Any] = {"v": one * safe_v, "d": one * 0.0, "xa": one * safe_v,
                                      "p": one, "q": one, "sign": one, "beta": one < 0, "on": one < 0}
            for c, g in mine:
                k = picks[c]
                fields["v"] = jnp.where(k, g.v, fields["v"])
                fields["d"] = jnp.where(k, g.d, fields["d"])
                fields["xa"] = jnp.where(k, g.v + g.d if g.xa is None else g.xa, fields["xa"])
                if g.kind == "beta":
                    fields["p"] = jnp.where(k, g.p, fields["p"])
                    fields["q"] = jnp.where(k, g.q, fields["q"])
                    fields["beta"] = fields["beta"] | k
                fields["sign"] = jnp.where(k, float(g.sign), fields["sign"])
                fields["on"] = fields["on"] | k
            rounds[family].append(fields)
        for c, g in enumerate(groups):
            for t in g.members:
                used[t] = used[t] | picks[c]
    # every round's chosen group evaluated at once (stacked): one form in the program, not one per
    # round and candidate
    for family, got in rounds.items():
        if not got:
            continue
        st = {k: jnp.stack([r[k] for r in got]) for k in got[0]}
        if family == "digamma":
            val = _anchored(fg.digamma_difference, st["v"], st["d"], st["xa"])
        else:
            val = _anchored(fg.lgamma_difference, st["v"], st["d"], st["xa"], ~st["beta"])
            if any(g.kind == "beta" for g in groups):
                p = jnp.where(st["beta"], st["p"], 1.0)
                q = jnp.where(st["beta"], st["q"], 1.0)
                val = val + jnp.where(st["beta"], fg.betaln(p, q), 0.0)
        v = jnp.where(st["on"], st["sign"] * val, 0.0)
        total, mag = total + jnp.sum(v, axis=0), mag + jnp.sum(jnp.abs(v), axis=0)
    for t in range(n):
        v = jnp.where(used[t], 0.0, singles[t])
        total, mag = total + v, mag + jnp.abs(v)
    return total, mag


def _any(masks: list[Any]) -> Any:
    out = masks[0]
    for m in masks[1:]:
        out = out | m
    return out


LGAMMA_SUM = Rule(
    "lgamma_sum", None, _gamma_sum, matcher=_match_gamma_sum, roots=frozenset({"add", "sub"}),
    example=lambda n, k: (lax.lgamma(n + 1.0) - lax.lgamma(k + 1.0) - lax.lgamma(n - k + 1.0)),
    example_shapes=((8,), (8,)), example_domain=(1.0, 1e6))

def _lgamma_near_one(k: Any, c: float) -> Any:
    """lgamma(c + k), c = 1 or 2 (lgamma's zeros), through ``forms.lgamma1p``: ``c + k`` rounds to
    c for tiny k and lgamma of it is 0, where the value is -gamma·k (c = 1) or (1 - gamma)·k (c = 2): a log
    binomial coefficient's ``lgamma(k + 1)`` at k = 1e-20. The problem is well conditioned in k
    there (relative condition number about 1); lgamma of the rounded sum is not."""
    if c == 1.0:
        return fg.lgamma1p(k)
    # Γ(2+k) = (1+k)Γ(1+k) near k = 0 only: beyond the series' range lgamma1p is gammaln(1 + k), and
    # log1p(k) + gammaln(1 + k) cancels (2 bits more than gammaln(2 + k) at k = -0.31, the soundness
    # check on JAX 0.10 found it), so there the sum is taken as written
    from jax.scipy.special import gammaln

    near = jnp.abs(k) < fg.SERIES_BELOW
    kn = jnp.where(near, k, jnp.zeros_like(k))  # each branch reads a safe input
    return jnp.where(near, jnp.log1p(kn) + fg.lgamma1p(kn), gammaln(2 + jnp.where(near, 1.0, k)))


_NEAR_ONE = const(lambda v: v in (1.0, 2.0), name="c")


def _alone(g: Graph, i: int) -> bool:
    """The only lgamma/digamma of the program: sums of several are lgamma_sum's (the structural
    phase runs after this pattern rule, and a term this rule took would be hidden from it)."""
    got = _ALONE.get(g)
    if got is None:
        got = _ALONE[g] = sum(_compat.primitive_name(e) in _KINDS for e in g.eqns) == 1
    return got

#: ``lgamma(1 + k)`` and ``lgamma(2 + k)`` (either order): lgamma at its zeros, see above.
LGAMMA_NEAR_ONE = Rule(
    "lgamma_near_one", op("lgamma", any_of(op("add", var("k"), _NEAR_ONE))), _lgamma_near_one,
    gate=_alone, example=lambda k: lax.lgamma(k + 1.0), example_domain=(-0.5, 0.5))

def _log_beta_multivariate(a: Any, axes: tuple[int, ...], axes2: Any, sign: int) -> Any:
    """sum(lgamma(a)) - lgamma(sum(a)) over the same axes, as a telescoping sum of betaln terms."""
    out = fg.log_beta_multivariate(a, axes)
    return out if sign > 0 else -out


def _same_axes(m: Match) -> bool:
    return (m.captures["axes"] == m.captures["axes2"]
            and jnp.issubdtype(m.aval("a").dtype, jnp.floating) and len(m.captures["axes"]) > 0)


_SUM_LGAMMA = op("reduce_sum", op("lgamma", var("a")), axes=param("axes"))
_LGAMMA_SUM = op("lgamma", op("reduce_sum", var("a"), axes=param("axes2")))

#: A Dirichlet's (or a Dirichlet-multinomial's) log-normaliser, ``sum(lgamma(alpha)) -
#: lgamma(sum(alpha))`` and its negation: a sum of lgamma terms over an axis cancels against the lgamma of
#: the sum where one concentration is large (float32 loses 15 bits at [1e6, 0.5, 2, 0.1]), which the add/sub
#: trees lgamma_sum reads cannot see (the terms are one reduction).
LOG_BETA_MULTIVARIATE = Rule(
    "log_beta_multivariate",
    any_of(fixed(op("sub", _SUM_LGAMMA, _LGAMMA_SUM), sign=1),
           fixed(op("sub", _LGAMMA_SUM, _SUM_LGAMMA), sign=-1)),
    _log_beta_multivariate, where=_same_axes,
    example=lambda a: jnp.sum(lax.lgamma(a)) - lax.lgamma(jnp.sum(a)), example_domain=(0.0, 1e6),
    examples=(lambda a: lax.lgamma(jnp.sum(a, -1)) - jnp.sum(lax.lgamma(a), -1),),
)

#: The rules of this module, in catalogue order.
GAMMA_RULES: tuple[Rule, ...] = (LGAMMA_NEAR_ONE, LOG_BETA_MULTIVARIATE, LGAMMA_SUM)
