"""Complements of regularised incomplete functions and logs of scaled Bessel functions.

- ``betainc_complement``: ``1 - I_x(a, b) = I_{1-x}(b, a)``. ``1 - I`` keeps ``ulp(1)`` of an ``I``
  near 1 (all of it once ``I`` rounds to 1: a Beta's upper tail near ``x = 1``); the reflected
  function computes the small value itself. Reflected where ``x >= 1/2``, where ``1 - x`` is exact
  (Sterbenz); below, the rounding of ``1 - x`` (relative to 1) moves the derivative, which reads
  ``x = 1 - y`` again, by ``ulp(1)/x`` (10 bits at x = 7e-4): ``1 - I`` stays as written there.
- ``gamma_complement``: ``1 - P(a, x) = Q(a, x)`` and ``1 - Q = P``, exact for every ``a > 0``.
- ``log_gammaincc``: ``log Q(a, x)`` past Q's underflow (a chi² log-survival far in its tail: -inf
  as written) from Legendre's continued fraction, its prefactor ``a·log x - x - lgamma(a)`` written
  without the cancellation of its terms.
- Under a log, ``log1p(-F)`` where ``F <= 1/2`` (its complement is near 1: ``log`` of it would keep
  none of a tiny ``F``), the complement's log elsewhere.
- ``log_i0``: ``log(I0(x))`` as ``log(i0e(x)) + |x|`` (``I0`` overflows at |x| = 89 in float32
  where its log is 86), and below |x| = 2, where that sum cancels, ``log1p`` of the series
  ``I0(x) - 1 = sum_k (x²/4)^k / (k!)²``. Derivative ``i1e(x) / i0e(x)``.
- ``log_i1``: ``log(I1(x))`` as ``log(i1e(x)) + |x|`` above |x| = 50; below, the program's own
  ``log(exp(|x|) · i1e(x))`` (the sum cancels near ``I1(x) = 1``, x = 1.59). Derivative
  ``i0e(x) / i1e(x) - 1 / x``.

The catalogue's replacements (``_stability_complements``), not exported by ``jst.rewrites.forms``.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

from ..._dtypes import dtype_info
from ._divergence import log1pmx

__all__ = ["betainc_complement", "gamma_complement", "log_gammaincc", "log_i0", "log_i1"]


def betainc_complement(a: Any, b: Any, x: Any, log: bool = False) -> Any:
    """``1 - betainc(a, b, x)`` as ``betainc(b, a, 1 - x)`` where ``x >= 1/2``; with ``log``, its log,
    ``log1p(-betainc(a, b, x))`` where the function is at most 1/2 (``log`` of a complement near 1
    loses what ``log1p`` keeps).

    Example: ``betainc_complement(2.0, 3.0, 0.9999999)`` in float64 is 4.0e-21 (as written: 0).
    """
    reflect = x >= 0.5  # 1 - x exact (Sterbenz); below, its rounding would move the derivative too
    comp = lax.betainc(b, a, jnp.where(reflect, 1 - x, jnp.full_like(x, 0.5)))
    take = reflect & (comp < 0.5) if log else reflect
    # each branch reads a safe point where the other is taken: betainc's derivative is inf at 0 or
    # 1 for a shape below 1, and 0·inf is NaN under the select
    direct = lax.betainc(a, b, jnp.where(take, jnp.full_like(x, 0.5), x))
    if not log:
        return jnp.where(take, comp, 1 - direct)
    return jnp.where(take, jnp.log(jnp.where(take, comp, jnp.ones_like(comp))), jnp.log1p(-direct))


def gamma_complement(a: Any, x: Any, upper: bool, log: bool = False) -> Any:
    """``1 - P(a, x) = Q(a, x)`` (``upper``: ``1 - Q = P``), P and Q JAX's ``igamma``/``igammac``;
    with ``log``, its log, ``log1p(-F)`` where the written function ``F`` is at most 1/2. For
    ``a <= 0`` (outside the functions' domain, where JAX's conventions differ between the two) the
    written form.

    Example: ``gamma_complement(3.0, 60.0, upper=False)`` in float32 is 1.6e-23 (as written: 0).
    """
    written, other = (lax.igammac, lax.igamma) if upper else (lax.igamma, lax.igammac)
    valid = a > 0
    a_s = jnp.where(valid, a, jnp.ones_like(a))
    if not log:
        new = other(a_s, x)
        return jnp.where(valid, new, 1 - written(a, x))
    f = written(a_s, x)
    take = f > 0.5
    x_s = jnp.where(take, x, jnp.ones_like(x))
    if upper:
        g = jnp.log(other(a_s, x_s))
    else:  # log Q past its underflow: the continued fraction's log
        g = log_gammaincc(a_s, x_s)
    new = jnp.where(take, g, jnp.log1p(-jnp.where(take, jnp.zeros_like(f), f)))
    return jnp.where(valid, new, jnp.log1p(-written(a, x)))


_CF_STEPS = 48


def log_gammaincc(a: Any, x: Any) -> Any:
    """``log(gammaincc(a, x))``, also where ``gammaincc`` underflows to 0 (its log is then -inf as
    written): there ``a·log(x) - x - lgamma(a) + log(h)``, ``h`` Legendre's continued fraction for
    ``Γ(a, x)·e^x·x^-a`` (modified Lentz, 48 steps: past the underflow, x > a + 13·sqrt(a), it has
    converged to the working precision long before). Differentiable (autodiff of the same steps).

    Example: ``log_gammaincc(2.0, 200.0)`` in float32 is -194.70 (``log(gammaincc)``: -inf).
    """
    q = lax.igammac(a, x)
    info = dtype_info(jnp.result_type(q))
    tail = (q < info.tiny) & (x > a + 1) & (a > 0)
    # a point where the fraction converges and every derivative is finite (the branch is not
    # taken there): a = 1, x = 3
    a_t = jnp.where(tail, a, jnp.ones_like(a))
    xs = jnp.where(tail, x, jnp.full_like(x, 3.0))
    tiny = jnp.asarray(info.tiny, q.dtype)

    def step(i: Any, state: Any) -> Any:
        b, c, d, h = state
        an = -i * (i - a_t)
        b = b + 2
        d = an * d + b
        d = jnp.where(jnp.abs(d) < tiny, tiny, d)
        c = b + an / c
        c = jnp.where(jnp.abs(c) < tiny, tiny, c)
        d = 1 / d
        return b, c, d, h * (d * c)

    b0 = xs + 1 - a_t
    init = (b0, jnp.full_like(b0, 1 / info.tiny), 1 / b0, 1 / b0)
    h = lax.fori_loop(1, _CF_STEPS + 1, lambda i, st: step(jnp.asarray(i, q.dtype), st), init)[3]
    # a·log(x) - x - lgamma(a) without its terms' cancellation (each ~a·log a for a large):
    # a·log1pmx((x - a)/a) + log(a/2π)/2 - s(a), s Stirling's remainder of lgamma(a)
    prefactor = (a_t * log1pmx((xs - a_t) / a_t) + 0.5 * jnp.log(a_t) - _HALF_LOG_2PI
                 - _stirling_remainder(a_t))
    cf = prefactor + jnp.log(h)
    return jnp.where(tail, cf, jnp.log(jnp.where(tail, jnp.ones_like(q), q)))


_SERIES_STEPS = 128
_SERIES_RATIO = 0.75  # x / (a + 1) at most this: 128 terms reach 0.75^128 < 1e-16 of the first


def log_gammainc(a: Any, x: Any) -> Any:
    """``log(gammainc(a, x))``, also where ``gammainc`` underflows to 0 (a lower tail far below the
    mean: -inf as written): there ``a·log(x) - x - lgamma(a + 1) + log(S)``, ``S = sum_n x^n /
    ((a + 1)···(a + n))`` (terms of one sign, each at most 0.75 of the one before where it is taken,
    128 of them), the prefactor without its terms' cancellation as in :func:`log_gammaincc`.
    Elsewhere (P a normal float, or ``x`` too near ``a`` for the series) the written log.
    Differentiable (autodiff of the same terms).

    Example: ``log_gammainc(50.0, 1.0)`` in float32 is -149.0 (``log(gammainc)``: -inf).
    """
    p = lax.igamma(a, x)
    info = dtype_info(jnp.result_type(p))
    tail = (p < info.tiny) & (x > 0) & (a > 0) & (x <= _SERIES_RATIO * (a + 1))
    # a point where the series converges and every derivative is finite (not taken there)
    a_t = jnp.where(tail, a, jnp.ones_like(a))
    xs = jnp.where(tail, x, jnp.full_like(x, 0.5))

    def step(i: Any, state: Any) -> Any:
        term, total = state
        term = term * xs / (a_t + i)
        return term, total + term

    one = jnp.ones_like(xs)
    total = lax.fori_loop(1, _SERIES_STEPS + 1, lambda i, st: step(jnp.asarray(i, p.dtype), st),
                          (one, one))[1]
    # a·(log r - r + 1), r = x/a: log1pmx near r = 1, and the direct form below 1/2, where
    # (x - a)/a would round to -1 for a tiny x (at most 2 bits cancel there)
    r = xs / a_t
    near = r >= 0.5
    log_r = a_t * jnp.where(near, log1pmx((jnp.where(near, xs, a_t) - a_t) / a_t),
                            jnp.log(jnp.where(near, 0.25, r)) + (1 - r))
    prefactor = (log_r + 0.5 * jnp.log(a_t) - _HALF_LOG_2PI - _stirling_remainder(a_t) - jnp.log(a_t))
    series = prefactor + jnp.log(total)
    return jnp.where(tail, series, jnp.log(jnp.where(tail, jnp.ones_like(p), p)))


_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)
_STIRLING = (1 / 12, -1 / 360, 1 / 1260, -1 / 1680, 1 / 1188)


def _stirling_remainder(a: Any) -> Any:
    """``lgamma(a) - ((a - 1/2)·log a - a + log(2π)/2)``: its asymptotic series from a = 10, below
    as written (terms under 25: the subtraction loses at most a few ulps of them)."""
    large = a >= 10
    al = jnp.where(large, a, jnp.full_like(a, 10.0))
    r2 = 1 / (al * al)
    series = jnp.zeros_like(al)
    for c in reversed(_STIRLING):
        series = c + r2 * series
    series = series / al
    asm = jnp.where(large, jnp.ones_like(a), a)
    direct = lax.lgamma(asm) - ((asm - 0.5) * jnp.log(asm) - asm + _HALF_LOG_2PI)
    return jnp.where(large, series, direct)


# 1 / (k!)² for the series of I0(x) - 1 in q = x²/4, enough terms for float64 at q <= 1
_I0_SERIES = tuple(1.0 / math.factorial(k) ** 2 for k in range(1, 15))
_I0_SMALL = 2.0
_I1_LARGE = 50.0


@jax.custom_jvp
def log_i0(x: Any) -> Any:
    """``log(I0(x))`` without overflow and without cancellation near 0 (see the module).

    Example: ``log_i0(jnp.float32(500.0))`` is 496.04 (``jnp.log(jax.scipy.special.i0(x))``: inf).
    """
    ax = jnp.abs(x)
    small = ax < _I0_SMALL
    q = jnp.square(jnp.where(small, x, jnp.zeros_like(x))) / 4
    s = jnp.full_like(q, _I0_SERIES[-1])
    for c in reversed(_I0_SERIES[:-1]):
        s = c + q * s
    near = jnp.log1p(q * s)
    far = jnp.log(lax.bessel_i0e(x)) + ax
    return jnp.where(small, near, far)


@log_i0.defjvp
def _log_i0_jvp(primals: Any, tangents: Any) -> Any:
    (x,), (dx,) = primals, tangents
    return log_i0(x), dx * (lax.bessel_i1e(x) / lax.bessel_i0e(x))


@jax.custom_jvp
def log_i1(x: Any) -> Any:
    """``log(I1(x))`` without overflow (NaN for x < 0, -inf at 0, as the log of I1 is).

    Example: ``log_i1(jnp.float32(500.0))`` is 496.04 (``jnp.log(jax.scipy.special.i1(x))``: inf).
    """
    ax = jnp.abs(x)
    large = ax > _I1_LARGE
    xs = jnp.where(large, jnp.ones_like(x), x)
    near = jnp.log(jnp.exp(jnp.abs(xs)) * lax.bessel_i1e(xs))
    far = jnp.log(lax.bessel_i1e(x)) + ax
    return jnp.where(large, far, near)


@log_i1.defjvp
def _log_i1_jvp(primals: Any, tangents: Any) -> Any:
    (x,), (dx,) = primals, tangents
    # I1'/I1 = I0/I1 - 1/x (the recurrence): i0e/i1e ~ 2/x near 0, 1 + 1/(2x) far; no cancellation
    return log_i1(x), dx * (lax.bessel_i0e(x) / lax.bessel_i1e(x) - 1 / x)
