"""Paths in reports: source locations relative to pytest's rootdir, absolute only outside it.

A report is an artifact read on another machine (a CI upload): ``/home/runner/work/proj/proj/src/m.py:12``
names nothing there, ``src/m.py:12`` does. Locations are recorded as ``file:line`` where the check ran
(absolute, or relative to the working directory); the plugin rewrites them here, once, before any
report is formatted, so the terminal, HTML and JSON reports agree.
"""

from __future__ import annotations

import dataclasses
import os

from .._results import CaseResult

__all__ = ["relative_location", "relative_locations"]


def relative_location(location: str | None, rootdir: str | os.PathLike[str]) -> str | None:
    """``file:line`` with the file relative to `rootdir` when it lies below it, else absolute.

    Example:
        >>> relative_location("/work/proj/src/m.py:12", "/work/proj")
        'src/m.py:12'
        >>> relative_location("/usr/lib/python3/site.py:3", "/work/proj")
        '/usr/lib/python3/site.py:3'
    """
    if not location:
        return location
    file, sep, line = location.rpartition(":")
    if not sep or not line.isdigit():  # not file:line (e.g. "<unknown>"): shown as it was
        file, line = location, ""
    path = os.path.abspath(file)  # a relative file is relative to the working directory
    root = os.path.abspath(rootdir)
    try:
        rel = os.path.relpath(path, root)
    except ValueError:  # another drive (Windows)
        rel = path
    outside = rel == os.pardir or rel.startswith(os.pardir + os.sep) or os.path.isabs(rel)
    shown = path if outside else rel.replace(os.sep, "/")  # node ids use "/" on every system
    return f"{shown}:{line}" if line else shown


def relative_locations(case: CaseResult, rootdir: str | os.PathLike[str]) -> CaseResult:
    """A copy of `case` whose rewrite (those that fired, and those that made it worse), NaN-origin,
    local-error and precision-plan locations are relative to `rootdir`."""
    def rel(location: str | None) -> str | None:
        return relative_location(location, rootdir)

    reg = case.rewrite_regression
    if reg is not None:
        reg = dataclasses.replace(reg, rules=[dataclasses.replace(r, location=rel(r.location))
                                              for r in reg.rules])
    plan = case.precision
    if plan is not None:  # the anchor (function, text) names the line; only its shown location moves
        plan = dataclasses.replace(
            plan, lines=[dataclasses.replace(k, location=rel(k.location)) for k in plan.lines],
            rewrites=[dataclasses.replace(r, location=rel(r.location)) for r in plan.rewrites])
        grad = plan.gradient
        if grad is not None:  # the gradient's plan: its kept lines, rewrites and the upper bound's line
            grad = dataclasses.replace(
                grad, lines=[dataclasses.replace(k, location=rel(k.location)) for k in grad.lines],
                backward_lines=[dataclasses.replace(k, location=rel(k.location))
                                for k in grad.backward_lines],
                rewrites=[dataclasses.replace(r, location=rel(r.location)) for r in grad.rewrites],
                upper=dataclasses.replace(grad.upper, location=rel(grad.upper.location)))
            plan = dataclasses.replace(plan, gradient=grad)
    return dataclasses.replace(
        case,
        precision=plan,
        rewrite_regression=reg,
        rewrites=[dataclasses.replace(r, location=rel(r.location)) for r in case.rewrites],
        nan_origins=[dataclasses.replace(n, location=rel(n.location)) for n in case.nan_origins],
        local_error=[dataclasses.replace(e, location=rel(e.location)) for e in case.local_error],
        gradient=None if case.gradient is None else relative_locations(case.gradient, rootdir),
    )
