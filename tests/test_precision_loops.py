"""Loops in a precision plan (issue 49 item 1): a kept line inside a ``scan``/``fori_loop``/``while_loop``
body keeps the loop's carry in float32 where the kept line writes it, and only there; the plan names it.

References are computed here, independently of the oracle: a plain Python loop in float64 over the
low-precision inputs (and over the program's constants as the program holds them: rounded to the low
dtype, since a literal ``0.99`` in a bfloat16 program is bfloat16's 0.98828125), rounded once to the
low dtype. A float32 recurrence of 256 steps whose terms shrink (an average, a decaying sum) is off
by at most ~256 * 2^-24 relative, far inside one bfloat16 ulp (2^-8): so the tuned program, rounded to
bfloat16, is within the plan's own 4 ulp target of that reference (4: the output's rounding plus a few,
the plan's default), while the bfloat16 carry, rounded at every step, is off by far more.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from precision_helpers import marked_line as _line
from precision_helpers import ulps as _ulps

import pytest_jaxstab as jst
from pytest_jaxstab import _compat as C
from pytest_jaxstab._check._upcast import run_upcast, widened_carries
from pytest_jaxstab._compat import trace

BF16 = jnp.bfloat16
TOL_ULPS = 4
N = 256


# ------------------------------------------------------------------------------------------ programs
def ema(x):
    """An exponential moving average, as optimisers and batch-norm statistics keep one, in a scan."""
    def step(m, xt):
        m = 0.99 * m + 0.01 * xt  # ema
        return m, None
    m, _ = lax.scan(step, jnp.zeros((), x.dtype), x)  # the scan
    return m


def _ema_ref(x):
    beta, alpha = float(np.asarray(0.99, BF16)), float(np.asarray(0.01, BF16))
    m = 0.0
    for v in np.asarray(x, np.float64):
        m = beta * m + alpha * v
    return m


def running_mean(x):
    """Welford's running mean in a ``while_loop`` (an online statistic over a stream)."""
    def cond(c):
        return c[0] < x.shape[0]

    def body(c):
        i, mean = c
        mean = mean + (x[i] - mean) / (i + 1).astype(x.dtype)  # welford
        return i + 1, mean
    _, mean = lax.while_loop(cond, body, (0, jnp.zeros((), x.dtype)))  # the while
    return mean


def _mean_ref(x):
    return float(np.mean(np.asarray(x, np.float64)))


def two_carries(x):
    """A sum and a maximum carried side by side: only the sum's line is planned (below)."""
    def step(c, xt):
        acc, mx = c
        acc = acc + xt  # acc
        mx = jnp.maximum(mx, xt)  # max
        return (acc, mx), acc
    (acc, mx), partial = lax.scan(step, (jnp.zeros((), x.dtype), jnp.full((), -jnp.inf, x.dtype)), x)
    return acc, mx, partial


def fori_traced(x, n):
    """A ``fori_loop`` whose trip count is traced: JAX lowers it to a ``while``."""
    def body(i, acc):
        return acc + x[i] * x[i]  # squares
    return lax.fori_loop(0, n, body, jnp.zeros((), x.dtype))


def nested(x):
    """Row sums in an inner ``fori_loop`` accumulated by an outer ``scan``: the inner sum's carry
    flows into the outer carry."""
    def row(acc, r):
        s = lax.fori_loop(0, r.shape[0], lambda j, t: t + r[j], jnp.zeros((), r.dtype))  # inner
        return acc + s, None  # outer
    total, _ = lax.scan(row, jnp.zeros((), x.dtype), x)
    return total


def _draw(seed, shape=(N,)):
    return np.random.default_rng(seed).uniform(0.0, 1.0, shape).astype(BF16)


def _scan_carry_dtypes(fn, *args):
    """The carry dtypes of each top-level loop of ``fn``'s jaxpr: what actually runs, read from the trace
    (through ``_compat``'s views, which know each JAX generation's loop parameters)."""
    out = []
    for eqn in jax.make_jaxpr(fn)(*args).jaxpr.eqns:
        if eqn.primitive.name == "scan":
            out.append([C.aval(v).dtype for v in C.scan_parts(eqn).carry])
        elif eqn.primitive.name == "while":
            out.append([C.aval(v).dtype for v in C.while_parts(eqn).carry])
    return out


# ------------------------------------------------------------------------------------------ plans
@pytest.fixture(scope="module")
def ema_plan():
    return jst.tune_precision(ema, shapes=(N,), dtype="bfloat16", domain=(0.0, 1.0), samples=16)


def test_scan_plan_keeps_the_carry_high_and_names_it(ema_plan):
    plan = ema_plan
    assert plan.lines == (_line(ema, "ema"),)
    (carry,) = plan.carries
    assert (carry.kind, carry.index, carry.declared, carry.high) == ("scan", 0, "bfloat16[]", "float32")
    assert carry.loop == _line(ema, "the scan") and carry.writer == _line(ema, "ema")
    assert "carry kept in float32: scan at" in str(plan)
    assert plan.reached and plan.original.max_ulps > TOL_ULPS  # the bfloat16 carry misses; the plan does not
    x = _draw(11)
    ref = _ema_ref(x)
    assert _ulps(plan.fn(jnp.asarray(x)), ref, BF16) <= TOL_ULPS
    assert _ulps(jax.jit(ema)(jnp.asarray(x)), ref, BF16) > TOL_ULPS  # as written: the test can fail
    # the tuned program's loop really carries float32 (read from its trace, not from the plan)
    assert _scan_carry_dtypes(plan.fn, jnp.asarray(x)) == [[jnp.dtype("float32")]]


def test_while_loop_plan_keeps_the_running_mean_high():
    # Welford's increments (x - mean) / (i + 1) fall below half an ulp of the bfloat16 mean as i grows
    plan = jst.tune_precision(running_mean, shapes=(N,), dtype="bfloat16", domain=(0.0, 1.0), samples=12)
    assert plan.lines == (_line(running_mean, "welford"),)
    (carry,) = plan.carries
    assert (carry.kind, carry.index, carry.writer) == ("while", 1, _line(running_mean, "welford"))
    assert carry.loop == _line(running_mean, "the while")
    assert plan.reached and plan.original.max_ulps > TOL_ULPS  # as written it misses on the plan's samples
    for seed in (12, 13, 14):  # the tuned loop on inputs the plan never saw
        x = _draw(seed)
        assert _ulps(plan.fn(jnp.asarray(x)), _mean_ref(x), BF16) <= TOL_ULPS
    # the counter (int32) and the mean (now float32): only the float carry changed
    assert _scan_carry_dtypes(plan.fn, jnp.asarray(x)) == [[jnp.dtype("int32"), jnp.dtype("float32")]]


# ------------------------------------------------------------------ the transformation, lines given
def _closed(fn, *specs):
    closed, _, _ = trace(fn, *specs)
    return closed


def test_only_the_carry_a_kept_line_writes_is_widened():
    spec = jax.ShapeDtypeStruct((N,), BF16)
    closed = _closed(two_carries, spec)
    lines = frozenset({_line(two_carries, "acc")})
    (carry,) = widened_carries(closed, lines, np.dtype(np.float32))
    assert (carry.index, carry.writer) == (0, _line(two_carries, "acc"))
    x = _draw(13)

    def tuned(a):
        return run_upcast(closed, lines, np.dtype(np.float32), [a])

    (dtypes,) = _scan_carry_dtypes(tuned, jnp.asarray(x))
    assert dtypes == [jnp.dtype("float32"), jnp.dtype(BF16)]  # the max stays bfloat16: nothing asked
    acc, mx, partial = tuned(jnp.asarray(x))
    x64 = np.asarray(x, np.float64)
    assert _ulps(acc, x64.sum(), BF16) <= 1  # one rounding of a float32 sum of 256 values in [0, 1)
    assert float(mx) == x64.max()
    # the stacked partial sums are the float32 carry rounded once each: every one within an ulp
    assert np.all(_ulps(partial, np.cumsum(x64), BF16) <= 1)
    assert acc.dtype == jnp.dtype(BF16)  # declared dtypes at the outputs


def test_traced_fori_loop_is_a_while_and_is_widened():
    x = _draw(14, (512,))
    closed = _closed(fori_traced, jax.ShapeDtypeStruct((512,), BF16), jax.ShapeDtypeStruct((), np.int32))
    lines = frozenset({_line(fori_traced, "squares")})
    (carry,) = widened_carries(closed, lines, np.dtype(np.float32))
    assert carry.kind == "while" and carry.writer == _line(fori_traced, "squares")
    got = run_upcast(closed, lines, np.dtype(np.float32), [jnp.asarray(x), np.int32(512)])[0]
    ref = float(np.sum(np.asarray(x, np.float64) ** 2))
    # float32 squares of bfloat16 values are exact (16-bit products); the 64-term float32 sum rounds
    # ~512 * 2^-24 relative: the bfloat16 result is within an ulp
    assert _ulps(got, ref, BF16) <= 1
    naive = jax.jit(fori_traced)(jnp.asarray(x), 512)
    assert _ulps(naive, ref, BF16) > TOL_ULPS


def test_nested_loops_widen_inner_and_outer_carries():
    # rows of 768 values in [0, 1): a bfloat16 running sum stalls near 256 (its ulp is 2 there)
    x = _draw(15, (4, 768))
    closed = _closed(nested, jax.ShapeDtypeStruct((4, 768), BF16))
    lines = frozenset({_line(nested, "inner"), _line(nested, "outer")})
    carries = widened_carries(closed, lines, np.dtype(np.float32))
    assert {c.writer for c in carries} == lines  # each loop names the line writing its carry
    got = run_upcast(closed, lines, np.dtype(np.float32), [jnp.asarray(x)])[0]
    ref = float(np.sum(np.asarray(x, np.float64)))
    assert _ulps(got, ref, BF16) <= 1
    assert _ulps(jax.jit(nested)(jnp.asarray(x)), ref, BF16) > TOL_ULPS


def test_no_kept_line_inside_binds_the_loop_as_written():
    spec = jax.ShapeDtypeStruct((N,), BF16)
    closed = _closed(two_carries, spec)
    assert widened_carries(closed, frozenset({"elsewhere.py:1"}), np.dtype(np.float32)) == ()
    x = jnp.asarray(_draw(16))
    got = run_upcast(closed, frozenset(), np.dtype(np.float32), [x])
    want = jax.jit(two_carries)(x)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g, np.float32), np.asarray(w, np.float32))
