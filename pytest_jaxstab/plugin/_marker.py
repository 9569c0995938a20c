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
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from .._errors import MarkerError

__all__ = ["CASE_ARGUMENTS", "MARKER", "MarkerError", "MarkerSpec", "drawn_signature", "marker_arguments",
           "marker_help", "missing_fixture_message", "parse_marker"]

MARKER = "stabilize"
#: The marker's arguments that say what is checked; every other argument is a ``jst.settings`` option.
CASE_ARGUMENTS = ("dtype", "shapes", "domain", "settings")
_SUMMARY = (
    "fuzz the test's body, a JAX function of the array parameters named in `shapes` (drawn by "
    "pytest-jaxstab; other parameters stay fixtures), for numerical stability; fail on overflow or an "
    "error above tolerance_bits. dtype: float16, bfloat16, float32 or float64; domain: (lo, hi), a "
    "Domain, a predicate, or one per argument; settings: a jst.settings object. Any other argument is a "
    "jst.settings option, overriding the session's (--jaxstab-* options, ini keys, --jaxstab-profile):")
_ORIGINAL = "__jaxstab_signature__"


def marker_arguments() -> tuple[str, ...]:
    """Every argument the marker takes: the case's, then the options of ``jst.settings`` it takes."""
    from .._settings import options

    return (*CASE_ARGUMENTS, *(o.name for o in options("marker")))


def marker_help() -> str:
    """The marker's line of ``pytest --markers``, from the settings' declaration."""
    from .._settings import options

    opts = options("marker")
    signature = ", ".join(["dtype", "shapes", "domain=None", "settings=None",
                           *(f"{o.name}={o.default!r}" for o in opts)])
    described = "; ".join(f"{o.name}: {o.doc}" for o in opts)
    return f"{MARKER}({signature}): {_SUMMARY} {described}."


@dataclasses.dataclass(frozen=True)
class MarkerSpec:
    """A validated marker: the drawn parameters, in order, the case, and the settings it changes.

    ``options`` holds the ``jst.settings`` values the marker gives (validated), and ``settings`` its
    ``settings=`` object; both apply over the session's settings, the options last.
    """

    names: tuple[str, ...]
    shapes: tuple[tuple[int, ...], ...]
    dtype: str
    domain: Any = None
    options: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    settings: Any = None


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
    accepted = marker_arguments()
    if mark.args:
        raise MarkerError(f"takes keyword arguments only ({', '.join(accepted)}), got positional "
                          f"{', '.join(map(repr, mark.args))}")
    unknown = [k for k in mark.kwargs if k not in accepted]
    if unknown:
        raise MarkerError(f"unknown argument {', '.join(unknown)}; the marker takes {', '.join(accepted)}")
    kw = dict(mark.kwargs)
    for required in ("dtype", "shapes"):
        if required not in kw:
            raise MarkerError(f"missing argument {required}= (e.g. stabilize(dtype=\"float32\", "
                              "shapes={\"x\": (16,)}))")
    from .._check._trace import normalize_shapes
    from .._dtypes import resolve_dtype
    from .._errors import ArgumentError
    from .._settings import none_inherits, option, settings

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
    given = kw.get("settings")
    if given is not None and not isinstance(given, settings):
        raise MarkerError(f"settings={given!r}: expected a jst.settings object")
    values: dict[str, Any] = {}
    for key, value in kw.items():
        opt = option(key)
        if opt is None:  # dtype, shapes, domain, settings
            continue
        if value is None and none_inherits(key):  # max_examples=None: the session's value
            continue
        try:
            values[key] = opt.check(value)
        except ArgumentError as exc:
            raise MarkerError(str(exc)) from None
    from ._precision import asked_on_case, usage_problem

    misuse = usage_problem(dtype, asked_on_case(values, given))
    if misuse is not None:
        raise MarkerError(misuse)
    spec = MarkerSpec(tuple(names), tuple(shapes), str(dtype), kw.get("domain"), values, given)
    _check_domain_and_rules(spec)
    return spec


def _check_domain_and_rules(spec: MarkerSpec) -> None:
    from .._check._spec import build_strategy, resolve_rules
    from .._dtypes import resolve_dtype
    from .._errors import ArgumentError

    try:
        build_strategy(resolve_dtype(spec.dtype, complex_ok=True), spec.shapes, spec.domain)
        if spec.options.get("rules") is not None:
            resolve_rules(spec.options["rules"])
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
