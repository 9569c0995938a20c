"""The stability catalogue, written in the public pattern DSL (no private shortcut).

Order matters where two rules share a root (see ``_engine``): ``log_softmax``, ``logsumexp``,
``softplus``, ``log_sigmoid`` and ``logaddexp`` come before ``log1p``, so ``log(1 + exp(x))`` becomes
softplus and not ``log1p(exp(x))``; ``sigmoid_ratio`` before ``softmax``-like division rules.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

from ..engine._guards import GUARDED_WHERE, MASKED_CLIP, MASKED_WHERE
from ..engine._match import Match
from ..engine._pattern import any_of, const, fixed, op, param, square_of, var
from ..engine._rule import Rule
from ..forms import _core as _forms
from ..forms import _stats as _forms_stats
from ._derivatives import PRIMAL_DERIVATIVE
from ._library_calls import logsumexp_call, softmax_call
from ._stability_backward import BACKWARD_RULES, I0_SCALED, MUL_SQRT_ZERO, POW_DERIVATIVE, SIN_QUOTIENT
from ._stability_complements import COMPLEMENT_RULES
from ._stability_compose import COMPOSE_RULES
from ._stability_divergence import BREGMAN, DIVERGENCE_RULES
from ._stability_factors import LOG_FACTORS
from ._stability_gamma import GAMMA_RULES
from ._stability_gradients import (
    HYPOT_CONSTANT,
    JVP_RULE,
    LOGISTIC_DERIVATIVE,
    NORM_QUOTIENT,
    SOFT_SIGN_DERIVATIVE,
    SOFTPLUS_KINK,
    TANH_DERIVATIVE,
    rewrite_rules_with,
)
from ._stability_inverse import INVERSE_RULES
from ._stability_labels import MASKED_LOG_PROB
from ._stability_logs import (
    INV_SOFTPLUS,
    LOG1MEXP,
    LOG_COSH,
    LOG_SIGMOID_PLUS,
    LOG_SIGMOID_RATIO,
    ONE_MINUS_SIGMOID,
)
from ._stability_mass import MASS_RULES
from ._stability_ml import (
    DIV_EXP,
    EXP_POWER,
    LOG_MEAN_EXP,
    LOG_PROD,
    LOG_SCALED_EXP,
    LOGIT,
    ONE_PLUS_TANH,
    P_LOG_P,
    PROD_POWER,
    SQDIST,
    STD,
    SUM_P_LOG_P,
)
from ._stability_reduce import REDUCE_RULES
from ._stability_sampling import SAMPLING_RULES
from ._stability_select import ONE_HOT_NLL, SELECT_RULES
from ._stability_special import SPECIAL_RULES
from ._stability_stats import STATS_RULES
from ._stability_written import SCALED_SIGMOID, WRITTEN_RULES
from ._stability_xlogy import EXP_XLOGY, XLOGY

x, y, a, b, A = var("x"), var("y"), var("a"), var("b"), var("A")
ONE = const(1.0)
AXES = param("axes")


def _example(f: Any, shapes: Any = ((8,),), domain: Any = None) -> dict[str, Any]:
    return {"example": f, "example_shapes": shapes, "example_domain": domain}


# 1 ------------------------------------------------------------------------------------ logsumexp
def _logsumexp(x: Any, axes: tuple[int, ...]) -> Any:
    """log(sum(exp(x))) = m + log1p(sum_{j≠argmax} exp(x_j - m)), m = max(x) (shift not differentiated)."""
    return _forms.logsumexp(x, axes)


# jax.nn.logsumexp writes log(abs(sum(exp(x - m)))) + m (its sign, unused, also reads the sum): the
# same identity on x - m, whose max is 0, gives the accurate m + log1p(...) once m is added back.
# jax 0.12.1 wraps that body in a custom_jvp (its rule the softmax): the call is logsumexp(x), and
# replaced whole, so the value under differentiation is the accurate one too (JAX's rule recomputes
# its own primal: a rewrite inside the call's body would be lost there).
LOGSUMEXP = Rule("logsumexp",
                 any_of(op("log", op("reduce_sum", op("exp", x), axes=AXES)),
                        op("log", op("abs", op("reduce_sum", op("exp", x), axes=AXES, recompute=True))),
                        logsumexp_call(x)),
                 _logsumexp, **_example(lambda x: jnp.log(jnp.sum(jnp.exp(x)))))

# 2 -------------------------------------------------------------------------------------- softmax
_EX = op("exp", x, name="ex", recompute=True)


def _softmax(x: Any, axes: tuple[int, ...]) -> Any:
    """exp(x) / sum(exp(x)) = exp(x - m) / sum(exp(x - m)), m = max(x)."""
    return _forms.softmax(x, axes)


SOFTMAX = Rule("softmax", op("div", _EX, op("reduce_sum", _EX, axes=AXES)), _softmax,
               **_example(lambda x: jnp.exp(x) / jnp.sum(jnp.exp(x))))


# 3 ---------------------------------------------------------------------------------- log_softmax
def _log_softmax(x: Any, axes: tuple[int, ...], quotient: bool = False, m: Any = None,
                 max_axes: Any = None, whole: bool = False) -> Any:
    """x - log(sum(exp(x))) = log(softmax(x)) = (x - m) - log1p(sum_{j≠argmax} exp(x_j - m));
    x - logsumexp(x) over the same axes, the library's call or its inlined body
    ``log(abs(sum(exp(x - s)))) + s`` for any shift s (the max, under ``stop_gradient``)."""
    return _forms.log_softmax(x, axes)


# x - logsumexp(x): the shift s is read twice (through a broadcast in one of them: jax 0.10 with
# axis=None). It must be one number per reduced slice: the library's stop_gradient of the slice's max
# (zero where it is not finite), a max a user wrote (keepdims; stopped or not), or a scalar.
_MAX = op("reduce_max", x, axes=param("max_axes"))
_CLAMPED = any_of(op("max", const(-math.inf), _MAX), _MAX)
_FINITE_MAX = op("select_n", op("is_finite", op("max", const(-math.inf), _MAX, name="mx")), const(0.0),
                 op("max", const(-math.inf), _MAX, name="mx"))
_SHIFT = any_of(op("stop_gradient", _FINITE_MAX, name="shift", recompute=True),
                op("stop_gradient", _CLAMPED, name="shift", recompute=True),
                op("reduce_max", x, axes=param("max_axes"), name="shift", recompute=True),
                var("m", where=lambda a: a.ndim == 0))
_SHIFTED_SUM = op("reduce_sum", op("exp", op("sub", x, _SHIFT)), axes=AXES, recompute=True)
_LSE_INLINED = op("add", op("log", any_of(op("abs", _SHIFTED_SUM), _SHIFTED_SUM)), _SHIFT)
LOG_SOFTMAX = Rule(
    "log_softmax",
    any_of(op("sub", x, op("log", op("reduce_sum", op("exp", x), axes=AXES))),
           # dynestyx's normalised log-weights, `w - logsumexp(w, axis=-1, keepdims=True)` (issue
           # 47): as it is, the max's log-sum is added before the subtraction and absorbed by a
           # large max (-1e10 + log 7 is -1e10 in float32), where x - max is exact
           # (``whole``: the fast variant keeps these accurate too, the library's own formula being
           # no worse than its fast form, (x - m) - log(sum): 3 bits at a dominant entry)
           fixed(op("sub", x, logsumexp_call(x)), whole=True),
           fixed(op("sub", x, _LSE_INLINED), whole=True),
           # the log of a softmax, written or jax.nn's call (jax 0.12.1); ``quotient`` tells the
           # fast variant below, which keeps these accurate
           fixed(op("log", op("div", _EX, op("reduce_sum", _EX, axes=AXES, recompute=True),
                              recompute=True)), quotient=True),
           fixed(op("log", softmax_call(x, recompute=True)), quotient=True)),
    _log_softmax, where=lambda m: m.captures.get("max_axes", m.captures["axes"]) == m.captures["axes"],
    **_example(lambda x: x - jnp.log(jnp.sum(jnp.exp(x)))),
)


# 4 -------------------------------------------------------------------------------------- softplus
def _softplus(x: Any) -> Any:
    """log(1 + exp(x)) = max(x, 0) + log1p(exp(-|x|)) = logaddexp(0, x)."""
    return _forms.softplus(x)


SOFTPLUS = Rule("softplus", any_of(op("log", op("add", ONE, op("exp", x, recompute=True))),
                                   op("log1p", op("exp", x, recompute=True))), _softplus,
                **_example(lambda x: jnp.log(1 + jnp.exp(x))))


# 5 ----------------------------------------------------------------------------------- log_sigmoid
def _log_sigmoid(x: Any = None, y: Any = None) -> Any:
    """log(sigmoid(x)) = log(1/(1+exp(-x))) = -softplus(-x);  log(1 - sigmoid(y)) = log1p(-sigmoid(y))
    = -softplus(y). A sigmoid the program also uses elsewhere (binary cross-entropy computes
    p = sigmoid(z) once for both logs) is recomputed: each log gets its own softplus."""
    return -_forms.softplus(-x) if x is not None else -_forms.softplus(y)


def _sig(v: Any) -> Any:
    """The spellings of sigmoid(v), each recomputed where the program shares it."""
    return any_of(op("logistic", v, recompute=True),
                  op("div", ONE, op("add", ONE, op("exp", op("neg", v))), recompute=True))


LOG_SIGMOID = Rule(
    "log_sigmoid",
    any_of(op("log", _sig(x)),
           op("log", op("sub", ONE, _sig(y))),
           op("log1p", op("neg", _sig(y)))),
    _log_sigmoid,
    **_example(lambda x: jnp.log(1 / (1 + jnp.exp(-x)))),
)


# 6 --------------------------------------------------------------------------------------- sigmoid
def _sigmoid(x: Any) -> Any:
    """1/(1 + exp(-x)) = logistic(x) (its gradient is finite where the naive one is inf/inf)."""
    return _forms.sigmoid(x)


SIGMOID = Rule("sigmoid", op("div", ONE, op("add", ONE, op("exp", op("neg", x)))), _sigmoid,
               **_example(lambda x: 1 / (1 + jnp.exp(-x))))


# 7 ------------------------------------------------------------------------------------- logaddexp
def _logaddexp(a: Any, b: Any) -> Any:
    """log(exp(a) + exp(b)) = max(a, b) + log1p(exp(-|a - b|))."""
    return _forms.logaddexp(a, b)


LOGADDEXP = Rule("logaddexp", op("log", op("add", op("exp", a), op("exp", b))), _logaddexp,
                 **_example(lambda a, b: jnp.log(jnp.exp(a) + jnp.exp(b)), ((8,), (8,))))


# 8 ----------------------------------------------------------------------------------------- log1p
def _log1p(x: Any = None, y: Any = None) -> Any:
    """log(1 + x) = log1p(x);  log(1 - y) = log1p(-y)."""
    return jnp.log1p(x) if x is not None else jnp.log1p(-y)


# A real constant plus a complex array: jax 0.12.1 adds it to the real part alone, complex(1 + Re z,
# Im z) (0.10 and 0.12.0: a complex add). The same number (up to the sign of a zero imaginary part).
def _one_plus(v: Any) -> Any:
    return any_of(op("add", ONE, v), op("complex", op("add", ONE, op("real", v)), op("imag", v)))


def _one_minus(v: Any) -> Any:
    return any_of(op("sub", ONE, v), op("complex", op("sub", ONE, op("real", v)), op("neg", op("imag", v))))


_C64 = (jax.ShapeDtypeStruct((8,), jnp.complex64),)  # the complex spellings, on every JAX
LOG1P = Rule("log1p", any_of(op("log", _one_plus(x)), op("log", _one_minus(y))), _log1p,
             examples=((lambda z: jnp.log(lax.complex(1 + jnp.real(z), jnp.imag(z))), _C64, (-1e-3, 1e-3)),
                       (lambda z: jnp.log(lax.complex(1 - jnp.real(z), -jnp.imag(z))), _C64, (-1e-3, 1e-3))),
             **_example(lambda x: jnp.log(1 + x), domain=(-1.0, 1e30)))


# 9 ----------------------------------------------------------------------------------------- expm1
def _expm1(x: Any = None, y: Any = None) -> Any:
    """exp(x) - 1 = expm1(x);  1 - exp(y) = -expm1(y)."""
    return jnp.expm1(x) if x is not None else -jnp.expm1(y)


_EZ, _EY = op("exp", x, name="ez"), op("exp", y, name="ey")
EXPM1 = Rule("expm1", any_of(op("sub", op("exp", x), ONE), op("sub", ONE, op("exp", y)),
                             op("complex", op("sub", op("real", _EZ), ONE), op("imag", _EZ)),
                             op("complex", op("sub", ONE, op("real", _EY)), op("neg", op("imag", _EY)))),
             _expm1,
             # exp(z) - 1 and 1 - exp(z) as jax 0.12.1 lowers them for complex z
             examples=((lambda z: (lambda e: lax.complex(jnp.real(e) - 1, jnp.imag(e)))(jnp.exp(z)), _C64,
                        (-1e-3, 1e-3)),
                       (lambda z: (lambda e: lax.complex(1 - jnp.real(e), -jnp.imag(e)))(jnp.exp(z)), _C64,
                        (-1e-3, 1e-3))),
             **_example(lambda x: jnp.exp(x) - 1))


# 10 --------------------------------------------------------------------------------------- log_exp
def _log_exp(x: Any) -> Any:
    """log(exp(x)) = x (exp overflows above log(max); the composition is the identity)."""
    return x


LOG_EXP = Rule("log_exp", op("log", op("exp", x, recompute=True)), _log_exp,
               **_example(lambda x: jnp.log(jnp.exp(x))))


# 11 ----------------------------------------------------------------------------------------- hypot
def _hypot(x: Any, y: Any) -> Any:
    """sqrt(x² + y²) = hypot(x, y) = m·sqrt(1 + (n/m)²), m = max(|x|,|y|), n = min(|x|,|y|)."""
    return _forms.hypot(x, y)


HYPOT = Rule("hypot", op("sqrt", op("add", square_of(x), square_of(y))), _hypot,
             **_example(lambda x, y: jnp.sqrt(x * x + y * y), ((8,), (8,))))


# 12 ------------------------------------------------------------------------------------------ norm
def _norm(x: Any, axes: tuple[int, ...]) -> Any:
    """sqrt(sum(x²)) = m·sqrt(sum((x/m)²)), m = max|x| (0 for the zero vector)."""
    return _forms.norm(x, axes)


NORM = Rule("norm", op("sqrt", op("reduce_sum", square_of(x), axes=AXES)), _norm,
            **_example(lambda x: jnp.sqrt(jnp.sum(x * x))))


# 13 -------------------------------------------------------------------------------------- variance
def _mean_of(inner: Any, axes_name: str, n_name: str, **kw: Any) -> Any:
    return op("div", op("reduce_sum", inner, axes=param(axes_name)), const(lambda v: v > 0, name=n_name),
              **kw)


# The mean is kept: batch-norm code also returns it or centres x with it; it is computed once and
# the replacement reuses it.
_MEAN = _mean_of(x, "axes2", "n2", name="mean", keep=True)
_VARIANCE_PATTERN = op("sub", _mean_of(square_of(x), "axes", "n"), square_of(_MEAN))


def _variance_where(m: Match) -> bool:
    shape = m.aval("x").shape
    axes = tuple(m.captures["axes"])
    count = math.prod(shape[i] for i in axes)
    return (tuple(m.captures["axes2"]) == axes and m.captures["n"] == m.captures["n2"] == float(count))


def _variance(x: Any, mean: Any, axes: tuple[int, ...], axes2: Any = None, n: Any = None,
              n2: Any = None) -> Any:
    """mean(x²) - mean(x)² = s²·(mean(d²) - mean(d)²), d = (x - mean(x))/s, s a power of two
    (corrected two-pass, scaled so the squares cannot overflow); the program's mean is reused."""
    return _forms.variance(x, axes, mean=mean)


VARIANCE = Rule("variance", _VARIANCE_PATTERN, _variance, where=_variance_where,
                **_example(lambda x: jnp.mean(x * x) - jnp.mean(x) ** 2, domain=(-1e15, 1e15)))


# 13b ---------------------------------------------------------------------------------- centering
def _center_where(m: Match) -> bool:
    aval = m.aval("x")
    axes = tuple(m.captures["axes"])
    count = math.prod(aval.shape[i] for i in axes)
    return (bool(axes) and count > 0 and m.captures["n"] == float(count)
            and jnp.issubdtype(aval.dtype, jnp.floating))


def _center(x: Any, axes: tuple[int, ...], mean: Any = None, n: Any = None) -> Any:
    """x - mean(x) = d - mean(d), d = x - x₀ for x's own value x₀ nearest the mean (corrected once
    by the deviations' mean): 0 for a constant slice, no rounding of the mean in the deviations."""
    return _forms_stats.center(x, axes, mean=mean)


# The mean is kept: normalisation code also returns it (running statistics) or reads it again.
CENTER = Rule("center", op("sub", x, _mean_of(x, "axes", "n", name="mean", keep=True)), _center,
              where=_center_where,
              **_example(lambda x: x - jnp.mean(x), domain=(-1e30, 1e30)))


# 14 ------------------------------------------------------------------------------------------ tanh
_EP = op("exp", x, name="ep")
_EN = op("exp", op("neg", x), name="en")


def _tanh(x: Any) -> Any:
    """(exp(x) - exp(-x)) / (exp(x) + exp(-x)) = tanh(x)."""
    return _forms.tanh(x)


TANH = Rule("tanh", op("div", op("sub", _EP, _EN), op("add", _EP, _EN)), _tanh,
            **_example(lambda x: (jnp.exp(x) - jnp.exp(-x)) / (jnp.exp(x) + jnp.exp(-x))))


# 15 --------------------------------------------------------------------------------- one_minus_cos
def _one_minus_cos(x: Any) -> Any:
    """1 - cos(x) = 2·sin(x/2)²."""
    return _forms.one_minus_cos(x)


ONE_MINUS_COS = Rule("one_minus_cos", op("sub", ONE, op("cos", x)), _one_minus_cos,
                     **_example(lambda x: 1 - jnp.cos(x), domain=(-1e4, 1e4)))

# 16 ------------------------------------------------------------------------------- sigmoid_ratio
_EA = op("exp", a, name="ea")


def _sigmoid_ratio(a: Any, b: Any) -> Any:
    """exp(a) / (exp(a) + exp(b)) = logistic(a - b)."""
    return _forms.sigmoid(a - b)


SIGMOID_RATIO = Rule("sigmoid_ratio", op("div", _EA, op("add", _EA, op("exp", b))), _sigmoid_ratio,
                     **_example(lambda a, b: jnp.exp(a) / (jnp.exp(a) + jnp.exp(b)), ((8,), (8,))))

# 17 ------------------------------------------------------------------------------------ inv_matmul
_INV = op("jit", A, params={"name": "inv"})
_MATVEC_DIMS = (((1,), (0,)), ((), ()))


def _dims(dn: Any) -> Any:
    (lc, rc), (lb, rb) = dn
    return ((tuple(int(i) for i in lc), tuple(int(i) for i in rc)),
            (tuple(int(i) for i in lb), tuple(int(i) for i in rb)))


def _inv_matmul_where(m: Match) -> bool:
    return (len(m.aval("A").shape) == 2 and _dims(m.captures["dn"]) == _MATVEC_DIMS
            and len(m.aval("b").shape) in (1, 2))


def _inv_matmul(A: Any, b: Any, dn: Any = None) -> Any:
    """inv(A) @ b = solve(A, b): one LU solve, never forming the inverse (better conditioned)."""
    return jnp.linalg.solve(A, b)


INV_MATMUL = Rule("inv_matmul", op("dot_general", _INV, b, dimension_numbers=param("dn")), _inv_matmul,
                  where=_inv_matmul_where,
                  # a diagonally dominant matrix (entries of A in (-1, 1)): invertible, well conditioned
                  examples=((lambda A, v: jnp.linalg.inv(A + 8 * jnp.eye(4)) @ v, ((4, 4), (4,)),
                             (-1.0, 1.0)),))


# 18 ------------------------------------------------------------------------------ inv_jitter (opt-in)
def _inv_jitter(A: Any) -> Any:
    """inv(A) -> inv(A + εI), ε = 8·eps·mean|diag A|. CHANGES THE RESULT on purpose (regularises a
    nearly singular A); opt-in only, never in ``STABILITY``."""
    return _forms.inv_jitter(A)


INV_JITTER = Rule("inv_jitter", op("jit", A, params={"name": "inv"}), _inv_jitter,
                  where=lambda m: len(m.aval("A").shape) >= 2)

#: The default catalogue, in the order rules are tried at one root.
STABILITY: tuple[Rule, ...] = (
    *SELECT_RULES,
    *WRITTEN_RULES,
    *SAMPLING_RULES,  # Φ^-1 of an interpolated Φ: before normal_quantile and normal_cdf split it
    *MASS_RULES,  # log(Φ(b) - Φ(a)), log(sig(b) - sig(a)): before Φ's own logs and log1p
    *SPECIAL_RULES,  # before log1p: log(1 + erf(z)) is a log_erfc, not log1p(erf(z))
    *COMPLEMENT_RULES,  # before log1p: log(1 - gammainc) is log(gammaincc), not log1p(-gammainc)
    *DIVERGENCE_RULES,  # before log_sigmoid_ratio: the Bernoulli KL's whole sum, not its two logs
    SUM_P_LOG_P,
    P_LOG_P,
    ONE_HOT_NLL,  # after sum_p_log_p: sum(p·log p) with p a softmax is an entropy, not a label
    LOGIT,
    LOG_SIGMOID_RATIO,  # after logit: log(s(x) / (1 - s(x))) is x exactly
    LOG_SOFTMAX,
    LOG_MEAN_EXP,
    LOGSUMEXP,
    SOFTMAX,
    SIGMOID_RATIO,
    SOFTPLUS_KINK,  # max(x, 0) + log1p(exp(-|x|)): the whole softplus, not its tail alone
    SOFTPLUS,
    LOG_SIGMOID,
    LOG_SIGMOID_PLUS,
    LOGADDEXP,
    *COMPOSE_RULES,  # after the whole forms' log rules; before log1p (log(1 - stable sigmoid))
    INV_SOFTPLUS,
    LOG1MEXP,
    LOG_COSH,
    LOG1P,
    SIGMOID,
    SCALED_SIGMOID,  # after sigmoid: 1 / (1 + exp(-x)) is logistic(x) itself
    ONE_MINUS_SIGMOID,
    EXPM1,
    *BACKWARD_RULES,  # expm1(x) + 1 (a derivative rule's spelling of exp), pow(x, 0)
    EXP_XLOGY,  # exp(a)·(a - b): a KL with log targets, 0 at a log target of -inf
    LOG_EXP,
    *INVERSE_RULES,  # the other round trips (atanh(tanh x), exp(log x), sqrt(x²), ...)
    LOG_SCALED_EXP,
    LOG_PROD,
    PROD_POWER,
    DIV_EXP,
    EXP_POWER,
    ONE_PLUS_TANH,
    SQDIST,
    STD,
    *REDUCE_RULES,  # after std: sqrt(mean((x - mean)²)) is a standard deviation first
    HYPOT,
    NORM,
    HYPOT_CONSTANT,  # after hypot: sqrt(x² + y²) of two variables is hypot's
    *STATS_RULES,  # covariance, merged batches, means of means (composable: variance reads them)
    VARIANCE,
    CENTER,  # after variance and std: x - mean inside their squares is theirs to rewrite
    TANH,
    ONE_MINUS_COS,
    INV_MATMUL,
    *GAMMA_RULES,  # structural (add/sub trees of lgamma terms); before the where guards
    GUARDED_WHERE,  # structural: runs after the pattern rules (a guarded branch they fixed is left)
    MASKED_WHERE,  # where guarded_where finds no guard of the form x OP c: any mask, constant too
    MASKED_CLIP,  # a clip (max/min/clamp with a constant, jnp.clip) of a log or root: a where too
    BREGMAN,  # structural: reads sums the pattern rules left (and their expm1, exp(-b) results)
    NORM_QUOTIENT,  # structural: x / d for d a root the pattern rules may have rewritten (a norm)
    XLOGY,  # structural: after the pattern rules fixed their logs, after bregman took its sums
    LOG_FACTORS,  # structural: the logs of products no rule above took (log_prod, log_quotient_exp)
    MASKED_LOG_PROB,  # structural: t·log_softmax(x) that one_hot_nll's sums did not take
    JVP_RULE,  # structural: a user's custom_jvp rule rewritten by this catalogue (composable)
    SOFT_SIGN_DERIVATIVE,  # derivative only (a pattern; 1 + |x| is nothing else's)
    LOGISTIC_DERIVATIVE,  # structural, derivative only: the logistics and tanhs no rule above took
    TANH_DERIVATIVE,
    SIN_QUOTIENT,  # derivative only: sin(y)/y, I0, a·sqrt(b) at a structural zero (issue 47)
    I0_SCALED,
    MUL_SQRT_ZERO,
    POW_DERIVATIVE,  # derivative only: x ** y at y = 0 (a polynomial's x ** arange(n) at x = 0)
)
rewrite_rules_with(STABILITY)  # the catalogue jvp_rule rewrites a user's derivative rule with

# 19 ------------------------------------------------------------------ fast logsumexp / log_softmax
def _logsumexp_fast(x: Any, axes: tuple[int, ...]) -> Any:
    """log(sum(exp(x))) = m + log(sum(exp(x - m))), m = max(x): no overflow, the library's speed,
    but the small terms are lost where the result is near 0 (``logsumexp`` keeps them)."""
    return _forms.logsumexp_fast(x, axes)


def _log_softmax_fast(x: Any, axes: tuple[int, ...], quotient: bool = False, m: Any = None,
                      max_axes: Any = None, whole: bool = False) -> Any:
    """x - log(sum(exp(x))) = (x - m) - log(sum(exp(x - m))): the library's formula and speed.
    log(softmax(x)) takes the accurate form: the log of a quotient rounded below 1 already beats
    the library's log of a sum rounded just above 1 at the dominant entry (by up to 3 bits at
    x = [12.26, 3.27, 2.78, ...], issue 45), and it pays a log per element as the accurate form
    does. x - logsumexp(x) (the library's call or its inlined body) takes it too: the library's
    ``m + log(sum)`` subtracted from x is no worse than the fast form's ``(x - m) - log(sum)``, and
    up to 3 bits better at a dominant entry."""
    return _forms.log_softmax(x, axes) if quotient or whole else _forms.log_softmax_fast(x, axes)


LOGSUMEXP_FAST = dataclasses.replace(LOGSUMEXP, name="logsumexp_fast", replacement=_logsumexp_fast,
                                     doc="")
LOG_SOFTMAX_FAST = dataclasses.replace(LOG_SOFTMAX, name="log_softmax_fast",
                                       replacement=_log_softmax_fast, doc="")

#: The default catalogue with the two fast variants in place of ``logsumexp`` and ``log_softmax``:
#: overflow-free and as fast as ``jax.nn`` on CPU, where the accurate forms cost about 1.8x
#: (``benchmarks/bench_rewrite.py`` prints both); they lose the small terms the accurate forms keep.
STABILITY_FAST: tuple[Rule, ...] = tuple(
    {"logsumexp": LOGSUMEXP_FAST, "log_softmax": LOG_SOFTMAX_FAST}.get(r.name, r) for r in STABILITY)

#: Rules that change results on purpose; never applied unless named. ``primal_derivative`` changes
#: gradients: a custom derivative rule is replaced by the derivative of the stabilised primal.
RESULT_CHANGING: tuple[Rule, ...] = (INV_JITTER, PRIMAL_DERIVATIVE)
