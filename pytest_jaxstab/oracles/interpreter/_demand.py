"""Demand: which elements of each variable the mixed pass needs, and which of those it recomputes in Arb.

The mixed pass (``_mixed``) evaluates a program whose fast walk (``oracles/fast``, kept on a
:class:`~..fast.Tape`) left some output elements undecided. It needs only what those elements read,
and of that it recomputes in Arb only what the fast walk's enclosure cannot give well enough; the rest
it takes from the fast enclosures, as balls. This module works that out backwards over the jaxpr,
once per pass (the pending outputs shrink from pass to pass), in whole-array numpy.

For each variable of each walk (a call's body has a plan of its own) it finds two masks of the
variable's shape:

* ``need``: the elements some recomputed element (or a pending output) reads;
* ``arb``: the needed elements recomputed in Arb: those whose fast enclosure is not *tight* (undecided,
  or a radius above ``2^-tight_bits`` times the midpoint: ``tight_bits`` is the widest target
  significand plus :data:`TIGHT_MARGIN`), and the inexact ones among those the result needs *accurate*.

*Accurate* demand is what makes the cancellations work. Where an equation's result is not tight while
every element it reads is (``1 - sigmoid(z)`` for a large ``z``, ``x - mean(x)`` of clustered values,
``1 + tanh(v)`` near -1), the equation amplified its operands' widths: a ball computed from the same
enclosures would be as wide, so its operands are demanded accurate: every inexact element of their
cone is recomputed (an exact fast value, radius 0, is the same real in Arb). A pending output that is
tight (near a rounding boundary) is demanded accurate too. Otherwise a recomputed element reads its
operands as needed only, each taken from its fast enclosure where that is tight.

Dependencies are exact for elementwise equations (the same position; a scalar operand wholly; an
operand of one rank along its axes of extent 1, as a bias ``b[None]`` added to ``x @ w``),
reductions and cumulative operations (the reduced fibre, the lane), ``dot_general`` (a row of one
operand and a column of the other) and moves (the positions the Arb path's own structural rule moves,
run on element numbers, as the fast path runs it on midpoints); any other equation needs its operands
whole. The walk (``_mixed``) never trusts them for soundness: an element it was not given is
*missing*, and whatever reads a missing element is undecided for that pass, not computed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from ... import _compat
from ..._primitives import CALLS, CUSTOM_DERIVATIVES, ELEMENTWISE, REDUCTIONS
from ..fast import Exact, Interval, Tape
from ..fast._arrays import _proxy
from ..library._routines import EXACT_PRIMITIVE, lookup
from ..primitives import _structural
from ._budget import operand_budgets, scale

__all__ = ["TIGHT_MARGIN", "Analysis", "Kept", "Plan", "dot_layout", "move_operands", "operations", "plan"]

#: Bits beyond the widest target significand a fast enclosure's relative radius must reach to be taken
#: as it is: a result read through amplification below ``2^12`` still rounds from it.
TIGHT_MARGIN = 12

CUMULATIVE = frozenset({"cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp"})
#: Primitives that only move elements (the fast path's ``_arrays._MOVES`` and ``gather``), with where
#: their index operands start.
MOVES: dict[str, int | None] = {
    name: None for name in ("broadcast_in_dim", "reshape", "squeeze", "expand_dims", "transpose",
                            "concatenate", "slice", "rev", "pad", "tile", "split", "copy", "copy_p",
                            "optimization_barrier", "device_put", "sharding_constraint")}
MOVES.update({"dynamic_slice": 1, "dynamic_update_slice": 2, "gather": 1})


@dataclasses.dataclass
class Plan:
    """One walk's demand: per variable ``need``, ``acc`` (demanded accurate), ``budget`` (the widest
    fast radius every consumer takes as it is, ``_budget``) and ``arb`` (module docstring); per equation
    index
    its ``kinds`` (None: nothing of it is needed), the element numbers a move reads (``moves``: per
    result, flat indices into its data operands laid end to end, negative for a fill) and the plans of
    the calls it enters (``calls``)."""

    closed: Any
    tape: Tape
    need: dict[Any, np.ndarray] = dataclasses.field(default_factory=dict)
    acc: dict[Any, np.ndarray] = dataclasses.field(default_factory=dict)
    budget: dict[Any, np.ndarray] = dataclasses.field(default_factory=dict)
    arb: dict[Any, np.ndarray] = dataclasses.field(default_factory=dict)
    kinds: dict[int, str] = dataclasses.field(default_factory=dict)
    moves: dict[int, list[np.ndarray]] = dataclasses.field(default_factory=dict)
    calls: dict[int, Plan] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Kept:
    """A variable's balls from earlier passes that are tight (``have``), with their ``taint`` and
    ``classes`` (``_walker``); they count as its fast values do (``Analysis.tight``)."""

    balls: np.ndarray
    have: np.ndarray
    taint: np.ndarray
    classes: np.ndarray


class Analysis:
    """What carries from pass to pass: each variable's tightness (the fast walk's, and the tight balls
    earlier passes computed: ``kept``), each move's element numbers, each equation's kind (cached by
    the tape and the equation)."""

    def __init__(self, tight_bits: int) -> None:
        self.tight_bits = tight_bits
        self.kept: dict[tuple[int, Any], Kept] = {}
        self._tight: dict[tuple[int, Any], tuple[np.ndarray, np.ndarray]] = {}
        self._moves: dict[tuple[int, int], list[np.ndarray]] = {}
        self._kinds: dict[int, tuple[Any, str]] = {}
        self._tapes: list[Tape] = []  # holds the tapes whose ids key the caches

    def hold(self, tape: Tape) -> None:
        """Keeps ``tape`` alive while its id keys a cache."""
        if not self._tapes or self._tapes[-1] is not tape:
            self._tapes.append(tape)

    def tight(self, tape: Tape, var: Any) -> tuple[np.ndarray, np.ndarray]:
        """``(tight, inexact)`` masks of a variable's fast value (integers: known, never inexact), a
        tight ball kept from an earlier pass counting as tight and inexact."""
        key = (id(tape), var)
        hit = self._tight.get(key)
        if hit is None:
            hit = self._tight[key] = tightness(tape.env[var], self.tight_bits)
            self.hold(tape)
        kept = self.kept.get(key)
        if kept is None:
            return hit
        return hit[0] | kept.have, hit[1] | kept.have

    def accepted(self, tape: Tape, atom: Any, budget: np.ndarray | None = None) -> np.ndarray:
        """Where an operand's value is taken as it is: tight, or an interval whose radius fits the
        ``budget`` (``_budget``)."""
        if _compat.is_literal(atom):
            return np.ones((), dtype=bool)
        tight = self.tight(tape, atom)[0]
        value = tape.env[atom]
        if budget is None or not isinstance(value, Interval) or not np.any(budget > 0):
            return tight
        with np.errstate(invalid="ignore"):
            fits = np.isfinite(value.mid) & (value.rad <= budget)
        return tight | fits

    def kind(self, eqn: Any) -> str:
        hit = self._kinds.get(id(eqn))
        if hit is None or hit[0] is not eqn:
            hit = self._kinds[id(eqn)] = (eqn, _kind(eqn))
        return hit[1]

    def moves(self, tape: Tape, index: int, eqn: Any, ctx: Any) -> list[np.ndarray]:
        key = (id(tape), index)
        hit = self._moves.get(key)
        if hit is None:
            hit = self._moves[key] = _positions(tape, eqn, ctx)
            self.hold(tape)
        return hit


def tightness(value: Any, tight_bits: int) -> tuple[np.ndarray, np.ndarray]:
    """Where a fast value is tight (module docstring) and where it is inexact (radius above 0)."""
    if isinstance(value, Exact):
        return ~value.mask(), np.zeros(value.shape, dtype=bool)
    assert isinstance(value, Interval)
    mid, rad = value.mid, value.rad
    with np.errstate(all="ignore"):
        exact = (rad == 0) & ~np.isnan(mid)
        tight = exact | (np.isfinite(mid) & (rad <= np.abs(mid) * 2.0 ** -tight_bits))
    return np.asarray(tight), np.asarray(~exact)


def _kind(eqn: Any) -> str:
    name = _compat.primitive_name(eqn)
    if name in CALLS or name in CUSTOM_DERIVATIVES or name == EXACT_PRIMITIVE:
        if lookup(eqn) is None:
            return "call"
        lead = _compat.leading_consts(eqn)
        return "routine" if _same_shapes(eqn, eqn.invars[lead:]) else "generic"
    if name in ELEMENTWISE:
        return "elementwise" if _same_shapes(eqn, eqn.invars) else "generic"
    if name in MOVES:
        return "move"
    if name in REDUCTIONS:
        return "reduce"
    if name in CUMULATIVE:
        return "cumulative"
    if name == "dot_general":
        return "dot"
    return "generic"


def _same_shapes(eqn: Any, operands: Sequence[Any]) -> bool:
    """Whether every result has one shape and each operand has it, is a scalar, or spreads along axes of
    extent 1 (a bias ``b[None]`` added to ``x @ w``: JAX's elementwise operands of one rank)."""
    shapes = {tuple(_compat.aval(v).shape) for v in eqn.outvars}
    if len(shapes) != 1:
        return False
    (shape,) = shapes
    return all(_spreads(tuple(_compat.aval(a).shape), shape) for a in operands)


def _spreads(operand: tuple[int, ...], shape: tuple[int, ...]) -> bool:
    if operand in (shape, ()):
        return True
    return len(operand) == len(shape) and all(a in (1, b) for a, b in zip(operand, shape))


def _read_by(mask: np.ndarray, operand: tuple[int, ...]) -> np.ndarray:
    """The elements of an elementwise operand of shape ``operand`` that the marked result elements read:
    the same positions, a scalar whole, an axis of extent 1 wherever any element along it is marked."""
    if operand == mask.shape:
        return mask
    if operand == ():
        return np.asarray(mask.any())
    axes = tuple(d for d, (a, b) in enumerate(zip(operand, mask.shape)) if a != b)
    return mask.any(axis=axes, keepdims=True)


def plan(analysis: Analysis, closed: Any, tape: Tape, need: Sequence[np.ndarray], ctx: Any) -> Plan:
    """The demand of a whole program whose outputs ``need`` the marked elements (pending: a tight one
    among them is demanded accurate; none has a budget)."""
    acc = []
    for var, n in zip(_compat.outvars(closed), need):
        if _compat.is_literal(var):
            acc.append(np.zeros(np.shape(n), dtype=bool))
            continue
        tight, inexact = analysis.tight(tape, var)
        acc.append(n & tight & inexact)
    return _plan(analysis, closed, tape, list(need), acc, [np.zeros(np.shape(n)) for n in need], ctx)


def _plan(analysis: Analysis, closed: Any, tape: Tape, out_need: list[np.ndarray],
          out_acc: list[np.ndarray], out_budget: list[np.ndarray], ctx: Any) -> Plan:
    result = Plan(closed, tape)
    need, acc, budgets = result.need, result.acc, result.budget

    def add(var: Any, n: np.ndarray, a: np.ndarray | None = None, b: np.ndarray | None = None) -> None:
        if _compat.is_literal(var) or _compat.is_dropvar(var) or not n.any():
            return
        shape = tuple(_compat.aval(var).shape)
        n = np.broadcast_to(n, shape)
        need[var] = need[var] | n if var in need else n.copy()
        if a is not None and a.any():
            a = np.broadcast_to(a, shape)
            acc[var] = acc[var] | a if var in acc else a.copy()
        # every consumer must take the fast value: the least budget of those that need the element
        given = np.where(n, np.broadcast_to(0.0 if b is None else b, shape), np.inf)
        budgets[var] = np.minimum(budgets[var], given) if var in budgets else given

    for var, n, a, b in zip(_compat.outvars(closed), out_need, out_acc, out_budget):
        add(var, n, a, b)
    eqns = list(_compat.eqns(closed))
    for i in range(len(eqns) - 1, -1, -1):
        eqn = eqns[i]
        outs = [v for v in eqn.outvars if not _compat.is_dropvar(v)]
        if not any(v in need for v in outs):
            continue
        kind = analysis.kind(eqn)
        result.kinds[i] = kind
        n_out = [need.get(v, _none(v)) for v in outs]
        a_out = [acc.get(v, _none(v)) for v in outs]
        b_out = [_finite(budgets[v]) if v in budgets else np.zeros(_shape(v)) for v in outs]
        if kind == "call":
            body = _body(eqn)
            sub = result.calls[i] = _plan(analysis, body, tape.calls[i], _per_out(eqn, n_out),
                                          _per_out(eqn, a_out), _per_out(eqn, b_out, 0.0), ctx)
            for atom, inner in zip(eqn.invars, _compat.invars(body)):
                add(atom, sub.need.get(inner, _none(inner)), sub.acc.get(inner), _budget_of(sub, inner))
            continue
        if kind == "move":
            try:
                positions = analysis.moves(tape, i, eqn, ctx)
            except _Unmovable:
                kind = result.kinds[i] = "generic"
            else:
                result.moves[i] = positions
                _move_demand(eqn, positions, n_out, a_out, b_out, add)
                continue
        arb_any = np.zeros((), dtype=bool)
        acc_any = np.zeros((), dtype=bool)
        for v, n, a, b in zip(outs, n_out, a_out, b_out):
            _, inexact = analysis.tight(tape, v)
            arb = n & (~analysis.accepted(tape, v, b) | (a & inexact))
            result.arb[v] = arb
            arb_any, acc_any = arb_any | arb, acc_any | (a & arb)
        shares = _operand_budgets(analysis, tape, eqn, kind, outs, b_out, arb_any)
        accepted = [analysis.accepted(tape, atom, share) for atom, share in zip(eqn.invars, shares)]
        amplified = arb_any & (acc_any | _all_tight(kind, eqn, accepted))
        deps = zip(eqn.invars, _deps(kind, eqn, arb_any), _deps(kind, eqn, amplified), shares)
        for atom, n, a, share in deps:
            add(atom, n, a, share)
    return result


def _shape(var: Any) -> tuple[int, ...]:
    return tuple(_compat.aval(var).shape)


def _finite(budget: np.ndarray) -> np.ndarray:
    return np.where(np.isfinite(budget), budget, 0.0)


def _operand_budgets(analysis: Analysis, tape: Tape, eqn: Any, kind: str, outs: list[Any],
                     b_out: list[np.ndarray], arb: np.ndarray) -> list[np.ndarray]:
    """The operands' budgets for the recomputed results (``_budget``)."""
    if len(outs) != 1 or kind not in ("elementwise", "reduce") or not arb.any():
        return [np.zeros(()) for _ in eqn.invars]
    (v,) = outs
    shape = tuple(_compat.aval(v).shape)
    operands = [None if _compat.is_literal(a) else tape.env[a] for a in eqn.invars]
    own = scale(eqn, tape.env[v], operands, shape) * 2.0 ** -analysis.tight_bits
    budget = np.where(arb, np.maximum(b_out[0], own), 0.0)
    return operand_budgets(eqn, kind, budget, operands)


def _budget_of(sub: Plan, var: Any) -> np.ndarray | None:
    b = sub.budget.get(var)
    return None if b is None else _finite(b)


def _none(var: Any) -> np.ndarray:
    return np.zeros(tuple(_compat.aval(var).shape), dtype=bool)


def _body(eqn: Any) -> Any:
    if _compat.primitive_name(eqn) in CUSTOM_DERIVATIVES:
        return _compat.custom_call_parts(eqn)[0]
    return _compat.subjaxprs(eqn)[0][1]


def _per_out(eqn: Any, masks: list[np.ndarray], fill: Any = False) -> list[np.ndarray]:
    """Masks for every result of ``eqn`` (dropped ones: ``fill``), from those of the kept ones."""
    it = iter(masks)
    return [np.full(tuple(_compat.aval(v).shape), fill) if _compat.is_dropvar(v) else next(it)
            for v in eqn.outvars]


# ------------------------------------------------------------------------------------ dependencies
def _reduced_axes(eqn: Any, ndim: int) -> tuple[int, ...]:
    return tuple(int(a) % max(ndim, 1) for a in eqn.params["axes"])


def _expand(mask: np.ndarray, axes: tuple[int, ...], shape: tuple[int, ...]) -> np.ndarray:
    """A mask over a reduction's result, spread over the reduced axes of its operand's ``shape``."""
    return np.broadcast_to(np.expand_dims(mask, axes), shape) if axes else np.broadcast_to(mask, shape)


def dot_layout(eqn: Any, lhs_shape: tuple[int, ...], rhs_shape: tuple[int, ...]) -> tuple[Any, ...]:
    """``dot_general``'s operands as ``(b, m, k)`` and ``(b, k, n)`` (as the Arb rule lays them out):
    ``(lhs order, rhs order, b, m, k, n)``; the result, row-major, is ``(b, m, n)``."""
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    lc, rc, lb, rb = ([int(d) for d in ds] for ds in (lc, rc, lb, rb))
    lfree = [d for d in range(len(lhs_shape)) if d not in lc and d not in lb]
    rfree = [d for d in range(len(rhs_shape)) if d not in rc and d not in rb]

    def size(shape: tuple[int, ...], dims: list[int]) -> int:
        return int(np.prod([shape[d] for d in dims], dtype=np.int64))

    return (lb + lfree + lc, rb + rc + rfree, size(lhs_shape, lb), size(lhs_shape, lfree),
            size(lhs_shape, lc), size(rhs_shape, rfree))


def _unarrange(arranged: np.ndarray, order: list[int], shape: tuple[int, ...]) -> np.ndarray:
    moved = arranged.reshape([shape[d] for d in order])
    return np.transpose(moved, np.argsort(order))


def _deps(kind: str, eqn: Any, mask: np.ndarray) -> list[np.ndarray]:
    """The elements of each operand that the marked result elements read."""
    shapes = [tuple(_compat.aval(a).shape) for a in eqn.invars]
    if not mask.any():
        return [np.zeros(s, dtype=bool) for s in shapes]
    if kind in ("elementwise", "routine"):
        lead = _compat.leading_consts(eqn) if kind == "routine" else 0
        return [np.ones(s, dtype=bool) if j < lead else _read_by(mask, s) for j, s in enumerate(shapes)]
    if kind == "reduce":
        (shape,) = shapes
        return [_expand(mask, _reduced_axes(eqn, len(shape)), shape)]
    if kind == "cumulative":
        (shape,) = shapes
        axis = int(eqn.params["axis"]) % max(len(shape), 1)
        return [np.broadcast_to(mask.any(axis=axis, keepdims=True), shape)]
    if kind == "dot":
        lo, ro, b, m, k, n = dot_layout(eqn, shapes[0], shapes[1])
        out = mask.reshape(b, m, n)
        rows = np.broadcast_to(out.any(axis=2)[:, :, None], (b, m, k))
        cols = np.broadcast_to(out.any(axis=1)[:, None, :], (b, k, n))
        return [_unarrange(rows, lo, shapes[0]), _unarrange(cols, ro, shapes[1])]
    return [np.ones(s, dtype=bool) for s in shapes]


def _all_tight(kind: str, eqn: Any, tight: list[np.ndarray]) -> np.ndarray:
    """Where every element a result element reads is tight."""
    out_shape = tuple(_compat.aval(eqn.outvars[0]).shape)
    if kind in ("elementwise", "routine"):
        lead = _compat.leading_consts(eqn) if kind == "routine" else 0
        parts = [t if t.ndim == len(out_shape) else np.asarray(t.all()) for t in tight[lead:]]
        return np.logical_and.reduce([np.broadcast_to(p, out_shape) for p in parts]) if parts \
            else np.ones(out_shape, dtype=bool)
    if kind == "reduce":
        (t,) = tight
        return np.asarray(t.all(axis=_reduced_axes(eqn, t.ndim)) if t.ndim else t)
    if kind == "cumulative":
        (t,) = tight
        axis = int(eqn.params["axis"]) % max(t.ndim, 1)
        return np.broadcast_to(t.all(axis=axis, keepdims=True), t.shape)
    if kind == "dot":
        lhs, rhs = (np.broadcast_to(t, tuple(_compat.aval(a).shape)) for t, a in zip(tight, eqn.invars))
        lo, ro, b, m, k, n = dot_layout(eqn, lhs.shape, rhs.shape)
        rows = np.transpose(lhs, lo).reshape(b, m, k).all(axis=2)
        cols = np.transpose(rhs, ro).reshape(b, k, n).all(axis=1)
        return (rows[:, :, None] & cols[:, None, :]).reshape(out_shape)
    return np.broadcast_to(np.asarray(all(bool(np.all(t)) for t in tight)), out_shape)


# ------------------------------------------------------------------------------------------ moves
def _positions(tape: Tape, eqn: Any, ctx: Any) -> list[np.ndarray]:
    """Per result of a move, the element number (operands' elements numbered end to end, in operand
    order) each of its elements comes from; negative where it is a fill of the rule's own."""
    name = _compat.primitive_name(eqn)
    data, index = move_operands(eqn)
    numbers, offset = [], 0
    for atom in data:
        shape = tuple(_compat.aval(atom).shape)
        size = int(np.prod(shape, dtype=np.int64))
        numbers.append(np.arange(offset, offset + size, dtype=np.int64).reshape(shape))
        offset += size
    values = []
    for atom in index:
        if _compat.is_literal(atom):
            values.append(np.asarray(_compat.literal_value(atom)))
            continue
        value = tape.env[atom]
        if not isinstance(value, Exact) or (value.unknown is not None and np.any(value.unknown)):
            raise _Unmovable
        values.append(np.asarray(value.value))
    rule = _structural.RULES[name]
    proxy = eqn
    if name == "gather" and _structural._is_fill_mode(eqn.params.get("mode")):
        proxy = _proxy(eqn, np.int64, fill_value=None)  # out of bounds: int64's least value
    out = rule(ctx, proxy, *numbers, *values)
    outs = list(out) if eqn.primitive.multiple_results else [out]
    return [np.asarray(o, dtype=np.int64) for o in outs]


class _Unmovable(Exception):
    """A move whose index operands the fast walk did not settle: demanded whole, as any equation."""


def move_operands(eqn: Any) -> tuple[list[Any], list[Any]]:
    """A move's data operands and its index operands."""
    start = MOVES[_compat.primitive_name(eqn)]
    return (list(eqn.invars), []) if start is None else (list(eqn.invars[:start]), list(eqn.invars[start:]))


def _move_demand(eqn: Any, positions: list[np.ndarray], n_out: list[np.ndarray], a_out: list[np.ndarray],
                 b_out: list[np.ndarray], add: Any) -> None:
    data, index = move_operands(eqn)
    kept = [p for p, v in zip(positions, eqn.outvars) if not _compat.is_dropvar(v)]
    sizes = [int(np.prod(tuple(_compat.aval(a).shape), dtype=np.int64)) for a in data]
    wanted = np.zeros(int(sum(sizes)), dtype=bool)
    accurate = np.zeros(int(sum(sizes)), dtype=bool)
    budget = np.full(int(sum(sizes)), np.inf)
    for pos, n, a, b in zip(kept, n_out, a_out, b_out):
        wanted[pos[n & (pos >= 0)]] = True
        accurate[pos[a & (pos >= 0)]] = True
        at = n & (pos >= 0)
        np.minimum.at(budget, pos[at], np.broadcast_to(b, pos.shape)[at])
    budget = np.where(np.isfinite(budget), budget, 0.0)
    offset = 0
    for atom, size in zip(data, sizes):
        shape = tuple(_compat.aval(atom).shape)
        add(atom, wanted[offset:offset + size].reshape(shape), accurate[offset:offset + size].reshape(shape),
            budget[offset:offset + size].reshape(shape))
        offset += size
    for atom in index:  # indices: small, wanted whole
        add(atom, np.ones(tuple(_compat.aval(atom).shape), dtype=bool))


# ------------------------------------------------------------------------------------------- cost
def operations(closed: Any) -> int:
    """The element operations of one whole walk of ``closed``: an elementwise result 1, a reduced,
    cumulated or dot-product result its terms, a move nothing; calls and loop bodies entered (a scan's
    body ``length`` times, a ``while`` body once, the costliest branch of a ``cond``)."""
    total = 0
    for eqn in _compat.eqns(closed):
        name = _compat.primitive_name(eqn)
        kind = _kind(eqn)
        if kind == "call":
            total += operations(_body(eqn))
        elif kind == "move":
            continue
        elif kind in ("reduce", "cumulative"):
            total += int(np.prod(tuple(_compat.aval(eqn.invars[0]).shape), dtype=np.int64))
        elif kind == "dot":
            shapes = [tuple(_compat.aval(a).shape) for a in eqn.invars]
            _, _, b, m, k, n = dot_layout(eqn, shapes[0], shapes[1])
            total += b * m * n * k
        elif name in ("scan", "while", "cond"):
            subs = [sub for _, sub in _compat.subjaxprs(eqn)]
            counts = [operations(sub) for sub in subs]
            if name == "scan":
                total += int(eqn.params.get("length", 1)) * sum(counts)
            else:
                total += max(counts, default=0) if name == "cond" else sum(counts)
        else:
            total += sum(int(np.prod(tuple(_compat.aval(v).shape), dtype=np.int64)) for v in eqn.outvars)
    return total
