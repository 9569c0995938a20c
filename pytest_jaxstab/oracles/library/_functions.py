"""The mathematics of the library routines whose exact value takes more than one Arb call: ``sici`` and
``fresnel`` (two results), Owen's T (a rigorous quadrature), the sign and pole conventions of ``betaln``
and ``gamma``, ``ndtri(exp(y))`` without the cancellation of ``1 - e^y``, the inverse of the regularized
incomplete gamma function (a root proven by the signs at its two ends), and the integer-order Bessel
functions (``jn``, ``yn``, ``iv``, ``kn``), with the derivatives that the routine tables carry.

Each function takes balls (``flint.arb``) or None (NaN) and returns an enclosing ball, None where the
value provably does not exist, or an indeterminate ball where this precision cannot say (the routines'
conventions, ``_routines``). Where a value is a limit the routine documents (a pole, an infinite
argument), the value is the routine's own convention, stated per function.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import Any

from flint import acb, arb
from flint import ctx as flint_ctx

from ..core._arb import FUNCTIONS as F
from ..core._ball_util import exact_int
from ..core._common import INDET, NEG_INF, POS_INF, ZERO

__all__ = ["bessel", "betaln", "d_bessel", "d_betaln", "d_gamma", "d_gammaincinv_y", "d_ndtri_exp", "fresnel",
           "gamma", "gammaincinv", "ndtri_exp", "owens_t", "sici"]

Ball = Any


def _strict(f: Callable[..., Ball]) -> Callable[..., Ball]:
    """``f`` guarded: NaN in gives NaN out; an indeterminate operand gives an indeterminate result."""

    @functools.wraps(f)
    def g(*xs: Ball) -> Ball:
        for x in xs:
            if x is None:
                return None
        for x in xs:
            if x.is_nan() or (not x.is_finite() and not x.is_exact()):
                return INDET
        r = f(*xs)
        if r is None or r.is_finite() or r.is_exact():
            return r
        return INDET

    return g


def _sqrt2() -> arb:
    return arb(2).sqrt()


def _nan_or_indet(*xs: Ball) -> Ball | bool:
    """None if an operand is NaN, INDET if one is indeterminate; False when all are usable."""
    if any(x is None for x in xs):
        return None
    if any(x.is_nan() or (not x.is_finite() and not x.is_exact()) for x in xs):
        return INDET
    return False


def _int_value(x: arb) -> int | None:
    return exact_int(x) if x.is_exact() and x.is_finite() and x.is_integer() else None


def _finite_or_indet(r: Ball) -> Ball:
    return r if r is None or r.is_finite() or r.is_exact() else INDET


# ------------------------------------------------------------------------------- two-result routines
def sici(x: Ball) -> tuple[Ball, Ball]:
    """``(Si(x), Ci(|x|))``: JAX (as SciPy) gives the real part of ``Ci`` for ``x < 0``."""
    if x is None:
        return None, None
    if x.is_nan() or (not x.is_finite() and not x.is_exact()):
        return INDET, INDET
    if not x.is_finite():
        half_pi = arb.pi() / 2
        return (half_pi if x > 0 else -half_pi), ZERO
    if x.is_exact() and x.is_zero():
        return ZERO, NEG_INF
    if x.contains(0):
        return x.si(), INDET
    return x.si(), abs(x).ci()


def fresnel(x: Ball) -> tuple[Ball, Ball]:
    """``(S(x), C(x))``, normalised: ``S(x) = int_0^x sin(pi t^2 / 2) dt``; +-1/2 at +-inf."""
    if x is None:
        return None, None
    if x.is_nan() or (not x.is_finite() and not x.is_exact()):
        return INDET, INDET
    if not x.is_finite():
        h = arb(0.5) if x > 0 else arb(-0.5)
        return h, h
    return x.fresnel_s(), x.fresnel_c()


@_strict
def owens_t(h: arb, a: arb) -> Ball:
    """Owen's T: ``T(h, a) = exp(-h^2/2)/(2 pi) * int_0^a exp(-h^2 x^2 / 2) / (1 + x^2) dx``.

    The integral is Arb's rigorous quadrature (``acb.integral``) at the midpoints; a ball's radius is
    covered by the partial derivatives' global bounds, ``|dT/da| <= 1/(2 pi)`` and ``|dT/dh| <=
    exp(-h^2/2) / (2 sqrt(2 pi)) < 0.2``. Odd in ``a``, even in ``h``; ``T(h, +-inf) = +-erfc(|h|/sqrt 2)/4``,
    ``T(+-inf, a) = 0``.
    """
    if not h.is_finite():
        return ZERO
    if not a.is_finite():
        q = (abs(h) / _sqrt2()).erfc() / 4
        return q if a > 0 else -q
    hm, am = arb(h.mid()), arb(a.mid())
    if am.is_zero():
        core = ZERO
    else:
        h2 = hm * hm
        prec = flint_ctx.prec
        span = abs(am)
        tol = arb(2) ** (-prec - 8) * (span if span < 1 else arb(1)) / (abs(hm) + 1)
        integral = acb.integral(lambda x, _: (-(h2 * x * x) / 2).exp() / (1 + x * x), 0, am,
                                rel_tol=arb(2) ** -prec, abs_tol=tol)
        core = (-h2 / 2).exp() / (2 * arb.pi()) * integral.real
    err = h.rad() * arb(0.2) + a.rad() / (2 * arb.pi())
    return core if err.is_zero() else core + arb(0, err.upper())


# ------------------------------------------------------------------------------------------- betaln
def betaln(a: Ball, b: Ball) -> Ball:
    """``log |B(a, b)| = log|Gamma(a)| + log|Gamma(b)| - log|Gamma(a + b)|`` (``jax.scipy.special.betaln``).

    JAX 0.12.1's conventions, which this follows (``jax/_src/scipy/betaln.py``): NaN for a NaN operand
    and at ``(+inf, +inf)``; ``+inf`` for ``p = min(a, b) = -inf``; at ``q = max(a, b) = +inf``, ``-inf``
    for ``p > 0`` and ``+inf`` for ``p <= 0``. At finite poles: ``+inf`` where ``a`` or ``b`` is a
    non-positive integer, except where both are integers, ``q > 0`` and ``a + b <= 0``: there
    ``Gamma(p)/Gamma(p + q) = 1/(p)_q`` has the finite limit ``(-1)^q (m - q)!/m!``, ``m = -p``; ``-inf``
    where only ``a + b`` is a pole (``B`` vanishes there).
    """
    bad = _nan_or_indet(a, b)
    if bad is not False:
        return bad
    if not (a.is_finite() and b.is_finite()):  # exact infinities (indeterminate balls left above)
        if not (a.is_finite() or b.is_finite()) and a > 0 and b > 0:
            return None  # (+inf, +inf)
        if (not a.is_finite() and a < 0) or (not b.is_finite() and b < 0):
            return POS_INF  # -inf as an operand
        other = a if a.is_finite() else b  # the finite one, beside +inf
        return NEG_INF if other > 0 else POS_INF if other <= 0 else INDET
    s = a + b
    ia, ib, isum = _int_value(a), _int_value(b), _int_value(s) if s.is_exact() else None
    pole_a, pole_b = ia is not None and ia <= 0, ib is not None and ib <= 0
    pole_s = isum is not None and isum <= 0
    if pole_a or pole_b:
        pole, k = (ia, ib) if pole_a else (ib, ia)  # k: the other operand
        if pole is not None and k is not None and k > 0 and pole_s:  # Gamma(p)'s pole cancels Gamma(p + q)'s
            m = -pole
            return F["lgamma"](arb(k)) + F["lgamma"](arb(m - k + 1)) - F["lgamma"](arb(m + 1))
        return POS_INF
    if pole_s:
        return NEG_INF
    return _finite_or_indet(F["sub"](F["add"](F["lgamma"](a), F["lgamma"](b)), F["lgamma"](s)))


def d_betaln(wrt: int) -> Callable[[Ball, Ball], Ball]:
    """``d/da log|B(a, b)| = psi(a) - psi(a + b)`` (``b`` alike), with ``digamma``'s conventions."""

    def f(a: Ball, b: Ball) -> Ball:
        bad = _nan_or_indet(a, b)
        if bad is not False:
            return bad
        if not (a.is_finite() and b.is_finite()):
            return INDET if not (a.is_exact() and b.is_exact()) else None
        x = a if wrt == 0 else b
        return _finite_or_indet(F["sub"](F["digamma"](x), F["digamma"](a + b)))

    return f


# -------------------------------------------------------------------------------------------- gamma
def gamma(x: Ball) -> Ball:
    """Euler's ``Gamma(x)`` (``jax.scipy.special.gamma`` on real operands): ``+inf`` at ``+inf``; NaN at
    ``-inf`` and at the poles ``0, -1, -2, ...``, whose two sides have opposite signs (zero is
    unsigned, as ``1/0`` is NaN here)."""
    bad = _nan_or_indet(x)
    if bad is not False:
        return bad
    if not x.is_finite():
        return POS_INF if x > 0 else None
    n = _int_value(x)
    if n is not None and n <= 0:
        return None
    return _finite_or_indet(x.gamma())  # a ball around a pole is not finite: undecided


def d_gamma(x: Ball) -> Ball:
    """``Gamma'(x) = Gamma(x) psi(x)``; ``+inf`` at ``+inf``."""
    g = gamma(x)
    if g is None or not g.is_finite():
        return g
    return _finite_or_indet(F["mul"](g, F["digamma"](x)))


# ---------------------------------------------------------------------------------------- ndtri_exp
def ndtri_exp(y: Ball) -> Ball:
    """``ndtri(exp(y))``, the standard normal quantile of ``e^y`` (``y <= 0``; NaN above 0, ``+inf`` at 0,
    ``-inf`` at ``-inf``): ``-sqrt 2 erfcinv(2 e^y)``, and near ``y = 0``, where ``e^y`` is near 1,
    ``sqrt 2 erfcinv(-2 expm1(y))`` (the same value, ``ndtri(p) = -ndtri(1 - p)``) so no bits are lost
    to ``1 - e^y``."""
    bad = _nan_or_indet(y)
    if bad is not False:
        return bad
    if y > 0:
        return None
    if y.is_exact() and y.is_zero():
        return POS_INF
    if not y.is_finite():
        return NEG_INF
    if not y < 0:
        return INDET
    if y > -1:
        t = -2 * y.expm1()
        r = t.erfcinv() if t > 0 and t < 2 else INDET
        return _finite_or_indet(_sqrt2() * r)
    return _finite_or_indet(-_sqrt2() * (2 * y.exp()).erfcinv())


def d_ndtri_exp(y: Ball) -> Ball:
    """``d/dy ndtri(e^y) = e^y / phi(q) = sqrt(2 pi) exp(y + q^2 / 2)``, ``q = ndtri(e^y)``; +inf at 0."""
    q = ndtri_exp(y)
    if q is None or not q.is_finite():
        if q is not None and q.is_exact() and not q.is_nan():
            return POS_INF if q > 0 else ZERO
        return q
    return _finite_or_indet((2 * arb.pi()).sqrt() * (y + q * q / 2).exp())


# ------------------------------------------------------------------------------------- gammaincinv
#: Newton steps on the midpoints before the element is left undecided (quadratic from the bracket).
_MAX_NEWTON = 200


def _reg_gamma_balls(a: arb, x: arb, upper: bool) -> Iterator[arb]:
    """Ever narrower enclosures of ``Q(a, x)`` (``upper``) or ``P(a, x)``: Arb's regularized incomplete
    gamma and one minus its complement, intersected (each encloses the value; at some ``(a, x)`` one of
    them is a useless ball), then both again at twice the precision. ``gamma_upper`` comes first: Arb's
    ``gamma_lower`` takes a second at a large ``a`` and 170 bits. Every ball yielded is rigorous."""
    prec = int(flint_ctx.prec)
    best = arb(0.5, 0.5)  # [0, 1]
    for extra in (0, prec):
        for lower in (not upper, upper):  # gamma_upper first
            flint_ctx.prec = prec + extra
            try:
                r = x.gamma_lower(a, 1) if lower else x.gamma_upper(a, 1)
                r = r if lower != upper else 1 - r
            finally:
                flint_ctx.prec = prec
            if r.is_finite() and r.overlaps(best):
                best = best.intersection(r)
            yield best


def _reg_gamma(a: arb, x: arb, upper: bool) -> arb:
    """The first of :func:`_reg_gamma_balls` narrow to 24 bits below the working precision (what a
    Newton step needs: the proof at the end asks only signs), else the narrowest."""
    best = arb(0.5, 0.5)
    for best in _reg_gamma_balls(a, x, upper):
        if best.rad() <= abs(best.mid()) * arb((1, -(int(flint_ctx.prec) - 24))):
            break
    return best


def _excess(a: arb, x: arb, y: arb, upper: bool) -> int | None:
    """The sign of ``P(a, x) - y`` (of ``y - Q(a, x)``: increasing in ``x`` either way), None if undecided;
    the incomplete gamma only as precise as the decision needs."""
    for value in _reg_gamma_balls(a, x, upper):
        d = y - value if upper else value - y
        if d > 0 or d < 0:
            return 1 if d > 0 else -1
    return None


def _inverse_gamma(a: arb, y: arb, upper: bool) -> Ball:
    """The ``x > 0`` with ``P(a, x) = y`` (``Q`` when ``upper``), for balls ``a > 0``, ``0 < y < 1``.

    A root of ``t -> P(a, e^t) - y`` (increasing) is found on the midpoints, bracketed by doubling steps,
    narrowed by bisection and polished by Newton steps; then proven: at two exact points ``x_lo < x_hi``
    around it the sign of ``P - y`` is decided on the whole balls ``a`` and ``y``, so, ``P`` being
    continuous and increasing in ``x``, every root for every ``(a, y)`` in the balls lies between them."""
    prec = int(flint_ctx.prec)
    am, ym = arb(a.mid()), arb(y.mid())

    def sign(t: arb) -> int | None:
        return _excess(am, t.exp(), ym, upper)

    lo = hi = am.log() if am > 1 else ZERO
    step = arb(1)
    for _ in range(80):  # e^(+-2^80): far beyond any float's inverse
        s = sign(lo)
        if s is not None and s < 0:
            break
        lo, step = lo - step, step * 2
    else:
        return INDET
    step = arb(1)
    for _ in range(80):
        s = sign(hi)
        if s is not None and s > 0:
            break
        hi, step = hi + step, step * 2
    else:
        return INDET
    while (hi - lo) > arb((1, -8)) * (abs(lo) + abs(hi) + 1):  # bisection to a coarse bracket
        mid = arb(((lo + hi) / 2).mid())
        s = sign(mid)
        if s is None:
            break
        lo, hi = (mid, hi) if s < 0 else (lo, mid)
    t = arb(((lo + hi) / 2).mid())
    log_gamma_a = am.lgamma()
    tol = arb((1, -(prec - 8)))  # below what P resolves at this precision
    for _ in range(_MAX_NEWTON):  # safeguarded Newton on log P(a, e^t) - log y (log Q for the upper)
        x = t.exp()
        value = _reg_gamma(am, x, upper)
        s = _excess(am, x, ym, upper)
        if not (value > 0) or s is None:
            break
        lo, hi = (t, hi) if s < 0 else (lo, t)
        density = (am * t - x - log_gamma_a).exp()  # d/dt P(a, e^t) = x^a e^-x / Gamma(a)
        slope = density / value
        new = arb((t - (value.log() - ym.log()) / (-slope if upper else slope)).mid())
        if not (new.is_finite() and lo < new < hi):
            new = arb(((lo + hi) / 2).mid())
        if abs(new - t) < tol * (abs(t) + 1) or hi - lo < tol * (abs(t) + 1):
            t = new
            break
        t = new
    # Arb's P loses a few bits at the working precision: the narrowest bracket it proves wins (the
    # widest still leaves float64 8 bits beyond its own at the first pass; escalation narrows it).
    for slack in (12, 24, 40):
        eps = arb((1, -(prec - slack))) * (abs(t) + 1)
        x_lo, x_hi = arb((t - eps).exp().mid()), arb((t + eps).exp().mid())
        if _excess(a, x_lo, y, upper) == -1 and _excess(a, x_hi, y, upper) == 1:
            return x_lo.union(x_hi)
    return INDET


@functools.cache
def gammaincinv(complement: bool) -> Callable[[Ball, Ball], Ball]:
    """``gammaincinv(a, p)``: the ``x`` with ``P(a, x) = p``; ``gammainccinv(a, q)`` (``complement``): with
    ``Q(a, x) = q``. JAX 0.12.1's conventions: NaN for ``a < 0`` and outside ``[0, 1]``; ``x = 0`` at
    ``p = 0`` (``q = 1``) and ``+inf`` at ``p = 1`` (``q = 0``), whatever ``a``; NaN for ``a = 0`` or
    ``+inf`` elsewhere."""

    @_strict
    def f(a: arb, y: arb) -> Ball:
        if a < 0 or y < 0 or y > 1:
            return None
        zero_x, inf_x = (y == 1, y.is_zero()) if complement else (y.is_zero(), y == 1)
        if y.is_exact() and (zero_x or inf_x):
            return ZERO if zero_x else POS_INF
        if a.is_exact() and (a.is_zero() or not a.is_finite()):
            return None
        if not (a > 0 and a.is_finite() and y > 0 and y < 1):
            return INDET  # a ball touching an edge
        return _inverse_gamma(a, y, complement)

    return f


@functools.cache
def d_gammaincinv_y(complement: bool) -> Callable[[Ball, Ball], Ball]:
    """``dx/dp = 1 / (d/dx P(a, x)) = Gamma(a) x^(1-a) e^x`` at ``x = gammaincinv(a, p)`` (negated for
    ``q``); at ``x = 0`` it is 0, 1 or ``+inf`` as ``a`` is below, at or above 1."""
    inverse = gammaincinv(complement)

    @_strict
    def f(a: arb, y: arb) -> Ball:
        x = inverse(a, y)
        if x is None or x.is_nan():
            return x
        if not x.is_finite():
            r = POS_INF
        elif x.is_exact() and x.is_zero():
            r = ZERO if a < 1 else arb(1) if a == 1 else POS_INF if a > 1 else INDET
        elif not x > 0:
            return INDET
        else:
            r = (a.lgamma() + (1 - a) * x.log() + x).exp()
        return F["neg"](r) if complement else r

    return f


# ---------------------------------------------------------------------------- integer-order Bessel
def _signed(kind: str, n: int) -> tuple[int, int]:
    """``(|n|, sign)``: ``J_-n = (-1)^n J_n``, ``Y_-n = (-1)^n Y_n``, ``I_-n = I_n``, ``K_-n = K_n``."""
    sign = -1 if kind in ("j", "y") and n < 0 and n % 2 else 1
    return abs(n), sign


def _bessel_value(kind: str, n: int, x: arb) -> Ball:
    k, sign = _signed(kind, n)
    if not x.is_finite():
        if kind in ("j", "y", "k"):
            return ZERO if kind == "j" or x > 0 else None  # J, Y, K vanish at +inf; Y, K undefined at -inf
        return POS_INF if x > 0 or k % 2 == 0 else NEG_INF  # I_n(+-inf)
    if kind in ("y", "k"):
        if x.is_exact() and x.is_zero():
            return (POS_INF if kind == "k" else (NEG_INF if sign > 0 else POS_INF))
        if x < 0:
            return None  # complex-valued: NaN for a real operand, as JAX (and SciPy)
        if not x > 0:
            return INDET
    nu = arb(k)
    r = {"j": arb.bessel_j, "y": arb.bessel_y, "i": arb.bessel_i, "k": arb.bessel_k}[kind](x, nu)
    return _finite_or_indet(r if sign > 0 else -r)


@functools.cache
def bessel(kind: str, n: int) -> Callable[[Ball], Ball]:
    """The Bessel function of the first (``j``) or second (``y``) kind, or the modified one (``i``,
    ``k``), of integer order ``n``, as ``jax.scipy.special`` ``jn``, ``yn``, ``iv``, ``kn`` define them
    on real operands: ``J_n(+-inf) = Y_n(+inf) = K_n(+inf) = 0``, ``I_n(+-inf) = (+-1)^n inf``,
    ``Y_n(0) = -inf`` (``+inf`` for a negative odd order), ``K_n(0) = +inf``; ``Y`` and ``K`` are NaN
    below 0 (complex there)."""

    def f(x: Ball) -> Ball:
        bad = _nan_or_indet(x)
        return bad if bad is not False else _bessel_value(kind, n, x)

    return f


@functools.cache
def d_bessel(kind: str, n: int) -> Callable[[Ball], Ball]:
    """``J_n' = (J_(n-1) - J_(n+1))/2`` (``Y`` alike), ``I_n' = (I_(n-1) + I_(n+1))/2``, ``K_n' = -(K_(n-1) +
    K_(n+1))/2`` (DLMF 10.6.1, 10.29.1), with the value conventions of :func:`bessel`."""
    lo, hi = bessel(kind, n - 1), bessel(kind, n + 1)

    def f(x: Ball) -> Ball:
        a, b = lo(x), hi(x)
        if kind in ("j", "y"):
            r = F["sub"](a, b)
        else:
            r = F["add"](a, b)
        r = F["mul"](r, arb(0.5))
        return F["neg"](r) if kind == "k" else r

    return f
