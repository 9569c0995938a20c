"""The baseline never loses an accepted case (issue 14, items 1-4), replayed through pytester.

The CI scenario: save the whole suite, then save again on every kind of subset (a node id, -k, --lf,
--collect-only, a skipped test), then compare: every accepted case is still known and the run passes.
Stale entries are reported and removed only by --jaxstab-prune-baseline in a run of the whole suite.
"""

from __future__ import annotations

import json

import pytest

from tests.conftest import PLUGIN_ARGS

# The slow tier (`make test-slow`, run in full by CI; `make test` leaves it out): docs/architecture.md,
# "Tests and their tiers".
pytestmark = pytest.mark.slow

ARGS = ("--jaxstab-examples=8",)
BASELINE = ".jaxstab/baseline.json"

MODELS = '''
import os

import jax.numpy as jnp
import pytest

@pytest.mark.stabilize(dtype="float32", shapes={"x": (8,)}, domain=(85, 100))
def test_lse(x):
    return jnp.max(x) + jnp.log(jnp.sum(jnp.exp(x - jnp.max(x))))

# Unstable: overflows for x > ~2.9. Accepted into the baseline, it is a known instability.
@pytest.mark.stabilize(dtype="float32", shapes={"x": (8,)}, domain=(-5, 5))
def test_known(x):
    return jnp.log(jnp.sum(jnp.exp(x * 30.0)))

@pytest.mark.stabilize(dtype="float32", shapes={"x": (4,)}, domain=(-3, 3))
def test_other(x):
    return jnp.tanh(x)

def softplus(x):
    return jnp.log(1.0 + jnp.exp(x))

def cosh(x):
    return (jnp.exp(x) + jnp.exp(-x)) / 2

# Two unstable checks in one test: both must run and both be recorded.
def test_two_checks(jaxstab):
    jaxstab.check(softplus, shapes=[(4,)], dtype="float32", domain=(80, 100), name="softplus")
    jaxstab.check(cosh, shapes=[(4,)], dtype="float32", domain=(80, 100), name="cosh")

# Skipped on some machines (think: GPU only); its checks' entries must survive a save there.
def test_sometimes_skipped(jaxstab):
    if os.environ.get("SKIP_IT"):
        pytest.skip("not on this machine")
    jaxstab.check(jnp.expm1, shapes=[(4,)], dtype="float32", domain=(-1, 1), name="expm1")
'''

MORE = '''
import jax.numpy as jnp

def test_fixture(jaxstab):
    jaxstab.check(lambda x: jnp.log(jnp.sum(jnp.exp(x * 2.0))), shapes=[(4,)], dtype="float32",
                  domain=(40, 60), name="scaled")
'''

ALL = sorted([
    "test_models.py::test_lse", "test_models.py::test_known", "test_models.py::test_other",
    "test_models.py::test_two_checks::softplus", "test_models.py::test_two_checks::cosh",
    "test_models.py::test_sometimes_skipped::expm1", "test_more.py::test_fixture::scaled",
])
KNOWN = 4  # test_known, softplus, cosh, scaled


def _cases(pytester: pytest.Pytester) -> dict:
    return json.loads((pytester.path / BASELINE).read_text())["cases"]


def _setup(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_models=MODELS, test_more=MORE)


def test_every_kind_of_subset_save_keeps_the_accepted_cases(pytester, run_jaxstab, monkeypatch):
    _setup(pytester)
    # Cache provider on: --lf needs it.
    run = lambda *args: pytester.runpytest(*PLUGIN_ARGS, *ARGS, *args)
    full = run("--jaxstab-save-baseline")
    full.assert_outcomes(passed=3, failed=3)
    # Both failing checks of test_two_checks were reported, after the test's body finished.
    full.stdout.fnmatch_lines(["*2 jaxstab checks failed*", "*test_two_checks::softplus: the function as "
                               "written is numerically unstable*"])
    full.stdout.fnmatch_lines(["*test_two_checks::cosh: the function as written is numerically unstable*"])
    saved = _cases(pytester)
    assert sorted(saved) == ALL
    path = pytester.path / BASELINE

    subsets = {
        "node id": ("test_models.py::test_other",),
        "-k": ("-k", "other"),
        "--lf": ("--lf",),
        "file": ("test_more.py",),
    }
    for what, selection in subsets.items():
        result = run(*selection, "--jaxstab-save-baseline")
        assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED), what
        assert _cases(pytester) == saved, what  # same code: same figures; nothing dropped
        result.stdout.fnmatch_lines(["*baseline saved: .jaxstab/baseline.json (* cases from this run); "
                                     "* other entries kept*"])

    before = path.read_bytes()
    collect = run("--collect-only", "--jaxstab-save-baseline")
    assert collect.ret == pytest.ExitCode.OK
    collect.stdout.fnmatch_lines(["*baseline not saved: no case ran*"])
    assert path.read_bytes() == before  # byte for byte

    monkeypatch.setenv("SKIP_IT", "1")
    skipped = run("--jaxstab-save-baseline")
    skipped.assert_outcomes(passed=2, failed=3, skipped=1)
    assert _cases(pytester) == saved
    monkeypatch.delenv("SKIP_IT")

    compare = run("--jaxstab-compare", "-p", "no:cacheprovider")
    assert compare.ret == pytest.ExitCode.OK, compare.stdout.str()
    compare.stdout.fnmatch_lines([f"*jaxstab baseline: 0 regressed, {KNOWN} known, 0 improved, "
                                  f"{len(ALL) - KNOWN} unchanged, 0 new, 0 stale*"])


def test_subset_save_and_compare_under_xdist(pytester):
    pytest.importorskip("xdist")
    _setup(pytester)
    args = (*PLUGIN_ARGS, "-p", "no:cacheprovider", *ARGS)
    pytester.runpytest(*args, "--jaxstab-save-baseline")
    saved = _cases(pytester)
    sub = pytester.runpytest_subprocess(*args, "-n", "2", "-k", "two_checks or lse",
                                        "--jaxstab-save-baseline")
    sub.assert_outcomes(passed=1, failed=1)
    assert _cases(pytester) == saved
    compare = pytester.runpytest_subprocess(*args, "-n", "2", "--jaxstab-compare")
    assert compare.ret == pytest.ExitCode.OK, compare.stdout.str()
    compare.stdout.fnmatch_lines([f"*0 regressed, {KNOWN} known, 0 improved, {len(ALL) - KNOWN} unchanged, "
                                  "0 new, 0 stale*"])


def test_stale_entries_are_reported_and_pruned_only_on_request(pytester, run_jaxstab):
    _setup(pytester)
    run_jaxstab(*ARGS, "--jaxstab-save-baseline")
    # test_other deleted; the "cosh" check renamed to "cosh2": two stale entries. Fixture checks that
    # still run are not stale, nor is the check of a test that did not run.
    edited = MODELS.replace("def test_other(x):\n    return jnp.tanh(x)", "def helper(x):\n    return x")
    edited = edited.replace('name="cosh"', 'name="cosh2"')
    pytester.makepyfile(test_models=edited)
    compare = run_jaxstab(*ARGS, "--jaxstab-compare", "-k", "not sometimes")
    compare.stdout.fnmatch_lines(["*2 stale*", "stale entries (their test or check is gone; drop them with "
                                  "--jaxstab-save-baseline --jaxstab-prune-baseline in a run of the whole "
                                  "suite):", "  test_models.py::test_other",
                                  "  test_models.py::test_two_checks::cosh"])
    assert "test_more.py::test_fixture::scaled\n" not in compare.stdout.str().split("stale entries")[1]
    assert "expm1" not in compare.stdout.str().split("stale entries")[1]

    kept = run_jaxstab(*ARGS, "--jaxstab-save-baseline")
    kept.stdout.fnmatch_lines(["*2 stale entries kept (drop them with *"])
    assert {"test_models.py::test_other", "test_models.py::test_two_checks::cosh"} <= set(_cases(pytester))

    for selection in (("-k", "lse"), ("test_models.py::test_lse",), ("--collect-only",)):
        refused = run_jaxstab(*ARGS, *selection, "--jaxstab-save-baseline", "--jaxstab-prune-baseline")
        assert refused.ret == pytest.ExitCode.USAGE_ERROR, selection
        refused.stderr.fnmatch_lines(["*--jaxstab-prune-baseline needs a run of the whole suite*"])
    alone = run_jaxstab(*ARGS, "--jaxstab-prune-baseline")
    assert alone.ret == pytest.ExitCode.USAGE_ERROR
    alone.stderr.fnmatch_lines(["*--jaxstab-prune-baseline goes with --jaxstab-save-baseline*"])

    pruned = run_jaxstab(*ARGS, "--jaxstab-save-baseline", "--jaxstab-prune-baseline")
    pruned.stdout.fnmatch_lines(["*pruned 2 stale entries: test_models.py::test_other, "
                                 "test_models.py::test_two_checks::cosh*"])
    cases = _cases(pytester)
    assert "test_models.py::test_other" not in cases
    assert "test_models.py::test_two_checks::cosh2" in cases
    assert "test_more.py::test_fixture::scaled" in cases
    assert "test_models.py::test_sometimes_skipped::expm1" in cases


def test_duplicate_check_names_in_one_test_are_an_error(pytester, run_jaxstab):
    pytester.makepyfile(test_dup='''
        import jax.numpy as jnp

        def test_named(jaxstab):
            jaxstab.check(jnp.tanh, shapes=[(4,)], dtype="float32", domain=(-1, 1), name="c")
            jaxstab.check(jnp.sinh, shapes=[(4,)], dtype="float32", domain=(-1, 1), name="c")

        def test_distinct(jaxstab):
            jaxstab.check(jnp.tanh, shapes=[(4,)], dtype="float32", domain=(-1, 1), name="c")
            jaxstab.check(jnp.sinh, shapes=[(4,)], dtype="float32", domain=(-1, 1), name="d")
            jaxstab.check(jnp.sinh, shapes=[(4,)], dtype="float32", domain=(-1, 1))
    ''')
    result = run_jaxstab(*ARGS, "--jaxstab-report=json:r.json")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*test_dup.py::test_named: two jaxstab.check calls in this test are named "
                                 "'c'*Give each check its own name=*"])
    ids = [c["nodeid"] for c in json.loads((pytester.path / "r.json").read_text())["cases"]]
    assert ids == ["test_dup.py::test_distinct::c", "test_dup.py::test_distinct::d",
                   "test_dup.py::test_distinct::sinh#3", "test_dup.py::test_named::c"]


def test_saving_over_a_damaged_file_gives_advice_that_is_not_circular(pytester, run_jaxstab):
    _setup(pytester)
    (pytester.path / "bad.json").write_text("{not json")
    result = run_jaxstab(*ARGS, "--jaxstab-save-baseline=bad.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert "bad.json: not valid JSON" in err
    assert "move it away and run again" in err
    assert "re-create it with --jaxstab-save-baseline" not in err
