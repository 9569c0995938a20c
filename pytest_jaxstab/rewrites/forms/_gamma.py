"""Stable forms for differences of log-gamma and digamma values and the log beta function.

Statistics code writes normalisers as sums of ``lgamma`` terms (log binomial coefficients, the log
beta function, Student-t, negative binomial, beta-binomial). For large arguments each term is about
``x log x`` and they cancel: ``lgamma(1e7 + 0.5) - lgamma(1e7)`` is 8.06 but each term is 1.5e8, so
the difference keeps ~26 fewer bits than a float64 carries. The forms here never subtract two large
values:

- :func:`lgamma_difference` ``(x, a)`` = ``lgamma(x + a) - lgamma(x)`` through Stirling's series,
  written so the leading terms are ``(x - 1/2) log1p(a/x) + a (log(x + a) - 1)`` and the difference
  of the two Stirling corrections ``c(x + a) - c(x)`` is a multiple of ``a`` (its divided
  difference, by complete homogeneous polynomials in ``1/x`` and ``1/(x + a)``, all terms of one
  sign): accurate for ``|a|`` tiny against ``x`` and for ``|a|`` comparable to or far above it. For
  ``0 < x < T`` (or ``x + a``) it shifts both arguments up by the recurrence
  ``lgamma(y + 1) = lgamma(y) + log(y)`` (the shift's terms ``log1p(a / (x + j))`` have one sign);
  elsewhere (a pole or a negative argument, or a large ``a`` from a small ``x``, where nothing
  cancels) it is the plain difference.
- :func:`digamma_difference` ``(x, a)`` = ``digamma(x + a) - digamma(x)``: the asymptotic series
  the same way, the recurrence ``sum 1/(x + j)`` for a small static integer ``a``.
- :func:`betaln` ``(a, b)`` = ``lgamma(a) + lgamma(b) - lgamma(a + b)``: Stirling's form with
  ``log1p(b/a)`` and ``log1p(a/b)`` where both are large, ``lgamma(a) - lgamma_difference(b, a)``
  where one is.

``T`` is 5 for float32 and 10 for float64: the series' first omitted term, also in the divided
differences the differences need (``3 y^-18 / log y`` relative for ``lgamma``, ``530 y^-20`` for
``digamma``), is then below a tenth of the unit roundoff. Derivatives are the forms' own (automatic
differentiation through a cancellation-free form is itself cancellation-free, e.g. d/dx of
``lgamma_difference`` is ``digamma(x + a) - digamma(x)`` evaluated without subtracting the two
digammas); every branch is evaluated at a safe point where it is not taken, so no untaken branch
puts a NaN into a gradient.

Why the caller passes ``a`` and not ``x + a``: where ``a`` is known exactly (``n + 1`` against
``n - k + 1`` differ by exactly ``k``), subtracting the two rounded arguments would reintroduce the
error: in float64 ``fl(n + 1) - fl(n - k + 1)`` is off by up to ulp(n), which at n = 1e7 and k = 3
is a relative error of 6e-10 in ``a``, about 18 bits of the result. ``xa`` optionally gives the
program's own value of ``x + a`` for the plain difference, so where that branch is taken the result
is exactly what the program as written computes.
"""

from __future__ import annotations

import math
from typing import Any

import jax.numpy as jnp
from jax import lax

__all__ = ["betaln", "digamma_difference", "lgamma1p", "lgamma_difference", "log_beta_multivariate"]

# Stirling's correction c(y) = lgamma(y) - ((y - 1/2) log y - y + log(2 pi)/2) = sum B_k y^(1-2k)
_LGAMMA_B = (1 / 12, -1 / 360, 1 / 1260, -1 / 1680, 1 / 1188, -691 / 360360, 1 / 156,
             -3617 / 122400)
# digamma(y) = log y - 1/(2y) - sum A_k y^(-2k)
_DIGAMMA_A = (1 / 12, -1 / 120, 1 / 252, -1 / 240, 1 / 132, -691 / 32760, 1 / 12, -3617 / 8160,
              43867 / 14364)
_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


def _threshold(dtype: Any) -> float:
    return 5.0 if jnp.finfo(dtype).bits <= 32 else 10.0


def _float(*xs: Any) -> tuple[Any, ...]:
    dtype = jnp.result_type(*xs)
    if not jnp.issubdtype(dtype, jnp.floating):
        dtype = jnp.result_type(float)
    return tuple(jnp.asarray(x, dtype) for x in xs)


def _static_int(a: Any, limit: int) -> int | None:
    """``a`` as a Python int when it is a static integer 1 <= |a| <= limit, else None."""
    if isinstance(a, bool) or not isinstance(a, (int, float)):
        return None
    if a != int(a) or not 1 <= abs(int(a)) <= limit:
        return None
    return int(a)


def _h_sums(r: Any, s: Any, coeffs: tuple[float, ...], start: int) -> Any:
    """``sum_k coeffs[k] * h_{start + 2k}(r, s)``, h_m the complete homogeneous polynomial of degree
    m in r and s (``(s^(m+1) - r^(m+1)) / (s - r)`` without the division: all terms positive)."""
    h = jnp.ones_like(r)
    rp = jnp.ones_like(r)
    total = jnp.zeros_like(r)
    want = {start + 2 * k: c for k, c in enumerate(coeffs)}
    for m in range(max(want) + 1):
        if m:
            rp = rp * r
            h = s * h + rp
        if m in want:
            total = total + want[m] * h
    return total


def _log_ratio(x: Any, a: Any) -> Any:
    """log((x + a) / x) for x > 0, x + a > 0: log1p(a/x), or the log of the quotient where a/x is
    near -1 (there x + a is exact by Sterbenz's lemma and log1p would amplify the rounding of a/x)."""
    q = a / x
    far = q <= -0.5
    return jnp.where(far, jnp.log(jnp.where(far, x + a, 1.0) / x), jnp.log1p(jnp.where(far, 0.0, q)))


def _lgamma_series(x: Any, a: Any) -> Any:
    """lgamma(x + a) - lgamma(x) for x, x + a >= T (Stirling, nothing large cancels)."""
    y = x + a
    r, s = 1 / x, 1 / y
    dc = -a * r * s * _h_sums(r, s, _LGAMMA_B, 0)
    return (x - 0.5) * _log_ratio(x, a) + a * (jnp.log(y) - 1) + dc


def _digamma_series(x: Any, a: Any) -> Any:
    """digamma(x + a) - digamma(x) for x, x + a >= T (asymptotic series, one sign throughout)."""
    r, s = 1 / x, 1 / (x + a)
    return _log_ratio(x, a) + a * r * s * (0.5 + _h_sums(r, s, _DIGAMMA_A, 1))


def _difference(x: Any, a: Any, xa: Any, series: Any, shift_term: Any, single: Any,
                compare: bool) -> Any:
    t = _threshold(jnp.result_type(x))
    lo = jnp.minimum(x, x + a)
    big = lo >= t
    near = (lo > 0) & ~big & (jnp.abs(a) <= t)
    plain = ~(big | near)
    # below T, both arguments shifted up by m = ceil(T - lo) steps of the recurrence
    xn, an = jnp.where(near, x, 1.0), jnp.where(near, a, 0.0)
    m = jnp.ceil(t - jnp.minimum(xn, xn + an))
    acc = jnp.zeros_like(xn)
    for j in range(int(t)):
        acc = acc + jnp.where(j < m, shift_term(xn + j, an), 0.0)
    # one series for both (at a safe point where neither is taken)
    xs = jnp.where(big, x, jnp.where(near, xn + m, t))
    out_series = series(xs, jnp.where(big | near, a, 0.0)) + acc
    # the plain difference, on the program's own x + a where given: where nothing cancels, and (for
    # lgamma, ``compare``) below T where its terms are smaller than the shifted form's: near the
    # minimum of lgamma both forms cancel, the one with the smaller terms has the smaller rounding
    # error. (digamma's shifted form has terms of one sign: it never cancels.)
    xa = x + a if xa is None else xa
    direct = ~big
    fa, fx = single(jnp.where(direct, xa, 1.0)), single(jnp.where(direct, x, 1.0))
    if compare:
        plain = plain | (near & (jnp.abs(fa) + jnp.abs(fx) <= jnp.abs(out_series - acc)
                                 + jnp.abs(acc)))
    return jnp.where(plain, fa - fx, out_series)


def lgamma_difference(x: Any, a: Any, xa: Any = None) -> Any:
    """``lgamma(x + a) - lgamma(x)`` without the cancellation of two large values.

    Args:
      x: the argument of the subtracted term (any shape; broadcasts with ``a``).
      a: the exact difference of the two arguments (an array, or a Python number: a static integer
        1..4 gives ``sum log|x + j|``, exact for every ``x`` that is not a pole).
      xa: optionally the program's own value of ``x + a`` (used where the plain difference is taken,
        so that branch equals the program as written).

    Returns:
      ``log|Gamma(x + a)| - log|Gamma(x)|`` elementwise, accurate to a few ulps where either
      argument is large, also for ``|a|`` tiny or huge against ``x``; where both are small, within a
      few ulps of the result too (recurrence shift), except at poles and negative arguments, where it
      is the plain difference. Its derivative in ``x`` is ``digamma(x + a) - digamma(x)``, computed
      as stably.

    Example: ``lgamma_difference(jnp.float32(1e7), 0.5)`` is 8.059048; the plain difference of
    the two float32 ``gammaln`` values (1.5e8 each) is 0.
    """
    k = _static_int(a, 4)
    if k is not None:
        (x,) = _float(x)
        js = range(k) if k > 0 else range(-1, k - 1, -1)
        total = sum(jnp.log(jnp.abs(x + j)) for j in js)
        return total if k > 0 else -total
    x, a = _float(x, a)
    from jax.scipy.special import gammaln

    def shift(xj: Any, aj: Any) -> Any:
        return -_log_ratio(xj, aj)

    return _difference(x, a, xa, _lgamma_series, shift, gammaln, True)


def digamma_difference(x: Any, a: Any, xa: Any = None) -> Any:
    """``digamma(x + a) - digamma(x)`` without the cancellation of two close values.

    Args:
      x: the argument of the subtracted term.
      a: the exact difference of the arguments (a static integer 1..16 gives the recurrence
        ``sum_{j<a} 1 / (x + j)``, exact for every ``x`` that is not a pole).
      xa: optionally the program's own value of ``x + a`` (see :func:`lgamma_difference`).

    Returns:
      ``psi(x + a) - psi(x)`` elementwise, accurate to a few ulps where both arguments are positive
      (the asymptotic series from T on, the recurrence below it); the plain difference elsewhere.

    Example: ``digamma_difference(1e8, 1.0)`` is 1e-8 (float32's plain difference is 0).
    """
    k = _static_int(a, 16)
    if k is not None:
        (x,) = _float(x)
        if k > 0:
            return sum(1 / (x + j) for j in range(k))
        return -sum(1 / (x - j) for j in range(1, -k + 1))
    x, a = _float(x, a)

    def shift(xj: Any, aj: Any) -> Any:
        # not aj / (xj (xj + aj)): that product underflows for tiny arguments (x = 2e-36, x + a = 7e-29
        # in float32: inf where the difference is 5e35)
        return (1 / xj) * (aj / (xj + aj))

    return _difference(x, a, xa, _digamma_series, shift, lax.digamma, False)


def _stirling_c(y: Any) -> Any:
    """Stirling's correction c(y) = sum B_k y^(1-2k) (Horner in 1/y^2)."""
    r = 1 / y
    r2 = r * r
    total = jnp.zeros_like(r)
    for c in reversed(_LGAMMA_B):
        total = total * r2 + c
    return r * total


def betaln(a: Any, b: Any, ab: Any = None) -> Any:
    """The log beta function ``lgamma(a) + lgamma(b) - lgamma(a + b)`` for ``a, b > 0``.

    Args:
      a, b: positive arguments (any shapes that broadcast).
      ab: optionally the program's own value of ``a + b`` (used where both are small, so that branch
        equals the program as written).

    Returns:
      ``log B(a, b)``: where both are at least T, Stirling's form
      ``-(a - 1/2) log1p(b/a) - (b - 1/2) log1p(a/b) + log(2 pi)/2 - log(a + b)/2 + c(a) + c(b) -
      c(a + b)`` (no two large terms cancel); where one is, ``lgamma(small) -
      lgamma_difference(large, small)``; the plain sum where both are small or not positive.

    Example: ``betaln(1e6, 1e6)`` is -1386300.0034 (float64); the plain sum subtracts terms of
    1.3e7 and 2.7e7.
    """
    a, b = _float(a, b)
    from jax.scipy.special import gammaln

    t = _threshold(jnp.result_type(a))
    lo, hi = jnp.minimum(a, b), jnp.maximum(a, b)
    both = lo >= t
    one = (lo > 0) & ~both & (hi >= t)
    plain = ~(both | one)
    ab_ = a + b if ab is None else ab
    pa, pb = jnp.where(both, a, t), jnp.where(both, b, t)
    out_both = (-(pa - 0.5) * jnp.log1p(pb / pa) - (pb - 0.5) * jnp.log1p(pa / pb) + _HALF_LOG_2PI
                - 0.5 * jnp.log(pa + pb) + _stirling_c(pa) + _stirling_c(pb) - _stirling_c(pa + pb))
    sl, sh = jnp.where(one, lo, 1.0), jnp.where(one, hi, t)
    out_one = gammaln(sl) - lgamma_difference(sh, sl)
    qa, qb, qab = jnp.where(plain, a, 1.0), jnp.where(plain, b, 1.0), jnp.where(plain, ab_, 2.0)
    out_plain = gammaln(qa) + gammaln(qb) - gammaln(qab)
    return jnp.where(both, out_both, jnp.where(one, out_one, out_plain))


def log_beta_multivariate(alpha: Any, axes: tuple[int, ...]) -> Any:
    """The multivariate log beta function ``sum(lgamma(alpha)) - lgamma(sum(alpha))`` over ``axes``
    (a Dirichlet's log-normaliser), for rows of positive ``alpha``.

    Args:
      alpha: the concentrations.
      axes: the axes summed (the result has them removed, as ``jnp.sum`` without ``keepdims``).

    Returns:
      The telescoping sum ``sum_{i>=2} betaln(A_{i-1}, alpha_i)``, ``A_i = alpha_1 + ... + alpha_i``
      (each term by :func:`betaln`, so no two large values cancel; its derivative telescopes to
      ``digamma(alpha_j) - digamma(A_n)`` through the terms' own cancellation-free derivatives). A row
      with an element that is not positive and finite gets the written form.

    Example: at ``alpha = [1e6, 0.5, 2, 0.1]`` (float32) the written form subtracts terms of 1.3e7 for
    a result of -33.1 (15 bits lost); this form is within an ulp.
    """
    (alpha,) = _float(alpha)
    from jax.scipy.special import gammaln

    axes = tuple(sorted(ax % alpha.ndim for ax in axes))
    ok = jnp.all((alpha > 0) & jnp.isfinite(alpha), axis=axes, keepdims=True)
    good = jnp.where(ok, alpha, 1.0)  # each branch reads a safe input
    bad = jnp.where(ok, 1.0, alpha)
    written = jnp.sum(gammaln(bad), axis=axes) - gammaln(jnp.sum(bad, axis=axes))
    if not axes:
        return jnp.where(jnp.squeeze(ok, axes), 0.0, written)
    rest = [ax for ax in range(alpha.ndim) if ax not in axes]
    rows = jnp.transpose(good, rest + list(axes)).reshape([alpha.shape[ax] for ax in rest] + [-1])
    partial = jnp.cumsum(rows, axis=-1)
    stable = jnp.sum(betaln(partial[..., :-1], rows[..., 1:]), axis=-1)
    return jnp.where(jnp.squeeze(ok, axes), stable, written)


# (-1)^n zeta(n) / n for n = 2..40: lgamma(1 + k) = -gamma·k + sum_n c_n k^n (|k| < 1)
_LGAMMA1P = (
    0.8224670334241132, -0.40068563438653143, 0.27058080842778454, -0.20738555102867398,
    0.1695571769974082, -0.1440498967688461, 0.12550966952474304, -0.11133426586956469,
    0.1000994575127818, -0.09095401714582904, 0.083353840546109, -0.0769325164113522,
    0.07143294629536133, -0.06666870588242046, 0.06250095514121304, -0.058823978658684585,
    0.055555767627403614, -0.05263167937961666, 0.05000004769810169, -0.047619070330142226,
    0.04545455629320467, -0.04347826605304026, 0.04166666915034121, -0.04000000119214014,
    0.03846153903467518, -0.037037037312989324, 0.035714285847333355, -0.034482758684919304,
    0.03333333336437758, -0.03225806453115042, 0.03125000000727597, -0.030303030306558044,
    0.029411764707594344, -0.02857142857226011, 0.027777777778181998, -0.027027027027223673,
    0.02631578947377995, -0.025641025641072283, 0.025000000000022737)
_EULER_GAMMA = 0.5772156649015329
# |k| below this takes the series: its terms fall by 0.3 per power (0.3^40 < 1e-20) and its sum is
# within a factor 1.6 of its largest term (one sign alternation, no cancellation worth a bit).
SERIES_BELOW = 0.3


def lgamma1p(k: Any) -> Any:
    """``lgamma(1 + k)`` accurate near k = 0, where ``1 + k`` rounds and lgamma of it is 0.

    The value there is -gamma·k (about -5.8e-21 at k = 1e-20; ``gammaln(1 + k)`` gives 0): the Taylor
    series -gamma·k + sum_{n>=2} (-1)^n ζ(n) k^n / n for |k| < 0.3, ``gammaln(1 + k)`` beyond (where the
    rounding of ``1 + k`` costs at most an ulp or two of the result away from lgamma's zero at
    k = 1, near which the problem itself is ill-conditioned). Derivative: digamma(1 + k).
    """
    (k,) = _float(k)
    from jax.scipy.special import gammaln

    small = jnp.abs(k) < SERIES_BELOW
    ks = jnp.where(small, k, 0.0)
    acc = jnp.zeros_like(ks)
    for c in reversed(_LGAMMA1P):
        acc = c + ks * acc
    series = ks * (-_EULER_GAMMA + ks * acc)
    return jnp.where(small, series, gammaln(1 + jnp.where(small, 1.0, k)))
