"""Helpers shared by the fuzzer's tests (``tests/test_fuzz_classes.py``, ``tests/test_fuzz_rows.py``)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numpy as np

from pytest_jaxstab.strategies import _arrays


@contextlib.contextmanager
def observed() -> Iterator[list[tuple[str, np.ndarray]]]:
    """The arrays the fuzzer draws while the block runs, each with its draw class's name."""
    seen: list[tuple[str, np.ndarray]] = []
    observer = lambda name, values: seen.append((name, np.array(values, copy=True)))
    _arrays.DRAW_OBSERVERS.append(observer)
    try:
        yield seen
    finally:
        _arrays.DRAW_OBSERVERS.remove(observer)
