"""The pytest plugin (entry point ``pytest11: jaxstab``): the ``stabilize`` marker, the ``jaxstab``
fixture, the ``--jaxstab-*`` options, the "jaxstab" terminal section, reports and baselines.

Hooks only: the work lives in the private modules beside this one (``_marker``, ``_options``,
``_run``, ``_session``), and JAX and Hypothesis are imported when a case runs, not when pytest loads
the plugin (as Hypothesis's own plugin avoids importing Hypothesis). See docs/architecture.md, "The
pytest surface".
"""

from __future__ import annotations

import inspect
from collections.abc import Generator
from typing import Any

import pytest

from ._marker import MARKER, MARKER_HELP
from ._options import (
    COMPARE_FAIL_OPTION,
    COMPARE_OPTION,
    EXAMPLES_OPTION,
    NO_TIMING_OPTION,
    REPORT_OPTION,
    SAVE_BASELINE_OPTION,
    SEED_OPTION,
    TIMING_OPTION,
    add_options,
    describe,
    resolve_options,
)
from ._session import RESULT_KEY, SESSION_KEY, JaxstabSession

_SESSION_PLUGIN = "jaxstab-session"

__all__ = [
    "COMPARE_FAIL_OPTION",
    "COMPARE_OPTION",
    "EXAMPLES_OPTION",
    "MARKER",
    "NO_TIMING_OPTION",
    "REPORT_OPTION",
    "SAVE_BASELINE_OPTION",
    "SEED_OPTION",
    "TIMING_OPTION",
    "jaxstab",
]


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER_HELP)
    session = JaxstabSession(config, resolve_options(config))
    config.stash[SESSION_KEY] = session
    # The session object's own hooks (reports, collection, end of session) see this config only.
    config.pluginmanager.register(session, _SESSION_PLUGIN)


def pytest_unconfigure(config: pytest.Config) -> None:
    session = config.stash.get(SESSION_KEY, None)
    if session is not None and config.pluginmanager.is_registered(session):
        config.pluginmanager.unregister(session)


def pytest_report_header(config: pytest.Config) -> str | None:
    if SESSION_KEY not in config.stash:
        return None
    return describe(config.stash[SESSION_KEY].options)


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makeitem(collector: pytest.Collector, name: str, obj: Any) -> Any:
    """Hides a marked test's drawn parameters from fixture lookup; a bad marker fails its test alone."""
    if not inspect.isfunction(obj) or not collector.istestfunction(obj, name):  # type: ignore[attr-defined]
        return None
    from ._marker import BadMarker, MarkerError, hide_drawn, marks_of, parse_marker

    marks = marks_of(collector, obj)
    if not marks:
        return None
    try:
        spec = parse_marker(marks[0], obj, is_method=isinstance(collector, pytest.Class))
    except MarkerError as exc:
        return BadMarker.from_parent(collector, name=name, message=str(exc))
    hide_drawn(obj, spec.names)
    return None  # pytest's own collection continues, with the reduced signature


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    from ._marker import is_marked_function

    if pyfuncitem.get_closest_marker(MARKER) is None or not is_marked_function(pyfuncitem.obj):
        return None
    from ._run import run_marked

    run_marked(pyfuncitem)
    return True


@pytest.fixture
def jaxstab(request: pytest.FixtureRequest) -> Any:
    """Check functions defined elsewhere: ``jaxstab.check(fn, shapes=..., dtype=...)`` fuzzes ``fn``
    like ``jst.check`` with the session's options, fails the test when the verdict fails, and returns
    the ``CaseResult``."""
    from ._run import JaxstabFixture

    return JaxstabFixture(request.node)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    report = yield
    if call.when == "call":
        from ._run import CASES_KEY

        cases = item.stash.get(CASES_KEY, None)
        if cases:
            # Plain JSON on the report's __dict__: pytest-xdist serialises it to the controller.
            report.__dict__[RESULT_KEY] = [case.to_json() for case in cases]
    return report
