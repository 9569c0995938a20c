"""Local error inside a check: where the function as written loses bits on its worst inputs.

Runs ``jst.local_error``'s analysis (``_diagnostics._local_error``) on a few of the worst inputs the
check found and, for a failed case, on the rewritten program too, to say whether rewriting removes the
loss on each line. A diagnostic: any error in it leaves the records empty, never the verdict changed.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from .._diagnostics import analyse as analyse_local_error
from .._diagnostics import analyse_until
from .._results import LocalErrorRecord
from ._evaluate import Accumulator, SampleResult

__all__ = ["local_error_records", "still_losing"]


#: Local error is computed on this many of the worst inputs (each costs one oracle evaluation of the
#: program with every intermediate as an output): enough to name the line, cheap beside 200 samples.
_LOCAL_ERROR_SAMPLES = 3


def local_error_records(closed: Any, rewritten: Any, acc: Accumulator, minimal: SampleResult | None,
                 tolerance: float, failed: bool) -> list[LocalErrorRecord]:
    """Where the function as written loses bits on its worst inputs (``jst.local_error``), worst first;
    on a failed case, whether the rewritten function still loses them on each line."""
    pool = ([minimal] if minimal is not None else []) + acc.worst("original")
    samples: list[tuple[Any, ...]] = []
    for ex in pool:
        if not any(all(np.asarray(a).tobytes() == np.asarray(b).tobytes() for a, b in zip(ex.args, s))
                   for s in samples):
            samples.append(tuple(ex.args))
    samples = samples[:_LOCAL_ERROR_SAMPLES]
    if not samples:
        return []
    try:
        lines = analyse_local_error(closed, samples, tolerance_bits=tolerance, max_lines=10).lines
    except Exception:  # a diagnostic must not hide the verdict
        return []
    still: set[str | None] | None = None
    if failed and rewritten is not closed and lines:
        try:
            still = still_losing(rewritten, samples, {line.location for line in lines}, tolerance)
        except Exception:  # e.g. a primitive of a replacement the oracle lacks: "removed" stays unknown
            failed = False
    records = []
    for line in lines:
        removed = None
        if failed:
            removed = still is not None and line.location not in still
        records.append(dataclasses.replace(line, code=line.code or "", removed=removed))
    return records


def still_losing(rewritten: Any, samples: list[tuple[Any, ...]], locations: set[str | None],
                 tolerance: float) -> set[str | None]:
    """Which of ``locations`` the rewritten program still loses more than ``tolerance`` bits at, on some
    sample: the answer of one analysis over every sample (a line's bits are its worst sample's), the
    drawn worst inputs first, stopped once every location is settled as still losing. Each sample is an
    exact evaluation of the whole program with every intermediate as an output, seconds at a (32, 1000)
    batch where the oracle's fast path does not cover the rewritten form; where the loss stays, the
    first sample usually settles it."""

    def losing(result: Any) -> set[str | None]:
        return {a.location for a in result.lines if a.max_bits > tolerance and a.location in locations}

    order = samples[1:] + samples[:1]
    result = analyse_until(rewritten, order, tolerance_bits=tolerance,
                           enough=lambda r: losing(r) >= locations)
    return losing(result)
