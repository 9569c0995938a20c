"""The catalogue on the spellings of ``benchmarks/bench_unseen.py`` (issue 26, item 3), by identity.

Three kinds of test, none reusing the benchmark's functions:

- identities: each rule added for the held-out spellings fires on a form written here, and the
  stabilized value is within a stated number of bits of an mpmath reference at 256 bits, at extreme
  inputs where the form as written fails (asserted: each row proves its rule matters);
- gradients of the ML losses: finite and within a stated number of bits of the exact derivative,
  written here in closed form;
- families: more spellings fuzzed by ``jst.check(judge="accuracy")`` with a fixed seed: the rewritten
  program is within 2 bits mean and 8 bits max, never overflows where the exact result is finite, is
  never worse than the program as written, and (on the rows marked) the program as written is wrong.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import pytest_jaxstab as jst
from tests.test_rewrites_generalise import F32, MP, _bits, _mp

# The slow tier (`make test-slow`, run in full by CI; `make test` leaves it out): docs/architecture.md,
# "Tests and their tiers".
pytestmark = pytest.mark.slow


def f32(*v: float) -> np.ndarray:
    return np.array(v, F32)


def _rows(x: np.ndarray) -> list[list[Any]]:
    return [_mp(r) for r in np.asarray(x)]


def _lse(r: list[Any]) -> Any:
    return MP.log(MP.fsum(MP.exp(v) for v in r))


# Logits where a softmax entry underflows (exp(-200 - 5) is far below float32's smallest number) and
# where the entry picked is the dominant one (its probability rounds to 1, log to 0).
LOGITS = np.array([[0.0, 1.0, -200.0, 5.0, -3.0, 2.0, 0.5, -1.0],
                   [60.0, -10.0, 0.0, 59.0, 3.0, -300.0, 1.0, 2.0],
                   [-70.0, -70.0, 40.0, 7.0, 0.0, -1.0, 1e-3, 4.0],
                   [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]], F32)
LABELS = np.array([2, 5, 0, 7], np.int32)


def _xent_exact(x: np.ndarray, picks: list[tuple[int, int]]) -> list[Any]:
    rows = _rows(x)
    return [_lse(rows[r]) - rows[r][j] for r, j in picks]


def _sech2(v: Any) -> Any:
    return 1 / MP.cosh(v) ** 2


# ------------------------------------------------------------------------------------ identities
@dataclasses.dataclass(frozen=True)
class Identity:
    id: str
    rule: str
    fn: Callable[..., Any]
    args: tuple[np.ndarray, ...]
    exact: Callable[..., Any]  # the arguments as numpy arrays -> list of mpf (or one mpf)
    bits: float = 2.0  # a few roundings of a correctly rounded form: at most 3 ulps
    wrong: float = 8.0  # how far off the form as written is, at least, on these inputs

    def __str__(self) -> str:
        return self.id


_MIX_W, _MIX_MU, _MIX_SIG = f32(0.2, 0.5, 0.3), f32(-2.0, 0.5, 3.0), f32(0.5, 1.0, 2.0)

IDENTITIES = [
    Identity("xent[softmax(x)[:, 2]]", "log_select_softmax",
             lambda x: -jnp.log(jax.nn.softmax(x)[:, 2]), (LOGITS,),
             lambda x: _xent_exact(x, [(r, 2) for r in range(4)])),
    Identity("xent[take_along_axis]", "log_select_softmax",
             lambda x: -jnp.log(jnp.take_along_axis(jax.nn.softmax(x, axis=-1), LABELS[:, None], axis=1)),
             (LOGITS,), lambda x: _xent_exact(x, list(enumerate(LABELS)))),
    Identity("xent[jnp.take, written softmax]", "log_select_softmax",
             lambda x: -jnp.log(jnp.take(jnp.exp(x) / jnp.sum(jnp.exp(x)), jnp.array([2, 6]))),
             (LOGITS[0],), lambda x: _xent_exact(x[None], [(0, 2), (0, 6)])),
    Identity("xent[p[rows, labels]]", "log_select_softmax",
             lambda x: -jnp.log(jax.nn.softmax(x, axis=1)[jnp.arange(4), LABELS]),
             (LOGITS,), lambda x: _xent_exact(x, list(enumerate(LABELS)))),
    Identity("xent[dynamic index, axis 0]", "log_select_softmax",
             lambda x, i: -jnp.log(jax.nn.softmax(x, axis=0)[i]),
             (LOGITS.T.copy(), np.array(2, np.int32)),
             lambda x, i: _xent_exact(x.T, [(r, 2) for r in range(4)])),
    # optax's cross-entropy with integer labels: logsumexp minus the label's logit; the row 2 label
    # (40) dominates its row, where the difference cancels to 0 as written (exact: 1e-14)
    Identity("xent[optax: lse - take_along_axis]", "lse_minus_selected",
             lambda x: jax.nn.logsumexp(x, axis=-1)
             - jnp.take_along_axis(x, jnp.array([[2], [0], [2], [7]]), axis=-1)[..., 0],
             (LOGITS,), lambda x: _xent_exact(x, [(0, 2), (1, 0), (2, 2), (3, 7)])),
    Identity("xent[lse - x[:, 0], dominant]", "lse_minus_selected",
             lambda x: jax.nn.logsumexp(x, 1) - x[:, 0],
             (np.array([[30.0, 1.0, 2.0, -5.0], [50.0, 10.0, -3.0, 0.0]], F32),),
             lambda x: _xent_exact(x, [(0, 0), (1, 0)])),
    Identity("softplus_minus[jax.nn]", "softplus_minus", lambda x: jax.nn.softplus(x) - x,
             (f32(20.0, 30.0, 60.0, 80.0),), lambda x: [MP.log1p(MP.exp(-v)) for v in _mp(x)]),
    Identity("softplus_minus[log(exp + 1)]", "softplus_minus", lambda x: jnp.log(jnp.exp(x) + 1.0) - x,
             (f32(20.0, 30.0, 60.0, 80.0),), lambda x: [MP.log1p(MP.exp(-v)) for v in _mp(x)]),
    Identity("softplus_minus[logaddexp(x, 0)]", "softplus_minus", lambda x: jnp.logaddexp(x, 0.0) - x,
             (f32(20.0, 30.0, 60.0, 80.0),), lambda x: [MP.log1p(MP.exp(-v)) for v in _mp(x)]),
    Identity("written_sigmoid", "written_sigmoid", lambda x: jnp.exp(x) / (jnp.exp(x) + 1),
             (f32(100.0, -80.0, 89.0, 3.0),), lambda x: [1 / (1 + MP.exp(-v)) for v in _mp(x)]),
    Identity("written_tanh[exp(2x)]", "written_tanh",
             lambda x: (jnp.exp(2 * x) - 1) / (jnp.exp(2 * x) + 1),
             (f32(50.0, -50.0, 1e-5, 3.0),), lambda x: [MP.tanh(v) for v in _mp(x)]),
    Identity("written_tanh[exp(-2x)]", "written_tanh",
             lambda x: (1 - jnp.exp(-2.0 * x)) / (1 + jnp.exp(-2.0 * x)),
             (f32(-50.0, 50.0, -1e-5, 0.25),), lambda x: [MP.tanh(v) for v in _mp(x)]),
    Identity("sech2", "sech2", lambda x: 1 - jnp.square(jnp.tanh(x)), (f32(10.0, 20.0, -30.0, 0.5),),
             lambda x: [_sech2(v) for v in _mp(x)]),
    Identity("logdiffexp", "logdiffexp", lambda a, b: jnp.log(jnp.exp(a) - jnp.exp(b)),
             (f32(100.0, 2.0, 1e-3, 50.0), f32(99.0, -300.0, -1e-3, -50.0)),
             lambda a, b: [MP.log(MP.exp(u) - MP.exp(v)) for u, v in zip(_mp(a), _mp(b))]),
    # 1/2 at 0 (the limit); sin(x/2)/(x/2) rounds a few times: 3 ulps
    Identity("one_minus_cos_over_sq", "one_minus_cos_over_sq", lambda x: (1 - jnp.cos(x)) / x**2,
             (f32(0.0, 1e-20, 1e-3, 3.0),),
             lambda x: [2 * MP.sin(v / 2) ** 2 / v**2 if v else MP.mpf(0.5) for v in _mp(x)], bits=2.0),
    Identity("rms[mean]", "rms", lambda v: jnp.sqrt(jnp.mean(v * v)), (f32(3e38, -2e38, 1e38, 3.3e38),),
             lambda v: MP.sqrt(MP.fsum(u * u for u in _mp(v)) / 4)),
    Identity("rms[tiny]", "rms", lambda v: jnp.sqrt(jnp.sum(v**2) / 4.0), (f32(3e-30, -2e-30, 1e-30, 0.0),),
             lambda v: MP.sqrt(MP.fsum(u * u for u in _mp(v)) / 4)),
    # the two-pass deviations scaled by powers of two, squared, summed, rooted, then squared: 3 ulps
    Identity("var[jnp.var]", "var", jnp.var, (f32(2e19, -2e19, 0.0, 0.0),),
             lambda x: MP.fsum((v - MP.fsum(_mp(x)) / 4) ** 2 for v in _mp(x)) / 4),
    Identity("var[ddof=1, rows]", "var", lambda x: jnp.var(x, axis=1, ddof=1),
             (np.array([[2e19, -1e19, 5e18, 0.0], [1.0, 1.0 + 2**-20, 1.0, 1.0 - 2**-21]], F32),),
             lambda x: [MP.fsum((v - MP.fsum(r) / 4) ** 2 for v in r) / 3 for r in _rows(x)]),
    # the program's mean overflows in its sum (terms near the float max): the variance rule, which
    # reuses that mean, takes the mean of the scaled values instead
    Identity("variance[overflowing mean]", "variance", lambda x: jnp.mean(x**2) - jnp.mean(x) ** 2,
             (f32(3e38, 3.2e38, 2.9e38, 3.1e38),),
             lambda x: MP.fsum((v - MP.fsum(_mp(x)) / 4) ** 2 for v in _mp(x)) / 4),
    # exp of the mean of 16 logs near 87.5: each log's rounding, 87.5·2^-25 absolute, becomes that
    # much relative error in the exp: the form as written is 4 to 7 bits off, the rule's under 1
    Identity("exp_mean_log", "exp_mean_log", lambda x: jnp.exp(jnp.mean(jnp.log(x))),
             (np.array([1e38, 3e37, 2.5e38, 7e37] * 4, F32),),
             lambda x: MP.exp(MP.fsum(MP.log(v) for v in _mp(x)) / 16), bits=1.0, wrong=4.0),
    Identity("focal[written sigmoid]", "one_minus_sigmoid",
             lambda z: (lambda p: -((1.0 - p) ** 2) * jnp.log(p))(1 / (1 + jnp.exp(-z))),
             (f32(-100.0, 15.0, 20.0, -3.0),),
             lambda z: [(1 / (1 + MP.exp(v))) ** 2 * MP.log1p(MP.exp(-v)) for v in _mp(z)]),
    # a mixture's log-likelihood: weights (one of them 0) times exp of log-likelihoods that overflow
    Identity("weighted_lse[mixture]", "weighted_lse",
             lambda w, x: jnp.log(jnp.sum(w * jnp.exp(x), axis=-1)),
             (np.array([[0.5, 0.0, 0.25, 0.25], [0.1, 0.2, 0.3, 0.4]], F32),
              np.array([[100.0, 3.0, 99.0, -200.0], [-120.0, -130.0, -125.0, -140.0]], F32)),
             lambda w, x: [MP.log(MP.fsum(u * MP.exp(v) for u, v in zip(rw, rx)))
                           for rw, rx in zip(_rows(w), _rows(x))]),
    # a Gaussian mixture's log-likelihood written with jax.scipy.stats.norm.pdf (exp of its logpdf):
    # the (1, 3) weights broadcast against the (4, 3) densities by mul itself; 30 sigma out of every
    # component all three densities underflow, the sum is 0 and the log -inf
    Identity("weighted_lse[norm.pdf mixture, broadcast weights]", "weighted_lse",
             lambda x: jnp.log(jnp.sum(_MIX_W * jax.scipy.stats.norm.pdf(x[:, None], _MIX_MU, _MIX_SIG),
                                       axis=-1)),
             (f32(-60.0, 0.5, 45.0, 200.0),),
             lambda x: [MP.log(MP.fsum(w * MP.npdf(v, m, s) for w, m, s in
                                       zip(_mp(_MIX_W), _mp(_MIX_MU), _mp(_MIX_SIG)))) for v in _mp(x)]),
    # a negative weight (a difference of two densities): the signed form, where the sum is positive
    Identity("weighted_lse[signed]", "weighted_lse", lambda w, x: jnp.log(jnp.sum(w * jnp.exp(x))),
             (f32(2.0, -1.0, 0.5, 3.0), f32(100.0, 99.0, 30.0, -150.0)),
             lambda w, x: MP.log(MP.fsum(u * MP.exp(v) for u, v in zip(_mp(w), _mp(x))))),
    # the Bernoulli log-likelihood with logits as the textbook writes it: y·x - softplus(x) is 0 in
    # float32 at x = 20, y = 1 (exactly -2.1e-9), and the binomial's k·x - n·log1p(exp x) overflows
    Identity("logit_likelihood[y*x - log1p(exp x)]", "logit_likelihood",
             lambda x, y: y * x - jnp.log1p(jnp.exp(x)),
             (f32(20.0, 35.0, -30.0, 0.5), f32(1.0, 1.0, 0.0, 0.25)),
             lambda x, y: [u * v - MP.log1p(MP.exp(v)) for v, u in zip(_mp(x), _mp(y))]),
    Identity("logit_likelihood[loss: softplus(x) - x*y]", "logit_likelihood",
             lambda x, y: jax.nn.softplus(x) - x * y, (f32(18.0, 40.0, -25.0, 2.0), f32(1.0, 1.0, 0.0, 0.75)),
             lambda x, y: [MP.log1p(MP.exp(v)) - u * v for v, u in zip(_mp(x), _mp(y))]),
    Identity("logit_likelihood[c + k*x - n*log(1 + exp x)]", "logit_likelihood",
             lambda c, k, x: c + k * x - 20.0 * jnp.log(1 + jnp.exp(x)),
             (f32(0.0, 0.0, 1.5, 0.0), f32(20.0, 20.0, 3.0, 20.0), f32(60.0, 25.0, -2.0, 1e3)),
             lambda c, k, x: [a + u * v - 20 * MP.log1p(MP.exp(v))
                              for a, u, v in zip(_mp(c), _mp(k), _mp(x))]),
    # SciPy's logsumexp(a, b=...) as it was written, the shift the max over every entry, a pruned
    # (zero-weight) component's among them: the weighted terms underflow to 0 and the log is -inf.
    # The shift stays in x and is added back: its rounding (a - m, then + m) is the 3 bits allowed
    Identity("weighted_lse[log|sum(b exp(a - max a))| + max a]", "weighted_lse",
             lambda b, a: (lambda m: jnp.log(jnp.abs(jnp.sum(b * jnp.exp(a - m), axis=-1))) + m[..., 0])(
                 jnp.max(a, axis=-1, keepdims=True)),
             (np.array([[1.0, 0.0, 0.5], [0.2, 0.3, 0.0]], F32),
              np.array([[-1000.0, -2.0, -990.0], [-300.0, -310.0, 40.0]], F32)),
             lambda b, a: [MP.log(MP.fsum(u * MP.exp(v) for u, v in zip(rb, ra)))
                           for rb, ra in zip(_rows(b), _rows(a))], bits=3.0),
    # the same with a negative weight whose row sums below 0: log|sum|, the signed form's magnitude
    Identity("weighted_lse[log|sum| signed]", "weighted_lse",
             lambda b, a: (lambda m: jnp.log(jnp.abs(jnp.sum(b * jnp.exp(a - m), axis=-1))) + m[..., 0])(
                 jnp.max(a, axis=-1, keepdims=True)),
             (np.array([[1.0, 0.0, -2.0]], F32), np.array([[-1000.0, -2.0, -1000.5]], F32)),
             lambda b, a: [MP.log(abs(MP.fsum(u * MP.exp(v) for u, v in zip(rb, ra))))
                           for rb, ra in zip(_rows(b), _rows(a))], bits=3.0),
    # two normalised vectors and a sum of four products: each rounds, 3 ulps
    Identity("cosine[linalg.norm]", "cosine",
             lambda a, b: jnp.dot(a, b) / (jnp.linalg.norm(a) * jnp.linalg.norm(b)),
             (f32(1e30, 2e30, 3e29, 5e30), f32(2e25, 1e25, 7e25, 3e24)),
             lambda a, b: MP.fsum(u * v for u, v in zip(_mp(a), _mp(b)))
             / MP.sqrt(MP.fsum(u * u for u in _mp(a)) * MP.fsum(v * v for v in _mp(b)))),
    Identity("cosine[sqrt(ss * ss), rows]", "cosine",
             lambda a, b: jnp.sum(a * b, -1) / jnp.sqrt(jnp.sum(a * a, -1) * jnp.sum(b * b, -1)),
             (np.array([[1e-30, 3e-30, 2e-30], [1e20, 1e21, 5e20]], F32),
              np.array([[2e-25, 1e-25, 4e-25], [3e22, 2e21, 1e22]], F32)),
             lambda a, b: [MP.fsum(u * v for u, v in zip(ra, rb))
                           / MP.sqrt(MP.fsum(u * u for u in ra) * MP.fsum(v * v for v in rb))
                           for ra, rb in zip(_rows(a), _rows(b))]),
    # the lead's held-out spellings (written after the rules above, not from the benchmark): norms as
    # dot products of a vector with itself, batched rows
    Identity("cosine[dot / (sqrt(dot) sqrt(dot))]", "cosine",
             lambda a, b: jnp.dot(a, b) / (jnp.sqrt(jnp.dot(a, a)) * jnp.sqrt(jnp.dot(b, b))),
             (f32(-4e28, 2e30, 3e29, 1e30), f32(2e-25, -1e-25, 7e-25, 3e-24)),
             lambda a, b: MP.fsum(u * v for u, v in zip(_mp(a), _mp(b)))
             / MP.sqrt(MP.fsum(u * u for u in _mp(a)) * MP.fsum(v * v for v in _mp(b)))),
    Identity("cosine[a @ b / sqrt((a @ a) * (b @ b))]", "cosine",
             lambda a, b: (a @ b) / jnp.sqrt((a @ a) * (b @ b)),
             (f32(1e25, 3e25, -2e25), f32(5e24, 1e24, -4e24)),  # no cancellation in a @ b
             lambda a, b: MP.fsum(u * v for u, v in zip(_mp(a), _mp(b)))
             / MP.sqrt(MP.fsum(u * u for u in _mp(a)) * MP.fsum(v * v for v in _mp(b)))),
    # log of a ratio of sigmoids (a Bernoulli KL divergence's logs): each sigmoid underflows to 0 or
    # rounds to 1 at these logits, the ratio is 0/0; exact: log sigmoid(p) - log sigmoid(q)
    Identity("log_sigmoid_ratio[s(p) / s(q)]", "log_sigmoid_ratio",
             lambda p, q: jnp.log(jax.nn.sigmoid(p) / jax.nn.sigmoid(q)),
             (f32(-200.0, -120.0, 3.0, -104.0), f32(-150.0, -130.0, -110.0, 2.0)),
             lambda p, q: [MP.log(1 / (1 + MP.exp(-u))) - MP.log(1 / (1 + MP.exp(-v)))
                           for u, v in zip(_mp(p), _mp(q))]),
    Identity("log_sigmoid_ratio[(1 - s(p)) / (1 - s(q)), written]", "log_sigmoid_ratio",
             lambda p, q: jnp.log((1 - 1 / (1 + jnp.exp(-p))) / (1 - 1 / (1 + jnp.exp(-q)))),
             (f32(120.0, 40.0, 30.0, -2.0), f32(100.0, 45.0, -3.0, 20.0)),
             lambda p, q: [MP.log(1 - 1 / (1 + MP.exp(-u))) - MP.log(1 - 1 / (1 + MP.exp(-v)))
                           for u, v in zip(_mp(p), _mp(q))]),
    # a scale over 1 + exp(-x) at moderate x, where both forms are accurate (the rule is for the
    # gradient, see test_written_swish_gradient_is_finite): wrong=0 asserts nothing of the original
    Identity("scaled_sigmoid[y / (1 + exp(-x))]", "scaled_sigmoid",
             lambda y, x: y / (1 + jnp.exp(-x)), (f32(3.0, -1e30, 2.5, 7.0), f32(-20.0, 5.0, 0.5, 30.0)),
             lambda y, x: [u / (1 + MP.exp(-v)) for u, v in zip(_mp(y), _mp(x))], wrong=0.0),
]


@pytest.mark.parametrize("case", IDENTITIES, ids=str)
def test_identity_fires_and_is_accurate_where_the_written_form_fails(case: Identity):
    assert case.rule in jst.explain(case.fn, *case.args).rules
    exact = case.exact(*case.args)
    original = np.asarray(jax.jit(case.fn)(*case.args))  # jit: numpy's own ops would warn
    stabilized = np.asarray(jax.jit(jst.stabilize(case.fn))(*case.args))
    # each row is chosen where the form as written fails: this asserts the rule matters
    assert _bits(original, exact, F32) >= case.wrong or not np.all(np.isfinite(original)), original
    assert _bits(stabilized, exact, F32) <= case.bits, (stabilized, exact)


def test_logit_likelihood_gradient_is_k_sigmoid_minus_x_less_the_rest():
    # d/dx (k·x - n·softplus(x)) = k·s(-x) - (n - k)·s(x); autodiff of the written form gives
    # k - n·s(x), 0 in float32 at x = 20, k = n = 1 (exactly 2.1e-9). 2 bits: two sigmoids, a
    # product and a difference of terms of one sign or of a small one
    x, k = f32(20.0, 30.0, -15.0, 1.0), f32(1.0, 1.0, 0.0, 0.5)

    def fn(x, k):
        return k * x - jax.nn.softplus(x)

    grad = jax.vmap(jax.grad(jst.stabilize(fn)))(x, k)
    exact = [u / (1 + MP.exp(v)) - (1 - u) / (1 + MP.exp(-v)) for v, u in zip(_mp(x), _mp(k))]
    assert _bits(np.asarray(jax.vmap(jax.grad(fn))(x, k)), exact, F32) >= 8  # as written
    assert _bits(np.asarray(grad), exact, F32) <= 2


def test_logit_likelihood_keeps_a_normal_product_of_a_count_and_a_subnormal_tail():
    # numpyro's binomial log-probability at logits a regression head produces: k = n = 20 at x = 90 is
    # -20·softplus(-90) = -1.64e-38, a normal float32 whose factor e^-90 is subnormal (XLA:CPU flushes it:
    # 0, 23 bits); k = 0 at x = -90 likewise. The value and the gradient in x (k·s(-x) - (n - k)·s(x),
    # the same tails) within 2 bits: e^(y+24), two products, the difference of terms of one sign.
    x, k = f32(90.0, -90.0, 88.0, 89.5, 30.0), f32(20.0, 0.0, 19.0, 20.0, 7.0)
    n = np.float32(20.0)

    def fn(x, k):
        return k * x - n * jnp.log1p(jnp.exp(x))

    value = np.asarray(jax.jit(jax.vmap(jst.stabilize(fn)))(x, k))
    grad = np.asarray(jax.jit(jax.vmap(jax.grad(jst.stabilize(fn))))(x, k))
    mn = MP.mpf(float(n))
    exact = [u * v - mn * MP.log1p(MP.exp(v)) for v, u in zip(_mp(x), _mp(k))]
    slope = [u / (1 + MP.exp(v)) - (mn - u) / (1 + MP.exp(-v)) for v, u in zip(_mp(x), _mp(k))]
    assert _bits(value, exact, F32) <= 2, value
    assert _bits(grad, slope, F32) <= 2, grad


# ------------------------------------------------------------------------------------ near misses
def test_a_selection_that_is_not_only_a_selection_is_not_moved():
    # a gather whose out-of-bounds fill is a finite number: log(fill) is not the fill
    def filled(x):
        p = jax.nn.softmax(x)
        return jnp.log(p.at[jnp.array([1, 9])].get(mode="fill", fill_value=0.5))

    assert "log_select_softmax" not in jst.explain(filled, LOGITS[0]).rules

    # a called function that computes with the probabilities (not only picks them)
    @jax.jit
    def scaled_pick(p, i):
        return 2.0 * p[i]

    assert "log_select_softmax" not in jst.explain(
        lambda x: jnp.log(scaled_pick(jax.nn.softmax(x), 3)), LOGITS[0]).rules


def test_near_misses_of_the_written_forms():
    x = f32(1.0, 2.0, 3.0)
    assert "softplus_minus" not in jst.explain(lambda x: jax.nn.softplus(x) + x, x).rules
    assert "softplus_minus" not in jst.explain(lambda x: jax.nn.softplus(x) - 2 * x, x).rules
    assert "written_sigmoid" not in jst.explain(lambda x: jnp.exp(x) / (2 + jnp.exp(x)), x).rules
    assert "written_tanh" not in jst.explain(lambda x: (jnp.exp(x) - 1) / (jnp.exp(x) + 2), x).rules
    assert "sech2" not in jst.explain(lambda x: 1 - jnp.tanh(x) ** 3, x).rules
    # the norms of other vectors than those of the dot product: no cosine
    assert "cosine" not in jst.explain(
        lambda a, b: jnp.dot(a, b) / (jnp.linalg.norm(a) * jnp.linalg.norm(a)), x, x).rules
    # log(mean(exp(x))) keeps its own rule; sqrt(mean((x - mean)²)) is a standard deviation
    assert jst.explain(lambda x: jnp.log(jnp.mean(jnp.exp(x))), x).rules == ["log_mean_exp"]
    assert jst.explain(lambda x: jnp.sqrt(jnp.mean((x - jnp.mean(x)) ** 2)), x).rules == ["std"]


# ------------------------------------------------------------------------------ the opt-in mean
WITH_MEAN = [*jst.rewrites.STABILITY, "mean"]


def test_mean_is_opt_in_and_fixes_the_overflowing_sum():
    x = np.full((2, 8), 3e38, F32)
    fn = lambda x: jnp.mean(x, axis=-1)
    assert "mean" not in jst.explain(fn, x).rules  # not in the default catalogue
    assert jst.explain(fn, x, rules=WITH_MEAN).rules == ["mean"]
    assert not np.isfinite(np.asarray(jax.jit(fn)(x))).any()  # the sum overflows as written
    got = np.asarray(jax.jit(jst.stabilize(fn, rules=WITH_MEAN))(x))
    # the scalings are exact; the partial sums 3/8·x, 5/8·x, 7/8·x round, as any float sum does
    assert _bits(got, [MP.fsum(r) / 8 for r in _rows(x)], F32) <= 1.0
    g = np.asarray(jax.grad(lambda v: jnp.sum(jst.stabilize(fn, rules=WITH_MEAN)(v)))(x))
    np.testing.assert_array_equal(g, np.full_like(x, 1 / 8))  # d mean / dx = 1/8, exactly
    # a quotient by another count than the number of terms is no mean
    assert "mean" not in jst.explain(lambda x: jnp.sum(x) / 7.0, x[0], rules=WITH_MEAN).rules


def test_the_mean_rewrite_agrees_with_the_mean_where_the_sum_is_finite():
    x = np.linspace(-3.0, 7.0, 24, dtype=F32).reshape(3, 8)
    got = np.asarray(jst.stabilize(lambda x: jnp.mean(x, axis=1), rules=WITH_MEAN)(x))
    np.testing.assert_array_equal(got, np.asarray(jnp.mean(x, axis=1)))  # the same float ops there


def test_mean_over_a_row_of_large_terms_by_check():
    # the default budget (100 inputs): with 60, one seed in ten drew no column whose sum overflows
    result = jst.check(lambda x: x.mean(axis=0), shapes=[(8, 4)], dtype="float32", domain=(0.0, 3e38),
                       judge="accuracy", seed=3, rules=WITH_MEAN)
    assert result.original.overflows > 0  # the program as written overflows in its sum
    assert result.rewritten.overflows == 0 and result.rewritten.max_error_bits <= 2.0, result.rewritten


def test_lse_minus_a_logit_of_another_row_keeps_the_written_value():
    # x[0, 0] is subtracted from every row's logsumexp: only row 0 picks from its own row; the
    # others keep logsumexp(x_r) - x[0, 0] (checked as the program runs, not assumed)
    fn = lambda x: jax.nn.logsumexp(x, axis=1) - x[0, 0]
    rows = _rows(LOGITS)
    want = [_lse(r) - rows[0][0] for r in rows]
    got = np.asarray(jax.jit(jst.stabilize(fn))(LOGITS))
    assert _bits(got, want, F32) <= 1.0, got
    # a label from a permuted row: the same
    perm = lambda x: jax.nn.logsumexp(x, axis=1) - x[jnp.array([1, 0, 3, 2]), jnp.array([0, 0, 2, 7])]
    want = [_lse(rows[r]) - rows[q][j] for r, (q, j) in enumerate([(1, 0), (0, 0), (3, 2), (2, 7)])]
    got = np.asarray(jax.jit(jst.stabilize(perm))(LOGITS))
    assert _bits(got, want, F32) <= 1.0, got


def test_index_arithmetic_is_not_where_guarded():
    # take_along_axis wraps negative labels with an integer where: no derivative there to guard
    fn = lambda x: jnp.take_along_axis(x, jnp.array([[1], [-1], [0], [2]]), axis=1)
    assert jst.explain(fn, LOGITS).rules == []


def test_a_selected_softmax_kept_for_another_use_stays():
    def f(x):
        p = jax.nn.softmax(x)
        return -jnp.log(p[..., 2]), p  # p is also returned

    loss, p = jax.jit(jst.stabilize(f))(LOGITS)
    np.testing.assert_array_equal(np.asarray(p), np.asarray(jax.nn.softmax(LOGITS)))
    assert _bits(np.asarray(loss), _xent_exact(LOGITS, [(r, 2) for r in range(4)]), F32) <= 2.0


# ------------------------------------------------------------------------------------- gradients
def _softmax_rows(x: np.ndarray) -> list[list[Any]]:
    return [[MP.exp(v - _lse(r)) for v in r] for r in _rows(x)]


def _xent_grad(x: np.ndarray) -> list[Any]:
    # d/dx_j sum_r -log softmax(x_r)[6] = softmax(x_r)_j - [j == 6]
    return [p - (1 if j == 6 else 0) for row in _softmax_rows(x) for j, p in enumerate(row)]


_LL = f32(90.0, 3.0, 89.0, 88.6)  # log-likelihoods whose exp overflows float32 (above 88.7)

GRADIENTS = [
    # softmax(x)_j = exp(x_j - lse) with x_j - lse down to -40 here, rounded: exp turns that into
    # 40·2^-24 relative, 5.3 bits. (Where the picked entry dominates its row, p - 1 cancels in every
    # log_softmax's derivative, jax.nn's too: column 6 is nowhere dominant.)
    ("log_select_softmax", lambda x: -jnp.log(jax.nn.softmax(x)[:, 6]), (LOGITS,), _xent_grad, 6.0),
    ("softplus_minus", lambda x: jax.nn.softplus(x) - x, (f32(20.0, 30.0, 60.0, -5.0),),
     lambda x: [-1 / (1 + MP.exp(v)) for v in _mp(x)], 1.0),
    ("written_sigmoid", lambda x: jnp.exp(x) / (1 + jnp.exp(x)), (f32(60.0, -80.0, 3.0),),
     lambda x: [MP.exp(-v) / (1 + MP.exp(-v)) ** 2 for v in _mp(x)], 2.0),
    # d/dw_i log(sum(w·exp(x))) = exp(x_i - r): finite at w_i = 0, where log|w| is not. r ≈ 89.6 is
    # rounded to half an ulp (2^-18): exp(x_i - r) carries that as relative error, 2^6 ulps at most
    ("weighted_lse", lambda w: jnp.log(jnp.sum(w * jnp.exp(_LL))), (f32(0.5, 0.0, 0.25, 0.25),),
     lambda w: [MP.exp(v) / MP.fsum(u * MP.exp(t) for u, t in zip(_mp(w), _mp(_LL))) for v in _mp(_LL)],
     6.0),
    # d rms / dv = v / (n rms): the root and the quotient round: 3 ulps
    ("rms", lambda v: jnp.sqrt(jnp.mean(v**2)), (f32(3e38, -2e38, 1e38, 3.3e38),),
     lambda v: [u / (4 * MP.sqrt(MP.fsum(w * w for w in _mp(v)) / 4)) for u in _mp(v)], 2.0),
]


@pytest.mark.parametrize(("rule", "fn", "args", "grad", "tol"), GRADIENTS, ids=[g[0] for g in GRADIENTS])
def test_gradient_of_the_stabilized_form_is_finite_and_accurate(rule, fn, args, grad, tol):
    assert rule in jst.explain(fn, *args).rules
    got = np.asarray(jax.jit(jax.grad(lambda *a: jnp.sum(jst.stabilize(fn)(*a))))(*args))
    assert np.isfinite(got).all(), got
    assert _bits(got, grad(args[0]), F32) <= tol, got


# -------------------------------------------------------------------------------------- families
_LAB4 = jnp.array([1, 7, 0, 4], dtype=jnp.int32)
_POS = (0.0, 3e38)


def _nll_sum(x):
    return -jnp.sum(jnp.log(jax.nn.softmax(x, axis=1)[jnp.arange(4), _LAB4]))


def _nll_dynamic(x):
    return -jnp.log(lax.dynamic_index_in_dim(jax.nn.softmax(x), 5, axis=0, keepdims=False))


FAMILIES: dict[str, tuple[Callable[..., Any], list[tuple[int, ...]], Any, bool]] = {
    # name: (fn, shapes, domain, wrong as written at this seed: asserted so the row can fail)
    "nll[softmax(axis=1)[arange, labels].sum()]": (_nll_sum, [(4, 8)], None, True),
    "nll[dynamic_index_in_dim]": (_nll_dynamic, [(8,)], None, True),
    "optax xent[lse - take_along_axis(x, labels)[..., 0]]": (
        lambda x: jax.nn.logsumexp(x, axis=-1)
        - jnp.take_along_axis(x, _LAB4[:, None], axis=-1)[..., 0], [(4, 8)], None, True),
    "mixture log-likelihood[log(sum(pi * exp(ll), -1))]": (
        lambda pi, ll: jnp.log(jnp.sum(pi * jnp.exp(ll), axis=-1)), [(4, 8), (4, 8)],
        [(0.0, 1.0), (-1e4, 1e4)], True),
    "logaddexp(x, 0) - x": (lambda x: jnp.logaddexp(x, 0.0) - x, [(8,)], None, True),
    "exp(z) / (exp(z) + 1.0)": (lambda z: jnp.exp(z) / (jnp.exp(z) + 1.0), [(8,)], None, True),
    "(1 - exp(-2x)) / (1 + exp(-2x))": (
        lambda x: (1 - jnp.exp(-2 * x)) / (1 + jnp.exp(-2 * x)), [(8,)], None, True),
    "1.0 - jnp.square(jnp.tanh(x))": (lambda x: 1.0 - jnp.square(jnp.tanh(x)), [(8,)], None, False),
    "sqrt(mean(square(v), -1))": (lambda v: jnp.sqrt(jnp.mean(jnp.square(v), axis=-1)), [(4, 8)], None,
                                  True),
    "cosine rows[sum(a*b) / (sqrt * sqrt)]": (
        lambda a, b: jnp.sum(a * b, -1) / (jnp.sqrt(jnp.sum(a**2, -1)) * jnp.sqrt(jnp.sum(b**2, -1))),
        [(4, 8), (4, 8)], _POS, True),
    "log(exp(a) - exp(b)), a > b": (lambda a, b: jnp.log(jnp.exp(a) - jnp.exp(b)), [(8,), (8,)],
                                    [(0.0, 1e4), (-1e4, 0.0)], True),
}
FLOAT64 = ["nll[softmax(axis=1)[arange, labels].sum()]", "logaddexp(x, 0) - x",
           "optax xent[lse - take_along_axis(x, labels)[..., 0]]",
           "mixture log-likelihood[log(sum(pi * exp(ll), -1))]",
           "exp(z) / (exp(z) + 1.0)", "sqrt(mean(square(v), -1))", "log(exp(a) - exp(b)), a > b"]
CASES = [(n, "float32") for n in FAMILIES] + [(n, "float64") for n in FLOAT64]


@pytest.mark.parametrize(("name", "dtype"), CASES, ids=[f"{n}-{d}" for n, d in CASES])
def test_family_is_fixed_by_stabilize(name: str, dtype: str):
    fn, shapes, domain, wrong = FAMILIES[name]
    result = jst.check(fn, shapes=shapes, dtype=dtype, domain=domain, judge="accuracy", seed=3,
                       max_examples=60, name=name)
    original, rewritten = result.original, result.rewritten
    detail = (f"{name} {dtype}: original {original.mean_error_bits:.1f} mean / "
              f"{original.max_error_bits:.1f} max bits / {original.overflows} overflows; rewritten "
              f"{rewritten.mean_error_bits:.1f} / {rewritten.max_error_bits:.1f} / {rewritten.overflows}")
    assert result.rewrites, detail  # the catalogue fired, without search
    if wrong:
        assert original.max_error_bits > 8.0 or original.overflows > 0, detail
    assert rewritten.mean_error_bits <= 2.0, detail
    if rewritten.max_error_bits > 8.0:
        # Only where the problem itself is that ill-conditioned (a mixture's weighted sum that cancels:
        # 64 bits of conditioning): the stability lens on the same draws must find the rewritten function
        # within the tolerance beyond its conditioning.
        stable = jst.check(fn, shapes=shapes, dtype=dtype, domain=domain, seed=3, max_examples=60,
                           name=name).rewritten
        assert stable.beyond_bits is not None and stable.beyond_bits <= 8.0, (detail, stable)
    assert rewritten.overflows == 0, detail
    # never worse than the program as written (half a bit: one rounding placed differently)
    assert rewritten.max_error_bits <= original.max_error_bits + 0.5, detail
    assert rewritten.mean_error_bits <= original.mean_error_bits + 0.5, detail


@pytest.mark.parametrize(("fn", "k"), [(lambda x: x / (1 + jnp.exp(-x)), 1.0),
                                       (lambda x: x / (jnp.exp(-x) + 1.0), 1.0),
                                       (lambda x: 2.0 * x / (1 + jnp.exp(-2.0 * x)), 2.0)],
                         ids=["x/(1+exp(-x))", "x/(exp(-x)+1)", "2x/(1+exp(-2x))"])
def test_written_swish_gradient_is_finite(fn, k):
    # The written swish's derivative is inf/inf = NaN once exp(-x) overflows (x < -88.7 in float32);
    # the exact derivative there is sigmoid(x)(1 + x(1 - sigmoid(x))), a subnormal or smaller number
    # (flushed to 0 on XLA:CPU): the rewrite's is finite and that small. At moderate x it agrees with
    # mpmath to 4 bits (an exp, a sum, a quotient and its derivative's products, each rounded).
    x = f32(-100.0, -95.0, -89.0)
    assert not np.all(np.isfinite(np.asarray(jax.vmap(jax.grad(fn))(x))))
    grad = np.asarray(jax.vmap(jax.grad(jst.stabilize(fn)))(x))
    assert np.all(np.isfinite(grad)) and np.all(np.abs(grad) < 1e-30), grad
    xs = f32(-20.0, -3.0, 0.5, 4.0)
    got = np.asarray(jax.vmap(jax.grad(jst.stabilize(fn)))(xs))
    sig = [1 / (1 + MP.exp(-k * v)) for v in _mp(xs)]  # d/dx kx·s(kx) = k s (1 + kx (1 - s))
    exact = [k * s * (1 + k * v * (1 - s)) for s, v in zip(sig, _mp(xs))]
    assert _bits(got, exact, F32) <= 4.0, (got, exact)
