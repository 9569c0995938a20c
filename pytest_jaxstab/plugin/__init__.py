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

from ._marker import MARKER, marker_help
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
from ._session import (
    CASES_KEY,
    COMPLETE_KEY,
    COMPLETE_REPORT_KEY,
    RESULT_KEY,
    SESSION_KEY,
    JaxstabSession,
    pending_failures,
)

_SESSION_PLUGIN = "jaxstab-session"
#: The path base (`_files.set_path_base`) before this session, restored at its end.
_PATH_BASE_KEY: pytest.StashKey[str | None] = pytest.StashKey()

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


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session: pytest.Session, items: list[pytest.Item]) -> None:
    """Adds the ``--jaxstab-scan`` items (before -k/-m selection and the session's bookkeeping)."""
    if session.config.getoption("jaxstab_scan", None) or session.config.getini("jaxstab_scan"):
        from ._scan import scan_items

        items.extend(scan_items(session))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", marker_help())
    session = JaxstabSession(config, resolve_options(config))
    config.stash[SESSION_KEY] = session
    # The session object's own hooks (reports, collection, end of session) see this config only.
    config.pluginmanager.register(session, _SESSION_PLUGIN)
    # Messages and reports name files relative to the rootdir, as node ids do (issue 23).
    from .._files import set_path_base

    config.stash[_PATH_BASE_KEY] = set_path_base(config.rootpath)


def pytest_unconfigure(config: pytest.Config) -> None:
    if _PATH_BASE_KEY in config.stash:  # restore the outer session's (pytester runs in-process)
        from .._files import set_path_base

        set_path_base(config.stash[_PATH_BASE_KEY])
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
    if getattr(obj, "is_hypothesis_test", False):
        return BadMarker.from_parent(collector, name=name, message=(
            "cannot be combined with Hypothesis's @given: the marker draws the test's arrays itself. Use "
            "one of them: the marker alone, or @given(jst.strategies.arrays(...)) with your own "
            "assertions, or jaxstab.check(fn, ...) inside a test"))
    try:
        spec = parse_marker(marks[0], obj, is_method=isinstance(collector, pytest.Class))
    except MarkerError as exc:
        return BadMarker.from_parent(collector, name=name, message=str(exc))
    hide_drawn(obj, spec.names)
    return None  # pytest's own collection continues, with the reduced signature


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, Any, Any]:
    """A drawn parameter reported as a missing fixture gets the reason and what to do."""
    lookup_error = getattr(pytest, "FixtureLookupError", None)
    if lookup_error is None:  # pragma: no cover - pytest < 8.1
        from _pytest.fixtures import FixtureLookupError as lookup_error
    try:
        return (yield)
    except lookup_error as exc:
        mark = item.get_closest_marker(MARKER)
        argname = getattr(exc, "argname", None)
        if mark is None or argname is None or not isinstance(item, pytest.Function):
            raise
        from ._marker import missing_fixture_message

        message = missing_fixture_message(item, mark, argname)
    pytest.fail(message, pytrace=False)


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
    """Check functions defined elsewhere: ``jaxstab.check(fn, shapes=..., dtype=..., **options)`` fuzzes
    ``fn`` like ``jst.check`` with the session's ``jst.settings`` (any option overridable by keyword)
    and returns the ``CaseResult``. Every check of the
    test runs and is recorded; the test fails after its body when one of them failed."""
    from ._run import JaxstabFixture

    return JaxstabFixture(request.node)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, Any, Any]:
    """Fails a test whose ``jaxstab.check`` calls failed, once its body has finished (all checks ran)."""
    try:
        result = yield
    except BaseException:
        if item.get_closest_marker(MARKER) is not None and item.stash.get(CASES_KEY, None):
            item.stash[COMPLETE_KEY] = True  # a marked test's body is its one case: it ran
        pending = pending_failures(item)
        if pending:  # the test's own error is the failure; the checks' failures ride along
            item.add_report_section("call", "jaxstab", "\n\n".join(pending))
        raise
    item.stash[COMPLETE_KEY] = True  # the body ran to its end: every check it makes was recorded
    pending = pending_failures(item)
    if pending:
        count = f"{len(pending)} jaxstab checks failed" if len(pending) > 1 else "a jaxstab check failed"
        pytest.fail(f"{count}:\n\n" + "\n\n".join(pending), pytrace=False)
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    report = yield
    if call.when == "call":
        if item.stash.get(COMPLETE_KEY, False):
            report.__dict__[COMPLETE_REPORT_KEY] = True
        cases = item.stash.get(CASES_KEY, None)
        if cases:
            # Plain JSON on the report's __dict__: pytest-xdist serialises it to the controller.
            report.__dict__[RESULT_KEY] = [case.to_json() for case in cases]
    return report
