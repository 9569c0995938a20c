"""jst.local_error: the line where bits are lost is the one that cancels, hidden among harmless lines.

Expected lines are found by marker comments (never hard-coded numbers). The bits a cancellation loses
are checked against an estimate computed here with mpmath, independently of the oracle: the rounding
of the operands (half an ulp of the larger one) measured in ulps of the exact difference.
"""

from __future__ import annotations

import inspect
import math
import os

import jax
import jax.numpy as jnp
import mpmath
import numpy as np
import pytest

import pytest_jaxstab as jst
from pytest_jaxstab._check._trace import x64_scope
from pytest_jaxstab._errors import ArgumentError

TOLERANCE = 8.0  # bits: the check's default tolerance; the cancelling lines lose far more


def line_of(fn, marker: str) -> tuple[str, int]:
    fn = inspect.unwrap(fn)
    lines, start = inspect.getsourcelines(fn)
    hits = [start + i for i, text in enumerate(lines) if text.rstrip().endswith(f"# {marker}")]
    assert len(hits) == 1, marker
    source = inspect.getsourcefile(fn)
    assert source is not None, fn
    return source, hits[0]


def assert_worst_at(result, fn, marker: str, *, kind: str | None = "cancellation") -> None:
    worst = result.worst
    assert worst is not None, str(result)
    file, line = worst.location.rsplit(":", 1)
    want_file, want_line = line_of(fn, marker)
    assert os.path.samefile(file, want_file) and int(line) == want_line, str(result)
    assert worst.code.endswith(f"# {marker}")
    assert worst.max_bits > TOLERANCE, str(result)
    if kind is not None:
        assert worst.kind == kind, str(result)


def cancel_bits(a: mpmath.mpf, b: mpmath.mpf, dtype) -> float:
    """Bits lost by ``a - b`` when ``a`` is rounded to ``dtype``: half an ulp of ``a`` in ulps of a-b."""
    p = np.finfo(dtype).nmant + 1
    ulp = lambda v: mpmath.mpf(2) ** (mpmath.floor(mpmath.log(abs(v), 2)) - p + 1)
    with mpmath.workprec(200):
        return float(mpmath.log(1 + ulp(a) / 2 / ulp(a - b), 2))


# ----------------------------------------------------------------------- the shapes, hidden
def sqrt_diff(x):
    s = jnp.tanh(x * 1e-7) * 0.5
    a = jnp.sqrt(x + 1.0)
    b = jnp.sqrt(x)
    d = a - b  # SQRT-DIFF
    return d * 2.0 + s


def test_sqrt_difference():
    x = np.array([1e6, 3.7e6, 1.2e7], np.float32)
    result = jst.local_error(sqrt_diff, x)
    assert_worst_at(result, sqrt_diff, "SQRT-DIFF")
    with mpmath.workprec(200):
        expected = max(cancel_bits(mpmath.mpf(mpmath.sqrt(mpmath.mpf(float(v)) + 1)),
                                   mpmath.mpf(mpmath.sqrt(float(v))), np.float32)
                       for v in x)
    assert result.worst is not None
    assert abs(result.worst.max_bits - expected) <= 2.0  # the rounding of a is 0 to 0.5 ulp


def one_minus_cos(x):
    x2 = x * x
    c = jnp.cos(x)
    num = 1.0 - c  # ONE-MINUS-COS
    return num / x2


@pytest.mark.parametrize(("dtype", "scale"), [(np.float32, 1e-2), (np.float64, 1e-6)])
def test_one_minus_cos(dtype, scale):
    with x64_scope(np.dtype(dtype)):
        x = (np.array([1.0, 2.3, 4.1]) * scale).astype(dtype)
        assert_worst_at(jst.local_error(one_minus_cos, x), one_minus_cos, "ONE-MINUS-COS")


def variance(x):
    centred_scale = jnp.max(jnp.abs(x))
    m2 = jnp.mean(x ** 2)
    m = jnp.mean(x)
    var = m2 - m ** 2  # VARIANCE
    return var / centred_scale


def test_variance_of_offset_data():
    rng = np.random.default_rng(0)
    x = (1e4 + rng.normal(size=32)).astype(np.float32)
    assert_worst_at(jst.local_error(variance, x), variance, "VARIANCE")


def log_sigmoid(x):
    z = x * 1.0
    p = jax.nn.sigmoid(z)
    loss = jnp.log(p + 1e-15)  # LOG-SIGMOID
    return -jnp.mean(loss)


def test_eps_guarded_log_sigmoid():
    x = np.array([18.0, 22.5, 30.0], np.float32)  # sigmoid rounds to 1 - a few ulps or to 1
    assert_worst_at(jst.local_error(log_sigmoid, x), log_sigmoid, "LOG-SIGMOID", kind="near pole/zero")


def gas_constant(x):
    r = jnp.float32(8.314)
    t = jnp.abs(x) + 1.0
    growth = r * (jnp.exp(x) - 1.0)  # EXPM1
    return growth / t


def test_exp_minus_one():
    x = np.array([1e-5, -3e-6, 2e-4], np.float32)
    assert_worst_at(jst.local_error(gas_constant, x), gas_constant, "EXPM1")


# ------------------------------------------------------------------------------- cases of our own
def scanned(x):
    def body(acc, xi):
        h = jnp.log1p(xi * xi)
        step = (xi + 1e3) - 1e3  # SCAN-CANCEL
        return acc + h, step

    return jax.lax.scan(body, jnp.float32(0.0), x)


def test_cancellation_inside_a_scan_body_is_scored_per_iteration():
    x = np.array([1.0, 1.234567e-3, 2.5e-4], np.float32)
    assert_worst_at(jst.local_error(scanned, x), scanned, "SCAN-CANCEL")


@jax.jit
def jitted_helper(a, b):
    return a - b  # JIT-CANCEL


def through_jit(x):
    big = x * 1.0 + 1.0
    return jitted_helper(big, x) * 3.0


def test_cancellation_inside_jit_float64():
    with x64_scope(np.dtype(np.float64)):
        x = np.array([1e17, 3.3e17], np.float64)  # x + 1 rounds back to x
        result = jst.local_error(through_jit, x)
        assert_worst_at(result, jitted_helper, "JIT-CANCEL")


def stable(x):
    return jnp.sqrt(x) * 2.0 + jnp.exp(-x)


def test_stable_function_loses_no_more_than_rounding():
    result = jst.local_error(stable, np.linspace(0.5, 4.0, 7).astype(np.float32))
    # each primitive is correctly rounded or within an ulp or two on XLA's CPU
    assert all(line.max_bits <= 2.0 for line in result.lines), str(result)


def test_json_and_public_export():
    result = jst.local_error(sqrt_diff, np.array([1e6], np.float32))
    assert result.worst is not None
    d = result.worst.to_json()
    assert set(d) >= {"location", "primitive", "kind", "max_bits", "mean_bits", "share_over_tolerance"}
    assert type(result.worst).from_json(d) == result.worst
    assert "local_error" in jst.__all__


def test_bad_arguments_are_named():
    with pytest.raises(ArgumentError, match="callable"):
        jst.local_error(3, np.float32(1))  # pyright: ignore[reportArgumentType]  (on purpose)
    with pytest.raises(jst.TraceError):
        jst.local_error(lambda x: x.reshape(5), np.zeros(3, np.float32))


def test_cancel_bits_estimate_is_sane():
    # 1 + 2**-20 - 1 in float32: a is exact, the estimate gives the ulp ratio of 1 and 2**-20
    assert math.isclose(cancel_bits(mpmath.mpf(1) + mpmath.mpf(2) ** -20, mpmath.mpf(1), np.float32),
                        math.log2(1 + 2.0 ** -24 / 2.0 ** -43), rel_tol=1e-6)


def safe_where(x):
    y = jnp.log(jnp.expm1(x))  # SAFE-LOG
    return jnp.where(x < 20.0, y, x)


def test_the_branch_a_where_discards_is_not_blamed():
    # at 100, expm1 overflows float32 and log(inf) is 32 bits off the exact 100, but where discards it
    result = jst.local_error(safe_where, np.array([1e-3, 100.0], np.float32))
    assert all(line.max_bits <= 2.0 for line in result.lines), str(result)


def in_a_cond(x):
    def small(v):
        return (1.0 - jnp.cos(v)) * 3.0  # COND-CANCEL

    def large(v):
        return v * 2.0

    scale = jnp.sqrt(jnp.abs(x) + 1.0)
    return jax.lax.cond(jnp.abs(x) < 1.0, small, large, x) / scale


def test_cancellation_inside_the_cond_branch_taken():
    assert_worst_at(jst.local_error(in_a_cond, np.float32(1e-3)), in_a_cond, "COND-CANCEL")


def in_a_while(x):
    def body(state):
        i, acc = state
        step = jnp.sqrt(x + i.astype(jnp.float32)) - jnp.sqrt(x)  # WHILE-CANCEL
        return i + 1, acc + step

    return jax.lax.while_loop(lambda s: s[0] < 3, body, (0, jnp.float32(0.0)))[1]


def test_cancellation_inside_a_while_body_per_iteration():
    assert_worst_at(jst.local_error(in_a_while, np.float32(3e6)), in_a_while, "WHILE-CANCEL")


@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16])
def test_half_precision(dtype):
    x = np.array([300.0, 1000.0, 3000.0], dtype=dtype)
    assert_worst_at(jst.local_error(sqrt_diff, x), sqrt_diff, "SQRT-DIFF")


def overflow_then_log(x):
    scaled = x * 0.5
    e = jnp.exp(x)
    back = jnp.log(e)  # LOG-OF-OVERFLOW
    return back + scaled


def test_an_operand_that_overflows_is_classified_as_overflow():
    # exp(100) rounds to inf in float32 (its own local error is 0: the exact value rounds to inf too);
    # log then gets inf where its exact input is finite: the loss shows at the log line
    result = jst.local_error(overflow_then_log, np.array([1.0, 100.0], np.float32))
    assert_worst_at(result, overflow_then_log, "LOG-OF-OVERFLOW", kind="overflow")


def underflow_then_scale(x):
    tiny = jnp.exp(x)
    big = tiny * 1e30  # SCALE-SUBNORMAL
    return big + 1.0


def test_a_subnormal_operand_is_classified_as_underflow():
    # exp(-100) = 3.7e-44 is subnormal in float32; flushed to 0 on the way into the product
    result = jst.local_error(underflow_then_scale, np.array([-100.0], np.float32))
    assert_worst_at(result, underflow_then_scale, "SCALE-SUBNORMAL", kind="underflow")


def through_library(x):
    roots = jnp.sqrt(x)
    gaps = jnp.diff(roots)  # LIB-DIFF
    return gaps * 3.0


def test_a_loss_inside_library_code_lands_on_the_calling_line():
    # the subtraction happens inside jnp.diff; it is attributed to the user's line that called it
    x = np.array([1e6, 1e6 + 1, 1e6 + 3], np.float32)
    result = jst.local_error(through_library, x)
    assert_worst_at(result, through_library, "LIB-DIFF")
    assert result.worst is not None
    assert result.worst.primitive == "sub"


def test_one_record_for_a_lines_local_error_and_its_json_round_trip():
    # jst.local_error's lines and a CaseResult's local_error are one class (issue 25); its JSON keeps
    # every field and reads back equal, and a case report written before the merge still reads.
    import json

    from pytest_jaxstab._diagnostics import LineError
    from pytest_jaxstab._results import LocalErrorRecord

    assert LineError is LocalErrorRecord
    rec = LocalErrorRecord("m.py:3", "sub", "cancellation", 20.0, 12.5, 0.75, "x - y", True,
                           ("jit(f)", "sub"), 3)
    d = rec.to_json()
    assert d == {"location": "m.py:3", "primitive": "sub", "kind": "cancellation", "max_bits": 20.0,
                 "mean_bits": 12.5, "share_over_tolerance": 0.75, "code": "x - y", "removed": True,
                 "path": ["jit(f)", "sub"], "samples": 3}
    assert LocalErrorRecord.from_json(json.loads(json.dumps(d))) == rec
    older = {"location": None, "primitive": "log", "kind": "near a pole/zero", "max_bits": 3.0,
             "mean_bits": 1.0, "share_over_tolerance": 0.0, "code": "", "removed": None}
    assert LocalErrorRecord.from_json(older) == LocalErrorRecord(None, "log", "near a pole/zero", 3.0, 1.0,
                                                                 0.0)
