"""Lowerings: what a rewritten program needs on this JAX generation, applied once after the rules.

The rules write their replacements in plain ``jax.numpy`` so that other rules (and ``jst.explain``)
can read them. Where one JAX generation differentiates such a primitive worse than the program the
rule replaced, the fix cannot be part of the replacement (a ``custom_jvp`` wrapper would hide the
primitive from the rules that continue it), so it is applied here, once, after the fixed point.

- ``expm1`` on JAX before 0.11: its derivative is written ``expm1(x) + 1``, which cancels to 0 for
  ``x < -16`` in float32 (the derivative is ``exp(x)``, 2e-9 at -20) and is 14 bits off at
  ``x = -12``, where the written ``exp(x) - 1`` differentiates as ``exp(x)`` exactly. The lowering
  binds each ``expm1`` through a ``custom_jvp`` whose tangent is ``exp(x) * t``; JAX 0.11 and later
  write that rule themselves and get no lowering.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from ... import _compat
from ._pattern import op, var
from ._rule import Rule

__all__ = ["LOWERINGS"]


@jax.custom_jvp
def _expm1(x: Any) -> Any:
    return jnp.expm1(x)


_expm1.defjvp(lambda p, t: (_expm1(p[0]), jnp.exp(p[0]) * t[0]))

_EXPM1_DERIVATIVE = Rule("expm1_derivative", op("expm1", var("x")), lambda x: _expm1(x),
                         doc="expm1(x), differentiated as exp(x) (JAX before 0.11 writes expm1(x) + 1)")

LOWERINGS: tuple[Rule, ...] = () if _compat.JAX_VERSION >= (0, 11) else (_EXPM1_DERIVATIVE,)
"""The lowerings this JAX generation needs, applied once after the rules (one pass, no fixed point:
a lowering's result holds the primitive it lowers, inside its custom rule)."""
