"""The records a check's result is made of: figures of a variant, witnesses, rewrites, NaN origins, local
error, timings, points, a rewrite's regression. Plain data, JSON round-trippable (``CaseResult`` in
``_case`` holds them)."""

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
    from .._dtypes import resolve_dtype

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

        from .._files import short_path

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
