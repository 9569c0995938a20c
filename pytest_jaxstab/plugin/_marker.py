"""The ``stabilize`` marker: its arguments, checked at collection, and the drawn parameters.

A marked test's body is the function under test. Its array parameters (named by ``shapes``, or the
first ones when ``shapes`` is a list) are drawn by the plugin, so pytest must not look for fixtures of
those names: at collection the function's ``__signature__`` is replaced by one without them (as
Hypothesis's ``@given`` does), and the original is kept to call the body with arrays by keyword.
Bad marker arguments become a collection error of that test alone, naming the argument.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Sequence
from typing import Any

import pytest

from .._errors import MarkerError
from ._options import JUDGES

__all__ = ["MARKER", "MARKER_HELP", "MarkerError", "MarkerSpec", "drawn_signature", "missing_fixture_message",
           "parse_marker"]

MARKER = "stabilize"
MARKER_HELP = (
    "stabilize(dtype, shapes, domain=None, max_examples=None, tolerance_bits=8.0, rules=None, "
    "apply=False, timing=None, atol=None, oracle_budget=None, grad=False, search=None, judge=None): "
    "fuzz the test's body, a JAX function of the array parameters named in `shapes` (drawn by "
    "pytest-jaxstab; other parameters stay fixtures), for numerical stability; fail on overflow or an "
    "error above tolerance_bits. "
    "apply=True judges jst.stabilize(body); grad=True judges its gradient too; a failure the catalogue "
    "does not fix shows jst.improve's program unless search=False or --jaxstab-search=off (search=True "
    "searches even under --jaxstab-search=off); judge= 'stability' (default: error beyond the problem's "
    "conditioning) or 'accuracy' (forward error)."
)
_KWARGS = ("dtype", "shapes", "domain", "max_examples", "tolerance_bits", "rules", "apply", "timing", "atol",
           "oracle_budget", "grad", "search", "judge")
_ORIGINAL = "__jaxstab_signature__"


@dataclasses.dataclass(frozen=True)
class MarkerSpec:
    """A validated marker: the drawn parameters, in order, and the ``jst.check`` arguments."""

    names: tuple[str, ...]
    shapes: tuple[tuple[int, ...], ...]
    dtype: str
    domain: Any = None
    max_examples: int | None = None
    tolerance_bits: float = 8.0
    rules: Any = None
    apply: bool = False
    timing: bool | None = None
    atol: float | None = None
    oracle_budget: float | None = None
    grad: bool = False
    search: bool | None = None  # None: as --jaxstab-search says
    judge: str | None = None  # None: --jaxstab-judge / the ini key / "stability"


def _parameters(sig: inspect.Signature, is_method: bool) -> list[inspect.Parameter]:
    params = list(sig.parameters.values())
    if is_method and params:
        params = params[1:]  # self
    return [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


def parse_marker(mark: pytest.Mark, func: Any, *, is_method: bool = False) -> MarkerSpec:
    """Validates a ``stabilize`` mark against the test function it decorates.

    Raises:
        MarkerError: unknown or missing argument, bad dtype, shapes that do not match the parameters,
            an empty domain, bad numbers, unknown rule names.
    """
    if mark.args:
        raise MarkerError(f"takes keyword arguments only ({', '.join(_KWARGS)}), got positional "
                          f"{', '.join(map(repr, mark.args))}")
    unknown = [k for k in mark.kwargs if k not in _KWARGS]
    if unknown:
        raise MarkerError(f"unknown argument {', '.join(unknown)}; the marker takes {', '.join(_KWARGS)}")
    kw = dict(mark.kwargs)
    for required in ("dtype", "shapes"):
        if required not in kw:
            raise MarkerError(f"missing argument {required}= (e.g. stabilize(dtype=\"float32\", "
                              "shapes={\"x\": (16,)}))")
    from .._check._trace import normalize_shapes
    from .._dtypes import resolve_dtype
    from .._errors import ArgumentError

    try:
        dtype = resolve_dtype(kw["dtype"], complex_ok=True)
    except ValueError as exc:
        raise MarkerError(f"dtype={kw['dtype']!r}: {exc}") from None
    try:
        names, shapes, by_keyword = normalize_shapes(kw["shapes"])
    except ArgumentError as exc:
        raise MarkerError(str(exc)) from None
    original = getattr(func, _ORIGINAL, None) or inspect.signature(func)
    params = _parameters(original, is_method)
    pnames = [p.name for p in params]
    shown = f"{getattr(func, '__name__', 'the test')}({', '.join(pnames)})"
    if by_keyword:
        missing = [n for n in names if n not in pnames]
        if missing:
            raise MarkerError(f"shapes names {', '.join(map(repr, missing))}, not a parameter of {shown}")
    else:
        positional = [p.name for p in params if p.kind != p.KEYWORD_ONLY]
        if len(shapes) > len(positional):
            raise MarkerError(f"shapes gives {len(shapes)} shapes but {shown} has {len(positional)} "
                              "positional parameters")
        names = positional[: len(shapes)]
    if not names:
        raise MarkerError("shapes is empty: name at least one array parameter to draw")
    spec = MarkerSpec(tuple(names), tuple(shapes), str(dtype), kw.get("domain"),
                      _count(kw, "max_examples"), _number(kw, "tolerance_bits", 8.0),
                      kw.get("rules"), _flag(kw, "apply", False), _flag(kw, "timing", None),
                      _number(kw, "atol", None), _budget(kw), _flag(kw, "grad", False),
                      _flag(kw, "search", None), _judge(kw))
    _check_domain_and_rules(spec)
    return spec


def _count(kw: dict[str, Any], name: str) -> int | None:
    value = kw.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise MarkerError(f"{name}={value!r}: expected a positive integer")
    return value


def _number(kw: dict[str, Any], name: str, default: float | None) -> Any:
    value = kw.get(name, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise MarkerError(f"{name}={value!r}: expected a number >= 0")
    return float(value)


def _budget(kw: dict[str, Any]) -> float | None:
    value = kw.get("oracle_budget")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise MarkerError(f"oracle_budget={value!r}: expected a number > 0 (float('inf') for no limit)")
    return float(value)


def _judge(kw: dict[str, Any]) -> str | None:
    value = kw.get("judge")
    if value is not None and value not in JUDGES:
        raise MarkerError(f"judge={value!r}: expected 'stability' (error beyond what the problem's "
                          "conditioning explains) or 'accuracy' (forward error)")
    return value


def _flag(kw: dict[str, Any], name: str, default: bool | None) -> Any:
    value = kw.get(name, default)
    if value is not None and not isinstance(value, bool):
        raise MarkerError(f"{name}={value!r}: expected True or False")
    return value


def _check_domain_and_rules(spec: MarkerSpec) -> None:
    from .._check._case import build_strategy, resolve_rules
    from .._dtypes import resolve_dtype
    from .._errors import ArgumentError

    try:
        build_strategy(resolve_dtype(spec.dtype, complex_ok=True), spec.shapes, spec.domain)
        if spec.rules is not None:
            resolve_rules(spec.rules)
    except ArgumentError as exc:
        raise MarkerError(str(exc)) from None


def drawn_signature(func: Any, names: Sequence[str]) -> inspect.Signature:
    """``func``'s signature without the drawn parameters (what pytest sees: the fixtures it needs)."""
    original = getattr(func, _ORIGINAL, None) or inspect.signature(func)
    return original.replace(parameters=[p for p in original.parameters.values() if p.name not in names])


def hide_drawn(func: Any, names: Sequence[str]) -> None:
    """Makes pytest request fixtures only for the parameters that are not drawn."""
    if getattr(func, _ORIGINAL, None) is None:
        setattr(func, _ORIGINAL, inspect.signature(func))
    func.__signature__ = drawn_signature(func, names)


def is_marked_function(func: Any) -> bool:
    """Whether the collection hook prepared ``func`` (so the run hook must draw its parameters)."""
    return getattr(func, _ORIGINAL, None) is not None


def marks_of(collector: pytest.Collector, obj: Any) -> list[pytest.Mark]:
    """The ``stabilize`` marks of a function about to be collected, closest first."""
    own = getattr(obj, "pytestmark", [])
    own = own if isinstance(own, list) else [own]
    marks = [m for m in own if getattr(m, "name", None) == MARKER]
    marks += list(collector.iter_markers(MARKER))
    return marks


class BadMarker(pytest.Collector):
    """Stands in for a test whose marker is bad: collecting it fails with the marker's problem."""

    def __init__(self, *, message: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.message = message

    def collect(self) -> list[Any]:
        raise self.CollectError(f"{self.nodeid}: bad @pytest.mark.{MARKER}: {self.message}")


def missing_fixture_message(item: pytest.Function, mark: pytest.Mark, argname: str) -> str:
    """What to do when pytest looks for a fixture named like a parameter of a marked test."""
    head = f"{item.nodeid}: fixture {argname!r} not found"
    func = getattr(item.obj, "__func__", item.obj)
    if not is_marked_function(func):
        return (f"{head}: @pytest.mark.{MARKER} reached this test after collection (through "
                "pytest.param(..., marks=...) or a pytest_collection_modifyitems hook), too late to take its "
                "drawn parameters out of pytest's fixture lookup. Put the marker on the test function "
                f"itself (a decorator, or pytestmark on its module or class); to vary it, write one marked "
                "test per variant, or call jaxstab.check(fn, ...) inside a parametrized test.")
    try:
        spec = parse_marker(mark, func, is_method=item.cls is not None)
        drawn = ", ".join(spec.names)
    except MarkerError:
        drawn = "?"
    return (f"{head}: @pytest.mark.{MARKER} draws only the parameters named in shapes= ({drawn}), and every "
            f"other parameter is a fixture. Add {argname!r} to shapes= to draw it too (e.g. shapes={{"
            f"{', '.join(repr(n) + ': (16,)' for n in (*drawn.split(', '), argname) if n != '?')}}}), or "
            f"define a fixture named {argname!r}.")
