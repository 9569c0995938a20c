"""Elementwise primitives on intervals: arithmetic, library functions, comparisons, selections, casts.

Each rule takes the equation and its operands (:class:`~._interval.Interval` for floats,
:class:`~._interval.Exact` for integers and booleans) and returns the result's enclosure. The Arb
path's conventions are kept (``core/_arb``): between floats ``convert_element_type`` is the identity
on the reals; float -> int truncates toward zero and saturates; a comparison is decided only where
the intervals do not overlap (or both are the same exact value), like ``core/_arb_binary``'s; a
comparison of a variable with itself is decided whatever its width. What cannot be decided is
*unknown* (an :class:`Exact`'s mask) or undecided (an interval's NaN midpoint), per element, and
everything computed from it is too. Integer-only equations run the Arb path's own numpy rules
(``primitives/_elementwise``): the program's integer arithmetic, wrap-around included.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ... import _compat
from ..primitives import _elementwise as _arb_rules
from ._decide import round_to_format
from ._interval import (
    LIBM_FLOOR,
    LIBM_REL,
    Exact,
    Interval,
    NotCovered,
    Value,
    add,
    div,
    ends,
    extremum,
    from_ends,
    hull,
    monotone,
    mul,
    neg,
    relative_up,
    sqrt,
    sub,
)

__all__ = ["FLOAT_RULES", "INT_RULES", "to_interval", "unknown_of"]

_EXACT_INT = 2 ** 53  # integers of at most this magnitude are exact float64 values


def to_interval(v: Value) -> Interval:
    """An operand as an interval: integers and booleans exactly (beyond 2^53: undecided)."""
    if isinstance(v, Interval):
        return v
    value = np.asarray(v.value)
    with np.errstate(invalid="ignore"):
        f = value.astype(np.float64)
        ok = ~v.mask()
        if value.dtype != bool:
            ok &= (value <= _EXACT_INT) & (value >= -_EXACT_INT)
    return Interval.make(np.where(ok, f, np.nan), np.zeros(f.shape))


def unknown_of(*values: Value) -> np.ndarray | None:
    """Where any operand (broadcast together) is not decided, or None when all are."""
    masks = [v.bad if isinstance(v, Interval) else v.unknown for v in values]
    masks = [m for m in masks if m is not None and np.any(m)]
    if not masks:
        return None
    return np.logical_or.reduce(np.broadcast_arrays(*masks))


# ------------------------------------------------------------------------------------- functions
def _logistic(v: np.ndarray) -> np.ndarray:
    e = np.exp(-np.abs(v))  # never overflows: the branch for each sign keeps the exponent <= 0
    return np.where(v >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def _softplus(v: np.ndarray) -> np.ndarray:
    # log(1 + e^v) = max(v, 0) + log1p(e^-|v|): two library calls and one addition of non-negative
    # terms, each relative (log1p's conditioning on (0, 1] is below 1): within 2 LIBM_REL + 2 ulps.
    return np.maximum(v, 0.0) + np.log1p(np.exp(-np.abs(v)))


def _positive(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    return lo > 0


#: ``name -> (numpy function, increasing, relative error, exact point (x, f(x)), domain)``. Two library
#: calls or a library call and a few correctly rounded steps: twice LIBM_REL (see ``_interval``).
_MONOTONE: dict[str, tuple[Callable[..., Any], bool, float, tuple[float, float] | None, Any]] = {
    "exp": (np.exp, True, LIBM_REL, (0.0, 1.0), None),
    "exp2": (np.exp2, True, LIBM_REL, (0.0, 1.0), None),
    "expm1": (np.expm1, True, LIBM_REL, (0.0, 0.0), None),
    "log": (np.log, True, LIBM_REL, (1.0, 0.0), _positive),
    "log1p": (np.log1p, True, LIBM_REL, (0.0, 0.0), lambda lo, hi: lo > -1),
    "tanh": (np.tanh, True, LIBM_REL, (0.0, 0.0), None),
    "logistic": (_logistic, True, 2 * LIBM_REL, (0.0, 0.5), None),
    "sinh": (np.sinh, True, LIBM_REL, (0.0, 0.0), None),
    "asinh": (np.arcsinh, True, LIBM_REL, (0.0, 0.0), None),
    "atan": (np.arctan, True, LIBM_REL, (0.0, 0.0), None),
    "cbrt": (np.cbrt, True, LIBM_REL, (0.0, 0.0), None),
    # 1 / sqrt: two correctly rounded steps, within 2^-52 relative; 2^-50 to spare.
    "rsqrt": (lambda v: 1.0 / np.sqrt(v), False, 2.0 ** -50, (1.0, 1.0), _positive),
}

#: The library routines (``oracles/library``) simple enough to enclose here, by their formulas.
ROUTINES: dict[str, Callable[[Interval], Interval]] = {
    "softplus": lambda x: monotone(x, _softplus, rel=2 * LIBM_REL),
    "log_sigmoid": lambda x: neg(monotone(neg(x), _softplus, rel=2 * LIBM_REL)),
    "silu": lambda x: mul(x, monotone(x, _logistic, rel=2 * LIBM_REL)),
}


#: Where ``tanh`` and ``logistic`` saturate: the least ``|x|`` from which the value is kept as its limit
#: (``+-1``, ``1``) with the complement's bound as the radius (:func:`_saturated`).
_SATURATION = {"tanh": 20.0, "logistic": 40.0}


def _saturated(name: str, x: Interval, out: Interval) -> Interval:
    """``tanh`` and ``logistic`` where they saturate, enclosed about their limit: ``1 - tanh(m) =
    2/(e^(2m) + 1) < 2e^(-2m)`` and ``1 - logistic(m) = 1/(e^m + 1) < e^(-m)`` for ``m > 0``, largest
    at the interval's least ``m``. The value itself as a midpoint rounds to the limit and costs its
    rounding error (2^-53 absolute), so ``1 + tanh(-30)`` (about 1e-26) would never be decided; about
    the exact limit the radius is the complement's bound alone, and ``0.5 x (1 + tanh(c x^3))`` (an
    approximate GELU far in its left tail) decides its underflowing result in float64."""
    lo, hi = ends(x.finite())
    with np.errstate(all="ignore"):
        least = np.fmin(np.abs(lo), np.abs(hi))
        if name == "tanh":
            sat = ((lo > 0) | (hi < 0)) & (least >= _SATURATION[name])
            limit, complement = np.sign(lo), 2.0 * np.exp(-2.0 * least)
        else:  # logistic: only the upper tail saturates to 1 (the lower one is e^x, relative already)
            sat = (lo > 0) & (least >= _SATURATION[name])
            limit, complement = np.ones_like(lo), np.exp(-least)
        if not sat.any():
            return out
        radius = relative_up(complement, 2 * LIBM_REL, LIBM_FLOOR)
    return Interval(np.where(sat, limit, out.mid), np.where(sat, radius, out.rad))


def _monotone_rule(name: str) -> Callable[..., Interval]:
    f, increasing, rel, at, domain = _MONOTONE[name]

    def rule(eqn: Any, x: Value) -> Interval:
        x = to_interval(x)
        out = monotone(x, f, increasing=increasing, rel=rel, floor=LIBM_FLOOR, domain=domain, at=at)
        if name in _SATURATION:
            return _saturated(name, x, out)
        if name == "exp" and np.isinf(x.mid).any():  # exp(-inf) = 0, exp(inf) = inf, exactly
            inf = np.isinf(x.mid)
            with np.errstate(over="ignore"):
                return Interval.make(np.where(inf, np.exp(x.mid), out.mid), np.where(inf, 0.0, out.rad),
                                     infinite=True)
        return out

    return rule


def _exact_floor(fn: Callable[[np.ndarray], np.ndarray]) -> Callable[..., Interval]:
    def rule(eqn: Any, x: Value) -> Interval:
        lo, hi = ends(to_interval(x).finite())
        return from_ends(fn(lo), fn(hi))  # integers: exact, the hull of every candidate

    return rule


def _abs(eqn: Any, x: Value) -> Interval:
    x = to_interval(x)
    return Interval(np.abs(x.mid), x.rad)  # 1-Lipschitz: | |x| - |m| | <= |x - m|


def _sign(eqn: Any, x: Value) -> Interval:
    x = to_interval(x)
    lo, hi = ends(x)
    with np.errstate(invalid="ignore"):
        pos, negative, zero = lo > 0, hi < 0, (x.rad == 0) & (x.mid == 0)
        mid = np.where(pos, 1.0, np.where(negative, -1.0, np.where(zero | (lo < 0) & (hi > 0), 0.0,
                                                                   np.where(lo >= 0, 0.5, -0.5))))
        rad = np.where(pos | negative | zero, 0.0, np.where((lo < 0) & (hi > 0), 1.0, 0.5))
    return Interval.make(np.where(x.bad, np.nan, mid), rad)


def _integer_pow(eqn: Any, x: Value) -> Value:
    n = int(eqn.params["y"])
    if isinstance(x, Exact):
        return _int_rule("integer_pow")(eqn, x)
    return power(x, n)


def power(x: Interval, n: int) -> Interval:
    """``x ** n`` for an integer ``n``: monotone on each side of 0, so its range over the interval is
    between its values at the ends (and 0, for an even power of an interval around 0)."""
    x = x.finite()
    if n == 0:
        return Interval.make(np.where(x.bad, np.nan, 1.0), np.zeros(x.shape))
    if n == 1:
        return x
    lo, hi = ends(x)
    around_zero = (lo < 0) & (hi > 0)
    with np.errstate(all="ignore"):
        if n < 0:  # no value at 0, unbounded near it
            lo, hi = np.where(around_zero | (lo == 0) | (hi == 0), np.nan, lo), hi
        f = np.square if n == 2 else (np.reciprocal if n == -1 else lambda v: np.power(v, float(n)))
        a, b = f(lo), f(hi)
        least = np.where(around_zero & (n % 2 == 0), 0.0, np.minimum(a, b))
        most = np.maximum(a, b)
        if n in (2, -1):  # correctly rounded
            out = from_ends(np.where(least == 0, 0.0, np.nextafter(least, -np.inf)),
                            np.nextafter(most, np.inf))
        else:
            out = hull([least, most], LIBM_REL, LIBM_FLOOR)
    if n == 2:  # an exact operand whose square is exact stays exact
        sq = mul(x, x)
        exact = (x.rad == 0) & (sq.rad == 0)
        return Interval(np.where(exact, sq.mid, out.mid), np.where(exact, 0.0, out.rad))
    return out


def _pow(eqn: Any, x: Value, y: Value) -> Interval:
    """``x ** y`` for a positive base (else undecided: the Arb path has the conventions there):
    ``exp(y log x)`` is monotone in ``y log x``, a bilinear function of ``(log x, y)``, so its range over
    the box is between its values at the four corners."""
    x, y = to_interval(x).finite(), to_interval(y).finite()
    lx, hx = ends(x)
    ly, hy = ends(y)
    with np.errstate(all="ignore"):
        lx = np.where(lx > 0, lx, np.nan)
        corners = [np.power(a, b) for a in (lx, hx) for b in (ly, hy)]
    out = hull(corners, LIBM_REL, LIBM_FLOOR)
    one = (y.rad == 0) & (y.mid == 0) & ~x.bad  # x ** 0 = 1 exactly
    return Interval(np.where(one, 1.0, out.mid), np.where(one, 0.0, out.rad))


def _binary(fn: Callable[[Interval, Interval], Interval]) -> Callable[..., Value]:
    def rule(eqn: Any, a: Value, b: Value) -> Value:
        if isinstance(a, Exact) and isinstance(b, Exact):
            return _int_rule(eqn.primitive.name)(eqn, a, b)
        return fn(to_interval(a), to_interval(b))

    return rule


# ------------------------------------------------------------------------------------ decisions
_REFLEXIVE = {"eq": True, "le": True, "ge": True, "ne": False, "lt": False, "gt": False}


def _comparison(name: str) -> Callable[..., Exact]:
    def rule(eqn: Any, a: Value, b: Value) -> Exact:
        if isinstance(a, Exact) and isinstance(b, Exact):
            return _int_rule(name)(eqn, a, b)
        a, b = to_interval(a), to_interval(b)
        if eqn.invars[0] is eqn.invars[1] and not _compat.is_literal(eqn.invars[0]):
            # The same variable: the same real (Arb's None, no value, is not told apart from undecided).
            return Exact(np.full(a.shape, _REFLEXIVE[name]), a.bad if a.bad.any() else None)
        la, ha = ends(a)
        lb, hb = ends(b)
        if name in ("gt", "ge"):
            la, ha, lb, hb = lb, hb, la, ha
        with np.errstate(invalid="ignore"):
            if name in ("lt", "gt"):
                true, false = ha < lb, la >= hb
            elif name in ("le", "ge"):
                true, false = ha <= lb, la > hb
            else:
                points = (a.rad == 0) & (b.rad == 0)
                true = points & (a.mid == b.mid)
                false = (ha < lb) | (hb < la) | points & (a.mid != b.mid)
                if name == "ne":
                    true, false = false, true
        unknown = ~(true | false) | a.bad | b.bad
        return Exact(np.asarray(true), unknown if unknown.any() else None)

    return rule


def _is_finite(eqn: Any, x: Value) -> Exact:
    x = to_interval(x)
    return Exact(np.isfinite(x.mid), x.bad if x.bad.any() else None)


def _select_n(eqn: Any, which: Value, *cases: Value) -> Value:
    if not isinstance(which, Exact):
        raise NotCovered("select_n on a float predicate")
    idx = np.asarray(which.value).astype(np.intp)
    pick = np.broadcast_arrays(idx, *[c.mid if isinstance(c, Interval) else c.value for c in cases])
    idx = pick[0]
    floats = [c for c in cases if isinstance(c, Interval)]
    if len(floats) == len(cases):
        rads = np.broadcast_arrays(idx, *[c.rad for c in floats])[1:]
        mid, rad = np.choose(idx, pick[1:], mode="clip"), np.choose(idx, rads, mode="clip")
        if which.unknown is not None and np.any(which.unknown):
            # An undecided choice is one of the cases: their hull encloses it (exact where they agree,
            # as a derivative's zero cotangent in both branches of a kink that float64 cannot place).
            bad = np.broadcast_to(which.unknown, mid.shape)
            bounds = [ends(c.broadcast(mid.shape)) for c in floats]
            with np.errstate(invalid="ignore"):
                lo = np.minimum.reduce([b[0] for b in bounds])
                hi = np.maximum.reduce([b[1] for b in bounds])
            hull = from_ends(lo, hi, infinite=True)
            mid, rad = np.where(bad, hull.mid, mid), np.where(bad, hull.rad, rad)
        return Interval.make(mid, rad, infinite=True)
    if not all(isinstance(c, Exact) for c in cases):
        raise NotCovered("select_n over floats and integers")
    value = np.choose(idx, pick[1:], mode="clip")
    masks = [np.broadcast_to(c.mask(), idx.shape) for c in cases]  # type: ignore[union-attr]
    unknown = np.choose(idx, masks, mode="clip") | np.broadcast_to(which.mask(), idx.shape)
    return Exact(value, unknown if unknown.any() else None)


def _clamp(eqn: Any, lo: Value, x: Value, hi: Value) -> Value:
    if all(isinstance(v, Exact) for v in (lo, x, hi)):
        return _int_rule("clamp")(eqn, lo, x, hi)
    x = extremum(to_interval(x), to_interval(lo), maximum=True)
    return extremum(x, to_interval(hi), maximum=False)


def _to_int(x: Interval, dtype: np.dtype) -> Exact:
    """Truncation toward zero, saturating as XLA does, decided where every point truncates alike."""
    info = np.iinfo(dtype)
    lo, hi = ends(x)
    big = float(min(int(info.max), 2 ** 62))
    small = float(max(int(info.min), -(2 ** 62)))
    with np.errstate(invalid="ignore"):
        below, above = hi < float(info.min), lo > float(info.max)
        fl, fh = np.floor(lo), np.floor(hi)
        cl, ch = np.ceil(lo), np.ceil(hi)
        zero = (lo > -1) & (hi < 1)
        t = np.where(zero, 0.0, np.where(lo > 0, fl, np.where(hi < 0, ch, np.nan)))
        same = zero | (lo > 0) & (fl == fh) | (hi < 0) & (cl == ch)
        inside = same & (t >= small) & (t <= big)
        value = np.where(inside, t, 0.0).astype(np.int64).astype(dtype)
    value = np.where(below, np.array(info.min, dtype), np.where(above, np.array(info.max, dtype), value))
    unknown = ~(inside | below | above) | x.bad
    return Exact(value, unknown if unknown.any() else None)


def _convert(eqn: Any, x: Value) -> Value:
    new = np.dtype(eqn.params["new_dtype"])
    if new.kind == "c":
        raise NotCovered("complex conversion")
    if new.kind == "f" or new.name == "bfloat16":
        return to_interval(x)  # between floats the identity on the reals, as the Arb path
    if isinstance(x, Exact):
        value = np.asarray(x.value)
        return Exact(value != 0 if new.kind == "b" else value.astype(new), x.unknown)
    if new.kind == "b":
        lo, hi = ends(x)
        with np.errstate(invalid="ignore"):
            true, false = (lo > 0) | (hi < 0), (x.rad == 0) & (x.mid == 0)
        unknown = ~(true | false) | x.bad
        return Exact(true, unknown if unknown.any() else None)
    return _to_int(x, new)


def _reduce_precision(eqn: Any, x: Value) -> Interval:
    """The rounding the program asks for: exact where both ends round to one value of the format."""
    e, m = int(eqn.params["exponent_bits"]), int(eqn.params["mantissa_bits"])
    emax = (1 << (e - 1)) - 1
    x = to_interval(x)
    lo, hi = ends(x)
    a, b = round_to_format(lo, m + 1, 1 - emax, emax), round_to_format(hi, m + 1, 1 - emax, emax)
    with np.errstate(invalid="ignore"):
        same = (a == b) & ~x.bad
    return Interval.make(np.where(same, np.where(a == 0, 0.0, a), np.nan), np.zeros(x.shape), infinite=True)


# ------------------------------------------------------------------------------------- integers
def _int_rule(name: str) -> Callable[..., Exact]:
    """An integer/boolean elementwise equation: the Arb path's numpy rule, unknown where any operand
    element is."""
    arb_rule = _arb_rules.RULES.get(name)
    if arb_rule is None:
        raise NotCovered(name)

    def rule(eqn: Any, *args: Value) -> Exact:
        if not all(isinstance(a, Exact) for a in args):
            raise NotCovered(f"{name} on floats and integers")
        out = arb_rule(None, eqn, *[np.asarray(a.value) for a in args])  # type: ignore[union-attr]
        return Exact(np.asarray(out), unknown_of(*args))

    return rule


INT_RULES: frozenset[str] = frozenset({
    "neg", "abs", "sign", "square", "add", "sub", "mul", "div", "rem", "max", "min", "eq", "ne", "lt",
    "le", "gt", "ge", "and", "or", "xor", "not", "shift_left", "shift_right_arithmetic", "integer_pow",
    "clamp", "select_n", "convert_element_type",
})


def _unary(fn: Callable[[Interval], Interval]) -> Callable[..., Value]:
    def rule(eqn: Any, x: Value) -> Value:
        if isinstance(x, Exact):
            return _int_rule(eqn.primitive.name)(eqn, x)
        return fn(x)

    return rule


#: ``name -> rule(eqn, *operands)`` for every elementwise primitive the fast path evaluates.
FLOAT_RULES: dict[str, Callable[..., Value]] = {name: _monotone_rule(name) for name in _MONOTONE}
FLOAT_RULES.update({
    "add": _binary(add), "add_any": _binary(add), "sub": _binary(sub), "mul": _binary(mul),
    "div": _binary(div), "max": _binary(lambda a, b: extremum(a, b, True)),
    "min": _binary(lambda a, b: extremum(a, b, False)),
    "neg": _unary(neg), "abs": _unary(lambda x: _abs(None, x)), "sign": _unary(lambda x: _sign(None, x)),
    "sqrt": lambda eqn, x: sqrt(to_interval(x)),
    "square": _unary(lambda x: power(x, 2)),
    "one_minus_square": _unary(lambda x: sub(Interval.exact(np.ones(x.shape)), power(x, 2))),
    "integer_pow": _integer_pow,
    "pow": _pow,
    "floor": _exact_floor(np.floor),
    "ceil": _exact_floor(np.ceil),
    "is_finite": _is_finite,
    "select_n": _select_n,
    "clamp": _clamp,
    "convert_element_type": _convert,
    "reduce_precision": _reduce_precision,
    **{name: _comparison(name) for name in _REFLEXIVE},
})
for _name in ("and", "or", "xor", "not", "shift_left", "shift_right_arithmetic", "rem"):
    FLOAT_RULES.setdefault(_name, lambda eqn, *args: _int_rule(eqn.primitive.name)(eqn, *args))
