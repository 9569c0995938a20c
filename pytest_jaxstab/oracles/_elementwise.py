"""Exact semantics of the elementwise primitives (arithmetic, transcendental, comparisons, casts).

Float operands are object arrays of mpf, mapped through the cached ufuncs of ``_scalar`` (whose
docstring states the domain conventions: NaN outside the real domain, limits at the edges). Integer and
boolean operands use numpy with the program's own dtype and C semantics (truncating division,
wrap-around).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from mpmath import libmp
from mpmath.libmp import fnan, fninf, fzero

from ._common import Rule, ints_to_mpf, is_float, make, obj, out_aval
from ._rounding import round_to_dtype, to_mpf_array
from ._scalar import ufunc

__all__ = ["RULES"]

_finf = libmp.finf
_mpf_lt, _mpf_gt = libmp.mpf_lt, libmp.mpf_gt


def _float_unary(name: str) -> Rule:
    def rule(ctx: Any, eqn: Any, x: np.ndarray) -> np.ndarray:
        return obj(ufunc(name, ctx.prec)(x))

    return rule


def _int_fns() -> dict[str, Callable[..., np.ndarray]]:
    def div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        # C semantics (XLA): truncate toward zero; x / 0 = -1 (all bits set).
        safe = np.where(b == 0, 1, b)
        q = np.abs(a) // np.abs(safe)
        q = np.where((a < 0) != (safe < 0), -q, q)
        return np.where(b == 0, -1, q).astype(np.result_type(a, b))

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
    """A rule for an operation defined on floats (as mpf) and on integers/booleans (as numpy)."""

    def rule(ctx: Any, eqn: Any, *args: np.ndarray) -> np.ndarray:
        if _any_float(args):
            return obj(ufunc(name, ctx.prec)(*args))
        with np.errstate(all="ignore"):  # the program's own integer wrap-around
            return np.asarray(_INT[name](*args))

    return rule


def _comparison(name: str) -> Rule:
    def rule(ctx: Any, eqn: Any, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if _any_float((a, b)):
            return np.asarray(ufunc(name, ctx.prec)(a, b), dtype=bool)
        return np.asarray(_INT[name](a, b))

    return rule


def _is_finite_rule(ctx: Any, eqn: Any, x: np.ndarray) -> np.ndarray:
    return np.asarray(ufunc("is_finite", ctx.prec)(x), dtype=bool)


def _round_rule(ctx: Any, eqn: Any, x: np.ndarray) -> np.ndarray:
    method = int(eqn.params.get("rounding_method", 0))  # 0: away from zero, 1: to nearest even
    return obj(ufunc("round_even" if method == 1 else "round_away", ctx.prec)(x))


def _integer_pow_rule(ctx: Any, eqn: Any, x: np.ndarray) -> np.ndarray:
    y = int(eqn.params["y"])
    if x.dtype != object:
        with np.errstate(all="ignore"):
            return np.asarray(np.power(x, y) if y >= 0 else np.zeros_like(x))
    return obj(ufunc("integer_pow", ctx.prec, y)(x))


def _pow_rule(ctx: Any, eqn: Any, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    if y.dtype != object:
        y = ints_to_mpf(y)  # lax.pow accepts an integer exponent
    return obj(ufunc("pow", ctx.prec)(x, y))


def _polynomial(ctx: Any, eqn: Any, x: np.ndarray, *coeffs: np.ndarray) -> np.ndarray:
    # lax.polynomial(x, (a_0, ..., a_N)): Horner's rule, highest degree first, at the working precision.
    add, mul = ufunc("add", ctx.prec), ufunc("mul", ctx.prec)
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
        return obj(ufunc("min", ctx.prec)(ufunc("max", ctx.prec)(x, lo), hi))
    return np.minimum(np.maximum(x, lo), hi)


def _float_to_int(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Truncation toward zero; NaN gives 0 and out-of-range values saturate (XLA's convert)."""
    info = np.iinfo(dtype)
    lo, hi = libmp.from_int(int(info.min)), libmp.from_int(int(info.max))

    def one(v: Any) -> int:
        r = v._mpf_
        if r == fnan:
            return 0
        if _mpf_lt(r, lo):
            return int(info.min)
        if _mpf_gt(r, hi):
            return int(info.max)
        return int(libmp.to_int(r))  # type: ignore[arg-type]  # truncates toward zero

    return np.asarray(np.frompyfunc(one, 1, 1)(x), dtype=object).astype(dtype)


def _convert(ctx: Any, eqn: Any, x: np.ndarray) -> np.ndarray:
    new = np.dtype(eqn.params["new_dtype"])
    if is_float(new):
        # Between floats the cast is the identity on the real values: roundings do not exist here.
        return x if x.dtype == object else ints_to_mpf(x)
    if x.dtype != object:
        return x != 0 if new.kind == "b" else x.astype(new)
    if new.kind == "b":
        return np.asarray(np.frompyfunc(lambda v: v._mpf_ != fzero, 1, 1)(x), dtype=bool)
    return _float_to_int(x, new)


def _round_to_format(r: tuple, exponent_bits: int, mantissa_bits: int) -> tuple:
    """``r`` rounded to nearest-even in a binary format with these field widths (subnormals, overflow)."""
    sign, man, exp, bc = r
    if not man:
        return r
    p = mantissa_bits + 1
    emax = (1 << (exponent_bits - 1)) - 1
    emin = 1 - emax
    quantum = max(exp + bc - 1, emin) - p + 1
    shift = quantum - exp
    if shift > 0:
        m = man >> shift
        rest = man - (m << shift)
        half = 1 << (shift - 1)
        if rest > half or (rest == half and m & 1):
            m += 1
        man, exp = m, quantum
    if man and man.bit_length() + exp - 1 > emax:
        return fninf if sign else _finf
    return libmp.from_man_exp(-man if sign else man, exp)


def _reduce_precision(ctx: Any, eqn: Any, x: np.ndarray) -> np.ndarray:
    # An explicit rounding the program asks for: applied, unlike the implicit roundings of its dtype.
    e, m = int(eqn.params["exponent_bits"]), int(eqn.params["mantissa_bits"])
    return obj(np.frompyfunc(lambda v: make(_round_to_format(v._mpf_, e, m)), 1, 1)(x))


def _nextafter(ctx: Any, eqn: Any, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    # A float operation with no real-number meaning: applied to the operands rounded to the dtype.
    dtype = np.dtype(out_aval(eqn).dtype)
    fa, fb = round_to_dtype(a, dtype), round_to_dtype(b, dtype)
    return to_mpf_array(np.nextafter(fa, fb))


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
    "atan2": lambda ctx, eqn, a, b: obj(ufunc("atan2", ctx.prec)(a, b)),
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
