"""Stable forms for divergences whose terms cancel to second order (Bregman divergences).

KL divergences, deviances and the negative log-likelihoods of exponential families are Bregman
divergences ``f(b) - f(a) - f'(a)(b - a)``: where the two distributions are close their terms agree
to second order, so the formula as written loses about twice the digits a first-order cancellation
does, and ``log1p``/``expm1`` alone do not recover them. The forms here compute the second-order
remainder directly: ``expm1mx(x) = exp(x) - 1 - x``, ``log1pmx(t) = log1p(t) - t``, the Bernoulli KL
from logits and from probabilities. Each carries its exact derivative (a ``custom_jvp``), which is
itself written without cancellation.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp

from ._core import softplus

__all__ = ["bernoulli_kl_logits", "bernoulli_kl_probs", "expm1mx", "log1pmx", "poisson_deviance"]

# exp(x) - 1 - x = sum_{k>=2} x^k / k!: |x| <= 1 needs k up to 19 for 2^-53 of x²/2
_EXP_TERMS = tuple(1.0 / math.factorial(k) for k in range(2, 21))
# log1p(t) - t = -t²/(2 + t) + 2·sum_{k>=1} u^(2k+1)/(2k+1), u = t/(2+t) (log1p(t) = 2·atanh(u));
# |u| <= 3/7 on [-0.6, 1.5]: (3/7)^(2k) < 2^-56 for k >= 23
_ATANH_TERMS = tuple(2.0 / (2 * k + 1) for k in range(1, 25))


def _horner(coeffs: tuple[float, ...], z: Any) -> Any:
    acc = jnp.zeros_like(z)
    for c in reversed(coeffs):
        acc = acc * z + c
    return acc


@jax.custom_jvp
def expm1mx(x: Any) -> Any:
    """``exp(x) - 1 - x`` accurate everywhere: a Taylor series for |x| <= 1 (where the written form
    cancels to second order: ``exp(1e-5) - 1 - 1e-5`` is 0 in float32, truly 5e-11), ``expm1(x) - x``
    beyond (no more than one bit lost). The derivative is ``expm1(x)``.

    Example: ``expm1mx(jnp.float32(1e-5))`` is 5.0000166e-11.
    """
    small = jnp.abs(x) <= 1
    xs = jnp.where(small, x, jnp.zeros_like(x))
    series = xs * xs * _horner(_EXP_TERMS, xs)
    # exp(x) - 1 - x at x = inf is inf (expm1(inf) - inf is NaN)
    direct = jnp.where(x == jnp.inf, x, jnp.expm1(x) - x)
    return jnp.where(small, series, direct)


@expm1mx.defjvp
def _expm1mx_jvp(primals: Any, tangents: Any) -> Any:
    (x,), (t,) = primals, tangents
    return expm1mx(x), t * jnp.expm1(x)


@jax.custom_jvp
def log1pmx(t: Any) -> Any:
    """``log1p(t) - t`` accurate everywhere (t >= -1): on [-0.6, 1.5] as ``-t²/(2 + t)`` plus the odd
    series of ``2·atanh(t/(2 + t)) - 2t/(2 + t)`` (all terms of one sign, no cancellation), else as
    written. ``t - log1p(t)`` is the Itakura-Saito divergence ``r - 1 - log r`` at ``r = 1 + t``.
    The derivative is ``-t / (1 + t)``.

    Example: ``log1pmx(jnp.float32(1e-4))`` is -4.9996667e-09 (as written: -5.0e-09 ± 4e-12).
    """
    near = (t >= -0.6) & (t <= 1.5)
    ts = jnp.where(near, t, jnp.zeros_like(t))
    u = ts / (2 + ts)
    u2 = u * u
    series = -ts * u + u * u2 * _horner(_ATANH_TERMS, u2)
    direct = jnp.where(t == jnp.inf, -t, jnp.log1p(t) - t)  # log1p(inf) - inf is NaN
    return jnp.where(near, series, direct)


@log1pmx.defjvp
def _log1pmx_jvp(primals: Any, tangents: Any) -> Any:
    (t,), (dt,) = primals, tangents
    return log1pmx(t), dt * (-t / (1 + t))


@jax.custom_jvp
def bernoulli_kl_logits(a: Any, b: Any) -> Any:
    """KL(Bernoulli(sigmoid(a)) || Bernoulli(sigmoid(b))) = softplus(b) - softplus(a) - sigmoid(a)(b - a).

    The sum of ``p log(p/q) + (1-p) log((1-p)/(1-q))`` cancels to second order in ``b - a``. With the
    logits reflected so that ``a <= 0`` (the divergence is the same for ``(-a, -b)``) and ``d = b - a``:
    ``log1pmx(p·expm1(d)) + p·expm1mx(d)`` for |d| <= 1.5 (one bit of cancellation at most, p <= 1/2),
    the softplus difference beyond, where the terms no longer agree. The derivatives are
    ``-p(1-p)·d`` in a and ``p·(1 - sigmoid(b))·expm1(d) = sigmoid(b) - sigmoid(a)`` in b.

    Example: ``bernoulli_kl_logits(0.0, 1e-4)`` is 1.25e-09 (as written in float32: 0).
    """
    flip = a > 0
    a2 = jnp.where(flip, -a, a)
    b2 = jnp.where(flip, -b, b)
    d = b2 - a2
    p = jax.nn.sigmoid(a2)
    near = jnp.abs(d) <= 1.5
    dn = jnp.where(near, d, jnp.zeros_like(d))
    series = log1pmx(p * jnp.expm1(dn)) + p * expm1mx(dn)
    far = (softplus(b2) - softplus(a2)) - p * d
    return jnp.where(near, series, far)


@bernoulli_kl_logits.defjvp
def _bernoulli_kl_logits_jvp(primals: Any, tangents: Any) -> Any:
    (a, b), (ta, tb) = primals, tangents
    d = b - a
    pa, qa = jax.nn.sigmoid(a), jax.nn.sigmoid(-a)
    # sigmoid(b) - sigmoid(a) = sigmoid(a)·sigmoid(-b)·expm1(b - a) without cancellation near b = a
    near = jnp.abs(d) <= 1
    expd = jnp.expm1(jnp.where(near, d, jnp.zeros_like(d)))
    db = jnp.where(near, pa * jax.nn.sigmoid(-b) * expd, jax.nn.sigmoid(b) - pa)
    return bernoulli_kl_logits(a, b), ta * (-(pa * qa) * d) + tb * db


@jax.custom_jvp
def bernoulli_kl_probs(p: Any, q: Any) -> Any:
    """KL(Bernoulli(p) || Bernoulli(q)) = p log(p/q) + (1-p) log((1-p)/(1-q)) for probabilities p, q.

    With ``r = (p - q)/q`` and ``s = (q - p)/(1 - q)`` (``p - q`` exact where they are close), the
    two logs are ``log1p(r)`` and ``log1p(s)``; where r, s are in [-1/2, 1] the first-order parts are summed
    exactly, ``(p - q)² / (q(1 - q)) + p·log1pmx(r) + (1-p)·log1pmx(s)``, else the logs are taken as
    they are. ``0·log 0 = 0`` (p = 0 or 1). The derivatives are ``log1p(r) - log1p(s)`` in p and
    ``(q - p) / (q(1 - q))`` in q.

    Example: ``bernoulli_kl_probs(0.3, 0.3001)`` is 2.38e-08 (as written in float32: 0 ± 6e-8).
    """
    dq = p - q
    one_q = 1 - q
    r = dq / q
    s = -dq / one_q
    near = (r >= -0.5) & (r <= 1) & (s >= -0.5) & (s <= 1)
    rn = jnp.where(near, r, jnp.zeros_like(r))
    sn = jnp.where(near, s, jnp.zeros_like(s))
    # (p - q)²/(q(1 - q)) as dq·r/(1 - q): dq² underflows for tiny p, q where the sum does not
    series = dq * rn / one_q + p * log1pmx(rn) + (1 - p) * log1pmx(sn)
    zero = jnp.zeros_like(p)
    left = jnp.where(p == 0, zero, p * _log_ratio(p, q, r))
    right = jnp.where(p == 1, zero, (1 - p) * _log_ratio(1 - p, one_q, s))
    return jnp.where(near, series, left + right)


def _log_ratio(num: Any, den: Any, t: Any) -> Any:
    """log(num/den) = log1p(t), t = num/den - 1 formed without cancellation; where the ratio is
    below 1/2 (t rounds towards -1) from the ratio itself, or the two logs where it underflows."""
    ratio = num / den
    low = t < -0.5
    tiny = ratio < jnp.finfo(jnp.result_type(ratio)).tiny
    safe = jnp.where(low & ~tiny, ratio, jnp.ones_like(ratio))
    by_ratio = jnp.where(tiny, jnp.log(num) - jnp.log(den), jnp.log(safe))
    return jnp.where(low, by_ratio, jnp.log1p(jnp.where(low, jnp.zeros_like(t), t)))


@bernoulli_kl_probs.defjvp
def _bernoulli_kl_probs_jvp(primals: Any, tangents: Any) -> Any:
    (p, q), (tp, tq) = primals, tangents
    dq = p - q
    one_q = 1 - q
    dp = jnp.log1p(dq / q) - jnp.log1p(-dq / one_q)
    return bernoulli_kl_probs(p, q), tp * dp + tq * (-dq / (q * one_q))


@jax.custom_jvp
def poisson_deviance(x: Any, y: Any) -> Any:
    """x·log(x/y) - x + y (the generalised KL, half the Poisson deviance; 0·log 0 = 0), x, y >= 0.

    Near x = y the three terms cancel to second order. With ``t = (x - y)/y`` (``x - y`` exact
    there): ``x·log1pmx(t) + (x - y)·t`` for |t| <= 1/2 (one bit of cancellation at most), else
    as written with ``log(x/y)`` (the two logs where the ratio leaves the normal range). The
    derivatives are ``log(x/y)`` in x and ``1 - x/y`` in y.

    Example: ``poisson_deviance(1.0, 1.0001)`` is 4.9997e-09 (as written in float32: 0 ± 6e-8).
    """
    dx = x - y
    t = dx / y
    near = jnp.abs(t) <= 0.5
    tn = jnp.where(near, t, jnp.zeros_like(t))
    series = x * log1pmx(tn) + dx * tn
    return jnp.where(near, series, _xlog_ratio(x, y) - dx)


def _xlog_ratio(x: Any, y: Any) -> Any:
    """x·log(x/y), 0 where x = 0; the logs apart where x/y under- or overflows."""
    ratio = x / y
    info = jnp.finfo(jnp.result_type(ratio))
    normal = (ratio >= info.tiny) & (ratio <= info.max)
    safe = jnp.where(normal, ratio, jnp.ones_like(ratio))
    logs = jnp.where(normal, jnp.log(safe), jnp.log(jnp.where(x > 0, x, jnp.ones_like(x))) - jnp.log(y))
    return jnp.where(x == 0, jnp.zeros_like(x), x * logs)


@poisson_deviance.defjvp
def _poisson_deviance_jvp(primals: Any, tangents: Any) -> Any:
    (x, y), (tx, ty) = primals, tangents
    t = (x - y) / y
    return poisson_deviance(x, y), tx * jnp.log1p(t) + ty * (-t)
