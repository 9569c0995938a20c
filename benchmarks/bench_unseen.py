"""Held-out measurement: does ``jst.stabilize`` (no search) fix the ML/statistics spellings users write?

Each function below is written the way model and statistics code writes it (several spellings per
family: ``jnp`` vs ``jax.nn`` vs hand-written, axes and ``keepdims``, integer labels), and none is
copied from the tests. For each, ``jst.check(judge="accuracy", seed=0)`` judges the program as written
and ``jst.stabilize``'s rewrite of it against the exact (Arb) oracle on the same inputs. A case is
*fixed* when the rewritten program is within 8 bits max and 2 bits mean of the exact result, never
overflows where that is finite, and is not worse than the original (half a bit of slack: one rounding
placed differently).

    PYTHONPATH=. python benchmarks/bench_unseen.py [--f64] [--stability] [--mean] [--examples N] [NAME ...]

``--f64`` adds the float64 column for the subset marked below; ``--stability`` also prints the
rewritten program's bits beyond what the problem's conditioning explains (``judge="stability"``), so
a miss that is the problem's own ill-conditioning reads as such; ``--mean`` adds the opt-in ``mean``
rule to the catalogue.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

import pytest_jaxstab as jst

# Integer class labels for the cross-entropy spellings: a batch of 4 rows of 8 logits.
LABELS = jnp.array([3, 0, 7, 1], dtype=jnp.int32)
ROWS = jnp.arange(4)
T = 0.1  # a softmax temperature
POS = (0.0, 3.4e38)  # positive data over the whole float32 range
BIG = (-3.4e38, 3.4e38)


# ------------------------------------------------------------------------ cross-entropy, selected
def xent_index(x):
    return -jnp.log(jax.nn.softmax(x)[..., 2])


def xent_take_along(x):
    return -jnp.log(jnp.take_along_axis(jax.nn.softmax(x, -1), LABELS[..., None], -1))


def xent_onehot(x):
    return -jnp.sum(jax.nn.one_hot(LABELS, 8) * jnp.log(jax.nn.softmax(x)), -1)


def xent_fancy_written(x):
    p = jnp.exp(x) / jnp.sum(jnp.exp(x), axis=-1, keepdims=True)
    return -jnp.mean(jnp.log(p[ROWS, LABELS]))


def xent_axis0(x):
    p = jax.nn.softmax(x, axis=0)
    return -jnp.log(p[1])  # a class per column, classes along axis 0


def xent_optax(x):
    # optax's softmax_cross_entropy_with_integer_labels: logsumexp minus the label's logit
    label_logits = jnp.take_along_axis(x, LABELS[..., None], -1)[..., 0]
    return jax.nn.logsumexp(x, -1) - label_logits


def xent_log_softmax_index(x):
    return -jax.nn.log_softmax(x)[ROWS, LABELS]  # the stable spelling, for reference


# ----------------------------------------------------------------------------- softplus and logs
def softplus_minus_x(x):
    return jax.nn.softplus(x) - x


def log_1p_exp_minus_x(x):
    return jnp.log(1 + jnp.exp(x)) - x


def log1p_exp_minus_x(x):
    return jnp.log1p(jnp.exp(x)) - x


def logaddexp_written(a, b):
    return jnp.log(jnp.exp(a) + jnp.exp(b))


def logdiffexp(a, b):
    return jnp.log(jnp.exp(a) - jnp.exp(b))


def log1mexp_written(x):
    return jnp.log(1 - jnp.exp(-x))


def log1mexp_expm1(x):
    return jnp.log(-jnp.expm1(-x))


def log_cosh(x):
    return jnp.log(jnp.cosh(x))


def log_cosh_loss(pred, y):
    return jnp.mean(jnp.log(jnp.cosh(pred - y)))


# ----------------------------------------------------------------------------------- norms, means
def hypot_written(x, y):
    return jnp.sqrt(x**2 + y**2)


def l2_sum_sq(v):
    return jnp.sqrt(jnp.sum(v**2))


def rms(v):
    return jnp.sqrt(jnp.mean(v**2))


def l2_rows_keepdims(v):
    return jnp.sqrt(jnp.sum(v * v, axis=-1, keepdims=True))


def cosine_norm(a, b):
    return jnp.dot(a, b) / (jnp.linalg.norm(a) * jnp.linalg.norm(b))


def cosine_sqrt(a, b):
    return jnp.dot(a, b) / jnp.sqrt(jnp.sum(a * a) * jnp.sum(b * b))


def mean_jnp(x):
    return jnp.mean(x)


def mean_written(x):
    return jnp.sum(x) / x.shape[0]


def var_naive(x):
    return jnp.mean(x**2) - jnp.mean(x) ** 2


def var_naive_square(x):
    return jnp.mean(x * x) - jnp.square(jnp.mean(x))


def var_jnp(x):
    return jnp.var(x)


# ------------------------------------------------------------------------------ logistic and tanh
def focal(z):
    p = jax.nn.sigmoid(z)
    return -((1 - p) ** 2) * jnp.log(p)


def focal_written(z):
    p = 1 / (1 + jnp.exp(-z))
    return -jnp.power(1.0 - p, 2.0) * jnp.log(p)


def sigmoid_written(x):
    return jnp.exp(x) / (1 + jnp.exp(x))


def tanh_written(x):
    return (jnp.exp(2 * x) - 1) / (jnp.exp(2 * x) + 1)


def sech2(x):
    return 1 - jnp.tanh(x) ** 2


# -------------------------------------------------------------------- softmax and log-densities
def softmax_temperature(x):
    return jnp.exp(x / T) / jnp.sum(jnp.exp(x / T))


def weighted_lse(w, x):
    return jnp.log(jnp.sum(w * jnp.exp(x)))


def gauss_logpdf(x, mu, log_s):
    return -0.5 * ((x - mu) / jnp.exp(log_s)) ** 2 - log_s - 0.5 * jnp.log(2 * jnp.pi)


def poisson_nll(log_rate, k):
    return jnp.exp(log_rate) - k * log_rate


def xlogx(x):
    return x * jnp.log(x)


def log_ratio(x, y):
    return jnp.log(x / y)


def one_minus_cos_sq(x):
    return (1 - jnp.cos(x)) / x**2


def geomean_prod(x):
    return jnp.prod(x) ** (1 / x.shape[0])


def geomean_exp_mean_log(x):
    return jnp.exp(jnp.mean(jnp.log(x)))


@dataclasses.dataclass(frozen=True)
class Case:
    fn: Callable[..., Any]
    shapes: list[tuple[int, ...]]
    domain: Any = None
    f64: bool = False


_L = (-1e4, 1e4)  # logits: far past where exp overflows in either dtype
CASES: dict[str, Case] = {
    "xent[softmax(x)[..., 2]]": Case(xent_index, [(4, 8)], None, True),
    "xent[take_along_axis(softmax)]": Case(xent_take_along, [(4, 8)]),
    "xent[sum(onehot * log(softmax))]": Case(xent_onehot, [(4, 8)], None, True),
    "xent[written p[arange, labels]]": Case(xent_fancy_written, [(4, 8)]),
    "xent[softmax(axis=0)[1]]": Case(xent_axis0, [(8, 4)]),
    "xent[optax: lse - x[label]]": Case(xent_optax, [(4, 8)], None, True),
    "xent[-log_softmax[rows, labels]]": Case(xent_log_softmax_index, [(4, 8)]),
    "softplus(x) - x": Case(softplus_minus_x, [(8,)], None, True),
    "log(1 + exp(x)) - x": Case(log_1p_exp_minus_x, [(8,)]),
    "log1p(exp(x)) - x": Case(log1p_exp_minus_x, [(8,)]),
    "log(exp(a) + exp(b))": Case(logaddexp_written, [(8,), (8,)], None, True),
    "log(exp(a) - exp(b)), a > b": Case(logdiffexp, [(8,), (8,)], [(0.0, 1e4), (-1e4, 0.0)], True),
    "log(1 - exp(-x))": Case(log1mexp_written, [(8,)], (0.0, 1e30)),
    "log(-expm1(-x))": Case(log1mexp_expm1, [(8,)], (0.0, 1e30)),
    "log(cosh(x))": Case(log_cosh, [(8,)], None, True),
    "mean(log(cosh(pred - y)))": Case(log_cosh_loss, [(8,), (8,)], [_L, _L]),
    "sqrt(x**2 + y**2)": Case(hypot_written, [(8,), (8,)], None, True),
    "sqrt(sum(v**2))": Case(l2_sum_sq, [(8,)]),
    "rms: sqrt(mean(v**2))": Case(rms, [(8,)], None, True),
    "sqrt(sum(v*v, -1, keepdims))": Case(l2_rows_keepdims, [(4, 8)]),
    "cosine[dot / (norm * norm)], v >= 0": Case(cosine_norm, [(8,), (8,)], POS, True),
    "cosine[dot / sqrt(ss * ss)], v >= 0": Case(cosine_sqrt, [(8,), (8,)], POS),
    "jnp.mean(x), x >= 0": Case(mean_jnp, [(8,)], POS, True),
    "sum(x) / n, x >= 0": Case(mean_written, [(8,)], POS),
    "mean(x**2) - mean(x)**2": Case(var_naive, [(8,)], None, True),
    "mean(x*x) - square(mean(x))": Case(var_naive_square, [(8,)]),
    "jnp.var(x)": Case(var_jnp, [(8,)], None, True),
    "focal[sigmoid, (1-p)**2]": Case(focal, [(8,)], None, True),
    "focal[written sigmoid, power 2.0]": Case(focal_written, [(8,)]),
    "exp(x) / (1 + exp(x))": Case(sigmoid_written, [(8,)], None, True),
    "(exp(2x) - 1) / (exp(2x) + 1)": Case(tanh_written, [(8,)], None, True),
    "1 - tanh(x)**2": Case(sech2, [(8,)], None, True),
    "exp(x/T) / sum(exp(x/T))": Case(softmax_temperature, [(8,)], None, True),
    "log(sum(w * exp(x))), w >= 0": Case(weighted_lse, [(8,), (8,)], [POS, None], True),
    "gauss logpdf[log-scale]": Case(gauss_logpdf, [(8,), (8,), (8,)],
                                    [(-1e30, 1e30), (-1e30, 1e30), (-1e3, 1e3)], True),
    "poisson nll[exp(l) - k l]": Case(poisson_nll, [(8,), (8,)], [(-1e3, 1e3), (0.0, 1e3)], True),
    "x * log(x), x >= 0": Case(xlogx, [(8,)], POS, True),
    "log(x / y), x, y > 0": Case(log_ratio, [(8,), (8,)], POS, True),
    "(1 - cos(x)) / x**2": Case(one_minus_cos_sq, [(8,)], (-1e4, 1e4), True),
    "prod(x)**(1/n), x >= 0": Case(geomean_prod, [(8,)], POS, True),
    "exp(mean(log(x))), x >= 0": Case(geomean_exp_mean_log, [(8,)], POS),
}


@dataclasses.dataclass
class Row:
    name: str
    dtype: str
    before: tuple[float, float, int]
    after: tuple[float, float, int]
    rules: list[str]
    seconds: float
    beyond: float | None = None

    @property
    def fixed(self) -> bool:
        (bm, bx, _), (am, ax, ao) = self.before, self.after
        return am <= 2.0 and ax <= 8.0 and ao == 0 and ax <= bx + 0.5 and am <= bm + 0.5

    @property
    def ok_before(self) -> bool:
        m, x, o = self.before
        return m <= 2.0 and x <= 8.0 and o == 0


def measure(name: str, case: Case, dtype: str, examples: int, stability: bool, rules: Any = None) -> Row:
    t0 = time.perf_counter()
    r = jst.check(case.fn, shapes=case.shapes, dtype=dtype, domain=case.domain, seed=0,
                  judge="accuracy", max_examples=examples, name=name, rules=rules)
    o, w = r.original, r.rewritten
    row = Row(name, dtype, (o.mean_error_bits, o.max_error_bits, o.overflows),
              (w.mean_error_bits, w.max_error_bits, w.overflows),
              sorted({x.rule for x in r.rewrites}), time.perf_counter() - t0)
    if stability and not row.fixed:
        s = jst.check(case.fn, shapes=case.shapes, dtype=dtype, domain=case.domain, seed=0,
                      judge="stability", max_examples=examples, name=name, rules=rules)
        row.beyond = s.rewritten.beyond_bits
    return row


def _fmt(v: tuple[float, float, int]) -> str:
    mean, mx, over = v
    return f"{mean:5.1f} /{mx:5.1f}" + (f" ({over} ovf)" if over else "")


def main(argv: list[str]) -> None:
    f64 = "--f64" in argv
    stability = "--stability" in argv
    rules = [*jst.rewrites.STABILITY, "mean"] if "--mean" in argv else None
    examples = 100
    if "--examples" in argv:
        examples = int(argv[argv.index("--examples") + 1])
    names = [a for a in argv if a in CASES] or list(CASES)
    jobs = [(n, "float32") for n in names] + ([(n, "float64") for n in names if CASES[n].f64] if f64 else [])
    print(f"jax {jax.__version__}; jst.check(judge='accuracy', seed=0, max_examples={examples}); "
          "bits mean / max; fixed = after <= 2 mean, <= 8 max, no overflow, not worse")
    head = f"{'case':40s} {'dtype':7s} {'before':>19s} {'after':>19s} {'fixed':5s} {'s':>5s}  rules"
    print(head + ("  [beyond cond.]" if stability else ""))
    print("-" * len(head))
    rows = []
    for name, dtype in jobs:
        try:
            row = measure(name, CASES[name], dtype, examples, stability, rules)
        except Exception as e:  # a benchmark row: reported, never hidden
            print(f"{name:40s} {dtype:7s} ERROR {type(e).__name__}: {e}")
            continue
        rows.append(row)
        mark = "yes" if row.fixed else ("(ok)" if row.ok_before else "NO")
        extra = f"  [{row.beyond:.1f}]" if row.beyond is not None else ""
        print(f"{name:40s} {dtype:7s} {_fmt(row.before):>19s} {_fmt(row.after):>19s} {mark:5s} "
              f"{row.seconds:5.1f}  {','.join(row.rules) or '-'}{extra}", flush=True)
    for dtype in ("float32", "float64"):
        sel = [r for r in rows if r.dtype == dtype]
        if sel:
            wrong = [r for r in sel if not r.ok_before]
            print(f"{dtype}: fixed {sum(r.fixed for r in sel)} of {len(sel)} "
                  f"({sum(r.fixed for r in wrong)} of the {len(wrong)} wrong as written; "
                  f"{sum(math.isfinite(r.seconds) for r in sel)} measured)")


if __name__ == "__main__":
    main(sys.argv[1:])
