"""Complements of the regularised incomplete functions, and logs of the modified Bessel functions.

- ``incomplete_gamma_complement``: ``1 - gammainc(a, x) = gammaincc(a, x)`` and back, also under a
  log (``log(1 - P)``, ``log1p(-P)``): ``1 - P`` keeps ``ulp(1)`` of a ``P`` near 1, none of an upper
  tail (a chi² or gamma survival function written ``1 - cdf``: 30 bits at ``chi2(3)`` and x = 30 in
  float32), where JAX's ``igammac`` computes the tail itself. Exact over the reals for every
  argument, so both spellings are taken wherever they appear.
- ``log_gamma_tail``: ``log(gammaincc(a, x))`` (``chi2.logsf``, a Poisson's log-CDF) past the
  underflow of ``gammaincc`` (-inf as written from x = a + 13·sqrt(a) in float32), as the log of
  Legendre's continued fraction (``forms/_complements.log_gammaincc``); ``log(1 - gammainc)`` takes
  the same form through ``incomplete_gamma_complement``.
- ``log_gamma_lower``: ``log(gammainc(a, x))`` past the lower tail's underflow, as the log of the
  series ``sum x^n / ((a + 1)···(a + n))`` times its prefactor (``forms/_complements.log_gammainc``).
- ``betainc_complement``: ``1 - betainc(a, b, x) = betainc(b, a, 1 - x)`` (a Beta's, a Student-t's or
  a binomial's upper tail; under a log too), reflected where that is the more accurate
  (``forms/_complements.py``: ``x >= 1/2``, where ``1 - x`` is exact).
- ``log_bessel``: ``log(I0(x)) = log(i0e(x)) + |x|`` and ``log(I1(x)) = log(i1e(x)) + |x|`` (a von
  Mises log-normaliser, a Rice or noncentral chi² density): ``I0`` overflows at |x| = 89 in float32
  where its log is 86. Matched as JAX 0.12.1's calls (``jax.scipy.special.i0``/``i1``, custom_jvps
  recognised by ``_compat.library_function``) and as the product ``exp(|x|) · i0e(x)`` libraries write.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import jax.scipy.special as jss
from jax import lax

from ... import _compat
from ..engine._match import Match
from ..engine._pattern import any_of, const, fixed, op, param, var
from ..engine._rule import Rule
from ..forms import _complements as _fc

__all__ = ["BETAINC_COMPLEMENT", "COMPLEMENT_RULES", "INCOMPLETE_GAMMA_COMPLEMENT", "LOG_BESSEL",
           "LOG_GAMMA_LOWER", "LOG_GAMMA_TAIL"]

a, b, x = var("a"), var("b"), var("x")
ONE = const(1.0)


def _real(m: Match, *names: str) -> bool:
    return all(jnp.issubdtype(m.aval(n).dtype, jnp.floating) for n in names)


def _under_log(inner: Any) -> Any:
    """``1 - F``, ``log(1 - F)`` and ``log1p(-F)``, the log ones marked ``log=True``."""
    return any_of(op("sub", ONE, inner),
                  fixed(op("log", op("sub", ONE, inner)), log=True),
                  fixed(op("log1p", op("neg", inner)), log=True))


# ------------------------------------------------------------------------------- incomplete gamma
def _gamma_complement(a: Any, x: Any, upper: bool, log: bool = False) -> Any:
    """1 - gammainc(a, x) = gammaincc(a, x); 1 - gammaincc(a, x) = gammainc(a, x); their logs."""
    return _fc.gamma_complement(a, x, upper, log)


INCOMPLETE_GAMMA_COMPLEMENT = Rule(
    "incomplete_gamma_complement",
    _under_log(any_of(fixed(op("igamma", a, x), upper=False), fixed(op("igammac", a, x), upper=True))),
    _gamma_complement, where=lambda m: _real(m, "a", "x"),
    example=lambda a, x: 1 - jss.gammainc(a, x),
    example_shapes=((8,), (8,)), example_domain=(0.0, 100.0),
    # the builder knows no igamma: one program per alternative, in the pattern's order
    examples=(lambda a, x: 1 - jss.gammaincc(a, x),
              lambda a, x: jnp.log(1 - jss.gammainc(a, x)),
              lambda a, x: jnp.log(1 - jss.gammaincc(a, x)),
              lambda a, x: jnp.log1p(-jss.gammainc(a, x)),
              lambda a, x: jnp.log1p(-jss.gammaincc(a, x))),
)


def _log_gamma_tail(a: Any, x: Any) -> Any:
    """log(gammaincc(a, x)), also past gammaincc's underflow (a continued fraction's log there)."""
    return _fc.log_gammaincc(a, x)


LOG_GAMMA_TAIL = Rule(
    "log_gamma_tail", op("log", op("igammac", a, x)), _log_gamma_tail, where=lambda m: _real(m, "a", "x"),
    example=lambda a, x: jnp.log(jss.gammaincc(a, x)), example_shapes=((8,), (8,)),
    example_domain=(0.0, 1e3),
)


def _log_gamma_lower(a: Any, x: Any) -> Any:
    """log(gammainc(a, x)), also past gammainc's underflow (a series' log there)."""
    return _fc.log_gammainc(a, x)


#: ``log(gammainc(a, x))`` (a gamma or chi² log-CDF, a Poisson's log survival) far below the mean,
#: where P underflows (-inf as written: at a = 50, x = 1 in float32).
LOG_GAMMA_LOWER = Rule(
    "log_gamma_lower", op("log", op("igamma", a, x)), _log_gamma_lower, where=lambda m: _real(m, "a", "x"),
    example=lambda a, x: jnp.log(jss.gammainc(a, x)), example_shapes=((8,), (8,)),
    example_domain=(0.0, 1e3),
)


# ------------------------------------------------------------------------------- incomplete beta
def _beta_complement(a: Any, b: Any, x: Any, log: bool = False) -> Any:
    """1 - betainc(a, b, x) = betainc(b, a, 1 - x) (where 1 - x is exact); its log."""
    return _fc.betainc_complement(a, b, x, log)


BETAINC_COMPLEMENT = Rule(
    "betainc_complement", _under_log(op("regularized_incomplete_beta", a, b, x)), _beta_complement,
    where=lambda m: _real(m, "a", "b", "x"),
    # a and b as constants: JAX differentiates betainc in x only (the judged gradient is x's)
    example=lambda x: 1 - jss.betainc(0.5, 30.0, x), example_domain=(0.0, 1.0),
    examples=(lambda x: jnp.log(1 - jss.betainc(2.0, 0.25, x)),
              lambda x: jnp.log1p(-jss.betainc(40.0, 3.0, x))),
)


# ------------------------------------------------------------------------------------ Bessel logs
def _log_bessel(x: Any, order: int, **_: Any) -> Any:
    """log(I0(x)) = log(i0e(x)) + |x|; log(I1(x)) = log(i1e(x)) + |x|."""
    return _fc.log_i0(x) if order == 0 else _fc.log_i1(x)


def _library(name: str) -> Any:
    """A ``param`` for the body of JAX's call of ``name`` (jax 0.12.1; 0.10 inlines the product)."""

    def read(body: Any) -> bool | None:
        return True if _compat.library_function(body) == name else None

    # which releases make the call: tests excuse an alternative the running JAX cannot build
    read.library = (name, 1)  # type: ignore[attr-defined]
    return param("call", read=read)


LOG_BESSEL = Rule(
    "log_bessel",
    any_of(fixed(op("log", op("custom_jvp_call", x, call_jaxpr=_library("i0"))), order=0),
           fixed(op("log", op("mul", op("exp", op("abs", x)), op("bessel_i0e", x))), order=0),
           fixed(op("log", op("custom_jvp_call", x, call_jaxpr=_library("i1"))), order=1),
           fixed(op("log", op("mul", op("exp", op("abs", x)), op("bessel_i1e", x))), order=1)),
    _log_bessel, where=lambda m: _real(m, "x"),
    example=lambda x: jnp.log(jss.i0(x)), example_domain=(-1e3, 1e3),
    examples=(lambda x: jnp.log(jnp.exp(jnp.abs(x)) * lax.bessel_i0e(x)),
              lambda x: jnp.log(jss.i1(x)),
              lambda x: jnp.log(jnp.exp(jnp.abs(x)) * lax.bessel_i1e(x))),
)

#: In ``STABILITY`` before ``log1p`` (``log(1 - P)`` is the complement's log, not ``log1p(-P)``).
COMPLEMENT_RULES = (INCOMPLETE_GAMMA_COMPLEMENT, LOG_GAMMA_TAIL, LOG_GAMMA_LOWER, BETAINC_COMPLEMENT,
                    LOG_BESSEL)
