"""``jst.check``: the whole pipeline of DESIGN.md section 1 for one function, without pytest.

trace (once) -> rewrite -> jit both variants -> Hypothesis draws inputs -> both variants and the oracle
on each -> error bits -> figures, witnesses, NaN origins, timing -> :class:`CaseResult` with a verdict.

Order of inputs: a baseline's witnesses, then failures stored in Hypothesis's example database by
earlier runs, then ``max_examples`` Hypothesis draws, ``hypothesis.target`` steering towards the judged
variant's worst error. The exploration never fails a Hypothesis test, so every input counts in the
figures; when the judged variant failed, its simplest failing input is shrunk (``_check_shrink``) and
stored in the database (``_check_db``), so the next run re-checks it first.
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np
from hypothesis import HealthCheck, Phase, given, reject, settings, target
from hypothesis import seed as hseed
from hypothesis.errors import FailedHealthCheck

# Everything a check uses is imported here, before any input is drawn: Hypothesis mixes constants of
# the loaded local modules into its draws, so a module imported midway would change later draws
# (fixed-seed runs do without those constants altogether: see _without_local_constants).
from .. import _compat
from .._diagnostics._nan_origin import find_nan_origin
from .._diagnostics._timing import time_backends
from .._dtypes import resolve_dtype
from .._errors import JaxstabError
from .._results import CaseResult, NanOriginRecord, RewriteRecord, TimingRecord, Witness
from ..rewrites import STABILITY, rewrite_jaxpr
from ..rewrites._rule import resolve
from ..strategies import arguments
from ._evaluate import VARIANTS, Accumulator, Evaluator, SampleResult, StageTimes
from ._message import failure_message
from ._replay import FailureStore
from ._shrink import Shrinker
from ._trace import ArgumentError, normalize_shapes, positional, trace_case, x64_scope

__all__ = ["ArgumentError", "StageTimes", "build_strategy", "check", "resolve_rules"]

_TARGET_LABEL = "jaxstab error bits"
# Rejections of one repeated input at most before it is accepted (and evaluated from the cache): few
# during Hypothesis's health check (the first examples), more afterwards.
_MAX_REPEATS = 4
_MAX_REPEATS_LATER = 32


class _Abort(BaseException):
    """Carries an error of ours out of Hypothesis without it being treated (and shrunk) as a failure."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(error)
        self.error = error


def check(
    fn: Callable[..., Any],
    *,
    shapes: Any,
    dtype: Any,
    domain: Any = None,
    max_examples: int = 200,
    seed: int | None = None,
    rules: Iterable[Any] | None = None,
    tolerance_bits: float = 8.0,
    apply: bool = False,
    atol: float | None = None,
    timing: bool = False,
    name: str | None = None,
    witnesses: Sequence[Witness] = (),
    derandomize: bool = False,
    profile: StageTimes | None = None,
) -> CaseResult:
    """Fuzz ``fn`` for numerical stability: both the function as written and its rewritten form.

    Inputs are drawn by ``jst.strategies.arguments`` over extreme magnitudes inside ``domain``; each is
    run through the jitted function and the jitted ``jst.stabilize``-d one, and scored in bits against
    the exact result of the function as written (the real-number function both denote).

    Args:
        fn: a JAX-traceable function of arrays returning an array (or a pytree of them).
        shapes: one shape per positional argument (``[(8, 4), (8,)]``), or a dict of keyword argument
            name to shape (``{"x": (16,)}``).
        dtype: "float16", "bfloat16", "float32" or "float64" (float64 enables JAX's x64 mode for
            this check only).
        domain: the inputs the function is meant for, as ``jst.strategies.arguments`` takes it:
            ``(lo, hi)``, a ``Domain``, a predicate, or one per argument.
        max_examples: how many inputs to draw.
        seed: makes the draws reproducible (no example database is then read or written).
        rules: rewrite rules or names; None means ``jst.rewrites.STABILITY``.
        tolerance_bits: the judged variant fails above this max error (or on any overflow).
        apply: judge the rewritten function (for code that ships ``jst.stabilize(fn)``).
        atol: absolute differences at most ``atol`` count 0 bits; overflows always count.
        timing: time both jitted variants on every backend present.
        name: the case's name in reports and baselines (default ``module.qualname`` of ``fn``).
        witnesses: inputs to re-check before fuzzing (a baseline's worst inputs).
        derandomize: fixed draws (as a baseline comparison needs); no example database.
        profile: a :class:`StageTimes` to fill with the seconds spent per stage.

    Returns:
        A :class:`CaseResult`: figures of both variants, verdicts, ``outcome`` ("passed"/"failed" for
        the judged variant) and, on failure, ``message`` naming the smallest failing input.

    Raises:
        ArgumentError: a bad argument, named (a ``ValueError``).
        UnsupportedPrimitive: the oracle cannot evaluate ``fn`` exactly (before any input is drawn).
        TraceError: JAX cannot trace ``fn`` (the reason in one paragraph, and a hint).
        JaxstabError: the check cannot be carried out as asked (e.g. float64 could not be enabled).

    Example:
        >>> result = jst.check(lambda x: jnp.log(jnp.sum(jnp.exp(x))), shapes=[(16,)], dtype="float32")
        >>> result.original.overflows > 0, result.rewritten.verdict
        (True, 'pass')
    """
    prof = profile if profile is not None else StageTimes()
    start = time.perf_counter()
    names, shape_list, by_keyword = normalize_shapes(shapes)
    try:
        dt = resolve_dtype(dtype)
    except ValueError as exc:
        raise ArgumentError(f"dtype={dtype!r}: {exc}") from None
    _validate(max_examples=max_examples, tolerance_bits=tolerance_bits, atol=atol, seed=seed)
    strategy = build_strategy(dt, shape_list, domain)
    chosen_rules = resolve_rules(rules)
    call = positional(fn, names, by_keyword)
    case_id = name or f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"
    judged = "rewritten" if apply else "original"
    with x64_scope(dt):
        t0 = time.perf_counter()
        prepared = trace_case(call, dt, shape_list)
        rewritten, applied = _rewrite(prepared.closed, chosen_rules)
        evaluator = Evaluator(prepared.closed, rewritten, prepared.judged_outputs, atol, prof)
        # One run on zeros, not counted: compiles both variants and surfaces an oracle that cannot
        # evaluate the program (UnsupportedPrimitive) before Hypothesis starts.
        before = dict(prof)
        evaluator(tuple(np.zeros(s, dt) for s in shape_list))
        for stage in ("run", "oracle", "metrics"):  # counted as setup, below
            prof[stage] = before.get(stage, 0.0)
        prof.add("trace", time.perf_counter() - t0)
        acc = Accumulator(float(tolerance_bits), judged)
        for w in witnesses:  # re-checked first: a baseline's known worst inputs
            if _fits(w.args, dt, shape_list):
                acc.add(evaluator(w.args), drawn=False)
        runner = _Runner(strategy, evaluator, acc, case_id, max_examples, seed, derandomize, prof)
        runner.replay(dt, shape_list)
        runner.explore()
        t0 = time.perf_counter()
        still_fails = lambda ex: ex.outcomes[judged].fails(float(tolerance_bits))
        # At most as many runs as the exploration: bounded by count, not time, so it is reproducible.
        shrinker = Shrinker(evaluator, still_fails, dt, domain, len(shape_list), max_runs=max_examples)
        minimal = runner.minimise(shrinker)
        if minimal is not None:
            acc.add(minimal, drawn=False)  # counted once, as in the run that saved the baseline
        prof.add("minimise", time.perf_counter() - t0)
        t0 = time.perf_counter()
        origins = _nan_origins(prepared.closed, rewritten, acc, minimal)
        prof.add("diagnostics", time.perf_counter() - t0)
        timings: list[TimingRecord] = []
        if timing and acc.first is not None:
            t0 = time.perf_counter()
            timings = _time(prepared.closed, rewritten, acc.first.args)
            prof.add("timing", time.perf_counter() - t0)
    result = CaseResult(
        nodeid=case_id, dtype=str(dt), samples=acc.samples, discarded=acc.discarded, uncertain=acc.uncertain,
        original=acc.stats("original"), rewritten=acc.stats("rewritten"),
        rewrites=[RewriteRecord(a.rule, a.location) for a in applied],
        nan_origins=origins, timing=timings, witnesses=acc.witnesses(minimal),
        # Sorted: the same inputs give the same report whatever order they arrived in (witnesses first).
        points=sorted(acc.points, key=lambda p: (p.magnitude, p.original_bits, p.rewritten_bits)),
        tolerance_bits=float(tolerance_bits), judged=judged,
    )
    result.outcome = "failed" if result.judged_stats.verdict == "fail" else "passed"
    if result.outcome == "failed":
        result.message = failure_message(result, minimal, names, applied)
    prof["examples"] = float(acc.samples)
    prof["total"] = time.perf_counter() - start
    return result


def _validate(*, max_examples: Any, tolerance_bits: Any, atol: Any, seed: Any) -> None:
    if isinstance(max_examples, bool) or not isinstance(max_examples, (int, np.integer)) or max_examples < 1:
        raise ArgumentError(f"max_examples={max_examples!r}: expected a positive integer")
    for name, value in (("tolerance_bits", tolerance_bits), ("atol", atol)):
        if value is None and name == "atol":
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float, np.number)) or not value >= 0:
            raise ArgumentError(f"{name}={value!r}: expected a number >= 0")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))):
        raise ArgumentError(f"seed={seed!r}: expected an integer or None")


def build_strategy(dtype: np.dtype[Any], shapes: Sequence[tuple[int, ...]], domain: Any) -> Any:
    """``jst.strategies.arguments`` for the case; a bad ``domain`` is an :class:`ArgumentError`."""
    try:
        return arguments(dtype, shapes, domain=domain)
    except (ValueError, TypeError) as exc:
        raise ArgumentError(f"domain={domain!r}: {exc}") from None


def resolve_rules(rules: Any) -> tuple[Any, ...]:
    """The rules to apply (``None``: the stability catalogue); unknown names are an :class:`ArgumentError`."""
    try:
        if rules is None:
            return resolve(None, (), tuple(STABILITY))
        return resolve(rules if isinstance(rules, str) else list(rules))
    except (KeyError, TypeError) as exc:
        problem = exc.args[0] if exc.args else exc
        raise ArgumentError(f"rules={rules!r}: {problem}") from None


def _rewrite(closed: Any, rules: Sequence[Any]) -> tuple[Any, list[Any]]:
    new, applied = rewrite_jaxpr(closed, rules, describe=True)
    return new, list(applied)


def _fits(args: Sequence[np.ndarray], dtype: np.dtype[Any], shapes: Sequence[tuple[int, ...]]) -> bool:
    # A witness from an older baseline whose test changed shape or dtype no longer applies.
    return len(args) == len(shapes) and all(
        np.asarray(a).dtype == dtype and tuple(np.shape(a)) == s for a, s in zip(args, shapes))


class _Runner:
    """The Hypothesis exploration of one case, the replay of stored failures and the shrinking."""

    def __init__(self, strategy: Any, evaluator: Evaluator, acc: Accumulator, case_id: str,
                 max_examples: int, seed: int | None, derandomize: bool, prof: StageTimes) -> None:
        self.strategy = strategy
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

    def _settings(self) -> Any:
        suppressed = [h for h in ("too_slow", "data_too_large", "large_base_example", "differing_executors",
                                  "function_scoped_fixture", "nested_given") if hasattr(HealthCheck, h)]
        # No database for the exploration itself: it never fails, and the Pareto front Hypothesis would
        # keep there for targeted runs costs more than the draws. Failures are stored by FailureStore.
        return settings(parent=settings.default, max_examples=self.max_examples, deadline=None,
                        database=None, derandomize=False,
                        phases=(Phase.explicit, Phase.generate, Phase.target),
                        suppress_health_check=[getattr(HealthCheck, h) for h in suppressed],
                        print_blob=False)

    def replay(self, dtype: np.dtype[Any], shapes: Sequence[tuple[int, ...]]) -> None:
        """Re-checks the failures stored by earlier runs (before any fuzzing)."""
        for raw, args in self.store.load():
            if _fits(args, dtype, shapes):
                ex = self.evaluator(args)
                self.acc.add(ex, drawn=False)
                self._replayed.append((raw, ex))
            else:
                self.store.forget(raw)

    def explore(self) -> None:
        """``max_examples`` Hypothesis draws; every one counts; targets the judged variant's error."""
        judged = self.acc.judged
        inner_time = [0.0]
        seen: set[bytes] = set()
        decided: dict[tuple[Any, ...], bool] = {}
        streak: dict[bytes, int] = {}

        def jaxstab_case(args: tuple[np.ndarray, ...]) -> None:
            # An input already explored (as the flushed arrays the variants see) is rejected, so that
            # Hypothesis draws another in its place and the examples are distinct inputs. The decision is
            # kept per choice sequence (Hypothesis may replay one and wants the same outcome), and after
            # a few rejections of one input the next is accepted (a domain of a few floats has few
            # distinct inputs; this also keeps the filter_too_much health check quiet).
            key = self.evaluator.key(args)
            choices = _current_choices()
            if choices is not None:
                accepted = decided.get(choices)
                if accepted is None:
                    # Hypothesis's health check counts rejections among the first examples only.
                    limit = _MAX_REPEATS if len(seen) < 10 else _MAX_REPEATS_LATER
                    accepted = key not in seen or streak.get(key, 0) >= limit
                    streak[key] = 0 if accepted else streak.get(key, 0) + 1
                    decided[choices] = accepted
                if not accepted:
                    reject()
            seen.add(key)
            t0 = time.perf_counter()
            try:
                ex = self.evaluator(args)
                self.acc.add(ex)
            except Exception as exc:  # ours or the oracle's, not a verdict: stop at once, unshrunk
                raise _Abort(exc) from exc
            target(_score(ex, judged), label=_TARGET_LABEL)
            self.prof.add("draws", 1.0)
            inner_time[0] += time.perf_counter() - t0

        test = self._settings()(given(self.strategy)(jaxstab_case))
        if self.seed is not None:
            test = hseed(self.seed)(test)
        t0 = time.perf_counter()
        try:
            with _without_local_constants() if self.seed is not None else contextlib.nullcontext():
                test()
        except _Abort as abort:
            raise abort.error from None
        except FailedHealthCheck as exc:
            raise JaxstabError(f"Hypothesis could not draw inputs for {self.case_id}: {exc}") from None
        self.prof.add("draw", time.perf_counter() - t0 - inner_time[0])

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


@contextlib.contextmanager
def _without_local_constants() -> Iterator[None]:
    """Keeps the constants of the project's own modules out of Hypothesis's draws, for the block.

    Hypothesis (6.131+) draws about 5% of its choices from literals found in the loaded local modules.
    A fixed-seed run (a baseline being saved or compared) must draw the same inputs when unrelated code
    changes, so it sees only Hypothesis's built-in constants. Private Hypothesis API, used defensively:
    on a Hypothesis without it, nothing changes.
    """
    try:
        from hypothesis.internal.conjecture import providers
        from hypothesis.internal.constants_ast import Constants

        provider = providers.HypothesisProvider
        original = provider.__dict__["_local_constants"]
        cache = providers.CONSTANTS_CACHE.cache
    except (ImportError, AttributeError, KeyError):  # pragma: no cover - other Hypothesis versions
        yield
        return
    empty = Constants()
    provider._local_constants = property(lambda self: empty)  # type: ignore[assignment]
    cache.clear()  # it holds the constants allowed per kind of draw, local ones included
    try:
        yield
    finally:
        provider._local_constants = original  # type: ignore[assignment]
        cache.clear()


def _current_choices() -> tuple[Any, ...] | None:
    """The choice sequence of the running Hypothesis example, or None where this Hypothesis does not
    say (private API, used defensively: without it repeated inputs are simply evaluated once)."""
    try:
        from hypothesis.control import current_build_context

        return tuple(current_build_context().data.choices)
    except Exception:  # pragma: no cover - other Hypothesis versions
        return None


def _score(ex: SampleResult, variant: str) -> float:
    out = ex.outcomes[variant]
    # An overflow scores above any finite error, so targeting seeks overflows first.
    return out.bits + (64.0 if out.overflow else 0.0)


def _nan_origins(closed: Any, rewritten: Any, acc: Accumulator, minimal: SampleResult | None,
                 ) -> list[NanOriginRecord]:
    """Where each variant's first NaN/Inf was born: on the input the failure message shows when it
    overflows there, else on the simplest input on which that variant overflowed."""
    records = []
    for variant, program in zip(VARIANTS, (closed, rewritten)):
        ex = acc.overflowing(variant)
        if minimal is not None and minimal.outcomes[variant].overflow:
            ex = minimal
        if ex is None:
            continue
        try:
            origin = find_nan_origin(_compat.as_fun(program), *ex.args)
        except Exception:  # a diagnostic must not hide the verdict
            origin = None
        if origin is None:
            continue
        path = " > ".join(getattr(origin, "path", ()) or ())
        records.append(NanOriginRecord(variant, origin.primitive, origin.location, kind=origin.kind,
                                       line_text=origin.code or "", path=path))
    return records


def _time(closed: Any, rewritten: Any, args: Sequence[np.ndarray]) -> list[TimingRecord]:
    if rewritten is closed:
        # No rewrite fired: both variants are the same program. Timing it twice would only report
        # timer noise as a ratio (tiny functions swing by 20%); the ratio is 1 by construction.
        timings = time_backends(_compat.as_fun(closed), *args)
        return [TimingRecord(t.backend, float(t.original_s), float(t.original_s), 1.0) for t in timings]
    timings = time_backends(_compat.as_fun(closed), *args, rewritten=_compat.as_fun(rewritten))
    nan = float("nan")  # never: a rewritten function was given, so both are timed
    return [TimingRecord(t.backend, float(t.original_s),
                         nan if t.rewritten_s is None else float(t.rewritten_s),
                         nan if t.ratio is None else float(t.ratio)) for t in timings]
