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
from .._dtypes import is_complex_dtype, resolve_dtype
from .._errors import ArgumentError, require_callable
from .._settings import layered
from .._settings import settings as Settings
from ._derivative import check_derivatives, improve_derivatives
from ._pipeline import run
from ._result import Improvement

__all__ = ["improve"]


def improve(fn: Callable[..., Any], *, shapes: Any, dtype: Any, domain: Any = None, settings: Any = None,
            derivatives: bool | str = False, **options: Any) -> Improvement:
    """Search for a more accurate program computing ``fn`` (equality saturation judged by the oracle).

    ``fn`` must compute one float result elementwise from its array inputs with operations the search
    knows (arithmetic, sqrt, cbrt, exp, log, expm1, log1p, trigonometric, hyperbolic, pow, ...). The
    search rewrites the expression with real-number identities (egglog), judges every candidate against
    ``jst.oracles``' exact values of the original on inputs drawn as Herbie draws them (uniform over the
    float bit patterns in the domain, a quarter uniform over its values, kept where the exact result is
    a finite float), combines candidates by input range, and re-checks the winner on fresh inputs drawn
    the same way; a candidate worse than the original there in mean or max is never offered.

    Args:
      fn: the function (positional array arguments, or keyword ones named by ``shapes``).
      shapes: as for ``jst.check``: a list of shapes (one per positional argument) or a dict of names.
        The search works per element, so only the number and names of the arguments matter.
      dtype: "float16", "bfloat16", "float32" or "float64".
      domain: the input domain, as for ``jst.strategies.floats`` (e.g. ``(0, None)``).
      settings: a ``jst.settings`` to start from (default: the loaded profile).
      derivatives: ``False`` (default): search the value. ``True``: the value, and each partial
        derivative of an elementwise ``fn`` (autodiff's derivative program, a ``custom_jvp`` rule of the
        user's included, judged against the oracle's exact value of that program) whose error misses the
        fix criterion (mean <= 2 bits, max <= 8 bits); ``"only"``: the partial derivatives, the value as
        written. What is found is installed through ``jax.custom_jvp``: ``.fn``'s values are the
        primal's bit for bit (the value's improved program, or ``fn``), its tangent the improved
        partials (autodiff's for the others); ``.source`` is the ``@jax.custom_jvp`` definition with its
        ``defjvp``; ``.partials`` and ``.report()`` give each partial's bits before and after. The
        ``time_limit`` is shared by the searches that run.
      **options: the ``jst.settings`` options ``jst.improve`` takes: ``max_examples`` (valid inputs drawn
        for the search, default 100; the re-check draws at least 512), ``seed`` (None: seed 0, the search is
        deterministic by default), ``time_limit`` (seconds for saturation plus candidate search, default
        15; the result says when it was hit), ``node_limit`` (e-nodes after which saturation stops,
        default 5000), ``iter_limit`` (saturation iterations at most, default 8).

    Returns:
      An :class:`Improvement` (``.fn``, ``.source``, ``.frontier``, ``.report()``); when the
      expression has an unsupported operation or nothing better is found, ``improved`` is False and
      ``status`` says why.

    Raises:
      ArgumentError: a bad dtype or shapes; ``SettingsError`` for a bad limit, seed or unknown option.
      TraceError: JAX cannot trace ``fn``.

    Example::

        imp = jst.improve(lambda x: jnp.sqrt(x + 1) - jnp.sqrt(x), shapes=[()], dtype="float64",
                          domain=(0, None))
        print(imp.source)   # def ...(x): return 1.0 / (jnp.sqrt(x + 1.0) + jnp.sqrt(x))
    """
    require_callable("jst.improve", fn)
    s = layered(Settings.default, {"settings": settings, **options}, "improve", where="jst.improve()")
    if is_complex_dtype(dtype):
        raise ArgumentError(f"dtype={dtype!r}: jst.improve searches identities of real numbers; complex "
                            "functions are checked (jst.check) but not searched")
    try:
        dt = resolve_dtype(dtype)
    except (TypeError, ValueError) as exc:
        raise ArgumentError(f"dtype={dtype!r}: {exc}") from None
    which = check_derivatives(derivatives)
    names, shape_list, by_keyword = normalize_shapes(shapes)
    param_names = _param_names(fn, names, by_keyword)
    with x64_scope(dt):
        if which is not False:
            return improve_derivatives(fn, dt, shape_list, names, by_keyword, param_names, domain,
                                       int(s.max_examples), 0 if s.seed is None else int(s.seed),
                                       float(s.time_limit), int(s.node_limit), int(s.iter_limit),
                                       value=which is True)
        return _improve(fn, dt, shape_list, names, by_keyword, param_names, domain, int(s.max_examples),
                        0 if s.seed is None else int(s.seed), float(s.time_limit), int(s.node_limit),
                        int(s.iter_limit))


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


