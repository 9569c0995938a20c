"""Inverse-CDF sampling of a normal between two bounds (``_stability_sampling``'s replacement).

Truncated-normal samplers draw ``x = Φ^-1(Φ(l) + u·(Φ(h) - Φ(l)))``, written through erf
(``√2·erf_inv(a + u·(b - a))``, ``a = erf(l/√2)``: jax.random.truncated_normal before its fix) or
through ``ndtr``/``ndtri`` (numpyro's ``TruncatedNormal.icdf``). With both bounds in the upper tail
the interpolated value rounds to 1 (erf) and the quantile is inf or has no correct bit; in the lower
tail ``Φ`` itself is computed as ``(1 + erf)/2`` or underflows. Over the reals, with ``p`` the
interpolated probability and ``q = 1 - p``,

    p = (1 - u)·Φ(l) + u·Φ(h),   q = (1 - u)·Q(l) + u·Q(h),   Q(t) = Φ(-t),

both sums of non-negative terms for ``0 <= u <= 1`` (no cancellation), and

    x = ndtri(p)  (p small: the lower tail),   x = -ndtri(q)  (q small: the upper tail,
    √2·erfinv(1 - t) = -ndtri(t/2)),   x = √2·erfinv(erf(l/√2) + u·(erf(h/√2) - erf(l/√2)))  (centre).

The centre (``|2p - 1| <= 1/2``) keeps the erf interpolation: near x = 0 it carries the bounds'
own relative precision, where ``p`` near 1/2 carries only ``ulp(1/2)`` (10 bits worse at
``l = -h = 1e-3``). Outside ``0 <= u <= 1`` (not a sampler's draw, but the same expression) the
interpolation is formed as the program forms it, ``F(l) + u·(F(h) - F(l))``, from the accurate
tails: the convex form would cancel there.

Φ and Q are ``_special.ndtr`` (a few ulps on the whole line, Φ(x·(1 + rel)) for a program's rounded
√2). Derivatives: ``∂x/∂l = (1 - u)·φ(l)/φ(x)``, ``∂x/∂h = u·φ(h)/φ(x)``, ``∂x/∂u = (Φ(h) - Φ(l))/φ(x)``
(as written they are those of a value with no correct bit). Across 0 they are autodiff of the erf
interpolation, as the program's; with both bounds on one side of 0 (and ``0 <= u <= 1``) they are
formed from pieces without cancellation (:func:`_tail_derivatives`: autodiff of the tail sums
differences two tangents, 11 bits lost at l = 8, h = 8.01 in float32). Each branch reads a safe
input where it is not taken, so no NaN or inf reaches a ``where``'s untaken side, value or
derivative.

Where the smaller mass is below the normal range (bounds past about 12 / 37 sigma in float32 /
float64: a term of the sum is subnormal, flushed to zero on XLA:CPU, and ``ndtri`` of 0 is inf),
the draw is found from the mass's log by Newton's method on ``log Q`` (:func:`_far`).
"""

from __future__ import annotations

import math
from typing import Any

import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.scipy.special import ndtri

from ._mass import _density_ratio, _tail
from ._special import _erfcx, _wide, log_ndtr, ndtr

__all__ = ["normal_interval_quantile"]

_SQRT2 = math.sqrt(2.0)
_INV_SQRT2 = 1 / _SQRT2
_SQRT_PI_OVER_2 = math.sqrt(math.pi / 2)
_NEWTON = 3  # from sqrt(n² + 2D) the error is O(log(X/n)/X): three quadratic steps are enough
#: Below this tail mass a term of the sum may be subnormal (flushed on XLA:CPU): the log-space branch.
_TINY = {"float32": float(np.finfo(np.float32).tiny) * 2.0**24,
         "float64": float(np.finfo(np.float64).tiny) * 2.0**53}


def _scaled(a: Any, rel: float) -> Any:
    """``a·(1 + rel)`` (an infinite bound stays itself: ``inf + inf·rel`` is NaN for rel < 0)."""
    return a if rel == 0 else jnp.where(jnp.isinf(a), a, a + a * rel)


def _far(u: Any, sl: Any, sh: Any, upper: Any, take: Any) -> Any:
    """The draw where its tail mass ``M = (1 - u)·Q(a) + u·Q(b)`` (``a, b = ±l, ±h`` mirrored to the
    upper tail) is below the normal range, found from its log: ``log M = log Q(n) + log(w_n + w_f·r)``
    (``n <= f`` the bounds, ``r = Q(f)/Q(n)`` from exact squares), then Newton's method on
    ``log Q(X) = log M`` (``log Q`` is concave and decreasing: from the start ``sqrt(n² + 2·D)``,
    ``D = log Q(n) - log M``, the iterates converge monotonically, quadratically). The derivative is
    the implicit one, ``dX = -(Q(X)/φ(X))·d log M``, from one last step on the stopped iterate."""
    sign = jnp.where(upper, 1.0, -1.0).astype(sl.dtype)
    a, b = sign * sl, sign * sh
    swap = b < a
    n, f = jnp.where(swap, b, a), jnp.where(swap, a, b)
    wn, wf = jnp.where(swap, u, 1 - u), jnp.where(swap, 1 - u, u)
    # safe inputs where the branch is not taken (a bound at inf: r = 0, with a finite stand-in)
    n, wn, wf = jnp.where(take, n, 20.0), jnp.where(take, wn, 0.5), jnp.where(take, wf, 0.5)
    f = jnp.where(take, f, 21.0)
    finite = jnp.isfinite(f)
    fs = jnp.where(finite, f, n + 1)
    r = jnp.where(finite, _density_ratio(n, fs, _erfcx(fs * _INV_SQRT2) / _erfcx(n * _INV_SQRT2)), 0.0)
    weight = wn + wf * r
    # no mass (u at the end of an infinite bound): the draw is that bound, ±inf
    empty = weight == 0
    share = jnp.log(jnp.where(empty, 1.0, weight))
    target = log_ndtr(-n) + share
    x = lax.stop_gradient(jnp.sqrt(n * n - 2 * jnp.minimum(share, 0.0)))
    fixed = lax.stop_gradient(target)
    # the steps in a loop (not differentiated: the derivative is the last step's): one copy of
    # log_ndtr's and erfcx's code for XLA to compile, not three
    x = lax.fori_loop(0, _NEWTON, lambda _, x: x + (log_ndtr(-x) - fixed)
                      * (_erfcx(x * _INV_SQRT2) * _SQRT_PI_OVER_2), x)
    x = lax.stop_gradient(x)
    x = x + (log_ndtr(-x) - target) * (_erfcx(x * _INV_SQRT2) * _SQRT_PI_OVER_2)
    return sign * jnp.where(empty, jnp.inf, x)


def _tail_derivatives(x: Any, u: Any, sl: Any, sh: Any, up: Any, take: Any) -> Any:
    """``x`` with the derivatives of a draw whose bounds are on one side of 0, from pieces without
    cancellation. Mirrored to the upper tail, ``n <= f`` the bounds, ``r = Q(f)/Q(n)`` and
    ``W = w_n + w_f·r`` (the draw's mass over ``Q(n)``, a sum of non-negative terms), so that
    ``φ(x) = Q(n)·W·m(x)`` with ``m = φ/Q`` (the inverse Mills ratio, well conditioned: ``φ(x)``
    itself would carry ``x²`` times the draw's rounding):
    ``∂x/∂u = ±M/φ(x) = ±(m(n)/(m(x)·W))/g`` (``g = φ(n)/M`` from ``_mass._tail``: close bounds by
    quadrature, where ``Q(n) - Q(f)`` as two tangents' difference lost 11 bits at l = 8, h = 8.01 in
    float32), ``∂x/∂n = w_n·m(n)/(m(x)·W)``, ``∂x/∂f = w_f·m(f)·r/(m(x)·W)``. The value is ``x``'s."""
    sign = jnp.where(up, 1.0, -1.0).astype(x.dtype)
    a, b = sign * sl, sign * sh
    near_a = a <= b
    n = jnp.where(take, jnp.minimum(a, b), 1.0)
    f = jnp.where(take, jnp.maximum(a, b), 2.0)
    big = jnp.where(take, jnp.maximum(sign * x, 0.0), 1.5)
    finite = jnp.isfinite(f)
    fs = jnp.where(finite, f, n + 1)
    en, ef, ex = _erfcx(n * _INV_SQRT2), _erfcx(fs * _INV_SQRT2), _erfcx(big * _INV_SQRT2)
    r = jnp.where(finite, _density_ratio(n, fs, ef / en), 0.0)
    wn, wf = jnp.where(near_a, 1 - u, u), jnp.where(near_a, u, 1 - u)
    wn, wf = jnp.where(take, wn, 0.5), jnp.where(take, wf, 0.5)
    # m(t) = √(2/π)/erfcx(t/√2): ratios of m are ratios of erfcx
    weight = wn + wf * r
    scale = jnp.where(weight > 0, ex / jnp.where(weight > 0, weight, 1.0), 0.0)  # 0: x is the bound ±inf
    _, gn, _ = _tail(n, f, f - n)  # φ(n)/M
    d_near = scale / en
    d_far = jnp.where(finite, scale * r / ef, 0.0)
    du = jnp.where(sl <= sh, 1.0, -1.0) * d_near / gn  # (M/φ(n))·(φ(n)/φ(x))
    dl = (1 - u) * jnp.where(near_a, d_near, d_far)
    dh = u * jnp.where(near_a, d_far, d_near)
    du, dl, dh = (lax.stop_gradient(jnp.where(take, g, 0.0)) for g in (du, dl, dh))
    # each term 0 in value, its operand's tangent times the derivative (an infinite bound: no tangent,
    # and inf - inf would be NaN)
    tl, th = (jnp.where(jnp.isfinite(t), t, 0.0) for t in (sl, sh))
    moved = (u - lax.stop_gradient(u)) * du + (tl - lax.stop_gradient(tl)) * dl
    return lax.stop_gradient(x) + (moved + (th - lax.stop_gradient(th)) * dh)


def normal_interval_quantile(u: Any, lo: Any, hi: Any, rel_lo: float = 0.0, rel_hi: float = 0.0,
                             rel_out: float = 0.0, clamp: bool = False) -> Any:
    """``(1 + rel_out)·Φ^-1(Φ(l') + u·(Φ(h') - Φ(l')))``, ``l' = lo·(1 + rel_lo)``, ``h' = hi·(1 + rel_hi)``:
    the inverse-CDF draw of a normal truncated to ``[l', h']`` from ``u`` in [0, 1], accurate in both
    tails and across 0 (see the module docstring). ``rel_*`` (Python floats, below 2^-20): the
    program's √2 rounded, as ``_stability_special`` reads it; ``clamp``: the program wrote
    ``max(F(l), F(l) + u·(F(h) - F(l)))`` (``jax.random.uniform``'s ``minval`` clamp), i.e. ``u`` below
    0 (above, for reversed bounds) reads as 0.

    Example: ``normal_interval_quantile(0.5, 8.0, 9.0)`` is 8.0829 in float32 (the erf form: inf).
    """
    wu, dtype = _wide(u)
    wl, _ = _wide(lo)
    wh, _ = _wide(hi)
    ft = jnp.result_type(wu, wl, wh)
    wu, wl, wh = jnp.broadcast_arrays(wu.astype(ft), wl.astype(ft), wh.astype(ft))
    sl, sh = _scaled(wl, rel_lo), _scaled(wh, rel_hi)
    if clamp:  # max(a, a + u·(b - a)) = a + max(u, 0)·(b - a) for b >= a, a + min(u, 0)·(b - a) else
        wu = jnp.where(sh >= sl, jnp.maximum(wu, 0.0), jnp.minimum(wu, 0.0))
    inside = (wu >= 0) & (wu <= 1)
    pl, ph, ql, qh = ndtr(wl, rel_lo), ndtr(wh, rel_hi), ndtr(-wl, rel_lo), ndtr(-wh, rel_hi)
    el, eh = lax.erf(sl * _INV_SQRT2), lax.erf(sh * _INV_SQRT2)
    # Φ(h) - Φ(l) where it does not cancel: from the tail both bounds are in, else the erf difference
    up_b, low_b = (sl >= 0) & (sh >= 0), (sl <= 0) & (sh <= 0)
    mass = jnp.where(up_b, ql - qh, jnp.where(low_b, ph - pl, 0.5 * (eh - el)))
    # 0 <= u <= 1: sums of non-negative terms; outside (not a draw), the program's F(l) + u·(F(h) - F(l))
    p = jnp.where(inside, (1 - wu) * pl + wu * ph, pl + wu * mass)
    q = jnp.where(inside, (1 - wu) * ql + wu * qh, ql - wu * mass)
    v = jnp.where(inside, (1 - wu) * el + wu * eh, el + wu * (eh - el))
    centre = jnp.abs(v) <= 0.5
    lower = ~centre & (p <= q)
    upper = ~centre & ~lower
    near = jnp.where(lower, -jnp.maximum(sl, sh), jnp.minimum(sl, sh))
    far = ~centre & (jnp.where(lower, p, q) < _TINY[np.dtype(ft).name]) & (near >= 0)
    # each branch reads a safe input where it is not taken (ndtri'(0) and erfinv'(±1) are inf)
    x_t = ndtri(jnp.where(~centre & ~far, jnp.where(lower, p, q), 0.25))
    x_c = _SQRT2 * lax.erf_inv(jnp.where(centre, v, 0.0))
    x_far = _far(wu, sl, sh, upper, far)
    x = jnp.where(centre, x_c, jnp.where(far, x_far, jnp.where(lower, x_t, -x_t)))
    fix = ~centre & inside & (up_b | low_b) & jnp.isfinite(jnp.minimum(jnp.abs(sl), jnp.abs(sh)))
    x = jnp.where(fix, _tail_derivatives(x, wu, sl, sh, up_b, fix), x)
    if rel_out != 0:
        x = _scaled(x, rel_out)
    return x.astype(dtype)
