"""``jst.tune_precision``: which of your lines must stay float32 when the program runs in bfloat16/float16.

Validates the arguments, traces the low-precision program, draws the samples and the exact results
(``_search.draw``), runs the search (``_search.search``) and packages a :class:`PrecisionPlan` whose
``fn`` applies it (``_upcast``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from .. import _compat as C
from .._check._upcast import WidenedCarry, float_sites, upcast_fn, widened_carries
from .._dtypes import resolve_dtype
from .._errors import ArgumentError, trace_error, tracing
from .._results import RewriteRecord
from ..rewrites.engine._engine import rewrite_jaxpr
from ._search import Figures, draw, search

__all__ = ["LOW_DTYPES", "PrecisionPlan", "tune_precision"]

#: The dtypes a plan tunes (the programs' precision) and the ones it may keep lines in.
LOW_DTYPES = ("bfloat16", "float16")
HIGH_DTYPES = ("float32", "float64")
#: The options ``tune_precision`` takes besides its named arguments, with their defaults.
OPTIONS: dict[str, Any] = {
    # 4 ulps: what a few roundings of the low dtype cost anyway (the output's own rounding is 0.5 ulp,
    # a reduction of a few terms a few more); "the best the low dtype can represent" with room for them.
    "tolerance_ulps": 4.0,
    # 64 samples: a line that spoils 5% of inputs is missed with probability 0.95**64 < 4%.
    "samples": 64,
    "seed": 0,
    "rules": None,
}


@dataclasses.dataclass(frozen=True)
class PrecisionPlan:
    """Which source lines of a low-precision program to compute in a higher precision, and the result.

    Attributes:
        lines: the user's lines (``"file.py:LINE"``) computed in ``high``, in program order.
        rewrites: ``(rule, "file.py:LINE")`` of the stability rewrites applied (preferred to an upcast:
            they fix the low-precision program at no cost in precision), as ``CaseResult.rewrites``.
        fn: the tuned function: same signature, takes and returns ``dtype`` arrays, computes ``lines``
            in ``high`` and applies ``rewrites``; composes with ``jax.jit``, ``jax.grad``, ``jax.vmap``.
        original: the program as written, against the exact result (``Figures``); ``tuned``: ``fn``.
        high_share: the share of the program's floating-point work done in ``high`` (work: each float
            operation's output elements; a reduction's input elements; a ``dot_general``'s
            multiply-adds), on the traced shapes.
        dtype, high: the two precisions; ``tolerance_ulps``: the target; ``reached``: whether ``tuned``
            is within it (no overflow where the exact result is finite, every judged element within
            ``tolerance_ulps`` ulps of the low dtype). False only when even every line in ``high``
            misses it: then ``lines`` is the fewest reaching what ``high`` can, never worse than the
            program as written where that was within the tolerance (none when every line in ``high``
            is worse somewhere), and ``note`` says which.
        candidates_tried: tuned programs measured.
        note: why the plan is not ``reached`` ("" when it is).
        carries: the loop carries kept in ``high`` because a kept line inside the loop writes them
            (:class:`WidenedCarry`: the loop's line, the carry, the line writing it); a carry no kept
            line writes stays in ``dtype``.
    """

    lines: tuple[str, ...]
    rewrites: tuple[tuple[str, str | None], ...]
    fn: Callable[..., Any]
    original: Figures
    tuned: Figures
    high_share: float
    dtype: str
    high: str
    tolerance_ulps: float
    reached: bool
    candidates_tried: int
    note: str = ""
    carries: tuple[WidenedCarry, ...] = ()

    def __str__(self) -> str:
        head = (f"precision plan: {self.dtype} program, {len(self.lines)} line(s) in {self.high} "
                f"({self.high_share:.1%} of the float work), {len(self.rewrites)} rewrite(s)")
        rows = [head]
        rows += [f"  keep in {self.high}: {line}" for line in self.lines]
        rows += [f"  carry kept in {self.high}: {carry}" for carry in self.carries]
        rows += [f"  rewrite {rule} at {where or '<no user frame>'}" for rule, where in self.rewrites]
        rows.append(f"  original: {self.original}")
        status = "within" if self.reached else "NOT within"
        rows.append(f"  tuned:    {self.tuned} ({status} {self.tolerance_ulps:g} ulps on "
                    f"{self.tuned.samples} samples)")
        if self.note:
            rows.append(f"  note: {self.note}")
        return "\n".join(rows)


def merge_options(options: dict[str, Any], defaults: dict[str, Any], settings: Any, *, caller: str,
                  where: str = "") -> dict[str, Any]:
    """``defaults``, then a case's ``settings`` (its seed and rules), then ``options``; an unknown option
    is an ArgumentError naming it (``caller``: who was called; ``where``: in which mode)."""
    unknown = sorted(set(options) - set(defaults))
    if unknown:
        raise ArgumentError(f"{caller}unknown option(s) {', '.join(unknown)}{where}; "
                            f"the options are {', '.join(sorted(defaults))}")
    out = dict(defaults)
    if settings is not None:
        if getattr(settings, "seed", None) is not None:
            out["seed"] = settings.seed
        if getattr(settings, "rules", None) is not None:
            out["rules"] = settings.rules
    out.update(options)
    return out


def check_samples_and_seed(out: dict[str, Any], samples_default: str) -> None:
    """``samples`` an integer >= 1 and ``seed`` an integer >= 0, or an ArgumentError naming it."""
    n = out["samples"]
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ArgumentError(f"samples={n!r}: expected an integer >= 1 (default {samples_default})")
    seed = out["seed"]
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ArgumentError(f"seed={seed!r}: expected an integer >= 0")


def _options(options: dict[str, Any], settings: Any) -> dict[str, Any]:
    out = merge_options(options, OPTIONS, settings, caller="jst.tune_precision: ")
    tol = out["tolerance_ulps"]
    if isinstance(tol, bool) or not isinstance(tol, (int, float)) or not tol >= 0:
        raise ArgumentError(f"tolerance_ulps={tol!r}: expected a number of ulps >= 0 (default 4)")
    check_samples_and_seed(out, "64")
    return out


def _dtypes(dtype: Any, high: Any) -> tuple[np.dtype[Any], np.dtype[Any]]:
    try:
        low = resolve_dtype(dtype)
    except (TypeError, ValueError) as exc:
        raise ArgumentError(f"dtype={dtype!r}: {exc}") from None
    if low.name not in LOW_DTYPES:
        raise ArgumentError(f"dtype={dtype!r}: jst.tune_precision tunes a low-precision program; "
                            f"expected one of {', '.join(LOW_DTYPES)}")
    try:
        hi = resolve_dtype(high)
    except (TypeError, ValueError) as exc:
        raise ArgumentError(f"high={high!r}: {exc}; expected one of {', '.join(HIGH_DTYPES)}") from None
    if hi.name not in HIGH_DTYPES:
        raise ArgumentError(f"high={high!r}: the precision kept lines run in; expected one of "
                            f"{', '.join(HIGH_DTYPES)}")
    if hi.name == "float64" and not jax.config.read("jax_enable_x64"):
        raise ArgumentError("high='float64' needs 64-bit JAX (jax.config.update('jax_enable_x64', True)); "
                            "or keep the lines in high='float32'")
    return low, hi


def tune_precision(fn: Callable[..., Any], *, shapes: Any, dtype: Any, domain: Any = None,
                   high: Any = "float32", settings: Any = None, **options: Any) -> PrecisionPlan:
    """Find the fewest source lines of ``fn`` to compute in ``high`` so that ``fn`` in ``dtype`` is accurate.

    Draws inputs as ``jst.check`` does (``shapes``, ``dtype``, ``domain``), takes the exact result of
    each from the oracle, and measures the program's output against it. Where a stability rewrite of
    ``jst.stabilize``'s catalogue alone brings it within the tolerance, the plan is that rewrite (no
    line kept high). Otherwise lines are added in the order of their local error (``jst.local_error``)
    until the tuned program is within ``tolerance_ulps`` ulps of the exact result rounded to ``dtype``
    with no overflow where the exact result is finite, then each is dropped again if the plan holds
    without it. A kept line's results stay in ``high`` until a line not kept reads them (then rounded
    to ``dtype``), so kept lines that feed each other round once.

    Args:
      fn: a JAX function of ``dtype`` arrays.
      shapes: the arguments' shapes, as for ``jst.check``.
      dtype: the program's precision: ``"bfloat16"`` or ``"float16"``.
      domain: the inputs' domain, as for ``jst.check`` (``(lo, hi)``, a ``jst.strategies.Domain``, one
        per argument).
      high: the precision of the kept lines: ``"float32"`` (default) or ``"float64"`` (with x64 on).
      settings: a ``jst.settings``; its ``seed`` and ``rules`` are used (keyword options override).
      **options: ``tolerance_ulps`` (4), ``samples`` (64 inputs), ``seed`` (0), ``rules`` (the rewrite
        rules; None: ``jst.rewrites.STABILITY``; ``()`` for upcasts only).

    Returns:
      A :class:`PrecisionPlan`.

    Raises:
      ArgumentError: a bad ``dtype`` (not low precision), ``high``, ``shapes``, ``domain`` or option,
        each named; TraceError: JAX cannot trace ``fn``; UnsupportedPrimitive: the oracle cannot
        evaluate it.

    Example::

        def norm(g):
            return jnp.sqrt(jnp.sum(jnp.square(g)))
        plan = jst.tune_precision(norm, shapes=(1024,), dtype="float16", domain=(-60, 60))
        print(plan)          # the rewrite (a scaled norm) or the line to keep in float32
        plan.fn(g16)         # float16 in, float16 out, no overflow
    """
    from .._check._spec import make_case, resolve_rules

    low, hi = _dtypes(dtype, high)
    opts = _options(options, settings)
    case = make_case(fn, shapes, low, domain, None)
    rules = resolve_rules(opts["rules"]) if opts["rules"] != () else ()
    specs = [jax.ShapeDtypeStruct(s, low) for s in case.shapes]
    try:
        with tracing(fn):
            closed, _, _ = C.trace(case.call, *specs)
    except Exception as exc:
        raise trace_error(fn, exc) from exc
    rewritten, applied = _rewrite(closed, rules)
    smp = draw(closed, low, case.shapes, domain, opts["samples"], opts["seed"])
    if smp.count == 0:
        raise ArgumentError(f"domain={domain!r}: no input drawn there has a finite exact {low.name} result")
    out = search(closed, rewritten if applied else None, low, hi, smp, float(opts["tolerance_ulps"]))
    # a derivative-only rewrite changes no value this plan judges (as in a check of the value)
    records = ([RewriteRecord(a.rule, a.location) for a in applied if not a.derivative_only]
               if out.rewritten else [])
    sites = float_sites(out.closed)
    kept = frozenset(out.lines)
    total = sum(s.work for s in sites)
    share = sum(s.work for s in sites if s.location in kept) / total if total else 0.0
    order = [s.location for s in sites if s.location in kept]
    lines = tuple(dict.fromkeys([*order, *out.lines]))  # program order, each once
    return PrecisionPlan(
        lines=lines,
        rewrites=tuple((r.rule, r.location) for r in records),
        fn=_tuned(fn, rules if out.rewritten else (), kept, hi),
        original=out.original, tuned=out.tuned, high_share=float(share), dtype=low.name, high=hi.name,
        tolerance_ulps=float(opts["tolerance_ulps"]), reached=out.reached, candidates_tried=out.tried,
        note=out.note, carries=widened_carries(out.closed, kept, hi) if kept else ())


def _rewrite(closed: Any, rules: Any) -> tuple[Any, list[Any]]:
    """The catalogue's rewrite of the low-precision program, or none when a rule's matcher fails on it
    (today ``_divergence_read`` raises on a bfloat16 literal: an upcast plan is still sound)."""
    if not rules:
        return closed, []
    try:
        return rewrite_jaxpr(closed, rules, describe=True)
    except Exception:
        return closed, []


def _tuned(fn: Callable[..., Any], rules: Any, lines: frozenset[str], high: np.dtype[Any]
           ) -> Callable[..., Any]:
    def closed_of(*args: Any, **kwargs: Any) -> tuple[Any, Any, Any]:
        with tracing(fn):
            closed, in_tree, out_tree = C.trace(fn, *args, **kwargs)
        if rules:
            closed, _ = rewrite_jaxpr(closed, rules)
        return closed, in_tree, out_tree

    tuned = upcast_fn(closed_of, lines, high)
    tuned.__name__ = f"tuned_{getattr(fn, '__name__', 'fn')}"
    tuned.__doc__ = fn.__doc__
    return tuned
