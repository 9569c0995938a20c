"""dot_general over balls by Arb's matrix product (issue 46): the same enclosures as the element loop,
and the loop's IEEE limits wherever an operand is infinite, indeterminate or missing."""

from __future__ import annotations

import numpy as np
import pytest
from flint import arb

from pytest_jaxstab.oracles.core._common import NEG_INF, POS_INF
from pytest_jaxstab.oracles.primitives._reductions import _dot, _matmul


def _balls(a):
    out = np.empty(a.shape, dtype=object)
    out[...] = [[arb(float(v)) for v in row] for row in a]
    return out


def _loop(left, right):
    cols = [list(c) for c in right.T]
    return np.array([[_dot(list(r), c) for c in cols] for r in left], dtype=object)


def _same(a, b):
    if a is None or b is None:
        return a is None and b is None
    return a.overlaps(b) and (not a.is_finite() or (a.rad() <= b.rad() * 4 + 2.0**-200 * abs(b.mid())))


@pytest.mark.parametrize("special", ["finite", "inf", "zero_times_inf", "missing"])
def test_the_matrix_product_agrees_with_the_loop(special):
    rng = np.random.default_rng(0)
    left, right = _balls(rng.standard_normal((5, 4)) * 1e3), _balls(rng.standard_normal((4, 3)))
    if special == "inf":
        left[1, 2] = POS_INF
    if special == "zero_times_inf":
        left[2, 0], right[0, 1] = NEG_INF, arb(0)
    if special == "missing":
        left[3, 1] = None
    out = np.empty((5, 3), dtype=object)
    skip = np.equal(left, None).any(axis=1)
    done = _matmul(left, right, out, skip)
    want = _loop(left, right)
    # rows the product settled hold the loop's values (overlapping balls, no wider than 4x: the two
    # accumulate in different orders); the others are left to the loop
    for i in np.flatnonzero(done):
        assert all(_same(a, b) for a, b in zip(out[i], want[i]))
    special_rows = {"finite": set(), "inf": {1}, "zero_times_inf": {2}, "missing": {3}}[special]
    assert set(np.flatnonzero(~done)) == special_rows
    for a, b in zip(out[np.flatnonzero(done)].reshape(-1), want[np.flatnonzero(done)].reshape(-1)):
        assert a.contains(arb(b.mid())) or b.contains(arb(a.mid()))
