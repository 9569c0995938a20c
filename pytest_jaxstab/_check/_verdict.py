"""The two lenses of the verdict (docs/architecture.md, "Two lenses: stability and accuracy").

``accuracy`` (Herbie's lens): an element fails when its forward error exceeds the tolerance.
``stability`` (the default): an element fails when its error exceeds what the problem's conditioning
at that input explains, by more than the tolerance:

    beyond_j = bits_j - min(log2(1 + n * cond_j), width)

with ``cond_j`` the conditioning in output ulps (``_conditioning.py``) and ``n`` the most terms one
reduction of the program combines (the ``n·u`` of a sum's error bound; 1 without reductions) and
``width`` the dtype's bits (16, 32, 64: the largest error there is). An
overflow or NaN where the exact result is finite fails under both lenses. The underflow zone: an element
whose exact magnitude is below ``2^p * tiny`` (p the output's significand bits) and whose absolute error
is at most ``n * 2^t * tiny`` (t the tolerance in bits) lost what flushed or underflowed intermediates
carry (each flushed term is below ``tiny``; n of them, amplified by at most the tolerance): it is
counted as an underflow note, not as an instability.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from .._dtypes import component_dtype, dtype_info
from .._errors import ArgumentError

__all__ = ["JUDGES", "Judge", "Judgement", "element_beyond", "judge_elements", "validate_judge"]

Judge = Literal["stability", "accuracy"]
JUDGES: tuple[str, str] = ("stability", "accuracy")


def validate_judge(judge: Any) -> Judge:
    """``judge`` checked: one of :data:`JUDGES`, else an :class:`ArgumentError` naming both."""
    if judge not in JUDGES:
        raise ArgumentError(f"judge={judge!r}: expected 'stability' (error beyond what the problem's "
                            "conditioning explains; the default) or 'accuracy' (forward error, as Herbie)")
    return judge  # type: ignore[return-value]


class Judgement:
    """One variant on one input under the stability lens: the bits beyond conditioning (max over
    elements), the conditioning bits ``log2(1 + n cond)`` at the element of largest forward error, and
    how many elements got an underflow note."""

    __slots__ = ("beyond_bits", "conditioning_bits", "underflow")

    def __init__(self, beyond_bits: float, conditioning_bits: float, underflow: int) -> None:
        self.beyond_bits = beyond_bits
        self.conditioning_bits = conditioning_bits
        self.underflow = underflow


def element_beyond(a: np.ndarray, e: np.ndarray, bits: np.ndarray, cond: np.ndarray, terms: int,
                   tolerance_bits: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One leaf's ``(beyond, allowed, noted)`` per element (module docstring): the bits beyond the
    conditioning (NaN where the element is not judged; 0 where it got an underflow note), the
    conditioning's allowance ``min(log2(1 + n cond), width)`` (a NaN ``cond``, not computed, allows
    nothing), and which elements got the note."""
    info = dtype_info(component_dtype(e.dtype))
    tiny = float(info.tiny)
    p = round(-math.log2(float(info.eps))) + 1
    wide = np.complex128 if np.iscomplexobj(e) else np.float64  # |a - e|: a complex one's modulus
    a64 = np.broadcast_to(np.asarray(a), e.shape).astype(wide)
    e64 = np.asarray(e).astype(wide)
    with np.errstate(all="ignore"):
        # Clipped at the dtype's width, as the error itself is: beyond it every error is explained
        # (an exact result of 0 moved by its inputs has an unbounded relative condition).
        allowed = np.minimum(np.log2(1.0 + terms * np.where(np.isnan(cond), 0.0, cond)), float(info.bits))
        beyond = np.maximum(bits - allowed, 0.0)
        zone = (np.abs(e64) < 2.0 ** p * tiny) & np.isfinite(a64) & (
            np.abs(a64 - e64) <= terms * 2.0 ** tolerance_bits * tiny)
    noted = zone & (beyond > tolerance_bits) & ~np.isnan(bits)
    return np.where(noted, 0.0, beyond), np.broadcast_to(allowed, np.shape(bits)), noted


def judge_elements(approx: Sequence[np.ndarray], exact: Sequence[np.ndarray],
                   element_bits: Sequence[np.ndarray], cond_ulps: Sequence[np.ndarray], terms: int,
                   tolerance_bits: float) -> Judgement:
    """The stability lens over one variant's judged leaves (module docstring for the formulas)."""
    worst, cond_at_worst, notes = 0.0, 0.0, 0
    for a, e, bits, cond in zip(approx, exact, element_bits, cond_ulps):
        beyond, allowed, noted = element_beyond(a, e, bits, cond, terms, tolerance_bits)
        notes += int(noted.sum())
        judged = ~np.isnan(beyond)
        if judged.any():
            worst = max(worst, float(beyond[judged].max()))
            # The conditioning where the forward error is worst: what explains (or not) that error.
            k = int(np.argmax(np.where(judged, bits, -1.0)))
            cond_at_worst = max(cond_at_worst, float(allowed.reshape(-1)[k]))
    return Judgement(worst, cond_at_worst, notes)
