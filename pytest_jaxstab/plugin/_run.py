"""Running cases inside tests: a marked test's body, or ``jaxstab.check`` from the fixture.

Both go through :func:`run_case`, which calls ``jst.check`` with the session's options, keeps the result
on the item (the report hook puts it on the test report) and decides the test's outcome: the verdict,
or, when comparing with a baseline, whether the case got worse than its entry.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

import pytest

# Imported by the plugin when the first case runs. Everything a case needs is imported here at once,
# before any input is drawn: Hypothesis mixes constants of loaded local modules into its draws, so
# a module first imported between two cases would make draws depend on test order (xdist vs serial).
from .. import _baseline  # noqa: F401  (loaded before any case runs)
from .._check import check_case
from .._errors import ArgumentError, JaxstabError
from ._marker import MARKER, MarkerError, parse_marker
from ._precision import asked_on_case, plan_record, usage_problem, wanted
from ._session import CASES_KEY, COMPLETE_KEY, PENDING_KEY, SESSION_KEY, JaxstabSession, pending_failures

__all__ = ["CASES_KEY", "COMPLETE_KEY", "PENDING_KEY", "JaxstabFixture", "pending_failures", "run_case",
           "run_marked"]

#: Seconds of saturation and candidate search per proposal (``jst.improve``'s ``time_limit``): a failing
#: suite with the search on stays within a few seconds per failing case.
SEARCH_TIME_LIMIT = 10.0


def _session(item: pytest.Item) -> JaxstabSession:
    return item.config.stash[SESSION_KEY]


def case_settings(session: JaxstabSession, given: Any, options: Mapping[str, Any], entry: str,
                  where: str) -> Any:
    """The case's ``jst.settings``: the session's, then ``given`` (a settings object), then ``options``."""
    from .._settings import layered

    base = session.options.settings
    if base is None:
        from .._settings import root

        base = root()
    return layered(base, {"settings": given, **options}, entry, where=where)


def run_case(item: pytest.Item, fn: Callable[..., Any], *, nodeid: str, shapes: Any, dtype: Any,
             domain: Any = None, settings: Any = None, options: Mapping[str, Any] | None = None,
             entry: str = "marker", defer: bool = False,
             annotate: Callable[[Any, Any], str] | None = None) -> Any:
    """Checks ``fn`` as case ``nodeid`` of ``item``; fails the test when the case fails.

    The case's settings are the session's with ``settings`` (a ``jst.settings``) and ``options`` (the
    marker's or the call's values, as ``entry`` takes them) applied, resolved once here.

    With ``defer``, a failing verdict is kept on the item and the test fails once its body has
    finished (:func:`pending_failures`), so that every check of the test runs and is recorded. An error
    (bad arguments, nothing judged, ...) fails the test at once: there is no result to record.

    ``annotate(result, settings)``, called when the case fails its verdict, returns a paragraph added to
    its message before any search proposal (the scan's note on input magnitudes), or "".

    Returns the :class:`CaseResult`.
    """
    __tracebackhide__ = True
    session = _session(item)
    problem = None
    result: Any = None  # check's CaseResult; when check raises, pytest.fail below ends the test
    chosen: Any = None
    try:
        chosen = case_settings(session, settings, options or {}, entry,
                               "jaxstab.check()" if entry == "fixture" else f"@pytest.mark.{MARKER}")
        misuse = usage_problem(dtype, asked_on_case(options or {}, settings))
        if misuse is not None:
            raise ArgumentError(misuse)
        result = check_case(fn, shapes=shapes, dtype=dtype, domain=domain, settings=_for_check(chosen),
                       name=nodeid, witnesses=session.witnesses(nodeid),
                       derandomize=session.options.derandomize,
                       gradient_witnesses=session.gradient_witnesses(nodeid) if chosen.grad else ())
    except JaxstabError as exc:
        # Bad arguments, an untraceable function, a primitive the oracle cannot evaluate exactly: the
        # reason, not a traceback.
        problem = f"{nodeid}: {type(exc).__name__}: {exc}"
    if problem is not None:  # outside the except block: no "during handling..." chain in the report
        pytest.fail(problem, pytrace=False)
    if wanted(result.dtype, chosen):  # before the gate: it compares the plan's kept lines
        result.precision = plan_record(fn, shapes=shapes, dtype=result.dtype, domain=domain, chosen=chosen)
    failure = _judge(session, result)
    if failure is not None and result.precision is not None:
        result.message += ("\n\n" if result.message else "") + result.precision.describe()
        failure = _judge(session, result)
    if annotate is not None and failure is not None and result.outcome == "failed":
        note = annotate(result, chosen)
        if note:
            result.message += note
            failure = _judge(session, result)
    # Searched only for a case that fails the test (a known instability of the baseline does not) and
    # that the catalogue does not fix, nor for a wrong rewrite alone (the rule is to fix, not the
    # formula); jst.improve's time limit bounds the cost per case.
    # A gradient that fails unfixed has its derivative searched (the value too when it fails as well).
    value_unfixed = result.rewritten.verdict != "pass"
    derivatives: bool | str = False
    if _gradient_unfixed(result):
        derivatives = True if value_unfixed else "only"
    unfixed = (result.outcome == "failed" and (value_unfixed or derivatives is not False)
               and not _only_wrong_rewrite(result))
    if chosen.search and failure is not None and unfixed:
        result.message += _proposal(fn, shapes, dtype, domain, chosen.seed, derivatives)
        failure = _judge(session, result)
    item.stash.setdefault(CASES_KEY, []).append(result)
    if failure is not None:
        if defer:
            item.stash.setdefault(PENDING_KEY, []).append(failure)
        else:
            pytest.fail(failure, pytrace=False)
    return result


def _only_wrong_rewrite(result: Any) -> bool:
    """The case fails only for a rewrite that makes it worse (the function as written passes, value
    and gradient): the fix is the rule, not a search for a better formula."""
    cases = [c for c in (result, result.gradient) if c is not None]
    return any(c.rewrite_regression is not None for c in cases) and all(
        c.original.verdict == "pass" for c in cases)


def _for_check(chosen: Any) -> Any:
    """``chosen`` as ``jst.check`` takes it: every value explicit, so that no loaded profile of the
    process (``jst.settings.load_profile``) comes between the session's resolution and the case."""
    from .._settings import root, settings

    return settings(root(), **chosen.as_dict())


def _gradient_unfixed(result: Any) -> bool:
    """The case's gradient fails, and so does the catalogue's rewrite of it."""
    g = result.gradient
    return g is not None and g.outcome == "failed" and g.rewritten.verdict != "pass"


def _proposal(fn: Callable[..., Any], shapes: Any, dtype: Any, domain: Any, seed: int | None,
              derivatives: bool | str = False) -> str:
    """What ``jst.improve`` finds for a case the catalogue does not fix, as a paragraph of the message;
    ``derivatives`` (``jst.improve``'s): a failing gradient's partial derivatives searched too, within
    the same time limit, the proposal the ``@jax.custom_jvp`` program with each partial's figures."""
    from .._search import improve

    try:
        imp = improve(fn, shapes=shapes, dtype=dtype, domain=domain, seed=seed, time_limit=SEARCH_TIME_LIMIT,
                      derivatives=derivatives)
    except JaxstabError as exc:
        return f"\n\njst.improve could not search: {exc}"
    if not imp.improved:
        return f"\n\njst.improve: {imp.status}"
    if imp.partials:
        return f"\n\njst.improve proposes, for the derivative:\n{imp.report().removeprefix('jst.improve: ')}"
    return f"\n\njst.improve proposes ({imp.status}):\n{imp.source}"


def _judge(session: JaxstabSession, result: Any) -> str | None:
    """Why the case fails the test, or None: the verdict, or when comparing, the gate's decision."""
    comparison = session.compare_case(result)
    if comparison is None or comparison.status == "new":
        if result.outcome == "failed":
            note = f"\n(not in the baseline: {comparison.message})" if comparison is not None else ""
            return result.message + note
        return None
    if comparison.status == "regressed":
        detail = f"\n\n{result.message}" if result.message else ""
        return f"regressed against the jaxstab baseline: {comparison.message}{detail}"
    gradient = result.gradient
    if comparison.gradient == "new" and gradient is not None and gradient.outcome == "failed":
        # judged by its verdict, as a case new to the baseline is (the baseline predates grad=True)
        return (f"the gradient is not in the jaxstab baseline (saved before grad=True) and fails:\n\n"
                f"{gradient.message}")
    return None  # "known", "improved", "unchanged": reported in the session summary, not failed.


def run_marked(item: pytest.Function) -> None:
    """Runs a ``stabilize``-marked test: its body, with drawn arrays, is the function under test."""
    __tracebackhide__ = True
    mark = item.get_closest_marker(MARKER)
    assert mark is not None
    func = item.obj
    problem = ""
    try:
        spec = parse_marker(mark, getattr(func, "__func__", func), is_method=item.cls is not None)
    except MarkerError as exc:
        spec, problem = None, f"{item.nodeid}: bad @pytest.mark.{MARKER}: {exc}"
    if spec is None:
        pytest.fail(problem, pytrace=False)
    wanted = [p for p in inspect.signature(func).parameters if p not in spec.names]
    fixtures = {name: item.funcargs[name] for name in wanted if name in item.funcargs}

    def body(**arrays: Any) -> Any:
        return func(**fixtures, **arrays)

    body.__name__ = getattr(func, "__name__", "test")
    body.__qualname__ = getattr(func, "__qualname__", body.__name__)
    shapes = dict(zip(spec.names, spec.shapes))  # by name: the failure message names the parameters
    run_case(item, body, nodeid=item.nodeid, shapes=shapes, dtype=spec.dtype, domain=spec.domain,
             settings=spec.settings, options=spec.options, entry="marker")


class JaxstabFixture:
    """The ``jaxstab`` fixture: check functions defined elsewhere from inside a test.

    Every ``check`` call of a test runs and is recorded; the test fails after its body when one of
    them failed (all failures shown).

    Example::

        def test_loss(jaxstab):
            jaxstab.check(mylib.loss, shapes=[(8, 4), (8,)], dtype="float32", domain=(-10, 10))
    """

    def __init__(self, item: pytest.Item) -> None:
        self._item = item
        self._count = 0
        self._names: set[str] = set()

    def check(self, fn: Callable[..., Any], *, shapes: Any, dtype: Any, domain: Any = None,
              name: str | None = None, settings: Any = None, **options: Any) -> Any:
        """Fuzz ``fn`` as ``jst.check`` does, with the session's settings; the test fails if it fails.

        A failing case does not stop the test: the remaining checks run and are recorded (and
        baselined), and the test fails once its body has finished, with every failure.

        Args:
            fn, shapes, dtype, domain: as for ``jst.check``.
            name: the case's name in reports and baselines, appended to the test's id
                (``test_x.py::test_loss::name``); needed to tell apart several checks in one test, and
                distinct within the test. The first unnamed check is named after the test itself.
            settings: a ``jst.settings`` applied over the session's (``--jaxstab-*`` options, ini keys,
                ``--jaxstab-profile``).
            **options: any ``jst.settings`` option the fixture takes (those of ``jst.check``, and
                ``search``), overriding both.

        Returns:
            The :class:`CaseResult`.
        """
        __tracebackhide__ = True
        nodeid = self._item.nodeid
        if name is not None:
            nodeid = f"{nodeid}::{name}"
        elif self._count:
            nodeid = f"{nodeid}::{getattr(fn, '__name__', 'check')}#{self._count + 1}"
        if nodeid in self._names:
            shown = repr(name) if name is not None else f"the automatic name {nodeid.rsplit('::', 1)[-1]!r}"
            pytest.fail(f"{self._item.nodeid}: two jaxstab.check calls in this test are named {shown}: the "
                        "second would replace the first in reports and baselines. Give each check its own "
                        "name= (e.g. name=\"mse\", name=\"huber\").", pytrace=False)
        self._names.add(nodeid)
        self._count += 1
        return run_case(self._item, fn, nodeid=nodeid, shapes=shapes, dtype=dtype, domain=domain,
                        settings=settings, options=options, entry="fixture", defer=True)
