"""``tune_precision=True`` in the plugin: the precision plan of a bfloat16/float16 case (issue 34).

:func:`plan_record` runs ``jst.tune_precision`` on the case's function, shapes, dtype and domain with
the case's settings (its ``seed``, ``rules``) and packages the plan as a
:class:`~pytest_jaxstab._results.PrecisionRecord`, each kept line anchored by its function and source
text (``_files.source_anchor``) so that the baseline gate can tell a new kept line from one that
moved. :func:`wanted` decides whether a case gets a plan, and says what is wrong when the option is
asked of a case it cannot apply to. With ``grad=True`` (issue 49) the case's gradient is planned too
(:func:`gradient_part`): its own record (``PrecisionRecord.gradient``) beside the value's, with its
kept lines, loss scale and norm-wise figures.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # collection must not import the results' modules (tests/test_startup.py)
    from .._results import GradientPlanRecord

__all__ = ["LOW_DTYPES", "gradient_part", "plan_record", "usage_problem", "wanted"]

#: The dtypes a plan tunes (as ``_precision._plan.LOW_DTYPES``, spelt here so that collection does not
#: import the precision search).
LOW_DTYPES = ("bfloat16", "float16")


def usage_problem(dtype: Any, asked: bool) -> str | None:
    """Why ``tune_precision=True`` given on this case itself (``asked``) cannot apply, or None.

    On a float32/float64 case the plan would have nothing to keep high: a usage error naming the fix.
    A session-wide value (``--jaxstab-tune-precision``, the ini key, a profile) applies to the
    low-precision cases only and is never a problem.
    """
    if not asked:
        return None
    from .._dtypes import resolve_dtype

    try:
        name = resolve_dtype(dtype, complex_ok=True).name
    except (TypeError, ValueError):  # a bad dtype: the check names it
        return None
    if name in LOW_DTYPES:
        return None
    return (f"tune_precision=True finds which lines of a bfloat16/float16 program must stay float32, and "
            f"this case is dtype={name!r}. Check the low-precision program "
            f"(dtype=\"bfloat16\" or dtype=\"float16\"), or drop tune_precision=True.")


def asked_on_case(options: Mapping[str, Any], given: Any) -> bool:
    """Whether the case itself (a marker's or a call's options, or its ``settings=`` object) asks."""
    if options.get("tune_precision") is True:
        return True
    return given is not None and given.explicit().get("tune_precision") is True


def wanted(dtype: str, chosen: Any) -> bool:
    """Whether the case gets a plan: the option is on (any layer) and the case is low precision."""
    return bool(getattr(chosen, "tune_precision", False)) and str(dtype) in LOW_DTYPES


def plan_record(fn: Callable[..., Any], *, shapes: Any, dtype: str, domain: Any, chosen: Any) -> Any:
    """The plan of ``fn`` as a ``PrecisionRecord``; a plan that cannot be made is a record with
    ``error`` set (the case's verdict stands on its own: a diagnostic never hides it)."""
    from .._errors import JaxstabError
    from .._files import source_anchor
    from .._precision import tune_precision
    from .._results import PlanFigures, PrecisionRecord, RewriteRecord

    try:
        plan = tune_precision(fn, shapes=shapes, dtype=dtype, domain=domain, settings=chosen)
    except JaxstabError as exc:
        return PrecisionRecord(str(dtype), error=f"{type(exc).__name__}: {exc}")

    def figures(f: Any) -> PlanFigures:
        return PlanFigures(float(f.max_bits), float(f.mean_bits), float(f.max_ulps), int(f.overflows))

    return PrecisionRecord(
        dtype=plan.dtype, high=plan.high,
        lines=[_kept(loc, source_anchor(loc)) for loc in plan.lines],
        rewrites=[RewriteRecord(rule, where) for rule, where in plan.rewrites],
        original=figures(plan.original), tuned=figures(plan.tuned), high_share=float(plan.high_share),
        tolerance_ulps=float(plan.tolerance_ulps), reached=bool(plan.reached),
        samples=int(plan.tuned.samples), note=plan.note,
        gradient=gradient_part(fn, shapes=shapes, dtype=dtype, domain=domain, chosen=chosen)
        if getattr(chosen, "grad", False) else None)


def gradient_part(fn: Callable[..., Any], *, shapes: Any, dtype: str, domain: Any, chosen: Any
                  ) -> GradientPlanRecord:
    """With ``grad=True``: the backward plan of ``fn`` (``_precision._grad_plan.tune_gradient``, the
    case's seed and rules) as a ``GradientPlanRecord``, the record's ``gradient``: its kept lines (both
    passes, backward only) anchored as the forward plan's are, so that the baseline gates a new one the
    same way; its loss scale and what set the range; its norm-wise figures. A gradient plan that cannot
    be made is a record with ``error`` set; the value's plan stands."""
    from .._errors import JaxstabError
    from .._files import source_anchor
    from .._precision._grad_plan import tune_gradient
    from .._results import GradErrorFigures, GradientPlanRecord, RewriteRecord, ScaleBound

    try:
        g = tune_gradient(fn, shapes=shapes, dtype=dtype, domain=domain, settings=chosen)
    except JaxstabError as exc:
        return GradientPlanRecord(str(dtype), error=f"{type(exc).__name__}: {exc}")

    def figures(f: Any) -> GradErrorFigures:
        return GradErrorFigures(float(f.max_error), float(f.mean_error), int(f.nonfinite), int(f.samples))

    rng = g.bounds
    upper, lower = ScaleBound(1.0), ScaleBound(0.0)
    if rng is not None:
        if rng.upper_line is not None:
            upper = ScaleBound(float(rng.upper_magnitude), rng.upper_line, rng.upper_primitive)
        if rng.lower_input is not None:
            lower = ScaleBound(float(rng.lower_magnitude), name=g.inputs[rng.lower_input])
    return GradientPlanRecord(
        dtype=g.dtype, high=g.high,
        lines=[_kept(loc, source_anchor(loc)) for loc in g.lines],
        backward_lines=[_kept(loc, source_anchor(loc)) for loc in g.backward_lines],
        carries=[str(c) for c in g.carries],
        rewrites=[RewriteRecord(rule, where) for rule, where in g.rewrites],
        loss_scale=float(g.loss_scale), scale_range=(float(g.scale_range[0]), float(g.scale_range[1])),
        upper=upper, lower=lower, original=figures(g.original), scaled=figures(g.scaled),
        tuned=figures(g.tuned), high_share=float(g.high_share), tolerance=float(g.tolerance),
        reached=bool(g.reached), excused=int(g.excused), note=g.note)


def _kept(location: str, anchor: tuple[str, str, int]) -> Any:
    from .._results import KeptLine

    function, text, occurrence = anchor
    return KeptLine(location, function, text, occurrence) if text else KeptLine(location)
