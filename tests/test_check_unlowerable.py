"""A program whose float64 passes JAX cannot lower still gets a verdict (issue 47's held-out set).

The conditioning's reverse and forward passes (``_check/_derivatives.py``) run the program raised to
float64. A user's ``custom_jvp`` log-determinant over ``lax.linalg.lu``, differentiated, holds a
transpose that the raised program types float32 -> float64, and JAX refuses to lower it ("Cannot
lower jaxpr with verifier errors"): ``jst.check(..., grad=True)`` ended in that raw error. The passes
now report themselves unserved and the check takes the exact fallback, as for a complex program.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

import pytest_jaxstab as jst
from pytest_jaxstab._check._derivatives import Derivatives, Unserved


@jax.custom_jvp
def _logdet(a):
    lu, _, _ = lax.linalg.lu(a)
    return jnp.sum(jnp.log(jnp.abs(jnp.diagonal(lu, axis1=-2, axis2=-1))), axis=-1)


@_logdet.defjvp
def _logdet_jvp(primals, tangents):
    (x,), (g,) = primals, tangents
    return _logdet(x), jnp.trace(jnp.linalg.solve(x, g), axis1=-1, axis2=-2)


def _volume(a):
    return jnp.exp(_logdet(a))


def test_a_gradient_whose_float64_passes_cannot_be_lowered_is_judged(monkeypatch):
    unserved = []
    served = Derivatives._served

    def spy(self, fn, *args):
        try:
            return served(self, fn, *args)
        except Unserved as exc:
            unserved.append(str(exc))
            raise

    monkeypatch.setattr(Derivatives, "_served", spy)
    result = jst.check(_volume, shapes=[(2, 3, 3)], dtype="float32", domain=(-2.0, 2.0), seed=1,
                       grad=True, max_examples=3)
    assert unserved and "lower" in unserved[0]  # the case: JAX refused the raised program
    assert result.outcome in ("passed", "failed")  # a verdict, not the raw lowering error
    assert result.samples > 0
