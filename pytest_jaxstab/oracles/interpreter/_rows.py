"""Rows: where a whole program computes each row of its outputs from the same row of its inputs alone.

A program that is not elementwise (a layer norm, a log-sum-exp over the last axis, a cross-entropy)
is evaluated whole by the Arb path (``_evaluate``), so one undecided element used to cost a pass over
every element. Most such programs are *row-separable*: row ``i`` of each output reads row ``i`` of the
batched inputs and nothing else of them. Then the rows whose every output element is already decided
can be left out of a pass: their input rows become ``None`` (no value), on which every rule is a cheap
no-op that never raises, and the pending rows compute exactly what they would in a full pass.

:func:`batched` proves separability by following one *batch axis* per variable through the jaxpr, on
rules that are exact about where each primitive moves an element: elementwise primitives keep it
(an operand broadcast along it refuses), shapes move it (``broadcast_in_dim``, ``reshape`` with the same
row-major prefix, ``transpose``, ``squeeze``, ``expand_dims``), reductions and cumulative operations
keep it when they run along other axes, ``dot_general`` when it is a batch or a free axis of one
operand, ``gather`` in ``take_along_axis``'s pattern, slices and pads that leave it whole, a
``bitcast_convert_type`` (a stable form's power of two read off the exponent bits); calls are
followed inside. Anything else, or an axis reduced, contracted, indexed or broadcast, is a refusal:
the program runs whole, as before.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import _compat
from ..._primitives import CALLS, CUSTOM_DERIVATIVES, ELEMENTWISE
from ..library._routines import EXACT_PRIMITIVE, lookup

__all__ = ["batched", "masked"]

_cache: dict[int, tuple[Any, Any]] = {}


class _Refused(Exception):
    pass


def batched(closed: Any) -> tuple[int, list[bool], list[bool]] | None:
    """``(rows, inputs, outputs)``: the number of rows and which inputs and outputs are batched along
    their first axis, where the program is row-separable (outputs not batched read no batched input);
    None where that is not proven."""
    hit = _cache.get(id(closed))
    if hit is not None and hit[0] is closed:
        return hit[1]
    found = _analyse(closed)
    if len(_cache) > 256:
        _cache.clear()
    _cache[id(closed)] = (closed, found)
    return found


def masked(inputs: list[np.ndarray], rows: int, which: list[bool], pending: np.ndarray) -> list[np.ndarray]:
    """The inputs with the batched object arrays' rows outside ``pending`` made ``None``."""
    out = []
    for x, b in zip(inputs, which):
        if b and isinstance(x, np.ndarray) and x.dtype == object and x.shape[:1] == (rows,):
            x = x.copy()
            x[~pending] = None
        out.append(x)
    return out


def _analyse(closed: Any) -> tuple[int, list[bool], list[bool]] | None:
    outs = [tuple(_compat.aval(v).shape) for v in _compat.outvars(closed)]
    rows = next((s[0] for s in outs if s), None)
    if rows is None or rows < 2:
        return None
    shapes = [tuple(_compat.aval(v).shape) for v in _compat.invars(closed)]
    inputs = [bool(s) and s[0] == rows for s in shapes]
    try:
        labels = _walk(closed, [0 if b else None for b in inputs])
    except _Refused:
        return None
    if any(lab not in (None, 0) or (lab == 0 and s[0] != rows) for lab, s in zip(labels, outs)):
        return None
    if not any(lab == 0 for lab in labels):
        return None
    return rows, inputs, [lab == 0 for lab in labels]


def _walk(closed: Any, args: list[int | None]) -> list[int | None]:
    env: dict[Any, int | None] = dict(zip(_compat.invars(closed), args))

    def read(atom: Any) -> int | None:
        return None if _compat.is_literal(atom) else env.get(atom)

    for eqn in _compat.eqns(closed):
        outs = _rule(eqn, [read(a) for a in eqn.invars])
        for var, lab in zip(eqn.outvars, outs):
            env[var] = lab
    return [read(a) for a in _compat.outvars(closed)]


def _shape(atom: Any) -> tuple[int, ...]:
    return tuple(_compat.aval(atom).shape)


def _rule(eqn: Any, labels: list[int | None]) -> list[int | None]:
    name = _compat.primitive_name(eqn)
    nout = len(eqn.outvars)
    if all(lab is None for lab in labels):
        return [None] * nout  # reads nothing batched (iota, constants, anything of clean values)
    if name in CALLS or name in CUSTOM_DERIVATIVES or name == EXACT_PRIMITIVE:
        if lookup(eqn) is not None:  # a library routine: elementwise by contract
            lead = _compat.leading_consts(eqn)
            if any(lab is not None for lab in labels[:lead]):
                raise _Refused
            return [_elementwise(eqn, labels[lead:], eqn.invars[lead:])] * nout
        if name == EXACT_PRIMITIVE:
            raise _Refused
        body = (_compat.custom_call_parts(eqn)[0] if name in CUSTOM_DERIVATIVES
                else _compat.subjaxprs(eqn)[0][1])
        return _walk(body, labels)
    rule = _RULES.get(name)
    if rule is not None:
        return rule(eqn, labels)
    if name in ELEMENTWISE:
        return [_elementwise(eqn, labels, eqn.invars)] * nout
    raise _Refused


def _elementwise(eqn: Any, labels: list[int | None], atoms: list[Any]) -> int | None:
    out = _shape(eqn.outvars[0])
    found = None
    for lab, atom in zip(labels, atoms):
        if lab is None:
            continue
        shape = _shape(atom)
        if len(shape) != len(out) or shape[lab] != out[lab] or found not in (None, lab):
            raise _Refused  # broadcast along the batch axis, or two different axes
        found = lab
    return found


def _only_first(eqn: Any, labels: list[int | None]) -> int:
    if labels[0] is None or any(lab is not None for lab in labels[1:]):
        raise _Refused
    return labels[0]


def _broadcast(eqn: Any, labels: list[int | None]) -> list[int | None]:
    k = _only_first(eqn, labels)
    j = int(eqn.params["broadcast_dimensions"][k])
    if _shape(eqn.invars[0])[k] != _shape(eqn.outvars[0])[j]:
        raise _Refused
    return [j]


def _reshape(eqn: Any, labels: list[int | None]) -> list[int | None]:
    k = _only_first(eqn, labels)
    if eqn.params.get("dimensions") is not None:
        raise _Refused
    shape, out = _shape(eqn.invars[0]), _shape(eqn.outvars[0])
    before = int(np.prod(shape[:k], dtype=np.int64))
    for j, n in enumerate(out):  # the same row-major prefix and the same extent: the same index
        if int(np.prod(out[:j], dtype=np.int64)) == before and n == shape[k]:
            return [j]
    raise _Refused


def _transpose(eqn: Any, labels: list[int | None]) -> list[int | None]:
    k = _only_first(eqn, labels)
    return [list(int(p) for p in eqn.params["permutation"]).index(k)]


def _squeeze(eqn: Any, labels: list[int | None]) -> list[int | None]:
    k = _only_first(eqn, labels)
    ndim = len(_shape(eqn.invars[0]))
    dims = {int(d) % ndim for d in eqn.params["dimensions"]}
    if k in dims:
        raise _Refused
    return [k - sum(d < k for d in dims)]


def _expand_dims(eqn: Any, labels: list[int | None]) -> list[int | None]:
    k = _only_first(eqn, labels)
    new = {int(d) for d in eqn.params["dimensions"]}
    kept = [d for d in range(len(_shape(eqn.outvars[0]))) if d not in new]
    return [kept[k]]


def _reduce(eqn: Any, labels: list[int | None]) -> list[int | None]:
    k = _only_first(eqn, labels)
    axes = {int(a) for a in eqn.params["axes"]}
    if k in axes:
        raise _Refused
    return [k - sum(a < k for a in axes)] * len(eqn.outvars)


def _along(eqn: Any, labels: list[int | None]) -> list[int | None]:
    k = _only_first(eqn, labels)
    if int(eqn.params["axis"]) % len(_shape(eqn.invars[0])) == k:
        raise _Refused
    return [k]


def _slice(eqn: Any, labels: list[int | None]) -> list[int | None]:
    k = _only_first(eqn, labels)
    p = eqn.params
    strides = p.get("strides") or (1,) * len(_shape(eqn.invars[0]))
    if (int(p["start_indices"][k]), int(p["limit_indices"][k]), int(strides[k])) != \
            (0, _shape(eqn.invars[0])[k], 1):
        raise _Refused
    return [k]


def _rev(eqn: Any, labels: list[int | None]) -> list[int | None]:
    k = _only_first(eqn, labels)
    if k in {int(d) for d in eqn.params["dimensions"]}:
        raise _Refused
    return [k]


def _pad(eqn: Any, labels: list[int | None]) -> list[int | None]:
    k = _only_first(eqn, labels)
    if tuple(int(c) for c in eqn.params["padding_config"][k]) != (0, 0, 0):
        raise _Refused
    return [k]


def _bitcast(eqn: Any, labels: list[int | None]) -> list[int | None]:
    """``bitcast_convert_type``: each element's bits reread, so elementwise between dtypes of one width;
    between widths a trailing axis of the ratio is added or removed, never the batch axis."""
    k = _only_first(eqn, labels)
    shape, out = _shape(eqn.invars[0]), _shape(eqn.outvars[0])
    if k >= min(len(shape), len(out)) or shape[k] != out[k]:
        raise _Refused
    return [k]


def _concatenate(eqn: Any, labels: list[int | None]) -> list[int | None]:
    found = {lab for lab in labels if lab is not None}
    if len(found) != 1 or int(eqn.params["dimension"]) in found:
        raise _Refused
    return [_elementwise(eqn, labels, eqn.invars)]  # same shapes but along the joined axis


def _dot_general(eqn: Any, labels: list[int | None]) -> list[int | None]:
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    lc, rc, lb, rb = ([int(d) for d in ds] for ds in (lc, rc, lb, rb))
    kl, kr = labels
    lfree = [d for d in range(len(_shape(eqn.invars[0]))) if d not in lc and d not in lb]
    rfree = [d for d in range(len(_shape(eqn.invars[1]))) if d not in rc and d not in rb]
    if kl in lc or kr in rc:
        raise _Refused
    if kl in lb:
        j = lb.index(kl)
        if kr is not None and kr != rb[j]:
            raise _Refused
        return [j]
    if kl is not None:
        if kr is not None:
            raise _Refused
        return [len(lb) + lfree.index(kl)]
    if kr in rb:
        return [rb.index(kr)]
    if kr is None:
        raise _Refused
    return [len(lb) + len(lfree) + rfree.index(kr)]


def _gather(eqn: Any, labels: list[int | None]) -> list[int | None]:
    """``take_along_axis``'s pattern: the batch axis a batching dimension of the operand paired with one
    of the indices (or a whole window of the operand, or a batch axis of the indices alone)."""
    dn, sizes = eqn.params["dimension_numbers"], [int(s) for s in eqn.params["slice_sizes"]]
    offset = [int(d) for d in dn.offset_dims]
    op_batch = [int(d) for d in getattr(dn, "operand_batching_dims", ())]
    idx_batch = [int(d) for d in getattr(dn, "start_indices_batching_dims", ())]
    starts = {int(d) for d in dn.start_index_map}
    collapsed = {int(d) for d in dn.collapsed_slice_dims}
    ko, ki = labels
    nidx = len(_shape(eqn.invars[1]))
    batch_pos = [d for d in range(len(_shape(eqn.outvars[0]))) if d not in offset]
    if ki is not None and ki == nidx - 1:
        raise _Refused  # the index vector itself
    if ko is None:
        return [batch_pos[ki]]  # type: ignore[index]
    if ko in starts:
        raise _Refused
    if ko in op_batch:
        sd = idx_batch[op_batch.index(ko)]
        if ki not in (None, sd):
            raise _Refused
        return [batch_pos[sd]]
    if ki is not None or sizes[ko] != _shape(eqn.invars[0])[ko] or ko in collapsed:
        raise _Refused
    window = [d for d in range(len(sizes)) if d not in collapsed and d not in op_batch]
    return [offset[window.index(ko)]]


_RULES = {
    "broadcast_in_dim": _broadcast, "reshape": _reshape, "transpose": _transpose, "squeeze": _squeeze,
    "expand_dims": _expand_dims, "slice": _slice, "rev": _rev, "pad": _pad, "concatenate": _concatenate,
    "dot_general": _dot_general, "gather": _gather, "bitcast_convert_type": _bitcast,
    **dict.fromkeys(("reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "reduce_and", "reduce_or",
                     "reduce_xor", "argmax", "argmin"), _reduce),
    **dict.fromkeys(("cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp"), _along),
}
