"""``jst.stabilize(fn, search=True)``: the catalogue's rewrite, or the searched program when it is better."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from .._errors import ArgumentError
from ._improve import improve

__all__ = ["searched"]


def searched(fn: Callable[..., Any], rewritten: Callable[..., Any],
             **improve_kwargs: Any) -> Callable[..., Any]:
    """``fn`` running ``jst.improve``'s best program per input signature, else ``rewritten``.

    On the first call per (shapes, dtype) of the positional float arguments, ``improve`` searches with
    those; when it finds nothing better (or the program is not an elementwise expression), the
    catalogue's ``rewritten`` function runs instead. The result is cached per signature. The searched
    program keeps the catalogue's derivative-only repairs (rules that keep the value bit for bit and
    give the derivative where autodiff of the value would not: ``0·inf`` in a backward pass, an
    untaken branch's NaN), so that choosing it never loses what ``stabilize`` did for gradients there.
    """
    cache: dict[Any, Callable[..., Any]] = {}

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        if kwargs:
            raise ArgumentError("stabilize(fn, search=True) takes positional array arguments only; bind "
                                "the others with functools.partial")
        dtypes = {np.dtype(jax.numpy.result_type(a)) for a in args}
        key = (tuple(np.shape(a) for a in args), tuple(sorted(d.str for d in dtypes)))
        chosen = cache.get(key)
        if chosen is None:
            chosen = rewritten
            if len(dtypes) == 1 and all(np.issubdtype(d, np.floating) for d in dtypes):
                (dtype,) = dtypes
                # The search runs on concrete samples even when this call is being traced (under jit).
                with jax.ensure_compile_time_eval():
                    result = improve(fn, shapes=[np.shape(a) for a in args], dtype=dtype, **improve_kwargs)
                if result.improved:
                    chosen = _with_derivative_repairs(result.fn)
            cache[key] = chosen
        return chosen(*args)

    run.jaxstab_search_cache = cache  # type: ignore[attr-defined]
    return run


def _with_derivative_repairs(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` rewritten by the catalogue's derivative-only rules: its values bit for bit, its derivative
    repaired where those rules match."""
    from ..rewrites._transform import stabilize
    from ..rewrites.catalogue import STABILITY

    return stabilize(fn, rules=[r for r in STABILITY if r.derivative_only])
