"""Inputs made of the arrays a function closes over: the points where its formula meets its own data.

A kernel between a drawn input and training points it closes over (``k(x, X_train)``) is singular where
a row of the input equals a row of the training set: the distance is exactly 0 there, and the
derivative of ``sqrt(sum((x - X)**2))`` is ``inf * 0`` (tinygp's L2 distance, issue 47). Bit-uniform
draws never land exactly on those rows. As a fuzzer reads the constants of its target into its
dictionary, the check tries, before drawing, inputs built from the program's own array constants:
each closed-over float array whose trailing dimensions are an input's, its rows repeated to the input's
leading length. Only inputs inside the case's domain are kept; the other arguments take the warm-up
run's values. Deterministic (the program's constants), so a baseline's counts repeat.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import _compat
from ._explore import fits

__all__ = ["MAX_SEEDS", "constant_inputs"]

#: At most this many inputs from constants per case (each costs one exact evaluation).
MAX_SEEDS = 4


def constant_inputs(closed: Any, dtype: np.dtype[Any], shapes: Sequence[tuple[int, ...]],
                    domains: Sequence[Any], base: Sequence[np.ndarray] | None,
                    ) -> list[tuple[np.ndarray, ...]]:
    """Inputs whose one argument is built from an array ``closed`` closes over (same trailing shape),
    the others ``base``'s; inside the domain, at most :data:`MAX_SEEDS`, in the constants' order."""
    if base is None:
        return []
    _, consts = _compat.parts(closed)
    arrays = []
    for c in consts:
        try:
            a = np.asarray(c)
        except (TypeError, ValueError):  # a PRNG key, a token: no values to take
            continue
        if a.ndim >= 1 and a.size > 1 and np.issubdtype(a.dtype, np.floating) and np.all(np.isfinite(a)):
            arrays.append(a)
    out: list[tuple[np.ndarray, ...]] = []
    for a in arrays:
        for i, shape in enumerate(shapes):
            made = _shaped_like(a, shape, dtype)
            if made is None:
                continue
            args = tuple(made if j == i else np.asarray(b, dtype) for j, b in enumerate(base))
            if fits(args, dtype, shapes, domains) and not any(_same(args, o) for o in out):
                out.append(args)
            if len(out) >= MAX_SEEDS:
                return out
    return out


def _shaped_like(a: np.ndarray, shape: tuple[int, ...], dtype: np.dtype[Any]) -> np.ndarray | None:
    """``a``'s rows repeated (or cut) to ``shape`` when their trailing dimensions agree; None else."""
    if not shape or a.ndim != len(shape) or tuple(a.shape[1:]) != tuple(shape[1:]):
        return None
    rows = a[np.arange(shape[0]) % a.shape[0]]
    cast = rows.astype(dtype)
    return cast if np.array_equal(cast.astype(a.dtype), rows) else None  # exact values only


def _same(x: Sequence[np.ndarray], y: Sequence[np.ndarray]) -> bool:
    return all(np.array_equal(u, v) for u, v in zip(x, y))
