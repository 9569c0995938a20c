"""The baseline gate through pytester: save, compare, regressions, known instabilities, bad files, xdist."""

from __future__ import annotations

import json

import pytest

from tests.conftest import PLUGIN_ARGS

# test_known overflows only when an element passes 2.96 in (-5, 5): 30 examples find it with the
# fuzzer's array classes (15 did with the older per-element draws, by their weight on the domain's ends).
ARGS = ("--jaxstab-examples=30",)

STABLE = '''
import jax.numpy as jnp
import pytest

@pytest.mark.stabilize(dtype="float32", shapes={"x": (16,)}, domain=(85, 100))
def test_lse(x):
    return jnp.max(x) + jnp.log(jnp.sum(jnp.exp(x - jnp.max(x))))

@pytest.mark.stabilize(dtype="float32", shapes={"x": (16,)}, domain=(-5, 5))
def test_known(x):
    return jnp.log(jnp.sum(jnp.exp(x * 30.0)))

@pytest.mark.stabilize(dtype="float32", shapes={"x": (8,)}, domain=(-5, 5))
def test_tanh(x):
    return jnp.tanh(x)
'''
# test_lse loses its max-shift: an overflow the baseline did not have.
REGRESSED = STABLE.replace("jnp.max(x) + jnp.log(jnp.sum(jnp.exp(x - jnp.max(x))))",
                           "jnp.log(jnp.sum(jnp.exp(x)))")
BASELINE = ".jaxstab/baseline.json"


def _baseline(pytester: pytest.Pytester) -> dict:
    return json.loads((pytester.path / BASELINE).read_text())


def test_save_compare_regress_and_known_instability(pytester, run_jaxstab):
    pytester.makepyfile(test_models=STABLE)
    saved = run_jaxstab(*ARGS, "--jaxstab-save-baseline")
    saved.assert_outcomes(passed=2, failed=1)  # saving does not hide the known instability's verdict
    saved.stdout.fnmatch_lines(["*baseline saved: .jaxstab/baseline.json (3 cases from this run)*"])
    data = _baseline(pytester)
    assert sorted(data["cases"]) == ["test_models.py::test_known", "test_models.py::test_lse",
                                     "test_models.py::test_tanh"]
    assert data["cases"]["test_models.py::test_known"]["original"]["overflows"] > 0
    assert data["cases"]["test_models.py::test_known"]["witnesses"]

    unchanged = run_jaxstab(*ARGS, "--jaxstab-compare", "--jaxstab-compare-fail=bits:2,overflows:0")
    assert unchanged.ret == pytest.ExitCode.OK  # the known instability is reported, not failed
    unchanged.stdout.fnmatch_lines([
        "*jaxstab baseline: 0 regressed, 1 known, 0 improved, 2 unchanged, 0 new, 0 stale "
        "(compare-fail bits:2, overflows:0)",
        "known instabilities*",
        "*test_models.py::test_known (original function): known instability*",
    ])

    pytester.makepyfile(test_models=REGRESSED)
    regressed = run_jaxstab(*ARGS, "--jaxstab-compare")
    assert regressed.ret == pytest.ExitCode.TESTS_FAILED
    regressed.assert_outcomes(passed=2, failed=1)
    regressed.stdout.fnmatch_lines([
        "*regressed against the jaxstab baseline: test_models.py::test_lse (original function): *new "
        "overflow: *",
        "*1 regressed, 1 known*",
        "FAILED test_models.py::test_lse*",
    ])


def test_saving_touches_only_selected_tests_and_gone_tests_are_reported(pytester, run_jaxstab,
                                                                        plugin_args):
    # Under xdist the collected test ids reach the controller through workeroutput: stale entries and
    # the entries a save keeps must come out as in a serial run.
    pytester.makepyfile(test_models=STABLE)
    run_jaxstab(*ARGS, "--jaxstab-save-baseline")  # the starting point, saved serially
    before = _baseline(pytester)["cases"]
    pytester.makepyfile(test_models=STABLE.replace("jnp.tanh(x)", "jnp.tanh(x) * 1e30"))
    run_jaxstab(*ARGS, *plugin_args, "--jaxstab-save-baseline", "-k", "test_lse")
    after = _baseline(pytester)["cases"]
    assert after["test_models.py::test_tanh"] == before["test_models.py::test_tanh"]  # not selected
    assert after["test_models.py::test_known"] == before["test_models.py::test_known"]

    # Remove test_tanh: comparing reports its entry as stale, without failing.
    source = STABLE[: STABLE.index('@pytest.mark.stabilize(dtype="float32", shapes={"x": (8,)}')]
    pytester.makepyfile(test_models=source)
    result = run_jaxstab(*ARGS, *plugin_args, "--jaxstab-compare")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*1 stale*", "stale entries*", "  test_models.py::test_tanh"])


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("{not json", "not valid JSON"),
        ('{"version": 99, "jaxstab_version": "x", "cases": {}}',
         "version: this pytest-jaxstab reads version 1"),
        ('{"version": 1, "jaxstab_version": "x", "cases": {"t": {"dtype": "float32"}}}',
         "cases['t'].samples: missing key"),
    ],
)
def test_malformed_baseline_is_a_usage_error(pytester, run_jaxstab, content, problem):
    pytester.makepyfile(test_models=STABLE)
    path = pytester.path / "bad.json"
    path.write_text(content)
    result = run_jaxstab(*ARGS, f"--jaxstab-compare={path.name}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--jaxstab-compare: jaxstab baseline " in result.stderr.str()
    assert f"bad.json: {problem}" in result.stderr.str()  # the file and the problem
    # Saving over a damaged file is refused too: it is never overwritten silently.
    result = run_jaxstab(*ARGS, f"--jaxstab-save-baseline={path.name}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert path.read_text() == content
    missing = run_jaxstab(*ARGS, "--jaxstab-compare=nope.json")
    assert missing.ret == pytest.ExitCode.USAGE_ERROR
    missing.stderr.fnmatch_lines(["*nope.json: no such file*"])


def test_xdist_gives_the_same_reports_and_baseline_as_serial(pytester):
    pytest.importorskip("xdist")
    pytester.makepyfile(test_models=STABLE)
    pytester.makepyfile(test_more='''
        import jax.numpy as jnp
        import pytest

        @pytest.mark.stabilize(dtype="float32", shapes=[(4,), (4,)], domain=(-3, 3))
        def test_pair(a, b):
            return jnp.hypot(a, b)

        def test_fixture(jaxstab):
            jaxstab.check(jnp.expm1, shapes=[(4,)], dtype="float32", domain=(-1, 1))
    ''')
    args = (*PLUGIN_ARGS, "-p", "no:cacheprovider", *ARGS)
    serial = pytester.runpytest_subprocess(*args, "--jaxstab-save-baseline=serial.json",
                                           "--jaxstab-report=json:serial-report.json")
    assert serial.ret == pytest.ExitCode.TESTS_FAILED  # test_known fails
    # The same suite under xdist, comparing with the serial baseline (witnesses re-checked first, which
    # must not change any figure) while saving its own baseline and report.
    parallel = pytester.runpytest_subprocess(*args, "-n", "2", "--jaxstab-compare=serial.json",
                                             "--jaxstab-save-baseline=xdist.json",
                                             "--jaxstab-report=json:xdist-report.json")
    assert parallel.ret == pytest.ExitCode.OK  # the known instability is not a regression
    parallel.stdout.fnmatch_lines(["*2 workers*", "*0 regressed, 1 known, 0 improved, 4 unchanged, 0 new*"])
    def read(name: str) -> dict:
        return json.loads((pytester.path / name).read_text())

    baseline = {n: read(n)["cases"] for n in ("serial.json", "xdist.json")}
    assert len(baseline["serial.json"]) == 5
    assert baseline["serial.json"] == baseline["xdist.json"]
    reports = {n: read(n) for n in ("serial-report.json", "xdist-report.json")}
    # Case by case, bit for bit (outcome is the verdict: "failed" for test_known in both runs); only the
    # gate's decision differs: the xdist run compared with a baseline.
    cases = {n: [{k: v for k, v in c.items() if k != "gate"} for c in r["cases"]] for n, r in reports.items()}
    assert cases["serial-report.json"] == cases["xdist-report.json"]
    assert {c["gate"] for c in reports["xdist-report.json"]["cases"]} == {"known", "unchanged"}
