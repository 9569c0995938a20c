"""Stability rules for hand-written forms of functions the libraries provide, as small identities.

``softplus(x) - x = softplus(-x)`` (the difference cancels for large ``x``), the Bernoulli and
binomial log-likelihoods with logits ``k·x - n·softplus(x)`` (each term's loss cancels), the written logistic
``exp(x) / (1 + exp(x))`` and tanh ``(exp(2u) - 1) / (exp(2u) + 1)``, ``1 - tanh(x)²``, the
log-difference of exponentials ``log(exp(a) - exp(b))`` and ``(1 - cos x) / x²``. Each rule's
docstring states the identity; each holds over the reals on the whole domain.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from ..engine._pattern import any_of, const, fixed, op, square_of, var
from ..engine._rule import Rule
from ..forms import _core as _forms
from ..forms import _labels

x, u, a, b = var("x"), var("u"), var("a"), var("b")
ONE = const(1.0)
_CALLS = ("jit", "pjit")


def _example(f: Any, shapes: Any = ((8,),), domain: Any = None) -> dict[str, Any]:
    return {"example": f, "example_shapes": shapes, "example_domain": domain}


# ------------------------------------------------------------------------------ softplus(x) - x
def _softplus_minus(x: Any) -> Any:
    """softplus(x) - x = log(1 + exp(x)) - x = log(1 + exp(-x)) = softplus(-x) (the difference
    cancels to 0 or overflows for large x; it is exp(-x) there)."""
    return _forms.softplus(-x)


def _named(name: str) -> Any:
    """A predicate on a custom rule's ``call_jaxpr``: the function it wraps is called ``name``
    (``jnp.logaddexp`` is a custom_jvp call with no ``name`` parameter)."""
    def check(call: Any) -> bool:
        info = getattr(getattr(call, "jaxpr", call), "debug_info", None)
        label = getattr(info, "func_name", None)
        return isinstance(label, str) and label.split(" ")[0] == name

    return check


def _softplus_call(v: Any) -> Any:
    # jax.nn.softplus: jit(softplus) around custom_jvp logaddexp(x, 0)
    return op(_CALLS, v, params={"name": "softplus"}, recompute=True)


_EXP = op("exp", x, recompute=True)
# the gate: most subtractions are refused on their first operand's producer before any match
_SOFTPLUS_HEADS = frozenset({*_CALLS, "log", "log1p", "custom_jvp_call"})
SOFTPLUS_MINUS = Rule(
    "softplus_minus",
    any_of(op("sub", _softplus_call(x), x),
           op("sub", op("log", op("add", ONE, _EXP)), x),
           op("sub", op("log1p", _EXP), x),
           op("sub", op("custom_jvp_call", x, const(0.0), call_jaxpr=_named("logaddexp"),
                        recompute=True), x)),
    _softplus_minus, gate=lambda g, i: g.head(g.eqns[i].invars[0])[0] in _SOFTPLUS_HEADS,
    **_example(lambda x: jnp.log(1 + jnp.exp(x)) - x),
)


# ---------------------------------------------------------------------- k·x - n·softplus(x)
def _logit_likelihood(x: Any, k: Any, n: Any = None, c: Any = None, negate: bool = False) -> Any:
    """k·x - n·softplus(x) = -k·softplus(-x) - (n - k)·softplus(x) (n = 1 where not written): the
    log-likelihood of k successes in n trials with logit x. As written the two terms cancel for
    large |x| (``y·x - softplus(x)`` at x = 20, y = 1 is 0 in float32, -2.1e-9 exactly); here both
    are <= 0 for 0 <= k <= n and nothing cancels (elsewhere the difference as written; the partials
    written out: ``forms/_labels.logit_likelihood``). ``negate``: the loss, ``n·softplus(x) - k·x``;
    ``c``: a term added before the subtraction (a binomial coefficient's log, ``c + k·x - n·sp``)."""
    total = jnp.ones_like(x) if n is None else n
    out = _labels.logit_likelihood(x, k, total)
    out = -out if negate else out
    return out if c is None else c + out


_SP = any_of(_softplus_call(x), op("log", op("add", ONE, _EXP)), op("log1p", _EXP),
             op("custom_jvp_call", x, const(0.0), call_jaxpr=_named("logaddexp"), recompute=True))
_KX = op("mul", var("k"), x)
_NSP = op("mul", var("n"), _SP)
LOGIT_LIKELIHOOD = Rule(
    "logit_likelihood",
    any_of(op("sub", _KX, _SP), op("sub", _KX, _NSP),
           fixed(op("sub", _SP, _KX), negate=True), fixed(op("sub", _NSP, _KX), negate=True),
           # a log-probability written in one chain: log C(n, k) + k·x - n·softplus(x)
           op("sub", op("add", var("c"), _KX), _SP), op("sub", op("add", var("c"), _KX), _NSP)),
    _logit_likelihood,
    where=lambda m: all(jnp.issubdtype(m.aval(v).dtype, jnp.floating) for v in ("x", "k")),
    examples=(lambda x: 3.0 * x - 5.0 * jax.nn.softplus(x), lambda x: jnp.log1p(jnp.exp(x)) - 0.25 * x),
    **_example(lambda x: 0.5 * x - jnp.log(1 + jnp.exp(x)), domain=(-1e3, 1e3)),
)


# --------------------------------------------------------------------------- written logistic
_EXW = op("exp", x, name="exw", recompute=True)


def _written_sigmoid(x: Any) -> Any:
    """exp(x) / (1 + exp(x)) = 1 / (1 + exp(-x)) = logistic(x) (inf / inf for x > 88 in float32)."""
    return _forms.sigmoid(x)


WRITTEN_SIGMOID = Rule(
    "written_sigmoid",
    op("div", _EXW, op("add", ONE, _EXW)),
    _written_sigmoid,
    **_example(lambda x: jnp.exp(x) / (1 + jnp.exp(x))),
)


# ------------------------------------------------------------------------------- written tanh
_EU = op("exp", u, name="eu", recompute=True)


def _written_tanh(u: Any = None, v: Any = None) -> Any:
    """(exp(u) - 1) / (exp(u) + 1) = tanh(u/2);  (1 - exp(v)) / (1 + exp(v)) = tanh(-v/2)
    (inf / inf where exp overflows, and exp(u) - 1 cancels near 0)."""
    return _forms.tanh(u / 2) if u is not None else _forms.tanh(-v / 2)


_EV = op("exp", var("v"), name="ev", recompute=True)
WRITTEN_TANH = Rule(
    "written_tanh",
    any_of(op("div", op("sub", _EU, ONE), op("add", _EU, ONE)),
           op("div", op("sub", ONE, _EV), op("add", ONE, _EV))),
    _written_tanh,
    **_example(lambda x: (jnp.exp(2 * x) - 1) / (jnp.exp(2 * x) + 1)),
)


# --------------------------------------------------------------------------------------- sech²
@jax.custom_jvp
def _sech2_form(x: Any) -> Any:
    e = jnp.exp(-jnp.abs(x))
    return jnp.square(2 * e / (1 + e * e))


@_sech2_form.defjvp
def _sech2_jvp(primals: Any, tangents: Any) -> Any:
    # d sech²(x) = -2 tanh(x) sech²(x) dx. The value's form reads |x|: differentiated as written, its
    # 1 - e² cancels to 0 for |x| < 6e-8 in float32 (e = exp(-|x|) rounds to 1), where the derivative
    # is -2x (the soundness check of every alternative's gradient found it).
    (x,), (dx,) = primals, tangents
    y = _sech2_form(x)
    return y, -2 * jnp.tanh(x) * y * dx


def _sech2(x: Any) -> Any:
    """1 - tanh(x)² = sech(x)² = (2e / (1 + e²))², e = exp(-|x|) (1 - tanh² cancels to 0 for |x| > 9
    in float32 where sech² is still 6e-8; e² itself would be subnormal, and flushed to zero on CPU,
    where sech² is still a normal number); its derivative -2 tanh(x) sech²(x)."""
    return _sech2_form(x)


SECH2 = Rule("sech2", op("sub", ONE, square_of(op("tanh", x, recompute=True))), _sech2,
             **_example(lambda x: 1 - jnp.tanh(x) ** 2))

# ------------------------------------------------------------------------------------ logdiffexp
def _logdiffexp(a: Any, b: Any) -> Any:
    """log(exp(a) - exp(b)) = a + log(1 - exp(b - a)) = a + log1mexp(a - b) (NaN for a < b, -inf
    for a = b, as written; exp overflows for a > 88 in float32 and the difference cancels)."""
    return a + _forms.log1mexp(a - b)


LOGDIFFEXP = Rule("logdiffexp", op("log", op("sub", op("exp", a), op("exp", b))), _logdiffexp,
                  # a >= 0 >= -b: the difference is positive (the written form's own domain)
                  **_example(lambda a, b: jnp.log(jnp.exp(a) - jnp.exp(-b)), ((8,), (8,)),
                             domain=(0.0, 1e4)))


# ------------------------------------------------------------------------------------ (1-cos)/x²
def _one_minus_cos_over_sq(x: Any) -> Any:
    """(1 - cos x) / x² = sinc(x/2)² / 2, sinc(h) = sin(h)/h (1/2 at 0, where 0/0 is NaN as written;
    the written numerator cancels for small x and x² underflows or overflows at the extremes)."""
    h = x / 2
    safe = jnp.where(h == 0, jnp.ones_like(h), h)
    s = jnp.where(h == 0, jnp.ones_like(h), jnp.sin(safe) / safe)
    return jnp.square(s) / 2


ONE_MINUS_COS_OVER_SQ = Rule(
    "one_minus_cos_over_sq",
    op("div", op("sub", ONE, op("cos", x)), square_of(x)),
    _one_minus_cos_over_sq,
    **_example(lambda x: (1 - jnp.cos(x)) / x**2, domain=(-1e4, 1e4)),
)


# ------------------------------------------------------------------ y / (1 + exp(-x)), swish
@jax.custom_jvp
def _scaled_sigmoid(y: Any, x: Any) -> Any:
    """y / (1 + exp(-x)) as written (accurate in value: exp(-x) = inf gives the ±0 of the underflow
    zone), with the derivative written out: d/dy = sigmoid(x), d/dx = y·sigmoid(x)·sigmoid(-x)."""
    return y / (1 + jnp.exp(-x))


@_scaled_sigmoid.defjvp
def _scaled_sigmoid_jvp(primals: Any, tangents: Any) -> Any:
    (y, x), (ty, tx) = primals, tangents
    s = jax.nn.sigmoid(x)
    return _scaled_sigmoid(y, x), ty * s + tx * (y * s * jax.nn.sigmoid(-x))


def _over_one_plus_exp(y: Any, x: Any = None, z: Any = None) -> Any:
    """y / (1 + exp(-x)) = y · logistic(x);  y / (1 + exp(z)) = y · logistic(-z), with the derivative
    y·sigmoid(x)·sigmoid(-x) in x. The written swish / SiLU ``x / (1 + exp(-x))`` is accurate in
    value, but AD's derivative of it is y·inf / inf = NaN once exp(-x) overflows (x < -88.7 in
    float32). The value is kept as written: ``y · logistic(x)`` would be worse, logistic(x) being
    subnormal for x < -87.3 in float32 and flushed to zero on XLA:CPU where the quotient is still a
    normal number."""
    return _scaled_sigmoid(y, x if x is not None else -z)


SCALED_SIGMOID = Rule(
    "scaled_sigmoid",
    any_of(op("div", var("y"), op("add", ONE, op("exp", op("neg", x)))),
           op("div", var("y"), op("add", ONE, op("exp", var("z"))))),
    _over_one_plus_exp,
    **_example(lambda x: x / (1 + jnp.exp(-x)), domain=(-1e3, 1e3)),
)


#: The rules of this module, in the order the catalogue tries them (see ``_stability.STABILITY``).
WRITTEN_RULES: tuple[Rule, ...] = (SOFTPLUS_MINUS, LOGIT_LIKELIHOOD, WRITTEN_SIGMOID, WRITTEN_TANH, SECH2,
                                   LOGDIFFEXP, ONE_MINUS_COS_OVER_SQ)
