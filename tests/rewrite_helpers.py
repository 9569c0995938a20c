"""Helpers shared by the tests of rewrites that repair derivatives (``test_rewrites_backward.py``,
``test_rewrites_untaken_branches.py``): error in bits against mpmath references rounded to the dtype,
and bit-for-bit equality where a rule promises the program's own values."""

from __future__ import annotations

from typing import Any

import numpy as np

from pytest_jaxstab.oracles import error_bits
from pytest_jaxstab.oracles.core._rounding import round_to_dtype


def bits(got: Any, exact: Any, dtype: Any = np.float32) -> np.ndarray:
    """Per element, the error of ``got`` in bits (log2(1 + ulps)) against the mpmath values ``exact``
    rounded to ``dtype``."""
    ref = np.array([round_to_dtype(e, dtype) for e in exact], dtype)
    return np.asarray(error_bits(np.asarray(got, dtype), ref))


def identical(a: Any, b: Any) -> bool:
    """Whether ``a`` and ``b`` are equal element for element, NaN matching NaN."""
    a, b = np.asarray(a), np.asarray(b)
    return bool(np.all((a == b) | (np.isnan(a) & np.isnan(b))))
