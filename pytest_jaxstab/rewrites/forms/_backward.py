"""Forms whose point is the backward pass: derivatives that cancel or meet ``0 · inf`` where the true
derivative is a normal float.

Each keeps the program's value bit for bit (the same primitives on the same operands) and carries
a derivative written from the mathematics, not from the product and quotient rules of its parts
(docs/architecture.md, "Derivatives that lose", its part on derivatives repaired):

- ``sin_quotient``: ``sin(y)/y``, derivative ``(cos y - sin(y)/y)/y`` by its Maclaurin series for
  ``|y| < 1``, where the two terms cancel (all bits lost below ``|y| ~ 1e-4`` in float32).
- ``i0_scaled``: ``exp(|x|) · i0e(x)`` (``i0``), derivative ``exp(|x|) · i1e(x)`` (``i1``), where the
  product rule's ``sign·i0e + (i1e - sign·i0e)`` cancels to 0 for tiny ``x``.
- ``mul_sqrt``: ``a · sqrt(b)``, whose derivative in ``b`` is 0 where ``a`` is 0 (a structural zero,
  a padded or masked entry), not ``0 · inf`` at ``b = 0``.
- ``inv_expm1``: ``1 / expm1(u)`` as ``exp(-u) / -expm1(-u)`` for ``u > 0`` (within an ulp or two
  of the quotient, the one form here that rounds differently): ``expm1(u)`` overflows past 88.7 in
  float32 and its square in the derivative ``-exp(u)/expm1(u)²`` past 44, so the derivative is 0
  or ``inf/inf = NaN`` where it is ``-exp(-u)`` to the precision.
- ``pow_safe``: ``x ** y``, whose derivative in ``x`` is 0 where ``y`` is 0 (``x ** 0`` is the
  constant 1), not JAX's ``0 · x^-1 = 0 · inf`` at ``x = 0`` for a floating exponent.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

__all__ = ["i0_scaled", "inv_expm1", "mul_sqrt", "pow_safe", "sin_quotient"]

# d/dy sin(y)/y = sum_{k>=1} (-1)^k 2k y^(2k-1) / (2k+1)!: nine terms reach 2^-60 relative at |y| = 1
_SINC_SERIES = tuple((-1) ** k * 2 * k / math.factorial(2 * k + 1) for k in range(1, 10))


def _sinc_slope(y: Any) -> Any:
    """(cos y - sin(y)/y)/y: its series below |y| = 1, the closed form (no cancellation worse than
    a factor of 3 there) above; each branch fed a safe input where it is not taken."""
    small = jnp.abs(y) < 1
    ys = jnp.where(small, y, jnp.zeros_like(y))
    yl = jnp.where(small, jnp.ones_like(y), y)
    z = ys * ys
    acc = jnp.full_like(y, _SINC_SERIES[-1])
    for c in reversed(_SINC_SERIES[:-1]):
        acc = acc * z + c
    series = acc * ys
    closed = (jnp.cos(yl) - jnp.sin(yl) / yl) / yl
    return jnp.where(small, series, closed)


@jax.custom_jvp
def sin_quotient(y: Any) -> Any:
    """``sin(y) / y`` (the same operations: bit for bit) whose derivative does not cancel near 0.

    JAX differentiates the quotient as ``cos(y)/y - sin(y)/y²``: two terms near ``1/y`` whose
    difference is ``-y/3``, so the derivative loses ``2·log2(1/|y|)`` bits (float32: all of them
    below ``|y| ~ 3e-4``). Here it is the Maclaurin series ``-y/3 + y³/30 - ...`` below ``|y| = 1``.

    Example: ``jax.grad(sin_quotient)(jnp.float32(1e-3))`` is ``-3.3333333e-4``.
    """
    return lax.sin(y) / y


@sin_quotient.defjvp
def _sin_quotient_jvp(primals: Any, tangents: Any) -> Any:
    (y,), (t,) = primals, tangents
    return sin_quotient(y), t * _sinc_slope(y)


@jax.custom_jvp
def i0_scaled(x: Any) -> Any:
    """``exp(|x|) · i0e(x)`` (the modified Bessel function ``I0``, the same operations) whose derivative
    is ``exp(|x|) · i1e(x)`` (``I1``).

    The product rule gives ``exp|x|·sign(x)·i0e(x) + exp|x|·(i1e(x) - sign(x)·i0e(x))``: for tiny
    ``x`` the bracket rounds to ``-sign(x)·i0e(x)`` and the sum is 0, where ``I1(x) ~ x/2``.

    Example: ``jax.grad(i0_scaled)(jnp.float32(1e-6))`` is ``5e-7`` to an ulp (written: ``4.77e-7``).
    """
    return lax.exp(lax.abs(x)) * lax.bessel_i0e(x)


@i0_scaled.defjvp
def _i0_scaled_jvp(primals: Any, tangents: Any) -> Any:
    (x,), (t,) = primals, tangents
    scale = lax.exp(lax.abs(x))
    return scale * lax.bessel_i0e(x), t * (scale * lax.bessel_i1e(x))


@jax.custom_jvp
def mul_sqrt(a: Any, b: Any) -> Any:
    """``a · sqrt(b)`` (the same operations) whose derivative in ``b`` is 0 wherever ``a`` is 0.

    JAX's ``a · (db · 0.5/sqrt(b))`` is ``0 · inf = NaN`` at ``a = 0, b = 0``: a structurally zero
    entry (the upper triangle of a Cholesky factor built column by column, a padded row) times the
    root of an exhausted remainder. The product is 0 for every ``b`` along ``a = 0``, so its
    derivative there is 0; elsewhere the derivative is JAX's, operation for operation.

    Example: ``jax.grad(lambda b: mul_sqrt(0.0, b))(jnp.float32(0.0))`` is 0 (written: NaN).
    """
    return a * lax.sqrt(b)


@mul_sqrt.defjvp
def _mul_sqrt_jvp(primals: Any, tangents: Any) -> Any:
    (a, b), (ta, tb) = primals, tangents
    s = lax.sqrt(b)
    zero = a == 0
    s_safe = jnp.where(zero, jnp.ones_like(s), s)  # the untaken 0.5/s never forms an inf
    slope = jnp.where(zero, jnp.zeros_like(s), 0.5 / s_safe)
    return a * s, ta * s + a * (tb * slope)



@jax.custom_jvp
def pow_safe(x: Any, y: Any) -> Any:
    """``x ** y`` (the same operation) whose derivative in ``x`` is 0 wherever ``y`` is 0.

    For a floating exponent JAX differentiates ``x ** y`` in ``x`` as ``y · x^(y-1)``: at ``y = 0``
    and ``x = 0`` that is ``0 · inf = NaN``, where ``x ** 0 = 1`` for every ``x`` (a polynomial's
    constant term ``x ** arange(n)``, jax#14397; JAX fixed integer exponents only). Elsewhere the
    derivative is JAX's: ``y · x^(y-1)`` in ``x`` and ``log(x) · x^y`` in ``y`` (``log`` of 1 at ``x = 0``).

    Example: ``jax.grad(lambda x: pow_safe(x, 0.0))(jnp.float32(0.0))`` is 0 (written: NaN).
    """
    return lax.pow(x, y)


@pow_safe.defjvp
def _pow_safe_jvp(primals: Any, tangents: Any) -> Any:
    (x, y), (tx, ty) = primals, tangents
    ans = lax.pow(x, y)
    flat = y == 0
    y_safe = jnp.where(flat, jnp.ones_like(y), y)  # the untaken 0 · x^-1 never forms an inf
    slope_x = jnp.where(flat, jnp.zeros_like(ans), y_safe * lax.pow(x, y_safe - 1))
    slope_y = lax.log(jnp.where(x == 0, jnp.ones_like(x), x)) * ans
    return ans, tx * slope_x + ty * slope_y


def inv_expm1(u: Any) -> Any:
    """``1 / expm1(u)`` whose value and derivative do not overflow for large ``u``.

    For ``u > 0`` it is ``exp(-u) / -expm1(-u)``: no term exceeds 1 and the derivative, by AD of that
    quotient, is ``-exp(-u)/expm1(-u)²`` without an ``inf``; for ``u <= 0`` ``|expm1(u)| <= 1`` and the
    written quotient is kept. Each branch reads a safe input where it is not taken.

    Example: ``jax.grad(inv_expm1)(jnp.float32(100.0))`` is 0 to the precision (written: NaN).
    """
    pos = u > 0
    up = jnp.where(pos, u, jnp.ones_like(u))
    un = jnp.where(pos, -jnp.ones_like(u), u)
    return jnp.where(pos, jnp.exp(-up) / -jnp.expm1(-up), 1 / jnp.expm1(un))
