"""The result of checking one function: figures of both variants, witnesses, diagnostics.

Plain data, JSON round-trippable (``CaseResult.to_json`` is one case of the JSON report of
docs/architecture.md, "The pytest surface"), so results travel from pytest-xdist workers to the
controller and into baselines unchanged.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Literal

import numpy as np

Verdict = Literal["pass", "fail"]


@dataclasses.dataclass
class VariantStats:
    """Error figures of one variant (the function as written, or rewritten) over all samples.

    ``max_error_bits``/``mean_error_bits`` are over every output element of every sample whose exact
    result is real and certain; ``overflows`` counts non-finite results where the exact one is finite.
    """

    max_error_bits: float = 0.0
    mean_error_bits: float = 0.0
    overflows: int = 0
    verdict: Verdict = "pass"
    # The lens of the verdict: "accuracy" (forward error) or "stability" (error beyond conditioning);
    # under "stability", the max bits beyond what conditioning explains, the conditioning bits
    # (log2(1 + n cond)) at the input of largest forward error, and the underflow-zone notes.
    judge: str = "accuracy"
    beyond_bits: float = 0.0
    conditioning_bits: float = 0.0
    underflow_notes: int = 0

    @property
    def judged_bits(self) -> float:
        """What the verdict compares with the tolerance under this lens."""
        return self.beyond_bits if self.judge == "stability" else self.max_error_bits

    def to_json(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        if self.judge == "accuracy":  # the version-1 fields only: what readers of version 1 expect
            for key in ("judge", "beyond_bits", "conditioning_bits", "underflow_notes"):
                del d[key]
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> VariantStats:
        return cls(float(d["max_error_bits"]), float(d["mean_error_bits"]), int(d["overflows"]),
                   d["verdict"], d.get("judge", "accuracy"), float(d.get("beyond_bits", 0.0)),
                   float(d.get("conditioning_bits", 0.0)), int(d.get("underflow_notes", 0)))


def encode_array(a: np.ndarray) -> dict[str, Any]:
    """An array as exact bits: ``{"dtype", "shape", "hex"}``, hex of each element's bit pattern."""
    a = np.asarray(a)
    width = a.dtype.itemsize
    uint = np.dtype(f"u{width}")
    bits = a.reshape(-1).view(uint)
    return {"dtype": str(a.dtype), "shape": list(a.shape),
            "hex": [format(int(b), f"0{2 * width}x") for b in bits]}


def decode_array(d: dict[str, Any]) -> np.ndarray:
    """Inverse of :func:`encode_array`, bit-exact (NaN payloads and signed zeros included)."""
    from ._dtypes import resolve_dtype

    dtype = resolve_dtype(d["dtype"])
    uint = np.dtype(f"u{dtype.itemsize}")
    bits = np.array([int(h, 16) for h in d["hex"]], dtype=uint)
    return bits.view(dtype).reshape(tuple(d["shape"]))


@dataclasses.dataclass
class Witness:
    """One input that showed a variant's worst behaviour, stored exactly."""

    args: list[np.ndarray]
    variant: str  # "original" | "rewritten"
    error_bits: float
    overflow: bool

    def to_json(self) -> dict[str, Any]:
        return {"args": [encode_array(a) for a in self.args], "variant": self.variant,
                "error_bits": self.error_bits, "overflow": self.overflow}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Witness:
        return cls([decode_array(a) for a in d["args"]], d["variant"], float(d["error_bits"]),
                   bool(d["overflow"]))


@dataclasses.dataclass
class RewriteRecord:
    """A rewrite that fired: rule name and the user's ``file:line``."""

    rule: str
    location: str | None

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class NanOriginRecord:
    """Where a non-finite value was born in one variant (see ``jst.find_nan_origin``)."""

    variant: str
    primitive: str
    location: str | None
    kind: str = ""
    line_text: str = ""
    path: str = ""

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class LocalErrorRecord:
    """The local error of one (source line, primitive) pair: what ``jst.local_error`` lists (its
    ``LineError`` is this class) and what a ``CaseResult`` carries, one record for both.

    Attributes:
        location: the user's ``file:line`` (None when no user frame is known).
        primitive: the primitive's name (``sub``, ``log``, ``reduce_sum``).
        kind: cancellation, absorption, overflow, underflow, ... from the worst element.
        max_bits: the most bits one element lost there, over the samples analysed (a check's worst inputs).
        mean_bits: the mean over samples of the worst element's bits.
        share_over_tolerance: the share of samples losing more than the tolerance there.
        code: the text of the line at ``location`` (None or "" when unknown).
        removed: in a failed check, whether the rewritten function no longer loses more than the
            tolerance on that line (None when it was not analysed).
        path: the nested calls down to the equation (``("jit(f)", "scan", "sub")``).
        samples: how many samples could be judged there.
    """

    location: str | None
    primitive: str
    kind: str
    max_bits: float
    mean_bits: float
    share_over_tolerance: float
    code: str | None = ""
    removed: bool | None = None
    path: tuple[str, ...] = ()
    samples: int = 0

    @property
    def significant(self) -> bool:
        """More than the 1-2 bits a correctly (or faithfully) rounded operation loses by itself."""
        return self.max_bits > 2.0

    def to_json(self) -> dict[str, Any]:
        """Every field; ``path`` as a list."""
        return {"location": self.location, "primitive": self.primitive, "kind": self.kind,
                "max_bits": self.max_bits, "mean_bits": self.mean_bits,
                "share_over_tolerance": self.share_over_tolerance, "code": self.code,
                "removed": self.removed, "path": list(self.path), "samples": self.samples}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> LocalErrorRecord:
        """The record of :meth:`to_json` (older files: ``path``, ``samples``, ``removed`` optional)."""
        removed = d.get("removed")
        return cls(d.get("location"), d["primitive"], d["kind"], float(d["max_bits"]),
                   float(d["mean_bits"]), float(d["share_over_tolerance"]), d.get("code"),
                   None if removed is None else bool(removed), tuple(d.get("path", ())),
                   int(d.get("samples", 0)))

    def __str__(self) -> str:
        where = self.location or "<no source location>"
        text = (f"{self.kind} in {self.primitive} at {where}: max {self.max_bits:.1f} bits, mean "
                f"{self.mean_bits:.1f}, {100 * self.share_over_tolerance:.0f}% of samples over tolerance")
        return text + (f" (`{self.code}`)" if self.code else "")


@dataclasses.dataclass
class TimingRecord:
    """Jitted median time of both variants on one backend (``ratio`` = rewritten / original)."""

    backend: str
    original_s: float
    rewritten_s: float
    ratio: float

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class Point:
    """One sample for plots: input magnitude and each variant's worst error bits on it.

    ``magnitude`` is the largest |x| over the sample's input elements, raw (the plot takes log10).
    """

    magnitude: float
    original_bits: float
    rewritten_bits: float

    def to_json(self) -> list[float]:
        return [self.magnitude, self.original_bits, self.rewritten_bits]


@dataclasses.dataclass
class RewriteRegression:
    """A rewrite that made the function worse: on ``inputs`` the rewritten variant fails where the
    function as written does not, by more than the tolerance (docs/architecture.md, "The gate").

    ``rules`` are the culprits: the rules whose rewrite alone makes it worse there (``isolated``), or
    every rule that fired when no single one does. ``original_bits``/``rewritten_bits`` are the lens's
    judged figure at that input (``judge``: bits beyond conditioning under "stability" where computed,
    else the forward error); ``*_overflow`` a non-finite result where the exact one is finite.
    """

    rules: list[RewriteRecord]
    original_bits: float
    rewritten_bits: float
    inputs: list[np.ndarray]
    judge: str = "accuracy"
    original_overflow: bool = False
    rewritten_overflow: bool = False
    isolated: bool = True

    @property
    def rule_names(self) -> list[str]:
        """The culprits' names, each once, in the order they fired."""
        return list(dict.fromkeys(r.rule for r in self.rules))

    def __str__(self) -> str:
        """One line: the rules at their lines and both figures (reports and the gate's message)."""
        def figure(bits: float, overflow: bool) -> str:
            return "overflow" if overflow else f"{bits:.2f} bits"

        from ._files import short_path

        def at(location: str | None) -> str:  # absolute where the check ran; relative in reports
            return "?" if not location else short_path(location) if os.path.isabs(location) else location

        where = ", ".join(f"`{r.rule}` at {at(r.location)}" for r in self.rules)
        return (f"wrong rewrite {where}: {figure(self.rewritten_bits, self.rewritten_overflow)} where the "
                f"original has {figure(self.original_bits, self.original_overflow)} [judge={self.judge}]")

    def to_json(self) -> dict[str, Any]:
        return {"rules": [r.to_json() for r in self.rules], "original_bits": self.original_bits,
                "rewritten_bits": self.rewritten_bits, "original_overflow": self.original_overflow,
                "rewritten_overflow": self.rewritten_overflow, "judge": self.judge,
                "isolated": self.isolated, "inputs": [encode_array(a) for a in self.inputs]}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> RewriteRegression:
        return cls([RewriteRecord(**r) for r in d["rules"]], float(d["original_bits"]),
                   float(d["rewritten_bits"]), [decode_array(a) for a in d.get("inputs", [])],
                   d.get("judge", "accuracy"), bool(d.get("original_overflow", False)),
                   bool(d.get("rewritten_overflow", False)), bool(d.get("isolated", True)))


def _shown(location: str | None) -> str | None:
    """``file:line`` with the file as messages show it (relative to pytest's rootdir in a session)."""
    from ._files import short_path

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
    figures are then zero and the lines empty).
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

    def describe(self) -> str:
        """The plan as a paragraph of a failure message."""
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
                "samples": int(self.samples), "note": self.note, "error": self.error}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> PrecisionRecord:
        return cls(str(d["dtype"]), str(d.get("high", "float32")),
                   [KeptLine.from_json(k) for k in d.get("lines", [])],
                   [RewriteRecord(**r) for r in d.get("rewrites", [])],
                   PlanFigures.from_json(d["original"]) if d.get("original") else PlanFigures(),
                   PlanFigures.from_json(d["tuned"]) if d.get("tuned") else PlanFigures(),
                   float(d.get("high_share", 0.0)), float(d.get("tolerance_ulps", 4.0)),
                   bool(d.get("reached", True)), int(d.get("samples", 0)), str(d.get("note", "")),
                   str(d.get("error", "")))


@dataclasses.dataclass
class CaseResult:
    """Everything one checked function produced; ``to_json`` is one entry of the JSON report."""

    nodeid: str
    dtype: str
    samples: int = 0
    discarded: int = 0
    uncertain: int = 0
    outcome: str = "passed"  # "passed" | "failed"
    original: VariantStats = dataclasses.field(default_factory=VariantStats)
    rewritten: VariantStats = dataclasses.field(default_factory=VariantStats)
    rewrites: list[RewriteRecord] = dataclasses.field(default_factory=list)
    nan_origins: list[NanOriginRecord] = dataclasses.field(default_factory=list)
    timing: list[TimingRecord] = dataclasses.field(default_factory=list)
    local_error: list[LocalErrorRecord] = dataclasses.field(default_factory=list)  # worst first
    witnesses: list[Witness] = dataclasses.field(default_factory=list)
    points: list[Point] = dataclasses.field(default_factory=list)
    tolerance_bits: float = 8.0
    judged: str = "original"  # which variant the verdict is about ("rewritten" with apply=True)
    message: str = ""
    judge: str = "accuracy"  # the lens: "stability" (error beyond conditioning) or "accuracy"
    note: str = ""  # a passing case's explanation (ill-conditioned inputs, underflow-zone notes)
    # With grad=True: the same figures for the gradient of both variants (jax.grad, or a VJP with
    # ones), judged against the exact derivative of the function as written; None otherwise.
    gradient: CaseResult | None = None
    # A rewrite that makes the function worse than written at some input (fails the case and the gate
    # whatever apply=, judge= and the baseline say); None when none did.
    rewrite_regression: RewriteRegression | None = None
    # With tune_precision=True on a bfloat16/float16 case: which lines must stay float32; else None.
    precision: PrecisionRecord | None = None
    # The share of judged output elements the oracle's fast path (float64 intervals) left to the exact
    # ball escalation, over the inputs judged (docs/architecture.md, "The oracle"); None: not measured.
    escalated: float | None = None

    @property
    def judged_stats(self) -> VariantStats:
        return self.rewritten if self.judged == "rewritten" else self.original

    def to_json(self) -> dict[str, Any]:
        return {
            "nodeid": self.nodeid,
            "dtype": self.dtype,
            "samples": self.samples,
            "discarded": self.discarded,
            "uncertain": self.uncertain,
            "outcome": self.outcome,
            "original": self.original.to_json(),
            "rewritten": self.rewritten.to_json(),
            "rewrites": [r.to_json() for r in self.rewrites],
            "nan_origins": [n.to_json() for n in self.nan_origins],
            "timing": [t.to_json() for t in self.timing],
            "local_error": [e.to_json() for e in self.local_error],
            # extra keys (docs/architecture.md allows them):
            "witnesses": [w.to_json() for w in self.witnesses],
            "points": [p.to_json() for p in self.points],
            "tolerance_bits": self.tolerance_bits,
            "judged": self.judged,
            "message": self.message,
            "judge": self.judge,
            **({"note": self.note} if self.note else {}),
            **({"gradient": self.gradient.to_json()} if self.gradient is not None else {}),
            **({"rewrite_regression": self.rewrite_regression.to_json()}
               if self.rewrite_regression is not None else {}),
            **({"precision": self.precision.to_json()} if self.precision is not None else {}),
            **({"escalated": self.escalated} if self.escalated is not None else {}),
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> CaseResult:
        return cls(
            nodeid=d["nodeid"], dtype=d["dtype"], samples=int(d["samples"]),
            discarded=int(d["discarded"]), uncertain=int(d["uncertain"]), outcome=d["outcome"],
            original=VariantStats.from_json(d["original"]),
            rewritten=VariantStats.from_json(d["rewritten"]),
            rewrites=[RewriteRecord(**r) for r in d.get("rewrites", [])],
            nan_origins=[NanOriginRecord(**n) for n in d.get("nan_origins", [])],
            timing=[TimingRecord(**t) for t in d.get("timing", [])],
            local_error=[LocalErrorRecord.from_json(e) for e in d.get("local_error", [])],
            witnesses=[Witness.from_json(w) for w in d.get("witnesses", [])],
            points=[Point(*p) for p in d.get("points", [])],
            tolerance_bits=float(d.get("tolerance_bits", 8.0)),
            judged=d.get("judged", "original"),
            message=d.get("message", ""),
            judge=d.get("judge", "accuracy"),
            note=d.get("note", ""),
            gradient=CaseResult.from_json(d["gradient"]) if d.get("gradient") else None,
            rewrite_regression=(RewriteRegression.from_json(d["rewrite_regression"])
                                if d.get("rewrite_regression") else None),
            precision=PrecisionRecord.from_json(d["precision"]) if d.get("precision") else None,
            escalated=float(d["escalated"]) if d.get("escalated") is not None else None,
        )
