"""The IEEE 754-2019 operations ``jax.lax`` made primitives in JAX 0.12.1, on Arb balls.

``sinpi``, ``cospi``, ``tanpi``, ``asinpi``, ``acospi``, ``atanpi``, ``atan2pi`` (the trigonometric functions
scaled by pi), ``exp2m1``, ``log2p1``, and the fused products ``fma`` and ``fmuladd``. Each is the real
function its name states, enclosed by Arb (``sin_pi``, ``cos_pi``, ``tan_pi`` reduce an exact argument
exactly, whatever its size), with the oracle's conventions (``_arb``): NaN where no real value exists,
zero unsigned. The values IEEE 754-2019 names, which JAX implements, are kept exact, because a ball
around them would never round to one float:

* ``sinpi(n) = 0``, ``cospi(n + 1/2) = 0``, ``tanpi(n) = 0`` for integers ``n``; NaN at ``+-inf``;
* ``tanpi(n + 1/2)`` is ``+inf`` for even ``n`` and ``-inf`` for odd ``n`` (IEEE's odd-symmetric choice at
  the poles, which JAX follows; a ball that straddles a pole without being it is undecided);
* ``asinpi``/``acospi`` on ``[-1, 1]`` (NaN outside), ``acospi(1) = 0``; ``atanpi(+-inf) = +-1/2``;
* ``atan2pi(y, x) = atan2(y, x) / pi``, JAX's argument order (``lax.atan2pi(x, y)`` names its first
  operand ``x``: it is the ordinate). The origin has no angle (NaN, as ``atan2``). On the negative
  ``x`` axis (``y`` exactly 0, ``x < 0``) IEEE returns ``+1`` or ``-1`` by the sign of the zero, which the
  reals do not have: the element is undecided, so it ends *uncertain*, never guessed (as the complex
  branch cuts, docs/architecture.md "The oracle"). Infinite operands give the IEEE limits
  (``atan2pi(+-inf, +-inf) = +-1/4, +-3/4``);
* ``exp2m1(x) = 2^x - 1`` (``-1`` at ``-inf``), exact ``2^n - 1`` at an integer ``n`` (``2^54 - 1`` is a tie
  in float64: only the exact value rounds to even); ``log2p1(x) = log2(1 + x)``: ``-inf`` at ``-1``, NaN
  below;
* ``fma(a, b, c) = a * b + c`` rounded once: the exact real ``a b + c``, with IEEE's NaN for ``0 * inf``
  and ``inf - inf``; ``fmuladd`` (a product and a sum the compiler may fuse) has the same exact value.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
from flint import arb

from ..core._arb import FUNCTIONS
from ..core._arb_binary import add, atan2, div, mul
from ..core._ball_util import Ball
from ..core._ball_util import cls as _cls
from ..core._ball_util import exact_int as _int
from ..core._common import INDET, NEG_INF, ONE, POS_INF, ZERO, Rule, obj

__all__ = ["FUNCTIONS_IEEE", "RULES"]

HALF = arb(0.5)


def _exact_int(x: arb) -> int | None:
    """The integer ``x`` is, when it is an exact integer ball; else None."""
    return _int(x) if x.is_exact() and x.is_finite() and x.is_integer() else None


def _half_turn(x: arb) -> int | None:
    """``n`` when ``x`` is exactly ``n + 1/2``; else None."""
    return _exact_int(x - HALF) if x.is_exact() and x.is_finite() else None


def _periodic(exact: Callable[[arb], Ball]) -> Callable[[Ball], Ball]:
    """``sinpi``/``cospi``/``tanpi``: NaN at +-inf and for NaN; undecided for an indeterminate ball."""

    def f(x: Ball) -> Ball:
        if x is None:
            return None
        c = _cls(x)
        if c in ("+inf", "-inf"):
            return None
        if c == "indet":
            return INDET
        r = exact(x)
        return r if r is None or r.is_finite() or r.is_exact() else INDET

    return f


@_periodic
def _sinpi(x: arb) -> Ball:
    return ZERO if _exact_int(x) is not None else x.sin_pi()


@_periodic
def _cospi(x: arb) -> Ball:
    return ZERO if _half_turn(x) is not None else x.cos_pi()


@_periodic
def _tanpi(x: arb) -> Ball:
    if _exact_int(x) is not None:
        return ZERO
    n = _half_turn(x)
    if n is not None:  # IEEE 754-2019 9.2.1: +inf for even n, -inf for odd n
        return POS_INF if n % 2 == 0 else NEG_INF
    return x.tan_pi()  # a ball holding a pole is not finite: undecided


def _over_pi(r: Ball) -> Ball:
    """``r / pi`` with ``r``'s conventions (None stays None, an indeterminate ball stays so)."""
    if r is None or r.is_zero():
        return r
    return r / arb.pi() if r.is_finite() else INDET


def _asinpi(x: Ball) -> Ball:
    return _over_pi(FUNCTIONS["asin"](x))


def _acospi(x: Ball) -> Ball:
    if x is not None and x.is_exact() and x == -1:
        return ONE
    return _over_pi(FUNCTIONS["acos"](x))  # acos(1) is Arb's exact 0


def _atanpi(x: Ball) -> Ball:
    if x is not None and _cls(x) in ("+inf", "-inf"):
        return HALF if x > 0 else -HALF
    return _over_pi(FUNCTIONS["atan"](x))


def _atan2pi(y: Ball, x: Ball) -> Ball:
    if y is None or x is None:
        return None
    cy, cx = _cls(y), _cls(x)
    if "indet" in (cy, cx):
        return INDET
    if cy != "fin" and cx != "fin":  # both infinite: IEEE's quarter turns
        quarter = arb(0.25) if cx == "+inf" else arb(0.75)
        return quarter if cy == "+inf" else -quarter
    if y.is_zero() and x.is_exact() and x < 0:
        return INDET  # +-1 by the sign of a zero the reals do not carry: never decided
    r = atan2(y, x)
    if r is None or not r.is_finite() or r.is_exact():
        return r  # the origin (None), an exact 0, or undecided
    return r / arb.pi()


def _exp2m1(x: Ball) -> Ball:
    if x is None:
        return None
    if _cls(x) == "fin":
        n = _exact_int(x)
        if n is not None and abs(n) <= 1 << 20:
            return arb((1, n)) - ONE  # 2^n - 1, exact at the working precision for |n| below it
        return FUNCTIONS["expm1"](x * arb(2).log())
    return FUNCTIONS["expm1"](x)  # +inf -> +inf, -inf -> -1, indeterminate -> undecided


def _log2p1(x: Ball) -> Ball:
    r = FUNCTIONS["log1p"](x)
    if r is None or r.is_zero() or not r.is_finite():
        return r  # NaN below -1, -inf at -1, +inf at +inf, exact 0 at 0, undecided
    return div(r, arb(2).log())


def _fma(a: Ball, b: Ball, c: Ball) -> Ball:
    return add(mul(a, b), c)


FUNCTIONS_IEEE: dict[str, Callable[..., Ball]] = {
    "sinpi": _sinpi,
    "cospi": _cospi,
    "tanpi": _tanpi,
    "asinpi": _asinpi,
    "acospi": _acospi,
    "atanpi": _atanpi,
    "atan2pi": _atan2pi,
    "exp2m1": _exp2m1,
    "log2p1": _log2p1,
    "fma": _fma,
    "fmuladd": _fma,
}

_ARITY = {"atan2pi": 2, "fma": 3, "fmuladd": 3}


@functools.cache
def _ufunc(name: str) -> np.ufunc:
    return np.frompyfunc(FUNCTIONS_IEEE[name], _ARITY.get(name, 1), 1)


def _rule(name: str) -> Rule:
    def rule(ctx: Any, eqn: Any, *args: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):  # FPU flags raised inside Arb's C code are not our results
            return obj(_ufunc(name)(*args))

    return rule


RULES: dict[str, Rule] = {name: _rule(name) for name in FUNCTIONS_IEEE}
