"""A function followed by its inverse (``catalogue/_stability_inverse.py``, issue 47).

Samplers that push a draw through a bijector and then score it, or code that normalises a value and
maps it back, compose a function with its inverse: ``arctanh(tanh(u))`` is ±inf once ``tanh`` rounds to
±1 (|u| > 9 in float32), ``arccosh(cosh(d))`` is 0 for |d| < 2.4e-4 and inf past 89, ``exp(log(x))``
carries ``log``'s rounding times |log x|. Each function below is written the way such code writes it,
judged in float32 against mpmath (50 digits) at inputs where the written program fails:

- ``round_trip`` / ``round_trip_domain`` fire and the value is within 1 ulp of the exact result: the
  replacement is the argument itself (or its magnitude), exact, and each function applies at most one
  rounded operation to it (a square, a product by 0.5, a sum of two terms of the same sign) — half an
  ulp of rounding, half of the reference's;
- as written the same inputs are off by more than 8 bits or not finite (the tests could fail);
- the derivative of the round trip is the identity's (1), finite where the written one is 0/0;
- nothing fires on compositions that are not round trips, on a complex ``sqrt(z*z)`` (``|z|`` is not
  its value), and outside the domain the value stays NaN as written.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import mpmath as mp
import numpy as np
import pytest

import pytest_jaxstab as jst

mp.mp.dps = 50
F32 = np.float32


def _ulps(got, refs):
    """Per element, the distance in float32 ulps between ``got`` and the exact value (inf: not finite)."""
    out = []
    for g, r in zip(np.atleast_1d(np.asarray(got, np.float64)), refs):
        if not np.isfinite(g):
            out.append(np.inf)
            continue
        scale = max(abs(float(r)), float(np.finfo(F32).tiny))
        out.append(float(abs(mp.mpf(g) - r)) / float(np.spacing(F32(scale))))
    return np.array(out)


def _squashed_gaussian(u):
    """A tanh-squashed policy scores its own action: the pre-squash value recovered by arctanh."""
    action = jnp.tanh(u)
    pre = jnp.arctanh(action)
    return -0.5 * pre * pre


def _hyperbolic_distance(d):
    """A distance stored as cosh(d) (the Lorentz model's inner product) and read back."""
    return jnp.arccosh(jnp.cosh(d))


def _magnitude(x):
    return jnp.sqrt(x ** 2)


def _signed_log_scale(x):
    return jnp.arcsinh(jnp.sinh(x)) + x


def _probit_round_trip(z):
    return jax.scipy.special.erfinv(jax.scipy.special.erf(z))


def _growth_back(r):
    return jnp.log1p(jnp.expm1(r))


def _slope_back(x):
    return jnp.tan(jnp.arctan(x))


def _positive_back(x):
    return jnp.exp(jnp.log(x))


def _asinh_back(x):
    return jnp.sinh(jnp.arcsinh(x))


def _rate_back(x):
    return jnp.expm1(jnp.log1p(x))


def _cosh_back(x):
    return jnp.cosh(jnp.arccosh(x))


# The written program's error at the inputs below: the inner function saturates, overflows or
# underflows (far more than 2^8 ulps, or not finite), or, inverse first, the inverse's half-ulp
# rounding is multiplied by |log x| = 45..87 (16 ulps and more at these inputs).
SATURATES, AMPLIFIES = 2.0 ** 8, 16.0

# (function, rule, float32 inputs where the written program fails, the exact value of each, the
# written program's error there at least, in ulps)
CASES = [
    (_squashed_gaussian, "round_trip", [9.5, -12.0, 40.0, 0.3], lambda u: -u * u / 2, SATURATES),
    (_hyperbolic_distance, "round_trip", [1e-5, -2e-4, 95.0, 0.5], abs, SATURATES),
    (_magnitude, "round_trip", [1e-30, -3e25, 2.0], abs, SATURATES),
    (_signed_log_scale, "round_trip", [95.0, -120.0, 0.25], lambda x: 2 * x, SATURATES),
    (_probit_round_trip, "round_trip", [4.5, -6.0, 0.1], lambda z: z, SATURATES),
    (_growth_back, "round_trip", [100.0, 200.0, -3.0], lambda r: r, SATURATES),
    (_slope_back, "round_trip", [1e8, -3e10, 0.5], lambda x: x, SATURATES),
    (_positive_back, "round_trip_domain", [3e-30, 7e35, 2.5e33], lambda x: x, AMPLIFIES),
    (_asinh_back, "round_trip_domain", [-2e30, 5e37], lambda x: x, AMPLIFIES),
    (_rate_back, "round_trip_domain", [7e33, 2e37], lambda x: x, AMPLIFIES),
    (_cosh_back, "round_trip_domain", [1e30, 2e37], lambda x: x, AMPLIFIES),
]


@pytest.mark.parametrize(("fn", "rule", "inputs", "exact", "written"), CASES,
                         ids=[c[0].__name__ for c in CASES])
def test_a_round_trip_is_its_argument(fn, rule, inputs, exact, written):
    x = jnp.asarray(inputs, F32)
    assert rule in jst.explain(fn, x).rules
    refs = [exact(mp.mpf(float(v))) for v in np.asarray(x)]
    assert _ulps(jst.stabilize(fn)(x), refs).max() <= 1.0
    # as written the program fails at these inputs: the assertion above can fail
    assert _ulps(fn(x), refs).max() >= written


def test_the_derivative_of_a_round_trip_is_the_identitys():
    u = np.asarray([9.5, -12.0, 0.3], F32)
    written = jax.grad(lambda v: jnp.sum(jnp.arctanh(jnp.tanh(v))))(u)
    assert not np.isfinite(np.asarray(written)[:2]).any()  # (1 - tanh²)/(1 - tanh²) = 0/0 once saturated
    stable = jst.stabilize(lambda v: jnp.arctanh(jnp.tanh(v)))
    np.testing.assert_array_equal(jax.grad(lambda v: jnp.sum(stable(v)))(u), np.ones(3, F32))


def test_a_shared_inner_value_stays_for_its_other_use():
    def act_and_score(u):
        action = jnp.tanh(u)  # returned too: it stays
        return action, -0.5 * jnp.square(jnp.arctanh(action))

    u = np.asarray([12.0, 0.5], F32)
    action, score = jst.stabilize(act_and_score)(u)
    np.testing.assert_array_equal(action, jnp.tanh(u))
    np.testing.assert_array_equal(score, -0.5 * u * u)


def test_outside_the_domain_the_value_stays_nan():
    x = np.asarray([-2.0, -1e-30, 4.0], F32)
    got = jst.stabilize(_positive_back)(x)
    assert np.isnan(got[:2]).all() and got[2] == F32(4.0)
    assert np.isnan(jst.stabilize(lambda v: jnp.tanh(jnp.arctanh(v)))(np.asarray([1.5], F32))).all()


@pytest.mark.parametrize("fn", [
    lambda x: jnp.arctanh(0.5 * jnp.tanh(x)),  # not the inverse of what it reads
    lambda x: jnp.arcsinh(jnp.cosh(x)),
    lambda x: jnp.sqrt(x * (x + 1.0)),
    lambda x: jnp.log(jnp.exp(x) + 1.0),
], ids=["scaled_tanh", "asinh_of_cosh", "sqrt_of_other_product", "softplus"])
def test_what_is_not_a_round_trip_is_left_alone(fn):
    rules = jst.explain(fn, np.ones(3, F32)).rules
    assert "round_trip" not in rules and "round_trip_domain" not in rules


def test_a_complex_square_root_of_a_square_is_not_its_magnitude():
    z = np.asarray([1j, -2.0 + 1.0j], np.complex64)
    assert jst.explain(lambda v: jnp.sqrt(v * v), z).rules == []
