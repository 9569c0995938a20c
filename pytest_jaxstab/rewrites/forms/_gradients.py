"""Forms whose point is the derivative: a quotient by a norm, the reciprocal of ``hypot``, soft sign.

The values are the program's (``x / y`` bit for bit) or within an ulp of them (``1/hypot``); what
changes is the derivative, written so that no intermediate overflows where the derivative does not
(docs/architecture.md, "Derivatives that lose").
"""

from __future__ import annotations

import math
from typing import Any

import jax

from ._core import hypot

__all__ = ["hypot_constant", "inv_hypot", "quotient", "soft_sign"]


@jax.custom_jvp
def quotient(x: Any, y: Any) -> Any:
    """``x / y`` (the same rounding) whose derivative is ``(dx - q·dy) / y``, ``q = x / y``.

    JAX differentiates a quotient as ``dx / y - x · y^-2 · dy``: ``y^-2`` overflows for
    ``|y| < 1.1e-19`` in float32 (``1.5e-154`` in float64), so ``x / norm(x)`` of a tiny vector has an
    infinite or NaN gradient where the true one is finite (``1/|x|`` scale). Here the quotient
    itself, O(1) for a unit vector, multiplies the tangent: nothing overflows before the result.

    Example: ``jax.grad(lambda y: forms.quotient(1e-30, y))(jnp.float32(1e-30))`` is -1e30
    (written ``1e-30 / y``: -inf).
    """
    return x / y


@quotient.defjvp
def _quotient_jvp(primals: Any, tangents: Any) -> Any:
    (x, y), (tx, ty) = primals, tangents
    q = x / y
    return q, (tx - q * ty) / y


@jax.custom_jvp
def inv_hypot(x: Any, c: Any) -> Any:
    """``1 / sqrt(x² + c²)`` as ``1 / hypot(x, c)``: no overflow of ``x²`` (``rsqrt(x*x + 1)`` is 0
    for ``|x| > 1.8e19`` in float32, the exact value ``1/|x|``). Derivative ``-x·r³`` computed as
    ``-(x·r)·r·r``, ``r = 1/hypot``: ``x·r`` is at most 1, so no intermediate overflows."""
    return 1 / hypot(x, c)


@inv_hypot.defjvp
def _inv_hypot_jvp(primals: Any, tangents: Any) -> Any:
    (x, c), (tx, tc) = primals, tangents
    r = 1 / hypot(x, c)
    return r, -((x * r) * r * r) * tx - ((c * r) * r * r) * tc


def hypot_constant(x: Any, c: float, inverse: bool) -> Any:
    """``sqrt(x² + c)`` (or its reciprocal) as ``hypot(x, √c)``, ``√c`` a constant of x's dtype."""
    # a Python scalar (correctly rounded in double, then to x's dtype by weak typing): a literal
    # in the program, which later rules read as a positive constant (xlogy's log of it)
    root = math.sqrt(c)
    return inv_hypot(x, root) if inverse else hypot(x, root)


@jax.custom_jvp
def soft_sign(x: Any) -> Any:
    """``x / (|x| + 1)`` (``jax.nn.soft_sign``, the same operations: bit for bit) whose derivative is
    ``r·r``, ``r = 1 / (|x| + 1)``.

    JAX differentiates the quotient as ``1/(|x| + 1) - x·sign(x)/(|x| + 1)²``: two terms near
    ``1/|x|`` whose difference is ``1/(|x| + 1)²``, so the derivative carries ``|x|`` ulps of error
    (9.9 bits at 1e4 in float32) and is 0 past 1e8 in float32 (1e16 in float64) where the exact one
    is ``1/x²``.

    Example: ``jax.grad(forms.soft_sign)(jnp.float32(1e10))`` is 1e-20 (``jax.nn.soft_sign``: 0.0).
    """
    return x / (abs(x) + 1)


@soft_sign.defjvp
def _soft_sign_jvp(primals: Any, tangents: Any) -> Any:
    (x,), (t,) = primals, tangents
    d = abs(x) + 1
    r = 1 / d
    return x / d, t * r * r
