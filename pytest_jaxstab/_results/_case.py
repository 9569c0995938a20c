"""The result of checking one function: figures of both variants, witnesses, diagnostics, plans.

Plain data, JSON round-trippable (``CaseResult.to_json`` is one case of the JSON report of
docs/architecture.md, "The pytest surface"), so results travel from pytest-xdist workers to the
controller and into baselines unchanged.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ._plans import PrecisionRecord
from ._records import (
    LocalErrorRecord,
    NanOriginRecord,
    Point,
    RewriteRecord,
    RewriteRegression,
    TimingRecord,
    VariantStats,
    Witness,
)


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
