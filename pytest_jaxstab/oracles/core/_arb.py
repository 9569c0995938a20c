"""Scalar real functions on Arb balls: the arithmetic of the oracle, every result a rigorous enclosure.

Each function takes balls (``flint.arb``, at the global ``flint.ctx.prec``) or ``None`` (no real value:
NaN) and returns a ball that contains the exact result for every point of its operands' balls, or
``None`` when the exact result provably does not exist, or :data:`INDET` when this precision cannot say
(the operand straddles a domain edge or a pole; an argument too large for the precision).

The common case costs one Arb operation and one ``is_finite`` test; everything else (infinities, domain
edges, NaN) goes through a slower path per function. Domain conventions, as the float programs they
judge: a result that is not a real number (``sqrt(-1)``, ``acosh(0.5)``, ``0/0``, ``inf - inf``,
``x/0``) is NaN; infinities follow the one-sided limit where the function has one (``log(0) = -inf``,
``rsqrt(0) = inf``, ``atanh(1) = inf``, ``lgamma`` at a pole ``= inf``); where the limit depends on the
side (``1/0``, ``digamma(0)``, ``atan2(0, 0)``) the result is NaN. Zero is unsigned.

Functions Arb lacks are built from its operations so that the enclosure stays rigorous: ``cbrt`` of
negatives (odd symmetry), ``lgamma`` of negatives (reflection: ``log pi - log|sin(pi x)| - lgamma(1-x)``),
``digamma`` of negatives (``psi(1-x) - pi cot(pi x)``), ``logistic``, ``exp2``, ``round`` and ``rem``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
from flint import arb

from ._arb_binary import BINARY, add, div, eq, integer_pow, maximum, minimum, mul, sub
from ._ball_util import Ball
from ._ball_util import cls as _cls
from ._ball_util import exact_int as _int
from ._ball_util import is_int_value as _is
from ._common import INDET, NEG_INF, ONE, POS_INF, ZERO

__all__ = ["FUNCTIONS", "add", "div", "eq", "maximum", "minimum", "mul", "sub", "ufunc"]
TWO = arb(2)
HALF = arb(0.5)


def _monotone_hull(f: Callable[[arb], Ball], x: arb) -> Ball:
    """``f`` (monotone on the ball) over the hull of its values at the ball's two ends."""
    lo, hi = f(x.lower()), f(x.upper())  # balls around the two ends
    if lo is None or hi is None or not (lo.is_finite() and hi.is_finite()):
        return INDET
    return lo.union(hi)


# ------------------------------------------------------------------------------------------- unary
def _unary(fast: Callable[[arb], arb], slow: Callable[[arb, arb], Ball]) -> Callable[[Ball], Ball]:
    def f(x: Ball) -> Ball:
        if x is None:
            return None
        if not x.is_finite():
            # Infinities and indeterminate balls: Arb's answers there follow other conventions
            # (sin(inf) = [+/- 1]), so the slow path decides from the operand's class alone.
            return slow(x, INDET)
        r = fast(x)
        if r.is_finite():
            return r
        return slow(x, r)

    return f


def _log_slow(x: arb, r: arb) -> Ball:
    if x.is_zero():
        return NEG_INF
    c = _cls(x)
    if c == "+inf":
        return POS_INF
    if c == "-inf" or (c == "fin" and x < 0):
        return None
    return INDET


def _from(lo: int, x: arb) -> Ball:
    """The slow path of an increasing function defined on [lo, +inf) that is +inf at +inf (sqrt,
    log1p, acosh): None (outside the real domain) entirely below `lo`, else undecided."""
    c = _cls(x)
    if c == "+inf":
        return POS_INF
    if c == "-inf" or (c == "fin" and x < lo):
        return None
    return INDET


def _log1p_slow(x: arb, r: arb) -> Ball:
    return NEG_INF if _is(x, -1) else _from(-1, x)


def _sqrt_slow(x: arb, r: arb) -> Ball:
    return _from(0, x)


def _rsqrt_slow(x: arb, r: arb) -> Ball:
    if x.is_zero():
        return POS_INF
    c = _cls(x)
    if c == "+inf":
        return ZERO
    if c == "-inf" or (c == "fin" and x < 0):
        return None
    return INDET


def _cbrt_fast(x: arb) -> arb:
    if x > 0:
        return x.root(3)
    if x < 0:
        return -((-x).root(3))
    if x.is_zero():
        return ZERO
    return INDET


def _cbrt_slow(x: arb, r: arb) -> Ball:
    c = _cls(x)
    if c in ("+inf", "-inf"):
        return x
    if c == "fin":  # straddles 0: cbrt is increasing, so its values lie between those of the ends
        return _monotone_hull(_cbrt_fast, x)
    return INDET


def _unit_slow(x: arb, r: arb) -> Ball:  # asin, acos: [-1, 1]
    c = _cls(x)
    if c == "indet":
        return INDET
    if c != "fin" or x > 1 or x < -1:
        return None
    return INDET


def _acosh_slow(x: arb, r: arb) -> Ball:
    return _from(1, x)


def _atanh_slow(x: arb, r: arb) -> Ball:
    if _is(x, 1):
        return POS_INF
    if _is(x, -1):
        return NEG_INF
    c = _cls(x)
    if c in ("+inf", "-inf") or (c == "fin" and (x > 1 or x < -1)):
        return None
    return INDET


def _erfinv_slow(x: arb, r: arb) -> Ball:
    return _atanh_slow(x, r)  # same domain, same limits at +-1


def _logistic_fast(x: arb) -> arb:
    if x > 0:
        return ONE / (ONE + (-x).exp())
    e = x.exp()
    return e / (ONE + e)


def _exp2_fast(x: arb) -> arb:
    if x.is_exact() and x.is_integer():
        n = _int(x)
        return arb((1, n))  # exact, whatever its size
    return TWO ** x


def _lgamma_fast(x: arb) -> arb:
    if x > 0:
        return x.lgamma()
    # Reflection: |Gamma(x)| = pi / (|sin(pi x)| Gamma(1 - x)), all of it continuous off the poles.
    s = x.sin_pi()
    if not (s > 0 or s < 0):
        return INDET
    return arb.pi().log() - abs(s).log() - (ONE - x).lgamma()


def _lgamma_slow(x: arb, r: arb) -> Ball:
    c = _cls(x)
    if c == "+inf":
        return POS_INF
    if c == "-inf":
        return None  # no limit: poles all the way
    if c == "fin" and x.is_exact() and x.is_integer() and not x > 0:
        return POS_INF  # a pole: |gamma| -> inf from both sides
    return INDET


def _digamma_fast(x: arb) -> arb:
    if x > 0:
        return x.digamma()
    t = x.cot_pi()
    if not t.is_finite():
        return INDET
    return (ONE - x).digamma() - arb.pi() * t


def _digamma_slow(x: arb, r: arb) -> Ball:
    c = _cls(x)
    if c == "+inf":
        return POS_INF
    if c == "-inf" or (c == "fin" and x.is_exact() and x.is_integer() and not x > 0):
        return None  # -inf on one side of a pole, +inf on the other
    return INDET


def _round_fast(ties_even: bool) -> Callable[[arb], arb]:
    def f(x: arb) -> arb:
        y = x + HALF
        n = y.floor()
        if not n.is_exact():
            return x.floor().union((x + 1).floor())  # straddles a decision point: both candidates
        if not y.is_exact() and not y > n:
            return n.union(n - 1)  # the ball reaches down to a tie, which may round down
        if y.is_exact() and y.is_integer():  # x is exactly a half-integer: a tie
            k = _int(n)  # x = k - 1/2
            if ties_even:
                return arb(k if k % 2 == 0 else k - 1)
            return arb(k if x > 0 else k - 1)
        return n

    return f


def _keep_infinities(x: arb, r: arb) -> Ball:
    c = _cls(x)
    return x if c in ("+inf", "-inf") else INDET


def _floor_fast(x: arb) -> arb:
    return x.floor()


def _ceil_fast(x: arb) -> arb:
    return x.ceil()


def _sign_fast(x: arb) -> arb:
    return x.sgn()


def _sign_slow(x: arb, r: arb) -> Ball:
    c = _cls(x)
    return {"+inf": ONE, "-inf": -ONE}.get(c, INDET)


def _abs_slow(x: arb, r: arb) -> Ball:
    c = _cls(x)
    return POS_INF if c in ("+inf", "-inf") else INDET


def _neg(x: Ball) -> Ball:
    return None if x is None else -x


def _erfc_slow(x: arb, r: arb) -> Ball:
    return {"+inf": ZERO, "-inf": TWO}.get(_cls(x), INDET)


def _erf_slow(x: arb, r: arb) -> Ball:
    return {"+inf": ONE, "-inf": -ONE}.get(_cls(x), INDET)


def _trig_slow(x: arb, r: arb) -> Ball:
    return None if _cls(x) in ("+inf", "-inf") else INDET


def _atan_slow(x: arb, r: arb) -> Ball:
    c = _cls(x)
    if c == "+inf":
        return arb.pi() / 2
    if c == "-inf":
        return -arb.pi() / 2
    return INDET


def _tanh_slow(x: arb, r: arb) -> Ball:
    return {"+inf": ONE, "-inf": -ONE}.get(_cls(x), INDET)


def _logistic_slow(x: arb, r: arb) -> Ball:
    return {"+inf": ONE, "-inf": ZERO}.get(_cls(x), INDET)


def _exp_slow(x: arb, r: arb) -> Ball:
    return {"+inf": POS_INF, "-inf": ZERO}.get(_cls(x), INDET)


def _exp2_slow(x: arb, r: arb) -> Ball:
    return _exp_slow(x, r)


def _expm1_slow(x: arb, r: arb) -> Ball:
    return {"+inf": POS_INF, "-inf": -ONE}.get(_cls(x), INDET)


def _odd_inf(x: arb, r: arb) -> Ball:  # sinh, asinh
    return _keep_infinities(x, r)


def _even_inf(x: arb, r: arb) -> Ball:  # cosh
    return POS_INF if _cls(x) in ("+inf", "-inf") else INDET


def _square(x: Ball) -> Ball:
    if x is None:
        return None
    r = x * x
    if r.is_finite():
        return r
    return POS_INF if _cls(x) in ("+inf", "-inf") else INDET


def _identity(x: Ball) -> Ball:
    return x


FUNCTIONS: dict[str, Callable[..., Ball]] = {
    "exp": _unary(arb.exp, _exp_slow),
    "exp2": _unary(_exp2_fast, _exp2_slow),
    "expm1": _unary(arb.expm1, _expm1_slow),
    "log": _unary(arb.log, _log_slow),
    "log1p": _unary(arb.log1p, _log1p_slow),
    "sqrt": _unary(arb.sqrt, _sqrt_slow),
    "rsqrt": _unary(arb.rsqrt, _rsqrt_slow),
    "cbrt": _unary(_cbrt_fast, _cbrt_slow),
    "sin": _unary(arb.sin, _trig_slow),
    "cos": _unary(arb.cos, _trig_slow),
    "tan": _unary(arb.tan, _trig_slow),
    "asin": _unary(arb.asin, _unit_slow),
    "acos": _unary(arb.acos, _unit_slow),
    "atan": _unary(arb.atan, _atan_slow),
    "sinh": _unary(arb.sinh, _odd_inf),
    "cosh": _unary(arb.cosh, _even_inf),
    "tanh": _unary(arb.tanh, _tanh_slow),
    "asinh": _unary(arb.asinh, _odd_inf),
    "acosh": _unary(arb.acosh, _acosh_slow),
    "atanh": _unary(arb.atanh, _atanh_slow),
    "logistic": _unary(_logistic_fast, _logistic_slow),
    "erf": _unary(arb.erf, _erf_slow),
    "erfc": _unary(arb.erfc, _erfc_slow),
    "erf_inv": _unary(arb.erfinv, _erfinv_slow),
    "lgamma": _unary(_lgamma_fast, _lgamma_slow),
    "digamma": _unary(_digamma_fast, _digamma_slow),
    "floor": _unary(_floor_fast, _keep_infinities),
    "ceil": _unary(_ceil_fast, _keep_infinities),
    "round_away": _unary(_round_fast(False), _keep_infinities),
    "round_even": _unary(_round_fast(True), _keep_infinities),
    "sign": _unary(_sign_fast, _sign_slow),
    "abs": _unary(abs, _abs_slow),
    "neg": _neg,
    "square": _square,
    "identity": _identity,
}


FUNCTIONS.update(BINARY)


@functools.cache
def ufunc(name: str, arg: Any = None) -> np.ufunc:
    """The cached object ufunc computing ``name`` on balls (``arg``: integer_pow's exponent)."""
    if name == "integer_pow":
        return np.frompyfunc(integer_pow(int(arg)), 1, 1)
    fn = FUNCTIONS[name]
    nargs = 1 if name in _UNARY_NAMES else 2
    return np.frompyfunc(fn, nargs, 1)


_UNARY_NAMES = frozenset({
    "exp", "exp2", "expm1", "log", "log1p", "sqrt", "rsqrt", "cbrt", "sin", "cos", "tan", "asin", "acos",
    "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "logistic", "erf", "erfc", "erf_inv",
    "lgamma", "digamma", "floor", "ceil", "round_away", "round_even", "sign", "abs", "neg", "square",
    "identity", "is_finite",
})
