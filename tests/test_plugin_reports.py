"""Report formats (terminal, JSON, HTML), ini keys and Hypothesis settings profiles, through pytester."""

from __future__ import annotations

import json
import sys

import pytest

from pytest_jaxstab._report import validate_report

SUITE = '''
import jax.numpy as jnp
import pytest

@pytest.mark.stabilize(dtype="float32", shapes={"x": (8,)}, domain=(-5, 5))
def test_stable(x):
    return jnp.tanh(x)

@pytest.mark.stabilize(dtype="float32", shapes={"x": (16,)}, domain=(85, 100))
def test_overflow(x):
    return jnp.log(jnp.sum(jnp.exp(x)))

def test_fixture(jaxstab):
    jaxstab.check(jnp.sin, shapes=[(4,)], dtype="float32", domain=(-3, 3), name="sin")
'''


@pytest.fixture
def suite(pytester):
    pytester.makepyfile(test_suite=SUITE)
    return pytester


def test_terminal_and_json_reports(suite, run_jaxstab, plugin_args):
    result = run_jaxstab("--jaxstab-examples=15", "--jaxstab-report", "--jaxstab-report=json:out/r.json",
                         *plugin_args)
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines([
        "*= jaxstab =*",
        "case*dtype*samples*",
        "test_suite.py::test_overflow*float32*32.0*logsumexp*exp @ test_suite.py:*",
        "test_suite.py::test_stable*float32*",
        "*json report written: out/r.json*",
    ])
    report = json.loads((suite.path / "out" / "r.json").read_text())
    validate_report(report)
    ids = [c["nodeid"] for c in report["cases"]]
    assert ids == sorted(["test_suite.py::test_stable", "test_suite.py::test_overflow",
                          "test_suite.py::test_fixture::sin"])
    by_id = {c["nodeid"]: c for c in report["cases"]}
    overflow = by_id["test_suite.py::test_overflow"]
    assert overflow["outcome"] == "failed"
    assert overflow["original"]["overflows"] > 0 and overflow["rewritten"]["verdict"] == "pass"
    assert overflow["rewrites"][0]["rule"] == "logsumexp"
    assert overflow["nan_origins"][0]["variant"] == "original"
    assert by_id["test_suite.py::test_stable"]["outcome"] == "passed"
    assert report["backends"] and report["jax_version"]


def test_html_report(suite, run_jaxstab):
    pytest.importorskip("matplotlib")
    result = run_jaxstab("-k", "overflow", "--jaxstab-examples=10", "--jaxstab-report=html:out/r.html")
    result.stdout.fnmatch_lines(["*html report written: out/r.html*"])
    html = (suite.path / "out" / "r.html").read_text()
    assert "test_suite.py::test_overflow" in html and "<svg" in html


def test_html_report_without_matplotlib_is_a_usage_error(suite, run_jaxstab, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if not installed
    result = run_jaxstab("--jaxstab-report=html:r.html")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "html needs matplotlib: pip install 'pytest-jaxstab[html]'" in result.stderr.str()


def test_ini_keys(suite, run_jaxstab):
    suite.makeini('''
        [pytest]
        jaxstab_examples = 7
        jaxstab_seed = 3
        jaxstab_report = term json:ini.json
    ''')
    result = run_jaxstab()
    result.stdout.fnmatch_lines(["jaxstab: examples=7, seed=3, search=off", "*= jaxstab =*",
                                 "*json report written*"])
    report = json.loads((suite.path / "ini.json").read_text())
    # 7 draws; a failing case also counts its shrunk input; duplicates count once.
    assert all(1 <= c["samples"] <= 8 for c in report["cases"])
    # The command line wins over the ini file.
    run_jaxstab("--jaxstab-examples=4", "--jaxstab-report=json:cli.json")
    report = json.loads((suite.path / "cli.json").read_text())
    assert all(1 <= c["samples"] <= 5 for c in report["cases"])


def test_bad_option_values_are_usage_errors(suite, run_jaxstab):
    result = run_jaxstab("--jaxstab-examples=0")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--jaxstab-examples='0': expected an integer >= 1*"])
    result = run_jaxstab("--jaxstab-report=xml:out.xml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--jaxstab-report='xml:out.xml': expected term, json:PATH or html:PATH*"])
    result = run_jaxstab("--jaxstab-compare-fail=bytes:2")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*unknown figure 'bytes'*"])


def test_the_loaded_jaxstab_profile_sets_max_examples(suite, run_jaxstab):
    # The number of inputs is a jst.settings option (one default, 100, for the marker and jst.check
    # alike); a profile loaded in conftest.py sets it, as a Hypothesis profile did before the settings.
    import pytest_jaxstab as jst

    suite.makeconftest('''
        import pytest_jaxstab as jst
        jst.settings.register_profile("tiny", max_examples=5)
        jst.settings.load_profile("tiny")
    ''')
    previous = jst.settings.default
    try:
        run_jaxstab("-k", "stable", "--jaxstab-report=json:p.json")
    finally:
        jst.settings.default = previous  # the run was in this process
    (case,) = json.loads((suite.path / "p.json").read_text())["cases"]
    assert 1 <= case["samples"] <= 5


def test_timing_option(suite, run_jaxstab):
    run_jaxstab("-k", "stable", "--jaxstab-examples=5", "--jaxstab-timing", "--jaxstab-report=json:t.json")
    (case,) = json.loads((suite.path / "t.json").read_text())["cases"]
    assert case["timing"][0]["backend"] == "cpu"  # cpu first, then any accelerator present
    assert case["timing"][0]["original_s"] > 0
