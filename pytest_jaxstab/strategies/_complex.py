"""Complex arguments: complex64/complex128 arrays drawn as their two float parts, jointly.

An argument of a complex dtype is one class (`COMPLEX_CLASSES`), each naming a way complex code breaks:

- `parts`: real and imaginary part each drawn as a real array of the part dtype (`_classes`: every
  binade, specials, clusters, ...), independently: magnitudes of the two parts far apart or alike;
- `polar`: a modulus over every binade (a real array's magnitudes) and a phase uniform on the circle,
  near an axis (`k pi/2 + d`) or near a diagonal (`pi/4 + k pi/2 + d`), `|d|` from 2^-1 down to
  2^-(significand + 10): `exp`, `log`, `abs` and division at every magnitude and angle;
- `near-real` / `near-imaginary`: one part 8 to (significand + 10) binades below the other, or
  exactly zero (the axes, where `log` and `sqrt` have their cuts);
- `diagonal`: `im = +-re (1 + d)`, `|d|` from 2^-1 down to 2^-(significand + 10), or exactly `+-re`:
  the cancellation of `re^2 - im^2` (`z*z`, `Re(z w)`) and of `re + im`;
- `unit-circle`: `|z| = 1 (1 + d)`, the cancellation of `log|z|` (and of `|1 + z| - 1` near -1).

A later argument of the same shape is, one time in four, derived from an earlier complex one: equal,
conjugate, negated, or a relative complex distance of 2^-k from it (`z - w`, `z / w` with `w ~ z`).

The domain applies to each part (its interval clamps both; its predicate is asked of each part).
Every draw goes through `_classes`' helpers and `Header`, so a check's scenarios get variants and fresh
draws of complex arguments as of real ones (`_scenario`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .._dtypes import component_dtype, from_ordinal, to_ordinal
from ._classes import Header, Noise, clamp
from ._floats import Sampler, index

__all__ = ["COMPLEX_CLASSES", "COMPLEX_RELATIONS", "ComplexPlan", "combine"]

COMPLEX_CLASSES: tuple[str, ...] = (
    "parts", "polar", "near-real", "near-imaginary", "diagonal", "unit-circle")
COMPLEX_RELATIONS: tuple[str, ...] = ("equal", "conjugate", "negated", "close")
_HEADER = 24


def _signs(rng: Noise | None, n: int) -> np.ndarray:
    if rng is None:
        return np.ones(n)
    return np.where(rng.words(n) & np.uint64(1), -1.0, 1.0)


def _uniform(rng: Noise | None, n: int) -> np.ndarray:
    return rng.random(n) if rng is not None else np.zeros(n)


class ComplexPlan:
    """One complex argument: its part dtype's array plan (shape, domain) and the complex classes."""

    def __init__(self, dtype: Any, shape: tuple[int, ...], domain: Any, max_drawn: int,
                 make_plan: Callable[[Sampler, tuple[int, ...], int], Any]) -> None:
        self.dtype = np.dtype(dtype)
        self.part = component_dtype(dtype)
        self.part_plan = make_plan(Sampler(self.part, domain), shape, max_drawn)
        self.shape = shape
        self.size = self.part_plan.size
        self.info = self.part_plan.sampler.info

    # ------------------------------------------------------------------------------------- helpers
    def _finish(self, draw: Any, re: np.ndarray, im: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Both parts rounded to the part dtype, clamped to the domain's interval, predicate-repaired."""
        out = []
        for p in (re, im):
            with np.errstate(all="ignore"):
                arr = np.asarray(p, dtype=np.float64).reshape(self.shape).astype(self.part)
            arr = np.where(np.isfinite(arr), arr, np.copysign(self.info.max, arr)).astype(self.part)
            ords = clamp(self.part_plan, to_ordinal(arr, self.part).reshape(-1))
            vals = from_ordinal(ords, self.info.name).reshape(self.shape).copy()
            out.append(self.part_plan.repair(draw, vals))
        return out[0], out[1]

    def _real(self, draw: Any) -> np.ndarray:
        return np.asarray(self.part_plan.draw(draw), dtype=np.float64).reshape(-1)

    def _fine(self, header: Header) -> float:
        """A relative size 2^-k, k from 1 to significand + 10 (monotone in the header's bytes)."""
        return 2.0 ** -header.scaled(1, self.info.significand_bits + 10)

    # --------------------------------------------------------------------------------------- draws
    def draw_parts(self, draw: Any, earlier: Sequence[tuple[np.ndarray, np.ndarray]] = (),
                   observers: Sequence[Callable[[str, np.ndarray], None]] = (),
                   ) -> tuple[np.ndarray, np.ndarray]:
        """`(re, im)`: this argument's two parts, of the part dtype and the argument's shape."""
        if self.size == 0:
            empty = np.zeros(self.shape, dtype=self.part)
            return empty, empty.copy()
        sources = [e for e in earlier if e[0].shape == self.shape]
        if sources and index(draw, 4) == 0:
            name, re, im = self._relate(draw, sources)
        else:
            name = COMPLEX_CLASSES[index(draw, len(COMPLEX_CLASSES))]
            re, im = self._class(draw, name)
        re, im = self._finish(draw, re, im)
        if observers:
            whole = combine(re, im)
            for observer in observers:
                observer(f"complex:{name}", whole)
        return re, im

    def _class(self, draw: Any, name: str) -> tuple[np.ndarray, np.ndarray]:
        n = self.size
        if name == "parts":
            return self._real(draw), self._real(draw)
        header = Header(draw, _HEADER)
        rng = header.rng()
        if name == "polar":
            r = np.abs(self._real(draw))
            mode = header.below(3)
            if mode == 0:
                theta = (2.0 * _uniform(rng, n) - 1.0) * math.pi
            else:
                base = (0.0 if mode == 1 else math.pi / 4) + (math.pi / 2) * np.floor(4 * _uniform(rng, n))
                theta = base + _signs(rng, n) * self._fine(header) * (0.5 + _uniform(rng, n))
            return r * np.cos(theta), r * np.sin(theta)
        if name in ("near-real", "near-imaginary"):
            big = self._real(draw)
            if header.below(4) == 0:
                small = np.zeros(n)
            else:
                k = header.scaled(8, self.info.significand_bits + 10)
                small = big * _signs(rng, n) * 2.0 ** -k * (1.0 + _uniform(rng, n))
            return (big, small) if name == "near-real" else (small, big)
        if name == "diagonal":
            re = self._real(draw)
            sign = -1.0 if header.below(2) else 1.0
            if header.below(4) == 0:
                return re, sign * re
            d = _signs(rng, n) * self._fine(header) * (0.5 + _uniform(rng, n))
            return re, sign * re * (1.0 + d)
        # unit-circle
        theta = (2.0 * _uniform(rng, n) - 1.0) * math.pi
        scale = 1.0 + _signs(rng, n) * self._fine(header) * (0.5 + _uniform(rng, n))
        return scale * np.cos(theta), scale * np.sin(theta)

    def _relate(self, draw: Any, sources: Sequence[tuple[np.ndarray, np.ndarray]]
                ) -> tuple[str, np.ndarray, np.ndarray]:
        re0, im0 = sources[index(draw, len(sources))]
        re, im = re0.astype(np.float64).reshape(-1), im0.astype(np.float64).reshape(-1)
        name = COMPLEX_RELATIONS[index(draw, len(COMPLEX_RELATIONS))]
        if name == "equal":
            return name, re, im
        if name == "conjugate":
            return name, re, -im
        if name == "negated":
            return name, -re, -im
        header = Header(draw, _HEADER)
        rng = header.rng()
        n = re.size
        eps = self._fine(header)
        dr = _signs(rng, n) * eps * _uniform(rng, n)
        di = _signs(rng, n) * eps * _uniform(rng, n)
        # z (1 + dr + i di): a relative complex distance of about eps
        return name, re * (1 + dr) - im * di, im * (1 + dr) + re * di


def combine(re: np.ndarray, im: np.ndarray) -> np.ndarray:
    """The complex array with these parts (float32 parts give complex64, float64 parts complex128)."""
    dtype = np.complex64 if np.asarray(re).dtype == np.float32 else np.complex128
    out = np.empty(np.shape(re), dtype=dtype)
    out.real, out.imag = re, im
    return out
