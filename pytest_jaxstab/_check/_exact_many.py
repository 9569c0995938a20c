"""The exact judged outputs at many inputs of one program, from one oracle call where it can.

The conditioning's finite differences (one exact evaluation per input element) and joint moves (up to
24) evaluate the same program at many moved copies of one input: a 16-element log-sum-exp's check made
some 500 oracle calls, each paying the walk's fixed cost for a few dozen elements. Here the copies are
stacked on a new leading axis and the program ``jax.vmap``-ed over it (traced once per program and
count): the same function of each copy, so the same exact values, from one vectorised walk of the fast
path. A copy any of whose judged elements the batched call leaves uncertain is evaluated alone, as
before, and a program the batched call cannot take at all (an error) falls back to one call per copy:
the values are the ones the separate calls give, only fewer calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import numpy as np

from .. import _compat
from .._dtypes import component_dtype, dtype_info
from ..oracles import evaluate

__all__ = ["BATCH", "STACKED_ELEMENTS", "WITHIN_ULPS", "exact64", "exact64_many"]

#: How near the exact value the results must be, in ulps of the judged dtype at the value: far below the
#: conditioning figures' resolution (they count those ulps). Float64 interval enclosures meet it for
#: float32 and narrower outputs at the cost of one vectorised pass (``oracles.evaluate(within=...)``);
#: float64 outputs need the correctly rounded value (Arb balls).
WITHIN_ULPS = 2.0**-20
#: Copies per batched call: enough to pay the walk's fixed cost once for many, few enough that a copy the
#: batch leaves uncertain (evaluated again alone) or a joint move that ends early wastes little.
BATCH = 32

#: Input elements one batched call may stack (a large program takes fewer copies a call).
STACKED_ELEMENTS = 2**20

_VMAPPED: dict[tuple[int, int], tuple[Any, Any]] = {}


def exact64(closed: Any, args: Sequence[np.ndarray], judged_outputs: Sequence[int],
            out_dtypes: Sequence[np.dtype[Any]]) -> list[np.ndarray]:
    """The judged outputs of ``closed`` at ``args`` from the oracle, as float64 (complex128 for complex
    outputs), NaN where it is not certain."""
    result = evaluate(closed, *args, dtype="float64", within=_within(judged_outputs, out_dtypes))
    return _leaves(result, judged_outputs)


def exact64_many(closed: Any, arg_sets: Sequence[Sequence[np.ndarray]], judged_outputs: Sequence[int],
                 out_dtypes: Sequence[np.dtype[Any]]) -> list[list[np.ndarray]]:
    """:func:`exact64` at each of ``arg_sets`` (module docstring): :data:`BATCH` copies a call, fewer
    where they would stack more than :data:`STACKED_ELEMENTS` input elements."""
    out: list[list[np.ndarray]] = []
    if not arg_sets:
        return out
    size = max(sum(int(np.size(a)) for a in arg_sets[0]), 1)
    count = max(1, min(BATCH, STACKED_ELEMENTS // size))
    for start in range(0, len(arg_sets), count):
        part = arg_sets[start:start + count]
        out.extend(_batch(closed, part, judged_outputs, out_dtypes) if len(part) > 1
                   else [exact64(closed, part[0], judged_outputs, out_dtypes)])
    return out


def _batch(closed: Any, arg_sets: Sequence[Sequence[np.ndarray]], judged_outputs: Sequence[int],
           out_dtypes: Sequence[np.dtype[Any]]) -> list[list[np.ndarray]]:
    count = len(arg_sets)
    stacked = [np.stack([np.asarray(s[k]) for s in arg_sets]) for k in range(len(arg_sets[0]))]
    try:
        program = _vmapped(closed, count, stacked)
        result = evaluate(program, *stacked, dtype="float64", within=_within(judged_outputs, out_dtypes))
        values = _leaves(result, judged_outputs)
    except Exception:  # a program the batched walk cannot take: one call per copy, as before
        return [exact64(closed, s, judged_outputs, out_dtypes) for s in arg_sets]
    out = []
    for n, s in enumerate(arg_sets):
        own = [v[n] for v in values]
        # NaN marks an uncertain element (``exact64``); a copy with one is asked alone, where the
        # oracle's escalation looks at that copy only.
        if any(np.isnan(o).any() for o in own):
            own = exact64(closed, s, judged_outputs, out_dtypes)
        out.append(own)
    return out


def _vmapped(closed: Any, count: int, stacked: Sequence[np.ndarray]) -> Any:
    key = (id(closed), count)
    hit = _VMAPPED.get(key)
    if hit is not None and hit[0] is closed:
        return hit[1]
    if len(_VMAPPED) >= 32:
        _VMAPPED.pop(next(iter(_VMAPPED)))
    with _compat.enable_x64():  # the inputs keep their dtypes (a float64 input is not narrowed)
        made = jax.make_jaxpr(jax.vmap(_compat.as_fun(closed)))(*stacked)
    _VMAPPED[key] = (closed, made)
    return made


def _within(judged_outputs: Sequence[int], out_dtypes: Sequence[np.dtype[Any]]) -> Any:
    finest = min((component_dtype(out_dtypes[i]) for i in judged_outputs),
                 key=lambda d: float(dtype_info(d).eps))
    return (WITHIN_ULPS, finest) if float(dtype_info(finest).eps) > 2.0**-30 else None


def _leaves(result: Any, judged_outputs: Sequence[int]) -> list[np.ndarray]:
    values = jax.tree_util.tree_leaves(result.values)
    certain = jax.tree_util.tree_leaves(result.certain)
    out = []
    for i in judged_outputs:
        raw = np.asarray(values[i])
        v = raw.astype(np.complex128 if np.iscomplexobj(raw) else np.float64)
        out.append(np.where(np.broadcast_to(np.asarray(certain[i], dtype=bool), v.shape), v, np.nan))
    return out
