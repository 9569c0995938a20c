"""One example through both variants and the oracle, and the figures accumulated over all examples.

:class:`Evaluator` runs the jitted function as written and the jitted rewritten one on one input, asks
the oracle for the exact result, and scores each variant in bits (docs/architecture.md, "The error metric",
with ``atol``).
:class:`Accumulator` keeps the case's figures, the worst inputs of each variant and the plot points.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import time
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np

from .. import _compat
from .._dtypes import component_dtype, dtype_info, from_ordinal
from .._errors import JaxstabError
from .._primitives import DISCONTINUOUS
from .._results import Point, VariantStats, Witness
from ..oracles import error_bits, evaluate
from ..oracles.interpreter._limits import (
    FAR_STEP,
    Resolved,
    confirm,
    evaluate_near,
    resolve,
    vanishing,
    vanishing_candidates,
)
from ._conditioning import reduction_terms
from ._stability import StabilityLens
from ._trace import x64_scope

__all__ = ["VARIANTS", "Accumulator", "Evaluator", "SampleResult", "VariantScore", "StageTimes"]

VARIANTS: tuple[str, str] = ("original", "rewritten")
# Worst inputs kept per variant (for the baseline's witnesses, NaN origins and the failure message).
_KEEP_WORST = 2
# At most this many plot points per case: enough for a scatter plot, small enough for a JSON report.
_MAX_POINTS = 1000
#: A case fails when the exact function has no real value (nor a limit) on more than this share of its
#: inputs: the declared domain is then not the function's. Hypothesis's boundary draws (zeros, signed
#: infinities, values at a division's pole) stay well below it; a function undefined on a real part of
#: its domain (sqrt or log over (-a, a): about half) does not.
MAX_UNDEFINED_SHARE = 0.2


class StageTimes(dict[str, float]):
    """Seconds spent per stage of a check (``trace``, ``draw``, ``run``, ``oracle``, ``metrics``,
    ``minimise``, ``diagnostics``, ``timing``, ``total``), plus counts: ``draws`` (inputs drawn and
    judged: Hypothesis examples and their siblings), ``repeats`` (drawn inputs skipped because they
    repeated one judged before), ``examples`` (distinct inputs counted in the figures), and
    ``oracle_fast`` / ``oracle_escalated`` (output elements the oracle's fast path decided, and those it
    left to the ball escalation: ``CaseResult.escalated`` is the second's share); filled when passed to
    ``check``.

    ``draw`` is the whole exploration less the time spent evaluating inputs: the strategy code (for the
    examples and their siblings), Hypothesis's engine (generating, mutating and hill-climbing choice
    sequences for ``target``, per-example setup) and the repeats. ``draw_strategy``, a part of ``draw``,
    is the time inside the strategy code alone (ours, and Hypothesis recording the examples' choices),
    counted in every thread: exact when one check runs at a time."""

    def add(self, stage: str, seconds: float) -> None:
        self[stage] = self.get(stage, 0.0) + seconds


@dataclasses.dataclass
class VariantScore:
    """One variant on one input: its worst element error, and whether it overflowed there."""

    bits: float  # max over judged elements; 0.0 when every element was discarded or uncertain
    overflow: bool  # a non-finite result where the exact one is finite
    values: list[np.ndarray]  # the variant's outputs (judged leaves)
    element_bits: list[np.ndarray]  # per judged leaf, NaN where not judged
    # The stability lens (set only where it was computed: forward error above the tolerance):
    beyond_bits: float | None = None  # max bits beyond what conditioning explains
    conditioning_bits: float = 0.0  # log2(1 + n cond) at the element of largest forward error
    underflow: int = 0  # elements noted as underflow-zone losses

    @property
    def judged_bits(self) -> float:
        """The figure the verdict compares with the tolerance: bits beyond conditioning where the
        stability lens computed them, else the forward error."""
        return self.bits if self.beyond_bits is None else self.beyond_bits

    def fails(self, tolerance_bits: float) -> bool:
        return self.overflow or self.judged_bits > tolerance_bits


@dataclasses.dataclass
class SampleResult:
    """One input and what both variants and the oracle made of it."""

    args: tuple[np.ndarray, ...]
    exact: list[np.ndarray]
    outcomes: dict[str, VariantScore]
    discarded: bool  # some output element has no real exact result (nor a limit)
    uncertain: bool  # some output element never settled in the oracle
    judged_elements: int
    limits: int = 0  # output elements judged against a limit (oracles/interpreter/_limits.py)
    kinks: int = 0  # derivative elements where the function has a kink: no derivative, not judged
    undefined_elements: int = 0  # proven to have no real exact result (nor a limit)

    @property
    def magnitude(self) -> float:
        """The largest input magnitude, NaNs left out (the x axis of the error plots, on a log scale)."""
        biggest = 0.0
        for a in self.args:
            flat = np.abs(np.asarray(a, dtype=np.float64)).reshape(-1)
            flat = flat[~np.isnan(flat)]
            if flat.size:
                biggest = max(biggest, float(flat.max()))
        return biggest


def _wide(x: np.ndarray) -> np.ndarray:
    """Real values as float64, complex as complex128 (``abs`` of a complex difference: its modulus)."""
    return x.astype(np.complex128 if np.iscomplexobj(x) else np.float64)


class Evaluator:
    """Runs both jitted variants and the oracle on one input and scores them.

    XLA flushes subnormals to zero on CPU and GPU (inputs and results): inputs are flushed before
    anything runs, and a zero or subnormal result where the exact one is subnormal scores 0 bits, so
    verdicts are about the code, not about the platform's denormal mode.

    Args:
        closed: the traced function as written (its jaxpr: what the oracle evaluates exactly).
        rewritten: the rewritten jaxpr.
        judged_outputs: indices of the floating-point outputs that are scored.
        atol: absolute differences at most this count 0 bits (overflows always count).
        profile: where stage times go.
        judge: "stability" computes the conditioning (``_conditioning.py``) on inputs whose forward
            error exceeds ``tolerance_bits`` and judges them by the bits beyond it (``_verdict.py``);
            "accuracy" judges the forward error.
        tolerance_bits: the case's tolerance (where the stability lens starts to be computed).
        derivative: ``closed`` is a derivative program (its ties are resolved by limits).
        reference: the program the oracle evaluates in place of ``closed`` (same inputs and outputs):
            a gradient's derivative of the exact functions of the library routines it calls.
    """

    def __init__(self, closed: Any, rewritten: Any, judged_outputs: Sequence[int], atol: float | None,
                 profile: StageTimes, judge: str = "accuracy", tolerance_bits: float = 8.0,
                 derivative: bool = False, *, reference: Any = None) -> None:
        self._evaluate = evaluate
        self._error_bits = error_bits
        self.closed = closed
        # What the oracle evaluates: the program itself, or for a gradient that calls library
        # routines, the derivative of their exact functions (``_gradient.Derivative.reference``).
        self.reference = closed if reference is None else reference
        self.judged_outputs = list(judged_outputs)
        self.atol = atol
        self.profile = profile
        self.runs = {"original": jax.jit(_compat.as_fun(closed)),
                     "rewritten": jax.jit(_compat.as_fun(rewritten))}
        self.out_dtypes = [np.dtype(_compat.aval(v).dtype) for v in _compat.outvars(closed)]
        # Smallest normal value of each judged output's dtype (for the flush-to-zero allowance).
        self._tiny = [float(dtype_info(component_dtype(self.out_dtypes[i])).tiny)
                      for i in self.judged_outputs]
        self._cache: dict[bytes, SampleResult] = {}
        self.judge = judge
        self.tolerance_bits = float(tolerance_bits)
        self.terms = reduction_terms(closed) if judge == "stability" else 1
        self.lens = StabilityLens(self.reference, self.judged_outputs, self.out_dtypes, self.terms,
                                  self.tolerance_bits, alternate=None if rewritten is closed else rewritten)
        # A derivative program with decisions (ties of max/min, abs's sign, where) is also evaluated at
        # its inputs' neighbours: its value at a tie is JAX's rule, not the function's derivative.
        self.derivative = derivative and any(
            _compat.primitive_name(e) in _TIE_PRIMITIVES for _, e in _compat.walk(self.reference))

    def __call__(self, args: Sequence[np.ndarray]) -> SampleResult:
        return self.run(*self.prepare(args))

    def prepare(self, args: Sequence[np.ndarray]) -> tuple[tuple[np.ndarray, ...], bytes]:
        """The input as the variants see it (subnormals flushed), and the key that identifies it."""
        flushed = tuple(self._flush(np.asarray(a)) for a in args)
        return flushed, _args_key(flushed)

    def run(self, flushed: tuple[np.ndarray, ...], key: bytes) -> SampleResult:
        """Evaluates a `prepare`d input, once: a repeat is answered from the cache."""
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        example = self._evaluate_new(flushed)
        self._cache[key] = example
        return example

    def _evaluate_new(self, args: tuple[np.ndarray, ...]) -> SampleResult:
        t0 = time.perf_counter()
        outputs = {}
        for variant, run in self.runs.items():
            leaves = [np.asarray(v) for v in run(*args)]
            outputs[variant] = [leaves[i] for i in self.judged_outputs]
        t1 = time.perf_counter()
        self._check_dtypes(outputs)
        oracle = self._evaluate(self.reference, *args)
        self.profile.add("oracle_fast", float(oracle.decided_fast))
        self.profile.add("oracle_escalated", float(oracle.escalated))
        values = jax.tree_util.tree_leaves(oracle.values)
        certain = jax.tree_util.tree_leaves(oracle.certain)
        t2 = time.perf_counter()
        exact, sure = [], []
        for i in self.judged_outputs:
            dtype = self.out_dtypes[i]
            e = np.asarray(values[i])
            # The oracle rounds to each output's dtype; cast defensively so the metric compares like
            # with like (a no-op when it did).
            exact.append(e if e.dtype == dtype else e.astype(dtype))
            sure.append(np.broadcast_to(np.asarray(certain[i], dtype=bool), e.shape))
        limits, kinks = 0, [np.zeros(e.shape, bool) for e in exact]
        if self.derivative or any(bool((s & np.isnan(e)).any()) for s, e in zip(sure, exact)):
            # Where the neighbours cannot be evaluated (a loop that does not end there), the value at
            # the point stands, as before limits existed.
            with contextlib.suppress(JaxstabError):
                exact, sure, limits, kinks = self._limits(args, exact, sure)
        # NaN is "outside the real domain" only where proven; an uncertain element's value is a guess.
        undefined = sum(int((s & np.isnan(e) & ~k).sum()) for s, e, k in zip(sure, exact, kinks))
        discarded = undefined > 0
        uncertain = any(bool((~s & ~k).any()) for s, k in zip(sure, kinks))
        judged_elements = sum(int((s & ~np.isnan(e)).sum()) for s, e in zip(sure, exact))
        outcomes = {v: self._score(outputs[v], exact, sure) for v in VARIANTS}
        self.profile.add("run", t1 - t0)
        self.profile.add("oracle", t2 - t1)
        self.profile.add("metrics", time.perf_counter() - t2)
        if self.judge == "stability":
            self._stability(args, exact, outcomes)
        return SampleResult(args, exact, outcomes, discarded, uncertain, judged_elements, limits,
                            sum(int(k.sum()) for k in kinks), undefined)

    def _limits(self, args: tuple[np.ndarray, ...], exact: list[np.ndarray], sure: list[np.ndarray]
                ) -> tuple[list[np.ndarray], list[np.ndarray], int, list[np.ndarray]]:
        """The references where the exact value at ``args`` is not the function's (``_limits``): a
        limit where the value is undefined; in a derivative, the limit at a tie, and kinks.

        The right-hand neighbour comes first: where every element is defined and the right-hand value
        equals the value at ``args`` (the common case), there is nothing to resolve. That misses only a
        kink whose right-hand derivative is the one JAX's rule picked, which is judged against that
        value (the verdict a kink gets anyway: not failed), not counted as a kink."""
        plus = evaluate_near(self.reference, list(args), 1)
        if not any(bool((s & np.isnan(e)).any()) for s, e in zip(sure, exact)) and all(
                bool((np.asarray(plus.certain[i]) & _same_value(np.asarray(plus.values[i]), e)).all())
                for i, e in zip(self.judged_outputs, exact)):
            return exact, sure, 0, [np.zeros(e.shape, bool) for e in exact]
        near = [plus, evaluate_near(self.reference, list(args), -1)]
        out_e, out_s, out_k, count = [], [], [], 0
        second: list[Any] | None = None
        far: list[Any] | None = None
        for j, i in enumerate(self.judged_outputs):
            (p, pc), (m, mc) = ((np.asarray(r.values[i]).astype(exact[j].dtype), np.asarray(r.certain[i]))
                                for r in near)
            r = resolve(exact[j], sure[j], p, pc, m, mc, derivative=self.derivative)
            if r.limits.any():  # a limit is taken only when a second direction of approach agrees
                if second is None:
                    second = [evaluate_near(self.reference, list(args), side, staggered=True)
                              for side in (1, -1)]
                (p, pc), (m, mc) = ((np.asarray(q.values[i]).astype(exact[j].dtype), np.asarray(q.certain[i]))
                                    for q in second)
                r = confirm(r, resolve(exact[j], sure[j], p, pc, m, mc, derivative=self.derivative),
                            exact[j], derivative=self.derivative)
            zero = vanishing_candidates(exact[j], sure[j], near[0].values[i], near[0].certain[i],
                                        near[1].values[i], near[1].certain[i])
            if zero.any():  # no value at x, neighbours of opposite signs: a limit of 0 if they shrink
                if far is None:
                    far = [evaluate_near(self.reference, list(args), side * FAR_STEP) for side in (1, -1)]
                (fp, fpc), (fm, fmc) = ((np.asarray(q.values[i]), np.asarray(q.certain[i])) for q in far)
                zero = vanishing(zero, near[0].values[i], near[1].values[i], fp, fm, fpc & fmc)
                r = Resolved(np.where(zero, np.zeros_like(r.values), r.values), r.certain, r.limits | zero,
                             r.kinks)
            out_e.append(r.values)
            out_s.append(r.certain & ~r.kinks)
            out_k.append(r.kinks)
            count += int(r.limits.sum())
        return out_e, out_s, count, out_k

    def _stability(self, args: tuple[np.ndarray, ...], exact: list[np.ndarray],
                   outcomes: dict[str, VariantScore]) -> None:
        """The stability lens (``_stability``), where the forward error alone would fail."""
        # An overflow fails under both lenses whatever the conditioning: not computed for it.
        over = [v for v in VARIANTS if outcomes[v].bits > self.tolerance_bits and not outcomes[v].overflow]
        if not over:
            return
        t0 = time.perf_counter()
        self.lens.judge(args, exact, outcomes, over)
        self.profile.add("conditioning", time.perf_counter() - t0)

    @staticmethod
    def _flush(a: np.ndarray) -> np.ndarray:
        """Subnormal inputs as signed zeros: XLA treats them so on CPU and GPU (DAZ), so that is the input
        the jitted code really computes with, and the one the oracle must see too."""
        if not a.size:
            return a
        tiny = float(dtype_info(a.dtype).tiny)
        wide = np.abs(a.astype(np.float64))
        sub = (wide < tiny) & (wide > 0)
        if not sub.any():
            return a
        return np.where(sub, np.copysign(np.zeros((), a.dtype), a), a).astype(a.dtype)

    def _check_dtypes(self, outputs: dict[str, list[np.ndarray]]) -> None:
        # The traced dtypes were checked against the request; this guards what the jitted code returned.
        for variant, leaves in outputs.items():
            for i, leaf in zip(self.judged_outputs, leaves):
                if leaf.dtype != self.out_dtypes[i]:
                    raise JaxstabError(f"the {variant} function returned {leaf.dtype} where its trace "
                                       f"promised {self.out_dtypes[i]}: refusing to score another precision")

    def _score(self, approx: list[np.ndarray], exact: list[np.ndarray],
               sure: list[np.ndarray]) -> VariantScore:
        worst, overflow, per_leaf = 0.0, False, []
        for a, e, s, tiny in zip(approx, exact, sure, self._tiny):
            a = np.broadcast_to(a, e.shape)
            with np.errstate(all="ignore"):
                bits = np.asarray(self._error_bits(a, e), dtype=np.float64)
                # XLA flushes subnormal results to zero on CPU and GPU (FTZ): a zero or subnormal result
                # where the exact one is subnormal is the platform's arithmetic, not the code's instability.
                flushed = (np.abs(_wide(a)) < tiny) & (np.abs(_wide(e)) < tiny)
                bits = np.where(flushed, 0.0, bits)
                if self.atol is not None:
                    close = np.isfinite(a) & np.isfinite(e) & (
                        np.abs(_wide(a) - _wide(e)) <= self.atol)
                    bits = np.where(close, 0.0, bits)
            bits = np.where(s, bits, np.nan)  # uncertain elements are not judged
            per_leaf.append(bits)
            judged = bits[~np.isnan(bits)]
            if judged.size:
                worst = max(worst, float(judged.max()))
            overflow |= bool((s & np.isfinite(e) & ~np.isfinite(a)).any())
        return VariantScore(worst, overflow, list(approx), per_leaf)


class Accumulator:
    """The figures of a case over every example seen so far."""

    def __init__(self, tolerance_bits: float, judged: str, judge: str = "accuracy") -> None:
        self.tolerance_bits = tolerance_bits
        self.judged = judged
        self.judge = judge
        self.samples = 0
        self.discarded = 0
        self.uncertain = 0
        self.limits = 0  # inputs with an element judged against a limit
        self.kinks = 0  # inputs with a derivative element at a kink (not judged)
        self._max = dict.fromkeys(VARIANTS, 0.0)
        self._beyond = dict.fromkeys(VARIANTS, 0.0)  # max judged bits (beyond conditioning, or forward)
        self._cond = dict.fromkeys(VARIANTS, 0.0)  # conditioning bits at the input of largest forward error
        self._underflow = dict.fromkeys(VARIANTS, 0)
        # Per-input sums, added with math.fsum at the end: the mean must not depend on input order.
        self._sums: dict[str, list[float]] = {v: [] for v in VARIANTS}
        self._count = dict.fromkeys(VARIANTS, 0)
        self._overflows = dict.fromkeys(VARIANTS, 0)
        self._worst: dict[str, list[SampleResult]] = {v: [] for v in VARIANTS}
        self._overflowing: dict[str, SampleResult | None] = dict.fromkeys(VARIANTS)
        self.failing: list[SampleResult] = []  # drawn inputs failing the judged variant, simplest first
        self.failing_given: list[SampleResult] = []  # the same among witnesses and stored failures
        self.points: list[Point] = []
        self.first: SampleResult | None = None
        self._seen: set[bytes] = set()

    def add(self, ex: SampleResult, *, drawn: bool = True) -> bool:
        """Counts an input in the figures, once: a repeated input (a witness drawn again) is skipped,
        so that a comparison run, which re-checks witnesses first, counts what the saving run counted.

        Returns whether the input was new.
        """
        key = _args_key(ex.args)
        if ex.outcomes[self.judged].fails(self.tolerance_bits):
            # Kept even when already counted: where shrinking starts must not depend on the witnesses.
            failing = self.failing if drawn else self.failing_given
            if not any(_args_key(f.args) == key for f in failing):
                failing.append(ex)
                failing.sort(key=_simplicity)
                del failing[4:]
        if key in self._seen:
            return False
        self._seen.add(key)
        self.samples += 1
        self.discarded += ex.discarded
        self.uncertain += ex.uncertain
        self.limits += ex.limits > 0
        self.kinks += ex.kinks > 0
        if self.first is None:
            self.first = ex
        for v in VARIANTS:
            out = ex.outcomes[v]
            for bits in out.element_bits:
                judged = bits[~np.isnan(bits)]
                self._sums[v].append(float(judged.sum()))
                self._count[v] += int(judged.size)
            # The conditioning at the input of largest forward error; on a tie the largest, so the
            # figure does not depend on the order inputs arrived in (xdist, witnesses first).
            cond = out.conditioning_bits if out.beyond_bits is not None else 0.0
            if out.bits > self._max[v]:
                self._cond[v] = cond
            elif out.bits == self._max[v]:
                self._cond[v] = max(self._cond[v], cond)
            self._max[v] = max(self._max[v], out.bits)
            self._beyond[v] = max(self._beyond[v], out.judged_bits)
            self._underflow[v] += out.underflow
            if out.overflow:
                self._overflows[v] += 1
                best = self._overflowing[v]
                if best is None or _simplicity(ex) < _simplicity(best):
                    self._overflowing[v] = ex
            if out.overflow or out.bits > 0:
                self._keep_worst(v, ex)
        if len(self.points) < _MAX_POINTS:
            self.points.append(Point(ex.magnitude, ex.outcomes["original"].bits,
                                     ex.outcomes["rewritten"].bits))
        return True

    def judge_domain(self, result: Any, domain: Any, probe: Any = None) -> None:
        """Says where the exact value was a limit or did not exist, on ``result`` (a ``CaseResult``);
        fails it when the function is undefined on more than :data:`MAX_UNDEFINED_SHARE` of its declared
        domain by measure: ``probe()`` (called only when some input was undefined) gives the share among
        inputs drawn uniformly over the domain (:func:`uniform_undefined_share`). The fuzzer's own share
        is no measure of the domain: its draws crowd every binade, so they over-sample ``(-1e-30, 0)``
        in ``(-1e-30, 1e6)`` (``log`` there is undefined on a 1e-36 share) and under-sample ``|x| > 2``
        in ``(-4, 4)``. It decides only where no uniform input can be drawn (a predicate rejects them)."""
        notes = []
        if self.limits:
            notes.append(f"{self.limits} input(s) where the exact value is undefined at the point (0*log(0), "
                         "0/0, a removable singularity, or a derivative at a tie of max/abs) were judged "
                         "against its limit there.")
        if self.kinks:
            notes.append(f"{self.kinks} input(s) sit on a kink of the function (the derivative differs on "
                         "the two sides): no derivative exists there, those elements are not judged.")
        share = self.discarded / self.samples if self.samples else 0.0
        where = f"{self.discarded} of {self.samples} inputs drawn"
        measured = probe() if self.discarded and probe is not None else None
        if measured is not None:
            share = measured[0] / measured[1]
            where = (f"{measured[0]} of {measured[1]} output elements at inputs drawn uniformly over the "
                     "domain")
        if share > MAX_UNDEFINED_SHARE:
            result.outcome = "failed"
            result.judged_stats.verdict = "fail"
            head = (f"{result.nodeid}: the exact function has no real value (nor a limit) on {where} "
                    f"({100 * share:.0f}%, more than {100 * MAX_UNDEFINED_SHARE:.0f}%) of its declared "
                    f"domain={domain!r}: the code returns NaN there or computes something else than it "
                    "claims. Narrow the domain to where the function is defined, or define it there.")
            result.message = "\n".join(x for x in (head, result.message) if x)
        if notes:
            text = " ".join(notes)
            if result.outcome == "failed":
                result.message = f"{result.message}\n{text}"
            else:
                result.note = f"{result.note} {text}".strip()

    def simplest_failing(self) -> SampleResult | None:
        """Where shrinking starts: the simplest failing drawn input (the same in a saving run and the
        comparison run after it), else the simplest failing witness or stored failure."""
        pool = self.failing or self.failing_given
        return pool[0] if pool else None

    def _keep_worst(self, variant: str, ex: SampleResult) -> None:
        kept = self._worst[variant]
        if any(_same_args(ex.args, k.args) for k in kept):
            return
        kept.append(ex)
        kept.sort(key=lambda k: (-k.outcomes[variant].overflow, -k.outcomes[variant].bits,
                                 *_simplicity(k)))
        del kept[_KEEP_WORST:]

    def stats(self, variant: str) -> VariantStats:
        count = self._count[variant]
        mean = math.fsum(self._sums[variant]) / count if count else 0.0
        stats = VariantStats(float(self._max[variant]), float(mean), int(self._overflows[variant]))
        if self.judge == "stability":
            stats.judge = "stability"
            stats.beyond_bits = float(self._beyond[variant])
            stats.conditioning_bits = float(self._cond[variant])
            stats.underflow_notes = int(self._underflow[variant])
        failed = stats.overflows > 0 or stats.judged_bits > self.tolerance_bits
        stats.verdict = "fail" if failed else "pass"
        return stats

    def worst(self, variant: str) -> list[SampleResult]:
        """The worst inputs of a variant, worst first."""
        return list(self._worst[variant])

    def overflowing(self, variant: str) -> SampleResult | None:
        """The simplest input on which a variant produced a non-finite result where the exact is finite."""
        return self._overflowing[variant]

    def witnesses(self, minimal: SampleResult | None) -> list[Witness]:
        """Witnesses for the baseline: the minimal failing input first, then each variant's worst."""
        out: list[Witness] = []
        seen: list[tuple[np.ndarray, ...]] = []

        def add(ex: SampleResult, variant: str) -> None:
            if any(_same_args(ex.args, s) for s in seen):
                return
            seen.append(ex.args)
            o = ex.outcomes[variant]
            args = [np.array(a, copy=True) for a in ex.args]
            out.append(Witness(args, variant, float(o.bits), bool(o.overflow)))

        if minimal is not None:
            add(minimal, self.judged)
        for v in VARIANTS:
            for ex in self._worst[v]:
                add(ex, v)
        return out


#: Inputs drawn uniformly over the domain when estimating the share where the function is undefined.
UNIFORM_PROBES = 32


def uniform_undefined_share(evaluator: Evaluator, domains: Sequence[Any], shapes: Sequence[tuple[int, ...]],
                            dtype: Any) -> tuple[int, int] | None:
    """``(undefined, settled)``: over :data:`UNIFORM_PROBES` inputs drawn uniformly (by value, seeded)
    over each argument's domain, the output elements where the exact function has no real value nor a
    limit, and all those the oracle settled (per element: an array input is that many points of the
    domain, so one undefined element does not make the whole input count).

    Bounds beyond the dtype are clipped to its largest finite value; a predicate (``where``) rejects
    draws as it does for the fuzzer. None when no input could be drawn.
    """
    with x64_scope(np.dtype(dtype)):
        return _uniform_undefined_share(evaluator, domains, shapes, dtype)


def _uniform_undefined_share(evaluator: Evaluator, domains: Sequence[Any], shapes: Sequence[tuple[int, ...]],
                             dtype: Any) -> tuple[int, int] | None:
    rng = np.random.default_rng(0)
    dt = np.dtype(dtype)
    bounds = []
    for dom in domains:
        lo = float(from_ordinal(np.asarray(dom.lo_ord), dt))
        hi = float(from_ordinal(np.asarray(dom.hi_ord), dt))
        bounds.append((lo, hi))
    undefined = settled = drawn = 0
    for _ in range(UNIFORM_PROBES * 4):
        if drawn >= UNIFORM_PROBES:
            break
        args = []
        for (lo, hi), shape, dom in zip(bounds, shapes, domains):
            with np.errstate(over="ignore"):
                a = (lo + (hi - lo) * rng.random(shape)) if np.isfinite(hi - lo) else (
                    lo / 2 + (hi / 2 - lo / 2) * rng.random(shape)) * 2
            a = np.clip(a, lo, hi).astype(dt)
            if dom.where is not None and not all(dom.accepts(v) for v in a.reshape(-1)):
                break
            args.append(a)
        else:
            drawn += 1
            ex = evaluator(tuple(args))
            undefined += ex.undefined_elements
            settled += ex.undefined_elements + ex.judged_elements
    return (undefined, settled) if settled else None


def _same_value(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a.astype(b.dtype) == b) | (np.isnan(a) & np.isnan(b))


#: Primitives at whose ties a derivative program's value is JAX's rule rather than the derivative.
_TIE_PRIMITIVES = DISCONTINUOUS | {"abs"}


def _same_args(a: Sequence[np.ndarray], b: Sequence[np.ndarray]) -> bool:
    return len(a) == len(b) and all(x.shape == y.shape and x.tobytes() == y.tobytes() for x, y in zip(a, b))


def _args_key(args: Sequence[np.ndarray]) -> bytes:
    return b"|".join(np.ascontiguousarray(a).tobytes() + str(a.shape).encode() for a in args)


def _simplicity(ex: SampleResult) -> tuple[int, float, bytes]:
    """Smaller is simpler: fewer non-zero elements, then a smaller largest magnitude; the bytes make it
    a total order, so the choice never depends on the order inputs arrived in."""
    nonzero = sum(int(np.count_nonzero(a)) for a in ex.args)
    return nonzero, ex.magnitude, _args_key(ex.args)
