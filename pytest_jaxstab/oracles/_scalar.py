"""Scalar real functions on mpmath numbers at a fixed precision: the arithmetic of the oracle.

Each float operation is a scalar function on raw mpmath tuples at a fixed precision, wrapped once per
``(operation, precision)`` in a ``numpy.frompyfunc`` ufunc and cached: applying it to an object array
costs one C-level loop plus mpmath's own work per element, about what a hand-written mpmath loop costs.

Domain: a result that is not a real number (``sqrt(-1)``, ``log(-1)``, ``acosh(0.5)``, ``0/0``,
``inf - inf``, ``x/0``) is NaN, never an error. Infinities follow the one-sided limit where the function
has one (``log(0) = -inf``, ``rsqrt(0) = inf``, ``atanh(1) = inf``, ``lgamma`` at a pole ``= inf``); where
the limit depends on the side (``1/0``, ``digamma(0)``, ``atan2(0, 0)``) the result is NaN. mpmath's zero
is unsigned, so a program's ``-0.0`` is just 0.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import mpmath
import numpy as np
from mpmath import libmp
from mpmath.libmp import ComplexResult, fnan, fninf, fone, fzero

from ._common import INF, MAG_LIMIT, NAN, NINF, ONE, RND, ZERO, beyond_reach, make

__all__ = ["ufunc"]

_finf = libmp.finf
_ftwo = libmp.ftwo
_fhalf = libmp.fhalf
_mpf_add, _mpf_sub, _mpf_mul, _mpf_div = libmp.mpf_add, libmp.mpf_sub, libmp.mpf_mul, libmp.mpf_div
_mpf_exp, _mpf_log, _mpf_neg = libmp.mpf_exp, libmp.mpf_log, libmp.mpf_neg
_mpf_lt, _mpf_gt, _mpf_pos = libmp.mpf_lt, libmp.mpf_gt, libmp.mpf_pos

# name -> factory(prec) -> scalar function on mpf (1 or 2 arguments)
_UNARY: dict[str, Callable[..., Callable[[Any], Any]]] = {}
_BINARY: dict[str, Callable[[int], Callable[[Any, Any], Any]]] = {}


def _unary(name: str) -> Callable[[Callable[..., Callable[[Any], Any]]], Any]:
    # factories take the precision (and, for integer_pow, the exponent)
    def register(factory: Callable[..., Callable[[Any], Any]]) -> Any:
        _UNARY[name] = factory
        return factory

    return register


def _binary(name: str) -> Callable[[Callable[[int], Callable[[Any, Any], Any]]], Any]:
    def register(factory: Callable[[int], Callable[[Any, Any], Any]]) -> Any:
        _BINARY[name] = factory
        return factory

    return register


@functools.cache
def ufunc(name: str, prec: int, arg: Any = None) -> np.ufunc:
    """The cached object ufunc computing ``name`` at ``prec`` bits (``arg``: integer_pow's exponent)."""
    if name in _BINARY:
        return np.frompyfunc(_BINARY[name](prec), 2, 1)
    factory = _UNARY[name]
    fn = factory(prec) if arg is None else factory(prec, arg)  # type: ignore[call-arg]
    return np.frompyfunc(fn, 1, 1)


def _is_int(r: tuple) -> bool:
    return r[2] >= 0 or not r[1]


def _lift(raw: Callable[..., Any], guard: Callable[[tuple], Any] | None = None) -> Callable:
    """A factory for ``raw(x, prec, rnd)``: ComplexResult (outside the real domain) becomes NaN."""

    def factory(prec: int) -> Callable[[Any], Any]:
        def f(x: Any) -> Any:
            r = x._mpf_
            if guard is not None and r[1] and r[2] + r[3] > MAG_LIMIT:
                return guard(r)
            try:
                return make(raw(r, prec, RND))
            except ComplexResult:
                return NAN

        return f

    return factory


def _saturate(pos: Any, neg: Any) -> Callable[[tuple], Any]:
    return lambda r: beyond_reach(neg if r[0] else pos)


# ------------------------------------------------------------------------------------- unary float
_unary("exp")(_lift(_mpf_exp, _saturate(INF, ZERO)))
_unary("sin")(_lift(libmp.mpf_sin, _saturate(NAN, NAN)))
_unary("cos")(_lift(libmp.mpf_cos, _saturate(NAN, NAN)))
_unary("tan")(_lift(libmp.mpf_tan, _saturate(NAN, NAN)))
_unary("asin")(_lift(libmp.mpf_asin))
_unary("acos")(_lift(libmp.mpf_acos))
_unary("atan")(_lift(libmp.mpf_atan))
_unary("sinh")(_lift(libmp.mpf_sinh, _saturate(INF, NINF)))
_unary("cosh")(_lift(libmp.mpf_cosh, _saturate(INF, INF)))
# tanh and erf of such arguments are +-1 at any working precision: exact stand-ins, no flag.
_unary("tanh")(_lift(libmp.mpf_tanh, lambda r: -ONE if r[0] else ONE))
_unary("asinh")(_lift(libmp.mpf_asinh))
_unary("acosh")(_lift(libmp.mpf_acosh))
_unary("atanh")(_lift(libmp.mpf_atanh))
_unary("log")(_lift(_mpf_log))
_unary("sqrt")(_lift(libmp.mpf_sqrt))
_unary("erf")(_lift(libmp.mpf_erf, lambda r: -ONE if r[0] else ONE))
_unary("erfc")(_lift(libmp.mpf_erfc, _saturate(ZERO, make(_ftwo))))


@_unary("neg")
def _neg(prec: int) -> Callable[[Any], Any]:
    return lambda x: make(_mpf_neg(x._mpf_))


@_unary("abs")
def _abs(prec: int) -> Callable[[Any], Any]:
    return lambda x: make(libmp.mpf_abs(x._mpf_))


@_unary("sign")
def _sign(prec: int) -> Callable[[Any], Any]:
    def f(x: Any) -> Any:
        r = x._mpf_
        if r == fnan:
            return NAN
        return ZERO if r == fzero else (-ONE if r[0] else ONE)

    return f


@_unary("floor")
def _floor(prec: int) -> Callable[[Any], Any]:
    return lambda x: make(libmp.mpf_floor(x._mpf_))


@_unary("ceil")
def _ceil(prec: int) -> Callable[[Any], Any]:
    return lambda x: make(libmp.mpf_ceil(x._mpf_))


def _round_raw(r: tuple, ties_even: bool) -> tuple:
    """``r`` rounded to an integer, ties away from zero or to even, exactly."""
    sign, man, exp, _ = r
    if not man or exp >= 0:
        return r
    shift = -exp
    q = man >> shift
    rest = man - (q << shift)
    half = 1 << (shift - 1)
    if rest > half or (rest == half and (not ties_even or q & 1)):
        q += 1
    return libmp.from_int(-q if sign else q)


@_unary("round_away")
def _round_away(prec: int) -> Callable[[Any], Any]:
    return lambda x: make(_round_raw(x._mpf_, False))


@_unary("round_even")
def _round_even(prec: int) -> Callable[[Any], Any]:
    return lambda x: make(_round_raw(x._mpf_, True))


@_unary("is_finite")
def _is_finite(prec: int) -> Callable[[Any], Any]:
    return lambda x: bool(x._mpf_[1]) or x._mpf_ == fzero


@_unary("square")
def _square(prec: int) -> Callable[[Any], Any]:
    return lambda x: make(_mpf_mul(x._mpf_, x._mpf_, prec, RND))


@_unary("cbrt")
def _cbrt(prec: int) -> Callable[[Any], Any]:
    def f(x: Any) -> Any:
        r = x._mpf_
        y = libmp.mpf_cbrt(libmp.mpf_abs(r), prec, RND)  # the real root: odd, so sign * cbrt(|x|)
        return make(_mpf_neg(y) if r[0] else y)

    return f


@_unary("rsqrt")
def _rsqrt(prec: int) -> Callable[[Any], Any]:
    def f(x: Any) -> Any:
        r = x._mpf_
        if r == fzero:
            return INF  # one-sided limit at the edge of the domain
        try:
            return make(_mpf_div(fone, libmp.mpf_sqrt(r, prec + 10, RND), prec, RND))
        except ComplexResult:
            return NAN

    return f


@_unary("exp2")
def _exp2(prec: int) -> Callable[[Any], Any]:
    def f(x: Any) -> Any:
        r = x._mpf_
        if not r[1]:
            return {fzero: ONE, _finf: INF, fninf: ZERO}.get(r, NAN)
        if r[2] + r[3] > MAG_LIMIT:
            return beyond_reach(ZERO if r[0] else INF)
        if r[2] >= 0:  # an integer power of two: exact, whatever its size
            n = libmp.to_int(r)
            return make((0, libmp.MPZ_ONE, n, 1))
        return make(libmp.mpf_pow(_ftwo, r, prec, RND))

    return f


@_unary("log1p")
def _log1p(prec: int) -> Callable[[Any], Any]:
    def f(x: Any) -> Any:
        r = x._mpf_
        if not r[1]:
            return NAN if r == fninf else make(r)
        mag = r[2] + r[3]
        if mag < -(prec + 4):
            # log1p(x) = x (1 - x/2 + ...): x itself is within 2**-(prec+4) relatively.
            return make(_mpf_pos(r, prec, RND))
        # 1 + x rounded with enough bits to keep x's own relative accuracy.
        t = _mpf_add(fone, r, prec + 20 + max(0, -mag), RND)
        if t == fzero:
            return NINF
        try:
            return make(_mpf_log(t, prec, RND))
        except ComplexResult:
            return NAN

    return f


@_unary("expm1")
def _expm1(prec: int) -> Callable[[Any], Any]:
    def f(x: Any) -> Any:
        r = x._mpf_
        if not r[1]:
            return {fninf: -ONE, _finf: INF}.get(r, make(r))
        mag = r[2] + r[3]
        if mag < -(prec + 4):
            return make(_mpf_pos(r, prec, RND))  # expm1(x) = x (1 + x/2 + ...)
        if mag > MAG_LIMIT:
            return beyond_reach(-ONE if r[0] else INF)
        t = _mpf_exp(r, prec + 20 + max(0, -mag), RND)
        return make(_mpf_sub(t, fone, prec, RND))

    return f


@_unary("logistic")
def _logistic(prec: int) -> Callable[[Any], Any]:
    def f(x: Any) -> Any:
        r = x._mpf_
        if not r[1]:
            return {fzero: make(_fhalf), _finf: ONE, fninf: ZERO}.get(r, NAN)
        if r[2] + r[3] > MAG_LIMIT:
            return beyond_reach(ZERO) if r[0] else ONE  # 1 - tiny is 1 at this precision: exact
        e = _mpf_exp(_mpf_neg(r), prec + 10, RND)
        return make(_mpf_div(fone, _mpf_add(fone, e, prec + 10, RND), prec, RND))

    return f


@_unary("erf_inv")
def _erf_inv(prec: int) -> Callable[[Any], Any]:
    lo, hi = libmp.from_int(-1), fone

    def f(x: Any) -> Any:
        r = x._mpf_
        if r == fnan or _mpf_lt(r, lo) or _mpf_gt(r, hi):
            return NAN
        if r == hi:
            return INF
        if r == lo:
            return NINF
        return mpmath.erfinv(x)  # at the global precision, which the interpreter sets to prec

    return f


@_unary("lgamma")
def _lgamma(prec: int) -> Callable[[Any], Any]:
    def f(x: Any) -> Any:
        r = x._mpf_
        if r == fninf:
            return NAN  # log|gamma| has no limit at -inf (poles all the way)
        if r == fzero or (r[0] and _is_int(r)):
            return INF  # a pole: |gamma| -> inf from both sides
        if r[0]:
            # Negative non-integer: lgamma is log|gamma(x)|, the real part of the complex log-gamma.
            return mpmath.loggamma(x).real
        return make(libmp.mpf_loggamma(r, prec, RND))

    return f


@_unary("digamma")
def _digamma(prec: int) -> Callable[[Any], Any]:
    def f(x: Any) -> Any:
        r = x._mpf_
        if r == fninf:
            return NAN
        try:
            return make(libmp.mpf_psi0(r, prec, RND))
        except ValueError:
            return NAN  # a pole: -inf on one side, +inf on the other

    return f


@_unary("integer_pow")
def _integer_pow(prec: int, n: int) -> Callable[[Any], Any]:
    def f(x: Any) -> Any:
        r = x._mpf_
        if r == fnan:
            return NAN
        if r == fzero and n < 0:
            return INF if n % 2 == 0 else NAN  # 1/x**n at 0: +inf for even n, no limit for odd
        return make(libmp.mpf_pow_int(r, n, prec, RND))

    return f


# ------------------------------------------------------------------------------------ binary float
@_binary("add")
def _add(prec: int) -> Callable[[Any, Any], Any]:
    return lambda a, b: make(_mpf_add(a._mpf_, b._mpf_, prec, RND))


@_binary("sub")
def _sub(prec: int) -> Callable[[Any, Any], Any]:
    return lambda a, b: make(_mpf_sub(a._mpf_, b._mpf_, prec, RND))


@_binary("mul")
def _mul(prec: int) -> Callable[[Any, Any], Any]:
    return lambda a, b: make(_mpf_mul(a._mpf_, b._mpf_, prec, RND))


@_binary("div")
def _div(prec: int) -> Callable[[Any, Any], Any]:
    def f(a: Any, b: Any) -> Any:
        rb = b._mpf_
        if rb == fzero:
            return NAN  # x/0 has no two-sided limit, 0/0 no value
        return make(_mpf_div(a._mpf_, rb, prec, RND))

    return f


@_binary("rem")
def _rem(prec: int) -> Callable[[Any, Any], Any]:
    def f(a: Any, b: Any) -> Any:
        ra, rb = a._mpf_, b._mpf_
        if rb in (fzero, fnan) or (not ra[1] and ra != fzero):
            return NAN  # x rem 0, inf rem y, nan
        if ra == fzero or not rb[1]:
            return make(ra)  # 0 rem y = 0; x rem inf = x
        # fmod exactly: |a| mod |b| on integers at the common exponent, with a's sign.
        sa, ma, ea, _ = ra
        _, mb, eb, bcb = rb
        e = min(ea, eb)
        # Integer work grows with the exponent gap; float64's whole range (2**1024 / 2**-1074) fits.
        if ea - e + ra[3] - (eb - e + bcb) > 4 * MAG_LIMIT:
            return beyond_reach(NAN)
        r = (ma << (ea - e)) % (mb << (eb - e))
        return make(libmp.from_man_exp(-r if sa else r, e, prec, RND))

    return f


@_binary("pow")
def _pow(prec: int) -> Callable[[Any, Any], Any]:
    def f(a: Any, b: Any) -> Any:
        x, y = a._mpf_, b._mpf_
        if x == fnan or y == fnan:
            return NAN
        if y == fzero:
            return ONE  # x**0 = 1 (also 0**0 and inf**0, the usual convention)
        y_int = _is_int(y) and y[1]
        if not y[1]:  # y = +-inf: the limit of x**y as y grows
            ax = libmp.mpf_abs(x)
            if ax == fone:
                return ONE if not x[0] else NAN
            big = _mpf_gt(ax, fone)
            if x[0] and big:
                return NAN  # (-2)**y oscillates in sign
            return INF if big != bool(y[0]) else ZERO
        if x == fzero:
            if not y[0]:
                return ZERO
            odd = y_int and y[2] == 0  # normalized mantissas are odd: exp 0 means an odd integer
            return NAN if odd else INF
        if x[0] and not y_int:
            return NAN  # a negative base to a non-integer power is complex
        if not x[1]:  # +-inf
            if y[0]:
                return ZERO
            odd = y_int and y[2] == 0
            return NINF if x[0] and odd else INF
        # Guard: |y log2|x|| beyond 2**MAG_LIMIT would take unbounded time and memory.
        lg = libmp.mpf_mul(y, _mpf_log(libmp.mpf_abs(x), 32, RND), 32, RND)
        if lg[1] and lg[2] + lg[3] > MAG_LIMIT:
            return beyond_reach(ZERO if lg[0] else INF)
        if y_int:
            return make(libmp.mpf_pow_int(x, libmp.to_int(y), prec, RND))
        return make(libmp.mpf_pow(x, y, prec, RND))

    return f


@_binary("atan2")
def _atan2(prec: int) -> Callable[[Any, Any], Any]:
    def f(a: Any, b: Any) -> Any:
        y, x = a._mpf_, b._mpf_
        if y == fzero and x == fzero:
            return NAN  # the angle of the origin is undefined
        if not y[1] and y != fzero and not x[1] and x != fzero:
            return NAN  # both infinite (or NaN): no limit
        return make(libmp.mpf_atan2(y, x, prec, RND))

    return f


def _minmax(pick_first: Callable[[tuple, tuple], bool]) -> Callable[[int], Callable]:
    def factory(prec: int) -> Callable[[Any, Any], Any]:
        def f(a: Any, b: Any) -> Any:
            ra, rb = a._mpf_, b._mpf_
            if ra == fnan or rb == fnan:
                return NAN  # lax.max/min propagate NaN
            return a if pick_first(ra, rb) else b

        return f

    return factory


_binary("max")(_minmax(libmp.mpf_ge))
_binary("min")(_minmax(libmp.mpf_le))

_CMP = {"eq": libmp.mpf_eq, "lt": _mpf_lt, "le": libmp.mpf_le, "gt": _mpf_gt, "ge": libmp.mpf_ge}
for _name, _fn in _CMP.items():
    _binary(_name)(lambda prec, _fn=_fn: lambda a, b: _fn(a._mpf_, b._mpf_))
_binary("ne")(lambda prec: lambda a, b: not libmp.mpf_eq(a._mpf_, b._mpf_))
