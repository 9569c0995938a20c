"""The oracle's fast path (``oracles/fast``): float64 intervals decide first, never wrongly.

Claims checked (docs/architecture.md, "The oracle"):

* differential: on the soundness programs, the issue's ML shapes and extreme inputs, every element the
  fast path decides (``precisions == 53``) equals the Arb path's value (``fast=False``) bit for bit, and
  the Arb path is certain of it; a zero's sign may differ only where both are zeros (the metric gives
  them one ordinal, ``_decide``'s docstring says why);
* containment: each operation's interval holds the exact value (mpmath at 400 bits) on adversarial
  operands (cancellation, ``1 - tiny``, ``exp`` near overflow and underflow, ``log`` near 1, subnormals);
* what float64 cannot decide is escalated, not decided (``x + 1e-30 - x``; float64 targets except
  exact results; a program of float64 results alone skips the fast path), and the counts
  ``decided_fast``/``escalated`` say so;
* the rounding (``_decide.round_to_format``) is the Arb path's ``round_to_dtype`` and ``round_balls``.
"""

from __future__ import annotations

import types

import jax
import jax.numpy as jnp
import ml_dtypes
import mpmath
import numpy as np
import pytest
from flint import arb
from jax import lax
from soundness_programs import draw_inputs, programs

from pytest_jaxstab import oracles
from pytest_jaxstab.oracles.core._balls import round_balls
from pytest_jaxstab.oracles.fast import FAST_PRECISION, Interval, _arrays, _elementwise, decide
from pytest_jaxstab.oracles.fast import _interval as iv
from pytest_jaxstab.oracles.fast._decide import round_to_format

F16, F32, F64, BF16 = np.float16, np.float32, np.float64, ml_dtypes.bfloat16


# ------------------------------------------------------------------------------------ differential
def _is_float(dtype) -> bool:
    return dtype.kind == "f" or dtype == np.dtype(BF16)


def _leaves(tree):
    return [np.asarray(v) for v in jax.tree_util.tree_leaves(tree)]


def differential(fn, *args, dtype=None, need_fast: bool = True):
    """Evaluates ``fn`` with and without the fast path; asserts the fast path's decisions are the Arb
    path's; returns the fast result."""
    got = oracles.evaluate(fn, *args, dtype=dtype)
    ref = oracles.evaluate(fn, *args, dtype=dtype, fast=False)
    assert ref.decided_fast == 0
    decided = 0
    for v, c, p, rv, rc in zip(*map(_leaves, (got.values, got.certain, got.precisions, ref.values,
                                               ref.certain))):
        fast = p == FAST_PRECISION
        decided += int(fast.sum())
        assert c[fast].all()
        assert rc[fast].all(), "the fast path decided what the Arb path could not prove"
        a, b = v[fast], rv[fast]
        if _is_float(a.dtype):
            same = (a.view(f"u{a.dtype.itemsize}") == b.view(f"u{b.dtype.itemsize}")) | ((a == 0) & (b == 0))
        else:
            same = a == b
        assert same.all(), f"fast {a[~same]} vs Arb {b[~same]}"
        if _is_float(v.dtype):  # the escalated elements too: the same passes
            assert ((v == rv) | (np.isnan(v.astype(F64)) & np.isnan(rv.astype(F64)))).all()
        else:
            assert (v == rv).all()
    assert got.decided_fast == decided
    assert got.decided_fast + got.escalated == sum(int(np.size(v)) for v in _leaves(got.values))
    if need_fast:
        assert decided > 0, "the fast path decided nothing: not a test of it"
    return got


def _ln_two_pass(x):
    m = jnp.mean(x, -1, keepdims=True)
    return (x - m) * lax.rsqrt(jnp.mean((x - m) ** 2, -1, keepdims=True) + 1e-5)


def _ln_one_pass(x):
    m = jnp.mean(x, -1, keepdims=True)
    return (x - m) * lax.rsqrt(jnp.mean(x * x, -1, keepdims=True) - m * m + 1e-5)


def _xent(x, y):
    return -jnp.take_along_axis(jax.nn.log_softmax(x, -1), y[:, None], -1)[:, 0]


def _attention(q, k):
    return jax.nn.softmax(q @ k.T / jnp.sqrt(np.float32(q.shape[-1])), -1)


ML = {
    "logsumexp": lambda x: jax.nn.logsumexp(x, -1),
    "softmax": lambda x: jax.nn.softmax(x, -1),
    "log_softmax": lambda x: jax.nn.log_softmax(x, -1),
    "var_two_pass": lambda x: jnp.var(x, -1),
    "var_one_pass": lambda x: jnp.mean(x * x, -1) - jnp.mean(x, -1) ** 2,
    "layer_norm_two_pass": _ln_two_pass,
    "layer_norm_one_pass": _ln_one_pass,
    "gather_pad": lambda x: (x[jnp.asarray([2, 0, 1])] * 3,
                             jnp.take(x, jnp.asarray([5, 0, 20]), axis=1, mode="clip"),
                             jnp.take(x, jnp.asarray([5, 0, 20]), axis=1, mode="fill") + 1,
                             jnp.pad(x, ((0, 1), (2, 0))) * 2, jnp.concatenate([x, -x], 1)[:, ::3],
                             jnp.exp(x).T.reshape(-1), x.at[jnp.asarray([0, 2, 0])].set(x[1] * 3),
                             x.at[jnp.asarray([1, 1, 3])].add(x[:3] / 3)),
    "argmax_max": lambda x: (jnp.argmax(x, -1), jnp.max(x, -1), jnp.min(x, 0), jnp.cumsum(x, -1)),
    "softplus_silu": lambda x: (jax.nn.softplus(x), jax.nn.silu(x), jax.nn.log_sigmoid(x), jax.nn.relu(x)),
    "elementwise": lambda x: (jnp.expm1(x / 8), jnp.log1p(jnp.abs(x)), jnp.tanh(x), jax.nn.sigmoid(x),
                              jnp.sqrt(jnp.abs(x)), jnp.exp2(x / 4), jnp.sign(x), x ** 3, jnp.abs(x) ** 0.5,
                              jnp.where(x > 0, x, 0.1 * x), jnp.floor(x), jnp.clip(x, -1, 1)),
}


def _rows(rng, kind):
    x = rng.standard_normal((4, 16)).astype(F32)
    if kind == "large":
        return x * np.float32(30)  # exp near float32's overflow
    if kind == "offset":
        return x + np.float32(1e4)  # the one-pass variance cancels
    if kind == "ties":
        x[:, 3] = x[:, 7] = x.max(axis=1) + 1  # two equal maxima per row
        return x
    if kind == "tiny":
        return (x * np.float32(1e-38)).astype(F32)  # subnormal float32 inputs
    return x


@pytest.mark.parametrize("kind", ["normal", "large", "offset", "ties", "tiny"])
@pytest.mark.parametrize("name", sorted(ML))
def test_ml_programs_fast_decisions_are_the_arb_paths(name, kind):
    x = _rows(np.random.default_rng(sorted(ML).index(name)), kind)
    differential(ML[name], x, need_fast=kind != "tiny")


def test_cross_entropy_attention_mlp():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 10)).astype(F32) * 4
    y = np.asarray([0, 9, 3, 3], np.int32)
    differential(_xent, x, y)
    q, k = (rng.standard_normal((3, 8)).astype(F32) for _ in range(2))
    differential(_attention, q, k)
    w = rng.standard_normal((8, 5)).astype(F32)
    differential(lambda x, w: jnp.tanh(x @ w), q, w)


@pytest.mark.parametrize("name", ["softmax", "layer_norm_two_pass", "gather_pad", "elementwise", "xent"])
def test_gradient_programs(name):
    # scatter-add (take_along_axis's transpose), one_minus_square (tanh's), add_any, transposes
    x = np.random.default_rng(8).standard_normal((4, 16)).astype(F32)

    def weighted(*args):
        out = jax.tree_util.tree_leaves(_xent(*args) if name == "xent" else ML[name](*args))[0]
        return jnp.sum(out * jnp.arange(1.0, 1.0 + out.size).reshape(out.shape))

    args = (x, np.asarray([0, 15, 3, 3], np.int32)) if name == "xent" else (x,)
    got = differential(jax.grad(weighted), *args)
    assert got.escalated_share < 0.1


@pytest.mark.parametrize("dtype", [F16, BF16, F64])
def test_other_dtypes(dtype):
    x = np.random.default_rng(5).standard_normal((3, 6)).astype(dtype)
    fn = lambda x: (jnp.exp(x) * 3, jnp.maximum(x, 0), x[::-1] * 2, jnp.sum(x, -1), jnp.argmax(x, -1))
    with jax.enable_x64(dtype == F64):
        got = differential(fn, x, need_fast=True)
    if dtype == F64:  # only exact results: the relu, the reversal times 2, the argmax
        assert got.decided_fast == 39 and got.escalated == 21
        with jax.enable_x64(True):  # float64 results alone: not worth a walk
            assert oracles.evaluate(lambda x: jnp.maximum(x, 0), x).decided_fast == 0


def test_float32_results_of_a_float64_program():
    x = np.linspace(-3, 3, 11)
    with jax.enable_x64(True):
        differential(lambda x: jnp.exp(x) / (1 + x * x), x, dtype="float32")


@pytest.mark.parametrize("index", range(6))
def test_soundness_programs(index):
    (program,) = programs(0, 1, start=index)
    for args in draw_inputs(program, 2):
        differential(program.fn, *args, need_fast=False)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(4))
def test_soundness_programs_many(seed):
    for program in programs(seed, 25):
        for args in draw_inputs(program, 4):
            differential(program.fn, *args, need_fast=False)


# ------------------------------------------------------------------------------------- escalation
def test_what_float64_cannot_decide_is_escalated():
    got = oracles.evaluate(lambda x: (x + np.float32(1e-30)) - x, np.asarray([1.0, 3.0], F32))
    assert got.decided_fast == 0 and got.escalated == 2 and got.escalated_share == 1.0
    assert (np.asarray(got.precisions) > FAST_PRECISION).all() and np.asarray(got.certain).all()
    assert (np.asarray(got.values) == F32(1e-30)).all()


def test_counts_and_share_are_reported():
    x = np.asarray([1e-30, 0.5, 2.0, -1.0], F32)
    got = oracles.evaluate(lambda x: jnp.exp(x) - 1, x)
    assert (got.decided_fast, got.escalated) == (3, 1) and got.escalated_share == 0.25
    assert list(np.asarray(got.precisions) == FAST_PRECISION) == [False, True, True, True]
    assert all(isinstance(v, mpmath.mpf) for v in got.exact)  # exact midpoints, from either path
    assert abs(float(got.exact[1]) - np.expm1(0.5)) < 1e-12
    off = oracles.evaluate(lambda x: jnp.exp(x) - 1, x, fast=False)
    assert (off.decided_fast, off.escalated, off.escalated_share) == (0, 4, 1.0)
    low = oracles.evaluate(lambda x: jnp.exp(x) - 1, x, max_precision=40)  # below float64: no fast path
    assert low.decided_fast == 0


def test_uncovered_programs_fall_back_whole():
    x = np.asarray([0.5, 2.0], F32)
    got = oracles.evaluate(lambda x: lax.fori_loop(0, 3, lambda i, c: c * x, x), x)  # a loop
    assert got.decided_fast == 0 and np.asarray(got.certain).all()
    got = oracles.evaluate(lambda x: jax.scipy.special.erf(x), x)
    assert got.decided_fast == 0
    got = oracles.evaluate(lambda x: jnp.where(x > jnp.float32(np.nan), x, 1.0), x)  # NaN: undecided
    assert got.decided_fast == 0 and np.asarray(got.certain).all()


def test_nonfinite_inputs_and_exact_infinities():
    x = np.asarray([[1.0, -np.inf, 2.0], [np.inf, 0.0, 1.0]], F32)
    got = differential(lambda x: (jnp.exp(x), jnp.maximum(x, -np.inf), x + 1, jax.nn.softmax(x[:1], -1)), x)
    assert np.asarray(got.values[0])[0, 1] == 0.0
    differential(lambda x: jnp.log(x) * x, np.asarray([np.nan, 0.0, 1.0, -1.0], F32), need_fast=False)


# ------------------------------------------------------------------------------------- containment
def _exact(v) -> mpmath.mpf:
    return mpmath.mpf(float(v))


def _holds(out, exact: list) -> None:
    mid, rad = out.mid.reshape(-1), out.rad.reshape(-1)
    for m, r, e in zip(mid.tolist(), rad.tolist(), exact):
        if np.isnan(m):
            continue  # undecided: no claim
        if e is None:
            raise AssertionError(f"decided {m} +- {r} where no value exists")
        assert _exact(m) - _exact(r) <= e <= _exact(m) + _exact(r), (m, r, e)


def _points(values):
    return Interval.exact(np.asarray(values, F64))


HARD = [1.0, -1.0, 1.0 + 2.0**-52, 1.0 - 2.0**-53, 2.0**-1074, -2.0**-1060, 1e308, -1e-300, 709.7, 709.79,
        -745.1, -708.4, 0.5, 3.0, 1e16, 1e-16, 88.7, -103.9, 20.0, 40.0, -40.0, 1e-8, 0.0]


@pytest.mark.parametrize("name", ["exp", "expm1", "log", "log1p", "tanh", "logistic", "sqrt", "rsqrt",
                                  "exp2", "sinh", "asinh", "atan", "cbrt", "square", "cube", "inverse"])
def test_unary_intervals_hold_the_exact_value(name):
    f = {"exp": mpmath.exp, "expm1": mpmath.expm1, "log": mpmath.log, "log1p": mpmath.log1p,
         "tanh": mpmath.tanh, "logistic": lambda v: 1 / (1 + mpmath.exp(-v)), "sqrt": mpmath.sqrt,
         "rsqrt": lambda v: 1 / mpmath.sqrt(v), "exp2": lambda v: mpmath.mpf(2) ** v, "sinh": mpmath.sinh,
         "asinh": mpmath.asinh, "atan": mpmath.atan, "cbrt": lambda v: mpmath.sign(v) * mpmath.cbrt(abs(v)),
         "square": lambda v: v * v,
         "cube": lambda v: v ** 3, "inverse": lambda v: 1 / v}[name]
    domain = {"log": lambda lo, hi: lo > 0, "rsqrt": lambda lo, hi: lo > 0, "log1p": lambda lo, hi: lo > -1,
              "sqrt": lambda lo, hi: lo >= 0, "inverse": lambda lo, hi: lo > 0 or hi < 0}.get(name)
    xs = np.asarray(HARD + [-v for v in HARD] + [1 - 1e-12, 1 + 1e-12, 2.0**-1022], F64)
    eqn_power = {"square": 2, "cube": 3, "inverse": -1}
    for rad in (0.0, 1e-9):
        x = Interval.make(xs, np.full(xs.shape, rad))
        if name in eqn_power:
            out = _elementwise.power(x, eqn_power[name])
        elif name == "sqrt":
            out = iv.sqrt(x)
        else:
            out = _elementwise.FLOAT_RULES[name](None, x)
        with mpmath.workprec(400):
            for point in (-1, 0, 1):  # the function at the interval's ends and middle
                exact = [f(_exact(v) + point * _exact(rad)) if domain is None or domain(v - rad, v + rad)
                         else None for v in xs.tolist()]
                _holds(out, [e if e is None or abs(e) < mpmath.mpf(2) ** 1024 else None for e in exact])


def _pairs():
    rng = np.random.default_rng(11)
    base = np.asarray(HARD, F64)
    a = np.concatenate([base, rng.standard_normal(17) * 10.0 ** rng.integers(-300, 300, 17)])
    b = np.concatenate([-base + 2.0**-40, rng.standard_normal(17) * 10.0 ** rng.integers(-300, 300, 17)])
    a, b = np.meshgrid(a, b)
    return a.ravel(), b.ravel()


def _huge(e):
    return e is None or abs(e) > mpmath.mpf(2) ** 1024


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "max", "min"])
def test_binary_intervals_hold_the_exact_value(name):
    op, ref = {"add": (iv.add, lambda x, y: x + y), "sub": (iv.sub, lambda x, y: x - y),
               "mul": (iv.mul, lambda x, y: x * y), "div": (iv.div, lambda x, y: x / y if y != 0 else None),
               "max": (lambda x, y: iv.extremum(x, y, True), max),
               "min": (lambda x, y: iv.extremum(x, y, False), min)}[name]
    a, b = _pairs()
    for rad in (0.0, 2.0**-30):
        x, y = Interval.make(a, np.abs(a) * rad), Interval.make(b, np.abs(b) * rad)
        out = op(x, y)
        with mpmath.workprec(2400):
            for sx, sy in ((0, 0), (1, -1), (-1, 1), (1, 1)):  # the operands' corners
                ex = [ref(_exact(u) + sx * _exact(ru), _exact(v) + sy * _exact(rv))
                      for u, ru, v, rv in zip(a.tolist(), x.rad.tolist(), b.tolist(), y.rad.tolist())]
                _holds(out, [None if _huge(e) else e for e in ex])


def test_pow_interval_holds_the_exact_value():
    a, b = _pairs()
    a, y = np.abs(a[::3]), b[::3] / 1e3
    for rad in (0.0, 2.0**-30):
        base, power = Interval.make(a, a * rad), Interval.make(y, np.abs(y) * rad)
        out = _elementwise._pow(None, base, power)
        with mpmath.workprec(300):  # no cancellation: 300 bits are far below the radii
            for sx, sy in ((0, 0), (1, -1), (-1, 1), (1, 1)):
                ex = []
                for u, ru, v, rv in zip(a.tolist(), base.rad.tolist(), y.tolist(), power.rad.tolist()):
                    u, v = _exact(u) + sx * _exact(ru), _exact(v) + sy * _exact(rv)
                    ok = u > 0 and v * mpmath.log(u) < 710
                    ex.append(u ** v if ok else None)
                _holds(out, ex)
        assert not np.isnan(out.mid).all()


def test_exactness_is_kept_only_where_exact():
    x, y = _points([1e16, 3.0, 2.0**-1074, 0.1]), _points([1.0, 0.5, 0.5, 3.0])
    s = iv.add(x, y)
    assert list(s.rad == 0) == [False, True, False, False]  # 1e16 + 1 rounds; 2^-1074 + 0.5 rounds
    p = iv.mul(x, y)
    assert list(p.rad == 0) == [True, True, False, False]  # 2^-1075 underflows; 0.1 * 3 rounds
    q = iv.div(y, x)
    assert list(q.rad == 0) == [False, False, False, False]
    assert list(iv.div(_points([6.0, 1.0]), _points([3.0, 3.0])).rad == 0) == [True, False]
    assert list(iv.sqrt(_points([4.0, 2.0, 0.0])).rad == 0) == [True, False, True]


def test_sums_and_products_hold_the_exact_value():
    rng = np.random.default_rng(2)

    class _Eqn:
        params = {"axes": (1,)}

    x = rng.standard_normal((6, 300)) * 10.0 ** rng.integers(-20, 20, (6, 300))
    x[0] = [1e16, 1.0, -1e16] * 100  # cancellation
    x[1] = 2.0**-1074
    xs = Interval.make(x, np.abs(x) * 1e-12)
    out = _arrays._reduce_sum(None, _Eqn(), xs)
    with mpmath.workprec(4000):
        for sign in (-1, 1):
            exact = [mpmath.fsum(_exact(v) + sign * _exact(r) for v, r in zip(row, rads))
                     for row, rads in zip(x, xs.rad)]
            _holds(out, exact)

    class _Dot:
        params = {"dimension_numbers": (((1,), (0,)), ((), ()))}
        outvars = [types.SimpleNamespace(aval=types.SimpleNamespace(shape=(4, 3), dtype=np.dtype(F64)))]
        primitive = lax.dot_general_p

    a = rng.standard_normal((4, 50)) * 10.0 ** rng.integers(-150, 150, (4, 50))
    b = rng.standard_normal((50, 3)) * 10.0 ** rng.integers(-150, 150, (50, 3))
    left = Interval.make(a, np.abs(a) * 2.0**-40)
    out = _arrays._dot_general(None, _Dot(), left, Interval.exact(b))
    with mpmath.workprec(2000):
        for sign in (-1, 1):
            exact = [mpmath.fsum((_exact(a[i, k]) + sign * _exact(left.rad[i, k])) * _exact(b[k, j])
                                 for k in range(50)) for i in range(4) for j in range(3)]
            _holds(out, exact)


# -------------------------------------------------------------------------------------- rounding
@pytest.mark.parametrize("dtype", [F16, BF16, F32])
def test_rounding_is_round_to_dtype(dtype):
    from pytest_jaxstab._dtypes import dtype_info
    from pytest_jaxstab.oracles import round_to_dtype

    fmt = dtype_info(dtype)
    rng = np.random.default_rng(1)
    grid = np.asarray(fmt.max, F64) * rng.random(2000) * 2.0 ** -rng.integers(0, 160, 2000)
    exactly = rng.standard_normal(300).astype(dtype).astype(F64)
    ulps = np.abs(exactly) * 2.0 ** -fmt.mantissa_bits
    ties = exactly + ulps / 2  # halfway to the next float (where representable in float64)
    edges = np.asarray([float(fmt.max), float(fmt.max) * (1 + 2.0**-(fmt.mantissa_bits + 1)), 1e300,
                        float(fmt.smallest_subnormal) / 2, float(fmt.smallest_subnormal) * 1.5, 5e-324, 0.0,
                        float(fmt.tiny) * (1 - 2.0**-30)], F64)
    v = np.concatenate([grid, -grid, exactly, ties, -ties, edges, -edges])
    mine = round_to_format(v, fmt.significand_bits, fmt.min_exponent, fmt.max_exponent).astype(dtype)
    ref = round_to_dtype([mpmath.mpf(float(t)) for t in v], dtype)  # mpmath's zero is unsigned
    assert ((mine.view(fmt.uint_dtype) == ref.view(fmt.uint_dtype)) | (v == 0)).all()


@pytest.mark.parametrize("dtype", [F16, BF16, F32, F64])
def test_decide_agrees_with_round_balls(dtype):
    from pytest_jaxstab.oracles import round_to_dtype

    rng = np.random.default_rng(4)
    mid = rng.standard_normal(3000) * 2.0 ** rng.integers(-160, 140, 3000)
    mid[:300] = rng.standard_normal(300).astype(dtype).astype(F64)  # floats of the target
    mid[300:400] = 0.0
    rad = np.abs(mid) * 2.0 ** -rng.integers(8, 60, 3000)
    rad[::7] = 0.0
    rad[300:350] = 2.0 ** -rng.integers(100, 200, 50)  # around zero
    x = Interval.make(mid, rad)
    values, decided = decide(x, dtype)
    lo, hi = iv.ends(x)
    if np.dtype(dtype) == np.dtype(F64):
        assert (decided == (rad == 0)).all()
    # Every real in [lo, hi] rounds to the decided value: both ends do (rounded independently).
    ends = [round_to_dtype([mpmath.mpf(float(t)) for t in e[decided]], dtype).astype(F64) for e in (lo, hi)]
    got = values[decided].astype(F64)
    assert ((ends[0] == got) & (ends[1] == got)).all()
    # ... and it is what the Arb path's rounding of a ball over the same ends says, zeros' signs included
    balls = np.empty(len(mid), object)
    balls[:] = [arb(a).union(arb(b)) for a, b in zip(lo.tolist(), hi.tolist())]
    ref, ref_decided = round_balls(balls, dtype)
    both = decided & ref_decided
    a, b = values[both].astype(F64), ref[both].astype(F64)
    assert ((a == b) & (np.signbit(a) == np.signbit(b))).all()
    assert (decided & ~ref_decided).sum() <= 3  # the ball is a little wider than [lo, hi]
    assert (ref_decided & ~decided).sum() == 0 or np.dtype(dtype) == np.dtype(F64)
    assert decided.mean() > (0.14 if np.dtype(dtype) == np.dtype(F64) else 0.3)


# ------------------------------------------------------------------------------ rows of a program
def _batched(fn, *args):
    from pytest_jaxstab import _compat
    from pytest_jaxstab.oracles.interpreter._rows import batched

    closed, _, _ = _compat.trace(fn, *args)
    return batched(closed)


def test_row_separable_programs_are_recognised():
    x, w, y = np.ones((4, 6), F32), np.ones((6, 3), F32), np.zeros(4, np.int32)
    assert _batched(_ln_two_pass, x) == (4, [True], [True])
    assert _batched(_xent, x, y) == (4, [True, True], [True])
    assert _batched(lambda x, w: jnp.tanh(x @ w), x, w) == (4, [True, False], [True])
    assert _batched(_attention, x, x[:3]) == (4, [True, False], [True])
    assert _batched(lambda x: (jnp.sum(x, -1), jnp.sum(w)), x) == (4, [True], [True, False])
    refused = [
        (_attention, (x, x)),  # the keys have as many rows: every row reads all of them
        (lambda x: x - jnp.mean(x, 0), (x,)),  # across rows
        (lambda x: jnp.cumsum(x, 0), (x,)),
        (lambda x: x[::-1], (x,)),
        (lambda x: jnp.sum(x.T, -1), (x,)),
        (lambda x: x[1:], (x,)),
        (lambda x: jnp.take(x, jnp.asarray([1, 0, 3, 2]), axis=0), (x,)),
        (lambda x: jnp.broadcast_to(x[:1], (4, 6)) * x, (x,)),
        (lambda x: jnp.sort(x, 0), (x,)),
        (lambda x: x.reshape(6, 4), (x,)),
        (lambda x: jnp.sum(x), (x,)),
    ]
    for fn, args in refused:
        assert _batched(fn, *args) is None, fn


def _spy_rows(monkeypatch):
    from pytest_jaxstab.oracles.interpreter import _evaluate

    seen = []
    real = _evaluate.masked

    def spy(inputs, rows, which, pending):
        seen.append(pending.copy())
        return real(inputs, rows, which, pending)

    monkeypatch.setattr(_evaluate, "masked", spy)
    return seen


def test_only_pending_rows_are_escalated(monkeypatch):
    seen = _spy_rows(monkeypatch)
    x = np.ones((4, 5), F32)
    y = np.full((4, 5), 0.5, F32)
    y[2] = 1e-30  # (x + y) - x needs more than float64 in row 2 only
    fn = lambda x, y: jnp.sum((x + y) - x, -1, keepdims=True) * jnp.ones((1, 3), F32)
    got = differential(fn, x, y)
    assert got.decided_fast == 9 and got.escalated == 3
    assert np.asarray(got.values)[2, 0] == F32(5e-30)
    assert seen and all(list(p) == [False, False, True, False] for p in seen)  # each pass: row 2 alone


def test_a_program_across_rows_is_escalated_whole(monkeypatch):
    seen = _spy_rows(monkeypatch)
    x = np.ones((4, 5), F32)
    y = np.full((4, 5), 0.5, F32)
    y[2] = 1e-30
    differential(lambda x, y: ((x + y) - x) + jnp.sum(x * y, 0), x, y)
    assert seen == []


def test_elementwise_programs_convert_only_pending_elements():
    x = np.asarray([1.0, 2.0, 3.0, 4.0], F32)
    y = np.asarray([0.5, 1e-30, 0.25, 0.75], F32)
    got = differential(lambda x, y: (x + y) - x, x, y)
    assert got.decided_fast == 3 and list(np.asarray(got.precisions) == FAST_PRECISION) == [True, False,
                                                                                            True, True]


# ------------------------------------------------------------------------------------- mixed pass
def _gelu_tanh(x, tanh=jnp.tanh):
    return 0.5 * x * (1 + tanh(0.7978845608 * (x + 0.044715 * x ** 3)))


def _tanh_spelled_out(v):
    e = jnp.exp(2 * v)
    return (e - 1) / (e + 1)


@pytest.mark.parametrize("name", ["bce_spelled_out", "gelu_tanh_spelled_out", "lse_naive"])
def test_the_mixed_pass_decides_what_the_fast_walk_left_as_the_arb_path_does(name):
    # Programs across rows whose float64 walk loses a few intermediates (1 - sigmoid(z) for z > 37,
    # 1 + tanh(v) in the gelu's left tail, exp underflowing in a row of very negative logits): the
    # mixed pass (``interpreter/_mixed``) recomputes only those in Arb; its values and certainties are
    # the whole-program Arb path's, and it decides some element (else it is not what is tested). The
    # sigmoid and the tanh are spelled out: the primitives' own forms are enclosed by identities in the
    # fast walk itself (``fast/_identities``, ``test_check_scale_costs.py``), with nothing left to mix.
    rng = np.random.default_rng(11)
    x = (rng.standard_normal((6, 32)) * 30).astype(F32)
    fn = {"bce_spelled_out": lambda x: -jnp.mean(jnp.log(1 - 1 / (1 + jnp.exp(-x))), -1),
          "gelu_tanh_spelled_out": lambda x: jnp.sum(_gelu_tanh(-jnp.abs(x) / 3 - 5, _tanh_spelled_out), -1),
          "lse_naive": lambda x: jnp.log(jnp.sum(jnp.exp(x - 800.0), -1))}[name]
    mixed = oracles.evaluate(fn, x)
    whole = oracles.evaluate(fn, x, mixed=False)
    arb = oracles.evaluate(fn, x, fast=False)
    assert mixed.decided_mixed > 0
    for got in (mixed, whole):
        for v, c, rv, rc in zip(*map(_leaves, (got.values, got.certain, arb.values, arb.certain))):
            assert (c == rc).all()
            assert ((v == rv) | (np.isnan(v) & np.isnan(rv))).all()


def test_an_undecided_choice_is_the_hull_of_its_cases():
    # where(1 + 1e-20 - 1 > 0, a, b): float64 cannot tell the predicate, so the element is one of the
    # cases; where they agree (a derivative's zero cotangent in both branches of a kink) the fast path
    # decides it exactly, elsewhere their hull holds the exact value and the element is escalated.
    from pytest_jaxstab.oracles.fast import enclose

    def fn(x, a, b):
        return jnp.where((x[0] + x[1]) - x[2] > 0, a, b)

    x = np.asarray([1.0, 1e-20, 1.0])
    a, b = np.asarray([0.0, 2.0, -3.0]), np.asarray([0.0, 5.0, 7.0])
    with jax.enable_x64(True):
        closed = jax.make_jaxpr(fn)(x, a, b)
        bounds = enclose(closed, [x, a, b])
        assert bounds is not None
        ((lo, hi),) = bounds
        exact = np.asarray(oracles.evaluate(closed, x, a, b).values, np.float64).reshape(-1)
    assert lo[0] == hi[0] == 0.0  # both cases 0: decided
    assert np.all(lo <= exact) and np.all(exact <= hi)
    # the hull, no wider than its midpoint-radius form's outward rounding (a few float64 ulps)
    np.testing.assert_allclose(lo[1:], [2.0, -3.0], rtol=2.0**-48)
    np.testing.assert_allclose(hi[1:], [5.0, 7.0], rtol=2.0**-48)
    assert list(exact) == [0.0, 2.0, -3.0]  # the exact predicate is true


def test_a_saturated_tanh_decides_the_left_tail_of_an_approximate_gelu():
    # 0.5 x (1 + tanh(c (x + 0.044715 x^3))): past |c x^3| ~ 20 the value underflows float32 (2e^-2|z|
    # times x), but tanh's float64 value rounds to -1 and its midpoint's rounding (2^-53) hides it: the
    # fast path encloses a saturated tanh about its limit (radius 2e^-2|z|), so these elements are
    # decided in float64; they must be the Arb path's values, and the containment test above holds
    # the enclosure itself at 20, 40 and beyond.
    def gelu(x):
        return 0.5 * x * (1 + jnp.tanh(np.float32(0.7978846) * (x + np.float32(0.044715) * x ** 3)))

    x = np.asarray([-12.0, -30.0, -1e3, -1e7, 40.0, 1e7], F32)
    fast = oracles.evaluate(gelu, x)
    slow = oracles.evaluate(gelu, x, fast=False)
    assert fast.decided_fast == x.size  # every element here is past the saturation
    np.testing.assert_array_equal(np.asarray(fast.values), np.asarray(slow.values))
    assert np.asarray(slow.certain).all()
