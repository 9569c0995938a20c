"""The special functions of the search's term language: exact (mpmath) semantics and accurate float forms.

The float semantics of ``lgamma``, ``erf``, ``logistic``, ``softplus``, ... are the library's own
(``jax.scipy.special``, ``jax.nn``): a candidate that uses them runs what a user would paste. Two
operators have no single library function and are defined here:

- ``logsumexp`` (the ``lse`` reduction): ``jst.rewrites.forms.logsumexp``, ``m + log1p(rest)``, which
  keeps the small terms that ``jax.nn.logsumexp``'s ``m + log(sum(exp(x - m)))`` rounds away.
- ``lgamma_difference(x, a)`` = ``lgamma(x + a) - lgamma(x)``: for ``x >= 8`` Stirling's series written so
  that nothing large cancels (TFP's ``log_gamma_difference`` does the same with its own corrections):
  ``(x - 1/2) log1p(a/x) + a log(x + a) - a + c(x + a) - c(x)``, ``c(y)`` Stirling's correction
  ``1/(12y) - 1/(360y^3) + ...`` to the ``y^-13`` term, from ``x >= 20``; the plain difference below.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax.numpy as jnp
import mpmath

from ..rewrites.forms._gamma import lgamma_difference as lgamma_difference

__all__ = ["HELPERS", "lgamma_difference", "logsumexp", "mp_and", "mp_betainc", "mp_gammainc", "mp_gammaincc",
           "mp_i0", "mp_i0e", "mp_i1", "mp_i1e", "mp_isfinite", "mp_lgamma", "mp_lgamma_difference",
           "mp_log_ndtr", "mp_logistic", "mp_ndtri", "mp_nextafter", "mp_not", "mp_or", "mp_round_away",
           "mp_softplus", "mp_xlog1py", "mp_xlogy", "real_only"]

#: Below this ``x`` the plain difference of ``lgamma`` is used (there it loses at most a few bits; above,
#: the omitted term of the tail, ``3617 / (122400 y^15)``, is below 1e-21).
STIRLING_FROM = 20.0


def mp_lgamma(a: Any) -> Any:
    """log|Gamma(a)| (inf at the poles)."""
    if a <= 0 and a == mpmath.floor(a):
        return mpmath.inf
    return mpmath.loggamma(a).real if a > 0 else mpmath.log(abs(mpmath.gamma(a)))


def mp_log_ndtr(a: Any) -> Any:
    """log of the standard normal CDF."""
    return mpmath.log(mpmath.erfc(-a / mpmath.sqrt(2)) / 2)


def mp_ndtri(a: Any) -> Any:
    """The standard normal quantile (inverse CDF)."""
    return mpmath.sqrt(2) * mpmath.erfinv(2 * a - 1)


def mp_logistic(a: Any) -> Any:
    return 1 / (1 + mpmath.exp(-a))


def mp_softplus(a: Any) -> Any:
    return mpmath.log1p(mpmath.exp(a))


def mp_xlogy(a: Any, b: Any) -> Any:
    return mpmath.mpf(0) if a == 0 else a * mpmath.log(b)


def mp_xlog1py(a: Any, b: Any) -> Any:
    return mpmath.mpf(0) if a == 0 else a * mpmath.log1p(b)


def mp_lgamma_difference(x: Any, a: Any) -> Any:
    return mp_lgamma(x + a) - mp_lgamma(x)


def real_only(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` refusing complex operands (ValueError): a piecewise or scaled function (``floor``,
    ``i0e``'s ``|x|``) has no analytic continuation, and the series module expands on a complex circle;
    mpmath's incomplete gamma recurses without end on some complex points."""
    @functools.wraps(fn)
    def wrapped(*args: Any) -> Any:
        if any(isinstance(a, mpmath.mpc) for a in args):
            raise ValueError(f"{fn.__name__} is taken on real operands only")
        return fn(*args)

    return wrapped


# Modified Bessel functions of the first kind and their exponentially scaled forms (``i0e(x) =
# exp(-|x|) I0(x)``, what ``lax.bessel_i0e`` computes and ``jax.scipy.special.i0`` rescales).
def mp_i0(a: Any) -> Any:
    return mpmath.besseli(0, a)


def mp_i1(a: Any) -> Any:
    return mpmath.besseli(1, a)


@real_only
def mp_i0e(a: Any) -> Any:
    return mpmath.exp(-abs(a)) * mpmath.besseli(0, a)


@real_only
def mp_i1e(a: Any) -> Any:
    return mpmath.exp(-abs(a)) * mpmath.besseli(1, a)


# The regularized incomplete gamma and beta functions (``lax.igamma``/``igammac``,
# ``lax.betainc``: P(a, x), Q(a, x) = 1 - P(a, x), I_x(a, b)).
@real_only
def mp_gammainc(a: Any, x: Any) -> Any:
    return mpmath.gammainc(a, 0, x, regularized=True)


@real_only
def mp_gammaincc(a: Any, x: Any) -> Any:
    return mpmath.gammainc(a, x, mpmath.inf, regularized=True)


@real_only
def mp_betainc(a: Any, b: Any, x: Any) -> Any:
    return mpmath.betainc(a, b, 0, x, regularized=True)


@real_only
def mp_round_away(a: Any) -> Any:
    """``lax.round``'s default: halves away from zero (``jnp.round`` rounds them to even: ``mpmath.nint``)."""
    return mpmath.sign(a) * mpmath.floor(abs(a) + mpmath.mpf(0.5))


def mp_nextafter(a: Any, b: Any) -> Any:
    """A float's neighbour has no real-number value (it depends on the float type): the oracle applies it
    to the rounded operands when it judges a program; the term evaluator refuses it."""
    raise ValueError("nextafter has no real-number semantics")


# Booleans (the conditions of a ``where``): an exact value is finite or not, and conditions combine.
@real_only
def mp_isfinite(a: Any) -> bool:
    return bool(mpmath.isfinite(a))


def mp_and(a: Any, b: Any) -> bool:
    return bool(a) and bool(b)


def mp_or(a: Any, b: Any) -> bool:
    return bool(a) or bool(b)


def mp_not(a: Any) -> bool:
    return not bool(a)


def logsumexp(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
    """log(sum(exp(x))) over ``axis``, the accurate form (``jst.rewrites.forms.logsumexp``)."""
    from ..rewrites.forms._core import logsumexp as accurate

    axes = None if axis is None else (axis,) if isinstance(axis, int) else tuple(axis)
    out = accurate(x, axes=axes)
    if keepdims:
        kept = tuple(range(jnp.ndim(x))) if axes is None else tuple(a % max(jnp.ndim(x), 1) for a in axes)
        out = jnp.expand_dims(out, kept)
    return out


#: Pasteable definitions of the operators that have no library function, by operator name: an
#: ``Improvement``'s source puts the ones it uses above its ``def``.
HELPERS: dict[str, str] = {
    "lgammadiff": f'''def log_gamma_difference(x, a):
    """lgamma(x + a) - lgamma(x); Stirling's series from x >= {STIRLING_FROM} (no cancellation)."""
    def tail(y):
        r = 1.0 / y
        r2 = r * r
        return r * (1.0 / 12 - r2 * (1.0 / 360 - r2 * (1.0 / 1260 - r2 * (1.0 / 1680 - r2 * (
            1.0 / 1188 - r2 * (691.0 / 360360 - r2 * (1.0 / 156)))))))
    big = (x >= {STIRLING_FROM}) & (x + a >= {STIRLING_FROM})
    xs = jnp.where(big, x, {STIRLING_FROM})
    aa = jnp.where(big, a, 0.0)
    series = (xs - 0.5) * jnp.log1p(aa / xs) + aa * jnp.log(xs + aa) - aa + (tail(xs + aa) - tail(xs))
    return jnp.where(big, series, jax.scipy.special.gammaln(x + a) - jax.scipy.special.gammaln(x))''',
}
