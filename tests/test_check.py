"""``jst.check`` without pytest's plugin: verdicts, atol, dtypes, errors, witnesses, determinism."""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import settings
from hypothesis.database import InMemoryExampleDatabase

from pytest_jaxstab import ArgumentError, TraceError, check
from pytest_jaxstab._check import StageTimes, check_case
from pytest_jaxstab._check._message import CheckWarning
from pytest_jaxstab._check._replay import FailureStore
from pytest_jaxstab._results import Witness

# Every element in [85, 100]: exp overflows float32 above ~88.72, so most draws overflow.
HOT = (85.0, 100.0)


def lse(x):
    return jnp.log(jnp.sum(jnp.exp(x)))


def test_stable_function_passes():
    # XLA's float32 tanh is accurate to a few ulps: far below the 8-bit tolerance.
    result = check(jnp.tanh, shapes=[(8,)], dtype="float32", domain=(-10, 10), max_examples=30, seed=1)
    assert result.outcome == "passed"
    assert result.original.verdict == "pass"
    assert result.original.overflows == 0
    assert result.original.max_error_bits <= 4.0
    assert result.samples >= 20  # duplicates are counted once, so a few fewer than drawn
    assert result.message == ""


def test_overflow_fails_and_the_rewrite_passes():
    result = check_case(lse, shapes=[(16,)], dtype="float32", domain=HOT, max_examples=30, derandomize=True)
    assert result.outcome == "failed"
    assert result.original.overflows > 0
    assert result.original.max_error_bits == 32.0  # an overflow is the dtype's full width
    assert result.rewritten.verdict == "pass"
    assert [r.rule for r in result.rewrites] == ["logsumexp"]
    origin = next(o for o in result.nan_origins if o.variant == "original")
    assert origin.primitive in ("exp", "reduce_sum")
    assert "jnp.exp(x)" in origin.line_text
    message = result.message
    assert "Smallest failing input found" in message
    assert "return jnp.log(jnp.sum(jnp.exp(x)))" in message
    assert "logsumexp" in message
    assert "The rewritten function passes" in message


def test_shrunk_input_stays_in_the_domain():
    result = check_case(lse, shapes=[(16,)], dtype="float32", domain=HOT, max_examples=20, derandomize=True)
    minimal = result.witnesses[0]  # the smallest failing input comes first
    assert minimal.overflow
    (x,) = minimal.args
    assert np.all((x >= 85.0) & (x <= 100.0))  # shrinking never leaves the domain (0 is outside)


def test_apply_judges_the_rewritten_function():
    result = check_case(lse, shapes=[(16,)], dtype="float32", domain=HOT, max_examples=20, derandomize=True,
                        apply=True)
    assert result.judged == "rewritten"
    assert result.outcome == "passed"
    assert result.original.verdict == "fail"  # still reported


def test_atol_forgives_small_absolute_errors_but_not_overflows():
    def shifted(x):
        return jnp.exp(x) - 1.0  # cancellation: tiny relative accuracy near 0, tiny absolute error

    domain = (-1e-3, 1e-3)
    strict = check(shifted, shapes=[(4,)], dtype="float32", domain=domain, max_examples=20, seed=2)
    assert strict.outcome == "failed"
    # exp(x) near 1 is within a couple of ulps of 1.0 (1.2e-7 each), so the absolute error stays below
    # 4e-7: with that atol nothing counts.
    loose = check(shifted, shapes=[(4,)], dtype="float32", domain=domain, max_examples=20, seed=2, atol=4e-7)
    assert loose.outcome == "passed"
    assert loose.original.max_error_bits == 0.0
    huge_atol = check(lse, shapes=[(16,)], dtype="float32", domain=HOT, max_examples=20, seed=2, atol=1e38)
    assert huge_atol.original.overflows > 0
    assert huge_atol.outcome == "failed"


@pytest.mark.parametrize("user_x64", [False, True])
def test_float64_runs_in_float64_and_restores_x64(user_x64):
    seen: list[str] = []

    def f(x):
        seen.append(str(x.dtype))  # runs at trace time: the dtype JAX really computes in
        return jnp.log1p(x)

    before = bool(jax.config.read("jax_enable_x64"))
    with jax.enable_x64(user_x64):
        result = check(f, shapes=[(4,)], dtype="float64", domain=(0, 10), max_examples=10, seed=0)
        assert bool(jax.config.read("jax_enable_x64")) is user_x64
    assert bool(jax.config.read("jax_enable_x64")) is before
    assert result.dtype == "float64"
    assert seen and set(seen) == {"float64"}
    assert result.outcome == "passed"
    assert all(w.args[0].dtype == np.float64 for w in result.witnesses)


def test_untraceable_function_is_one_paragraph_with_a_hint():
    def branchy(x):
        if x.sum() > 0:
            return x
        return -x

    with pytest.raises(TraceError) as info:
        check(branchy, shapes=[(3,)], dtype="float32", max_examples=5)
    message = str(info.value)
    assert "TracerBoolConversionError" in message
    assert "if x.sum() > 0:" in message  # the user's line, with its text
    assert "Hint:" in message
    assert "_compat" not in message  # JAX's pointer into our tracing wrapper is dropped
    assert len(message.splitlines()) == 2  # one paragraph, one hint


def test_function_returning_nothing_is_explained():
    with pytest.raises(TraceError, match="no floating-point result"):
        check(lambda x: None, shapes=[(3,)], dtype="float32", max_examples=5)


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"dtype": "int32"}, "dtype="),
        ({"shapes": "x"}, "shapes="),
        ({"shapes": [(2, -1)]}, "shapes[0]="),
        ({"domain": (5.0, 1.0)}, "domain="),
        ({"rules": ["no_such_rule"]}, "rules="),
        ({"max_examples": 0}, "max_examples="),
        ({"tolerance_bits": -1}, "tolerance_bits="),
    ],
)
def test_bad_arguments_are_named(kwargs, named):
    args = {"shapes": [(3,)], "dtype": "float32", **kwargs}
    with pytest.raises(ArgumentError) as info:
        check(jnp.sin, **args)
    assert str(info.value).startswith(named)


def test_witnesses_are_rechecked_first():
    # A witness inside the domain is evaluated (its magnitude shows among the points) ...
    marked = Witness([np.full(16, 0.123, np.float32)], "original", 0.0, False)
    result = check_case(lse, shapes=[(16,)], dtype="float32", domain=(-1, 1), max_examples=5, seed=0,
                        witnesses=[marked])
    assert np.float32(0.123) in [np.float32(p.magnitude) for p in result.points]
    # ... one outside the current domain (the domain was narrowed), or of another shape (the test
    # changed), is skipped, and said: it would judge the function on inputs it no longer takes.
    hot = Witness([np.full(16, 100.0, np.float32)], "original", 32.0, True)
    stale = Witness([np.zeros(3, np.float32)], "original", 0.0, False)
    with pytest.warns(CheckWarning, match="skipped 2 baseline witnesses"):
        result = check_case(lse, shapes=[(16,)], dtype="float32", domain=(-1, 1), max_examples=5, seed=0,
                            witnesses=[hot, stale])
    assert result.original.overflows == 0


def test_derandomized_runs_are_identical_and_witnesses_do_not_double_count():
    first = check_case(lse, shapes=[(16,)], dtype="float32", domain=(-100, 100), max_examples=25,
                       derandomize=True, name="case")
    again = check_case(lse, shapes=[(16,)], dtype="float32", domain=(-100, 100), max_examples=25,
                       derandomize=True, name="case", witnesses=first.witnesses)
    assert again.to_json()["original"] == first.to_json()["original"]
    assert again.samples == first.samples  # witnesses were drawn (or shrunk to) in the first run


def test_pytree_outputs_and_integer_outputs():
    def f(x, y):
        return {"sum": x + y, "count": jnp.sum(x > 0).astype(jnp.int32), "prod": x * y}

    result = check(f, shapes=[(4,), (4,)], dtype="float32", domain=(-10, 10), max_examples=10, seed=3)
    assert result.outcome == "passed"  # correctly rounded + and *: 0 bits; the int output is not judged
    assert result.original.max_error_bits == 0.0


def test_failures_are_stored_in_the_hypothesis_database_and_replayed():
    db = InMemoryExampleDatabase()
    # derandomize=False explicitly: under CI=true Hypothesis loads its "ci" profile (derandomized, no
    # database), and a profile registered here would inherit that.
    settings.register_profile("jaxstab-test-db", database=db, derandomize=False)
    previous = settings.get_current_profile_name()
    settings.load_profile("jaxstab-test-db")
    try:
        first = check(lse, shapes=[(16,)], dtype="float32", domain=HOT, max_examples=10, name="stored")
        stored = FailureStore(db, "stored").load()
        assert len(stored) == 1
        np.testing.assert_array_equal(stored[0][1][0], first.witnesses[0].args[0])
        second = check(lse, shapes=[(16,)], dtype="float32", domain=HOT, max_examples=1, name="stored")
        assert second.samples >= 2  # the stored failure, then one draw
    finally:
        settings.load_profile(previous)


def test_profile_reports_stages():
    prof = StageTimes()
    start = time.perf_counter()
    result = check_case(jnp.sin, shapes=[(4,)], dtype="float32", max_examples=5, seed=0, profile=prof)
    wall = time.perf_counter() - start
    assert prof["examples"] == result.samples >= 1
    assert prof["draws"] >= prof["examples"]  # every counted input was drawn (duplicates are not counted)
    stages = ("trace", "draw", "run", "oracle", "metrics")
    # each stage ran, so it took some time; they do not overlap, so together they fit in the call
    assert all(prof[stage] > 0.0 for stage in stages), dict(prof)
    assert sum(prof[stage] for stage in stages) <= prof["total"] <= wall
