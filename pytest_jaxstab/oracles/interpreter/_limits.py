"""Where the program's own choices stand in for mathematics: limits, ties and kinks.

Two places where "evaluate the program exactly" is not "the exact function":

* **Removable singularities.** ``p * log(p / q)`` at ``p = 0`` is ``0 * (-inf)``: no real value, yet the
  function (a KL divergence's term) has the limit 0 there, and the code's job is to return it. Where the
  exact value at ``x`` does not exist but the values at the exact neighbours ``x + d`` and ``x - d`` do
  and agree (or only one side is inside the domain), the reference is that limit.
* **Derivatives at ties.** JAX differentiates ``max(x, 0)`` at ``x = 0`` by a tie rule and ``abs`` by
  ``sign(0) = 0``, so ``max(x, 0) + log1p(exp(-|x|))`` (softplus, smooth, derivative 1/2 at 0) has the
  derivative program's value 0 there. The derivative of the function is the limit of the derivative
  program at the neighbours, which is where no tie happens: when both sides agree and differ from the
  value at ``x``, the reference is the two-sided limit; when the two sides differ, the function has a
  kink and no derivative at ``x``: the element is not judged, and counted as a kink.

The neighbours: every float input moves by ``d = 2**-(p + GUARD_BITS) * max(|x|, tiny)`` (``p`` the
dtype's significand, ``tiny`` its smallest normal), all in the same direction, and the program is
evaluated exactly there (inputs are exact dyadic balls; the usual escalation proves each result). Being
``GUARD_BITS`` below the input's last bit, the shift moves a smooth result by about ``cond * 2**-64``
ulps, so the neighbours' correctly rounded values are the limit's unless the function is that badly
conditioned at ``x``. This is the one place a reference is a limit taken at a point rather than a value
enclosed: results say so (``kind``), and callers count those elements.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
from flint import arb

from ... import _compat
from ..._dtypes import dtype_info, resolve_dtype
from ..core._common import is_float
from ._evaluate import (
    DEFAULT_MAX_PRECISION,
    START_MARGIN_BITS,
    OracleResult,
    _Outputs,
    _result,
    _significand_bits,
    _target,
    escalate,
    schedule,
)
from ._interpreter import check_supported, to_value

__all__ = ["FAR_STEP", "GUARD_BITS", "Resolved", "confirm", "evaluate_near", "resolve", "vanishing",
           "vanishing_candidates"]

#: How far below an input's last bit its neighbours lie.
GUARD_BITS = 64
#: The longer step (in neighbour steps) at which a limit of 0 is confirmed (``vanishing``).
FAR_STEP = 4


def _shift(v: Any, side: int, p: int, emin: int) -> Any:
    """The exact ball ``v + side * 2**-(p + GUARD_BITS) * max(|v|, 2**emin)`` (None and infinities kept;
    ``side`` may be any non-zero integer: a longer step in the same direction)."""
    if v is None or not v.is_finite() or not v.is_exact():
        return v
    man, exp = v.mid().man_exp()
    man, exp = int(man), int(exp)
    top = exp + abs(man).bit_length() - 1 if man else emin
    top = max(top, emin)
    e_d = top - p - GUARD_BITS
    if not man:
        return arb((side, e_d))
    base = min(exp, e_d)
    return arb(((man << (exp - base)) + (side << (e_d - base)), base))


def evaluate_near(closed: Any, args: list[Any], side: int, dtype: Any = None,
                  max_precision: int = DEFAULT_MAX_PRECISION, staggered: bool = False) -> OracleResult:
    """The exact results of ``closed`` at its inputs' neighbours on one ``side`` (+1 or -1).

    Args:
      closed: a closed jaxpr; ``args`` its flat inputs (float inputs are shifted, integers are not).
      side: +1 for ``x + d``, -1 for ``x - d`` (module docstring).
      staggered: move the k-th float input element (counted over all inputs) by ``(1 + k % 3) d``
        instead of ``d``: another direction of approach, so that ``x / y`` at ``(0, 0)`` (1 along the
        diagonal, 1/2 along ``(d, 2d)``) is seen to have no limit.
      dtype: what to round float results to (None: each output's own dtype).

    Returns:
      An :class:`OracleResult` over the flat outputs, as ``evaluate`` on a jaxpr.
    """
    check_supported(closed)
    in_avals = [_compat.aval(v) for v in _compat.invars(closed)]
    out_avals = [_compat.aval(v) for v in _compat.outvars(closed)]
    target = None if dtype is None else resolve_dtype(dtype, complex_ok=True)
    targets = [_target(target, a.dtype) for a in out_avals]
    widths = [_significand_bits(a.dtype) for a in in_avals if is_float(a.dtype)]
    widths += [_significand_bits(t) for t in targets if t is not None]
    start = max(widths, default=24) + START_MARGIN_BITS + GUARD_BITS  # the shift needs these bits
    inputs = []
    k = 0
    for a, av in zip(args, in_avals):
        v = to_value(a, av)
        if is_float(av.dtype) and v.dtype == object:
            info = dtype_info(av.dtype)
            moved = np.empty(v.shape, dtype=object)
            for idx in np.ndindex(*v.shape):
                step = side * (1 + k % 3) if staggered else side
                moved[idx] = _shift(v[idx], step, info.significand_bits, info.min_exponent)
                k += 1
            v = moved
        inputs.append(v)
    state = _Outputs(out_avals, targets)
    last = escalate(closed, inputs, state, schedule(start, max(int(max_precision), start)))
    return _result(state, last, None)


@dataclasses.dataclass(frozen=True)
class Resolved:
    """One output's reference after looking at the neighbours.

    Attributes:
      values: the reference per element (the exact value, the limit where one was taken, NaN where
        none exists or the element is a kink).
      certain: whether each element's reference is settled (uncertain elements are not judged).
      limits: elements judged against a limit (undefined at ``x``, or a derivative at a tie).
      kinks: elements where the two sides differ: no derivative (or no limit) there.
    """

    values: np.ndarray
    certain: np.ndarray
    limits: np.ndarray
    kinks: np.ndarray


def _same(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a == b) | (np.isnan(a) & np.isnan(b))


def resolve(value: np.ndarray, certain: np.ndarray, plus: np.ndarray, plus_certain: np.ndarray,
            minus: np.ndarray, minus_certain: np.ndarray, *, derivative: bool) -> Resolved:
    """The reference per element from the value at ``x`` and at its two neighbours (all rounded).

    Without ``derivative``, only elements with no value at ``x`` (proven NaN) change: to the two-sided
    limit where both sides agree, or to the one side's value where the other side has none. With
    ``derivative`` (the outputs are a derivative program's), also: where both sides agree with each
    other but not with the value at ``x`` (a tie rule), the limit; where both sides exist and differ
    and ``x`` has a value, a kink: NaN, not judged.
    """
    v = np.asarray(value)
    c = np.broadcast_to(np.asarray(certain, bool), v.shape)
    p, m = np.broadcast_to(np.asarray(plus), v.shape), np.broadcast_to(np.asarray(minus), v.shape)
    pc = np.broadcast_to(np.asarray(plus_certain, bool), v.shape)
    mc = np.broadcast_to(np.asarray(minus_certain, bool), v.shape)
    both = pc & mc
    agree = both & _same(p, m) & ~np.isnan(p)
    undefined = c & np.isnan(v)
    one_side_p = pc & mc & ~np.isnan(p) & np.isnan(m)
    one_side_m = pc & mc & np.isnan(p) & ~np.isnan(m)
    limit_here = undefined & (agree | one_side_p | one_side_m)
    out = np.array(v, copy=True)
    out[limit_here & (agree | one_side_p)] = p[limit_here & (agree | one_side_p)]
    out[limit_here & one_side_m] = m[limit_here & one_side_m]
    limits = np.array(limit_here, copy=True)
    kinks = np.zeros(v.shape, bool)
    if derivative:
        tie = c & ~np.isnan(v) & agree & ~_same(v, p)
        out[tie] = p[tie]
        kinks = c & ~np.isnan(v) & both & ~np.isnan(p) & ~np.isnan(m) & ~_same(p, m)
        out[kinks] = np.nan
        limits = limits | tie
    return Resolved(out, np.array(c, copy=True), limits, kinks)


def confirm(first: Resolved, second: Resolved, value: np.ndarray, *, derivative: bool) -> Resolved:
    """``first``'s limits kept only where a second direction of approach (``second``) gives the same;
    elsewhere the limit depends on the direction: no value (and, for a derivative, a kink)."""
    v = np.asarray(value)
    agreed = first.limits & second.limits & _same(first.values, second.values)
    lost = first.limits & ~agreed
    out = np.array(first.values, copy=True)
    out[lost] = np.nan
    kinks = first.kinks | (lost & ~np.isnan(v) if derivative else np.zeros(v.shape, bool))
    return Resolved(out, first.certain, agreed, kinks)


def vanishing_candidates(value: np.ndarray, certain: np.ndarray, plus: np.ndarray, plus_certain: np.ndarray,
                         minus: np.ndarray, minus_certain: np.ndarray) -> np.ndarray:
    """Elements with no value at ``x`` whose two neighbours have values that differ, of opposite signs or
    one of them 0: where the limit may be 0, approached from both sides (the derivative of a smooth
    kernel at zero distance, ``-c (x - y) / |x - y|`` times a factor that vanishes with ``x - y``)."""
    v = np.asarray(value)
    p, m = np.broadcast_to(np.asarray(plus), v.shape), np.broadcast_to(np.asarray(minus), v.shape)
    if any(np.iscomplexobj(a) or not np.issubdtype(a.dtype, np.floating) for a in (v, p, m)):
        return np.zeros(v.shape, bool)  # a complex limit has no sign to cross: not looked for
    c = np.broadcast_to(np.asarray(certain, bool), v.shape)
    both = (np.broadcast_to(np.asarray(plus_certain, bool), v.shape)
            & np.broadcast_to(np.asarray(minus_certain, bool), v.shape))
    with np.errstate(invalid="ignore"):
        crossing = np.sign(p) * np.sign(m) <= 0
    return c & np.isnan(v) & both & np.isfinite(p) & np.isfinite(m) & ~_same(p, m) & crossing


def vanishing(candidates: np.ndarray, plus: np.ndarray, minus: np.ndarray, far_plus: np.ndarray,
              far_minus: np.ndarray, far_certain: np.ndarray) -> np.ndarray:
    """Of ``candidates``, those whose neighbours' values shrink with the step on both sides: at
    :data:`FAR_STEP` times the step each side's magnitude grows by ``FAR_STEP**a`` with ``1/4 <= a <= 2``
    (a value ``~ d**a``, which goes to 0 with ``d``). A jump or a kink keeps its values as the step
    changes (``a = 0``) and is not taken; nor is a side that is exactly 0 at both steps unless the
    other side shrinks."""
    lo, hi = float(FAR_STEP) ** 0.25, float(FAR_STEP) ** 2
    out = np.array(candidates, copy=True)
    for near, far in ((plus, far_plus), (minus, far_minus)):
        n = np.abs(np.broadcast_to(np.asarray(near, np.float64), out.shape))
        f = np.abs(np.broadcast_to(np.asarray(far, np.float64), out.shape))
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = f / n
        shrinks = (n == 0) & (f == 0) | ((ratio >= lo) & (ratio <= hi))
        out &= shrinks
    zero_both = (np.broadcast_to(np.asarray(plus), out.shape) == 0) & (np.broadcast_to(np.asarray(minus),
                                                                                      out.shape) == 0)
    return out & ~zero_both & np.broadcast_to(np.asarray(far_certain, bool), out.shape)
