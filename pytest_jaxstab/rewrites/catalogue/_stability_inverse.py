"""Round trips: a function followed by its inverse (issue 47).

Code that samples through a bijector and evaluates the density of the sample goes forward and back:
distrax's ``Transformed(Normal(0, e^10), Tanh()).log_prob(sample)`` computes ``arctanh(tanh(z))``,
and ``tanh`` rounds to ±1 from |z| = 9 (float32), where ``arctanh`` is ±inf and the log-density
inf - inf. Over the reals the composition is the identity, so it is replaced by its argument:

- ``round_trip`` (every real x): ``atanh(tanh x)``, ``asinh(sinh x)``, ``log1p(expm1 x)``,
  ``erf_inv(erf x)``, ``tan(atan x)`` are x; ``acosh(cosh x)`` and ``sqrt(x²)`` are |x|. The inner
  function saturates (tanh, erf), overflows (sinh, cosh, expm1 past 89 / 710; ``x²`` past 1.8e19 /
  1.3e154) or underflows (``x²`` below 1e-19; ``cosh x`` rounds to 1 below 2.4e-4 / 1.5e-8, where
  ``acosh`` of it is 0), and the outer one cannot undo it.
- ``round_trip_domain`` (the inverse first, x in its domain): ``exp(log x)`` is x for x >= 0,
  ``expm1(log1p x)`` for x >= -1, ``cosh(acosh x)`` for x >= 1, ``tanh(atanh x)`` for |x| <= 1,
  ``sinh(asinh x)`` for every x; NaN outside, as written. The inverse's rounding is multiplied by
  the forward function's condition number (``exp(log x)`` is off by |log x| ulps: 6 bits at 1e30).

``log(exp(x)) = x`` is the older ``log_exp`` (``_stability``). The inner function's value is
recomputed where the program also uses it (a sample that is returned as well as scored). Each
replacement's derivative is the identity's (1, or the sign of x), where the written one is 0/0 or
0·inf once the inner function saturates.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp

from ... import _compat
from ..engine._pattern import any_of, const, fixed, op, var
from ..engine._rule import Rule

__all__ = ["INVERSE_RULES", "ROUND_TRIP", "ROUND_TRIP_DOMAIN"]

x = var("x")


def _only(prim: str) -> Any:
    """A call's body that is ``prim`` of its one operand and nothing else (``jnp.arccosh`` is a ``jit``
    around ``acosh``): the call computes that function, whatever it is named."""

    def test(body: Any) -> bool:
        closed = _compat.as_closed(body)
        eqns = _compat.eqns(closed)
        return (len(eqns) == 1 and _compat.primitive_name(eqns[0]) == prim
                and list(eqns[0].invars) == list(_compat.invars(closed))
                and list(eqns[0].outvars) == list(_compat.outvars(closed)))

    return test


#: The functions ``jax.numpy`` wraps in a call of their own (jax 0.10 to 0.12.1: ``jnp.arccosh``).
_CALLED = frozenset({"acosh"})


def _fn(prim: str, arg: Any, **kw: Any) -> Any:
    """``prim(arg)`` as a primitive, or, for a function ``jax.numpy`` wraps (:data:`_CALLED`), a call
    whose body is only that primitive (``_only``)."""
    if prim not in _CALLED:
        return op(prim, arg, **kw)
    return any_of(op(prim, arg, **kw), op(("jit", "pjit"), arg, jaxpr=_only(prim), **kw))


def _inner(prim: str) -> Any:
    """``prim(x)``, recomputed where the program uses it elsewhere."""
    return _fn(prim, x, recompute=True)


# ------------------------------------------------------------------------------------- round_trip
#: x² in the spellings of ``pattern.square_of``, recomputed where the program uses it elsewhere
_SQUARE = any_of(op("integer_pow", x, y=2, recompute=True), op("square", x, recompute=True),
                 op("mul", x, x, recompute=True), op("pow", x, const(2.0), recompute=True))


def _round_trip(x: Any, magnitude: bool = False) -> Any:
    """atanh(tanh x) = asinh(sinh x) = log1p(expm1 x) = erf_inv(erf x) = tan(atan x) = x;
    acosh(cosh x) = sqrt(x²) = |x| (every real x)."""
    return jnp.abs(x) if magnitude else x


ROUND_TRIP = Rule(
    "round_trip",
    any_of(_fn("atanh", _inner("tanh")), _fn("asinh", _inner("sinh")), _fn("log1p", _inner("expm1")),
           _fn("erf_inv", _inner("erf")), _fn("tan", _inner("atan")),
           fixed(_fn("acosh", _inner("cosh")), magnitude=True),
           fixed(op("sqrt", _SQUARE), magnitude=True)),
    _round_trip,
    # jnp.arccosh and jnp.arcsinh of some releases are calls around the primitive: built from these
    examples=(lambda x: jnp.arccosh(jnp.cosh(x)), lambda x: jnp.arcsinh(jnp.sinh(x))),
    example=lambda x: jnp.arctanh(jnp.tanh(x)), example_domain=(-1e4, 1e4),
)


# ------------------------------------------------------------------------------ round_trip_domain
def _round_trip_domain(x: Any, low: float | None = None, bound: float | None = None) -> Any:
    """exp(log x) = x (x >= 0), expm1(log1p x) = x (x >= -1), cosh(acosh x) = x (x >= 1),
    tanh(atanh x) = x (|x| <= 1), sinh(asinh x) = x; NaN outside the domain, as written."""
    if low is not None:
        return jnp.where(x < low, jnp.full_like(x, jnp.nan), x)
    if bound is not None:
        return jnp.where(jnp.abs(x) > bound, jnp.full_like(x, jnp.nan), x)
    return x


ROUND_TRIP_DOMAIN = Rule(
    "round_trip_domain",
    any_of(fixed(_fn("exp", _inner("log")), low=0.0), fixed(_fn("expm1", _inner("log1p")), low=-1.0),
           fixed(_fn("cosh", _inner("acosh")), low=1.0), fixed(_fn("tanh", _inner("atanh")), bound=1.0),
           _fn("sinh", _inner("asinh"))),
    _round_trip_domain,
    examples=(lambda x: jnp.cosh(jnp.arccosh(x)), lambda x: jnp.sinh(jnp.arcsinh(x))),
    example=lambda x: jnp.exp(jnp.log(x)), example_domain=(0.0, 1e30),
)

#: The rules of this module, in the order the catalogue tries them.
INVERSE_RULES: tuple[Rule, ...] = (ROUND_TRIP, ROUND_TRIP_DOMAIN)
