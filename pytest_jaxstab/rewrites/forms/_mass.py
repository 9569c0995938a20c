"""The log of a distribution's mass between two bounds, accurate in both tails and where the bounds
are close: ``log(Φ(b) - Φ(a))`` (``log_ndtr_diff``, ``log_normal_mass``'s replacement) and
``log(sig(b) - sig(a))`` (``log_sigmoid_diff``, ``log_logistic_mass``'s).

``log(Φ(b) - Φ(a))`` is the truncated normal's log normaliser (numpyro's ``TruncatedNormal``, SciPy's
``_log_gauss_mass``).

Written as it reads, ``Φ(b) - Φ(a)`` cancels to 0 once both bounds are past 5.4 / 8.3 sigma (float32 /
float64) in the upper tail, and both terms underflow below -13 / -38 in the lower one. The mass is
computed where it has no cancellation:

- in a tail (after mirroring the lower one: Φ(b) - Φ(a) = Q(-b) - Q(-a), Q = 1 - Φ), as
  ``Q(x) - Q(y)`` for ``0 <= x <= y = x + h``:

  - bounds far apart, ``h·(x + h) > 1``: ``Q(x)·(1 - r)`` with ``r = Q(y)/Q(x) = exp(-(y² - x²)/2)·
    E(y)/E(x)`` (E(t) = erfcx(t/√2), decreasing): ``h·(x + y)/2 > 1/2`` so ``r < e^-1/2`` and
    ``log1p(-r)`` loses nothing; ``log Q(x)`` is ``log_ndtr(-x)``, and ``exp(-(y² - x²)/2)`` is
    formed from exact squares (:func:`_density_ratio`): the far bound's derivative is that ratio
    times the near one's.
  - bounds close, ``h·(x + h) <= 1``: the integral itself, ``φ(x)·h·S`` with
    ``S = ∫_0^1 exp(-h·u·(x + h·u/2)) du`` by 10-point Gauss-Legendre. The exponent's derivatives
    are bounded by those of exp(-t²/2) on a step ``h·t <= 1``: the rule's error is below
    ``(10!)^4/(21·(20!)^3)·He_20 ≈ 4e-22`` relative (He_20(0) = 19!! bounds the Hermite factor
    where ``t`` is small; where it is large ``(h·t)^20 <= 1`` does). Differencing ``Q(x) - Q(y)``
    there would lose ``1/(x·h)`` ulps (125 ulps at x = 8, h = 1e-3), a log-diff-exp of
    ``log_ndtr`` ``x/h`` (8000).

- across 0 (``a < 0 < b``): ``log1p(-(Φ(a) + Q(b)))`` where the two tails are at most 1/2, else
  ``log((erf(b/√2) - erf(a/√2))/2)``: the two erf have opposite signs, so neither form cancels
  (``Φ(b) - Φ(a)`` of two values near 1/2 loses ``1/(b - a)`` ulps).

The derivative is exact in each branch: ``∂/∂b = φ(b)/M``, ``∂/∂a = -φ(a)/M``, from the same pieces
(``1/(h·S)``, the inverse Mills ratio ``√(2/π)/E(x)`` over ``1 - r``), never ``exp`` of a difference
of two large logs. ``b < a`` or a NaN bound gives NaN (the log of a negative mass: no number is
invented where the program's own value does not exist), ``a = b`` gives -inf.

The logistic CDF has the same problem (``sig(b) - sig(a)`` is 0 past 17 / 37 in float32 / float64) and
an exact factorisation: ``sig(b) - sig(a) = sig(b)·sig(-a)·(1 - e^-(b - a))``, three factors in (0, 1]
whose logs are ``-softplus(-b)``, ``-softplus(a)`` and ``log1mexp(b - a)``: no cancellation, and
``b - a`` is exact where the bounds are close (Sterbenz). Its derivative, by differentiation of
those pieces, is ``sig(-b) + 1/expm1(b - a)`` in b (two positive terms), the negative of
``sig(a) + 1/expm1(b - a)`` in a.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ._core import log1mexp, softplus
from ._special import _erfcx, _exp_neg_half_square, _wide, log_ndtr, ndtr

__all__ = ["log_ndtr_diff", "log_sigmoid_diff"]

_NODES, _WEIGHTS = np.polynomial.legendre.leggauss(10)
_U = tuple(float(u) for u in (1 + _NODES) / 2)  # nodes on [0, 1]
_W = tuple(float(w) for w in _WEIGHTS / 2)
_INV_SQRT2 = 1 / math.sqrt(2)
_SQRT_2_OVER_PI = math.sqrt(2 / math.pi)
_INV_SQRT_2PI = 1 / math.sqrt(2 * math.pi)
_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


def _density_ratio(x: Any, y: Any, v: Any = 1.0) -> Any:
    """v·φ(y)/φ(x) = v·exp(-(y² - x²)/2) for 0 <= x <= y, to a few ulps; the product is formed
    before the exponential is subnormal (flushed to zero on XLA:CPU: a float32 bound's derivative
    8.7e-38 was 0), as ``_special._times_exp_neg_half_square`` does.

    ``exp(-h·(x + y)/2)`` as written carries the exponent's rounding, ``δ·2^-53`` relative for an
    exponent δ (235 ulps in a far bound's derivative at x = 30.8, y = 34.9). Here ``t = hi + lo``
    with ``hi`` a multiple of 2^-20 / 2^-7 (float64 / float32) below the cap (60 / 30), so ``hi²``
    is exact, the difference of two such squares too (both on the 2^-40 / 2^-14 grid, below 2^12 /
    2^10), and the rest ``lo·(t + hi)`` is below 2^-14 in size: its rounding is negligible. Past
    the cap (where the ratio is below e^-1078 / e^-3 unless both bounds are beyond it) the product
    as written."""
    wide = x.dtype == jnp.float64
    cap, scale = (60.0, 2.0**20) if wide else (30.0, 2.0**7)
    big, c = (600.0, 100.0) if wide else (40.0, 44.0)  # -exact + c is exact (the 2^-40 / 2^-14 grid)
    inside = y <= cap
    xs, ys = jnp.where(inside, x, 0.0), jnp.where(inside, y, 0.0)
    hx, hy = jnp.round(xs * scale) / scale, jnp.round(ys * scale) / scale
    lx, ly = xs - hx, ys - hy
    exact = 0.5 * (hy * hy - hx * hx)
    rest = 0.5 * (ly * (ys + hy) - lx * (xs + hx))
    # e·(1 + expm1(.)), not e·exp(.): XLA may fold exp(a)·exp(b) into exp(a + b) (see _special)
    shift = jnp.where(exact > big, c, 0.0)
    split = jnp.exp(shift - exact) * (1 + jnp.expm1(-rest))
    split = jnp.where(exact > big, (v * split) * math.exp(-c), v * split)
    return jnp.where(inside, split, v * jnp.exp(-0.5 * (y - x) * (x + y)))


def _tail(x: Any, y: Any, h: Any) -> tuple[Any, Any, Any]:
    """``(log M, φ(x)/M, φ(y)/M)`` for ``M = Q(x) - Q(y)``, ``0 <= x <= y = x + h`` (h accurate)."""
    close = h * (x + h) <= 1
    # each branch reads safe inputs where it is not taken
    xc, hc = jnp.where(close, x, 0.0), jnp.where(close, h, 0.5)
    s = sum(w * jnp.exp(-(hc * u) * (xc + (0.5 * u) * hc)) for u, w in zip(_U, _W))
    hs = hc * s
    log_close = (-0.5 * (xc * xc) - _LOG_SQRT_2PI) + jnp.log(hs)
    gx_close = 1 / hs
    gy_close = jnp.exp(-hc * (xc + 0.5 * hc)) / hs

    xf, yf = jnp.where(close, 0.0, x), jnp.where(close, 2.0, y)
    ex, ey = _erfcx(xf * _INV_SQRT2), _erfcx(yf * _INV_SQRT2)
    r = _density_ratio(xf, yf, ey / ex)  # Q(y)/Q(x); y = +inf: 0
    log_far = log_ndtr(-xf) + jnp.log1p(-r)
    gx_far = (_SQRT_2_OVER_PI / ex) / (1 - r)
    gy_far = _density_ratio(xf, yf, gx_far)
    return (jnp.where(close, log_close, log_far), jnp.where(close, gx_close, gx_far),
            jnp.where(close, gy_close, gy_far))


def _scaled(a: Any, rel: float) -> Any:
    """``a·(1 + rel)`` (an infinite bound stays itself)."""
    return a if rel == 0 else jnp.where(jnp.isinf(a), a, a + a * rel)


def _mass(a: Any, b: Any, rel_a: float, rel_b: float) -> tuple[Any, Any, Any, Any]:
    """``(log M, ∂/∂a, ∂/∂b, dtype)`` of ``M = Φ(b·(1 + rel_b)) - Φ(a·(1 + rel_a))``."""
    wa, dtype = _wide(a)
    wb, _ = _wide(b)
    wa, wb = jnp.broadcast_arrays(wa, wb.astype(wa.dtype))
    sa, sb = _scaled(wa, rel_a), _scaled(wb, rel_b)
    # h = b' - a' from the exact b - a (Sterbenz where the bounds are close) and the scales' rests
    d = wb - wa
    h = d if rel_a == 0 and rel_b == 0 else jnp.where(jnp.isinf(d), d, d + (wb * rel_b - wa * rel_a))
    low = wb <= 0
    high = (wa >= 0) & ~low
    mid = ~(low | high)

    # a tail: x = a', y = b' (upper) or x = -b', y = -a' (lower, mirrored); safe values elsewhere
    tails = low | high
    x = jnp.where(high, sa, jnp.where(low, -sb, 1.0))
    y = jnp.where(high, sb, jnp.where(low, -sa, 2.0))
    ht = jnp.where(tails, h, 1.0)
    log_t, gx, gy = _tail(x, y, ht)
    ga_t = jnp.where(high, -gx, -gy)
    gb_t = jnp.where(high, gy, gx)

    # across 0: a' < 0 < b'
    ma, mb = jnp.where(mid, wa, -1.0), jnp.where(mid, wb, 1.0)
    sma, smb = _scaled(ma, rel_a), _scaled(mb, rel_b)
    outer = ndtr(ma, rel_a) + ndtr(-mb, rel_b)
    small = outer <= 0.5
    inner = 0.5 * (jax.lax.erf(smb * _INV_SQRT2) - jax.lax.erf(sma * _INV_SQRT2))
    log_m = jnp.where(small, jnp.log1p(-jnp.where(small, outer, 0.0)),
                      jnp.log(jnp.where(small, 1.0, inner)))
    mass = jnp.where(small, 1 - outer, inner)
    ga_m = -_INV_SQRT_2PI * _exp_neg_half_square(jnp.abs(sma)) / mass
    gb_m = _INV_SQRT_2PI * _exp_neg_half_square(jnp.abs(smb)) / mass

    value = jnp.where(mid, log_m, log_t)
    ga = (1 + rel_a) * jnp.where(mid, ga_m, ga_t)
    gb = (1 + rel_b) * jnp.where(mid, gb_m, gb_t)
    bad = (wb < wa) | jnp.isnan(wa) | jnp.isnan(wb)
    empty = (wa == wb) & ~bad  # equal bounds (infinite ones included): no mass
    value = jnp.where(bad, jnp.nan, jnp.where(empty, -jnp.inf, value))
    return value, ga, gb, dtype


@functools.partial(jax.custom_jvp, nondiff_argnums=(2, 3))
def log_ndtr_diff(a: Any, b: Any, rel_a: float = 0.0, rel_b: float = 0.0) -> Any:
    """log(Φ(b') - Φ(a')), ``a' = a·(1 + rel_a)``, ``b' = b·(1 + rel_b)`` (``rel``: a Python float,
    the program's rounded √2 as ``_stability_special`` reads it; 0 for an exact one), to a few ulps
    in both tails and for close bounds (see the module docstring). NaN where ``b < a``.

    Example: ``log_ndtr_diff(8.0, 9.0)`` is -35.0 in float32 (written: -inf).
    """
    value, _, _, dtype = _mass(a, b, rel_a, rel_b)
    return value.astype(dtype)


@log_ndtr_diff.defjvp
def _log_ndtr_diff_jvp(rel_a: float, rel_b: float, primals: Any, tangents: Any) -> Any:
    (a, b), (ta, tb) = primals, tangents
    value, ga, gb, dtype = _mass(a, b, rel_a, rel_b)
    da = jnp.asarray(ta).astype(ga.dtype)
    db = jnp.asarray(tb).astype(gb.dtype)
    return value.astype(dtype), (ga * da + gb * db).astype(dtype)


def log_sigmoid_diff(a: Any, b: Any) -> Any:
    """log(sig(b) - sig(a)) = -softplus(-b) - softplus(a) + log1mexp(b - a) (see the module docstring):
    the log mass of a logistic distribution between two bounds. NaN where ``b < a`` or a bound is
    NaN, -inf where ``a = b`` (infinite ones included).

    Example: ``log_sigmoid_diff(20.0, 21.0)`` is -20.46 in float32 (written: -inf).
    """
    a, b = jnp.asarray(a), jnp.asarray(b)
    d = b - a
    empty = a == b
    value = -softplus(-b) - softplus(a) + log1mexp(jnp.where(empty, 1.0, d))
    return jnp.where(empty, -jnp.inf, value)
