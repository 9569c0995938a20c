"""Regime inference: up to four candidates joined by ``jnp.where`` on the range of an input or a
sub-expression.

As in Herbie: the points are sorted by one input (or one of the original's few smallest
sub-expressions of several inputs, such as ``x + e``, which must buy twice as much per run); a dynamic
programme splits them into at most ``max_regimes`` runs, each served by the candidate with the least
total error there; a split is kept only if each run beyond the first buys at least ``min_gain`` bits
of mean error. Each threshold between two runs of an input is then refined by bisection, judged by the
oracle at the midpoints with the other inputs of the samples next to the split, over the span where
the two candidates tie on the samples (a sample where both are exact says nothing about where the
split belongs).

Lowering: ``where(x < t, A, B)`` evaluates both branches everywhere, and the branch not taken may be
NaN or infinite there (a series at its pole, a form that overflows), which ``jnp.where`` hides in the
value but not in the gradient (``0 * nan``). Each candidate therefore reads its inputs only where its
run is taken, and elsewhere a sample point of its own run where it is accurate (the double-where
trick): where the run is taken nothing changes; elsewhere it computes a finite value with a finite
gradient. Elementwise programs are judged per element, so the same ``where`` serves scalar and array
inputs.

Array programs (with reductions, judged per example of whole arrays): a split is per example. The keys
are the scalar inputs and the original's sub-expressions with one value per example (a whole reduction,
``sum(v)``, or a formula of such), compared as rank-0 values (``jnp.reshape(k, ())``) so that the guard
keeps every input's shape; a candidate's error on an example is its mean over the output's elements;
the guard's representative is one drawn example (an array constant in the source); candidates whose
output has another shape than the original's are not joined.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .. import oracles
from ._expr import Table, Term, const, evaluate_jax, size, subterms, variables
from ._judge import Samples

__all__ = ["infer"]


Plan = tuple[float, list[tuple[int, int]]]


def _best_split(errs: np.ndarray, order: np.ndarray, max_regimes: int) -> list[Plan]:
    """The best plan with 1, 2, ... ``max_regimes`` runs over ``order``: (total error, [(end, candidate)]).

    A dynamic programme over run ends (Herbie's): ``cost[r][j]`` is the least total error of the first
    ``j`` points in ``r + 1`` runs, each run served by the candidate with the least error on it.
    """
    e = np.nan_to_num(errs[:, order], nan=0.0)
    k, n = e.shape
    prefix = np.concatenate([np.zeros((k, 1)), np.cumsum(e, axis=1)], axis=1)
    seg_cost = prefix[:, None, :] - prefix[:, :, None]  # [c, i, j] = error of c on points i..j-1
    best = seg_cost.min(axis=0)
    arg = seg_cost.argmin(axis=0)
    upper = np.triu(np.ones((n + 1, n + 1), bool), 1)  # a run i..j-1 is not empty: i < j
    best = np.where(upper, best, np.inf)
    cost = best[0].copy()  # one run: points 0..j-1
    back: list[np.ndarray] = []
    plans: list[Plan] = [(float(cost[n]), [(n, int(arg[0, n]))])]
    for _ in range(1, max_regimes):
        total = cost[:, None] + best  # [i, j]: the first i points in the runs so far, then i..j-1
        back.append(np.argmin(total, axis=0))
        cost = total[back[-1], np.arange(n + 1)]
        if not math.isfinite(cost[n]):
            break
        runs, j = [], n
        for step in reversed(back):
            i = int(step[j])
            runs.append((j, int(arg[i, j])))
            j = i
        runs.append((j, int(arg[0, j])))
        plans.append((float(cost[n]), runs[::-1]))
    return plans


def infer(cands: Sequence[Term], errs: np.ndarray, samples: Samples, original: Term, *,
          max_regimes: int = 4, min_gain: float = 0.1, bisect_steps: int = 12) -> Term | None:
    """The best ``where``-combination of ``cands`` (rows of ``errs``), or None when no split pays.

    ``errs`` are the candidates' errors at the samples (NaN where a point does not count).
    """
    valid = samples.valid
    if samples.out_shape is not None:  # an array program: one point per example
        errs, valid = _per_example(cands, errs, samples, original)
    n_valid = int(valid.sum())
    if len(cands) < 2 or n_valid < 8:
        return None
    idx = np.flatnonzero(valid)
    single = float(np.nanmin(np.nansum(errs[:, idx], axis=1)))
    best_total, best_plan, best_key = single, None, -1
    keys = _split_keys(original, samples, idx)
    for key, (term, values) in enumerate(keys):
        order = idx[np.argsort(values[idx], kind="stable")]
        # A sub-expression pays a run more: it is one of many tried, the inputs are the natural splits.
        price = min_gain * (1.0 if term[0] == "var" else 2.0) * n_valid
        for total, plan in _best_split(errs, order, max_regimes)[1:]:
            if total + price * (len(plan) - 1) < best_total:
                best_total, best_plan, best_key = total, (plan, order), key
    if best_plan is None:
        return None
    plan, order = best_plan
    plan = _merge(plan)
    if len(plan) < 2:
        return None
    key_term, key_values = keys[best_key]
    thresholds: list[float] = []
    starts = [0] + [end for end, _ in plan[:-1]]
    for r, ((end, c_left), (next_end, c_right)) in enumerate(itertools.pairwise(plan)):
        lo_i, hi_i = _widened(errs[c_left, order], errs[c_right, order], starts[r], end, next_end)
        if key_term[0] == "var":  # (of an array program: a scalar input)
            t = _bisect(cands[c_left], cands[c_right], samples, original, key_term[1], order, lo_i, hi_i,
                        bisect_steps)
        else:  # a sub-expression cannot be set apart from the inputs: the middle of the tied span
            t = _midpoint(float(key_values[order[lo_i]]), float(key_values[order[hi_i]]), samples.dtype)
        # Widened spans of neighbouring splits may overlap: thresholds stay in order.
        thresholds.append(max(t, thresholds[-1]) if thresholds else t)
    compared = _compared(key_term, samples)
    guarded = [_guarded(cands[c], compared, thresholds, r,
                        _representative(errs[c], order[start:end], samples))
               for r, ((end, c), start) in enumerate(zip(plan, starts))]
    term = guarded[-1]
    for g, t in zip(reversed(guarded[:-1]), reversed(thresholds)):
        term = ("where", ("lt", compared, const(t)), g, term)
    return term


def _compared(key: Term, samples: Samples) -> Term:
    """The key as compared: of an array program, a rank-0 value (a reduction keeps its axes)."""
    return key if samples.out_shape is None or key[0] == "var" else ("scalar", key)


def _per_example(cands: Sequence[Term], errs: np.ndarray, samples: Samples, original: Term,
                 ) -> tuple[np.ndarray, np.ndarray]:
    """An array program's errors as one figure per example (the mean over its output's elements; NaN
    where none counts) and the examples that count. A candidate whose output has another shape than
    the original's (a rewrite that moved a selection) cannot be joined: its errors are made prohibitive."""
    n = samples.valid.shape[0]
    counted = samples.valid.reshape(n, -1)
    flat = errs.reshape(len(cands), n, -1)
    with np.errstate(invalid="ignore"):
        mean = np.nansum(flat, axis=2) / np.maximum(counted.sum(axis=1), 1)
        per = np.where(counted.any(axis=1), mean, np.nan)
    shape = _example_shape(original, samples)
    for c, cand in enumerate(cands):
        if _example_shape(cand, samples) != shape:
            per[c] = 1e9
    return per, counted.any(axis=1)


def _example_shape(term: Term, samples: Samples) -> tuple[int, ...] | None:
    """The shape ``term`` evaluates to on one example (None when it does not evaluate)."""
    one = [jax.ShapeDtypeStruct(a.shape[1:], samples.dtype) for a in samples.args]
    try:
        return tuple(jax.eval_shape(lambda *a: evaluate_jax(term, a, samples.dtype), *one).shape)
    except (TypeError, ValueError):
        return None


#: Sub-expressions of the original tried as split keys besides the inputs (the smallest first).
_SUBTERM_KEYS = 6


def _split_keys(original: Term, samples: Samples, idx: np.ndarray) -> list[tuple[Term, np.ndarray]]:
    """What a regime may split on, with its values at the samples: each input, then up to
    :data:`_SUBTERM_KEYS` of the original's smallest sub-expressions of several inputs (Herbie's branch
    expressions: ``x + e`` where the loss depends on the sum, ``b*b - 4*a*c``), those finite at every
    valid sample (their float values: what the lowered ``where`` compares)."""
    array = samples.out_shape is not None
    n = len(samples.valid)
    # Of an array program, only a scalar input sets one example apart from another.
    keys: list[tuple[Term, np.ndarray]] = [(("var", v), np.asarray(a, np.float64))
                                           for v, a in enumerate(samples.args) if not array or a.ndim == 1]
    # Of an array program, a sub-expression of one input is a key too (``sum(v)``): it is no input.
    fewest = 1 if array else 2
    subs = sorted({t for t in subterms(original)
                   if len(variables(t)) >= fewest and t[0] not in _UNSPLIT and t[0] != "var"},
                  key=lambda t: (size(t), repr(t)))
    found = 0
    for t in subs:
        if found >= _SUBTERM_KEYS:
            break
        values = _key_values(t, samples)
        if values is None or values.size != n:
            continue
        values = values.reshape(n)
        if np.isfinite(values[idx]).all():
            keys.append((t, values))
            found += 1
    return keys


def _key_values(t: Term, samples: Samples) -> np.ndarray | None:
    """``t``'s float values at the samples (per example, stacked, for an array program)."""
    args = [jnp.asarray(a) for a in samples.args]
    try:
        if samples.out_shape is None:
            return np.asarray(evaluate_jax(t, args, samples.dtype), np.float64)
        return np.asarray(jax.vmap(lambda *a: evaluate_jax(t, a, samples.dtype))(*args), np.float64)
    except (TypeError, ValueError):
        return None


#: Sub-expressions that are no split keys: comparisons and selections (already a split).
_UNSPLIT = {"lt", "le", "eq", "ne", "where", "nanif"}


def _representative(errs: np.ndarray, points: np.ndarray, samples: Samples) -> list[float | Table]:
    """The inputs of a sample of the run where its candidate is most accurate (the median such one)."""
    e = np.nan_to_num(errs[points], nan=np.inf)
    good = points[e <= e.min()]
    i = int(good[len(good) // 2])
    return [float(a[i]) if a.ndim == 1 else Table.of(a[i]) for a in samples.args]


def _guarded(cand: Term, key: Term, thresholds: list[float], run: int, rep: list[float | Table]) -> Term:
    """``cand`` reading its inputs where run ``run`` is taken, and ``rep`` (a point of its own run, where it
    is accurate) elsewhere: the branch not taken computes a finite value with a finite gradient, so that
    ``jnp.where`` neither yields NaN nor passes one to the gradient (the double-where trick). Where the
    run is taken, the inputs are the inputs: the value is the candidate's."""
    cond_hi = ("lt", key, const(thresholds[run])) if run < len(thresholds) else None
    cond_lo = ("lt", key, const(thresholds[run - 1])) if run > 0 else None
    inputs = {}
    for i in sorted(variables(cand)):
        x: Term = ("var", i)
        r = rep[i]
        safe: Term = ("const", r) if isinstance(r, Table) else const(r)
        if cond_hi is not None:
            x = ("where", cond_hi, x, safe)
        if cond_lo is not None:
            x = ("where", cond_lo, safe, x)
        inputs[i] = x
    return _substitute(cand, inputs)


def _substitute(term: Term, inputs: dict[int, Term]) -> Term:
    if term[0] == "var":
        return inputs.get(term[1], term)
    if term[0] == "const":
        return term
    return (term[0], *(_substitute(c, inputs) for c in term[1:]))


def _merge(plan: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for end, c in plan:
        if out and out[-1][1] == c:
            out[-1] = (end, c)
        else:
            out.append((end, c))
    return out


#: Samples on each side of a split whose other inputs judge each bisection step.
_NEIGHBOURS = 4
#: Mean bits by which one side must beat the other at a midpoint to move the threshold past it: below
#: it, the difference is the rounding of different operations, and chasing it moved quadm's split at
#: b = 0 to b = -4e-73, where the form that cancels for b < 0 loses every bit.
_TIE_BITS = 1.0


def _widened(left: np.ndarray, right: np.ndarray, start: int, end: int, stop: int) -> tuple[int, int]:
    """Where the split between runs ``start:end`` (``left``'s) and ``end:stop`` (``right``'s) may lie: from
    the last point of the left run where ``left`` is clearly better to the first of the right run where
    ``right`` is; between them the two tie on the samples (quadm's ``b = -4e-73`` next to ``b < 0`` points
    where the naive form was still exact), and the bisection decides."""
    l_err, r_err = np.nan_to_num(left, nan=0.0), np.nan_to_num(right, nan=0.0)
    better_left = np.flatnonzero(l_err[start:end] < r_err[start:end] - _TIE_BITS)
    better_right = np.flatnonzero(r_err[end:stop] < l_err[end:stop] - _TIE_BITS)
    lo = start + int(better_left[-1]) if better_left.size else end - 1
    hi = end + int(better_right[0]) if better_right.size else end
    return lo, hi


def _bisect(left: Term, right: Term, samples: Samples, original: Term, var: int, order: np.ndarray, lo_i: int,
            hi_i: int, steps: int) -> float:
    """The threshold between the samples ``order[lo_i]`` and ``order[hi_i]``: bisection on ``var``, each
    midpoint judged at the other inputs of up to :data:`_NEIGHBOURS` samples on each side (one sample's
    alone misplaced quadm's sign split: at its ``a, c`` both forms were accurate far from ``b = 0``)."""
    dtype = samples.dtype
    lo = float(samples.args[var][order[lo_i]])
    hi = float(samples.args[var][order[hi_i]])
    near = np.concatenate([order[max(0, lo_i - _NEIGHBOURS + 1):lo_i + 1], order[hi_i:hi_i + _NEIGHBOURS]])
    base = [np.asarray(a[near], dtype) for a in samples.args]
    f_orig, f_left, f_right = (samples.function(t) for t in (original, left, right))
    for _ in range(steps):
        mid = _midpoint(lo, hi, dtype)
        if mid <= lo or mid >= hi:
            break
        point = list(base)
        point[var] = np.full(len(near), mid, dtype)
        exact = oracles.evaluate(f_orig, *point, dtype=dtype)
        ex = np.asarray(exact.values, dtype)
        ok = np.asarray(exact.certain, bool) & ~np.isnan(ex)
        if not ok.any():
            break
        ok = ok.reshape(len(near), -1).all(axis=1)  # of an array program: the examples wholly judged
        e_left = _bits(f_left, point, ex, dtype)[ok].sum()
        e_right = _bits(f_right, point, ex, dtype)[ok].sum()
        if abs(e_left - e_right) <= _TIE_BITS * ok.sum():
            return mid  # both as accurate here (rounding noise apart): a split at 0 stays at 0
        if e_left < e_right:
            lo = mid
        else:
            hi = mid
    return hi


def _bits(fn: Any, point: list[Any], exact: Any, dtype: Any) -> np.ndarray:
    """Bits of error per point (per example: the mean over its elements)."""
    value = np.asarray(fn(*(jnp.asarray(p) for p in point)), dtype)
    bits = np.nan_to_num(np.asarray(oracles.error_bits(value, exact), float), nan=64.0)
    return bits.reshape(len(point[0]), -1).mean(axis=1)


def _midpoint(lo: float, hi: float, dtype: Any) -> float:
    # Midpoint in magnitude (geometric) when both ends share a sign: thresholds span many binades.
    if lo > 0 and hi > 0:
        mid = math.sqrt(lo) * math.sqrt(hi)
    elif lo < 0 and hi < 0:
        mid = -math.sqrt(-lo) * math.sqrt(-hi)
    else:
        mid = 0.0 if lo < 0 < hi else (lo + hi) / 2
    return float(np.asarray(mid, dtype))
