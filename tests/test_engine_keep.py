"""``op(..., name=..., keep=True)``: a sub-term matched for its structure, kept in the program.

The variance rule needs it (batch-norm code also returns the mean); users get it through the same
public DSL. A kept sub-term may have other uses, is not replaced, and reaches the replacement as an
operand (computed once).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

import pytest_jaxstab as jst
from pytest_jaxstab.rewrites import Rule
from pytest_jaxstab.rewrites import pattern as p

x = p.var("x")
SEEN: list[tuple[int, ...]] = []


def _replacement(x, e):
    SEEN.append(tuple(e.shape))
    return 2.0 * e  # exp(x) + exp(x), written with the kept exp(x)


KEPT = Rule("double_exp", p.op("add", p.op("exp", x, name="e", keep=True),
                               p.op("exp", x, name="e", keep=True)), _replacement)
SWALLOWED = Rule("double_exp_swallow", p.op("add", p.op("exp", x, name="e"), p.op("exp", x, name="e")),
                 lambda x: 2.0 * jnp.exp(x))


def shared(v):
    e = jnp.exp(v)
    return e + e, e  # exp(v) has another use: it is returned


def test_kept_subterm_with_another_use_still_matches():
    v = np.array([0.5, 1.0], np.float32)
    assert jst.explain(shared, v, rules=[KEPT]).rules == ["double_exp"]
    assert jst.explain(shared, v, rules=[SWALLOWED]).rules == []  # swallowing it is refused
    total, e = jst.stabilize(shared, rules=[KEPT])(v)
    np.testing.assert_array_equal(np.asarray(e), np.asarray(shared(v)[1]))  # kept as it was
    np.testing.assert_allclose(np.asarray(total), 2 * np.exp(v), rtol=1e-7)
    assert SEEN and SEEN[-1] == (2,)  # the kept value reached the replacement as an operand


def test_kept_subterm_without_other_uses_matches_too():
    v = np.array([0.5, 1.0], np.float32)
    def f(v):
        e = jnp.exp(v)
        return e + e

    assert jst.explain(f, v, rules=[KEPT]).rules == ["double_exp"]
    # a kept sub-term is one value: two separate exp(v) equations are not it (nothing is shared)
    assert jst.explain(lambda v: jnp.exp(v) + jnp.exp(v), v, rules=[KEPT]).rules == []


def test_keep_needs_a_name():
    with pytest.raises(ValueError, match="needs a name"):
        p.op("exp", x, keep=True)
