"""The mixed pass's walk: a demand plan (``_demand``) at one working precision, over mixed balls.

Each needed element of each variable gets a ball: the fast walk's interval (``arb(mid, rad)``, exact
where the radius is 0) or a tight ball an earlier pass computed (``Kept``) where the plan takes it as
it stands, else a ball the Arb path's own rule computes from the operands' balls: an elementwise
equation on exactly those elements (a flat vector, as the flat escalation does), a reduction or a
cumulative operation on the rows that hold them, ``dot_general`` on the rows and columns they read, a
move by its rule, any other equation whole. An element that cannot be given a ball this pass (not
needed, or a decision its rule could not make, ``Undecided``) is *missing*; whatever reads a missing
element is missing too, never computed.

Equal work is done once. Each ball carries a *class*: equal classes hold the same ball (inputs of
equal value share one, fast intervals of equal midpoint and radius share one, and a computation gives
equal results to equal operands: Arb is deterministic), so an elementwise equation computes one element
per distinct tuple of operand classes, a reduction one row per distinct row. Fuzzed inputs repeat their
values a great deal (an example draws from a few dozen).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import types
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from flint import arb

from ... import _compat
from ..core._common import INDET, NEG_INF, POS_INF, Undecided, is_float
from ..fast import Exact, Interval, Tape
from ._demand import Analysis, Kept, Plan, dot_layout, move_operands
from ._interpreter import Interpreter, to_value

__all__ = ["Held", "Walker"]

#: Keys of at most this many columns are ranked into one number per row (more: rows compared whole).
_FEW_COLUMNS = 4
#: ``dot_general``'s dimension numbers for a plain matrix product of two 2-d operands.
_PLAIN_PRODUCT = (((1,), (0,)), ((), ()))


@dataclasses.dataclass
class Held:
    """A variable's value in one pass: ``values`` (balls, or integers), ``missing`` (no value there),
    ``taint`` (the ball leans on an inexact fast enclosure: ``_mixed``), ``classes`` (equal classes,
    equal balls; None for integers, whose values are their classes); the masks and classes broadcast
    to the values."""

    values: np.ndarray
    missing: np.ndarray
    taint: np.ndarray
    classes: np.ndarray | None
    #: The flat positions computed this pass and their balls' relative accuracies in bits (``_bits``).
    fresh: tuple[np.ndarray, np.ndarray] | None = None


def _no() -> np.ndarray:
    return np.zeros((), dtype=bool)


class Walker:
    """Walks plans; keeps the inputs' and the fast intervals' balls across passes. ``operations``
    counts the element operations computed in Arb (distinct ones: equal work done once)."""

    def __init__(self, analysis: Analysis, closed: Any, flat_args: Sequence[Any]) -> None:
        self.analysis = analysis
        self.closed = closed
        self.args = list(flat_args)
        self.interp = Interpreter()
        self.flat = Interpreter(flat=True)
        self.operations = 0
        self._next = 0
        # per input index / per (tape, var): each element's distinct value, their balls, which are
        # made, the distinct values, the first class
        self._sources: dict[Any, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]] = {}

    @property
    def prec(self) -> int:
        return self.interp.prec

    @prec.setter
    def prec(self, prec: int) -> None:
        self.interp.prec = self.flat.prec = prec

    def _fresh(self, n: int) -> int:
        """The first of ``n`` new classes."""
        base = self._next
        self._next += int(n)
        return base

    # values taken as they stand ------------------------------------------------------------------
    def _source(self, key: Any, distinct_of: Callable[[], tuple[np.ndarray, np.ndarray]],
                make: Callable[[np.ndarray], Any], mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(values, classes)`` of a source of repeated values (an input, a fast interval) with the
        elements at ``mask`` filled: each distinct value made into a ball once, when first needed."""
        hit = self._sources.get(key)
        if hit is None:
            distinct, inverse = distinct_of()
            base = self._fresh(len(distinct))
            made = np.full(len(distinct), INDET, dtype=object)
            have = np.zeros(len(distinct), dtype=bool)
            hit = self._sources[key] = (inverse.reshape(mask.shape), made, have, distinct, base)
        inverse, made, have, distinct, base = hit
        wanted = np.unique(inverse[mask])
        new = wanted[~have[wanted]]
        if len(new):
            made[new] = make(distinct[new])
            have[new] = True
        values = np.full(mask.shape, INDET, dtype=object)
        values[mask] = made[inverse[mask]]
        return values, base + inverse

    def inputs(self, demand: Plan) -> list[Held]:
        """The program's inputs as exact balls where the plan needs them."""
        out = []
        for j, (x, var) in enumerate(zip(self.args, _compat.invars(self.closed))):
            aval = _compat.aval(var)
            shape = tuple(aval.shape)
            if not is_float(aval.dtype):
                out.append(Held(to_value(x, aval), _no(), _no(), None))
                continue
            need = demand.need.get(var, np.zeros(shape, dtype=bool))
            flat = np.asarray(x).astype(aval.dtype, copy=False).reshape(-1)

            def distinct_of(flat: np.ndarray = flat) -> tuple[np.ndarray, np.ndarray]:
                distinct, inverse = np.unique(flat, return_inverse=True)
                return distinct, inverse

            def make(values: np.ndarray, aval: Any = aval) -> Any:
                return to_value(values, aval)

            values, classes = self._source(("input", j), distinct_of, make, need)
            out.append(Held(values, ~need, _no(), classes))
        return out

    def _taken(self, tape: Tape, var: Any, mask: np.ndarray) -> Held:
        """``var``'s values with the elements at ``mask`` taken as they stand: a tight ball kept from an
        earlier pass, else the fast walk's value; missing elsewhere."""
        value = tape.env[var]
        shape = tuple(_compat.aval(var).shape)
        key = (id(tape), var)
        kept = self.analysis.kept.get(key)
        fast_mask = mask if kept is None else mask & ~kept.have
        if isinstance(value, Exact):
            return Held(np.array(np.broadcast_to(value.value, shape)), ~mask, _no(), None)
        assert isinstance(value, Interval)
        self.analysis.hold(tape)

        def distinct_of() -> tuple[np.ndarray, np.ndarray]:
            pairs = np.empty(int(np.prod(shape, dtype=np.int64)), dtype=np.complex128)
            pairs.real = np.broadcast_to(value.mid, shape).reshape(-1)
            pairs.imag = np.broadcast_to(value.rad, shape).reshape(-1)
            distinct, inverse = np.unique(pairs, return_inverse=True)
            return distinct, inverse

        def make(pairs: np.ndarray) -> Any:
            out = np.empty(len(pairs), dtype=object)
            out[:] = list(map(_to_ball, np.real(pairs).tolist(), np.imag(pairs).tolist()))
            return out

        values, classes = self._source(key, distinct_of, make, fast_mask)
        taint = self.analysis.tight(tape, var)[1] & fast_mask
        if kept is not None:
            old = mask & kept.have
            values[old] = kept.balls[old]
            classes[old] = kept.classes[old]
            taint = taint | (kept.taint & old)
        return Held(values, ~mask, taint, classes)

    def keep(self, tape: Tape, var: Any, held: Held) -> None:
        """Keeps the tight balls among those just computed (``held.fresh``; integers: all of them,
        exact) for later passes."""
        if held.fresh is None or not len(held.fresh[0]):
            return
        at, bits = held.fresh
        shape = tuple(_compat.aval(var).shape)
        values = held.values.reshape(-1)[at]
        classes = None if held.classes is None else np.broadcast_to(held.classes, shape).reshape(-1)[at]
        if values.dtype == object:
            good = bits >= self.analysis.tight_bits
            at, values = at[good], values[good]
            classes = None if classes is None else classes[good]
            if not len(at):
                return
        key = (id(tape), var)
        kept = self.analysis.kept.get(key)
        if kept is None:
            kept = self.analysis.kept[key] = Kept(np.empty(shape, dtype=values.dtype), np.zeros(shape, bool),
                                                  np.zeros(shape, bool), np.zeros(shape, np.int64))
            self.analysis.hold(tape)
        kept.balls.reshape(-1)[at] = values
        kept.have.reshape(-1)[at] = True
        kept.taint.reshape(-1)[at] = np.broadcast_to(held.taint, shape).reshape(-1)[at]
        if classes is not None:
            kept.classes.reshape(-1)[at] = classes

    # the walk ------------------------------------------------------------------------------------
    def run(self, demand: Plan, args: list[Held]) -> list[Held]:
        """The plan's walk on ``args`` (its jaxpr's inputs): the outputs' values."""
        closed = demand.closed
        env: dict[Any, Held] = {}
        for var, c in zip(_compat.constvars(closed), _compat.parts(closed)[1]):
            value = self.interp.const(c, _compat.aval(var))
            classes = (self._fresh(np.size(value)) + np.arange(np.size(value)).reshape(np.shape(value))
                       if value.dtype == object else None)
            env[var] = Held(value, _no(), _no(), classes)
        env.update(zip(_compat.invars(closed), args))
        for i, eqn in enumerate(_compat.eqns(closed)):
            kind = demand.kinds.get(i)
            if kind is None:
                continue
            ins = [self._read(env, a) for a in eqn.invars]
            if kind == "call":
                outs = self.run(demand.calls[i], ins)
            elif kind == "move":
                outs = self._move(demand, i, eqn, ins)
            else:
                outs = self._compute(demand, eqn, kind, ins)
            for var, held in zip(eqn.outvars, outs):
                if not _compat.is_dropvar(var):
                    env[var] = held
        return [self._read(env, a) for a in _compat.outvars(closed)]

    def _read(self, env: dict[Any, Held], atom: Any) -> Held:
        if _compat.is_literal(atom):
            value = self.interp.literal(atom)
            return Held(value, _no(), _no(), np.asarray(-1) if value.dtype == object else None)
        held = env.get(atom)
        if held is None:  # nothing of it was needed: missing everywhere
            aval = _compat.aval(atom)
            shape = tuple(aval.shape)
            if is_float(aval.dtype):
                return Held(np.full(shape, INDET, dtype=object), np.ones((), bool), _no(), np.asarray(-1))
            return Held(np.zeros(shape, aval.dtype), np.ones((), bool), _no(), None)
        return held

    def _move(self, demand: Plan, i: int, eqn: Any, ins: list[Held]) -> list[Held]:
        data, _ = move_operands(eqn)
        held_data, index = ins[:len(data)], ins[len(data):]
        values = self.interp.apply(eqn, [h.values for h in ins])
        shapes = [tuple(_compat.aval(a).shape) for a in data]

        def joined(part: Callable[[Held], Any], dtype: Any) -> np.ndarray:
            return np.concatenate([np.broadcast_to(np.asarray(part(h), dtype), s).reshape(-1)
                                   for h, s in zip(held_data, shapes)] + [np.zeros(0, dtype)])

        missing, taint = joined(lambda h: h.missing, bool), joined(lambda h: h.taint, bool)
        floats = all(h.classes is not None for h in held_data)
        classes = joined(lambda h: h.classes, np.int64) if floats else None
        lost = any(bool(np.any(h.missing)) for h in index)
        outs = []
        for value, pos in zip(values, demand.moves[i]):
            inside = pos >= 0
            at = np.where(inside, pos, 0)
            if not len(missing):
                outs.append(Held(value, np.asarray(lost), _no(), None if classes is None else np.asarray(-1)))
                continue
            moved = None if classes is None else np.where(inside, classes[at], self._fresh(1))
            outs.append(Held(value, (inside & missing[at]) | lost, inside & taint[at], moved))
        return outs

    def _compute(self, demand: Plan, eqn: Any, kind: str, ins: list[Held]) -> list[Held]:
        tape = demand.tape
        outs: list[Held] = []
        targets = []
        for var in eqn.outvars:
            if _compat.is_dropvar(var):
                outs.append(Held(np.zeros(()), np.ones((), bool), _no(), None))
                continue
            need, arb_mask = demand.need[var], demand.arb[var]
            held = self._taken(tape, var, need & ~arb_mask)
            outs.append(held)
            targets.append((var, held, arb_mask))
        if not targets or not any(m.any() for _, _, m in targets):
            return outs
        work = [(held, mask) for _, held, mask in targets]
        if kind in ("elementwise", "routine"):
            self._elementwise(eqn, kind, ins, work)
        elif kind in ("reduce", "cumulative"):
            self._lanes(eqn, ins, work, reduce=kind == "reduce")
        elif kind == "dot":
            self._dot(eqn, ins, work)
        else:
            self._generic(eqn, ins, work)
        for var, held, _ in targets:
            self.keep(tape, var, held)
        return outs

    # computations: each fills its targets' positions to compute (or marks them missing) ------------
    def _distinct(self, evaluate: Callable[[np.ndarray], np.ndarray], rows: np.ndarray,
                  keys: list[np.ndarray], terms: int = 1) -> tuple[np.ndarray, ...]:
        """``evaluate`` on the rows (``_split``), each distinct row of ``keys`` (operand classes, or
        integer values; a 2-d key a row of terms) once: ``(done, results, classes, bits)`` for the rows
        that came out (``bits``: ``_bits`` of a result). Counts the work done."""
        if not len(rows):
            empty = np.zeros(0, dtype=np.int64)
            return rows, np.empty(0, dtype=object), empty, empty
        first, inverse = _unique([k[rows] for k in keys], len(rows))
        self.operations += len(first) * terms
        chosen = rows[first]
        done, results = _split(evaluate, chosen)
        bits = _bits(results) if results.ndim == 1 else np.full(len(done), _EXACT_BITS)
        order = np.argsort(chosen)
        place = np.full(len(first), -1, dtype=np.int64)  # each distinct row's place among the results
        place[order[np.searchsorted(chosen, done, sorter=order)]] = np.arange(len(done))
        slot = place[inverse]
        ok = slot >= 0
        base = self._fresh(len(done))
        return rows[ok], results[slot[ok]], base + slot[ok], bits[slot[ok]]

    def _elementwise(self, eqn: Any, kind: str, ins: list[Held],
                     targets: list[tuple[Held, np.ndarray]]) -> None:
        """An elementwise equation (or library routine) on the target elements alone, as a flat vector
        (the flat escalation's way, ``_evaluate``)."""
        (held, mask), = targets
        shape = mask.shape
        at = np.flatnonzero(mask)
        lead = _compat.leading_consts(eqn) if kind == "routine" else 0
        lost = np.zeros(len(at), dtype=bool)
        taint = np.zeros(len(at), dtype=bool)
        parts: list[np.ndarray | None] = []
        keys: list[np.ndarray] = []
        for j, h in enumerate(ins):
            if j < lead or np.ndim(h.values) != len(shape):  # a scalar (or a routine's constant): whole
                lost |= bool(np.any(h.missing))
                taint |= bool(np.any(h.taint))
                parts.append(None)
                continue
            lost |= np.broadcast_to(h.missing, shape).reshape(-1)[at]
            taint |= np.broadcast_to(h.taint, shape).reshape(-1)[at]
            part = np.broadcast_to(h.values, shape).reshape(-1)[at]  # an axis of extent 1 spreads
            parts.append(part)
            keys.append(np.broadcast_to(h.classes, shape).reshape(-1)[at] if h.classes is not None else part)

        def evaluate(rows: np.ndarray) -> np.ndarray:
            invals = [h.values if p is None else p[rows] for h, p in zip(ins, parts)]
            (out,) = self.flat.apply(eqn, invals)
            return np.broadcast_to(out, (len(rows),))

        done, results, classes, bits = self._distinct(evaluate, np.flatnonzero(~lost), keys)
        out_taint = taint[done]
        if out_taint.any() and results.dtype == object:
            # A non-finite result where an untainted operand was non-finite already: precision's doing.
            check = np.flatnonzero(out_taint & (bits == _NO_BITS))
            for h, p in zip(ins, parts):
                if not len(check):
                    break
                if p is None or p.dtype != object:
                    continue
                sel = done[check]
                clean = ~np.broadcast_to(h.taint, shape).reshape(-1)[at[sel]] & (_bits(p[sel]) == _NO_BITS)
                out_taint[check[clean]] = False
                check = check[~clean]
        _fill(held, mask, at[done], results, out_taint, classes, bits)

    def _lanes(self, eqn: Any, ins: list[Held], targets: list[tuple[Held, np.ndarray]], reduce: bool) -> None:
        """Reductions (``reduce``: the result drops the reduced axes) and cumulative operations (along one
        axis): the operand laid out as rows, the rule on the rows the targets need alone."""
        (held, mask), = targets
        (h,) = ins
        shape = tuple(np.shape(h.values))
        if reduce:
            axes = tuple(sorted(int(a) % max(len(shape), 1) for a in eqn.params["axes"]))
        else:
            axes = (int(eqn.params["axis"]) % max(len(shape), 1),)
        kept = [d for d in range(len(shape)) if d not in axes]
        order = kept + list(axes)
        k = int(np.prod([shape[a] for a in axes], dtype=np.int64))
        n = int(np.prod([shape[d] for d in kept], dtype=np.int64))

        def rows_of(a: Any) -> np.ndarray:
            return np.transpose(np.broadcast_to(a, shape), order).reshape(n, k)

        values, missing, taint = rows_of(h.values), rows_of(h.missing), rows_of(h.taint)
        key = rows_of(h.classes) if h.classes is not None else values
        lane_mask = mask.reshape(n, 1) if reduce else rows_of(mask)
        rows = np.flatnonzero(lane_mask.any(axis=1) & ~missing.any(axis=1))
        params: dict[str, Any] = {"axes": (1,)} if reduce else {"axis": 1}

        def evaluate(sel: np.ndarray) -> np.ndarray:
            out_shape = (len(sel),) if reduce else (len(sel), k)
            (out,) = self.flat.apply(eqn, [values[sel]], as_eqn=_like(eqn, out_shape, **params))
            return np.asarray(out).reshape(out_shape)

        done, results, classes, bits = self._distinct(evaluate, rows, [key], k)
        row_taint = taint[done].any(axis=1)
        if reduce and row_taint.any() and results.dtype == object:
            for j in np.flatnonzero(row_taint & (bits == _NO_BITS)):
                if ((_bits(values[done[j]]) == _NO_BITS) & ~taint[done[j]]).any():
                    row_taint[j] = False  # non-finite already in an untainted term: precision's doing
        if reduce:
            _fill(held, mask, done, results, row_taint, classes, bits)
            return
        # cumulative: the lanes computed, in the operand's layout; only the targets taken
        grid = np.empty((n, k), dtype=results.dtype if len(done) else object)
        grid[done] = results
        lane_taint = np.zeros((n, k), dtype=bool)
        lane_taint[done] = row_taint[:, None]
        computed = np.zeros((n, k), dtype=bool)
        computed[done] = True
        inverse, moved = np.argsort(order), [shape[d] for d in order]

        def back(a: np.ndarray) -> np.ndarray:
            return np.transpose(a.reshape(moved), inverse)

        at = np.flatnonzero(mask & back(computed))
        fresh = self._fresh(len(at)) + np.arange(len(at))
        _fill(held, mask, at, back(grid).reshape(-1)[at], back(lane_taint).reshape(-1)[at], fresh)

    def _dot(self, eqn: Any, ins: list[Held], targets: list[tuple[Held, np.ndarray]]) -> None:
        """``dot_general`` on the rows of one operand and the columns of the other that the targets
        need, batch by batch (the Arb rule: ``arb_mat`` where the entries are finite)."""
        (held, mask), = targets
        lshape, rshape = (tuple(_compat.aval(a).shape) for a in eqn.invars)
        lo, ro, b, m, k, n = dot_layout(eqn, lshape, rshape)

        def lay(a: Any, shape: tuple[int, ...], order: list[int], dims: tuple[int, ...]) -> np.ndarray:
            return np.transpose(np.broadcast_to(a, shape), order).reshape(dims)

        lhs, rhs = ins
        left, lmiss, ltaint = (lay(a, lshape, lo, (b, m, k)) for a in (lhs.values, lhs.missing, lhs.taint))
        right, rmiss, rtaint = (lay(a, rshape, ro, (b, k, n)) for a in (rhs.values, rhs.missing, rhs.taint))
        want = mask.reshape(b, m, n)
        dtype = _compat.aval(eqn.outvars[0]).dtype
        ats, outs, taints = [], [], []
        for bi in range(b):
            if not want[bi].any():
                continue
            rows = np.flatnonzero(want[bi].any(axis=1))
            cols = np.flatnonzero(want[bi].any(axis=0))
            rows = rows[~lmiss[bi][rows].any(axis=1)]
            cols = cols[~rmiss[bi][:, cols].any(axis=0)]
            if not (len(rows) and len(cols)):
                continue
            proxy = _like(eqn, (len(rows), len(cols)), dtype=dtype, dimension_numbers=_PLAIN_PRODUCT)
            try:
                (out,) = self.flat.apply(eqn, [left[bi][rows], right[bi][:, cols]], as_eqn=proxy)
            except Undecided:
                continue
            out = np.asarray(out)
            self.operations += len(rows) * len(cols) * k
            grid = np.zeros((m, n), dtype=bool)
            grid[np.ix_(rows, cols)] = True
            grid &= want[bi]
            block = np.empty((m, n), dtype=out.dtype)
            block[np.ix_(rows, cols)] = out.reshape(len(rows), len(cols))
            t = ltaint[bi].any(axis=1)[:, None] | rtaint[bi].any(axis=0)[None, :]
            ats.append(bi * m * n + np.flatnonzero(grid))
            outs.append(block[grid])
            taints.append(t[grid])
        at = np.concatenate(ats) if ats else np.zeros(0, dtype=np.int64)
        results = np.concatenate(outs) if outs else np.empty(0, dtype=object)
        taint = np.concatenate(taints) if taints else np.zeros(0, dtype=bool)
        _fill(held, mask, at, results, taint, self._fresh(len(at)) + np.arange(len(at)))

    def _generic(self, eqn: Any, ins: list[Held], targets: list[tuple[Held, np.ndarray]]) -> None:
        """Any other equation: whole, from whole operands (all of them needed, ``_demand``)."""
        results: list[Any] = [None] * len(eqn.outvars)
        if not any(bool(np.any(h.missing)) for h in ins):
            with contextlib.suppress(Undecided):
                results = self.interp.apply(eqn, [h.values for h in ins])
        taint = any(bool(np.any(h.taint)) for h in ins)
        kept = [r for r, v in zip(results, eqn.outvars) if not _compat.is_dropvar(v)]
        for (held, mask), value in zip(targets, kept):
            at = np.flatnonzero(mask) if value is not None else np.zeros(0, dtype=np.int64)
            self.operations += len(at)
            got = (np.broadcast_to(value, mask.shape).reshape(-1)[at] if value is not None
                   else np.empty(0, dtype=object))
            _fill(held, mask, at, got, np.full(len(at), taint), self._fresh(len(at)) + np.arange(len(at)))


def _fill(held: Held, mask: np.ndarray, at: np.ndarray, results: np.ndarray, taint: np.ndarray,
          classes: np.ndarray, bits: np.ndarray | None = None) -> None:
    """Puts computed results (with their taint, classes and accuracies, ``_bits``, worked out here if
    not given) at the flat positions ``at`` of a target whose ``mask`` marks what was to be computed:
    the rest of the mask is missing."""
    held.fresh = (at, _bits(np.asarray(results)) if bits is None else bits)
    shape = mask.shape
    values = held.values.reshape(-1)  # the target's own array (``Walker._taken``)
    missing = np.array(np.broadcast_to(held.missing, shape)).reshape(-1)
    tainted = np.array(np.broadcast_to(held.taint, shape)).reshape(-1)
    if len(at):
        values[at] = results
    missing[mask.reshape(-1)] = True
    missing[at] = False
    tainted[at] = taint
    held.values, held.missing = values.reshape(shape), missing.reshape(shape)
    held.taint = tainted.reshape(shape)
    if held.classes is not None:
        own = np.array(np.broadcast_to(held.classes, shape)).reshape(-1)
        own[at] = classes
        held.classes = own.reshape(shape)


#: ``_bits`` of an exact ball (and of a result with no value, or an integer) and of a non-finite one
#: (or one of midpoint 0 that is not exact: no relative accuracy either way).
_EXACT_BITS = 2 ** 63 - 1
_NO_BITS = -(2 ** 63 - 1)


def _bits(values: np.ndarray) -> np.ndarray:
    """Each ball's relative accuracy in bits (Arb's ``rel_accuracy_bits``); integers are exact."""
    values = np.asarray(values)
    if values.dtype != object:
        return np.full(values.shape, _EXACT_BITS, dtype=np.int64)
    return np.fromiter((_EXACT_BITS if v is None else v.rel_accuracy_bits() for v in values.reshape(-1)),
                       dtype=np.int64, count=values.size).reshape(values.shape)


def _to_ball(mid: float, rad: float) -> Any:
    """The ball of a fast interval: exact where the radius is 0 (an infinity: the exact infinity)."""
    if rad == 0:
        return arb(mid) if abs(mid) != float("inf") else (POS_INF if mid > 0 else NEG_INF)
    return arb(mid, rad)


def _like(eqn: Any, shape: tuple[int, ...], dtype: Any = None, **params: Any) -> Any:
    """``eqn`` as its rule reads it over a part of its operands: ``params`` changed, one result of
    ``shape``."""
    aval = types.SimpleNamespace(shape=shape, dtype=np.dtype(_compat.aval(eqn.outvars[0]).dtype
                                                              if dtype is None else dtype))
    return types.SimpleNamespace(params={**eqn.params, **params}, primitive=eqn.primitive,
                                 invars=eqn.invars, outvars=[types.SimpleNamespace(aval=aval)])


def _unique(keys: list[np.ndarray], n: int) -> tuple[np.ndarray, np.ndarray]:
    """``(first, inverse)``: the first of each distinct row of the keys laid side by side (a 2-d key
    is several columns) and, per row, the index of its distinct row in ``first``."""
    columns = []
    for key in keys:
        key = np.asarray(key)
        flat = key.reshape(n, -1)
        if flat.dtype.kind == "f":
            flat = np.ascontiguousarray(flat, dtype=np.float64).view(np.int64)
        columns.append(flat.astype(np.int64, copy=False))
    if not columns:  # every operand whole: one distinct row
        return np.zeros(1, dtype=np.int64), np.zeros(n, dtype=np.int64)
    key = np.concatenate(columns, axis=1) if len(columns) > 1 else columns[0]
    if 1 < key.shape[1] <= _FEW_COLUMNS:  # dense ranks per column, then one number per row if it fits
        ranks = [np.unique(key[:, c], return_inverse=True)[1].reshape(-1) for c in range(key.shape[1])]
        width = [int(r.max()) + 1 for r in ranks]
        if math.prod(width) < 2 ** 62:
            combined = np.zeros(n, dtype=np.int64)
            for r, w in zip(ranks, width):
                combined = combined * w + r
            key = combined.reshape(n, 1)
    if key.shape[1] == 1:
        _, first, inverse = np.unique(key[:, 0], return_index=True, return_inverse=True)
    else:  # each row as one opaque value (``axis=0`` would compare field by field)
        rows = np.ascontiguousarray(key).view(np.dtype((np.void, key.itemsize * key.shape[1]))).reshape(-1)
        _, first, inverse = np.unique(rows, return_index=True, return_inverse=True)
    return first, inverse.reshape(-1)


def _split(evaluate: Callable[[np.ndarray], np.ndarray], rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``evaluate`` on the rows, halving where a decision is not made (``Undecided``) down to single
    rows: ``(done, results)``, the rows that came out and their results stacked in that order."""
    chunks: list[tuple[np.ndarray, np.ndarray]] = []

    def run(sel: np.ndarray) -> None:
        if not len(sel):
            return
        try:
            chunks.append((sel, np.asarray(evaluate(sel))))
        except Undecided:
            if len(sel) > 1:
                half = len(sel) // 2
                run(sel[:half])
                run(sel[half:])

    run(rows)
    if not chunks:
        return np.zeros(0, dtype=np.int64), np.empty(0, dtype=object)
    results = [c[1] for c in chunks]
    if len({r.dtype for r in results}) > 1:
        results = [r.astype(object) for r in results]
    return np.concatenate([c[0] for c in chunks]), np.concatenate(results)
