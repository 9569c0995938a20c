"""The pytest plugin as users meet it (pytester): the marker, verdicts, messages, the fixture, dtypes."""

from __future__ import annotations

import textwrap

import pytest

EXAMPLES = "--jaxstab-examples=20"

SUITE = '''
import jax.numpy as jnp
import pytest

@pytest.fixture
def scale():
    return 2.0

# A stable function, a drawn array mixed with a fixture, and a parametrized argument.
@pytest.mark.parametrize("power", [1, 3])
@pytest.mark.stabilize(dtype="float32", shapes={"x": (8,)}, domain=(-5, 5))
def test_stable(scale, x, power):
    assert x.shape == (8,) and scale == 2.0
    return jnp.tanh(x) * scale ** power

# Every element in [85, 100]: exp overflows float32 above ~88.7.
@pytest.mark.stabilize(dtype="float32", shapes={"x": (16,)}, domain=(85, 100))
def test_overflow(x):
    return jnp.log(jnp.sum(jnp.exp(x)))

@pytest.mark.stabilize(dtype="float32", shapes={"x": (16,)}, domain=(85, 100), apply=True)
def test_overflow_fixed_by_rewrite(x):
    return jnp.log(jnp.sum(jnp.exp(x)))

# shapes as a list: the first parameters, in order; a method of a test class.
class TestMethods:
    @pytest.mark.stabilize(dtype="float32", shapes=[(4,), (4,)], domain=(-10, 10))
    def test_two_args(self, a, b):
        return a * b

def test_not_marked(scale):
    assert scale == 2.0
'''


def test_marker_is_registered(run_jaxstab):
    result = run_jaxstab("--markers")
    result.stdout.fnmatch_lines(["@pytest.mark.stabilize(dtype, shapes*"])


def test_marker_collection_verdicts_and_messages(pytester, run_jaxstab, plugin_args):
    pytester.makepyfile(test_suite=SUITE)
    result = run_jaxstab(EXAMPLES, "-rA", *plugin_args)
    result.assert_outcomes(passed=5, failed=1)
    outcomes = {r.nodeid: r.outcome for r in result.reprec.getreports("pytest_runtest_logreport")
                if r.when == "call"}
    assert outcomes["test_suite.py::test_overflow"] == "failed"
    assert outcomes["test_suite.py::test_overflow_fixed_by_rewrite"] == "passed"
    assert outcomes["test_suite.py::test_stable[1]"] == "passed"
    assert outcomes["test_suite.py::TestMethods::test_two_args"] == "passed"
    out = result.stdout.str()
    # The failure names the smallest input, both variants' errors, the NaN origin line and the fix.
    assert "Smallest failing input found:" in out
    assert "x = float32[16]" in out
    assert "function as written: inf" in out
    assert "rewritten function:" in out
    assert "NaN/Inf born in the function as written: overflow in" in out
    line = SUITE.lstrip("\n").splitlines().index("    return jnp.log(jnp.sum(jnp.exp(x)))") + 1
    assert f"test_suite.py:{line}" in out
    assert "return jnp.log(jnp.sum(jnp.exp(x)))" in out
    assert "Rewrites that fired: logsumexp" in out
    assert "The rewritten function passes" in out
    assert "Traceback" not in out  # a verdict, not a crash


def test_bad_marker_arguments_fail_that_test_at_collection(pytester, run_jaxstab):
    pytester.makepyfile(test_bad='''
        import jax.numpy as jnp
        import pytest

        @pytest.mark.stabilize(dtype="float8", shapes={"x": (4,)})
        def test_bad_dtype(x):
            return x

        @pytest.mark.stabilize(dtype="float32", shapes={"y": (4,)})
        def test_bad_name(x):
            return x

        @pytest.mark.stabilize(dtype="float32", shapes=[(4,), (4,)])
        def test_bad_arity(x):
            return x

        @pytest.mark.stabilize(dtype="float32", shapes={"x": (4,)}, domain=(3, 1))
        def test_empty_domain(x):
            return x

        @pytest.mark.stabilize(dtype="float32", shapes={"x": (4,)}, tolerance=3)
        def test_unknown_kwarg(x):
            return x

        @pytest.mark.stabilize(dtype="float32", shapes={"x": (4,)})
        def test_fine(x):
            return x
    ''')
    result = run_jaxstab(EXAMPLES)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines([
        "*test_bad.py::test_bad_dtype: bad @pytest.mark.stabilize: dtype='float8': unsupported dtype*",
        "*test_bad.py::test_bad_name: bad @pytest.mark.stabilize: shapes names 'y', not a parameter of "
        "test_bad_name(x)*",
        "*test_bad.py::test_bad_arity: bad @pytest.mark.stabilize: shapes gives 2 shapes but "
        "test_bad_arity(x) has 1 positional parameters*",
        "*test_bad.py::test_empty_domain: bad @pytest.mark.stabilize: domain=(3, 1)*",
        "*test_bad.py::test_unknown_kwarg: bad @pytest.mark.stabilize: unknown argument tolerance*",
    ])
    assert "test_fine" not in result.stdout.str()  # only the bad tests are named
    result.stdout.fnmatch_lines(["*5 errors*"])


def test_untraceable_function_fails_with_jax_reason_and_hint(pytester, run_jaxstab):
    pytester.makepyfile(test_branch='''
        import jax
        import pytest

        @pytest.mark.stabilize(dtype="float32", shapes={"x": (4,)})
        def test_branch(x):
            if x.sum() > 0:
                return x
            return -x

        @pytest.mark.stabilize(dtype="float32", shapes={"x": (4,)})
        def test_unsupported(x):
            return jax.lax.approx_max_k(x, 2)[0]  # refused by the oracle
    ''')
    result = run_jaxstab(EXAMPLES)
    result.assert_outcomes(failed=2)
    out = result.stdout.str()
    assert "TracerBoolConversionError" in out
    assert "if x.sum() > 0:" in out
    assert "Hint: a Python `if`" in out
    failure = out[out.index("___ test_branch ___"):out.index("___ test_unsupported ___")]
    assert len(failure.strip().splitlines()) <= 4  # one paragraph and a hint, not a 60-line traceback
    unsupported = out[out.index("___ test_unsupported ___"):out.index("short test summary")]
    assert "UnsupportedPrimitive" in unsupported and "approx_top_k" in unsupported
    assert len(unsupported.strip().splitlines()) <= 4


@pytest.mark.parametrize("user_x64", [False, True])
def test_float64_is_enabled_for_the_case_only(pytester, run_jaxstab, user_x64):
    pytester.makeconftest(f'''
        import jax
        jax.config.update("jax_enable_x64", {user_x64})
    ''')
    pytester.makepyfile(test_x64=f'''
        import jax
        import jax.numpy as jnp
        import pytest

        SEEN = []

        @pytest.mark.stabilize(dtype="float64", shapes={{"x": (4,)}}, domain=(0.5, 2))
        def test_float64(x):
            SEEN.append(str(x.dtype))  # at trace time: the dtype that was actually run
            return jnp.log(x)

        def test_afterwards():
            assert SEEN and set(SEEN) == {{"float64"}}
            assert bool(jax.config.read("jax_enable_x64")) is {user_x64}
    ''')
    import jax

    before = bool(jax.config.read("jax_enable_x64"))
    try:  # the run is in this process: its conftest's config.update must not leak into later tests
        # test_afterwards must run after test_float64: no random ordering.
        result = run_jaxstab(EXAMPLES, "--jaxstab-report=json:out.json", "-p", "no:randomly")
    finally:
        jax.config.update("jax_enable_x64", before)
    result.assert_outcomes(passed=2)
    import json

    report = json.loads((pytester.path / "out.json").read_text())
    (case,) = report["cases"]
    assert case["dtype"] == "float64"
    assert all(a["dtype"] == "float64" for w in case["witnesses"] for a in w["args"])


def test_fixture_checks_functions_defined_elsewhere(pytester, run_jaxstab):
    pytester.makepyfile(mylib=textwrap.dedent('''
        import jax.numpy as jnp

        def softplus(x):
            return jnp.log(1.0 + jnp.exp(x))

        def mae(pred, target):  # stable: no squares to underflow when pred ~= target (the fuzzer draws that)
            return jnp.mean(jnp.abs(pred - target))
    '''))
    pytester.makepyfile(test_fix='''
        import mylib

        def test_mae(jaxstab):
            result = jaxstab.check(mylib.mae, shapes=[(8,), (8,)], dtype="float32", domain=(-10, 10))
            assert result.outcome == "passed" and result.samples > 0

        def test_softplus(jaxstab):
            jaxstab.check(mylib.softplus, shapes=[(4,)], dtype="float32", domain=(90, 100))
    ''')
    result = run_jaxstab(EXAMPLES)
    result.assert_outcomes(passed=1, failed=1)
    out = result.stdout.str()
    assert "test_fix.py::test_softplus: the function as written is numerically unstable" in out
    assert "return jnp.log(1.0 + jnp.exp(x))" in out  # the NaN origin's line, in mylib.py
    assert "mylib.py:" in out
