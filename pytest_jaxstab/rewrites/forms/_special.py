"""Stable forms of the normal distribution's functions (``_stability_special``'s replacements).

JAX's own routines lose bits where these keep them (measured against mpmath at 256 bits):

- ``jax.scipy.special.ndtr`` computes ``erfc(-x·(1/√2)) / 2`` for ``x < -1/√2``: the rounding of the
  scaled argument is amplified by the tail's condition number ``x²`` (up to 7.7 bits at x = -12.9 in
  float32, 10.8 bits at x = -33 in float64), and XLA's ``erfc`` rounds ``z²`` inside ``exp(-z²)``
  (5.8 / 8.9 bits). Here the lower tail is ``erfcx(t/√2)·exp(-t²/2)/2`` (``erfcx`` is well
  conditioned: its argument's rounding costs nothing) with ``exp(-t²/2)`` evaluated from an exact
  split of ``t²`` (:func:`_exp_neg_half_square`).
- ``jax.scipy.special.log_ndtr`` computes ``log(ndtr(x))`` up to x = 5 (float32) / 8 (float64): for
  positive x that is the log of ``1 - Q(x)`` rounded, up to 20 / 62 bits off. Here it is
  ``log1p(-Q(x))`` with Q accurate, and ``log(erfcx(t/√2)/2) - t²/2`` for x <= 0.

Both carry their exact derivative (``φ(x)`` and ``φ(x)/Φ(x)``, each from the same accurate pieces):
JAX's ``grad(log_ndtr)`` is 24 bits off at x = -20 in float64, these are not.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
from jax.scipy.special import erfcx

__all__ = ["log_erfc", "log_ndtr", "ndtr", "scaled_ndtr"]

_INV_SQRT2 = 1 / math.sqrt(2)
_INV_SQRT_2PI = 1 / math.sqrt(2 * math.pi)
_SQRT_2_OVER_PI = math.sqrt(2 / math.pi)
_SQRT_PI = math.sqrt(math.pi)


def _wide(x: Any) -> tuple[Any, Any]:
    """``x`` as float64 or float32 (half precisions are computed in float32), and its own dtype."""
    x = jnp.asarray(x)
    dtype = x.dtype
    return (x if dtype == jnp.float64 else x.astype(jnp.float32)), dtype


def _erfcx(u: Any) -> Any:
    """erfcx(u) = exp(u²)·erfc(u) for u >= 0: JAX's below a cut (8 / 12 in float32 / float64), the
    asymptotic series (1/(u√π))·Σ (-1)^k (2k-1)!!/(2u²)^k above it (8 / 16 terms: the first term
    left out is below 2^-38 / 2^-76 of the sum). JAX 0.10's erfcx is exp(u²)·erfc(u) up to 9.42 /
    26.6: erfc flushed to zero on XLA:CPU where it is subnormal makes it 0 there (log_ndtr -inf)."""
    wide = u.dtype == jnp.float64
    cut, terms = (12.0, 16) if wide else (8.0, 8)
    big = u > cut
    v = jnp.where(big, u, 2 * cut)  # each branch reads a safe input
    s = 0.5 / (v * v)
    series = jnp.ones_like(v)
    for k in range(terms, 0, -1):
        series = 1 - (2 * k - 1) * s * series
    return jnp.where(big, series / (v * _SQRT_PI), erfcx(jnp.where(big, 0.0, u)))


def _exp_neg_half_square(t: Any, t_lo: Any = None) -> Any:
    """exp(-(t + t_lo)²/2) for t >= 0 and |t_lo| <= 2^-20·t (the rest of a scaled argument), to a few
    ulps.

    ``t = hi + lo`` with ``hi`` a multiple of 2^-20 (float64) / 2^-7 (float32) below the cap, so
    ``hi²`` is exact (26 / 11 significant bits squared); ``(t + t_lo)² = hi² + lo·(t + hi) +
    t_lo·(2t + t_lo)`` and the second exponent is below 2^-9 in size, its rounding negligible.
    ``exp(-t²/2)`` written as is rounds ``t²`` first, an absolute error of ``t²·2^-53`` in the
    exponent: a relative error of hundreds of ulps where ``t`` nears 38. Beyond the cap (40 / 16)
    the result underflows to 0.
    """
    wide = t.dtype == jnp.float64
    cap, scale = (40.0, 2.0**20) if wide else (16.0, 2.0**7)
    t = jnp.minimum(t, cap)
    hi = jnp.round(t * scale) / scale
    lo = t - hi
    rest = lo * (t + hi) if t_lo is None else lo * (t + hi) + t_lo * (2 * t + t_lo)
    # e·(1 + expm1(.)), not e·exp(.): XLA (jax 0.10) rewrites exp(a)·exp(b) into exp(a + b), which
    # rounds the exponent this split keeps exact (510 ulps at t = 37.6); not e + e·expm1(.) either,
    # whose second term is subnormal (flushed) where e nears the underflow
    return jnp.exp(-0.5 * (hi * hi)) * (1 + jnp.expm1(-0.5 * rest))


def _times_exp_neg_half_square(v: Any, t: Any, t_lo: Any = None) -> Any:
    """v·exp(-(t + t_lo)²/2) without a subnormal intermediate where the product is normal (x·φ(x) at
    -13.25 in float32 is -3.7e-38, φ itself 2.8e-39): for large t the exponential is taken times
    e^C (C = 44 / 100, and -hi²/2 + C is exact: 22 / 51 significant bits), the product with v formed,
    then e^-C applied."""
    wide = t.dtype == jnp.float64
    big, c = (30.0, 100.0) if wide else (12.0, 44.0)
    cap, scale = (40.0, 2.0**20) if wide else (16.0, 2.0**7)
    tc = jnp.minimum(t, cap)
    hi = jnp.round(tc * scale) / scale
    lo = tc - hi
    rest = lo * (tc + hi) if t_lo is None else lo * (tc + hi) + t_lo * (2 * tc + t_lo)
    shift = jnp.where(t > big, c, 0.0)
    e = jnp.exp(-0.5 * (hi * hi) + shift) * (1 + jnp.expm1(-0.5 * rest))
    return jnp.where(t > big, (v * e) * math.exp(-c), v * e)


_T_MAX = 1e4


def _parts(x: Any, rel: float) -> tuple[Any, Any, Any, Any]:
    """``(w, t, t_lo, dtype)``: x widened, t = |x|, and ``t·rel`` (None for rel = 0): the argument is
    ``t·(1 + rel)``, a scale the program wrote as a constant within 2^-20 of 1/√2 times √2."""
    w, dtype = _wide(x)
    # |x| clamped where every tail is 0 in float64 (Q(40) < 1e-348): an infinite argument (x / s with a
    # zero or flushed s, as written) would make the tail's exact square inf - inf = NaN; Φ(±inf) is 1 / 0.
    t = jnp.minimum(jnp.abs(w), _T_MAX)
    return w, t, (None if rel == 0 else t * rel), dtype


def _upper_tail(t: Any, t_lo: Any = None) -> Any:
    """Q(t + t_lo) = Φ(-(t + t_lo)) = erfcx(u/√2)·exp(-u²/2)/2, u = t + t_lo >= 0 (erfcx is well
    conditioned: rounding its argument costs nothing)."""
    u = t if t_lo is None else t + t_lo
    return 0.5 * _erfcx(u * _INV_SQRT2) * _exp_neg_half_square(t, t_lo)


@functools.partial(jax.custom_jvp, nondiff_argnums=(1,))
def ndtr(x: Any, rel: float = 0.0) -> Any:
    """Φ(x·(1 + rel)), the standard normal CDF, to a few ulps on the whole line (the lower tail
    included): Q(|x|) for x < 0, 1 - Q(x) for x >= 0 (Q <= 1/2 there: no cancellation).
    ``rel`` (a Python float, |rel| <= 2^-20): the program's constant was √2 rounded."""
    w, t, t_lo, dtype = _parts(x, rel)
    q = _upper_tail(t, t_lo)
    return jnp.where(w < 0, q, 1 - q).astype(dtype)


@ndtr.defjvp
def _ndtr_jvp(rel: float, primals: Any, tangents: Any) -> Any:
    (x,), (tx,) = primals, tangents
    _, t, t_lo, dtype = _parts(x, rel)
    density = ((1 + rel) * _INV_SQRT_2PI * _exp_neg_half_square(t, t_lo)).astype(dtype)
    return ndtr(x, rel), density * tx


@jax.custom_jvp
def quotient(u: Any, s: Any) -> Any:
    """``u / s`` whose derivative is ``(du - (u/s)·ds) / s``: JAX's own divides by ``s²``, which is
    flushed to zero for |s| < 1.1e-19 in float32 (a normal CDF's tiny scale) and makes a zero
    cotangent NaN (0·inf) where the quotient's derivative is finite. Where the quotient itself
    overflows (x = u/s past the float max while the program's u/(s·√2) is not), its slope in ``s`` is
    taken as the largest float: the forms are flat out there (Φ and log Φ at +inf), and a zero
    cotangent then gives 0, not inf·0 = NaN; a non-zero one still overflows to inf, as the slope does."""
    return u / s


@quotient.defjvp
def _quotient_jvp(primals: Any, tangents: Any) -> Any:
    (u, s), (du, ds) = primals, tangents
    q = u / s
    big = jnp.finfo(jnp.result_type(q)).max
    return q, (du - jnp.clip(q, -big, big) * ds) / s


@functools.partial(jax.custom_jvp, nondiff_argnums=(2,))
def scaled_ndtr(y: Any, x: Any, rel: float = 0.0) -> Any:
    """y·Φ(x·(1 + rel)) (the exact GELU: y = x), the product taken before Φ's tail gets below the
    smallest normal: y·exp(-t²/2) first, then erfcx(t/√2)/2 (x·Φ(x) at -12.97 in float32 is
    -1.1e-37, Φ itself subnormal there and flushed to zero on XLA:CPU)."""
    w, t, t_lo, dtype = _parts(x, rel)
    v = jnp.asarray(y).astype(w.dtype)
    u = t if t_lo is None else t + t_lo
    tail = _times_exp_neg_half_square(v, t, t_lo) * (0.5 * _erfcx(u * _INV_SQRT2))
    # x >= 0: y·(1 - Q(x)), 1 - Q in [1/2, 1] (no cancellation); not y - y·Q, whose y·Q is flushed to
    # zero where y is near the smallest normal (16 bits lost at y = 3e-37, x = 2.6 in float32)
    return jnp.where(w < 0, tail, v * (1 - _upper_tail(t, t_lo))).astype(dtype)


@scaled_ndtr.defjvp
def _scaled_ndtr_jvp(rel: float, primals: Any, tangents: Any) -> Any:
    # d/dy = Φ(x'), d/dx = y·φ(x')·(1 + rel). For x < 0 both are φ(x') times something, Φ(x') =
    # φ(x')·√(π/2)·erfcx(t'/√2): the tangent is φ(x')·(√(π/2)·erfcx·ty + (1 + rel)·y·tx), the
    # bracket formed first (GELU's derivative at -13.25 in float32 is -4.0e-38; its Φ(x) part alone
    # is subnormal, flushed to zero on XLA:CPU). That holds for jvp; grad transposes the two terms
    # apart again (y = x: ct·Φ + ct·y·φ), so for -13.4 < x < -12.95 (float32) / -38.4 < x < -37.5
    # (float64) GELU's gradient lacks the flushed Φ(x) part, 1/x² = 0.6% of it
    (y, x), (ty, tx) = primals, tangents
    w, t, t_lo, dtype = _parts(x, rel)
    v = jnp.asarray(y).astype(w.dtype)
    dy, dx = jnp.asarray(ty).astype(w.dtype), jnp.asarray(tx).astype(w.dtype)
    u = t if t_lo is None else t + t_lo
    bracket = (math.sqrt(math.pi / 2) * _erfcx(u * _INV_SQRT2)) * dy + (1 + rel) * v * dx
    low = _INV_SQRT_2PI * _times_exp_neg_half_square(bracket, t, t_lo)
    slope = ((1 + rel) * _INV_SQRT_2PI) * _times_exp_neg_half_square(v, t, t_lo)
    high = ndtr(w, rel) * dy + slope * dx
    return scaled_ndtr(y, x, rel), jnp.where(w < 0, low, high).astype(dtype)


@functools.partial(jax.custom_jvp, nondiff_argnums=(1,))
def log_ndtr(x: Any, rel: float = 0.0) -> Any:
    """log Φ(x·(1 + rel)): log(erfcx(t/√2)/2) - t²/2 (t = -x >= 0; both terms negative, no
    cancellation; no underflow) for x <= 0, log1p(-Q(x)) for x > 0 (log Φ ≈ -Q(x) there, kept to
    its last bit)."""
    w, t, t_lo, dtype = _parts(x, rel)
    neg = w <= 0
    # each branch reads a safe input, selected by the same test (its unused derivative stays finite);
    # the lower branch reads |x| itself, not _parts' clamp (a tail's clamp, where Q is 0, would make
    # log Φ(-2e4) the log Φ(-1e4) = -5e7 of the clamp instead of -2e8)
    full = jnp.abs(w)
    tn = jnp.where(neg, full, 0.0)
    tp = jnp.where(neg, 0.0, t)
    ln = None if t_lo is None else jnp.where(neg, full * rel, 0.0)
    lp = None if t_lo is None else jnp.where(neg, 0.0, t_lo)
    un = tn if ln is None else tn + ln
    square = (0.5 * tn) * tn if ln is None else (0.5 * tn) * tn + ln * (tn + 0.5 * ln)
    low = jnp.log(0.5 * _erfcx(un * _INV_SQRT2)) - square
    high = jnp.log1p(-_upper_tail(tp, lp))
    return jnp.where(neg, low, high).astype(dtype)


@log_ndtr.defjvp
def _log_ndtr_jvp(rel: float, primals: Any, tangents: Any) -> Any:
    # d/dx log Φ = φ/Φ: √(2/π)/erfcx(t/√2) for x <= 0 (the exp(-t²/2) of φ and Φ cancelled
    # exactly), φ(x)/(1 - Q(x)) for x > 0; times 1 + rel, the argument's scale
    (x,), (tx,) = primals, tangents
    w, t, t_lo, dtype = _parts(x, rel)
    neg = w <= 0
    full = jnp.abs(w)  # unclamped, as in log_ndtr: the inverse Mills ratio grows like |x|
    u = full if rel == 0 else full + full * rel
    low = _SQRT_2_OVER_PI / _erfcx(jnp.where(neg, u, 0.0) * _INV_SQRT2)
    tp = jnp.where(neg, 0.0, t)
    lp = None if t_lo is None else jnp.where(neg, 0.0, t_lo)
    high = _INV_SQRT_2PI * _exp_neg_half_square(tp, lp) / (1 - _upper_tail(tp, lp))
    slope = (1 + rel) * jnp.where(neg, low, high)
    return log_ndtr(x, rel), slope.astype(dtype) * tx


def log_erfc(z: Any) -> Any:
    """log(erfc(z)): log1p(-erf(z)) for z < 1/2 (erf is accurate near 0, where erfc rounds to 1),
    log(erfcx(z)) - z² above (both negative: no cancellation, no underflow of erfc(z) to 0)."""
    w, dtype = _wide(z)
    below = w < 0.5
    lo = jnp.where(below, w, 0.0)  # each branch reads a safe input, selected by the same test
    hi = jnp.where(below, 1.0, w)
    small = jnp.log1p(-jax.lax.erf(lo))
    large = jnp.log(_erfcx(hi)) - hi * hi
    return jnp.where(below, small, large).astype(dtype)
