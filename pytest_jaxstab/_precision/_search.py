"""Which lines must stay in the high precision: samples, exact results, figures, greedy then pruned.

Three quarters of the samples are drawn as ``jst.check`` draws its siblings (``strategies._scenario``:
the array classes of ``jst.strategies.arguments`` over the domain and dtype, every choice from a seeded
generator), a quarter by value as a model's data looks (uniform over a bounded domain's values, else
normal at a scale; see ``_by_value``), and the exact output of each is the oracle's
(``oracles.evaluate``), rounded to the low dtype; elements the
oracle cannot settle, or whose exact value is not a finite float of the low dtype, are not judged.

The search (:func:`search`):

1. the program as written; within tolerance: nothing to keep high;
2. the catalogue's rewrite (``jst.stabilize``'s rules) when one fires and is no worse: within tolerance,
   the plan is the rewrites alone (no upcast: a shifted logsumexp costs nothing in precision);
3. otherwise greedy on the (rewritten) program: lines in the order of their local error
   (``_diagnostics.analyse`` on the worst samples, worst line first), then the float lines local error
   did not blame (a rounded input can spoil a line that loses nothing itself: ``mean(x)`` of a
   one-pass variance), nearest the output first; each added until the tuned program is within tolerance;
4. pruned: each kept line, last added first, is dropped when the plan stays within tolerance without it;
   then the rewrites, when the kept lines alone are within it.

The result is a minimal plan (no line can be dropped), not always the minimum one: that is NP-hard in
general, and the greedy order makes the usual case (one line to keep) exact.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .._check._upcast import float_sites, run_upcast
from .._dtypes import dtype_info
from ..oracles import error_bits, evaluate
from ..strategies._arrays import plans_for
from ..strategies._classes import bounds
from ..strategies._scenario import Scenario

__all__ = ["Figures", "Samples", "domain_bounds", "draw", "drawn_inputs", "fewest_lines", "figures",
           "jit_rounds", "search"]

#: Fresh draws tried per sample wanted before giving up (a domain predicate rejecting most draws).
_TRIES_PER_SAMPLE = 4
#: Samples local error is computed on (the worst ones by the program's error): the oracle runs on every
#: intermediate, so this is the search's most expensive step.
_LOCAL_SAMPLES = 4


@dataclasses.dataclass(frozen=True)
class Figures:
    """The error of a program's low-precision output against the exact result, over the samples.

    Attributes:
        max_bits: the worst element's error in bits (``oracles.error_bits``: ``log2(1 + ulps)``).
        mean_bits: the mean over samples of each sample's worst element.
        max_ulps: the worst element's distance in ulps of the low dtype.
        overflows: output elements that are +-inf or NaN where the exact result is a finite float of
            the low dtype (an overflow, or a NaN from one: ``inf - inf``, ``sqrt`` of a rounded negative).
        samples: samples judged; ``elements``: output elements judged in all.
    """

    max_bits: float
    mean_bits: float
    max_ulps: float
    overflows: int
    samples: int
    elements: int

    def within(self, tolerance_ulps: float) -> bool:
        """No overflow and every judged element within ``tolerance_ulps`` ulps."""
        return self.overflows == 0 and self.max_ulps <= tolerance_ulps

    def __str__(self) -> str:
        over = f", {self.overflows} non-finite (exact finite)" if self.overflows else ""
        ulps = f"{self.max_ulps:.0f} ulps"
        return f"max {self.max_bits:.2f} bits ({ulps}), mean {self.mean_bits:.2f} bits{over}"


@dataclasses.dataclass(frozen=True)
class Samples:
    """Stacked inputs (one leading axis per sample), the exact outputs rounded to the low dtype and which
    elements are judged (certain, finite)."""

    args: list[np.ndarray]
    exact: list[np.ndarray]
    judged: list[np.ndarray]

    @property
    def count(self) -> int:
        return len(self.args[0]) if self.args else 0

    def one(self, i: int) -> tuple[np.ndarray, ...]:
        return tuple(a[i] for a in self.args)


def fewest_lines(order: Sequence[str], ok: Callable[[list[str]], tuple[Any, ...]]
                 ) -> tuple[list[str], tuple[Any, ...]]:
    """The greedy and the pruning of a plan: lines of ``order`` added until ``ok(lines)[0]`` (the rest
    of its tuple: the figures of that set), then each dropped, last first, where the rest is still ok.
    Returns the lines and ``ok``'s tuple for them."""
    chosen: list[str] = []
    result: tuple[Any, ...] = (False,)
    for line in order:
        chosen.append(line)
        result = ok(chosen)
        if result[0]:
            break
    for line in list(reversed(chosen)):
        if len(chosen) == 1:
            break
        rest = [x for x in chosen if x != line]
        tried = ok(rest)
        if tried[0]:
            chosen, result = rest, tried
    return chosen, result


def draw(closed: Any, dtype: np.dtype[Any], shapes: Sequence[tuple[int, ...]], domain: Any, n: int,
         seed: int) -> Samples:
    """``n`` inputs drawn as ``jst.check``'s fresh siblings, with the program's exact outputs.

    A draw whose exact output has no judged element (every element undefined, uncertain or beyond the
    dtype's range) is replaced, up to :data:`_TRIES_PER_SAMPLE` tries per sample.
    """
    args: list[tuple[np.ndarray, ...]] = []
    exact: list[list[np.ndarray]] = []
    judged: list[list[np.ndarray]] = []
    for _, sample in drawn_inputs(dtype, shapes, domain, n * _TRIES_PER_SAMPLE, seed):
        if len(args) >= n:
            break
        out = evaluate(closed, *sample, dtype=dtype)
        # an integer or boolean output (an argmax beside the values) is not judged
        values = [np.asarray(v) if _floating(v) else np.zeros(np.shape(v), dtype) for v in out.values]
        ok = [np.asarray(c, bool) & np.isfinite(v.astype(np.float32)) & _floating(raw)
              for c, v, raw in zip(out.certain, values, out.values)]
        if not any(m.any() for m in ok):
            continue
        args.append(sample)
        exact.append(values)
        judged.append([np.broadcast_to(m, v.shape) for m, v in zip(ok, values)])
    if not args:
        return Samples([], [], [])
    return Samples([np.stack(col) for col in zip(*args)], [np.stack(col) for col in zip(*exact)],
                   [np.stack(col) for col in zip(*judged)])


def drawn_inputs(dtype: np.dtype[Any], shapes: Sequence[tuple[int, ...]], domain: Any, tries: int, seed: int,
                 by_value: frozenset[int] = frozenset({0})) -> Iterator[tuple[int, tuple[np.ndarray, ...]]]:
    """Up to ``tries`` candidate inputs of ``dtype``, each with its draw's slot (``k % 4``): the slots in
    ``by_value`` by value (a model's data, :func:`_by_value`; a quarter by default), the rest the
    check's fresh siblings (where formulas break), as the search's sampler shares its points
    (``_search._sampler``); the caller keeps those it can judge. A by-value draw a domain predicate
    rejects is replaced by the check's (its slot stays)."""
    plans = plans_for(dtype, list(shapes), domain)
    base = Scenario(plans, (), [])
    rng = np.random.default_rng(seed)
    for k in range(tries):
        drawn = _by_value(plans, rng) if k % 4 in by_value else None
        slot = k % 4 if drawn is not None else -1
        if drawn is None:
            drawn = base.fresh(seed * 1_000_003 + k + 1)
        if drawn is not None:
            yield slot, tuple(np.asarray(a, dtype) for a in drawn)


def domain_bounds(dtype: np.dtype[Any], shapes: Sequence[tuple[int, ...]], domain: Any
                  ) -> tuple[list[tuple[float, float]], Callable[[Sequence[np.ndarray]], bool]]:
    """Each argument's ``(lo, hi)`` as its sampler bounds it (the dtype's finite range at most), and
    whether an input of ``dtype`` satisfies every domain predicate (``where=``)."""
    plans = plans_for(dtype, list(shapes), domain)

    def accepts(sample: Sequence[np.ndarray]) -> bool:
        return all(p.sampler.resolved.where is None or all(p.sampler.resolved.accepts(v) for v in a.ravel())
                   for p, a in zip(plans, sample))

    return [(float(bounds(p.sampler)[0]), float(bounds(p.sampler)[1])) for p in plans], accepts


def _by_value(plans: Sequence[Any], rng: np.random.Generator) -> tuple[np.ndarray, ...] | None:
    """One input as a model's data looks: every element uniform over the domain's VALUES where the domain
    is a bounded interval a user declared (activations in (5, 15)), else normal with a scale of 2^-4 to
    2^8 (from the bounded end where one is). The check's draws (the other three quarters) are bit-pattern and
    class draws, built to find where a formula breaks: over a 64-element dot product they are dominated
    by tiny values, so a softmax of its logits came out exactly uniform and a bfloat16 attention looked
    exact. None where a domain predicate rejects a value (the check's draw then takes the sample)."""
    out = []
    for plan in plans:
        sampler = plan.sampler
        lo, hi = bounds(sampler)
        top = float(sampler.info.max)
        spread = np.abs(rng.standard_normal(plan.shape)) * 2.0 ** float(rng.integers(-4, 9))
        if -top < lo and hi < top:
            values = rng.uniform(lo, hi, plan.shape)
        elif -top < lo:
            values = lo + spread
        elif hi < top:
            values = hi - spread
        else:
            values = spread * rng.choice([-1.0, 1.0], plan.shape)
        low = np.clip(values, lo, hi).astype(sampler.info.dtype)
        if sampler.resolved.where is not None and not all(sampler.resolved.accepts(v) for v in low.ravel()):
            return None
        out.append(low)
    return tuple(out)


@functools.cache
def jit_rounds(dtype: np.dtype[Any]) -> bool:
    """Whether this JAX's ``jit`` rounds every operation on ``dtype`` to it, as the program states.

    JAX 0.10's XLA on CPU keeps float16 intermediates of a jitted program in float32 ("excess
    precision", not turned off by its compiler option): ``(x + 1024) - 1024`` at x = 0.75 is exact
    jitted and 0 op by op. A plan judged on that would keep nothing where the program as written (op by
    op, or on a backend that rounds) is 1,000 ulps off, so where jit does not round, the plan's figures
    come from op-by-op execution: each operation rounded to the dtype, the conservative reading."""
    if not jnp.issubdtype(dtype, jnp.floating) or dtype.itemsize > 2:
        return True
    x = jnp.asarray([0.75], dtype)
    return bool(np.asarray(jax.jit(lambda v: (v + 1024) - 1024)(x) == (x + 1024) - 1024).all())


def _floating(v: Any) -> bool:
    return bool(jnp.issubdtype(np.asarray(v).dtype, jnp.floating))


def _as_low(y: Any, dtype: np.dtype[Any]) -> np.ndarray:
    """An output as the low dtype (an integer output, never judged, as zeros)."""
    return np.asarray(y, dtype) if _floating(y) else np.zeros(np.shape(y), dtype)


def _outputs(closed: Any, lines: frozenset[str], high: np.dtype[Any], smp: Samples) -> list[np.ndarray]:
    run = jax.vmap(lambda *a: run_upcast(closed, lines, high, a))
    if jit_rounds(np.dtype(smp.args[0].dtype) if smp.args else np.dtype(np.float32)):
        run = jax.jit(run)
    return [np.asarray(o) for o in run(*smp.args)]


def figures(outs: Sequence[np.ndarray], smp: Samples, dtype: np.dtype[Any]) -> tuple[Figures, np.ndarray]:
    """The :class:`Figures` of outputs ``outs`` on the samples, and each sample's worst bits."""
    width = dtype_info(dtype).bits
    per_sample = np.zeros(smp.count)
    overflows = elements = 0
    for y, e, m in zip(outs, smp.exact, smp.judged):
        y = _as_low(y, dtype)
        bits = np.where(m, error_bits(y, e), 0.0).reshape(smp.count, -1)
        per_sample = np.maximum(per_sample, bits.max(axis=1, initial=0.0))
        overflows += int((m & ~np.isfinite(y.astype(np.float32))).sum())
        elements += int(m.sum())
    worst = float(per_sample.max(initial=0.0))
    ulps = float(np.exp2(worst) - 1.0) if worst < width else math.inf
    return Figures(worst, float(per_sample.mean()) if smp.count else 0.0, ulps, overflows, smp.count,
                   elements), per_sample


@dataclasses.dataclass
class Outcome:
    """What :func:`search` found: the base program (rewritten or not), the lines, and the figures."""

    closed: Any
    rewritten: bool
    lines: list[str]
    original: Figures
    tuned: Figures
    reached: bool
    tried: int
    note: str = ""


def _elements(outs: Sequence[np.ndarray], smp: Samples, dtype: np.dtype[Any]
              ) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per output: each judged element's error in bits (0 where not judged) and where it is not finite."""
    bits, bad = [], []
    for y, e, m in zip(outs, smp.exact, smp.judged):
        y = _as_low(y, dtype)
        bits.append(np.where(m, error_bits(y, e), 0.0))
        bad.append(m & ~np.isfinite(y.astype(np.float32)))
    return bits, bad


def search(closed: Any, rewritten: Any | None, dtype: np.dtype[Any], high: np.dtype[Any], smp: Samples,
           tolerance_ulps: float) -> Outcome:
    """The plan for ``closed`` (``rewritten``: its catalogue rewrite, None when no rule fires).

    When even every line in ``high`` misses the tolerance (a one-pass variance of a constant row at
    mean 14 is negative in float32 too, and its square root NaN), the target becomes the best that
    ``high`` achieves: an element is excused where the all-``high`` program misses it too and the plan
    is no worse there; the plan is then not ``reached``.
    """
    none: frozenset[str] = frozenset()
    original, worst = figures(_outputs(closed, none, high, smp), smp, dtype)
    tried = 1
    if original.within(tolerance_ulps):
        return Outcome(closed, False, [], original, original, True, tried)
    base, base_fig, is_rewritten = closed, original, False
    if rewritten is not None:
        fig, w = figures(_outputs(rewritten, none, high, smp), smp, dtype)
        tried += 1
        if fig.within(tolerance_ulps):
            return Outcome(rewritten, True, [], original, fig, True, tried)
        if (fig.overflows, fig.max_bits) <= (original.overflows, original.max_bits):
            base, base_fig, is_rewritten, worst = rewritten, fig, True, w
    tol_bits = math.log2(1.0 + tolerance_ulps)
    order = candidates(base, smp, worst)
    every = _outputs(base, frozenset(order), high, smp)
    tried += 1
    reachable = figures(every, smp, dtype)[0].within(tolerance_ulps)
    # Where even every line in high misses an element, it is excused if the program as written misses
    # it too: the target is "within tolerance, or no worse than both" (never worse than the original
    # where the original was right: a plan must not trade a correct value for a wrong one).
    orig_bits, orig_bad = _elements(_outputs(closed, none, high, smp), smp, dtype)
    high_bits, high_bad = _elements(every, smp, dtype)
    allow = [np.maximum(tol_bits, np.minimum(a, b)) for a, b in zip(orig_bits, high_bits)]
    excused = [a & b for a, b in zip(orig_bad, high_bad)]

    def ok(lines: Sequence[str]) -> tuple[bool, Figures]:
        nonlocal tried
        tried += 1
        outs = _outputs(base, frozenset(lines), high, smp)
        fig, _ = figures(outs, smp, dtype)
        if reachable:
            return fig.within(tolerance_ulps), fig
        bits, bad = _elements(outs, smp, dtype)
        good = all(not (b > lim).any() and not (x & ~ex).any()
                   for b, x, lim, ex in zip(bits, bad, allow, excused))
        return good, fig

    good, fig = ok(order)
    if not good:  # every line in high is worse than the program somewhere: no sound plan by upcasting
        note = (f"no plan: with every line in {high.name} the program still misses the tolerance, and "
                "is worse than the program as written on some samples; nothing is kept high")
        return Outcome(base, is_rewritten, [], original, base_fig, False, tried, note)
    chosen, (_, fig) = fewest_lines(order, ok)
    reached = fig.within(tolerance_ulps)
    if reached and is_rewritten:  # the rewrites are kept only where the kept lines need them
        plain, _ = figures(_outputs(closed, frozenset(chosen), high, smp), smp, dtype)
        tried += 1
        if plain.within(tolerance_ulps):
            base, is_rewritten, fig = closed, False, plain
    note = "" if reached else (f"even with every line in {high.name} the program misses the tolerance on "
                               "some samples: the plan reaches what it can, never worse than the program "
                               "as written where that was within it")
    return Outcome(base, is_rewritten, chosen, original, fig, reached, tried, note)


def candidates(closed: Any, smp: Samples, worst: np.ndarray) -> list[str]:
    """The program's float lines in the order the greedy adds them (see the module docstring)."""
    from .._diagnostics._local_error import analyse

    order = np.argsort(-worst, kind="stable")[:_LOCAL_SAMPLES]
    ranked: list[str] = []
    try:
        local = analyse(closed, [smp.one(int(i)) for i in order])
        for rec in local.lines:
            if rec.location is not None and rec.location not in ranked:
                ranked.append(rec.location)
    except Exception:  # local error cannot run here (a primitive it cannot re-run): program order only
        pass
    sites = float_sites(closed)
    for site in reversed(sites):
        if site.location is not None and site.location not in ranked:
            ranked.append(site.location)
    return ranked
