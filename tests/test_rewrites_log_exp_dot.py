"""``log_exp_dot``: the log of a matrix product with ``exp(a)`` as either operand, in log space (issue 47).

A mixture's log-likelihood written ``log(exp(log_lik) @ weights)`` and a hidden Markov model's forward
step in probability space ``log(exp(alpha) @ A)`` underflow to ``-inf`` wherever every term's
exponent is below -103 (float32), and overflow above 88, while the result is an ordinary number. The
rule shifts each output's slice by its own max. References: mpmath at 256 bits, written here from the
definition (sums of products of exponentials), never from the rule's form.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import pytest_jaxstab as jst
from tests.test_rewrites_generalise import MP, _bits

F32 = np.float32


def _exact_log_exp_dot(a: np.ndarray, w: np.ndarray, spec: str) -> np.ndarray:
    """``log(einsum(spec, exp(a), w))`` at 256 bits, as a float64 array of the output's shape."""
    ea = np.vectorize(lambda v: MP.exp(MP.mpf(float(v))), otypes=[object])(a.astype(np.float64))
    wo = np.vectorize(lambda v: MP.mpf(float(v)), otypes=[object])(w.astype(np.float64))
    total = np.einsum(spec, ea, wo, dtype=object, optimize=False)
    return np.vectorize(lambda v: float(MP.log(v)) if v > 0 else float("nan"))(total)


# (name, function, a, w, einsum spec of the same product with exp(a) first, whether exp(a) is first)
_RNG = np.random.default_rng(4)
_W = np.abs(_RNG.normal(size=(3, 3))).astype(F32)
_W /= _W.sum(axis=1, keepdims=True)
CASES = [
    # a mixture: each row's log-likelihoods all below -103, or one above 88
    ("mixture", lambda a, w: jnp.log(jnp.exp(a) @ w),
     np.array([[-900.0, -905.0, -1200.0], [95.0, 20.0, -3.0]], F32), np.array([0.2, 0.5, 0.3], F32),
     "nk,k->n"),
    # the HMM forward step with a row-stochastic transition matrix
    ("hmm-step", lambda a, w: jnp.log(jnp.exp(a) @ w), np.array([-750.0, -760.0, -748.0], F32), _W,
     "k,kj->j"),
    # exp(a) as the second operand: weights @ exp(log-likelihoods)
    ("weights-first", lambda a, w: jnp.log(w @ jnp.exp(a)),
     np.array([[-300.0, 5.0], [-310.0, 2.0], [-305.0, 100.0]], F32), np.array([0.3, 0.3, 0.4], F32),
     "kn,k->n"),
    # a batched contraction (einsum with a batch axis)
    ("batched", lambda a, w: jnp.log(jnp.einsum("bk,bkj->bj", jnp.exp(a), w)),
     np.array([[-500.0, -501.0, -499.0], [200.0, 0.0, -200.0]], F32), np.stack([_W, _W.T]),
     "bk,bkj->bj"),
]


@pytest.mark.parametrize(("name", "fn", "a", "w", "spec"), CASES, ids=[c[0] for c in CASES])
def test_the_log_of_a_product_with_an_exponential_is_taken_in_log_space(name: str, fn: Any, a: np.ndarray,
                                                                       w: np.ndarray, spec: str):
    assert "log_exp_dot" in jst.explain(fn, a, w).rules
    exact = _exact_log_exp_dot(a, w, spec)
    written = np.asarray(jax.jit(fn)(a, w))
    assert not np.all(np.isfinite(written)), written  # as written it under- or overflows
    got = np.asarray(jax.jit(jst.stabilize(fn))(a, w))
    # exp of the shifted terms, a product's sum of k <= 3 terms and the log: 3 roundings of values
    # near 1 plus the shift's exact addition, 2 bits (4 ulps) of the result
    assert _bits(got, list(exact.ravel()), F32) <= 2.0, (got, exact)


def test_its_gradient_is_the_posterior_weight_and_finite():
    # d/da_k log(sum_k exp(a_k) w_k) = exp(a_k) w_k / sum: the component's posterior weight
    a = np.array([[-900.0, -905.0, -1200.0]], F32)
    w = np.array([0.2, 0.5, 0.3], F32)
    stabilized = jst.stabilize(lambda a, w: jnp.log(jnp.exp(a) @ w))
    grad = np.asarray(jax.grad(lambda a: jnp.sum(stabilized(a, w)))(a))
    terms = [MP.exp(MP.mpf(float(v))) * MP.mpf(float(u)) for v, u in zip(a[0], w)]
    total = MP.fsum(terms)
    want = [t / total for t in terms]
    assert np.all(np.isfinite(grad))
    assert _bits(grad[0], want, F32) <= 3.0, (grad, want)


def test_a_minus_infinity_log_likelihood_adds_nothing():
    # a masked component (log-likelihood -inf): exp(-inf) = 0 as written, and 0 after the shift
    a = np.array([[-np.inf, -800.0, -801.0]], F32)
    w = np.array([0.5, 0.25, 0.25], F32)
    got = np.asarray(jst.stabilize(lambda a, w: jnp.log(jnp.exp(a) @ w))(a, w))
    exact = _exact_log_exp_dot(np.array([[-800.0, -801.0]], F32), np.array([0.25, 0.25], F32), "nk,k->n")
    assert _bits(got, list(exact), F32) <= 2.0, (got, exact)


def test_a_signed_weight_keeps_the_programs_nan_where_the_sum_is_negative():
    a = np.array([[0.0, 1.0]], F32)
    w = np.array([1.0, -1.0], F32)  # 1 - e < 0
    assert np.isnan(np.asarray(jst.stabilize(lambda a, w: jnp.log(jnp.exp(a) @ w))(a, w))[0])


@pytest.mark.slow  # 3.4 s (a scan's gradient); the rule inside scan is also test_rules_in_transforms'
def test_an_hmm_forward_pass_in_probability_space_inside_a_scan():
    # the forward recursion alpha_t = log(exp(alpha_{t-1}) @ A) + log_emission_t, in a lax.scan: the
    # emissions are about -200 per step, so exp(alpha) is 0 from the first step on and the written
    # log-likelihood is -inf; stabilized, each step is one log-space product
    k, steps = 4, 50
    rng = np.random.default_rng(0)
    trans = rng.dirichlet(np.ones(k), size=k).astype(F32)
    emissions = rng.normal(-200.0, 30.0, (steps, k)).astype(F32)

    def loglik(log_em):
        def step(alpha, le):
            return jnp.log(jnp.exp(alpha) @ trans) + le, None
        alpha, _ = jax.lax.scan(step, jnp.log(jnp.full(k, 1.0 / k, F32)) + log_em[0], log_em[1:])
        return jnp.log(jnp.sum(jnp.exp(alpha)))

    assert "log_exp_dot" in jst.explain(loglik, emissions).rules
    assert np.isneginf(np.asarray(loglik(emissions)))
    # reference: the same recursion in log space in float64 (numpy's logaddexp), from the same floats
    log_trans = np.log(trans.astype(np.float64))
    alpha = np.log(np.full(k, 1.0 / k)) + emissions[0].astype(np.float64)
    for le in emissions[1:].astype(np.float64):
        alpha = np.logaddexp.reduce(alpha[:, None] + log_trans, axis=0) + le
    want = np.logaddexp.reduce(alpha)
    got = float(jst.stabilize(loglik)(emissions))
    # one rounding per step at most, each at most an ulp of the final magnitude: steps ulps
    assert abs(got - want) <= steps * float(np.spacing(np.float32(abs(want)))), (got, want)
    grad = np.asarray(jax.grad(jst.stabilize(loglik))(emissions))
    # d loglik / d log_em[t, j] is the posterior of state j at step t: each row sums to 1 (4 terms, each
    # carrying 50 steps of float32 rounding, about 50 * 2^-24 relative: 1e-4 is 30 times that)
    assert np.all(np.isfinite(grad)) and np.allclose(grad.sum(axis=1), 1.0, atol=1e-4)
