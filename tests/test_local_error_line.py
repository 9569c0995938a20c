"""jst.local_error names the line where the bits are lost, not a later line that shows the damage.

Issue 39 (deliverable 6). Each case is the shape of a bug reported against JAX or a library built on it
(the issue is cited above the function); the line that loses the bits is marked ``# LOSS`` by
construction: a subtraction of two values that agree in their leading bits, whose own inputs are
accurate, followed by a line that turns the damage into a NaN, an infinity or a large error (a
division, a log, a sqrt, an exp). The later line must not be named: its inputs were already wrong (a
cancelled result, or an operand that underflowed to a subnormal XLA flushes to 0) or its loss only
ties with the subtraction's. The bits of the subtraction are checked against mpmath where the case
states a figure; otherwise the test asserts only that the named line is the marked one and that it
loses more than the tolerance.

The inputs are float32 (the precision where these bugs were reported) unless stated; each case's
comment says why the chosen inputs make the subtraction lose its bits.
"""

from __future__ import annotations

import inspect
import os

import jax
import jax.numpy as jnp
import jax.scipy.stats as jss
import mpmath
import numpy as np
import pytest

import pytest_jaxstab as jst
from pytest_jaxstab._check._trace import x64_scope

TOLERANCE = 8.0  # bits: the check's default tolerance; every marked line loses far more


def line_of(fn, marker: str = "LOSS") -> tuple[str, int]:
    lines, start = inspect.getsourcelines(fn)
    hits = [start + i for i, text in enumerate(lines) if text.rstrip().endswith(f"# {marker}")]
    assert len(hits) == 1, marker
    source = inspect.getsourcefile(fn)
    assert source is not None
    return source, hits[0]


def named_line(result) -> tuple[str, int] | None:
    worst = result.worst
    if worst is None or worst.location is None:
        return None
    file, line = worst.location.rsplit(":", 1)
    return file, int(line)


def assert_names_loss(fn, *args) -> None:
    result = jst.local_error(fn, *args)
    got = named_line(result)
    want_file, want_line = line_of(fn)
    assert got is not None, str(result)
    assert os.path.samefile(got[0], want_file) and got[1] == want_line, str(result)
    assert result.worst is not None and result.worst.max_bits > TOLERANCE, str(result)


# ------------------------------------------------------------------ cancellation, then a division
# jax-ml/jax#34139 (jnp.sinc's derivative): (cos x - sin(x)/x) / x; at |x| <= 1e-4 both terms round to
# 1 in float32, the difference is 0 where the exact one is -x/3 * x.
def sinc_derivative(x):
    c = jnp.cos(x)
    s = jnp.sin(x) / x
    d = c - s  # LOSS
    return d / x


# The textbook (1 - cos x) / x^2, written the way the tie arises: x^2 first, and at x = 1e-20 it (and
# the cancelled numerator) are subnormal, so the division sees 0 / 0 on its exact inputs rounded.
def one_minus_cos_ratio(x):
    den = x ** 2
    num = 1.0 - jnp.cos(x)  # LOSS
    return num / den


# Bose-Einstein occupancy t / (e^t - 1): e^t rounds to 1 + a few ulps for small t.
def bose_einstein(t):
    d = jnp.exp(t) - 1.0  # LOSS
    return t / d


# ------------------------------------------------------------------------ cancellation, then a log
# log(1 - cos x) (a log-likelihood of an angle): at x = 1e-20 the exact 1 - cos x is the subnormal 5e-41,
# which XLA flushes to 0, so the log sees 0 on its exact input rounded as well.
def log_one_minus_cos(x):
    num = 1.0 - jnp.cos(x)  # LOSS
    return jnp.log(num)


# tensorflow/compression#116 and numpyro's discretized likelihoods: log(Phi(y + 1/2) - Phi(y - 1/2)); for
# y >= 7 both CDFs round to 1 in float32 and the log of their difference is -inf.
def discretized_logpmf(y):
    upper = jss.norm.cdf(y + 0.5)
    lower = jss.norm.cdf(y - 0.5)
    p = upper - lower  # LOSS
    return jnp.log(p)


# handley-lab/blackjax#61/#67: log(1 - exp(d)) for d a tiny negative log-volume shrinkage.
def log_shrinkage(d):
    q = 1.0 - jnp.exp(d)  # LOSS
    return jnp.log(q)


# -------------------------------------------------- cancellation, then the sqrt of a negative value
# google/flax#1491 (BatchNorm) and the TA-Lib/minc reports: E[x^2] - E[x]^2 of nearly constant data
# rounds negative; its rsqrt (and, for two values, its sqrt) is NaN. At 1000 + 1.2e-4 k the exact
# variance is 1.8e-8, each mean of squares is rounded by up to 0.03: both results below are NaN.
def batchnorm_scale(x):
    mean = jnp.mean(x)
    mean2 = jnp.mean(x * x)
    var = mean2 - mean * mean  # LOSS
    return jax.lax.rsqrt(var + 1e-9) * (x[0] - mean)


def pair_std(a, b):
    m = (a + b) * 0.5
    var = (a * a + b * b) * 0.5 - m * m  # LOSS
    return jnp.sqrt(var)


# ------------------------------------------------------------ cancellation, then an exp (overflow)
# A Boltzmann ratio exp((E1 - E0) / kT) of two energies k x^2 / 2 that agree to float32 precision:
# at x1 = 100.00001, x0 = 100 the gap is 7.6e-4 while each energy (5000) is rounded by up to 2.4e-4, so
# the float gap is off by a third and, over kT = 9.5e-6, the exp of about 100 overflows where the exact
# exp(80) is 5.5e34.
def boltzmann(x1, x0):
    e1 = 0.5 * x1 * x1
    e0 = 0.5 * x0 * x0
    gap = e1 - e0  # LOSS
    return jnp.exp(gap / 9.5e-6)


# ------------------------------------------------------------ library code reached through jnp/jax.nn
# jax-ml/jax#30426: jax.nn.standardize's fast variance (mean(x^2) - mean(x)^2) of nearly constant data.
def standardized_ratio(x):
    z = jax.nn.standardize(x, epsilon=1e-12)  # LOSS
    return z[0] / z[1]


# jnp.polyval's Horner scheme on (x - 1)^2 expanded, near its double root, then a log.
def polyval_log(x):
    p = jnp.polyval(jnp.array([1.0, -2.0, 1.0], jnp.float32), x)  # LOSS
    return jnp.log(p)


CASES = [
    pytest.param(sinc_derivative, (np.array([1e-4, 3e-5], np.float32),), id="sinc-derivative-div"),
    pytest.param(one_minus_cos_ratio, (np.array([1e-20, 2e-4], np.float32),), id="tie-underflow-square"),
    pytest.param(one_minus_cos_ratio, (np.array([1e-20], np.float32),), id="tie-underflow-only"),
    pytest.param(bose_einstein, (np.array([1e-4, 3e-5], np.float32),), id="bose-einstein-div"),
    pytest.param(discretized_logpmf, (np.array([7.0, 7.5], np.float32),), id="cdf-difference-log"),
    pytest.param(log_shrinkage, (np.array([-1e-8, -3e-9], np.float32),), id="log1mexp-log"),
    pytest.param(batchnorm_scale, (np.float32(1e3) + np.arange(4, dtype=np.float32) * np.float32(1.2e-4),),
                 id="batchnorm-rsqrt"),
    pytest.param(pair_std, (np.float32(1000.0002), np.float32(1000.0)), id="pair-std-sqrt"),
    pytest.param(boltzmann, (np.float32(100.00001), np.float32(100.0)), id="boltzmann-exp"),
    pytest.param(log_one_minus_cos, (np.array([1e-20, 3e-20], np.float32),), id="subnormal-log"),
    pytest.param(standardized_ratio, (np.float32(-11.0) + np.array([0, 1, 2], np.float32) * 9.5e-7,),
                 id="jax-nn-standardize"),
    pytest.param(polyval_log, (np.array([1.0 + 3e-4, 1.0 - 2e-4], np.float32),), id="jnp-polyval-log"),
]


@pytest.mark.parametrize(("fn", "args"), CASES)
def test_names_the_line_that_loses_the_bits(fn, args):
    assert_names_loss(fn, *args)


def test_tie_in_float64():
    # x^2 = 1e-340 is subnormal in float64 (tiny 2.2e-308), and 1 - cos(1e-170) rounds both terms to 1
    with x64_scope(np.dtype(np.float64)):
        assert_names_loss(one_minus_cos_ratio, np.array([1e-170, 1e-9], np.float64))


# ---------------------------------------------------------------------------------- the figures
def _bits_from_zero(exact, dtype) -> float:
    """``error_bits(0, exact)`` computed here: log2(1 + the number of floats between 0 and ``exact``
    rounded to ``dtype``), the float's bit pattern read as an integer."""
    rounded = np.array(float(exact), dtype)
    assert rounded != 0
    itype = np.int32 if np.dtype(dtype).itemsize == 4 else np.int64
    return float(np.log2(1.0 + abs(int(rounded.view(itype)))))


def test_a_subtraction_cancelled_into_the_subnormal_range_keeps_its_bits():
    # 1 - cos(1e-20) = 5e-41 exactly (mpmath), a float32 subnormal; both terms round to 1, so the float
    # subtraction gives 0. Until now a result XLA flushes scored 0 bits, which hid the cancellation and
    # named the division that sees 0 / 0; the figure is the distance from 0 to 5e-41 in float32 ulps.
    with mpmath.workprec(200):
        want = _bits_from_zero(1 - mpmath.cos(mpmath.mpf(float(np.float32(1e-20)))), np.float32)
    worst = jst.local_error(one_minus_cos_ratio, np.array([1e-20], np.float32)).worst
    assert worst is not None and (worst.primitive, worst.kind) == ("sub", "cancellation")
    assert abs(worst.max_bits - want) <= 0.01  # the exact value's rounding moves the count by < 1 in 3e4


def test_the_inherited_line_is_listed_after_with_the_kind_of_its_operands():
    result = jst.local_error(one_minus_cos_ratio, np.array([1e-20], np.float32))
    div = next(x for x in result.lines if x.primitive == "div")
    # 0 / 0 is NaN because both operands underflowed (not an overflow); it is still listed, after the sub
    assert div.kind == "underflow" and div.max_bits == 32.0
    assert result.lines.index(div) > 0


# --------------------------------------------------------------------------------- near misses
def flushed_not_cancelled(a, b):
    # 2e-38 - 1.5e-38 is exact in float32: a subnormal, which XLA flushes to 0
    d = a - b
    return d * 1e30


def test_a_difference_flushed_to_zero_is_not_called_a_cancellation():
    # both operands are normal but below tiny * 2^24: their exact difference is a subnormal only because
    # the operands are tiny, XLA's flush (not cancellation) makes it 0, and the sub must stay unblamed
    result = jst.local_error(flushed_not_cancelled, np.float32(2e-38), np.float32(1.5e-38))
    assert all(x.primitive != "sub" for x in result.lines), str(result)


def cancel_then_log_near_one(x):
    # x = 0.3 loses the few bits of 4.3's rounding; the log of 1 + 3e-7 rounded loses ~20 of its own
    s = (x + 4.0) - 4.0  # SMALL
    return jnp.log(1.0 + s * 1e-6)  # LOG


def test_program_order_does_not_outrank_more_bits():
    result = jst.local_error(cancel_then_log_near_one, np.array([0.3], np.float32))
    worst = result.worst
    assert worst is not None and worst.primitive == "log", str(result)
    log_line = line_of(cancel_then_log_near_one, "LOG")[1]
    assert worst.location is not None and worst.location.endswith(f":{log_line}")
    small = next(x for x in result.lines if x.primitive == "sub")
    assert 2.0 < small.max_bits < worst.max_bits - 8.0, str(result)  # not a tie: the log loses far more


def two_total_losses(d, a, b):
    # on their exact inputs rounded, FIRST gives 0 for 5e-9 and SECOND 0 for 1.8e-8: 1.8e-8 lies more
    # float32 ulps from 0, so SECOND lists (a few hundredths of a bit) more
    q = 1.0 - jnp.exp(d)  # FIRST
    m = (a + b) * 0.5
    var = (a * a + b * b) * 0.5 - m * m  # SECOND
    return q + var


def test_two_lines_that_lose_every_bit_tie_and_the_first_is_named():
    # Past the 24 bits of a float32 significand nothing is left to lose: both zeros are the same total
    # loss, and the earlier line is named although the later one lists more bits (by the old ranking,
    # more bits first, the later line was named).
    result = jst.local_error(two_total_losses, np.float32(-5e-9), np.float32(1000.0002), np.float32(1000.0))
    first, second = line_of(two_total_losses, "FIRST")[1], line_of(two_total_losses, "SECOND")[1]
    by_line = {int(str(x.location).rsplit(":", 1)[1]): x for x in result.lines if x.primitive == "sub"}
    assert by_line[second].max_bits > by_line[first].max_bits >= 24.0, str(result)
    assert result.worst == by_line[first], str(result)


# --------------------------------------------------------------------- in a check's failure text
def test_the_failure_text_names_the_losing_line_and_the_nan_birth_apart():
    # inputs from 1e-22 (x^2 underflows, the division's 0 / 0 is the NaN) to 1e-2 (1 - cos x cancels)
    result = jst.check(one_minus_cos_ratio, shapes=[(4,)], dtype="float32", domain=(1e-22, 1e-2), seed=0,
                       max_examples=40)
    assert result.outcome == "failed"
    worst = result.local_error[0]
    assert worst.location is not None and worst.location.endswith(f":{line_of(one_minus_cos_ratio)[1]}")
    text = result.message
    nan_line = next(x for x in text.splitlines() if x.startswith("NaN/Inf born in the function as written"))
    most = next(line for line in text.splitlines() if line.startswith("Most bits lost at"))
    assert "in div at" in nan_line and f":{line_of(one_minus_cos_ratio)[1] + 1}" in nan_line, text
    assert "cancellation in sub" in most and f":{line_of(one_minus_cos_ratio)[1]}:" in most, text
    # the division's 32 bits are listed too, as the later loss they are
    then = next(line for line in text.splitlines() if line.startswith("Then "))
    assert "underflow in div" in then and f":{line_of(one_minus_cos_ratio)[1] + 1} " in then, text
