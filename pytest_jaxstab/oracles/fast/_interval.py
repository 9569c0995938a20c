"""The fast oracle's numbers: float64 midpoint-radius intervals, every operation a rigorous enclosure.

A float value is an :class:`Interval` of two float64 arrays: the exact real lies in ``[mid - rad,
mid + rad]`` (real arithmetic). An element is *undecided* (``mid`` NaN, ``rad`` inf) where float64
could say nothing: a non-finite input, an overflow, a domain edge, an operand that was undecided.
Undecided propagates: IEEE arithmetic carries NaN through every operation, and :meth:`Interval.make`
turns any non-finite midpoint or radius into it. An exact infinity (``mid = +-inf``, ``rad = 0``)
exists only where an operation says how to carry it (``add``, ``neg``, ``abs``, ``max``, ``min``,
``exp``, the structural ones): every other operation first makes it undecided (:meth:`finite`).

How each bound is made rigorous (docs/architecture.md, "The oracle"):

* ``+ - * /`` and ``sqrt`` are correctly rounded (IEEE 754): a result ``m`` is within ``2^-53 |m|``
  of the exact one in the normal range and within ``2^-1075`` below it (Higham, *Accuracy and
  Stability*, thm 2.2), so :func:`rounding_error` bounds it by ``2^-53 |m| + 2^-1074``. Where the
  operation is provably exact (TwoSum's error term is 0; Dekker's TwoProduct of the product, or of
  the quotient times the divisor, has no error term) the radius gains nothing, so exact inputs stay
  exact through exact operations (what decides a float64 result, ``_decide``).
* Every radius is computed upward: each float operation on radii is followed by ``nextafter(.,
  +inf)`` (:func:`add_up`, :func:`mul_up`), which is above the exact result of that operation
  whatever it rounded to; lower ends use ``nextafter(., -inf)``.
* Library functions (``exp``, ``log``, ``tanh``, ...) are not correctly rounded: their results are
  taken within a relative :data:`LIBM_REL` (``2^-40``, about 4,000 ulps) plus :data:`LIBM_FLOOR`
  (``2^-1050``, far above a subnormal's ulp). glibc's table of known errors gives 1-2 ulps for these
  functions on x86-64, NumPy documents at most 4 ulps for its SIMD (SVML) float64 routines: the bound
  holds with three orders of magnitude to spare. Monotone functions are evaluated at the two ends of
  the interval (:func:`monotone`), so the result encloses the image of the whole interval.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["ETA", "LIBM_FLOOR", "LIBM_REL", "U", "Exact", "Interval", "NotCovered", "add", "add_up",
           "div", "ends", "from_ends", "mul", "mul_up", "rounding_error", "sqrt"]

#: float64's unit roundoff.
U = 2.0 ** -53
#: The smallest positive subnormal float64.
ETA = 2.0 ** -1074
#: The relative error admitted for a library function's result (see the module docstring).
LIBM_REL = 2.0 ** -40
#: The absolute error admitted for a library function's result on top of :data:`LIBM_REL`.
LIBM_FLOOR = 2.0 ** -1050
_SPLIT = 134217729.0  # 2^27 + 1: Veltkamp's splitting constant for float64
_SAFE_BIG = 2.0 ** 900  # TwoProduct is exact without overflow below this...
_SAFE_SMALL = 2.0 ** -900  # ...and without underflow for products above this


class NotCovered(Exception):
    """The program uses something the fast path does not evaluate: the Arb path takes it whole."""


@dataclasses.dataclass(frozen=True)
class Interval:
    """Float values: float64 arrays ``mid`` and ``rad`` of one shape (see the module docstring)."""

    mid: np.ndarray
    rad: np.ndarray

    @staticmethod
    def make(mid: Any, rad: Any, infinite: bool = False) -> Interval:
        """The interval of ``mid`` and ``rad``, with every element whose midpoint or radius is not
        finite made undecided; with ``infinite``, an infinite midpoint of radius 0 stays an exact
        infinity."""
        mid, rad = np.broadcast_arrays(np.asarray(mid, np.float64), np.asarray(rad, np.float64))
        ok = np.isfinite(mid) & np.isfinite(rad)
        if infinite:
            ok |= np.isinf(mid) & (rad == 0)
        if ok.all():
            return Interval(mid, rad)
        return Interval(np.where(ok, mid, np.nan), np.where(ok, rad, np.inf))

    @staticmethod
    def exact(values: Any) -> Interval:
        """Exact float64 values (NaN: undecided; an infinity: an exact infinity)."""
        mid = np.asarray(values, np.float64)
        return Interval.make(mid, np.zeros(mid.shape), infinite=True)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.mid.shape)

    @property
    def bad(self) -> np.ndarray:
        """Where the element is undecided."""
        return np.isnan(self.mid)

    def finite(self) -> Interval:
        """This interval with its exact infinities made undecided (for operations that do not carry
        them)."""
        inf = np.isinf(self.mid)
        if not inf.any():
            return self
        return Interval(np.where(inf, np.nan, self.mid), np.where(inf, np.inf, self.rad))

    def broadcast(self, shape: tuple[int, ...]) -> Interval:
        if self.shape == tuple(shape):
            return self
        return Interval(np.broadcast_to(self.mid, shape), np.broadcast_to(self.rad, shape))


@dataclasses.dataclass(frozen=True)
class Exact:
    """Integer and boolean values, exact as numpy computes them (the program's own integer arithmetic);
    ``unknown`` (or None: none) marks the elements that depend on an undecided comparison."""

    value: np.ndarray
    unknown: np.ndarray | None = None

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(np.shape(self.value))

    def mask(self) -> np.ndarray:
        """``unknown`` as a boolean array of the value's shape."""
        if self.unknown is None:
            return np.zeros(self.shape, dtype=bool)
        return np.broadcast_to(self.unknown, self.shape)

    def broadcast(self, shape: tuple[int, ...]) -> Exact:
        if self.shape == tuple(shape):
            return self
        unknown = None if self.unknown is None else np.broadcast_to(self.unknown, shape)
        return Exact(np.broadcast_to(self.value, shape), unknown)


Value = Interval | Exact


# ----------------------------------------------------------------------------------- directed steps
def up(x: Any) -> np.ndarray:
    """The next float above: at least the exact result of the operation that produced ``x``."""
    return np.nextafter(x, np.inf)


def down(x: Any) -> np.ndarray:
    """The next float below: at most the exact result of the operation that produced ``x``."""
    return np.nextafter(x, -np.inf)


def add_up(a: Any, b: Any) -> np.ndarray:
    """An upper bound of ``a + b`` for non-negative ``a``, ``b`` (0 stays 0: only 0 + 0 gives it)."""
    s = a + b
    return np.where(s == 0, 0.0, up(s))


def mul_up(a: Any, b: Any) -> np.ndarray:
    """An upper bound of ``a * b`` for non-negative ``a``, ``b``: exact 0 only for a zero factor, the
    smallest subnormal for a product that underflowed to 0 (NaN for ``inf * 0``: undecided)."""
    p = a * b
    return np.where(p == 0, np.where((a == 0) | (b == 0), 0.0, ETA), up(p))


def rounding_error(m: np.ndarray) -> np.ndarray:
    """A bound on ``|z - m|`` for ``m`` the correctly rounded value of a real ``z``: ``2^-53 |m|`` in
    the normal range, ``2^-1075`` below it; the product ``|m| 2^-53`` itself may round down by
    ``2^-1075`` when subnormal, hence the added ``2^-1074``."""
    return add_up(np.abs(m) * U, np.float64(ETA))


def relative_down(y: np.ndarray, rel: float, floor: float) -> np.ndarray:
    """A lower bound of the exact value of a result ``y`` known within ``rel |y| + floor``."""
    return down(down(y - np.abs(y) * rel) - floor)


def relative_up(y: np.ndarray, rel: float, floor: float) -> np.ndarray:
    """An upper bound of the exact value of a result ``y`` known within ``rel |y| + floor``."""
    return up(up(y + np.abs(y) * rel) + floor)


# ----------------------------------------------------------------------------------------- ends
def ends(x: Interval) -> tuple[np.ndarray, np.ndarray]:
    """Float64 bounds ``lo <= every point <= hi`` (the midpoint itself where the radius is 0)."""
    exact = x.rad == 0
    with np.errstate(invalid="ignore"):
        lo = np.where(exact, x.mid, down(x.mid - x.rad))
        hi = np.where(exact, x.mid, up(x.mid + x.rad))
    return lo, hi


def from_ends(lo: np.ndarray, hi: np.ndarray, infinite: bool = False) -> Interval:
    """The interval of the reals between float64 bounds ``lo <= hi`` (a point where they are equal)."""
    with np.errstate(invalid="ignore", over="ignore"):
        point = lo == hi
        mid = np.where(point, lo, 0.5 * lo + 0.5 * hi)
        rad = np.where(point, 0.0, np.maximum(up(hi - mid), up(mid - lo)))
    return Interval.make(mid, rad, infinite)


# ------------------------------------------------------------------------------- exactness tests
def _two_product_error(x: np.ndarray, y: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Dekker's TwoProduct: ``x * y - p`` exactly, for ``p = fl(x * y)`` where no overflow or
    underflow occurs (callers check the magnitudes)."""
    c = _SPLIT * x
    xh = c - (c - x)
    xl = x - xh
    c = _SPLIT * y
    yh = c - (c - y)
    yl = y - yh
    return ((xh * yh - p) + xh * yl + xl * yh) + xl * yl


def product_is(x: np.ndarray, y: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Where ``x * y == p`` exactly (False where that cannot be proven in float64)."""
    with np.errstate(all="ignore"):
        q = x * y
        safe = ((np.abs(x) <= _SAFE_BIG) & (np.abs(y) <= _SAFE_BIG) & (np.abs(q) >= _SAFE_SMALL)
                & np.isfinite(q))
        xs, ys, qs = np.where(safe, x, 1.0), np.where(safe, y, 1.0), np.where(safe, q, 1.0)
        err = _two_product_error(xs, ys, qs)  # x * y = q + err exactly where safe
        zero = ((x == 0) & np.isfinite(y)) | ((y == 0) & np.isfinite(x))
        return np.where(zero, p == 0, safe & (err == 0) & (q == p))


# ---------------------------------------------------------------------------------- arithmetic
def neg(x: Interval) -> Interval:
    return Interval(-x.mid, x.rad)


def add(a: Interval, b: Interval) -> Interval:
    """``a + b``: TwoSum's error term is the exact rounding error (0 where the sum is exact). An exact
    infinity plus anything finite is that infinity; ``inf - inf`` is undecided."""
    with np.errstate(all="ignore"):
        s = a.mid + b.mid
        bb = s - a.mid
        err = (a.mid - (s - bb)) + (b.mid - bb)
        rad = add_up(add_up(a.rad, b.rad), np.abs(err))
        infinite = np.isinf(a.mid) | np.isinf(b.mid)
        if infinite.any():
            rad = np.where(infinite, 0.0, rad)  # s is that infinity, or NaN (inf - inf, undecided)
    return Interval.make(s, rad, infinite=True)


def sub(a: Interval, b: Interval) -> Interval:
    return add(a, neg(b))


def mul(a: Interval, b: Interval) -> Interval:
    """``a * b``: ``|ma| rb + ra (|mb| + rb)`` plus the product's rounding error (0 where exact)."""
    a, b = a.finite(), b.finite()
    with np.errstate(all="ignore"):
        p = a.mid * b.mid
        err = np.where(product_is(a.mid, b.mid, p), 0.0, rounding_error(p))
        spread = add_up(mul_up(np.abs(a.mid), b.rad), mul_up(a.rad, add_up(np.abs(b.mid), b.rad)))
        return Interval.make(p, add_up(spread, err))


def div(a: Interval, b: Interval) -> Interval:
    """``a / b`` where ``b`` excludes 0 (else undecided): for ``x = ma + da``, ``y = mb + db``,
    ``|x/y - ma/mb| <= (ra + |ma/mb| rb) / (|mb| - rb)``, plus the quotient's rounding error."""
    a, b = a.finite(), b.finite()
    lo, hi = ends(b)
    with np.errstate(all="ignore"):
        mb = np.where((lo > 0) | (hi < 0), b.mid, np.nan)
        q = a.mid / mb
        exact = product_is(q, mb, a.mid)
        eq = np.where(exact, 0.0, rounding_error(q))
        den = np.where(b.rad == 0, np.abs(mb), down(np.abs(mb) - b.rad))
        num = add_up(a.rad, mul_up(add_up(np.abs(q), eq), b.rad))
        prop = np.where(num == 0, 0.0, up(num / den))
        return Interval.make(q, add_up(prop, eq))


def sqrt(x: Interval) -> Interval:
    """``sqrt`` where the interval is non-negative (else undecided); correctly rounded at the ends,
    exact where the square root of an exact operand squares back to it."""
    x = x.finite()
    lo, hi = ends(x)
    with np.errstate(all="ignore"):
        lo = np.where(lo >= 0, lo, np.nan)
        out = from_ends(down(np.sqrt(lo)), up(np.sqrt(hi)))
        s = np.sqrt(np.where(x.rad == 0, x.mid, np.nan))
        exact = (x.rad == 0) & product_is(s, s, x.mid) & ~np.isnan(lo)
    return Interval(np.where(exact, s, out.mid), np.where(exact, 0.0, out.rad))


def monotone(x: Interval, f: Callable[[np.ndarray], np.ndarray], *, increasing: bool = True,
             rel: float = LIBM_REL, floor: float = LIBM_FLOOR,
             domain: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None,
             at: tuple[float, float] | None = None) -> Interval:
    """A monotone function over the interval: ``f`` at both ends, each result taken within ``rel |y|
    + floor`` (``rel = floor = 0``: correctly rounded); undecided outside ``domain(lo, hi)``; ``at =
    (point, value)``: an exact operand equal to ``point`` gives ``value`` exactly."""
    x = x.finite()
    lo, hi = ends(x)
    with np.errstate(all="ignore"):
        if domain is not None:
            ok = domain(lo, hi)
            lo, hi = np.where(ok, lo, np.nan), np.where(ok, hi, np.nan)
        ylo, yhi = f(lo), f(hi)
        if not increasing:
            ylo, yhi = yhi, ylo
        if rel or floor:
            out = from_ends(relative_down(ylo, rel, floor), relative_up(yhi, rel, floor))
        else:
            out = from_ends(down(ylo), up(yhi))
    if at is None:
        return out
    point = (x.rad == 0) & (x.mid == at[0])
    if not point.any():
        return out
    return Interval(np.where(point, at[1], out.mid), np.where(point, 0.0, out.rad))


def hull(values: list[np.ndarray], rel: float, floor: float) -> Interval:
    """The interval between the least and the greatest of several results, each known within
    ``rel |y| + floor`` (a function's values at the corners where they bound its range)."""
    with np.errstate(all="ignore"):
        lo = np.minimum.reduce(values)
        hi = np.maximum.reduce(values)
        bad = np.logical_or.reduce([np.isnan(v) for v in values])
        out = from_ends(relative_down(lo, rel, floor), relative_up(hi, rel, floor))
    return Interval(np.where(bad, np.nan, out.mid), np.where(bad, np.inf, out.rad))


def extremum(a: Interval, b: Interval, maximum: bool) -> Interval:
    """``max``/``min``: continuous, so the hull of the ends; an operand that dominates is returned as is
    (so exact operands give exact results, and ``max(-inf, x)`` is ``x``)."""
    la, ha = ends(a)
    lb, hb = ends(b)
    if not maximum:
        la, ha, lb, hb = -ha, -la, -hb, -lb
    with np.errstate(invalid="ignore"):
        a_wins = la >= hb
        b_wins = (lb >= ha) & ~a_wins
        both = from_ends(np.maximum(la, lb), np.maximum(ha, hb), infinite=True)
    if not maximum:
        both = neg(both)
    mid = np.where(a_wins, a.mid, np.where(b_wins, b.mid, both.mid))
    rad = np.where(a_wins, a.rad, np.where(b_wins, b.rad, both.rad))
    bad = a.bad | b.bad
    return Interval.make(np.where(bad, np.nan, mid), rad, infinite=True)
