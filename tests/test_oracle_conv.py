"""``conv_general_dilated`` in the exact oracle, against JAX's float64 convolution on inputs whose every
product and partial sum is exact in float64 (12-bit significands, at most 64 terms: 24-bit products,
30-bit sums), so rounding JAX's float64 result once to float32 is the correctly rounded exact value,
independently of the oracle. Float32 itself rounds these sums, so a float32 reference would not do.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest
from jax import lax

from pytest_jaxstab import oracles

F32 = np.float32


def _twelve_bits(rng, shape):
    return (rng.integers(-2048, 2048, shape) / 64).astype(F32)


CASES = [  # (lhs shape, rhs shape, keyword arguments)
    ((2, 5, 6, 3), (3, 2, 3, 4), {"window_strides": (1, 1), "padding": "SAME",
                                  "dimension_numbers": ("NHWC", "HWIO", "NHWC")}),
    ((1, 3, 7, 6), (4, 3, 2, 2), {"window_strides": (2, 1), "padding": ((1, 0), (0, 2)),
                                  "dimension_numbers": ("NCHW", "OIHW", "NCHW")}),
    ((1, 4, 4, 2), (2, 2, 2, 2), {"window_strides": (1, 1), "padding": ((1, 1), (1, 1)),
                                  "lhs_dilation": (2, 2), "dimension_numbers": ("NHWC", "HWIO", "NHWC")}),
    ((1, 6, 6, 2), (2, 2, 2, 3), {"window_strides": (1, 1), "padding": "VALID", "rhs_dilation": (2, 1),
                                  "dimension_numbers": ("NHWC", "HWIO", "NHWC")}),
    ((1, 5, 5, 4), (3, 3, 1, 4), {"window_strides": (1, 1), "padding": "SAME", "feature_group_count": 4,
                                  "dimension_numbers": ("NHWC", "HWIO", "NHWC")}),
    ((4, 5, 3), (2, 3, 4), {"window_strides": (1,), "padding": "VALID", "batch_group_count": 2,
                            "dimension_numbers": ("NWC", "WIO", "NWC")}),
]


@pytest.mark.parametrize(("lhs_shape", "rhs_shape", "kwargs"), CASES)
def test_convolution_is_correctly_rounded(lhs_shape, rhs_shape, kwargs):
    rng = np.random.default_rng(sum(lhs_shape))
    lhs, rhs = _twelve_bits(rng, lhs_shape), _twelve_bits(rng, rhs_shape)
    conv = lambda a, b: lax.conv_general_dilated(a, b, **kwargs)
    got = oracles.evaluate(conv, lhs, rhs)
    with jax.enable_x64(True):
        exact = np.asarray(conv(lhs.astype(np.float64), rhs.astype(np.float64)))
    assert np.asarray(got.certain).all()
    np.testing.assert_array_equal(np.asarray(got.values), exact.astype(F32))


def test_an_infinite_input_follows_the_oracle_conventions():
    lhs = np.asarray([[[1.0], [np.inf], [2.0]]], F32)  # NWC
    rhs = np.asarray([[[1.0]], [[0.0]]], F32)  # WIO: taps 1 and 0
    conv = lambda a, b: lax.conv_general_dilated(a, b, (1,), "VALID",
                                                 dimension_numbers=("NWC", "WIO", "NWC"))
    got = oracles.evaluate(conv, lhs, rhs)
    # window [1, inf]: 1*1 + inf*0 = NaN; window [inf, 2]: inf*1 + 2*0 = inf
    np.testing.assert_array_equal(np.asarray(got.values).ravel(), np.asarray([np.nan, np.inf], F32))
