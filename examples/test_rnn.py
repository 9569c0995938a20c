"""A scan-based model: the oracle follows `lax.scan` step by step."""

from __future__ import annotations

import pytest
from mlkit import rnn


@pytest.mark.stabilize(dtype="float32", shapes={"xs": (16,), "w": (2,), "targets": (16,)},
                       domain=[(-3, 3), (-1, 1), (-1, 1)])
def test_rnn_loss(xs, w, targets):
    return rnn.rnn_loss(xs, w, targets)
