"""The oracle's fast path (issue 46): ``oracles.evaluate`` with and without it, and a ``jst.check``.

``evaluate`` on float32 programs of the issue's shapes, ``fast=False`` (every element through the Arb
escalation) against the default (float64 intervals first), best of 5 and of 2, with the share of
output elements left to Arb and whether the two results are the same bits: a layer norm (32, 512) in
its two-pass and one-pass forms, a log-sum-exp and a softmax cross-entropy with integer labels over
(32, 1000); inputs ``3 N(0, 1)``, then ``1e4 + N(0, 1)`` (where the one-pass variance cancels). Then
``jst.check`` of three of them at (8, 64), seed 0, with the oracle's and the conditioning's seconds (the
conditioning asks for float64 results, which the fast path leaves to Arb)::

    PYTHONPATH=. python benchmarks/bench_oracle_fast.py [evaluate|check]
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from pytest_jaxstab import oracles
from pytest_jaxstab._check import _evaluate as _check_evaluate
from pytest_jaxstab._check._case import StageTimes, check_case
from pytest_jaxstab.oracles.interpreter import _evaluate


def layer_norm_two_pass(x: jax.Array) -> jax.Array:
    m = jnp.mean(x, -1, keepdims=True)
    return (x - m) * lax.rsqrt(jnp.mean((x - m) ** 2, -1, keepdims=True) + 1e-5)


def layer_norm_one_pass(x: jax.Array) -> jax.Array:
    m = jnp.mean(x, -1, keepdims=True)
    return (x - m) * lax.rsqrt(jnp.mean(x * x, -1, keepdims=True) - m * m + 1e-5)


def log_sum_exp(x: jax.Array) -> jax.Array:
    return jax.nn.logsumexp(x, -1)


def cross_entropy(x: jax.Array, y: jax.Array) -> jax.Array:
    return -jnp.take_along_axis(jax.nn.log_softmax(x, -1), y[:, None], -1)[:, 0]


def best(fn: Callable[[], Any], runs: int) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(runs):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def bench_evaluate() -> None:
    rng = np.random.default_rng(0)
    for inputs in ("3 N(0,1)", "1e4 + N(0,1)"):
        for fn, shape in ((layer_norm_two_pass, (32, 512)), (layer_norm_one_pass, (32, 512)),
                          (log_sum_exp, (32, 1000)), (cross_entropy, (32, 1000))):
            z = rng.standard_normal(shape)
            x = (3 * z if inputs == "3 N(0,1)" else 1e4 + z).astype(np.float32)
            args: tuple[Any, ...] = (x,)
            if fn is cross_entropy:
                args = (x, rng.integers(0, shape[1], shape[0]).astype(np.int32))
            oracles.evaluate(fn, *args)  # traces, caches
            after, a = best(lambda: oracles.evaluate(fn, *args), 5)  # noqa: B023
            before, b = best(lambda: oracles.evaluate(fn, *args, fast=False), 2)  # noqa: B023
            same = all(np.array_equal(u, v) for u, v in zip(jax.tree_util.tree_leaves(a.values),
                                                            jax.tree_util.tree_leaves(b.values)))
            print(f"{fn.__name__:20s} {inputs:13s} before {before:6.3f} s  after {after:6.3f} s  "
                  f"x{before / after:5.1f}  escalated {a.escalated}/{a.decided_fast + a.escalated} "
                  f"({100 * a.escalated_share:.1f}%)  same bits: {same}", flush=True)


def bench_check() -> None:
    counts: list[tuple[int, int]] = []
    real = _evaluate.evaluate
    use_fast = [True]

    def counted(*args: Any, **kwargs: Any) -> Any:
        result = real(*args, fast=use_fast[0], **kwargs)
        counts.append((result.decided_fast, result.escalated))
        return result

    _check_evaluate.evaluate = counted  # type: ignore[assignment]
    check_case(layer_norm_two_pass, shapes=[(2, 4)], dtype="float32", seed=1, max_examples=5)  # warm-up
    for fast in (False, True):
        use_fast[0] = fast
        for fn in (layer_norm_two_pass, layer_norm_one_pass, log_sum_exp):
            counts.clear()
            profile = StageTimes()
            t = time.perf_counter()
            result = check_case(fn, shapes=[(8, 64)], dtype="float32", seed=0, profile=profile)
            seconds = time.perf_counter() - t
            done, left = sum(c[0] for c in counts), sum(c[1] for c in counts)
            oracle, conditioning = profile.get("oracle", 0.0), profile.get("conditioning", 0.0)
            print(f"check {fn.__name__:20s} fast={fast!s:5s} {seconds:6.2f} s  oracle {oracle:5.2f} s  "
                  f"conditioning {conditioning:5.2f} s  {result.outcome}  escalated {left}/{done + left} "
                  "output elements", flush=True)


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "evaluate"
    bench_evaluate() if what == "evaluate" else bench_check()
