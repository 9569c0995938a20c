"""``call_hi_primitive``: JAX's "high-level" primitives (``HiPrim``, JAX 0.11+), evaluated through their
own expansion into ordinary primitives.

``jnp.searchsorted`` (and so ``jnp.interp``, ``jnp.digitize``), ``jnp.ldexp``, ``jnp.frexp`` and
``jnp.nonzero`` are each one ``call_hi_primitive`` equation whose ``_prim`` knows how to expand itself
(``HiPrim.expand``), the definition XLA compiles. The oracle traces that expansion at the equation's
operand shapes (``_compat.hi_primitive_expansion``, cached per equation) and interprets it like any
sub-jaxpr, so its comparisons, loops and arithmetic are decided on balls as everywhere else. A HiPrim
without an expansion is refused with that reason.

Those expansions compare in IEEE's *total order* (``lt_to``, ``le_to``, ``eq_to``: NaN above every
number and equal to itself), evaluated here: on balls, decided as ``sort`` decides its keys (only what
the balls prove, ``Undecided`` otherwise); zero is unsigned in the oracle, so ``-0.0`` and ``0.0`` are
equal where the total order puts ``-0.0`` first.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import _compat
from ..core._common import Rule
from ._reductions import _key_less

__all__ = ["RULES", "expansion"]

_CACHE: dict[int, tuple[Any, Any]] = {}


def expansion(eqn: Any) -> Any:
    """The closed jaxpr ``eqn`` stands for, or None (cached: the interpreter runs an equation at every
    precision)."""
    hit = _CACHE.get(id(eqn))
    if hit is not None and hit[0] is eqn:
        return hit[1]
    closed = _compat.hi_primitive_expansion(eqn)
    if len(_CACHE) > 4096:
        _CACHE.clear()
    _CACHE[id(eqn)] = (eqn, closed)  # holds `eqn` so that its id stays unique
    return closed


def _call_hi_primitive(ctx: Any, eqn: Any, *args: np.ndarray) -> list[np.ndarray]:
    closed = expansion(eqn)
    if closed is None:
        raise ctx.unsupported(eqn, f"{type(eqn.params.get('_prim')).__name__}: a high-level primitive "
                                   "without an expansion into ordinary primitives")
    return ctx.call(closed, list(args))


def _total_order(name: str) -> Rule:
    def on_balls(a: Any, b: Any) -> bool:
        less = _key_less(a, b)  # None: equal (two NaNs, or provably equal values)
        if name == "eq_to":
            return less is None
        if name == "lt_to":
            return bool(less)
        return less is None or bool(less)

    elementwise = np.frompyfunc(on_balls, 2, 1)
    plain = {"lt_to": np.less, "le_to": np.less_equal, "eq_to": np.equal}[name]

    def rule(ctx: Any, eqn: Any, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if a.dtype == object or b.dtype == object:
            return np.asarray(elementwise(a, b), dtype=bool)
        return np.asarray(plain(a, b))

    return rule


RULES: dict[str, Rule] = {"call_hi_primitive": _call_hi_primitive,
                          **{name: _total_order(name) for name in ("lt_to", "le_to", "eq_to")}}
