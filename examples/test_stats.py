"""Summary statistics: both are written the textbook way, and both are known to be unstable."""

from __future__ import annotations

import pytest
from mlkit import stats


# Measurements around a large offset (sensor counts near 10^4): E[x²] - E[x]² cancels.
@pytest.mark.stabilize(dtype="float32", shapes={"x": (32,)}, domain=(1e4, 1.1e4))
def test_variance(x):
    return stats.variance(x)


@pytest.mark.stabilize(dtype="float32", shapes={"x": (16,)})
def test_l2_norm(x):
    return stats.l2_norm(x)
