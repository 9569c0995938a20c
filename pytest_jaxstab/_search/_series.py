"""Series candidates: truncated Laurent expansions of the original around 0 and around infinity.

For a function of one input, the coefficients ``a_k`` of ``f(x) = sum a_k x**k`` are computed from the
ORIGINAL program evaluated exactly (mpmath, complex arguments) on a circle around the expansion point,
by the Cauchy integral (trapezoidal rule, exponentially accurate for a function analytic in an annulus
around the point). The expansion is kept only if it matches ``f`` on the real axis near the point to
high relative accuracy (a branch point such as ``sqrt(x)`` at 0 fails this and yields nothing).

These are approximations, valid near their point only: the search labels them so, and offers them only
inside a regime (or wherever the samples show them no worse than the original), re-checked like every
other candidate.

Where no Laurent series fits, one with a logarithmic term is tried: ``f(x) - c log(x)`` for a few simple
``c`` (``(N + 1) log(N + 1) - N log(N) - 1`` is ``log(N) + 1/(2N) - 1/(6N**2) + ...`` at infinity; its
cancellation is in the ``1/N`` terms). :func:`subterm_series` expands every sub-term of one input of a
program of any number of inputs (of the sub-term local error points at: the error may concentrate in one
part of it): the rest is kept as written, and the regimes decide where the expansion serves.
"""

from __future__ import annotations

import mpmath

from ._expr import Term, const, evaluate_mp, is_array_program, replace, size, subterms, variables

__all__ = ["series_candidates", "subterm_series"]

_POINTS = 48
_RADIUS = mpmath.mpf(1) / 16
_LOW, _HIGH = -4, 12  # orders of the coefficients computed
_TERMS = 6  # nonzero terms kept
#: Coefficients of ``log(x)`` tried where no Laurent series fits.
_LOG_COEFFS = (1.0, -1.0, 0.5, -0.5, 2.0, -2.0)
#: Sub-terms :func:`subterm_series` expands at most (the largest first).
_SUBTERMS = 6


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


def _matches(f: Term, series: Term, at_infinity: bool, positive: bool = False) -> bool:
    with mpmath.workdps(40):
        # Close to the point the truncation error must be negligible; further out, merely small. A series
        # with a log term is real on the positive side only.
        for x, tol in ((_RADIUS / 64, -40), (-_RADIUS / 64, -40), (_RADIUS / 8, -16)):
            if positive and x < 0:
                continue
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
    """Expansions of a one-input ``original`` around 0 and around infinity that check out (maybe none):
    a Laurent series, else one plus ``c log(x)``."""
    out = []
    x: Term = ("var", 0)
    for at_infinity in (False, True):
        found = _expansion(original, x, at_infinity, None)
        for c in () if found is not None else _LOG_COEFFS:
            found = _expansion(original, x, at_infinity, c)
            if found is not None:
                break
        if found is not None:
            out.append(found)
    return out


def _expansion(original: Term, x: Term, at_infinity: bool, log_coeff: float | None) -> Term | None:
    log_term: Term = ("mul", const(log_coeff), ("log", x)) if log_coeff is not None else const(0.0)
    rest = ("sub", original, log_term) if log_coeff is not None else original
    coeffs = _coefficients(rest, at_infinity)
    if coeffs is None:
        return None
    series = _polynomial(coeffs, ("div", const(1.0), x) if at_infinity else x)
    if series is None:
        return None
    if log_coeff is not None:
        series = ("add", log_term, series)
    return series if _matches(original, series, at_infinity, log_coeff is not None) else None


def _renamed(term: Term, mapping: dict[int, int]) -> Term:
    if term[0] == "var":
        return ("var", mapping[term[1]])
    if term[0] == "const":
        return term
    return (term[0], *(_renamed(c, mapping) for c in term[1:]))


def subterm_series(program: Term) -> list[Term]:
    """``program`` with one sub-term of a single input that cancels (an addition or subtraction inside)
    replaced by its series at 0 or infinity: at most :data:`_SUBTERMS` sub-terms tried, the largest first;
    the whole program too when it reads one input."""
    # A sub-term with a cancellation of its own: an addition or subtraction below an operator (x + 1
    # alone is its own series).
    subs = [t for t in dict.fromkeys(subterms(program)) if t[0] not in ("var", "const")
            and len(variables(t)) == 1 and size(t) >= 3 and any(u[0] in ("add", "sub") for u in subterms(t))
            and not is_array_program(t)]
    subs.sort(key=lambda t: -len(subterms(t)))
    out = []
    for sub in subs[:_SUBTERMS]:
        (i,) = variables(sub)
        for series in series_candidates(_renamed(sub, {i: 0})):
            out.append(replace(program, sub, _renamed(series, {0: i})))
    return out
