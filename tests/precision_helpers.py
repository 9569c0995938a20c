"""Helpers shared by the low-precision tests (``jst.tune_precision``, ``jst.precision_policy``).

``tests/test_tune_precision.py``, ``tests/test_tune_precision_draws.py`` and
``tests/test_precision_policy.py`` name the lines a plan keeps by a comment on the line, and judge every
accuracy claim in ulps of the low dtype against a float64 reference.
"""

from __future__ import annotations

import inspect

import numpy as np

import pytest_jaxstab as jst


def marked_line(fn, marker: str) -> str:
    """``file:line`` of the line of ``fn``'s source that carries the comment ``marker``."""
    src, first = inspect.getsourcelines(fn)
    (k,) = [i for i, text in enumerate(src) if f"# {marker}" in text]
    return f"{inspect.getsourcefile(fn)}:{first + k}"


def ulps(got, ref64, dtype) -> np.ndarray:
    """Ulps of ``dtype`` between ``got`` and the float64 reference rounded to ``dtype`` (inf: not finite)."""
    ref = np.asarray(ref64, np.float64).astype(dtype)
    got = np.asarray(got, dtype)
    n_ulps = np.exp2(jst.oracles.error_bits(got, ref)) - 1.0
    return np.where(np.isfinite(got.astype(np.float32)), n_ulps, np.inf)
