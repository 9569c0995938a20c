"""Speed of the whole ``jst.check`` pipeline on its reference case, and where the time goes.

The case: a 16-element float32 ``log(sum(exp(x)))`` over (-1e4, 1e4) (it overflows, so the failure
path runs too: shrinking and the NaN origin), 200 examples, fixed seed. Goal: at most 3 s per check,
oracle included. Printed for a cold check (the first in the process: JAX compilation, first imports)
and for warm ones: seconds, examples per second, and the share of time per stage::

    PYTHONPATH=. python benchmarks/bench_harness.py [--examples N] [--repeat R]

Then, for the fuzzer (issue 15), a 200-example check of several cases (a 16-element logsumexp, a
batch-norm statistic, a three-argument model, a four-argument cancellation): the share of the inputs
drawn (Hypothesis examples and their siblings, repeats included) that were new distinct inputs (goal
>= 90%; the check skips repeats without judging them and draws on), and the share of the check's time
spent drawing (goal <= 30%; per case the median over the seeds, and the largest single run, which a
busy machine can push up), with the part of it spent inside the strategy code (ours, for examples and
their siblings, and Hypothesis recording the examples' choices; the rest of the draw stage is
Hypothesis's engine: generating, mutating and hill-climbing choice sequences for ``target``,
per-example setup), and how many drawn inputs repeated one judged before.

Stages: trace/rewrite (trace once, apply the rules, jit setup), draw (Hypothesis: generating inputs,
targeting, its bookkeeping), jitted runs (both variants), oracle (exact results), metrics (error bits,
figures), shrink (smallest failing input), diagnostics (NaN origins), local error (the bits each line
loses on its own, on the worst inputs: ``jst.local_error``). A second block times local error on a case
that fails on accuracy alone (a cancelling ``sqrt(x + 1) - sqrt(x)``); goal: at most 50% added.
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax
import jax.numpy as jnp

from pytest_jaxstab._check import StageTimes, check_case

_STAGES = (("trace/rewrite", ("trace",)), ("draw", ("draw",)), ("jitted runs", ("run",)),
           ("oracle", ("oracle",)), ("metrics", ("metrics",)), ("shrink", ("minimise",)),
           ("diagnostics", ("diagnostics", "timing")), ("local error", ("local_error",)),
           ("conditioning", ("conditioning",)))


def logsumexp(x):
    return jnp.log(jnp.sum(jnp.exp(x)))


def run_once(examples: int, seed: int) -> StageTimes:
    prof = StageTimes()
    result = check_case(logsumexp, shapes=[(16,)], dtype="float32", domain=(-1e4, 1e4), max_examples=examples,
                        seed=seed, name="bench_harness::logsumexp", profile=prof)
    assert result.outcome == "failed" and result.rewritten.verdict == "pass", result.message
    return prof


def describe(label: str, prof: StageTimes) -> str:
    total = prof["total"]
    rate = prof.get("draws", 0.0) / total
    shares = ", ".join(f"{name} {100 * sum(prof.get(k, 0.0) for k in keys) / total:.0f}%"
                       for name, keys in _STAGES)
    accounted = sum(prof.get(k, 0.0) for _, keys in _STAGES for k in keys)
    return (f"{label}: {total:.2f} s, {prof.get('draws', 0.0):.0f} inputs drawn and judged "
            f"({prof['examples']:.0f} distinct inputs in the figures; {prof.get('repeats', 0.0):.0f} "
            "repeats skipped), "
            f"{rate:.0f} inputs/s\n"
            f"    {shares}, other {100 * (total - accounted) / total:.0f}%")


def _batch_norm(x):
    mean = jnp.mean(x, axis=0)
    return mean, jnp.maximum(0.0, jnp.mean(x**2, axis=0) - mean**2)


def _softplus_model(x, w, b):
    return jnp.sum(jnp.log(1.0 + jnp.exp(x * w + b)))


def _determinant(a, b, c, d):
    return a * b - c * d


FUZZ_CASES = (
    ("logsumexp (16,)", logsumexp, [(16,)], (-1e4, 1e4)),
    ("jax.nn.logsumexp (16,)", jax.nn.logsumexp, [(16,)], None),
    ("batch-norm stats (8, 4)", _batch_norm, [(8, 4)], (-1e3, 1e3)),
    ("softplus model 3 x (16,)", _softplus_model, [(16,)] * 3, [(0, 1e3), (0, 1), (0, 1)]),
    ("a*b - c*d 4 x (16,)", _determinant, [(16,)] * 4, (-1e3, 1e3)),
)


def fuzz_figures(examples: int, seeds: int) -> None:
    """Distinct-input share and draw share of a check, per case, over seeds 0..seeds-1 (one run)."""
    print(f"fuzzer: {examples}-example float32 checks, seeds 0..{seeds - 1} (goals: distinct >= 90%, "
          "draw <= 30% of the check's time)")
    worst_distinct, worst_draw = 1.0, 0.0
    for label, fn, shapes, domain in FUZZ_CASES:
        distinct, draw, strategy, repeats = [], [], [], []
        for seed in range(seeds):
            prof = StageTimes()
            check_case(fn, shapes=shapes, dtype="float32", domain=domain, max_examples=examples, seed=seed,
                       name=f"bench_harness::{label}", profile=prof)
            # Distinct inputs over every input drawn: the judged ones (each counted once in the figures;
            # the shrunk one is not drawn) and the repeats the check skipped (examples and siblings).
            produced = prof["draws"] + prof.get("repeats", 0.0)
            distinct.append(min(prof["examples"], prof["draws"]) / produced)
            draw.append(prof.get("draw", 0.0) / prof["total"])
            strategy.append(prof.get("draw_strategy", 0.0) / prof["total"])
            repeats.append(prof.get("repeats", 0.0))
        worst_distinct = min(worst_distinct, *distinct)
        worst_draw = max(worst_draw, statistics.median(draw))
        print(f"    {label:26s} distinct {100 * min(distinct):5.1f}% (min)  "
              f"draw {100 * statistics.median(draw):4.1f}% of the time (median; max {100 * max(draw):.1f}%; "
              f"in the strategy {100 * statistics.median(strategy):4.1f}%, median; "
              f"{statistics.median(repeats):.0f} repeats skipped, median)")
    print(f"    distinct >= 90%: {'met' if worst_distinct >= 0.9 else 'NOT met'}; "
          f"draw <= 30% (the case with the largest median): {'met' if worst_draw <= 0.3 else 'NOT met'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seeds", type=int, default=3, help="seeds per case for the fuzzer figures")
    args = parser.parse_args()
    t0 = time.perf_counter()
    cold = run_once(args.examples, seed=0)
    print(describe("cold (first check in the process)", cold))
    print(f"    (wall time from the first call: {time.perf_counter() - t0:.2f} s)")
    warm = [run_once(args.examples, seed=i + 1) for i in range(args.repeat)]
    median = sorted(warm, key=lambda p: p["total"])[len(warm) // 2]
    print(describe(f"warm (median of {args.repeat})", median))
    totals = [p["total"] for p in warm]
    goal = "met" if statistics.median(totals) <= 3.0 else "NOT met"
    print(f"goal <= 3 s per check: {goal} (warm runs: {', '.join(f'{t:.2f}' for t in totals)} s)")
    local_error_split(args.examples, args.repeat)
    conditioning_split(args.examples, args.repeat)
    fuzz_figures(args.examples, args.seeds)


# --- local error: its share on an accuracy-only failure (issue 17) -------------------------------------
def sqrt_gap(x):
    return jnp.sqrt(x + 1.0) - jnp.sqrt(x)


def local_error_split(examples: int, repeat: int) -> None:
    """Local error's seconds against the rest of the check, on a case whose loss has no NaN to show."""
    added = []
    for seed in range(repeat + 1):  # the first run compiles: not counted
        prof = StageTimes()
        check_case(sqrt_gap, shapes=[(16,)], dtype="float32", domain=(1.0, 1e7), max_examples=examples,
                   seed=seed, name="bench_harness::sqrt_gap", profile=prof)
        if seed:
            added.append(prof.get("local_error", 0.0) / (prof["total"] - prof.get("local_error", 0.0)))
    share = statistics.median(added)
    goal = "met" if share <= 0.5 else "NOT met"
    print(f"local error on sqrt(x + 1) - sqrt(x), {examples} examples: adds {100 * share:.0f}% to the "
          f"rest of the check (median of {repeat}; goal <= 50%: {goal})")


# --- conditioning: its share of a check under judge="stability" (issue 22) -----------------------------
def mixed_sum(x):
    return jnp.sum(x)


def conditioning_split(examples: int, repeat: int) -> None:
    """The stability lens's conditioning (one oracle run per input element, only on inputs whose forward
    error exceeds the tolerance) as a share of the whole check, on the logsumexp case above and on a
    mixed-sign sum, ill-conditioned wherever its terms cancel (a worst case: many inputs need it)."""
    for fn, domain in ((logsumexp, (-1e4, 1e4)), (mixed_sum, (-1.0, 1.0))):
        shares = []
        for seed in range(repeat + 1):  # the first run compiles: not counted
            prof = StageTimes()
            check_case(fn, shapes=[(16,)], dtype="float32", domain=domain, max_examples=examples, seed=seed,
                       name=f"bench_harness::{fn.__name__}", profile=prof)
            if seed:
                shares.append(prof.get("conditioning", 0.0) / prof["total"])
        share = statistics.median(shares)
        goal = "met" if share <= 0.25 else "NOT met"
        print(f"conditioning (judge='stability') on {fn.__name__}, {examples} examples: {100 * share:.0f}% "
              f"of the check (median of {repeat}; goal <= 25%: {goal})")


if __name__ == "__main__":
    main()
