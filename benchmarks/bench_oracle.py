"""Speed of the rigorous oracle against a plain (non-rigorous) mpmath loop computing the same thing.

A 20-operation elementwise float32 function over 1,000 elements: ``oracles.evaluate`` (tracing, ball
arithmetic, escalation and the rounding proof included) against a Python loop calling mpmath on each
element once at 64 bits, measured in the same run (best of 3). Goal: ratio <= 1.0. Printed too: the
precision histogram (how many elements settled at each precision), the same with 5% extreme inputs,
and the cost of single operations in python-flint's Arb against mpmath (the
README's per-operation figures). Runs in about ten seconds::

    PYTHONPATH=. python benchmarks/bench_oracle.py
"""

from __future__ import annotations

import time
from collections.abc import Callable

import jax
import jax.numpy as jnp
import mpmath
import numpy as np
from flint import arb
from flint import ctx as flint_ctx

from pytest_jaxstab import _compat
from pytest_jaxstab.oracles import evaluate, to_mpf_array

N_ELEMENTS = 1000
N_OPS = 20


def program(x: jax.Array) -> jax.Array:
    """20 primitives: mul neg exp log1p sin add abs add sqrt tanh mul sub mul add div atan cos add expm1
    mul."""
    a = jnp.exp(-(x * x))
    b = jnp.log1p(a) + jnp.sin(x)
    c = jnp.sqrt(jnp.abs(b) + 1.0)
    d = jnp.tanh(c) * x - b
    e = d / (1.0 + x * x)
    g = jnp.atan(e) + jnp.cos(d)
    return jnp.expm1(g) * 0.5


def plain_loop(xs: list) -> list:
    """The same computation, element by element, with mpmath's functions at the global precision."""
    one, half = mpmath.mpf(1), mpmath.mpf("0.5")
    exp, log1p, sin, sqrt, tanh, atan, cos, expm1 = (mpmath.exp, mpmath.log1p, mpmath.sin, mpmath.sqrt,
                                                     mpmath.tanh, mpmath.atan, mpmath.cos, mpmath.expm1)
    out = []
    for x in xs:
        a = exp(-(x * x))
        b = log1p(a) + sin(x)
        c = sqrt(abs(b) + one)
        d = tanh(c) * x - b
        e = d / (one + x * x)
        g = atan(e) + cos(d)
        out.append(expm1(g) * half)
    return out


def best_of(fn: Callable[[], object], repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def histogram(precisions: np.ndarray) -> str:
    bits, counts = np.unique(np.asarray(precisions), return_counts=True)
    return ", ".join(f"{b} bits: {c}" for b, c in zip(bits.tolist(), counts.tolist()))


def per_op() -> list[tuple[str, float, float]]:
    """Microseconds per operation on 1,000 values at 64 bits: (name, Arb, mpmath)."""
    vals = [0.5 + i / 1000 for i in range(1000)]
    balls = [arb(v) * arb(1.1) for v in vals]
    mps = [mpmath.mpf(v) * mpmath.mpf(1.1) for v in vals]
    ops: list[tuple[str, Callable, Callable]] = [
        ("mul", lambda v: v * v, lambda v: v * v),
        ("add", lambda v: v + v, lambda v: v + v),
        ("div", lambda v: v / (v + 1), lambda v: v / (v + 1)),
        ("exp", arb.exp, mpmath.exp),
        ("log", arb.log, mpmath.log),
        ("sin", arb.sin, mpmath.sin),
        ("atan", arb.atan, mpmath.atan),
        ("sqrt", arb.sqrt, mpmath.sqrt),
    ]
    out = []
    flint_ctx.prec = 64
    with mpmath.workprec(64):
        for name, fa, fm in ops:
            ta = best_of(lambda fa=fa: [fa(b) for b in balls])
            tm = best_of(lambda fm=fm: [fm(m) for m in mps])
            out.append((name, ta * 1e3, tm * 1e3))  # per 1000 values -> us per value
    return out


def main() -> None:
    rng = np.random.default_rng(0)
    x = rng.uniform(-3, 3, N_ELEMENTS).astype(np.float32)
    closed, _, _ = _compat.trace(program, x)
    n_eqns = len(_compat.eqns(closed))
    assert n_eqns == N_OPS, f"the program has {n_eqns} equations, expected {N_OPS}"
    xs = list(to_mpf_array(x))
    scale = 1e6 / (N_ELEMENTS * N_OPS)

    def loop() -> None:
        with mpmath.workprec(64):
            plain_loop(xs)

    result = evaluate(program, x)
    assert np.asarray(result.certain).all()
    t_eval, t_loop = best_of(lambda: evaluate(program, x)), best_of(loop)
    print(f"{N_OPS}-op float32 program over {N_ELEMENTS} elements (mpmath backend {mpmath.libmp.BACKEND})")
    print(f"rigorous evaluate(), escalation included: {t_eval * scale:6.2f} us/element-op")
    print(f"plain mpmath loop at 64 bits:             {t_loop * scale:6.2f} us/element-op")
    print(f"ratio rigorous / plain: {t_eval / t_loop:.2f}  (goal <= 1.0)")
    print(f"precision histogram: {histogram(result.precisions)}")

    hard = x.copy()
    n = hard[::20].size
    hard[::20] = rng.choice(np.asarray([1e-30, -1e-30, 1e30, -1e30, 2e19], np.float32), n)
    hard_result = evaluate(program, hard)
    t_hard = best_of(lambda: evaluate(program, hard))
    uncertain = int((~np.asarray(hard_result.certain)).sum())
    print(f"with 5% extreme inputs (|x| 1e-30 to 1e30): ratio {t_hard / t_loop:.2f}; "
          f"histogram: {histogram(hard_result.precisions)}; uncertain {uncertain}")

    print("per operation at 64 bits (us): Arb (python-flint) vs mpmath, speed-up")
    for name, ta, tm in per_op():
        print(f"  {name:5s} {ta:6.3f} vs {tm:6.3f}  {tm / ta:5.1f}x")


if __name__ == "__main__":
    main()
