"""The problem's conditioning at one input, computed exactly with the oracle (the ``stability`` lens).

Componentwise relative condition in output ulps (docs/architecture.md, "Two lenses: stability and
accuracy"): for each output element ``y_j = f_j(x)``,

    cond_j = sum_i |f_j(x with x_i -> x_i (1 + d_i)) - f_j(x)| * (u / d_i) / ulp(y_j)

where ``u = 2^-p`` is the unit roundoff of the inputs' dtype and ``d_i`` the relative step actually
taken: ``x_i`` moved one float of its dtype away from zero (``u <= d_i <= 2u``; the oracle takes inputs
in their own dtype). The exact results at the moved inputs come from the oracle, rounded to float64 (for
float64 programs that rounding limits the figure to about one ulp per input element), so ``cond_j`` is
``sum_i |x_i df_j/dx_i| u / ulp(y_j)`` to first order: how many output ulps the exact result moves when
every input element moves by one unit roundoff, each in its worst direction. Zero inputs do not move
(a relative perturbation). One oracle evaluation per input element: it is computed only for inputs
whose forward error exceeds the tolerance.

First order misses a problem that is flat to every small move but not to a finite one: a softmax whose
logits differ by less than their own rounding (``softmax(q @ k.T)`` on clustered rows) is exactly
one-hot, every derivative is ``exp(-gap)`` = 0, yet moving all inputs at once by the ``n`` ulps a
reduction of ``n`` terms may already have put in them (Higham's ``gamma_n`` backward error) flips which
logit wins. So up to :data:`JOINT` more evaluations (only for an input with an error first order leaves
unexplained, :func:`joint_conditioning`) move every element at once by ``n`` floats, each up or
down (signs from a generator seeded by the input's own bytes: the same figure on every run). Where
such a move changes an element by more than 4 times what linearity allows (``2n`` times the
first-order figure: a step of ``u`` to ``2u``), the element's figure is that change divided by ``n``;
elsewhere the first-order figure stands, unchanged.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator, Sequence
from typing import Any

import jax
import numpy as np

from .. import _compat
from .._dtypes import component_dtype, dtype_info
from ..oracles import evaluate

__all__ = ["JOINT", "conditioning_ulps", "joint_conditioning", "reduction_terms", "ulp"]

#: Most simultaneous moves of every input element (module docstring; they stop once every element
#: first order leaves unexplained has moved): with 24 sign patterns, one of 4 logits tied below their
#: rounding never wins with probability (3/4)^24 < 0.1%.
JOINT = 24
#: A joint move's change counts only beyond this multiple of what linearity allows (2 bits).
NONLINEAR = 4.0
#: The most floats one joint move takes per element (a reduction of more terms still moves by this).
MAX_JOINT_STEP = 16

_REDUCTIONS = {"reduce_sum", "reduce_prod", "cumsum", "cumprod", "cumlogsumexp", "dot_general"}


def reduction_terms(closed: Any) -> int:
    """The most terms one reduction of the program combines (1 when it has none): the ``n`` of the
    ``n·u`` allowance of a sum's error bound. ``dot_general`` counts its contracted elements."""
    most = 1
    for _, eqn in _compat.walk(closed):
        name = _compat.primitive_name(eqn)
        if name not in _REDUCTIONS:
            continue
        shape = tuple(getattr(_compat.aval(eqn.invars[0]), "shape", ()) or ())
        if name in ("reduce_sum", "reduce_prod"):
            axes = eqn.params.get("axes", ())
            n = int(np.prod([shape[a] for a in axes])) if axes else 1
        elif name == "dot_general":
            (contract, _), _ = eqn.params["dimension_numbers"]
            n = int(np.prod([shape[a] for a in contract])) if contract else 1
        else:
            axis = eqn.params.get("axis", 0)
            n = shape[axis] if shape else 1
        most = max(most, n)
    return most


def ulp(exact: np.ndarray, dtype: np.dtype[Any]) -> np.ndarray:
    """The spacing of ``dtype`` at each exact value, never below the spacing of normal numbers (XLA
    flushes subnormals: one 'ulp' there is the normal spacing at the smallest normal), as float64."""
    info = dtype_info(component_dtype(dtype))
    tiny = float(info.tiny)
    floor = tiny * float(info.eps)
    ex = np.asarray(exact)
    mag = np.abs(ex)
    if np.iscomplexobj(ex):  # a complex result's ulp is its larger part's ("The error metric")
        mag = np.maximum(np.abs(np.real(ex)), np.abs(np.imag(ex)))
    mag = mag.astype(np.float64)
    with np.errstate(all="ignore"):
        e = np.floor(np.log2(np.maximum(mag, tiny)))
        spacing = np.exp2(e) * float(info.eps)
    return np.where(np.isfinite(spacing), np.maximum(spacing, floor), np.inf)


def conditioning_ulps(closed: Any, args: Sequence[np.ndarray], exact: Sequence[np.ndarray],
                      judged_outputs: Sequence[int], out_dtypes: Sequence[np.dtype[Any]],
                      ) -> list[np.ndarray]:
    """Per judged output leaf, the conditioning of each element in output ulps (module docstring):
    ``inf`` where a moved input makes the exact result non-finite, NaN where it is not known."""
    floats = [i for i, a in enumerate(args) if np.issubdtype(np.asarray(a).dtype, np.floating)]
    u = min(float(dtype_info(np.asarray(args[i]).dtype).eps) / 2 for i in floats) if floats else 0.0
    base_args = [np.asarray(a) for a in args]
    base = _exact64(closed, base_args, judged_outputs)
    total = [np.zeros(np.shape(b), dtype=np.float64) for b in base]
    for i in floats:
        flat = base_args[i].reshape(-1)
        for k in np.flatnonzero(np.isfinite(flat) & (flat != 0)):
            moved = flat.copy()
            with np.errstate(over="ignore"):  # the largest finite float steps to inf: skipped below
                moved[k] = np.nextafter(flat[k], np.copysign(np.inf, flat[k]).astype(flat.dtype))
            if not np.isfinite(moved[k]):
                continue
            step = (float(moved[k]) - float(flat[k])) / float(flat[k])  # exact in float64
            trial = list(base_args)
            trial[i] = moved.reshape(base_args[i].shape)
            for t, (b, m) in enumerate(zip(base, _exact64(closed, trial, judged_outputs))):
                with np.errstate(all="ignore"):
                    total[t] = total[t] + np.abs(m - b) * (u / step)
    out = []
    for t, i in enumerate(judged_outputs):
        with np.errstate(all="ignore"):
            out.append(np.asarray(total[t] / ulp(exact[t], out_dtypes[i]), dtype=np.float64))
    return out


def joint_conditioning(closed: Any, args: Sequence[np.ndarray], exact: Sequence[np.ndarray],
                       judged_outputs: Sequence[int], out_dtypes: Sequence[np.dtype[Any]],
                       cond_ulps: Sequence[np.ndarray], unexplained: Sequence[np.ndarray],
                       ) -> list[np.ndarray]:
    """``cond_ulps`` (first order, :func:`conditioning_ulps`) raised where a joint move of every input
    element by ``n`` floats changes the exact result nonlinearly (module docstring). Runs only while
    some ``unexplained`` element (an error first order does not explain) has not moved so; at most
    :data:`JOINT` oracle evaluations."""
    pending = [np.asarray(m, dtype=bool).copy() for m in unexplained]
    if not any(m.any() for m in pending):
        return list(cond_ulps)
    floats = [i for i, a in enumerate(args) if np.issubdtype(np.asarray(a).dtype, np.floating)]
    steps = min(reduction_terms(closed), MAX_JOINT_STEP)
    base_args = [np.asarray(a) for a in args]
    base = _exact64(closed, base_args, judged_outputs)
    units = [ulp(exact[t], out_dtypes[i]) for t, i in enumerate(judged_outputs)]
    cond = [np.array(c, dtype=np.float64) for c in cond_ulps]
    for trial in _joint_moves(base_args, floats, steps):
        for t, (b, m) in enumerate(zip(base, _exact64(closed, trial, judged_outputs))):
            with np.errstate(all="ignore"):
                change = np.abs(m - b) / units[t]
                flat = change > NONLINEAR * 2 * steps * np.nan_to_num(cond[t])
                cond[t] = np.where(flat, np.fmax(cond[t], change / steps), cond[t])
            pending[t] &= ~flat
        if not any(m.any() for m in pending):
            break
    return cond


def _joint_moves(args: Sequence[np.ndarray], floats: Sequence[int], steps: int) -> Iterator[list[np.ndarray]]:
    """Up to ``JOINT`` copies of ``args`` with every finite nonzero float element moved ``steps`` floats
    up or down (signs from a generator seeded by the arguments' bytes); none when nothing can move."""
    movable = [i for i in floats if np.any(np.isfinite(args[i]) & (np.asarray(args[i]) != 0))]
    if not movable:
        return
    rng = np.random.default_rng(zlib.crc32(b"".join(np.ascontiguousarray(args[i]).tobytes()
                                                    for i in movable)))
    for _ in range(JOINT):
        trial = list(args)
        for i in movable:
            a = np.asarray(args[i])
            target = np.where(rng.random(a.shape) < 0.5, np.inf, -np.inf).astype(a.dtype)
            moved = a.copy()
            with np.errstate(over="ignore"):
                for _ in range(steps):
                    moved = np.nextafter(moved, target)
            keep = np.isfinite(a) & (a != 0) & np.isfinite(moved)
            trial[i] = np.where(keep, moved, a).astype(a.dtype)
        yield trial


def _exact64(closed: Any, args: Sequence[np.ndarray], judged_outputs: Sequence[int]) -> list[np.ndarray]:
    result = evaluate(closed, *args, dtype="float64")
    values = jax.tree_util.tree_leaves(result.values)
    certain = jax.tree_util.tree_leaves(result.certain)
    out = []
    for i in judged_outputs:
        raw = np.asarray(values[i])
        v = raw.astype(np.complex128 if np.iscomplexobj(raw) else np.float64)
        out.append(np.where(np.broadcast_to(np.asarray(certain[i], dtype=bool), v.shape), v, np.nan))
    return out
