"""Stable forms for the everyday losses and statistics the generalised catalogue rewrites.

Log-mean-exp, logs and powers of products (the geometric mean), quotients and powers of
exponentials (log-scale parameterisations), the standard deviation without overflow and the
expanded squared distance. Each is an ordinary JAX function, exported through
``jst.rewrites.forms`` like the forms of ``_forms``.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ..._dtypes import dtype_info
from ._core import _axes, _max_shift, _pow2_scale

__all__ = ["center", "div_exp", "entropy_terms", "exp_scaled", "geometric_power", "log_prod",
           "logmeanexp", "sqdist", "square_div_exp", "std", "sum_p_log_p"]


def logmeanexp(x: Any, axes: Any = None, count: float | None = None) -> Any:
    """log(mean(exp(x))) over ``axes`` (keepdims) as ``m + log1p(sum(expm1(x - m)) / n)``, m = max.

    ``log(mean(exp(x)))`` overflows for x > 88.7 (float32) and is -inf below -104; the form never
    leaves the range of the result. The sum of ``expm1(x_j - m)`` has terms of one sign (no
    cancellation), and near 0 (all x small) log1p keeps every digit: ``log(1 + 1e-9)`` is 0 in
    float32. Where the mean of the shifted terms is below 1/2, ``log(sum(exp(x - m)) / n)`` is
    taken instead (log1p of a value near -1 would amplify its rounding). ``count``: the n the
    program divides by (default: the number of reduced elements). The gradient is softmax(x).

    Example: ``forms.logmeanexp(jnp.array([1e-8, 3e-8]))`` is 2e-8 (the naive form gives 0).
    """
    ax = _axes(x, axes)
    n = float(math.prod(jnp.shape(x)[a] for a in ax)) if count is None else float(count)
    _, shift = _max_shift(x, ax)
    z = x - shift
    u = jnp.sum(jnp.expm1(z), axis=ax, keepdims=True) / n
    t = jnp.sum(jnp.exp(z), axis=ax, keepdims=True) / n
    near = u > -0.5
    small = jnp.log1p(jnp.where(near, u, jnp.zeros_like(u)))
    large = jnp.log(jnp.where(near, jnp.ones_like(t), t))
    out = shift + jnp.where(near, small, large)
    # Where every |x| is below eps, the cumulant series mean(x) + var(x)/2 is exact to a relative
    # |x| < eps (the next term is of order |x|³; the variance matters where the mean cancels,
    # x = [v, -v, ...], which m + log1p(...) cannot resolve below eps·m), and the differences x - m
    # above may be subnormal, which CPUs flush to zero: the series is computed on x scaled up by an
    # exact power of two, 2**(-min_exponent/2) (the scaled squares stay below the overflow). The
    # scaled sums pass an optimization barrier: XLA's simplifier otherwise folds the 1/(2n) into the
    # scale-back constant, 2**(min_exponent - 1)/n, which is subnormal and flushed to 0 on CPU (jax
    # 0.10: every tiny result came out 0); past the barrier the constant is 2**min_exponent, normal.
    info = dtype_info(x.dtype)
    half = -(info.min_exponent // 2)
    tiny_everywhere = jnp.max(jnp.abs(x), axis=ax, keepdims=True) < float(info.eps)
    up = jnp.where(tiny_everywhere, x, jnp.zeros_like(x)) * (2.0 ** half)
    mean_up = jnp.sum(up, axis=ax, keepdims=True) / n
    d = up - mean_up
    half_var_up = jnp.sum(d * d, axis=ax, keepdims=True) / (2 * n)
    mean_up, half_var_up = lax.optimization_barrier(mean_up), lax.optimization_barrier(half_var_up)
    series = mean_up * (2.0 ** -half) + half_var_up * (2.0 ** (-2 * half))
    return jnp.where(tiny_everywhere, series, out)


def log_prod(x: Any, axes: Any = None) -> Any:
    """log(prod(x)) over ``axes`` as ``sum(log|x|)``, NaN where the product is negative.

    The product overflows or underflows long before its log does (16 values of 1e5 in float32).
    A zero factor gives -inf, as log(0). The gradient is 1/x_j, as for the product's log.

    Example: ``forms.log_prod(jnp.full(16, 1e5))`` is 184.2 (the naive form gives inf).
    """
    ax = _axes(x, axes)
    total = jnp.sum(jnp.log(jnp.abs(x)), axis=ax, keepdims=True)
    negative = jnp.prod(jnp.sign(x), axis=ax, keepdims=True) < 0
    return jnp.where(negative, jnp.full_like(total, jnp.nan), total)


def geometric_power(x: Any, c: float, axes: Any = None) -> Any:
    """prod(x) ** c over ``axes`` (keepdims) as ``exp(c * sum(log|x|))`` (the geometric mean for
    c = 1/n), without the overflow of the product; where the product is negative, NaN for a
    non-integer c (as ``pow``) and the sign of (-1)**c for an integer c; 0 where a factor is 0 and
    c > 0.

    ``exp`` turns the absolute error of its argument into a relative one, so the sum of logs is
    split into its integer powers of two and the logs of the mantissas in [1, 2): the large part
    of the argument, c·(sum of exponents)·ln 2, is then reduced by whole powers of two that are
    applied exactly (see ``_exp2_exact``), and only the small rest meets ``exp``.

    Example: ``forms.geometric_power(jnp.full(8, 1e30), 0.125)`` is 1e30 (the naive form gives inf).
    """
    ax = _axes(x, axes)
    zero = jnp.any(x == 0, axis=ax, keepdims=True)
    # a group holding a zero has the value 0, inf or 1 and derivative 0 (c·prod^(c-1)·(the other
    # factors) is 0 there for c > 1, and inf or NaN as written for c < 1); the log branch reads 1
    # there, so its derivative stays finite (log 0 would make the untaken branch's gradient
    # inf·0 = NaN, where prod(x)**2's is 0)
    a = jnp.where(jnp.broadcast_to(zero, jnp.shape(x)), jnp.ones_like(x), jnp.abs(x))
    s, inv = _pow2_scale(lax.stop_gradient(a))
    mant = a * inv  # in [1, 2) for normal finite a (s a power of two <= a < 2s): exact
    expo = lax.stop_gradient(jnp.round(jnp.log2(s)))
    e_sum = jnp.sum(expo, axis=ax, keepdims=True)
    l_sum = jnp.sum(jnp.log(mant), axis=ax, keepdims=True)
    # c * e_sum exactly as q + r, q an integer, r in [0, 1): c split into a head of 12 bits (its
    # product with an exponent sum below 2**12 is exact in float32) and the rest.
    dt = np.dtype(x.dtype)
    c_head = float(np.asarray(c, np.float64)) if dt.itemsize >= 8 else _head(c, 12)
    c_tail = float(c - c_head)
    hi = e_sum * jnp.asarray(c_head, x.dtype)
    q = jnp.floor(hi)
    r = (hi - q) + e_sum * jnp.asarray(c_tail, x.dtype)
    arg = r * math.log(2.0) + jnp.asarray(c, x.dtype) * l_sum
    out = _exp2_exact(jnp.exp(arg), q)
    negative = jnp.prod(jnp.sign(x), axis=ax, keepdims=True) < 0
    zero_value = jnp.asarray(0.0 if c > 0 else (math.inf if c < 0 else 1.0), x.dtype)
    out = jnp.where(zero, zero_value, out)
    if float(c).is_integer():  # a negative base to an integer power: the sign of (-1)**c
        return jnp.where(negative, -out if int(c) % 2 else out, out)
    return jnp.where(negative, jnp.full_like(out, jnp.nan), out)


def _head(c: float, bits: int) -> float:
    """``c`` rounded to ``bits`` significant bits (a float that multiplies small integers exactly)."""
    if c == 0 or not math.isfinite(c):
        return c
    m, e = math.frexp(c)
    return math.ldexp(round(m * (1 << bits)), e - bits)


def _exp2_exact(y: Any, q: Any) -> Any:
    """``y * 2**q`` for an integer-valued float ``q``, applied in three exact steps of at most 2**100
    (float32; 2**900 in float64) in magnitude, each a normal float, so that neither the factor nor
    an intermediate overflows before the result does."""
    limit = 100.0 if np.dtype(y.dtype).itemsize < 8 else 900.0  # 2**limit is a normal number
    q = jnp.clip(q, -3 * limit, 3 * limit)
    step = jnp.clip(jnp.round(q / 3), -limit, limit)
    first = _pow2(step, y.dtype)
    last = _pow2(jnp.clip(q - 2 * step, -limit, limit), y.dtype)
    return ((y * first) * first) * last


def _pow2(k: Any, dtype: Any) -> Any:
    """2**k for integer-valued floats k in the normal range, built from the exponent bits (``exp2`` is not
    exact on every backend)."""
    info = dtype_info(dtype)
    field = (k + info.exponent_bias).astype(jnp.int64 if info.bits == 64 else jnp.int32)
    raw = field.astype(info.uint_dtype) << np.asarray(info.mantissa_bits, info.uint_dtype)
    return lax.bitcast_convert_type(raw, dtype)


def exp_scaled(a: Any, k: float) -> Any:
    """exp(a) ** k as ``exp(k * a)``, with ``k * a`` formed exactly (a two-product) so its rounding
    does not become a relative error of ``|k·a|`` ulps; exact scaling for k a power of two.

    ``exp(a) ** 2`` overflows for a > 44.4 (float32) where ``exp(2a)`` is finite up to 88.7.
    """
    p = a * k
    if k == 0 or math.frexp(abs(k))[0] == 0.5:  # k a power of two: k * a is exact
        return jnp.exp(p)
    err = _two_product_error(a, k, p)
    err = jnp.where(jnp.isfinite(err), err, jnp.zeros_like(err))  # a = ±inf: exp(p) says it all
    return jnp.exp(p) * (1 + err)  # exp(p + err) = exp(p)·(1 + err): |err| <= ulp(p)/2 is tiny


def _two_product_error(a: Any, k: float, p: Any) -> Any:
    """The rounding error of ``p = a * k`` (Dekker's product with k split in Python, a at run
    time), so that a*k = p + error exactly (barring underflow)."""
    dt = np.dtype(a.dtype)
    half = (dt.itemsize * 8 - (11 if dt.itemsize == 8 else 8)) // 2 + 1  # 12 for f32, 27 for f64
    k_hi = _head(k, half - 1)
    k_lo = k - k_hi
    split = jnp.asarray(2.0 ** half + 1, a.dtype)
    c = a * split
    a_hi = c - (c - a)
    a_lo = a - a_hi
    return (((a_hi * k_hi - p) + a_lo * k_hi) + a_hi * k_lo) + a_lo * k_lo


def div_exp(x: Any, a: Any) -> Any:
    """x / exp(a) as ``x * exp(-a)`` for |a| < 80 (float32; 700 in float64), else as
    ``(x * exp(-a/2)) * exp(-a/2)``: exp(a) overflows above 88.7 (float32) and exp(-a) is subnormal
    (flushed to zero on CPU) above 87.3, where ``x / exp(a)`` may still be a normal number; the
    halves keep both factors in range (a/2 is exact)."""
    # inside the normal range of exp(-a), x·exp(-a) rounds as often as x / exp(a) did
    limit = 80.0 if np.dtype(jnp.result_type(a)).itemsize < 8 else 700.0
    inside = jnp.abs(a) < limit
    direct = x * jnp.exp(-jnp.where(inside, a, jnp.zeros_like(a)))
    h = _finite_exp(-0.5 * a)
    return jnp.where(inside, direct, (x * h) * h)


def _finite_exp(v: Any) -> Any:
    """exp(v), the largest finite float where it overflows: a zero factor then gives 0, not 0·inf
    (a product that overflows overflows anyway: the other factors are at least the smallest normal
    float, and max·tiny > 1)."""
    return jnp.minimum(jnp.exp(v), dtype_info(jnp.result_type(v)).max)


def square_div_exp(s: Any, a: Any) -> Any:
    """s² / exp(a) as ``(s·exp(-a/2))²``: s² overflows for |s| > 1.8e19 (float32) where the quotient
    may be finite."""
    t = s * _finite_exp(-0.5 * a)
    return t * t


def sqdist(a: Any, b: Any, axes: Any = None) -> Any:
    """|a|² + |b|² - 2 a·b as ``sum((a - b)²)`` over ``axes`` (keepdims): the expanded form cancels
    to rounding noise (even negative) when a and b are close, the direct one keeps every digit."""
    d = a - b
    ax = _axes(d, axes)
    return jnp.sum(d * d, axis=ax, keepdims=True)


def _scaled_deviations(x: Any, ax: tuple[int, ...]) -> tuple[Any, Any]:
    """``(s, d)``: s a power of two near max|x| over ``ax`` (under ``stop_gradient``), d the deviations
    of ``x / s`` from their mean (keepdims): :func:`std`'s first scaling and its derivative's."""
    s, inv = _pow2_scale(lax.stop_gradient(jnp.max(jnp.abs(x), axis=ax, keepdims=True)))
    xs = x * inv
    return s, xs - jnp.mean(xs, axis=ax, keepdims=True)


def std(x: Any, axes: Any = None, ddof: Any = 0) -> Any:
    """The standard deviation (``jnp.std``) without overflow: computed on ``x / s``, s a power of two
    near max|x| (the mean of values near the float max overflows as a sum), then on the deviations
    divided by a second power of two near their max (their squares neither overflow nor underflow);
    both scalings are exact and under ``stop_gradient``. NaN where n - ddof <= 0, as jnp.std.

    ``jnp.std`` squares the deviations: x = [1e20, -1e20, ...] in float32 overflows to inf, though
    the standard deviation is 1e20. The gradient is (x - mean) / ((n - ddof)·std) (0 where std is
    0: the subgradient, not NaN).
    """
    ax = _axes(x, axes)
    if np.dtype(x.dtype).itemsize < 4:  # float16/bfloat16: in float32, as jnp.std computes them
        return std(x.astype(jnp.float32), ax, ddof).astype(x.dtype)
    n = float(math.prod(jnp.shape(x)[a] for a in ax))
    s0, d = _scaled_deviations(x, ax)
    s1, inv1 = _pow2_scale(lax.stop_gradient(jnp.max(jnp.abs(d), axis=ax, keepdims=True)))
    y = d * inv1
    dof = n - jnp.asarray(ddof).astype(x.dtype)
    # corrected two-pass (Chan, Golub and LeVeque): sum(y)²/n removes the rounding error of the mean
    # (equal values give exactly 0, where the plain sum of squares of the rounded deviations is not)
    sy = jnp.sum(y, axis=ax, keepdims=True)
    ss = jnp.sum(y * y, axis=ax, keepdims=True) - sy * sy / n
    ss = jnp.maximum(ss, 0) / jnp.where(dof > 0, dof, jnp.ones_like(dof))
    positive = ss > 0
    root = jnp.where(positive, jnp.sqrt(jnp.where(positive, ss, jnp.ones_like(ss))), jnp.zeros_like(ss))
    return jnp.where(dof > 0, s0 * (s1 * root), jnp.full_like(root, jnp.nan))


def variance_ddof(x: Any, axes: Any = None, ddof: Any = 0) -> Any:
    """``jnp.var(x, axes, ddof=ddof)`` as ``std(x)²`` (:func:`std`; keepdims), its derivative
    written out: ``2·(x - mean(x)) / (n - ddof)``, formed on ``x / s`` and scaled by ``s`` once.

    Differentiating ``std(x)²`` through its scalings multiplies the cotangent by ``2·std·s0·s1``
    before dividing it by ``s0·s1``: inf where the variance overflows (x near 1e30 in float32,
    variance 1e60) though its derivative (about 1e30) is finite, and ``inf·0`` is NaN there. The
    mean's derivative drops out mathematically (the deviations sum to 0); ``mean(d)·sum(ẋ)`` is kept
    to cancel their rounding, as :func:`variance`'s derivative does.
    """
    x = jnp.asarray(x)
    ax = _axes(x, axes)
    if np.dtype(x.dtype).itemsize < 4:  # float16/bfloat16: in float32, as jnp.var computes them
        return variance_ddof(x.astype(jnp.float32), ax, ddof).astype(x.dtype)
    return _variance_ddof(x, ax, jnp.asarray(ddof))


@functools.partial(jax.custom_jvp, nondiff_argnums=(1,))
def _variance_ddof(x: Any, ax: tuple[int, ...], ddof: Any) -> Any:
    return jnp.square(std(x, ax, ddof))


@_variance_ddof.defjvp
def _variance_ddof_jvp(ax: tuple[int, ...], primals: Any, tangents: Any) -> Any:
    x, ddof = primals
    tx = tangents[0]
    n = float(math.prod(jnp.shape(x)[a] for a in ax))
    s0, d = _scaled_deviations(x, ax)
    dof = n - ddof.astype(x.dtype)
    dot = (jnp.sum(d * tx, axis=ax, keepdims=True)
           - jnp.mean(d, axis=ax, keepdims=True) * jnp.sum(tx, axis=ax, keepdims=True))
    scale = jnp.where(dof > 0, 2 * s0 / jnp.where(dof > 0, dof, jnp.ones_like(dof)), jnp.nan)
    return _variance_ddof(x, ax, ddof), dot * scale


def center(x: Any, axes: Any = None, mean: Any = None) -> Any:
    """``x - mean(x)`` over ``axes``, exact where the mathematics is: 0 for a constant slice, and
    deviations accurate to a few ulps of the spread for data clustered far from 0.

    As written, ``x - mean(x)`` carries the rounding of the mean (up to half an ulp of the mean):
    for 16 values within 1e-4 of -1753.93 in float32 that is the size of the deviations
    themselves, and a constant slice gives ±ulp instead of 0 (``jax.nn.standardize`` then returns
    3e-4 for 0 through ``rsqrt(var + eps)``). Here the data is shifted by its own element nearest
    the mean, ``d = x - x₀`` (exact for values within a factor 2 of x₀: Sterbenz; a constant slice
    gives d = 0), and the deviations are ``d - mean(d)``: the mean of the shifted values is small
    (within the spread), so its rounding is an ulp of the spread, not of the mean. A shift far from
    the mean (the first element, an outlier) would round every small value to an ulp of the
    outlier; the nearest element costs one more reduction and a gather. ``mean``: the program's
    mean of x (keepdims or not), used only to pick the shift.

    Where max|x| is within a factor 4n of the float max, the data is first scaled by 2^-k, 2^k >= 4n
    (exact but for values that become subnormal), so that neither the shifted values nor their sum
    of n terms overflow where the written sum does not; elsewhere nothing is scaled (no tiny value
    is flushed). Float16/bfloat16 are centred in float32. The derivative is ``ẋ - mean(ẋ)``, the
    formula's: the shift and the scale are under ``stop_gradient``.
    """
    x = jnp.asarray(x)
    ax = _axes(x, axes)
    if np.dtype(x.dtype).itemsize < 4:
        wide = None if mean is None else jnp.asarray(mean).astype(jnp.float32)
        return center(x.astype(jnp.float32), ax, wide).astype(x.dtype)
    n = math.prod(x.shape[i] for i in ax)
    k = max(2, math.ceil(math.log2(4 * max(n, 1))))
    big = lax.stop_gradient(jnp.max(jnp.abs(x), axis=ax, keepdims=True))
    scaled = big > float(dtype_info(x.dtype).max) / 2.0 ** k
    s = jnp.where(scaled, jnp.asarray(2.0 ** k, x.dtype), jnp.ones_like(big))
    xs = x * jnp.where(scaled, jnp.asarray(2.0 ** -k, x.dtype), jnp.ones_like(big))
    mu = jnp.mean(xs, axis=ax, keepdims=True) if mean is None else _keepdims(mean, x, ax) / s
    d = xs - lax.stop_gradient(_nearest(xs, lax.stop_gradient(mu), ax))
    return (d - jnp.mean(d, axis=ax, keepdims=True)) * s


def _keepdims(m: Any, x: Any, ax: tuple[int, ...]) -> Any:
    m = jnp.asarray(m)
    return m if m.ndim == x.ndim else jnp.expand_dims(m, ax)


def _nearest(x: Any, m: Any, ax: tuple[int, ...]) -> Any:
    """The element of ``x`` nearest ``m`` in each slice over ``ax`` (keepdims)."""
    rest = tuple(i for i in range(x.ndim) if i not in ax)
    moved = jnp.transpose(x, rest + ax)
    flat = moved.reshape((*moved.shape[:len(rest)], -1))
    m_flat = jnp.transpose(jnp.broadcast_to(m, x.shape), rest + ax).reshape(flat.shape)
    idx = jnp.argmin(jnp.abs(flat - m_flat), axis=-1, keepdims=True)
    picked = jnp.take_along_axis(flat, idx, axis=-1)
    return picked.reshape(tuple(x.shape[i] if i in rest else 1 for i in range(x.ndim)))


def entropy_terms(x: Any, axes: Any = -1) -> Any:
    """p·log(p) for p = softmax(x) over ``axes`` as ``p * log_softmax(x)``, 0 where p is 0.

    ``log(softmax(x))`` is -inf where the softmax underflows (0·-inf = NaN in the entropy), and
    log of a p that rounds to 1 loses every digit of the small -log(p); ``log_softmax`` keeps them.
    Where p is 0 the term is 0: its limit, since p·log(p) -> 0 as p -> 0.
    """
    from ._core import log_softmax, softmax

    ax = _axes(x, axes)
    p = softmax(x, ax)
    lp = log_softmax(x, ax)
    # Where p is below sqrt(tiny) its product with log(p) may be a normal number although p itself
    # is subnormal (flushed to zero on CPU): -exp(log(p) + log(-log(p))) keeps it.
    small = p < math.sqrt(float(dtype_info(x.dtype).tiny))
    safe_lp = jnp.where(small & (lp < 0), lp, -jnp.ones_like(lp))
    tiny_term = -jnp.exp(safe_lp + jnp.log(-safe_lp))
    term = jnp.where(small, tiny_term, p * lp)
    return jnp.where((p == 0) & ~jnp.isfinite(lp), jnp.zeros_like(p), term)


def sum_p_log_p(x: Any, axes: Any = -1) -> Any:
    """sum(p·log(p)) over ``axes`` (keepdims) for p = softmax(x) over the same axes: minus the entropy.

    As :func:`entropy_terms`, summed; and where one entry dominates (the other probabilities sum
    to ``rest`` < eps), its term -p·log1p(rest) = -rest(1 + O(rest)) is moved onto the others, one
    p_j each: sum_j p_j·(log p_j - 1) over the others. ``rest`` is subnormal where the others are
    ~88 below (float32), and a CPU flushes it to zero; each ``p_j·(log p_j - 1)`` is formed as
    ``-exp(log p_j + log1p(-log p_j))`` there, a normal number.
    """
    from ._core import log_softmax

    ax = _axes(x, axes)
    terms = entropy_terms(x, ax)
    lp = log_softmax(x, ax)
    info = dtype_info(x.dtype)
    top = jnp.max(lp, axis=ax, keepdims=True)
    folded = top > -float(info.eps)  # the others sum to less than eps: -p·log p of the top is rest
    is_top = lp == top
    safe = jnp.where(jnp.isfinite(lp) & (lp < 0), lp, -jnp.ones_like(lp))
    p = jnp.exp(safe)
    small = p < math.sqrt(float(info.tiny))
    moved = jnp.where(small, -jnp.exp(safe + jnp.log1p(-safe)), p * (safe - 1))
    moved = jnp.where(is_top | ~jnp.isfinite(lp), jnp.zeros_like(moved), moved)
    return jnp.sum(jnp.where(folded, moved, terms), axis=ax, keepdims=True)
