"""``top_k``: the ``k`` largest elements along an axis and their indices, decided on balls.

XLA's order: descending, NaN above everything, ties in index order (``is_stable``). Each comparison is
the one ``sort`` makes (``_reductions._key_less``): answered only where the balls prove it, ``Undecided``
otherwise, so the selection is the exact program's or the elements escalate. Zero is unsigned in the
oracle, so ``-0.0`` and ``0.0`` tie (index order) where XLA ranks ``0.0`` first: the values agree, the
indices of such a pair may not.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from ..core._common import Rule, out_aval
from ._reductions import _key_less

__all__ = ["RULES"]


def _top_k(ctx: Any, eqn: Any, operand: np.ndarray) -> list[np.ndarray]:
    k = int(eqn.params["k"])
    axis = int(eqn.params.get("axis", -1)) % max(operand.ndim, 1)
    moved = np.moveaxis(operand, axis, -1)
    rows = moved.reshape(-1, moved.shape[-1])
    values = np.empty((rows.shape[0], k), dtype=rows.dtype)
    indices = np.empty((rows.shape[0], k), dtype=np.dtype(out_aval(eqn, 1).dtype))
    for r, row in enumerate(rows):
        items = row.tolist()

        def before(p: int, q: int, items: list[Any] = items) -> int:
            greater = _key_less(items[q], items[p])  # p before q when q sorts below p
            if greater is None:
                return -1 if p < q else (1 if p > q else 0)
            return -1 if greater else 1

        order = sorted(range(len(items)), key=functools.cmp_to_key(before))[:k]
        values[r] = row[order]
        indices[r] = order
    shape = (*moved.shape[:-1], k)
    return [np.moveaxis(values.reshape(shape), -1, axis), np.moveaxis(indices.reshape(shape), -1, axis)]


RULES: dict[str, Rule] = {"top_k": _top_k}
