"""Benchmark of the ``reduce_into_scan`` rewrite (issue 8): a loss over a scan's stacked outputs.

Run: ``PYTHONPATH=. python benchmarks/bench_scan.py`` (about a minute on 2 CPU cores).

The model is an RNN cell ``c <- tanh(c @ W + x)`` scanned over ``length`` steps, whose stacked
states ``ys`` (length x batch x 64) go into a mean squared error. Three versions, each jitted:

- original: ``mean((targets - scan(...)[1]) ** 2)`` as users write it;
- rewritten: the same function through ``jst.stabilize(..., rules=jst.rewrites.PERFORMANCE)``;
- hand-fused: the loss summed inside the scan body by hand, into an accumulator carry.

For each, the median of interleaved runs of the forward loss and of ``jax.grad`` (with respect to
``W``), and the compiled temporary memory (``memory_analysis().temp_size_in_bytes``) of both. Goal
(issue 24): the rewritten gradient within 5% of the hand-fused one at every size. The rewritten
function's gradient compiles to the same HLO as the hand-fused one's (tests/test_scan_fusion_grad.py
checks the jaxprs are equal), so the ratio measures the machine's noise: medians of interleaved
runs, not the best run of each, which on a shared machine rewards whichever version was lucky once.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import pytest_jaxstab as jst

HIDDEN = 64
# (length, batch); first: headline. 8192 x 64 keeps xs and targets at 134 MB each.
SIZES = [(512, 256), (128, 256), (2048, 256), (512, 64), (512, 1024), (8192, 64)]
GRAD_GOAL = 1.05  # rewritten / hand-fused gradient time


def _cell(w: jax.Array, c: jax.Array, x: jax.Array) -> jax.Array:
    return jnp.tanh(c @ w + x)


def original(w: jax.Array, c0: jax.Array, xs: jax.Array, targets: jax.Array) -> jax.Array:
    """The loss as users write it: stacked states, then the reduction."""
    def body(c: jax.Array, x: jax.Array) -> tuple[jax.Array, jax.Array]:
        c = _cell(w, c, x)
        return c, c

    _, ys = jax.lax.scan(body, c0, xs)
    return jnp.mean((targets - ys) ** 2)


def hand_fused(w: jax.Array, c0: jax.Array, xs: jax.Array, targets: jax.Array) -> jax.Array:
    """The loss summed per step inside the scan, by hand."""
    def body(carry: tuple[jax.Array, jax.Array], xt: tuple[jax.Array, jax.Array]) -> Any:
        c, acc = carry
        x, t = xt
        c = _cell(w, c, x)
        return (c, acc + jnp.sum((t - c) ** 2)), None

    (_, total), _ = jax.lax.scan(body, (c0, jnp.zeros((), c0.dtype)), (xs, targets))
    return total / targets.size


def _median_times(fns: dict[str, Callable[..., Any]], args: tuple[Any, ...], repeats: int,
                  budget_s: float) -> dict[str, float]:
    """Median time of each function, measured in interleaved rounds (at least ``repeats``, more while
    under ``budget_s``) so that a load change on a shared machine hits every version alike."""
    for fn in fns.values():
        jax.block_until_ready(fn(*args))  # compile and warm up
    times: dict[str, list[float]] = {name: [] for name in fns}
    start, rounds = time.perf_counter(), 0
    names = list(fns)
    while rounds < repeats or (time.perf_counter() - start < budget_s and rounds < 50):
        # each round starts with another version: none always runs right after the same one
        for name in names[rounds % len(names):] + names[:rounds % len(names)]:
            fn = fns[name]
            t0 = time.perf_counter()
            jax.block_until_ready(fn(*args))
            times[name].append(time.perf_counter() - t0)
        rounds += 1
    return {name: statistics.median(ts) for name, ts in times.items()}


def _temp_bytes(fn: Callable[..., Any], args: tuple[Any, ...]) -> int:
    analysis = jax.jit(fn).lower(*args).compile().memory_analysis()
    return int(analysis.temp_size_in_bytes) if analysis is not None else -1


def bench(length: int, batch: int, repeats: int, budget_s: float) -> dict[str, float]:
    """Times and temp memory of the three versions for one size; returns the figures by name."""
    rng = np.random.default_rng(0)
    w = jnp.asarray(rng.normal(size=(HIDDEN, HIDDEN)) / np.sqrt(HIDDEN), jnp.float32)
    c0 = jnp.asarray(rng.normal(size=(batch, HIDDEN)), jnp.float32)
    xs = jnp.asarray(rng.normal(size=(length, batch, HIDDEN)), jnp.float32)
    targets = jnp.asarray(rng.normal(size=(length, batch, HIDDEN)), jnp.float32)
    args = (w, c0, xs, targets)
    rewritten = jst.stabilize(original, rules=jst.rewrites.PERFORMANCE)
    fns = {"orig": original, "rewr": rewritten, "hand": hand_fused}
    out: dict[str, float] = {}
    values = {name: float(jax.jit(fn)(*args)) for name, fn in fns.items()}
    fwd = _median_times({k: jax.jit(f) for k, f in fns.items()}, args, repeats, budget_s)
    grad = _median_times({k: jax.jit(jax.grad(f)) for k, f in fns.items()}, args, repeats, budget_s)
    for name, fn in fns.items():
        out[f"{name}_fwd"], out[f"{name}_grad"] = fwd[name], grad[name]
        out[f"{name}_temp"] = _temp_bytes(fn, args)
        out[f"{name}_gtemp"] = _temp_bytes(jax.grad(fn), args)
    out["rel_diff"] = abs(values["rewr"] - values["orig"]) / abs(values["orig"])
    return out


def main() -> None:
    """Print the table: headline size first, then the others (trend with length and batch)."""
    parser = argparse.ArgumentParser(description=(__doc__ or "bench_scan").splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15, help="timed runs per measurement (median kept)")
    parser.add_argument("--budget", type=float, default=3.0,
                        help="seconds of timed rounds per table cell group, beyond --repeats")
    parser.add_argument("--quick", action="store_true", help="the headline size only")
    opts = parser.parse_args()
    print(f"jax {jax.__version__}, backend {jax.default_backend()}, {jax.device_count()} device(s); "
          f"RNN cell tanh(c @ W + x), hidden {HIDDEN}, float32; "
          f"times: median of >= {opts.repeats} interleaved runs, ms")
    w = jnp.zeros((HIDDEN, HIDDEN), jnp.float32)
    example = (w, jnp.zeros((4, HIDDEN)), jnp.zeros((8, 4, HIDDEN)), jnp.zeros((8, 4, HIDDEN)))
    print(jst.explain(original, *example, rules=jst.rewrites.PERFORMANCE))
    head = (f"{'length':>6} {'batch':>5} | {'orig':>7} {'rewr':>7} {'hand':>7} {'speedup':>7} "
            f"{'rewr/hand':>9} | {'grad orig':>9} {'rewr':>7} {'hand':>7} {'speedup':>7} "
            f"{'rewr/hand':>9} {'goal':>6} | {'temp o/r':>8} {'grad':>5} | {'rel diff':>8}")
    print(head)
    print("-" * len(head))
    for length, batch in SIZES[:1] if opts.quick else SIZES:
        r = bench(length, batch, opts.repeats, opts.budget)
        ms = {k: v * 1e3 for k, v in r.items() if k.endswith(("_fwd", "_grad"))}
        ratio = r["orig_temp"] / max(r["rewr_temp"], 1)
        gratio = r["orig_gtemp"] / max(r["rewr_gtemp"], 1)
        print(f"{length:>6} {batch:>5} | {ms['orig_fwd']:7.1f} {ms['rewr_fwd']:7.1f} {ms['hand_fwd']:7.1f} "
              f"{r['orig_fwd'] / r['rewr_fwd']:6.2f}x {r['rewr_fwd'] / r['hand_fwd']:9.3f} | "
              f"{ms['orig_grad']:9.1f} {ms['rewr_grad']:7.1f} {ms['hand_grad']:7.1f} "
              f"{r['orig_grad'] / r['rewr_grad']:6.2f}x {r['rewr_grad'] / r['hand_grad']:9.3f} "
              f"{'ok' if r['rewr_grad'] / r['hand_grad'] <= GRAD_GOAL else 'MISSED':>6} | "
              f"{ratio:7.0f}x {gratio:4.2f}x | {r['rel_diff']:8.1e}", flush=True)
    print(f"speedup = original / rewritten; rewr/hand = rewritten / hand-fused time (1.0 = as fast; goal for "
          f"the gradient <= {GRAD_GOAL}); "
          "temp o/r = compiled temp memory original / rewritten, forward and grad (the backward pass "
          "keeps per-step residuals either way); rel diff = |rewritten - original| / |original|")


if __name__ == "__main__":
    main()
