"""Stability rules for the spellings of everyday ML and statistics losses, as small identities.

Each rule is one identity on a part of a form, so that the spellings of a loss compose from them:
a binary cross-entropy that computes ``p = sigmoid(z)`` once and takes ``log(p)`` and ``log(1 - p)``
gets a softplus of ``z`` in each log (the sigmoid is a ``recompute`` sub-term: its other uses keep
it); ``sigma = exp(log_sigma)`` then ``sigma**2`` and ``x / sigma`` become ``exp(2 log_sigma)`` and
``x * exp(-log_sigma)`` (``exp_power`` is composable: ``div_exp`` continues its result). Each rule's
docstring states the identity; each keeps the value over the reals.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp

from ..engine._match import Match
from ..engine._pattern import any_of, const, fixed, op, param, square_of, var
from ..engine._rule import Rule
from ..forms import _stats as _fs
from ._library_calls import softmax_call

x, y, a, b = var("x"), var("y"), var("a"), var("b")
ONE = const(1.0)
AXES = param("axes")
_N = const(lambda v: v > 0 and math.isfinite(v), name="n")


def _example(f: Any, shapes: Any = ((8,),), domain: Any = None) -> dict[str, Any]:
    return {"example": f, "example_shapes": shapes, "example_domain": domain}


def _count(m: Match, name: str = "x") -> int:
    shape = m.aval(name).shape
    return math.prod(shape[i] for i in tuple(m.captures["axes"]))


# ------------------------------------------------------------------------------------------ logit
_S = op("logistic", x, name="s", recompute=True)


def _logit(x: Any) -> Any:
    """log(sigmoid(x) / (1 - sigmoid(x))) = log(sigmoid(x)) - log(1 - sigmoid(x)) = x."""
    return x


LOGIT = Rule(
    "logit",
    any_of(op("log", op("div", _S, op("sub", ONE, _S))),
           op("sub", op("log", _S), op("log", op("sub", ONE, _S))),
           op("sub", op("log", _S), op("log1p", op("neg", _S)))),
    _logit,
    **_example(lambda z: (lambda p: jnp.log(p / (1 - p)))(jax.nn.sigmoid(z)), domain=(-80.0, 80.0)),
)


# -------------------------------------------------------------------------------- log-mean-exp
def _logmeanexp(x: Any, axes: tuple[int, ...], n: float | None = None, r: float | None = None) -> Any:
    """log(sum(exp(x)) / n) = log(mean(exp(x))) + log(k / n), k the number of terms (0 for the mean);
    log(mean(exp(x))) = m + log1p(sum(expm1(x - m)) / k), m = max(x); times r: n = 1/r."""
    k = math.prod(jnp.shape(x)[i] for i in axes)
    # log(k/n) in float64 from the exact k - n (or k·r - 1): 0 for a mean, tiny for a rounded 1/k
    c = math.log1p((k - n) / n) if n is not None else math.log1p(k * float(r or 1.0) - 1.0)
    out = _fs.logmeanexp(x, axes)
    return out if c == 0 else out + jnp.asarray(c, out.dtype)


_SUM_EXP = op("reduce_sum", op("exp", x, recompute=True), axes=AXES)
LOG_MEAN_EXP = Rule(
    "log_mean_exp",
    any_of(op("log", op("div", _SUM_EXP, _N)),
           op("log", op("mul", _SUM_EXP, const(lambda v: v > 0 and math.isfinite(v), name="r")))),
    _logmeanexp,
    **_example(lambda x: jnp.log(jnp.mean(jnp.exp(x)))),
)


# ------------------------------------------------------------------------------------ log_prod
def _log_prod(x: Any, axes: tuple[int, ...]) -> Any:
    """log(prod(x)) = sum(log(x)) for x > 0 (sum(log|x|) where the product is positive, else NaN)."""
    return _fs.log_prod(x, axes)


LOG_PROD = Rule("log_prod", op("log", op("reduce_prod", x, axes=AXES)), _log_prod,
                **_example(lambda x: jnp.log(jnp.prod(x)), domain=(0.0, 1e30)))


# ---------------------------------------------------------------------------- geometric power
def _prod_power(x: Any, axes: tuple[int, ...], c: float | None = None, root: Any = None) -> Any:
    """prod(x) ** c = exp(c · sum(log x)) (the geometric mean for c = 1/n); sqrt: c = 1/2."""
    return _fs.geometric_power(x, 0.5 if c is None else c, axes)


_PROD = op("reduce_prod", x, axes=AXES)
PROD_POWER = Rule(
    "prod_power",
    # c = 1 is the product itself: nothing to stabilise, and its derivative at a zero factor (the
    # product of the others) is not the form's 0
    any_of(op("pow", _PROD, const(lambda v: math.isfinite(v) and v not in (0, 1), name="c")),
           op("sqrt", _PROD)),
    _prod_power,
    **_example(lambda x: jnp.prod(x) ** (1 / 8), domain=(0.0, 1e30)),
)


# ---------------------------------------------------------------------------------- exp algebra
_E = op("exp", a, name="e", recompute=True)


def _exp_power(a: Any, k: float) -> Any:
    """exp(a) ** k = exp(k·a) (k·a formed exactly): exp(a)² and exp(a)·exp(a) = exp(2a),
    sqrt(exp(a)) = exp(a/2)."""
    return _fs.exp_scaled(a, float(k))


def _exp_power_where(m: Match) -> bool:
    return m.captures["k"] != 0


EXP_POWER = Rule(
    "exp_power",
    any_of(op("integer_pow", _E, y=param("k")),
           fixed(op("square", _E), k=2.0),
           fixed(op("mul", _E, _E), k=2.0),
           op("pow", _E, const(lambda v: math.isfinite(v), name="k")),
           fixed(op("sqrt", _E), k=0.5)),
    _exp_power, where=_exp_power_where, composable=True,
    **_example(lambda a: jnp.exp(a) ** 2, domain=(-1e4, 1e4)),
)


def _div_exp(b: Any, a: Any = None, x: Any = None, s: Any = None, c: float | None = None) -> Any:
    """exp(a) / exp(b) = exp(a - b);  x / exp(b) = x·exp(-b/2)·exp(-b/2);  s² / exp(b) =
    (s·exp(-b/2))²;  (exp(a) + x) / exp(b) = exp(a - b) + x / exp(b); a constant factor c of the
    denominator divides the result. Each keeps the quotient finite wherever it is."""
    terms = []
    if a is not None:
        terms.append(_fs.exp_scaled(a - b, 1.0))
    if x is not None:
        terms.append(_fs.div_exp(x, b))
    if s is not None:
        terms.append(_fs.square_div_exp(s, b))
    out = terms[0] if len(terms) == 1 else terms[0] + terms[1]
    return out if c is None else out / c


_EB = op("exp", b, recompute=True)
_EA = op("exp", a, recompute=True)
_C = const(lambda v: v > 0 and math.isfinite(v), name="c")
_SQ = square_of(var("s"))
_NUM = (_EA, op("add", _EA, _SQ), op("add", _EA, x), _SQ, x)
_DEN = (_EB, op("mul", _EB, _C))
DIV_EXP = Rule(
    "div_exp",
    any_of(*(op("div", num, den) for num in _NUM for den in _DEN)),
    _div_exp, composable=True,
    **_example(lambda x, b: x / jnp.exp(b), ((8,), (8,)), domain=(-1e4, 1e4)),
)


def _log_scaled_exp(x: Any, c: float) -> Any:
    """log(c·exp(x)) = x + log(c) (c > 0)."""
    return x + jnp.asarray(math.log(c), jnp.result_type(x))


LOG_SCALED_EXP = Rule(
    "log_scaled_exp",
    op("log", op("mul", op("exp", x, recompute=True),
                 const(lambda v: v > 0 and math.isfinite(v) and v != 1, name="c"))),
    _log_scaled_exp,
    **_example(lambda x: jnp.log(2.5 * jnp.exp(x)), domain=(-1e4, 1e4)),
)


# --------------------------------------------------------------------------------- one_plus_tanh
def _one_plus_tanh(u: Any = None, v: Any = None) -> Any:
    """1 + tanh(u) = 2·sigmoid(2u);  1 - tanh(v) = 2·sigmoid(-2v) (exact where tanh rounds to ∓1:
    the tanh form of GELU for large negative inputs)."""
    from ..forms import _core as _forms

    return 2 * _forms.sigmoid(2 * u) if u is not None else 2 * _forms.sigmoid(-2 * v)


ONE_PLUS_TANH = Rule(
    "one_plus_tanh",
    any_of(op("add", ONE, op("tanh", var("u"), recompute=True)),
           op("sub", ONE, op("tanh", var("v"), recompute=True))),
    _one_plus_tanh,
    **_example(lambda u: 1 + jnp.tanh(u), domain=(-1e4, 1e4)),
)


# --------------------------------------------------------------------------------------- sqdist
_SUMSQ_A = op("reduce_sum", square_of(a), axes=param("axes"))
_SUMSQ_B = op("reduce_sum", square_of(b), axes=param("axes_b"))
_DOT = any_of(op("dot_general", a, b, dimension_numbers=param("dn")),
              op("reduce_sum", op("mul", a, b), axes=param("axes_d")))
_TWO_DOT = any_of(op("mul", const(2.0), _DOT),
                  op("dot_general", op("mul", const(2.0), a), b, dimension_numbers=param("dn")))


def _sqdist_where(m: Match) -> bool:
    sa, sb = m.aval("a"), m.aval("b")
    rank = len(sa.shape)
    if tuple(sa.shape) != tuple(sb.shape) or rank == 0:
        return False
    last = (rank - 1,)  # vectors, or vectors batched (vmap) along the leading axes
    for key in ("axes", "axes_b", "axes_d"):
        if key in m.captures and tuple(int(i) for i in m.captures[key]) != last:
            return False
    if "dn" in m.captures:
        (lc, rc), (lb, rb) = m.captures["dn"]
        batch = tuple(range(rank - 1))
        return (tuple(lc) == last and tuple(rc) == last and tuple(lb) == batch
                and tuple(rb) == batch)
    return "axes_d" in m.captures


def _sqdist(a: Any, b: Any, **_: Any) -> Any:
    """|a|² + |b|² - 2·a·b = sum((a - b)²) (the expanded form cancels when a ≈ b)."""
    last = jnp.ndim(a) - 1
    return jnp.squeeze(_fs.sqdist(a, b, (last,)), axis=last)


SQDIST = Rule(
    "sqdist",
    any_of(op("sub", op("add", _SUMSQ_A, _SUMSQ_B), _TWO_DOT),
           op("add", op("sub", _SUMSQ_A, _TWO_DOT), _SUMSQ_B)),
    _sqdist, where=_sqdist_where, composable=True,
    **_example(lambda a, b: jnp.sum(a * a) + jnp.sum(b * b) - 2 * jnp.dot(a, b), ((8,), (8,)),
               domain=(-1e15, 1e15)),
)


# ------------------------------------------------------------------------------------ p_log_p
_PEX = op("exp", x, name="pex", recompute=True)
# p = softmax(x): written, or jax.nn.softmax's call (jax 0.12.1; its inlined equations before)
_P = any_of(op("div", _PEX, op("reduce_sum", _PEX, axes=AXES, recompute=True), name="p", recompute=True),
            softmax_call(x, name="p", recompute=True))


def _p_log_p(x: Any, axes: tuple[int, ...]) -> Any:
    """p·log(p) = softmax(x)·log_softmax(x), p = softmax(x) (0 where p underflows: the limit)."""
    return _fs.entropy_terms(x, axes)


P_LOG_P = Rule("p_log_p", op("mul", _P, op("log", _P)), _p_log_p,
               **_example(lambda x: (lambda p: -jnp.sum(p * jnp.log(p)))(jax.nn.softmax(x))))


def _sum_p_log_p(x: Any, axes: tuple[int, ...], axes2: tuple[int, ...]) -> Any:
    """sum(p·log(p)) = sum(softmax(x)·log_softmax(x)) over the softmax's axes (minus the entropy;
    a dominant entry's term, -log1p(rest), is moved onto the others where rest < eps)."""
    return _fs.sum_p_log_p(x, axes)


_P2 = any_of(op("div", _PEX, op("reduce_sum", _PEX, axes=AXES, recompute=True), name="p2", recompute=True),
             softmax_call(x, name="p2", recompute=True))
SUM_P_LOG_P = Rule(
    "sum_p_log_p", op("reduce_sum", op("mul", _P2, op("log", _P2)), axes=param("axes2")),
    _sum_p_log_p, where=lambda m: tuple(m.captures["axes"]) == tuple(m.captures["axes2"]),
    **_example(lambda x: (lambda p: -jnp.sum(p * jnp.log(p)))(jax.nn.softmax(x))))


# ------------------------------------------------------------------------------------------ std
def _var_axes(body: Any) -> tuple[int, ...] | None:
    from ... import _compat

    for eqn in _compat.eqns(body):
        if _compat.primitive_name(eqn) == "reduce_sum":
            return tuple(int(i) for i in eqn.params["axes"])
    return None


def _real(m: Match) -> bool:
    return bool(jnp.issubdtype(m.aval("x").dtype, jnp.floating))  # complex: var is of |x - mean|²


def _std_jit_where(m: Match) -> bool:
    return (_var_axes(m.captures["body"]) is not None and len(m.aval("ddof").shape) == 0
            and _real(m))


def _std(x: Any, body: Any = None, ddof: Any = 0, axes: Any = None, n: Any = None, n2: Any = None,
         axes2: Any = None, mean: Any = None) -> Any:
    """sqrt(var(x)) = s·sqrt(var(x / s)), s a power of two near max|x - mean| (the squares of the
    deviations overflow long before the standard deviation does)."""
    ax = _var_axes(body) if body is not None else tuple(axes)
    return _fs.std(x, ax, ddof)


def _std_manual_where(m: Match) -> bool:
    count = float(_count(m))
    return (tuple(m.captures["axes2"]) == tuple(m.captures["axes"]) and m.captures["n"] == count
            and m.captures["n2"] == count and _real(m))


_MEAN = op("div", op("reduce_sum", x, axes=param("axes2")), const(lambda v: v > 0, name="n2"),
           recompute=True)
STD = Rule(
    "std",
    any_of(op("sqrt", op(("jit", "pjit"), x, var("ddof"),
                         params={"name": "_var", "jaxpr": param("body")})),
           op("sqrt", op("div", op("reduce_sum", square_of(op("sub", x, _MEAN)), axes=AXES),
                         const(lambda v: v > 0, name="n")))),
    _std,
    where=lambda m: _std_jit_where(m) if "body" in m.captures else _std_manual_where(m),
    **_example(lambda x: jnp.std(x), domain=(-1e30, 1e30)),
)

#: The rules of this module, in the order the catalogue tries them (see ``_stability.STABILITY``).
ML_RULES: tuple[Rule, ...] = (SUM_P_LOG_P, P_LOG_P, LOGIT, LOG_MEAN_EXP, LOG_PROD, PROD_POWER,
                              LOG_SCALED_EXP, DIV_EXP, EXP_POWER, ONE_PLUS_TANH, SQDIST, STD)
