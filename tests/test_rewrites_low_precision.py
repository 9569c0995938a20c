"""The catalogue on bfloat16 and float16 programs (issue 34's groundwork).

A bfloat16 constant has numpy kind 'V' (ml_dtypes), so the engine's constant readers took none of
them: no rule with a constant fired on a bfloat16 program, and the divergence reader hashed a bfloat16
literal as a leaf and crashed ``jst.stabilize(lambda x: jnp.exp(x) - 1)`` with a TypeError.
References: mpmath on the low-precision inputs. Bound 2 ulps of the dtype: the result's rounding (0.5)
plus XLA's own low-precision expm1/log1p (measured 1.2 ulps for float16 expm1 on jax 0.10).
"""

from __future__ import annotations

import jax.numpy as jnp
import mpmath
import numpy as np
import pytest

import pytest_jaxstab as jst

LOW = [jnp.bfloat16, jnp.float16]
X = [1e-3, -2e-3, 3e-2, 7e-5]


def _ulps(got, exact, dtype) -> float:
    got = np.asarray(got, np.float64)
    spacing = np.array([float(np.spacing(np.asarray(abs(e), dtype).astype(dtype)).astype(np.float64))
                        for e in exact])
    return float(np.max(np.abs(got - np.asarray(exact)) / spacing))


@pytest.mark.parametrize("dtype", LOW, ids=["bfloat16", "float16"])
@pytest.mark.parametrize(("fn", "rule", "ref"), [
    (lambda x: jnp.exp(x) - 1, "expm1", mpmath.expm1),
    (lambda x: jnp.log(1 + x), "log1p", mpmath.log1p),
], ids=["expm1", "log1p"])
def test_rules_with_constants_fire_on_low_precision_programs(dtype, fn, rule, ref):
    x = jnp.asarray(X, dtype)
    assert rule in [a.rule for a in jst.explain(fn, x)]
    exact = [float(ref(mpmath.mpf(float(v)))) for v in np.asarray(x, np.float64)]
    assert _ulps(jst.stabilize(fn)(x), exact, dtype) <= 2.0
    assert _ulps(fn(x), exact, dtype) > 4.0  # as written it cancels: the test can fail


@pytest.mark.parametrize("dtype", LOW, ids=["bfloat16", "float16"])
def test_a_divergence_with_a_low_precision_literal_is_read_without_crashing(dtype):
    # exp(x) - 1 - x: the Bregman reader walks its linear form, whose constant is a low-precision literal
    fn = lambda x: jnp.exp(x) - 1 - x
    x = jnp.asarray(X, dtype)
    got = np.asarray(jst.stabilize(fn)(x), np.float64)
    exact = [float(mpmath.expm1(mpmath.mpf(v)) - mpmath.mpf(v)) for v in np.asarray(x, np.float64).tolist()]
    assert _ulps(got, exact, dtype) <= 2.0
