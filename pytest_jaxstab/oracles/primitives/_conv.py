"""``conv_general_dilated``, exactly: every output element is a dot product of a window with a kernel.

XLA's definition, in the canonical layout (batch, feature, spatial...) that ``dimension_numbers`` maps
to and from: the input is dilated (``lhs_dilation - 1`` zeros between neighbours: a transposed
convolution) and padded with zeros (negative padding crops); the output at a spatial position is the sum
over input features and kernel taps ``k`` (``rhs_dilation`` apart, windows ``window_strides`` apart) of
input times kernel. ``feature_group_count`` splits input and output features into groups that only see
each other (depthwise convolutions); ``batch_group_count`` does the same between the batch and the output
features (the kernel gradient of a grouped convolution). Each dot product is summed over balls with the
oracle's ``add``/``mul`` (so NaN and infinities follow their conventions); integer convolutions use the
program's integer arithmetic.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core._common import ZERO, Rule, ints_to_arb, is_float, out_aval
from ._reductions import _dot
from ._windows import _prepare

__all__ = ["RULES"]


def _conv(ctx: Any, eqn: Any, lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    p = eqn.params
    dn = p["dimension_numbers"]
    lhs_spec, rhs_spec, out_spec = (tuple(int(d) for d in s) for s in (dn.lhs_spec, dn.rhs_spec, dn.out_spec))
    balls = is_float(out_aval(eqn).dtype) or lhs.dtype == object or rhs.dtype == object
    if balls:
        lhs = lhs if lhs.dtype == object else ints_to_arb(lhs)
        rhs = rhs if rhs.dtype == object else ints_to_arb(rhs)
    lhs, rhs = np.transpose(lhs, lhs_spec), np.transpose(rhs, rhs_spec)
    nsp = lhs.ndim - 2
    lhs_dil = tuple(int(d) for d in (p.get("lhs_dilation") or (1,) * nsp))
    rhs_dil = tuple(int(d) for d in (p.get("rhs_dilation") or (1,) * nsp))
    strides = tuple(int(s) for s in p["window_strides"])
    padding = [(0, 0), (0, 0), *((int(lo), int(hi)) for lo, hi in p["padding"])]
    padded = _prepare(lhs, ZERO if balls else 0, {"base_dilation": (1, 1, *lhs_dil), "padding": padding})
    groups, batch_groups = int(p["feature_group_count"]), int(p["batch_group_count"])
    n_in, o_out, i_in = padded.shape[0], rhs.shape[0], rhs.shape[1]
    taps = rhs.shape[2:]
    spans = [(k - 1) * d + 1 for k, d in zip(taps, rhs_dil)]
    out_sp = tuple(max((n - sp) // s + 1, 0) for n, sp, s in zip(padded.shape[2:], spans, strides))
    n_out = n_in // batch_groups
    dtype = object if balls else np.dtype(out_aval(eqn).dtype)
    out = np.empty((n_out, o_out, *out_sp), dtype=dtype)
    kernels = [rhs[o].reshape(-1) for o in range(o_out)]
    for pos in np.ndindex(*out_sp):
        window = padded[(slice(None), slice(None),
                         *(slice(q * s, q * s + sp, d) for q, s, sp, d in zip(pos, strides, spans, rhs_dil)))]
        for o in range(o_out):
            g = o // (o_out // groups)  # this output feature's input-feature group
            b = o // (o_out // batch_groups)  # and its batch group
            features = window[b * n_out:(b + 1) * n_out, g * i_in:(g + 1) * i_in]
            for n in range(n_out):
                x = features[n].reshape(-1)
                if balls:
                    out[(n, o, *pos)] = _dot(list(x), list(kernels[o]))
                else:
                    with np.errstate(all="ignore"):  # the program's own integer wrap-around
                        out[(n, o, *pos)] = np.sum(x.astype(dtype) * kernels[o].astype(dtype), dtype=dtype)
    return np.transpose(out, np.argsort(out_spec))


RULES: dict[str, Rule] = {"conv_general_dilated": _conv}
