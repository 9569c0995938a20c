"""Windowed reductions (``reduce_window_sum``/``max``/``min``: average and max pooling) and the max-pool
derivatives (``select_and_scatter_add``, ``select_and_gather_add``), exactly.

XLA's definition: the operand is dilated (``base_dilation - 1`` init values between neighbours), padded
with the init value (``0`` for a sum, ``-inf`` for a max, ``+inf`` for a min; negative padding crops),
and each output element reduces the window at ``index * stride`` whose taps are ``window_dilation``
apart. Float windows are reduced with the ball operations (a sum is exact whatever its order; a max of
balls that may tie covers both candidates, as ``max`` does); integer windows with numpy's own integer
arithmetic.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from ..core._arb import FUNCTIONS, ufunc
from ..core._common import NEG_INF, POS_INF, ZERO, Rule, full, ints_to_arb

__all__ = ["RULES"]


def _prepare(x: np.ndarray, init: Any, p: dict[str, Any]) -> np.ndarray:
    """The dilated and padded operand."""
    base = tuple(int(d) for d in p["base_dilation"])
    shape = tuple((n - 1) * d + 1 if n else 0 for n, d in zip(x.shape, base))
    dilated = full(shape, init) if x.dtype == object else np.full(shape, init, dtype=x.dtype)
    dilated[tuple(slice(None, None, d) for d in base)] = x
    pads = [(int(lo), int(hi)) for lo, hi in p["padding"]]
    grown = tuple(n + max(lo, 0) + max(hi, 0) for n, (lo, hi) in zip(shape, pads))
    padded = full(grown, init) if x.dtype == object else np.full(grown, init, dtype=x.dtype)
    padded[tuple(slice(max(lo, 0), max(lo, 0) + n) for n, (lo, _) in zip(shape, pads))] = dilated
    crop = tuple(slice(max(-lo, 0), g - max(-hi, 0)) for g, (lo, hi) in zip(grown, pads))
    return padded[crop]


def _window_rule(kind: str) -> Rule:
    ball_init = {"sum": ZERO, "max": NEG_INF, "min": POS_INF}[kind]
    ball_op = ufunc({"sum": "add", "max": "max", "min": "min"}[kind])
    int_op: Callable[..., Any] = {"sum": np.sum, "max": np.max, "min": np.min}[kind]

    def rule(ctx: Any, eqn: Any, x: np.ndarray) -> np.ndarray:
        p = eqn.params
        if x.dtype == object:
            init: Any = ball_init
        elif kind == "sum":
            init = 0
        else:
            info = np.iinfo(x.dtype) if x.dtype.kind in "iu" else None
            init = (info.min if kind == "max" else info.max) if info else (kind == "min")
        padded = _prepare(x, init, p)
        window = [int(w) for w in p["window_dimensions"]]
        strides = [int(s) for s in p["window_strides"]]
        wdil = [int(d) for d in p["window_dilation"]]
        spans = [(w - 1) * d + 1 for w, d in zip(window, wdil)]
        out_shape = tuple(max((n - sp) // s + 1, 0) for n, sp, s in zip(padded.shape, spans, strides))
        out = np.empty(out_shape, dtype=object if x.dtype == object else x.dtype)
        for idx in np.ndindex(*out_shape):
            at = zip(idx, strides, spans, wdil)
            taps = padded[tuple(slice(i * s, i * s + sp, d) for i, s, sp, d in at)]
            if x.dtype == object:
                out[idx] = functools.reduce(ball_op, taps.ravel().tolist())
            else:
                with np.errstate(all="ignore"):  # the program's own wrap-around
                    out[idx] = int_op(taps)
        return out

    return rule


def _selections(operand: np.ndarray, p: dict[str, Any]) -> tuple[tuple[int, ...], list[Any]]:
    """For each window of the padded ``operand``: the position ``select_prim`` picks (XLA's scan of the
    window in row-major order, replacing the current pick unless ``select(current, next)`` holds, so a
    tie keeps the first). Comparisons are decided on balls (``Undecided`` where they straddle)."""
    select = FUNCTIONS[p["select_prim"].name]
    ident = NEG_INF if p["select_prim"].name in ("ge", "gt") else POS_INF
    padded = _prepare(operand, ident, {"base_dilation": p.get("base_dilation") or (1,) * operand.ndim,
                                       "padding": p["padding"]})
    window = [int(w) for w in p["window_dimensions"]]
    strides = [int(s) for s in p["window_strides"]]
    wdil = [int(d) for d in (p.get("window_dilation") or (1,) * operand.ndim)]
    spans = [(w - 1) * d + 1 for w, d in zip(window, wdil)]
    out_shape = tuple(max((n - sp) // s + 1, 0) for n, sp, s in zip(padded.shape, spans, strides))
    picks = []
    for idx in np.ndindex(*out_shape):
        best, best_at = None, None
        for off in np.ndindex(*window):
            at = tuple(i * s + o * d for i, s, o, d in zip(idx, strides, off, wdil))
            v = padded[at]
            if best_at is None or not select(best, v):
                best, best_at = v, at
        picks.append(best_at)
    return out_shape, picks


def _select_and_scatter_add(ctx: Any, eqn: Any, source: np.ndarray, operand: np.ndarray) -> np.ndarray:
    """The gradient of a max (min) pool: each window's cotangent added at the element it selected."""
    p = eqn.params
    pads = [(int(lo), int(hi)) for lo, hi in p["padding"]]
    if any(lo < 0 or hi < 0 for lo, hi in pads):
        raise ctx.unsupported(eqn, "negative padding")
    out_shape, picks = _selections(operand, p)
    grown = tuple(n + lo + hi for n, (lo, hi) in zip(operand.shape, pads))
    acc = full(grown, ZERO)
    add = ufunc("add")
    src = source if source.dtype == object else ints_to_arb(source)
    for idx, at in zip(np.ndindex(*out_shape), picks):
        acc[at] = add(acc[at], src[idx])
    return acc[tuple(slice(lo, lo + n) for n, (lo, _) in zip(operand.shape, pads))]


def _select_and_gather_add(ctx: Any, eqn: Any, tangents: np.ndarray, operand: np.ndarray) -> np.ndarray:
    """The derivative of a max (min) pool along ``tangents``: each window's selected element's tangent."""
    p = eqn.params
    out_shape, picks = _selections(operand, p)
    geometry = {"base_dilation": p.get("base_dilation") or (1,) * tangents.ndim, "padding": p["padding"]}
    padded = _prepare(tangents if tangents.dtype == object else ints_to_arb(tangents), ZERO, geometry)
    out = np.empty(out_shape, dtype=object)
    for idx, at in zip(np.ndindex(*out_shape), picks):
        out[idx] = padded[at]
    return out


RULES: dict[str, Rule] = {f"reduce_window_{k}": _window_rule(k) for k in ("sum", "max", "min")}
RULES["select_and_scatter_add"] = _select_and_scatter_add
RULES["select_and_gather_add"] = _select_and_gather_add
