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

from ._common import INDET, NEG_INF, ONE, POS_INF, ZERO, Undecided

__all__ = ["FUNCTIONS", "ufunc"]

Ball = Any  # flint.arb or None
TWO = arb(2)
HALF = arb(0.5)


def _special(x: arb) -> str:
    """Classifies a non-finite ball: ``"+inf"``, ``"-inf"`` (exact infinities) or ``"indet"``."""
    if x.is_nan() or not x.is_exact():
        return "indet"
    return "+inf" if x > 0 else "-inf"


def _int(x: arb) -> int:
    """The integer an exact integer ball holds."""
    n = x.unique_fmpz()
    if n is None:
        raise ValueError(f"{x} is not a unique integer")
    return int(n)


def _cls(x: arb) -> str:
    return "fin" if x.is_finite() else _special(x)


def _is(x: arb, v: int) -> bool:
    """Whether ``x`` is exactly the integer ``v``."""
    return x.is_exact() and x.is_finite() and x == v


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


def _by_class(**cases: Ball) -> Callable[[arb, arb], Ball]:
    """A slow path mapping the class of the operand to a value (``fin`` default: INDET)."""

    def slow(x: arb, r: arb) -> Ball:
        return cases.get(_cls(x), INDET)

    return slow


def _log_slow(x: arb, r: arb) -> Ball:
    if x.is_zero():
        return NEG_INF
    c = _cls(x)
    if c == "+inf":
        return POS_INF
    if c == "-inf" or (c == "fin" and x < 0):
        return None
    return INDET


def _log1p_slow(x: arb, r: arb) -> Ball:
    if _is(x, -1):
        return NEG_INF
    c = _cls(x)
    if c == "+inf":
        return POS_INF
    if c == "-inf" or (c == "fin" and x < -1):
        return None
    return INDET


def _sqrt_slow(x: arb, r: arb) -> Ball:
    c = _cls(x)
    if c == "+inf":
        return POS_INF
    if c == "-inf" or (c == "fin" and x < 0):
        return None
    return INDET


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
    c = _cls(x)
    if c == "+inf":
        return POS_INF
    if c == "-inf" or (c == "fin" and x < 1):
        return None
    return INDET


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


# ------------------------------------------------------------------------------------------ binary
def add(a: Ball, b: Ball) -> Ball:
    if a is None or b is None:
        return None
    r = a + b
    if r.is_finite():
        return r
    ca, cb = _cls(a), _cls(b)
    if "indet" in (ca, cb):
        return INDET
    if ca == "fin":
        return b
    if cb == "fin" or ca == cb:
        return a
    return None  # inf - inf


def sub(a: Ball, b: Ball) -> Ball:
    return None if b is None else add(a, -b)


def _sign_class(x: arb) -> int | None:
    """+1, -1 or 0 (exactly zero) when the sign is certain, else None."""
    if x.is_zero():
        return 0
    if x > 0:
        return 1
    if x < 0:
        return -1
    return None


def mul(a: Ball, b: Ball) -> Ball:
    if a is None or b is None:
        return None
    r = a * b
    if r.is_finite():
        return r
    ca, cb = _cls(a), _cls(b)
    if "indet" in (ca, cb):
        return INDET
    sa, sb = _sign_class(a), _sign_class(b)
    if sa is None or sb is None:
        return INDET
    if sa == 0 or sb == 0:
        return None  # 0 * inf
    return POS_INF if sa * sb > 0 else NEG_INF


def div(a: Ball, b: Ball) -> Ball:
    if a is None or b is None:
        return None
    if b.is_zero():
        return None  # x / 0 has no two-sided limit, 0 / 0 no value
    r = a / b
    if r.is_finite():
        return r
    ca, cb = _cls(a), _cls(b)
    if "indet" in (ca, cb):
        return INDET
    if ca != "fin" and cb != "fin":
        return None  # inf / inf
    if cb != "fin":
        return ZERO  # finite / inf
    sb = _sign_class(b)
    if sb is None or sb == 0:
        return INDET  # b straddles 0: the quotient is unbounded
    if ca == "fin":
        return INDET
    return POS_INF if (ca == "+inf") == (sb > 0) else NEG_INF


def _exact_int_pair(x: arb) -> tuple[int, int]:
    man, exp = x.mid().man_exp()
    return int(man), int(exp)


def rem(a: Ball, b: Ball) -> Ball:
    """C's ``fmod``: ``a - b * trunc(a / b)``, the dividend's sign."""
    if a is None or b is None or b.is_zero():
        return None
    ca, cb = _cls(a), _cls(b)
    if "indet" in (ca, cb):
        return INDET
    if ca != "fin":
        return None  # inf rem y
    if a.is_zero() or cb != "fin":
        return a  # 0 rem y = 0, x rem inf = x
    if a.is_exact() and b.is_exact():
        # Exactly, on integers at the common exponent: no rounding at all.
        ma, ea = _exact_int_pair(a)
        mb, eb = _exact_int_pair(b)
        if abs(ea - eb) > 1 << 16:
            return INDET
        e = min(ea, eb)
        r = (abs(ma) << (ea - e)) % (abs(mb) << (eb - e))
        return arb((-r if ma < 0 else r, e))
    q = a / b
    if abs(q) < 1:
        return a
    t = q.floor() if q > 0 else q.ceil() if q < 0 else None
    if t is None or not t.is_exact():
        return INDET  # the quotient straddles an integer: a jump of rem
    return a - b * t


def _pow_slow(x: arb, y: arb) -> Ball:
    cx, cy = _cls(x), _cls(y)
    if "indet" in (cx, cy):
        return INDET
    if y.is_zero():
        return ONE  # x**0 = 1, also 0**0 and inf**0
    y_int = cy == "fin" and y.is_exact() and y.is_integer()
    if cy != "fin":  # y = +-inf: the limit of x**y as |y| grows
        if cx == "fin":
            ax = abs(x)
            if _is(ax, 1):
                return ONE if x > 0 else None
            if not (ax > 1 or ax < 1):
                return INDET
            big = bool(ax > 1)
            if x < 0 and big:
                return None  # (-2)**y oscillates in sign
            if not (x > 0 or x < 0 or x.is_zero()):
                return INDET
        else:
            big = True
            if cx == "-inf":
                return None
        return POS_INF if big == (cy == "+inf") else ZERO
    odd = y_int and _int(y) % 2 == 1
    if x.is_zero():
        if y > 0:
            return ZERO
        return None if odd else POS_INF
    if cx != "fin":  # +-inf
        if y < 0:
            return ZERO
        return NEG_INF if cx == "-inf" and odd else POS_INF
    if x < 0 and not y_int:
        if y.is_exact() or not y.contains_integer():
            return None  # a negative base to a non-integer power is complex
        return INDET
    return INDET


def pow_(x: Ball, y: Ball) -> Ball:
    if x is None or y is None:
        return None
    if y.is_exact() and y.is_integer() and y.is_finite():
        n = _int(y)
        if abs(n) < 1 << 20 and x.is_finite() and (n >= 0 or x > 0 or x < 0):
            r = x ** n  # exact powers where they fit: any sign of x
            if r.is_finite():
                return r
        if x < 0 and x.is_finite():  # a huge integer power of a negative base: |x|**n, signed
            r = abs(x) ** y
            if r.is_finite():
                return -r if n % 2 else r
    if x > 0 and x.is_finite() and y.is_finite():
        r = x ** y
        if r.is_finite():
            return r
    return _pow_slow(x, y)


def integer_pow(n: int) -> Callable[[Ball], Ball]:
    en = arb(n)

    def f(x: Ball) -> Ball:
        return pow_(x, en)

    return f


def atan2(y: Ball, x: Ball) -> Ball:
    if y is None or x is None:
        return None
    cy, cx = _cls(y), _cls(x)
    if "indet" in (cy, cx):
        return INDET
    if cy == "fin" and cx == "fin":
        if y.is_zero() and x.is_zero():
            return None  # the angle of the origin is undefined
        r = arb.atan2(y, x)
        if r.is_finite():
            return r
        return INDET  # on the branch cut (y straddles 0, x < 0) or around the origin
    if cy != "fin" and cx != "fin":
        return None  # both infinite: no limit
    half_pi = arb.pi() / 2
    if cy != "fin":
        return half_pi if cy == "+inf" else -half_pi
    if cx == "+inf":
        return ZERO
    s = _sign_class(y)  # x = -inf: +-pi by the sign of y (zero is unsigned: pi)
    if s is None:
        return INDET
    return -arb.pi() if s < 0 else arb.pi()


def _extremum(pick_max: bool) -> Callable[[Ball, Ball], Ball]:
    def f(a: Ball, b: Ball) -> Ball:
        if a is None or b is None:
            return None  # lax.max/min propagate NaN
        # max and min are continuous: on overlapping balls the enclosure covers both candidates.
        if pick_max:
            if a >= b:
                return a
            if b >= a:
                return b
        else:
            if a <= b:
                return a
            if b <= a:
                return b
        if not (a.is_finite() and b.is_finite()):
            return INDET
        return a.max(b) if pick_max else a.min(b)

    return f


maximum = _extremum(True)
minimum = _extremum(False)


# ---------------------------------------------------------------------------------------- decisions
def _undecided() -> bool:
    raise Undecided


def lt(a: Ball, b: Ball) -> bool:
    if a is None or b is None:
        return False
    return True if a < b else False if a >= b else _undecided()


def le(a: Ball, b: Ball) -> bool:
    if a is None or b is None:
        return False
    return True if a <= b else False if a > b else _undecided()


def gt(a: Ball, b: Ball) -> bool:
    return lt(b, a)


def ge(a: Ball, b: Ball) -> bool:
    return le(b, a)


def eq(a: Ball, b: Ball) -> bool:
    if a is None or b is None:
        return False
    if a.is_exact() and b.is_exact() and not a.is_nan() and not b.is_nan():
        return bool(a == b)  # exact values (infinities included): decided
    if not a.overlaps(b):
        return False
    return _undecided()


def ne(a: Ball, b: Ball) -> bool:
    return not eq(a, b)


def is_finite(x: Ball) -> bool:
    if x is None:
        return False
    c = _cls(x)
    return True if c == "fin" else False if c != "indet" else _undecided()


FUNCTIONS.update({
    "add": add, "sub": sub, "mul": mul, "div": div, "rem": rem, "pow": pow_, "atan2": atan2,
    "max": maximum, "min": minimum, "lt": lt, "le": le, "gt": gt, "ge": ge, "eq": eq, "ne": ne,
    "is_finite": is_finite,
})


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
