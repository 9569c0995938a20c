"""Complex numbers in order: ``max``, ``min``, their reductions and the complex scatters (``_complex``).

JAX orders complex numbers lexicographically, real part first (``lax.max``'s docstring and lowering,
``jax/_src/interpreters/mlir.py``'s ``_minmax_hlo``). On balls the order is decided only when the real
parts are separated, or exactly equal and the imaginary parts separated; otherwise ``Undecided``
escalates the precision (equal values computed inexactly stay undecided: uncertain, never guessed).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import SimpleNamespace
from typing import Any

import numpy as np
from flint import acb, arb

from ... import _compat
from ..core._common import INDET, Rule, Undecided, is_complex, obj

__all__ = ["complex_cumulative", "complex_scatter", "complex_sort", "fold_pick", "minmax"]

CBall = Any  # acb | None
_INDET_C = acb(INDET, INDET)


def _lex_greater(a: arb, b: arb, greater: bool) -> bool:
    """``a > b`` (``a < b`` when not ``greater``) on balls, or Undecided while they overlap."""
    if a.is_exact() and b.is_exact():
        return bool(a > b) if greater else bool(a < b)
    if a.overlaps(b):
        raise Undecided
    return bool(a > b) if greater else bool(a < b)


def _lex_pick(x: CBall, y: CBall, greater: bool) -> CBall:
    """XLA's complex ``max`` (``min``): lexicographic on (real, imaginary) with the real part first,
    ``select(re_x == re_y ? im_x > im_y : re_x > re_y, x, y)`` (jax/_src/interpreters/mlir.py,
    ``_minmax_hlo``); a NaN part compares false, so a value with none (None) gives ``y``."""
    if x is None or y is None:
        return y
    xr, yr = x.real, y.real
    if xr.is_exact() and yr.is_exact() and xr == yr:
        return x if _lex_greater(x.imag, y.imag, greater) else y
    if xr.overlaps(yr):
        raise Undecided  # equal or not: a higher precision separates them unless they are equal
    return x if _lex_greater(xr, yr, greater) else y


def fold_pick(greater: bool) -> Callable[[Sequence[CBall]], CBall]:
    """``reduce_max``/``reduce_min`` on complex values: the lexicographic extreme. With a value missing
    (None) XLA's result depends on its reduction order (the select keeps whichever side came second):
    indeterminate, never guessed."""

    def fold(values: Sequence[CBall]) -> CBall:
        if not values or any(v is None for v in values):
            return _INDET_C
        acc = values[0]
        for v in values[1:]:
            acc = _lex_pick(acc, v, greater)
        return acc

    return fold


def minmax(greater: bool) -> Rule:
    uf = np.frompyfunc(lambda x, y: _lex_pick(x, y, greater), 2, 1)
    return lambda ctx, eqn, a, b: obj(uf(a, b))


#: Combiners of the complex scatters, ``(value there, update) -> new value``.
_SCATTER_COMBINE: dict[str, Callable[[CBall, CBall], CBall]] = {
    "mul": lambda a, b: None if a is None or b is None else a * b,
    "max": lambda a, b: _lex_pick(a, b, True),
    "min": lambda a, b: _lex_pick(a, b, False),
}


def complex_scatter(kind: str) -> Rule:
    from ..primitives._structural import scatter

    uf = np.frompyfunc(_SCATTER_COMBINE[kind], 2, 1)
    return lambda ctx, eqn, operand, indices, updates: scatter(ctx, eqn, operand, indices, updates,
                                                               combine=uf)


def _part(x: np.ndarray, imag: bool) -> np.ndarray:
    if not x.size:
        return x
    return obj(np.frompyfunc(lambda v: None if v is None else (v.imag if imag else v.real), 1, 1)(x))


def complex_sort(ctx: Any, eqn: Any, *operands: np.ndarray) -> list[np.ndarray]:
    """``sort`` with complex keys: each complex key is two real keys, its real part then its imaginary
    part, as JAX's comparator builds them (``lax._operands_to_keys``); the real rule sorts, with every
    original operand carried along."""
    from ..primitives._reductions import RULES as REAL

    num_keys = int(eqn.params.get("num_keys", 1))
    keys: list[np.ndarray] = []
    for k, op in enumerate(operands[:num_keys]):
        if is_complex(_compat.aval(eqn.invars[k]).dtype):
            keys += [_part(op, False), _part(op, True)]
        else:
            keys.append(op)
    shim = SimpleNamespace(params={**eqn.params, "num_keys": len(keys)})
    return list(REAL["sort"](ctx, shim, *keys, *operands))[len(keys):]


def prefix_scan(eqn: Any, x: np.ndarray, row: Callable[[Sequence[CBall]], list[CBall]]) -> np.ndarray:
    """A cumulative primitive's result: ``row`` maps each row of ``x`` along ``eqn``'s ``axis`` (read
    from the end with ``reverse``) to the values of its prefixes, in the same order."""
    axis = int(eqn.params["axis"]) % max(x.ndim, 1)
    reverse = bool(eqn.params.get("reverse", False))
    moved = np.moveaxis(np.flip(x, axis) if reverse else x, axis, -1)
    out = np.empty(moved.shape, dtype=object)
    for idx in np.ndindex(moved.shape[:-1]):
        for j, value in enumerate(row(list(moved[idx]))):
            out[(*idx, j)] = value
    out = np.moveaxis(out, -1, axis)
    return np.flip(out, axis) if reverse else out


def complex_cumulative(greater: bool) -> Rule:
    """``cummax``/``cummin`` on complex values: the lexicographic extreme of each prefix (indeterminate
    from a value without one on, as for the reductions: XLA's scan order decides there)."""

    def extremes(values: Sequence[CBall]) -> list[CBall]:
        out: list[CBall] = []
        acc: CBall = None
        lost = False
        for j, v in enumerate(values):
            lost = lost or v is None
            acc = _INDET_C if lost else (v if j == 0 else _lex_pick(acc, v, greater))
            out.append(acc)
        return out

    def rule(ctx: Any, eqn: Any, x: np.ndarray) -> np.ndarray:
        return prefix_scan(eqn, x, extremes)

    return rule
