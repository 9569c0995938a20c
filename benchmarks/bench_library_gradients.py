"""The derivatives of ``jax.nn``, ``jnp`` and ``jax.scipy.special`` at extreme inputs (issue 39).

For each elementwise function of one input below, ``jax.grad`` of the function as JAX defines it and
of ``jst.stabilize`` of it is compared with the textbook derivative evaluated by mpmath at 60 digits
(``mp.diff`` was tried and dropped: its step loses the derivative of ``atan`` at 1e30 and of ``tanh``
at 700) at the points of ``POINTS`` inside the function's domain, in float32 and
float64. The error is Herbie's: ``log2(1 + floats between result and exact)``; a non-finite result
where the exact one is finite scores the dtype's significand width (24 / 53 bits). Points whose exact
derivative is below the dtype's smallest normal are left out (XLA:CPU flushes subnormals to 0), as
are points whose exact value is not finite.

    PYTHONPATH=. python benchmarks/bench_library_gradients.py [--f32 | --f64] [NAME ...]

One line per function and dtype: the worst bits before and after ``jst.stabilize`` (with the point),
and the rules that fired. The table in docs/architecture.md ("Derivatives that lose") is this output.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import jax.scipy.special as sp
import jax.scipy.stats as st
import mpmath as mp
import numpy as np

import pytest_jaxstab as jst

MAGNITUDES = (1e-30, 1e-8, 1e-3, 0.5, 1.0, 3.0, 10.0, 20.0, 50.0, 90.0, 1e4, 1e20, 1e30)
MAGNITUDES_64 = (1e-300, 1e-100, 200.0, 400.0, 700.0, 1e100, 1e300)


def _points(dtype: Any) -> list[float]:
    mags = MAGNITUDES + (MAGNITUDES_64 if dtype == np.float64 else ())
    return sorted({s * m for m in mags for s in (1.0, -1.0)} | {0.0})


def _sig(x: Any) -> Any:
    return 1 / (1 + mp.exp(-x))


def _dsig(x: Any) -> Any:
    return _sig(x) * _sig(-x)


def _sech2(x: Any) -> Any:
    return 1 / mp.cosh(x) ** 2


_C = mp.mpf("0.044715")


def _dgelu_tanh(x: Any) -> Any:
    # d/dx x/2·(1 + tanh(u)), u = √(2/π)(x + c·x³): (1 + tanh u)/2 + x/2·sech²(u)·u'
    k = mp.sqrt(2 / mp.pi)
    u = k * (x + _C * x**3)
    return (1 + mp.tanh(u)) / 2 + x / 2 * _sech2(u) * k * (1 + 3 * _C * x * x)


def _dmish(x: Any) -> Any:
    sp_ = mp.log1p(mp.exp(x))
    return mp.tanh(sp_) + x * _sech2(sp_) * _sig(x)


def _dsinc(x: Any) -> Any:
    if x == 0:
        return mp.mpf(0)
    t = mp.pi * x
    return (mp.cos(t) * t - mp.sin(t)) / (t * x)


def _di0e(x: Any) -> Any:  # (I0(x)·e^-|x|)' = (I1(x) - sign(x)·I0(x))·e^-|x|
    return (mp.besseli(1, x) - mp.sign(x) * mp.besseli(0, x)) * mp.exp(-abs(x))


def _di1e(x: Any) -> Any:  # I1' = I0 - I1/x
    d = mp.besseli(0, x) - (mp.besseli(1, x) / x if x else mp.mpf(1) / 2)
    return (d - mp.sign(x) * mp.besseli(1, x)) * mp.exp(-abs(x))


# name -> (the JAX function, mpmath's derivative of the mathematical function, the open domain)
ALL = mp.inf
FUNCTIONS: dict[str, tuple[Callable[..., Any], Callable[..., Any], tuple[Any, Any]]] = {
    "jax.nn.sigmoid": (jax.nn.sigmoid, _dsig, (-ALL, ALL)),
    "jax.nn.log_sigmoid": (jax.nn.log_sigmoid, lambda x: _sig(-x), (-ALL, ALL)),
    "jax.nn.softplus": (jax.nn.softplus, _sig, (-ALL, ALL)),
    "jax.nn.silu": (jax.nn.silu, lambda x: _sig(x) * (1 + x * _sig(-x)), (-ALL, ALL)),
    "jax.nn.gelu(approximate=False)": (lambda x: jax.nn.gelu(x, approximate=False),
                                       lambda x: mp.ncdf(x) + x * mp.npdf(x), (-ALL, ALL)),
    "jax.nn.gelu": (jax.nn.gelu, _dgelu_tanh, (-ALL, ALL)),
    "jax.nn.mish": (jax.nn.mish, _dmish, (-ALL, ALL)),
    "jax.nn.elu": (jax.nn.elu, lambda x: mp.mpf(1) if x > 0 else mp.exp(x), (-ALL, ALL)),
    "jax.nn.celu": (jax.nn.celu, lambda x: mp.mpf(1) if x > 0 else mp.exp(x), (-ALL, ALL)),
    "jax.nn.soft_sign": (jax.nn.soft_sign, lambda x: 1 / (1 + abs(x)) ** 2, (-ALL, ALL)),
    "jax.nn.squareplus": (jax.nn.squareplus, lambda x: (1 + x / mp.sqrt(x * x + 4)) / 2, (-ALL, ALL)),
    "jnp.tanh": (jnp.tanh, _sech2, (-ALL, ALL)),
    "jnp.sinh": (jnp.sinh, mp.cosh, (-ALL, ALL)),
    "jnp.cosh": (jnp.cosh, mp.sinh, (-ALL, ALL)),
    "jnp.arctan": (jnp.arctan, lambda x: 1 / (1 + x * x), (-ALL, ALL)),
    "jnp.arctan2(x, 1)": (lambda x: jnp.arctan2(x, jnp.ones_like(x)), lambda x: 1 / (1 + x * x),
                          (-ALL, ALL)),
    "jnp.arcsinh": (jnp.arcsinh, lambda x: 1 / mp.sqrt(1 + x * x), (-ALL, ALL)),
    "jnp.arccosh": (jnp.arccosh, lambda x: 1 / mp.sqrt(x * x - 1), (1, ALL)),
    "jnp.arctanh": (jnp.arctanh, lambda x: 1 / (1 - x * x), (-1, 1)),
    "jnp.arcsin": (jnp.arcsin, lambda x: 1 / mp.sqrt(1 - x * x), (-1, 1)),
    "jnp.log1p": (jnp.log1p, lambda x: 1 / (1 + x), (-1, ALL)),
    "jnp.expm1": (jnp.expm1, mp.exp, (-ALL, ALL)),
    "jnp.exp2": (jnp.exp2, lambda x: mp.log(2) * mp.mpf(2) ** x, (-ALL, ALL)),
    "jnp.cbrt": (jnp.cbrt, lambda x: mp.cbrt(x) / (3 * x), (0, ALL)),
    "jnp.sinc": (jnp.sinc, _dsinc, (-ALL, ALL)),
    "jnp.logaddexp(x, 0)": (lambda x: jnp.logaddexp(x, jnp.zeros_like(x)), _sig, (-ALL, ALL)),
    "jax.scipy.special.expit": (sp.expit, _dsig, (-ALL, ALL)),
    "jax.scipy.special.logit": (sp.logit, lambda x: 1 / (x * (1 - x)), (0, 1)),
    "jax.scipy.special.erf": (sp.erf, lambda x: 2 / mp.sqrt(mp.pi) * mp.exp(-x * x), (-ALL, ALL)),
    "jax.scipy.special.erfc": (sp.erfc, lambda x: -2 / mp.sqrt(mp.pi) * mp.exp(-x * x), (-ALL, ALL)),
    "jax.scipy.special.erfinv": (sp.erfinv, lambda y: mp.sqrt(mp.pi) / 2 * mp.exp(mp.erfinv(y) ** 2),
                                 (-1, 1)),
    "jax.scipy.special.ndtr": (sp.ndtr, mp.npdf, (-ALL, ALL)),
    "jax.scipy.special.ndtri": (sp.ndtri, lambda p: 1 / mp.npdf(mp.sqrt(2) * mp.erfinv(2 * p - 1)),
                                (0, 1)),
    "jax.scipy.special.log_ndtr": (sp.log_ndtr, lambda x: mp.npdf(x) / mp.ncdf(x), (-ALL, ALL)),
    "jax.scipy.special.gammaln": (sp.gammaln, mp.digamma, (0, ALL)),
    "jax.scipy.special.digamma": (sp.digamma, lambda x: mp.polygamma(1, x), (0, ALL)),
    "jax.scipy.special.entr": (sp.entr, lambda x: -mp.log(x) - 1, (0, ALL)),
    "jax.scipy.special.i0e": (sp.i0e, _di0e, (-ALL, ALL)),
    "jax.scipy.special.i1e": (sp.i1e, _di1e, (-ALL, ALL)),
    "jax.scipy.special.xlogy(x, x)": (lambda x: sp.xlogy(x, x), lambda x: mp.log(x) + 1, (0, ALL)),
    "jax.scipy.stats.logistic.cdf": (st.logistic.cdf, _dsig, (-ALL, ALL)),
    "jax.scipy.stats.logistic.sf": (st.logistic.sf, lambda x: -_dsig(x), (-ALL, ALL)),
    "jax.scipy.stats.norm.cdf": (st.norm.cdf, mp.npdf, (-ALL, ALL)),
}


def _bits(got: float, exact: Any, dtype: Any) -> float:
    """Herbie's error of ``got`` against the exact real ``exact`` in ``dtype``: log2(1 + floats
    between them), the significand width for a non-finite result."""
    if not np.isfinite(got):
        return float(np.finfo(dtype).nmant + 1)
    exact_f = np.asarray(float(exact), dtype)  # the exact value rounded once
    as_int = np.int64 if dtype == np.float64 else np.int32
    view = np.uint64 if dtype == np.float64 else np.uint32

    def ordinal(v: Any) -> int:
        i = int(np.asarray(v, dtype).view(view).astype(as_int))
        return i if i >= 0 else -(i & ((1 << (8 * np.dtype(dtype).itemsize - 1)) - 1))

    return float(np.log2(1 + abs(ordinal(got) - ordinal(exact_f))))


def derivative(f: Callable[..., Any], x: float) -> Any:
    """The closed-form derivative ``f`` at ``x`` (the float exactly), by mpmath at 60 digits."""
    with mp.workdps(60):
        return f(mp.mpf(x))


def measure(name: str, dtype: Any) -> tuple[tuple[float, float], tuple[float, float], list[str]]:
    """``((worst bits, at x) as JAX differentiates it, (worst, at x) after jst.stabilize, rules)``."""
    fn, ref, (lo, hi) = FUNCTIONS[name]
    tiny = float(np.finfo(dtype).tiny)
    with jax.enable_x64(dtype == np.float64):
        # the points as the dtype rounds them (1e-300 is 0 in float32)
        xs = sorted({float(np.asarray(v, dtype)) for v in _points(dtype)} & set(filter(
            lambda v: lo < v < hi, (float(np.asarray(v, dtype)) for v in _points(dtype)))))
        exact = {}
        for v in xs:
            try:
                d = derivative(ref, v)
            except (ValueError, ZeroDivisionError, OverflowError):
                continue
            if mp.isfinite(d) and (d == 0 or abs(d) >= tiny) and abs(d) <= np.finfo(dtype).max:
                exact[v] = d
        arr = jnp.asarray(list(exact), dtype)
        stable = jst.stabilize(fn)
        rules = sorted(set(jst.explain(fn, arr).rules))
        worst = []
        for variant in (fn, stable):
            got = np.asarray(jax.vmap(jax.grad(variant))(arr), np.float64)
            scores = [(_bits(g, exact[v], dtype), v) for g, v in zip(got, exact)]
            worst.append(max(scores))
    return worst[0], worst[1], rules


def main(argv: list[str]) -> None:
    dtypes = [np.float32, np.float64]
    if "--f32" in argv:
        dtypes = [np.float32]
    if "--f64" in argv:
        dtypes = [np.float64]
    names = [a for a in argv if not a.startswith("--")] or list(FUNCTIONS)
    print(f"{'function':34s} {'dtype':7s} {'JAX (at x)':>20s} {'stabilized (at x)':>20s}  rules")
    for name in names:
        for dtype in dtypes:
            (b0, x0), (b1, x1), rules = measure(name, dtype)
            print(f"{name:34s} {np.dtype(dtype).name:7s} {b0:8.1f} ({x0:9.3g}) {b1:8.1f} ({x1:9.3g})"
                  f"  {', '.join(rules) or '-'}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
