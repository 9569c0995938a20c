"""Exact semantics of the structural primitives: shapes, slicing, indexing, padding, identities.

These only move values around, so they are the same on object arrays of balls as on numpy arrays; the rules
follow XLA's definitions (clamped dynamic indices, gather/scatter dimension numbers and modes).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core._arb import ufunc
from ..core._balls import to_acb_array, to_arb_array
from ..core._common import INDET, Rule, full, ints_to_arb, is_complex, is_float, out_aval

__all__ = ["RULES", "scatter"]


def _identity(ctx: Any, eqn: Any, *xs: np.ndarray) -> Any:
    return list(xs) if eqn.primitive.multiple_results else xs[0]


def _broadcast_in_dim(ctx: Any, eqn: Any, x: np.ndarray, *dyn: np.ndarray) -> np.ndarray:
    if dyn:
        raise ctx.unsupported(eqn, "dynamic shapes")
    shape = tuple(eqn.params["shape"])
    expanded = [1] * len(shape)
    for i, d in enumerate(eqn.params["broadcast_dimensions"]):
        expanded[int(d)] = x.shape[i]
    return np.broadcast_to(x.reshape(expanded), shape)


def _reshape(ctx: Any, eqn: Any, x: np.ndarray, *dyn: np.ndarray) -> np.ndarray:
    if dyn:
        raise ctx.unsupported(eqn, "dynamic shapes")
    dims = eqn.params.get("dimensions")
    if dims is not None:
        x = np.transpose(x, tuple(dims))
    return np.reshape(x, tuple(eqn.params["new_sizes"]))


def _squeeze(ctx: Any, eqn: Any, x: np.ndarray) -> np.ndarray:
    return np.squeeze(x, axis=tuple(int(d) for d in eqn.params["dimensions"]))


def _expand_dims(ctx: Any, eqn: Any, x: np.ndarray) -> np.ndarray:
    return np.expand_dims(x, tuple(int(d) for d in eqn.params["dimensions"]))


def _transpose(ctx: Any, eqn: Any, x: np.ndarray) -> np.ndarray:
    return np.transpose(x, tuple(int(d) for d in eqn.params["permutation"]))


def _concatenate(ctx: Any, eqn: Any, *xs: np.ndarray) -> np.ndarray:
    return np.concatenate(xs, axis=int(eqn.params["dimension"]))


def _stack(ctx: Any, eqn: Any, *xs: np.ndarray) -> np.ndarray:
    return np.stack(xs, axis=int(eqn.params["axis"]))


def _split(ctx: Any, eqn: Any, x: np.ndarray) -> list[np.ndarray]:
    cuts = np.cumsum([int(s) for s in eqn.params["sizes"]])[:-1]
    return list(np.split(x, cuts, axis=int(eqn.params["axis"])))


def _unstack(ctx: Any, eqn: Any, x: np.ndarray) -> list[np.ndarray]:
    axis = int(eqn.params["axis"])
    return [np.take(x, i, axis=axis) for i in range(x.shape[axis])]


def _slice(ctx: Any, eqn: Any, x: np.ndarray) -> np.ndarray:
    p = eqn.params
    strides = p.get("strides") or (1,) * x.ndim
    return x[tuple(slice(int(s), int(e), int(st))
                   for s, e, st in zip(p["start_indices"], p["limit_indices"], strides))]


def _clamped_starts(starts: Sequence[np.ndarray], dims: Sequence[int], sizes: Sequence[int]) -> list[int]:
    # XLA clamps dynamic start indices so that the whole window is inside the operand.
    return [min(max(int(np.asarray(s)), 0), d - n) for s, d, n in zip(starts, dims, sizes)]


def _dynamic_slice(ctx: Any, eqn: Any, x: np.ndarray, *starts: np.ndarray) -> np.ndarray:
    sizes = [int(s) for s in eqn.params["slice_sizes"]]
    if len(starts) != x.ndim:
        raise ctx.unsupported(eqn, "dynamic shapes")
    begin = _clamped_starts(starts, x.shape, sizes)
    return x[tuple(slice(b, b + n) for b, n in zip(begin, sizes))]


def _dynamic_update_slice(ctx: Any, eqn: Any, x: np.ndarray, update: np.ndarray,
                          *starts: np.ndarray) -> np.ndarray:
    begin = _clamped_starts(starts, x.shape, update.shape)
    out = np.array(x, copy=True)
    out[tuple(slice(b, b + n) for b, n in zip(begin, update.shape))] = update
    return out


def _fill_value(eqn: Any, dtype: np.dtype) -> Any:
    """gather's value for out-of-bounds windows in FILL_OR_DROP mode (JAX's defaults when None)."""
    value = eqn.params.get("fill_value")
    if is_complex(dtype):  # NaN by default, as for floats: no value
        return None if value is None else to_acb_array(np.asarray(value, dtype=np.complex128))[()]
    if is_float(dtype):
        return None if value is None else to_arb_array(np.asarray(value, dtype=np.float64))[()]
    if value is not None:
        return value
    if dtype.kind == "b":
        return True
    info = np.iinfo(dtype)
    return info.min if np.issubdtype(dtype, np.signedinteger) else info.max


def _is_fill_mode(mode: Any) -> bool:
    return "FILL" in str(getattr(mode, "name", mode)).upper()


def _gather(ctx: Any, eqn: Any, operand: np.ndarray, indices: np.ndarray) -> np.ndarray:
    p = eqn.params
    dn = p["dimension_numbers"]
    offset_dims = tuple(int(d) for d in dn.offset_dims)
    collapsed = {int(d) for d in dn.collapsed_slice_dims}
    start_map = tuple(int(d) for d in dn.start_index_map)
    op_batch = tuple(int(d) for d in getattr(dn, "operand_batching_dims", ()))
    idx_batch = tuple(int(d) for d in getattr(dn, "start_indices_batching_dims", ()))
    sizes = tuple(int(s) for s in p["slice_sizes"])
    fill = _is_fill_mode(p.get("mode"))
    aval = out_aval(eqn)
    out_shape = tuple(aval.shape)
    idx = np.asarray(indices)
    batch_shape = idx.shape[:-1]
    kept = [d for d in range(operand.ndim) if d not in collapsed and d not in op_batch]
    kept_shape = [sizes[d] for d in kept]
    batch_pos = [d for d in range(len(out_shape)) if d not in offset_dims]
    out = np.empty(out_shape, dtype=operand.dtype)
    fill_value = _fill_value(eqn, np.dtype(aval.dtype)) if fill else None
    for b in np.ndindex(*batch_shape):
        vec = idx[b]
        start = [0] * operand.ndim
        for k, d in enumerate(start_map):
            start[d] = int(vec[k])
        for od, sd in zip(op_batch, idx_batch):
            start[od] = b[sd]
        oob = any(s < 0 or s > operand.shape[d] - sizes[d] for d, s in enumerate(start))
        target: list[Any] = [slice(None)] * len(out_shape)
        for pos, bi in zip(batch_pos, b):
            target[pos] = bi
        # The trailing Ellipsis keeps every target a view: assigning a 0-d object array to a bare
        # element would store the array itself.
        if fill and oob:
            out[(*target, Ellipsis)] = fill_value
            continue
        start = [min(max(s, 0), operand.shape[d] - sizes[d]) for d, s in enumerate(start)]
        window = operand[tuple(slice(s, s + n) for s, n in zip(start, sizes))]
        out[(*target, Ellipsis)] = window.reshape(kept_shape)
    return out


_COMBINE = {"scatter-add": "add", "scatter_add": "add", "scatter-mul": "mul", "scatter_mul": "mul",
            "scatter-min": "min", "scatter_min": "min", "scatter-max": "max", "scatter_max": "max",
            "scatter-sub": "sub", "scatter_sub": "sub"}


def scatter(ctx: Any, eqn: Any, operand: np.ndarray, indices: np.ndarray, updates: np.ndarray,
            combine: Any = None) -> np.ndarray:
    """The scatter family; ``combine`` (an object ufunc of (value there, update)) replaces the real
    combiner the primitive names (``_complex`` passes its complex ones)."""
    return _scatter(ctx, eqn, operand, indices, updates, combine)


def _scatter(ctx: Any, eqn: Any, operand: np.ndarray, indices: np.ndarray, updates: np.ndarray,
             combine_fn: Any = None) -> np.ndarray:
    p = eqn.params
    dn = p["dimension_numbers"]
    window_dims = tuple(int(d) for d in dn.update_window_dims)
    inserted = {int(d) for d in dn.inserted_window_dims}
    to_operand = tuple(int(d) for d in dn.scatter_dims_to_operand_dims)
    op_batch = tuple(int(d) for d in getattr(dn, "operand_batching_dims", ()))
    idx_batch = tuple(int(d) for d in getattr(dn, "scatter_indices_batching_dims", ()))
    fill = _is_fill_mode(p.get("mode"))
    combine = _COMBINE.get(eqn.primitive.name)
    idx = np.asarray(indices)
    upd = np.asarray(updates)
    scatter_pos = [d for d in range(upd.ndim) if d not in window_dims]
    window_shape = [upd.shape[d] for d in window_dims]
    full_window = []  # the window's extent along every operand dimension
    it = iter(window_shape)
    for d in range(operand.ndim):
        full_window.append(1 if d in inserted or d in op_batch else next(it))
    out = np.array(operand, copy=True)
    if combine is None:
        fn = None
    elif combine_fn is not None:
        fn = combine_fn
    elif out.dtype == object:
        fn = ufunc(combine)
    else:
        fn = {"add": np.add, "mul": np.multiply, "min": np.minimum, "max": np.maximum,
              "sub": np.subtract}[combine]
    for b in np.ndindex(*idx.shape[:-1]):
        vec = idx[b]
        start = [0] * operand.ndim
        for k, d in enumerate(to_operand):
            start[d] = int(vec[k])
        for od, sd in zip(op_batch, idx_batch):
            start[od] = b[sd]
        if any(s < 0 or s > operand.shape[d] - full_window[d] for d, s in enumerate(start)):
            if fill:
                continue  # FILL_OR_DROP drops out-of-bounds updates
            start = [min(max(s, 0), operand.shape[d] - full_window[d]) for d, s in enumerate(start)]
        source: list[Any] = [slice(None)] * upd.ndim
        for pos, bi in zip(scatter_pos, b):
            source[pos] = bi
        window = upd[(*source, Ellipsis)].reshape(full_window)
        region = tuple(slice(s, s + n) for s, n in zip(start, full_window))
        out[region] = window if fn is None else fn(out[region], window)
    return out


def _pad(ctx: Any, eqn: Any, x: np.ndarray, value: np.ndarray) -> np.ndarray:
    config = [(int(lo), int(hi), int(mid)) for lo, hi, mid in eqn.params["padding_config"]]
    # Lay out with non-negative edges first, then crop what negative edges remove.
    shape, place, crop = [], [], []
    for n, (lo, hi, mid) in zip(x.shape, config):
        body = n + max(n - 1, 0) * mid
        size = max(lo, 0) + body + max(hi, 0)
        shape.append(size)
        place.append(slice(max(lo, 0), max(lo, 0) + body, mid + 1))
        crop.append(slice(-min(lo, 0), size + min(hi, 0)))
    fill_with = np.asarray(value)[()]
    out = full(shape, fill_with) if x.dtype == object else np.full(shape, fill_with, dtype=x.dtype)
    out[tuple(place)] = x
    return out[tuple(crop)]


def _tile(ctx: Any, eqn: Any, x: np.ndarray) -> np.ndarray:
    return np.tile(x, tuple(int(r) for r in eqn.params["reps"]))


def _rev(ctx: Any, eqn: Any, x: np.ndarray) -> np.ndarray:
    return np.flip(x, axis=tuple(int(d) for d in eqn.params["dimensions"]))


def _iota(ctx: Any, eqn: Any, *dyn: np.ndarray) -> np.ndarray:
    if dyn:
        raise ctx.unsupported(eqn, "dynamic shapes")
    p = eqn.params
    shape = tuple(int(s) for s in p["shape"])
    dim = int(p["dimension"])
    counts = np.arange(shape[dim]).reshape([-1 if d == dim else 1 for d in range(len(shape))])
    counts = np.broadcast_to(counts, shape)
    dtype = np.dtype(p["dtype"])
    return ints_to_arb(counts) if is_float(dtype) else counts.astype(dtype)


def _platform_index(ctx: Any, eqn: Any) -> np.ndarray:
    # lax.platform_dependent: every branch computes the same function; take the default one (None),
    # which is the portable implementation, or else the first.
    platforms = list(eqn.params.get("platforms", ()))
    index = platforms.index(None) if None in platforms else 0
    return np.asarray(index, dtype=out_aval(eqn).dtype)


def _debug_callback(ctx: Any, eqn: Any, *xs: np.ndarray) -> list[np.ndarray]:
    return []  # jax.debug.print and friends: an effect with no value


def _empty(ctx: Any, eqn: Any) -> np.ndarray:
    """``jnp.empty``/``empty_like``: values XLA leaves uninitialized (backend dependent). A float element
    is some real the program cannot rely on: indeterminate, so whatever reads it is uncertain, while an
    array the program overwrites (``.at[...].set``) is exact."""
    aval = out_aval(eqn)
    if not is_float(aval.dtype):
        raise ctx.unsupported(eqn, "jnp.empty of a non-float dtype: its values are uninitialized (backend "
                                   "dependent), not a function of the inputs")
    return full(tuple(aval.shape), INDET)


RULES: dict[str, Rule] = {
    "empty": _empty,
    "broadcast_in_dim": _broadcast_in_dim,
    "reshape": _reshape,
    "squeeze": _squeeze,
    "expand_dims": _expand_dims,
    "transpose": _transpose,
    "concatenate": _concatenate,
    "split": _split,
    "unstack": _unstack,
    "stack": _stack,
    "slice": _slice,
    "dynamic_slice": _dynamic_slice,
    "dynamic_update_slice": _dynamic_update_slice,
    "gather": _gather,
    "scatter": _scatter,
    "scatter-add": _scatter,
    "scatter_add": _scatter,
    "scatter-mul": _scatter,
    "scatter_mul": _scatter,
    "scatter-min": _scatter,
    "scatter_min": _scatter,
    "scatter-max": _scatter,
    "scatter_max": _scatter,
    "scatter-sub": _scatter,
    "scatter_sub": _scatter,
    "pad": _pad,
    "rev": _rev,
    "tile": _tile,
    "iota": _iota,
    "copy": _identity,
    "copy_p": _identity,
    "stop_gradient": _identity,
    "optimization_barrier": _identity,
    "device_put": _identity,
    "sharding_constraint": _identity,
    "debug_callback": _debug_callback,
    "platform_index": _platform_index,
}
