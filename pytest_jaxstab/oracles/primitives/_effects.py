"""Value-neutral effects and one-device parallelism: what the exact evaluation skips or sees through.

* ``debug_print`` (``jax.debug.print``), ``debug_callback`` and ``inspect_sharding`` print or call back
  and return nothing: the oracle skips them (no output is printed a second time by the exact
  evaluation). Layout and placement annotations (``layout_constraint``, ``reshard``,
  ``with_memory_space_constraint``, ``pvary``, ``pbroadcast``) return their operand.
* ``lax.composite`` is evaluated through its decomposition (the jaxpr it carries).
* ``shard_map`` (and ``jax.pmap``, which JAX lowers to it) over a mesh of **one device** computes its body
  on the whole arrays: the oracle evaluates the body. Its collectives then have one participant, so
  ``psum``/``pmax``/``pmin`` (and their ``_invariant`` forms) are the identity, ``all_gather`` adds the
  gathered axis of size 1, ``axis_index`` is 0 and ``ppermute`` maps the single shard to itself
  (``pxor``, JAX 0.12.1's bitwise all-reduce of integers, is the identity like ``pmax``). A mesh
  of more devices raises ``UnsupportedPrimitive``: which device holds which block is not a real-number
  question the oracle answers, and the blocks' collectives would need every device's values.
* ``jax.vmap(..., axis_name=...)`` turns a collective over its axis into one over a positional axis
  (``psum[axes=(0,)]``): an exact sum (max, min) over that axis of the whole array, as ``reduce_sum``.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np

from ... import _compat
from ..core._common import ZERO, Rule, full, out_aval
from ._reductions import RULES as _REDUCTIONS

__all__ = ["RULES"]


def _nothing(ctx: Any, eqn: Any, *xs: np.ndarray) -> list[np.ndarray]:
    return []


def _identity(ctx: Any, eqn: Any, *xs: np.ndarray) -> Any:
    return list(xs) if eqn.primitive.multiple_results else xs[0]


def _collective(reduction: str) -> Rule:
    """``psum``/``pmax``/``pmin``: over a mesh's named axis of one participant the identity; over the
    positional axes ``vmap`` leaves (ints in ``axes``), the exact reduction over them."""
    reduce = _REDUCTIONS[reduction]

    def rule(ctx: Any, eqn: Any, *xs: np.ndarray) -> Any:
        positional = tuple(int(a) for a in eqn.params.get("axes", ()) if isinstance(a, int | np.integer))
        if not positional:
            return _identity(ctx, eqn, *xs)
        proxy = SimpleNamespace(params={"axes": positional})
        outs = [reduce(ctx, proxy, x) for x in xs]
        return outs if eqn.primitive.multiple_results else outs[0]

    return rule


def _mesh_size(eqn: Any) -> int:
    mesh = eqn.params.get("mesh")
    size = getattr(mesh, "size", None)
    if size is None:
        shape = getattr(mesh, "shape", {}) or {}
        size = int(np.prod(list(dict(shape).values()))) if shape else 1
    return int(size)


def _shard_map(ctx: Any, eqn: Any, *args: np.ndarray) -> list[np.ndarray]:
    size = _mesh_size(eqn)
    if size != 1:
        raise ctx.unsupported(eqn, f"a shard_map over {size} devices (the oracle evaluates one-device "
                                   "meshes, where the body sees the whole arrays)")
    (_, body), *_ = _compat.subjaxprs(eqn)
    return ctx.call(body, args)


def _composite(ctx: Any, eqn: Any, *args: np.ndarray) -> list[np.ndarray]:
    (_, body), *_ = _compat.subjaxprs(eqn)  # lax.composite: its decomposition is its meaning
    return ctx.call(body, args)


def _all_gather(ctx: Any, eqn: Any, x: np.ndarray) -> np.ndarray:
    return np.reshape(x, tuple(out_aval(eqn).shape))  # one participant: a new axis of size 1 at most


def _axis_index(ctx: Any, eqn: Any) -> np.ndarray:
    return np.zeros((), dtype=out_aval(eqn).dtype)


def _ppermute(ctx: Any, eqn: Any, *xs: np.ndarray) -> Any:
    perm = list(eqn.params.get("perm", ()))
    if any(tuple(p) == (0, 0) for p in perm):
        return _identity(ctx, eqn, *xs)
    # No source maps to the one shard: XLA fills zeros.
    zeros = [full(x.shape, ZERO) if x.dtype == object else np.zeros_like(x) for x in xs]
    return zeros if eqn.primitive.multiple_results else zeros[0]


RULES: dict[str, Rule] = {
    "debug_print": _nothing,
    "inspect_sharding": _nothing,
    "layout_constraint": _identity,
    "reshard": _identity,
    "with_memory_space_constraint": _identity,
    "pvary": _identity,
    "pbroadcast": _identity,
    "psum": _collective("reduce_sum"),
    "psum_invariant": _collective("reduce_sum"),
    "pmax": _collective("reduce_max"),
    "pmin": _collective("reduce_min"),
    "pxor": _collective("reduce_xor"),  # JAX 0.12.1, integers only
    "all_gather": _all_gather,
    "all_gather_invariant": _all_gather,
    "axis_index": _axis_index,
    "ppermute": _ppermute,
    "shard_map": _shard_map,
    "composite": _composite,
}
