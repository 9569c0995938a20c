"""Scenarios and their siblings: what `jst.check` judges besides each Hypothesis example.

A variant keeps the example's classes, relations and parameters and renews its per-element randomness;
a fresh draw is a new draw of everything from a generator seeded by the example. Both stay inside every
kind of domain, are deterministic in the example, and are new inputs. Checked from the values alone
(and the class names `DRAW_OBSERVERS` reports), with fixed Hypothesis seeds.
"""

from __future__ import annotations

import collections
import contextlib
import math
from collections.abc import Iterator
from typing import Any

import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, seed, settings

import pytest_jaxstab as jst
from pytest_jaxstab._check import StageTimes, check_case
from pytest_jaxstab.strategies import Domain, _arrays
from pytest_jaxstab.strategies._scenario import Scenario, scenarios

DOMAINS = [
    Domain(1e4, 1e4 + 1, open_lo=True, open_hi=True),
    Domain(0, 1, open_lo=True),
    Domain(-1e-3, 0, open_hi=True),
    Domain(None, -1e30),
    Domain(-1e6, 1e6),
    None,
]


@contextlib.contextmanager
def observed() -> Iterator[list[str]]:
    names: list[str] = []
    observer = lambda name, values: names.append(name)
    _arrays.DRAW_OBSERVERS.append(observer)
    try:
        yield names
    finally:
        _arrays.DRAW_OBSERVERS.remove(observer)


def examples(strategy: Any, count: int, at: int = 0) -> list[Scenario]:
    drawn: list[Scenario] = []

    @seed(at)
    @settings(max_examples=count, database=None, deadline=None)
    @given(strategy)
    def test(value: Scenario) -> None:
        drawn.append(value)

    test()
    return drawn


def inside(x: np.ndarray, domain: Domain | None) -> bool:
    """Every element finite and inside `domain` (its open or closed ends), read here from the values."""
    if not np.all(np.isfinite(x)):
        return False
    if domain is None:
        return True
    lo = -math.inf if domain.lo is None else float(domain.lo)
    hi = math.inf if domain.hi is None else float(domain.hi)
    wide = x.astype(np.float64)
    above = wide > lo if domain.open_lo else wide >= lo
    below = wide < hi if domain.open_hi else wide <= hi
    return bool(np.all(above & below)) and (domain.where is None or all(domain.where(v) for v in x.ravel()))


def key(args: tuple[np.ndarray, ...]) -> bytes:
    return b"".join(a.tobytes() for a in args)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize("domain", DOMAINS, ids=repr)
def test_siblings_stay_inside_the_domain_in_every_dtype(dtype: str, domain: Any) -> None:
    try:
        strategy = scenarios(dtype, [(12,), (12,)], domain=domain)
        drawn = examples(strategy, 40)
    except ValueError:
        pytest.skip(f"{domain!r} holds no {dtype} value")
    siblings = 0
    for scenario in drawn:
        for args in [scenario.variant(1), scenario.variant(2), scenario.fresh(1), scenario.fresh(2)]:
            if args is None:
                continue
            siblings += 1
            for x in args:
                assert x.dtype == np.dtype(scenario.args[0].dtype) and x.shape == (12,)
                assert inside(x, domain), x
    assert siblings >= 2 * len(drawn)  # most examples have variants, and fresh draws need no predicate


@pytest.mark.parametrize("where", [lambda v: abs(v) > 1e-3, lambda v: v > 0], ids=["rejects little", "half"])
def test_siblings_respect_a_domain_predicate_and_per_argument_domains(where: Any) -> None:
    domains = [Domain(-10, 10, where=where), Domain(0, 1e3, open_lo=True)]
    answered = 0
    for scenario in examples(scenarios("float32", [(8,), (8,)], domain=domains), 60):
        for args in [scenario.variant(1), scenario.fresh(1), scenario.fresh(2)]:
            if args is not None:
                answered += 1
                assert inside(args[0], domains[0]) and inside(args[1], domains[1]), args
    # Rejected elements are redrawn for siblings too: fresh draws always, variants unless repeating.
    assert answered >= 2 * 60


def test_a_check_with_a_strict_predicate_still_judges_max_examples_inputs() -> None:
    prof = StageTimes()
    domain = Domain(-10, 10, where=lambda v: v > 0)  # half of every drawn array is redrawn
    check_case(lambda x: x * 2.0, shapes=[(8,)], dtype="float32", seed=1, max_examples=70, domain=domain,
              profile=prof)
    assert prof["draws"] == 70


def test_siblings_are_deterministic_and_new() -> None:
    for scenario in examples(scenarios("float32", [(16,)], domain=(-1e3, 1e3)), 60, at=3):
        twice = [scenario.variant(1), scenario.variant(1)]
        assert (twice[0] is None) == (twice[1] is None)
        if twice[0] is not None and twice[1] is not None:
            assert key(twice[0]) == key(twice[1])
        first, again = scenario.fresh(1), scenario.fresh(1)
        assert first is not None and again is not None and key(first) == key(again)
        fresh = [scenario.fresh(salt) for salt in range(1, 5)]
        assert all(a is not None for a in fresh)  # no domain predicate: every fresh draw is answered
        assert len({key(scenario.args)} | {key(a) for a in fresh if a is not None}) == 5  # each new


def test_a_variant_keeps_the_dominant_element_and_renews_the_rest() -> None:
    """A dominant-element array's parameters (where the dominant element is, its value) are the example's;
    the elements far below it are new. Unbounded domain: the dominant element stands out in every mode."""
    checked = 0
    for scenario in examples(scenarios("float32", [(16,)]), 200, at=1):
        with observed() as names:
            variant = scenario.variant(1)
        if names != ["dominant"] or variant is None:
            continue
        x, v = scenario.args[0], variant[0]
        # Dominant in magnitude (a sum's terms) or in value (exp-space, as logsumexp sees it).
        tops = {int(np.argmax(np.abs(x))), int(np.argmax(x))}
        if any(np.sum(x == x[t]) > 1 for t in tops):
            continue  # no single dominant element (others clamped to the domain's end)
        kept = [t for t in tops if v[t] == x[t] and t in (int(np.argmax(np.abs(v))), int(np.argmax(v)))]
        assert kept, (x, v)
        assert not np.array_equal(np.delete(v, kept[0]), np.delete(x, kept[0]))
        checked += 1
    assert checked >= 5


def test_a_variant_keeps_the_offset_and_noise_level() -> None:
    """Offset-plus-noise arrays: the variant's values are as close to the example's median as the
    example's own values are (the same offset and level), and are other values."""
    checked = 0
    for scenario in examples(scenarios("float64", [(32,)], domain=(1.0, 1e6)), 200, at=2):
        with observed() as names:
            variant = scenario.variant(1)
        if names != ["offset_noise"] or variant is None:
            continue
        x, v = scenario.args[0], variant[0]
        centre = float(np.median(x))
        spread = float(np.max(np.abs(x - centre)))
        if spread == 0.0:
            continue
        assert not np.array_equal(v, x)
        # Both are the offset plus noise of one level: every element of either within twice the
        # example's largest deviation (noise is uniform, so both arrays' ranges are near the same).
        assert float(np.max(np.abs(v - centre))) <= 2 * spread
        checked += 1
    assert checked >= 5


def test_fresh_draws_cover_every_class_and_relation() -> None:
    with observed() as names:
        for scenario in examples(scenarios("float32", [(8,), (8,)]), 50, at=4):
            for salt in (1, 2, 3):
                scenario.fresh(salt)
    counts = collections.Counter(names)
    plan = _arrays._ArrayPlan(_arrays.Sampler("float32", None), (8,))
    assert set(plan.class_names) <= set(counts), counts
    assert {"same", "negated", "ulps", "approx", "approx_negated", "scaled"} <= set(counts), counts


def test_a_constant_example_has_no_variants() -> None:
    seen = 0
    for scenario in examples(scenarios("float32", [(8,)], domain=(1, 2)), 200):
        with observed() as names:
            variant = scenario.variant(1)
        if names == ["constant"]:
            assert variant is None and scenario.repeats
            seen += 1
    assert seen >= 3


def test_a_variant_is_never_its_example() -> None:
    """Randomness that does not survive (elements clamped to the domain's end, noise below half an ulp)
    makes no variant: the example `repeats` instead, so no variant repeats its example."""
    domains = [(0, 1e3), (0, 1), Domain(1.0, 1.0 + 2.0**-20)]
    variants = repeats = 0
    for scenario in examples(scenarios("float32", [(6,), (6,), (6,)], domain=domains), 150, at=2):
        variant = scenario.variant(1)
        if variant is None:
            repeats += scenario.repeats
            continue
        variants += 1
        assert any(not np.array_equal(a, b) for a, b in zip(variant, scenario.args))
    assert variants >= 50 and repeats >= 5


def test_a_check_judges_max_examples_distinct_inputs() -> None:
    prof = StageTimes()
    result = check_case(lambda x, y: x * y, shapes=[(8,), (8,)], dtype="float32", seed=0, max_examples=140,
                       profile=prof)
    assert prof["draws"] == 140  # examples, siblings and the top-up together, repeats not included
    assert result.samples == 140  # every drawn input new (repeats skipped); x * y passes: nothing shrunk
    # Drawn inputs that repeated an earlier one are few (the benchmark counts them as draws).
    assert prof.get("repeats", 0.0) <= 0.1 * 140


@pytest.mark.parametrize("at", [0, 1, 2, 3, 4])
def test_every_class_and_relation_appears_in_every_200_input_check(at: int) -> None:
    with observed() as names:
        jst.check(lambda x, y: x * y, shapes=[(8,), (8,)], dtype="float32", seed=at, max_examples=200)
    plan = _arrays._ArrayPlan(_arrays.Sampler("float32", None), (8,))
    assert set(plan.class_names) <= set(names), collections.Counter(names)
    assert {"same", "negated", "ulps", "approx", "approx_negated", "scaled"} <= set(names)


def test_target_gets_the_worst_error_of_each_example_and_its_variants(monkeypatch: Any) -> None:
    """One `target` call per Hypothesis example, on the error label, with an overflow scoring above any
    finite error (64 + bits): log(sum(exp(x))) overflows past 88.7 where its exact value is finite."""
    from pytest_jaxstab._check import _explore

    calls: list[tuple[float, str]] = []
    made: list[Scenario] = []
    monkeypatch.setattr(_explore, "target", lambda score, label: calls.append((score, label)))
    original_init = Scenario.__init__

    def init(self: Scenario, *args: Any) -> None:
        made.append(self)
        original_init(self, *args)

    monkeypatch.setattr(Scenario, "__init__", init)
    result = jst.check(lambda x: jnp.log(jnp.sum(jnp.exp(x))), shapes=[(4,)], dtype="float32", seed=0,
                       max_examples=70, domain=(0.0, 200.0))
    assert result.original.overflows > 0
    assert 1 <= len(calls) <= len(made)  # examples Hypothesis ran to completion; at most one per draw
    assert {label for _, label in calls} == {"jaxstab error bits"}
    assert max(score for score, _ in calls) >= 64.0
