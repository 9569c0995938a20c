"""What ``jst.improve`` measures beside the search: ``jst.stabilize``'s rewrite (the catalogue) and the
problem's conditioning (the stability lens, ``_stable``).

The catalogue's rewrite is a candidate of its own and where the search starts when it is better. Where
the written program has no exact value at any drawn input (``0·log 0`` at a closed-over zero target,
``0·-inf`` at a masked class), the rewrite's exact values are the reference the candidates are judged
against (:func:`catalogue_reference`): the rewrite keeps the program's value wherever that is defined
(each rule's soundness is checked against the oracle) and gives its limit where it is not.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .._check._trace import positional, trace_case
from .._errors import JaxstabError
from ._expr import Term, is_array_program
from ._judge import Samples
from ._lower import Unsupported, lower_program
from ._stable import Conditioning

__all__ = ["catalogue", "catalogue_reference", "conditioning", "lifted"]


def lifted(fn: Callable[..., Any], array: bool) -> Callable[..., Any]:
    """``fn`` as the judge calls a candidate: per example (``vmap``) for an array program."""
    import jax

    return jax.vmap(fn) if array else fn


def _stabilized(fn: Callable[..., Any], names: list[str], by_keyword: bool, dt: np.dtype[Any],
                shapes: list[tuple[int, ...]]) -> tuple[Callable[..., Any], Any] | None:
    from ..rewrites._transform import stabilize

    try:
        cat_fn = stabilize(positional(fn, names, by_keyword))
        return cat_fn, trace_case(cat_fn, dt, shapes).closed
    except (JaxstabError, Exception):  # the catalogue is a bonus: never the reason improve fails
        return None


def catalogue_reference(fn: Callable[..., Any], names: list[str], by_keyword: bool, dt: np.dtype[Any],
                        shapes: list[tuple[int, ...]], array: bool, whole: Term) -> Term | None:
    """The term of ``jst.stabilize``'s rewrite of ``fn``, to judge against where the written program
    (``whole``) has no exact value at any input drawn; None when it does not lower, is the written
    program, or is judged another way (an array program for an elementwise one)."""
    found = _stabilized(fn, names, by_keyword, dt, shapes)
    term = None if found is None else _lowered(found[1], array)[0]
    return term if term != whole else None


def conditioning(fn: Callable[..., Any], names: list[str], by_keyword: bool, dt: np.dtype[Any],
                 shapes: list[tuple[int, ...]], case: Any, array: bool, deadline: float,
                 ) -> Conditioning | None:
    """The conditioning at one sample: the program traced at one example's shapes (scalars for an
    elementwise program judged per point, whatever shapes it was called with); None when it cannot be."""
    try:
        if not array and any(s != () for s in shapes):
            case = trace_case(positional(fn, names, by_keyword), dt, [()] * len(shapes))
    except Exception:  # the conditioning is a bonus: without it, nothing is excused
        return None
    return Conditioning(case.closed, case.judged_outputs[0], dt, deadline) if case.judged_outputs else None


def catalogue(fn: Callable[..., Any], names: list[str], by_keyword: bool, dt: np.dtype[Any],
              shapes: list[tuple[int, ...]], samples: Samples, array: bool,
              ) -> tuple[Term | None, Any, Callable[..., Any], np.ndarray] | None:
    """``jst.stabilize``'s rewrite of ``fn``: its term (None when it does not lower), where its operations
    were written, the rewritten function, and its errors on ``samples``. None when it cannot run."""
    found = _stabilized(fn, names, by_keyword, dt, shapes)
    if found is None:
        return None
    cat_fn, closed = found
    term, sites = _lowered(closed, array)
    try:
        errs = samples.jit_errors(samples.function(term) if term is not None else lifted(cat_fn, array))
    except Exception:
        return None
    return term, sites, cat_fn, errs


def _lowered(closed: Any, array: bool) -> tuple[Term | None, Any]:
    """The rewrite's term and sites; no term where it does not lower or is judged another way than the
    original (an array program for an elementwise one): then it is kept as a function."""
    try:
        term, sites = lower_program(closed)
    except Unsupported:
        return None, {}
    return (term, sites) if is_array_program(term) == array else (None, sites)
