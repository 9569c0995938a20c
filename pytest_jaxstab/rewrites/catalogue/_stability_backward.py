"""Derivatives repaired where the backward pass loses: cancellations in a derivative's own expression
and ``0 · inf`` between a structural zero and an infinite partial derivative (issue 47).

- ``expm1_plus_one``: ``expm1(x) + 1 -> exp(x)``. Over the reals an identity; in floats ``exp``
  rounds once where the sum rounded twice (and ``expm1(x) + 1`` is 1 for ``x < -17`` in float32
  where ``exp(x)`` is a normal float). The spelling of ``expm1``'s derivative in derivative rules
  (``ans + 1``): through ``jvp_rule`` a user's ``custom_jvp`` rule written so is repaired too.
- ``pow_zero``: ``pow(x, 0) -> 1``, the same value for every ``x`` (IEEE ``pow(x, 0) = 1``, NaN and
  0 included) with derivative 0, where JAX's ``0 · x^-1`` is ``0 · inf = NaN`` at ``x = 0`` (a focal
  loss's ``(1 - p)**gamma`` with ``gamma = 0`` at a saturated probability).
- ``reciprocal_expm1``: ``a / expm1(u) -> a · exp(-u) / -expm1(-u)`` for ``u > 0``: ``expm1(u)``
  overflows past 88.7 in float32 (its square in the derivative past 44), where the quotient and its
  derivative are ``exp(-u)`` to the precision: a Bose-Einstein or Planck occupancy, the mean of a
  continuous Bernoulli (tfp#1512: NaN gradients at logits -100).
- ``sin_quotient`` (derivative only): ``sin(y) / y`` (``jnp.sinc``'s, a spherical Bessel ``j0``)
  with the derivative's Maclaurin series near 0, where ``cos(y)/y - sin(y)/y²`` cancels.
- ``i0_scaled`` (derivative only): ``exp(|x|) · i0e(x)`` (``I0`` as libraries write it) with the
  derivative ``exp(|x|)·i1e(x)``, where the product rule cancels to 0 for tiny ``x``.
- ``mul_sqrt_zero`` (derivative only): ``a · sqrt(b)`` with ``a`` an array, derivative in ``b`` 0
  where ``a`` is 0 (a structural zero times ``sqrt'(0) = inf``: NaN in JAX).
- ``pow_derivative`` (derivative only): ``x ** y`` with a floating exponent that may hold 0 (an
  array, or a value the program computes), derivative in ``x`` 0 where ``y`` is 0 (JAX's
  ``0 · 0^-1`` is NaN: a polynomial ``x ** arange(n)`` at ``x = 0``, jax#14397).

Each rule keeps the value bit for bit but ``expm1_plus_one`` (one rounding fewer) and
``reciprocal_expm1`` (a quotient that no longer overflows) and changes the
derivative only where JAX's is inaccurate or not finite.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np
from jax import lax

from ... import _compat
from ..engine._match import Graph, Match
from ..engine._pattern import any_of, const, op, var
from ..engine._rule import Rule
from ..forms import _backward

__all__ = ["BACKWARD_RULES", "EXPM1_PLUS_ONE", "I0_SCALED", "MUL_SQRT_ZERO", "POW_DERIVATIVE", "POW_ZERO",
           "RECIPROCAL_EXPM1", "SIN_QUOTIENT"]

x, y = var("x"), var("y")


def _example(f: Any, shapes: Any = ((8,),), domain: Any = None) -> dict[str, Any]:
    return {"example": f, "example_shapes": shapes, "example_domain": domain}


def _expm1_plus_one(x: Any) -> Any:
    """expm1(x) + 1 = exp(x)."""
    return jnp.exp(x)


# recompute: a derivative rule returns expm1(x) itself too (``ans`` and ``ans + 1``)
EXPM1_PLUS_ONE = Rule("expm1_plus_one", op("add", op("expm1", x, recompute=True), const(1.0)),
                      _expm1_plus_one, **_example(lambda x: jnp.expm1(x) + 1, domain=(-80.0, 80.0)))


def _pow_zero(x: Any) -> Any:
    """pow(x, 0) = 1 for every x (IEEE 754 pow), derivative 0."""
    return jnp.ones_like(x)


POW_ZERO = Rule("pow_zero", op("pow", x, const(0.0)), _pow_zero,
                **_example(lambda x: x ** 0.0, domain=(0.0, 1e30)))


def _reciprocal_expm1(a: Any, u: Any) -> Any:
    """a / expm1(u) = a · exp(-u) / -expm1(-u) for u > 0 (a · 1/expm1(u) elsewhere)."""
    return a * _backward.inv_expm1(u)


RECIPROCAL_EXPM1 = Rule("reciprocal_expm1",
                        any_of(op("div", var("a"), op("expm1", var("u"))),
                               op("div", var("a"), op("sub", op("exp", var("u")), const(1.0)))),
                        _reciprocal_expm1,
                        where=lambda m: _real_floating(m, "a", "u"),
                        examples=(lambda x: 1 / (jnp.exp(x) - 1), lambda x: x / jnp.expm1(x)),
                        **_example(lambda u: 1 / jnp.expm1(u), domain=(-100.0, 100.0)))


def _real_floating(m: Match, *names: str) -> bool:
    return all(jnp.issubdtype(m.aval(n).dtype, jnp.floating) for n in names)


def _sin_quotient(y: Any) -> Any:
    """sin(y) / y, the same operations, with the derivative's series near 0."""
    return _backward.sin_quotient(y)


SIN_QUOTIENT = Rule("sin_quotient", op("div", op("sin", y), y), _sin_quotient, derivative_only=True,
                    where=lambda m: _real_floating(m, "y"),
                    examples=(lambda x: jnp.sinc(x),),
                    **_example(lambda y: jnp.sin(y) / y, domain=(-10.0, 10.0)))


def _i0_scaled(x: Any) -> Any:
    """exp(|x|) · i0e(x) = I0(x), the same operations, derivative exp(|x|) · i1e(x) = I1(x)."""
    return _backward.i0_scaled(x)


I0_SCALED = Rule("i0_scaled", op("mul", op("exp", op("abs", x)), op("bessel_i0e", x)), _i0_scaled,
                 derivative_only=True, where=lambda m: _real_floating(m, "x"),
                 **_example(lambda x: jnp.exp(jnp.abs(x)) * lax.bessel_i0e(x), domain=(-80.0, 80.0)))


def _match_mul_sqrt(g: Graph, i: int) -> Match | None:
    """``a · sqrt(b)`` (either order) of real floating arrays of the product's shape, ``a`` not a
    constant (a constant factor is never a structural zero a derivative meets)."""
    eqn = g.eqns[i]
    out = _compat.aval(eqn.outvars[0])
    if len(eqn.invars) != 2 or not jnp.issubdtype(out.dtype, jnp.floating):
        return None
    for a, s in (eqn.invars, eqn.invars[::-1]):
        if _compat.is_literal(a) or a in g.const_values:
            continue
        found = g.producer_eqn(s)
        if found is None or _compat.primitive_name(found[1]) != "sqrt":
            continue
        j, root = found
        (b,) = root.invars
        if _compat.is_literal(b) or any(tuple(_compat.aval(v).shape) != tuple(out.shape) for v in (a, b)):
            continue
        swallowed = {i, j} if g.uses[s] == 1 else {i}
        return Match(i, {"a": a, "b": b}, {"a": a, "b": b}, swallowed)
    return None


def _mul_sqrt(a: Any, b: Any) -> Any:
    """a · sqrt(b), the same operations, derivative in b 0 where a is 0."""
    return _backward.mul_sqrt(a, b)


MUL_SQRT_ZERO = Rule("mul_sqrt_zero", None, _mul_sqrt, matcher=_match_mul_sqrt, roots=frozenset({"mul"}),
                     derivative_only=True,
                     examples=(lambda x: jnp.where(x > 0, x, 0.0) * jnp.sqrt(jnp.abs(x)),),
                     **_example(lambda x: x * jnp.sqrt(jnp.abs(x)), domain=(-1e10, 1e10)))

def _match_pow(g: Graph, i: int) -> Match | None:
    """``x ** y`` of real floating operands whose exponent may be 0: not a nonzero scalar constant (a
    scalar 0 is ``pow_zero``'s) and not a closed-over array without a 0."""
    eqn = g.eqns[i]
    if len(eqn.invars) != 2 or len(eqn.outvars) != 1:
        return None
    xa, ya = eqn.invars
    if not all(jnp.issubdtype(_compat.aval(a).dtype, jnp.floating) for a in (xa, ya, eqn.outvars[0])):
        return None
    if _compat.is_literal(ya) or (_compat.is_literal(xa) and not _compat.aval(xa).shape):
        return None  # a scalar exponent (0 is pow_zero's, any other needs nothing); a scalar base
    if ya in g.const_values:
        value = g.const_values[ya]
        if _compat.is_tracer(value) or not np.any(np.asarray(value) == 0):
            return None
    return Match(i, {"x": xa, "y": ya}, {"x": xa, "y": ya}, {i})


def _pow_derivative(x: Any, y: Any) -> Any:
    """x ** y, the same operation, derivative in x 0 where y is 0 (x ** 0 = 1 for every x)."""
    return _backward.pow_safe(x, y)


POW_DERIVATIVE = Rule("pow_derivative", None, _pow_derivative, matcher=_match_pow, roots=frozenset({"pow"}),
                      derivative_only=True,
                      examples=(lambda x: jnp.sum(x[..., None] ** jnp.arange(3, dtype=x.dtype), axis=-1),),
                      **_example(lambda x, y: x ** y, shapes=((8,), (8,)), domain=(0.0, 4.0)))

BACKWARD_RULES: tuple[Rule, ...] = (EXPM1_PLUS_ONE, POW_ZERO, RECIPROCAL_EXPM1)
"""The value rules of this family (placed with the pattern rules in ``STABILITY``); the derivative-only
ones (``SIN_QUOTIENT``, ``I0_SCALED``, ``MUL_SQRT_ZERO``, ``POW_DERIVATIVE``) go at the end, with the
other derivative-only rules, so that every value rule sees the primitives first."""
