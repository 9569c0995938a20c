"""The ``stabilize`` marker's ``search=``: True searches even under ``--jaxstab-search=off``; False turns the
default search off for its test."""

from __future__ import annotations

SUITE = '''
import jax.numpy as jnp
import pytest

# The slow tier (`make test-slow`, run in full by CI; `make test` leaves it out): docs/architecture.md,
# "Tests and their tiers".
pytestmark = pytest.mark.slow

@pytest.mark.stabilize(dtype="float64", shapes={"x": ()}, domain=(1.0, 1e100), search=True)
def test_cancels(x):
    return jnp.sqrt(x * x + 1) - x

@pytest.mark.stabilize(dtype="float64", shapes={"x": ()}, domain=(1.0, 1e100), search=False)
def test_cancels_no_search(x):
    return jnp.sqrt(x * x + 1) - x
'''


def test_search_proposes_the_improved_program_in_the_failure(pytester, run_jaxstab):
    pytester.makepyfile(test_search_suite=SUITE)
    result = run_jaxstab("--jaxstab-examples=40", "--jaxstab-seed=1", search=True)  # the option's default: on
    result.assert_outcomes(failed=2)
    out = result.stdout.str()
    assert "jst.improve proposes (improved: mean" in out
    assert "def test_cancels_improved(x):" in out
    # Only the marked case searches (counted in the failure sections: with CI set, pytest repeats
    # whole messages in the short summary).
    assert out.split("short test summary info")[0].count("jst.improve") == 1


def test_marker_search_true_searches_under_the_option_off(pytester, run_jaxstab):
    pytester.makepyfile(test_search_suite=SUITE)
    result = run_jaxstab("--jaxstab-examples=40", "--jaxstab-seed=1", "--jaxstab-search=off")
    result.assert_outcomes(failed=2)
    assert result.stdout.str().split("short test summary info")[0].count("jst.improve proposes") == 1
