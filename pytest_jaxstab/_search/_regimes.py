"""Regime inference: up to three candidates joined by ``jnp.where`` on one input's range.

As in Herbie: the points are sorted by one input; a dynamic programme splits them into at most three
runs, each served by the candidate with the least total error there; a split is kept only if it buys
at least ``min_gain`` bits of mean error. Each threshold between two runs is then refined by bisection
between the neighbouring sample values, judged by the oracle at the midpoints (the other inputs held at
the left neighbour's values).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import jax.numpy as jnp
import numpy as np

from .. import oracles
from ._expr import Term, const
from ._judge import Samples, jax_function

__all__ = ["infer"]


Plan = tuple[float, list[tuple[int, int]]]


def _best_split(errs: np.ndarray, order: np.ndarray, max_regimes: int) -> list[Plan]:
    """The best plan with 1, 2, ... ``max_regimes`` runs over ``order``: (total error, [(end, candidate)])."""
    e = np.nan_to_num(errs[:, order], nan=0.0)
    k, n = e.shape
    prefix = np.concatenate([np.zeros((k, 1)), np.cumsum(e, axis=1)], axis=1)
    seg_cost = prefix[:, None, :] - prefix[:, :, None]  # [c, i, j] = error of c on points i..j-1
    best = seg_cost.min(axis=0)
    arg = seg_cost.argmin(axis=0)
    one = best[0, n]
    plans: list[Plan] = [(float(one), [(n, int(arg[0, n]))])]
    if max_regimes >= 2:
        totals = best[0, 1:n] + best[1:n, n]
        i = int(np.argmin(totals)) + 1
        plans.append((float(totals[i - 1]), [(i, int(arg[0, i])), (n, int(arg[i, n]))]))
    if max_regimes >= 3 and n >= 3:
        # best over i < j of best[0,i] + best[i,j] + best[j,n]
        left = best[0, :, None] + best[:, :] + best[None, :, n]
        mask = np.triu(np.ones((n + 1, n + 1), bool), 1)
        mask[0, :] = False
        mask[:, n] = False
        left = np.where(mask, left, np.inf)
        i, j = np.unravel_index(int(np.argmin(left)), left.shape)
        if math.isfinite(left[i, j]):
            plans.append((float(left[i, j]), [(int(i), int(arg[0, i])), (int(j), int(arg[i, j])),
                                             (n, int(arg[j, n]))]))
    return plans


def infer(cands: Sequence[Term], errs: np.ndarray, samples: Samples, original: Term, *,
          max_regimes: int = 3, min_gain: float = 0.1, bisect_steps: int = 12) -> Term | None:
    """The best ``where``-combination of ``cands`` (rows of ``errs``), or None when no split pays.

    ``errs`` are the candidates' errors at the samples (NaN where a point does not count).
    """
    valid = samples.valid
    n_valid = int(valid.sum())
    if len(cands) < 2 or n_valid < 8:
        return None
    idx = np.flatnonzero(valid)
    single = float(np.nanmin(np.nansum(errs[:, idx], axis=1)))
    best_total, best_plan, best_var = single, None, -1
    for v, values in enumerate(samples.args):
        order = idx[np.argsort(values[idx].astype(np.float64), kind="stable")]
        for total, plan in _best_split(errs, order, max_regimes)[1:]:
            runs = len(plan)
            if total + min_gain * n_valid * (runs - 1) < best_total:
                best_total, best_plan, best_var = total, (plan, order), v
    if best_plan is None:
        return None
    plan, order = best_plan
    plan = _merge(plan)
    if len(plan) < 2:
        return None
    thresholds = []
    for (end, c_left), (_, c_right) in itertools.pairwise(plan):
        lo_point = order[end - 1]
        hi_point = order[end]
        thresholds.append(_bisect(cands[c_left], cands[c_right], samples, original, best_var, lo_point,
                                  hi_point, bisect_steps))
    term = cands[plan[-1][1]]
    for (_, c), t in reversed(list(zip(plan[:-1], thresholds))):
        term = ("where", ("lt", ("var", best_var), const(t)), cands[c], term)
    return term


def _merge(plan: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for end, c in plan:
        if out and out[-1][1] == c:
            out[-1] = (end, c)
        else:
            out.append((end, c))
    return out


def _bisect(left: Term, right: Term, samples: Samples, original: Term, var: int, lo_i: int, hi_i: int,
            steps: int) -> float:
    dtype = samples.dtype
    lo = float(samples.args[var][lo_i])
    hi = float(samples.args[var][hi_i])
    base = [np.asarray(a[lo_i], dtype) for a in samples.args]
    for _ in range(steps):
        mid = _midpoint(lo, hi, dtype)
        if mid <= lo or mid >= hi:
            break
        point = list(base)
        point[var] = np.asarray(mid, dtype)
        exact = oracles.evaluate(jax_function(original, dtype), *point, dtype=dtype)
        ex = np.asarray(exact.values, dtype)
        if not bool(np.asarray(exact.certain)) or np.isnan(ex):
            break
        e_left = _bits(left, point, ex, dtype)
        e_right = _bits(right, point, ex, dtype)
        if e_left <= e_right:
            lo = mid
        else:
            hi = mid
    return hi


def _bits(term: Term, point: list[Any], exact: Any, dtype: Any) -> float:
    value = np.asarray(jax_function(term, dtype)(*(jnp.asarray(p) for p in point)), dtype)
    return float(oracles.error_bits(value, exact))


def _midpoint(lo: float, hi: float, dtype: Any) -> float:
    # Midpoint in magnitude (geometric) when both ends share a sign: thresholds span many binades.
    if lo > 0 and hi > 0:
        mid = math.sqrt(lo) * math.sqrt(hi)
    elif lo < 0 and hi < 0:
        mid = -math.sqrt(-lo) * math.sqrt(-hi)
    else:
        mid = 0.0 if lo < 0 < hi else (lo + hi) / 2
    return float(np.asarray(mid, dtype))
