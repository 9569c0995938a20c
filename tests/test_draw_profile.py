"""The profile of a check splits its `draw` stage: the time inside the argument strategy is a part of it.

`bench_harness.py` prints that part next to the draw share (issue 15); the rest of `draw` is Hypothesis's
engine (generating, mutating and hill-climbing choice sequences, per-example setup) and the inputs
rejected as repeats.
"""

from __future__ import annotations

import jax.numpy as jnp
import pytest

from pytest_jaxstab._check import StageTimes, check_case


def _weighted_gap(a, b, c):
    return jnp.sum(a * b - c)


@pytest.mark.parametrize("shapes", [[(16,)], [(8,), (8,), (8,)]])
def test_strategy_time_is_a_part_of_the_draw_stage(shapes):
    fn = jnp.sum if len(shapes) == 1 else _weighted_gap
    prof = StageTimes()
    check_case(fn, shapes=shapes, dtype="float32", domain=(-10.0, 10.0), max_examples=40, seed=3,
          name=f"test_draw_profile::{len(shapes)}", profile=prof)
    # Every example runs the strategy, so it took time; it runs outside the evaluation of inputs, which
    # `draw` leaves out, so it is within `draw`.
    assert prof["draws"] >= 30
    assert 0.0 < prof["draw_strategy"] <= prof["draw"]


def test_strategy_time_counts_this_check_only():
    first, second = StageTimes(), StageTimes()
    for prof in (first, second):
        check_case(jnp.sum, shapes=[(4,)], dtype="float32", domain=(-1.0, 1.0), max_examples=20, seed=1,
              name="test_draw_profile::twice", profile=prof)
    # A running total would make the second check's figure include the first's.
    assert second["draw_strategy"] <= second["draw"]
    assert first["draw_strategy"] <= first["draw"]
