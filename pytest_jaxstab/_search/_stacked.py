"""A ``stack`` read as its operands, one term each, until a reduction over the stacked axis joins them.

JAX lowers ``jnp.stack`` to a primitive of its own (``stack[axis=k]``); library code stacks a few values and
reduces over the new axis (numpyro's Beta through its Dirichlet: ``sum(log(stack([x, 1 - x])) *
(stack([a, b]) - 1), -1)``). The term language has no axis to stack along, but such a program is a sum
of its slices: ``_lower`` keeps a stacked value as a :class:`Stacked` (one term per slice), applies an
elementwise equation to each slice (an operand that is not stacked must be a single value; a broadcast
spreads each slice alike), and a
``reduce_sum``/``prod``/``max``/``min`` whose axes include the stacked one joins the slices with
``add``/``mul``/``max``/``min`` (left to right, the order of the traced reduction's operands along that
axis), then reduces the slices' own axes that are left. A stacked value used any other way (returned,
reshaped, reduced along other axes only, stacked again) is refused, naming the equation.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

from .. import _compat
from ._expr import Term, reduction_name

__all__ = ["ELEMENTWISE", "Stacked", "through_stack"]

#: Equations taken slice by slice besides ``_lower``'s direct operators and logic: those whose
#: ``_lower._equation`` reading is elementwise.
ELEMENTWISE = frozenset({"convert_element_type", "integer_pow", "square", "rsqrt", "exp2", "gt", "ge",
                         "select_n", "clamp", "round", "one_minus_square", "copy", "copy_p",
                         "stop_gradient", "optimization_barrier"})
_JOIN = {"reduce_sum": ("add", "sum"), "reduce_prod": ("mul", "prod"), "reduce_max": ("max", "max"),
         "reduce_min": ("min", "min")}


@dataclasses.dataclass(frozen=True)
class Stacked:
    """A traced array of shape ``shape`` whose slices along ``axis`` are ``parts`` (each of the shape
    with that axis removed)."""

    parts: tuple[Term, ...]
    axis: int
    shape: tuple[int, ...]


def through_stack(eqn: Any, name: str, args: list[Any], elementwise: frozenset[str],
                  equation: Callable[[list[Term]], list[Term]],
                  widen: Callable[[Term, tuple[int, ...]], Term],
                  where: str, unsupported: type[Exception]) -> list[Any]:
    """The outputs of ``eqn`` (``name``) where it is a ``stack`` or reads a :class:`Stacked` ``args``:
    a :class:`Stacked`, or the term of a reduction that joined one. ``equation`` reads the equation at
    terms (one slice's); ``elementwise``: the names it reads elementwise; ``widen``: a term spread to a
    shape where a reduction reads it whole (``_shapes.Shapes.widened``)."""
    out_shape = tuple(getattr(_compat.aval(eqn.outvars[0]), "shape", ()))
    if name == "stack":
        if any(isinstance(a, Stacked) for a in args):
            raise unsupported(f"a stack of stacked values ({where}); the search unrolls one stack at a time")
        return [Stacked(tuple(args), int(eqn.params["axis"]) % len(out_shape), out_shape)]
    stacked = [a for a in args if isinstance(a, Stacked)]
    first = stacked[0]
    if any((s.axis, len(s.shape), len(s.parts)) != (first.axis, len(first.shape), len(first.parts))
           for s in stacked):
        raise unsupported(f"{name} ({where}) of arrays stacked along different axes")
    if name in _JOIN:
        axes = tuple(sorted(int(a) for a in eqn.params.get("axes", ())))
        if first.axis not in axes:
            raise unsupported(f"{name} ({where}) of a stacked array along other axes than the stacked one; "
                              "the search sums a stack only over its own axis")
        join, base = _JOIN[name]
        term = first.parts[0]
        for part in first.parts[1:]:
            term = (join, term, part)
        part_shape = first.shape[:first.axis] + first.shape[first.axis + 1:]
        rest = tuple(a - (a > first.axis) for a in axes if a != first.axis)
        if rest:
            axes_left = None if len(rest) == len(part_shape) else rest
            term = (reduction_name(base, axes_left), widen(term, part_shape))
        return [term]
    if name == "broadcast_in_dim" and len(args) == 1:  # spread along new axes: each slice is spread alike
        return [Stacked(first.parts, int(eqn.params["broadcast_dimensions"][first.axis]), out_shape)]
    if name not in elementwise or len(eqn.outvars) != 1 or len(out_shape) != len(first.shape):
        raise unsupported(f"{name} ({where}) of a stacked array; the search takes a stack only through "
                          "elementwise operations and a reduction over its axis")
    for a, v in zip(args, eqn.invars):
        if not isinstance(a, Stacked) and math.prod(getattr(_compat.aval(v), "shape", ())) != 1:
            raise unsupported(f"{name} ({where}) of a stacked array with an array that is not stacked; the "
                              "search takes a stack with single values beside it")
    parts = []
    for i in range(len(first.parts)):
        (part,) = equation([a.parts[i] if isinstance(a, Stacked) else a for a in args])
        parts.append(part)
    return [Stacked(tuple(parts), first.axis, out_shape)]
