"""The exploration of one case: Hypothesis examples with their siblings, ``target`` on the error, the
replay of stored failures, the top-up to ``max_examples`` inputs, and the shrinking of the failure.

Each Hypothesis example is a scenario (``strategies._scenario``): the example's arguments, ``VARIANTS``
variants (the same classes and parameters, new per-element randomness) and ``FRESH`` fresh draws are
judged, and ``target`` gets the worst error of the example and its variants (they follow the choices
Hypothesis steers). An input this exploration judged before (an example Hypothesis gives back, a
variant of barely noisy data) is neither judged nor counted again (``StageTimes["repeats"]`` counts
them); a repeated example's siblings are seeded by its own choices, so they are new inputs all the
same. When too few inputs were new (examples without per-element randomness have no variants), the
top-up judges more variants of the worst-scoring examples, then more fresh draws, until
``max_examples`` inputs were drawn.
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from hypothesis import HealthCheck, Phase, Verbosity, given, settings, target
from hypothesis import seed as hseed
from hypothesis.errors import FailedHealthCheck, Unsatisfiable

from .._errors import ArgumentError, JaxstabError
from .._hypothesis_compat import without_local_constants as _without_local_constants
from ..strategies._arrays import DRAW_SECONDS
from ..strategies._scenario import Scenario
from ._evaluate import Accumulator, Evaluator, SampleResult, StageTimes
from ._replay import FailureStore
from ._shrink import Shrinker

__all__ = ["FRESH", "VARIANTS", "Runner", "fits"]

_TARGET_LABEL = "jaxstab error bits"
# Inputs judged per Hypothesis example (see `strategies._scenario`): the example, VARIANTS variants of it
# and FRESH fresh draws; a check of N inputs runs N / (1 + VARIANTS + FRESH) examples, so the engine's
# cost per input falls by that factor, and three inputs in seven follow the choices `target` steers.
# The top-up (when variants run short) stops at sibling number _MAX_SALT.
VARIANTS = 2
FRESH = 4
_MAX_SALT = 64


class OutOfTime(Exception):
    """The case's time budget ran out: stop drawing (carried out of Hypothesis by :class:`Abort`)."""

    def __init__(self, seconds: float) -> None:
        super().__init__(seconds)
        self.seconds = seconds


class Abort(BaseException):
    """Carries an error of ours out of Hypothesis without it being treated (and shrunk) as a failure."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(error)
        self.error = error


class Runner:
    """The Hypothesis exploration of one case, the replay of stored failures and the shrinking."""

    def __init__(self, strategy: Any, evaluator: Evaluator, acc: Accumulator, case_id: str,
                 max_examples: int, seed: int | None, derandomize: bool, prof: StageTimes,
                 time_budget: float | None = None, domain: Any = None) -> None:
        self.strategy = strategy
        self.time_budget = time_budget
        self.domain = domain
        self.stopped_after: float | None = None  # seconds, when the time budget stopped the drawing
        self.evaluator = evaluator
        self.acc = acc
        self.prof = prof
        self.max_examples = int(max_examples)
        self.case_id = case_id
        profile = settings()  # the active profile's settings
        fixed = derandomize or seed is not None or profile.derandomize
        # A fixed run draws from a stream that depends on the case only (not on this file's source, as
        # Hypothesis's derandomize would), so committed baselines stay comparable across our releases.
        self.seed: int | None = None
        if fixed:
            material = f"{case_id}\0{seed if seed is not None else 'derandomize'}".encode()
            self.seed = int.from_bytes(hashlib.sha256(material).digest()[:8], "big")
        self.store = FailureStore(None if fixed else profile.database, case_id)
        self._replayed: list[tuple[bytes, SampleResult]] = []

    def _settings(self, examples: int) -> Any:
        suppressed = [h for h in ("too_slow", "data_too_large", "large_base_example", "differing_executors",
                                  "function_scoped_fixture", "nested_given") if hasattr(HealthCheck, h)]
        # No database for the exploration itself: it never fails, and the Pareto front Hypothesis would
        # keep there for targeted runs costs more than the draws. Failures are stored by FailureStore.
        return settings(parent=settings.default, max_examples=examples, deadline=None,
                        database=None, derandomize=False,
                        phases=(Phase.explicit, Phase.generate, Phase.target),
                        suppress_health_check=[getattr(HealthCheck, h) for h in suppressed],
                        print_blob=False, verbosity=Verbosity.quiet)

    def replay(self, dtype: np.dtype[Any], shapes: Sequence[tuple[int, ...]], domains: Sequence[Any]) -> int:
        """Re-checks the failures stored by earlier runs (before any fuzzing); returns how many were
        skipped, and dropped from the database, because they no longer fit the case."""
        skipped = 0
        for raw, args in self.store.load():
            if fits(args, dtype, shapes, domains):
                ex = self.evaluator(args)
                self.acc.add(ex, drawn=False)
                self._replayed.append((raw, ex))
            else:
                skipped += 1
                self.store.forget(raw)
        return skipped

    def explore(self) -> None:
        """``max_examples`` inputs: Hypothesis examples with their siblings (``VARIANTS`` variants and
        ``FRESH`` fresh draws), ``target`` on the judged variant's worst error over the example and its
        variants; then, if too few inputs were new, more siblings of the worst-scoring examples
        (`_top_up`)."""
        judged = self.acc.judged
        inner_time = [0.0]
        drawn = [0]  # inputs drawn and judged: examples and siblings, not the repeats skipped
        scored: list[tuple[float, int, Scenario]] = []  # (score, order, example): the top-up's pick
        # Inputs this exploration judged (not the witnesses re-checked before it: an example equal to one
        # is judged, and counted once, as in the run that saved the witness).
        explored: set[bytes] = set()

        started = time.perf_counter()

        def judge(args: tuple[np.ndarray, ...]) -> float:
            """Evaluates one input and returns its target score. An input this exploration judged
            already is not counted again (nor is it a draw): its score comes from the cache."""
            t0 = time.perf_counter()
            if self.time_budget is not None and t0 - started > self.time_budget:
                raise Abort(OutOfTime(t0 - started))
            flushed, key = self.evaluator.prepare(args)
            if key in explored:
                self.prof.add("repeats", 1.0)
                inner_time[0] += time.perf_counter() - t0
                return _score(self.evaluator.run(flushed, key), judged)
            explored.add(key)
            try:
                ex = self.evaluator.run(flushed, key)
                self.acc.add(ex)
            except Exception as exc:  # ours or the oracle's, not a verdict: stop at once, unshrunk
                raise Abort(exc) from exc
            drawn[0] += 1
            self.prof.add("draws", 1.0)
            inner_time[0] += time.perf_counter() - t0
            return _score(ex, judged)

        def room() -> bool:
            return drawn[0] < self.max_examples

        def jaxstab_case(scenario: Scenario) -> None:
            # Hypothesis steers the example and its variants (the same parameters); fresh draws widen.
            # An input this exploration judged already (Hypothesis's mutations and hill-climbing often
            # give an example back; a variant of barely noisy data can repeat it) is neither judged nor
            # counted again; an example's siblings are seeded by its own choices, so a repeated
            # example's siblings are new inputs all the same.
            score = judge(scenario.args)
            for salt in range(1, VARIANTS + 1):
                variant = scenario.variant(salt) if room() else None
                if variant is not None:
                    score = max(score, judge(variant))
            for salt in range(1, FRESH + 1):
                fresh = scenario.fresh(salt) if room() else None
                if fresh is not None:
                    judge(fresh)
            scored.append((score, len(scored), scenario))
            target(score, label=_TARGET_LABEL)

        # One Hypothesis example per 1 + VARIANTS + FRESH inputs; the siblings make up the rest.
        examples = max(1, -(-self.max_examples // (1 + VARIANTS + FRESH)))
        test = self._settings(examples)(given(self.strategy)(jaxstab_case))
        if self.seed is not None:
            test = hseed(self.seed)(test)
        t0 = time.perf_counter()
        strategy_seconds = DRAW_SECONDS[0]
        try:
            with _without_local_constants() if self.seed is not None else contextlib.nullcontext():
                test()
            self._top_up(scored, drawn, judge)
        except Abort as abort:
            if not isinstance(abort.error, OutOfTime):
                raise abort.error from None
            self.stopped_after = abort.error.seconds
        except (FailedHealthCheck, Unsatisfiable) as exc:
            raise self._no_inputs(exc) from None
        self.prof.add("draw", time.perf_counter() - t0 - inner_time[0])
        self.prof.add("draw_strategy", DRAW_SECONDS[0] - strategy_seconds)

    def _top_up(self, scored: list[tuple[float, int, Scenario]], drawn: list[int],
                judge: Callable[[tuple[np.ndarray, ...]], float]) -> None:
        """Until ``max_examples`` inputs were drawn: more variants of the worst-scoring examples, one each
        per round, then (examples without per-element randomness have no variants) fresh draws. Stops
        early when ``max_examples`` siblings in a row were repeats or could not be drawn (a domain with
        few inputs, a predicate that rejects most values)."""
        ranked = [s for _, _, s in sorted(scored, key=lambda t: (-t[0], t[1]))]
        misses = 0
        for kind, first in (("variant", VARIANTS + 1), ("fresh", FRESH + 1)):
            salts = dict.fromkeys(range(len(ranked)), first)
            while drawn[0] < self.max_examples and salts and misses < self.max_examples:
                for i in list(salts):
                    if drawn[0] >= self.max_examples or misses >= self.max_examples:
                        return
                    args = getattr(ranked[i], kind)(salts[i])
                    salts[i] += 1
                    if (ranked[i].repeats and kind == "variant") or salts[i] > _MAX_SALT:
                        del salts[i]
                    else:
                        before = drawn[0]
                        if args is not None:
                            judge(args)
                        misses = misses + 1 if drawn[0] == before else 0

    def _no_inputs(self, exc: Exception) -> JaxstabError:
        """Hypothesis found too few inputs: when a domain predicate rejects them, advice the user can act
        on rather than Hypothesis's (which is about its own health checks)."""
        spec = self.domain
        predicates = callable(spec) or getattr(spec, "where", None) is not None or (
            isinstance(spec, (list, tuple, dict)) and any(
                callable(d) or getattr(d, "where", None) is not None
                for d in (spec.values() if isinstance(spec, dict) else spec)))
        if predicates:
            return ArgumentError(
                f"{self.case_id}: the domain's predicate rejects (nearly) every drawn value, so no input "
                f"could be drawn (domain={spec!r}). Check the predicate, and give bounds that hold the "
                "values it accepts, e.g. domain=jst.strategies.Domain(lo, hi, where=pred): values are "
                "drawn inside the bounds, then filtered.")
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return JaxstabError(f"Hypothesis could not draw inputs for {self.case_id}: {first}")

    def minimise(self, shrinker: Shrinker) -> SampleResult | None:
        """The simplest failing input, shrunk; stored for the next run. None when the case passes."""
        judged, tolerance = self.acc.judged, self.acc.tolerance_bits
        for raw, ex in self._replayed:
            if not ex.outcomes[judged].fails(tolerance):
                self.store.forget(raw)  # fixed since it was stored
        start = self.acc.simplest_failing()
        if start is None:
            return None
        minimal = shrinker.shrink(start)
        self.store.save(minimal.args)
        return minimal


def fits(args: Sequence[np.ndarray], dtype: np.dtype[Any], shapes: Sequence[tuple[int, ...]],
          domains: Sequence[Any]) -> bool:
    """Whether a stored input (a witness, a database entry) is still an input of the case: a test whose
    shapes, dtype or domain changed since it was stored no longer takes it."""
    if len(args) != len(shapes):
        return False
    for a, s, dom in zip(args, shapes, domains):
        a = np.asarray(a)
        if a.dtype != dtype or tuple(a.shape) != s:
            return False
        if not bool(np.all(dom.contains(a))):
            return False
        if dom.where is not None and not all(dom.accepts(v) for v in a.reshape(-1)):
            return False
    return True


def _score(ex: SampleResult, variant: str) -> float:
    out = ex.outcomes[variant]
    # An overflow scores above any finite error, so targeting seeks overflows first.
    return out.bits + (64.0 if out.overflow else 0.0)
