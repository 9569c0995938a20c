"""The log of a product of factors and powers: a sum of logs where the product leaves the range.

``log_factors`` (structural, rooted at ``log``) reads the ``mul``/``div`` tree under a log, through
``integer_pow``, ``square``, ``sqrt``, ``rsqrt`` and ``pow`` by a constant (the factors' powers
multiply), down to its factors: values, reduced products (``reduce_prod``, power ±1), ``exp``
(whose log is its argument) and JAX's ``i0``/``i1`` (whose logs are ``log_bessel``'s forms).
``log(a * b * c)`` with tiny or huge factors, ``log(x ** 12)``, the density of a uniform box
written ``log(1 / (2 * B) ** d)``, ``log(s / prod(x))``: the product is inf, 0 or subnormal where
its log is an ordinary number. The replacement (``forms/_factors.py``) keeps the program's
``log(p)`` wherever ``p`` is a normal float and takes ``sum k_i · log|f_i|`` elsewhere, so a
program whose products stay in range computes what it computed (near ``p = 1`` that is the better
form). A tree is read only where it can leave the range through more than one factor: two factors
that are not constants, a power other than ±1, a reduced product inside the tree or an ``exp``;
``log(prod(x))`` and ``log(exp(a))`` alone are ``log_prod``'s and ``log_exp``'s (pattern rules,
which run first), ``log(s · exp(a))`` is ``log_quotient_exp``'s.

Structural (a pattern cannot say "a product tree of any depth"); the rule's ``example`` and
``examples`` are the programs ``jst.verify_rule`` judges.
"""

from __future__ import annotations

import math
from typing import Any

import jax.numpy as jnp

from ... import _compat
from ..engine._guards import scalar_constant
from ..engine._match import SCOPE_PREFIX, Graph, Match
from ..engine._rule import Rule
from ..forms import _factors

__all__ = ["LOG_FACTORS"]

_POWERS = {"square": 2.0, "sqrt": 0.5, "rsqrt": -0.5}
_MAX_FACTORS = 16
_MAX_DEPTH = 12
_Found = tuple[Any, str, float, tuple[int, ...]]  # (atom, kind, power, axes)


def _log_factors(p: Any, factors: tuple[Any, ...], **values: Any) -> Any:
    """log(prod_i f_i ** k_i) = sum_i k_i · log|f_i| (NaN where the product is negative), taken where
    the product is not a normal float; log(p) itself elsewhere."""
    return _factors.log_factors(p, factors, [values[f"f{k}"] for k in range(len(factors))])


def _read(g: Graph, atom: Any, power: float, shape: tuple[int, ...], out: list[_Found], inner: set[int],
          depth: int) -> bool:
    """Append the factors of ``atom`` raised to ``power`` to ``out`` and the equations read through
    to ``inner``; False where the tree is not one this rule reads (too deep, too many factors, a
    factor of another shape)."""
    if depth > _MAX_DEPTH or len(out) >= _MAX_FACTORS:
        return False
    prod = None if _compat.is_literal(atom) else g.producer_eqn(atom)
    if prod is not None and prod[0] in g.claimed and _i0_scaled(prod[1]):
        # I0 as jax 0.10 inlines it, which i0_scaled (derivative only, the pattern phase) made
        # final: read, not replaced, as the call it stands for
        inner.add(prod[0])
        out.append((prod[1].invars[0], "i0", power, ()))
        return True
    if prod is None or prod[0] in g.claimed:
        return _leaf(atom, power, shape, out)
    j, eqn = prod
    name = _compat.primitive_name(eqn)
    if name in ("mul", "div") and len(eqn.invars) == 2:
        inner.add(j)
        a, b = eqn.invars
        return (_read(g, a, power, shape, out, inner, depth + 1)
                and _read(g, b, power if name == "mul" else -power, shape, out, inner, depth + 1))
    k = _power(g, eqn, name)
    if k is not None:
        inner.add(j)
        return _read(g, eqn.invars[0], power * k, shape, out, inner, depth + 1)
    kind = _kind(eqn, name, power)
    if kind is None:
        return _leaf(atom, power, shape, out)
    inner.add(j)
    axes = tuple(int(a) for a in eqn.params["axes"]) if kind == "prod" else ()
    out.append((eqn.invars[0], kind, power, axes))
    return True


def _leaf(atom: Any, power: float, shape: tuple[int, ...], out: list[_Found]) -> bool:
    leaf_shape = () if _compat.is_literal(atom) else tuple(_compat.aval(atom).shape)
    if leaf_shape not in ((), shape):
        return False
    out.append((atom, "leaf", power, ()))
    return True


def _kind(eqn: Any, name: str, power: float) -> str | None:
    """The kind of factor an equation's operand is read as (see ``forms._factors.Factor``): a reduced
    product (power ±1: its sign is read per element), ``exp`` (log(exp(a)) = a), JAX's ``i0``/``i1``
    call (``_compat.library_function``: log_bessel's forms), else None (a value)."""
    if name == "reduce_prod" and power in (1.0, -1.0):
        return "prod"
    if name == "exp":
        return "exp"
    if name == "custom_jvp_call" and len(eqn.invars) == 1:
        function = _compat.library_function(eqn)
        return function if function in ("i0", "i1") else None
    return None


def _i0_scaled(eqn: Any) -> bool:
    return (_compat.primitive_name(eqn) == "custom_jvp_call" and len(eqn.invars) == 1
            and _compat.in_scope_named(eqn, SCOPE_PREFIX + "i0_scaled"))


def _power(g: Graph, eqn: Any, name: str | None) -> float | None:
    """The constant power an equation raises its first operand to (None: not a power)."""
    if name == "integer_pow":
        return float(eqn.params["y"])
    if name in _POWERS:
        return _POWERS[name]
    if name == "pow":
        c = scalar_constant(g, eqn.invars[1])
        return c if c is not None and math.isfinite(c) and c != 0 else None
    return None


def _constant(g: Graph, atom: Any) -> bool:
    return _compat.is_literal(atom) or scalar_constant(g, atom) is not None


def _match(g: Graph, i: int) -> Match | None:
    eqn = g.eqns[i]
    p = eqn.invars[0]
    if _compat.is_literal(p) or not jnp.issubdtype(_compat.aval(p).dtype, jnp.floating):
        return None
    head = g.head(p)[0]  # the cheap look: a log of a product, a quotient or a power
    if head not in ("mul", "div", "integer_pow", "square", "sqrt", "rsqrt", "pow"):
        return None
    shape = tuple(_compat.aval(p).shape)
    found: list[_Found] = []
    inner: set[int] = set()
    if not _read(g, p, 1.0, shape, found, inner, 0):
        return None
    variables = [f for f in found if f[1] != "leaf" or not _constant(g, f[0])]
    if not variables:
        return None
    amplified = (len(variables) >= 2 or any(f[1] != "leaf" for f in variables)
                 or any(abs(f[2]) != 1.0 for f in variables))
    if not amplified:
        return None
    captures: dict[str, Any] = {"p": p, "factors": tuple((kind, k, axes) for _, kind, k, axes in found)}
    atoms: dict[str, Any] = {"p": p}
    for k, (atom, _, _, _) in enumerate(found):
        if _compat.is_literal(atom):
            captures[f"f{k}"] = _compat.literal_value(atom)
        else:
            captures[f"f{k}"] = atom
            atoms[f"f{k}"] = atom
    # The factors are read through equations the match does not replace: claimed for this pass, so
    # that no other match swallows a factor's producer (xlogy's ``t·log t`` inside ``log(t·log t)``
    # took ``log t``, which this replacement still reads); the next pass sees them again.
    g.claimed |= inner
    return Match(i, captures, atoms, {i})


def _uniform_box(b: Any) -> Any:
    return jnp.log(1.0 / (2.0 * b) ** 12)


LOG_FACTORS = Rule(
    "log_factors", None, _log_factors, matcher=_match, roots=frozenset({"log"}),
    example=lambda a, b: jnp.log(a * b), example_shapes=((8,), (8,)), example_domain=(0.0, 1e30),
    examples=(
        (lambda x: jnp.log(x ** 12), ((8,),), (-1e30, 1e30)),
        (_uniform_box, ((8,),), (0.0, 1e30)),
        (lambda s, x: jnp.log(s / jnp.prod(x, axis=-1)), ((3,), (3, 8)), (0.0, 1e30)),
        (lambda a, b, c: jnp.log(jnp.sqrt(a) * jnp.exp(b) / c), ((8,), (8,), (8,)), (0.0, 1e4)),
    ),
)
