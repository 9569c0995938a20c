"""Stability rules for logs of exponentials and sigmoids, as code in public JAX projects writes them.

Inverse softplus (``log(exp(x) - 1)``, Gaussian-process and robotics code), ``log(1 - exp(-a))``
(molecular-dynamics potentials), ``log(cosh(x))`` (HMC densities) and the ``log(sigmoid(x) + eps)``
losses of graph-embedding code. Each rule's docstring states the identity; each keeps the value
over the reals and the derivative AD computes from it (their forms carry the exact derivative).
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp

from ..engine._pattern import any_of, const, op, var
from ..engine._rule import Rule
from ..forms import _core as _forms
from ._stability_written import _named

x, y = var("x"), var("y")
ONE = const(1.0)
_CALLS = ("jit", "pjit")
_C = const(lambda v: v > 0 and math.isfinite(v), name="c")


def _example(f: Any, shapes: Any = ((8,),), domain: Any = None) -> dict[str, Any]:
    return {"example": f, "example_shapes": shapes, "example_domain": domain}


# ------------------------------------------------------------------------------------ inv_softplus
def _inv_softplus(x: Any) -> Any:
    """log(exp(x) - 1) = log(expm1(x)) = x + log(1 - exp(-x)), the inverse of softplus (x > 0)."""
    return _forms.inv_softplus(x)


INV_SOFTPLUS = Rule(
    "inv_softplus",
    any_of(op("log", op("sub", op("exp", x), ONE)), op("log", op("expm1", x))),
    _inv_softplus,
    **_example(lambda x: jnp.log(jnp.exp(x) - 1.0), domain=(1e-30, 1e30)),
)


# -------------------------------------------------------------------------------------- log1mexp
def _log1mexp(y: Any) -> Any:
    """log(1 - exp(y)) = log1mexp(-y) (y <= 0): log(-expm1(y)) for y >= -ln 2, else log1p(-exp(y))
    (Maechler 2012); also log1p(-exp(y)) and log(-expm1(y)), each exact only on half the domain."""
    return _forms.log1mexp(-y)


LOG1MEXP = Rule(
    "log1mexp",
    any_of(op("log", op("sub", ONE, op("exp", y))),
           op("log1p", op("neg", op("exp", y))),
           op("log", op("neg", op("expm1", y)))),
    _log1mexp,
    **_example(lambda a: -jnp.log(1 - jnp.exp(-a)), domain=(1e-30, 1e30)),
)


# -------------------------------------------------------------------------------------- log_cosh
def _log_cosh(x: Any, c2: float | None = None) -> Any:
    """log(cosh(x)) = |x| - log 2 + log1p(exp(-2|x|)) = log1p(2 sinh(x/2)²), in every spelling:
    ``logaddexp(x, -x) - log 2`` (optax), ``log((exp(x) + exp(-x)) / 2)``, ``x + softplus(-2x) -
    log 2`` (TFP) and ``|x| + log1p(exp(-2|x|)) - log 2``. The written forms subtract log 2 from a
    number near log 2 where x is small (all digits lost below |x| ~ 2^-12 in float32) or overflow
    (the exps past |x| = 89 in float32).

    ``jnp.log(2.0)`` is log 2 itself. A literal constant ``c2`` (``math.log(2)`` rounded to the
    dtype) is the program's own number: the result is log cosh(x) + (log 2 - c2), that difference
    formed exactly, so the value is the program's (in float32, 1.9e-9 below log cosh where x is
    small; write ``jnp.log(2.0)`` for log cosh itself)."""
    out = _forms.log_cosh(x)
    if c2 is None:
        return out
    # log 2 - c2 from a double-double log 2: the first difference is exact (Sterbenz)
    return out + jnp.asarray((_LN2_HI - c2) + _LN2_LO, out.dtype)


_LN2_HI, _LN2_LO = 0.6931471805599453, 2.3190468138462996e-17


def _is_ln2(v: float) -> bool:
    # ln 2 rounded to float32 or float64 (0.6931471824645996 or 0.6931471805599453)
    return abs(v - math.log(2.0)) < 1e-8


# log 2 as a literal (math.log(2)) or as the program computes it (jnp.log(2.0), cast to the dtype)
_LN2 = any_of(const(_is_ln2, name="c2"), op("log", const(2.0)),
              op("convert_element_type", op("log", const(2.0))))
_NEG_X = op("neg", x)
_EXP_PAIR = op("add", op("exp", x), op("exp", _NEG_X))


def _minus_two(v: Any) -> Any:
    return any_of(op("mul", const(-2.0), v), op("neg", op("mul", const(2.0), v)),
                  op("mul", const(2.0), op("neg", v)))


def _softplus_of(v: Any) -> Any:
    """softplus(v) as jax.nn writes it (a call around logaddexp(v, 0)), as logaddexp, or written."""
    return any_of(op(_CALLS, v, params={"name": "softplus"}),
                  op("custom_jvp_call", v, const(0.0), call_jaxpr=_named("logaddexp")),
                  op("log1p", op("exp", v)), op("log", op("add", ONE, op("exp", v))))


def _plus_softplus(v: Any, w: Any) -> Any:
    """v + softplus(-2w) - log 2, either association."""
    sp = _softplus_of(_minus_two(w))
    return any_of(op("sub", op("add", v, sp), _LN2), op("add", op("sub", v, _LN2), sp))


_LOGADDEXP = _named("logaddexp")
LOG_COSH = Rule(
    "log_cosh",
    any_of(op("log", op("cosh", x)),
           op("sub", op("custom_jvp_call", x, _NEG_X, call_jaxpr=_LOGADDEXP), _LN2),
           op("sub", op("custom_jvp_call", _NEG_X, x, call_jaxpr=_LOGADDEXP), _LN2),
           op("log", op("div", _EXP_PAIR, const(2.0))),
           op("log", op("mul", _EXP_PAIR, const(0.5))),
           op("sub", op("log", _EXP_PAIR), _LN2),
           _plus_softplus(x, x),
           _plus_softplus(op("abs", x), op("abs", x))),
    _log_cosh,
    examples=(
        (lambda e: jnp.logaddexp(e, -e) - jnp.log(2.0).astype(e.dtype), ((8,),), (-1e30, 1e30)),
        (lambda e: jnp.logaddexp(-e, e) - math.log(2.0), ((8,),), (-1e30, 1e30)),
        (lambda x: x + jax.nn.softplus(-2 * x) - jnp.log(2.0).astype(x.dtype), ((8,),), (-1e30, 1e30)),
        (lambda x: x + jnp.logaddexp(-2 * x, 0.0) - math.log(2.0), ((8,),), (-1e30, 1e30)),
    ),
    **_example(lambda x: jnp.log(jnp.cosh(x)), domain=(-1e30, 1e30)),
)


# ------------------------------------------------------------------------------ log_sigmoid_plus
def _log_sigmoid_plus(c: float, x: Any = None, y: Any = None) -> Any:
    """log(sigmoid(x) + c) = logaddexp(log_sigmoid(x), log c) (c > 0 constant);
    log(1 - sigmoid(y) + c) = log(sigmoid(-y) + c) = logaddexp(log_sigmoid(-y), log c)."""
    return _forms.log_sigmoid_plus(x if x is not None else -y, c)


LOG_SIGMOID_PLUS = Rule(
    "log_sigmoid_plus",
    any_of(op("log", op("add", op("logistic", x, recompute=True), _C)),
           op("log", op("add", op("sub", ONE, op("logistic", y, recompute=True)), _C))),
    _log_sigmoid_plus,
    **_example(lambda x: -jnp.log(jax.nn.sigmoid(x) + 1e-15), domain=(-1e4, 1e4)),
)


# ------------------------------------------------------------------------------- one_minus_sigmoid
def _one_minus_sigmoid(y: Any) -> Any:
    """1 - sigmoid(y) = sigmoid(-y) (1 - s cancels to 0 for y > 17 in float32)."""
    return _forms.sigmoid(-y)


# the written sigmoid 1/(1 + exp(-y)) is recomputed where the program shares it (a focal loss also
# takes its log): 1 - p is then sigmoid(-y) and log(p) is -softplus(-y)
_WRITTEN = op("div", ONE, op("add", ONE, op("exp", op("neg", y))), recompute=True)
ONE_MINUS_SIGMOID = Rule("one_minus_sigmoid", any_of(op("sub", ONE, op("logistic", y, recompute=True)),
                                                     op("sub", ONE, _WRITTEN)),
                         _one_minus_sigmoid,
                         **_example(lambda y: 1 - jax.nn.sigmoid(y), domain=(-1e4, 1e4)))


# ---------------------------------------------------------------------------- log_sigmoid_ratio
def _sigmoid_or_complement(v: Any, w: Any) -> Any:
    """sigmoid(v) (jax.nn or written), or 1 - sigmoid(w); each recomputed where the program shares it
    (a Bernoulli KL divergence multiplies by the same sigmoid it divides)."""
    def sig(t: Any) -> Any:
        return any_of(op("logistic", t, recompute=True),
                      op("div", ONE, op("add", ONE, op("exp", op("neg", t))), recompute=True))

    return any_of(sig(v), op("sub", ONE, sig(w), recompute=True))


def _log_sigmoid_ratio(p: Any = None, pc: Any = None, q: Any = None, qc: Any = None) -> Any:
    """log(s(p) / s(q)) = log sigmoid(a) - log sigmoid(b), a = p or -pc (1 - sigmoid(v) =
    sigmoid(-v)), b likewise: the ratio of two sigmoids that underflow, or of two complements that
    round to 0, is 0/0 where each log is finite. Where |a - b| <= 1 the ratio is near 1 and the two
    logs would cancel (9 bits lost at a = -3.3e-3, b = -4.4e-4 in float32):
    log1p(sigmoid(-a)·expm1(a - b)) for a <= b (its argument in (-0.64, 0]), minus the same with a
    and b swapped above; elsewhere softplus(-b) - softplus(-a)."""
    a = p if p is not None else -pc
    b = q if q is not None else -qc
    d = a - b
    near = jnp.abs(d) <= 1
    dn = jnp.where(near, d, jnp.zeros_like(d))  # each branch reads a safe input
    below = jnp.log1p(jax.nn.sigmoid(-a) * jnp.expm1(dn))
    above = -jnp.log1p(jax.nn.sigmoid(-b) * jnp.expm1(-dn))
    far = _forms.softplus(-b) - _forms.softplus(-a)
    return jnp.where(near, jnp.where(d <= 0, below, above), far)


LOG_SIGMOID_RATIO = Rule(
    "log_sigmoid_ratio",
    op("log", op("div", _sigmoid_or_complement(var("p"), var("pc")),
                 _sigmoid_or_complement(var("q"), var("qc")))),
    _log_sigmoid_ratio,
    **_example(lambda p, q: jnp.log(jax.nn.sigmoid(p) / jax.nn.sigmoid(q)), shapes=((8,), (8,)),
               domain=(-1e3, 1e3)),
)
