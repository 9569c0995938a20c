"""Tests of pytest_jaxstab.strategies: what the draws cover, domains, shrinking, targeting, bad input.

Every Hypothesis run is derandomized and database-free, so each test sees the same draws on every run.
Reference facts come from numpy/ml_dtypes (`finfo`, bit views), never from the code under test.
"""

from __future__ import annotations

import functools
import math
import warnings
from typing import Any, cast

import ml_dtypes
import numpy as np
import pytest
from hypothesis import Phase, find, given, settings
from hypothesis.errors import FailedHealthCheck, InvalidArgument

from pytest_jaxstab._dtypes import from_ordinal, to_ordinal
from pytest_jaxstab.strategies import Domain, _targeting, arguments, arrays, dtype_info, floats, target_error

F32 = np.finfo(np.float32)
FINFO = {
    "float16": np.finfo(np.float16),
    "bfloat16": ml_dtypes.finfo(ml_dtypes.bfloat16),
    "float32": F32,
    "float64": np.finfo(np.float64),
}


def _settings(examples: int, **kwargs: Any) -> settings:
    return settings(derandomize=True, database=None, max_examples=examples, deadline=None, **kwargs)


def collect(strategy: Any, examples: int) -> list[Any]:
    """Every value a derandomized @given test over `strategy` sees."""
    draws: list[Any] = []

    @_settings(examples)
    @given(strategy)
    def run(value: Any) -> None:
        draws.append(value)

    run()
    return draws


@functools.cache
def float32_draws() -> np.ndarray:
    draws = collect(floats("float32"), 2500)
    assert all(type(x) is np.float32 for x in draws)
    return np.array(draws, dtype=np.float32)


def f32_ulps(a: Any, b: Any) -> int:
    """Distance in float32 ulps between two positive float32 values (int32 views are monotone there)."""
    return abs(int(np.float32(a).view(np.int32)) - int(np.float32(b).view(np.int32)))


# --- floats: coverage ---------------------------------------------------------------------------------


def test_float32_draws_are_finite_by_default() -> None:
    assert np.all(np.isfinite(float32_draws()))


def test_float32_draws_hit_most_binades() -> None:
    bits = float32_draws().view(np.uint32)
    binades = set(zip((bits >> 31).tolist(), ((bits >> 23) & 0xFF).tolist(), strict=True))
    # Finite float32 binades: biased exponents 0 (subnormals) to 254, for each sign.
    assert len(binades) >= 0.8 * 2 * 255


def test_float32_draws_hit_subnormals() -> None:
    x = np.abs(float32_draws())
    assert np.count_nonzero((x > 0) & (x < F32.tiny)) >= 5


def test_float32_draws_hit_the_exp_overflow_threshold() -> None:
    threshold = np.float32(np.log(np.float64(F32.max)))
    positives = [x for x in float32_draws() if x > 0]
    assert min(f32_ulps(x, threshold) for x in positives) <= 4


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_narrow_dtypes_draw_exactly_representable_scalars(dtype: str) -> None:
    finfo = FINFO[dtype]
    draws = collect(floats(dtype), 600)
    significand_bits = int(finfo.nmant) + 1
    for x in draws:
        assert type(x) is finfo.dtype.type
        value = float(x)
        assert math.isfinite(value)
        assert abs(value) <= float(finfo.max)
        mantissa, _ = math.frexp(value)
        assert (mantissa * 2.0**significand_bits).is_integer()
        assert (value / float(finfo.smallest_subnormal)).is_integer()
    # Both signs, subnormals and large values all occur.
    values = np.array([float(x) for x in draws])
    assert np.any(values < 0)
    assert np.any((values != 0) & (np.abs(values) < float(finfo.tiny)))
    assert np.any(np.abs(values) > float(finfo.max) / 4)


# --- floats: domains ----------------------------------------------------------------------------------

DOMAINS = [
    ("float32", Domain(1e4, 1e4 + 1)),
    ("float32", Domain(1e4, 1e4 + 1, open_lo=True, open_hi=True)),
    ("float32", (0.1, 0.2)),
    ("float16", Domain(0, 1, open_lo=True)),
    ("bfloat16", Domain(-1e-3, 0, open_hi=True)),
    ("float64", Domain(-1e300, -1e-300)),
    ("float16", Domain(-1e6, 1e6)),
    ("float32", Domain(None, 0.0)),
]


def _inside(value: float, lo: float, hi: float, open_lo: bool, open_hi: bool) -> bool:
    above = value > lo if open_lo else value >= lo
    below = value < hi if open_hi else value <= hi
    return above and below


@pytest.mark.parametrize(("dtype", "domain"), DOMAINS)
def test_floats_stay_inside_the_domain(dtype: str, domain: Any) -> None:
    spec = domain if isinstance(domain, Domain) else Domain(*domain)
    lo = -math.inf if spec.lo is None else float(spec.lo)
    hi = math.inf if spec.hi is None else float(spec.hi)
    draws = collect(floats(dtype, domain=domain), 300)
    assert len({float(x) for x in draws}) > 1
    for x in draws:
        assert type(x) is FINFO[dtype].dtype.type
        assert math.isfinite(float(x))
        assert _inside(float(x), lo, hi, spec.open_lo, spec.open_hi), (x, domain)


def test_closed_domain_ends_are_drawn() -> None:
    draws = {float(x) for x in collect(floats("float32", domain=(1e4, 1e4 + 1)), 300)}
    assert {1e4, 1e4 + 1} <= draws
    # 0.1 is not a float32: the domain's smallest member is the first float32 above it.
    first = np.float32(0.1)
    if float(first) < 0.1:
        first = np.nextafter(first, np.float32(1))
    draws = {float(x) for x in collect(floats("float32", domain=(0.1, 0.2)), 300)}
    assert float(first) in draws
    assert min(draws) == float(first)


def test_single_point_domain_draws_that_point() -> None:
    assert {float(x) for x in collect(floats("float32", domain=(1e4, 1e4)), 50)} == {1e4}


def test_predicate_filters_draws() -> None:
    draws = collect(floats("float32", domain=Domain(-10, 10, where=lambda x: x != 0)), 300)
    assert all(x != 0 and -10 <= x <= 10 for x in draws)
    # A bare callable is a predicate over every finite value.
    draws = collect(floats("float64", domain=lambda x: x > 0), 300)
    assert all(x > 0 and np.isfinite(x) for x in draws)


def test_a_predicate_that_rejects_almost_everything_fails_the_health_check() -> None:
    strategy = floats("float32", domain=Domain(-1e30, 1e30, where=lambda x: 0.5 < x < 0.50001))

    @settings(derandomize=True, database=None, deadline=None)
    @given(strategy)
    def run(x: np.float32) -> None:
        pass

    with pytest.raises(FailedHealthCheck, match="filter"):
        run()


def test_nan_and_infinities_only_when_the_domain_asks() -> None:
    draws = np.array(collect(floats("float32", domain=Domain(allow_nan=True, allow_infinity=True)), 600))
    assert np.any(np.isnan(draws))
    assert np.any(draws == np.inf)
    assert np.any(draws == -np.inf)
    # A finite upper bound excludes +inf; -inf stays.
    draws = np.array(collect(floats("float32", domain=Domain(hi=0, allow_infinity=True)), 600))
    assert not np.any(np.isnan(draws))
    assert not np.any(draws == np.inf)
    assert np.any(draws == -np.inf)


# --- shrinking ----------------------------------------------------------------------------------------


def test_exp_overflow_is_found_and_shrunk_to_the_threshold() -> None:
    calls: list[bool] = []

    def overflows(x: np.float32) -> bool:
        with np.errstate(over="ignore"):
            result = bool(np.isinf(np.exp(x)))
        calls.append(result)
        return result

    shrunk = find(floats("float32"), overflows, settings=_settings(100))
    assert calls.index(True) < 100
    assert overflows(shrunk)
    log_max = math.log(float(F32.max))  # 88.7228...
    # Hypothesis shrinks towards the smallest failing input it can reach; the draw is built so that this
    # is the first float32 whose exp overflows (within an ulp of log(max)). 1% leaves room for a shrink
    # that stops on a nearby simpler value (89, say) without accepting anything far from the threshold.
    assert float(shrunk) >= 88.72
    assert abs(float(shrunk) - log_max) / log_max < 0.01


def test_shrinking_reaches_exact_thresholds_and_zero() -> None:
    above = find(floats("float64"), lambda x: abs(x) > 1000, settings=_settings(200))
    assert above == np.nextafter(np.float64(1000), np.inf)
    below = find(floats("float32"), lambda x: x < -3.5, settings=_settings(200))
    assert below == np.nextafter(np.float32(-3.5), np.float32(-np.inf))
    assert find(floats("float16"), lambda x: True, settings=_settings(50)) == 0
    # Arrays: the failing element shrinks to the threshold; the others to zero or, in a clustered class
    # (offset plus noise, constant), to the same offset. (Per class: tests/test_fuzz_classes.py.)
    threshold = float(np.nextafter(np.float32(1000), np.float32(np.inf)))
    shrunk = find(arrays("float32", (4,)), lambda a: bool(np.any(a > 1000)), settings=_settings(200))
    assert float(shrunk.max()) == threshold
    assert set(shrunk.tolist()) <= {0.0, threshold}


# --- arrays -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("dtype", "shape", "domain"),
    [
        ("float16", (5, 3), Domain(-1, 2, open_hi=True)),
        ("bfloat16", (), (0, 10)),
        ("float64", (200,), Domain(1e-300, 1e300)),
        ("float32", (0, 4), None),
        ("float32", 6, Domain(-1, 1, where=lambda x: x != 0)),
    ],
)
def test_arrays_have_dtype_shape_and_stay_in_domain(dtype: str, shape: Any, domain: Any) -> None:
    bounds: tuple[Any, Any] = domain or (None, None)
    spec = domain if isinstance(domain, Domain) else Domain(*bounds)
    lo = -math.inf if spec.lo is None else float(spec.lo)
    hi = math.inf if spec.hi is None else float(spec.hi)
    expected_shape = (shape,) if isinstance(shape, int) else shape
    for array in collect(arrays(dtype, shape, domain=domain), 80):
        assert isinstance(array, np.ndarray)
        assert array.dtype == FINFO[dtype].dtype
        assert array.shape == expected_shape
        values = array.astype(np.float64).ravel()
        assert np.all(np.isfinite(values))
        assert all(_inside(v, lo, hi, spec.open_lo, spec.open_hi) for v in values)
        if spec.where is not None:
            assert all(spec.where(v) for v in array.ravel())


@functools.cache
def float32_arrays() -> list[np.ndarray]:
    return collect(arrays("float32", (8,)), 400)


def test_float32_arrays_often_span_huge_magnitude_ratios() -> None:
    def ratio(array: np.ndarray) -> float:
        magnitudes = np.abs(array[array != 0]).astype(np.float64)
        return float(magnitudes.max() / magnitudes.min()) if magnitudes.size else 0.0

    spans = [ratio(a) >= 1e30 for a in float32_arrays()]
    assert sum(spans) >= 0.1 * len(spans)


def test_float32_arrays_show_the_trouble_shapes() -> None:
    draws = float32_arrays()
    all_equal = [a for a in draws if np.all(a == a[0])]
    assert any(a[0] != 0 for a in all_equal)
    # Cancellation: every element within a few ulps of one large value.
    assert any(
        np.all(np.abs(a) > 1e30) and np.all(np.sign(a) == np.sign(a[0])) and np.ptp(a.view(np.int32)) <= 16
        for a in draws
    )
    # One huge element among values near 1.
    assert any(np.sum(np.abs(a) > 1e30) == 1 and np.sum(np.abs(a) < 1e4) == 7 for a in draws)
    # Alternating signs.
    assert any(np.all(a[0::2] > 0) and np.all(a[1::2] < 0) for a in draws)


# --- arguments ----------------------------------------------------------------------------------------


def test_arguments_draw_related_pairs() -> None:
    draws = collect(arguments("float32", [(4,), (4,)]), 1000)  # 1 in 50 is one ulp down
    up = np.float32(np.inf)
    assert all(x.shape == (4,) and y.shape == (4,) and x.dtype == y.dtype == np.float32 for x, y in draws)
    assert any(np.array_equal(x, y) and np.any(x != 0) for x, y in draws)
    assert any(np.array_equal(y, -x) and np.any(x != 0) for x, y in draws)
    with np.errstate(over="ignore"):
        assert any(np.array_equal(y, np.nextafter(x, up)) for x, y in draws)
        assert any(np.array_equal(y, np.nextafter(x, -up)) for x, y in draws)
    # Broadcast-compatible shapes relate element with element: y against the first row of x.
    draws = collect(arguments("float32", [(3, 4), (4,), ()]), 300)
    assert all(x.shape == (3, 4) and y.shape == (4,) and z.shape == () for x, y, z in draws)
    assert any(np.array_equal(x[0], y) and np.any(y != 0) for x, y, _ in draws)


@pytest.mark.parametrize("domain", [[(0, 1), (-1, 0)], {1: (-1, 0), 0: (0, 1)}])
def test_arguments_respect_per_argument_domains(domain: Any) -> None:
    for x, y in collect(arguments("float64", [(5,), (5,)], domain=domain), 300):
        assert np.all((x >= 0) & (x <= 1))
        assert np.all((y >= -1) & (y <= 0))


def test_arguments_with_many_large_float64_arguments_fit_hypothesis_budget() -> None:
    # Hypothesis fails a test whose examples overrun its choice budget (health check data_too_large).
    draws = collect(arguments("float64", [(100,)] * 6), 30)
    assert all(len(args) == 6 and all(a.shape == (100,) for a in args) for args in draws)


# --- targeting ----------------------------------------------------------------------------------------


def test_target_error_records_the_worst_number(monkeypatch: pytest.MonkeyPatch) -> None:
    recorded: list[tuple[float, str]] = []
    monkeypatch.setattr(_targeting, "target", lambda value, label: recorded.append((value, label)) or value)
    assert target_error(np.array([[1.0, np.nan], [3.5, 2.0]])) == 3.5
    assert target_error(7, label="bits of f") == 7.0
    assert target_error(np.array([np.nan, np.nan])) is None
    assert target_error(np.array([1.0, np.inf])) == np.finfo(np.float64).max
    assert recorded == [(3.5, "error bits"), (7.0, "bits of f"), (np.finfo(np.float64).max, "error bits")]


def test_target_error_outside_a_test_is_an_error() -> None:
    with pytest.raises(InvalidArgument):
        target_error(1.0)


def test_target_error_steers_the_search() -> None:
    def best_score(phases: list[Phase]) -> float:
        scores: list[float] = []

        @_settings(1000, phases=phases)
        @given(floats("float32", domain=(0, 1e6)))
        def run(x: np.float32) -> None:
            # "Error" that grows as x nears an arbitrary point, as error grows near an input that breaks.
            score = target_error(32 - np.log2(1 + abs(float(x) - 12345.678)))
            assert score is not None
            scores.append(score)

        run()
        return max(scores)

    assert best_score([Phase.generate, Phase.target]) > best_score([Phase.generate]) + 2


# --- dtype facts --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(FINFO))
def test_dtype_info_matches_finfo(name: str) -> None:
    finfo = FINFO[name]
    info = dtype_info(name)
    assert info.dtype == finfo.dtype
    assert (info.bits, info.mantissa_bits) == (finfo.bits, finfo.nmant)
    assert (info.min_exponent, info.max_exponent) == (finfo.minexp, finfo.maxexp - 1)
    assert float(info.max) == float(finfo.max)
    assert float(info.tiny) == float(finfo.tiny)
    assert float(info.smallest_subnormal) == float(finfo.smallest_subnormal)
    assert float(info.eps) == float(finfo.eps)
    assert info.uint_dtype == np.dtype(f"uint{finfo.bits}")
    assert dtype_info(finfo.dtype) == info


def test_ordinals_count_float16_values_in_order() -> None:
    values = np.arange(2**16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    finite = np.sort(values[np.isfinite(values)])
    ordinals = to_ordinal(finite, "float16")
    steps = np.diff(ordinals)
    # -0.0 and +0.0 share ordinal 0; every other step is one.
    assert np.count_nonzero(steps == 0) == 1
    assert np.all((steps == 0) | (steps == 1))
    assert ordinals[0] == -ordinals[-1]
    assert np.array_equal(from_ordinal(ordinals, "float16"), finite)


# --- bad input ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["int32", "float8_e4m3fn", None, "floaty", np.int16])
def test_unknown_dtypes_are_rejected(dtype: Any) -> None:
    for make in (lambda: floats(dtype), lambda: arrays(dtype, (3,)), lambda: arguments(dtype, [(2,)])):
        with pytest.raises(ValueError, match="unsupported dtype") as excinfo:
            make()
        assert repr(dtype) in str(excinfo.value)
        assert "bfloat16" in str(excinfo.value)


def test_floats_rejects_complex_dtypes() -> None:
    # complex64/complex128 are drawn by `arrays` and `arguments` (tests/test_complex.py); a single float
    # element has no complex form.
    with pytest.raises(ValueError, match="unsupported dtype"):
        floats("complex64")


def test_empty_domains_are_rejected() -> None:
    with pytest.raises(ValueError, match="empty domain"):
        Domain(2, 1)
    with pytest.raises(ValueError, match="empty domain"):
        Domain(1, 1, open_lo=True)
    above_one = float(np.nextafter(np.float32(1), np.float32(2)))
    with pytest.raises(ValueError, match=r"empty domain.*float32"):
        floats("float32", domain=Domain(1.0, above_one, open_lo=True, open_hi=True))
    # No float16 lies strictly between 1 and 1.0005 (its eps is about 0.001), though float32s do.
    with pytest.raises(ValueError, match=r"empty domain.*float16"):
        arrays("float16", (2,), domain=Domain(1.0, 1.0005, open_lo=True, open_hi=True))
    assert collect(floats("float32", domain=Domain(1.0, 1.0005, open_lo=True, open_hi=True)), 5)
    with pytest.raises(ValueError, match="NaN"):
        Domain(float("nan"), 1)


@pytest.mark.parametrize(
    ("dtype", "domain"),
    [("float32", (1e39, 1e40)), ("float16", (7e4, 1e5)), ("bfloat16", Domain(None, -1e39))],
)
def test_domains_outside_the_dtype_range_are_rejected(dtype: str, domain: Any) -> None:
    with pytest.raises(ValueError, match=rf"empty domain.*no finite {dtype} value"):
        floats(dtype, domain=domain)


def test_per_argument_domains_must_match_the_arguments() -> None:
    with pytest.raises(ValueError, match="3 domains given for 2 arguments"):
        arguments("float32", [(2,), (2,)], domain=[None, None, None])
    with pytest.raises(ValueError, match="out of range"):
        arguments("float32", [(2,), (2,)], domain={2: (0, 1)})
    with pytest.raises(TypeError, match="domain must be"):
        floats("float32", domain="positive")  # pyright: ignore[reportArgumentType]  (on purpose)


class _FixedHeader:
    """A Header stand-in whose fields are given: below(n) answers the next listed field, capped at n - 1."""

    def __init__(self, *fields: int) -> None:
        self.fields = list(fields)

    def below(self, n: int) -> int:
        return min(self.fields.pop(0), n - 1)


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16"])
@pytest.mark.parametrize("zero_d", [True, False])
def test_scaled_relation_saturates_without_overflow(dtype: str, zero_d: bool) -> None:
    # _scaled shifts ordinals by k binades (k = FAR_BINADES[0] + the third field; the second is the
    # sign). Near float64's
    # max ordinal |ord| + (60 << 52) passes 2^63: it used to wrap to 0 on arrays and raise
    # RuntimeWarning on 0-d ones (filterwarnings=error). Reference: a normal x times 2^k is exact
    # (math.ldexp), saturating at the dtype's max going up; going down from a tiny value to 0.
    from types import SimpleNamespace

    from pytest_jaxstab.strategies._classes import FAR_BINADES
    from pytest_jaxstab.strategies._related import _scaled

    info = dtype_info(dtype)
    plan: Any = SimpleNamespace(sampler=SimpleNamespace(info=info))
    big = float(info.max) / 4.0
    k = FAR_BINADES[0]  # second field 0: the nearest shift, 8 binades
    cases = [  # (up field, value, expected)
        (1, big, float(info.max)),
        (1, -big, -float(info.max)),
        (1, 3.0, math.ldexp(3.0, k)),
        (0, -3.0, math.ldexp(-3.0, -k)),
        (0, float(info.tiny), 0.0),
    ]
    for up, value, expected in cases:
        source = np.asarray(value if zero_d else [value, value], dtype=dtype)
        ords = to_ordinal(source, dtype)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            got = from_ordinal(_scaled(plan, cast(Any, _FixedHeader(up, 0, 0)), ords), dtype)
            negated = from_ordinal(_scaled(plan, cast(Any, _FixedHeader(up, 1, 0)), ords), dtype)
        got = got.astype(np.float64)
        assert np.all(got == expected), (dtype, up, value, got, expected)
        assert np.all(negated.astype(np.float64) == -expected), (dtype, up, value, negated)  # the sign field
    # The farthest shift (60 binades) from float64-max-sized values: saturates, no wrap to 0.
    source = np.asarray([float(info.max)] if not zero_d else float(info.max), dtype=dtype)
    far: Any = _FixedHeader(1, 0, 10**6)  # capped at 52: k = 8 + 52 = 60, the farthest shift
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = from_ordinal(_scaled(plan, far, to_ordinal(source, dtype)), dtype).astype(np.float64)
    assert np.all(got == float(info.max))
