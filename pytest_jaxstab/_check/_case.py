"""``jst.check``: the whole pipeline of docs/architecture.md, "Data flow" for one function, without pytest.

trace (once) -> rewrite -> jit both variants -> Hypothesis draws inputs -> both variants and the oracle
on each -> error bits -> figures, witnesses, NaN origins, local error, timing -> :class:`CaseResult`
with a verdict.

Order of inputs: a baseline's witnesses, then failures stored in Hypothesis's example database by
earlier runs, then ``max_examples`` drawn inputs (``_explore``: Hypothesis examples with their siblings,
``hypothesis.target`` steering towards the judged variant's worst error). The exploration never fails a
Hypothesis test, so every input counts in the figures; when the judged variant failed, its simplest
failing input is shrunk (``_shrink``) and stored in the database (``_replay``), so the next run
re-checks it first.
"""

from __future__ import annotations

import dataclasses
import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

# Everything a check uses is imported here, before any input is drawn: Hypothesis mixes constants of
# the loaded local modules into its draws, so a module imported midway would change later draws
# (fixed-seed runs do without those constants altogether: see _explore, _without_local_constants).
from .. import _compat
from .._diagnostics import find_nan_origin, time_backends
from .._dtypes import from_ordinal, to_ordinal
from .._errors import ArgumentError
from .._results import CaseResult, NanOriginRecord, RewriteRecord, TimingRecord, Witness
from .._settings import layered
from .._settings import option as _option
from .._settings import settings as Settings
from ..rewrites.engine._engine import rewrite_jaxpr
from ._cost import estimate, long_check, oracle_cost, over_budget
from ._evaluate import VARIANTS, Accumulator, Evaluator, SampleResult, StageTimes, uniform_undefined_share
from ._explore import Runner, fits
from ._gradient import derivative_case, with_gradient
from ._localize import local_error_records
from ._message import CheckWarning, failure_message, nothing_judged, passing_note
from ._regression import RegressionWatch, apply_regression
from ._seeds import constant_inputs
from ._shrink import Shrinker
from ._spec import Case, build_strategy, make_case, resolve_rules
from ._trace import trace_case, x64_scope

__all__ = ["ORACLE_BUDGET", "TIME_BUDGET", "ArgumentError", "Case", "RunContext", "StageTimes",
           "build_strategy", "check", "judge_case", "make_case", "oracle_cost", "resolve_rules"]


def _declared(name: str) -> Any:
    opt = _option(name)
    assert opt is not None, name
    return opt.default

#: Default largest estimated oracle cost of one case, in scalar operations (``oracle_cost`` times the
#: number of examples, a fast-path program's operations counted at their share: ``_cost``), as declared
#: in ``jst.settings``. At 10-30 µs per Arb operation this is a few minutes of checking; above it a
#: check fails at once instead of running for hours.
ORACLE_BUDGET: float = _declared("oracle_budget")
#: Default wall-clock budget of one case's drawing, in seconds (``jst.settings``): past it no new input
#: is drawn, and the case is judged on what was drawn (a CheckWarning says how many).
TIME_BUDGET: float = _declared("time_budget")


@dataclasses.dataclass(frozen=True)
class RunContext:
    """What a run brings to a case beyond its settings: inputs to re-check first (a baseline's
    witnesses, and the gradient's own), fixed draws, and the stage clock to fill."""

    witnesses: Sequence[Witness] = ()
    gradient_witnesses: Sequence[Witness] = ()
    derandomize: bool = False
    profile: StageTimes = dataclasses.field(default_factory=StageTimes)


def check(
    fn: Callable[..., Any],
    *,
    shapes: Any,
    dtype: Any,
    domain: Any = None,
    settings: Settings | None = None,
    name: str | None = None,
    **options: Any,
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
        settings: a ``jst.settings`` to start from (default: the loaded profile, ``jst.settings.default``).
        **options: any option of ``jst.settings`` that ``jst.check`` takes, overriding ``settings``:
            ``max_examples`` (inputs drawn, default 100), ``seed`` (reproducible draws, no example
            database), ``tolerance_bits`` (the judged variant fails above this max error, or on any
            overflow; default 8), ``atol`` (absolute differences at most this count 0 bits), ``rules``
            (rewrite rules or names; None: ``jst.rewrites.STABILITY``), ``apply`` (judge the rewritten
            function), ``grad`` (also judge the gradient, in ``result.gradient``), ``judge``
            ("stability": error beyond what the conditioning at the input explains, the default;
            "accuracy": forward error), ``oracle_budget`` (largest estimated cost of the exact
            evaluation, :func:`oracle_cost` x ``max_examples``, a program the oracle's fast path covers
            counted at a fifteenth; above it an ``ArgumentError`` before anything runs, and a
            ``CheckWarning`` with the estimated seconds where they pass a minute; None: no limit),
            ``time_budget`` (seconds of drawing, then the case is
            judged on what was drawn with a :class:`CheckWarning`; None: no limit), ``timing`` (time
            both jitted variants on every backend present). ``help(jst.settings)`` lists them all.
        name: the case's name in reports and baselines (default ``module.qualname`` of ``fn``).

    Returns:
        A :class:`CaseResult`: figures of both variants, verdicts, ``outcome`` ("passed"/"failed" for
        the judged variant) and, on failure, ``message`` naming the smallest failing input. Whatever
        ``apply`` and ``judge`` say, ``outcome`` is "failed" with ``rewrite_regression`` set when the
        rewrite makes the function worse: at some input, under the lens, the rewritten variant fails
        (judged bits above ``tolerance_bits``, or an overflow) where the original does not, and its
        judged bits exceed the original's by more than ``tolerance_bits`` (or it overflows); the
        message names the rule and the line (``_regression.py``).

    Raises:
        ArgumentError: a bad argument, named (a ``ValueError``; ``SettingsError`` for an option); a
            case over the oracle budget; a case where nothing could be judged (every input outside
            the function's real domain, or uncertain): the message says why and what to change.
        UnsupportedPrimitive: the oracle cannot evaluate ``fn`` exactly (before any input is drawn).
        TraceError: JAX cannot trace ``fn`` (the reason in one paragraph, and a hint).
        JaxstabError: the check cannot be carried out as asked (e.g. float64 could not be enabled).

    Example:
        >>> import jax.numpy as jnp
        >>> import pytest_jaxstab as jst
        >>> def logsumexp(x):
        ...     return jnp.log(jnp.sum(jnp.exp(x)))
        >>> result = jst.check(logsumexp, shapes=[(16,)], dtype="float32", seed=0)
        >>> result.original.overflows > 0, result.rewritten.verdict
        (True, 'pass')
    """
    # Resolved here, so an internal argument of check_case (witnesses=, profile=, ...) given to
    # jst.check is an unknown option, named, like any other (SettingsError).
    chosen = layered(Settings.default, {"settings": settings, **options}, "check", where="jst.check()")
    return check_case(fn, shapes=shapes, dtype=dtype, domain=domain, settings=chosen, name=name)


def check_case(
    fn: Callable[..., Any],
    *,
    shapes: Any,
    dtype: Any,
    domain: Any = None,
    settings: Settings | None = None,
    name: str | None = None,
    witnesses: Sequence[Witness] = (),
    derandomize: bool = False,
    profile: StageTimes | None = None,
    derivative: bool = False,
    gradient_witnesses: Sequence[Witness] = (),
    **options: Any,
) -> CaseResult:
    """``jst.check`` with what a run brings beyond the settings: the plugin's, the baseline's and the
    gradient's entry point (``jst.check``'s arguments, plus the ones below; not public).

    Args:
        witnesses: inputs to re-check before fuzzing (a baseline's worst inputs). Those that do not
            fit the case's current domain, shapes and dtype are skipped (a :class:`CheckWarning` says
            how many), as are stored failures of the example database.
        derandomize: fixed draws (as a baseline comparison needs); no example database.
        profile: a :class:`StageTimes` to fill with the seconds spent per stage.
        derivative: check the gradient only (what ``grad=True`` runs for ``result.gradient``).
        gradient_witnesses: with ``grad=True``, inputs to re-check first in the gradient's check only
            (a baseline's gradient witnesses), before ``witnesses``.

    """
    chosen = layered(Settings.default, {"settings": settings, **options}, "check", where="jst.check()")
    case = make_case(fn, shapes, dtype, domain, name)
    run = RunContext(tuple(witnesses), tuple(gradient_witnesses), bool(derandomize),
                     profile if profile is not None else StageTimes())
    if chosen.grad and not derivative:  # the values, then the derivative programs (_gradient.py)
        return with_gradient(judge_case, case, chosen, run)
    return judge_case(case, chosen, run, derivative=derivative)


def judge_case(case: Case, s: Settings, run: RunContext, *, derivative: bool = False) -> CaseResult:
    """The pipeline over a validated case and its settings: programs, inputs, diagnostics, result."""
    start = time.perf_counter()
    judged = "rewritten" if s.apply else "original"
    rules = resolve_rules(s.rules)
    with x64_scope(case.dtype):
        programs = _programs(case, s, rules, derivative, run.profile)
        try:
            acc, minimal = _inputs(case, s, run, programs, judged, undefined_ok=True)
        except _Undefined:  # no exact value anywhere as written: the rewrite's (its limit), said so
            programs = _against_rewritten(programs, s, derivative, run.profile)
            acc, minimal = _inputs(case, s, run, programs, judged)
        origins, local, timings = _diagnose(programs, acc, minimal, s, judged, run.profile)
    # A derivative-only rewrite (``Rule.derivative_only``: the value bit for bit, a better derivative)
    # is reported where the derivative is judged: in a check of the value it changed nothing judged,
    # and every program with a sigmoid or a tanh would list it
    # (docs/architecture.md, "Derivatives that lose").
    applied = [a for a in programs.applied if derivative or not getattr(a, "derivative_only", False)]
    result = CaseResult(
        nodeid=case.case_id, dtype=str(case.result_dtype), samples=acc.samples, discarded=acc.discarded,
        uncertain=acc.uncertain, original=acc.stats("original"), rewritten=acc.stats("rewritten"),
        rewrites=[RewriteRecord(a.rule, a.location) for a in applied],
        nan_origins=origins, timing=timings, local_error=local, witnesses=acc.witnesses(minimal),
        # Sorted: the same inputs give the same report whatever order they arrived in (witnesses first).
        points=sorted(acc.points, key=lambda p: (p.magnitude, p.original_bits, p.rewritten_bits)),
        tolerance_bits=float(s.tolerance_bits), judged=judged, judge=s.judge,
        escalated=_escalated_share(run.profile),
    )
    result.outcome = "failed" if result.judged_stats.verdict == "fail" else "passed"
    if result.outcome == "failed":
        result.message = failure_message(result, minimal, case.names, applied)
    else:
        result.note = passing_note(result)
    if acc.regression.worst is not None:  # a wrong rewrite fails the case whatever apply= and judge= say
        t0 = time.perf_counter()
        apply_regression(result, acc.regression.worst, applied, rules,
                         lambda subset: _run_with(case, s, programs, subset, derivative,
                                                  acc.regression.worst), case.names)
        run.profile.add("regression", time.perf_counter() - t0)
    if programs.note:
        result.note = f"{result.note} {programs.note}".strip()
        if result.message:
            result.message = f"{result.message}\n{programs.note}"
    probe = lambda: uniform_undefined_share(programs.evaluator, case.domains, case.shapes, case.dtype)
    acc.judge_domain(result, case.domain, probe)  # limits, kinks, and a function undefined on its domain
    run.profile["examples"] = float(acc.samples)
    run.profile["total"] = time.perf_counter() - start
    return result


def _escalated_share(profile: StageTimes) -> float | None:
    """The share of the oracle's output elements its fast path left to the ball escalation so far."""
    fast, escalated = profile.get("oracle_fast", 0.0), profile.get("oracle_escalated", 0.0)
    return escalated / (fast + escalated) if fast + escalated else None


@dataclasses.dataclass
class _Programs:
    """The traced case, its rewritten program, the rewrites applied, the evaluator and the oracle's cost."""

    traced: Any
    rewritten: Any
    applied: list[Any]
    evaluator: Evaluator
    cost: int
    note: str = ""  # what the oracle's reference says of itself (a gradient's body-derivative routines)
    value: Any = None  # the value's traced case (before the derivative): what rules are applied to


def _programs(case: Case, s: Settings, rules: Sequence[Any], derivative: bool, prof: StageTimes) -> _Programs:
    """Trace, refuse what the oracle cannot take, enforce the budget, rewrite, warm up (stage "trace")."""
    t0 = time.perf_counter()
    traced = trace_case(case.call, case.dtype, case.shapes)
    est = estimate(traced.closed, s.max_examples)
    cost = est.cost
    if s.oracle_budget is not None and est.counted > s.oracle_budget:
        raise ArgumentError(over_budget(case.case_id, est, s.oracle_budget, case.shapes, s.judge))
    long = long_check(case.case_id, est, case.shapes, s.judge)
    if long is not None:
        warnings.warn(CheckWarning(long), stacklevel=4)
    value = traced
    rewritten, applied = _rewrite(traced.closed, rules)
    reference, note = traced.closed, ""
    if derivative:
        d = derivative_case(traced, rewritten)
        traced, rewritten, reference, note = d.case, d.rewritten, d.reference, d.note
    evaluator = Evaluator(traced.closed, rewritten, traced.judged_outputs, s.atol, prof, s.judge,
                          float(s.tolerance_bits), derivative, reference=reference)
    # One run inside the domain, not counted: compiles both variants and surfaces an oracle that cannot
    # evaluate the program (UnsupportedPrimitive) before Hypothesis starts. Not on zeros: a loop may
    # only end for inputs of its domain (while v < 1e6: v *= 2 never ends from 0).
    warm = _warmup_args(case.dtype, case.shapes, case.domains)
    if warm is not None:
        before = dict(prof)
        evaluator(warm)
        for stage in ("run", "oracle", "metrics", "conditioning"):  # counted as setup, below
            prof[stage] = before.get(stage, 0.0)
    prof.add("trace", time.perf_counter() - t0)
    return _Programs(traced, rewritten, applied, evaluator, cost, note, value)


def _run_with(case: Case, s: Settings, programs: _Programs, rules: Sequence[Any], derivative: bool,
              ex: SampleResult | None) -> SampleResult:
    """``ex``'s input through the program rewritten by ``rules`` only (and its derivative for a
    gradient), judged as the case judges: how a wrong rewrite's rule is found (``_regression``)."""
    assert ex is not None
    value = programs.value
    with x64_scope(case.dtype):
        rewritten, _ = rewrite_jaxpr(value.closed, rules)
        traced, reference = value, value.closed
        if derivative:
            d = derivative_case(value, rewritten)
            traced, rewritten, reference = d.case, d.rewritten, d.reference
        evaluator = Evaluator(traced.closed, rewritten, traced.judged_outputs, s.atol, StageTimes(),
                              s.judge, float(s.tolerance_bits), derivative, reference=reference)
        return evaluator(ex.args)


class _Undefined(Exception):
    """Every input drawn is outside the function's real domain as written, and a rewrite applied."""


def _against_rewritten(programs: _Programs, s: Settings, derivative: bool, prof: StageTimes) -> _Programs:
    """``programs`` judged against the rewritten program's exact values: where the function as written
    has none at any input (``0·log 0`` or ``0·-inf`` at an exact zero it closes over: a KL divergence's
    zero targets, a masked class), the rewrite keeps the value wherever the written one has one (each
    rule checked against the oracle) and gives its limit where it has none."""
    traced = programs.traced
    evaluator = Evaluator(traced.closed, programs.rewritten, traced.judged_outputs, s.atol, prof, s.judge,
                          float(s.tolerance_bits), derivative, reference=programs.rewritten)
    note = ("Judged against the exact values of the rewritten function: the function as written has none "
            "at any input drawn (0·log 0 or 0·inf at an exact zero it closes over), the rewrite gives "
            "their limit there and the same values elsewhere.")
    return dataclasses.replace(programs, evaluator=evaluator, note=f"{programs.note} {note}".strip())


def _inputs(case: Case, s: Settings, run: RunContext, programs: _Programs, judged: str,
            undefined_ok: bool = False) -> tuple[_JudgedCount, SampleResult | None]:
    """Witnesses, stored failures, drawn inputs, then the simplest failing input shrunk. With
    ``undefined_ok``, :class:`_Undefined` where every input was outside the domain as written and a
    rule that changes values applied (``_against_rewritten`` judges again)."""
    prof = run.profile
    evaluator = programs.evaluator
    acc = _JudgedCount(float(s.tolerance_bits), judged, s.judge)
    skipped = 0
    for w in run.witnesses:  # re-checked first: a baseline's known worst inputs
        if fits(w.args, case.dtype, case.shapes, case.domains):
            acc.add(evaluator(w.args), drawn=False)
        else:
            skipped += 1
    # The program's own array constants as inputs (``_seeds``: a kernel at its training points).
    value_closed = (programs.value if programs.value is not None else programs.traced).closed
    for args in constant_inputs(value_closed, case.dtype, case.shapes, case.domains,
                                _warmup_args(case.dtype, case.shapes, case.domains)):
        acc.add(evaluator(args), drawn=False)
    runner = Runner(case.strategy, evaluator, acc, case.case_id, s.max_examples, s.seed, run.derandomize,
                    prof, s.time_budget, case.domain)
    skipped_stored = runner.replay(case.dtype, case.shapes, case.domains)
    _warn_skipped(case.case_id, skipped, skipped_stored)
    runner.explore()
    if runner.stopped_after is not None:
        warnings.warn(CheckWarning(
            f"{case.case_id}: stopped drawing after {runner.stopped_after:.0f} s (time_budget="
            f"{s.time_budget:g} s): judged {acc.samples} inputs, not max_examples={s.max_examples}. "
            "Use smaller shapes or fewer examples, or raise time_budget."), stacklevel=4)
    value_rules = [a for a in programs.applied if not getattr(a, "derivative_only", False)]
    if acc.judged_elements == 0 and undefined_ok and value_rules and acc.discarded >= acc.samples > 0:
        raise _Undefined
    if acc.judged_elements == 0:
        raise ArgumentError(nothing_judged(case.case_id, acc.samples, acc.discarded, acc.uncertain,
                                           case.domain, programs.traced.out_dtypes, case.shapes,
                                           programs.cost))
    t0 = time.perf_counter()
    tolerance = float(s.tolerance_bits)
    still_fails = lambda ex: ex.outcomes[judged].fails(tolerance)
    # At most as many runs as the exploration: bounded by count, not time, so it is reproducible.
    shrinker = Shrinker(evaluator, still_fails, case.dtype, case.domains, max_runs=s.max_examples)
    minimal = runner.minimise(shrinker)
    if minimal is not None:
        acc.add(minimal, drawn=False)  # counted once, as in the run that saved the baseline
    prof.add("minimise", time.perf_counter() - t0)
    return acc, minimal


def _diagnose(programs: _Programs, acc: _JudgedCount, minimal: SampleResult | None, s: Settings, judged: str,
              prof: StageTimes) -> tuple[list[NanOriginRecord], list[Any], list[TimingRecord]]:
    """Where NaNs are born, which lines lose the bits, and (``timing``) the jitted times."""
    closed, rewritten = programs.traced.closed, programs.rewritten
    t0 = time.perf_counter()
    origins = _nan_origins(closed, rewritten, acc, minimal)
    prof.add("diagnostics", time.perf_counter() - t0)
    t0 = time.perf_counter()
    local = local_error_records(closed, rewritten, acc, minimal, float(s.tolerance_bits),
                                acc.stats(judged).verdict == "fail")
    prof.add("local_error", time.perf_counter() - t0)
    timings: list[TimingRecord] = []
    if s.timing and acc.first is not None:
        t0 = time.perf_counter()
        timings = _time(closed, rewritten, acc.first.args)
        prof.add("timing", time.perf_counter() - t0)
    return origins, local, timings


def _rewrite(closed: Any, rules: Sequence[Any]) -> tuple[Any, list[Any]]:
    new, applied = rewrite_jaxpr(closed, rules, describe=True)
    return new, list(applied)


class _JudgedCount(Accumulator):
    """The accumulator, also counting the output elements judged over the distinct inputs, and
    keeping the worst input where a rewrite made the function worse (``_regression``)."""

    def __init__(self, tolerance_bits: float, judged: str, judge: str) -> None:
        super().__init__(tolerance_bits, judged, judge)
        self.judged_elements = 0
        self.regression = RegressionWatch(tolerance_bits)  # a rewrite worse than the original

    def add(self, ex: SampleResult, *, drawn: bool = True) -> bool:
        self.regression.see(ex)
        new = super().add(ex, drawn=drawn)
        if new:
            self.judged_elements += ex.judged_elements
        return new


def _warn_skipped(case_id: str, witnesses: int, stored: int) -> None:
    parts = []
    if witnesses:
        parts.append(f"{witnesses} baseline witnesses")
    if stored:
        parts.append(f"{stored} failing inputs stored in the Hypothesis database")
    if parts:
        warnings.warn(CheckWarning(
            f"{case_id}: skipped {' and '.join(parts)}: they no longer fit the case's domain, shapes or "
            "dtype (re-save the baseline to store inputs of the current case)"), stacklevel=5)


def _warmup_args(dtype: np.dtype[Any], shapes: Sequence[tuple[int, ...]],
                 domains: Sequence[Any]) -> tuple[np.ndarray, ...] | None:
    """One input inside the domain, for the warm-up run: per argument, a value its domain accepts
    (the ordinal middle of the interval, 1, 0 or an end), filled in. None when none is accepted."""
    out = []
    for shape, dom in zip(shapes, domains):
        lo, hi = int(dom.lo_ord), int(dom.hi_ord)
        candidates = [(lo + hi) // 2, int(to_ordinal(np.asarray(1.0, dtype), dtype)), 0, lo, hi]
        value = None
        for ordinal in candidates:
            if not lo <= ordinal <= hi:
                continue
            v = np.asarray(from_ordinal(ordinal, dtype), dtype=dtype)[()]
            try:
                accepted = dom.accepts(v)
            except Exception:  # the user's predicate: a failure here is not ours to report
                accepted = False
            if accepted:
                value = v
                break
        if value is None:
            return None
        out.append(np.full(shape, value, dtype=dtype))
    return tuple(out)


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
