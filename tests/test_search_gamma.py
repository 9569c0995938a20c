"""Sums of ``lgamma`` terms paired into ``lgammadiff`` by the difference of their arguments (issue 26).

``lgamma(n + 1) - lgamma(k + 1) - lgamma(n - k + 1)`` subtracts two values near ``n log n`` that differ by
about ``k log n``: for ``n = 1e15`` the original keeps almost no bits. The pairing must find the pair
(``n + 1``, ``n - k + 1``) through the reordering and get their difference as ``k`` symbolically. Cases:
a log binomial coefficient, a negative-binomial coefficient, in this file's own spellings; the returned
function judged against mpmath's ``loggamma`` at 60 digits on points drawn here.
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import mpmath
import numpy as np
import pytest
from jax.scipy.special import gammaln

import pytest_jaxstab as jst
from pytest_jaxstab import oracles
from pytest_jaxstab._check._trace import x64_scope
from pytest_jaxstab._search._gamma import lgamma_pairings
from pytest_jaxstab._search._rules import parse

# The slow tier (`make test-slow`, run in full by CI; `make test` leaves it out): docs/architecture.md,
# "Tests and their tiers".
pytestmark = pytest.mark.slow

MEAN_BITS = 2.0  # the fix criterion (Herbie's "accurate") ...
MAX_BITS = 8.0  # ... and its bound on the worst case
SECONDS = 90.0  # per case: the search's 15 s default, the oracle and compiles on a shared 2-core machine

N, K, R = ("var", 0), ("var", 1), ("var", 0)


def test_the_pair_is_found_through_the_order_and_its_difference_is_symbolic():
    # lgamma(n + 1) - lgamma(k + 1) - lgamma(n - k + 1): the pair is the first and the last term.
    term = parse("(sub (sub (lgamma (add n 1)) (lgamma (add k 1))) (lgamma (add (sub n k) 1)))")
    term = _vars(term, {"n": N, "k": K})
    (got,) = lgamma_pairings(term)
    assert ("lgammadiff", ("add", ("sub", N, K), ("const", 1.0)), K) in _all(got)  # difference: k itself
    assert ("lgamma", ("add", K, ("const", 1.0))) in _all(got)  # the unpaired term kept
    assert not any(t == ("lgamma", ("add", N, ("const", 1.0))) for t in _all(got))


def test_terms_without_a_common_atom_are_not_paired():
    term = _vars(parse("(sub (lgamma (add n 1)) (lgamma (add k 1)))"), {"n": N, "k": K})
    assert lgamma_pairings(term) == []  # n - k is no simpler than n and k


def test_a_scaled_argument_cancels_by_its_coefficient():
    # lgamma(2n + 3) - lgamma(2n + 1): the difference is the constant 2.
    term = _vars(parse("(sub (lgamma (add (mul 2 n) 3)) (lgamma (add (mul n 2) 1)))"), {"n": N})
    (got,) = lgamma_pairings(term)
    assert got[0] == "lgammadiff" and got[2] == ("const", 2.0)


def _vars(term, names):
    if term[0] == "pvar":
        return names[term[1]]
    if term[0] == "const":
        return term
    return (term[0], *(_vars(c, names) for c in term[1:]))


def _all(term):
    out = [term]
    if term[0] not in ("var", "const"):
        for c in term[1:]:
            out += _all(c)
    return out


def _lg(x):
    return mpmath.loggamma(x)  # x an mpf: n + 1, k + r formed exactly at 60 digits


CASES = {
    "log-binomial-coefficient": (
        lambda n, k: gammaln(n + 1.0) - gammaln(k + 1.0) - gammaln(n - k + 1.0), [(1e4, 1e15), (1.0, 1e3)],
        lambda rng: (np.exp(rng.uniform(np.log(1e4), np.log(1e15), 48)), rng.integers(1, 1000, 48) * 1.0),
        lambda n, k: _lg(n + 1) - _lg(k + 1) - _lg(n - k + 1)),
    "negative-binomial-coefficient": (
        lambda r, k: gammaln(k + r) - gammaln(r) - gammaln(1.0 + k), [(1e6, 1e14), (1.0, 500.0)],
        lambda rng: (np.exp(rng.uniform(np.log(1e6), np.log(1e14), 48)), rng.uniform(1.0, 500.0, 48)),
        lambda r, k: _lg(k + r) - _lg(r) - _lg(1 + k)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_improve_fixes_sums_of_lgamma_with_large_arguments(case):
    fn, domain, draw, exact_fn = CASES[case]
    t0 = time.perf_counter()
    imp = jst.improve(fn, shapes=[(), ()], dtype="float64", domain=domain, seed=0)
    assert time.perf_counter() - t0 < SECONDS, imp.report()
    assert imp.improved, imp.report()
    assert imp.best is not None and imp.recheck is not None
    assert imp.best.mean_bits <= MEAN_BITS and imp.best.max_bits <= MAX_BITS, imp.report()
    assert imp.recheck[2] <= MEAN_BITS and imp.recheck[3] <= MAX_BITS, imp.report()
    a, b = draw(np.random.default_rng(26))
    with mpmath.workdps(60):  # a, b exact in float64; a + b etc. exact in mpmath
        exact = np.array([float(exact_fn(mpmath.mpf(float(x)), mpmath.mpf(float(y)))) for x, y in zip(a, b)])
    with x64_scope(np.dtype(np.float64)):
        got = np.asarray(jax.jit(imp.fn)(jnp.asarray(a), jnp.asarray(b)))
        was = np.asarray(jax.jit(fn)(jnp.asarray(a), jnp.asarray(b)))
    bits, orig = oracles.error_bits(got, exact), oracles.error_bits(was, exact)
    assert bits.mean() <= MEAN_BITS and bits.max() <= MAX_BITS, (bits.mean(), bits.max(), imp.report())
    assert bits.mean() <= orig.mean() and bits.max() <= orig.max()
