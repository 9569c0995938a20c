"""What a failing check pays beyond its verdict is bounded (issue 46): the shrink's runs and the local
error's exact evaluations.

Mechanism tests, no wall clock: the shrinker is driven by a fake evaluation that counts its calls, the
support of an output element is checked against the dependence the mathematics gives (``(x @ w + b)[i, j]``
reads row ``i`` of ``x``, column ``j`` of ``w`` and ``b[j]``; a row-wise softmax's row ``i`` reads row
``i``), and the local error's early stop is checked to give the answer of one analysis over every
sample, with fewer analyses.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import jax.numpy as jnp
import numpy as np
import pytest

from pytest_jaxstab import _compat as C
from pytest_jaxstab._check import _localize
from pytest_jaxstab._check._shrink import ELEMENT_RUNS, MAX_RUNS, MIN_RUNS, SUPPORT_FROM, Shrinker, run_budget
from pytest_jaxstab._check._shrink_support import support_masks, worst_element
from pytest_jaxstab._diagnostics import _local_error, analyse
from pytest_jaxstab._dtypes import dtype_info
from pytest_jaxstab.strategies import Domain

F32 = np.dtype(np.float32)


def example(args: list[np.ndarray], bits: list[np.ndarray] | None = None) -> Any:
    """A stand-in for ``SampleResult``: what the shrinker and the support read of one."""
    scores = {"original": SimpleNamespace(element_bits=bits or [])}
    return SimpleNamespace(args=tuple(args), outcomes=scores)


class Counting:
    """A fake evaluation: counts its calls; an input fails where ``fails`` says so."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, args: Any) -> Any:
        self.calls += 1
        return example(list(args))


def domains(n: int) -> list[Any]:
    return [Domain(-1e6, 1e6).resolve(dtype_info(F32))] * n


# ------------------------------------------------------------------------------------ the run budget
def test_small_inputs_keep_the_case_budget() -> None:
    # below 10,000 elements the budget is the case's max_examples, as before issue 46's bound
    for elements in (1, 16, 4096, ELEMENT_RUNS // 100):
        assert run_budget(100, elements) == 100
    assert run_budget(1000, 16) == MAX_RUNS


def test_large_inputs_get_fewer_runs_never_below_the_floor() -> None:
    assert run_budget(100, 74_000) == MIN_RUNS  # a (32, 256) @ (256, 256) + (256,) layer
    assert run_budget(100, 20_000) == ELEMENT_RUNS // 20_000
    assert run_budget(5, 10**6) == 5  # never more than the case allows


def test_a_shrink_never_evaluates_past_its_budget() -> None:
    # no candidate fails: delta debugging would try every block of every level, then every element
    evaluate = Counting()
    big = np.arange(1, 20_001, dtype=np.float32).reshape(2, -1)  # 52 runs: below the case's 100
    shrinker = Shrinker(evaluate, lambda ex: False, F32, domains(1), max_runs=100, program=None)
    shrinker.shrink(example([big]))
    assert evaluate.calls == shrinker.runs == run_budget(100, big.size)
    assert shrinker.exhausted


def test_a_candidate_met_again_costs_no_run() -> None:
    # fails only while element 0 is kept: at every level the block holding it is tried, zeroed to
    # the same all-but-nothing candidate at most once
    evaluate = Counting()
    x = np.ones(64, np.float32)
    seen: list[bytes] = []

    def fails(ex: Any) -> bool:
        seen.append(np.asarray(ex.args[0]).tobytes())
        return bool(np.asarray(ex.args[0])[0] != 0)

    shrinker = Shrinker(evaluate, fails, F32, domains(1), max_runs=100, program=None)
    out = shrinker.shrink(example([x]))
    assert len(seen) == len(set(seen))  # no input judged twice
    assert np.flatnonzero(out.args[0]).tolist() == [0]
    assert not shrinker.exhausted  # it stopped because nothing simpler fails, inside its runs


# ------------------------------------------------------------------------------------ the support
def dense(x: Any, w: Any, b: Any) -> Any:
    return jnp.tanh(x @ w + b)


def softmax_rows(z: Any) -> Any:
    e = jnp.exp(z)
    return e / jnp.sum(e, axis=-1, keepdims=True)


def test_support_of_a_dense_layer_element_is_its_row_and_column() -> None:
    rng = np.random.default_rng(0)
    args = [rng.normal(size=s).astype(np.float32) for s in ((4, 8), (8, 6), (6,))]
    closed, _, _ = C.trace(dense, *args)
    bits = np.zeros((4, 6))
    bits[2, 5] = 30.0
    masks = support_masks(closed, [0], example(args, [bits]), F32)
    assert masks is not None
    want_x = np.zeros((4, 8), bool)
    want_x[2] = True
    want_w = np.zeros((8, 6), bool)
    want_w[:, 5] = True
    want_b = np.zeros(6, bool)
    want_b[5] = True
    for got, want in zip(masks, (want_x, want_w, want_b)):
        np.testing.assert_array_equal(got, want)


def test_support_ignores_the_nan_of_overflowed_rows() -> None:
    # exp overflows in every row: at the input a zero cotangent times an infinite partial is NaN in
    # rows the element never reads; the support is still the element's own row
    z = np.full((4, 16), 200.0, np.float32)
    closed, _, _ = C.trace(softmax_rows, z)
    bits = np.zeros((4, 16))
    bits[1, 3] = 32.0
    masks = support_masks(closed, [0], example([z], [bits]), F32)
    assert masks is not None and masks[0] is not None
    want = np.zeros((4, 16), bool)
    want[1] = True
    np.testing.assert_array_equal(masks[0], want)


def test_worst_element_is_the_most_bits_over_the_variants() -> None:
    ex = SimpleNamespace(outcomes={
        "original": SimpleNamespace(element_bits=[np.array([1.0, np.nan, 9.0])]),
        "rewritten": SimpleNamespace(element_bits=[np.array([12.0, 0.0, 0.0])])})
    assert worst_element(ex) == (0, 0)  # type: ignore[arg-type]


def test_the_support_cut_is_one_run_and_only_kept_where_it_still_fails() -> None:
    rows, cols = 8, SUPPORT_FROM // 8
    rng = np.random.default_rng(1)
    z = rng.uniform(1, 2, size=(rows, cols)).astype(np.float32)
    closed, _, _ = C.trace(softmax_rows, z)
    bits = np.zeros((rows, cols))
    bits[5, 7] = 30.0
    evaluate = Counting()
    first: list[np.ndarray] = []

    def fails(ex: Any) -> bool:  # the failure lives in row 5: element (5, 7) must keep its value
        a = np.asarray(ex.args[0])
        if not first:
            first.append(a.copy())
        return bool(a[5, 7] == z[5, 7])

    shrinker = Shrinker(evaluate, fails, F32, domains(1), max_runs=100, program=(closed, [0]))
    out = shrinker.shrink(example([z], [bits]))
    assert shrinker.support_kept is True
    cut = first[0]  # the first run: every row but row 5 zeroed at once
    assert not cut[np.arange(rows) != 5].any() and np.array_equal(cut[5], z[5])
    assert out.args[0][5, 7] == z[5, 7]
    assert evaluate.calls <= run_budget(100, z.size)


def test_small_inputs_are_not_cut_by_support() -> None:
    z = np.ones((4, 16), np.float32)
    closed, _, _ = C.trace(softmax_rows, z)
    shrinker = Shrinker(Counting(), lambda ex: True, F32, domains(1), program=(closed, [0]))
    shrinker.shrink(example([z], [np.ones((4, 16))]))
    assert shrinker.support_kept is None  # below SUPPORT_FROM elements: delta debugging as before


# ------------------------------------------------------------------------------------ local error
def cancelling(x: Any, y: Any) -> Any:
    return jnp.log((x + y) - x)


def test_still_losing_is_one_analysis_over_every_sample_with_fewer_runs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # (x + y) - x cancels where |y| << |x|: every sample loses bits on the same line
    samples = [(np.float32(1e6 * k), np.float32(1e-3 * k)) for k in (1, 2, 3)]
    closed, _, _ = C.trace(cancelling, *samples[0])
    whole = analyse(closed, samples, tolerance_bits=8.0).lines
    locations = {line.location for line in whole}
    want = {line.location for line in whole if line.max_bits > 8.0}
    assert want  # the case loses bits somewhere, or the test would pass vacuously
    calls: list[int] = []
    real = _local_error.evaluate

    def counted(*a: Any, **k: Any) -> Any:
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(_local_error, "evaluate", counted)  # one exact evaluation per sample
    assert _localize.still_losing(closed, samples, locations, 8.0) == want
    if want == locations:
        assert len(calls) == 1  # settled by the first sample
    else:
        assert len(calls) == len(samples)
