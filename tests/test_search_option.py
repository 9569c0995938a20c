"""``--jaxstab-search`` / ``jaxstab_search``: every case the catalogue does not fix proposes improved code,
by default; ``--jaxstab-search=off``, ``jaxstab_search = false`` or the marker's ``search=False`` turn it
off."""

from __future__ import annotations

import pytest

# No case sets search=: the option (on by default) decides. Both cancel for large x and the
# catalogue has no rule for either; the fixture's case sits inside a reduction over an array.
SUITE = '''
import jax.numpy as jnp
import pytest

# The slow tier (`make test-slow`, run in full by CI; `make test` leaves it out): docs/architecture.md,
# "Tests and their tiers".
pytestmark = pytest.mark.slow

@pytest.mark.stabilize(dtype="float64", shapes={"x": ()}, domain=(1.0, 1e100))
def test_marked(x):
    return jnp.sqrt(x * x + 1) - x

def test_fixture(jaxstab):
    def total(x):
        return jnp.sum(jnp.sqrt(x + 1.0) - jnp.sqrt(x))
    jaxstab.check(total, shapes=[(8,)], dtype="float64", domain=(1.0, 1e100))

@pytest.mark.stabilize(dtype="float64", shapes={"x": ()}, domain=(-1.0, 1.0))
def test_stable(x):
    return x * 2.0 + 1.0
'''


@pytest.mark.slow  # 7 s: the fast tier keeps test_search_plugin's proposal in a failure
def test_option_proposes_improved_code_for_marked_tests_and_fixture_checks(pytester, run_jaxstab):
    pytester.makepyfile(test_option_suite=SUITE)
    result = run_jaxstab("--jaxstab-examples=40", "--jaxstab-seed=1", "--jaxstab-search")
    result.assert_outcomes(failed=2, passed=1)
    out = result.stdout.str()
    # Count in the failure sections: with CI set, pytest repeats whole messages in the short summary.
    failures = out.split("short test summary info")[0]
    assert failures.count("jst.improve proposes (improved: mean") == 2
    assert "def test_marked_improved(x):" in out
    # The fixture's function keeps its reduction around the improved elementwise body.
    assert "def total_improved(x):" in out
    assert "return jnp.sum(" in out


def test_search_is_on_by_default(pytester, run_jaxstab):
    pytester.makepyfile(test_option_suite=SUITE)
    result = run_jaxstab("--jaxstab-examples=40", "--jaxstab-seed=1", "-k", "marked", search=True)
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "jst.improve proposes (improved: mean" in out
    assert "def test_marked_improved(x):" in out


def test_off_turns_the_search_off(pytester, run_jaxstab):
    pytester.makepyfile(test_option_suite=SUITE)
    result = run_jaxstab("--jaxstab-examples=40", "--jaxstab-seed=1", "--jaxstab-search=off")
    result.assert_outcomes(failed=2, passed=1)
    out = result.stdout.str()
    assert "jst.improve" not in out
    assert "search=off" in out  # the header line says the search is off


def test_ini_key_false_turns_the_search_off(pytester, run_jaxstab):
    pytester.makepyfile(test_option_suite=SUITE)
    pytester.makeini("[pytest]\njaxstab_search = false\n")
    result = run_jaxstab("--jaxstab-examples=40", "--jaxstab-seed=1", "-k", "marked", search=True)
    result.assert_outcomes(failed=1)
    assert "jst.improve" not in result.stdout.str()


def test_ini_key_turns_the_search_on(pytester, run_jaxstab):
    pytester.makepyfile(test_option_suite=SUITE)
    pytester.makeini("[pytest]\njaxstab_search = true\n")
    result = run_jaxstab("--jaxstab-examples=40", "--jaxstab-seed=1", "-k", "marked", search=True)
    result.assert_outcomes(failed=1)
    assert "jst.improve proposes (improved: mean" in result.stdout.str()


def test_bad_ini_value_is_a_usage_error(pytester, run_jaxstab):
    pytester.makepyfile(test_option_suite=SUITE)
    pytester.makeini("[pytest]\njaxstab_search = maybe\n")
    result = run_jaxstab("-k", "marked", search=True)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "jaxstab_search='maybe': expected true or false" in result.stderr.str()
