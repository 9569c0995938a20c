"""Library routines that JAX inlines (no call of their own): recognised by their equations' frames.

On jax 0.10, ``jax.scipy.special.ndtri`` is not a ``jit`` or ``custom_jvp`` call: its body's
primitives sit in the caller's jaxpr, so ``_library.lookup`` has no call to recognise. Every equation
JAX traced inside it still carries the Python frames it was traced under, the routine's among them.
A *region* is the equations of one jaxpr traced under the same call of the routine (same calling
frame: file, function and line); it is replaced by one ``jaxstab_exact`` equation of the routine when it
reads exactly one value from outside (the argument), only its last equation's result is used
outside, and its primitives are the routine's own (those JAX traces for it at the argument's shape and
dtype, shape-only equations aside). Otherwise it is left alone (the body is evaluated, exactly, as
before).

The last condition keeps derivatives out: JAX traces a JVP's tangent equations under the routine's
frame too, so in ``jax.grad(jax.scipy.special.ndtr)`` (whose primal result nothing reads) the
derivative's equations form a region that reads ``x`` and leaves one value; without it that region
was evaluated as ``ndtr(x)``, the value in place of the derivative (jax 0.10 and 0.12.1 alike).

Only where JAX inlines a routine (``INLINED`` says which, per version): on newer JAX ``ndtri`` is a
call, recognised by ``_library.lookup``; ``ndtr`` is inlined up to 0.12.0 (a call from 0.12.1).
"""

from __future__ import annotations

import collections
from typing import Any

import jax
import numpy as np

from ... import _compat
from ._exact import EXACT
from ._routines import _SPECIAL, BUILTIN, NORMAL, Routine

__all__ = ["INLINED", "inline_routines"]

#: ``(function name, file suffix) -> Routine`` of the routines JAX inlines. ``ndtr`` (jax 0.10 to
#: 0.12.0, ``_compat.INLINED_CALLS``): its body is ``erfc(-x·(1/√2))/2`` with 1/√2 rounded, whose
#: exact value differs from Φ(x) by up to ~140 ulps in the lower tail (x²·2^-54 relative: x = -22.8
#: in float64), so evaluating the body would hide JAX's own tail error; it is judged as Φ. (From 0.12.1
#: the function of that name only calls a ``jit`` of erf.py's ``ndtr``: its one-equation region is
#: the same Φ.)
INLINED: dict[tuple[str, str], Routine] = {
    (name, "jax/" + file): NORMAL[function] for (name, file), function in _compat.INLINED_CALLS.items()
    if function in NORMAL
}
if _compat.JAX_VERSION < (0, 11):
    INLINED[("ndtri", _SPECIAL)] = BUILTIN[(_SPECIAL, "_ndtri")]

#: The public function each inlined routine is traced from (for :func:`_own_primitives`).
_FUNCTIONS = {"ndtr": jax.scipy.special.ndtr, "ndtri": jax.scipy.special.ndtri}
#: Equations that only reshape or retype (present or not depending on how the call was batched).
_SHAPE_ONLY = frozenset({"broadcast_in_dim", "reshape", "squeeze", "expand_dims", "convert_element_type",
                         "copy", "copy_p"})

_cache: dict[int, tuple[Any, Any]] = {}
_own: dict[tuple[str, tuple[int, ...], str], collections.Counter[str] | None] = {}


def _primitives(eqns: Any) -> collections.Counter[str]:
    return collections.Counter(n for n in (_compat.primitive_name(e) for e in eqns) if n not in _SHAPE_ONLY)


def _own_primitives(routine: Routine, shape: tuple[int, ...], dtype: np.dtype[Any]) -> Any:
    """The primitives JAX traces for ``routine`` on an argument of ``shape`` and ``dtype`` (None: it
    has no public function here, or it could not be traced)."""
    key = (routine.name, shape, np.dtype(dtype).name)
    if key not in _own:
        fn = _FUNCTIONS.get(routine.name)
        try:
            with _compat.enable_x64():
                closed = None if fn is None else jax.make_jaxpr(fn)(jax.ShapeDtypeStruct(shape, dtype))
            _own[key] = None if closed is None else _primitives(_compat.eqns(closed))
        except Exception:  # an argument the function refuses: no region is taken for it
            _own[key] = None
    return _own[key]


def inline_routines(closed: Any) -> Any:
    """``closed`` with each inlined routine region as one ``jaxstab_exact`` equation (``closed`` itself
    when there is none)."""
    if not INLINED:
        return closed
    hit = _cache.get(id(closed))
    if hit is not None and hit[0] is closed:
        return hit[1]
    new = closed
    if any(_region_key(e) is not None for _, e in _compat.walk(closed)):
        from ...rewrites.engine._engine import rewrite_jaxpr
        from ...rewrites.engine._rule import Rule

        new, _ = rewrite_jaxpr(closed, [Rule("inlined_routine", None, _replace, matcher=_match,
                                             complex_ok=True)])
    if len(_cache) > 256:
        _cache.clear()
    _cache[id(closed)] = (closed, new)  # holds `closed` so that its id stays unique
    return new


def _region_key(eqn: Any) -> tuple[Routine, tuple[str, str, int]] | None:
    for (fname, suffix), routine in INLINED.items():
        caller = _compat.caller_of(eqn, fname, suffix)
        if caller is not None:
            return routine, caller
    return None


_graph_keys: dict[int, tuple[Any, list[Any]]] = {}


def _keys(g: Any) -> list[Any]:
    """Each equation's region key, computed once per graph."""
    hit = _graph_keys.get(id(g))
    if hit is not None and hit[0] is g:
        return hit[1]
    keys = [_region_key(e) for e in g.eqns]
    _graph_keys.clear()  # one graph at a time: the pass matches a graph's equations in a row
    _graph_keys[id(g)] = (g, keys)
    return keys


def _component(candidates: list[int], g: Any, i: int) -> list[int]:
    """The equations of ``candidates`` connected to ``i`` through values they pass each other (two
    calls of the routine on one line are two regions)."""
    parent = {j: j for j in candidates}

    def find(j: int) -> int:
        while parent[j] != j:
            parent[j] = parent[parent[j]]
            j = parent[j]
        return j

    producer = {v: j for j in candidates for v in g.eqns[j].outvars}
    for j in candidates:
        for a in g.eqns[j].invars:
            p = producer.get(a) if not _compat.is_literal(a) else None
            if p is not None:
                parent[find(j)] = find(p)
    if i not in parent:
        return []
    root = find(i)
    return [j for j in candidates if find(j) == root]


def _match(g: Any, i: int) -> Any:
    from ...rewrites.engine._match import Match

    keys = _keys(g)
    key = keys[i]
    if key is None:
        return None
    region = _component([j for j, k in enumerate(keys) if j not in g.claimed and k == key], g, i)
    if not region or region[-1] != i:
        return None  # the region's last equation is the root
    inside = set(region)
    defined = {v for j in region for v in g.eqns[j].outvars}
    consts = set(_compat.constvars(g.closed))
    reads = {a for j in region for a in g.eqns[j].invars
             if not _compat.is_literal(a) and a not in defined and a not in consts}
    used_outside = {a for j, e in enumerate(g.eqns) if j not in inside for a in e.invars
                    if not _compat.is_literal(a)} | {a for a in _compat.outvars(g.closed)
                                                     if not _compat.is_literal(a)}
    leaving = defined & used_outside
    root = g.eqns[i]
    routine = key[0]
    if len(reads) != routine.nargs or len(root.outvars) != 1 or leaving - {root.outvars[0]}:
        return None
    (arg,) = reads
    out = _compat.aval(root.outvars[0])
    if tuple(_compat.aval(arg).shape) != tuple(out.shape):
        return None
    own = _own_primitives(routine, tuple(out.shape), np.dtype(out.dtype))
    if own is None or _primitives(g.eqns[j] for j in region) != own:
        return None  # not the routine's value (a derivative traced under its frame; module docstring)
    captures = {"routine": routine, "shape": tuple(out.shape), "dtype": np.dtype(out.dtype), "x0": arg}
    return Match(i, captures, {"x0": arg}, inside - {i})


def _replace(routine: Routine, shape: tuple[int, ...], dtype: np.dtype[Any], x0: Any) -> Any:
    (out,) = EXACT.bind(x0, routine=routine, shape=shape, dtype=dtype)
    return out
