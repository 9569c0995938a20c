"""Glue and shapes: when a match may see through a broadcast or reshape JAX inserted (``_match``)."""

from __future__ import annotations

import math
from typing import Any

from ... import _compat
from ..._primitives import CALLS, CUSTOM_DERIVATIVES, ELEMENTWISE, GLUE
from ._graph import Graph

# ----------------------------------------------------------------------------- glue and shapes
# Seeing through a broadcast or reshape is only sound when the replacement, which works on the
# captured (un-broadcast) operands, lines their elements up the same way. Replacements broadcast like
# numpy (trailing axes) and reductions' replacements keep the reduced axes in place (keepdims), so a
# glue chain must be one of those; ``exp(a) + exp(b)[:, None]`` or ``exp(x) / sum(exp(x), axis=1)`` on
# a square matrix broadcast differently, and rewriting them would silently change the result.



def _reduction_axes(eqn: Any) -> tuple[int, ...] | None:
    """The axes of a ``reduce_*`` equation (``reduce_sum``, ``reduce_max``, ...), else None."""
    if not _compat.primitive_name(eqn).startswith("reduce_") or "axes" not in eqn.params:
        return None
    return tuple(int(a) for a in eqn.params["axes"])


def _glue_view(chain: list[Any], src_shape: tuple[int, ...]) -> tuple[int | None, ...] | None:
    """Which source axis each axis of the chain's result comes from (None: a broadcast or unit axis).

    ``chain`` is consumer first. Reshapes count only when they insert or drop unit axes; anything
    else (a real reshape) returns None.
    """
    view: list[int | None] = [k if s != 1 else None for k, s in enumerate(src_shape)]
    for eqn in reversed(chain):
        name = _compat.primitive_name(eqn)
        shape_in = tuple(_compat.aval(eqn.invars[0]).shape)
        shape_out = tuple(_compat.aval(eqn.outvars[0]).shape)
        if name == "broadcast_in_dim":
            new: list[int | None] = [None] * len(shape_out)
            for k, d in enumerate(eqn.params["broadcast_dimensions"]):
                new[d] = view[k] if shape_in[k] == shape_out[d] else None
        elif name in ("reshape", "squeeze", "expand_dims"):
            if eqn.params.get("dimensions") is not None:  # reshape with a transpose
                return None
            big_in = [(k, s) for k, s in enumerate(shape_in) if s != 1]
            big_out = [(d, s) for d, s in enumerate(shape_out) if s != 1]
            if [s for _, s in big_in] != [s for _, s in big_out]:
                return None
            new = [None] * len(shape_out)
            for (k, _), (d, _) in zip(big_in, big_out):
                new[d] = view[k]
        else:  # convert_element_type to the same dtype, copy
            new = view
        view = new
    return tuple(view)


_CALLING = CALLS | CUSTOM_DERIVATIVES


def _origin(g: Graph, atom: Any, depth: int = 8) -> tuple[Any, ...]:
    """How ``atom``'s axes relate to its inputs through element-wise equations.

    ``("plain",)``: no reduction on the way (numpy broadcasting of it is what a replacement does);
    ``("reduced", rank, axes)``: it is (an element-wise function of) a reduction over ``axes`` of a
    rank-``rank`` array; ``("unknown",)``: anything else, including the depth running out.
    """
    prod = g.producer_eqn(atom)
    if prod is None:
        return ("plain",)
    eqn = prod[1]
    axes = _reduction_axes(eqn)
    if axes is not None:
        return ("reduced", len(_compat.aval(eqn.invars[0]).shape), axes)
    if (_compat.primitive_name(eqn) in GLUE and eqn.invars
            and math.prod(_compat.aval(eqn.invars[0]).shape) == 1):
        return ("plain",)  # one value spread (``jnp.zeros_like``): every axis lines up with it
    if _compat.primitive_name(eqn) in _CALLING and len(eqn.outvars) == 1 and depth > 0:
        # a library function in a call of its own (jax 0.12.1's logsumexp): its body's reduction
        subs = _compat.subjaxprs(eqn)
        if len(subs) == 1:
            body = subs[0][1]
            inner = _origin(Graph(body, set()), _compat.outvars(body)[0], depth - 1)
            return inner if inner[0] == "reduced" else ("unknown",)
    if depth == 0 or _compat.primitive_name(eqn) not in ELEMENTWISE or len(eqn.outvars) != 1:
        return ("unknown",)
    shape = tuple(_compat.aval(eqn.outvars[0]).shape)
    found: set[tuple[Any, ...]] = set()
    for a in eqn.invars:
        if _compat.is_literal(a) or math.prod(_compat.aval(a).shape) == 1:
            continue  # a scalar operand: no axes to line up
        if tuple(_compat.aval(a).shape) != shape:
            return ("unknown",)
        found.add(_origin(g, a, depth - 1))
    found.discard(("plain",))
    if not found:
        return ("plain",)
    return found.pop() if len(found) == 1 else ("unknown",)


def _glue_ok(g: Graph, src: Any, chain: list[Any], into_reduction: bool) -> bool:
    """Whether the glue ``chain`` from ``src`` lines elements up as the replacement will."""
    if not chain:
        return True
    src_shape = tuple(_compat.aval(src).shape)
    dst_shape = tuple(_compat.aval(chain[0].outvars[0]).shape)
    view = _glue_view(chain, src_shape)
    if view is None:
        return False
    same = tuple(k if s != 1 else None for k, s in enumerate(src_shape))
    if into_reduction:  # a broadcast operand would be summed repeatedly
        return dst_shape == src_shape and view == same
    if view == same or math.prod(src_shape) == 1:  # unit axes expanded in place, or a scalar
        return True
    origin = _origin(g, src)
    if origin[0] == "plain":  # numpy broadcasting: new axes on the left
        return view == (None,) * (len(view) - len(same)) + same
    if origin[0] == "reduced":  # keepdims: the kept axes stay where the reduction found them
        rank, axes = origin[1], origin[2]
        kept = [d for d in range(rank) if d not in axes]
        if len(view) != rank or len(kept) != len(same):
            return False
        want: list[int | None] = [None] * rank
        for j, d in enumerate(kept):
            want[d] = same[j]
        return view == tuple(want)
    return False
