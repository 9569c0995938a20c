"""The stable forms the catalogue rewrites into, as ordinary JAX functions.

Each is usable on its own (``jst.rewrites.forms.logsumexp(x, axes=(0,))``) and is what the
benchmarks compare against the library's hand-written functions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

from .._dtypes import dtype_info

__all__ = ["hypot", "inv_jitter", "log_softmax", "logaddexp", "logsumexp", "norm", "one_minus_cos",
           "sigmoid", "softmax", "softplus", "tanh", "variance"]

Axes = Sequence[int] | int | None


def _axes(x: Any, axes: Axes) -> tuple[int, ...]:
    if axes is None:
        return tuple(range(jnp.ndim(x)))
    if isinstance(axes, int):
        axes = (axes,)
    return tuple(int(a) % max(jnp.ndim(x), 1) for a in axes)


def _max_shift(x: Any, axes: tuple[int, ...]) -> tuple[Any, Any]:
    """``(m, shift)``: the max over ``axes`` (keepdims) and the same with ±inf/NaN replaced by 0.

    The shift is under ``stop_gradient``: it cancels mathematically, so it must not be differentiated
    (its derivative would be 0 * inf at ties of ±inf, or a wrong one-hot term).
    """
    m = lax.stop_gradient(jnp.max(x, axis=axes, keepdims=True))
    return m, jnp.where(jnp.isfinite(m), m, jnp.zeros_like(m))


def _log1p_rest(x: Any, axes: tuple[int, ...]) -> tuple[Any, Any]:
    """``(shift, log1p(s))`` with ``s`` = sum of exp(x_j - m) over the non-maximal terms.

    The maximal term is exp(0) = 1 exactly and is taken out so the small rest keeps its digits
    (log(1 + s) through ``log1p``). Ties: the other maximal terms contribute exactly 1 each
    (``count - 1``). Each maximal term enters as ``max(x_j - m, -1)``: exactly 0 with derivative 1
    (like ``expm1(0)``, at a fraction of its cost), so the gradient stays softmax without
    differentiating the max; -1 when the max is -inf, so that all -inf gives log1p(-1) = -inf.
    """
    m, shift = _max_shift(x, axes)
    z = x - shift
    is_max = x == m
    count = jnp.sum(is_max, axis=axes, keepdims=True).astype(x.dtype)
    terms = jnp.where(is_max, jnp.maximum(z, -1.0), jnp.exp(z))
    rest = jnp.sum(terms, axis=axes, keepdims=True) + (count - 1)
    return shift, jnp.log1p(rest)


def logsumexp(x: Any, axes: Axes = None) -> Any:
    """log(sum(exp(x))) over ``axes`` as ``m + log1p(sum_{j not max} exp(x_j - m))``, m = max(x).

    Exact to the last bit where the library's ``m + log(sum(exp(x - m)))`` loses the small terms
    (x = [1e-20, -20, ...]: the result is about 3e-8, and ``log(1 + 3e-8)`` is 0 in float32).
    All -inf gives -inf; +inf gives +inf; the gradient is softmax(x) and finite.
    """
    ax = _axes(x, axes)
    shift, l1p = _log1p_rest(x, ax)
    return jnp.squeeze(shift + l1p, axis=ax)


def log_softmax(x: Any, axes: Axes = -1) -> Any:
    """x - logsumexp(x) as ``(x - m) - log1p(sum_{j not max} exp(x_j - m))``.

    ``x - logsumexp(x)`` subtracts two nearly equal large numbers for the maximal entry; this form
    gives (x - m) exactly and subtracts only the small log1p term.
    """
    ax = _axes(x, axes)
    shift, l1p = _log1p_rest(x, ax)
    return (x - shift) - l1p


def softmax(x: Any, axes: Axes = -1) -> Any:
    """exp(x) / sum(exp(x)) as ``exp(x - m) / sum(exp(x - m))``, m = max(x) (no overflow).

    The same formula as ``jax.nn.softmax``, so XLA compiles it to the same fused kernels (a guard
    against an infinite max costs 20-40% on CPU): a row whose max is +inf gives NaN, as there.
    """
    ax = _axes(x, axes)
    m = lax.stop_gradient(jnp.max(x, axis=ax, keepdims=True))
    e = jnp.exp(x - m)
    return e / jnp.sum(e, axis=ax, keepdims=True)


@jax.custom_jvp
def hypot(x: Any, y: Any) -> Any:
    """sqrt(x² + y²) without overflow or underflow of the squares (``jnp.hypot``).

    The derivative is ``(x, y) / hypot(x, y)`` (0 at the origin). jax 0.10's ``jnp.hypot`` is
    differentiated through its scaling and gives NaN/inf there (d(y/x)/dx = -y/x² underflows).
    """
    return jnp.hypot(x, y)


@hypot.defjvp
def _hypot_jvp(primals: Any, tangents: Any) -> Any:
    (x, y), (tx, ty) = primals, tangents
    r = hypot(x, y)
    safe = jnp.where(r == 0, jnp.ones_like(r), r)  # at the origin x = y = 0: derivative 0
    return r, (x / safe) * tx + (y / safe) * ty


def _pow2_scale(m: Any) -> tuple[Any, Any]:
    """``(s, 1/s)``: a power of two with ``s <= m < 2s`` for normal finite ``m``, clamped so that
    both ``s`` and ``1/s`` are normal numbers; 1 where ``m`` is 0, subnormal, inf or NaN.

    Read off ``m``'s exponent bits (``bitcast_convert_type``), not with ``frexp``/``ldexp``: those
    are jax "hi" primitives on jax >= 0.11 that cannot be re-bound inside a rewritten jaxpr. XLA
    turns ``x / s`` into ``x * (1/s)``, and a subnormal 1/s is flushed to zero on CPU and GPU
    (s = 2e38 would give 0 for every element), hence the clamp. Scaling by a power of two is exact.
    """
    info = dtype_info(m.dtype)
    mantissa = (1 << (info.significand_bits - 1)) - 1
    exponent_mask = (info.sign_mask - 1) ^ mantissa
    finite = jnp.where(jnp.isfinite(m), m, jnp.zeros_like(m))
    raw = lax.bitcast_convert_type(finite, info.uint_dtype)
    pow2 = lax.bitcast_convert_type(raw & jnp.asarray(exponent_mask, info.uint_dtype), m.dtype)
    lo, hi = float(info.tiny), 2.0 ** (-info.min_exponent)
    s = jnp.where(pow2 > 0, jnp.clip(pow2, lo, hi), jnp.ones_like(pow2))
    return s, 1 / s


def norm(x: Any, axes: Axes = None) -> Any:
    """sqrt(sum(x²)) scaled by a power of two s ≈ max|x|: ``s * sqrt(sum((x/s)²))``; 0 for zero.

    ``s`` (see ``_pow2_scale``) is under ``stop_gradient`` (it cancels), so the gradient is
    x / norm(x); at x = 0 it is 0, the subgradient ``safe_norm`` code uses (not 0 * inf = NaN):
    the square root sees 1 there (the double ``where``), and its result is replaced by 0.
    """
    ax = _axes(x, axes)
    m = lax.stop_gradient(jnp.max(jnp.abs(x), axis=ax, keepdims=True))
    scale, inv = _pow2_scale(m)
    y = x * inv
    ss = jnp.sum(y * y, axis=ax, keepdims=True)
    positive = ss > 0
    root = jnp.where(positive, jnp.sqrt(jnp.where(positive, ss, jnp.ones_like(ss))), jnp.zeros_like(ss))
    return jnp.squeeze(scale * root, axis=ax)


def variance(x: Any, axes: Axes = None) -> Any:
    """mean(x²) - mean(x)² as the corrected two-pass form (Chan, Golub and LeVeque).

    ``d = x - mean(x)``; ``mean(d²) - mean(d)²``. The second term corrects the rounding error of the
    first mean; the one-pass form loses every digit when the spread is below the rounding error of
    mean(x²) (values clustered around 1e4 in float32).

    Where the one-pass form cancels less than one bit (mean(x)² <= mean(x²)/2, finite) it is kept:
    there it is the more accurate of the two (rounding x - mean(x) adds about an ulp), so the
    rewrite never does worse than the formula it replaces.
    """
    ax = _axes(x, axes)
    mu = jnp.mean(x, axis=ax, keepdims=True)
    m2 = jnp.mean(x * x, axis=ax, keepdims=True)
    one_pass = m2 - mu * mu
    d = x - mu
    two_pass = jnp.mean(d * d, axis=ax, keepdims=True) - jnp.square(jnp.mean(d, axis=ax, keepdims=True))
    well_conditioned = (mu * mu <= 0.5 * m2) & jnp.isfinite(m2)
    return jnp.squeeze(jnp.where(well_conditioned, one_pass, two_pass), axis=ax)


def one_minus_cos(x: Any) -> Any:
    """1 - cos(x) as 2·sin(x/2)², exact near 0 where 1 - cos(x) cancels to 0."""
    s = jnp.sin(x * 0.5)
    return 2 * (s * s)


def inv_jitter(a: Any) -> Any:
    """inv(A + εI), ε = 8·eps(dtype)·mean|diag(A)|: regularised inverse (CHANGES the result)."""
    n = a.shape[-1]
    eps = jnp.finfo(a.dtype).eps
    scale = jnp.mean(jnp.abs(jnp.diagonal(a, axis1=-2, axis2=-1)), axis=-1)[..., None, None]
    jitter = 8 * eps * jnp.where(scale > 0, scale, jnp.ones_like(scale))
    return jnp.linalg.inv(a + jitter * jnp.eye(n, dtype=a.dtype))


def softplus(x: Any) -> Any:
    """log(1 + exp(x)) = max(x, 0) + log1p(exp(-|x|)) = logaddexp(x, 0), derivative sigmoid(x)."""
    return logaddexp(x, 0.0)


# Derivatives. The library's rules differentiate these functions through their rounded results:
# logistic as s·(1 - s), tanh as 1 - t², logaddexp as exp(a - out). Each cancels where the result
# is near ±1 (or the output is large), giving 0 for the derivative of sigmoid(20) (exactly 2.1e-9)
# and of tanh(10), and 3-4 bits of error for logaddexp(100, 99). The rules below compute each
# derivative from the input instead, accurate to an ulp or two everywhere.
@jax.custom_jvp
def sigmoid(x: Any) -> Any:
    """1/(1 + exp(-x)) (``lax.logistic``) with an accurate derivative ``sigmoid(x)·sigmoid(-x)``.

    Example: ``jax.grad(forms.sigmoid)(20.0)`` is 2.06e-9 in float32 (``jax.nn.sigmoid``: 0.0).
    """
    return lax.logistic(x)


@sigmoid.defjvp
def _sigmoid_jvp(primals: Any, tangents: Any) -> Any:
    (x,), (t,) = primals, tangents
    s = lax.logistic(x)
    return s, t * (s * lax.logistic(-x))


@jax.custom_jvp
def logaddexp(a: Any, b: Any) -> Any:
    """log(exp(a) + exp(b)) = max(a, b) + log1p(exp(-|a - b|)), derivatives sigmoid(±(a - b)).

    Example: ``forms.logaddexp(100.0, 100.0)`` is 100.69315 (the naive form overflows).
    """
    return jnp.logaddexp(a, b)


@logaddexp.defjvp
def _logaddexp_jvp(primals: Any, tangents: Any) -> Any:
    (a, b), (ta, tb) = primals, tangents
    d = a - b
    d = jnp.where(jnp.isnan(d), jnp.zeros_like(d), d)  # a = b = ±inf: split the tangent evenly
    return jnp.logaddexp(a, b), ta * sigmoid(d) + tb * sigmoid(-d)


@jax.custom_jvp
def tanh(x: Any) -> Any:
    """tanh(x) with the derivative computed as 4e/(1 + e)², e = exp(-2|x|) (never 1 - tanh²).

    Example: ``jax.grad(forms.tanh)(10.0)`` is 8.2e-9 in float32 (``jnp.tanh``: 0.0).
    """
    return jnp.tanh(x)


@tanh.defjvp
def _tanh_jvp(primals: Any, tangents: Any) -> Any:
    (x,), (t,) = primals, tangents
    e = jnp.exp(-2 * jnp.abs(x))
    return jnp.tanh(x), t * (4 * e / jnp.square(1 + e))
