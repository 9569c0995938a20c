"""``jst.tune_precision`` (issue 34): which lines of a bfloat16/float16 program must stay float32.

Every accuracy claim is checked on inputs drawn here with numpy's generator (not the plan's samples)
against a reference computed with mpmath at 60 digits on the low-precision inputs themselves, rounded
to the low dtype through float64 (a double rounding: at most one ulp more, inside the tolerance).

Tolerance: 4 ulps of the low dtype, the plan's own default target ("the best the low dtype can
represent", with room for the output's rounding and a reduction's few roundings).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import mpmath as mp
import numpy as np
import pytest
from precision_helpers import marked_line as _line
from precision_helpers import ulps as _ulps

import pytest_jaxstab as jst

mp.mp.dps = 60
TOL_ULPS = 4


# ------------------------------------------------------------------------------------------ programs
EPS = 1e-5


def layer_norm(x):
    m = jnp.mean(x)
    v = jnp.mean(x * x) - m * m  # variance
    return (x - m) / jnp.sqrt(v + EPS)


def _layer_norm_ref(x, dtype):
    eps = mp.mpf(float(np.asarray(EPS, dtype)))  # the literal as the program holds it: rounded to dtype
    xs = [mp.mpf(float(v)) for v in np.asarray(x, np.float64)]
    m = mp.fsum(xs) / len(xs)
    v = mp.fsum((t - m) ** 2 for t in xs) / len(xs)
    return np.array([float((t - m) / mp.sqrt(v + eps)) for t in xs])


def l2_norm(g):
    return jnp.sqrt(jnp.sum(jnp.square(g)))  # norm


def log_sum_exp(x):
    return jnp.log(jnp.sum(jnp.exp(x)))  # lse


def log_one_plus(x):
    return jnp.log(1 + x)  # log1p


def small_sum(x):
    return jnp.sum(x)


# ------------------------------------------------------------------------------------ (a) layer norm
@pytest.mark.parametrize("dtype", ["bfloat16"])
def test_layer_norm_variance_line_is_kept_and_the_tuned_program_is_accurate(dtype):
    plan = jst.tune_precision(layer_norm, shapes=(32,), dtype=dtype, domain=(9.0, 11.0))
    assert plan.reached, str(plan)
    assert _line(layer_norm, "variance") in plan.lines, str(plan)
    assert plan.original.max_ulps > 64  # the one-pass variance cancels: far outside the tolerance
    assert plan.tuned.max_ulps <= TOL_ULPS and plan.tuned.overflows == 0
    assert 0.0 < plan.high_share <= 1.0
    rng = np.random.default_rng(1234)
    worst_before = 0.0
    for _ in range(6):
        x = rng.normal(10.0, 1.0, 32).astype(jnp.dtype(dtype))
        ref = _layer_norm_ref(x, dtype)
        assert _ulps(plan.fn(x), ref, dtype).max() <= TOL_ULPS
        worst_before = max(worst_before, float(_ulps(layer_norm(x), ref, dtype).max()))
    assert worst_before > 16 * TOL_ULPS  # the program as written is wrong on the same inputs


def test_a_plan_float32_cannot_reach_is_never_worse_than_the_program_where_it_was_right():
    # The same layer norm in float16. Constant rows (jst.check's "constant" array class) at ~10: the
    # squares of float16 values have 22 bits, their float32 sum over 32 elements rounds (bfloat16's 16-bit
    # squares sum exactly), so the one-pass variance is a negative of ~1e-4 in float32, below -eps, and
    # sqrt makes it NaN where float16's roundings happen to give 0. Keeping the lines in float32 would
    # trade those right answers for NaN: the plan must not.
    plan = jst.tune_precision(layer_norm, shapes=(32,), dtype="float16", domain=(9.0, 11.0))
    assert not plan.reached and plan.note, str(plan)
    assert "NOT within" in str(plan) and "note:" in str(plan)
    assert plan.tuned.overflows <= plan.original.overflows
    x = np.full(32, 10.04, np.float16)  # a constant row: the exact result is 0
    assert np.isfinite(np.asarray(layer_norm(x), np.float32)).all()
    assert np.isfinite(np.asarray(plan.fn(x), np.float32)).all()


# ------------------------------------------------------------------------------------------ (b) L2
def test_l2_norm_overflow_in_float16_is_fixed():
    plan = jst.tune_precision(l2_norm, shapes=(1024,), dtype="float16", domain=(-60.0, 60.0))
    assert plan.reached, str(plan)
    assert plan.original.overflows > 0  # squares of ~40 summed over 1024 pass 65504
    assert plan.tuned.overflows == 0
    line = _line(l2_norm, "norm")
    assert line in plan.lines or any(where == line for _, where in plan.rewrites), str(plan)
    rng = np.random.default_rng(7)
    for _ in range(4):
        g = rng.normal(0.0, 40.0, 1024).astype(np.float16)
        ref = float(mp.mpf(mp.sqrt(mp.fsum(mp.mpf(float(v)) ** 2 for v in g.astype(np.float64)))))
        assert not np.isfinite(float(l2_norm(g)))  # the program as written overflows
        assert _ulps(plan.fn(g), ref, np.float16) <= TOL_ULPS


def scaled_by_norm(g):
    a = jnp.tanh(g)  # accurate in float16
    n = jnp.sqrt(jnp.sum(g * g))  # overflows
    return a / n


def test_only_the_line_that_needs_it_is_kept_and_the_share_counts_its_work():
    # upcasts only (rules=()): with the catalogue, its scaled norm fixes the line without float32
    plan = jst.tune_precision(scaled_by_norm, shapes=(256,), dtype="float16", domain=(-60.0, 60.0), rules=())
    assert plan.reached, str(plan)
    assert _line(scaled_by_norm, "overflows") in plan.lines
    assert _line(scaled_by_norm, "accurate") not in plan.lines
    # work: tanh 256 + mul 256 + reduce_sum 256 (its inputs) + sqrt 1 + div 256; the norm line holds
    # mul, the sum and sqrt (plus the float32 accumulation's conversions, 256 + 1), the division line
    # maybe: the share is strictly between 0 and 1 and excludes tanh's 256
    assert 0.0 < plan.high_share < 1.0


# --------------------------------------------------------------------------------- (c) logsumexp
@pytest.mark.parametrize("dtype", ["float16"])
def test_log_sum_exp_overflow_in_float16_is_fixed(dtype):
    plan = jst.tune_precision(log_sum_exp, shapes=(16,), dtype=dtype, domain=(11.0, 13.0))
    assert plan.reached, str(plan)
    assert plan.original.overflows > 0  # exp(11.1) > 65504
    rng = np.random.default_rng(3)
    for _ in range(4):
        x = rng.uniform(11.0, 13.0, 16).astype(np.float16)
        ref = float(mp.log(mp.fsum(mp.exp(mp.mpf(float(v))) for v in x.astype(np.float64))))
        assert _ulps(plan.fn(x), ref, np.float16) <= TOL_ULPS


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_log_sum_exp_is_fixed_by_the_rewrite_alone_through_the_float32_accumulation(dtype):
    # jnp.sum of a low dtype is convert(f32) -> reduce_sum -> convert(low): the engine sees through that
    # pair, so the catalogue's logsumexp (written against the float32 spelling) fires and nothing is upcast
    plan = jst.tune_precision(log_sum_exp, shapes=(16,), dtype=dtype, domain=(11.0, 13.0))
    assert plan.reached, str(plan)
    if dtype == "float16":  # exp(11.1) overflows float16; bfloat16 has float32's range: nothing to fix
        assert [rule for rule, _ in plan.rewrites] == ["logsumexp"] and plan.lines == (), str(plan)
        assert plan.rewrites[0][1] == _line(log_sum_exp, "lse")
    rng = np.random.default_rng(31)
    for _ in range(4):
        x = rng.uniform(11.0, 13.0, 16).astype(jnp.dtype(dtype))
        ref = float(mp.log(mp.fsum(mp.exp(mp.mpf(float(v))) for v in x.astype(np.float64))))
        assert _ulps(plan.fn(x), ref, jnp.dtype(dtype)) <= TOL_ULPS


def test_a_rewrite_that_fixes_the_program_is_preferred_to_an_upcast():
    # log(1 + x) for x in (1e-5, 1e-3) in float16: 1 + x keeps a few bits of x; log1p keeps them all
    plan = jst.tune_precision(log_one_plus, shapes=(8,), dtype="float16", domain=(1e-5, 1e-3))
    assert plan.reached and plan.lines == () and plan.high_share == 0.0, str(plan)
    assert plan.rewrites == (("log1p", _line(log_one_plus, "log1p")),)
    assert plan.original.max_ulps > 100
    x = np.random.default_rng(5).uniform(1e-5, 1e-3, 8).astype(np.float16)
    ref = [float(mp.log1p(mp.mpf(float(v)))) for v in x.astype(np.float64)]
    assert _ulps(plan.fn(x), ref, np.float16).max() <= TOL_ULPS
    assert _ulps(log_one_plus(x), ref, np.float16).max() > 100  # the program as written


# --------------------------------------------------------------------------------- (d) controls
@pytest.mark.parametrize(("fn", "dtype", "domain"), [
    (small_sum, "bfloat16", (-4.0, 4.0)),
    (jnp.tanh, "float16", (-4.0, 4.0)),
    (jnp.tanh, "bfloat16", (-4.0, 4.0)),
])
def test_an_accurate_program_keeps_nothing_high(fn, dtype, domain):
    plan = jst.tune_precision(fn, shapes=(4,), dtype=dtype, domain=domain)
    assert plan.reached and plan.lines == () and plan.rewrites == () and plan.high_share == 0.0, str(plan)
    assert plan.original == plan.tuned
    x = np.random.default_rng(0).uniform(-4, 4, 4).astype(jnp.dtype(dtype))
    np.testing.assert_array_equal(np.asarray(plan.fn(x)), np.asarray(fn(x)))  # the program unchanged


def test_an_integer_output_beside_the_values_is_carried_and_not_judged():
    def norm_and_argmax(g):
        n = jnp.sqrt(jnp.sum(g * g))  # overflows
        return n, jnp.argmax(g)

    plan = jst.tune_precision(norm_and_argmax, shapes=(256,), dtype="float16", domain=(-60.0, 60.0),
                              rules=())  # upcasts only: the catalogue's norm would fix it alone
    assert plan.reached and _line(norm_and_argmax, "overflows") in plan.lines, str(plan)
    g = np.random.default_rng(2).normal(0.0, 40.0, 256).astype(np.float16)
    n, k = plan.fn(g)
    assert int(k) == int(np.argmax(g)) and np.isfinite(float(n))


# ------------------------------------------------------------------------------- (e) composition
@pytest.fixture(scope="module")
def ln_plan():
    return jst.tune_precision(layer_norm, shapes=(16,), dtype="bfloat16", domain=(6.0, 14.0))


def test_tuned_fn_takes_and_returns_the_low_dtype_under_jit_and_vmap(ln_plan):
    rng = np.random.default_rng(11)
    xs = rng.normal(10.0, 1.0, (3, 16)).astype(jnp.bfloat16)
    one = [np.asarray(ln_plan.fn(x)) for x in xs]
    assert all(o.dtype == jnp.bfloat16 for o in one)
    np.testing.assert_array_equal(np.asarray(jax.jit(ln_plan.fn)(xs[0])), one[0])
    batched = np.asarray(jax.vmap(ln_plan.fn)(xs))
    assert batched.dtype == jnp.bfloat16
    np.testing.assert_array_equal(batched, np.stack(one))
    for x, o in zip(xs, one):  # and vmap keeps the accuracy
        assert _ulps(o, _layer_norm_ref(x, "bfloat16"), jnp.bfloat16).max() <= TOL_ULPS


def test_tuned_fn_gradient_is_finite_and_close_to_the_float32_programs(ln_plan):
    rng = np.random.default_rng(12)
    x = rng.normal(10.0, 1.0, 16).astype(jnp.bfloat16)
    w = rng.normal(0.0, 1.0, 16).astype(jnp.bfloat16)

    def loss(f, dtype):
        return lambda x: jnp.sum(f(x) * w.astype(dtype))

    g = np.asarray(jax.jit(jax.grad(loss(ln_plan.fn, jnp.bfloat16)))(x), np.float64)
    g32 = np.asarray(jax.grad(loss(layer_norm, jnp.float32))(x.astype(np.float32)), np.float64)
    g_low = np.asarray(jax.grad(loss(layer_norm, jnp.bfloat16))(x), np.float64)
    assert np.isfinite(g).all()
    # the kept lines' backward pass runs in float32 and the gradient is rounded to bfloat16 once:
    # normwise within 4 bfloat16 ulps (eps = 2^-7) of the largest component
    scale = np.abs(g32).max()
    assert np.abs(g - g32).max() <= 4 * 2.0 ** -7 * scale
    assert not np.abs(g_low - g32).max() <= 4 * 2.0 ** -7 * scale  # the untuned gradient is not


# --------------------------------------------------------------------------------- (f) bad input
@pytest.mark.parametrize(("kwargs", "match"), [
    ({"dtype": "bfloat16", "high": "float8"}, r"high='float8'"),
    ({"dtype": "bfloat16", "high": "float16"}, r"high='float16'.*float32"),
    ({"dtype": "float32"}, r"dtype='float32'.*bfloat16, float16"),
    ({"dtype": "bfloat16", "tolerance_ulps": -1}, r"tolerance_ulps=-1"),
    ({"dtype": "bfloat16", "samples": 0}, r"samples=0"),
    ({"dtype": "bfloat16", "no_such_option": 1}, r"no_such_option"),
])
def test_bad_arguments_are_argument_errors_naming_the_option(kwargs, match):
    with pytest.raises(jst.ArgumentError, match=match):
        jst.tune_precision(jnp.tanh, shapes=(4,), **kwargs)


def test_plan_str_names_the_lines_and_the_figures(ln_plan):
    text = str(ln_plan)
    assert "bfloat16 program" in text and "keep in float32" in text
    for line in ln_plan.lines:
        assert line in text
    assert "original: max" in text and "tuned:" in text and "within 4 ulps" in text
