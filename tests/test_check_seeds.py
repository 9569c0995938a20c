"""The check tries the program's own array constants as inputs, and takes a limit of 0 where the
neighbours of an undefined point shrink with the step (issue 47): a GP kernel's gradient at a training
point (tinygp's L2 distance: ``inf * 0`` at zero distance) is found and judged.

References: the kernels' derivatives written out by hand, never the oracle's own output.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

import pytest_jaxstab as jst
from pytest_jaxstab.oracles.interpreter._limits import FAR_STEP, vanishing, vanishing_candidates

#: Training points a kernel closes over, inside the domain below.
_X = np.random.default_rng(115).uniform(-2.0, 2.0, size=(6, 2)).astype(np.float32)
_SQRT3 = math.sqrt(3.0)


def _matern32(x):  # tinygp's Matern32 over an L2 distance, before its fix
    r = jnp.sqrt(jnp.sum((x - _X) ** 2, axis=-1))
    return (1 + _SQRT3 * r) * jnp.exp(-_SQRT3 * r)


def _matern12(x):  # exp(-r): a true kink at r = 0 (no derivative there)
    return jnp.exp(-jnp.sqrt(jnp.sum((x - _X) ** 2, axis=-1)))


def test_a_kernels_gradient_at_its_training_points_is_found_and_judged_against_its_limit():
    result = jst.check(_matern32, shapes=[(6, 2)], dtype="float32", domain=(-3.0, 3.0), grad=True,
                       max_examples=20, seed=0)
    grad = result.gradient
    assert grad is not None and grad.outcome == "failed"
    assert grad.original.overflows >= 1  # NaN where the limit is finite
    # born at the distance's line (the sqrt's derivative at 0 times the zero difference)
    assert any(o.variant == "original" and "jnp.sqrt" in o.line_text for o in grad.nan_origins)
    assert grad.rewritten.overflows == 0  # the rewrite (a norm with a derivative at 0) passes there
    # The limit it is judged against: d/dx (1 + s r) e^(-s r) = -3 e^(-s r) (x - X), 0 at x = X. The
    # rewritten gradient at the training points themselves is that 0 (within 2 bits: 0 exactly).
    x = jnp.asarray(_X)
    got = np.asarray(jax.grad(lambda v: jnp.sum(jst.stabilize(_matern32)(v)))(x))
    assert np.array_equal(got, np.zeros((6, 2), np.float32))


def test_a_kink_at_the_training_points_is_not_judged_as_a_limit():
    # exp(-|x - X|) has no derivative at x = X: the two sides stay at -1 and +1 as the step shrinks.
    result = jst.check(_matern12, shapes=[(6, 2)], dtype="float32", domain=(-3.0, 3.0), grad=True,
                       max_examples=20, seed=0)
    assert result.gradient is not None and result.gradient.original.overflows == 0


def test_vanishing_takes_only_values_that_shrink_with_the_step():
    nan = np.nan
    value = np.array([nan, nan, nan, nan, nan, 1.0])
    plus = np.array([1e-26, 1.0, 1e-13, 0.0, 0.0, 1e-26])
    minus = np.array([-1e-26, -1.0, -1e-13, -2e-26, 0.0, -1e-26])
    # at FAR_STEP times the step: linear, constant (a kink), square root, one side 0, both 0, defined
    far_plus = np.array([FAR_STEP * 1e-26, 1.0, math.sqrt(FAR_STEP) * 1e-13, 0.0, 0.0, 4e-26])
    far_minus = np.array([-FAR_STEP * 1e-26, -1.0, -math.sqrt(FAR_STEP) * 1e-13, -FAR_STEP * 2e-26, 0.0,
                          -4e-26])
    sure = np.ones(6, bool)
    candidates = vanishing_candidates(value, sure, plus, sure, minus, sure)
    assert candidates.tolist() == [True, True, True, True, False, False]
    taken = vanishing(candidates, plus, minus, far_plus, far_minus, sure)
    assert taken.tolist() == [True, False, True, True, False, False]
