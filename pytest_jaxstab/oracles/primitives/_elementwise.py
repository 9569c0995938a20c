"""Rigorous semantics of the elementwise primitives (arithmetic, transcendental, comparisons, casts).

Float operands are object arrays of Arb balls, mapped through the cached ufuncs of ``_arb`` (whose
docstring states the domain conventions: NaN outside the real domain, limits at the edges). Integer and
boolean operands use numpy with the program's own dtype and C semantics (truncating division,
wrap-around). Decisions that yield integers or booleans (comparisons, float -> int/bool conversion,
``is_finite``) raise ``Undecided`` where the balls straddle the decision point; the continuous-valued
discontinuous operations (floor, ceil, round, sign, max, min, clamp, rem) return balls covering every
candidate, which the final rounding then refuses to decide.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..core._arb import ufunc
from ..core._balls import round_ball_to_format, round_balls, to_arb_array
from ..core._common import Rule, Undecided, ints_to_arb, is_float, obj, out_aval

__all__ = ["RULES"]


def _float_unary(name: str) -> Rule:
    def rule(ctx: Any, eqn: Any, x: np.ndarray) -> np.ndarray:
        return obj(ufunc(name)(x))

    return rule


def _int_fns() -> dict[str, Callable[..., np.ndarray]]:
    def div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        # C semantics (XLA): truncate toward zero; x / 0 = -1 (all bits set).
        safe = np.where(b == 0, 1, b)
        q = np.abs(a) // np.abs(safe)
        q = np.where((a < 0) != (safe < 0), -q, q)
        dtype = np.result_type(a, b)
        return np.where(b == 0, ~np.zeros((), dtype), q).astype(dtype)  # all bits set, unsigned too

    def rem(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.where(b == 0, a, np.fmod(a, np.where(b == 0, 1, b)))

    return {
        "neg": np.negative, "abs": np.abs, "sign": np.sign, "add": np.add, "sub": np.subtract,
        "mul": np.multiply, "div": div, "rem": rem, "max": np.maximum, "min": np.minimum,
        "eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
        "ge": np.greater_equal, "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor,
        "not": np.invert, "square": np.square, "shift_left": np.left_shift,
        "shift_right_arithmetic": np.right_shift,
    }


_INT = _int_fns()


def _any_float(args: tuple[np.ndarray, ...]) -> bool:
    return any(a.dtype == object for a in args)


def _polymorphic(name: str) -> Rule:
    """A rule for an operation defined on floats (as balls) and on integers/booleans (as numpy)."""

    def rule(ctx: Any, eqn: Any, *args: np.ndarray) -> np.ndarray:
        if _any_float(args):
            return obj(ufunc(name)(*args))
        with np.errstate(all="ignore"):  # the program's own integer wrap-around
            return np.asarray(_INT[name](*args))

    return rule


#: A comparison of a value with itself (``x != x``: ``jnp.isnan``) is decided whatever the ball's width:
#: whether each side of the relation holds when both operands are the same real (NaN: no relation holds).
_REFLEXIVE = {"eq": True, "le": True, "ge": True, "ne": False, "lt": False, "gt": False}


def _comparison(name: str) -> Rule:
    def rule(ctx: Any, eqn: Any, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if _any_float((a, b)) and a is b and eqn.invars[0] is eqn.invars[1]:
            real = np.asarray(np.frompyfunc(lambda v: v is not None, 1, 1)(a), dtype=bool)
            return real if _REFLEXIVE[name] else ~real
        if _any_float((a, b)):
            return np.asarray(ufunc(name)(a, b), dtype=bool)
        return np.asarray(_INT[name](a, b))

    return rule


def _is_finite_rule(ctx: Any, eqn: Any, x: np.ndarray) -> np.ndarray:
    return np.asarray(ufunc("is_finite")(x), dtype=bool)


def _round_rule(ctx: Any, eqn: Any, x: np.ndarray) -> np.ndarray:
    method = int(eqn.params.get("rounding_method", 0))  # 0: away from zero, 1: to nearest even
    return obj(ufunc("round_even" if method == 1 else "round_away")(x))


def _integer_pow_rule(ctx: Any, eqn: Any, x: np.ndarray) -> np.ndarray:
    y = int(eqn.params["y"])
    if x.dtype != object:
        with np.errstate(all="ignore"):
            return np.asarray(np.power(x, y) if y >= 0 else np.zeros_like(x))
    return obj(ufunc("integer_pow", y)(x))


def _pow_rule(ctx: Any, eqn: Any, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    if y.dtype != object:
        y = ints_to_arb(y)  # lax.pow accepts an integer exponent
    return obj(ufunc("pow")(x, y))


def _polynomial(ctx: Any, eqn: Any, x: np.ndarray, *coeffs: np.ndarray) -> np.ndarray:
    # lax.polynomial(x, (a_0, ..., a_N)): Horner's rule, highest degree first, at the working precision.
    add, mul = ufunc("add"), ufunc("mul")
    acc = coeffs[-1]
    for c in reversed(coeffs[:-1]):
        acc = add(mul(acc, x), c)
    return obj(acc)


def _logical(name: str) -> Rule:
    def rule(ctx: Any, eqn: Any, *args: np.ndarray) -> np.ndarray:
        if args[0].dtype == bool and name == "not":
            return np.logical_not(args[0])
        return np.asarray(_INT[name](*args))

    return rule


def _select_n(ctx: Any, eqn: Any, which: np.ndarray, *cases: np.ndarray) -> np.ndarray:
    idx = np.asarray(which).astype(np.intp)
    if len(cases) == 1:
        return np.broadcast_to(cases[0], np.broadcast_shapes(idx.shape, cases[0].shape))
    shape = np.broadcast_shapes(idx.shape, *(c.shape for c in cases))
    out = np.array(np.broadcast_to(cases[0], shape))
    idx = np.broadcast_to(idx, shape)
    for i, c in enumerate(cases[1:], start=1):
        mask = idx == i
        out[mask] = np.broadcast_to(c, shape)[mask]
    return out


def _clamp(ctx: Any, eqn: Any, lo: np.ndarray, x: np.ndarray, hi: np.ndarray) -> np.ndarray:
    if x.dtype == object:
        return obj(ufunc("min")(ufunc("max")(x, lo), hi))
    return np.minimum(np.maximum(x, lo), hi)


def _float_to_int(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Truncation toward zero; NaN gives 0 and out-of-range values saturate (XLA's convert).

    Raises Undecided where the ball straddles an integer (the truncation is not determined)."""
    info = np.iinfo(dtype)
    lo, hi = int(info.min), int(info.max)

    def one(v: Any) -> int:
        if v is None:
            return 0
        if v < lo:
            return lo
        if v > hi:
            return hi
        if not v.is_finite():
            raise Undecided
        if abs(v) < 1:
            return 0
        t = v.floor() if v > 0 else v.ceil() if v < 0 else None
        if t is None or not t.is_exact():
            raise Undecided
        return int(t.unique_fmpz())

    return np.asarray(np.frompyfunc(one, 1, 1)(x), dtype=object).astype(dtype)


def _nonzero(v: Any) -> bool:
    if v is None:
        return True  # NaN != 0
    if v.is_zero():
        return False
    if v > 0 or v < 0:
        return True
    raise Undecided


def _convert(ctx: Any, eqn: Any, x: np.ndarray) -> np.ndarray:
    new = np.dtype(eqn.params["new_dtype"])
    if is_float(new):
        # Between floats the cast is the identity on the real values: roundings do not exist here.
        return x if x.dtype == object else ints_to_arb(x)
    if x.dtype != object:
        return x != 0 if new.kind == "b" else x.astype(new)
    if new.kind == "b":
        return np.asarray(np.frompyfunc(_nonzero, 1, 1)(x), dtype=bool)
    return _float_to_int(x, new)


def _reduce_precision(ctx: Any, eqn: Any, x: np.ndarray) -> np.ndarray:
    # An explicit rounding the program asks for: applied, unlike the implicit roundings of its dtype.
    e, m = int(eqn.params["exponent_bits"]), int(eqn.params["mantissa_bits"])
    return obj(np.frompyfunc(lambda v: round_ball_to_format(v, e, m), 1, 1)(x))


def _nextafter(ctx: Any, eqn: Any, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    # A float operation with no real-number meaning: applied to the operands rounded to the dtype.
    dtype = np.dtype(out_aval(eqn).dtype)
    (fa, da), (fb, db) = round_balls(a, dtype), round_balls(b, dtype)
    if not (da.all() and db.all()):
        raise Undecided
    return to_arb_array(np.nextafter(fa, fb))


RULES: dict[str, Rule] = {
    name: _float_unary(name)
    for name in (
        "exp", "exp2", "log", "log1p", "expm1", "sqrt", "rsqrt", "cbrt", "sin", "cos", "tan", "asin",
        "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "logistic", "erf", "erfc",
        "erf_inv", "lgamma", "digamma", "floor", "ceil",
    )
}
RULES.update({name: _polymorphic(name) for name in ("neg", "abs", "sign", "square", "add", "sub", "mul",
                                                    "div", "rem", "max", "min")})
RULES.update({name: _comparison(name) for name in ("eq", "ne", "lt", "le", "gt", "ge")})
RULES.update({name: _logical(name) for name in ("and", "or", "xor", "not", "shift_left",
                                                "shift_right_arithmetic")})
RULES.update({
    "atan2": lambda ctx, eqn, a, b: obj(ufunc("atan2")(a, b)),
    "add_any": RULES["add"],  # the sum of cotangents in derivative programs
    "polynomial": _polynomial,
    "pow": _pow_rule,
    "integer_pow": _integer_pow_rule,
    "is_finite": _is_finite_rule,
    "round": _round_rule,
    "select_n": _select_n,
    "clamp": _clamp,
    "convert_element_type": _convert,
    "reduce_precision": _reduce_precision,
    "nextafter": _nextafter,
})
