"""The baseline store: exact round trips, selective and atomic saves, validation on load, comparison."""

from __future__ import annotations

import json
import os
import re
import stat
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from pytest_jaxstab import BaselineError
from pytest_jaxstab._baseline import (
    RegressionMargin,
    compare,
    format_baseline_summary,
    load_baseline,
    parse_compare_fail,
    save_baseline,
    stale_nodeids,
)
from pytest_jaxstab._results import CaseResult, RewriteRecord, VariantStats, Witness

LSE = "tests/test_loss.py::test_logsumexp[float32]"
HYPOT = "tests/test_loss.py::test_hypot"
SOFTPLUS = "tests/test_act.py::test_softplus"


def _bits_of(dtype, *patterns: int, shape=None) -> np.ndarray:
    """An array of `dtype` from exact bit patterns (NaN payloads, -0.0, subnormals survive)."""
    uint = np.dtype(f"u{np.dtype(dtype).itemsize}")
    a = np.array(patterns, dtype=uint).view(dtype)
    return a.reshape(shape) if shape is not None else a


def tricky_witnesses() -> list[Witness]:
    f32 = _bits_of(np.float32,
                   0x80000000,  # -0.0
                   0x00000001,  # smallest subnormal
                   0x7FC00123,  # quiet NaN with a payload
                   0xFF800000,  # -inf
                   0x7F7FFFFF,  # largest finite
                   0x42B1999A,  # 88.8 (exp overflows)
                   shape=(2, 3))
    f64 = _bits_of(np.float64, 0x7FF0000000000001, 0x8000000000000000, 0x0000000000000001)  # sNaN, -0, sub
    f16 = _bits_of(np.float16, 0x0001, 0x7E01)  # subnormal, NaN payload
    bf16 = _bits_of(ml_dtypes.bfloat16, 0x8000, 0x7FC1, 0x0001)
    scalar: Any = np.float32(-0.0).reshape(())  # a numpy scalar, not an array
    return [Witness([f32, scalar], "original", 32.0, True),
            Witness([f64], "rewritten", 1.0, False),
            Witness([f16, bf16], "original", 16.0, True)]


def case(nodeid: str = LSE, *, original=(32.0, 4.5, 17, "fail"), rewritten=(1.5, 0.2, 0, "pass"),
         judged: str = "original", dtype: str = "float32", witnesses=None) -> CaseResult:
    return CaseResult(
        nodeid=nodeid, dtype=dtype, samples=200, discarded=2, uncertain=0,
        outcome="failed" if original[3] == "fail" else "passed",
        original=VariantStats(*original), rewritten=VariantStats(*rewritten),
        rewrites=[RewriteRecord("logsumexp_shift", "tests/test_loss.py:12")],
        witnesses=tricky_witnesses() if witnesses is None else witnesses, judged=judged,
    )


def assert_same_witnesses(got: list[Witness], want: list[Witness]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert (g.variant, g.error_bits, g.overflow) == (w.variant, w.error_bits, w.overflow)
        assert len(g.args) == len(w.args)
        for a, b in zip(g.args, w.args):
            assert a.dtype == b.dtype
            assert a.shape == b.shape
            uint = np.dtype(f"u{a.dtype.itemsize}")
            assert np.array_equal(a.view(uint), b.view(uint)), (a, b)


# --- save / load -------------------------------------------------------------------------------------


def test_save_load_round_trip_is_bit_exact(tmp_path):
    path = tmp_path / ".jaxstab" / "baseline.json"  # directory created on save
    cases = [case(), case(HYPOT, original=(0.5, 0.1, 0, "pass"), rewritten=(0.5, 0.1, 0, "pass"),
                          dtype="float64", witnesses=[])]
    save_baseline(path, cases, existing=None)
    loaded = load_baseline(path)
    assert sorted(loaded.entries) == sorted(c.nodeid for c in cases)
    for c in cases:
        entry = loaded.entries[c.nodeid]
        assert (entry.dtype, entry.samples) == (c.dtype, c.samples)
        assert entry.original == c.original
        assert entry.rewritten == c.rewritten
        assert_same_witnesses(entry.witnesses, c.witnesses)
    raw = json.loads(path.read_text())
    assert raw["version"] == 1
    assert isinstance(raw["jaxstab_version"], str)
    assert set(raw["cases"][LSE]) >= {"dtype", "original", "rewritten", "witnesses", "samples"}
    if os.name == "posix":
        assert stat.S_IMODE(path.stat().st_mode) == 0o644


def test_selective_save_keeps_other_entries(tmp_path):
    path = tmp_path / "baseline.json"
    save_baseline(path, [case(LSE), case(HYPOT), case(SOFTPLUS)], existing=None)
    before = json.loads(path.read_text())["cases"]
    improved = case(LSE, original=(3.0, 0.5, 0, "pass"), witnesses=[])
    # This run produced LSE (now better); HYPOT and SOFTPLUS did not run: their entries stay.
    save_baseline(path, [improved], existing=load_baseline(path))
    after = json.loads(path.read_text())["cases"]
    assert sorted(after) == sorted([LSE, HYPOT, SOFTPLUS])
    assert after[HYPOT] == before[HYPOT]
    assert after[SOFTPLUS] == before[SOFTPLUS]  # untouched, byte for byte in JSON terms
    assert after[LSE]["original"]["max_error_bits"] == 3.0
    assert_same_witnesses(load_baseline(path).entries[SOFTPLUS].witnesses, tricky_witnesses())


def test_save_drops_only_the_entries_it_is_told_to_prune(tmp_path):
    path = tmp_path / "baseline.json"
    gone = "tests/test_loss.py::test_removed"
    save_baseline(path, [case(LSE), case(gone), case(SOFTPLUS)], existing=None)
    stale = stale_nodeids(load_baseline(path), [LSE, HYPOT])
    assert stale == [gone]  # SOFTPLUS: its file was not collected, so it is left alone
    save_baseline(path, [case(LSE)], existing=load_baseline(path), prune=stale)
    assert sorted(load_baseline(path).entries) == sorted([LSE, SOFTPLUS])


def test_fixture_check_entries_belong_to_their_test(tmp_path):
    check = f"{LSE}::mse"
    renamed = f"{LSE}::old_name"
    baseline = _baseline(tmp_path, [case(LSE), case(check), case(renamed)])
    # Collected, not run (skipped, deselected): nothing is stale.
    assert stale_nodeids(baseline, [LSE, HYPOT]) == []
    # The test's body ran to its end producing LSE and its "mse" check only: "old_name" is gone.
    assert stale_nodeids(baseline, [LSE], completed=[LSE], produced=[LSE, check]) == [renamed]
    # A test that stopped early (an error) may not have reached its checks: nothing of it is stale.
    assert stale_nodeids(baseline, [LSE], completed=[], produced=[LSE]) == []
    result = compare([case(LSE), case(check)], baseline, [], collected_nodeids=[LSE], completed=[LSE])
    assert result.stale == [renamed]


@pytest.mark.parametrize("where", ["json.dumps", "os.fsync", "os.replace"])
def test_a_crash_while_saving_leaves_the_old_file_intact(tmp_path, monkeypatch, where):
    path = tmp_path / "baseline.json"
    save_baseline(path, [case(LSE)], existing=None)
    before = path.read_bytes()

    def crash(*args, **kwargs):
        raise OSError(f"simulated crash in {where}")

    module, name = where.split(".")
    monkeypatch.setattr({"json": json, "os": os}[module], name, crash)
    with pytest.raises(OSError, match="simulated crash"):
        save_baseline(path, [case(LSE, original=(1.0, 0.1, 0, "pass")), case(HYPOT)],
                      existing=load_baseline(path))
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["baseline.json"]  # no temp file left behind
    assert load_baseline(path).entries[LSE].original.max_error_bits == 32.0


def _valid_file(tmp_path) -> tuple:
    path = tmp_path / "baseline.json"
    save_baseline(path, [case(LSE)], existing=None)
    return path, json.loads(path.read_text())


def _entry(d):
    return d["cases"][LSE]


@pytest.mark.parametrize(
    ("mutate", "problem"),
    [
        (lambda d: d.update(version=2), "version"),
        (lambda d: d.pop("version"), "version"),
        (lambda d: d.pop("cases"), "cases"),
        (lambda d: d.update(cases=[]), "cases"),
        (lambda d: d.update(jaxstab_version=1), "jaxstab_version"),
        (lambda d: _entry(d).pop("original"), "original: missing key"),
        (lambda d: _entry(d).update(samples="200"), "samples"),
        (lambda d: _entry(d)["original"].update(overflows=-1), "original.overflows"),
        (lambda d: _entry(d)["rewritten"].update(max_error_bits="many"), "rewritten.max_error_bits"),
        (lambda d: _entry(d)["original"].update(verdict="maybe"), "original.verdict"),
        (lambda d: _entry(d).update(witnesses={}), "witnesses"),
        (lambda d: _entry(d)["witnesses"][0].update(overflow="yes"), "witnesses[0].overflow"),
        (lambda d: _entry(d)["witnesses"][0]["args"][0]["hex"].pop(), "witnesses[0].args[0].hex"),
        (lambda d: _entry(d)["witnesses"][0]["args"][0]["hex"].__setitem__(0, "1ffffffff"),
         "witnesses[0].args[0].hex"),
        (lambda d: _entry(d)["witnesses"][0]["args"][0]["hex"].__setitem__(0, "zzzzzzzz"), "witnesses[0]"),
        (lambda d: _entry(d)["witnesses"][0]["args"][0].update(dtype="int32"), "args[0].dtype"),
        (lambda d: _entry(d)["witnesses"][0]["args"][0].update(shape=[2, "3"]), "args[0].shape"),
    ],
)
def test_malformed_file_is_a_clear_error(tmp_path, mutate, problem):
    path, data = _valid_file(tmp_path)
    mutate(data)
    path.write_text(json.dumps(data))
    with pytest.raises(BaselineError, match=re.escape(problem)) as info:
        load_baseline(path)
    message = str(info.value)
    assert str(path) in message
    assert "--jaxstab-save-baseline" in message
    assert info.value.path == str(path)


@pytest.mark.parametrize(("content", "problem"),
                         [("{not json", "not valid JSON"), ("[1, 2]", "expected an object"),
                          (b"\xff\xfe\x00", "cannot be read")])
def test_unreadable_file_is_a_clear_error(tmp_path, content, problem):
    path = tmp_path / "baseline.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    with pytest.raises(BaselineError, match=re.escape(problem)) as info:
        load_baseline(path)
    assert str(path) in str(info.value)


def test_missing_file_is_a_clear_error(tmp_path):
    path = tmp_path / "nope" / "baseline.json"
    with pytest.raises(BaselineError, match="no such file") as info:
        load_baseline(path)
    assert str(path) in str(info.value)
    assert "--jaxstab-save-baseline" in str(info.value)


# --- compare-fail expressions ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expr", "checks"),
    [
        ("bits:2", [RegressionMargin("bits", 2.0)]),
        ("bits:0.5, overflows:3", [RegressionMargin("bits", 0.5), RegressionMargin("overflows", 3)]),
        ("overflows:0", [RegressionMargin("overflows", 0)]),
    ],
)
def test_parse_compare_fail(expr, checks):
    assert parse_compare_fail(expr) == checks


@pytest.mark.parametrize("expr", ["", "mean:5%", "bits", "bits:-1", "bits:x", "bits:nan", "bits:inf",
                                  "overflows:1.5", "overflows:-1", "bits:1,bits:2", "bits:1,"])
def test_parse_compare_fail_rejects_bad_expressions(expr):
    with pytest.raises(ValueError, match="accepted") as info:
        parse_compare_fail(expr)
    assert repr(expr) in str(info.value)
    assert "bits:N" in str(info.value)


# --- compare -----------------------------------------------------------------------------------------


def _baseline(tmp_path, cases):
    path = tmp_path / "baseline.json"
    save_baseline(path, cases, existing=None)
    return load_baseline(path)


STABLE: dict[str, Any] = dict(original=(1.0, 0.2, 0, "pass"), rewritten=(1.0, 0.2, 0, "pass"))


def test_unchanged_run_does_not_fail(tmp_path):
    cases = [case(HYPOT, **STABLE)]
    result = compare(cases, _baseline(tmp_path, cases), parse_compare_fail("bits:0"),
                     collected_nodeids=[HYPOT])
    assert not result.failed
    assert [c.status for c in result.cases] == ["unchanged"]


def test_new_overflow_fails_naming_the_case(tmp_path):
    baseline = _baseline(tmp_path, [case(HYPOT, **STABLE)])
    now = case(HYPOT, original=(32.0, 0.4, 1, "fail"), rewritten=STABLE["rewritten"])
    result = compare([now], baseline, parse_compare_fail("bits:64"), collected_nodeids=[HYPOT])
    assert result.failed
    (regression,) = result.regressions
    assert HYPOT in regression.message
    assert "new overflow" in regression.message
    # with an explicit count margin the message is about the count
    counted = compare([now], baseline, parse_compare_fail("bits:64,overflows:0"), collected_nodeids=[HYPOT])
    assert "overflows rose 0 -> 1" in counted.regressions[0].message


def test_overflow_count_of_a_known_instability_may_move_by_default(tmp_path):
    # Counts depend on which inputs are drawn (they move with Hypothesis upgrades): by default only
    # a *new* overflow fails; growth of an already-overflowing case is reported as known.
    baseline = _baseline(tmp_path, [case(LSE)])  # 17 overflows in the baseline
    now = case(LSE, original=(32.0, 4.5, 25, "fail"))
    result = compare([now], baseline, parse_compare_fail("bits:0"), collected_nodeids=[LSE])
    assert not result.failed
    assert [c.nodeid for c in result.known] == [LSE]


@pytest.mark.parametrize(("grown", "fails"), [(3.0, True), (1.0, False)])
def test_error_growth_against_the_bits_margin(tmp_path, grown, fails):
    baseline = _baseline(tmp_path, [case(HYPOT, **STABLE)])
    now = case(HYPOT, original=(1.0 + grown, 0.3, 0, "pass"), rewritten=STABLE["rewritten"])
    result = compare([now], baseline, parse_compare_fail("bits:2"), collected_nodeids=[HYPOT])
    assert result.failed is fails
    if fails:
        message = result.regressions[0].message
        assert HYPOT in message
        assert "max error" in message
        assert "1.00 -> 4.00" in message
        assert "+3.00 bits" in message


def test_default_margins_fail_on_any_growth(tmp_path):
    baseline = _baseline(tmp_path, [case(HYPOT, **STABLE)])
    now = case(HYPOT, original=(1.5, 0.3, 0, "pass"), rewritten=STABLE["rewritten"])
    assert compare([now], baseline, None, collected_nodeids=[HYPOT]).failed
    # An explicit overflows margin leaves the default bits margin (0) in place.
    assert compare([now], baseline, parse_compare_fail("overflows:2"), collected_nodeids=[HYPOT]).failed


def test_overflows_margin_allows_that_many_new_overflows(tmp_path):
    baseline = _baseline(tmp_path, [case(LSE)])  # 17 overflows in the baseline
    now = case(LSE, original=(32.0, 4.5, 19, "fail"))
    assert not compare([now], baseline, parse_compare_fail("overflows:2"), collected_nodeids=[LSE]).failed
    assert compare([now], baseline, parse_compare_fail("overflows:1"), collected_nodeids=[LSE]).failed


def test_known_instability_is_reported_not_failed(tmp_path):
    cases = [case(LSE)]  # original overflows 17 times and fails its tolerance, in the baseline too
    result = compare(cases, _baseline(tmp_path, cases), [], collected_nodeids=[LSE])
    assert not result.failed
    assert [c.nodeid for c in result.known] == [LSE]
    summary = format_baseline_summary(result)
    assert "known instabilities" in summary
    assert LSE in summary


def test_improvement_and_new_cases_are_reported(tmp_path):
    baseline = _baseline(tmp_path, [case(LSE)])
    now = [case(LSE, original=(2.0, 0.5, 0, "pass")), case(SOFTPLUS, **STABLE)]
    result = compare(now, baseline, [], collected_nodeids=[LSE, SOFTPLUS])
    assert not result.failed
    assert [c.nodeid for c in result.improved] == [LSE]
    assert [c.nodeid for c in result.new] == [SOFTPLUS]
    assert "32.00 bits" in result.improved[0].message  # old figure
    assert "2.00 bits" in result.improved[0].message  # new figure


def test_judged_variant_is_compared(tmp_path):
    # With apply=True the rewritten function is what ships: its regression fails, the original's doesn't.
    baseline = _baseline(tmp_path, [case(LSE, judged="rewritten")])
    worse_original = case(LSE, original=(32.0, 9.0, 40, "fail"), judged="rewritten")
    assert not compare([worse_original], baseline, [], collected_nodeids=[LSE]).failed
    worse_rewritten = case(LSE, rewritten=(1.5, 0.2, 1, "fail"), judged="rewritten")
    result = compare([worse_rewritten], baseline, [], collected_nodeids=[LSE])
    assert result.failed
    assert "rewritten" in result.regressions[0].message


def test_dtype_change_is_not_compared(tmp_path):
    baseline = _baseline(tmp_path, [case(HYPOT, **STABLE)])
    now = case(HYPOT, original=(30.0, 0.3, 3, "fail"), rewritten=STABLE["rewritten"], dtype="float16")
    result = compare([now], baseline, [], collected_nodeids=[HYPOT])
    assert not result.failed
    assert "dtype changed" in result.cases[0].message


def test_stale_entries_are_reported(tmp_path):
    gone = "tests/test_loss.py::test_removed"
    other_file = "tests/test_other.py::test_x"  # its file was not collected this run
    baseline = _baseline(tmp_path, [case(LSE), case(gone), case(other_file)])
    result = compare([case(LSE)], baseline, [], collected_nodeids=[LSE, HYPOT])
    assert result.stale == [gone]
    assert not result.failed
    summary = format_baseline_summary(result)
    assert "stale" in summary
    assert gone in summary
    # With the rootdir, an entry whose test file no longer exists is stale too.
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_loss.py").write_text("")
    result = compare([case(LSE)], baseline, [], collected_nodeids=[LSE], rootdir=tmp_path)
    assert result.stale == sorted([gone, other_file])


def test_summary_lists_regressions_first(tmp_path):
    baseline = _baseline(tmp_path, [case(HYPOT, **STABLE), case(LSE)])
    now = [case(LSE), case(HYPOT, original=(9.0, 1.0, 0, "fail"), rewritten=STABLE["rewritten"])]
    result = compare(now, baseline, parse_compare_fail("bits:2"), collected_nodeids=[LSE, HYPOT])
    summary = format_baseline_summary(result).splitlines()
    assert summary[0].startswith("jaxstab baseline: 1 regressed, 1 known")
    assert summary[1].startswith("regressions")
    assert HYPOT in summary[2]
    assert "+8.00 bits" in summary[2]


def test_saved_entries_are_copies(tmp_path):
    c = case(HYPOT, **STABLE)
    saved = save_baseline(tmp_path / "b.json", [c], existing=None)
    c.original.max_error_bits = 99.0  # the plugin may keep mutating its results after saving
    assert saved.entries[HYPOT].original.max_error_bits == 1.0
