"""The soundness fuzz of ``jst.stabilize`` at length: many random programs at several seeds.

The programs, inputs and comparison are those of ``tests/test_soundness_fuzz.py`` (defined in
``tests/soundness_programs.py``, whose docstring states the failure rule and its constants); the test
runs 120 programs of seed 0, this script as many as asked. It prints, per seed and in all, the programs
checked, those on which a rewrite fired, the distinct rules that fired, the programs skipped (a
primitive the oracle cannot evaluate) and every failing program as a failing example.

    PYTHONPATH=. python benchmarks/bench_soundness_fuzz.py [--seeds 0 1 2] [--trees 200] [--no-grad] \\
        [--exclude RULE ...]
"""

from __future__ import annotations

import argparse
import collections
import pathlib
import sys
import time

import jax

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests"))

from soundness_programs import FLOOR_BITS, MARGIN_BITS, check_program, describe, programs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3])
    parser.add_argument("--trees", type=int, default=200, help="programs per seed")
    parser.add_argument("--no-grad", action="store_true", help="judge values (and vmap) only")
    parser.add_argument("--exclude", nargs="*", default=[], metavar="RULE",
                        help="rules left out (a known bug, to see what else fails)")
    args = parser.parse_args()
    print(f"jax {jax.__version__}; a value fails beyond max(original, {FLOOR_BITS:g}) + {MARGIN_BITS:g} "
          "bits where neither the conditioning nor the original's error at the neighbours explains it, "
          "or where it is not finite and the original is")
    rules: collections.Counter[str] = collections.Counter()
    totals = collections.Counter()
    first_failure: dict[int, int] = {}
    failing = []
    excesses: list[float] = []  # per passing program, its most bits beyond max(original, FLOOR_BITS)
    start = time.perf_counter()
    for seed in args.seeds:
        seed_rules: set[str] = set()
        counts = collections.Counter()
        t0 = time.perf_counter()
        for program in programs(seed, args.trees):
            outcome = check_program(program, grad=not args.no_grad, exclude=args.exclude)
            names = {r.split(" at ")[0] for r in outcome.rules}
            rules.update(names)
            seed_rules |= names
            counts["checked"] += 1
            counts["fired"] += bool(names)
            counts["judged elements"] += outcome.judged
            counts["skipped"] += outcome.skipped is not None
            counts["excused"] += outcome.excused
            if not outcome.failures:
                excesses.append(outcome.excess)
            if outcome.skipped:
                print(f"skipped {program.name}: {outcome.skipped}")
            if outcome.failures:
                counts["failing"] += 1
                first_failure.setdefault(seed, program.index)
                failing.append(outcome)
                print(describe(outcome) + "\n", flush=True)
        totals.update(counts)
        print(f"seed {seed}: {counts['checked']} programs, a rewrite fired on {counts['fired']}, "
              f"{len(seed_rules)} distinct rules, {counts['judged elements']} elements judged, "
              f"{counts['skipped']} skipped, {counts['failing']} failing "
              f"(first: {first_failure.get(seed, '-')}); {time.perf_counter() - t0:.0f} s", flush=True)
    print(f"\nin all: {totals['checked']} programs, a rewrite fired on {totals['fired']} "
          f"({totals['fired'] / max(totals['checked'], 1):.0%}), {len(rules)} distinct rules, "
          f"{totals['skipped']} skipped, {totals['failing']} failing; {time.perf_counter() - start:.0f} s")
    print(f"elements judged {totals['judged elements']}; worse than the original but explained by the "
          f"conditioning or the original's error at the neighbours: {totals['excused']}")
    print(f"passing programs whose rewrite is most worse than max(original, {FLOOR_BITS:g}) by more than "
          "t bits: " + ", ".join(f"t={t:g}: {sum(e > t for e in excesses)}" for t in (0, 1, 2, 3))
          + f" (of {len(excesses)}; the most {max(excesses, default=float('nan')):.2f} bits)")
    print("rules (programs on which each fired): "
          + ", ".join(f"{name} {n}" for name, n in sorted(rules.items(), key=lambda kv: (-kv[1], kv[0]))))
    if failing:
        by_rules = collections.Counter(" + ".join(sorted({r.split(" at ")[0] for r in o.rules}))
                                       for o in failing)
        print("failing programs by the rules that fired: "
              + "; ".join(f"{k or '(none)'}: {n}" for k, n in by_rules.most_common()))


if __name__ == "__main__":
    main()
