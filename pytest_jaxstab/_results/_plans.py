"""The precision plans of a low-precision case as data (``tune_precision=True``, issues 34 and 49).

:class:`PrecisionRecord` is ``jst.tune_precision``'s plan without its function: the lines kept in the
high precision (:class:`KeptLine`, keyed by function and source text so that the baseline gate tells a
new line from a moved one), the rewrites, the figures before and after (:class:`PlanFigures`). With
``grad=True`` its ``gradient`` is :class:`GradientPlanRecord`, ``_precision._grad_plan.GradientPlan``
without its function: the lines kept in both passes and in the backward pass only, the rewrites (a
derivative rule among them), the loss scale with its range and what set each bound
(:class:`ScaleBound`), the gradient's norm-wise relative error as written, at the loss scale and under
the plan (:class:`GradErrorFigures`), and the target. Both ride on the test report (xdist), in the JSON
and HTML reports and, their lines only, in the baseline (``_baseline/_plans``).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from ._records import RewriteRecord

__all__ = ["GradErrorFigures", "GradientPlanRecord", "KeptLine", "PlanFigures", "PrecisionRecord",
           "ScaleBound", "gradient_status", "loss_scale_text"]


def _shown(location: str | None) -> str | None:
    """``file:line`` with the file as messages show it (relative to pytest's rootdir in a session)."""
    from .._files import short_path

    if not location:
        return location
    file, sep, line = location.rpartition(":")
    return f"{short_path(file)}:{line}" if sep and line.isdigit() else location


@dataclasses.dataclass(frozen=True)
class KeptLine:
    """A source line a precision plan computes in the high precision.

    ``location`` is ``file:line`` (for display: the number moves when code above is edited);
    ``function`` and ``text`` (``_files.source_anchor``: the enclosing function's qualified name and
    the line's stripped source) with ``occurrence`` (its rank among identical lines of that function)
    name it across such edits: :attr:`key` is what the baseline gate compares.
    """

    location: str | None
    function: str = ""
    text: str = ""
    occurrence: int = 1

    @property
    def file(self) -> str:
        loc = self.location or ""
        file, sep, line = loc.rpartition(":")
        return file if sep and line.isdigit() else loc

    @property
    def key(self) -> str:
        """``file::function::text`` (``#N`` for the Nth identical line of the function); the bare
        location when the source could not be read."""
        if not self.text:
            return self.location or "?"
        nth = f"#{self.occurrence}" if self.occurrence > 1 else ""
        return f"{self.file}::{self.function}::{self.text}{nth}"

    def __str__(self) -> str:
        where = _shown(self.location) or "<no user frame>"
        return f"{where} ({self.function}: `{self.text}`)" if self.text else where

    def to_json(self) -> dict[str, Any]:
        return {"location": self.location, "function": self.function, "text": self.text,
                "occurrence": self.occurrence}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> KeptLine:
        return cls(d.get("location"), str(d.get("function", "")), str(d.get("text", "")),
                   int(d.get("occurrence", 1)))


@dataclasses.dataclass
class PlanFigures:
    """A program's low-precision output against the exact result (``_precision.Figures``, as JSON)."""

    max_bits: float = 0.0
    mean_bits: float = 0.0
    max_ulps: float = 0.0
    overflows: int = 0

    def __str__(self) -> str:
        ulps = "inf" if not np.isfinite(self.max_ulps) else f"{self.max_ulps:.3g}"
        over = f", {self.overflows} non-finite (exact finite)" if self.overflows else ""
        return f"max {self.max_bits:.2f} bits ({ulps} ulps), mean {self.mean_bits:.2f} bits{over}"

    def to_json(self) -> dict[str, Any]:
        # JSON has no infinity: an overflowing output's ulps are written as null.
        ulps = float(self.max_ulps) if np.isfinite(self.max_ulps) else None
        return {"max_bits": float(self.max_bits), "mean_bits": float(self.mean_bits), "max_ulps": ulps,
                "overflows": int(self.overflows)}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> PlanFigures:
        ulps = d.get("max_ulps")
        return cls(float(d["max_bits"]), float(d["mean_bits"]), float("inf") if ulps is None else float(ulps),
                   int(d["overflows"]))


@dataclasses.dataclass
class PrecisionRecord:
    """The precision plan of a low-precision case (``tune_precision=True``; see ``jst.tune_precision``).

    ``lines``: the lines kept in ``high``, in program order; ``rewrites``: the stability rewrites the
    plan applies; ``original``/``tuned``: the program as written and as planned against the exact
    result; ``high_share``: the kept lines' share of the float work; ``reached``: whether the tuned
    program is within ``tolerance_ulps``; ``note``: why not; ``error``: why there is no plan (the
    figures are then zero and the lines empty). ``gradient``: with ``grad=True``, the gradient's plan
    (:class:`GradientPlanRecord`: its own kept lines, loss scale and norm-wise figures).
    """

    dtype: str
    high: str = "float32"
    lines: list[KeptLine] = dataclasses.field(default_factory=list)
    rewrites: list[RewriteRecord] = dataclasses.field(default_factory=list)
    original: PlanFigures = dataclasses.field(default_factory=PlanFigures)
    tuned: PlanFigures = dataclasses.field(default_factory=PlanFigures)
    high_share: float = 0.0
    tolerance_ulps: float = 4.0
    reached: bool = True
    samples: int = 0
    note: str = ""
    error: str = ""
    gradient: GradientPlanRecord | None = None

    def describe(self) -> str:
        """The plan as a paragraph of a failure message (the gradient's plan after it, with grad=True)."""
        text = self._describe_forward()
        return text if self.gradient is None else f"{text}\n{self.gradient.describe()}"

    def _describe_forward(self) -> str:
        if self.error:
            return f"precision plan: none ({self.error})"
        rows = [f"precision plan ({self.dtype} program, jst.tune_precision): {len(self.lines)} line(s) "
                f"kept in {self.high} ({self.high_share:.1%} of the float work), {len(self.rewrites)} "
                "rewrite(s)"]
        rows += [f"  keep in {self.high}: {line}" for line in self.lines]
        rows += [f"  rewrite {r.rule} at {_shown(r.location) or '<no user frame>'}" for r in self.rewrites]
        status = "within" if self.reached else "NOT within"
        rows += [f"  original: {self.original}",
                 f"  tuned:    {self.tuned} ({status} {self.tolerance_ulps:g} ulps on {self.samples} "
                 "samples)"]
        if self.note:
            rows.append(f"  note: {self.note}")
        return "\n".join(rows)

    def to_json(self) -> dict[str, Any]:
        return {"dtype": self.dtype, "high": self.high, "lines": [k.to_json() for k in self.lines],
                "rewrites": [r.to_json() for r in self.rewrites], "original": self.original.to_json(),
                "tuned": self.tuned.to_json(), "high_share": float(self.high_share),
                "tolerance_ulps": float(self.tolerance_ulps), "reached": bool(self.reached),
                "samples": int(self.samples), "note": self.note, "error": self.error,
                **({"gradient": self.gradient.to_json()} if self.gradient is not None else {})}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> PrecisionRecord:
        return cls(str(d["dtype"]), str(d.get("high", "float32")),
                   [KeptLine.from_json(k) for k in d.get("lines", [])],
                   [RewriteRecord(**r) for r in d.get("rewrites", [])],
                   PlanFigures.from_json(d["original"]) if d.get("original") else PlanFigures(),
                   PlanFigures.from_json(d["tuned"]) if d.get("tuned") else PlanFigures(),
                   float(d.get("high_share", 0.0)), float(d.get("tolerance_ulps", 4.0)),
                   bool(d.get("reached", True)), int(d.get("samples", 0)), str(d.get("note", "")),
                   str(d.get("error", "")),
                   GradientPlanRecord.from_json(d["gradient"]) if d.get("gradient") else None)


def _number(x: float) -> float | None:
    """JSON has no infinity: a non-finite figure is written as null (and read back as inf)."""
    return float(x) if math.isfinite(x) else None


def _read(x: Any) -> float:
    return math.inf if x is None else float(x)


@dataclasses.dataclass(frozen=True)
class GradErrorFigures:
    """A gradient's norm-wise relative error against the exact one: the figures the gradient search
    measures (``_precision.GradFigures`` is this class) and the record carries.

    ``max_error`` (``inf`` with a non-finite entry where the exact one is finite), ``mean_error`` over
    the finite samples, ``nonfinite`` such entries over every sample, ``samples`` judged.
    """

    max_error: float = 0.0
    mean_error: float = 0.0
    nonfinite: int = 0
    samples: int = 0

    def within(self, tolerance: float) -> bool:
        """No non-finite entry and every sample within ``tolerance`` norm-wise."""
        return self.nonfinite == 0 and self.max_error <= tolerance

    def __str__(self) -> str:
        over = f", {self.nonfinite} non-finite (exact finite)" if self.nonfinite else ""
        worst = "inf" if not math.isfinite(self.max_error) else f"{self.max_error:.2e}"
        return f"norm-wise relative error max {worst}, mean {self.mean_error:.2e}{over}"

    def to_json(self) -> dict[str, Any]:
        return {"max_error": _number(self.max_error), "mean_error": _number(self.mean_error),
                "nonfinite": int(self.nonfinite), "samples": int(self.samples)}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> GradErrorFigures:
        return cls(_read(d["max_error"]), _read(d["mean_error"]), int(d["nonfinite"]), int(d["samples"]))


@dataclasses.dataclass
class ScaleBound:
    """What set one bound of the loss-scale range.

    The upper bound: the backward operation with the largest value at scale 1 (``location``, its
    ``primitive``, ``magnitude``), or the loss's own cotangent (``location`` None, ``magnitude`` 1).
    The lower bound: the differentiated input (``name``: a parameter, a layer's weight) holding the
    smallest gradient entry the target sees (``magnitude``), or none (``name`` "").
    """

    magnitude: float
    location: str | None = None
    primitive: str = ""
    name: str = ""

    def upper_text(self) -> str:
        if self.location is None:
            return "the loss's own cotangent (1 at scale 1)"
        return f"{_shown(self.location)} ({self.primitive}, up to {self.magnitude:.3g} at scale 1)"

    def lower_text(self) -> str:
        if not self.name:
            return "no entry"
        return f"{self.name} (smallest entry the target sees: {self.magnitude:.3g})"

    def to_json(self) -> dict[str, Any]:
        return {"magnitude": _number(self.magnitude), "location": self.location, "primitive": self.primitive,
                "name": self.name}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ScaleBound:
        return cls(_read(d["magnitude"]), d.get("location"), str(d.get("primitive", "")),
                   str(d.get("name", "")))


def gradient_status(reached: bool, tolerance: float, samples: int, excused: int) -> str:
    """``within 0.01 on 32 samples`` (or NOT), with the samples excused (``_precision._grad_search``)
    named: the live plan's text and its record's alike."""
    word = "within" if reached else "NOT within"
    if excused:
        return f"{word} {tolerance:g} on {samples - excused} of {samples} samples, {excused} excused"
    return f"{word} {tolerance:g} on {samples} samples"


def loss_scale_text(scale: float, scale_range: tuple[float, float], upper: str, lower: str) -> str:
    """``loss scale 2^k (range 2^a..2^b on the samples; upper bound set by ...; lower bound by ...)``."""
    lo, hi = scale_range
    top = f"2^{round(math.log2(hi))}"
    span = f"2^{round(math.log2(lo))}..{top}" if lo > 0 else f"..{top}"
    if lo > hi:
        span += ", empty"
    return (f"loss scale 2^{round(math.log2(scale))} (range {span} on the samples; upper bound set by "
            f"{upper}; lower bound by {lower})")


@dataclasses.dataclass
class GradientPlanRecord:
    """The gradient plan of a low-precision case (``grad=True``; see ``jst.precision_policy(grad=True)``).

    ``lines``: the lines kept in ``high`` in both passes; ``backward_lines``: those whose backward
    operations only are; ``carries``: the loop carries widened (as text); ``rewrites``: the stability
    rewrites the plan applies (a derivative rule among them). ``loss_scale``: the static power-of-two
    loss scale, ``scale_range`` the powers of two that keep the scaled backward pass in range on the
    samples (``(low, high)``, low > high when none does), ``upper``/``lower`` what set them.
    ``original``/``scaled``/``tuned``: the gradient as written at scale 1, as written at
    ``loss_scale``, under the plan. ``tolerance``: the norm-wise target; ``reached``: ``tuned`` within
    it (``excused`` samples aside); ``note``: why not; ``error``: why there is no plan.
    """

    dtype: str
    high: str = "float32"
    lines: list[KeptLine] = dataclasses.field(default_factory=list)
    backward_lines: list[KeptLine] = dataclasses.field(default_factory=list)
    carries: list[str] = dataclasses.field(default_factory=list)
    rewrites: list[RewriteRecord] = dataclasses.field(default_factory=list)
    loss_scale: float = 1.0
    scale_range: tuple[float, float] = (0.0, 1.0)
    upper: ScaleBound = dataclasses.field(default_factory=lambda: ScaleBound(1.0))
    lower: ScaleBound = dataclasses.field(default_factory=lambda: ScaleBound(0.0))
    original: GradErrorFigures = dataclasses.field(default_factory=GradErrorFigures)
    scaled: GradErrorFigures = dataclasses.field(default_factory=GradErrorFigures)
    tuned: GradErrorFigures = dataclasses.field(default_factory=GradErrorFigures)
    high_share: float = 0.0
    tolerance: float = 1e-2
    reached: bool = True
    excused: int = 0
    note: str = ""
    error: str = ""

    def status(self) -> str:
        return gradient_status(self.reached, self.tolerance, self.tuned.samples, self.excused)

    def scale_text(self) -> str:
        return loss_scale_text(self.loss_scale, self.scale_range, self.upper.upper_text(),
                               self.lower.lower_text())

    def describe(self) -> str:
        """The plan as a paragraph of a failure message (after the forward plan's)."""
        if self.error:
            return f"gradient plan (grad=True): none ({self.error})"
        rows = [f"gradient plan (grad=True, {self.dtype} backward pass, jst.precision_policy(grad=True)'s "
                f"search): {len(self.lines)} line(s) in {self.high} in both passes, "
                f"{len(self.backward_lines)} in the backward pass only ({self.high_share:.1%} of the "
                f"gradient's float work), {len(self.rewrites)} rewrite(s)"]
        rows += [f"  keep in {self.high}: {line}" for line in self.lines]
        rows += [f"  keep in {self.high}, backward only: {line}" for line in self.backward_lines]
        rows += [f"  carry kept in {self.high}: {carry}" for carry in self.carries]
        rows += [f"  rewrite {r.rule} at {_shown(r.location) or '<no user frame>'}" for r in self.rewrites]
        rows += [f"  {self.scale_text()}", f"  original: {self.original} (as written, scale 1)"]
        if self.loss_scale != 1.0:
            rows.append(f"  scaled:   {self.scaled} (as written, scale {self.loss_scale:g})")
        rows.append(f"  tuned:    {self.tuned} ({self.status()})")
        if self.note:
            rows.append(f"  note: {self.note}")
        return "\n".join(rows)

    def to_json(self) -> dict[str, Any]:
        return {"dtype": self.dtype, "high": self.high, "lines": [k.to_json() for k in self.lines],
                "backward_lines": [k.to_json() for k in self.backward_lines], "carries": list(self.carries),
                "rewrites": [r.to_json() for r in self.rewrites], "loss_scale": float(self.loss_scale),
                "scale_range": [float(x) for x in self.scale_range], "upper": self.upper.to_json(),
                "lower": self.lower.to_json(), "original": self.original.to_json(),
                "scaled": self.scaled.to_json(), "tuned": self.tuned.to_json(),
                "high_share": float(self.high_share), "tolerance": float(self.tolerance),
                "reached": bool(self.reached), "excused": int(self.excused), "note": self.note,
                "error": self.error}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> GradientPlanRecord:
        figures = {k: GradErrorFigures.from_json(d[k]) if d.get(k) else GradErrorFigures()
                   for k in ("original", "scaled", "tuned")}
        lo, hi = d.get("scale_range", (0.0, 1.0))
        return cls(str(d["dtype"]), str(d.get("high", "float32")),
                   [KeptLine.from_json(k) for k in d.get("lines", [])],
                   [KeptLine.from_json(k) for k in d.get("backward_lines", [])],
                   [str(c) for c in d.get("carries", [])],
                   [RewriteRecord(**r) for r in d.get("rewrites", [])],
                   float(d.get("loss_scale", 1.0)), (float(lo), float(hi)),
                   ScaleBound.from_json(d["upper"]) if d.get("upper") else ScaleBound(1.0),
                   ScaleBound.from_json(d["lower"]) if d.get("lower") else ScaleBound(0.0),
                   figures["original"], figures["scaled"], figures["tuned"],
                   float(d.get("high_share", 0.0)), float(d.get("tolerance", 1e-2)),
                   bool(d.get("reached", True)), int(d.get("excused", 0)), str(d.get("note", "")),
                   str(d.get("error", "")))
