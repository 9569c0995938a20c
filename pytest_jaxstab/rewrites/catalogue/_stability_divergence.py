"""Stability rules for divergences whose terms cancel to second order (Bregman divergences).

``exp(d) - 1 - d``, ``d - log1p(d)``, ``r - 1 - log(r)`` (Itakura-Saito; the Gaussian KL in its
variance ratio) and the Bernoulli KL ``p log(p/q) + (1-p) log((1-p)/(1-q))`` are each a small
quantity (``d²/2`` near ``d = 0``) written as a sum of large terms that agree to second order.

Users spread these terms over a longer sum: the KL between diagonal Gaussians
``0.5*(exp(lv1 - lv2) + (mu1 - mu2)**2/exp(lv2) - 1 + lv2 - lv1)``, the VAE's
``-0.5*sum(1 + lv - mu**2 - exp(lv))``, ``log(s2/s1) + (s1**2 + d**2)/(2*s2**2) - 0.5``. A pattern
cannot say "somewhere in this sum", so ``bregman`` is a structural rule: it reads a sum (``add``,
``sub``, ``neg``, constant factors and divisors, quotients distributed over their numerator's terms)
as a linear combination of leaves, and looks for a leaf ``c·r`` whose logarithm ``log r`` (a linear
form: ``log(a/b) = log a - log b``, ``log(exp(u)) = u``, ``log(x**2) = 2 log x``) appears in the sum
as ``-c·log r`` together with the constant ``-c``. Those three parts become ``c·(r - 1 - log r)``
computed without cancellation (``expm1mx(log r)`` where ``r = exp(u)``, ``-log1pmx(r - 1)`` with
``r - 1 = (a - b)/b`` where ``r = a/b``); the other leaves are summed as they were. The identity
holds term by term over the reals, so the value is unchanged; only the rounding improves. Forms
that only look alike (``exp(d) - 1 + d``, ``r - 1 - log(s)``, a missing constant) keep their terms.

It runs in the structural phase (after the pattern rules), so it also reads their results:
``expm1(d) - d``, ``x * exp(-b)`` for ``x / exp(b)``, ``exp(2a)`` for ``exp(a)**2``.

``bernoulli_kl`` is a pattern rule (the sum has exactly two products).
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ... import _compat
from ..._primitives import GLUE
from ..engine._match import Graph, Match
from ..engine._pattern import any_of, const, op, var
from ..engine._rule import Rule
from ..forms import _divergence as _fd
from ..forms import _stats as _fs
from ._divergence_read import LINEAR as _LINEAR
from ._divergence_read import MAX_DEPTH as _MAX_DEPTH
from ._divergence_read import _add, _close, _constant, _Reader, _scale, _through
from ._stability_written import _named

__all__ = ["BERNOULLI_KL", "BREGMAN", "DIVERGENCE_RULES"]

_XLOGY = _named("xlogy")
_SPECIAL = frozenset({"exp", "expm1", "log", "log1p"})
# a sum worth reading holds one of these leaves
_LEAVES = _SPECIAL | {"mul", "custom_jvp_call", "integer_pow", "square"}


# ------------------------------------------------------------------------------ finding the parts
def _find(rd: _Reader, terms: dict[Any, float], const: float) -> Any:
    """The first Bregman triple in a sum: ``(kind, c, r, consumed_terms, needed_const)`` or None."""
    logs: list[tuple[Any, float, Any]] = []  # (term, coefficient, log form of its argument)
    for t, v in terms.items():
        if t[0] == "v":
            name, e = rd.head(t[1])
            if name == "log":
                form = rd.log_atom(e.invars[0])
                if form is not None:
                    logs.append((t, v, form))
    for t, c in terms.items():
        name, e = rd.head(t[1]) if t[0] == "v" else (None, None)
        if name == "log":
            continue  # the -c·log r side
        if name in ("expm1", "log1p") and e is not None:  # c·expm1(u) - c·u, c·log1p(u) - c·u
            kind = "expm1mx" if name == "expm1" else "log1pmx"
            arg = rd.lin(e.invars[0])
            need = None if arg is None else _scale(arg, -c)
            used = None if need is None else _supply(terms, logs, need, allow_logs=False)
            if used is None or need is None or not _enough(need[1], const, c):
                continue
            return (kind, c, arg, {t, *used[0]}, need[1])
        xy = _xlog(rd, t)
        if xy is not None:  # c·x·log(x/y) - c·x + c·y
            x_t, y_t = ("v", xy[0]), ("v", xy[1])
            if _close(terms.get(x_t, 0.0), -c) and _close(terms.get(y_t, 0.0), c):
                return ("poisson", c, xy, {t, x_t, y_t}, 0.0)
            continue
        lr = rd.log_form(t)  # c·r with -c·log r and -c elsewhere in the sum
        if lr is None or not lr[0]:
            continue
        need = _scale(lr, -c)
        used = _supply({k: v for k, v in terms.items() if k != t}, logs, need, allow_logs=True)
        if used is None:
            continue
        need_const = -c + (need[1] - used[1])
        if not _enough(need_const, const, c):
            continue
        kind = "expm1mx" if all(k[0] != "log" for k in lr[0]) else "ratio"
        return (kind, c, lr if kind == "expm1mx" else t, {t, *used[0]}, need_const)
    return None


def _xlog(rd: _Reader, t: Any) -> tuple[Any, Any] | None:
    """``(x, y)`` (atoms seen through glue) where the leaf is ``x·log(x/y)``, ``x·(log x - log y)``
    or ``xlogy(x, x/y)``; else None."""
    if t[0] != "v":
        return None
    name, e = rd.head(t[1])
    if e is None:
        return None
    if name == "mul":
        pairs = [(e.invars[0], e.invars[1]), (e.invars[1], e.invars[0])]
    elif _is_xlogy(e):
        pairs = [(e.invars[0], None)]
        ratio = rd.log_atom(e.invars[1])
        return _xy(rd, e.invars[0], ratio)
    else:
        return None
    for x, other in pairs:
        form = rd.lin(other)
        if form is None or form[1] != 0.0:
            continue
        total: Any = ({}, 0.0)
        for k, v in form[0].items():
            n2, e2 = rd.head(k[1]) if k[0] == "v" else (None, None)
            inner = rd.log_atom(e2.invars[0]) if n2 == "log" and e2 is not None else None
            if inner is None:
                total = None
                break
            total = _add(total, _scale(inner, v), 1.0)
        got = _xy(rd, x, total)
        if got is not None:
            return got
    return None


def _xy(rd: _Reader, x: Any, form: Any) -> tuple[Any, Any] | None:
    """``(x, y)`` where the log form is exactly ``log x - log y``."""
    if form is None or form[1] != 0.0 or len(form[0]) != 2:
        return None
    base = _through(rd.g, x)[0]
    if form[0].get(("log", base)) != 1.0:
        return None
    (y_key,) = [k for k, v in form[0].items() if k != ("log", base) and v == -1.0] or [None]
    return None if y_key is None or y_key[0] != "log" else (base, y_key[1])


def _find_square(rd: _Reader, terms: dict[Any, float]) -> Any:
    """A Gaussian NLL's ``c·(s·exp(b))²`` or ``c·s²·exp(b)`` with |c| < 1 in a sum: the square may
    overflow where ``c`` times it does not (``0.5*(lv + big)`` overflows inside the parentheses
    within a factor 2 of the float max). ``("square", c, (s, b or None, x))``."""
    for t, c in terms.items():
        if t[0] != "v" or not 0 < abs(c) < 1:
            continue
        e = _through(rd.g, t[1])[2]
        if e is None or not _exp_square(rd.g, e):
            continue
        base = _square_eqn_base(e)
        if base is not None:
            return ("square", c, ("x", base), {t}, 0.0)
        for k in (0, 1):
            s_base = _square_operand(rd.g, e.invars[k])
            ename, ee = rd.head(e.invars[1 - k])
            if s_base is not None and ename == "exp" and ee is not None:
                return ("square", c, ("se", s_base, ee.invars[0]), {t}, 0.0)
    return None


def _enough(need: float, const: float, c: float) -> bool:
    """The sum's constant holds the needed one (all of it, or more of the same sign)."""
    if abs(need) <= 1e-12 * abs(c):
        return True
    return _close(need, const) or (need * const > 0 and abs(const) >= abs(need))


def _supply(terms: dict[Any, float], logs: list[Any], need: Any, allow_logs: bool) -> Any:
    """The terms of the sum that make up ``need`` exactly: plain terms with the needed coefficient,
    and (``allow_logs``) log leaves whose expansion lies in ``need``'s keys. ``(used, const)``:
    the terms consumed and the constant their log expansions contribute; None if not exact."""
    want = dict(need[0])
    used: set[Any] = set()
    got_const = 0.0
    if allow_logs:
        for t, v, form in logs:
            if t in terms and form[0] and all(k in want for k in form[0]):
                for k, w in form[0].items():
                    want[k] = want[k] - v * w
                got_const += v * form[1]
                used.add(t)
    for k, w in list(want.items()):
        if abs(w) <= 1e-12 * max(1.0, abs(need[0].get(k, 0.0))):
            continue
        if k[0] == "log" or k not in terms or not _close(terms[k], w) or k in used:
            return None
        used.add(k)
    if not used:
        return None
    return used, got_const


# ------------------------------------------------------------------------------ the match
def _private(g: Graph, cand: set[int], root: int, operands: Any) -> set[int]:
    """The largest subset of ``cand`` whose outputs are used only inside it or by the root, and are
    none of the replacement's ``operands`` (those stay computed)."""
    cand = {j for j in cand if j != root and not any(v in operands for v in g.eqns[j].outvars)}
    while True:
        inside: dict[Any, int] = {}
        for j in cand | {root}:
            for a in g.eqns[j].invars:
                if not _compat.is_literal(a):
                    inside[a] = inside.get(a, 0) + 1
        drop = {j for j in cand if any(g.uses[v] != inside.get(v, 0) for v in g.eqns[j].outvars)}
        if not drop:
            return cand
        cand -= drop




def _is_xlogy(e: Any) -> bool:
    return (_compat.primitive_name(e) == "custom_jvp_call" and len(e.invars) == 2
            and _XLOGY(e.params.get("call_jaxpr")))


def _exp_square(g: Graph, e: Any) -> bool:
    """``e`` is ``(s·exp(b))²`` or ``s² · exp(b)``: a square scaled by an exponential (a Gaussian
    NLL's ``(x - mu)**2 / exp(lv)``, as ``div_exp`` leaves it or as written)."""
    name = _compat.primitive_name(e)
    if name == "mul" and len(e.invars) == 2 and e.invars[0] is not e.invars[1]:
        if "exp" not in (_prim(g, e.invars[0]), _prim(g, e.invars[1])):
            return False
        return any(_square_operand(g, v) is not None for v in e.invars)
    base = _square_eqn_base(e)
    if base is None or _prim(g, base) != "mul":
        return False
    return any(_prim(g, v) in ("exp", "min") for v in g.eqns[g.producer[base]].invars)


def _prim(g: Graph, v: Any) -> str | None:
    """The primitive producing ``v`` (no glue seen through: the cheap look of the gate)."""
    if _compat.is_literal(v):
        return None
    j = g.producer.get(v)
    return None if j is None else _compat.primitive_name(g.eqns[j])


def _square_eqn_base(e: Any) -> Any:
    name = _compat.primitive_name(e)
    if (name == "integer_pow" and e.params.get("y") == 2) or name == "square":
        return e.invars[0]
    if name == "mul" and len(e.invars) == 2 and e.invars[0] is e.invars[1]:
        return e.invars[0]
    return None


def _square_operand(g: Graph, v: Any) -> Any:
    if _compat.is_literal(v):
        return None
    j = g.producer.get(v)
    return None if j is None else _square_eqn_base(g.eqns[j])


def _leaf_depths(g: Graph) -> dict[Any, float]:
    """For every value of ``g``: how many sums, differences, scalings and glue lie between it and the
    nearest leaf the gate looks for (0 at the leaf; absent where none is reachable). One sweep over
    the program in order, once per graph, where reading each root's operands down again cost the pass
    a walk per equation (issue 48)."""
    depths = g.memo.get("bregman_depths")
    if depths is not None:
        return depths
    depths = g.memo["bregman_depths"] = {}
    for e in g.eqns:
        if len(e.outvars) != 1:
            continue
        name = _compat.primitive_name(e)
        if name in _SPECIAL or name == "div" or _is_xlogy(e) or _exp_square(g, e):
            depths[e.outvars[0]] = 0
        elif name in _LINEAR or name in GLUE or name == "convert_element_type":
            below = [depths[v] for v in e.invars if not _compat.is_literal(v) and v in depths]
            if below:
                depths[e.outvars[0]] = min(below) + 1
    return depths


_SUM_ROOTS = ("add", "sub", "mul", "neg", "div")


def _match(g: Graph, i: int) -> Match | None:
    eqn = g.eqns[i]
    name = _compat.primitive_name(eqn)
    if name not in _SUM_ROOTS or len(eqn.outvars) != 1:
        return None
    if name == "div" and _constant(g, eqn.invars[1]) is None:
        return None
    # the gate: whether a sum read from an operand can hold an exp, expm1, log, log1p or quotient leaf
    # within the reader's depth (most sums of a program hold none, and are refused here cheaply)
    depths, reach = _leaf_depths(g), _MAX_DEPTH + 1
    if not any(depths.get(a, math.inf) <= reach for a in eqn.invars if not _compat.is_literal(a)):
        return None
    if not jnp.issubdtype(_compat.aval(eqn.outvars[0]).dtype, jnp.floating):
        return None
    rd = _Reader(g)
    form = rd.lin(eqn.outvars[0])
    if form is None or len(form[0]) < 2:
        return None
    if not any(t[0] == "q" or rd.head(t[1])[0] in _LEAVES for t in form[0]):
        return None
    found = _find(rd, *form) or _find_square(rd, form[0])
    if found is None:
        return None
    kind, c, r, consumed, need_const = found
    rest = {t: v for t, v in form[0].items() if t not in consumed}
    atoms: dict[str, Any] = {}
    index: dict[Any, str] = {}

    def ref(atom: Any) -> str:
        if atom not in index:
            index[atom] = f"v{len(index)}"
            atoms[index[atom]] = atom
        return index[atom]

    def enc_term(t: Any) -> Any:
        if t is None:
            return None
        if t[0] == "v":
            return ("v", ref(t[1]))
        if t[0] == "q":
            return ("q", enc_term(t[1]), ref(t[2]))
        return ("log", ref(t[1]))

    def enc_lin(f: Any) -> Any:
        return (tuple((v, enc_term(t)) for t, v in f[0].items()), f[1])

    if kind == "ratio":
        special = ("ratio", c, _ratio_plan(rd, r, ref))
    elif kind == "poisson":
        special = ("poisson", c, (ref(r[0]), ref(r[1])))
    elif kind == "square":
        special = ("square", c, tuple(ref(a) if k else a for k, a in enumerate(r)))
    else:
        special = (kind, c, enc_lin(r))
    plan = (special, enc_lin((rest, form[1] - need_const)))
    rd.visited.add(i)
    for t in consumed:
        if t[0] == "v":
            _, j, _ = _through(g, t[1])
            if j is not None and j not in g.claimed:
                rd.visited.add(j)
    swallowed = _private(g, rd.visited, i, set(atoms.values()))
    captures: dict[str, Any] = dict(atoms)
    for k in [k for k, a in atoms.items() if _compat.is_literal(a)]:
        captures[k] = _compat.literal_value(atoms.pop(k))
    captures["plan"] = plan
    return Match(i, captures, atoms, swallowed)


def _square_base(rd: _Reader, atom: Any) -> Any:
    """``x`` where ``atom`` is ``x**2`` (``integer_pow``, ``square``, ``x*x``), else None."""
    name, e = rd.head(atom)
    if e is None:
        return None
    if (name == "integer_pow" and e.params.get("y") == 2) or name == "square":
        return e.invars[0]
    if name == "mul" and e.invars[0] is e.invars[1]:
        return e.invars[0]
    return None


def _ratio_plan(rd: _Reader, t: Any, ref: Any) -> Any:
    """How to form ``r - 1`` for the leaf ``t``: ``("q", num, den)`` with num, den each ``("sq", x)``
    (a square: the difference factors) or ``("v", x)``; ``("v", r)`` for a leaf that is no quotient."""
    def side(atom: Any) -> Any:
        base = _square_base(rd, atom)
        return ("v", ref(atom)) if base is None else ("sq", ref(base))

    def quotient(atom: Any) -> Any:
        name, e = rd.head(atom)
        if name == "div":
            return ("q", side(e.invars[0]), side(e.invars[1]))
        base = _square_base(rd, atom)
        if base is not None and rd.head(base)[0] == "div":  # (a/b)**2: torch's var_ratio
            e2 = rd.head(base)[1]
            return ("q", ("sq", ref(e2.invars[0])), ("sq", ref(e2.invars[1])))
        return None

    if t[0] == "q" and t[1] is not None and t[1][0] == "v":
        return ("q", side(t[1][1]), side(t[2]))
    if t[0] == "v":
        got = quotient(t[1])
        return got if got is not None else ("v", ref(t[1]))
    raise ValueError("unreachable: a ratio leaf is a quotient or a leaf")


def _value(kw: dict[str, Any], t: Any) -> Any:
    if t[0] == "v":
        return kw[t[1]]
    if t[0] == "q":
        return (1.0 if t[1] is None else _value(kw, t[1])) / kw[t[2]]
    if t[0] == "sq":
        return jnp.square(kw[t[1]])
    return jnp.log(kw[t[1]])


def _linear_value(kw: dict[str, Any], f: Any) -> Any:
    out: Any = None
    for v, t in f[0]:
        x = _value(kw, t)
        x = x if v == 1.0 else (-x if v == -1.0 else v * x)
        out = x if out is None else out + x
    if f[1] != 0.0 or out is None:
        out = f[1] if out is None else out + f[1]
    return out


def _itakura_saito(kw: dict[str, Any], plan: Any) -> Any:
    """r - 1 - log r: ``-log1pmx(t)`` with ``t = r - 1`` formed without cancellation for r >= 1/2;
    below, as written from r itself (log1p near t = -1 would amplify t's rounding; the terms no
    longer cancel there), with log(a) - log(b) where a/b underflows."""
    if plan[0] == "v":
        r = kw[plan[1]]
        t, log_r = r - 1, None
    else:
        _, num, den = plan
        a, d = _value(kw, num), _value(kw, den)
        if num[0] == "sq" and den[0] == "sq":  # (x² - y²)/y² = ((x - y)/y)·((x + y)/y), no x² overflow
            x, y = kw[num[1]], kw[den[1]]
            t = ((x - y) / y) * ((x + y) / y)
            r = jnp.square(x / y)
        else:
            t = (a - d) / d
            r = a / d
        tiny = jnp.finfo(jnp.result_type(r)).tiny
        log_r = jnp.where(r < tiny, jnp.log(a) - jnp.log(d), jnp.log(jnp.maximum(r, tiny)))
    low = t < -0.5
    near = -_fd.log1pmx(jnp.where(low, jnp.zeros_like(t), t))
    rs = jnp.where(low, r, jnp.full_like(r, 0.25))
    far = rs - 1 - (jnp.log(rs) if log_r is None else jnp.where(low, log_r, jnp.log(rs)))
    return jnp.where(low, far, near)


def _exponent(kw: dict[str, Any], arg: Any) -> Any:
    """``expm1mx`` of a linear form; ``k·(a - b)`` (k a power of two) with the rounding error of the
    difference carried (TwoSum): exp(hi + lo) = exp(hi)·(1 + lo); without it exp(lv1 - lv2) is off
    by the difference's rounding, up to 88·2^-24 relative in float32."""
    (terms, const) = arg
    if const == 0.0 and len(terms) == 2 and terms[0][0] == -terms[1][0]:
        k = abs(terms[0][0])
        if k > 0 and math.frexp(k)[0] == 0.5:
            sign = 1.0 if terms[0][0] > 0 else -1.0
            a, b = _value(kw, terms[0][1]), _value(kw, terms[1][1])
            c = -b
            hi = a + c
            bb = hi - a
            lo = (a - (hi - bb)) + (c - bb)
            hi, lo = (sign * k) * hi, (sign * k) * lo
            # where exp(hi) overflows the result is inf already: lo·inf would add a NaN
            # (and where the difference itself overflows, lo is inf - inf)
            e = jnp.expm1(hi)
            ok = jnp.isfinite(e) & jnp.isfinite(lo)
            carry = jnp.where(ok, jnp.where(ok, lo, 0.0) * jnp.where(ok, e, 0.0), 0.0)
            return _fd.expm1mx(hi) + carry
    return _fd.expm1mx(_linear_value(kw, arg))


def _scaled_square(x: Any, c: float) -> Any:
    """c·x² for |c| < 1 as ``sign(c)·(x·sqrt|c|)²`` where x² overflows (the value elsewhere as
    written, bit for bit)."""
    limit = float(np.sqrt(np.finfo(np.dtype(jnp.result_type(x))).max))
    big = jnp.abs(x) >= limit
    xs = jnp.where(big, x, jnp.zeros_like(x))
    scaled = math.copysign(1.0, c) * jnp.square(xs * math.sqrt(abs(c)))
    return jnp.where(big, scaled, c * jnp.square(x))


def _bregman(plan: Any, **kw: Any) -> Any:
    """c·exp(u) - c - c·u = c·expm1mx(u);  c·expm1(u) - c·u = c·expm1mx(u);
    c·log1p(t) - c·t = c·log1pmx(t);  c·r - c - c·log r = -c·log1pmx(r - 1), r - 1 = (a - b)/b
    for r = a/b (= (x - y)(x + y)/y² for r = x²/y²): the second-order remainder of a Bregman
    divergence computed directly; the sum's other terms are added as they were."""
    (kind, c, arg), rest = plan
    if kind == "expm1mx":
        part = _exponent(kw, arg)
    elif kind == "log1pmx":
        part = _fd.log1pmx(_linear_value(kw, arg))
    elif kind == "poisson":
        part = _fd.poisson_deviance(kw[arg[0]], kw[arg[1]])
    elif kind == "square":
        base = kw[arg[1]] if arg[0] == "x" else kw[arg[1]] * _fs._finite_exp(0.5 * kw[arg[2]])
        return _scaled_square(base, c) + _linear_value(kw, rest)
    else:
        part = _itakura_saito(kw, arg)
    part = part if c == 1.0 else c * part
    if not rest[0] and rest[1] == 0.0:
        return part
    return part + _linear_value(kw, rest)


BREGMAN = Rule("bregman", None, _bregman, matcher=_match, roots=frozenset(_SUM_ROOTS),
               example=lambda a, b: 0.5 * (jnp.exp(a - b) - 1 - a + b), example_shapes=((8,), (8,)))


# ---------------------------------------------------------------------------------- Bernoulli KL
ONE = const(1.0)


def _sig(v: Any) -> Any:
    return any_of(op("logistic", v, recompute=True),
                  op("div", ONE, op("add", ONE, op("exp", op("neg", v))), recompute=True))


def _term(P: Any, Q: Any) -> Any:
    """p·log(p/q), p·(log p - log q), xlogy(p, p/q): one side of the Bernoulli KL."""
    return any_of(op("mul", P, op("log", op("div", P, Q))),
                  op("mul", P, op("sub", op("log", P), op("log", Q))))


def _comp(P: Any) -> Any:
    return op("sub", ONE, P, recompute=True)


_SA, _SB = _sig(var("a")), _sig(var("b"))
_PV, _QV = var("p"), var("q")


def _bernoulli_kl(a: Any = None, b: Any = None, p: Any = None, q: Any = None) -> Any:
    """p·log(p/q) + (1-p)·log((1-p)/(1-q)) = softplus(b) - softplus(a) - sigmoid(a)(b - a) for
    p = sigmoid(a), q = sigmoid(b) (the terms cancel to second order in b - a; the second-order
    remainder computed directly); for probabilities p, q, the same with the first-order parts of
    the two logs summed exactly (``forms_divergence.bernoulli_kl_probs``)."""
    if a is not None:
        return _fd.bernoulli_kl_logits(a, b)
    return _fd.bernoulli_kl_probs(p, q)


BERNOULLI_KL = Rule(
    "bernoulli_kl",
    any_of(op("add", _term(_SA, _SB), _term(_comp(_SA), _comp(_SB))),
           op("add", _term(_PV, _QV), _term(_comp(_PV), _comp(_QV)))),
    _bernoulli_kl,
    example=lambda a, b: (jax.nn.sigmoid(a) * jnp.log(jax.nn.sigmoid(a) / jax.nn.sigmoid(b))
                          + (1 - jax.nn.sigmoid(a))
                          * jnp.log((1 - jax.nn.sigmoid(a)) / (1 - jax.nn.sigmoid(b)))),
    example_shapes=((8,), (8,)), example_domain=(-30.0, 30.0),
)

#: The pattern rules of this module, in the order the catalogue tries them.
DIVERGENCE_RULES: tuple[Rule, ...] = (BERNOULLI_KL,)
