"""The validated case of ``jst.check``: what is checked (function, shapes, dtype, domains), resolved once.

Every stage of the pipeline (``_case``) reads the case from here rather than parsing the user's
``shapes=``, ``dtype=`` or ``domain=`` again; how the case is judged is the ``jst.settings``
(``_settings``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .._dtypes import component_dtype, dtype_info, is_complex_dtype, resolve_dtype
from .._errors import ArgumentError, require_callable
from ..rewrites.catalogue import STABILITY
from ..rewrites.engine._rule import resolve as resolve_rule_names
from ..strategies._domain import per_argument_domains
from ..strategies._scenario import scenarios as draw_scenarios
from ._complex_case import split_complex
from ._trace import normalize_shapes, positional

__all__ = ["Case", "build_strategy", "make_case", "resolve_rules"]


@dataclasses.dataclass(frozen=True)
class Case:
    """One function to check, its inputs validated.

    Attributes:
        fn: the user's function; ``call`` the same taking the arrays positionally.
        names: the argument names (``arg0``... for positional ones); ``by_keyword`` when ``shapes``
            was a dict.
        shapes: one shape per argument; ``dtype`` their NumPy dtype.
        domain: the user's ``domain=`` (shown in messages); ``domains`` resolved per argument.
        strategy: the scenarios Hypothesis draws from.
        case_id: the case's name in reports and baselines.
        result_dtype: the dtype the user asked for, as reports name it. A complex case is checked as
            a function of its parts (``_complex_case``): ``dtype``, ``names``, ``shapes`` and
            ``domains`` are then the parts' (two real arguments per complex one), ``domain`` the
            per-part domains.
    """

    fn: Callable[..., Any]
    call: Callable[..., Any]
    names: list[str]
    shapes: list[tuple[int, ...]]
    by_keyword: bool
    dtype: np.dtype[Any]
    domain: Any
    domains: list[Any]
    strategy: Any
    case_id: str
    result_dtype: np.dtype[Any]


def make_case(fn: Callable[..., Any], shapes: Any, dtype: Any, domain: Any, name: str | None) -> Case:
    """The :class:`Case`; a bad ``shapes``, ``dtype`` or ``domain`` is an :class:`ArgumentError` naming it."""
    require_callable("jst.check", fn)
    if name is not None and not isinstance(name, str):
        raise ArgumentError(f"name={name!r}: expected a string (the case's name in reports) or None")
    names, shape_list, by_keyword = normalize_shapes(shapes)
    try:
        dt = resolve_dtype(dtype, complex_ok=True)
    except (TypeError, ValueError) as exc:
        raise ArgumentError(f"dtype={dtype!r}: {exc}") from None
    try:  # the user's domain= parsed once: the strategy and the resolved domains share it
        specs = per_argument_domains(domain, len(shape_list))
        for d in specs:  # a complex domain applies to each part
            d.resolve(dtype_info(component_dtype(dt) if is_complex_dtype(dt) else dt))
    except (ValueError, TypeError) as exc:
        raise _domain_error(domain, exc) from None
    strategy = build_strategy(dt, shape_list, specs, shown=domain)  # complex: both parts drawn jointly
    case_id = name or f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"
    call = positional(fn, names, by_keyword)
    result_dtype, shown = dt, domain
    if is_complex_dtype(dt):  # judged as a function of the parts (_complex_case.py)
        split = split_complex(dt, shape_list, names, specs)
        dt, shape_list, names, specs = split.part, split.shapes, split.names, split.domains
        call, shown = split.wrap(call), split.domains
    domains = [d.resolve(dtype_info(dt)) for d in specs]
    return Case(fn, call, names, shape_list, by_keyword, dt, shown, domains, strategy, case_id, result_dtype)


def build_strategy(dtype: np.dtype[Any], shapes: Sequence[tuple[int, ...]], domain: Any, *,
                   shown: Any = None) -> Any:
    """The case's scenarios (``jst.strategies.arguments`` draws, with siblings); a bad ``domain`` is an
    :class:`ArgumentError` showing ``shown`` (default ``domain``: the user's spelling)."""
    try:
        return draw_scenarios(dtype, shapes, domain=domain)
    except (ValueError, TypeError) as exc:
        raise _domain_error(domain if shown is None else shown, exc) from None


def _domain_error(domain: Any, exc: Exception) -> ArgumentError:
    if isinstance(exc, ArgumentError) and str(exc).startswith("domain="):
        return exc
    return ArgumentError(f"domain={domain!r}: {exc}")


def resolve_rules(rules: Any) -> tuple[Any, ...]:
    """The rules to apply (``None``: the stability catalogue); unknown names are an :class:`ArgumentError`."""
    try:
        if rules is None:
            return resolve_rule_names(None, (), tuple(STABILITY))
        return resolve_rule_names(rules if isinstance(rules, str) else list(rules))
    except (KeyError, TypeError, ValueError) as exc:
        problem = exc.args[0] if exc.args else exc
        raise ArgumentError(f"rules={rules!r}: {problem}") from None
