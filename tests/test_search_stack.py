"""The search reads a ``stack`` reduced over its axis as the sum (max, ...) of its slices (issue 47).

JAX lowers ``jnp.stack`` to a ``stack`` primitive, and library code stacks a few values and reduces over
the new axis (numpyro's Beta log-density through its Dirichlet's). ``_search._stacked`` unrolls the stack; the
term must be the one of the same program written without it, compute the program's values, and every
other use of a stacked array is refused naming its line.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.scipy.special import gammaln

import pytest_jaxstab as jst
from pytest_jaxstab import _compat
from pytest_jaxstab._search._expr import evaluate_jax
from pytest_jaxstab._search._lower import Unsupported, lower, lower_program

HAS_STACK = any(_compat.primitive_name(e) == "stack"
                for _, e in _compat.walk(jax.make_jaxpr(lambda a: jnp.stack([a, a]))(1.0)))
pytestmark = pytest.mark.skipif(not HAS_STACK, reason=f"jax {jax.__version__} lowers jnp.stack without a "
                                "stack primitive (broadcast and concatenate)")


def beta_log_prob(value, c1, c0):  # numpyro 0.19's Beta.log_prob through Dirichlet.log_prob
    concentration = jnp.stack([c1, c0], -1)
    x = jnp.stack([value, 1.0 - value], -1)
    normalize_term = jnp.sum(gammaln(concentration), axis=-1) - gammaln(jnp.sum(concentration, axis=-1))
    return jnp.sum(jnp.log(x) * (concentration - 1.0), axis=-1) - normalize_term


def beta_log_prob_unrolled(value, c1, c0):
    return (jnp.log(value) * (c1 - 1.0) + jnp.log(1.0 - value) * (c0 - 1.0)
            - (gammaln(c1) + gammaln(c0) - gammaln(c1 + c0)))


def _max_of_three(a, b):
    return jnp.max(jnp.stack([a, 2.0 * b, jnp.exp(a - b)], -1) - 1.0, axis=-1)


@pytest.mark.parametrize("shape", [(), (6,)])
def test_a_stack_reduced_over_its_axis_is_the_program_written_without_it(shape):
    one = jnp.ones(shape, jnp.float32)
    read = lower_program if shape else lower
    stacked = read(jax.make_jaxpr(beta_log_prob)(one, one, one))
    unrolled = read(jax.make_jaxpr(beta_log_prob_unrolled)(one, one, one))
    if shape:  # an array program: (term, where each node was written)
        stacked, unrolled = stacked[0], unrolled[0]
    assert stacked == unrolled


@pytest.mark.parametrize("fn", [beta_log_prob, _max_of_three])
def test_the_unrolled_term_computes_the_programs_values(fn):
    rng = np.random.default_rng(3)
    n = fn.__code__.co_argcount
    args = [rng.uniform(0.01, 4.0, 16).astype(np.float32) for _ in range(n)]
    args[0] = np.clip(args[0] / 4.0, 0.01, 0.99).astype(np.float32)
    term, _ = lower_program(jax.make_jaxpr(fn)(*[jnp.ones(16, jnp.float32)] * n))
    got = np.asarray(evaluate_jax(term, [jnp.asarray(a) for a in args], np.float32))
    want = np.asarray(fn(*args))  # op by op, as the term runs: the same roundings (two- and three-way
    assert np.array_equal(got, want)  # sums and maxima of the same slices)


def _returned(a, b):
    return jnp.stack([a, b], -1) * 2.0


def _reduced_elsewhere(a, b):
    return jnp.sum(jnp.stack([a, b], 0), axis=1)


def _beside_an_array(a, b):
    return jnp.sum(jnp.stack([a, b], -1) * jnp.arange(2.0, dtype=jnp.float32), axis=-1)


@pytest.mark.parametrize(("fn", "says"), [
    (_returned, "returns a stacked array"),
    (_reduced_elsewhere, "along other axes than the stacked one"),
    (_beside_an_array, "with an array that is not stacked"),
])
def test_other_uses_of_a_stack_are_refused_naming_the_line(fn, says):
    one = jnp.ones(4, jnp.float32)
    with pytest.raises(Unsupported, match=says) as info:
        lower_program(jax.make_jaxpr(fn)(one, one))
    if fn is not _returned:
        assert f"{__file__}:" in str(info.value)


def test_the_search_takes_a_beta_log_density_written_with_stacks():
    imp = jst.improve(lambda v: beta_log_prob(v, jnp.float32(3.0), jnp.float32(2.0)), shapes=[(8,)],
                      dtype="float32", domain=(0.0, 1.0), max_examples=32, time_limit=20.0)
    assert not imp.status.startswith("not searched"), imp.status
    # judged: the program's own figures on its samples
    assert imp.original is not None and imp.original.mean_bits < 2.0
