"""Special functions of ``jax.lax`` on Arb balls: incomplete gamma and beta, scaled Bessel, zeta, polygamma.

Every value is an Arb enclosure (``arb.gamma_lower``/``gamma_upper``, ``beta_lower``, ``bessel_i``,
``zeta``) or built from Arb operations with a proven error bound (the Hurwitz sum for a negative shift,
the series of the derivative of the incomplete gamma function in its order). Where Arb cannot enclose a
value at the working precision, a proven alternative is tried (the complement ``1 - Q``, the mirror
``1 - I_(1-x)(b, a)``, a bound on the tiny tail, the dominant first term of ``zeta``); where none applies
(``igamma(1e30, 1e30)``) the result is :data:`INDET`, so the element escalates and ends *uncertain*,
never guessed.

Conventions (the oracle's, see ``_arb``: NaN where the exact result provably does not exist, limits where
they are one-sided or agree on both sides), written per function:

* ``igamma(a, x) = P(a, x)``, ``igammac(a, x) = Q(a, x)``: the regularized integrals
  ``int_0^x t^(a-1) e^-t dt / Gamma(a)`` and its complement; they exist for ``a > 0, x >= 0``. NaN for
  ``a < 0`` or ``x < 0`` (the integral diverges or is complex) and for ``a = x = 0``; the limits
  ``P(0, x > 0) = 1``, ``P(a, inf) = 1``, ``P(inf, x < inf) = 0``; NaN for ``a = x = inf``.
* ``regularized_incomplete_beta(a, b, x) = I_x(a, b)`` for ``a, b >= 0`` (not both 0) and
  ``0 <= x <= 1``; ``I_0 = 0``, ``I_1 = 1``; the point-mass limits ``I_x(0, b) = 1`` for ``x > 0`` and
  ``I_x(a, 0) = 0`` for ``x < 1`` (NaN at the other end, where the two limits disagree); ``a = inf``
  gives 0 and ``b = inf`` gives 1 inside ``(0, 1)``. NaN outside.
* ``bessel_i0e(x) = exp(-|x|) I_0(x)`` (even), ``bessel_i1e(x) = exp(-|x|) I_1(x)`` (odd); 0 at +-inf.
* ``zeta(x, q) = sum_n (n + q)^-x``, the series JAX documents (``x > 1``): ``x = 1`` is the pole,
  ``+inf`` (the limit from ``x > 1``); ``x < 1`` is NaN (the series diverges; the analytic continuation
  is not what ``lax.zeta`` computes). A negative ``q`` gives real terms only for an integer ``x``
  (otherwise NaN); a term ``0^-x`` at an integer ``q <= 0`` is ``+inf`` for even ``x`` and NaN for odd
  ``x`` (the sign depends on the side). ``x = inf``: 0 for ``q > 1``, 1 at ``q = 1``, ``+inf`` for
  ``0 < q < 1``.
* ``polygamma(n, x) = psi^(n)(x)`` for an integer ``n >= 0`` (NaN otherwise), ``(-1)^(n+1) n! zeta(n+1,
  x)`` for ``n >= 1`` (so its poles follow ``zeta``'s), ``digamma`` for ``n = 0``; 0 at ``x = inf``.
* ``log2(x) = log(x) / log(2)`` and ``one_minus_square(x) = 1 - x^2``, with ``log``'s and ``sub``'s limits.
* ``igamma_grad_a(a, x) = dP(a, x)/da``; ``random_gamma_grad(a, x) = -(dP/da) / (dP/dx)``, the derivative
  of a Gamma(a) sample with respect to ``a`` at fixed uniform draw (implicit reparameterization). Both
  from the convergent series ``gamma(a, x) = x^a sum_n (-x)^n / (n! (a+n))`` and its ``a``-derivative,
  summed until a geometric bound on the tail is negligible, the bound added to the ball's radius.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from flint import arb
from flint import ctx as flint_ctx

from ..core._arb import FUNCTIONS
from ..core._arb_binary import div, mul, sub
from ..core._ball_util import Ball
from ..core._ball_util import cls as _cls
from ..core._ball_util import exact_int as _int
from ..core._ball_util import sign_class as _sign
from ..core._common import INDET, ONE, POS_INF, ZERO, Rule, ints_to_arb, obj

__all__ = ["FUNCTIONS_SPECIAL", "RULES"]

#: Terms of a Hurwitz sum moved out of a negative shift ``q`` before Arb's zeta takes over.
MAX_SHIFT_TERMS = 10_000
#: Terms of the incomplete-gamma order-derivative series before the element is left undecided.
MAX_SERIES_TERMS = 50_000


def _nonneg(x: arb) -> int | None:
    """0 (exactly zero), 1 (positive) or None (negative or undecided): for domains ``x >= 0``."""
    s = _sign(x)
    return s if s in (0, 1) else None


def _has_nan_or_indet(*xs: Ball) -> Ball | bool:
    if any(x is None for x in xs):
        return None
    if any(_cls(x) == "indet" for x in xs):
        return INDET
    return False


def _below(x: arb, lo: int) -> bool:
    """Whether ``x`` is provably below ``lo`` (``-inf`` included)."""
    c = _cls(x)
    return c == "-inf" or (c == "fin" and x < lo)


def _finite(r: arb) -> Ball:
    return r if r.is_finite() else INDET


# ------------------------------------------------------------------------------- incomplete gamma
def _gamma_reg(upper: bool) -> Callable[[Ball, Ball], Ball]:
    def f(a: Ball, x: Ball) -> Ball:
        bad = _has_nan_or_indet(a, x)
        if bad is not False:
            return bad
        if _below(a, 0) or _below(x, 0):
            return None
        sa, sx = _nonneg(a), _nonneg(x)
        if sa is None or sx is None:
            return INDET  # a ball straddling the domain's edge at 0
        ca, cx = _cls(a), _cls(x)

        def p(v: arb) -> arb:  # P's value, returned as Q when asked for the upper function
            return ONE - v if upper else v

        if sa == 0:
            return None if sx == 0 else p(ONE)
        if sx == 0:
            return p(ZERO)
        if ca == "+inf":
            return None if cx == "+inf" else p(ZERO)
        if cx == "+inf":
            return p(ONE)
        r = x.gamma_upper(a, 1) if upper else x.gamma_lower(a, 1)
        if not r.is_finite():  # Arb gives up on some tails: the complement may still be enclosed
            r = ONE - (x.gamma_lower(a, 1) if upper else x.gamma_upper(a, 1))
        if not r.is_finite():  # far tails (a = 1e38, x = 1e24): a proven bound on the tiny side
            tail = _tail_bound(a, x)
            if tail is not None:
                lower_p = tail[0] == "P"
                r = tail[1] if lower_p != upper else ONE - tail[1]
        return _finite(r)

    return f


def _tail_bound(a: arb, x: arb) -> tuple[str, arb] | None:
    """A ball ``[0, B]`` around the tiny one of ``P(a, x)`` and ``Q(a, x)``, with its name.

    ``P <= x^a e^-x / Gamma(a+1) / (1 - x/(a+1))`` for ``x < a+1`` (the series of ``P`` against a
    geometric one); ``Q <= x^(a-1) e^-x / Gamma(a) / (1 - (a-1)/x)`` for ``x > a-1`` (``(1+u/x)^(a-1) <=
    e^((a-1)u/x)`` under the integral; the factor is 1 for ``a <= 1``)."""
    if x < a + 1 and x < (a + 1) / 2:
        bound = (a * x.log() - x - (a + 1).lgamma()).exp() / (1 - x / (a + 1))
        name = "P"
    elif x > a - 1 and x > 2 * (a - 1):
        factor = 1 / (1 - (a - 1) / x) if a > 1 else ONE
        bound = ((a - 1) * x.log() - x - a.lgamma()).exp() * factor
        name = "Q"
    else:
        return None
    if not bound.is_finite():
        return None
    half = arb(bound.upper()) / 2
    return name, half + arb(0, half.abs_upper())


# -------------------------------------------------------------------------------- incomplete beta
def _betainc(a: Ball, b: Ball, x: Ball) -> Ball:
    bad = _has_nan_or_indet(a, b, x)
    if bad is not False:
        return bad
    if _below(a, 0) or _below(b, 0) or _below(x, 0) or _cls(x) == "+inf" or (x > 1):
        return None
    sa, sb, sx = _nonneg(a), _nonneg(b), _nonneg(x)
    s1 = _nonneg(ONE - x)
    if None in (sa, sb, sx, s1):
        return INDET
    if sa == 0 and sb == 0:
        return None
    if sa == 0:
        return None if sx == 0 else ONE  # a point mass at 0: the CDF is 1 right of it
    if sb == 0:
        return None if s1 == 0 else ZERO  # a point mass at 1
    if sx == 0:
        return ZERO
    if s1 == 0:
        return ONE
    ca, cb = _cls(a), _cls(b)
    if ca == "+inf" and cb == "+inf":
        return None
    if ca == "+inf":
        return ZERO
    if cb == "+inf":
        return ONE
    r = x.beta_lower(a, b, 1)
    if not r.is_finite():  # Arb gives up on some far tails; the mirror image I_x(a,b) = 1 - I_(1-x)(b,a)
        r = ONE - (ONE - x).beta_lower(b, a, 1)
    return _finite(r)


# ----------------------------------------------------------------------------------- scaled Bessel
def _i0e(x: Ball) -> Ball:
    if x is None:
        return None
    c = _cls(x)
    if c in ("+inf", "-inf"):
        return ZERO
    if c == "indet":
        return INDET
    if x > 0 or x < 0:
        return _finite(abs(x).bessel_i(0, scaled=True))
    return _finite(x.bessel_i(0) * (-abs(x)).exp())  # a ball around 0: I_0 is tame there


def _i1e(x: Ball) -> Ball:
    if x is None:
        return None
    c = _cls(x)
    if c in ("+inf", "-inf"):
        return ZERO
    if c == "indet":
        return INDET
    if x > 0:
        return _finite(x.bessel_i(1, scaled=True))
    if x < 0:
        return _finite(-((-x).bessel_i(1, scaled=True)))
    return _finite(x.bessel_i(1) * (-abs(x)).exp())


# ------------------------------------------------------------------------------------------- zeta
def _exact_integer(x: arb) -> int | None:
    return _int(x) if x.is_exact() and x.is_finite() and x.is_integer() else None


def _zeta_positive(s: arb, q: arb) -> Ball:
    """``zeta(s, q)`` for ``s > 1, q > 0``. Where the first term dominates (large ``s``: Arb's series is
    slow or gives up there) the sum is ``q^-s + R`` with ``0 <= R <= (q+1)^-s + (q+1)^(1-s) / (s-1)``
    (the rest bounded by its first term and the integral of the remaining ones)."""
    if s > 64:
        first = q ** (-s)
        after = q + 1
        tail = after ** (-s) * (1 + after / (s - 1))
        if first.is_finite() and tail.is_finite() and tail < first * arb((1, -(int(flint_ctx.prec) + 8))):
            half = tail / 2
            return first + half + arb(0, half.abs_upper())
    return _finite(s.zeta(q))


def _zeta_negative_shift(s: arb, q: arb) -> Ball:
    """``zeta(s, q)`` for ``q <= 0`` (provably): real only for an integer ``s``."""
    k = _exact_integer(s)
    if k is None:
        return INDET if s.contains_integer() else None
    qi = _exact_integer(q)
    if qi is not None:  # a term 0^-k: +inf from both sides for even k
        return POS_INF if k % 2 == 0 else None
    if q.contains_integer():
        return INDET
    m = math.floor(-float(q.mid())) + 1  # the terms n + q < 0, taken one by one
    if m > MAX_SHIFT_TERMS:
        return INDET
    shifted = q + m
    if not shifted > 0:
        return INDET
    total = _zeta_positive(s, shifted)
    if total is INDET or total is None:
        return total
    for n in range(m):
        total += (q + n) ** (-k)
    return _finite(total)


def _zeta(s: Ball, q: Ball) -> Ball:
    bad = _has_nan_or_indet(s, q)
    if bad is not False:
        return bad
    cs, cq = _cls(s), _cls(q)
    if cs == "-inf" or cq == "-inf":
        return None
    if cs == "+inf":
        if cq == "+inf":
            return ZERO
        if q > 1:
            return ZERO
        if q.is_exact() and q == 1:
            return ONE
        if q > 0 and q < 1:
            return POS_INF
        if q < 0 or q.is_zero():
            return None
        return INDET
    # s finite: the series converges for s > 1; the pole s = 1 is +inf from the series' side.
    if s < 1:
        return None
    if s.is_exact() and s == 1:
        sq = _sign(q)
        return POS_INF if sq == 1 else INDET if sq is None else None
    if not s > 1:
        return INDET
    if cq == "+inf":
        return ZERO
    if q > 0:
        return _zeta_positive(s, q)
    if q < 0 or q.is_zero():
        return _zeta_negative_shift(s, q)
    return INDET


def _polygamma(n: Ball, x: Ball) -> Ball:
    bad = _has_nan_or_indet(n, x)
    if bad is not False:
        return bad
    if _cls(n) != "fin":
        return None
    k = _exact_integer(n)
    if k is None:
        return INDET if n.contains_integer() and not n < 0 else None
    if k < 0:
        return None
    if k == 0:
        return FUNCTIONS["digamma"](x)
    if _cls(x) == "+inf":
        return ZERO
    z = _zeta(arb(k + 1), x)
    if z is None or z is INDET:
        return z
    return mul(arb(math.factorial(k) * (-1) ** (k + 1)), z)


# ------------------------------------------------------------- derivatives in the gamma order a
def _order_series(a: arb, x: arb) -> tuple[arb, arb] | None:
    """``S0 = sum (-x)^n / (n! (a+n))`` and ``S1 = sum (-x)^n / (n! (a+n)^2)`` with their tails bounded.

    For ``n >= N > 2x`` the terms ``x^n / n!`` fall by at least half each step, so the tail after ``N``
    is at most ``2 x^N / N!`` times ``1/(a+N)`` (``S0``) or ``1/(a+N)^2`` (``S1``): that bound joins the
    radius. None when the series would need more than :data:`MAX_SERIES_TERMS` terms."""
    s0, s1 = ZERO, ZERO
    t = ONE  # (-x)^n / n!
    xmax = float(x.upper())
    if 2 * xmax + 2 >= MAX_SERIES_TERMS:
        return None  # the terms would not start falling before the cap
    eps = arb((1, -(int(flint_ctx.prec) + 8)))  # a notch below the working precision
    for n in range(MAX_SERIES_TERMS):
        an = a + n
        s0 += t / an
        s1 += t / (an * an)
        t = -t * x / (n + 1)
        if n + 1 > 2 * xmax + 2:
            bound = 2 * abs(t)
            an1 = a + (n + 1)
            b0, b1 = bound / an1, bound / (an1 * an1)
            if b0 < eps * abs(s0) and b1 < eps * (abs(s1) + abs(s0)):
                b0u, b1u = b0.abs_upper(), b1.abs_upper()
                return s0 + arb(0, b0u), s1 + arb(0, b1u)
    return None


def _order_derivative_parts(a: Ball, x: Ball) -> tuple[str, Any]:
    """Shared domain handling: ``("value", ball)`` for a decided edge, or ``("series", (S0, S1))``."""
    bad = _has_nan_or_indet(a, x)
    if bad is not False:
        return "value", bad
    if _below(a, 0) or _below(x, 0):
        return "value", None
    sa, sx = _nonneg(a), _nonneg(x)
    if sa is None or sx is None:
        return "value", INDET
    if sa == 0:
        return "value", None
    if _cls(a) == "+inf" or _cls(x) == "+inf":
        return "edge", None
    if sx == 0:
        return "value", ZERO
    parts = _order_series(a, x)
    return ("value", INDET) if parts is None else ("series", parts)


def _igamma_grad_a(a: Ball, x: Ball) -> Ball:
    """``dP(a, x)/da = x^a / Gamma(a) ((log x - digamma(a)) S0 - S1)``."""
    kind, v = _order_derivative_parts(a, x)
    if kind == "edge":
        return None if (_cls(a) == "+inf" and _cls(x) == "+inf") else ZERO  # P is flat (0 or 1) there
    if kind == "value":
        return v
    s0, s1 = v
    r = x ** a * a.rgamma() * ((x.log() - a.digamma()) * s0 - s1)
    return _finite(r)


def _random_gamma_grad(a: Ball, x: Ball) -> Ball:
    """``-(dP/da) / (dP/dx) = -x e^x ((log x - digamma(a)) S0 - S1)``."""
    kind, v = _order_derivative_parts(a, x)
    if kind == "edge":
        return None  # a sample at +inf (or an infinite shape): no finite derivative
    if kind == "value":
        return v
    s0, s1 = v
    r = -(x * x.exp()) * ((x.log() - a.digamma()) * s0 - s1)
    return _finite(r)


# --------------------------------------------------------------- small elementwise compositions
def _log2(x: Ball) -> Ball:
    """``log(x) / log(2)``: ``log``'s conventions (``log2(0) = -inf``, NaN below 0)."""
    r = FUNCTIONS["log"](x)
    return r if r is None or not r.is_finite() else div(r, arb(2).log())


def _one_minus_square(x: Ball) -> Ball:
    return sub(ONE, FUNCTIONS["square"](x))


FUNCTIONS_SPECIAL: dict[str, Callable[..., Ball]] = {
    "igamma": _gamma_reg(upper=False),
    "igammac": _gamma_reg(upper=True),
    "regularized_incomplete_beta": _betainc,
    "bessel_i0e": _i0e,
    "bessel_i1e": _i1e,
    "zeta": _zeta,
    "polygamma": _polygamma,
    "igamma_grad_a": _igamma_grad_a,
    "random_gamma_grad": _random_gamma_grad,
    "log2": _log2,
    "one_minus_square": _one_minus_square,
}

_ARITY = {"bessel_i0e": 1, "bessel_i1e": 1, "regularized_incomplete_beta": 3, "log2": 1,
          "one_minus_square": 1}


def _rule(name: str) -> Rule:
    fn = FUNCTIONS_SPECIAL[name]
    uf = np.frompyfunc(fn, _ARITY.get(name, 2), 1)

    def rule(ctx: Any, eqn: Any, *args: np.ndarray) -> np.ndarray:
        balls = [a if a.dtype == object else ints_to_arb(a) for a in args]
        with np.errstate(all="ignore"):  # FPU flags raised inside Arb's C code are not our results
            return obj(uf(*balls))

    return rule


RULES: dict[str, Rule] = {name: _rule(name) for name in FUNCTIONS_SPECIAL}
