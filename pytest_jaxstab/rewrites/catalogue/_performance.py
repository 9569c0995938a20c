"""Opt-in performance rules: they restructure the program for speed and may reorder float sums."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ..engine._rule import Rule
from ._scan_fusion import fuse, match_reduce_into_scan


def _example(c: jax.Array, xs: jax.Array) -> jax.Array:
    _, ys = jax.lax.scan(lambda c, x: (0.5 * c + x, c * x), c, xs)
    return jnp.sum(ys)


#: ``sum(f(scan(...).ys))`` over the scan axis -> the sum accumulated in the scan's carry, step by
#: step: no ``length x ...`` stack in memory, one pass (see ``_scan_fusion`` for what is fused).
REDUCE_INTO_SCAN = Rule(
    "reduce_into_scan", None, fuse, matcher=match_reduce_into_scan, roots=frozenset({"reduce_sum"}),
    doc="sum over the scan axis of elementwise f(ys) = sum over steps of (sum of f(y) per step), "
        "accumulated in a new carry of the scan (reorders the float sum)",
    example=_example, example_shapes=((4,), (8, 4)))

#: Opt-in rules that restructure the program for speed; they may reorder floating-point sums.
PERFORMANCE: tuple[Rule, ...] = (REDUCE_INTO_SCAN,)
