"""Functions that lose accuracy on the inputs users really have are flagged at every seed.

Each function below is inaccurate only on a shape of data the per-element magnitude spread rarely draws:
one dominant term (logsumexp, log-softmax), values clustered around an offset (variance, batch-norm
statistics, standardisation, covariance), related arguments (log x - log y with x ~= y, a b - c d with
a b ~= c d, sqrt(x^2 + y^2) - x with x >> y), or a multi-argument model whose overflow needs large values
of two arguments at once. `jst.check` must flag each (the function as written fails its verdict) at
seeds 0 to 4 with the default `max_examples`: detection is the fuzzer's job, not the seed's luck.

Why each one is inaccurate is stated next to it (independent of this package). The verdict itself is
the oracle's (an exact evaluation); these tests only need that it says "fail".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import pytest

import pytest_jaxstab as jst
from pytest_jaxstab.strategies import Domain

# The slow tier (`make test-slow`, run in full by CI; `make test` leaves it out): docs/architecture.md,
# "Tests and their tiers".
pytestmark = pytest.mark.slow

SEEDS = [0, 1, 2, 3, 4]


def naive_logsumexp(x: Any) -> Any:
    # [0, -20 x 15]: sum = 1 + 3e-8 rounds to 1 in float32, so the result 3e-8 is lost entirely.
    return jnp.log(jnp.sum(jnp.exp(x)))


def library_logsumexp(x: Any) -> Any:
    # Shifting by the max does not help when the max is near 0: log(1 + s) needs log1p (README's input).
    return jax.nn.logsumexp(x)


def library_log_softmax(x: Any) -> Any:
    # The dominant element's log-probability is -log1p(s) ~= -s, computed as 0 once 1 + s rounds to 1.
    return jax.nn.log_softmax(x)


def variance(x: Any) -> Any:
    # E[x^2] - E[x]^2 cancels catastrophically when the spread is small against the offset.
    return jnp.mean(x**2) - jnp.mean(x) ** 2


def batch_norm_statistics(x: Any) -> tuple[Any, Any]:
    # As popular libraries write it: the clamp at 0 hides negative results of the same cancellation.
    mean = jnp.mean(x, axis=0)
    return mean, jnp.maximum(0.0, jnp.mean(x**2, axis=0) - mean**2)


def standardise(x: Any) -> Any:
    mean = jnp.mean(x)
    return (x - mean) / jnp.sqrt(jnp.mean(x**2) - mean**2 + 1e-6)


def softplus_model(x: Any, w: Any, b: Any) -> Any:
    # log(1 + exp(z)) overflows once z = x w + b passes log(max) ~= 88.7: x large and w not small.
    return jnp.sum(jnp.log(1.0 + jnp.exp(x * w + b)))


def log_ratio(x: Any, y: Any) -> Any:
    # log x - log y for x ~= y: two large logs cancel; log(x / y) or log1p((x - y) / y) would not.
    return jnp.log(x) - jnp.log(y)


def determinant(a: Any, b: Any, c: Any, d: Any) -> Any:
    # a b - c d with a b ~= c d: both products are rounded before the cancellation.
    return a * b - c * d


def covariance(x: Any, y: Any) -> Any:
    # E[x y] - E[x] E[y] for x ~= y clustered around an offset.
    return jnp.mean(x * y) - jnp.mean(x) * jnp.mean(y)


def hypot_minus(x: Any, y: Any) -> Any:
    # sqrt(x^2 + y^2) - x for y << x is y^2 / (2x), computed as 0.
    return jnp.sqrt(x**2 + y**2) - x


POSITIVE = Domain(0, None, open_lo=True)

CASES: list[tuple[Callable[..., Any], list[tuple[int, ...]], Any]] = [
    (naive_logsumexp, [(16,)], (-80, 80)),  # no overflow possible: only the dominant term can fail it
    (library_logsumexp, [(16,)], None),
    (library_log_softmax, [(16,)], None),
    (variance, [(16,)], (-1e3, 1e3)),
    (batch_norm_statistics, [(8, 4)], (-1e3, 1e3)),
    (standardise, [(16,)], (-1e3, 1e3)),
    (softplus_model, [(16,), (16,), (16,)], [(0, 1e3), (0, 1), (0, 1)]),
    (log_ratio, [(16,), (16,)], POSITIVE),
    (determinant, [(16,)] * 4, (-1e3, 1e3)),  # products stay far below overflow
    (covariance, [(16,), (16,)], (-1e3, 1e3)),
    (hypot_minus, [(16,), (16,)], [(0, 1e3), (0, 1e3)]),
]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(("fn", "shapes", "domain"), CASES, ids=[c[0].__name__ for c in CASES])
def test_inaccurate_functions_are_flagged_at_every_seed(
    fn: Callable[..., Any], shapes: list[tuple[int, ...]], domain: Any, seed: int
) -> None:
    # The accuracy lens: what is asserted is that the fuzzer finds the inaccurate inputs (the forward
    # error), whatever share of it the problem's conditioning explains (issue 22's stability lens).
    result = jst.check(fn, shapes=shapes, dtype="float32", domain=domain, seed=seed, judge="accuracy")
    assert result.original.verdict == "fail", (fn.__name__, seed, result.original)
    assert result.outcome == "failed"


def label_logit_loss(y: Any, z: Any) -> Any:
    # log(1 + exp(-y z)) overflows once -y z passes ~88.7: a label near +-1 and a logit beyond 89.
    return jnp.log(1 + jnp.exp(-y * z))


# Issue 35: under the default (stability) lens too. The one-pass variance of clustered data loses ~2k
# bits at relative spread 2^-k where its conditioning explains ~k: only draws in the moderately
# clustered window show it beyond the conditioning.
STABILITY_CASES: list[tuple[Callable[..., Any], list[tuple[int, ...]], Any]] = [
    (variance, [(16,)], (-1e3, 1e3)),
    (label_logit_loss, [(4,), (4,)], [(-1, 1), (-1e3, 1e3)]),
]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(("fn", "shapes", "domain"), STABILITY_CASES, ids=["variance", "label-logit"])
def test_unstable_functions_fail_the_default_verdict_at_every_seed(
    fn: Callable[..., Any], shapes: list[tuple[int, ...]], domain: Any, seed: int
) -> None:
    result = jst.check(fn, shapes=shapes, dtype="float32", domain=domain, seed=seed)
    assert result.outcome == "failed", (fn.__name__, seed, result.message)


def test_one_pass_variance_of_positive_data_is_flagged_at_nearly_every_seed() -> None:
    # Measured at 59 of seeds 30-89 outside pytest (one miss: no draw landed in the window where the
    # cancellation shows beyond the conditioning); here one miss in ten is allowed, not two.
    flagged = sum(jst.check(variance, shapes=[(16,)], dtype="float32", domain=(0, 1e4), seed=seed).outcome
                  == "failed" for seed in range(10))
    assert flagged >= 9, flagged


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("fn", [jnp.var, jnp.sum, jnp.mean], ids=["var", "sum", "mean"])
def test_library_reductions_pass_the_default_verdict_at_every_seed(fn: Callable[..., Any], seed: int) -> None:
    # Their errors are what the conditioning of clustered or cancelling data explains (8-16 terms).
    result = jst.check(fn, shapes=[(16,)], dtype="float32", domain=(-1e3, 1e3), seed=seed)
    assert result.outcome == "passed", (seed, result.message)
