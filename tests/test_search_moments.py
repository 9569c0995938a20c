"""A covariance or variance written expanded, ``mean(x*y) - mean(x)*mean(y)``, searched (issue 26).

Where the means are large against the spread, the two terms agree in most of their bits and their
difference keeps few. Shifted by the means (two passes), nothing large cancels. Forms of this file's own,
over arrays whose mean is far from 0; judged against mpmath (exact sums of the float64 inputs) on arrays
drawn here.
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import mpmath
import numpy as np
import pytest

import pytest_jaxstab as jst
from pytest_jaxstab import oracles
from pytest_jaxstab._check._trace import x64_scope

# The slow tier (`make test-slow`, run in full by CI; `make test` leaves it out): docs/architecture.md,
# "Tests and their tiers".
pytestmark = pytest.mark.slow

MEAN_BITS = 2.0  # the fix criterion (Herbie's "accurate") ...
MAX_BITS = 8.0  # ... and its bound on the worst case
SECONDS = 90.0  # per case: the search's 15 s default, the oracle and compiles on a shared 2-core machine


def _mp_cov(x, y):
    with mpmath.workdps(120):
        xs, ys = [mpmath.mpf(float(v)) for v in x], [mpmath.mpf(float(v)) for v in y]
        n = len(xs)
        mx, my = mpmath.fsum(xs) / n, mpmath.fsum(ys) / n
        return float(mpmath.fsum(a * b for a, b in zip(xs, ys)) / n - mx * my)


def _offset(rng, n):  # a large common offset, a small spread: the expanded form cancels
    return 1e6 + rng.uniform(-1.0, 1.0, n)


CASES = {
    "covariance-expanded": (lambda x, y: jnp.mean(x * y) - jnp.mean(x) * jnp.mean(y), 2),
    "variance-expanded-with-a-square": (lambda x: jnp.mean(x ** 2) - jnp.mean(x) ** 2, 1),
    "variance-expanded-by-sums": (
        lambda v: jnp.sum(v * v) / 6.0 - (jnp.sum(v) / 6.0) * (jnp.sum(v) / 6.0), 1),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_improve_shifts_an_expanded_second_moment_by_its_means(case):
    fn, arity = CASES[case]
    domain = [(1e6 - 1.0, 1e6 + 1.0)] * arity
    t0 = time.perf_counter()
    imp = jst.improve(fn, shapes=[(6,)] * arity, dtype="float64", domain=domain, seed=0)
    assert time.perf_counter() - t0 < SECONDS, imp.report()
    assert imp.improved, imp.report()
    assert imp.best is not None and imp.recheck is not None
    assert imp.recheck[2] < imp.recheck[0], imp.report()  # the search's draws include ill-conditioned ones
    rng = np.random.default_rng(26)
    mine, theirs = [], []
    for _ in range(24):
        args = [_offset(rng, 6) for _ in range(arity)]
        exact = _mp_cov(args[0], args[-1])
        with x64_scope(np.dtype(np.float64)):
            got = float(jax.jit(imp.fn)(*map(jnp.asarray, args)))
            was = float(jax.jit(fn)(*map(jnp.asarray, args)))
        mine.append(oracles.error_bits(np.array([got]), np.array([exact]))[0])
        theirs.append(oracles.error_bits(np.array([was]), np.array([exact]))[0])
    bits, orig = np.array(mine), np.array(theirs)
    assert bits.mean() <= MEAN_BITS and bits.max() <= MAX_BITS, (bits.mean(), bits.max(), imp.report())
    assert bits.mean() <= orig.mean() and bits.max() <= orig.max()
