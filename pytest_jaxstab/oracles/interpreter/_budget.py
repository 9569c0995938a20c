"""Error budgets: how wide a fast enclosure an operand may be taken with, for the element it feeds.

The mixed pass (``_demand``) takes a needed element from the fast walk where its enclosure is *tight*
(relative radius at most ``2^-tight_bits``) or, failing that, where its radius fits the *budget* its
consumer gives it: the width it may add to a result that is being recomputed without making that result
wider than the result's own budget. A budget is a heuristic of effort only: whatever an element is
taken with, its ball encloses it, so soundness never rests on one.

A recomputed element's budget is the larger of what its consumers allowed and ``2^-tight_bits`` times
its magnitude (its fast midpoint where that is finite, else an estimate from its operands: the sum of
their magnitudes). The rules below split it among the operands by a first-order bound of how an
operand's width reaches the result (``|d result / d operand|``):

* ``add``, ``sub``: half each; ``neg``, a cast between floats, ``max``, ``min``, ``select_n``'s cases,
  ``copy``: all of it (1-Lipschitz);
* ``mul``: ``budget / (2 |other|)``, ``|other|`` the other operand's largest magnitude;
* ``div``: the dividend ``budget |divisor| / 2`` (its smallest magnitude), the divisor none;
* ``reduce_sum``: ``budget / n`` each, for ``n`` terms.

Everything else gives its operands no budget (they must be tight). So a term of a sum that is small
next to the sum, but relatively loose (``log(p)`` for ``p`` within ``2^-40`` of 1, times a tiny
``y``), is taken as it is, and nothing of its cone is recomputed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ... import _compat
from ..fast import Interval

__all__ = ["operand_budgets", "scale"]

_SHARE_HALF = frozenset({"add", "add_any", "sub"})
_SHARE_ALL = frozenset({"neg", "convert_element_type", "copy", "copy_p", "max", "min"})


def _magnitude(value: Any, shape: tuple[int, ...]) -> np.ndarray:
    """``|mid| + rad`` of a fast interval (NaN where undecided or not an interval)."""
    if not isinstance(value, Interval):
        return np.full(shape, np.nan)
    with np.errstate(all="ignore"):
        return np.broadcast_to(np.abs(value.mid) + value.rad, shape)


def scale(eqn: Any, out: Any, operands: Sequence[Any], shape: tuple[int, ...]) -> np.ndarray:
    """A magnitude per result element of ``eqn``: the fast midpoint's where finite, else the sum of
    the operands' magnitudes (a reduction: of its terms'), else 0."""
    name = _compat.primitive_name(eqn)
    mag = _magnitude(out, shape)
    if np.isfinite(mag).all():
        return mag
    with np.errstate(all="ignore"):
        if name == "reduce_sum" and isinstance(operands[0], Interval):
            x = operands[0]
            axes = tuple(int(a) % max(x.mid.ndim, 1) for a in eqn.params["axes"])
            terms = np.where(np.isfinite(x.mid), np.abs(x.mid), 0.0)
            estimate = np.sum(terms, axis=axes) if axes else terms
        else:
            estimate = np.zeros(shape)
            for v in operands:
                m = _magnitude(v, tuple(np.shape(getattr(v, "mid", np.zeros(())))))
                estimate = estimate + np.broadcast_to(np.where(np.isfinite(m), m, 0.0), shape)
    return np.where(np.isfinite(mag), mag, np.broadcast_to(estimate, shape))


def operand_budgets(eqn: Any, kind: str, budget: np.ndarray, operands: Sequence[Any]) -> list[np.ndarray]:
    """The budget of each operand element (0: none) for the result elements with ``budget`` (0 where
    nothing is recomputed); a scalar operand gets the least of its share."""
    name = _compat.primitive_name(eqn)
    shapes = [tuple(_compat.aval(a).shape) for a in eqn.invars]
    none = [np.zeros(s) for s in shapes]
    if kind == "reduce" and name == "reduce_sum":
        (shape,) = shapes
        axes = tuple(int(a) % max(len(shape), 1) for a in eqn.params["axes"])
        n = max(int(np.prod([shape[a] for a in axes], dtype=np.int64)), 1)
        share = budget / n
        return [np.broadcast_to(np.expand_dims(share, axes) if axes else share, shape)]
    if kind != "elementwise":
        return none
    out_shape = budget.shape
    with np.errstate(all="ignore"):
        if name in _SHARE_HALF:
            shares = [budget / 2] * len(shapes)
        elif name in _SHARE_ALL:
            shares = [budget] * len(shapes)
        elif name == "select_n":
            shares = [np.zeros(out_shape)] + [budget] * (len(shapes) - 1)
        elif name == "mul" and len(shapes) == 2:
            a, b = (_magnitude(v, out_shape) for v in operands)
            shares = [budget / (2 * b), budget / (2 * a)]
        elif name == "div" and len(shapes) == 2:
            divisor = operands[1]
            if isinstance(divisor, Interval):
                least = np.broadcast_to(np.abs(divisor.mid) - divisor.rad, out_shape)
                shares = [np.where(least > 0, budget * least / 2, 0.0), np.zeros(out_shape)]
            else:
                shares = [np.zeros(out_shape)] * 2
        else:
            return none
    out = []
    for share, shape in zip(shares, shapes):
        share = np.where(np.isfinite(share) & (share > 0), share, 0.0)
        if shape != out_shape:  # a scalar: the least share of the elements being recomputed
            least = float(np.min(share[budget > 0], initial=np.inf))
            share = np.asarray(least if np.isfinite(least) else 0.0)
        out.append(share)
    return out
