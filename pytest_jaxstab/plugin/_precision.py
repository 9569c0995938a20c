"""``tune_precision=True`` in the plugin: the precision plan of a bfloat16/float16 case (issue 34).

:func:`plan_record` runs ``jst.tune_precision`` on the case's function, shapes, dtype and domain with
the case's settings (its ``seed``, ``rules``) and packages the plan as a
:class:`~pytest_jaxstab._results.PrecisionRecord`, each kept line anchored by its function and source
text (``_files.source_anchor``) so that the baseline gate can tell a new kept line from one that
moved. :func:`wanted` decides whether a case gets a plan, and says what is wrong when the option is
asked of a case it cannot apply to. With ``grad=True`` (issue 49) the case's gradient is planned too
(:func:`gradient_part`): its kept lines join the record's, its figures and loss scale ride in the note.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

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

    lines = list(plan.lines)
    rewrites = [RewriteRecord(rule, where) for rule, where in plan.rewrites]
    note = plan.note
    if getattr(chosen, "grad", False):
        backward, extra = gradient_part(fn, shapes=shapes, dtype=dtype, domain=domain, chosen=chosen)
        lines += [loc for loc in backward.lines if loc not in lines]
        rewrites += [RewriteRecord(rule, where) for rule, where in backward.rewrites
                     if RewriteRecord(rule, where) not in rewrites]
        note = f"{note}\n{extra}" if note else extra
    return PrecisionRecord(
        dtype=plan.dtype, high=plan.high,
        lines=[_kept(loc, source_anchor(loc)) for loc in lines],
        rewrites=rewrites,
        original=figures(plan.original), tuned=figures(plan.tuned), high_share=float(plan.high_share),
        tolerance_ulps=float(plan.tolerance_ulps), reached=bool(plan.reached),
        samples=int(plan.tuned.samples), note=note)


@dataclasses.dataclass(frozen=True)
class _Backward:
    """The kept lines and rewrites a gradient plan adds to the case's record (none when it failed)."""

    lines: tuple[str, ...] = ()
    rewrites: tuple[tuple[str, str | None], ...] = ()


def gradient_part(fn: Callable[..., Any], *, shapes: Any, dtype: str, domain: Any, chosen: Any
                  ) -> tuple[_Backward, str]:
    """With ``grad=True``: the backward plan of ``fn`` (``_precision._grad_plan.tune_gradient``, the
    case's seed and rules) as the lines and rewrites it adds to the case's record and the paragraph
    the record's note carries (so the failure text, the JSON and the HTML report show it).

    The record's ``lines`` become the union of the value's plan and the gradient's (a line kept in
    either pass, or in the backward pass only): the lines this case must keep in float32, each keyed
    as the forward plan's are, so the baseline gates a new one the same way. The figures of the
    record stay the value's (ulps); the gradient's (norm-wise, with its loss scale) are in the note.
    A gradient plan that cannot be made is named in the note; the value's plan stands."""
    from .._errors import JaxstabError
    from .._precision._grad_plan import tune_gradient

    try:
        g = tune_gradient(fn, shapes=shapes, dtype=dtype, domain=domain, settings=chosen)
    except JaxstabError as exc:
        return _Backward(), f"gradient plan (grad=True): none ({type(exc).__name__}: {exc})"
    rows = [f"gradient plan (grad=True, jst.precision_policy(grad=True)'s search): {len(g.lines)} line(s) in "
            f"{g.high} in both passes, {len(g.backward_lines)} in the backward pass only "
            f"({g.high_share:.1%} of the gradient's float work), {len(g.rewrites)} rewrite(s)"]
    return _Backward((*g.lines, *g.backward_lines), g.rewrites), "\n".join(rows + g.detail_rows())


def _kept(location: str, anchor: tuple[str, str, int]) -> Any:
    from .._results import KeptLine

    function, text, occurrence = anchor
    return KeptLine(location, function, text, occurrence) if text else KeptLine(location)
