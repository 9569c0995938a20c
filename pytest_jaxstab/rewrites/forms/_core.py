"""The stable forms of sums of exponentials, softmaxes, sigmoids, norms and variances.

Ordinary JAX functions, exported with the other families as ``jst.rewrites.forms`` (``__init__``).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

from ..._dtypes import dtype_info

__all__ = ["hypot", "inv_jitter", "inv_softplus", "log1mexp", "log_cosh", "log_sigmoid_plus",
           "log_softmax", "log_softmax_fast", "logaddexp", "logsumexp", "logsumexp_fast", "norm",
           "one_minus_cos", "sigmoid", "softmax", "softplus", "tanh", "variance"]

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
    """``(shift, log1p(r))`` with ``r`` = sum over the terms but one maximal one of exp(x_j - m).

    The maximal term is exp(0) = 1 exactly and is kept apart from the rest, so that a small rest
    keeps its digits (log(1 + r) through ``log1p``); ties count 1 each in ``r``. See :func:`_rest`
    for how ``r`` is computed and why it is exact where it needs to be.
    """
    _, shift = _max_shift(x, axes)
    return shift, jnp.log1p(_rest(x, shift, axes))


# Rows whose fast sum is below this are summed again with the maximal term masked (see _rest).
_SMALL_REST = 0.5
# The re-summed rows are gathered when they are at most this fraction of the rows; a larger share
# re-sums every row (one more pass over the data).
_GATHERED_SHARE = 16


@functools.partial(jax.custom_jvp, nondiff_argnums=(2,))
def _rest(x: Any, shift: Any, ax: tuple[int, ...]) -> Any:
    """r = sum(exp(x - shift)) - 1 over ``ax`` (keepdims), accurate where it is small.

    XLA:CPU fuses ``sum(exp(x - shift))`` into one pass but no compare or select (issue 24,
    ``benchmarks/bench_logsumexp_forms.py``), so a masked sum or a tie count is a pass of its own.
    Hence two steps:

    1. The fast sum ``r_f = fl(sum(exp(x - shift))) - 1``. Its error is at most g·(1 + r) (g the
       summation's relative error bound), so for r >= 1/2 it is at most 3g relative: as good as the
       accurate sum up to a factor 3. Every row with ties lands here (two terms of exactly 1 make the
       rounded sum >= 2, rounding being monotone), and so does every row with an infinity or NaN.
    2. Rows with -1/2 < r_f < 1/2 have exactly one term equal to 1 (the maximum: exp(0) = 1) and
       every other below 1/2 + r_f's error (a second term near 1 would make r_f >= 1/2), so
       ``sum(e·floor(7/4 - e))`` is the sum of the other terms alone, with no cancellation:
       exact to the summation's own error, the reason for the accurate form (x = [0, -40 x 15]
       gives 6.4e-17, which ``fl(1 + 6.4e-17) - 1`` = 0 loses). The mask drops the terms > 3/4,
       the maximal one even where XLA computed it as 1 ± a few ulps (an ``exp(x - m)`` whose ``x``
       XLA recomputes, FMA-contracted, is not exp(0) at the maximum; a mask at exactly 1 counted
       it, giving log(2) too much, and r_f < 0 there). These rows are summed again,
       gathered when they are at most 1/16 of the rows (on spread logits most rows have r >= 1/2),
       else all rows are (one more pass). An all -inf row has r_f = -1 and keeps it: log1p(-1) = -inf.

    The derivative is written out, d r = sum(exp(x - shift) · dx) (``shift`` is a constant: it
    cancels), so the gradient never goes through the branches and is the softmax as before.
    """
    e = jnp.exp(x - shift)
    fast = jnp.sum(e, axis=ax, keepdims=True) - 1
    keep = [d for d in range(x.ndim) if d not in ax]
    rows, n = math.prod(x.shape[d] for d in keep), math.prod(x.shape[d] for d in ax)
    if rows == 0 or n == 0:
        return fast
    # > -1/2, not >= 0: a maximal term XLA computed as 1 - a few ulps (see masked_sum) makes r_f < 0
    small = ((fast > -_SMALL_REST) & (fast < _SMALL_REST)).reshape(rows)
    flat_fast, flat_shift = fast.reshape(rows), shift.reshape(rows)
    share = max(1, -(-rows // _GATHERED_SHARE))

    def as_rows() -> Any:  # x as (rows, n), the reduced axes last (a transpose only if they are not)
        order = keep + list(ax)
        xt = x if order == list(range(x.ndim)) else jnp.transpose(x, order)
        return xt.reshape(rows, n)

    def masked_sum(xr: Any, sr: Any) -> Any:
        # e · floor(7/4 - e) drops the terms > 3/4 (floor 0) and keeps the others (floor 1): in a row
        # with |r_f| < 1/2 that is the maximal term alone, whether it came out as exactly 1 or, where
        # XLA recomputes x with other roundings in this pass than in the max's (an FMA-contracted
        # `3.0 * v - m`), as 1 ± a few ulps. Three fusible operations (no compare or select).
        er = jnp.exp(xr - sr[:, None])
        return jnp.sum(er * jnp.floor(1.75 - er), axis=-1)

    def gathered(r: Any) -> Any:
        # the re-summed rows' indices, padded with one past the end (what jnp.nonzero(size=...) gives;
        # on jax 0.12 that is a "hi" primitive, which cannot be re-bound inside a rewritten jaxpr)
        slot = jnp.where(small, lax.cumsum(small.astype(jnp.int32)) - 1, share)
        idx = jnp.full((share,), rows, jnp.int32).at[slot].set(
            jnp.arange(rows, dtype=jnp.int32), mode="drop")
        xr = jnp.take(as_rows(), idx, axis=0, mode="fill", fill_value=0)
        sums = masked_sum(xr, jnp.take(flat_shift, idx, mode="fill", fill_value=0))
        return r.at[idx].set(sums, mode="drop")

    def every(r: Any) -> Any:
        return jnp.where(small, masked_sum(as_rows(), flat_shift), r)

    count = jnp.sum(small, dtype=jnp.int32)
    branch = jnp.where(count == 0, 0, jnp.where(count <= share, 1, 2))
    out = lax.switch(branch, [lambda r: r, gathered, every], flat_fast)
    return out.reshape(fast.shape)


@_rest.defjvp
def _rest_jvp(ax: tuple[int, ...], primals: Any, tangents: Any) -> Any:
    (x, shift), (tx, _) = primals, tangents
    return _rest(x, shift, ax), jnp.sum(jnp.exp(x - shift) * tx, axis=ax, keepdims=True)


def logsumexp(x: Any, axes: Axes = None) -> Any:
    """log(sum(exp(x))) over ``axes`` as ``m + log1p(sum_{j not max} exp(x_j - m))``, m = max(x).

    Exact to the last bit where the library's ``m + log(sum(exp(x - m)))`` loses the small terms
    (x = [1e-20, -20, ...]: the result is about 3e-8, and ``log(1 + 3e-8)`` is 0 in float32).
    All -inf gives -inf; +inf gives +inf; the gradient is softmax(x) and finite. On XLA:CPU it costs
    about 1.2x ``jax.nn.logsumexp`` where no term dominates its row, about 2x where most rows have
    one (those are summed twice, see ``_rest``).
    """
    ax = _axes(x, axes)
    shift, l1p = _log1p_rest(x, ax)
    return jnp.squeeze(shift + l1p, axis=ax)


def log_softmax(x: Any, axes: Axes = -1) -> Any:
    """x - logsumexp(x) as ``(x - m) - log1p(sum_{j not max} exp(x_j - m))``.

    ``x - logsumexp(x)`` subtracts two nearly equal large numbers for the maximal entry; this form
    gives (x - m) exactly and subtracts only the small log1p term. Its derivative is
    ``_log_softmax_jvp``'s, whose cotangent keeps ``1 - s`` of a dominant entry (issue 47).
    """
    return _log_softmax(x, _axes(x, axes))


@functools.partial(jax.custom_jvp, nondiff_argnums=(1,))
def _log_softmax(x: Any, ax: tuple[int, ...]) -> Any:
    shift, l1p = _log1p_rest(x, ax)
    return (x - shift) - l1p


@_log_softmax.defjvp
def _log_softmax_jvp(ax: tuple[int, ...], primals: Any, tangents: Any) -> Any:
    """The tangent ``t - sum(s·t)`` as ``-expm1(l)·t - (U - s·t)``, ``U = sum(s·t)``: the same linear
    map, whose transpose (reverse mode) is ``-expm1(l)·g + s·(g - sum(g))``. Autodiff's
    ``g - s·sum(g)`` cancels where ``s_i`` rounds near 1 (``g = e_i``: 0 where ``1 - s_i`` is a normal
    float); here the complement is ``expm1`` of the log-probability, accurate to an ulp."""
    (x,), (t,) = primals, tangents
    out = _log_softmax(x, ax)
    u = jnp.exp(out) * t
    total = jnp.sum(u, axis=ax, keepdims=True)
    return out, -jnp.expm1(out) * t - (total - u)


def logsumexp_fast(x: Any, axes: Axes = None) -> Any:
    """log(sum(exp(x))) as ``m + log(sum(exp(x - m)))``, m = max(x): the library's formula.

    No overflow, and as fast as ``jax.nn.logsumexp`` (XLA:CPU fuses the shifted exp into the sum);
    but where the result is near 0 the small terms are lost in ``log(1 + s)`` (x = [1e-20, -20 x 15]:
    ~28 bits in float32). :func:`logsumexp` keeps them, at about the same cost where no term
    dominates its row and up to ~2x ``jax.nn``'s time on XLA:CPU where most rows have one.
    """
    ax = _axes(x, axes)
    _, shift = _max_shift(x, ax)
    return jnp.squeeze(shift + jnp.log(jnp.sum(jnp.exp(x - shift), axis=ax, keepdims=True)), axis=ax)


def log_softmax_fast(x: Any, axes: Axes = -1) -> Any:
    """x - logsumexp(x) as ``(x - m) - log(sum(exp(x - m)))``: ``jax.nn.log_softmax``'s formula
    and speed, without :func:`log_softmax`'s care for the small terms (~29 bits lost on
    x = [30, 5, -3 x 14] in float32)."""
    ax = _axes(x, axes)
    _, shift = _max_shift(x, ax)
    z = x - shift
    return z - jnp.log(jnp.sum(jnp.exp(z), axis=ax, keepdims=True))


def softmax(x: Any, axes: Axes = -1) -> Any:
    """exp(x) / sum(exp(x)) as ``exp(x - m) / sum(exp(x - m))``, m = max(x) (no overflow).

    The same formula as ``jax.nn.softmax``, so XLA compiles it to the same fused kernels; the shift is
    0 in a row whose max is not finite (a guard on the row's max, not on every entry), so such a row
    is what the written ``exp(x) / sum(exp(x))`` gives: 0 for the finite entries of a row holding
    +inf, NaN for the +inf ones (``jax.nn.softmax``'s ``x - m`` made the whole row NaN; the soundness
    fuzz found it making finite entries worse than the form it replaced).

    Its derivative is its own (``_softmax_jvp``), not autodiff's of the quotient, which changes with
    JAX's rule for ``div`` (0.12.1 writes it ``(dx - q·dy)/y``, a few ulps off near the dominant
    entry; issue 45).
    """
    return _softmax(x, _axes(x, axes))


@functools.partial(jax.custom_jvp, nondiff_argnums=(1,))
def _softmax(x: Any, ax: tuple[int, ...]) -> Any:
    _, shift = _max_shift(x, ax)
    e = jnp.exp(x - shift)
    return e / jnp.sum(e, axis=ax, keepdims=True)


@_softmax.defjvp
def _softmax_jvp(ax: tuple[int, ...], primals: Any, tangents: Any) -> Any:
    """dy = y·(dx - sum(y·dx)), each row's first maximal entry r taking minus the sum of the others
    (the Jacobian's columns sum to 0). The same derivative, but its transpose, the gradient, reads
    the cotangent as ``ct - ct_r`` along the row: the softmax's gradient does not move when a
    constant is added to the cotangent, and now the rounding does not either (d sum(softmax)/dx is
    exactly 0, where ``ct - sum(y·ct)`` was an ulp of ``1 - sum(y)``), and a dominant row's
    gradient has no cancellation (``y_r·(ct_r - sum(y·ct))`` = ``-y_r·sum(y_j·(ct_j - ct_r))``)."""
    (x,), (dx,) = primals, tangents
    y = _softmax(x, ax)
    first = lax.stop_gradient(_first_max(x, ax))
    s = jnp.sum(y * dx, axis=ax, keepdims=True)
    others = jnp.where(first, jnp.zeros_like(y), y * (dx - s))
    # a row with no maximal entry (a NaN) keeps y·(dx - s) everywhere: `first` is False there
    return y, others - jnp.where(first, jnp.sum(others, axis=ax, keepdims=True), jnp.zeros_like(y))


def _first_max(x: Any, ax: tuple[int, ...]) -> Any:
    """True at the first (row-major over ``ax``) maximal entry of each row of ``x``, False elsewhere
    (everywhere in a row whose max is NaN)."""
    hit = x == jnp.max(x, axis=ax, keepdims=True)
    pos = jnp.zeros(jnp.shape(x), jnp.int32)
    for d in ax:  # the position of each entry within its row, row-major over the reduced axes
        pos = pos * jnp.shape(x)[d] + lax.broadcasted_iota(jnp.int32, jnp.shape(x), d)
    size = math.prod(jnp.shape(x)[d] for d in ax)
    first = jnp.min(jnp.where(hit, pos, size), axis=ax, keepdims=True)
    return hit & (pos == first)


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


def variance(x: Any, axes: Axes = None, mean: Any = None) -> Any:
    """mean(x²) - mean(x)² as the corrected two-pass form (Chan, Golub and LeVeque), scaled.

    ``d = x - mean(x)``; ``mean(d²) - mean(d)²``. The second term corrects the rounding error of the
    first mean; the one-pass form loses every digit when the spread is below the rounding error of
    mean(x²) (values clustered around 1e4 in float32). ``mean``: the mean the program already
    computed (keepdims or not), reused rather than computed again.

    Everything is computed on x / s, s a power of two near max|x| (exact scaling, under
    ``stop_gradient``), and scaled back by s twice: x = [4e19, 0 x 15] in float32 has the finite
    variance 9.375e37 although x² overflows.

    Where the one-pass form cancels less than one bit (mean(x)² <= mean(x²)/2) it is kept: there it
    is the more accurate of the two (rounding x - mean(x) adds about an ulp), so the rewrite never
    does worse than the formula it replaces. Both branches are finite, so the gradient is too.
    """
    ax = _axes(x, axes)
    mu = jnp.mean(x, axis=ax, keepdims=True) if mean is None else jnp.asarray(mean)
    if mu.ndim != x.ndim:  # the program's mean without keepdims
        mu = jnp.expand_dims(mu, ax)
    return jnp.squeeze(_shifted_variance(x, mu, ax), axis=ax)


@functools.partial(jax.custom_jvp, nondiff_argnums=(2,))
def _shifted_variance(x: Any, mu: Any, ax: tuple[int, ...]) -> Any:
    """The variance of x over ``ax`` (keepdims) given its mean ``mu``; see :func:`variance`.

    Its derivative is written out: 2·mean(d·ẋ) - 2·mean(d)·mean(ẋ), d = x - mu, and 0 along mu
    (the shifted form does not depend on the shift). Differentiating the scaled form instead would
    multiply the cotangent by s² before dividing it by s² (inf for x = [4e19, 0, ...]).
    """
    scale, inv = _pow2_scale(lax.stop_gradient(jnp.max(jnp.abs(x), axis=ax, keepdims=True)))
    xs = x * inv
    # the program's mean overflows in its sum for terms near the float max: the mean of x / s then
    ms = jnp.where(jnp.isfinite(mu), mu * inv, jnp.mean(xs, axis=ax, keepdims=True))
    m2 = jnp.mean(xs * xs, axis=ax, keepdims=True)
    one_pass = m2 - ms * ms
    d = xs - ms
    two_pass = jnp.mean(d * d, axis=ax, keepdims=True) - jnp.square(jnp.mean(d, axis=ax, keepdims=True))
    well_conditioned = ms * ms <= 0.5 * m2
    v = jnp.where(well_conditioned, one_pass, two_pass)
    return (v * scale) * scale


@_shifted_variance.defjvp
def _shifted_variance_jvp(ax: tuple[int, ...], primals: Any, tangents: Any) -> Any:
    (x, mu), (tx, _) = primals, tangents
    d = x - mu
    dot = 2 * (jnp.mean(d * tx, axis=ax, keepdims=True)
               - jnp.mean(d, axis=ax, keepdims=True) * jnp.mean(tx, axis=ax, keepdims=True))
    return _shifted_variance(x, mu, ax), dot


# ln 2 = head + tail: the head is ln 2 rounded to the dtype, the tail the rest rounded (its error is
# eps² relative to ln 2). Near ln 2, x - head is exact (Sterbenz) and x - ln 2 = (x - head) - tail is
# accurate even when it is a few ulps: what a root at ln 2 needs.
_LN2_SPLIT = {4: (0.6931471824645996, -1.9046542121259336e-09),
              8: (0.6931471805599453, 2.3190468138462996e-17)}


def _minus_ln2(x: Any) -> Any:
    """x - ln 2 as (x - head) - tail. The barrier keeps XLA (jax 0.10's) from folding the two
    constants into one, x - (head + tail), which rounds back to x - head."""
    hi, lo = _LN2_SPLIT[jnp.dtype(x.dtype).itemsize]
    return lax.optimization_barrier(x - hi) - lo


def _widened(fn: Any) -> Any:
    """Run ``fn`` in float32 for narrower floats (their constants and ranges), cast back."""
    @functools.wraps(fn)
    def wrapper(x: Any) -> Any:
        x = jnp.asarray(x)
        if jnp.dtype(x.dtype).itemsize < 4:
            return fn(x.astype(jnp.float32)).astype(x.dtype)
        return fn(x)
    return wrapper


@jax.custom_jvp
@_widened
def inv_softplus(x: Any) -> Any:
    """log(exp(x) - 1), the inverse of softplus, for x > 0 without overflow or cancellation.

    Three regimes, each free of cancellation: ``log(expm1(x))`` for x <= 0.35 (result <= -0.9);
    ``log1p(2·expm1(x - ln 2))`` near the root x = ln 2 (e^x - 1 = 1 + 2(e^(x - ln2) - 1), with
    x - ln 2 formed exactly from a split ln 2); ``x + log1p(-exp(-x))`` from 1.4 on (x itself past
    88.7, where exp(x) overflows in float32). Derivative 1/(1 - exp(-x)) = -1/expm1(-x).

    Example: ``forms.inv_softplus(100.0)`` is 100.0 (``log(exp(100) - 1)`` is inf in float32).
    """
    small = jnp.log(jnp.expm1(jnp.minimum(x, 0.5)))
    t = _minus_ln2(x)
    middle = jnp.log1p(2 * jnp.expm1(jnp.clip(t, -0.5, 0.8)))
    large = x + jnp.log1p(-jnp.exp(-jnp.maximum(x, 1.0)))
    return jnp.where(x <= 0.35, small, jnp.where(x < 1.4, middle, large))


@inv_softplus.defjvp
def _inv_softplus_jvp(primals: Any, tangents: Any) -> Any:
    (x,), (t,) = primals, tangents
    return inv_softplus(x), t * (-1 / jnp.expm1(-x))


@jax.custom_jvp
@_widened
def log1mexp(a: Any) -> Any:
    """log(1 - exp(-a)) for a >= 0 (Maechler 2012): ``log(-expm1(-a))`` for a <= ln 2, else
    ``log1p(-exp(-a))``; each form is accurate exactly where the other cancels.

    Derivative 1/expm1(a). Example: ``forms.log1mexp(1e-20)`` is -46.05 in float64 (the naive
    ``log(1 - exp(-a))`` is -inf below a ~ 1e-16).
    """
    ln2 = 0.6931471805599453
    near = jnp.log(-jnp.expm1(-jnp.minimum(a, ln2)))
    far = jnp.log1p(-jnp.exp(-jnp.maximum(a, ln2)))
    return jnp.where(a <= ln2, near, far)


@log1mexp.defjvp
def _log1mexp_jvp(primals: Any, tangents: Any) -> Any:
    (a,), (t,) = primals, tangents
    return log1mexp(a), t / jnp.expm1(a)


@jax.custom_jvp
@_widened
def log_cosh(x: Any) -> Any:
    """log(cosh(x)) without overflow: ``log1p(2·sinh(|x|/2)²)`` below |x| = 1 (the result ~x²/2
    keeps its digits), ``(|x| - ln 2) + log1p(exp(-2|x|))`` above (cosh overflows past 89 in
    float32). Derivative tanh(x).

    Example: ``forms.log_cosh(100.0)`` is 99.30685 (``log(cosh(100))`` is inf in float32).
    """
    a = jnp.abs(x)
    s = jnp.sinh(0.5 * jnp.minimum(a, 1.0))
    small = jnp.log1p(2 * (s * s))
    large = _minus_ln2(a) + jnp.log1p(jnp.exp(-2 * a))
    return jnp.where(a < 1.0, small, large)


@log_cosh.defjvp
def _log_cosh_jvp(primals: Any, tangents: Any) -> Any:
    (x,), (t,) = primals, tangents
    return log_cosh(x), t * jnp.tanh(x)


def log_sigmoid_plus(x: Any, c: float) -> Any:
    """log(sigmoid(x) + c) for a constant c > 0 as ``logaddexp(log_sigmoid(x), log(c))``.

    Exact over the reals; the naive form rounds sigmoid(x) to 1 for x > 17 in float32, losing the
    small log entirely. Example: ``forms.log_sigmoid_plus(20.0, 1e-15)`` is -2.06e-9 (the naive
    form gives -0.0).
    """
    x = jnp.asarray(x)
    return logaddexp(-softplus(-x), jnp.asarray(math.log(c), x.dtype))


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
