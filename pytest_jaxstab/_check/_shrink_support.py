"""The support of a failing output element: which input elements it reads, for the shrinker's first cut.

At real sizes a failure is born in one row of a batch or one column of a weight matrix, and the rest of
the input only costs evaluations: delta debugging halves it one full run at a time (a (32, 256) @
(256, 256) layer spent its whole budget of runs zeroing halves). The reverse-mode derivative of the worst
output element says which elements it reads in one cheap float pass. A derivative can be zero where the
element is read (a ReLU off, a ``where`` not taken, an ``exp`` underflowed), so it is taken at the input
and at a benign point (every element 1/2), and an element is kept where either is nonzero (at the input
only a finite one: there a zero cotangent meets an overflowed partial, NaN, in rows the element never
reads).
This is a heuristic proposal only: the shrinker keeps the cut input only where a full evaluation says it
still fails.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from .. import _compat
from ._evaluate import SampleResult

__all__ = ["support_masks", "worst_element"]


def worst_element(example: SampleResult) -> tuple[int, int] | None:
    """``(judged leaf, flat index)`` of the element with the most bits over every variant, or None."""
    best: tuple[float, int, int] | None = None
    for score in example.outcomes.values():
        for leaf, bits in enumerate(score.element_bits):
            flat = np.asarray(bits, dtype=np.float64).reshape(-1)
            if flat.size == 0 or np.isnan(flat).all():
                continue
            k = int(np.nanargmax(flat))
            if best is None or flat[k] > best[0]:
                best = (float(flat[k]), leaf, k)
    return None if best is None else (best[1], best[2])


def support_masks(closed: Any, judged_outputs: list[int], example: SampleResult,
                  dtype: np.dtype[Any]) -> list[np.ndarray | None] | None:
    """Per argument, the elements the worst output element of ``example`` may read (True), None for a
    non-float argument (left whole); None when no derivative can be taken (an integer output, a
    primitive without a derivative rule)."""
    where = worst_element(example)
    if where is None:
        return None
    leaf, index = where
    out = judged_outputs[leaf]
    args = [np.asarray(a) for a in example.args]
    floats = [np.issubdtype(a.dtype, np.floating) for a in args]
    if not any(floats):
        return None
    fun = _compat.as_fun(closed)

    def picked(*float_args: Any) -> Any:
        it = iter(float_args)
        full = [next(it) if f else a for a, f in zip(args, floats)]
        return jax.numpy.reshape(fun(*full)[out], (-1,))[index]

    masks: list[np.ndarray] = [np.zeros(a.shape, bool) for a, f in zip(args, floats) if f]
    points = [[a for a, f in zip(args, floats) if f],
              [np.full(a.shape, 0.5, a.dtype) for a, f in zip(args, floats) if f]]
    try:
        grad = jax.jit(jax.grad(picked, argnums=tuple(range(len(masks)))))
        with np.errstate(all="ignore"):
            for benign, point in zip((False, True), points):
                for m, g in zip(masks, grad(*point)):
                    g = np.asarray(g)
                    # at the failing input a zero cotangent times an overflowed partial is NaN in every
                    # row: only the benign point's non-finite entries mean "read"
                    m |= (g != 0) & (np.isfinite(g) | benign)
    except Exception:  # no derivative (an integer output, a primitive without a rule): no first cut
        return None
    it = iter(masks)
    return [next(it) if f else None for f in floats]
