"""Correct rounding of exact (mpmath) values to the four float dtypes, and exact conversion back.

References never come from the code under test: exact values of floats come from
``float.as_integer_ratio``, midpoints are built from neighbours given by ``np.nextafter``, and the
randomized checks compare with numpy's float64 -> float32 cast (correctly rounded in hardware), with
mpmath's own rounding to a precision (normal range) and with ``round(Fraction)`` (half-even, subnormals).
"""

from __future__ import annotations

import math
import time
from fractions import Fraction

import ml_dtypes
import mpmath
import mpmath.libmp
import numpy as np
import pytest

from pytest_jaxstab._dtypes import dtype_info
from pytest_jaxstab.oracles.core._rounding import round_to_dtype, to_mpf_array

DTYPES = [np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16), np.dtype(np.float32), np.dtype(np.float64)]
UINT = {2: np.uint16, 4: np.uint32, 8: np.uint64}


def finfo(dtype):
    return ml_dtypes.finfo(dtype) if dtype == ml_dtypes.bfloat16 else np.finfo(dtype)


def bits(x, dtype):
    """Bit patterns of x as unsigned ints: compares -0.0, +0.0 and NaN exactly."""
    return np.asarray(x, dtype=dtype).view(UINT[np.dtype(dtype).itemsize])


def exact(x) -> mpmath.mpf:
    """The exact value of a finite float as an mpf, independently of the module under test."""
    n, d = float(x).as_integer_ratio()
    with mpmath.workprec(64):  # n has at most 53 bits and d is a power of two: exact
        return mpmath.mpf(n) / d


def fl(dtype, value):
    return np.asarray(value, dtype=dtype)[()]


def up(x):
    return np.nextafter(x, fl(x.dtype, np.inf))


def random_finite(dtype, n, seed):
    """n random finite floats of dtype, uniform over bit patterns (so all binades and subnormals)."""
    rng = np.random.default_rng(seed)
    size = np.dtype(dtype).itemsize
    u = np.frombuffer(rng.bytes(4 * n * size), dtype=UINT[size])
    # Finite by the bits: np.isfinite may warn on signalling NaN patterns (bfloat16).
    inf = bits(np.inf, dtype)
    return u[(u & ~bits(-0.0, dtype)) < inf][:n].view(dtype)


def assert_rounds(values, expected, dtype):
    got = round_to_dtype(np.array(values, dtype=object), dtype)
    assert got.dtype == dtype
    np.testing.assert_array_equal(bits(got, dtype), bits(expected, dtype))


# ----------------------------------------------------------------------------------------------- formats


# The formats' definitions (IEEE 754 binary16/32/64, and bfloat16 = float32's exponent with 8 significand
# bits): (significand bits with the hidden one, min normal exponent, max exponent, width).
_IEEE = {"float16": (11, -14, 15, 16), "bfloat16": (8, -126, 127, 16), "float32": (24, -126, 127, 32),
         "float64": (53, -1022, 1023, 64)}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_dtype_table_matches_the_format_definitions(dtype):
    fmt = dtype_info(dtype)
    assert fmt.dtype == dtype
    assert (fmt.significand_bits, fmt.min_exponent, fmt.max_exponent, fmt.bits) == _IEEE[dtype.name]
    assert fmt.bits == 8 * np.dtype(fmt.uint_dtype).itemsize
    assert float(fmt.max) == (2 - 2.0 ** (1 - fmt.significand_bits)) * 2.0**fmt.max_exponent


@pytest.mark.parametrize(
    ("spelling", "expected"),
    [
        ("float16", np.float16),
        ("bfloat16", ml_dtypes.bfloat16),
        (ml_dtypes.bfloat16, ml_dtypes.bfloat16),
        (np.dtype(ml_dtypes.bfloat16), ml_dtypes.bfloat16),
        ("float32", np.float32),
        (np.float32, np.float32),
        (np.dtype("float64"), np.float64),
        (float, np.float64),
    ],
)
def test_dtype_spellings(spelling, expected):
    assert round_to_dtype([mpmath.mpf(1)], spelling).dtype == np.dtype(expected)


@pytest.mark.parametrize("bad", ["int32", "float8", "foo", np.complex64, np.int16, "float128"])
def test_unknown_dtype_is_a_value_error_naming_it(bad):
    with pytest.raises(ValueError, match="unsupported dtype") as excinfo:
        round_to_dtype([mpmath.mpf(1)], bad)
    assert repr(bad) in str(excinfo.value)


def test_jax_dtypes_accepted():
    jnp = pytest.importorskip("jax.numpy")
    assert round_to_dtype([1], jnp.bfloat16).dtype == np.dtype(ml_dtypes.bfloat16)
    assert round_to_dtype([1], jnp.float32).dtype == np.float32


# ------------------------------------------------------------------------------------ exact and specials


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_exact_values_round_to_themselves(dtype):
    info = finfo(dtype)
    tiny = fl(dtype, info.smallest_subnormal)
    special = [
        tiny,
        info.smallest_normal,
        np.nextafter(fl(dtype, info.smallest_normal), fl(dtype, 0)),
        info.max,
        1,
        3,
        info.eps,
    ]
    x = np.concatenate([np.array(special, dtype), -np.array(special, dtype), random_finite(dtype, 2000, 1)])
    x = x[x != 0]  # mpmath's zero is unsigned, so -0.0 does not round-trip; zeros are tested below
    assert_rounds([exact(v) for v in x], x, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_specials_pass_through(dtype):
    nan = np.asarray(np.nan, dtype)
    values = [
        mpmath.nan,
        mpmath.inf,
        -mpmath.inf,
        None,
        mpmath.mpc(1, 2),
        mpmath.mpc(1, 0),
        1j,
        mpmath.mpf(0),
        0,
        0.0,
        float("inf"),
        float("-inf"),
        float("nan"),
    ]
    expected = [nan, np.inf, -np.inf, nan, nan, nan, nan, 0, 0, 0, np.inf, -np.inf, nan]
    assert_rounds(values, np.array(expected, dtype), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_python_and_numpy_numbers(dtype):
    values = [
        3,
        -7,
        True,
        np.int64(5),
        0.5,
        np.float32(-0.25),
        np.float16(2.0),
        ml_dtypes.bfloat16(4.0),
        -0.0,
        2**5000,
        -(2**5000),
    ]
    expected = [3, -7, 1, 5, 0.5, -0.25, 2, 4, -0.0, np.inf, -np.inf]
    assert_rounds(values, np.array(expected, dtype), dtype)


def test_ints_are_not_rounded_through_the_context_precision():
    # 2**24 + 1 is a float32 tie (to 2**24); 2**60 + 2**36 + 1 is just above a float32 tie.
    with mpmath.workprec(10):
        assert_rounds(
            [2**24 + 1, 2**24 + 3, 2**60 + 2**36 + 1],
            np.array([2**24, 2**24 + 4, 2**60 + 2**37], np.float32),
            np.float32,
        )


def test_unsupported_element_type_is_a_type_error():
    with pytest.raises(TypeError, match="str"):
        round_to_dtype(np.array(["1.0"], dtype=object), np.float32)
    if np.finfo(np.longdouble).nmant > 52:
        with pytest.raises(TypeError, match=r"float96|float128|longdouble"):
            round_to_dtype([np.longdouble(1) / 3], np.float64)


def test_shapes():
    assert round_to_dtype(mpmath.mpf("0.5"), np.float32).shape == ()
    assert round_to_dtype(mpmath.mpf("0.5"), np.float32)[()] == 0.5
    assert round_to_dtype(np.empty((0, 3), dtype=object), np.float16).shape == (0, 3)
    grid = np.array([[mpmath.mpf(i * 3 + j) for j in range(3)] for i in range(2)], dtype=object)
    out = round_to_dtype(grid, ml_dtypes.bfloat16)
    assert out.shape == (2, 3)
    np.testing.assert_array_equal(out.astype(np.float64), np.arange(6.0).reshape(2, 3))
    # mpf from another mpmath context are accepted too
    other = mpmath.MPContext()
    assert round_to_dtype([other.mpf(3) / 4], np.float32)[0] == 0.75


# ----------------------------------------------------------------------------------------------- ties


def tie_cases(dtype):
    """(lo, hi) pairs of adjacent floats: normal, subnormal, across the boundary, near max, negatives."""
    info = finfo(dtype)
    tiny = fl(dtype, info.smallest_subnormal)
    normal = fl(dtype, info.smallest_normal)
    largest_subnormal = np.nextafter(normal, fl(dtype, 0))
    los = [
        fl(dtype, 0),
        tiny,
        fl(dtype, 2) * tiny,
        fl(dtype, 3) * tiny,
        largest_subnormal,
        normal,
        fl(dtype, 1),
        up(fl(dtype, 1)),
        fl(dtype, 1.5),
        np.nextafter(fl(dtype, info.max), fl(dtype, 0)),
        -tiny,
        -normal,
        -fl(dtype, 1),
        -up(fl(dtype, 1)),
        -fl(dtype, info.max),
    ]
    rand = random_finite(dtype, 300, 2)
    rand = rand[(rand != info.max) & ~((rand == 0) & np.signbit(rand))]  # -0's neighbour up is +tiny
    lo = np.concatenate([np.array(los, dtype), rand])
    return lo, up(lo)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_midpoints_round_half_even(dtype):
    lo, hi = tie_cases(dtype)
    with mpmath.workprec(300):
        mids = [(exact(a) + exact(b)) / 2 for a, b in zip(lo, hi)]
    even = np.where(bits(lo, dtype) % 2 == 0, lo, hi)
    assert_rounds(mids, even, dtype)
    # The named cases, spelled out: 0 | tiny -> 0; tiny | 2 tiny -> 2 tiny; the largest subnormal |
    # the smallest normal -> the smallest normal; -tiny | -0 -> -0.
    np.testing.assert_array_equal(bits(even[[0, 1, 4, 10]], dtype), bits([0, hi[1], hi[4], -0.0], dtype))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_just_off_midpoints(dtype):
    lo, hi = tie_cases(dtype)
    with mpmath.workprec(400):
        mids = [(exact(a) + exact(b)) / 2 for a, b in zip(lo, hi)]
        hairs = [abs(m) * mpmath.mpf(2) ** -120 for m in mids]  # never zero: no midpoint is 0
        toward_hi = [m + h for m, h in zip(mids, hairs)]  # hi > lo always: it is lo's neighbour up
        toward_lo = [m - h for m, h in zip(mids, hairs)]
    assert_rounds(toward_hi, hi, dtype)
    assert_rounds(toward_lo, lo, dtype)


def test_double_rounding_through_float64_is_avoided():
    one = np.float32(1)
    with mpmath.workprec(300):
        just_above_tie = 1 + mpmath.mpf(2) ** -24 + mpmath.mpf(2) ** -80  # float64 makes it a tie
        assert np.float32(float(just_above_tie)) == one  # the wrong answer this module exists to avoid
        assert_rounds([just_above_tie], np.array([up(one)]), np.float32)
        # float64 subnormals: just above half the smallest subnormal rounds up, not to zero.
        tiny64 = exact(np.finfo(np.float64).smallest_subnormal)
        assert_rounds(
            [tiny64 / 2 * (1 + mpmath.mpf(2) ** -200), tiny64 / 2], np.array([5e-324, 0.0]), np.float64
        )


# ---------------------------------------------------------------------------------- overflow, underflow


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_overflow_by_ieee_rules(dtype):
    info = finfo(dtype)
    fmax = fl(dtype, info.max)
    with mpmath.workprec(400):
        big = exact(fmax)
        half_ulp = (big - exact(np.nextafter(fmax, fl(dtype, 0)))) / 2
        threshold = big + half_ulp  # a tie between max (odd) and 2**(emax + 1): to even, i.e. Inf
        hair = threshold * mpmath.mpf(2) ** -200
        values = [
            big,
            big + half_ulp / 2,
            threshold - hair,
            threshold,
            threshold + hair,
            2 * big,
            mpmath.mpf("1e100000"),
            mpmath.ldexp(1, 10**9),
        ]
        negatives = [-v for v in values]  # inside workprec: negation rounds to the context's precision
    expected = [fmax, fmax, fmax, np.inf, np.inf, np.inf, np.inf, np.inf]
    assert_rounds(values, np.array(expected, dtype), dtype)
    assert_rounds(negatives, -np.array(expected, dtype), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_underflow(dtype):
    tiny = fl(dtype, finfo(dtype).smallest_subnormal)
    with mpmath.workprec(400):
        t = exact(tiny)
        hair = t * mpmath.mpf(2) ** -200
        values = [
            t / 2,
            t / 2 + hair,
            t / 2 - hair,
            t / 4,
            t * 3 / 2,
            t * 5 / 2,
            t * 3 / 4,
            mpmath.mpf("1e-100000"),
            mpmath.ldexp(1, -(10**9)),
            mpmath.ldexp(3, -(10**9)),
        ]
        negatives = [-v for v in values]
    expected = [0, tiny, 0, 0, 2 * tiny, 2 * tiny, tiny, 0, 0, 0]
    assert_rounds(values, np.array(expected, dtype), dtype)
    # Tiny negatives keep their sign: -0.0, not +0.0.
    assert_rounds(negatives, -np.array(expected, dtype), dtype)
    assert np.signbit(round_to_dtype(-mpmath.mpf("1e-100000"), dtype))


# ------------------------------------------------------------------------------ randomized references


@pytest.mark.parametrize("dtype", [np.dtype(np.float32), np.dtype(np.float16)], ids=str)
def test_against_numpy_cast_of_float64(dtype):
    """numpy's float64 -> float32 (and -> float16) casts are correctly rounded; float64 values are exact."""
    info = finfo(dtype)
    rng = np.random.default_rng(3)
    n = 4000
    # Random float64 over the dtype's whole range and beyond: exponents from below its smallest
    # subnormal to above its overflow threshold.
    low, high = info.minexp - info.nmant - 12, info.maxexp + 3
    exponent = rng.integers(1023 + low, 1023 + high, n, dtype=np.uint64)
    mantissa = np.frombuffer(rng.bytes(8 * n), np.uint64) & np.uint64((1 << 52) - 1)
    sign = rng.integers(0, 2, n, dtype=np.uint64) << np.uint64(63)
    scattered = (sign | (exponent << np.uint64(52)) | mantissa).view(np.float64)
    # Exact ties (the sum of two adjacent floats of dtype is exact in float64) and their float64
    # neighbours, subnormals included.
    lo = random_finite(dtype, 2000, 4)
    lo = lo[np.abs(lo) < info.max]
    ties = (lo.astype(np.float64) + up(lo).astype(np.float64)) / 2
    v = np.concatenate([scattered, ties, np.nextafter(ties, np.inf), np.nextafter(ties, -np.inf)])
    with np.errstate(over="ignore"):
        expected = v.astype(dtype)
    assert np.isinf(expected).any()
    assert (np.abs(expected) < info.smallest_normal).sum() > 100
    assert_rounds([exact(x) for x in v], expected, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_long_mantissas_in_the_normal_range_against_mpmath(dtype):
    """Random 150-bit values, rounded by mpmath to the format's precision (exact in the normal range)."""
    fmt = dtype_info(dtype)
    rng = np.random.default_rng(5)
    values, expected = [], []
    for _ in range(1000):
        man = int.from_bytes(rng.bytes(19), "little") | (1 << 150)  # 151 bits
        if rng.random() < 0.3:  # force exact ties (and 1 off) at the target precision
            below = 151 - fmt.significand_bits  # bits under the last kept one
            man = (man >> below << below) | (1 << (below - 1))
            man += int(rng.integers(-1, 2))
        # leaves room for a carry into the next binade
        top = int(rng.integers(fmt.min_exponent, fmt.max_exponent))
        raw = (int(rng.random() < 0.5), mpmath.libmp.MPZ(man), top - 150, man.bit_length())
        values.append(mpmath.mp.make_mpf(mpmath.libmp.normalize(*raw, 200, "n")))
        s, m, e, _ = mpmath.libmp.normalize(*raw, fmt.significand_bits, "n")
        expected.append((-1) ** s * math.ldexp(m, e))
    assert_rounds(values, np.array(expected, dtype), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_subnormal_range_against_fraction_round(dtype):
    """Below the normal range the grid is the smallest subnormal: round(Fraction) is half-even there."""
    info = finfo(dtype)
    tiny = Fraction(float(info.smallest_subnormal))
    n_sub = int(Fraction(float(info.smallest_normal)) / tiny)  # subnormal steps below the smallest normal
    rng = np.random.default_rng(6)
    values, expected = [], []
    for _ in range(1000):
        k = int(rng.integers(0, n_sub + 1))
        # a tie in 30% of draws, else a random 96-bit fraction of a step
        offset = Fraction(int.from_bytes(rng.bytes(12), "little"), 2**96)
        if rng.random() < 0.3:
            offset = Fraction(1, 2)
        q = (k + offset) * tiny * (-1 if rng.random() < 0.5 else 1)
        with mpmath.workprec(2000):
            values.append(mpmath.mpf(q.numerator) / q.denominator)  # exact: the denominator is 2**j
        r = round(q / tiny)
        expected.append(math.copysign(float(r * tiny), q))
    assert_rounds(values, np.array(expected, dtype), dtype)


def test_fast_enough():
    normal = np.random.default_rng(7).normal(size=1000)
    values = np.array([mpmath.mpf(x) * mpmath.pi for x in normal], dtype=object)
    best = min(_timed(lambda: round_to_dtype(values, np.float32)) for _ in range(5))
    assert best < 0.025  # ~2 ms here; the budget is generous for loaded CI machines


def _timed(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


# ------------------------------------------------------------------------------------------ to_mpf_array


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_to_mpf_array_is_exact_and_round_trips(dtype):
    x = np.concatenate([random_finite(dtype, 1000, 8), np.array([np.nan, np.inf, -np.inf, -0.0], dtype)])
    with mpmath.workprec(10):  # the context's precision must not matter
        got = to_mpf_array(x)
    assert got.shape == x.shape
    assert got.dtype == object
    for value, m in zip(x[:-4], got[:-4]):
        assert isinstance(m, mpmath.mpf)
        assert m == exact(value)
    assert mpmath.isnan(got[-4])
    assert got[-3] == mpmath.inf
    assert got[-2] == -mpmath.inf
    assert got[-1] == 0
    back = round_to_dtype(got, dtype)
    finite = np.isfinite(x) & (x != 0)
    np.testing.assert_array_equal(bits(back[finite], dtype), bits(x[finite], dtype))


def test_to_mpf_array_shapes_contexts_and_errors():
    assert to_mpf_array(np.float32(0.5)).shape == ()
    assert to_mpf_array(np.float32(0.5))[()] == mpmath.mpf(0.5)
    assert to_mpf_array(np.ones((2, 0, 3), np.float16)).shape == (2, 0, 3)
    assert to_mpf_array(np.arange(6.0).reshape(2, 3))[1, 2] == 5
    other = mpmath.MPContext()
    assert isinstance(to_mpf_array(np.array([1.0]), ctx=other)[0], other.mpf)
    with pytest.raises(ValueError, match="int32"):
        to_mpf_array(np.arange(3, dtype=np.int32))


def test_to_mpf_array_accepts_jax_arrays():
    jnp = pytest.importorskip("jax.numpy")
    got = to_mpf_array(jnp.array([1.5, -2.0], dtype=jnp.bfloat16))
    assert list(got) == [mpmath.mpf(1.5), mpmath.mpf(-2)]


# ------------------------------------------------------------------- balls: the rigorous oracle's test
def test_round_balls_decides_only_when_both_ends_agree():
    from flint import arb

    from pytest_jaxstab.oracles.core._balls import round_balls

    f32 = np.float32
    big = float(np.finfo(f32).max)
    half_ulp_above_max = big + 2.0 ** (127 - 24)  # rounds to inf (ties to even: max is odd)
    one = arb(1)
    balls = [
        arb(0, 2.0**-200),  # straddles 0 deep in the underflow range: both ends round to (signed) 0
        arb(1 + 2.0**-24),  # the tie between 1 and its successor, exactly: to even, 1
        arb(1 + 2.0**-24, 2.0**-60),  # around that tie: the ends round apart
        one + arb(2.0**-30, 2.0**-40),  # inside one rounding interval: 1
        arb(half_ulp_above_max, 2.0**60),  # straddles the overflow threshold
        arb(half_ulp_above_max * 2, 2.0**100),  # entirely beyond it: +inf
        -arb(half_ulp_above_max * 2, 2.0**100),
        arb.pos_inf(),
        arb.nan(),  # indeterminate
        None,  # no real value: NaN, decided
    ]
    arr = np.empty(len(balls), dtype=object)
    arr[:] = balls
    values, decided = round_balls(arr, f32)
    assert decided.tolist() == [True, True, False, True, False, True, True, True, False, True]
    expected = np.asarray([0, 1, 1, np.inf, -np.inf, np.inf], f32)
    np.testing.assert_array_equal(values[[0, 1, 3, 5, 6, 7]], expected)
    assert np.isnan(values[9])
