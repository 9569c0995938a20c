"""Series candidates: truncated Laurent expansions of the original around 0 and around infinity.

For a function of one input, the coefficients ``a_k`` of ``f(x) = sum a_k x**k`` are computed from the
ORIGINAL program evaluated exactly (mpmath, complex arguments) on a circle around the expansion point,
by the Cauchy integral (trapezoidal rule, exponentially accurate for a function analytic in an annulus
around the point). The expansion is kept only if it matches ``f`` on the real axis near the point to
high relative accuracy (a branch point such as ``sqrt(x)`` at 0 fails this and yields nothing).

These are approximations, valid near their point only: the search labels them so, and offers them only
inside a regime (or wherever the samples show them no worse than the original), re-checked like every
other candidate.
"""

from __future__ import annotations

import mpmath

from ._expr import Term, const, evaluate_mp

__all__ = ["series_candidates"]

_POINTS = 48
_RADIUS = mpmath.mpf(1) / 16
_LOW, _HIGH = -4, 12  # orders of the coefficients computed
_TERMS = 6  # nonzero terms kept


def _coefficients(f: Term, at_infinity: bool) -> dict[int, mpmath.mpf] | None:
    with mpmath.workdps(40):
        values = []
        try:
            for j in range(_POINTS):
                z = _RADIUS * mpmath.expjpi(mpmath.mpf(2 * j) / _POINTS)
                values.append((z, evaluate_mp(f, [1 / z if at_infinity else z])))
        except (ValueError, TypeError, ZeroDivisionError, ArithmeticError):
            return None
        coeffs = {}
        for k in range(_LOW, _HIGH + 1):
            total = mpmath.fsum(v * z ** (-k) for z, v in values) / _POINTS
            if not isinstance(total, (mpmath.mpc, mpmath.mpf)) or not mpmath.isfinite(total):
                return None
            coeffs[k] = mpmath.re(total)
        scale = max(abs(c) for c in coeffs.values())
        if scale == 0:
            return None
        return {k: c for k, c in coeffs.items() if abs(c) > scale * mpmath.mpf(10) ** -25}


def _polynomial(coeffs: dict[int, mpmath.mpf], variable: Term) -> Term | None:
    orders = sorted(coeffs)[:_TERMS]
    if not orders:
        return None
    low, high = orders[0], orders[-1]
    horner: Term = const(float(coeffs.get(high, 0)))
    for k in range(high - 1, low - 1, -1):
        horner = ("add", const(float(coeffs.get(k, 0))), ("mul", variable, horner)) if k in coeffs else \
            ("mul", variable, horner)
    if low > 0:
        return ("mul", ("pow", variable, const(low)), horner) if low > 1 else ("mul", variable, horner)
    if low < 0:
        return ("div", horner, ("pow", variable, const(-low)) if low < -1 else variable)
    return horner


def _matches(f: Term, series: Term, at_infinity: bool) -> bool:
    with mpmath.workdps(40):
        # Close to the point the truncation error must be negligible; further out, merely small.
        for x, tol in ((_RADIUS / 64, -40), (-_RADIUS / 64, -40), (_RADIUS / 8, -16)):
            point = 1 / x if at_infinity else x
            try:
                exact = evaluate_mp(f, [mpmath.mpf(point)])
                approx = evaluate_mp(series, [mpmath.mpf(point)])
            except (ValueError, TypeError, ZeroDivisionError, ArithmeticError):
                return False
            if not isinstance(exact, mpmath.mpf) or not mpmath.isfinite(exact):
                return False
            if abs(approx - exact) > abs(exact) * mpmath.mpf(2) ** tol:
                return False
    return True


def series_candidates(original: Term) -> list[Term]:
    """Expansions of a one-input ``original`` around 0 and around infinity that check out (maybe none)."""
    out = []
    x: Term = ("var", 0)
    for at_infinity in (False, True):
        coeffs = _coefficients(original, at_infinity)
        if coeffs is None:
            continue
        series = _polynomial(coeffs, ("div", const(1.0), x) if at_infinity else x)
        if series is not None and _matches(original, series, at_infinity):
            out.append(series)
    return out
