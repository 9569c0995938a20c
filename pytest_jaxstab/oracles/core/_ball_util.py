"""What the ball functions share: classifying balls (finite, exact infinities, indeterminate)."""

from __future__ import annotations

from typing import Any

from flint import arb

__all__ = ["Ball", "cls", "exact_int", "is_int_value", "sign_class"]

Ball = Any  # flint.arb, or None for "no real value"


def _special(x: arb) -> str:
    """Classifies a non-finite ball: ``"+inf"``, ``"-inf"`` (exact infinities) or ``"indet"``."""
    if x.is_nan() or not x.is_exact():
        return "indet"
    return "+inf" if x > 0 else "-inf"


def exact_int(x: arb) -> int:
    """The integer an exact integer ball holds."""
    n = x.unique_fmpz()
    if n is None:
        raise ValueError(f"{x} is not a unique integer")
    return int(n)


def cls(x: arb) -> str:
    return "fin" if x.is_finite() else _special(x)


def is_int_value(x: arb, v: int) -> bool:
    """Whether ``x`` is exactly the integer ``v``."""
    return x.is_exact() and x.is_finite() and x == v


def sign_class(x: arb) -> int | None:
    """+1, -1 or 0 (exactly zero) when the sign is certain, else None."""
    if x.is_zero():
        return 0
    if x > 0:
        return 1
    if x < 0:
        return -1
    return None
