"""find_nan_origin tracks which origin reaches each non-finite output element (issue 17).

Expected lines are found by their marker comment; expected non-finite elements by running the
function in numpy float32 (independent of the walker).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from pytest_jaxstab._diagnostics._nan_origin import find_nan_origin
from tests.test_nan_origin import assert_at


def masked_exp(x):
    e = jnp.exp(x)  # EXP
    y = jnp.log(e - 1.0)  # LOG
    return jnp.where(x < 20.0, y, x)


def test_where_reports_the_origin_that_reaches_the_output_element():
    x = np.array([1e-9, 100.0], np.float32)
    with np.errstate(all="ignore"):  # independent: numpy float32 gives -inf at index 0 only
        ref = np.where(x < 20, np.log(np.exp(x) - np.float32(1)), x)
    assert np.isneginf(ref[0]) and np.isfinite(ref[1])
    origin = find_nan_origin(masked_exp, x)
    assert origin is not None
    assert_at(origin, masked_exp, "LOG")
    assert (origin.primitive, origin.kind, origin.index) == ("log", "division by zero", (0,))
    every = {o.primitive: o for o in find_nan_origin(masked_exp, x, every=True)}
    assert every["exp"].reaches_output is False
    assert every["log"].reaches_output is True


def stacked_rows(x):
    a = jnp.exp(x)  # ROW0
    b = jnp.log(x)  # ROW1
    m = jnp.stack([a, b])
    return jnp.sum(m, axis=1)[1]


def test_reduction_and_slice_keep_rows_apart():
    # row 0 overflows in exp, row 1 holds log(0) = -inf; the result is row 1's sum only
    origin = find_nan_origin(stacked_rows, np.array([100.0, 0.0], np.float32))
    assert origin is not None
    assert_at(origin, stacked_rows, "ROW1")
    every = {o.primitive: o for o in find_nan_origin(stacked_rows, np.array([100.0, 0.0], np.float32),
                                                     every=True)}
    assert every["exp"].reaches_output is False


def gathered(x, i):
    a = jnp.exp(x)  # GATHER-EXP
    b = jnp.sqrt(x - 50.0)  # GATHER-SQRT
    return jnp.concatenate([a, b])[i]


def test_gather_takes_the_taint_of_the_element_it_reads():
    x = np.array([100.0, 1.0], np.float32)  # exp overflows at 0, sqrt(-49) is NaN at 1
    assert_at(find_nan_origin(gathered, x, np.array([0, 2])), gathered, "GATHER-EXP")
    assert_at(find_nan_origin(gathered, x, np.array([1, 3])), gathered, "GATHER-SQRT")
    assert find_nan_origin(gathered, x, np.array([1, 2])) is None  # finite elements only


def overflowing_row_sum(x):
    big = x * 1e30  # ROWSUM
    return jnp.sum(big, axis=1)


def test_overflow_inside_a_reduction_is_an_origin_per_row():
    x = np.array([[1e9, 1e9], [1.0, 2.0]], np.float32)
    origin = find_nan_origin(overflowing_row_sum, x)
    assert origin is not None
    assert_at(origin, overflowing_row_sum, "ROWSUM")
    assert origin.primitive == "mul"


def scanned(x):
    def body(c, xi):
        y = jnp.where(xi > 0, jnp.log(xi), 0.0)  # SCAN-MASKED
        z = jnp.log(xi + 1.0)  # SCAN-LOG
        return c, y + z

    return jax.lax.scan(body, 0.0, x)[1]


def test_masked_in_a_loop_body_does_not_reach():
    x = np.array([0.0, -1.0, 2.0], np.float32)  # log(0) masked at step 0; log(-1 + 1) at step 1
    origin = find_nan_origin(scanned, x)
    assert origin is not None
    assert_at(origin, scanned, "SCAN-LOG")
    assert origin.steps == (1,)


def test_grad_origin_still_found():
    def loss(x):
        return jnp.sum(jnp.sqrt(x))  # GRAD-SQRT

    origin = find_nan_origin(jax.grad(loss), np.array([0.0, 1.0], np.float32))
    assert origin is not None
    assert_at(origin, loss, "GRAD-SQRT")
    assert origin.kind == "division by zero"


def sliced_log(x):
    y = jnp.log(x)  # SLICED-LOG
    return jax.lax.dynamic_slice(y, (2,), (1,))


def test_the_element_reported_is_one_that_reaches_the_result():
    x = np.array([-1.0, 5.0, 0.0], np.float32)  # log: NaN at 0 (sliced away), -inf at 2 (returned)
    origin = find_nan_origin(sliced_log, x)
    assert origin is not None
    assert_at(origin, sliced_log, "SLICED-LOG")
    assert (origin.index, origin.kind) == ((2,), "division by zero")
    assert origin.operands[0].value == 0.0


def test_check_message_names_the_origin_that_reaches_the_output():
    import pytest_jaxstab as jst
    from tests.test_nan_origin import line_of

    result = jst.check(masked_exp, shapes=[(2,)], dtype="float32", domain=(1e-9, 100.0), seed=0,
                       max_examples=60)
    origin = next(o for o in result.nan_origins if o.variant == "original")
    _, line = line_of(masked_exp, "LOG")
    assert origin.location is not None
    assert (origin.primitive, origin.location.rsplit(":", 1)[1]) == ("log", str(line))
    assert "in log at " in result.message


def out_of_bounds(x):
    y = jnp.log(x)  # OOB-LOG
    return y.at[jnp.array([1, 7])].get(mode="fill", fill_value=jnp.nan)  # OOB-GATHER


def test_a_gather_fill_value_is_born_at_the_gather():
    # index 7 is out of bounds: the NaN is the gather's fill value; log(-1) at 0 is never read
    origin = find_nan_origin(out_of_bounds, np.array([-1.0, 2.0], np.float32))
    assert origin is not None
    assert_at(origin, out_of_bounds, "OOB-GATHER")
    assert (origin.primitive, origin.index) == ("gather", (1,))
    every = {o.primitive: o for o in find_nan_origin(out_of_bounds, np.array([-1.0, 2.0], np.float32),
                                                     every=True)}
    assert every["log"].reaches_output is False
