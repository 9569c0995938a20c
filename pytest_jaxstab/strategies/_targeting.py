"""Targeted search: feed the observed error back to Hypothesis so it climbs towards the worst inputs."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
from hypothesis import target

__all__ = ["target_error"]


def target_error(bits: npt.ArrayLike, *, label: str = "error bits") -> float | None:
    """Records the worst error of one example with `hypothesis.target`, so Hypothesis seeks larger ones.

    Call it once per example, inside a `@given` test, with the error in bits (docs/architecture.md,
    "The error metric") of one element or of all output elements: the maximum is recorded. NaN entries
    (discarded samples) are ignored; +inf is recorded as the largest finite float, since Hypothesis
    accepts finite scores only.

    When it helps: Hypothesis's target phase hill-climbs from the best-scoring examples, which pays off
    when the error grows gradually towards the worst inputs (cancellation getting worse as two arguments
    approach each other). It runs only after a good part of the example budget has been spent generating
    (in recent Hypothesis, halfway through `max_examples` below 1000), so with a few dozen examples it
    does nothing; expect an effect from `max_examples` of a few hundred, a clear one from about 1000
    (Hypothesis's own rule of thumb). It also needs the `target` phase (on by default).

    Args:
        bits: error in bits, a scalar or an array of any shape.
        label: the name the score is kept and reported under (Hypothesis's statistics show the best
            score per label); use distinct labels to steer several figures at once.

    Returns:
        The value recorded, or None when `bits` held no number (empty, or all NaN) and nothing was.

    Raises:
        hypothesis.errors.InvalidArgument: outside a Hypothesis test, or when called twice with the
            same label in one example.

    Example:
        >>> from hypothesis import given, settings
        >>> from pytest_jaxstab.strategies import floats
        >>> @settings(max_examples=1000)
        ... @given(floats("float32", domain=(0, 1)))
        ... def test_log1p(x):
        ...     target_error(error_bits(np.log(1 + x), exact_log1p(x)))  # your metric and oracle
    """
    values = np.asarray(bits, dtype=np.float64).reshape(-1)
    values = values[~np.isnan(values)]
    if values.size == 0:
        return None
    worst = float(values.max())
    if math.isinf(worst):
        worst = math.copysign(np.finfo(np.float64).max, worst)
    return float(target(worst, label=label))
