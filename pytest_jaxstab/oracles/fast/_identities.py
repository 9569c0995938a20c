"""Identities of the saturating functions, where the fast walk's generic rules lose everything.

``logistic`` and ``tanh`` approach their limits exponentially; float64 keeps the value but not its
distance to the limit, and that distance is what ML code reads next: ``1 - sigmoid(z)`` and
``log(sigmoid(z))`` in a binary cross-entropy, ``1 + tanh(v)`` in an approximate GELU's tail. The generic
rules enclose ``1 - p`` about 0 with a radius of ``p``'s (2^-40 relative of 1) and ``log`` of an interval
touching 0 is undecided, so those elements went to Arb, each at up to 1,792 bits (``1 - sigmoid(1000)``
is ``e^-1000``). Exact identities of the reals give the same values with a relative enclosure:

* ``1 - logistic(x) = logistic(-x)`` and ``logistic(x) - 1 = -logistic(-x)``;
* ``1 + tanh(x) = 2 logistic(2x)``, ``1 - tanh(x) = 2 logistic(-2x)``, ``tanh(x) - 1 = -2 logistic(-2x)``;
* ``log(logistic(x)) = -softplus(-x)`` (``log_sigmoid``).

The walk (``_walk``) remembers, for each variable a ``logistic`` or ``tanh`` equation produced, the
enclosure of that equation's operand (:func:`origin`); an ``add``, ``sub`` or ``log`` reading such a
variable (and, for the sums, an operand that is exactly 1 in every element) also computes the identity's
side from that operand with the fast path's own rules, and keeps, per element, the narrower of the two
enclosures (:func:`refine`). Both enclose the exact value (the identity holds for every real ``x``, and
each side is built by rules that enclose), so the narrower one does too: nothing decided here can be
wrong, and an element the generic rule already pinned keeps its enclosure.
"""

from __future__ import annotations

import numpy as np

from ._elementwise import FLOAT_RULES, ROUTINES
from ._interval import Interval, Value, mul, neg

__all__ = ["SATURATING", "Origin", "origin", "refine"]

#: Primitives whose results carry their operand's enclosure to the equations that read them.
SATURATING = frozenset({"logistic", "tanh"})

#: An origin: the saturating function and the enclosure of its operand.
Origin = tuple[str, Interval]


def origin(name: str, args: list[Value]) -> Origin | None:
    """What a ``logistic``/``tanh`` result remembers (None for any other equation)."""
    if name in SATURATING and isinstance(args[0], Interval):
        return name, args[0]
    return None


def _is_one(v: Value) -> bool:
    return isinstance(v, Interval) and bool(np.all((v.rad == 0) & (v.mid == 1.0)))


def _logistic(x: Interval) -> Interval:
    return FLOAT_RULES["logistic"](None, x)  # type: ignore[no-any-return]


def _twice(x: Interval) -> Interval:
    return mul(Interval.exact(np.full(x.shape, 2.0)), x)


def _identity(name: str, args: list[Value], origins: list[Origin | None],
              ) -> tuple[Interval, Origin | None] | None:
    """The identity's side of ``name(*args)`` and the origin of its result, or None when none applies."""
    if name == "log" and origins[0] is not None and origins[0][0] == "logistic":
        return ROUTINES["log_sigmoid"](origins[0][1]), None
    if name not in ("add", "sub") or len(args) != 2:
        return None
    for k in (0, 1):  # k: the saturating operand; the other must be exactly 1
        held = origins[k]
        if held is None or not _is_one(args[1 - k]):
            continue
        fn, x = held
        if name == "add" and fn == "tanh":  # 1 + tanh(x), tanh(x) + 1
            return _twice(_logistic(_twice(x))), None
        if name == "sub" and k == 1:  # 1 - f(x)
            if fn == "logistic":
                flipped = neg(x)
                return _logistic(flipped), ("logistic", flipped)
            return _twice(_logistic(neg(_twice(x)))), None
        if name == "sub" and k == 0:  # f(x) - 1
            if fn == "logistic":
                return neg(_logistic(neg(x))), None
            return neg(_twice(_logistic(neg(_twice(x))))), None
    return None


def refine(name: str, args: list[Value], origins: list[Origin | None], out: Value,
           ) -> tuple[Value, Origin | None]:
    """``out`` (the generic rule's result of ``name(*args)``) narrowed by an identity where one applies
    (module docstring), and the origin its variable carries; ``origins`` are the operands' own."""
    if not isinstance(out, Interval):
        return out, None
    found = _identity(name, args, origins)
    if found is None:
        return out, None
    side, carried = found
    side = side.broadcast(out.shape)
    if carried is not None:
        carried = (carried[0], carried[1].broadcast(out.shape))
    with np.errstate(invalid="ignore"):
        take = side.rad < out.rad  # an undecided element has an infinite radius; an exact one, 0
    if not take.any():
        return out, carried
    return Interval(np.where(take, side.mid, out.mid), np.where(take, side.rad, out.rad)), carried
