"""What the array classes and relations read of an array's plan: a protocol, so that they need not
import ``_arrays`` (which draws through them: the circle this breaks)."""

from __future__ import annotations

from typing import Protocol

from ._floats import Sampler

__all__ = ["ArrayPlan"]


class ArrayPlan(Protocol):
    """One dtype, domain and shape (``_arrays._ArrayPlan`` is the one implementation)."""

    sampler: Sampler
    shape: tuple[int, ...]
    size: int  # elements in the array
    drawn: int  # elements drawn (the rest repeat them)
