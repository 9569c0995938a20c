"""The search judges its candidates with sub-term values shared between them (``Samples.eager_errors``).

Thousands of candidates share most of their sub-terms, so each is computed once per sample set. The
shared values must change nothing: every candidate's errors are those of its own function run op by op
(``Samples.function``, ``vmap`` over the examples for an array program), to the bit, whatever was judged
before it, in scalar and array programs, with array constants, and after the values are forgotten.
"""

from __future__ import annotations

import itertools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pytest_jaxstab._check._trace import x64_scope
from pytest_jaxstab._search import _judge
from pytest_jaxstab._search._expr import evaluate_jax, replace, subterms
from pytest_jaxstab._search._judge import Samples
from pytest_jaxstab._search._lower import lower, lower_program

WEIGHTS = np.array([0.5, 2.0, -1.0, 3.0, 0.25, 1.5, -2.0, 4.0], np.float32)


def _scalar_fns() -> list[Any]:
    return [lambda x, y: jnp.log(1 + jnp.exp(x - y)) - jnp.sqrt(x * x + 1.0),
            lambda x, y: (1 - jnp.cos(x)) / (x * x) + jnp.expm1(y) * jnp.exp(x - y),
            lambda x, y: jnp.where(x > y, jnp.log1p(x * y), jnp.tanh(x) - jnp.tanh(y))]


def _array_fns() -> list[Any]:
    return [lambda x: jnp.mean((1 - jnp.cos(x)) / (x * x)),
            lambda x: jnp.log(jnp.sum(jnp.exp(x))) - jnp.max(x) * 0.5,
            # closes over an array constant
            lambda x: jnp.sum(WEIGHTS.astype(x.dtype) * x) / jnp.sqrt(jnp.sum(x * x)),
            lambda x: x - jnp.mean(x)]


def _candidates(terms: list[Any]) -> list[Any]:
    """Every sub-term of each program, and each program with one sub-term swapped for another's: terms
    sharing most of their nodes, as the search's candidates do."""
    out: list[Any] = []
    for term in terms:
        subs = [t for t in dict.fromkeys(subterms(term)) if t[0] not in ("var", "const")]
        out += subs
        out += [replace(term, a, b) for a, b in itertools.pairwise(subs[1:])]
    return list(dict.fromkeys(out))


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and np.array_equal(a, b, equal_nan=True)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_scalar_candidates_judged_with_shared_values_are_judged_as_alone(dtype):
    rng = np.random.default_rng(0)
    dt = np.dtype(dtype)
    with x64_scope(dt):
        terms = [lower(jax.make_jaxpr(f)(dt.type(1), dt.type(1))) for f in _scalar_fns()]
        args = [(rng.standard_normal(64) * 10.0 ** rng.integers(-6, 3, 64)).astype(dt) for _ in range(2)]
        shared = Samples.build(terms[0], dt, args)
        cands = _candidates(terms)
        order = [cands[i] for i in rng.permutation(len(cands))]
        for term in order:  # each candidate's own values, computed alone (no value shared)
            own = shared.errors(evaluate_jax(term, [jnp.asarray(a) for a in shared.args], dt))
            assert _same(shared.eager_errors(term), own), term
        assert len(shared._values) > 0


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_array_candidates_judged_with_shared_values_are_their_vmapped_functions(dtype):
    rng = np.random.default_rng(1)
    dt = np.dtype(dtype)
    with x64_scope(dt):
        terms = [lower_program(jax.make_jaxpr(f)(jnp.ones(8, dt)))[0] for f in _array_fns()]
        args = [(rng.standard_normal((12, 8)) * 10.0 ** rng.integers(-4, 3, (12, 8))).astype(dt)]
        for original in terms:
            one = jax.eval_shape(lambda x, t=original: evaluate_jax(t, [x], dt), jnp.ones(8, dt))
            out_shape = tuple(one.shape)
            shared = Samples.build(original, dt, args, out_shape)
            compared = 0
            for term in _candidates([original]):
                try:  # a swap of sub-terms of other shapes is no program (the search never makes one)
                    want = shared.errors(shared.function(term)(*[jnp.asarray(a) for a in shared.args]))
                except (TypeError, ValueError):
                    continue
                assert _same(shared.eager_errors(term), want), term
                compared += 1
            assert compared >= 3, original  # the program itself and sub-terms of its output's shape


def test_values_forgotten_past_the_budget_give_the_same_errors(monkeypatch):
    dt = np.dtype(np.float64)
    rng = np.random.default_rng(2)
    with x64_scope(dt):
        terms = [lower(jax.make_jaxpr(f)(1.0, 1.0)) for f in _scalar_fns()]
        args = [rng.standard_normal(32) for _ in range(2)]
        cands = _candidates(terms)
        kept = Samples.build(terms[0], dt, args)
        first = [kept.eager_errors(t) for t in cands]
        monkeypatch.setattr(_judge, "_VALUES_BUDGET", 1024)  # a few values, then everything forgotten
        small = Samples.build(terms[0], dt, args)
        again = [small.eager_errors(t) for t in cands]
        assert len(small._values) < len(kept._values)  # forgotten on the way
        assert all(_same(a, b) for a, b in zip(first, again))
