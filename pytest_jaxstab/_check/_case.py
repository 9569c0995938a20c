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

import math
import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import jax.numpy as jnp
import numpy as np

# Everything a check uses is imported here, before any input is drawn: Hypothesis mixes constants of
# the loaded local modules into its draws, so a module imported midway would change later draws
# (fixed-seed runs do without those constants altogether: see _explore, _without_local_constants).
from .. import _compat
from .._diagnostics._nan_origin import find_nan_origin
from .._diagnostics._timing import time_backends
from .._dtypes import dtype_info, from_ordinal, resolve_dtype, to_ordinal
from .._errors import UnsupportedPrimitive
from .._files import short_path
from .._primitives import CALLS
from .._results import CaseResult, NanOriginRecord, RewriteRecord, TimingRecord, Witness
from ..rewrites import STABILITY, rewrite_jaxpr
from ..rewrites._rule import resolve
from ..strategies._domain import per_argument_domains
from ..strategies._scenario import scenarios
from ._evaluate import VARIANTS, Accumulator, Evaluator, SampleResult, StageTimes
from ._explore import Runner, fits
from ._gradient import derivative_case, with_gradient
from ._localize import local_error_records
from ._message import CheckWarning, failure_message, nothing_judged, passing_note
from ._shrink import Shrinker
from ._trace import ArgumentError, normalize_shapes, positional, trace_case, x64_scope
from ._verdict import validate_judge

__all__ = ["ORACLE_BUDGET", "TIME_BUDGET", "ArgumentError", "StageTimes", "build_strategy", "check",
           "oracle_cost", "resolve_rules"]

#: Default largest estimated oracle cost of one case, in scalar operations (``oracle_cost`` times the
#: number of examples). The exact oracle takes of the order of 10-30 µs per scalar operation, so this
#: is a few minutes of exact evaluation; above it a check fails at once instead of running for hours.
ORACLE_BUDGET = 1e7
#: Default wall-clock budget of one case's drawing, in seconds: past it no new input is drawn, and the
#: case is judged on what was drawn (a CheckWarning says how many).
TIME_BUDGET = 300.0


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
    oracle_budget: float | None = ORACLE_BUDGET,
    time_budget: float | None = TIME_BUDGET,
    grad: bool = False,
    derivative: bool = False,
    gradient_witnesses: Sequence[Witness] = (),
    judge: str = "stability",
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
        witnesses: inputs to re-check before fuzzing (a baseline's worst inputs). Those that do not
            fit the case's current domain, shapes and dtype are skipped (a :class:`CheckWarning` says
            how many), as are stored failures of the example database.
        derandomize: fixed draws (as a baseline comparison needs); no example database.
        profile: a :class:`StageTimes` to fill with the seconds spent per stage.
        oracle_budget: the largest estimated cost of the exact evaluation, in scalar operations:
            :func:`oracle_cost` (elements x equations) times ``max_examples``. Above it the check
            raises ``ArgumentError`` before running anything, with the figure and the ways out
            (smaller shapes, fewer examples, a larger budget). None: no limit.
        time_budget: seconds of drawing after which no new input is drawn; the case is judged on the
            inputs drawn so far and a :class:`CheckWarning` says how many. None: no limit.
        grad: also judge the gradient (``jax.grad``; a VJP with ones for non-scalar outputs) of
            both variants against the exact derivative of the function as written; the figures are
            in ``result.gradient`` (a ``CaseResult``), and the case fails when either fails.
        derivative: check the gradient only (what ``grad=True`` runs for ``result.gradient``).
        gradient_witnesses: with ``grad=True``, inputs to re-check first in the gradient's check only
            (a baseline's gradient witnesses), before ``witnesses``.
        judge: the lens of the verdict. "stability" (default): an input fails when its error exceeds
            what the problem's conditioning at that input explains by more than ``tolerance_bits``
            (or on any overflow); ill-conditioned inputs pass with a note. "accuracy": the forward
            error is judged (Herbie's lens; what ``jst.improve`` optimises). Applies to the gradient
            too with ``grad=True``. See docs/architecture.md, "Two lenses: stability and accuracy".

    Returns:
        A :class:`CaseResult`: figures of both variants, verdicts, ``outcome`` ("passed"/"failed" for
        the judged variant) and, on failure, ``message`` naming the smallest failing input.

    Raises:
        ArgumentError: a bad argument, named (a ``ValueError``); a case over the oracle budget; a
            case where nothing could be judged (every input outside the function's real domain, or
            uncertain): the message says why and what to change.
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
    if grad:  # the values, then the derivative programs (_gradient.py)
        return with_gradient(check, fn, dict(
            shapes=shapes, dtype=dtype, domain=domain, max_examples=max_examples, seed=seed, rules=rules,
            tolerance_bits=tolerance_bits, apply=apply, atol=atol, timing=timing, name=name,
            witnesses=witnesses, derandomize=derandomize, profile=profile, oracle_budget=oracle_budget,
            time_budget=time_budget, judge=judge), gradient_witnesses=gradient_witnesses)
    prof = profile if profile is not None else StageTimes()
    start = time.perf_counter()
    names, shape_list, by_keyword = normalize_shapes(shapes)
    try:
        dt = resolve_dtype(dtype)
    except ValueError as exc:
        raise ArgumentError(f"dtype={dtype!r}: {exc}") from None
    _validate(max_examples=max_examples, tolerance_bits=tolerance_bits, atol=atol, seed=seed)
    judge = validate_judge(judge)
    for label, budget in (("oracle_budget", oracle_budget), ("time_budget", time_budget)):
        if budget is not None and (isinstance(budget, bool) or not isinstance(budget, (int, float))
                                   or not budget > 0):
            raise ArgumentError(f"{label}={budget!r}: expected a number > 0, or None for no limit")
    strategy = build_strategy(dt, shape_list, domain)
    domains = [d.resolve(dtype_info(dt)) for d in per_argument_domains(domain, len(shape_list))]
    chosen_rules = resolve_rules(rules)
    call = positional(fn, names, by_keyword)
    case_id = name or f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"
    judged = "rewritten" if apply else "original"
    with x64_scope(dt):
        t0 = time.perf_counter()
        prepared = trace_case(call, dt, shape_list)
        _refuse_complex(prepared.closed)
        cost = oracle_cost(prepared.closed)
        if oracle_budget is not None and cost * max_examples > oracle_budget:
            raise ArgumentError(_over_budget(case_id, cost, max_examples, oracle_budget, shape_list))
        rewritten, applied = _rewrite(prepared.closed, chosen_rules)
        if derivative:
            prepared, rewritten = derivative_case(prepared, rewritten)
        evaluator = Evaluator(prepared.closed, rewritten, prepared.judged_outputs, atol, prof, judge,
                              float(tolerance_bits))
        # One run inside the domain, not counted: compiles both variants and surfaces an oracle that
        # cannot evaluate the program (UnsupportedPrimitive) before Hypothesis starts. Not on zeros: a
        # loop may only end for inputs of its domain (while v < 1e6: v *= 2 never ends from 0).
        warm = _warmup_args(dt, shape_list, domains)
        if warm is not None:
            before = dict(prof)
            evaluator(warm)
            for stage in ("run", "oracle", "metrics", "conditioning"):  # counted as setup, below
                prof[stage] = before.get(stage, 0.0)
        prof.add("trace", time.perf_counter() - t0)
        acc = _JudgedCount(float(tolerance_bits), judged, judge)
        skipped = 0
        for w in witnesses:  # re-checked first: a baseline's known worst inputs
            if fits(w.args, dt, shape_list, domains):
                acc.add(evaluator(w.args), drawn=False)
            else:
                skipped += 1
        runner = Runner(strategy, evaluator, acc, case_id, max_examples, seed, derandomize, prof,
                         time_budget, domain)
        skipped_stored = runner.replay(dt, shape_list, domains)
        _warn_skipped(case_id, skipped, skipped_stored)
        runner.explore()
        if runner.stopped_after is not None:
            warnings.warn(CheckWarning(
                f"{case_id}: stopped drawing after {runner.stopped_after:.0f} s (time_budget="
                f"{time_budget:g} s): judged {acc.samples} inputs, not max_examples={max_examples}. "
                "Use smaller shapes or fewer examples, or raise time_budget."), stacklevel=2)
        if acc.judged_elements == 0:
            raise ArgumentError(nothing_judged(case_id, acc.samples, acc.discarded, acc.uncertain,
                                               domain, prepared.out_dtypes, shape_list, cost))
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
        t0 = time.perf_counter()
        local = local_error_records(prepared.closed, rewritten, acc, minimal, float(tolerance_bits),
                                    acc.stats(judged).verdict == "fail")
        prof.add("local_error", time.perf_counter() - t0)
        timings: list[TimingRecord] = []
        if timing and acc.first is not None:
            t0 = time.perf_counter()
            timings = _time(prepared.closed, rewritten, acc.first.args)
            prof.add("timing", time.perf_counter() - t0)
    result = CaseResult(
        nodeid=case_id, dtype=str(dt), samples=acc.samples, discarded=acc.discarded, uncertain=acc.uncertain,
        original=acc.stats("original"), rewritten=acc.stats("rewritten"),
        rewrites=[RewriteRecord(a.rule, a.location) for a in applied],
        nan_origins=origins, timing=timings, local_error=local, witnesses=acc.witnesses(minimal),
        # Sorted: the same inputs give the same report whatever order they arrived in (witnesses first).
        points=sorted(acc.points, key=lambda p: (p.magnitude, p.original_bits, p.rewritten_bits)),
        tolerance_bits=float(tolerance_bits), judged=judged, judge=judge,
    )
    result.outcome = "failed" if result.judged_stats.verdict == "fail" else "passed"
    if result.outcome == "failed":
        result.message = failure_message(result, minimal, names, applied)
    else:
        result.note = passing_note(result)
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
    """The case's scenarios (``jst.strategies.arguments`` draws, with siblings); a bad ``domain`` is an
    :class:`ArgumentError`."""
    try:
        return scenarios(dtype, shapes, domain=domain)
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


class _JudgedCount(Accumulator):
    """The accumulator, also counting the output elements judged over the distinct inputs."""

    def __init__(self, tolerance_bits: float, judged: str, judge: str) -> None:
        super().__init__(tolerance_bits, judged, judge)
        self.judged_elements = 0

    def add(self, ex: SampleResult, *, drawn: bool = True) -> bool:
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
            "dtype (re-save the baseline to store inputs of the current case)"), stacklevel=3)


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


def oracle_cost(closed: Any) -> int:
    """The estimated cost of one exact evaluation of a program, in scalar operations: the elements each
    equation reads or writes (the larger), summed over every equation, sub-programs included once
    (a loop body counts once, whatever its trip count)."""
    total = 0
    for _, eqn in _compat.walk(closed):
        if _compat.primitive_name(eqn) in CALLS:
            continue
        sizes = [math.prod(getattr(_compat.aval(v), "shape", ()) or ()) for v in (*eqn.invars, *eqn.outvars)]
        total += max(sizes, default=1)
    return max(total, 1)


def _over_budget(case_id: str, cost: int, examples: int, budget: float,
                 shapes: Sequence[tuple[int, ...]]) -> str:
    fit = max(1, int(budget // cost))
    shown = ", ".join(str(s) for s in shapes)
    examples_hint = (f"max_examples={fit} fits" if fit < examples else "")
    ways = [f"smaller shapes (now {shown}: the oracle's cost grows with the number of elements)"]
    ways.append(f"fewer examples ({examples_hint})" if examples_hint else
                "fewer examples (not enough here: one example is already over the budget)")
    ways.append("a larger budget: oracle_budget= on jst.check / the marker / jaxstab.check, or "
                "--jaxstab-oracle-budget=N (none: no limit)")
    return (f"{case_id}: the exact oracle would take about {cost * examples:.3g} scalar operations "
            f"({cost:.3g} per input, elements x equations, x {examples} examples), over the budget of "
            f"{budget:.3g} (~10-30 µs each: {cost * examples * 2e-5 / 60:.0f} minutes or more). Ways out: "
            + "; ".join(ways) + ".")


def _refuse_complex(closed: Any) -> None:
    """The oracle is real-valued: name the primitive that makes a complex value (``fft``, not the
    ``jit`` around it nor the conversion feeding it), with the user's line, before anything runs."""
    found: list[tuple[str, str | None]] = []
    for eqn in _compat.eqns(closed):  # top level: the user's line of a call into a library
        outer = _compat.location(eqn)
        nested = [e for _, sub in _compat.subjaxprs(eqn) for _, e in _compat.walk(sub)]
        for inner in (eqn, *nested):
            if _compat.primitive_name(inner) in CALLS:
                continue
            for v in inner.outvars:
                dtype = getattr(_compat.aval(v), "dtype", None)
                if dtype is not None and jnp.issubdtype(dtype, jnp.complexfloating):  # PRNG key dtypes too
                    where = _compat.location(inner) or outer
                    found.append((_compat.primitive_name(inner), short_path(where) if where else None))
                    break
    if found:
        name, where = next((f for f in found if f[0] != "convert_element_type"), found[0])
        raise UnsupportedPrimitive(name, where, "it makes complex values; the exact oracle is real-valued")


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
