"""``reduce_into_scan``'s gradient is the hand-fused gradient (issue 24).

The rule writes the loss into the scan as a person would by hand: the per-step terms summed over the
other axes and added to an accumulator carry. Then ``jax.grad`` of the rewritten loss is the same
program as ``jax.grad`` of the hand-fused one, so it costs the same (benchmarks/bench_scan.py) and
gives the same numbers bit for bit. Each case here pairs a loss as users write it with its
hand-fused form written independently, and checks the gradient's jaxpr and values against it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import pytest_jaxstab as jst

# The slow tier (`make test-slow`, run in full by CI; `make test` leaves it out): docs/architecture.md,
# "Tests and their tiers".
pytestmark = pytest.mark.slow

H = 8


def _cell(w: jax.Array, c: jax.Array, x: jax.Array) -> jax.Array:
    return jnp.tanh(c @ w + x)


def mse(w, c0, xs, t):
    def body(c, x):
        c = _cell(w, c, x)
        return c, c

    _, ys = jax.lax.scan(body, c0, xs)
    return jnp.mean((t - ys) ** 2)


def mse_by_hand(w, c0, xs, t):
    def body(carry, xt):
        c, acc = carry
        x, tt = xt
        c = _cell(w, c, x)
        return (c, acc + jnp.sum((tt - c) ** 2)), None

    (_, total), _ = jax.lax.scan(body, (c0, jnp.zeros((), c0.dtype)), (xs, t))
    return total / t.size


def weighted_abs(w, c0, xs, t):
    # a different loss (abs, a loop-invariant weight), a reverse scan
    def body(c, x):
        c = _cell(w, c, x)
        return c, c

    _, ys = jax.lax.scan(body, c0, xs, reverse=True)
    return jnp.sum(jnp.abs(ys - t) * 0.25)


def weighted_abs_by_hand(w, c0, xs, t):
    def body(carry, xt):
        c, acc = carry
        x, tt = xt
        c = _cell(w, c, x)
        return (c, acc + jnp.sum(jnp.abs(c - tt) * 0.25)), None

    (_, total), _ = jax.lax.scan(body, (c0, jnp.zeros((), c0.dtype)), (xs, t), reverse=True)
    return total


CASES: dict[str, tuple[Callable[..., Any], Callable[..., Any]]] = {
    "mse": (mse, mse_by_hand),
    "weighted-abs-reverse": (weighted_abs, weighted_abs_by_hand),
}


def _args(length: int, batch: int, dtype: Any) -> tuple[jax.Array, ...]:
    rng = np.random.default_rng(length * 1000 + batch)
    w = rng.normal(size=(H, H)) / np.sqrt(H)
    c0 = rng.normal(size=(batch, H))
    xs = rng.normal(size=(length, batch, H))
    t = rng.normal(size=(length, batch, H))
    return tuple(jnp.asarray(a, dtype) for a in (w, c0, xs, t))


def _body_eqns(closed: Any) -> list[str]:
    """The gradient program as primitive names, nested jaxprs flattened (source lines ignored)."""
    return [line.split("=", 1)[1].split("[")[0].split()[0]
            for line in str(closed).splitlines() if "=" in line and ":" in line.split("=", 1)[0]]


@pytest.mark.parametrize("name", list(CASES))
def test_the_rewritten_gradient_is_the_hand_fused_program(name):
    loss, by_hand = CASES[name]
    args = _args(16, 4, jnp.float32)
    rewritten = jst.stabilize(loss, rules=jst.rewrites.PERFORMANCE)
    assert jst.explain(loss, *args, rules=jst.rewrites.PERFORMANCE).rules == ["reduce_into_scan"]
    got = _body_eqns(jax.make_jaxpr(jax.grad(rewritten))(*args))
    want = _body_eqns(jax.make_jaxpr(jax.grad(by_hand))(*args))
    assert got == want
    assert len(want) > 20  # a real program was compared (forward and backward scans)


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
@pytest.mark.parametrize(("length", "batch"), [(1, 1), (7, 3), (64, 5)])
def test_the_rewritten_gradient_equals_the_hand_fused_one(name, dtype, length, batch):
    loss, by_hand = CASES[name]
    with jax.enable_x64(dtype == jnp.float64):
        args = _args(length, batch, dtype)
        rewritten = jst.stabilize(loss, rules=jst.rewrites.PERFORMANCE)
        for k in range(4):  # every argument: weights, initial state, inputs, targets
            got = jax.jit(jax.grad(rewritten, argnums=k))(*args)
            want = jax.jit(jax.grad(by_hand, argnums=k))(*args)
            assert got.dtype == dtype
            # The same program (test above), so the same bits: 0 ULPs apart.
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
