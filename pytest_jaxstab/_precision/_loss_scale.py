"""The static loss scale a low-precision gradient needs: the range of powers of two that keep it in range.

A loss scale ``S`` multiplies the loss's cotangent, so every value of the backward pass is ``S`` times
what it would be (the forward pass is unchanged), and ``grad_fn`` divides the gradient by ``S`` in
float32. float16's range is narrow (smallest normal 2^-14 = 6.1e-5, largest 65504): small gradients
fall below the normals (a subnormal entry keeps fewer bits; flushed, none) and a large scale overflows
the backward pass. PyTorch AMP's ``GradScaler`` and ``jmp``'s dynamic scaler find ``S`` at run time by
overflowing and backing off; here it is measured once on the drawn batches (:func:`scale_range`):

- **Upper bound** (overflow): the program's backward pass is run with every operation in float32 at
  ``S = 1`` and each backward value's largest magnitude recorded (the loss's own cotangent, 1, among
  them); ``S`` must keep the largest, ``M``, at most half the dtype's largest float:
  ``S <= 2^floor(log2(max / (2 M)))``. The factor 2 leaves room for the low program's own rounding.
  Loop bodies are not looked into: a loop's carries and stacked results are (the values it returns).
- **Lower bound** (underflow): every exact gradient entry the norm-wise target can see must be a normal
  number after scaling: ``S >= 2^ceil(log2(tiny / g))``, ``g`` the smallest such entry over the batches
  drawn as data (by value, or moved to the fit; not the check's bit-pattern draws, whose gradients
  can be 1e-30 throughout: no loss scale is for those).
  An entry is *seen* when it is at least ``tolerance / 4 * ||g*|| / sqrt(n)`` (``n`` entries): flushing
  every smaller entry to zero moves the gradient by at most a quarter of the tolerance, norm-wise. (A
  literal "every entry" would let one weight whose gradient is 1e-30 of the rest demand a scale that
  overflows everything else.)

Operations the plan keeps in float32 cannot overflow the low dtype: once the plan is found, the upper
bound is measured again without them (``kept``), and the scale chosen again when the plan holds at it.

The choice: ``1`` where it lies inside the range with :data:`HEADROOM` on both sides (bfloat16, with
float32's exponent range, always does in practice); otherwise the power of two nearest 1 that keeps the
headroom; where the range is narrower than that, its geometric middle; where it is empty (the largest
backward value and the smallest seen entry are more than float16's range apart), the upper bound:
an overflow makes the whole step non-finite, an underflow loses the smallest entries only. The search
then judges the gradient at that scale, as ``grad_fn`` computes it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .. import _compat as C
from .._check._upcast import BACKWARD, run_upcast
from ._grad_program import GradSamples

__all__ = ["HEADROOM", "ScaleRange", "backward_magnitudes", "scale_range", "smallest_seen"]

#: Factor kept between the chosen scale and each bound where the range allows: a batch whose gradients
#: are 16 times larger (or smaller) than any drawn one still fits.
HEADROOM = 2.0**4


@dataclasses.dataclass(frozen=True)
class ScaleRange:
    """The powers of two that keep the scaled backward pass in range, and the one chosen.

    Attributes:
        low, high: the bounds (``low > high`` when no scale keeps both); ``chosen``: the scale used.
        upper_line: ``file:line`` of the backward operation with the largest magnitude (it sets
            ``high``), ``upper_primitive`` its operation, ``upper_magnitude`` its largest value at scale 1
            (``None``/``""`` when the loss's own cotangent, 1, is the largest).
        lower_input: the differentiated input (index) holding the smallest seen gradient entry (it sets
            ``low``), ``lower_magnitude`` that entry.
        note: why the chosen scale is not inside the range with headroom ("" when it is).
    """

    low: float
    high: float
    chosen: float
    upper_line: str | None
    upper_primitive: str
    upper_magnitude: float
    lower_input: int | None
    lower_magnitude: float
    note: str = ""


def _pow2_floor(x: float) -> float:
    return 2.0 ** math.floor(math.log2(x))


def _pow2_ceil(x: float) -> float:
    return 2.0 ** math.ceil(math.log2(x))


def backward_magnitudes(grad_closed: Any, smp: GradSamples) -> list[tuple[str | None, str, float]]:
    """``(line, primitive, largest magnitude)`` of each backward operation of ``grad_closed`` (outside
    loop bodies) over the samples, computed in float32 at scale 1."""
    meta: list[tuple[str | None, str]] = []
    nf, nd = len(smp.fixed), len(smp.drawn)

    def one(*args: Any) -> list[Any]:
        meta.clear()  # a re-trace starts afresh
        seen: list[Any] = []

        def observe(eqn: Any, src: Any, backward: bool, outs: list[Any]) -> None:
            if not backward:
                return
            for o in outs:
                if jnp.issubdtype(jnp.result_type(o), jnp.floating) and jnp.size(o):
                    a = jnp.abs(jnp.asarray(o).astype(np.float32))
                    seen.append(jnp.max(jnp.where(jnp.isfinite(a), a, 0.0)))
                    meta.append((None if src is None else str(src), C.primitive_name(eqn)))

        run_upcast(grad_closed, None, np.dtype(np.float32), args, declared=False, observe=observe)
        return seen

    run = jax.jit(jax.vmap(one, in_axes=(None,) * nf + (0,) * nd + (None,)))
    maxes = [float(np.max(np.asarray(m))) for m in run(*smp.fixed, *smp.drawn, np.float32(1.0))]
    return [(line, prim, m) for (line, prim), m in zip(meta, maxes)]


def smallest_seen(smp: GradSamples, tolerance: float) -> tuple[int | None, float]:
    """The differentiated input holding the smallest exact entry the norm-wise target sees, and it, over
    the batches drawn as data (by value, or moved to the fit): the check's bit-pattern batches (every
    pixel 1e-30) have gradients no loss scale is for."""
    best: tuple[int | None, float] = (None, math.inf)
    data = [s for s in range(smp.count) if not smp.kinds or smp.kinds[s] != "check"] or list(range(smp.count))
    for s in data:
        entries = [np.abs(np.asarray(e, np.float64)[m]) for e, m in zip(smp.exact[s], smp.judged[s])]
        n = sum(a.size for a in entries)
        norm = math.sqrt(sum(float(np.sum(a * a)) for a in entries))
        if n == 0 or norm == 0.0:
            continue
        floor = tolerance / 4.0 * norm / math.sqrt(n)
        for k, a in enumerate(entries):
            seen = a[a >= floor]
            if seen.size and float(seen.min()) < best[1]:
                best = (k, float(seen.min()))
    return best


def scale_range(mags: Sequence[tuple[str | None, str, float]], smp: GradSamples, dtype: np.dtype[Any],
                tolerance: float, fixed: float | None = None, kept: frozenset[str] = frozenset()
                ) -> ScaleRange:
    """The loss scale range on the samples and the scale chosen (module docstring). ``mags``:
    :func:`backward_magnitudes`; those of operations the plan ``kept`` computes in ``high`` (their
    line, or its backward key) cannot overflow the low dtype and are left out. ``fixed``: the user's
    scale, used as given (the range is still measured and reported)."""
    info = jnp.finfo(dtype)
    line, prim, top = None, "", 1.0  # the loss's own cotangent is S
    for ln, p, m in mags:
        if ln is not None and (ln in kept or ln + BACKWARD in kept):
            continue
        if math.isfinite(m) and m > top:
            line, prim, top = ln, p, m
    high = _pow2_floor(float(info.max) / (2.0 * top))
    k, g = smallest_seen(smp, tolerance)
    low = _pow2_ceil(float(info.smallest_normal) / g) if k is not None and g > 0 else 0.0
    note = ""
    if fixed is not None:
        chosen = float(fixed)
    elif low * HEADROOM <= 1.0 <= high / HEADROOM:
        chosen = 1.0
    elif low * HEADROOM <= high / HEADROOM:
        chosen = min(max(1.0, low * HEADROOM), high / HEADROOM)
    elif low <= high:
        chosen = _pow2_floor(math.sqrt(low * high))
        note = (f"the loss scale's range is narrower than {HEADROOM:g}x headroom on both sides: its middle "
                "is used")
    else:
        chosen = high
        note = ("no loss scale keeps both bounds: the upper one is used (an overflow would make the step "
                "non-finite; the smallest gradient entries underflow)")
    return ScaleRange(low, high, chosen, line, prim, top if line is not None else 1.0, k,
                      g if k is not None else 0.0, note)
