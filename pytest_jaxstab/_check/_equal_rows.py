"""Equal rows: output elements whose conditioning is one figure, so that it is computed once.

A draw may repeat slices of its inputs (a batch whose rows are equal, weights from a small pool whose
columns repeat). Take an output axis ``a`` of length ``n`` and, in some inputs, one axis of length ``n``
each (*split* inputs; the others *shared*). Where the program is *equivariant* along them (permuting
the slices of every split input along its axis by one permutation permutes the output's slices along
``a`` by it: a dense layer ``relu(x @ w + b)`` along its batch axis with ``x`` split, or along its
columns with ``w`` and ``b`` split), a permutation that swaps two bitwise-equal slices of every split
input leaves the inputs as they were, so it leaves the exact function and its Jacobian as they were up
to swapping the two output slices: ``sum_i |x_i df_e/dx_i|`` (``_conditioning``'s figure) and the exact
value are equal at the two elements it swaps. Equal slices along several axes compose (the
permutations commute). The conditioning then computes one element per class (a reverse pass, or an
exact row from the oracle: about a second in a dense layer, where every output reads all of ``w``) and
gives its figure to the others.

Equivariance is proven by one walk of the jaxpr (:func:`_walk`) that follows the split axis of every
value computed from split inputs (the rules of ``oracles/interpreter/_rows``: elementwise operations,
broadcasts, transposes, reshapes that keep the axis, reductions along other axes, ``dot_general`` with
the axis free or batched; the axis reduced, contracted or anything else is a refusal) and, for every
value computed from shared inputs alone, which of its axes of length ``n`` are not known to be constant
(*suspect*: every such axis of a shared input, a constant, or a result of anything but an elementwise
operation, a broadcast, a transpose, a reduction or a ``dot_general``, which keep constancy). A suspect
axis aligned with the split axis (an elementwise operand, a ``dot_general`` batch axis) is a refusal:
``x + pe`` with a positional table ``pe`` depends on the row's index. A refusal leaves every element
to be computed, as before: it only costs time.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import _compat
from .._primitives import CALLS, CUSTOM_DERIVATIVES, ELEMENTWISE, REDUCTIONS

__all__ = ["LABELLINGS", "representatives", "split_axes"]

#: Choices of split axes tried per output axis (each input with axes of that length picks one or none).
LABELLINGS = 64

_cache: dict[tuple[int, int], tuple[Any, Any]] = {}


class _Refused(Exception):
    pass


class _Shared:
    """A value computed from shared inputs alone, with the axes of length ``n`` not known constant."""

    __slots__ = ("suspect",)

    def __init__(self, suspect: frozenset[int]) -> None:
        self.suspect = suspect


def split_axes(closed: Any, leaf: int) -> list[tuple[int, list[int | None]]]:
    """Per axis ``a`` of output ``leaf`` along which the program is proven equivariant (module
    docstring), ``(a, axes)``: the split axis of each input (None: shared). Cached per program."""
    key = (id(closed), leaf)
    hit = _cache.get(key)
    if hit is not None and hit[0] is closed:
        return hit[1]
    found = []
    in_shapes = [tuple(_compat.aval(v).shape) for v in _compat.invars(closed)]
    out_shape = tuple(_compat.aval(_compat.outvars(closed)[leaf]).shape)
    for a, n in enumerate(out_shape):
        if n < 2:
            continue
        options = [[*(d for d, s in enumerate(shape) if s == n), None] for shape in in_shapes]
        # Most inputs split first: an input left shared with an axis of length ``n`` makes it suspect.
        first = itertools.islice(itertools.product(*options), LABELLINGS)
        choices: list[tuple[int | None, ...]] = sorted(first, key=lambda c: sum(x is None for x in c))
        for axes in choices:
            if all(x is None for x in axes):
                continue
            try:
                labels = _walk(closed, n, [x if x is not None else _Shared(_suspect(s, n))
                                           for x, s in zip(axes, in_shapes)])
            except _Refused:
                continue
            if labels[leaf] == a:
                found.append((a, list(axes)))
                break
    if len(_cache) > 64:
        _cache.clear()
    _cache[key] = (closed, found)
    return found


def representatives(closed: Any, args: Sequence[np.ndarray], judged_outputs: Sequence[int],
                    ) -> list[np.ndarray | None]:
    """Per judged output, each flat index's representative: along every proven axis, the first slice
    whose split inputs equal its own bitwise (module docstring); None where nothing is shared so."""
    out: list[np.ndarray | None] = []
    for leaf in judged_outputs:
        shape = tuple(_compat.aval(_compat.outvars(closed)[leaf]).shape)
        firsts = [np.arange(n) for n in shape]
        for a, axes in split_axes(closed, leaf):
            firsts[a] = _first_equal([_slices(x, k, shape[a]) for x, k in zip(args, axes) if k is not None])
        if all(len(np.unique(f)) == len(f) for f in firsts):
            out.append(None)
            continue
        grid = np.meshgrid(*firsts, indexing="ij") if shape else []
        out.append(np.ravel_multi_index(grid, shape).reshape(-1) if shape else np.zeros(1, np.int64))
    return out


def _slices(x: Any, k: int, n: int) -> np.ndarray:
    """The bytes of each of the ``n`` slices of ``x`` along axis ``k``, one row each."""
    return np.ascontiguousarray(np.moveaxis(np.asarray(x), k, 0)).reshape(n, -1).view(np.uint8).reshape(n, -1)


def _first_equal(parts: list[np.ndarray]) -> np.ndarray:
    """Per slice, the first slice whose bytes in every part equal its own (itself where none does)."""
    n = parts[0].shape[0]
    rows = np.ascontiguousarray(np.concatenate(parts, axis=1))
    # One opaque scalar per slice: a sort of ``n`` memcmp keys, not a lexicographic sort of every byte.
    keys = rows.view(np.dtype((np.void, rows.shape[1]))).reshape(n) if rows.shape[1] else np.zeros(n)
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    return first[np.asarray(inverse).reshape(-1)]


def _suspect(shape: tuple[int, ...], n: int) -> frozenset[int]:
    return frozenset(d for d, s in enumerate(shape) if s == n)


def _shape(atom: Any) -> tuple[int, ...]:
    return tuple(_compat.aval(atom).shape)


def _walk(closed: Any, n: int, states: list[Any]) -> list[Any]:
    """Each output's state (its split axis, or :class:`_Shared`) given the inputs' ``states``; raises
    ``_Refused`` where equivariance along the split axes of length ``n`` is not proven."""
    env: dict[Any, Any] = dict(zip(_compat.invars(closed), states))
    for var in _compat.constvars(closed):
        env[var] = _Shared(_suspect(_shape(var), n))

    def read(atom: Any) -> Any:
        if _compat.is_literal(atom):
            return _Shared(_suspect(tuple(np.shape(_compat.literal_value(atom))), n))
        return env[atom]

    for eqn in _compat.eqns(closed):
        ins = [read(a) for a in eqn.invars]
        name = _compat.primitive_name(eqn)
        if name in CALLS:
            outs = _walk(_compat.subjaxprs(eqn)[0][1], n, ins)
        elif name in CUSTOM_DERIVATIVES:
            outs = _walk(_compat.custom_call_parts(eqn)[0], n, ins)
        elif _compat.subjaxprs(eqn):
            raise _Refused  # a loop or a branch: not followed
        elif all(isinstance(s, _Shared) for s in ins):
            outs = _shared(eqn, name, ins, n)
        else:
            outs = [_split(eqn, name, ins)] * len(eqn.outvars)
        for var, s in zip(eqn.outvars, outs):
            env[var] = s
    return [read(a) for a in _compat.outvars(closed)]


def _shared(eqn: Any, name: str, ins: list[Any], n: int) -> list[Any]:
    """The suspect axes of an equation's results over shared values (module docstring)."""
    if name in ELEMENTWISE:
        return [_Shared(frozenset().union(*(s.suspect for s in ins)))] * len(eqn.outvars)
    if name == "transpose":
        perm = [int(p) for p in eqn.params["permutation"]]
        return [_Shared(frozenset(j for j, p in enumerate(perm) if p in ins[0].suspect))]
    if name == "broadcast_in_dim":
        dims = [int(d) for d in eqn.params["broadcast_dimensions"]]
        return [_Shared(frozenset(dims[k] for k in ins[0].suspect))]
    if name in REDUCTIONS:
        axes = {int(a) for a in eqn.params["axes"]}
        kept = [d for d in range(len(_shape(eqn.invars[0]))) if d not in axes]
        return [_Shared(frozenset(kept.index(d) for d in ins[0].suspect if d in kept))] * len(eqn.outvars)
    if name == "dot_general":
        (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
        lc, rc, lb, rb = ([int(d) for d in ds] for ds in (lc, rc, lb, rb))
        lfree = [d for d in range(len(_shape(eqn.invars[0]))) if d not in lc and d not in lb]
        rfree = [d for d in range(len(_shape(eqn.invars[1]))) if d not in rc and d not in rb]
        sl, sr = ins[0].suspect, ins[1].suspect
        marks = ([lb[j] in sl or rb[j] in sr for j in range(len(lb))] + [d in sl for d in lfree]
                 + [d in sr for d in rfree])
        return [_Shared(frozenset(j for j, m in enumerate(marks) if m))]
    # Anything else may make an axis of length n that varies along it (an iota, a reshape, a concatenation).
    return [_Shared(_suspect(_shape(v), n)) for v in eqn.outvars]


def _split(eqn: Any, name: str, ins: list[Any]) -> int:
    """The split axis of an equation's results where some operand is split (module docstring)."""
    if name in ELEMENTWISE:
        axes = {s for s in ins if not isinstance(s, _Shared)}
        if len(axes) != 1:
            raise _Refused
        (k,) = axes
        out = _shape(eqn.outvars[0])
        for s, atom in zip(ins, eqn.invars):
            shape = _shape(atom) if not _compat.is_literal(atom) else ()
            if isinstance(s, _Shared):
                if shape and (len(shape) != len(out) or k in s.suspect):
                    raise _Refused  # a shared operand that may vary along the split axis
            elif len(shape) != len(out) or shape[k] != out[k]:
                raise _Refused
        return k
    if name == "dot_general":
        return _dot(eqn, ins)
    if isinstance(ins[0], _Shared) or any(not isinstance(s, _Shared) for s in ins[1:]):
        raise _Refused  # one split operand, first, is what the rules below follow
    k = ins[0]
    shape, out = _shape(eqn.invars[0]), _shape(eqn.outvars[0])
    if name == "broadcast_in_dim":
        j = int(eqn.params["broadcast_dimensions"][k])
        if shape[k] != out[j]:
            raise _Refused
        return j
    if name == "transpose":
        return [int(p) for p in eqn.params["permutation"]].index(k)
    if name in REDUCTIONS:
        axes = {int(a) for a in eqn.params["axes"]}
        if k in axes:
            raise _Refused
        return k - sum(a < k for a in axes)
    if name == "squeeze":
        dims = {int(d) % len(shape) for d in eqn.params["dimensions"]}
        if k in dims:
            raise _Refused
        return k - sum(d < k for d in dims)
    if name == "expand_dims":
        new = {int(d) for d in eqn.params["dimensions"]}
        return [d for d in range(len(out)) if d not in new][k]
    if name == "reshape" and eqn.params.get("dimensions") is None:
        before = math.prod(shape[:k])
        for j, m in enumerate(out):  # the same row-major prefix and extent: the same slices
            if math.prod(out[:j]) == before and m == shape[k]:
                return j
    raise _Refused


def _dot(eqn: Any, ins: list[Any]) -> int:
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    lc, rc, lb, rb = ([int(d) for d in ds] for ds in (lc, rc, lb, rb))
    lfree = [d for d in range(len(_shape(eqn.invars[0]))) if d not in lc and d not in lb]
    rfree = [d for d in range(len(_shape(eqn.invars[1]))) if d not in rc and d not in rb]
    left, right = ins
    if not isinstance(left, _Shared):
        if left in lc:
            raise _Refused
        if left in lb:
            j = lb.index(left)
            if (right if not isinstance(right, _Shared) else None) != rb[j] and (
                    not isinstance(right, _Shared) or rb[j] in right.suspect):
                raise _Refused  # paired with another split axis, or with a shared axis that may vary
            return j
        if not isinstance(right, _Shared):
            raise _Refused  # two split axes in one product: not one permutation
        return len(lb) + lfree.index(left)
    if right in rc:
        raise _Refused
    if right in rb:
        j = rb.index(right)
        if lb[j] in left.suspect:
            raise _Refused
        return j
    return len(lb) + len(lfree) + rfree.index(right)
