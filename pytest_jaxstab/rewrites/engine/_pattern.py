"""The pattern language: terms over primitive names with captured operands and parameters.

A pattern is a small tree. Leaves capture operands (:func:`var`) or match constants (:func:`const`);
inner nodes match one equation by primitive name (:func:`op`), its parameters (captured with
:func:`param`, fixed by value, or tested by a predicate) and its operands. A named :func:`op` is a
shared sub-term: the same name used twice must be the *same* equation (the ``exp(x)`` that softmax
uses in both numerator and denominator). :func:`any_of` tries alternatives in order.

Example, ``log(1 + x)``::

    from pytest_jaxstab.rewrites import pattern as p
    x = p.var("x")
    log_one_plus = p.op("log", p.op("add", p.const(1.0), x))   # add matches either operand order

The matcher (``_match.py``) sees through the glue JAX inserts between the ops of a user's expression:
``convert_element_type`` to the same dtype, ``broadcast_in_dim`` and ``reshape`` (keepdims), and
``copy``; pass ``glue=False`` to an ``op`` or ``var`` to forbid that at one edge.

Alternatives that mean different things tell the replacement so with :func:`fixed`: each alternative
states the values it stands for, so no alternative leaves a capture to a default meant for another
(``exp(a) * exp(a)`` is ``exp(a) ** 2``: ``fixed(op("mul", e, e), k=2)``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from ..._errors import ArgumentError

__all__ = ["Const", "Op", "Param", "Pattern", "Var", "any_of", "const", "fixed", "op", "param", "var"]

#: Primitives whose two operands may be swapped when matching.
COMMUTATIVE = frozenset({"add", "mul", "max", "min", "and", "or", "eq", "ne"})


class Pattern:
    """Base class of pattern terms."""

    def describe(self) -> str:
        """A short textual form of the pattern, e.g. ``log(add(1.0, x))``."""
        raise NotImplementedError


@dataclasses.dataclass(frozen=True, eq=False)
class Var(Pattern):
    """Captures any operand (a variable or a literal) under ``name``.

    The same name used twice must bind the same operand. ``where`` is an optional predicate on the
    operand's abstract value (``.shape``, ``.dtype``), e.g. ``lambda a: a.ndim == 0``.
    """

    name: str
    where: Callable[[Any], bool] | None = None
    glue: bool = True

    def describe(self) -> str:
        return self.name


@dataclasses.dataclass(frozen=True, eq=False)
class Const(Pattern):
    """Matches a constant operand: a literal, a broadcast of one, or a constant array all equal.

    ``value`` is a number compared exactly, or a predicate on the float value. With ``name`` the
    value (a Python float) is captured.
    """

    value: float | Callable[[float], bool]
    name: str | None = None

    def describe(self) -> str:
        return repr(self.value) if not callable(self.value) else (self.name or "const")


@dataclasses.dataclass(frozen=True, eq=False)
class Param:
    """Captures an equation parameter under ``name`` (used as a value in ``op(..., axes=param("axes"))``).

    ``read``, if given, maps the parameter to the value captured, and None from it refuses the match
    (a library call's reduction axes read from its body: see :func:`param`).
    """

    name: str
    read: Callable[[Any], Any] | None = None

    def value(self, have: Any) -> Any:
        """What this parameter captures from the equation's ``have`` (None from ``read``: the match
        is refused; a parameter whose value is None, a gather's default fill, is captured as is)."""
        return have if self.read is None else self.read(have)


@dataclasses.dataclass(frozen=True, eq=False)
class Op(Pattern):
    """Matches one equation of primitive ``prim`` (or any of a set of names) with operands ``args``.

    ``params`` maps a parameter name to a required value, a predicate, or a :class:`Param` capture.
    ``name`` makes the equation a shared sub-term (and captures its output under that name).
    ``nargs=None`` matches the operands given exactly; the number of operands must equal ``len(args)``.
    ``keep`` (needs ``name``): the sub-term is matched but not replaced; its equations may have other
    uses, and its output reaches the replacement as an operand under ``name`` (see :func:`op`).
    ``recompute``: the sub-term may have other uses; it is then left in the program for them and the
    replacement computes its own stable form from the captures (see :func:`op`).
    ``fixed``: captures this alternative binds to constant values when it matches (see :func:`fixed`).
    """

    prim: frozenset[str]
    args: tuple[Pattern, ...]
    params: tuple[tuple[str, Any], ...] = ()
    name: str | None = None
    glue: bool = True
    keep: bool = False
    recompute: bool = False
    fixed: tuple[tuple[str, Any], ...] = ()

    def describe(self) -> str:
        prim = "|".join(sorted(self.prim))
        inner = ", ".join(a.describe() for a in self.args)
        bound = "".join(f", {k}={v!r}" for k, v in self.fixed)
        return f"{prim}({inner}{bound})"


@dataclasses.dataclass(frozen=True, eq=False)
class AnyOf(Pattern):
    """Matches the first alternative that matches."""

    alternatives: tuple[Pattern, ...]

    def describe(self) -> str:
        return " | ".join(a.describe() for a in self.alternatives)


def var(name: str, *, where: Callable[[Any], bool] | None = None, glue: bool = True) -> Var:
    """A capture of any operand, bound to ``name`` in the replacement's keyword arguments.

    Example: ``x = var("x")``; ``op("exp", x)`` then calls the replacement with ``x=<operand>``.
    """
    return Var(name, where, glue)


def const(value: float | Callable[[float], bool], *, name: str | None = None) -> Const:
    """A constant operand equal to ``value`` (or satisfying a predicate), e.g. ``const(1.0)``."""
    return Const(value, name)


def param(name: str, *, read: Callable[[Any], Any] | None = None) -> Param:
    """Capture an equation parameter: ``op("reduce_sum", x, axes=param("axes"))``.

    ``read`` captures a value computed from the parameter instead, and refuses the match where it
    returns None: a call recognised by the function it wraps gives its axes from its body,
    ``op("custom_jvp_call", x, call_jaxpr=param("axes", read=softmax_axes))``, so the replacement
    gets ``axes`` whichever way the program spells the function.
    """
    return Param(name, read)


def op(prim: str | Sequence[str], *args: Pattern, name: str | None = None, glue: bool = True,
       keep: bool = False, recompute: bool = False, params: dict[str, Any] | None = None,
       **kw_params: Any) -> Op:
    """A pattern for one equation.

    Args:
      prim: primitive name (``"log"``) or several accepted names (``("mul", "square")`` style
        alternatives should rather use :func:`any_of`, since operand counts differ).
      *args: patterns for the operands, in order (swapped too for commutative primitives).
      name: make this a shared, captured sub-term.
      glue: see through glue equations at this edge (default True).
      keep: a sub-term the program keeps (requires ``name``): its structure must match, but its
        equations are not replaced and may have other uses (a batch-norm mean that is also
        returned); the replacement receives its value under ``name``, so it is computed once.
      recompute: a shared intermediate the match may see through although the program uses it
        elsewhere (``p = sigmoid(z)`` used in both ``log(p)`` and ``log(1 - p)``). Its equations (and
        the glue below them) then stay in the program for their other uses, and the replacement,
        which is written in terms of the captures, gives this use its own stable form: each of the
        two logs becomes a softplus of ``z``. Without it a match refuses shared intermediates, so
        nothing is computed twice; mark only cheap sub-terms whose recomputation is what makes the
        result stable.
      params: parameter constraints as a dict, for parameter names that clash with the arguments
        above (``op("jit", a, params={"name": "inv"})``).
      **kw_params: parameter constraints: a value (compared with ``==``), a predicate, or
        :func:`param` to capture it.

    Example: ``op("reduce_sum", op("exp", var("x")), axes=param("axes"))``.
    """
    names = frozenset([prim]) if isinstance(prim, str) else frozenset(prim)
    constraints = {**(params or {}), **kw_params}
    if keep and name is None:
        raise ArgumentError("op(..., keep=True) needs a name: the replacement receives the kept value by it")
    return Op(names, tuple(args), tuple(sorted(constraints.items())), name, glue, keep, recompute)


def any_of(*alternatives: Pattern) -> AnyOf:
    """Alternatives tried in order, e.g. the forms of a square:
    ``any_of(op("integer_pow", x, y=2), op("square", x), op("mul", x, x))``."""
    return AnyOf(tuple(alternatives))


def fixed(pattern: Op | AnyOf, **values: Any) -> Op | AnyOf:
    """The same pattern, binding the captures ``values`` when it matches (each alternative of an
    ``any_of``).

    For alternatives that are spellings of one form with different constants: the replacement gets
    the value each spelling means, and no capture is left to a default meant for another alternative.
    A name the pattern also captures must agree with the fixed value, or the match is refused.

    Example, the powers of ``e = exp(a)`` (the replacement is ``lambda a, k: exp(k * a)``)::

        any_of(op("integer_pow", e, y=param("k")),
               fixed(op("square", e), k=2), fixed(op("mul", e, e), k=2),
               fixed(op("sqrt", e), k=0.5))
    """
    if not values:
        raise ArgumentError("fixed(pattern): give at least one capture, e.g. fixed(op('square', x), k=2)")
    if isinstance(pattern, AnyOf):
        return AnyOf(tuple(fixed(alt, **values) for alt in pattern.alternatives))  # type: ignore[arg-type]
    if not isinstance(pattern, Op):
        raise ArgumentError(f"fixed(pattern): the pattern must be an op(...) or any_of(...), got {pattern!r}")
    clash = [k for k, v in pattern.fixed if k in values and values[k] != v]
    if clash:
        raise ArgumentError(f"fixed(): {clash} already fixed to other values in {pattern.describe()}")
    merged = {**dict(pattern.fixed), **values}
    return dataclasses.replace(pattern, fixed=tuple(sorted(merged.items())))


def square_of(x: Pattern) -> AnyOf:
    """The forms JAX code writes ``x²`` in: ``x*x``, ``x**2`` (integer_pow), ``jnp.square``, ``x**2.0``."""
    return any_of(op("integer_pow", x, y=2), op("square", x), op("mul", x, x),
                  op("pow", x, const(2.0)))
