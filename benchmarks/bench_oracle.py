"""Speed of the exact oracle against a hand-written mpmath loop computing the same thing.

A 20-operation elementwise float32 function is evaluated over 1,000 elements by the oracle's
interpreter, and by a plain Python loop calling mpmath on each element, at the same working precision
and in the same run. Printed: microseconds per element-operation for both, and their ratio (goal: <= 2),
for one interpreter pass at the starting precision and for a whole ``evaluate`` (precision escalation
included) against plain loops at the precisions it used. Runs in a few seconds::

    PYTHONPATH=. python benchmarks/bench_oracle.py
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import mpmath
import numpy as np

from pytest_jaxstab import _compat
from pytest_jaxstab.oracles import _interpreter, evaluate, to_mpf_array

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


def best_of(fn, repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    x = np.random.default_rng(0).uniform(-3, 3, N_ELEMENTS).astype(np.float32)
    closed, _, _ = _compat.trace(program, x)
    n_eqns = len(_compat.eqns(closed))
    assert n_eqns == N_OPS, f"the program has {n_eqns} equations, expected {N_OPS}"
    xs = to_mpf_array(x)
    scale = 1e6 / (N_ELEMENTS * N_OPS)

    result = evaluate(program, x)
    precs = _interpreter._schedule(2 * 24 + 20, 4096)
    precs = precs[: precs.index(result.precision) + 1]

    interp = _interpreter._Interpreter()

    def one_pass(prec: int) -> None:
        interp.prec = prec
        with mpmath.workprec(prec):
            interp.call(closed, [xs])

    def loop(prec: int) -> None:
        with mpmath.workprec(prec):
            plain_loop(list(xs))

    p0 = precs[0]
    t_interp, t_loop = best_of(lambda: one_pass(p0)), best_of(lambda: loop(p0))
    print(f"{N_OPS}-op float32 program over {N_ELEMENTS} elements, mpmath backend {mpmath.libmp.BACKEND}")
    print(f"one pass at {p0} bits:   oracle {t_interp * scale:6.2f} us/element-op, "
          f"plain mpmath loop {t_loop * scale:6.2f} us/element-op, ratio {t_interp / t_loop:.2f}")
    t_eval = best_of(lambda: evaluate(program, x))
    t_loops = best_of(lambda: [loop(p) for p in precs])
    print(f"evaluate() at {precs} bits: oracle {t_eval * scale:6.2f} us/element-op, "
          f"plain loops {t_loops * scale:6.2f} us/element-op, ratio {t_eval / t_loops:.2f}")


if __name__ == "__main__":
    main()
