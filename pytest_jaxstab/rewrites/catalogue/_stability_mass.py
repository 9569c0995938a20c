"""The log of a distribution's mass between two bounds: ``log(Φ(b) - Φ(a))``, ``log(sig(b) - sig(a))``.

Split from ``_stability_special`` (whose spellings of Φ these rules read) when issue 47 added the
signed spellings. A two-sided truncation written for either orientation of its bounds multiplies
the difference by a sign: numpyro's ``TwoSidedTruncatedDistribution`` (before its PR #1581) wrote
``log(sign * (cdf(high') - cdf(low')))`` with ``sign = where(loc >= low, 1.0, -1.0)``, the bounds
reflected about ``loc`` where the sign is -1. The mass is then ``Φ(hi) - Φ(lo)`` with the bounds
ordered by the sign, and the stable forms apply to that:

- a constant sign (a literal ±1, or folded from constants by ``engine/_fold``: the ``where`` on
  closed-over numbers is exactly 1.0) orders the bounds statically;
- a sign selected between ±1 by a traced predicate orders them per element, ``lo = where(s > 0, a,
  b)``, ``hi = where(s > 0, b, a)``: one evaluation of the form, no branch holding a negative mass;
- ``log(-(Φ(b) - Φ(a)))`` is the sign -1.

Each identity holds over the reals wherever the program's value is defined (a sign other than ±1 is
not matched).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from ..engine._match import Graph, Match
from ..engine._pattern import any_of, const, fixed, op, var
from ..engine._rule import Rule
from ..forms import _mass as _forms_mass
from ._stability_special import (
    _ERF,
    _F32,
    _F64,
    _R2,
    ONE,
    _mark_library,
    _phi_forms,
    _scale_error,
    _signed,
    _special_gate,
)

__all__ = ["LOG_LOGISTIC_MASS", "LOG_NORMAL_MASS", "MASS_RULES"]


def _example(f: Any, shapes: Any = ((8,),), domain: Any = None) -> dict[str, Any]:
    return {"example": f, "example_shapes": shapes, "example_domain": domain}


# Mixed-precision spelling (x64 code: a float64 value over a float32 scale times √2): the scale's
# product is float32, widened against the float64 numerator. `jst.verify_rule` cannot build it from
# the pattern (it types every variable alike), so it is the rule's own example.
_MIXED_MASS = ((lambda a, b, s: jnp.log(0.5 * (1 + _ERF(-b / _R2(s))) - 0.5 * (1 + _ERF(-a / _R2(s)))),
                (_F64, _F64, _F32), (-40.0, 40.0)),)


def _mass_gate(g: Graph, i: int) -> bool:
    """``_special_gate`` two steps deeper: ``log((1 - ndtr(a)) - (1 - ndtr(b)))`` reads erfc six steps
    down, and a sign's product one more."""
    return _special_gate(g, i, 7)


# ------------------------------------------------------------------------------------- the sign
def _unit(v: float) -> bool:
    return v in (1.0, -1.0)


_PRED = var("sc", where=lambda a: a.dtype == jnp.bool_)
#: ±1 as a constant (``sgn``), or selected between two of them by a traced predicate ``sc``
#: (``st`` where it holds, ``sf`` where it does not): ``jnp.where``'s call or a bare select.
#: The sign is usually shared (numpyro reflects the bounds with it too): recomputed from its captures.
_SIGN = any_of(
    const(_unit, name="sgn"),
    op(("jit", "pjit"), _PRED, const(_unit, name="st"), const(_unit, name="sf"), params={"name": "_where"},
       recompute=True),
    op("select_n", _PRED, const(_unit, name="sf"), const(_unit, name="st"), recompute=True),
)


def _signed_log(diff: Any) -> Any:
    """``log(diff)``, ``log(s·diff)`` and ``log(-diff)`` for a sign ``s`` of :data:`_SIGN`."""
    return any_of(op("log", diff), op("log", op("mul", _SIGN, diff)),
                  fixed(op("log", op("neg", diff)), sgn=-1.0))


def _ordered(a: Any, b: Any, caps: dict[str, Any]) -> tuple[Any, Any, bool]:
    """``(lo, hi, swapped)``: the bounds with ``sign·(F(b) - F(a)) = F(hi) - F(lo)``; ``swapped`` is
    True where a constant sign -1 exchanged them (a traced sign orders them per element)."""
    if "sc" in caps and caps["st"] != caps["sf"]:
        keep = caps["sc"] if caps["st"] > 0 else jnp.logical_not(caps["sc"])
        return jnp.where(keep, a, b), jnp.where(keep, b, a), False
    sign = caps.get("sgn", caps.get("st", 1.0))
    return (b, a, True) if sign < 0 else (a, b, False)


# ---------------------------------------------------------------------------------- log_normal_mass
def _log_normal_mass(**caps: Any) -> Any:
    """log(Φ(b) - Φ(a)) = log-diff-exp of log_ndtr(b), log_ndtr(a) for b <= 0, mirrored to
    log(Φ(-a) - Φ(-b)) for a >= 0, log1p(-(Φ(a) + Φ(-b))) across 0 (the truncated normal's log
    normaliser, numpyro's ``TruncatedNormal``: the written difference cancels to 0 from 5.4 / 8.3
    sigma in float32 / float64 and both terms underflow below -13 / -38 in the lower tail).
    Either Φ in any spelling of ``_stability_special``, its complement ``1 - Φ`` included;
    log(s·(Φ(b) - Φ(a))) for a sign s = ±1 (constant or selected) = log(Φ(hi) - Φ(lo)), the bounds
    ordered by s."""
    a, ra = _signed(caps, "ap", "aq")
    b, rb = _signed(caps, "bp", "bq")
    lo, hi, swapped = _ordered(a, b, caps)
    if swapped:
        ra, rb = rb, ra
    return _forms_mass.log_ndtr_diff(lo, hi, ra, rb)


def _phi_tagged(tag: str) -> Any:
    """Φ(u) in every spelling, or its complement, with captures tagged ``{tag}p`` / ``{tag}q``."""
    return any_of(_phi_forms(f"{tag}p", f"{tag}q"), op("sub", ONE, _phi_forms(f"{tag}q", f"{tag}p")))


def _rel(caps: dict[str, Any], p: str, q: str) -> float:
    """The scale error of the Φ tagged ``p`` (Φ(u)) or ``q`` (Φ(-u)) (``_stability_special._signed``)."""
    return _scale_error(caps, p if (f"{p}x" in caps or f"{p}n" in caps) else q)


def _mass_where(m: Match) -> bool:
    """``_mark_library``'s marks; a traced sign only where both Φ carry the same scale error (the
    bounds it exchanges per element then need no per-element error)."""
    _mark_library(m)
    caps = m.captures
    if "sc" in caps and caps["st"] != caps["sf"]:
        return _rel(caps, "ap", "aq") == _rel(caps, "bp", "bq")
    return True


def _numpyro_sign(a: Any, b: Any, loc: Any) -> Any:
    """numpyro's two-sided truncation before its PR #1581: ``log(sign * (Φ(b') - Φ(a')))``, the sign a
    ``where`` of ±1 on a traced location and the bounds reflected about it where it is -1."""
    sign = jnp.where(loc >= a, 1.0, -1.0)
    lo, hi = loc - sign * (loc - a), loc - sign * (loc - b)
    return jnp.log(sign * (jax.scipy.special.ndtr(hi) - jax.scipy.special.ndtr(lo)))


def _selected_sign(c: Any, like: Any) -> Any:
    """±1 selected by ``c > 0`` with ``lax.select`` (a bare ``select_n``), shaped like ``like``."""
    one = jnp.ones_like(like)
    return jax.lax.select(c > 0, one, -one)


_NDTR = jax.scipy.special.ndtr
_THREE = ((8,), (8,), (8,))
_SIGNED_NDTR = (
    (_numpyro_sign, _THREE, (-40.0, 40.0)),
    (lambda a, b, c: jnp.log(_selected_sign(c, a) * (_NDTR(b) - _NDTR(a))), _THREE, (-40.0, 40.0)),
)

LOG_NORMAL_MASS = Rule(
    "log_normal_mass", _signed_log(op("sub", _phi_tagged("b"), _phi_tagged("a"))), _log_normal_mass,
    gate=_mass_gate, where=_mass_where,
    examples=(*_MIXED_MASS, *_SIGNED_NDTR),
    **_example(lambda a, b: jnp.log(jax.scipy.special.ndtr(b) - jax.scipy.special.ndtr(a)),
               shapes=((8,), (8,)), domain=(-40.0, 40.0)),
)


# ------------------------------------------------------------------------------- log_logistic_mass
def _log_logistic_mass(a: Any, b: Any, **caps: Any) -> Any:
    """log(sig(b) - sig(a)) = log sig(b) + log sig(-a) + log(1 - e^-(b - a)) (the logistic distribution's
    mass between two bounds: ``jax.scipy.stats.logistic.cdf``, ``jax.nn.sigmoid``, the difference
    is 0 as written past 17 / 37 in float32 / float64). NaN where b < a, as written. With a sign
    s = ±1, log(s·(sig(b) - sig(a))) = log(sig(hi) - sig(lo)), the bounds ordered by s."""
    lo, hi, _ = _ordered(a, b, caps)
    return _forms_mass.log_sigmoid_diff(lo, hi)


_SIG_B, _SIG_A = op("logistic", var("b"), recompute=True), op("logistic", var("a"), recompute=True)
_SIG = jax.nn.sigmoid
LOG_LOGISTIC_MASS = Rule(
    "log_logistic_mass", _signed_log(op("sub", _SIG_B, _SIG_A)), _log_logistic_mass,
    examples=(
        (lambda a, b, c: jnp.log(jnp.where(c > 0, 1.0, -1.0) * (_SIG(b) - _SIG(a))), ((8,), (8,), (8,)),
         (-100.0, 100.0)),
        (lambda a, b, c: jnp.log(_selected_sign(c, a) * (_SIG(b) - _SIG(a))), ((8,), (8,), (8,)),
         (-100.0, 100.0)),
    ),
    **_example(lambda a, b: jnp.log(jax.nn.sigmoid(b) - jax.nn.sigmoid(a)),
               shapes=((8,), (8,)), domain=(-100.0, 100.0)),
)

#: The rules of this module, in the order the catalogue tries them (before ``SPECIAL_RULES``).
MASS_RULES: tuple[Rule, ...] = (LOG_NORMAL_MASS, LOG_LOGISTIC_MASS)
