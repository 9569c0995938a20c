"""Binary ball functions and the decisions (comparisons, ``is_finite``): see ``_arb`` for the conventions.

Arithmetic follows IEEE's limits on exact infinities (``inf - inf``, ``0 * inf``, ``x / 0``: no real
value); comparisons answer only what the balls prove and raise ``Undecided`` otherwise.
"""

from __future__ import annotations

from collections.abc import Callable

from flint import arb

from ._ball_util import Ball
from ._ball_util import cls as _cls
from ._ball_util import exact_int as _int
from ._ball_util import is_int_value as _is
from ._ball_util import sign_class as _sign_class
from ._common import INDET, NEG_INF, ONE, POS_INF, ZERO, Undecided

__all__ = ["BINARY", "add", "div", "eq", "integer_pow", "maximum", "minimum", "mul", "sub"]


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
    return None if a is None or b is None else add(a, -b)


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


BINARY: dict[str, Callable[..., Ball]] = {
    "add": add, "sub": sub, "mul": mul, "div": div, "rem": rem, "pow": pow_, "atan2": atan2,
    "max": maximum, "min": minimum, "lt": lt, "le": le, "gt": gt, "ge": ge, "eq": eq, "ne": ne,
    "is_finite": is_finite,
}
