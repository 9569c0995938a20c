"""Small composable identities, so that forms fixed alone stay fixed inside larger expressions.

A loss rarely hands the catalogue a whole form: a focal loss selects ``pt = where(y == 1, p, 1 - p)``
before ``log(pt)`` and ``(1 - pt) ** gamma``; a contrastive loss divides the positive pair's
``exp`` by a sum of ``exp``; ``log(0.5 * (1 + tanh(x / 2)))`` is a log-sigmoid once a constant
is folded (``0.5 + 0.5·tanh(x / 2)`` is one written out). The rules here move an operation to
where another rule fixes it (``log`` and ``1 - ·`` distributed over the branches of a ``where``;
``log(exp(a) / s) = a - log(s)``; constants folded) and recognise the catalogue's own stable
sigmoid as a sigmoid, so the next rule meets its pattern. The distributing rules are
``composable`` (their result is matched again) and fire only where a branch has something to fix,
so a ``where`` of plain values is left as written. The expanded covariance
``mean(x·y) - mean(x)·mean(y)`` becomes the shifted two-pass form, as ``variance``.
Each rule's docstring states the identity; each holds over the reals on the whole domain.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

from ... import _compat
from ..engine._match import Graph, Match
from ..engine._pattern import any_of, const, op, param, var
from ..engine._rule import Rule
from ..forms import _core as _forms
from ._stability_select import _reselect, _selection_where, _selections
from ._stability_written import _named

x, y, a, b, c, v = var("x"), var("y"), var("a"), var("b"), var("c"), var("v")
ONE = const(1.0)
AXES = param("axes")
_CALLS = ("jit", "pjit")


def _example(f: Any, shapes: Any = ((8,),), domain: Any = None) -> dict[str, Any]:
    return {"example": f, "example_shapes": shapes, "example_domain": domain}


# ------------------------------------------------------------------------------ looking at operands
def _producer(g: Graph, atom: Any) -> Any:
    """The equation producing ``atom`` once glue is seen through (``Graph.producer_past_glue``)."""
    return g.producer_past_glue(atom, 8)


def _is_one(g: Graph, atom: Any) -> bool:
    """Whether ``atom`` is the constant 1 (a literal, or a broadcast of one)."""
    for _ in range(4):
        if _compat.is_literal(atom):
            try:
                return float(_compat.literal_value(atom)) == 1.0
            except (TypeError, ValueError):
                return False
        prod = g.producer_eqn(atom)
        if prod is None or not (g.is_glue(prod[1]) or _compat.primitive_name(prod[1])
                                == "convert_element_type"):
            return atom in g.const_values and _all_one(g.const_values[atom])
        atom = prod[1].invars[0]
    return False


def _all_one(val: Any) -> bool:
    if _compat.is_tracer(val):
        return False
    try:
        arr = jnp.asarray(val)
        return bool(arr.size) and bool((arr == 1).all())
    except (TypeError, ValueError):
        return False


def _where_branches(eqn: Any) -> tuple[Any, Any] | None:
    """``(on_true, on_false)`` of a ``jnp.where`` (a call named ``_where``) or a two-way select."""
    name = _compat.primitive_name(eqn)
    if name == "select_n" and len(eqn.invars) == 3:
        return eqn.invars[2], eqn.invars[1]
    if name in _CALLS and eqn.params.get("name") == "_where" and len(eqn.invars) == 3:
        return eqn.invars[1], eqn.invars[2]
    return None


def _is_sigmoid(g: Graph, eqn: Any) -> bool:
    """``lax.logistic``, the catalogue's own stable sigmoid (a custom_jvp call), or 1/(1 + exp(-v))."""
    name = _compat.primitive_name(eqn)
    if name == "logistic":
        return True
    if name == "custom_jvp_call":
        return _named("sigmoid")(eqn.params.get("call_jaxpr"))
    if name == "div" and _is_one(g, eqn.invars[0]):
        den = _producer(g, eqn.invars[1])
        return den is not None and _compat.primitive_name(den) == "add"
    return False


def _fixable_complement(g: Graph, atom: Any, depth: int = 3) -> bool:
    """Whether ``1 - atom`` is a form some rule fixes (a sigmoid, an exp, a tanh, a cosine, 1 - t)."""
    eqn = _producer(g, atom)
    if eqn is None or depth == 0:
        return False
    name = _compat.primitive_name(eqn)
    if name in ("exp", "tanh", "cos") or _is_sigmoid(g, eqn):
        return True
    if name == "sub":
        return _is_one(g, eqn.invars[0])
    branches = _where_branches(eqn)
    return branches is not None and any(_fixable_complement(g, t, depth - 1) for t in branches)


def _fixable_log(g: Graph, atom: Any, depth: int = 3) -> bool:
    """Whether ``log(atom)`` is a form some rule fixes: a sigmoid or its complement, an exp, a
    quotient or product with an exp, a sum of exps, ``1 + exp``, a cosh, a product, the upper
    incomplete gamma function; a ``where`` with such a branch."""
    eqn = _producer(g, atom)
    if eqn is None or depth == 0:
        return False
    name = _compat.primitive_name(eqn)
    if name in ("exp", "cosh", "expm1", "reduce_prod") or _is_sigmoid(g, eqn):
        return True
    if name in ("igammac", "igamma"):  # log_gamma_tail / _lower (gamma.logsf's where(y < 0, 1, Q))
        return True
    heads = [_producer(g, t) for t in eqn.invars]
    names = [None if h is None else _compat.primitive_name(h) for h in heads]
    if name == "sub" and _is_one(g, eqn.invars[0]):
        return _fixable_complement(g, eqn.invars[1], depth - 1)
    if name in ("div", "mul", "add") and "exp" in names:
        return True
    if name == "reduce_sum" and names == ["exp"]:
        return True
    if name == "mul" and any(_is_constant(g, t) for t in eqn.invars):
        return any(_fixable_log(g, t, depth - 1) for t in eqn.invars if not _is_constant(g, t))
    branches = _where_branches(eqn)
    return branches is not None and any(_fixable_log(g, t, depth - 1) for t in branches)


def _is_constant(g: Graph, atom: Any) -> bool:
    return g.head(atom)[1]


# Gates: one look at the root's operands (cached ``Graph.head``), so that the rules' many
# alternatives are tried only where they can match; most ``mul``, ``sub`` and ``log`` equations
# of a program are refused here (the rewrite pass's cost, ``benchmarks/bench_rewrite.py``).
def _one_minus_gate(g: Graph, i: int) -> bool:
    invars = g.eqns[i].invars
    return len(invars) == 2 and g.head(invars[0])[1]


def _heads_gate(*names: str) -> Any:
    wanted = frozenset(names)

    def gate(g: Graph, i: int) -> bool:
        return g.head(g.eqns[i].invars[0])[0] in wanted

    return gate


def _fold_gate(g: Graph, i: int) -> bool:
    eqn = g.eqns[i]
    if len(eqn.invars) != 2:
        return False
    h0, h1 = g.head(eqn.invars[0]), g.head(eqn.invars[1])
    if _compat.primitive_name(eqn) == "div":
        return h1[1] and h0[0] == "mul"
    return (h0[1] and h1[0] in ("mul", "div")) or (h1[1] and h0[0] in ("mul", "div"))


# ------------------------------------------------------------------------ where: log and 1 - (·)
_WHERE = any_of(op(_CALLS, c, a, b, params={"name": "_where"}, recompute=True),
                op("select_n", c, b, a, recompute=True))


def _apply_to_branches(fn: Any, c: Any, a: Any, b: Any) -> Any:
    # jnp.where broadcasts condition and branches as the program's where did; a select_n's branches
    # and (boolean) predicate have one shape or a scalar predicate, which jnp.where accepts too
    return jnp.where(c, fn(a), fn(b))


def _where_of(g: Graph, i: int) -> Any:
    eqn = _producer(g, g.eqns[i].invars[-1])
    return None if eqn is None else _where_branches(eqn)


def _log_where_gate(g: Graph, i: int) -> bool:
    branches = _where_of(g, i)
    return branches is not None and any(_fixable_log(g, t) for t in branches)


def _boolean_predicate(m: Match) -> bool:
    return m.aval("c").dtype == jnp.bool_


def _log_where(c: Any, a: Any, b: Any) -> Any:
    """log(where(c, a, b)) = where(c, log(a), log(b)): each branch's log is then matched on its own
    (``p = sigmoid(z)``, ``pt = where(y == 1, p, 1 - p)``: ``log(pt)`` is ``-softplus(-z)`` or
    ``-softplus(z)``, where the log of the rounded selection was -inf)."""
    return _apply_to_branches(jnp.log, c, a, b)


LOG_WHERE = Rule(
    "log_where", op("log", _WHERE), _log_where, where=_boolean_predicate, gate=_log_where_gate,
    composable=True,  # lax.select: a select_n on every JAX (jnp.where is a call on some)
    examples=((lambda z, t: jnp.log(lax.select(t > 0, jax.nn.sigmoid(z), 1 - jax.nn.sigmoid(z))),
               ((8,), (8,)), (-1e3, 1e3)),),
    **_example(lambda z, t: jnp.log(jnp.where(t > 0, jax.nn.sigmoid(z), 1 - jax.nn.sigmoid(z))),
               ((8,), (8,)), domain=(-1e3, 1e3)),
)


def _one_minus_where_gate(g: Graph, i: int) -> bool:
    eqn = g.eqns[i]
    if not g.head(eqn.invars[0])[1] or not _is_one(g, eqn.invars[0]):
        return False
    branches = _where_of(g, i)
    return branches is not None and any(_fixable_complement(g, t) for t in branches)


def _one_minus_where(c: Any, a: Any, b: Any) -> Any:
    """1 - where(c, a, b) = where(c, 1 - a, 1 - b): each branch's complement is matched on its own
    (a focal loss's ``1 - pt`` is ``sigmoid(-z)`` or ``sigmoid(z)``, with no cancellation)."""
    return _apply_to_branches(lambda t: 1 - t, c, a, b)


ONE_MINUS_WHERE = Rule(
    "one_minus_where", op("sub", ONE, _WHERE), _one_minus_where, where=_boolean_predicate,
    gate=_one_minus_where_gate, composable=True,
    examples=((lambda z, t: 1 - lax.select(t > 0, jax.nn.sigmoid(z), 1 - jax.nn.sigmoid(z)),
               ((8,), (8,)), (-1e3, 1e3)),),
    **_example(lambda z, t: 1 - jnp.where(t > 0, jax.nn.sigmoid(z), 1 - jax.nn.sigmoid(z)),
               ((8,), (8,)), domain=(-1e3, 1e3)),
)


def _one_minus_one_minus(y: Any) -> Any:
    """1 - (1 - y) = y (the written form loses y's digits below an ulp of 1)."""
    return y


ONE_MINUS_ONE_MINUS = Rule(
    "one_minus_one_minus", op("sub", ONE, op("sub", ONE, y, recompute=True)), _one_minus_one_minus,
    composable=True, gate=_one_minus_gate, **_example(lambda y: 1 - (1 - y), domain=(-1.0, 1.0)),
)


# ------------------------------------------------------------- the catalogue's own stable sigmoid
def _form_sigmoid(t: Any) -> Any:
    """``forms.sigmoid(t)`` as rules produce it (a custom_jvp call), recomputed where it is shared."""
    return op("custom_jvp_call", t, call_jaxpr=_named("sigmoid"), recompute=True)


def _log_form_sigmoid(x: Any = None, y: Any = None) -> Any:
    """log(sigmoid(x)) = -softplus(-x);  log(1 - sigmoid(y)) = -softplus(y), for the stable sigmoid
    a rule produced (``1 - sigmoid(z)`` -> ``sigmoid(-z)``; ``1 + tanh(u)`` -> ``2 sigmoid(2u)``)."""
    return -_forms.softplus(-x) if x is not None else -_forms.softplus(y)


LOG_FORM_SIGMOID = Rule(
    "log_form_sigmoid",
    any_of(op("log", _form_sigmoid(x)),
           op("log", op("sub", ONE, _form_sigmoid(y))),
           op("log1p", op("neg", _form_sigmoid(y)))),
    _log_form_sigmoid, gate=_heads_gate("custom_jvp_call", "sub", "neg"),
    **_example(lambda x: jnp.log(_forms.sigmoid(x)), domain=(-1e3, 1e3)),
)


def _one_minus_form_sigmoid(y: Any) -> Any:
    """1 - sigmoid(y) = sigmoid(-y), for the stable sigmoid a rule produced."""
    return _forms.sigmoid(-y)


ONE_MINUS_FORM_SIGMOID = Rule(
    "one_minus_form_sigmoid", op("sub", ONE, _form_sigmoid(y)), _one_minus_form_sigmoid, gate=_one_minus_gate,
    **_example(lambda y: 1 - _forms.sigmoid(y), domain=(-1e3, 1e3)),
)


# --------------------------------------------------------------------------- constant folding
def _pow2(v: float) -> bool:
    if v == 0 or not math.isfinite(v):
        return False
    return math.frexp(abs(v))[0] == 0.5


_K1 = const(_pow2, name="k1")
_K2 = const(_pow2, name="k2")


def _fold(y: Any, **_: Any) -> Any:
    """k1·(k2·y) = y, (k2·y)/d1 = y, k1·(y/d2) = y where the powers of two multiply to 1 (each
    scaling exact): a constant a rule produced (``2·sigmoid(2u)``) meets the user's (``0.5·(...)``)
    and the factor disappears, so the next rule sees ``log(sigmoid(2u))``. Other products are left
    as written (folding them changes no pattern a rule waits for)."""
    return y


def _folded(m: Match) -> float:
    c = m.captures
    return c["k1"] * c.get("k2", 1.0) / c.get("d1", 1.0) / c.get("d2", 1.0)


_D1 = const(_pow2, name="d1")
_D2 = const(_pow2, name="d2")
FOLD_SCALE = Rule(
    "fold_scale",
    any_of(op("mul", _K1, op("mul", _K2, y, recompute=True)),
           op("mul", _K1, op("div", y, _D2, recompute=True)),
           op("div", op("mul", _K1, y, recompute=True), _D1)),
    _fold, composable=True, gate=_fold_gate, where=lambda m: _folded(m) == 1.0,
    **_example(lambda y: 0.5 * (2.0 * y), domain=(-1e3, 1e3)),
)


# ------------------------------------------------------------------------- c + c·tanh(u)
def _half_tanh(u: Any = None, w: Any = None, c: float = 0.5, c2: float = 0.5) -> Any:
    """c + c·tanh(u) = 2c·sigmoid(2u);  c - c·tanh(w) = 2c·sigmoid(-2w) (the logistic written through
    tanh: c(1 ± tanh) cancels to 0 where tanh rounds to ∓1; its log is then a log-sigmoid)."""
    s = _forms.sigmoid(2 * u) if u is not None else _forms.sigmoid(-2 * w)
    return s if 2 * c == 1.0 else s * jnp.asarray(2 * c, jnp.result_type(s))


_C = const(lambda q: q > 0 and math.isfinite(q), name="c")
_C2 = const(lambda q: q > 0 and math.isfinite(q), name="c2")


def _half_tanh_gate(g: Graph, i: int) -> bool:
    eqn = g.eqns[i]
    if len(eqn.invars) != 2:
        return False
    first_const = g.head(eqn.invars[0])[1]
    if _compat.primitive_name(eqn) == "sub":
        if not first_const:
            return False
        scaled = eqn.invars[1]
    elif first_const or g.head(eqn.invars[1])[1]:
        scaled = eqn.invars[1] if first_const else eqn.invars[0]
    else:
        return False
    mul = _producer(g, scaled)
    return (mul is not None and _compat.primitive_name(mul) == "mul"
            and any(g.head(t)[0] == "tanh" for t in mul.invars))


HALF_TANH = Rule(
    "half_tanh",
    any_of(op("add", _C, op("mul", _C2, op("tanh", var("u"), recompute=True))),
           op("sub", _C, op("mul", _C2, op("tanh", var("w"), recompute=True)))),
    _half_tanh, gate=_half_tanh_gate, where=lambda m: m.captures["c"] == m.captures["c2"],
    **_example(lambda x: 0.5 + 0.5 * jnp.tanh(x / 2), domain=(-1e3, 1e3)),
)


# --------------------------------------------------------------------------- log of a quotient
_EXPS = op("exp", v, name="ev", recompute=True)
_SUM_EXPS = op("reduce_sum", _EXPS, axes=AXES, recompute=True)


def _entry_minus_lse(a: Any, v: Any, axes: tuple[int, ...]) -> Any:
    """a - logsumexp(v) = (a - m) - log1p(r), m = max(v), r = sum(exp(v - m)) - 1 kept apart from
    the maximal term: exact where ``a`` is v's dominant entry (a - m = 0), where ``a - (m + ...)``
    cancels to 0. Over ``axes``, lined up with ``a`` as the program's quotient was."""
    ax = tuple(int(i) for i in axes)
    shift, l1p = _forms._log1p_rest(v, ax)
    if jnp.ndim(a) != jnp.ndim(v):
        shift, l1p = jnp.squeeze(shift, axis=ax), jnp.squeeze(l1p, axis=ax)
    # a - m within 2 ulps of m is taken as 0: XLA may compute the dominant entry and the max with
    # different roundings (``exp(s[0] / t)`` in one fusion, ``s / t`` in another, the division done
    # as a multiplication by the reciprocal; jax 0.10 even through the barrier), and the 1-2 ulp
    # difference would stand for the whole result (log1p(rest) can be far below ulp(m)). For an
    # ``a`` that truly differs from m by so little this is a backward error of at most 2 ulps in
    # ``a``. Value 0, derivative still 1 (d - stop_gradient(d)).
    d = a - shift
    tie = jnp.abs(d) <= 2 * jnp.abs(jnp.spacing(shift))
    d = jnp.where(tie, d - lax.stop_gradient(d), d)
    return d - l1p


# jnp.diagonal: a call of one operand (its body a gather, or a masked sum on some platforms): a
# selection of the matrix, re-applied to the logits by evaluating the body
_DIAGONAL = op(_CALLS, _EXPS, params={"name": "diagonal", "jaxpr": param("diag_body")})


def _log_softmax_entry(v: Any, axes: tuple[int, ...], a: Any = None, **sel: Any) -> Any:
    """log(exp(a) / sum(exp(v))) = a - logsumexp(v);  log(sel(exp(v)) / sum(exp(v))) =
    sel(v) - logsumexp(v) (InfoNCE-style losses: the positive logit's exp over the sum of all, the
    positives on ``jnp.diagonal`` of a similarity matrix too),
    as (a - m) - log1p(rest) (exp(a) and the sum overflow, the quotient underflows)."""
    # one rounding of v for the max and the entry: XLA may otherwise recompute v in each fusion
    # with other roundings (v / 0.1 as v * 10), and a - m is then not 0 for the dominant entry
    v = lax.optimization_barrier(v)
    if a is None and "diag_body" in sel:
        a = _compat.eval_jaxpr(_compat.as_closed(sel["diag_body"]), v)[0]
    elif a is None:
        a = _reselect(v, sel)
    return _entry_minus_lse(a, v, axes)


def _log_sigmoid_of_gap(a: Any, v: Any, axes: tuple[int, ...], **_: Any) -> Any:
    """log(exp(a) / (exp(a) + sum(exp(v)))) = -softplus(logsumexp(v) - a) (the positive's exp
    added to the negatives'; exp(a) overflows, the quotient rounds to 1 or underflows)."""
    ax = tuple(int(i) for i in axes)
    lse = _forms.logsumexp(lax.optimization_barrier(v), ax)
    if jnp.ndim(a) == jnp.ndim(v):
        lse = jnp.expand_dims(lse, ax)
    return -_forms.softplus(lse - a)


def _entry_where(m: Match) -> bool:
    if "a" not in m.captures:
        return _selection_where(m)
    return True


LOG_SOFTMAX_ENTRY = Rule(
    "log_softmax_entry",
    op("log", op("div", any_of(op("exp", a, recompute=True), *_selections(_EXPS), _DIAGONAL), _SUM_EXPS)),
    _log_softmax_entry, where=_entry_where,
    gate=lambda g, i: g.head(g.eqns[i].invars[0])[0] == "div",
    **_example(lambda a, v: jnp.log(jnp.exp(a[0]) / jnp.sum(jnp.exp(v))), ((8,), (8,)),
               domain=(-1e3, 1e3)),
)


def _log_quotient_exp(a: Any, s: Any = None, t: Any = None, u: Any = None) -> Any:
    """log(exp(a) / s) = a - log(s);  log(s / exp(a)) = log(s) - a;  log(s·exp(a)) = log(s) + a
    (s > 0). ``exp(a)`` overflows or underflows where the quotient does not; the log of ``s`` is
    then matched on its own (a logsumexp, a softplus)."""
    if s is not None:
        return a - jnp.log(s)
    if t is not None:
        return jnp.log(t) - a
    return jnp.log(u) + a


def _log_quotient_gate(g: Graph, i: int) -> bool:
    eqn = _producer(g, g.eqns[i].invars[0])
    if eqn is None or _compat.primitive_name(eqn) not in ("div", "mul"):
        return False
    if any(g.head(t)[1] for t in eqn.invars):  # c·exp(a): log_scaled_exp forms log(c) exactly
        return False
    heads = [g.head(t)[0] for t in eqn.invars]
    if "exp" not in heads:
        return False
    # exp(a) / (1 + exp(a)) and exp(a) / (exp(a) + exp(b)) are sigmoids (written_sigmoid,
    # sigmoid_ratio): a - log(1 + exp(a)) would cancel where a is large
    num, den = _producer(g, eqn.invars[0]), _producer(g, eqn.invars[1])
    if _compat.primitive_name(eqn) != "div" or heads[0] != "exp" or num is None or den is None \
            or _compat.primitive_name(den) != "add":
        return True
    exps = [_producer(g, t) for t in den.invars]
    return not any(e is not None and _compat.primitive_name(e) == "exp" and e.invars[0] is num.invars[0]
                   for e in exps)


_EA = op("exp", a, recompute=True)
LOG_QUOTIENT_EXP = Rule(
    "log_quotient_exp",
    any_of(op("log", op("div", _EA, var("s"))),
           op("log", op("div", var("t"), _EA)),
           op("log", op("mul", _EA, var("u")))),
    _log_quotient_exp, gate=_log_quotient_gate, composable=True,
    where=lambda m: all(jnp.issubdtype(m.aval(k).dtype, jnp.floating) for k in m.atoms),
    **_example(lambda a, s: jnp.log(jnp.exp(a) / s), ((8,), (8,)), domain=(0.0, 1e3)),
)


# ------------------------------------------------------------------------------------ covariance
def _mean(t: Any, axes: str, n: str, **kw: Any) -> Any:
    return op("div", op("reduce_sum", t, axes=param(axes)), const(lambda q: q > 0, name=n), **kw)


_MX = _mean(x, "ax_x", "n_x", name="mx", keep=True)
_MY = _mean(y, "ax_y", "n_y", name="my", keep=True)
_SX = op("reduce_sum", x, axes=param("ax_x"))
_SY = op("reduce_sum", y, axes=param("ax_y"))
_SXY = op("reduce_sum", op("mul", x, y), axes=AXES)
COVARIANCE_PATTERN = any_of(
    op("sub", op("div", _SXY, const(lambda q: q > 0, name="n")), op("mul", _MX, _MY)),
    op("sub", op("div", _SXY, const(lambda q: q > 0, name="n")),
       op("div", op("mul", _SX, _SY), const(lambda q: q > 0, name="n2"))),
)


def _covariance_where(m: Match) -> bool:
    sx, sy = m.aval("x"), m.aval("y")
    if m.atoms["x"] is m.atoms["y"]:  # mean(x·x) - mean(x)²: the variance rule's (scaled) form
        return False
    if tuple(sx.shape) != tuple(sy.shape) or not jnp.issubdtype(sx.dtype, jnp.floating):
        return False
    axes = tuple(int(i) for i in m.captures["axes"])
    count = float(math.prod(sx.shape[i] for i in axes))
    for key in ("ax_x", "ax_y"):
        if tuple(int(i) for i in m.captures[key]) != axes:
            return False
    if m.captures["n"] != count:
        return False
    if "n2" in m.captures:
        return m.captures["n2"] == count * count
    return m.captures["n_x"] == count and m.captures["n_y"] == count


def _covariance(x: Any, y: Any, axes: tuple[int, ...], mx: Any = None, my: Any = None,
                **_: Any) -> Any:
    """mean(x·y) - mean(x)·mean(y) = mean(dx·dy) - mean(dx)·mean(dy), dx = x - mean(x),
    dy = y - mean(y) (corrected two-pass, as ``variance``): the one-pass form loses every digit when
    the data sit far from 0 (values 1e4 + small in float32); the program's means are reused.
    Where the one-pass form cancels less than one bit it is kept (it is then the more accurate)."""
    ax = tuple(int(i) for i in axes)
    return jnp.squeeze(_shifted_covariance(x, y, _keepdims(x, mx, ax), _keepdims(y, my, ax), ax),
                       axis=ax)


def _keepdims(t: Any, mean: Any, ax: tuple[int, ...]) -> Any:
    mu = jnp.mean(t, axis=ax, keepdims=True) if mean is None else jnp.asarray(mean)
    return jnp.expand_dims(mu, ax) if mu.ndim != t.ndim else mu


@functools.partial(jax.custom_jvp, nondiff_argnums=(4,))
def _shifted_covariance(x: Any, y: Any, mx: Any, my: Any, ax: tuple[int, ...]) -> Any:
    dx, dy = x - mx, y - my
    two_pass = (jnp.mean(dx * dy, axis=ax, keepdims=True)
                - jnp.mean(dx, axis=ax, keepdims=True) * jnp.mean(dy, axis=ax, keepdims=True))
    mxy = jnp.mean(x * y, axis=ax, keepdims=True)
    one_pass = mxy - mx * my
    well_conditioned = jnp.abs(mx * my) <= 0.5 * jnp.abs(mxy)
    return jnp.where(well_conditioned, one_pass, two_pass)


@_shifted_covariance.defjvp
def _shifted_covariance_jvp(ax: tuple[int, ...], primals: Any, tangents: Any) -> Any:
    # d cov = mean(dy·ẋ) + mean(dx·ẏ) - (mean(dx)·mean(ẏ) + mean(dy)·mean(ẋ)), and 0 along the
    # means (the shifted form does not depend on the shift)
    x, y, mx, my = primals
    tx, ty, _, _ = tangents
    dx, dy = x - mx, y - my

    def mean(t: Any) -> Any:
        return jnp.mean(t, axis=ax, keepdims=True)

    out = _shifted_covariance(x, y, mx, my, ax)
    return out, mean(dy * tx) + mean(dx * ty) - mean(dx) * mean(ty) - mean(dy) * mean(tx)


COVARIANCE = Rule(
    "covariance", COVARIANCE_PATTERN, _covariance, where=_covariance_where, gate=_heads_gate("div"),
    examples=((lambda x, y: jnp.sum(x * y) / 8 - jnp.sum(x) * jnp.sum(y) / 64, ((8,), (8,)), (-1e15, 1e15)),),
    **_example(lambda x, y: jnp.mean(x * y) - jnp.mean(x) * jnp.mean(y), ((8,), (8,)),
               domain=(-1e15, 1e15)),
)



# ------------------------------------------------- the positive over itself plus the negatives
_EAN = op("exp", a, name="ean", recompute=True)
LOG_POSITIVE_OVER_ALL = Rule(
    "log_positive_over_all",
    op("log", op("div", _EAN, op("add", _EAN, _SUM_EXPS))),
    _log_sigmoid_of_gap, gate=lambda g, i: g.head(g.eqns[i].invars[0])[0] == "div",
    **_example(lambda a, v: jnp.log(jnp.exp(a[0]) / (jnp.exp(a[0]) + jnp.sum(jnp.exp(v)))),
               ((8,), (8,)), domain=(-1e3, 1e3)),
)

#: The rules of this module in the order the catalogue tries them (``_stability.STABILITY``, after
#: the whole forms' log rules, so a whole form is matched whole first): the log of a softmax entry
#: before the general log of a quotient.
COMPOSE_RULES: tuple[Rule, ...] = (
    LOG_SOFTMAX_ENTRY, LOG_POSITIVE_OVER_ALL, HALF_TANH, LOG_FORM_SIGMOID, ONE_MINUS_FORM_SIGMOID,
    FOLD_SCALE, LOG_WHERE, ONE_MINUS_WHERE, ONE_MINUS_ONE_MINUS, LOG_QUOTIENT_EXP, COVARIANCE,
)
