"""find_nan_origin: the line where a non-finite value is born, its kind, path and operands.

Expected lines are found in this file by their marker comment (never hard-coded numbers); expected
kinds follow IEEE 754's exception classes (module docstring of ``_nan_origin``); expected loop steps
and non-finite results are computed independently (float64 numpy, or by running the function).
"""

from __future__ import annotations

import inspect
import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pytest_jaxstab import NanOrigin, find_nan_origin

F32_MAX = float(np.finfo(np.float32).max)


def line_of(fn, marker: str) -> tuple[str, int]:
    """(file, line) of the line of ``fn``'s source carrying the comment ``# <marker>``."""
    fn = inspect.unwrap(fn)  # jax.jit / custom_vjp wrappers keep the function as __wrapped__
    lines, start = inspect.getsourcelines(fn)
    hits = [start + i for i, text in enumerate(lines) if text.rstrip().endswith(f"# {marker}")]
    assert len(hits) == 1, f"marker {marker!r} must occur once in {fn.__name__}"
    file = inspect.getsourcefile(fn)
    assert file is not None
    return file, hits[0]


def found(fn, *args) -> NanOrigin:
    """``find_nan_origin(fn, *args)``, which must find one."""
    origin = find_nan_origin(fn, *args)
    assert origin is not None, "no NaN/Inf origin found"
    return origin


def assert_at(origin: NanOrigin | None, fn, marker: str) -> None:
    assert origin is not None
    assert origin.location is not None, str(origin)
    file, line = origin.location.rsplit(":", 1)
    want_file, want_line = line_of(fn, marker)
    assert os.path.samefile(file, want_file)
    assert int(line) == want_line, str(origin)
    assert origin.code is not None
    assert origin.code.endswith(f"# {marker}")


# ------------------------------------------------------------------------------- where it is born
def three_lines(x):
    y = jnp.exp(x)  # LINE-A
    z = y - y  # LINE-B
    return z  # LINE-C


def test_born_at_the_overflow_not_where_the_nan_appears():
    x = jnp.array([1.0, 100.0, 2.0], jnp.float32)
    assert np.isnan(np.asarray(three_lines(x))[1])  # the NaN shows up on line B
    origin = found(three_lines, x)
    assert_at(origin, three_lines, "LINE-A")
    assert (origin.kind, origin.primitive, origin.path) == ("overflow", "exp", ("exp",))
    assert origin.index == (1,)
    assert origin.output is not None and origin.output.value == np.inf
    assert origin.operands[0].value == 100.0
    assert (origin.operands[0].min, origin.operands[0].max) == (1.0, 100.0)
    assert origin.count == 1
    assert origin.reaches_output
    # inf - inf on line B has a non-finite operand: not a second origin.
    assert find_nan_origin(three_lines, x, every=True) == [origin]


def test_str_is_a_readable_paragraph():
    origin = found(three_lines, jnp.array([1.0, 100.0], jnp.float32))
    text = str(origin)
    _, line = line_of(three_lines, "LINE-A")
    assert text.startswith("overflow: exp at ")
    assert f"test_nan_origin.py:{line}" in text
    assert "y = jnp.exp(x)" in text
    assert "operand a: f32[2] min 1.0 max 100.0" in text
    assert "output[1] = inf from a[1] = 100.0" in text
    assert json.loads(json.dumps(origin.to_json(), allow_nan=False))["message"] == text


@pytest.mark.parametrize(
    ("fn", "x", "kind", "primitive"),
    [
        (jnp.log, -1.0, "invalid", "log"),
        (jnp.sqrt, -1.0, "invalid", "sqrt"),
        (lambda x: x / x, 0.0, "invalid", "div"),
        (jnp.exp, 1000.0, "overflow", "exp"),
        (lambda x: x * x, 1e30, "overflow", "mul"),
        (lambda x: x / 1e-30, 1e30, "overflow", "div"),
        (lambda x: 1.0 / x, 0.0, "division by zero", "div"),
        (jnp.log, 0.0, "division by zero", "log"),
        (jnp.log1p, -1.0, "division by zero", "log1p"),
        (jnp.arctanh, 1.0, "division by zero", "atanh"),
        (lambda x: x**-2, 0.0, "division by zero", "integer_pow"),
    ],
    ids=["log(-1)", "sqrt(-1)", "0/0", "exp(1000)", "x*x", "big/tiny", "1/0", "log(0)", "log1p(-1)",
         "atanh(1)", "0**-2"],
)
def test_kinds_follow_ieee_exception_classes(fn, x, kind, primitive):
    origin = found(fn, jnp.float32(x))
    assert (origin.kind, origin.primitive) == (kind, primitive)
    assert origin.output is not None and np.isnan(origin.output.value) == (kind == "invalid")


def test_float16_overflow():
    x = jnp.array([1.0, 12.0], jnp.float16)  # e**12 = 162755 > 65504, float16's max
    origin = found(jnp.exp, x)
    assert origin.output is not None
    assert (origin.kind, origin.index, origin.output.dtype) == ("overflow", (1,), "float16")


def test_no_nonfinite_value_gives_none():
    assert find_nan_origin(lambda x: jnp.sin(x) * 2.0 + jnp.log1p(x * x), jnp.linspace(-3, 3, 7)) is None
    assert find_nan_origin(jax.nn.softplus, jnp.array([1e30, -1e30], jnp.float32)) is None
    assert find_nan_origin(jnp.sin, jnp.ones(3), every=True) == []


def test_nonfinite_inputs_are_not_origins():
    x = jnp.array([np.nan, np.inf, 1.0], jnp.float32)
    assert find_nan_origin(lambda v: v - v, x) is None
    # ...but a value born inside still is, next to them.
    origin = found(lambda v: (v - v) + jnp.log(v - 2.0), x)
    assert (origin.kind, origin.primitive, origin.index) == ("invalid", "log", (2,))


def test_pytree_arguments():
    origin = found(lambda d: d["a"] * jnp.exp(d["b"]), {"a": 1.0, "b": jnp.array([0.0, 200.0])})
    assert (origin.primitive, origin.index) == ("exp", (1,))


# ------------------------------------------------------------------------------------ nested calls
@jax.jit
def _inner(x):
    return jnp.log(x)  # INNER-LOG


def nested(x):
    return _inner(x - 1.0) * 2.0  # NESTED-CALL


def test_inside_a_nested_jit():
    origin = found(nested, jnp.array([2.0, 0.5]))
    assert_at(origin, _inner, "INNER-LOG")
    assert origin.path == ("jit(_inner)", "log")
    assert (origin.kind, origin.index) == ("invalid", (1,))
    assert origin.operands[0].value == -0.5


def library_norm(x):
    return jnp.linalg.norm(x)  # LIBRARY-CALL


def test_inside_library_code_points_at_the_calling_line():
    origin = found(library_norm, jnp.array([1e30, 1.0], jnp.float32))
    # x*x overflows inside jnp.linalg.norm, which has no user frame: the user's call line is named.
    assert_at(origin, library_norm, "LIBRARY-CALL")
    assert origin.path[0] == "jit(norm)"
    assert len(origin.path) >= 2
    assert origin.kind == "overflow"


def test_inside_custom_vjp_primal_body():
    @jax.custom_vjp
    def clog(x):
        return jnp.log(x)  # CUSTOM-LOG

    clog.defvjp(lambda x: (jnp.log(x), x), lambda r, g: (g / r,))
    origin = found(lambda x: clog(x) + 1.0, -1.0)
    assert_at(origin, clog, "CUSTOM-LOG")
    assert origin.path == ("custom_vjp_call(clog)", "log")


# ------------------------------------------------------------------------------------ control flow
def scanned(x, reverse=False):
    def body(c, xi):
        c = c * xi  # SCAN-BODY
        return c, c

    return jax.lax.scan(body, jnp.float32(1.0), x, reverse=reverse)[0]


@pytest.mark.parametrize("reverse", [False, True])
def test_inside_a_scan_body_at_the_right_step(reverse):
    xs = np.array([1e10, 1e10, 1e10, 1e10, 2.0, 3.0], np.float32)
    order = xs[::-1] if reverse else xs
    # first iteration whose float64 running product exceeds float32's max, as an index into xs
    k = int(np.argmax(np.cumprod(order.astype(np.float64)) > F32_MAX))
    want = len(xs) - 1 - k if reverse else k
    origin = found(lambda v: scanned(v, reverse), jnp.asarray(xs))
    assert_at(origin, scanned, "SCAN-BODY")
    assert (origin.kind, origin.primitive, origin.path) == ("overflow", "mul", ("scan", "mul"))
    assert origin.steps == (want,)
    # later steps multiply inf by finite numbers: no new origin
    assert len(find_nan_origin(lambda v: scanned(v, reverse), jnp.asarray(xs), every=True)) == 1


def growing(x):
    def body(c):
        return c[0] + 1, c[1] * 10.0  # WHILE-BODY

    return jax.lax.while_loop(lambda c: c[0] < 60, body, (0, x))[1]


def test_inside_a_while_body_at_the_right_step():
    want, v = 0, 1.0
    while v * 10.0 <= F32_MAX:  # float64: the first step whose float32 product overflows
        v *= 10.0
        want += 1
    origin = found(growing, jnp.float32(1.0))
    assert_at(origin, growing, "WHILE-BODY")
    assert (origin.kind, origin.primitive, origin.steps) == ("overflow", "mul", (want,))


def masked_in_loop(x):
    def body(c, xi):
        return c + jnp.where(xi > 0, jnp.log(xi), 0.0), None  # LOOP-MASKED

    return jax.lax.scan(body, jnp.float32(0.0), x)[0]


def test_masked_value_inside_a_loop():
    x = jnp.array([1.0, -1.0, 2.0, -3.0], jnp.float32)
    assert np.isfinite(float(masked_in_loop(x)))
    assert find_nan_origin(masked_in_loop, x) is None  # the loop's outputs are finite: not entered
    (origin,) = find_nan_origin(masked_in_loop, x, every=True)  # ...but every=True walks it
    assert_at(origin, masked_in_loop, "LOOP-MASKED")
    assert (origin.kind, origin.steps) == ("invalid", (1,))
    assert not origin.reaches_output


def with_cond(x):
    def pos(v):
        return jnp.sqrt(v - 2.0)  # COND-POS

    def neg(v):
        return jnp.exp(-v)  # COND-NEG

    return jax.lax.cond(x > 0, pos, neg, x)


def test_inside_cond_the_branch_taken():
    origin = found(with_cond, jnp.float32(1.0))
    assert_at(origin, with_cond, "COND-POS")
    assert (origin.kind, origin.path) == ("invalid", ("cond", "sqrt"))
    # x = -100 takes `neg` (exp(100) overflows); `pos` would give sqrt(-102) but does not run.
    origins = find_nan_origin(with_cond, jnp.float32(-100.0), every=True)
    assert [o.primitive for o in origins] == ["exp"]
    assert_at(origins[0], with_cond, "COND-NEG")


# ---------------------------------------------------------------------------------- backward pass
def norm2(x):
    return jnp.sqrt(jnp.sum(x * x))  # NORM-SQRT


def test_backward_pass_of_sqrt_at_zero():
    x = jnp.zeros(3, jnp.float32)
    assert np.isnan(np.asarray(jax.grad(norm2)(x))).all()
    origin = found(jax.grad(norm2), x)
    # d sqrt(s) = 0.5 / sqrt(s): 0.5 / 0 = inf is born in the derivative, on the forward line
    assert_at(origin, norm2, "NORM-SQRT")
    assert (origin.kind, origin.primitive) == ("division by zero", "div")
    assert [o.value for o in origin.operands] == [0.5, 0.0]
    assert find_nan_origin(norm2, x) is None  # the forward pass alone is fine


def naive_sigmoid(x):
    e = jnp.exp(-x)  # SIG-EXP
    return 1.0 / (1.0 + e)  # SIG-DIV


def test_backward_pass_of_naive_sigmoid():
    x = jnp.float32(-100.0)
    assert np.isnan(float(jax.grad(naive_sigmoid)(x)))
    # exp(100) overflows in float32; the backward pass's 0 * inf = NaN has a non-finite operand.
    origins = find_nan_origin(jax.grad(naive_sigmoid), x, every=True)
    assert len(origins) == 1
    assert_at(origins[0], naive_sigmoid, "SIG-EXP")
    assert (origins[0].kind, origins[0].primitive) == ("overflow", "exp")
    assert origins[0].reaches_output


def double_where(x):
    return jnp.sum(jnp.where(x > 0, jnp.sqrt(x), 0.0))  # DOUBLE-WHERE


def test_masked_nan_that_reaches_the_gradient():
    x = jnp.array([1.0, -1.0])
    assert np.isfinite(float(double_where(x)))
    assert find_nan_origin(double_where, x) is None
    (forward,) = find_nan_origin(double_where, x, every=True)
    assert forward.primitive == "sqrt"
    assert not forward.reaches_output  # masked by where in the forward pass
    backward = found(jax.grad(double_where), x)
    assert np.isnan(np.asarray(jax.grad(double_where)(x))[1])
    assert (backward.primitive, backward.kind, backward.index) == ("sqrt", "invalid", (1,))
    assert backward.reaches_output  # 0 * (0.5 / sqrt(-1)) = NaN in the gradient
    assert_at(backward, double_where, "DOUBLE-WHERE")


# ------------------------------------------------------------------------ constants, all, masking
def where_nan(x):
    return jnp.where(x > 0, x, jnp.nan)  # WHERE-NAN


def nan_then_exp(x):
    y = x * jnp.nan  # NAN-MUL
    return jnp.exp(y)  # NAN-EXP


_CAPTURED = jnp.array([0.0, -jnp.inf])


def captured(x):
    return x + _CAPTURED  # CAPTURED


def test_nan_constant_in_code_is_an_origin_at_its_first_use():
    origin = found(where_nan, jnp.array([1.0, -1.0]))
    assert_at(origin, where_nan, "WHERE-NAN")
    assert origin.kind == "constant"
    assert origin.reaches_output
    assert "nan constant" in str(origin)
    later = find_nan_origin(nan_then_exp, jnp.ones(2), every=True)
    assert [o.kind for o in later] == ["constant"]  # exp(nan) is innocent
    assert_at(later[0], nan_then_exp, "NAN-MUL")
    cap = found(captured, jnp.ones(2))
    assert_at(cap, captured, "CAPTURED")
    assert (cap.kind, cap.index) == ("constant", (1,))


def test_masked_constant_is_not_why_a_result_is_nan():
    x = jnp.array([1.0, 2.0])
    assert find_nan_origin(where_nan, x) is None  # the NaN is never selected
    (origin,) = find_nan_origin(where_nan, x, every=True)
    assert origin.kind == "constant"
    assert not origin.reaches_output
    assert "masked" in str(origin)


def masked_then_overflow(x):
    safe = jnp.where(x > 0, jnp.log(x), 0.0)  # MASKED-LOG
    return safe + jnp.exp(x * 100.0)  # EXP-OVF


def two_origins(x):
    a = jnp.log(x)  # TWO-LOG
    b = jnp.exp(x)  # TWO-EXP
    return a + 1.0, b * 2.0


def test_first_origin_that_reaches_the_result_wins():
    x = jnp.array([-1.0, 2.0], jnp.float32)
    origin = found(masked_then_overflow, x)
    assert_at(origin, masked_then_overflow, "EXP-OVF")
    everything = find_nan_origin(masked_then_overflow, x, every=True)
    assert [(o.primitive, o.reaches_output) for o in everything] == [("log", False), ("exp", True)]
    assert_at(everything[0], masked_then_overflow, "MASKED-LOG")


def test_all_distinct_origins():
    origins = find_nan_origin(two_origins, jnp.array([-1.0, 1000.0, 0.0], jnp.float32), every=True)
    assert [(o.kind, o.primitive) for o in origins] == [("invalid", "log"), ("overflow", "exp")]
    assert_at(origins[0], two_origins, "TWO-LOG")
    assert_at(origins[1], two_origins, "TWO-EXP")
    assert origins[0].index == (0,)
    assert origins[0].count == 2
    assert len({(o.primitive, o.location, o.path) for o in origins}) == len(origins)


# ------------------------------------------------------------------------------------- bad input
def test_bad_input_errors():
    with pytest.raises(TypeError, match="callable"):
        find_nan_origin(3.0, 1.0)  # pyright: ignore[reportArgumentType]  (the wrong type on purpose)

    @jax.jit
    def inside(x):
        return find_nan_origin(jnp.log, x)

    with pytest.raises(TypeError, match=r"outside jax\.jit"):
        inside(1.0)
