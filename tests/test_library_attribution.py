"""Local error and the NaN walk blame a library routine as one operation, at the user's line calling it,
and the line that loses the bits rather than the later line where a NaN shows (issue 27 items 2, 4).

Expected figures are derived by hand: jax 0.12.0's log_ndtr(-20) (a truncated series, written out in
``tests/test_oracle_library.py``) is 4.0e-9 (1.4e5 ulps, 17 bits) from the true -203.917155371097264;
sqrt(x*x + 1) overflows float64 for x = 2e200 though the result, 2e200, does not;
Phi(9) - Phi(8) in float64 is (1 - 1.1e-19) - (1 - 6.2e-16): the subtraction of two values rounded to 1
- 2^-53 k keeps almost none of the 6.2e-16 difference's bits.
"""

from __future__ import annotations

import inspect

import jax
import jax.numpy as jnp
import jax.scipy.special as sp
import mpmath
import numpy as np

import pytest_jaxstab as jst
from tests.test_oracle_library import _mp_bits, series_log_ndtr


def _line_of(fn, text):
    lines, start = inspect.getsourcelines(fn)
    for k, line in enumerate(lines):
        if text in line:
            return start + k
    raise AssertionError(f"{text!r} not in {fn.__name__}")


def tail_loss(x):
    y = x * 1.0
    return -sp.log_ndtr(y)  # the call site


def series_tail_loss(x):
    y = x * 1.0
    return -series_log_ndtr(y)  # the series' call site


def test_local_error_blames_the_routine_at_the_callers_line():
    # jax 0.10 to 0.12.0's log_ndtr, a series truncated below -20, written by hand and declared as log
    # Phi: on every JAX it is blamed as one operation (17 bits) at the user's line calling it
    with jax.enable_x64(True):
        report = jst.local_error(series_tail_loss, np.float64(-20.0))
    worst = report.worst
    assert worst is not None
    assert worst.primitive == "series_log_ndtr" and worst.kind == "approximation"
    assert worst.location is not None
    assert worst.location.endswith(f":{_line_of(series_tail_loss, 'call site')}")
    assert worst.max_bits > 16


def test_local_error_blames_jax_log_ndtr_as_far_as_mpmath_measures_it():
    # the installed log_ndtr at -20 loses what mpmath measures (17 bits up to jax 0.12.0, 0 on 0.12.1):
    # exactly that is blamed on the routine, at the caller's line, and nothing where it loses nothing
    with jax.enable_x64(True):
        report = jst.local_error(tail_loss, np.float64(-20.0))
        measured = _mp_bits(np.float64(sp.log_ndtr(np.float64(-20.0))), mpmath.log(mpmath.ncdf(-20)))
    blamed = [e for e in report.lines if e.primitive == "log_ndtr"]
    if measured == 0:
        assert blamed == [] and report.worst is None
        return
    assert report.worst is blamed[0] and blamed[0].kind == "approximation"
    assert blamed[0].max_bits == measured
    assert blamed[0].location is not None
    assert blamed[0].location.endswith(f":{_line_of(tail_loss, 'call site')}")


@jst.oracles.define(exact=lambda x: (x * x + 1).sqrt())
def hypot1(x):
    return jnp.sqrt(x * x + 1.0)  # x * x overflows long before the result does


def uses_hypot(x):
    y = x * 2.0
    return hypot1(y) - 1.0  # the call site


def test_nan_walk_names_the_routine_at_the_callers_line():
    with jax.enable_x64(True):
        origin = jst.find_nan_origin(uses_hypot, np.float64(1e200))
        report = jst.local_error(uses_hypot, np.float64(1e200))
    assert origin is not None
    assert origin.primitive == "hypot1"
    assert origin.location is not None and origin.location.endswith(f":{_line_of(uses_hypot, 'call site')}")
    assert report.worst is not None and report.worst.primitive == "hypot1"
    assert report.worst.kind == "overflow"


def variance_then_std(x):
    m = jnp.mean(x)
    var = jnp.mean(x * x) - m * m  # cancels
    return jnp.sqrt(var)  # NaN shows here when var rounds below 0


def test_local_error_blames_the_cancelling_subtraction_not_the_sqrt():
    x = np.asarray([1e4 + 0.25, 1e4 - 0.25, 1e4 + 0.5, 1e4], np.float32)
    report = jst.local_error(variance_then_std, x)
    worst = report.worst
    assert worst is not None and worst.primitive == "sub" and worst.kind == "cancellation"
    assert worst.location is not None
    assert worst.location.endswith(f":{_line_of(variance_then_std, 'cancels')}")
    sqrt_lines = [e for e in report.lines if e.primitive == "sqrt"]
    assert all(e.max_bits < 2 for e in sqrt_lines)


def log_prob_of_interval(a, b):
    p = sp.ndtr(b) - sp.ndtr(a)  # difference of CDFs
    return jnp.log(p)


def test_local_error_blames_the_difference_of_cdfs():
    with jax.enable_x64(True):
        report = jst.local_error(log_prob_of_interval, np.float64(8.0), np.float64(9.0))
    worst = report.worst
    assert worst is not None and worst.primitive == "sub" and worst.kind == "cancellation"
    assert worst.location is not None
    assert worst.location.endswith(f":{_line_of(log_prob_of_interval, 'difference of CDFs')}")
    assert worst.max_bits > 20
