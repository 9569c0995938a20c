"""One example through both variants and the oracle, and the figures accumulated over all examples.

:class:`Evaluator` runs the jitted function as written and the jitted rewritten one on one input, asks
the oracle for the exact result, and scores each variant in bits (docs/architecture.md, "The error metric",
with ``atol``).
:class:`Accumulator` keeps the case's figures, the worst inputs of each variant and the plot points.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np

from .. import _compat
from .._dtypes import dtype_info
from .._errors import JaxstabError
from .._results import Point, VariantStats, Witness
from ..oracles import error_bits, evaluate
from ._conditioning import conditioning_ulps, reduction_terms
from ._verdict import judge_elements

__all__ = ["VARIANTS", "Accumulator", "Evaluator", "SampleResult", "VariantScore", "StageTimes"]

VARIANTS: tuple[str, str] = ("original", "rewritten")
# Worst inputs kept per variant (for the baseline's witnesses, NaN origins and the failure message).
_KEEP_WORST = 2
# At most this many plot points per case: enough for a scatter plot, small enough for a JSON report.
_MAX_POINTS = 1000


class StageTimes(dict[str, float]):
    """Seconds spent per stage of a check (``trace``, ``draw``, ``run``, ``oracle``, ``metrics``,
    ``minimise``, ``diagnostics``, ``timing``, ``total``), plus counts: ``draws`` (inputs drawn and
    judged: Hypothesis examples and their siblings), ``repeats`` (drawn inputs skipped because they
    repeated one judged before) and ``examples`` (distinct inputs counted in the figures); filled when
    passed to ``check``.

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
    discarded: bool  # some output element has no real exact result
    uncertain: bool  # some output element never settled in the oracle
    judged_elements: int

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
    """

    def __init__(self, closed: Any, rewritten: Any, judged_outputs: Sequence[int], atol: float | None,
                 profile: StageTimes, judge: str = "accuracy", tolerance_bits: float = 8.0) -> None:
        self._evaluate = evaluate
        self._error_bits = error_bits
        self.closed = closed
        self.judged_outputs = list(judged_outputs)
        self.atol = atol
        self.profile = profile
        self.runs = {"original": jax.jit(_compat.as_fun(closed)),
                     "rewritten": jax.jit(_compat.as_fun(rewritten))}
        self.out_dtypes = [np.dtype(_compat.aval(v).dtype) for v in _compat.outvars(closed)]
        # Smallest normal value of each judged output's dtype (for the flush-to-zero allowance).
        self._tiny = [float(dtype_info(self.out_dtypes[i]).tiny) for i in self.judged_outputs]
        self._cache: dict[bytes, SampleResult] = {}
        self.judge = judge
        self.tolerance_bits = float(tolerance_bits)
        self.terms = reduction_terms(closed) if judge == "stability" else 1

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
        oracle = self._evaluate(self.closed, *args)
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
        # NaN is "outside the real domain" only where proven; an uncertain element's value is a guess.
        discarded = any(bool((s & np.isnan(e)).any()) for s, e in zip(sure, exact))
        uncertain = any(bool((~s).any()) for s in sure)
        judged_elements = sum(int((s & ~np.isnan(e)).sum()) for s, e in zip(sure, exact))
        outcomes = {v: self._score(outputs[v], exact, sure) for v in VARIANTS}
        self.profile.add("run", t1 - t0)
        self.profile.add("oracle", t2 - t1)
        self.profile.add("metrics", time.perf_counter() - t2)
        if self.judge == "stability":
            self._stability(args, exact, outcomes)
        return SampleResult(args, exact, outcomes, discarded, uncertain, judged_elements)

    def _stability(self, args: tuple[np.ndarray, ...], exact: list[np.ndarray],
                   outcomes: dict[str, VariantScore]) -> None:
        """The stability lens, where the forward error alone would fail (the conditioning costs one
        oracle evaluation per input element: only where it can change the verdict)."""
        # An overflow fails under both lenses whatever the conditioning: not computed for it.
        over = [v for v in VARIANTS if outcomes[v].bits > self.tolerance_bits and not outcomes[v].overflow]
        if not over:
            return
        t0 = time.perf_counter()
        cond = conditioning_ulps(self.closed, args, exact, self.judged_outputs, self.out_dtypes)
        for v in over:
            o = outcomes[v]
            j = judge_elements(o.values, exact, o.element_bits, cond, self.terms, self.tolerance_bits)
            o.beyond_bits, o.conditioning_bits, o.underflow = j.beyond_bits, j.conditioning_bits, j.underflow
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
                flushed = (np.abs(a.astype(np.float64)) < tiny) & (np.abs(e.astype(np.float64)) < tiny)
                bits = np.where(flushed, 0.0, bits)
                if self.atol is not None:
                    close = np.isfinite(a) & np.isfinite(e) & (
                        np.abs(a.astype(np.float64) - e.astype(np.float64)) <= self.atol)
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


def _same_args(a: Sequence[np.ndarray], b: Sequence[np.ndarray]) -> bool:
    return len(a) == len(b) and all(x.shape == y.shape and x.tobytes() == y.tobytes() for x, y in zip(a, b))


def _args_key(args: Sequence[np.ndarray]) -> bytes:
    return b"|".join(np.ascontiguousarray(a).tobytes() + str(a.shape).encode() for a in args)


def _simplicity(ex: SampleResult) -> tuple[int, float, bytes]:
    """Smaller is simpler: fewer non-zero elements, then a smaller largest magnitude; the bytes make it
    a total order, so the choice never depends on the order inputs arrived in."""
    nonzero = sum(int(np.count_nonzero(a)) for a in ex.args)
    return nonzero, ex.magnitude, _args_key(ex.args)
