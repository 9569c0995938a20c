"""PRNG keys, random bits and value-neutral effects in the oracle and through ``jst.check``.

References: the Random123 known-answer vectors for threefry2x32-20 (independent of JAX and of the
oracle); numpy's bit reinterpretation; mpmath for the float values; the dropout masks themselves are
JAX's integer results, which the oracle must reproduce bit for bit.
"""

from __future__ import annotations

import jax
import jax.extend as jex
import jax.numpy as jnp
import mpmath as mp
import numpy as np
import pytest
from jax import lax
from jax.sharding import PartitionSpec

import pytest_jaxstab as jst
from pytest_jaxstab import oracles

F32 = np.float32


def _f32(fn, xs):
    """``fn`` over mpf at 200 bits, each value then rounded once to float32's 24 bits (normal range)."""
    out = []
    for v in xs:
        with mp.workprec(200):
            exact = fn(mp.mpf(float(v)))
        with mp.workprec(24):
            out.append(float(+exact))
    return np.asarray(out, F32)

# Random123's known answers for threefry2x32 with 20 rounds: (key, counter) -> output.
THREEFRY_KAT = [
    ((0x00000000, 0x00000000), (0x00000000, 0x00000000), (0x6B200159, 0x99BA4EFE)),
    ((0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF), (0x1CB996FC, 0xBB002BE7)),
    ((0x13198A2E, 0x03707344), (0x243F6A88, 0x85A308D3), (0xC4923A9C, 0x483DF7A0)),
]


@pytest.mark.parametrize(("key", "count", "want"), THREEFRY_KAT)
def test_threefry_matches_known_answers(key, count, want):
    got = oracles.evaluate(jex.random.threefry_2x32, np.asarray(key, np.uint32), np.asarray(count, np.uint32))
    np.testing.assert_array_equal(np.asarray(got.values), np.asarray(want, np.uint32))


def _dropout(key):
    def f(x):
        keep = jax.random.bernoulli(key(), 0.9, x.shape)
        return jnp.where(keep, x / F32(0.9), F32(0.0))

    return f


KEY = jax.random.key(7)
KEYS = {
    "made-inside": lambda: jax.random.key(0),
    "closed-over": lambda: KEY,
    "raw-uint32": lambda: jax.random.PRNGKey(3),
    "split-fold_in": lambda: jax.random.fold_in(jax.random.split(jax.random.key(1), 3)[2], 11),
}


@pytest.mark.parametrize("which", list(KEYS))
def test_dropout_mask_is_jax_own_and_values_exact(which):
    f = _dropout(KEYS[which])
    x = np.linspace(-3, 3, 64, dtype=F32)
    got = oracles.evaluate(f, x)
    assert np.asarray(got.certain).all()
    keep = np.asarray(jax.random.bernoulli(KEYS[which](), 0.9, x.shape))
    assert 0 < keep.sum() < len(keep)  # the mask has both kinds
    scaled = _f32(lambda v: v / mp.mpf(float(F32(0.9))), x)
    want = np.where(keep, scaled, F32(0.0))
    np.testing.assert_array_equal(np.asarray(got.values), want)


def test_uniform_and_normal_from_a_key():
    # uniform: bits -> [1, 2) by bitcast -> minus 1: exact in float32, so the oracle equals JAX's floats.
    def f(x):
        k1, k2 = jax.random.split(jax.random.key(42))
        return jax.random.uniform(k1, x.shape) * x, jax.random.normal(k2, x.shape) * x

    x = np.ones(16, F32)
    got = oracles.evaluate(f, x)
    np.testing.assert_array_equal(np.asarray(got.values[0]), np.asarray(f(x)[0]))
    assert np.asarray(got.certain[1]).all()
    # normal, by hand from the same 32-bit draws: u = max(lo, (f - 1)(1 - lo) + lo) with f in [1, 2) from the
    # top 23 bits and lo = -0.99999994f, then sqrt2f * erfinv(u), all exact in mpmath, rounded once.
    bits = np.asarray(jax.random.bits(jax.random.split(jax.random.key(42))[1], x.shape), np.uint32)
    unit = ((bits >> 9) | np.uint32(0x3F800000)).view(F32)
    lo, sqrt2 = (mp.mpf(float(F32(v))) for v in (-0.99999994, 1.4142135381698608))
    want = _f32(lambda f: sqrt2 * mp.erfinv(max(lo, (f - 1) * (1 - lo) + lo)), unit)
    np.testing.assert_array_equal(np.asarray(got.values[1]), want)


def test_check_finds_the_instability_inside_a_dropout_model():
    def masked_logsumexp(x):  # the mask drops terms; exp still underflows for every kept one
        keep = jax.random.bernoulli(KEY, 0.9, x.shape)
        return jnp.log(jnp.sum(jnp.where(keep, jnp.exp(x), F32(0.0))))

    result = jst.check(masked_logsumexp, dtype="float32", shapes={"x": (8,)}, max_examples=40, seed=1)
    assert result.outcome == "failed"
    assert result.original.overflows > 0
    assert any(r.primitive in ("log", "exp") for r in result.nan_origins)


def test_check_passes_a_stable_dropout_model_with_a_key_made_inside():
    result = jst.check(_dropout(KEYS["made-inside"]), dtype="float32", shapes={"x": (8,)},
                       max_examples=30, seed=2)
    assert result.outcome == "passed"
    assert result.original.max_error_bits <= 1.0  # one division, correctly rounded by the float program


def _returns_its_key(x):
    key, sub = jax.random.split(jax.random.key(0))
    return x * jax.random.uniform(sub, x.shape), key


def test_a_returned_key_gets_a_clear_error():
    with pytest.raises(oracles.OracleError, match="returns a PRNG key"):
        oracles.evaluate(_returns_its_key, np.ones(3, F32))
    with pytest.raises(jst.TraceError, match=r"returns a PRNG key \(output 1\)"):
        jst.check(_returns_its_key, dtype="float32", shapes={"x": (3,)}, max_examples=2, seed=0)


def test_a_key_argument_is_evaluated():
    f = lambda x, key: x * jax.random.uniform(key, x.shape)
    x, key = np.full(4, 3.0, F32), jax.random.key(5)
    got = oracles.evaluate(f, x, key)
    u = np.asarray(jax.random.uniform(key, x.shape))  # floats in [0, 1): 3u is exact in float64
    np.testing.assert_array_equal(np.asarray(got.values), _f32(lambda v: v, 3 * u.astype(np.float64)))


# Every distribution of jax.random (orthogonal aside: its QR factor is refused) from a fixed key, as a
# model would draw it: evaluated by the oracle with every element proven.
_KEY = jax.random.key(0)
DISTRIBUTIONS = {
    "uniform": lambda x: jax.random.uniform(_KEY, x.shape) * x,
    "normal": lambda x: jax.random.normal(_KEY, x.shape) * x,
    "bernoulli": lambda x: jnp.where(jax.random.bernoulli(_KEY, 0.3, x.shape), x, 0.),
    "gamma": lambda x: jax.random.gamma(_KEY, x),
    "beta": lambda x: jax.random.beta(_KEY, x, x),
    "dirichlet": lambda x: jax.random.dirichlet(_KEY, x),
    "exponential": lambda x: jax.random.exponential(_KEY, x.shape) * x,
    "gumbel": lambda x: jax.random.gumbel(_KEY, x.shape) * x,
    "laplace": lambda x: jax.random.laplace(_KEY, x.shape) * x,
    "logistic": lambda x: jax.random.logistic(_KEY, x.shape) * x,
    "cauchy": lambda x: jax.random.cauchy(_KEY, x.shape) * x,
    "categorical": lambda x: jax.random.categorical(_KEY, jnp.log(x)).astype(jnp.float32) * x,
    "truncated_normal": lambda x: jax.random.truncated_normal(_KEY, -x, x),
    "t": lambda x: jax.random.t(_KEY, x),
    "chisquare": lambda x: jax.random.chisquare(_KEY, x),
    "poisson": lambda x: jax.random.poisson(_KEY, x).astype(jnp.float32),
    "randint": lambda x: jax.random.randint(_KEY, x.shape, 0, 10).astype(jnp.float32) * x,
    "permutation": lambda x: jax.random.permutation(_KEY, x),
    "choice": lambda x: jax.random.choice(_KEY, x, (2,)),
    "rademacher": lambda x: jax.random.rademacher(_KEY, x.shape).astype(jnp.float32) * x,
    "maxwell": lambda x: jax.random.maxwell(_KEY, x.shape) * x,
    "weibull_min": lambda x: jax.random.weibull_min(_KEY, x, x),
    "pareto": lambda x: jax.random.pareto(_KEY, x),
    "loggamma": lambda x: jax.random.loggamma(_KEY, x),
    "binomial": lambda x: jax.random.binomial(_KEY, 10., x / 3),
    "geometric": lambda x: jax.random.geometric(_KEY, x / 3).astype(jnp.float32),
    "multivariate_normal": lambda x: jax.random.multivariate_normal(_KEY, x, jnp.diag(x)),
    "lognormal": lambda x: jax.random.lognormal(_KEY, x),
    "rayleigh": lambda x: jax.random.rayleigh(_KEY, x),
    "wald": lambda x: jax.random.wald(_KEY, x),
    "triangular": lambda x: jax.random.triangular(_KEY, -x, 0*x, x),
    "f": lambda x: jax.random.f(_KEY, x, x),
    "generalized_normal": lambda x: jax.random.generalized_normal(_KEY, 2.0, x.shape) * x,
    "ball": lambda x: jax.random.ball(_KEY, 3) * x,
    "double_sided_maxwell": lambda x: jax.random.double_sided_maxwell(_KEY, 0., x),
}


@pytest.mark.parametrize("name", list(DISTRIBUTIONS))
def test_every_distribution_is_evaluated(name):
    with jax.numpy_dtype_promotion("standard"):  # some samplers mix weak types internally
        result = oracles.evaluate(DISTRIBUTIONS[name], np.full(3, 1.5, F32))
    assert all(np.asarray(c).all() for c in jax.tree_util.tree_leaves(result.certain))


def test_poisson_draws_are_jaxs_own_below_and_above_the_switch_to_rejection():
    # JAX 0.12.1 made jax.random.poisson one primitive, random_poisson (before, its sampler was traced
    # into the program): the oracle runs JAX's own sampler exactly either way. Counts are integers, so
    # they equal JAX's draws, on both sides of the mean of 10 where Knuth's product of uniforms gives way
    # to Hormann's transformed rejection (no acceptance test of this key sits at a rounding).
    lam = np.array([0.5, 3.0, 9.5, 10.0, 40.0, 1e3], F32)
    f = lambda rate: jax.random.poisson(jax.random.key(3), rate)
    got = oracles.evaluate(f, lam)
    assert np.asarray(got.certain).all()
    np.testing.assert_array_equal(np.asarray(got.values), np.asarray(f(lam)))


# --------------------------------------------------------------------------------------- effects
def _printing_softplus(x):
    jax.debug.print("x = {x}", x=x)
    return jnp.log(1 + jnp.exp(x))


def test_debug_print_is_skipped_by_the_oracle(capfd):
    x = np.asarray([1e-3, 2.0], F32)
    got = oracles.evaluate(_printing_softplus, x)
    np.testing.assert_array_equal(np.asarray(got.values), _f32(lambda v: mp.log(1 + mp.exp(v)), x))
    assert "x = " not in capfd.readouterr().out  # the exact evaluation printed nothing


def test_check_finds_the_overflow_in_a_function_that_prints():
    result = jst.check(_printing_softplus, dtype="float32", shapes={"x": (4,)}, max_examples=30, seed=0)
    assert result.outcome == "failed"
    assert any(r.primitive == "exp" and r.kind == "overflow" for r in result.nan_origins)


def test_one_device_shard_map_and_pmap_are_evaluated_through_their_bodies():
    mesh = jax.make_mesh((1,), ("i",))
    body = lambda x: jnp.exp(x) + lax.psum(x, "i")
    sharded = jax.shard_map(body, mesh=mesh, in_specs=PartitionSpec(), out_specs=PartitionSpec())
    mapped = jax.pmap(lambda x: jnp.exp(x) + lax.all_gather(x, "i")[0], axis_name="i")
    x = np.asarray([1.0, -20.0], F32)
    want = _f32(lambda v: mp.exp(v) + v, x)
    np.testing.assert_array_equal(np.asarray(oracles.evaluate(sharded, x).values), want)
    np.testing.assert_array_equal(np.asarray(oracles.evaluate(mapped, x[None]).values), want[None])


def test_a_dropout_test_runs_through_the_plugin_with_the_search_on(pytester, run_jaxstab):
    # The plugin's default run (search on) with a closed-over key and jax.debug.print: the instability is
    # reported at the user's line, and neither the oracle nor the search trips over the key.
    pytester.makepyfile(test_dropout='''
        import jax, jax.numpy as jnp
        import pytest

        KEY = jax.random.key(0)

        @pytest.mark.stabilize(dtype="float32", shapes={"x": (8,)})
        def test_dropout_logsumexp(x):
            keep = jax.random.bernoulli(KEY, 0.9, x.shape)
            jax.debug.print("kept {k}", k=keep.sum())
            return jnp.log(jnp.sum(jnp.where(keep, jnp.exp(x), 0.0)))
    ''')
    result = run_jaxstab("--jaxstab-examples=20", search=True)
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "NaN/Inf born in the function as written" in out and "test_dropout.py:10" in out
    assert "TypeError" not in out


def test_printing_a_key_or_an_integer_prints_nothing_in_the_oracle(capfd):
    def f(x):
        key = jax.random.key(0)
        jax.debug.print("key={k} n={n}", k=key, n=jnp.sum(x > 0))
        return x * 2

    oracles.evaluate(f, np.ones(2, F32))
    assert "key=" not in capfd.readouterr().out
