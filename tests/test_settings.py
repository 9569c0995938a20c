"""``jst.settings``: one declaration of the per-case options, one default each, resolved once in the
order ini < profile < command line < marker < call, and reaching every entry point from the declaration
alone (a test fork of it adds an option and sees it everywhere)."""

from __future__ import annotations

import math

import jax.numpy as jnp
import pytest

import pytest_jaxstab as jst
from pytest_jaxstab import _settings
from pytest_jaxstab._check import _case
from pytest_jaxstab._results import CaseResult


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, jst.settings]]:
    """The (case id, settings) of every case the pipeline is handed; the pipeline itself is skipped
    (a passing stub result), so that these tests measure the resolution, not the fuzzing."""
    records: list[tuple[str, jst.settings]] = []

    def spy(case, s, run, *, derivative=False):
        records.append((case.case_id, s))
        result = CaseResult(case.case_id, str(case.dtype))
        result.outcome = "passed"
        return result

    monkeypatch.setattr(_case, "judge_case", spy)
    return records


@pytest.fixture(autouse=True)
def _own_profiles(monkeypatch: pytest.MonkeyPatch) -> None:
    # Profiles registered by a test (or its pytester conftest) do not outlive it.
    monkeypatch.setattr(jst.settings, "_profiles", dict(jst.settings._profiles))
    monkeypatch.setattr(jst.settings, "default", jst.settings.default)


def _tanh(x):
    return jnp.tanh(x)


MARKED_AND_FIXTURE = """
import jax.numpy as jnp
import pytest

@pytest.mark.stabilize(dtype="float32", shapes={"x": (2,)}{marker})
def test_marked(x):
    return jnp.tanh(x)

def test_fixture(jaxstab):
    jaxstab.check(jnp.tanh, shapes=[(2,)], dtype="float32"{call})
"""


def _suite(pytester: pytest.Pytester, marker: str = "", call: str = "") -> None:
    pytester.makepyfile(test_cases=MARKED_AND_FIXTURE.replace("{marker}", marker).replace("{call}", call))


def _by_test(seen: list[tuple[str, jst.settings]]) -> dict[str, jst.settings]:
    return {case_id.rsplit("::", 1)[-1]: s for case_id, s in seen}


# --- the object ----------------------------------------------------------------------------------------


def test_settings_are_frozen_and_inherit_from_their_parent():
    base = jst.settings(max_examples=1000, seed=0)
    child = jst.settings(base, tolerance_bits=4)
    assert (child.max_examples, child.seed, child.tolerance_bits) == (1000, 0, 4.0)
    assert (base.tolerance_bits, jst.settings().max_examples) == (8.0, 100)  # the declared defaults
    with pytest.raises(AttributeError, match="frozen"):
        child.max_examples = 3
    assert jst.settings(oracle_budget=math.inf).oracle_budget is None  # both spellings of "no limit"


def test_every_option_is_declared_once_with_a_default_that_passes_its_own_validation():
    names = [o.name for o in _settings.OPTIONS]
    assert len(names) == len(set(names))
    for opt in _settings.OPTIONS:
        assert opt.check(opt.default) == opt.default, opt.name
        assert opt.doc and opt.where <= set(_settings.ENTRY_POINTS), opt.name


def test_profiles_register_load_and_name_the_unknown():
    jst.settings.register_profile("ci", max_examples=1000, time_budget=None)
    ci = jst.settings.get_profile("ci")
    assert (ci.max_examples, ci.time_budget, ci.tolerance_bits) == (1000, None, 8.0)
    jst.settings.load_profile("ci")
    assert jst.settings().max_examples == 1000  # a new settings object starts from the loaded profile
    with pytest.raises(jst.SettingsError, match=r"unknown jaxstab profile 'nightly'.*'ci'"):
        jst.settings.get_profile("nightly")


def test_jst_check_starts_from_the_loaded_profile_and_its_arguments_win(seen):
    jst.settings.register_profile("quick", max_examples=7, seed=3)
    jst.settings.load_profile("quick")
    jst.check(_tanh, shapes=[(2,)], dtype="float32", name="a")
    jst.check(_tanh, shapes=[(2,)], dtype="float32", name="b", seed=5,
              settings=jst.settings(tolerance_bits=2))
    a, b = (s for _, s in seen)
    assert (a.max_examples, a.seed, a.tolerance_bits) == (7, 3, 8.0)
    assert (b.max_examples, b.seed, b.tolerance_bits) == (7, 5, 2.0)


# --- one default everywhere ------------------------------------------------------------------------------


def test_one_number_of_inputs_by_default_everywhere(pytester, run_jaxstab, seen, monkeypatch):
    # 100 (Hypothesis's own default), stated in the README: a marked test drew the Hypothesis profile's
    # number and jst.check 200 before the settings existed.
    _suite(pytester)
    run_jaxstab().assert_outcomes(passed=2)
    jst.check(_tanh, shapes=[(2,)], dtype="float32", name="direct")
    drawn = {name: s.max_examples for name, s in _by_test(seen).items()}
    assert drawn == {"test_marked": 100, "test_fixture": 100, "direct": 100}

    from pytest_jaxstab._search import _improve

    counts = []
    monkeypatch.setattr(_improve, "_improve", lambda fn, dt, shapes, names, kw, params, domain, n, *a:
                        counts.append(n))
    jst.improve(_tanh, shapes=[()], dtype="float32")
    assert counts == [100]


# --- precedence ------------------------------------------------------------------------------------------

PROFILE_CONFTEST = """
import pytest_jaxstab as jst

jst.settings.register_profile("p", max_examples=7, seed=11, tolerance_bits=3)
jst.settings.register_profile("q", max_examples=8)
"""


def test_ini_then_profile_then_command_line_then_marker_then_call(pytester, run_jaxstab, seen):
    pytester.makeconftest(PROFILE_CONFTEST)
    pytester.makeini("[pytest]\njaxstab_examples = 5\njaxstab_seed = 2\njaxstab_tolerance_bits = 6\n"
                     "jaxstab_judge = accuracy\njaxstab_time_budget = 50\njaxstab_profile = p\n")
    _suite(pytester, marker=", tolerance_bits=2", call=", tolerance_bits=1, settings=__import__("
                                                         "'pytest_jaxstab').settings(max_examples=9)")
    run_jaxstab("--jaxstab-seed=13").assert_outcomes(passed=2)
    got = _by_test(seen)
    marked, fixture = got["test_marked"], got["test_fixture"]
    # the profile over the ini, the command line over the profile, the marker over the profile
    assert (marked.max_examples, marked.seed, marked.tolerance_bits) == (7, 13, 2.0)
    assert (marked.judge, marked.time_budget) == ("accuracy", 50.0)  # ini values nothing overrides
    # the call's settings object, then its keywords, over everything
    assert (fixture.max_examples, fixture.seed, fixture.tolerance_bits) == (9, 13, 1.0)

    seen.clear()
    run_jaxstab("--jaxstab-profile=q").assert_outcomes(passed=2)  # the option wins over the ini key
    marked = _by_test(seen)["test_marked"]
    assert (marked.max_examples, marked.seed, marked.tolerance_bits) == (8, 2, 2.0)


def test_an_unknown_profile_is_a_usage_error_naming_it(pytester, run_jaxstab):
    pytester.makeconftest(PROFILE_CONFTEST)
    _suite(pytester)
    result = run_jaxstab("--jaxstab-profile=nightly")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--jaxstab-profile*unknown jaxstab profile 'nightly'*'p', 'q'*"])


@pytest.mark.parametrize(("args", "ini", "shown"), [
    (("--jaxstab-tolerance-bits=lots",), "", "*--jaxstab-tolerance-bits='lots': expected a number >= 0*"),
    (("--jaxstab-time-budget=0",), "", "*--jaxstab-time-budget='0': expected a number > 0*"),
    ((), "jaxstab_judge = precision", "*jaxstab_judge='precision': expected stability or accuracy*"),
    ((), "jaxstab_seed = -1", "*jaxstab_seed='-1': expected an integer >= 0*"),
])
def test_a_bad_option_value_is_a_usage_error_naming_the_option(pytester, run_jaxstab, args, ini, shown):
    if ini:
        pytester.makeini(f"[pytest]\n{ini}\n")
    _suite(pytester)
    result = run_jaxstab(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([shown])


# --- a new option is one entry ---------------------------------------------------------------------------


def _answer_option() -> _settings.Option:
    def validate(value):
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 9:
            raise _settings.Invalid("a digit 0-9")
        return value

    def parse(text):
        try:
            return validate(int(text))
        except ValueError:
            raise _settings.Invalid("a digit 0-9") from None

    return _settings.Option("answer", 0, "a digit that only this test's fork declares", validate, parse)


def test_an_option_added_to_the_declaration_reaches_every_entry_point(pytester, run_jaxstab, seen,
                                                                      monkeypatch):
    monkeypatch.setattr(_settings, "OPTIONS", (*_settings.OPTIONS, _answer_option()))
    markers = run_jaxstab("--markers")
    markers.stdout.fnmatch_lines(["*stabilize(dtype, shapes, *answer=0)*answer: a digit that only this "
                                  "test's fork declares*"])
    helped = run_jaxstab("--help")
    helped.stdout.fnmatch_lines(["*--jaxstab-answer=VALUE*", "*jaxstab_answer (string):*"])

    pytester.makeini("[pytest]\njaxstab_answer = 3\n")
    _suite(pytester, marker=", answer=7")
    run_jaxstab().assert_outcomes(passed=2)
    assert {name: s.answer for name, s in _by_test(seen).items()} == {"test_marked": 7, "test_fixture": 3}

    seen.clear()
    _suite(pytester, call=", answer=5")
    run_jaxstab("--jaxstab-answer=6").assert_outcomes(passed=2)  # the command line over the ini key
    assert {name: s.answer for name, s in _by_test(seen).items()} == {"test_marked": 6, "test_fixture": 5}

    seen.clear()
    jst.check(_tanh, shapes=[(2,)], dtype="float32", answer=4)
    assert seen[0][1].answer == 4
    with pytest.raises(jst.SettingsError, match=r"answer=42: expected a digit 0\-9"):
        jst.check(_tanh, shapes=[(2,)], dtype="float32", answer=42)

    _suite(pytester, marker=", answer=42")
    bad = run_jaxstab()
    bad.assert_outcomes(errors=1)  # a collection error: the session stops before running
    bad.stdout.fnmatch_lines(["*bad @pytest.mark.stabilize: answer=42: expected a digit 0-9*"])


def test_a_markers_settings_object_applies_under_its_keywords(pytester, run_jaxstab, seen):
    pytester.makepyfile(test_m="""
import jax.numpy as jnp
import pytest
import pytest_jaxstab as jst

@pytest.mark.stabilize(dtype="float32", shapes={"x": (2,)}, settings=jst.settings(max_examples=4, seed=21),
                       seed=22)
def test_marked(x):
    return jnp.tanh(x)
""")
    run_jaxstab("--jaxstab-examples=9").assert_outcomes(passed=1)
    (s,) = _by_test(seen).values()
    assert (s.max_examples, s.seed) == (4, 22)


def test_none_for_an_option_that_takes_no_none_leaves_the_sessions_value(pytester, run_jaxstab, seen):
    # As the marker and the fixture read None before the settings existed; oracle_budget and
    # time_budget take None as a value (no limit), so None there is not "the session's".
    _suite(pytester, marker=", max_examples=None, timing=None, oracle_budget=None",
           call=", judge=None, max_examples=None")
    run_jaxstab("--jaxstab-examples=9", "--jaxstab-judge=accuracy").assert_outcomes(passed=2)
    marked, fixture = _by_test(seen)["test_marked"], _by_test(seen)["test_fixture"]
    assert (marked.max_examples, marked.timing, marked.oracle_budget) == (9, False, None)
    assert (fixture.max_examples, fixture.judge) == (9, "accuracy")
    seen.clear()
    jst.check(_tanh, shapes=[(2,)], dtype="float32", max_examples=None)
    assert seen[0][1].max_examples == 100
