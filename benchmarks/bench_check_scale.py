"""What a ``jst.check`` costs at the sizes ML code runs, and how that cost grows with the elements (issue 46).

Each row: a function as ML code writes it, at a shape, checked at the defaults (100 inputs, the stability
lens, float32, domain (-1e3, 1e3), seed 0, no oracle budget): seconds, the verdict against the one
expected (the unstable spellings fail, the stable ones pass), the share of the oracle's output elements
its fast path left to the ball escalation, and the seconds of the three stages that dominated before
(oracle, conditioning). Then, per function, the exponent of seconds against elements fitted over its
shapes (least squares on logs): 1 is linear; the finite differences this replaced were about 2.

    PYTHONPATH=. python benchmarks/bench_check_scale.py [--only NAME] [--examples N]

Figures depend on the machine and its load: run it on a quiet one (``make bench-costs``).
"""

from __future__ import annotations

import argparse
import math
import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np

from pytest_jaxstab._check import StageTimes, check_case


def lse(x):
    return jnp.log(jnp.sum(jnp.exp(x), -1))


def layer_norm(x):
    m = jnp.mean(x, -1, keepdims=True)
    v = jnp.mean(jnp.square(x - m), -1, keepdims=True)
    return (x - m) * jax.lax.rsqrt(v + 1e-5)


def layer_norm_one_pass(x):
    m = jnp.mean(x, -1, keepdims=True)
    v = jnp.mean(x * x, -1, keepdims=True) - m * m
    return (x - m) * jax.lax.rsqrt(v + 1e-5)


def cross_entropy(logits, targets):  # optax.softmax_cross_entropy: soft targets, log_softmax
    return -jnp.sum(targets * jax.nn.log_softmax(logits, axis=-1), axis=-1)


def attention(q, k, v):
    return jax.nn.softmax(q @ k.T / jnp.sqrt(q.shape[-1]), axis=-1) @ v


def mlp(x, w, b):
    return jax.nn.relu(x @ w + b)


# name -> (function, expected outcome, shapes per size)
CASES = {
    "log(sum(exp(x)))": (lse, "failed", [[(16,)], [(8, 128)], [(32, 512)], [(32, 1000)]]),
    "layer norm": (layer_norm, "passed", [[(4, 16)], [(8, 128)], [(32, 512)], [(32, 1000)]]),
    "one-pass layer norm": (layer_norm_one_pass, "failed",
                            [[(4, 16)], [(8, 128)], [(32, 512)], [(32, 1000)]]),
    "softmax cross-entropy": (cross_entropy, "passed", [[(4, 16)] * 2, [(8, 128)] * 2, [(32, 512)] * 2,
                                                        [(32, 1000)] * 2]),
    "attention": (attention, "passed", [[(8, 8)] * 3, [(16, 16)] * 3, [(32, 32)] * 3, [(64, 64)] * 3]),
    "MLP layer (relu)": (mlp, "passed", [[(8, 32), (32, 32), (32,)], [(16, 64), (64, 64), (64,)],
                                         [(32, 128), (128, 128), (128,)], [(32, 256), (256, 256), (256,)]]),
}


def run(name: str, fn, want: str, shapes, examples: int) -> tuple[int, float]:
    prof = StageTimes()
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = check_case(fn, shapes=shapes, dtype="float32", domain=(-1e3, 1e3), seed=0, max_examples=examples,
                       oracle_budget=None, name=f"bench::{name}", profile=prof)
    seconds = time.perf_counter() - start
    elements = sum(math.prod(s) for s in shapes)
    esc = "-" if r.escalated is None else f"{100 * r.escalated:.1f}%"
    mark = "" if r.outcome == want else f"  <-- expected {want}"
    print(f"{name:22s} {' x '.join(str(s) for s in shapes):34s} {elements:>7d} {seconds:7.1f} s  "
          f"{r.outcome:7s} escalated {esc:>6s}  oracle {prof.get('oracle', 0):5.1f} s  "
          f"conditioning {prof.get('conditioning', 0):5.1f} s{mark}", flush=True)
    return elements, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=None, help="run one function (a name as printed)")
    parser.add_argument("--examples", type=int, default=100)
    args = parser.parse_args()
    check_case(lse, shapes=[(4,)], dtype="float32", seed=0, max_examples=5)  # imports, first compilations
    print(f"{'function':22s} {'shapes':34s} {'elements':>7s} {'seconds':>9s}  verdict")
    fits = {}
    for name, (fn, want, sizes) in CASES.items():
        if args.only and args.only != name:
            continue
        points = [run(name, fn, want, shapes, args.examples) for shapes in sizes]
        x, y = np.log([p[0] for p in points]), np.log([p[1] for p in points])
        fits[name] = float(np.polyfit(x, y, 1)[0])
    print("\nseconds ~ elements^k, k fitted per function over its shapes (1: linear):")
    for name, k in fits.items():
        print(f"  {name:22s} k = {k:.2f}")


if __name__ == "__main__":
    main()
