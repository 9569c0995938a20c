"""What ``jst.stabilize`` costs and buys: run time against ``jax.nn``, accuracy, and the pass itself.

1. Jitted run time of ``stabilize(naive)`` over the hand-written ``jax.nn`` function, for logsumexp,
   softmax, log_softmax (rows of a 1000 x 1000 float32 array, 1e6 elements) and softplus (1e6
   elements). Median of many alternating runs (on a machine shared with other work the load falls
   on both alike; the fastest run would reward whichever was lucky once), compile excluded,
   ``block_until_ready``. Goal: <= 1.05 for softmax and softplus, <= 1.3 for logsumexp and
   log_softmax (issue 24). XLA:CPU fuses ``sum(exp(x - m))`` into one kernel but not a masked
   sum, so the accurate forms take that sum first and sum again, masked, only the rows where one
   term dominates (``forms._rest``): they are timed on spread rows (normal(0, 3): 45 of 1000 rows
   summed again) and on rows with one dominating term (all summed again), and with
   ``rules=STABILITY_FAST`` (the library's formulas: as fast, no overflow, the small terms lost).
2. Accuracy in bits (docs/architecture.md, "The error metric") against mpmath at 256 bits, on the
   inputs of issue 3.
3. Time of the rewrite pass (``rewrite_jaxpr`` with the STABILITY catalogue, re-trace included) on a
   1,000- and a 10,000-equation jaxpr; goal <= 50 ms for 1,000, and a 10k/1k ratio near 10 (linear).
   Wall and CPU time (the pass is single-threaded: on a shared machine its CPU time is its cost).
   And the pass against JAX's own tracing of the same program (``jax.make_jaxpr``), measured
   alternately in one run: goal <= 1.0 on the dense program, <= 0.5 on the sparse one (issue 37).

Runs in well under two minutes on two CPU cores::

    PYTHONPATH=. python benchmarks/bench_rewrite.py [--profile]
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import mpmath
import numpy as np

import pytest_jaxstab as jst
from pytest_jaxstab.oracles.core._metrics import error_bits
from pytest_jaxstab.oracles.core._rounding import round_to_dtype
from pytest_jaxstab.rewrites import STABILITY, STABILITY_FAST, rewrite_jaxpr

RUNS = 101


def naive_logsumexp(x: jax.Array) -> jax.Array:
    return jnp.log(jnp.sum(jnp.exp(x), axis=-1))


def naive_softmax(x: jax.Array) -> jax.Array:
    return jnp.exp(x) / jnp.sum(jnp.exp(x), axis=-1, keepdims=True)


def naive_log_softmax(x: jax.Array) -> jax.Array:
    return x - jnp.log(jnp.sum(jnp.exp(x), axis=-1, keepdims=True))


def naive_softplus(x: jax.Array) -> jax.Array:
    return jnp.log(1 + jnp.exp(x))


CASES: dict[str, tuple[Callable[..., Any], Callable[..., Any], float]] = {
    "logsumexp": (naive_logsumexp, lambda x: jax.nn.logsumexp(x, axis=-1), 1.3),
    "softmax": (naive_softmax, lambda x: jax.nn.softmax(x, axis=-1), 1.05),
    "log_softmax": (naive_log_softmax, lambda x: jax.nn.log_softmax(x, axis=-1), 1.3),
    "softplus": (naive_softplus, jax.nn.softplus, 1.05),
}


def median_times(fns: list[Callable[..., Any]], *args: Any) -> list[float]:
    """Median run time of each function; runs alternate, so a busy machine slows all alike."""
    for fn in fns:
        jax.block_until_ready(fn(*args))  # compile (and warm caches) outside the timing
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(RUNS):
        for fn, ts in zip(fns, times):
            t0 = time.perf_counter()
            jax.block_until_ready(fn(*args))
            ts.append(time.perf_counter() - t0)
    return [statistics.median(ts) for ts in times]


def bench_speed() -> None:
    print(f"1. jitted run time, 1e6 float32 elements (median of {RUNS} runs, alternating)")
    print(f"   {'':24s} {'stabilize':>11s} {'jax.nn':>10s} {'ratio':>7s}  goal")
    rng = np.random.default_rng(0)
    rows = rng.normal(0.0, 3.0, (1000, 1000)).astype(np.float32)
    dominated = rows.copy()
    dominated[:, 0] = 60.0  # one term dominating every row: the accurate forms sum those rows again
    flat = jnp.asarray(rng.normal(0.0, 3.0, 1_000_000).astype(np.float32))
    for name, (naive, library, goal) in CASES.items():
        fast = name in ("logsumexp", "log_softmax")
        inputs = {name: flat} if name == "softplus" else {name: jnp.asarray(rows)}
        if fast:
            inputs[f"{name} (dominated)"] = jnp.asarray(dominated)
        for label, x in inputs.items():
            fns = [jax.jit(jst.stabilize(naive)), jax.jit(library)]
            if fast and label == name:
                fns.append(jax.jit(jst.stabilize(naive, rules=STABILITY_FAST)))
            times = median_times(fns, x)
            ours, theirs = times[0], times[1]
            rows_out = [(label, ours)] + ([(f"{name} (fast)", times[2])] if len(times) > 2 else [])
            for row_label, t in rows_out:
                ratio = t / theirs
                mark = "ok" if ratio <= goal else "MISSED"
                print(f"   {row_label:24s} {t * 1e3:8.3f} ms {theirs * 1e3:7.3f} ms {ratio:7.3f}"
                      f"  <= {goal} {mark}")


# ---------------------------------------------------------------------------------------- accuracy
MP: Any = mpmath.mp.clone()  # mpmath's context attributes are dynamic (no stubs)
MP.prec = 256


def _lse(x: list) -> Any:
    return MP.log(MP.fsum(MP.exp(v) for v in x))


EXACT: dict[str, Callable[[list], Any]] = {
    "logsumexp": lambda x: [_lse(x)],
    "softmax": lambda x: [MP.exp(v - _lse(x)) for v in x],
    "log_softmax": lambda x: [v - _lse(x) for v in x],
    "softplus": lambda x: [MP.log1p(MP.exp(v)) for v in x],
}
EXAMPLES = {
    "logsumexp": np.array([1e-20] + [-20.0] * 15, np.float32),  # issue 3
    "softmax": np.array([100.0, 99.0, 80.0, 90.0], np.float32),  # exp(100) overflows
    "log_softmax": np.array([30.0, 5.0] + [-3.0] * 14, np.float32),  # issue 3
    "softplus": np.array([100.0, -20.0, 89.0, -16.0], np.float32),
}


def bench_accuracy() -> None:
    print("2. max error in bits against mpmath (256 bits), float32")
    print(f"   {'':12s} {'naive':>7s} {'stabilize(naive)':>17s} {'(fast rules)':>13s} {'jax.nn':>7s}  input")
    for name, (naive, library, _) in CASES.items():
        x = EXAMPLES[name]
        exact = round_to_dtype(np.array(EXACT[name]([MP.mpf(float(v)) for v in x]), dtype=object),
                               np.float32).reshape(np.shape(naive(x)))

        def bits(fn: Callable[..., Any], x: np.ndarray = x, exact: np.ndarray = exact) -> float:
            return float(error_bits(np.asarray(jax.jit(fn)(x)), exact).max())

        fast = bits(jst.stabilize(naive, rules=STABILITY_FAST))
        ours = bits(jst.stabilize(naive))
        print(f"   {name:12s} {bits(naive):7.1f} {ours:17.1f} {fast:13.1f} {bits(library):7.1f}"
              f"  {np.array2string(x[:4], precision=3)}{'...' if x.size > 4 else ''}")


# ------------------------------------------------------------------------------------ rewrite pass
def chain(copies: int) -> Callable[[jax.Array], jax.Array]:
    """``copies`` repetitions of five patterns (softplus, logsumexp, log1p, hypot, softmax), each
    feeding the next: 17 equations and 5 rewrites per copy."""

    def f(x: jax.Array) -> jax.Array:
        for _ in range(copies):
            x = jnp.log(1 + jnp.exp(x))
            s = jnp.log(jnp.sum(jnp.exp(x)))
            x = jnp.log(1 + x * s)
            x = jnp.sqrt(x * x + s * s)
            x = jnp.exp(x) / jnp.sum(jnp.exp(x))
        return x

    return f


def sparse(n_layers: int) -> Callable[[jax.Array], jax.Array]:
    """A deep elementwise network (5 equations per layer) ending in one naive logsumexp: the common
    case, a large program with a few rewrites."""

    def f(x: jax.Array) -> jax.Array:
        for _ in range(n_layers):
            x = jnp.tanh(x * 1.01 + 0.5) - x * 0.3
        return jnp.log(jnp.sum(jnp.exp(x)))

    return f


def copies_for(n_eqns: int) -> int:
    """How many copies of the chain make a jaxpr of about ``n_eqns`` equations."""
    per_copy = len(jax.make_jaxpr(chain(2))(jnp.ones(8, jnp.float32)).jaxpr.eqns) / 2
    return max(1, round(n_eqns / per_copy))


def pass_time(copies: int, runs: int, make: Callable[[int], Any] = chain,
              ) -> tuple[float, float, int, int]:
    """``(wall, cpu, equations, rewrites)``: median wall and CPU (this process) seconds of a pass.

    The pass is single-threaded Python, so its CPU time is its cost; on a shared machine the wall
    time adds the time spent waiting for a core, which the CPU time leaves out."""
    closed = jax.make_jaxpr(make(copies))(jnp.ones(8, jnp.float32))
    n_eqns = len(closed.jaxpr.eqns)
    rules = tuple(STABILITY)
    _, applied = rewrite_jaxpr(closed, rules)  # warm: JAX's tracing caches for the replacements
    wall, cpu = [], []
    for _ in range(runs):
        t0, c0 = time.perf_counter(), time.process_time()
        rewrite_jaxpr(closed, rules)
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return statistics.median(wall), statistics.median(cpu), n_eqns, len(applied)


def pass_over_trace(copies: int, runs: int, make: Callable[[int], Any]) -> tuple[float, float]:
    """``(pass CPU s, trace CPU s)``: medians of the rewrite pass and of ``jax.make_jaxpr`` on the
    same program, run alternately (a busy moment slows both alike)."""
    x = jnp.ones(8, jnp.float32)
    closed = jax.make_jaxpr(make(copies))(x)
    rules = tuple(STABILITY)
    rewrite_jaxpr(closed, rules)  # warm, as pass_time
    passes, traces = [], []
    for _ in range(runs):
        c0 = time.process_time()
        jax.make_jaxpr(make(copies))(x)
        traces.append(time.process_time() - c0)
        c0 = time.process_time()
        rewrite_jaxpr(closed, rules)
        passes.append(time.process_time() - c0)
    return statistics.median(passes), statistics.median(traces)


def bench_pass(profile: bool) -> None:
    print("3. rewrite pass (STABILITY, new program built), median")
    for label, make, per, goal in (("dense", chain, copies_for(1000), 1.0), ("sparse", sparse, 200, 0.5)):
        p, t = pass_over_trace(per, 31, make)
        print(f"   {label:6s} pass {p * 1e3:6.1f} ms CPU, tracing it {t * 1e3:6.1f} ms: pass/trace "
              f"{p / t:4.2f}  goal <= {goal}: {'ok' if p / t <= goal else 'MISSED'}")
    for label, make, per in (("dense (5 rewrites per 17 equations)", chain, copies_for(1000)),
                             ("sparse (one rewrite)", sparse, 200)):
        t1, c1, n1, a1 = pass_time(per, 31, make)  # a median of many: one busy moment moves a few
        t10, c10, n10, a10 = pass_time(per * 10, 5, make)
        print(f"   {label}")
        print(f"   {n1:6d} equations, {a1:5d} rewrites: {t1 * 1e3:8.1f} ms wall, {c1 * 1e3:6.1f} ms CPU"
              f"   goal <= 50 ms: {'ok' if t1 <= 0.05 else 'MISSED'} (wall),"
              f" {'ok' if c1 <= 0.05 else 'MISSED'} (CPU)")
        print(f"   {n10:6d} equations, {a10:5d} rewrites: {t10 * 1e3:8.1f} ms wall, {c10 * 1e3:6.1f} ms CPU")
        print(f"   10k/1k ratio: {t10 / t1:.1f} wall, {c10 / c1:.1f} CPU (linear: {n10 / n1:.1f})")
    if profile:
        import cProfile
        import pstats

        closed = jax.make_jaxpr(chain(copies_for(1000)))(jnp.ones(8, jnp.float32))
        prof = cProfile.Profile()
        prof.enable()
        rewrite_jaxpr(closed, tuple(STABILITY))
        prof.disable()
        pstats.Stats(prof).sort_stats("cumulative").print_stats(25)


def main() -> None:
    print(f"jax {jax.__version__}, backend {jax.default_backend()}, {jax.devices()[0].device_kind}")
    bench_speed()
    bench_accuracy()
    bench_pass("--profile" in sys.argv)


if __name__ == "__main__":
    main()
