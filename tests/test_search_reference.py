"""Where the written program has no exact value at any input (issue 47): ``0·log 0`` at a closed-over
zero target, ``0·-inf`` at a masked class. ``jst.improve`` judges against the exact values of
``jst.stabilize``'s program, which keeps the value wherever the written one has one and gives the limit
where it has none; it says so in its status. References here are mpmath's, with the limit written out.
"""

from __future__ import annotations

import time
from typing import Any

import jax
import jax.numpy as jnp
import mpmath
import numpy as np
import pytest

import pytest_jaxstab as jst

#: Soft targets with exact zeros (one-hot rows, pruned classes): optax's kl_divergence before its fix.
_T = np.array([[0.5, 0.5, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.25, 0.25, 0.25, 0.25]], np.float32)


def _kl(log_predictions):
    return jnp.sum(_T * (jnp.log(_T) - log_predictions), axis=-1)


def _kl_exact(lp):
    out = []
    for t_row, p_row in zip(_T, lp):
        terms = [mpmath.mpf(0) if t == 0 else mpmath.mpf(float(t)) * (mpmath.log(float(t)) - float(p))
                 for t, p in zip(t_row, p_row)]
        out.append(float(sum(terms, mpmath.mpf(0))))  # at mpmath's 53 bits: 29 finer than float32's
    return np.array(out)


@pytest.mark.slow
def test_a_program_undefined_everywhere_is_judged_against_the_catalogues_limit():
    t0 = time.perf_counter()
    imp = jst.improve(_kl, shapes=[(3, 4)], dtype="float32", domain=(-30.0, 0.0), time_limit=10)
    assert imp.improved, imp.status
    assert "judged against the exact values of jst.stabilize's program" in imp.status
    lp = np.log(np.array([[0.7, 0.1, 0.1, 0.1], [0.2, 0.3, 0.4, 0.1], [0.4, 0.3, 0.2, 0.1]], np.float32))
    assert np.all(np.isnan(np.asarray(_kl(lp))[:2]))  # as written: 0·(-inf - lp) is NaN
    got = np.asarray(imp.fn(jnp.asarray(lp)), np.float64)
    want = _kl_exact(lp)
    # 4 ulps: the sum of four terms, each a product of a log and a difference (a few roundings each)
    assert np.all(np.abs(got - want) <= 4 * np.spacing(np.abs(want).astype(np.float32))), (got, want)
    assert time.perf_counter() - t0 < 120
    # The source to paste computes the same, under JAX's strict dtype promotion too (the folded mask
    # t == 0 is printed as booleans, not as 0.0 and 1.0 a logical_and would have to promote).
    space: dict[str, Any] = {"jnp": jnp, "jax": jax, "jst": jst}
    exec(imp.source, space)
    with jax.numpy_dtype_promotion("strict"):
        pasted = np.asarray(space["_kl_improved"](jnp.asarray(lp)), np.float64)
    assert np.array_equal(pasted, got)


def test_without_a_rewrite_that_defines_it_the_search_still_says_no_sample():
    # log of a negative number: no exact value anywhere, and no rewrite gives one: refused, as before
    imp = jst.improve(lambda x: jnp.log(-1.0 - jnp.abs(x)), shapes=[()], dtype="float32", time_limit=5)
    assert not imp.improved and "no sample could be judged" in imp.status
