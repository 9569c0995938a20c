"""The exact derivatives of the library routines (``_library``), on Arb balls.

A gradient check (``grad=True``) judges JAX's derivative program against the derivative of the exact
function. Where the function calls a routine judged by its mathematics, the derivative of that routine
is taken from here, never from the body JAX differentiates (the derivative of ``ndtri``'s rational
approximation is not the derivative of the normal quantile). Each entry is the tuple of a routine's
partial derivatives, one per argument, each a scalar function of balls with the conventions of
``_library`` (None for NaN, an indeterminate ball where this precision cannot say); None in place of a
partial: that argument is an integer order or a parameter without a closed form (``expn``'s ``n``,
``hyp1f1``'s ``a``, ``b``), and the routine is only judged by its mathematics where that argument is a
constant of the program.

Formulas are arranged so that Arb evaluates them without cancellation where the float value would
lose everything: ``d/dx log_ndtr(x) = phi(x) / Phi(x)`` is ``sqrt(2/pi) / erfcx(-x/sqrt 2)`` in the left
tail, ``d/dx erfcx(x) = 2 x erfcx(x) - 2/sqrt(pi)`` is its asymptotic series (rigorous remainder) for
large ``x``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flint import acb, arb
from flint import ctx as flint_ctx

from ..core._common import INDET, NEG_INF, POS_INF, ZERO
from ._functions import d_betaln, d_gamma, d_ndtri_exp
from ._routines import _erfcinv_ball, _erfcx, _expn, _fin, _is_inf, _ndtri, _sqrt2, _strict

__all__ = ["DERIVATIVES"]

Ball = Any
Partial = Callable[..., Ball] | None


def _phi(x: arb) -> arb:
    """The standard normal density."""
    return (-(x * x) / 2).exp() / (2 * arb.pi()).sqrt()


def _logistic(x: arb) -> arb:
    return 1 / (1 + (-x).exp())


@_strict
def _d_log_ndtr(x: arb) -> Ball:
    """``phi(x) / Phi(x)``; in the left tail ``sqrt(2/pi) / erfcx(t)``, ``t = -x/sqrt 2`` (Phi and phi
    underflow together there; their ratio grows like ``-x``)."""
    if _is_inf(x, 1):
        return ZERO
    if _is_inf(x, -1):
        return POS_INF
    t = -x / _sqrt2()
    if t > 1:
        return (2 / arb.pi()).sqrt() / _erfcx(t)
    return _phi(x) / (t.erfc() / 2)


@_strict
def _d_ndtr(x: arb) -> Ball:
    return ZERO if not x.is_finite() else _phi(x)


@_strict
def _d_ndtri(p: arb) -> Ball:
    """``1 / phi(ndtri(p)) = sqrt(2 pi) exp(ndtri(p)^2 / 2)``; +inf at 0 and 1."""
    q = _ndtri(p)
    if not _fin(q):
        return q if q is None or q.is_nan() else POS_INF
    return (2 * arb.pi()).sqrt() * (q * q / 2).exp()


@_strict
def _d_erfcinv(y: arb) -> Ball:
    """``-sqrt(pi)/2 exp(erfcinv(y)^2)``; -inf at 0 and 2."""
    if not y.is_finite():
        return None
    q = _erfcinv_ball(y)
    if not _fin(q):
        return q if q is None or q.is_nan() else NEG_INF
    return -arb.pi().sqrt() / 2 * (q * q).exp()


def _erfcx_slope_series(x: arb) -> Ball:
    """``2 x erfcx(x) - 2/sqrt(pi) = 2/sqrt(pi) sum_{n>=1} (-1)^n (2n-1)!! / (2x^2)^n`` for ``x >= 8``.

    The asymptotic series of ``erfc`` on the positive real axis has a remainder bounded by the first
    omitted term (DLMF 7.12.1 and 7.12(i)); so has this one, its tail times ``2/sqrt(pi)`` after the
    leading 1 cancels. Returns None when the terms stop decreasing before this precision is reached.
    """
    u = 1 / (2 * x * x)
    goal = arb(2) ** -(flint_ctx.prec + 8)
    term, total = -u, arb(0)
    first = abs(term)
    for n in range(1, 4 * flint_ctx.prec):
        nxt = -term * (2 * n + 1) * u
        total += term
        if abs(nxt) < goal * first:
            return 2 / arb.pi().sqrt() * (total + arb(0, abs(nxt).upper()))
        if abs(nxt) >= abs(term):
            return None
        term = nxt
    return None


@_strict
def _d_erfcx(x: arb) -> Ball:
    if _is_inf(x, 1):
        return ZERO
    if _is_inf(x, -1):
        return NEG_INF
    if x > 8:
        r = _erfcx_slope_series(x)
        if r is not None:
            return r
    e = _erfcx(x)
    return INDET if not _fin(e) else 2 * x * e - 2 / arb.pi().sqrt()


@_strict
def _d_expi(x: arb) -> Ball:
    """``exp(x) / x``: no derivative at 0 (``Ei`` has a logarithmic pole there)."""
    if _is_inf(x, 1):
        return POS_INF
    if _is_inf(x, -1):
        return ZERO
    if x.is_exact() and x.is_zero():
        return None
    return INDET if x.contains(0) else x.exp() / x


def _d_bessel_i(n: int) -> Callable[[Ball], Ball]:
    """``I0' = I1``, ``I1' = (I0 + I2) / 2``."""

    @_strict
    def f(x: arb) -> Ball:
        if not x.is_finite():
            return POS_INF if n == 1 or x > 0 else NEG_INF
        return x.bessel_i(1) if n == 0 else (x.bessel_i(0) + x.bessel_i(2)) / 2

    return f


@_strict
def _d_dawsn(x: arb) -> Ball:
    """``1 - 2 x D(x)``."""
    if not x.is_finite():
        return ZERO
    return 1 - x * arb.pi().sqrt() * (-(x * x)).exp() * x.erfi()


@_strict
def _d_expn_x(n: arb, x: arb) -> Ball:
    """``d/dx E_n(x) = -E_{n-1}(x)`` (n >= 1), ``-exp(-x) (x + 1) / x^2`` (n = 0)."""
    k = n.unique_fmpz() if n.is_exact() and n.is_finite() and n >= 0 else None
    if k is None or x < 0:
        return None
    if int(k) >= 1:
        r = _expn(arb(int(k) - 1), x)
        return r if r is None or r.is_nan() else -r
    if _is_inf(x, 1):
        return ZERO
    if not x > 0:
        return NEG_INF if x.is_exact() else INDET
    return -(-x).exp() * (x + 1) / (x * x)


@_strict
def _d_hyp1f1_x(a: arb, b: arb, x: arb) -> Ball:
    """``d/dx 1F1(a; b; x) = a/b 1F1(a+1; b+1; x)``."""
    if not (a.is_finite() and b.is_finite() and x.is_finite()):
        return INDET
    return a / b * x.hypgeom_1f1(a + 1, b + 1)


def _poch_partial(wrt: str) -> Callable[..., Ball]:
    """``d/dz (z)_m = (z)_m (psi(z+m) - psi(z))``, ``d/dm (z)_m = (z)_m psi(z+m)``."""

    @_strict
    def f(z: arb, m: arb) -> Ball:
        if not (z.is_finite() and m.is_finite()):
            return INDET
        p = arb.rising(z, m)
        return p * ((z + m).digamma() - z.digamma()) if wrt == "z" else p * (z + m).digamma()

    return f


@_strict
def _d_owens_t_h(h: arb, a: arb) -> Ball:
    """``dT/dh = -phi(h) erf(a h / sqrt 2) / 2``."""
    if not h.is_finite():
        return ZERO
    if not a.is_finite():
        return -_phi(h) / 2 if a > 0 else _phi(h) / 2
    return -_phi(h) * (a * h / _sqrt2()).erf() / 2


@_strict
def _d_owens_t_a(h: arb, a: arb) -> Ball:
    """``dT/da = exp(-h^2 (1 + a^2) / 2) / (2 pi (1 + a^2))``."""
    if not (h.is_finite() and a.is_finite()):
        return ZERO
    s = 1 + a * a
    return (-(h * h) * s / 2).exp() / (2 * arb.pi() * s)


def _saturating(f: Callable[[arb], arb], at_pos: arb, at_neg: arb) -> Callable[[Ball], Ball]:
    @_strict
    def g(x: arb) -> Ball:
        if _is_inf(x, 1):
            return at_pos
        if _is_inf(x, -1):
            return at_neg
        return f(x)

    return g


def _d_mish(x: arb) -> arb:
    """``tanh(s) + x logistic(x) / cosh(s)^2``, ``s = softplus(x)`` (sech^2 never as ``1 - tanh^2``)."""
    s = x.exp().log1p()
    return s.tanh() + x * _logistic(x) / (s.cosh() ** 2)


@_strict
def _d_log1mexp(x: arb) -> Ball:
    """``d/dx log(1 - exp(-x)) = 1 / expm1(x)``; NaN below 0, +inf at 0."""
    if x < 0:
        return None
    if _is_inf(x, 1):
        return ZERO
    if x.is_exact() and x.is_zero():
        return POS_INF
    return INDET if not x > 0 else 1 / x.expm1()


@_strict
def _d_spence(x: arb) -> Ball:
    """``d/dx int_1^x log(t)/(1 - t) dt = log(x) / (1 - x)``: -1 at 1 (removable), -inf at 0."""
    if x < 0:
        return None
    if _is_inf(x, 1):
        return ZERO
    if x.is_exact() and x.is_zero():
        return NEG_INF
    if x.is_exact() and x == 1:
        return arb(-1)
    if not x > 0 or x.contains(1):
        return INDET
    return x.log() / (1 - x)


def _d_wofz(z: Ball) -> Ball:
    """``w'(z) = -2 z w(z) + 2i/sqrt(pi)`` (DLMF 7.10.2), on complex balls."""
    if z is None:
        return None
    w = (-(z * z)).exp() * (-acb(0, 1) * z).erfc()
    return -2 * z * w + acb(0, 2 / arb.pi().sqrt())


def _d_sici(x: Ball) -> tuple[Ball, Ball]:
    """``(Si'(x), d/dx Ci(|x|)) = (sin(x)/x, cos(x)/x)``: 1 and no value (a pole) at 0, 0 at +-inf."""
    if x is None:
        return None, None
    if x.is_nan() or (not x.is_finite() and not x.is_exact()):
        return INDET, INDET
    if not x.is_finite():
        return ZERO, ZERO
    if x.is_exact() and x.is_zero():
        return arb(1), None
    if x.contains(0):
        return INDET, INDET
    return x.sin() / x, x.cos() / x


def _d_fresnel(x: Ball) -> tuple[Ball, Ball]:
    """``(S'(x), C'(x)) = (sin(pi x^2 / 2), cos(pi x^2 / 2))``; no limit at +-inf (they oscillate)."""
    if x is None:
        return None, None
    if not x.is_finite():
        return (None, None) if x.is_exact() and not x.is_nan() else (INDET, INDET)
    t = arb.pi() * x * x / 2
    return t.sin(), t.cos()


_ONE = arb(1)

#: ``routine name -> (partial derivative per argument)``; for a routine of several results (``sici``,
#: ``fresnel``) each partial returns one ball per result.
DERIVATIVES: dict[str, tuple[Partial, ...]] = {
    "log_ndtr": (_d_log_ndtr,),
    "ndtr": (_d_ndtr,),
    "ndtri": (_d_ndtri,),
    "erfcinv": (_d_erfcinv,),
    "erfcx": (_d_erfcx,),
    "expi": (_d_expi,),
    "dawsn": (_d_dawsn,),
    "i0": (_d_bessel_i(0),),
    "i1": (_d_bessel_i(1),),
    "expn": (None, _d_expn_x),
    "hyp1f1": (None, None, _d_hyp1f1_x),
    "poch": (_poch_partial("z"), _poch_partial("m")),
    "owens_t": (_d_owens_t_h, _d_owens_t_a),
    "softplus": (_saturating(_logistic, _ONE, ZERO),),
    "log_sigmoid": (_saturating(lambda x: _logistic(-x), ZERO, _ONE),),
    "silu": (_saturating(lambda x: _logistic(x) * (1 + x * _logistic(-x)), _ONE, ZERO),),
    "mish": (_saturating(_d_mish, _ONE, ZERO),),
    "log1mexp": (_d_log1mexp,),
    "spence": (_d_spence,),
    "wofz": (_d_wofz,),
    "sici": (_d_sici,),
    "fresnel": (_d_fresnel,),
    "betaln": (d_betaln(0), d_betaln(1)),  # psi(a) - psi(a + b), psi(b) - psi(a + b)
    "gamma": (d_gamma,),  # Gamma(x) psi(x)
    "ndtri_exp": (d_ndtri_exp,),  # e^y / phi(ndtri(e^y))
}
