"""Static selections in the search's term language (issue 26, item 1: array programs).

A program that picks elements with ``x[0]``, ``x[..., k]``, ``x[1:3]``, ``x[::2]``, ``jnp.take`` at a
constant index or ``lax.dynamic_slice`` at constant starts used to be "not searched" (the primitive
'slice' is not an elementwise operation the search knows). It is now lowered to a selection operator
(``_expr.selection_name``) that moves across elementwise operations in the e-graph, judged on whole
arrays. The lowering is checked bit for bit against the function itself (JAX runs both); the searched
programs against mpmath at high precision on arrays drawn here, with forms of this file's own.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import mpmath
import numpy as np
import pytest

import pytest_jaxstab as jst
from pytest_jaxstab import oracles
from pytest_jaxstab._check._trace import trace_case, x64_scope
from pytest_jaxstab._search._expr import evaluate_jax, is_selection, subterms
from pytest_jaxstab._search._lower import Unsupported, lower_program
from pytest_jaxstab._search._rules import parse, rules_for
from pytest_jaxstab._search._selection import selection_rules

# The slow tier (`make test-slow`, run in full by CI; `make test` leaves it out): docs/architecture.md,
# "Tests and their tiers".
pytestmark = pytest.mark.slow

MEAN_BITS = 2.0  # the fix criterion (Herbie's "accurate") ...
MAX_BITS = 8.0  # ... and its bound on the worst case (an overflow to inf is far above it)
SECONDS = 90.0  # per case: the search's 15 s default, the oracle and compiles on a shared 2-core machine

SPELLINGS: dict[str, tuple[Callable[..., Any], tuple[int, ...]]] = {
    "first-row": (lambda s: jnp.exp(s[0]), (4, 5)),
    "last-row": (lambda s: s[-1] * 2.0, (4, 5)),
    "column-by-ellipsis": (lambda s: jnp.log1p(s[..., 2] * s[..., 2]), (4, 5)),
    "one-element": (lambda s: jnp.sqrt(s[1, 2] * s[1, 2] + 1.0), (4, 5)),
    "range": (lambda s: jnp.sum(s[1:3]), (6,)),
    "strided": (lambda s: s[::2] - s[1::2], (6,)),
    "take-constant": (lambda s: jnp.take(s, 3) + 1.0, (6,)),
    "take-negative": (lambda s: jnp.take(s, -2), (6,)),
    "take-along-axis-1": (lambda s: jnp.take(s, 2, axis=1), (4, 5)),
    "dynamic-slice-constant": (lambda s: jax.lax.dynamic_slice(s, (1, 2), (2, 2)) / 3.0, (4, 5)),
    "dynamic-slice-clamped": (lambda s: jax.lax.dynamic_slice(s, (5,), (2,)), (6,)),
}


# compat: XLA's rounding of a jitted division moved with JAX 0.12.1 while the fast tier saw nothing (2 s)
@pytest.mark.compat
@pytest.mark.parametrize("case", sorted(SPELLINGS))
def test_a_selection_lowers_to_a_term_computing_the_same(case):
    fn, shape = SPELLINGS[case]
    closed = trace_case(fn, np.dtype(np.float32), [shape]).closed
    term, _ = lower_program(closed)
    assert any(is_selection(t[0]) for t in subterms(term)), term
    x = np.random.default_rng(7).normal(size=shape).astype(np.float32)
    want = np.asarray(jax.jit(fn)(x))
    got = np.asarray(evaluate_jax(term, [jnp.asarray(x)], np.float32))
    # One ulp: the term and the traced function compile to different XLA programs, whose kernels may
    # round differently (JAX 0.12.1's CPU compiler turns a division by a constant into a product by its
    # reciprocal; 0.10.2's eager and jitted exp differ); a wrong selection reads another element, far off.
    np.testing.assert_array_max_ulp(got.reshape(want.shape), want, maxulp=1)


def test_a_selection_at_an_index_read_from_the_inputs_is_named():
    # The index is an input converted to an integer: named (the conversion), never read as a constant.
    fn = lambda s: jax.lax.dynamic_slice(s, (s[0].astype(jnp.int32),), (1,))
    with pytest.raises(Unsupported, match="conversion to int32"):
        lower_program(trace_case(fn, np.dtype(np.float32), [(5,)]).closed)


def test_the_selection_rules_move_across_elementwise_operations_only_where_a_selection_is():
    assert selection_rules(parse("(log (add a 1))")) == []
    term = parse("(log (div (exp (sel_0x1x1 a)) (sum_all (exp a))))")
    names = {r.name for r in rules_for(term)}
    assert {"sel_0x1x1-exp-out", "sel_0x1x1-exp-in", "sel_0x1x1-log-softmax-sum_all"} <= names


def _lu(rng: np.random.Generator, lo: float, hi: float, shape: tuple[int, ...]) -> np.ndarray:
    return np.exp(rng.uniform(np.log(lo), np.log(hi), shape))


def _mp(x: Any) -> Any:
    return mpmath.mpf(float(x))


# Each: function, input shapes, dtype, domain, fresh inputs drawn here, exact value from mpmath.
CASES: dict[str, tuple[Any, list[tuple[int, ...]], str, Any, Any, Any]] = {
    "hypot-of-two-picked-elements": (
        lambda v: jnp.sqrt(v[0] * v[0] + v[2] * v[2]), [(3,)], "float64", None,
        lambda rng: [_lu(rng, 1e-300, 1e300, (3,)) * rng.choice([-1.0, 1.0], 3)],
        lambda v: mpmath.sqrt(_mp(v[0]) ** 2 + _mp(v[2]) ** 2)),
    "cube-root-difference-of-a-column": (
        lambda x: jnp.cbrt(x[..., 1] + 1.0) - jnp.cbrt(x[..., 1]), [(2, 3)], "float64", (1.0, 1e30),
        lambda rng: [_lu(rng, 1.0, 1e30, (2, 3))],
        lambda x: [mpmath.cbrt(_mp(r[1]) + 1) - mpmath.cbrt(_mp(r[1])) for r in x]),
    "exp-minus-one-of-a-dynamic-slice": (
        lambda s: jnp.exp(jax.lax.dynamic_slice(s, (2,), (1,))) - 1.0, [(4,)], "float32", (-1e-3, 1e-3),
        lambda rng: [rng.uniform(-1e-3, 1e-3, 4)],
        lambda s: [mpmath.expm1(_mp(np.float32(s[2])))]),
    "square-root-conjugate-of-a-taken-element": (
        lambda x: jnp.sqrt(jnp.take(x, 1) + 1.0) - jnp.sqrt(jnp.take(x, 1)), [(3,)], "float64", (0.0, 1e30),
        lambda rng: [_lu(rng, 1e-3, 1e30, (3,))],
        lambda x: mpmath.sqrt(_mp(x[1]) + 1) - mpmath.sqrt(_mp(x[1]))),
    "label-log-probability": (
        lambda z: jnp.log(jax.nn.softmax(z)[2]), [(5,)], "float32", None,
        lambda rng: [rng.normal(0.0, 40.0, 5)],
        lambda z: _mp(np.float32(z[2])) - mpmath.log(mpmath.fsum(mpmath.exp(_mp(np.float32(v))) for v in z))),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_improve_searches_programs_with_selections_and_fixes_them(case):
    fn, shapes, dtype, domain, draw, exact_fn = CASES[case]
    t0 = time.perf_counter()
    imp = jst.improve(fn, shapes=shapes, dtype=dtype, domain=domain, seed=0)
    assert time.perf_counter() - t0 < SECONDS, imp.report()
    assert imp.improved, imp.report()
    assert imp.best is not None and imp.recheck is not None
    assert imp.best.mean_bits <= MEAN_BITS and imp.best.max_bits <= MAX_BITS, imp.report()
    assert imp.recheck[2] <= MEAN_BITS and imp.recheck[3] <= MAX_BITS, imp.report()
    rng = np.random.default_rng(26)
    mine, theirs = [], []
    for _ in range(24):
        args = [a.astype(dtype) for a in draw(rng)]
        with mpmath.workdps(80):
            exact = np.asarray(exact_fn(*args), np.float64).astype(dtype).reshape(-1)
        with x64_scope(np.dtype(dtype)):
            got = np.asarray(jax.jit(imp.fn)(*args)).reshape(-1)
            was = np.asarray(jax.jit(fn)(*args)).reshape(-1)
        mine.append(oracles.error_bits(got, exact))
        theirs.append(oracles.error_bits(was.astype(dtype), exact))
    bits, orig = np.concatenate(mine), np.concatenate(theirs)
    assert bits.mean() <= MEAN_BITS and bits.max() <= MAX_BITS, (bits.mean(), bits.max(), imp.report())
    assert bits.mean() <= orig.mean() and bits.max() <= orig.max()
