"""``jst.improve``: search for a more accurate program, judged by the exact oracle (Herbie for jaxprs).

This module validates the arguments; the pipeline (catalogue first, localize, saturate in phases,
extract, judge, regimes, re-check) is ``_pipeline.run``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

from .._check._trace import normalize_shapes, x64_scope
from .._dtypes import resolve_dtype
from .._errors import ArgumentError
from ._pipeline import run
from ._result import Improvement

__all__ = ["improve"]


def improve(fn: Callable[..., Any], *, shapes: Any, dtype: Any, domain: Any = None, max_examples: int = 128,
            seed: int | None = None, time_limit: float = 15.0, node_limit: int = 5000, iter_limit: int = 8,
            ) -> Improvement:
    """Search for a more accurate program computing ``fn`` (equality saturation judged by the oracle).

    ``fn`` must compute one float result elementwise from its array inputs with operations the search
    knows (arithmetic, sqrt, cbrt, exp, log, expm1, log1p, trigonometric, hyperbolic, pow, ...). The
    search rewrites the expression with real-number identities (egglog), judges every candidate on
    inputs drawn by ``jst.strategies`` against ``jst.oracles``' exact values of the original, combines
    candidates by input range, and re-checks the winner on fresh inputs.

    Args:
      fn: the function (positional array arguments, or keyword ones named by ``shapes``).
      shapes: as for ``jst.check``: a list of shapes (one per positional argument) or a dict of names.
        The search works per element, so only the number and names of the arguments matter.
      dtype: "float16", "bfloat16", "float32" or "float64".
      domain: the input domain, as for ``jst.strategies.floats`` (e.g. ``(0, None)``).
      max_examples: the number of inputs drawn for the search (and again for the re-check).
      seed: makes the draws reproducible (None: seed 0, the search is deterministic by default).
      time_limit: seconds for saturation plus candidate search; the result says when it was hit.
      node_limit: e-nodes after which saturation stops; iter_limit: saturation iterations at most.

    Returns:
      An :class:`Improvement` (``.fn``, ``.source``, ``.frontier``, ``.report()``); when the
      expression has an unsupported operation or nothing better is found, ``improved`` is False and
      ``status`` says why.

    Raises:
      ArgumentError: a bad dtype, shapes, limit or seed.
      TraceError: JAX cannot trace ``fn``.

    Example::

        imp = jst.improve(lambda x: jnp.sqrt(x + 1) - jnp.sqrt(x), shapes=[()], dtype="float64",
                          domain=(0, None))
        print(imp.source)   # def ...(x): return 1.0 / (jnp.sqrt(x + 1.0) + jnp.sqrt(x))
    """
    dt = _validate(dtype, max_examples, seed, time_limit, node_limit, iter_limit)
    names, shape_list, by_keyword = normalize_shapes(shapes)
    param_names = _param_names(fn, names, by_keyword)
    with x64_scope(dt):
        return _improve(fn, dt, shape_list, names, by_keyword, param_names, domain, int(max_examples),
                        0 if seed is None else int(seed), float(time_limit), int(node_limit), int(iter_limit))


def _validate(dtype: Any, max_examples: Any, seed: Any, time_limit: Any, node_limit: Any,
              iter_limit: Any) -> np.dtype[Any]:
    try:
        dt = resolve_dtype(dtype)
    except (TypeError, ValueError) as exc:
        raise ArgumentError(f"dtype={dtype!r}: {exc}") from None
    counts = (("max_examples", max_examples), ("node_limit", node_limit), ("iter_limit", iter_limit))
    for name, value in counts:
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ArgumentError(f"{name}={value!r}: expected a positive integer")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))):
        raise ArgumentError(f"seed={seed!r}: expected an integer or None")
    if isinstance(time_limit, bool) or not isinstance(time_limit, (int, float)) or not time_limit > 0:
        raise ArgumentError(f"time_limit={time_limit!r}: expected a number of seconds > 0")
    return dt


def _param_names(fn: Callable[..., Any], names: list[str], by_keyword: bool) -> list[str]:
    if by_keyword:
        return list(names)
    try:
        params = [p.name for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    return params[:len(names)] if len(params) >= len(names) else [f"x{i}" for i in range(len(names))]


def _improve(fn: Callable[..., Any], dt: np.dtype[Any], shapes: list[tuple[int, ...]], names: list[str],
             by_keyword: bool, params: list[str], domain: Any, n: int, seed: int, time_limit: float,
             node_limit: int, iter_limit: int) -> Improvement:
    return run(fn, dt, shapes, names, by_keyword, params, domain, n, seed, time_limit, node_limit, iter_limit)


