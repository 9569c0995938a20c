"""Mixed precision (issue 34, item 4): the measured examples of the README's "Which lines must stay float32".

For each everyday kernel (layer norm, RMS norm, L2 norm, softmax cross-entropy, attention logits) in
bfloat16 and float16: ``jst.tune_precision``'s plan (the line kept in float32, or the rewrite), the
program's error before and after in ulps of the low dtype (the worst element over the plan's 64 samples,
against the exact oracle), the kept lines' share of the float work, and the seconds the plan took. Then
what XLA on this machine's backend does with a low-precision reduction: the same long sums, whose exact
value float64 holds exactly (16-bit values, at most 2^14 of them), summed four ways. Then the backward
pass (issue 49): the gradient of each kernel's output against a fixed cotangent ``w`` (``vdot(w, f(x))``,
the vector-Jacobian product a training step computes), as written in the low dtype (``jax.grad``, no loss
scale), with every operation in float32 (``jax.grad`` of the float32 program at the same rounded inputs)
and under the gradient plan (``tune_gradient``'s ``grad_fn``: its kept lines, rewrites and loss scale):
the worst norm-wise relative error over fresh batches against ``jax.grad`` in float64, and the jitted
time of each against float32's::

    PYTHONPATH=. python benchmarks/bench_precision.py [--samples N] [--batches N]

The figures quoted in README.md ("Which lines must stay float32") and docs/architecture.md ("Mixed
precision (`jst.tune_precision`, issue 34)") come from this script. Only the CPU is measured here;
a GPU's reductions and times are not (no device was lent to this work).
"""

from __future__ import annotations

import argparse
import linecache
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

import pytest_jaxstab as jst

EPS = 1e-5


# ---------------------------------------------------------------------------------------- kernels
def layer_norm(x):
    m = jnp.mean(x)
    v = jnp.mean(jnp.square(x - m))
    return (x - m) / jnp.sqrt(v + EPS)


def rms_norm(x):
    ms = jnp.mean(x * x)
    return x / jnp.sqrt(ms + EPS)


def l2_norm(g):
    return jnp.sqrt(jnp.sum(g * g))


def softmax_xent(z):
    p = jnp.exp(z) / jnp.sum(jnp.exp(z))
    return -jnp.log(p[0])


def attention_logits(q, k):
    s = q @ k.T / np.sqrt(q.shape[-1]).astype(q.dtype)
    return jax.nn.softmax(s, axis=-1)


#: (name, function, shapes, domain): domains where the kernel is used in practice and a low dtype bites:
#: activations with an offset (norms), gradients of size ~40 (the L2 norm of a float16 gradient),
#: logits spread over +-12, queries and keys of size up to 4 in 64 dimensions.
CASES = [
    ("layer norm", layer_norm, (64,), (9.0, 11.0)),
    ("RMS norm", rms_norm, (256,), (-300.0, 300.0)),
    ("L2 norm", l2_norm, (1024,), (-60.0, 60.0)),
    ("softmax cross-entropy", softmax_xent, (16,), (-12.0, 12.0)),
    ("attention logits", attention_logits, [(8, 64), (8, 64)], (-4.0, 4.0)),
]


def _text(line: str) -> str:
    file, _, number = line.rpartition(":")
    return linecache.getline(file, int(number)).strip()


def _ulps(fig: jst.PrecisionPlan) -> str:
    return "inf" if fig.max_ulps == float("inf") else f"{fig.max_ulps:.0f}"


def plans(samples: int) -> None:
    print(f"jax {jax.__version__}, backend {jax.default_backend()}; {samples} samples per plan, "
          "target 4 ulps of the low dtype")
    head = (f"{'kernel':<22} {'dtype':<9} {'before (ulps, non-finite)':<26} {'after':<6} "
            f"{'high share':<10} {'s':<5} kept in float32 / rewrite")
    print(head)
    print("-" * len(head))
    for name, fn, shapes, domain in CASES:
        for dtype in ("bfloat16", "float16"):
            t0 = time.perf_counter()
            plan = jst.tune_precision(fn, shapes=shapes, dtype=dtype, domain=domain, samples=samples)
            dt = time.perf_counter() - t0
            before = f"{_ulps(plan.original)}, {plan.original.overflows}"
            kept = [f"`{_text(line)}`" for line in plan.lines]
            kept += [f"rewrite {rule}" for rule, _ in plan.rewrites]
            after = _ulps(plan.tuned) + ("" if plan.reached else "!")
            print(f"{name:<22} {dtype:<9} {before:<26} {after:<6} {plan.high_share:<10.1%} {dt:<5.1f} "
                  f"{'; '.join(kept) or '(nothing)'}")


# ------------------------------------------------------------------------ XLA's own accumulation
def _sums(dtype: np.dtype) -> dict[str, object]:
    return {
        # the HLO reduce in the low dtype, as lax.reduce writes it (what a library that does not upcast
        # emits); the backend chooses the accumulation
        "lax.reduce": lambda x: lax.reduce(x, np.array(0, dtype), lax.add, (0,)),
        # jnp.sum: JAX converts float16/bfloat16 to float32 around the reduction itself
        "jnp.sum": jnp.sum,
        # a dot with a ones vector: the backend's dot accumulation
        "dot(1, x)": lambda x: jnp.dot(jnp.ones_like(x), x),
        "cumsum[-1]": lambda x: jnp.cumsum(x)[-1],
    }


def accumulation() -> None:
    print(f"\nXLA's accumulation of a low-precision sum on {jax.default_backend()}: error in ulps of the "
          "dtype against the exact sum (float64 of the same values, exact here)")
    head = f"{'dtype':<9} {'values':<26} {'n':>6} " + " ".join(f"{k:>11}" for k in _sums(np.float16))
    print(head)
    print("-" * len(head))
    for dtype in (jnp.bfloat16, jnp.float16):
        for kind in ("normal(0, 1)", "1 then n-1 in (2^-9, 2^-8)"):
            for n in (1024, 16384):
                rng = np.random.default_rng(1)
                if kind.startswith("normal"):
                    x = rng.normal(0.0, 1.0, n).astype(dtype)
                else:  # each term below half an ulp of the running sum, together many ulps
                    x = np.asarray(rng.uniform(0.5, 1.0, n) * 2.0 ** -8, dtype)
                    x[0] = 1
                exact = np.asarray(np.sum(x.astype(np.float64))).astype(dtype)
                row = []
                for f in _sums(dtype).values():
                    got = np.asarray(jax.jit(f)(x)).astype(dtype)
                    row.append(f"{float(np.exp2(jst.oracles.error_bits(got, exact)) - 1):>11.0f}")
                print(f"{np.dtype(dtype).name:<9} {kind:<26} {n:>6} " + " ".join(row))
    low = jnp.ones(8, jnp.bfloat16)
    hlo = jax.jit(_sums(jnp.bfloat16)["lax.reduce"]).lower(low).compile().as_text()
    rounds = "bf16[] convert" in hlo
    print(f"compiled bfloat16 lax.reduce: accumulates in float32 arithmetic, "
          f"{'rounding each partial sum to bfloat16' if rounds else 'without rounding partial sums'} "
          "(the reducer's converts in the optimized HLO)")


# ------------------------------------------------------------------------------ the backward pass
def _vjp_loss(fn, out_shape: tuple[int, ...], dtype) -> tuple[Callable[..., Any], np.ndarray]:
    """``x -> vdot(w, fn(x))`` with ``w`` normal(0, 1) rounded to ``dtype`` (fixed, seeded): one
    cotangent of the kind a training step feeds back; any float dtype in (float64 for the reference)."""
    w = np.random.default_rng(7).normal(0.0, 1.0, out_shape).astype(dtype)

    def loss(*xs):
        return jnp.sum(jnp.asarray(w).astype(xs[0].dtype) * fn(*xs))

    loss.__name__ = f"vjp_{fn.__name__}"
    return loss, w


def _median_time(f, args, repeats: int = 30) -> float:
    jax.block_until_ready(f(*args))  # compile
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(f(*args))
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def _rel(got, ref) -> float:
    g = np.concatenate([np.ravel(np.asarray(a, np.float64)) for a in got])
    r = np.concatenate([np.ravel(np.asarray(a, np.float64)) for a in ref])
    if not np.all(np.isfinite(g)):
        return float("inf")
    return float(np.linalg.norm(g - r) / np.linalg.norm(r))


def backward(samples: int, batches: int) -> None:
    from pytest_jaxstab._precision._grad_plan import tune_gradient

    print(f"\nThe backward pass: grad of vdot(w, f(x)), norm-wise relative error (worst of {batches} fresh "
          f"batches) against jax.grad in float64; target 1e-2; jitted time against all-float32's")
    head = (f"{'kernel':<22} {'dtype':<9} {'as written':<10} {'float32':<9} {'plan':<9} {'scale':<6} "
            f"{'t low/f32':<9} {'t plan/f32':<10} {'s':<5} kept in float32 (both passes, backward) / rewrite")
    print(head)
    print("-" * len(head))
    for name, fn, shapes, domain in CASES:
        shape_list = shapes if isinstance(shapes, list) else [shapes]
        lo, hi = float(domain[0]), float(domain[1])
        for dtype in ("bfloat16", "float16"):
            low = jnp.dtype(dtype)
            out_shape = jax.eval_shape(fn, *[jax.ShapeDtypeStruct(s, np.float32) for s in shape_list]).shape
            loss, _ = _vjp_loss(fn, out_shape, low)
            t0 = time.perf_counter()
            g = tune_gradient(loss, shapes=shapes, dtype=dtype, domain=domain, samples=samples)
            dt = time.perf_counter() - t0
            argnums = tuple(range(len(shape_list)))
            grad = jax.jit(jax.grad(loss, argnums=argnums))
            policy = jax.jit(g.grad_fn)
            rng = np.random.default_rng(3)
            worst = {"low": 0.0, "f32": 0.0, "plan": 0.0}
            for _ in range(batches):
                xs = [np.asarray(rng.uniform(lo, hi, s), low) for s in shape_list]
                with jax.enable_x64(True):
                    ref = jax.grad(loss, argnums=argnums)(*[jnp.asarray(x, jnp.float64) for x in xs])
                    ref = [np.asarray(r) for r in ref]
                worst["low"] = max(worst["low"], _rel(grad(*xs), ref))
                worst["f32"] = max(worst["f32"], _rel(grad(*[x.astype(np.float32) for x in xs]), ref))
                worst["plan"] = max(worst["plan"], _rel(policy(*xs), ref))
            xs = [np.asarray(rng.uniform(lo, hi, s), low) for s in shape_list]
            t32 = _median_time(grad, [x.astype(np.float32) for x in xs])
            tlow, tplan = _median_time(grad, xs), _median_time(policy, xs)
            kept = [f"`{_text(line)}`" for line in g.lines]
            kept += [f"`{_text(line)}` (backward)" for line in g.backward_lines]
            kept += [f"rewrite {rule}" for rule, _ in g.rewrites]
            err = {k: "inf" if v == float("inf") else f"{v:.1e}" for k, v in worst.items()}
            print(f"{name:<22} {dtype:<9} {err['low']:<10} {err['f32']:<9} {err['plan']:<9} "
                  f"2^{round(np.log2(g.loss_scale)):<4} {tlow / t32:<9.2f} {tplan / t32:<10.2f} {dt:<5.1f} "
                  f"{'; '.join(kept) or '(nothing)'}" + ("" if g.reached else " (plan NOT within target)"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=64)
    parser.add_argument("--grad-samples", type=int, default=32)
    parser.add_argument("--batches", type=int, default=16)
    parser.add_argument("--only", choices=("forward", "backward"), default=None)
    args = parser.parse_args()
    if args.only != "backward":
        plans(args.samples)
        accumulation()
    if args.only != "forward":
        backward(args.grad_samples, args.batches)


if __name__ == "__main__":
    main()
