"""The error metric (docs/architecture.md, "The error metric"): ordinals, bits of error, summary figures.

Distances are built with ``np.nextafter`` steps, and a randomized check recomputes ordinals from the raw
bits with Python's unbounded ints, so the references share no code with the module under test.
"""

from __future__ import annotations

import math
import struct

import ml_dtypes
import numpy as np
import pytest

from pytest_jaxstab.oracles import error_bits, ordinals, summarize

DTYPES = [np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16), np.dtype(np.float32), np.dtype(np.float64)]
WIDTH = {"float16": 16, "bfloat16": 16, "float32": 32, "float64": 64}


def finfo(dtype):
    return ml_dtypes.finfo(dtype) if dtype == ml_dtypes.bfloat16 else np.finfo(dtype)


def fl(dtype, value):
    return np.asarray(value, dtype=dtype)


def steps(x, k, toward=np.inf):
    """x moved k representable values toward `toward`."""
    for _ in range(k):
        x = np.nextafter(x, fl(x.dtype, toward))
    return x


def random_finite(dtype, n, seed):
    rng = np.random.default_rng(seed)
    uint = {2: np.uint16, 4: np.uint32, 8: np.uint64}[np.dtype(dtype).itemsize]
    u = np.frombuffer(rng.bytes(4 * n * np.dtype(dtype).itemsize), dtype=uint)
    inf = fl(dtype, np.inf).view(uint)
    return u[(u & ~fl(dtype, -0.0).view(uint)) < inf][:n].view(dtype)


# ---------------------------------------------------------------------------------------------- ordinals


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_ordinals_are_monotone_and_count_steps(dtype):
    info = finfo(dtype)
    x = np.sort(np.concatenate([random_finite(dtype, 3000, 1), fl(dtype, [np.inf, -np.inf, 0.0, -0.0])]))
    o = ordinals(x)
    assert o.dtype == np.int64
    assert o.shape == x.shape
    assert np.all(np.diff(o) >= 0)
    assert np.all((np.diff(o) == 0) == (x[1:] == x[:-1]))  # equal ordinals exactly for equal values
    assert ordinals(fl(dtype, -0.0)) == ordinals(fl(dtype, 0.0)) == 0
    tiny = fl(dtype, info.smallest_subnormal)
    assert ordinals(tiny) == 1
    assert ordinals(-tiny) == -1
    fmax = fl(dtype, info.max)
    assert ordinals(fl(dtype, np.inf)) == ordinals(fmax) + 1
    assert ordinals(-fmax) == -ordinals(fmax)
    one = fl(dtype, 1.0)
    assert ordinals(steps(one, 5)) - ordinals(one) == 5
    assert ordinals(steps(one, 5, -np.inf)) - ordinals(one) == -5


def test_ordinals_of_float64_extremes_fit_int64():
    assert ordinals(np.float64(np.finfo(np.float64).max)) == 0x7FEFFFFFFFFFFFFF
    assert ordinals(-np.float64(np.finfo(np.float64).max)) == -0x7FEFFFFFFFFFFFFF


def test_ordinals_reject_other_dtypes():
    with pytest.raises(ValueError, match="int32"):
        ordinals(np.arange(3, dtype=np.int32))


# ------------------------------------------------------------------------------------------ error_bits


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_equal_is_zero_and_adjacent_is_one(dtype):
    x = random_finite(dtype, 2000, 2)
    x = x[np.abs(x) < finfo(dtype).max]
    np.testing.assert_array_equal(error_bits(x, x), 0.0)
    np.testing.assert_array_equal(error_bits(steps(x, 1), x), 1.0)
    np.testing.assert_array_equal(error_bits(x, steps(x, 1)), 1.0)
    np.testing.assert_array_equal(error_bits(steps(x, 3), x), 2.0)
    np.testing.assert_array_equal(error_bits(steps(x, 7, -np.inf), x), 3.0)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_around_zero_and_the_subnormal_boundary(dtype):
    info = finfo(dtype)
    tiny = fl(dtype, info.smallest_subnormal)
    assert error_bits(fl(dtype, -0.0), fl(dtype, 0.0)) == 0.0
    assert error_bits(fl(dtype, 0.0), fl(dtype, -0.0)) == 0.0
    assert error_bits(-tiny, tiny) == math.log2(3)  # -tiny, 0, +tiny: two steps
    assert error_bits(fl(dtype, -0.0), tiny) == 1.0
    normal = fl(dtype, info.smallest_normal)
    largest_subnormal = steps(normal, 1, 0.0)
    assert error_bits(largest_subnormal, normal) == 1.0
    assert error_bits(steps(normal, 4, 0.0), steps(normal, 3)) == math.log2(8)
    assert error_bits(-largest_subnormal, -normal) == 1.0


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_non_finite_results(dtype):
    width = WIDTH[dtype.name]
    fmax = finfo(dtype).max
    approx = fl(dtype, [np.nan, np.inf, -np.inf, np.nan, np.inf, -np.inf, fmax, 1.0, np.nan, -np.inf])
    exact = fl(dtype, [1.0, fmax, -fmax, np.inf, np.inf, -np.inf, np.inf, -np.inf, -np.inf, np.inf])
    # NaN or Inf against a finite truth: full width, even Inf against max (one ordinal step away);
    # a matching overflow: 0; anything else against an infinite truth: full width.
    expected = [width, width, width, width, 0, 0, width, width, width, width]
    np.testing.assert_array_equal(error_bits(approx, exact), np.array(expected, dtype=np.float64))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_nan_truth_is_nan(dtype):
    approx = fl(dtype, [np.nan, np.inf, -np.inf, 0.0, 1.0, -finfo(dtype).max])
    assert np.isnan(error_bits(approx, fl(dtype, np.nan))).all()


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_the_largest_distance_stays_within_the_width(dtype):
    width = WIDTH[dtype.name]
    fmax = fl(dtype, finfo(dtype).max)
    for a, e in [(-fmax, fmax), (fmax, -fmax)]:
        got = error_bits(a, e)
        assert width - 1 < got <= width
    # Every finite pair stays within the width: a random sample of far-apart ones.
    x = random_finite(dtype, 1000, 3)
    got = error_bits(x, -x[::-1])
    assert np.all((got >= 0) & (got <= width))


def test_float64_distances_against_python_ints():
    """Ordinals from the raw bits with unbounded ints: no overflow possible in the reference."""

    def ordinal(v: float) -> int:
        (b,) = struct.unpack("<Q", struct.pack("<d", v))
        return -(b & ((1 << 63) - 1)) if b >> 63 else b

    x = random_finite(np.float64, 2000, 4)
    y = random_finite(np.float64, 2000, 5)[: len(x)]
    x = x[: len(y)]
    near = steps(x, 1)  # adjacent pairs too
    approx = np.concatenate([x, x, [np.finfo(np.float64).max]])
    exact = np.concatenate([y, near, [-np.finfo(np.float64).max]])
    expected = [min(64.0, math.log2(1 + abs(ordinal(a) - ordinal(e)))) for a, e in zip(approx, exact)]
    np.testing.assert_allclose(error_bits(approx, exact), expected, rtol=1e-15, atol=0)


def test_broadcasting():
    approx = np.array([[1.0], [2.0], [np.inf]], np.float32)  # (3, 1)
    one = np.float32(1)
    exact = np.array([one, np.nextafter(one, np.float32(2)), np.float32(np.nan), np.float32(2)])  # (4,)
    got = error_bits(approx, exact)
    assert got.shape == (3, 4)
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got[:, 2], np.nan)
    np.testing.assert_array_equal(got[0], [0.0, 1.0, np.nan, math.log2(1 + 2**23)])
    np.testing.assert_array_equal(got[1, 3], 0.0)
    np.testing.assert_array_equal(got[2], [32.0, 32.0, np.nan, 32.0])
    # scalars give a 0-d array
    assert error_bits(np.float16(1), np.float16(1)).shape == ()


def test_dtype_mismatch_names_both():
    with pytest.raises(ValueError, match=r"float32.*float64"):
        error_bits(np.ones(3, np.float32), np.ones(3, np.float64))
    with pytest.raises(ValueError, match=r"bfloat16.*float16"):
        error_bits(np.ones(3, ml_dtypes.bfloat16), np.ones(3, np.float16))
    with pytest.raises(ValueError, match="int32"):
        error_bits(np.ones(3, np.int32), np.ones(3, np.int32))


def test_jax_arrays_accepted():
    jnp = pytest.importorskip("jax.numpy")
    one = jnp.array([1.0, 2.0], dtype=jnp.bfloat16)
    np.testing.assert_array_equal(error_bits(one, np.array([1.0, 2.0], ml_dtypes.bfloat16)), [0.0, 0.0])


# ------------------------------------------------------------------------------------------- summarize


def test_summarize():
    assert summarize(np.array([0.0, 2.0, np.nan, 4.0, np.nan])) == (4.0, 2.0, 2)
    assert summarize([[1.0, 3.0]]) == (3.0, 2.0, 0)
    assert summarize([np.nan, np.nan]) == (0.0, 0.0, 2)
    assert summarize([]) == (0.0, 0.0, 0)
    max_bits, mean_bits, discarded = summarize(np.array([1.0]))
    assert type(max_bits) is float
    assert type(mean_bits) is float
    assert type(discarded) is int
