"""The walker behind ``find_nan_origin``: a concrete evaluation of a jaxpr, equation by equation,
that records where non-finite values are born and tracks, **per element**, which origins reached each
non-finite element (see the definitions in ``_nan_origin``).

Taints: every inexact value carries an int32 array of its shape (or None: no element tainted), each
element the id of an interned set of origin keys. Id 0 is a finite element; id 1 a non-finite element
that no origin explains (it came from the function's arguments). Propagation:

* elementwise primitives (``select_n``/``where`` included, scalars broadcast): an output element takes
  the union of the taints of the non-finite operand elements at its index (for ``select_n``, only of
  the selected case);
* moves (slices, gathers, scatters, concatenation, padding, broadcasting, reshapes, transposes,
  dynamic slices and updates): the primitive itself is re-bound on the taint ids, so each element's
  taint travels with the element;
* reductions over ``axes``: an output element takes the union over the reduced operand elements; an
  overflow there (a non-finite result with only finite reduced elements) is an origin, per element;
* anything else (``dot_general``, ``cumsum``, ``sort``, ...): per array, as before: a non-finite output
  element takes every non-finite operand's taints, and is an origin only when every operand is finite.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Sequence
from typing import Any

import jax.numpy as jnp
import numpy as np

from .. import _compat as C
from .._primitives import ACCUMULATING, CALLS, CUSTOM_DERIVATIVES, ELEMENTWISE
from ..oracles.library._routines import routine_name
from ._nan_records import Key, NanOrigin, _inexact, _letter, _summary

__all__ = ["Ctx", "Walker", "all_finite", "every_finite", "origin_key"]

#: Primitives that only move elements: their taints move with them when re-bound on the taint ids.
_MOVES = frozenset({
    "broadcast_in_dim", "reshape", "squeeze", "expand_dims", "transpose", "rev", "slice",
    "dynamic_slice", "dynamic_update_slice", "concatenate", "pad", "gather", "scatter", "copy", "copy_p",
    "stack", "split",
})
#: Reductions over ``params["axes"]`` whose result elements depend on the reduced elements only.
_AXIS_REDUCTIONS = frozenset({"reduce_sum", "reduce_max", "reduce_min", "reduce_prod"})

_FINITE, _UNEXPLAINED = 0, 1
_TRACKED = 64  # elements per origin whose own path to the result is tracked


def origin_key(k: Any) -> Key:
    """The origin key of a taint entry (a sub-key ``(key, steps, flat index)`` or a key itself)."""
    return k[0] if isinstance(k[0], tuple) else k

Taint = "np.ndarray | None"


@dataclasses.dataclass(frozen=True)
class Ctx:
    """The enclosing equations (outermost first) and the iteration of each enclosing loop."""

    stack: tuple[Any, ...]
    steps: tuple[int, ...]

    def push(self, eqn: Any, step: int | None = None) -> Ctx:
        return Ctx((*self.stack, eqn), self.steps if step is None else (*self.steps, step))


class Walker:
    """Evaluates a jaxpr concretely, recording origins and propagating per-element taints."""

    def __init__(self, exhaustive: bool) -> None:
        # exhaustive: walk every sub-program; otherwise skip those whose outputs are all finite.
        self.exhaustive = exhaustive
        self.origins: dict[Key, NanOrigin] = {}
        # interned sets of origin keys, or of sub-keys (key, loop steps, flat index) for born elements
        self._sets: list[frozenset[Any]] = [frozenset(), frozenset()]
        self._ids: dict[frozenset[Any], int] = {}
        self._born: dict[Key, tuple[Any, ...]] = {}  # what an origin's first occurrence saw

    # -- taint sets -----------------------------------------------------------------------------
    def _id(self, keys: frozenset[Any]) -> int:
        if not keys:
            return _UNEXPLAINED
        i = self._ids.get(keys)
        if i is None:
            i = self._ids[keys] = len(self._sets)
            self._sets.append(keys)
        return i

    def keys(self, taint: np.ndarray | None) -> frozenset[Any]:
        """Every origin key or sub-key in a taint array."""
        if taint is None:
            return frozenset()
        out: set[Any] = set()
        for i in np.unique(taint):
            out |= self._sets[int(i)]
        return frozenset(out)

    def _union(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Element-wise union of two taint arrays of one shape."""
        out = np.where(a == _FINITE, b, a)
        both = (a > _UNEXPLAINED) & (b > _UNEXPLAINED) & (a != b)
        if both.any():
            pairs = {(int(x), int(y)) for x, y in zip(a[both], b[both])}
            table = {p: self._id(self._sets[p[0]] | self._sets[p[1]]) for p in pairs}
            out[both] = [table[(int(x), int(y))] for x, y in zip(a[both], b[both])]
        out = np.where((a == _UNEXPLAINED) & (b > _UNEXPLAINED), b, out)
        return out.astype(np.int32)

    def _with(self, taint: np.ndarray, mask: np.ndarray, key: Key) -> np.ndarray:
        """``taint`` with ``key`` added where ``mask``."""
        new = self._id(frozenset({key}))
        return self._union(taint, np.where(mask, new, _FINITE).astype(np.int32))

    # -- jaxpr ----------------------------------------------------------------------------------
    def run(self, closed: Any, invals: Sequence[Any], intaints: Sequence[Any],
            ctx: Ctx) -> tuple[list[Any], list[Any]]:
        env: dict[Any, Any] = {}
        taint: dict[Any, Any] = {}
        pending: set[Any] = set()  # non-finite captured constants not yet consumed
        _, consts = C.parts(closed)
        for v, c in zip(C.constvars(closed), consts):
            env[v], taint[v] = c, None
            if not all_finite(c):
                pending.add(v)
        for v, x, t in zip(C.invars(closed), invals, intaints):
            env[v], taint[v] = x, t
        for eqn in C.eqns(closed):
            lits = [C.is_literal(a) for a in eqn.invars]
            vals = [C.literal_value(a) if lit else env[a] for a, lit in zip(eqn.invars, lits)]
            tnts = [None if lit else taint[a] for a, lit in zip(eqn.invars, lits)]
            for pos, (atom, lit) in enumerate(zip(eqn.invars, lits)):
                if (lit or atom in pending) and not all_finite(vals[pos]):
                    key = self._constant(eqn, ctx, eqn.invars, vals, pos)
                    tnts[pos] = self._with(self._base(vals[pos], tnts[pos]), _bad(vals[pos]), key)
                    if not lit:
                        taint[atom] = tnts[pos]
                        pending.discard(atom)
            outs, out_t = self._eval(eqn, vals, tnts, ctx)
            for v, o, t in zip(eqn.outvars, outs, out_t):
                if not C.is_dropvar(v):
                    env[v], taint[v] = o, t
        outs, out_t = [], []
        for atom in C.outvars(closed):
            val = C.literal_value(atom) if C.is_literal(atom) else env[atom]
            t = None if C.is_literal(atom) else taint[atom]
            if (C.is_literal(atom) or atom in pending) and not all_finite(val):
                # A constant returned as is: its consumer is the enclosing equation (if any).
                outer = ctx.stack[-1] if ctx.stack else None
                key = self._constant(outer, Ctx(ctx.stack[:-1], ctx.steps), [atom], [val], 0)
                t = self._with(self._base(val, t), _bad(val), key)
            outs.append(val)
            out_t.append(t)
        return outs, out_t

    def _base(self, val: Any, t: np.ndarray | None) -> np.ndarray:
        if t is not None:
            return t
        return np.where(_bad(val), _UNEXPLAINED, _FINITE).astype(np.int32)

    # -- one equation ---------------------------------------------------------------------------
    def _eval(self, eqn: Any, vals: list[Any], tnts: list[Any], ctx: Ctx) -> tuple[list[Any], list[Any]]:
        name = C.primitive_name(eqn)
        if not self.exhaustive and (name in CALLS or name in CUSTOM_DERIVATIVES
                                    or name in ("scan", "while", "cond")):
            # Fast path: non-finite values leave a sub-program only through its outputs, so when
            # they are all finite (one compiled call) nothing born inside can reach the result.
            outs = C.bind(eqn, vals)
            if every_finite(outs):
                return outs, [None for _ in outs]
        if (name in CALLS or name in CUSTOM_DERIVATIVES) and routine_name(eqn) is not None:
            return self._leaf(eqn, vals, tnts, ctx)  # a library routine: one operation, as the oracle sees it
        if name in CALLS:
            subs = C.subjaxprs(eqn)
            if len(subs) == 1 and len(C.invars(subs[0][1])) == len(vals):
                return self.run(subs[0][1], vals, tnts, ctx.push(eqn))
        elif name in CUSTOM_DERIVATIVES:
            body, _ = C.custom_call_parts(eqn)
            if len(C.invars(body)) == len(vals):
                return self.run(body, vals, tnts, ctx.push(eqn))
        elif name == "scan" and eqn.params["length"] > 0:
            return self._scan(eqn, vals, tnts, ctx)
        elif name == "while":
            return self._while(eqn, vals, tnts, ctx)
        elif name == "cond":
            _, _, branches = C.cond_parts(eqn)
            i = min(max(int(np.asarray(vals[0])), 0), len(branches) - 1)  # lax.switch clamps too
            return self.run(branches[i], vals[1:], tnts[1:], ctx.push(eqn))
        return self._leaf(eqn, vals, tnts, ctx)

    def _scan(self, eqn: Any, vals: list[Any], tnts: list[Any], ctx: Ctx) -> tuple[list[Any], list[Any]]:
        sp = C.scan_parts(eqn)
        nc, nk = len(sp.consts), len(sp.carry)
        consts, carry, xs = vals[:nc], vals[nc:nc + nk], vals[nc + nk:]
        ct, kt, xt = tnts[:nc], tnts[nc:nc + nk], tnts[nc + nk:]
        ys: list[list[Any]] = [[None] * sp.length for _ in sp.ys]
        yt: list[list[Any]] = [[None] * sp.length for _ in sp.ys]
        order = range(sp.length - 1, -1, -1) if sp.reverse else range(sp.length)
        xs = [_host_or_device(x) for x in xs]  # slicing numpy arrays costs no dispatch
        for i in order:
            x_t = [None if t is None else t[i] for t in xt]
            outs, ot = self.run(sp.body, [*consts, *carry, *(x[i] for x in xs)], [*ct, *kt, *x_t],
                                ctx.push(eqn, i))
            carry, kt = outs[:nk], ot[:nk]
            for j, (y, t) in enumerate(zip(outs[nk:], ot[nk:])):
                ys[j][i] = y
                yt[j][i] = t
        stacked_t = []
        for j, ts in enumerate(yt):
            if all(t is None for t in ts):
                stacked_t.append(None)
            else:
                stacked_t.append(np.stack([self._base(ys[j][i], t) for i, t in enumerate(ts)]))
        return [*carry, *(_stack(y) for y in ys)], [*kt, *stacked_t]

    def _while(self, eqn: Any, vals: list[Any], tnts: list[Any], ctx: Ctx) -> tuple[list[Any], list[Any]]:
        wp = C.while_parts(eqn)
        nc, nb = len(wp.cond_consts), len(wp.body_consts)
        cc, bc, carry = vals[:nc], vals[nc:nc + nb], vals[nc + nb:]
        cct, bct, kt = tnts[:nc], tnts[nc:nc + nb], tnts[nc + nb:]
        step = 0
        while True:
            (pred,), _ = self.run(wp.cond, [*cc, *carry], [*cct, *kt], ctx.push(eqn, step))
            if not bool(np.asarray(pred)):
                return carry, kt
            carry, kt = self.run(wp.body, [*bc, *carry], [*bct, *kt], ctx.push(eqn, step))
            step += 1

    def _leaf(self, eqn: Any, vals: list[Any], tnts: list[Any], ctx: Ctx) -> tuple[list[Any], list[Any]]:
        outs = C.bind(eqn, vals)
        name = _name(eqn)
        out_t: list[Any] = []
        moves: list[np.ndarray | None] | None = None
        for k, out in enumerate(outs):
            if not _inexact(out):
                out_t.append(None)
                continue
            a = np.asarray(out)
            bad = ~np.isfinite(a)
            if not bad.any():
                out_t.append(None)
                continue
            elementwise = ((name in ELEMENTWISE or name != C.primitive_name(eqn))  # routines: elementwise
                           and all(np.shape(v) in ((), a.shape) for v in vals))
            if elementwise:
                inherited, fresh = self._elementwise(name, vals, tnts, a.shape, bad)
            else:
                moved = None
                if name in _MOVES:
                    if moves is None:
                        moves = self._move(eqn, vals, tnts, [np.shape(o) for o in outs])
                    moved = moves[k]
                if moved is not None:
                    inherited = np.where(bad, moved, _FINITE).astype(np.int32)
                    fresh = bad & (moved == _FINITE)
                elif name in _AXIS_REDUCTIONS and len(vals) == 1:
                    inherited, fresh = self._reduce(eqn, vals[0], tnts[0], a.shape, bad)
                else:
                    inherited, fresh = self._whole(vals, tnts, a.shape, bad)
            if fresh.any():
                inherited = self._union(inherited, self._fresh_ids(eqn, ctx, vals, a, fresh, elementwise))
            out_t.append(inherited)
        return outs, out_t

    def _elementwise(self, name: str, vals: list[Any], tnts: list[Any], shape: tuple[int, ...],
                     bad: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        chosen = _select_masks(vals, shape) if name == "select_n" else None
        inherited = np.zeros(shape, np.int32)
        explained = np.zeros(shape, bool)
        for k, (v, t) in enumerate(zip(vals, tnts)):
            if not _inexact(v):
                continue
            mb = np.broadcast_to(_bad(v), shape)
            if not mb.any():
                continue
            reach = mb & bad if chosen is None or k == 0 else mb & bad & chosen[k - 1]
            explained |= mb if chosen is None or k == 0 else mb & chosen[k - 1]
            if reach.any():
                tk = np.broadcast_to(self._base(v, t), shape)
                inherited = self._union(inherited, np.where(reach, tk, _FINITE).astype(np.int32))
        fresh = bad & ~explained
        inherited = np.where(bad & ~fresh & (inherited == _FINITE), _UNEXPLAINED, inherited)
        return inherited.astype(np.int32), fresh

    def _move(self, eqn: Any, vals: list[Any], tnts: list[Any],
              shapes: list[tuple[int, ...]]) -> list[np.ndarray | None]:
        """The taints moved by re-binding the primitive on them (None where it cannot be done)."""
        try:
            ins = [jnp.asarray(self._base(v, t)) if _inexact(v) else v for v, t in zip(vals, tnts)]
            with warnings.catch_warnings():  # a NaN fill value cast to the int32 ids: handled below
                warnings.simplefilter("ignore", RuntimeWarning)
                moved = [np.asarray(m) for m in C.bind(eqn, ins)]
        except Exception:  # a move that will not take int32 ids: per array instead
            return [None] * len(shapes)
        # An id no taint set has (a gather's out-of-bounds fill value) marks an element born there.
        return [np.where((m >= 0) & (m < len(self._sets)), m, _FINITE).astype(np.int32) if m.shape == s
                else None for m, s in zip(moved, shapes)]

    def _reduce(self, eqn: Any, v: Any, t: Any, shape: tuple[int, ...],
                bad: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        base = self._base(v, t)
        axes = tuple(int(a) for a in eqn.params.get("axes", ()))
        keep = [d for d in range(base.ndim) if d not in axes]
        rows = np.transpose(base, keep + list(axes)).reshape(int(np.prod(shape, dtype=np.int64)), -1)
        inherited = np.zeros(rows.shape[0], np.int32)
        fresh = np.zeros(rows.shape[0], bool)
        for r in np.flatnonzero(bad.reshape(-1)):
            ids = {int(i) for i in np.unique(rows[r]) if i != _FINITE}
            if not ids:
                fresh[r] = True
                continue
            keys: frozenset[Any] = frozenset().union(*(self._sets[i] for i in ids))
            inherited[r] = self._id(keys)
        return inherited.reshape(shape), fresh.reshape(shape)

    def _whole(self, vals: list[Any], tnts: list[Any], shape: tuple[int, ...],
               bad: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        keys: set[Any] = set()
        any_bad = False
        for v, t in zip(vals, tnts):
            if _inexact(v) and _bad(v).any():
                any_bad = True
                keys |= self.keys(t)
        fresh = bad if not any_bad else np.zeros_like(bad)
        tid = self._id(frozenset(keys))
        return np.where(bad & ~fresh, tid, _FINITE).astype(np.int32), fresh

    # -- records --------------------------------------------------------------------------------
    def _where(self, eqn: Any, ctx: Ctx) -> tuple[Key, str | None, tuple[str, ...]]:
        # eqn is None for a constant returned by the top-level function: no equation consumes it.
        chain = (*ctx.stack, eqn) if eqn is not None else ctx.stack
        path = tuple(C.eqn_name(e) for e in chain) or ("output",)
        src = C.source_line_in(chain)
        loc = None if src is None else str(src)
        prim = "output" if eqn is None else _name(eqn)
        return (prim, loc, path), (src.text if src else None), path

    def _fresh_ids(self, eqn: Any, ctx: Ctx, vals: list[Any], out: np.ndarray, fresh: np.ndarray,
                   elementwise: bool) -> np.ndarray:
        """Taint ids of the elements born at ``eqn``: each of the first :data:`_TRACKED` elements of
        an origin's first occurrence carries its own sub-key ``(key, steps, flat index)``, so the
        element reported can be one that reaches the result (:meth:`reaching`)."""
        key = self._record(eqn, ctx, vals, out, fresh, elementwise)
        if key not in self._born:
            self._born[key] = (eqn, ctx, vals, out, fresh, elementwise)
        first = self._born[key][1].steps == ctx.steps
        ids = np.zeros(out.shape, np.int32)
        flats = np.flatnonzero(fresh)
        tracked = flats[:_TRACKED] if first else flats[:0]
        for f in tracked:
            ids.flat[int(f)] = self._id(frozenset({(key, ctx.steps, int(f))}))
        rest = np.zeros(out.shape, bool)
        rest.flat[flats[len(tracked):]] = True
        ids[rest] = self._id(frozenset({(key, ctx.steps, -1)}))
        return ids

    def reaching(self, reached: frozenset[Any]) -> list[NanOrigin]:
        """Every origin in evaluation order with ``reaches_output`` set from the reached sub-keys; an
        origin reaching the result is reported at its first element that does (same loop step)."""
        keys = {origin_key(k) for k in reached}
        out = []
        for key, origin in self.origins.items():
            hits = sorted(k[2] for k in reached if isinstance(k[0], tuple) and k[0] == key
                          and k[1] == origin.steps and k[2] >= 0)
            if key in self._born and hits and origin.index is not None:
                eqn, ctx, vals, val_out, fresh, elementwise = self._born[key]
                if int(np.ravel_multi_index(origin.index, val_out.shape)) not in hits:
                    origin = self._make(key, eqn, ctx, vals, val_out, fresh, elementwise, hits[0])
            out.append(dataclasses.replace(origin, reaches_output=key in keys))
        return out

    def _record(self, eqn: Any, ctx: Ctx, vals: list[Any], out: np.ndarray, fresh: np.ndarray,
                elementwise: bool) -> Key:
        key, _, _ = self._where(eqn, ctx)
        if key not in self.origins:
            self.origins[key] = self._make(key, eqn, ctx, vals, out, fresh, elementwise,
                                           int(np.flatnonzero(fresh)[0]))
        return key

    def _make(self, key: Key, eqn: Any, ctx: Ctx, vals: list[Any], out: np.ndarray, fresh: np.ndarray,
              elementwise: bool, flat: int) -> NanOrigin:
        _, code, path = self._where(eqn, ctx)
        index = tuple(int(i) for i in np.unravel_index(flat, out.shape))
        name = _name(eqn)
        at = [_value_at(v, index) if elementwise else None for v in vals]
        value = out[index]
        if np.isnan(value):
            kind = "overflow" if name in ACCUMULATING else "invalid"
        else:
            kind = "division by zero" if _at_pole(name, eqn.params, at) else "overflow"
        operands = tuple(_summary(_letter(i), atom, v, x, C.is_literal(atom))
                         for i, (atom, v, x) in enumerate(zip(eqn.invars, vals, at)))
        output = _summary("output", None, out, value.item(), False)
        return NanOrigin(name, key[1], path, operands, kind, code, index, output, int(fresh.sum()),
                         ctx.steps)

    def _constant(self, eqn: Any | None, ctx: Ctx, atoms: Sequence[Any], vals: list[Any], pos: int) -> Key:
        key, code, path = self._where(eqn, ctx)
        if key not in self.origins:
            h = np.asarray(vals[pos])
            flat = int(np.flatnonzero(~np.isfinite(h))[0])
            index = tuple(int(i) for i in np.unravel_index(flat, h.shape))
            operands = tuple(
                _summary(_letter(i), atom, v, np.asarray(v)[index] if i == pos else _value_at(v, ()),
                         C.is_literal(atom) or i == pos)
                for i, (atom, v) in enumerate(zip(atoms, vals)))
            self.origins[key] = NanOrigin(key[0], key[1], path, operands, "constant", code, index,
                                          None, int((~np.isfinite(h)).sum()), ctx.steps)
        return key


# -------------------------------------------------------------------------------------------- helpers
def _name(eqn: Any) -> str:
    """The primitive's name, or the library routine's (``log_ndtr``) for a call the oracle evaluates
    by its mathematics (``oracles/library/_routines.py``)."""
    name = C.primitive_name(eqn)
    if name in CALLS or name in CUSTOM_DERIVATIVES:
        return routine_name(eqn) or name
    return name


def _bad(v: Any) -> np.ndarray:
    return ~np.isfinite(np.asarray(v)) if _inexact(v) else np.zeros(np.shape(v), bool)


def all_finite(v: Any) -> bool:
    """Whether a value has no NaN/Inf (non-float values always)."""
    return not _inexact(v) or bool(np.isfinite(np.asarray(v)).all())


def every_finite(values: Sequence[Any]) -> bool:
    """Whether every value is :func:`all_finite`."""
    return all(all_finite(v) for v in values)


def _host_or_device(x: Any) -> Any:
    """``x`` as a numpy array where it has a numpy dtype (PRNG keys and the like stay on device)."""
    try:
        return np.asarray(x) if _inexact(x) or np.asarray(x).dtype.kind in "biu" else x
    except (TypeError, ValueError):
        return x


def _stack(parts: list[Any]) -> Any:
    """Stack per-step scan outputs (on the host: ``jnp.stack`` would compile per length)."""
    try:
        return jnp.asarray(np.stack([np.asarray(p) for p in parts]))
    except (TypeError, ValueError):
        return jnp.stack(parts)


def _select_masks(vals: list[Any], shape: tuple[int, ...]) -> list[np.ndarray]:
    """For ``select_n(which, *cases)``: where each case is the one selected."""
    which = np.broadcast_to(np.asarray(vals[0]).astype(np.int64), shape)
    return [which == k for k in range(len(vals) - 1)]


def _value_at(v: Any, index: tuple[int, ...]) -> Any:
    h = np.asarray(v)
    if h.shape == ():
        return h.item()
    return h[index].item() if len(index) == h.ndim else None


def _at_pole(name: str, params: dict[str, Any], at: list[Any]) -> bool:
    """Whether finite operands ``at`` sit at a pole of the primitive (an exact infinite result)."""
    if any(x is None for x in at) or not at:
        return False
    x = at[0]
    if isinstance(x, complex):
        return False
    if name == "div":
        return at[1] == 0
    if name in ("log", "rsqrt"):
        return x == 0
    if name == "log1p":
        return x == -1
    if name == "pow":
        return x == 0 and at[1] < 0
    if name == "integer_pow":
        return x == 0 and params.get("y", 0) < 0
    if name in ("atanh", "erf_inv"):
        return abs(x) == 1
    if name in ("lgamma", "digamma"):
        return x <= 0 and float(x).is_integer()
    return False
