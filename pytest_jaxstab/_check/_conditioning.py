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
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import numpy as np

from .. import _compat
from .._dtypes import component_dtype, dtype_info
from ..oracles import evaluate

__all__ = ["conditioning_ulps", "reduction_terms", "ulp"]

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
