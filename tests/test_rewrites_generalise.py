"""The catalogue generalises (issue 26, item 3): the spellings of everyday losses, fixed without search.

Three kinds of test:

- identities: every new rule (and every new spelling of an old one) fires on a small expression and
  the stabilized value is within a stated number of bits of an mpmath reference at 256 bits (or
  more for float64 results near the underflow), at inputs where the expression as written fails;
- the matcher: a ``recompute`` sub-term that the program shares is left for its other uses, and a
  ``composable`` rule's result is continued by another rule;
- families: each loss written as users write it (jnp vs lax vs jax.nn, ``1 - p`` vs ``1.0 - p``,
  mean vs sum/n, keepdims, axes, division vs multiplication by a reciprocal), fuzzed by
  ``jst.check(judge="accuracy")`` with a fixed seed: the rewritten program is within 2 bits mean and
  8 bits max of the exact result, never overflows where it is finite, and is never worse than the
  program as written.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import mpmath
import numpy as np
import pytest
from jax import lax

import pytest_jaxstab as jst
from pytest_jaxstab.oracles import error_bits
from pytest_jaxstab.oracles.core._rounding import round_to_dtype
from pytest_jaxstab.rewrites import Rule
from pytest_jaxstab.rewrites import pattern as p

# The slow tier (`make test-slow`, run in full by CI; `make test` leaves it out): docs/architecture.md,
# "Tests and their tiers".
pytestmark = pytest.mark.slow

MP: Any = mpmath.mp.clone()
MP.prec = 256  # far beyond the 53 bits any result is rounded to
F32, F64 = np.float32, np.float64


def _mp(a: Any) -> list[Any]:
    return [MP.mpf(float(v)) for v in np.asarray(a, np.float64).ravel()]


def _bits(got: Any, exact: list[Any] | Any, dtype: Any) -> float:
    exact = exact if isinstance(exact, list) else [exact]
    want = round_to_dtype(np.array(exact, dtype=object).reshape(np.shape(got)), dtype)
    return float(np.max(error_bits(np.asarray(got), want)))


# ------------------------------------------------------------------------------------ identities
@dataclasses.dataclass(frozen=True)
class Identity:
    """One rule (or spelling) with inputs where the expression as written fails, and the truth."""

    id: str
    rule: str
    fn: Callable[..., Any]
    args: tuple[np.ndarray, ...]
    exact: Callable[..., Any]  # lists of mpf (one per argument) -> mpf or list of mpf
    bits: float = 2.0  # a few roundings of a correctly rounded form: at most 3 ulps

    def __str__(self) -> str:
        return self.id


def _sig(v: Any) -> Any:
    return 1 / (1 + MP.exp(-v))


def _sp(v: Any) -> Any:
    return MP.log1p(MP.exp(v))


def _bce_shared(z: Any, y: Any) -> Any:
    s = jax.nn.sigmoid(z)
    return -(y * jnp.log(s) + (1 - y) * jnp.log(1 - s))


def _entropy(x: Any) -> Any:
    q = jax.nn.softmax(x)
    return -jnp.sum(q * jnp.log(q))


def _mp_entropy(x: list[Any]) -> Any:
    lse = MP.log(MP.fsum(MP.exp(v) for v in x))
    return -MP.fsum(MP.exp(v - lse) * (v - lse) for v in x)


def _mp_terms(x: list[Any]) -> list[Any]:
    lse = MP.log(MP.fsum(MP.exp(v) for v in x))
    return [MP.exp(v - lse) * (v - lse) for v in x]


def _mp_std(x: list[Any], ddof: int = 0) -> Any:
    m = MP.fsum(x) / len(x)
    return MP.sqrt(MP.fsum((v - m) ** 2 for v in x) / (len(x) - ddof))


def _gelu_tanh(v: Any) -> Any:
    c = MP.sqrt(2 / MP.pi)
    # jax.nn.gelu's constants as float32 values, so the reference is the formula the code computes
    k, c32 = MP.mpf(float(F32(0.044715))), MP.mpf(float(F32(c)))
    return v * (1 + MP.tanh(c32 * (v + k * v**3))) / 2


def f32(*v: float) -> np.ndarray:
    return np.array(v, F32)


IDENTITIES = [
    Identity("logit[div]", "logit", lambda z: (lambda s: jnp.log(s / (1 - s)))(jax.nn.sigmoid(z)),
             (f32(30.0, -30.0, 1e-6, 17.0),), lambda z: list(z), bits=0.0),
    Identity("logit[sub log1p]", "logit",
             lambda z: (lambda s: jnp.log(s) - jnp.log1p(-s))(lax.logistic(z)),
             (f32(30.0, -30.0, 1e-6, 17.0),), lambda z: list(z), bits=0.0),
    Identity("log_sigmoid[log1p(-p)]", "log_sigmoid", lambda z: jnp.log1p(-jax.nn.sigmoid(z)),
             (f32(30.0, 100.0, -20.0, 17.0),), lambda z: [-_sp(v) for v in z]),
    Identity("log_sigmoid[1-written sigmoid]", "log_sigmoid",
             lambda z: jnp.log(1.0 - 1 / (1 + jnp.exp(-z))),
             (f32(30.0, 100.0, -20.0, 17.0),), lambda z: [-_sp(v) for v in z]),
    Identity("softplus[log1p(exp)]", "softplus", lambda x: jnp.log1p(jnp.exp(x)),
             (f32(100.0, -20.0, 89.0, 0.5),), lambda x: [_sp(v) for v in x]),
    Identity("logsumexp[jax.nn]", "logsumexp", jax.nn.logsumexp,
             (f32(0.0, *([-20.0] * 15)),), lambda x: MP.log(MP.fsum(MP.exp(v) for v in x))),
    Identity("log_mean_exp[mean]", "log_mean_exp", lambda x: jnp.log(jnp.mean(jnp.exp(x))),
             (f32(1e-8, 3e-8, 2e-8, 4e-8),), lambda x: MP.log(MP.fsum(MP.exp(v) for v in x) / 4)),
    Identity("log_mean_exp[overflow]", "log_mean_exp",
             lambda x: jnp.log(jnp.sum(jnp.exp(x)) * 0.25),
             (f32(100.0, 99.0, -200.0, 95.0),), lambda x: MP.log(MP.fsum(MP.exp(v) for v in x) / 4)),
    # any constant divisor: log(sum(exp(x)) / n) = log(mean(exp(x))) + log(k / n)
    Identity("log_mean_exp[/3, 4 terms]", "log_mean_exp", lambda x: jnp.log(jnp.sum(jnp.exp(x)) / 3.0),
             (f32(100.0, 99.0, -200.0, 95.0),), lambda x: MP.log(MP.fsum(MP.exp(v) for v in x) / 3)),
    Identity("log_mean_exp[* 0.3]", "log_mean_exp",
             lambda x: jnp.log(jnp.sum(jnp.exp(x)) * 0.3),
             (f32(100.0, 99.0, -200.0, 95.0),),
             lambda x: MP.log(MP.fsum(MP.exp(v) for v in x) * MP.mpf(float(F32(0.3))))),
    Identity("log_prod", "log_prod", lambda x: jnp.log(jnp.prod(x)),
             (np.full(16, 1e5, F32),), lambda x: MP.fsum(MP.log(v) for v in x)),
    Identity("log_prod[negative]", "log_prod", lambda x: jnp.log(jnp.prod(x)),
             (f32(-1e20, -1e20, 3.0, 1e-30),), lambda x: MP.fsum(MP.log(abs(v)) for v in x)),
    Identity("prod_power[geometric mean]", "prod_power", lambda x: jnp.prod(x) ** (1 / 8),
             (f32(1e30, 3e29, 1e35, 2e31, 7e28, 1e30, 5e33, 1e32),),
             lambda x: MP.exp(MP.fsum(MP.log(v) for v in x) * MP.mpf(float(F32(1 / 8))))),
    Identity("prod_power[sqrt, underflow]", "prod_power", lambda x: jnp.sqrt(jnp.prod(x)),
             (f32(1e-20, 3e-21, 2e-20, 5e-10),), lambda x: MP.sqrt(MP.fprod(x))),
    # 1/3 is not a power of two: k·a is formed exactly by a two-product before exp
    Identity("exp_power[cube root]", "exp_power", lambda a: jnp.exp(a) ** (1 / 3),
             (f32(150.0, 200.0, -250.0, 100.0),),
             lambda a: [MP.exp(MP.mpf(float(F32(1 / 3))) * v) for v in a]),
    Identity("exp_power[sqrt]", "exp_power", lambda a: jnp.sqrt(jnp.exp(a)),
             (f32(100.0, 170.0, -150.0, 2.0),), lambda a: [MP.exp(v / 2) for v in a]),
    Identity("div_exp[x/exp]", "div_exp", lambda x, a: x / jnp.exp(a),
             (f32(1e30, 3.0, 1e-30, -2e20), f32(100.0, 1.0, -100.0, 120.0)),
             lambda x, a: [u * MP.exp(-v) for u, v in zip(x, a)]),
    Identity("div_exp[exp/exp]", "div_exp", lambda a, b: jnp.exp(a) / jnp.exp(b),
             (f32(100.0, -100.0, 3.0, 95.0), f32(99.0, -101.0, 1.0, 100.0)),
             lambda a, b: [MP.exp(u - v) for u, v in zip(a, b)], bits=3.0),
    Identity("div_exp[square / (c exp)]", "div_exp",
             lambda s, a: jnp.square(s) / (2 * jnp.exp(a)),
             (f32(1e20, 3.0, 1e-20, -2e25), f32(100.0, 1.0, -60.0, 110.0)),
             lambda s, a: [u * u * MP.exp(-v) / 2 for u, v in zip(s, a)]),
    Identity("log_scaled_exp", "log_scaled_exp", lambda x: jnp.log(2 * jnp.pi * jnp.exp(x)),
             (f32(100.0, -200.0, 3.0, 1e-3),),
             lambda x: [v + MP.log(MP.mpf(float(F32(2 * math.pi)))) for v in x]),
    # the argument u is the program's rounded polynomial (~1.5 ulps); sigmoid(2u) = exp(2u) there
    # turns that into |2u|·1.5 ulps relative: 17 at x = -5, 6 bits at most on these inputs
    Identity("one_plus_tanh[gelu]", "one_plus_tanh", jax.nn.gelu,
             (f32(-5.0, -8.0, -9.5, 3.0),), lambda x: [_gelu_tanh(v) for v in x], bits=6.0),
    Identity("sqdist[dot]", "sqdist", lambda a, b: jnp.sum(a**2) + jnp.sum(b**2) - 2 * jnp.dot(a, b),
             (f32(1e4, 2e4, 3e4, 1.0), f32(1e4 + 1, 2e4, 3e4 - 2, 1.5)),
             lambda a, b: MP.fsum((u - v) ** 2 for u, v in zip(a, b))),
    Identity("std[jnp.std]", "std", jnp.std, (f32(1e20, -1e20, 3e19, 0.0),), _mp_std),
    Identity("std[sqrt(mean(d**2))]", "std", lambda x: jnp.sqrt(jnp.mean((x - jnp.mean(x)) ** 2)),
             (f32(3e25, -1e25, 2e25, 0.0),), _mp_std),
    Identity("std[ddof=1]", "std", lambda x: jnp.std(x, ddof=1), (f32(1e30, -1e30, 5e29, 2e29),),
             lambda x: _mp_std(x, 1)),
    Identity("sum_p_log_p[entropy]", "sum_p_log_p", _entropy, (f32(0.0, *([-20.0] * 7)),),
             _mp_entropy),
    # p = 8e-71 is below float32: its term is exp(log p + log(-log p)), an exp of an argument near
    # -155 rounded to half an ulp: 155·2^-24 relative, 6 bits at most
    Identity("sum_p_log_p[underflow]", "sum_p_log_p", _entropy, (f32(80.0, -80.0, 0.0, -15.0),),
             _mp_entropy, bits=6.0),
    Identity("p_log_p[terms]", "p_log_p", lambda x: (lambda q: q * jnp.log(q))(jax.nn.softmax(x)),
             (f32(80.0, -80.0, 0.0, 79.0),), lambda x: _mp_terms(x), bits=6.0),
]


@pytest.mark.parametrize("case", IDENTITIES, ids=str)
def test_identity_fires_and_is_accurate_where_the_written_form_fails(case: Identity):
    assert case.rule in jst.explain(case.fn, *case.args).rules
    exact = case.exact(*(_mp(a) for a in case.args))
    original = np.asarray(case.fn(*case.args))
    stabilized = np.asarray(jax.jit(jst.stabilize(case.fn))(*case.args))
    # each row is chosen where the form as written fails: this asserts the rule matters
    assert _bits(original, exact, F32) >= 8 or not np.all(np.isfinite(original)), original
    assert _bits(stabilized, exact, F32) <= case.bits, (stabilized, exact)


def test_bce_with_a_shared_sigmoid_gets_a_softplus_in_each_log():
    z, y = f32(30.0, -30.0, 100.0, -100.0), f32(0.0, 1.0, 0.0, 1.0)
    assert jst.explain(_bce_shared, z, y).rules.count("log_sigmoid") == 2
    exact = [-(v * -_sp(-u) + (1 - v) * -_sp(u)) for u, v in zip(_mp(z), _mp(y))]
    got = np.asarray(jax.jit(jst.stabilize(_bce_shared))(z, y))
    assert _bits(got, exact, F32) <= 1.0, got
    grad = np.asarray(jax.grad(lambda z: jnp.sum(jst.stabilize(_bce_shared)(z, y)))(z))
    want = [_sig(u) - v for u, v in zip(_mp(z), _mp(y))]  # d BCE / dz = sigmoid(z) - y
    assert np.isfinite(grad).all() and _bits(grad, want, F32) <= 2.0, grad


def test_a_shared_sigmoid_keeps_its_value_for_its_other_uses():
    def f(z):
        s = jax.nn.sigmoid(z)
        return jnp.log(s), s  # s is also returned: it stays, the log gets its own form

    z = f32(-100.0, 0.5, 20.0)
    logs, s = jax.jit(jst.stabilize(f))(z)
    np.testing.assert_array_equal(np.asarray(s), np.asarray(jax.nn.sigmoid(z)))
    assert _bits(np.asarray(logs), [-_sp(-v) for v in _mp(z)], F32) <= 1.0


def test_prod_power_keeps_the_real_powers_of_a_negative_product():
    x = f32(-3.0, 2.0, 0.5, 7.0)  # the product is -21
    for c, want in ((3.0, MP.mpf(-21) ** 3), (2.0, MP.mpf(21) ** 2), (-1.0, 1 / MP.mpf(-21))):
        fn = lambda x, c=c: jnp.prod(x) ** c
        assert "prod_power" in jst.explain(fn, x).rules
        assert _bits(np.asarray(jst.stabilize(fn)(x)), want, F32) <= 2.0, c
    # a non-integer power of a negative number is not real: NaN, as pow gives
    assert np.isnan(np.asarray(jst.stabilize(lambda x: jnp.prod(x) ** 0.5)(x)))


# -------------------------------------------------------------------------------------- matcher
_x = p.var("x")


def test_recompute_lets_a_match_see_through_a_shared_sub_term():
    shared = Rule("t_log_exp_shared", p.op("log", p.op("exp", _x, recompute=True)), lambda x: x)
    private = Rule("t_log_exp_private", p.op("log", p.op("exp", _x)), lambda x: x)

    def f(v):
        e = jnp.exp(v)
        return jnp.log(e) + e  # exp(v) has another use

    v = f32(100.0, 1.0)
    assert jst.explain(f, v, rules=[private]).rules == []
    assert jst.explain(f, v, rules=[shared]).rules == ["t_log_exp_shared"]
    out = np.asarray(jst.stabilize(f, rules=[shared])(v))
    # log(e) became v; the other use still sees exp(v): inf at 100 in float32, 1 + e at 1
    assert out[0] == np.inf
    assert _bits(out[1:], [1 + MP.e], F32) <= 1.0


def test_composable_rule_result_is_continued_by_another_rule():
    # sigma**2 -> exp(2 log_sigma) (exp_power, composable), then x / exp(2 log_sigma) (div_exp)
    f = lambda x, ls: x / jnp.exp(ls) ** 2
    x, ls = f32(1e30, 3.0), f32(60.0, 1.0)
    assert jst.explain(f, x, ls).rules == ["exp_power", "div_exp"]
    exact = [u * MP.exp(-2 * v) for u, v in zip(_mp(x), _mp(ls))]
    assert not np.isfinite(np.asarray(f(x, ls))[0]) or np.asarray(f(x, ls))[0] == 0
    assert _bits(np.asarray(jst.stabilize(f)(x, ls)), exact, F32) <= 2.0


def test_a_final_rule_result_is_not_matched_again():
    # logsumexp's replacement contains log1p(sum(exp(...))): softplus's log1p(exp(x)) must not
    # fire inside it, nor log_mean_exp; the rules that fire are the user's pattern only
    x = f32(1.0, 2.0, 3.0)
    assert jst.explain(lambda x: jnp.log(jnp.sum(jnp.exp(x))), x).rules == ["logsumexp"]


def test_near_misses_do_not_fire():
    x = f32(1.0, 2.0, 3.0, 4.0)
    # a divisor that is not a constant
    assert "log_mean_exp" not in jst.explain(lambda x: jnp.log(jnp.sum(jnp.exp(x)) / x[0]), x).rules
    # a sigmoid of another argument in the denominator is no logit
    assert "logit" not in jst.explain(
        lambda x: jnp.log(jax.nn.sigmoid(x) / (1 - jax.nn.sigmoid(2 * x))), x).rules
    # sum(a**2) + sum(b**2) - 3 a.b is not a squared distance
    assert "sqdist" not in jst.explain(
        lambda a, b: jnp.sum(a**2) + jnp.sum(b**2) - 3 * jnp.dot(a, b), x, x).rules
    # the product over one axis, the power unrelated: still valid (exp(c * sum(log x))) and fired
    assert "prod_power" in jst.explain(lambda x: jnp.prod(x) ** 3.0, x).rules
    # tanh plus 2 is not 2 sigmoid(2u)
    assert "one_plus_tanh" not in jst.explain(lambda x: 2 + jnp.tanh(x), x).rules


# ------------------------------------------------------------------------------------- families
def _bce_mean(z, y):
    s = jax.nn.sigmoid(z)
    return -jnp.mean(y * jnp.log(s) + (1 - y) * jnp.log(1 - s))


def _bce_lax(z, y):
    s = lax.logistic(z)
    return -jnp.sum(y * jnp.log(s) + (1.0 - y) * jnp.log1p(-s)) / z.shape[0]


def _bce_written(z, y):
    s = 1 / (1 + jnp.exp(-z))
    return -(y * jnp.log(s) + (1 - y) * jnp.log(1 - s))


def _logit_div(z):
    s = jax.nn.sigmoid(z)
    return jnp.log(s / (1 - s))


def _logit_sub(z):
    s = jax.nn.sigmoid(z)
    return jnp.log(s) - jnp.log1p(-s)


def _gnll(x, mu, log_sigma):
    sigma = jnp.exp(log_sigma)
    return jnp.mean(0.5 * ((x - mu) / sigma) ** 2 + jnp.log(sigma) + 0.5 * jnp.log(2 * jnp.pi))


def _gnll_var(x, mu, log_sigma):
    var = jnp.exp(log_sigma) ** 2
    return 0.5 * (jnp.log(2 * jnp.pi * var) + (x - mu) ** 2 / var)


def _entropy_rows(x):
    q = jax.nn.softmax(x, axis=-1)
    return -(q * jnp.log(q)).sum(axis=-1)


def _entropy_written(x):
    q = jnp.exp(x) / jnp.sum(jnp.exp(x))
    return -jnp.sum(q * jnp.log(q))


# Log-scales drawn over (-1e3, 1e3) and data over (-1e30, 1e30): a log-scale of 1e30 is no scale
# anyone fits, and x - mu itself overflows for data near the float max (the spelling's own limit,
# which no rewrite of the division removes). Everything else is drawn over the whole float range.
_DATA, _LOGSCALE = (-1e30, 1e30), (-1e3, 1e3)
# The BCE spellings that sum 8 terms: logits up to 1e30, where the sum of terms near 3e38 overflows
# before the division by n (the mean's own limit: docs/architecture.md, "The rewrite catalogue").
_LOGIT = (-1e30, 1e30)

FAMILIES: dict[str, tuple[Callable[..., Any], list[tuple[int, ...]], Any]] = {
    # logistic / softplus algebra
    "bce[jax.nn, mean]": (_bce_mean, [(8,), (8,)], [_LOGIT, (0.0, 1.0)]),
    "bce[lax, log1p, sum/n]": (_bce_lax, [(8,), (8,)], [_LOGIT, (0.0, 1.0)]),
    "bce[written sigmoid]": (_bce_written, [(8,), (8,)], [None, (0.0, 1.0)]),
    "logit[log(p/(1-p))]": (_logit_div, [(8,)], (-80.0, 80.0)),
    "logit[log p - log1p(-p)]": (_logit_sub, [(8,)], (-80.0, 80.0)),
    "log_sigmoid[log(sigmoid)]": (lambda z: jnp.log(jax.nn.sigmoid(z)), [(8,)], None),
    "log_sigmoid[log(1.0 - sigmoid)]": (lambda z: jnp.log(1.0 - jax.nn.sigmoid(z)), [(8,)], None),
    # softplus
    "softplus[log1p(exp)]": (lambda x: jnp.log1p(jnp.exp(x)), [(8,)], None),
    "softplus[log(1 + exp)]": (lambda x: jnp.log(1 + jnp.exp(x)), [(8,)], None),
    "softplus[log(exp + 1.0)]": (lambda x: jnp.log(jnp.exp(x) + 1.0), [(8,)], None),
    # log-mean-exp
    "lme[log(mean(exp))]": (lambda x: jnp.log(jnp.mean(jnp.exp(x))), [(8,)], None),
    "lme[log(sum/n)]": (lambda x: jnp.log(jnp.sum(jnp.exp(x)) / x.shape[0]), [(8,)], None),
    "lme[sum * (1/n), axis=-1]": (lambda x: jnp.log(jnp.sum(jnp.exp(x), axis=-1) * (1.0 / 8)),
                                  [(4, 8)], None),
    "lme[mean, axis=1, keepdims]": (lambda x: jnp.log(jnp.mean(jnp.exp(x), axis=1, keepdims=True)),
                                    [(4, 8)], None),
    # the library's own formulas
    "jax.nn.logsumexp": (jax.nn.logsumexp, [(16,)], None),
    "jax.nn.logsumexp[axis=-1]": (lambda x: jax.nn.logsumexp(x, axis=-1), [(4, 8)], None),
    "jax.nn.log_softmax": (jax.nn.log_softmax, [(16,)], None),
    "jax.nn.gelu": (jax.nn.gelu, [(8,)], None),
    "gelu[written]": (lambda x: 0.5 * x * (1 + jnp.tanh(jnp.sqrt(2 / jnp.pi) * (x + 0.044715 * x**3))),
                      [(8,)], None),
    "jnp.linalg.norm": (jnp.linalg.norm, [(8,)], None),
    "jnp.std": (jnp.std, [(8,)], None),
    "jnp.std[axis=-1]": (lambda x: jnp.std(x, axis=-1), [(4, 8)], None),
    "sqrt(jnp.var)": (lambda x: jnp.sqrt(jnp.var(x)), [(8,)], None),
    "std[written]": (lambda x: jnp.sqrt(jnp.mean((x - jnp.mean(x)) ** 2)), [(8,)], None),
    # products
    "log(prod)": (lambda x: jnp.log(jnp.prod(x)), [(8,)], (0.0, 1e30)),
    "log(prod, axis=-1)": (lambda x: jnp.log(jnp.prod(x, axis=-1)), [(4, 8)], (0.0, 1e30)),
    "prod**(1/n)": (lambda x: jnp.prod(x) ** (1 / 8), [(8,)], (0.0, 1e30)),
    "power(prod, 1.0/n)": (lambda x: jnp.power(jnp.prod(x, axis=0), 1.0 / x.shape[0]), [(6,)],
                           (0.0, 1e30)),
    # exponentials and log-scales
    "exp(a)**2": (lambda a: jnp.exp(a) ** 2, [(8,)], None),
    "x / exp(a)": (lambda x, a: x / jnp.exp(a), [(8,), (8,)], None),
    "gaussian nll[sigma = exp]": (_gnll, [(8,), (8,), (8,)], [_DATA, _DATA, _LOGSCALE]),
    "gaussian nll[var = exp**2]": (_gnll_var, [(8,), (8,), (8,)], [_DATA, _DATA, _LOGSCALE]),
    # entropy of a softmax
    "entropy[jax.nn.softmax]": (_entropy, [(8,)], None),
    "entropy[written softmax]": (_entropy_written, [(8,)], None),
    "entropy[rows, axis=-1]": (_entropy_rows, [(4, 8)], None),
    # expanded squared distance
    "sqdist[sum(a**2), dot]": (lambda a, b: jnp.sum(a**2) + jnp.sum(b**2) - 2 * jnp.dot(a, b),
                               [(8,), (8,)], None),
    "sqdist[(a*a).sum(), (a*b).sum()]": (
        lambda a, b: (a * a).sum() + (b * b).sum() - 2.0 * (a * b).sum(), [(8,), (8,)], None),
    "sqdist[square, 2 * a @ b]": (
        lambda a, b: jnp.sum(jnp.square(a)) - 2 * a @ b + jnp.sum(jnp.square(b)), [(8,), (8,)], None),
}

FLOAT64 = ["bce[jax.nn, mean]", "bce[written sigmoid]", "logit[log(p/(1-p))]",
           "log_sigmoid[log(sigmoid)]", "softplus[log1p(exp)]", "lme[sum * (1/n), axis=-1]",
           "jax.nn.logsumexp", "jax.nn.log_softmax", "jnp.linalg.norm", "jnp.std", "std[written]",
           "log(prod)", "prod**(1/n)", "exp(a)**2", "x / exp(a)", "entropy[jax.nn.softmax]",
           "entropy[rows, axis=-1]",
           "sqdist[sum(a**2), dot]"]

# (Where one logit dominates a row by ~88 in float32, the other terms p·log p are near or below the
# smallest normal float and lose up to 13 bits: docs/architecture.md, "The rewrite catalogue". These draws do
# not reach that corner.)
CASES = [(n, "float32") for n in FAMILIES] + [(n, "float64") for n in FLOAT64]
OLD_JAX = tuple(int(v) for v in jax.__version__.split(".")[:2]) < (0, 11)
# On the oldest JAX we support (0.10), log1p/expm1 round differently: at the worst drawn row the
# rewritten log-mean-exp loses 9.3 bits where the problem's conditioning explains 6.6 (the form is
# stable, `m + log1p(...)` cancels as the problem does); the test's stability re-check of a max over
# 8 bits accepts it, so no case is missed on 0.10 any more.
OLD_JAX_MISSES: set[tuple[str, str]] = set()
CASES = [pytest.param(*c, marks=pytest.mark.xfail(reason="jax 0.10 rounding, see OLD_JAX_MISSES"))
         if OLD_JAX and c in OLD_JAX_MISSES else c for c in CASES]


@pytest.mark.parametrize(("name", "dtype"), CASES,
                         ids=[f"{c.values[0]}-{c.values[1]}" if hasattr(c, "values") else f"{c[0]}-{c[1]}"
                              for c in CASES])
def test_family_is_fixed_by_stabilize(name: str, dtype: str):
    fn, shapes, domain = FAMILIES[name]
    result = jst.check(fn, shapes=shapes, dtype=dtype, domain=domain, judge="accuracy", seed=1,
                       max_examples=60, name=name)
    original, rewritten = result.original, result.rewritten
    detail = (f"{name} {dtype}: original {original.mean_error_bits:.1f} mean / "
              f"{original.max_error_bits:.1f} max bits / {original.overflows} overflows; rewritten "
              f"{rewritten.mean_error_bits:.1f} / {rewritten.max_error_bits:.1f} / {rewritten.overflows}")
    assert result.rewrites, detail  # the catalogue fired, without search
    assert rewritten.mean_error_bits <= 2.0, detail
    if rewritten.max_error_bits > 8.0:
        # Only where the problem itself is that ill-conditioned (log-mean-exp of values near 0: a result
        # near 0 moved by its inputs' rounding, 23 bits of conditioning): the stability lens on the same
        # draws must find the rewritten function within the tolerance beyond its conditioning.
        stable = jst.check(fn, shapes=shapes, dtype=dtype, domain=domain, seed=1, max_examples=60,
                           name=name).rewritten
        assert stable.beyond_bits is not None and stable.beyond_bits <= 8.0, (detail, stable)
    assert rewritten.overflows == 0, detail
    # never worse than the program as written (half a bit: one rounding placed differently)
    assert rewritten.max_error_bits <= original.max_error_bits + 0.5, detail
    assert rewritten.mean_error_bits <= original.mean_error_bits + 0.5, detail


# ------------------------------------------------------------------------------------ gradients
GRADIENTS = [
    ("logit", _logit_div, (f32(30.0, -30.0, 0.5),), lambda z: [MP.one for _ in z], 0.0),
    ("log_mean_exp", lambda x: jnp.log(jnp.mean(jnp.exp(x))), (f32(100.0, 99.0, -5.0, 98.0),),
     lambda x: [MP.exp(v) / MP.fsum(MP.exp(u) for u in x) for v in x], 2.0),
    ("log_prod", lambda x: jnp.log(jnp.prod(x)), (np.full(8, 1e10, F32),), lambda x: [1 / v for v in x],
     0.0),
    ("div_exp", lambda x: 3.0 / jnp.exp(x), (f32(80.0, -40.0, 2.0),),
     lambda x: [-3 * MP.exp(-v) for v in x], 2.0),
    # through the corrected two-pass form: the mean, the deviation, the sum of squares, its square
    # root and the quotient each round: up to 8 ulps (3 bits)
    ("std", jnp.std, (f32(1e20, -1e20, 3e19, 0.0),),
     lambda x: [(v - MP.fsum(x) / 4) / (4 * _mp_std(x)) for v in x], 3.0),
    ("sqdist", lambda a, b: jnp.sum(a**2) + jnp.sum(b**2) - 2 * jnp.dot(a, b),
     (f32(1.0 + 2**-20, 1.0, 1.0 - 2**-21, 1.5), f32(1.0, 1.0, 1.0, 1.0)),
     lambda a: [2 * (v - 1) for v in a], 0.0),
]


@pytest.mark.parametrize(("rule", "fn", "args", "grad", "tol"), GRADIENTS, ids=[g[0] for g in GRADIENTS])
def test_gradient_of_the_stabilized_form_is_finite_and_accurate(rule, fn, args, grad, tol):
    assert rule in jst.explain(fn, *args).rules
    got = np.asarray(jax.jit(jax.grad(lambda *a: jnp.sum(jst.stabilize(fn)(*a))))(*args))
    assert np.isfinite(got).all(), got
    assert _bits(got, grad(_mp(args[0])), F32) <= tol, got


# -------------------------------------------------------------------------- where and derivatives
def _masked_softmax_sum(a):
    mask = jnp.array([True, True, False, False])  # a constant mask: no guard x OP c to read
    shifted = a - jnp.max(jnp.where(mask, a, -jnp.inf))
    return jnp.sum(jnp.where(mask, jnp.exp(shifted), 0.0) * jnp.arange(1.0, 5.0))


def test_a_constant_mask_keeps_the_gradient_finite():
    a = f32(1.0, 2.0, 1000.0, 0.0)  # the masked logit 1000: exp overflows in the untaken branch
    assert np.isnan(np.asarray(jax.grad(_masked_softmax_sum)(a))).any()  # the bug, as written
    assert "masked_where" in jst.explain(_masked_softmax_sum, a).rules
    got = np.asarray(jax.grad(jst.stabilize(_masked_softmax_sum))(a))
    x = _mp(a)
    e0 = MP.exp(x[0] - x[1])  # the max over the unmasked entries is a[1]: its own term is 2·exp(0)
    want = [e0, -e0, MP.zero, MP.zero]  # d/da1 = 2 - (e0 + 2), the max's derivative included
    # AD forms d/da1 as 2 + (-e0 - 2): rounding -e0 - 2 costs half an ulp of 2, 3 ulps of the result
    assert _bits(got, want, F32) <= 2.0, got
    np.testing.assert_array_equal(np.asarray(jst.stabilize(_masked_softmax_sum)(a)),
                                  np.asarray(_masked_softmax_sum(a)))  # values unchanged


def test_a_data_mask_keeps_the_gradient_finite_and_the_values():
    def f(x, keep):
        return jnp.sum(jnp.where(keep > 0, jnp.log(x), 0.0))

    x, keep = f32(2.0, -1.0, 0.0, 4.0), f32(1.0, 0.0, 0.0, 1.0)
    assert np.isnan(np.asarray(jax.grad(f)(x, keep))).any()
    got = np.asarray(jax.grad(jst.stabilize(f))(x, keep))
    np.testing.assert_array_equal(got, f32(0.5, 0.0, 0.0, 0.25))
    assert float(jst.stabilize(f)(x, keep)) == float(f(x, keep))


@jax.custom_jvp
def _softplus_wrong_rule(x):
    return jnp.log(1 + jnp.exp(x))


_softplus_wrong_rule.defjvp(lambda p, t: (_softplus_wrong_rule(p[0]), 2.0 * t[0]))  # wrong: 2


def test_custom_derivatives_primal_replaces_a_wrong_rule():
    x = f32(100.0, 0.0, -3.0)
    kept = jax.grad(lambda v: jnp.sum(jst.stabilize(_softplus_wrong_rule)(v)))(x)
    np.testing.assert_array_equal(np.asarray(kept), f32(2.0, 2.0, 2.0))  # the default keeps the rule
    g = jst.stabilize(_softplus_wrong_rule, custom_derivatives="primal")
    got = np.asarray(jax.grad(lambda v: jnp.sum(g(v)))(x))
    assert _bits(got, [_sig(v) for v in _mp(x)], F32) <= 1.0, got  # d softplus = sigmoid
    # the primal is the stabilised one (softplus), and the rule composes with jit and vmap
    assert _bits(np.asarray(g(x)), [_sp(v) for v in _mp(x)], F32) <= 1.0
    batched = jax.jit(jax.vmap(jax.grad(lambda v: g(v)[1])))(jnp.stack([x, x]))
    assert _bits(np.asarray(batched)[0], [MP.zero, MP.mpf(0.5), MP.zero], F32) == 0.0


def test_custom_derivatives_is_checked():
    with pytest.raises(jst.ArgumentError, match="custom_derivatives='always'"):
        jst.stabilize(jnp.exp, custom_derivatives="always")
