"""Stability rules for reductions that overflow where their result does not: mean, RMS, cosine.

``sum(x) / n`` overflows in the sum where the mean of terms near the float max is finite;
``sqrt(mean(x²))`` squares before it roots; a cosine similarity ``a·b / (|a| |b|)`` overflows in the
dot product and in the product of the norms. Each rule's docstring states the identity; each holds
over the reals on the whole domain.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ... import _compat
from ..engine._match import Match
from ..engine._pattern import any_of, const, fixed, op, param, square_of, var
from ..engine._rule import Rule
from ..forms import _core as _forms
from ..forms import _stats as _fs

x, a, b = var("x"), var("a"), var("b")
AXES = param("axes")
_N = const(lambda v: v > 0 and math.isfinite(v), name="n")
_CALLS = ("jit", "pjit")


def _example(f: Any, shapes: Any = ((8,),), domain: Any = None) -> dict[str, Any]:
    return {"example": f, "example_shapes": shapes, "example_domain": domain}


def _count(m: Match, name: str = "x", key: str = "axes") -> int:
    shape = m.aval(name).shape
    return math.prod(shape[i] for i in tuple(m.captures[key]))


# ------------------------------------------------------------------------------------------ mean
def _mean(x: Any, axes: tuple[int, ...], n: float) -> Any:
    """sum(x) / n = sum(x / 2^k) / (n / 2^k), 2^k >= n the power of two (exact scalings), where the
    sum overflows; sum(x) / n elsewhere (the mean of terms near the float max is finite)."""
    ax = tuple(int(i) for i in axes)
    s = jnp.sum(x, axis=ax)
    k = 2.0 ** math.ceil(math.log2(n))
    scaled = jnp.sum(x * jnp.asarray(1 / k, x.dtype), axis=ax) / jnp.asarray(n / k, x.dtype)
    return jnp.where(jnp.isfinite(s), s / jnp.asarray(n, x.dtype), scaled)


MEAN = Rule("mean", op("div", op("reduce_sum", x, axes=AXES), _N), _mean,
            where=lambda m: m.captures["n"] == float(_count(m)) and _real(m),
            **_example(lambda x: jnp.mean(x), domain=(-3e38, 3e38)))


def _real(m: Match, name: str = "x") -> bool:
    return bool(jnp.issubdtype(m.aval(name).dtype, jnp.floating))


# ------------------------------------------------------------------------------------------- rms
def _rms(x: Any, axes: tuple[int, ...], n: float) -> Any:
    """sqrt(sum(x²) / n) = s·sqrt(sum((x/s)²) / n), s a power of two near max|x| (the squares
    overflow, or underflow, long before the root mean square does; it is at most max|x|)."""
    ax = tuple(int(i) for i in axes)
    m = lax.stop_gradient(jnp.max(jnp.abs(x), axis=ax, keepdims=True))
    scale, inv = _forms._pow2_scale(m)
    y = x * inv
    ms = jnp.sum(y * y, axis=ax, keepdims=True) / jnp.asarray(n, x.dtype)
    positive = ms > 0  # the double where: sqrt's derivative at 0 is never formed (0 for x = 0)
    root = jnp.where(positive, jnp.sqrt(jnp.where(positive, ms, jnp.ones_like(ms))),
                     jnp.zeros_like(ms))
    return jnp.squeeze(scale * root, axis=ax)


RMS = Rule("rms", op("sqrt", op("div", op("reduce_sum", square_of(x), axes=AXES), _N)), _rms,
           where=_real, **_example(lambda x: jnp.sqrt(jnp.mean(x**2))))


# ----------------------------------------------------------------------- RMS with an epsilon
def _rms_epsilon(x: Any, axes: tuple[int, ...], n: float, c: float, power: int, **_: Any) -> Any:
    """(mean(x²) + c)^(power/2), power = -1 (RMSNorm's ``rsqrt``, ``1/sqrt``) or 1, as
    s^power·(mean((x/s)²) + (c/s)/s)^(power/2), s a power of two near max(max|x|, √c) (exact scalings):
    ``x²`` overflows past 1.8e19 in float32 and 256 in float16 (an RMSNorm's activations), where
    the result is an ordinary number (``1/|x|``-sized); with s at least √c, c/s² stays below 4 and the
    scaled squares at most 1. Its derivative is the written one's mathematics (s is a constant)."""
    ax = tuple(int(i) for i in axes)
    floor = jnp.sqrt(jnp.asarray(c, x.dtype))
    m = lax.stop_gradient(jnp.maximum(jnp.max(jnp.abs(x), axis=ax, keepdims=True), floor))
    scale, inv = _forms._pow2_scale(m)
    # summed in float32 at least, as jnp.mean sums float16 and bfloat16 (the scaled squares are exact
    # there); the result in x's dtype, as the program's
    acc = x.dtype if jnp.dtype(x.dtype).itemsize >= 4 else jnp.dtype(jnp.float32)
    y = (x * inv).astype(acc)
    inv_a = inv.astype(acc)
    tail = (jnp.asarray(c, acc) * inv_a) * inv_a  # in this order: inv² alone may overflow for a tiny c
    ms = jnp.sum(y * y, axis=ax, keepdims=True) / jnp.asarray(n, acc) + tail
    out = lax.rsqrt(ms) * inv_a if power == -1 else jnp.sqrt(ms) * scale.astype(acc)
    return jnp.squeeze(out, axis=ax).astype(x.dtype)


# jnp.mean of float16/bfloat16 squares sums them in float32: converts around the sum
_UPCAST_SUM = op("reduce_sum", op("convert_element_type", square_of(x)), axes=AXES)
_MEAN_SQ = any_of(op("div", op("reduce_sum", square_of(x), axes=AXES), _N),
                  op("convert_element_type", op("div", _UPCAST_SUM, _N)))
_EPS = const(lambda v: math.isfinite(v) and v > 0, name="c")
_MS_EPS = op("add", _MEAN_SQ, _EPS)  # either order: add's operands are tried swapped
RMS_EPSILON = Rule(
    "rms_epsilon",
    any_of(fixed(op("rsqrt", _MS_EPS), power=-1), fixed(op("div", const(1.0), op("sqrt", _MS_EPS)), power=-1),
           fixed(op("sqrt", _MS_EPS), power=1)),
    _rms_epsilon, where=_real,
    examples=(lambda x: x * lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6),
              lambda x: x / jnp.sqrt(jnp.mean(jnp.square(x)) + 1e-5),
              lambda x: jnp.sqrt(1e-8 + jnp.mean(x**2)),
              # float16 squares, summed in float32 by jnp.mean (the converts around the sum)
              lambda x: lax.rsqrt(jnp.mean(lax.pow(x.astype(jnp.float16), jnp.float16(2.0))) + 1e-3),
              lambda x: 1.0 / jnp.sqrt(jnp.mean(lax.pow(x.astype(jnp.float16), jnp.float16(2.0))) + 1e-3),
              lambda x: jnp.sqrt(jnp.mean(lax.pow(x.astype(jnp.float16), jnp.float16(2.0))) + 1e-3)),
    **_example(lambda x: lax.rsqrt(jnp.mean(x * x, axis=-1) + 1e-6), shapes=((4, 8),), domain=(-1e30, 1e30)),
)


# ---------------------------------------------------------------------------------------- cosine
def _norm_of(v: Any, tag: str) -> Any:
    return any_of(op("sqrt", _sumsq(v, tag)),
                  op(_CALLS, v, params={"name": "norm", "jaxpr": param(tag + "_body")}))


def _sumsq(v: Any, tag: str) -> Any:
    """sum(v²) over an axis, or ``jnp.dot(v, v)`` / ``v @ v`` (a dot_general of v with itself)."""
    return any_of(op("reduce_sum", square_of(v), axes=param(tag)),
                  op("dot_general", v, v, dimension_numbers=param(tag + "_dn")))


_DOT = any_of(op("dot_general", a, b, dimension_numbers=param("dn")),
              op("reduce_sum", op("mul", a, b), axes=param("axes_d")))
_DEN = any_of(op("mul", _norm_of(a, "axes_a"), _norm_of(b, "axes_b")),
              op("sqrt", op("mul", _sumsq(a, "axes_a"), _sumsq(b, "axes_b"))))


def _two_norm_body(body: Any, last: int) -> bool:
    """Whether a ``jnp.linalg.norm`` call's body is the 2-norm over the last axis: sqrt(sum(v·v))."""
    eqns = _compat.eqns(_compat.as_closed(body))
    names = [_compat.primitive_name(e) for e in eqns]
    if names not in (["mul", "reduce_sum", "sqrt"], ["integer_pow", "reduce_sum", "sqrt"],
                     ["abs", "mul", "reduce_sum", "sqrt"]):
        return False
    return tuple(int(i) for i in eqns[-2].params["axes"]) == (last,)


def _cosine_where(m: Match) -> bool:
    sa, sb = m.aval("a"), m.aval("b")
    rank = len(sa.shape)
    if tuple(sa.shape) != tuple(sb.shape) or rank == 0 or not (_real(m, "a") and _real(m, "b")):
        return False
    last = rank - 1  # vectors, or vectors batched along the leading axes
    for key in ("axes_a", "axes_b", "axes_d"):
        if key in m.captures and tuple(int(i) for i in m.captures[key]) != (last,):
            return False
    for key in ("axes_a_body", "axes_b_body"):
        if key in m.captures and not _two_norm_body(m.captures[key], last):
            return False
    batch = tuple(range(rank - 1))
    for key in ("dn", "axes_a_dn", "axes_b_dn"):  # dot products over the last axis, batched on the rest
        if key in m.captures:
            (lc, rc), (lb, rb) = m.captures[key]
            if not (tuple(lc) == (last,) and tuple(rc) == (last,) and tuple(lb) == batch
                    and tuple(rb) == batch):
                return False
    return True


def _cosine(a: Any, b: Any, **_: Any) -> Any:
    """a·b / (|a| |b|) = a·b / sqrt(|a|² |b|²) = (a / |a|)·(b / |b|), each norm scaled by a power of
    two near the largest element (the dot product and the products of norms overflow first); its
    derivative (b̂ - cos·â)·da/|a| + (â - cos·b̂)·db/|b| in the unit vectors."""
    return _cosine_form(a, b)


@jax.custom_jvp
def _cosine_form(a: Any, b: Any) -> Any:
    last = jnp.ndim(a) - 1
    return jnp.sum(_unit(a, last) * _unit(b, last), axis=last)


@_cosine_form.defjvp
def _cosine_jvp(primals: Any, tangents: Any) -> Any:
    # Differentiated as written, b / |b| gives 1/|b| - b_k²/|b|³ for a dominant b_k: an ulp of 1/|b|
    # where the derivative is 0 (6e-30 for |b| = 1.5e22 in float32; the written cosine's two terms
    # round alike there). In the unit vectors the difference â_k - cos·b̂_k is exactly 0 then.
    (a, b), (da, db) = primals, tangents
    last = jnp.ndim(a) - 1
    ua, na = _unit(a, last), _norm(a, last)
    ub, nb = _unit(b, last), _norm(b, last)
    c = jnp.sum(ua * ub, axis=last, keepdims=True)
    # the gradient in a is b̂ without its component along â, and rounding leaves an ulp of that
    # component (6e-30 at a b nearly along one axis, |b| = 1.5e22): projected out a second time, as
    # Gram-Schmidt is re-orthogonalised ("twice is enough")
    ra = _reject(ub - c * ua, ua, last)
    rb = _reject(ua - c * ub, ub, last)
    ta = jnp.sum(ra * da, axis=last, keepdims=True) / na
    tb = jnp.sum(rb * db, axis=last, keepdims=True) / nb
    return jnp.squeeze(c, last), jnp.squeeze(ta + tb, last)


def _unit(v: Any, last: int) -> Any:
    """v / |v| as (v / s) / |v / s|: dividing by |v| itself would multiply by 1/|v|, subnormal (and
    flushed to zero on CPU) for |v| above 2^126; |v / s| is between 1 and 2·sqrt(n)."""
    m = lax.stop_gradient(jnp.max(jnp.abs(v), axis=last, keepdims=True))
    _, inv = _forms._pow2_scale(m)
    y = v * inv
    return y / jnp.sqrt(jnp.sum(y * y, axis=last, keepdims=True))


def _reject(r: Any, u: Any, last: int) -> Any:
    """``r`` without its component along the unit vector ``u``."""
    return r - jnp.sum(r * u, axis=last, keepdims=True) * u


def _norm(v: Any, last: int) -> Any:
    """|v| as s·|v / s| (keepdims), s the power of two of :func:`_unit`."""
    m = lax.stop_gradient(jnp.max(jnp.abs(v), axis=last, keepdims=True))
    _, inv = _forms._pow2_scale(m)
    y = v * inv
    return jnp.sqrt(jnp.sum(y * y, axis=last, keepdims=True)) / inv


COSINE = Rule("cosine", op("div", _DOT, _DEN), _cosine, where=_cosine_where,
              **_example(lambda a, b: jnp.dot(a, b) / (jnp.linalg.norm(a) * jnp.linalg.norm(b)),
                         ((8,), (8,)), domain=(0.0, 3e38)))

# ----------------------------------------------------------------------------------------- var
def _var_axes(body: Any) -> tuple[int, ...] | None:
    for eqn in _compat.eqns(_compat.as_closed(body)):
        if _compat.primitive_name(eqn) == "reduce_sum":
            return tuple(int(i) for i in eqn.params["axes"])
    return None


def _var(x: Any, body: Any, ddof: Any) -> Any:
    """var(x) = std(x)², the standard deviation computed on x / s and its deviations divided by a
    second power of two (``jnp.var`` squares the deviations: x = [1e20, -1e20] overflows in float32
    where the variance, 1e40, does too, but [1e19, -1e19] as well, where it is 1e38). Its derivative
    is written out (:func:`forms._stats.variance_ddof`): finite where the variance overflows."""
    ax = _var_axes(body)
    assert ax is not None  # the where below refused the match otherwise
    return _fs.variance_ddof(x, ax, ddof)


VAR = Rule("var", op(_CALLS, x, var("ddof"), params={"name": "_var", "jaxpr": param("body")}), _var,
           where=lambda m: (_var_axes(m.captures["body"]) is not None and len(m.aval("ddof").shape) == 0
                            and _real(m)),
           **_example(lambda x: jnp.var(x), domain=(-1e30, 1e30)))


# ---------------------------------------------------------------------------------- exp_mean_log
def _exp_mean_log(x: Any, axes: tuple[int, ...], n: float | None = None, r: float | None = None) -> Any:
    """exp(sum(log x) / n) = exp(sum(log x) · r) = prod(x) ** (1/n), the geometric power formed
    exactly (the exp of a rounded sum of logs near ±88 carries 88·2^-24 relative, 6.5 bits);
    NaN where some x < 0, as the logs are."""
    c = 1.0 / n if n is not None else float(r or 1.0)
    nan = jnp.full_like(x, jnp.nan)
    out = _fs.geometric_power(jnp.where(x < 0, nan, x), c, tuple(axes))
    return out


_SUM_LOG = op("reduce_sum", op("log", x), axes=AXES)
EXP_MEAN_LOG = Rule(
    "exp_mean_log",
    any_of(op("exp", op("div", _SUM_LOG, _N)),
           op("exp", op("mul", _SUM_LOG, const(lambda v: math.isfinite(v) and v != 0, name="r")))),
    _exp_mean_log, where=_real,
    **_example(lambda x: jnp.exp(jnp.mean(jnp.log(x))), domain=(0.0, 1e30)),
)

# -------------------------------------------------------------------------------- weighted_lse
def _signed_sum(w: Any, t: Any, ax: tuple[int, ...]) -> tuple[Any, Any]:
    """``(s, m)`` with ``sum(sign(w)·exp(t)) = s·exp(m)`` (keepdims), ``t = x + log|w|``: ``m`` the
    largest ``t`` (0 where it is not finite), ``s = sum(sign(w)·exp(t - m))``."""
    m = lax.stop_gradient(jnp.max(t, axis=ax, keepdims=True))
    m = jnp.where(jnp.isfinite(m), m, jnp.zeros_like(m))
    return jnp.sum(jnp.sign(w) * jnp.exp(t - m), axis=ax, keepdims=True), m


@functools.partial(jax.custom_jvp, nondiff_argnums=(2,))
def _weighted_lse_form(w: Any, x: Any, ax: tuple[int, ...]) -> Any:
    t = x + jnp.log(jnp.abs(w))  # log|w| = -inf for w = 0: its term is exp(-inf) = 0
    s, m = _signed_sum(w, t, ax)
    signed = jnp.log(s) + m
    nonneg = jnp.all(w >= 0, axis=ax, keepdims=True)
    # where no weight is negative: the accurate logsumexp of t (m + log1p of the others)
    safe_t = jnp.where(nonneg, t, jnp.zeros_like(t))
    accurate = jnp.expand_dims(_forms.logsumexp(safe_t, ax), ax)
    return jnp.squeeze(jnp.where(nonneg, accurate, signed), axis=ax)


@_weighted_lse_form.defjvp
def _weighted_lse_jvp(ax: tuple[int, ...], primals: Any, tangents: Any) -> Any:
    (w, x), (tw, tx) = primals, tangents
    out = _weighted_lse_form(w, x, ax)
    # d/dw_i = exp(x_i - r), d/dx_i = w_i exp(x_i - r), r the result (finite where w_i = 0, where
    # the form's log|w| has an infinite derivative). Formed as e_i / s and w_i e_i / s, e = exp(x - max x)
    # and s = sum(w e), where s is a normal float: exp(x_i - r) itself would carry r's rounding, an ulp
    # of |r|, into every derivative (8 bits at x = -900 in float32). e / s first (at most 1/tiny, no
    # overflow; w e alone may underflow where w is tiny and its exponent is not the max). Elsewhere
    # (the weights' sum under- or overflows beside the max) from r.
    _, shift = _forms._max_shift(x, ax)
    e = jnp.exp(x - shift)
    total = jnp.sum(w * e, axis=ax, keepdims=True)
    ok = jnp.isfinite(total) & (jnp.abs(total) >= jnp.finfo(total.dtype).tiny)
    safe = jnp.where(ok, total, jnp.ones_like(total))
    far = jnp.exp(x - jnp.expand_dims(out, ax))
    dw = jnp.where(ok, e / safe, far)
    dx = w * dw
    return out, jnp.sum(dw * tw + dx * tx, axis=ax)


def _weighted_lse(w: Any, x: Any, axes: tuple[int, ...], absolute: bool = False) -> Any:
    """log(sum(w·exp(x))) = logsumexp(x + log w) where every w >= 0 (w = 0 adds nothing);
    m + log(sum(sign(w)·exp(x + log|w| - m))), m = max(x + log|w|), elsewhere (exp overflows for
    x > 88 in float32 and underflows below -103, where the weighted sum is still a normal number).
    Weights that broadcast against the terms (a mixture's ``(1, k)`` weights times ``(n, k)``
    densities, as ``mul`` broadcasts them) are broadcast first: the form takes one shape.
    ``absolute``: log(|sum(w·exp(x))|) (SciPy's ``logsumexp(a, b=...)`` as written before
    ``return_sign``), the magnitude of the signed form where a weight is negative."""
    shape = np.broadcast_shapes(np.shape(w), np.shape(x))
    w, x = jnp.broadcast_to(w, shape), jnp.broadcast_to(x, shape)
    ax = tuple(int(i) for i in axes)
    out = _weighted_lse_form(w, x, ax)
    if not absolute:
        return out
    nonneg = jnp.all(w >= 0, axis=ax, keepdims=True)
    ws = jnp.where(nonneg, jnp.ones_like(w), w)  # the untaken branch reads a safe input (no log 0)
    s, m = _signed_sum(ws, x + jnp.log(jnp.abs(ws)), ax)
    magnitude = jnp.log(jnp.abs(s)) + m
    return jnp.where(jnp.squeeze(nonneg, axis=ax), out, jnp.squeeze(magnitude, axis=ax))


def _broadcastable(m: Match) -> bool:
    """Weights and terms of one shape, or of shapes ``mul`` broadcasts together (one rank)."""
    w, x = tuple(m.aval("w").shape), tuple(m.aval("x").shape)
    return len(w) == len(x) and all(a == b or 1 in (a, b) for a, b in zip(w, x))


_WEIGHTED_SUM = op("reduce_sum", op("mul", var("w"), op("exp", x, recompute=True)), axes=AXES, recompute=True)
# A mixture's log-density as users write it, log(sum(weights * pdf)) with pdf = exp(logpdf)
# (jax.scipy.stats' pdf functions are exp of their logpdf): the components underflow together.
WEIGHTED_LSE = Rule(
    "weighted_lse",
    any_of(op("log", _WEIGHTED_SUM),
           # SciPy's and JAX's old ``logsumexp(a, b=...)``, log|sum(b·exp(a - max a))| + max a, the max
           # taken over zero weights too (jax#5370: a pruned component's large term underflows the
           # others to -inf); the shift stays in x and is added back as written
           fixed(op("log", op("abs", _WEIGHTED_SUM)), absolute=True)),
    _weighted_lse,
    where=lambda m: _broadcastable(m) and _real(m) and _real(m, "w"),
    **_example(lambda w, x: jnp.log(jnp.sum(w * jnp.exp(x))), ((8,), (8,)), domain=(0.0, 1e4)),
)

# ------------------------------------------------------------------------------- log_exp_dot
#: The most terms (batch x free x free x contracted) log_exp_dot forms: its log-space form holds every
#: product term apart (16 MiB in float32); a larger product is left as written.
_LOG_EXP_DOT_TERMS = 1 << 22


def _dims(dn: Any, exp_first: bool) -> tuple[tuple[tuple[int, ...], ...], tuple[tuple[int, ...], ...]]:
    """``((contracted, batch) of exp's operand, (contracted, batch) of the weights)`` from a
    ``dot_general``'s dimension numbers."""
    (lc, rc), (lb, rb) = dn
    left, right = (tuple(int(i) for i in lc), tuple(int(i) for i in lb)), (tuple(int(i) for i in rc),
                                                                           tuple(int(i) for i in rb))
    return (left, right) if exp_first else (right, left)


def _log_exp_dot(a: Any, w: Any, dn: Any, exp_first: bool = False) -> Any:
    """log(exp(a) @ w) (any ``dot_general``, ``exp(a)`` either operand) as ``weighted_lse`` of each
    output's terms: ``log(sum_k w_k exp(a_k))`` over the contracted axes, shifted by the largest
    ``a_k + log|w_k|`` of its own terms. The mixture ``log(exp(log_lik) @ weights)`` and the HMM forward
    step ``log(exp(alpha) @ A)`` in probability space underflow to -inf (or overflow) where the result is
    an ordinary number. The terms are formed apart (a product's own shift would leave the derivative's
    ``w / sum`` to overflow where a tiny weight sits on the largest exponent: 1e4 / 2.8e-37 in float32),
    a zero weight adds nothing, a negative sum's log is NaN as the program's."""
    (ac, ab), (wc, wb) = _dims(dn, exp_first)
    af = tuple(d for d in range(a.ndim) if d not in ac and d not in ab)
    wf = tuple(d for d in range(w.ndim) if d not in wc and d not in wb)
    batch = tuple(a.shape[d] for d in ab)
    fa, fw = tuple(a.shape[d] for d in af), tuple(w.shape[d] for d in wf)
    size = (math.prod(batch), math.prod(fa), math.prod(fw), math.prod(a.shape[d] for d in ac))
    # (B, Fa, 1, C) exponents against (B, 1, Fw, C) weights: each output's terms on the last axis
    x = jnp.reshape(jnp.transpose(a, (*ab, *af, *ac)), (size[0], size[1], 1, size[3]))
    v = jnp.reshape(jnp.transpose(w, (*wb, *wf, *wc)), (size[0], 1, size[2], size[3]))
    out = _weighted_lse_form(jnp.broadcast_to(v, size), jnp.broadcast_to(x, size), (3,))
    out = jnp.reshape(out, (*batch, *fa, *fw))
    if not exp_first:  # the output's order is (batch, the first operand's free axes, the second's)
        nb, na = len(batch), len(fa)
        out = jnp.transpose(out, (*range(nb), *range(nb + na, out.ndim), *range(nb, nb + na)))
    return out


def _log_exp_dot_where(m: Match) -> bool:
    """Real operands, and at most ``_LOG_EXP_DOT_TERMS`` product terms: ``a``'s elements times the
    weights' free extent."""
    if not (_real(m, "a") and _real(m, "w")):
        return False
    _, (wc, wb) = _dims(m.captures["dn"], bool(m.captures.get("exp_first")))
    w = tuple(int(d) for d in m.aval("w").shape)
    free = math.prod(n for d, n in enumerate(w) if d not in wc and d not in wb)
    return math.prod(int(d) for d in m.aval("a").shape) * free <= _LOG_EXP_DOT_TERMS


_EXP_A = op("exp", var("a"), recompute=True)
# exp(a) as either operand: `exp(ll) @ w`, `w @ exp(a)`, `jnp.dot(weights, jnp.exp(ll))`
LOG_EXP_DOT = Rule(
    "log_exp_dot",
    any_of(fixed(op("log", op("dot_general", _EXP_A, var("w"), dimension_numbers=param("dn"))),
                 exp_first=True),
           op("log", op("dot_general", var("w"), _EXP_A, dimension_numbers=param("dn")))),
    _log_exp_dot,
    where=_log_exp_dot_where,
    examples=((lambda a, w: jnp.log(jnp.square(w) @ jnp.exp(a)), ((3, 4), (2, 3)), (-1e3, 1e3)),),
    **_example(lambda a, w: jnp.log(jnp.exp(a) @ jnp.square(w)), shapes=((4, 3), (3, 2)), domain=(-1e3, 1e3)),
)


# ------------------------------------------------------------------------------- a floored norm
def _clip_floor_only(body: Any) -> bool:
    """Whether a ``jnp.clip`` call's body is ``max(min, x)`` alone (a lower bound, no upper one)."""
    names = [_compat.primitive_name(e) for e in _compat.eqns(_compat.as_closed(body))]
    return names in (["max"], ["convert_element_type", "max"])


def _floor_where(m: Match) -> bool:
    c = m.captures.get("c")
    if c is None or not _real(m) or not (math.isfinite(float(c)) and float(c) >= 0):
        return False
    return "clip_body" not in m.captures or _clip_floor_only(m.captures["clip_body"])


def _norm_floor(x: Any, axes: tuple[int, ...], c: float, **_: Any) -> Any:
    """sqrt(max(c, sum(x²))) = max(sqrt(c), |x|) for c >= 0 (sqrt is increasing; rounded correctly, the
    two agree bit for bit where the floor is taken), the norm scaled as ``norm``'s (optax's
    ``cosine_similarity``: ``sqrt(square(a).sum(keepdims=True).clip(eps))``, whose squares overflow
    past 1.8e19 in float32 and underflow below 1e-19, where the norm and the cosine are normal floats).
    Its derivative is the norm's, x/|x| (0 at x = 0, where sqrt's at max(0, 0) was 0·inf = NaN)."""
    floor = jnp.sqrt(jnp.asarray(c, x.dtype))
    return jnp.maximum(floor, _forms.norm(x, tuple(int(i) for i in axes)))


_SUMSQ = op("reduce_sum", square_of(x), axes=AXES)
_FLOOR = const(lambda v: math.isfinite(v) and v >= 0, name="c")
NORM_FLOOR = Rule(
    "norm_floor",
    op("sqrt", any_of(op("max", _SUMSQ, _FLOOR), op("max", _FLOOR, _SUMSQ),
                      op(_CALLS, _SUMSQ, _FLOOR, params={"name": "clip", "jaxpr": param("clip_body")}))),
    _norm_floor, where=_floor_where,
    examples=(lambda x: jnp.sqrt(jnp.maximum(jnp.sum(x * x), 1e-12)),
              lambda x: jnp.sqrt(jnp.maximum(1e-12, jnp.sum(x**2))),
              lambda x: x / jnp.sqrt(jnp.square(x).sum(-1, keepdims=True).clip(1e-8)),
              lambda x: jnp.sqrt((x**2).sum(-1, keepdims=True).clip(1e-8)),
              lambda x: jnp.sqrt((x * x).sum(-1).clip(0.0)),
              lambda x: jnp.sqrt(lax.pow(x, 2.0).sum().clip(1e-12))),
    **_example(lambda x: jnp.sqrt(jnp.square(x).sum(-1, keepdims=True).clip(0.0)), shapes=((4, 8),),
               domain=(-1e30, 1e30)),
)


#: The rules of this module, in the order the catalogue tries them (see ``_stability.STABILITY``).
REDUCE_RULES: tuple[Rule, ...] = (COSINE, RMS, RMS_EPSILON, VAR, EXP_MEAN_LOG, WEIGHTED_LSE, LOG_EXP_DOT,
                                  NORM_FLOOR)
#: Opt-in (``rules=[*STABILITY, "mean"]``), not in ``STABILITY``: it would add a second reduction
#: to every mean of every program, where the sum overflows only for terms near the float max, and
#: the variance rule's contract is that the program's own mean is computed once and reused.
