"""Inverse-CDF draws of a normal between two bounds: ``Φ^-1(Φ(l) + u·(Φ(h) - Φ(l)))``.

Truncated-normal samplers (jax.random.truncated_normal before its fix, numpyro's ``TruncatedNormal``
icdf before its reflection, hand-written ones) interpolate between the CDF values of the bounds and
invert:

- erf / erf_inv: ``a = erf(l/√2)``, ``b = erf(h/√2)``, ``x = √2·erf_inv(a + u·(b - a))`` (jax wrote the
  interpolation as ``jax.random.uniform(minval=a, maxval=b)``: ``max(a, u·(b - a) + a)``);
- ndtr / ndtri: ``x = ndtri(Φ(l) + u·(Φ(h) - Φ(l)))``, Φ in any spelling ``_stability_special`` reads
  (``ndtr``, ``norm.cdf``, ``0.5·(1 + erf(x/√2))``, ``erfc(-x/√2)/2``, ...);

each interpolation also as ``(1 - u)·a + u·b``. With both bounds in the upper tail erf saturates: the
interpolated value rounds to 1 and the draw is inf or has no correct bit (float32, ``l = 5``: 16 bits
lost; ``l = 8``: inf); in the lower tail ``(1 + erf)/2`` cancels. The replacement
(``forms/_sampling.normal_interval_quantile``) forms the tail mass that does not cancel, the
complement ``q = (1 - u)·Q(l) + u·Q(h)`` in the upper tail (``x = -ndtri(q)``: ``√2·erfinv(1 - t) =
-ndtri(t/2)``), its mirror ``p`` in the lower one, and keeps the erf interpolation across 0, where it
is accurate. The √2 constants are read as ``_stability_special`` reads them (a rounded one means its
exact value: ``rel``), a JAX-inlined ``ndtr`` means Φ itself.

A plain ``erf_inv`` (or ``ndtri``) of a value that is not such an interpolation is not matched.
"""

from __future__ import annotations

import dataclasses
import decimal
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.scipy.special import ndtr, ndtri

from ..engine._match import Graph, Match
from ..engine._pattern import AnyOf, Op, any_of, const, fixed, op, var
from ..engine._rule import Rule
from ..forms import _sampling as _forms_sampling
from ._stability_special import (
    ONE,
    _is_ndtri,
    _library_ndtr,
    _library_ndtr_call,
    _mark_library,
    _near,
    _scale_error,
    _special_gate,
)

__all__ = ["NORMAL_INTERVAL_QUANTILE", "SAMPLING_RULES"]

_SQRT2 = math.sqrt(2.0)


def _named(pat: Any, name: str) -> Any:
    """``pat`` with every top-level alternative named ``name``: a shared sub-term (the bound's CDF read
    twice by ``a + u·(b - a)``) may be any of a family's spellings, each the same equation."""
    if isinstance(pat, AnyOf):
        return AnyOf(tuple(_named(alt, name) for alt in pat.alternatives))
    assert isinstance(pat, Op)
    return dataclasses.replace(pat, name=name)


_U = var("u")
_HALF = const(0.5)


def _sqrt2(target: float, tag: str) -> Any:
    """√2 or 1/√2 as a constant (a literal, or closed over) or as a traced ``jnp.sqrt``: the two ways
    a sampler writes it (``_stability_special._constant`` also reads a converted ``sqrt``, which
    only x64 code makes; each alternative costs the soundness tier a program). Captured as
    ``{tag}k`` / ``{tag}r`` for ``_stability_special._scale_error``."""
    # a traced √2 is usually one value read by both bounds and the output: one shared sub-term (named
    # by its value, so each use is the same equation), recomputed where the program reads it elsewhere
    shared = "sqrt2" if target > 1 else "inv_sqrt2"
    return any_of(const(_near(target), name=f"{tag}k"),
                  op("sqrt", const(_near(target * target), name=f"{tag}r"), name=shared, recompute=True))


def _erf_of(tag: str, literal: bool = False) -> Any:
    """erf(t/√2) with t captured as ``{tag}x``: ``t / √2`` or ``t * (1/√2)`` (``literal``: only
    jax.random.truncated_normal's ``t / np.sqrt(2)``, a constant)."""
    t = var(f"{tag}x")
    if literal:
        return op("erf", op("div", t, const(_near(_SQRT2), name=f"{tag}dk")))
    return op("erf", any_of(op("div", t, _sqrt2(_SQRT2, f"{tag}d")),
                            op("mul", t, _sqrt2(1 / _SQRT2, f"{tag}m"))))


def _phi_of(tag: str) -> Any:
    """Φ(t): JAX's ``ndtr`` (0.12.1's call, or inlined by 0.10 to 0.12.0: ``_stability_special``'s
    patterns, tagged ``{tag}p``) or ``0.5·(1 + erf(t/√2))``."""
    p = f"{tag}p"
    return any_of(_library_ndtr_call(p), _library_ndtr(p), op("mul", _HALF, op("add", ONE, _erf_of(p))))


def _lerp(a: Any, b: Any) -> Any:
    """``a + u·(b - a)``, ``a`` a named pattern (the same equation at each use)."""
    return op("add", a, op("mul", _U, op("sub", b, a)))


def _convex(a: Any, b: Any) -> Any:
    """``(1 - u)·a + u·b``."""
    return op("add", op("mul", op("sub", ONE, _U), a), op("mul", _U, b))


# the erf pair: √2·erf_inv(v) with v between erf(l/√2) and erf(h/√2) (jax.random.uniform's
# ``max(a, u·(b - a) + a)`` with jax's own literal √2: ``clamp``); the output's √2 tagged "om"
_ERF_A = _named(_erf_of("a"), "cdf_a")
_ERF_A_JAX = _named(_erf_of("a", literal=True), "cdf_a")
_ERF_V = any_of(_lerp(_ERF_A, _erf_of("b")), _convex(_ERF_A, _erf_of("b")),
                fixed(op("max", _ERF_A_JAX, _lerp(_ERF_A_JAX, _erf_of("b", literal=True))), clamp=True))
_ERF_PAIR = op("mul", _sqrt2(_SQRT2, "om"), op("erf_inv", _ERF_V))

# the ndtr pair: ndtri(p) with p between Φ(l) and Φ(h) (JAX's ndtri: a custom_jvp of ``_ndtri``)
_PHI_A = _named(_phi_of("a"), "cdf_a")
_PHI_PAIR = op("custom_jvp_call", any_of(_lerp(_PHI_A, _phi_of("b")), _convex(_PHI_A, _phi_of("b"))),
               call_jaxpr=_is_ndtri)


def _output_error(caps: dict[str, Any]) -> float:
    """``rel`` with the program's output factor = (1 + rel)·√2 exactly (0 for the ndtri pair and a
    traced ``jnp.sqrt(2.0)``; float32's √2 is 1 + 2.4e-8 of it)."""
    with decimal.localcontext() as ctx:
        ctx.prec = 40
        root2 = decimal.Decimal(2).sqrt()
        k, r = caps.get("omk"), caps.get("omr")
        if k is not None:
            return float(decimal.Decimal(k) / root2 - 1)
        if r is not None:
            return float(decimal.Decimal(r).sqrt() / root2 - 1)
    return 0.0


def _bound(caps: dict[str, Any], tag: str) -> tuple[Any, float]:
    """``(bound, rel)`` of the CDF tagged ``tag``: an erf's argument ``t/√2`` (``erf(t·(1 + rel)/√2)``) or
    a Φ spelling (``Φ(t·(1 + rel))``, ``_stability_special._signed``)."""
    if f"{tag}x" in caps:
        return caps[f"{tag}x"], _scale_error(caps, tag)
    return caps[f"{tag}px"], _scale_error(caps, f"{tag}p")


def _normal_interval_quantile(u: Any, clamp: bool = False, **caps: Any) -> Any:
    """√2·erf_inv(a + u·(b - a)) (a = erf(l/√2), b = erf(h/√2)) = ndtri(Φ(l) + u·(Φ(h) - Φ(l))) =
    Φ^-1((1 - u)·Φ(l) + u·Φ(h)), formed from the tail that does not cancel: ``-ndtri((1 - u)·Q(l) +
    u·Q(h))`` in the upper tail (Q = 1 - Φ from erfc: √2·erfinv(1 - t) = -ndtri(t/2)), ``ndtri`` of
    the lower tail's own masses, the erf interpolation across 0. A truncated normal's inverse-CDF
    draw (jax.random.truncated_normal before its fix: inf from l = 8 in float32)."""
    lo, rel_lo = _bound(caps, "a")
    hi, rel_hi = _bound(caps, "b")
    return _forms_sampling.normal_interval_quantile(u, lo, hi, rel_lo, rel_hi, _output_error(caps), clamp)


def _gate(g: Graph, i: int) -> bool:
    """``_special_gate`` two steps deeper: ``ndtri((1 - u)·Φ(l) + ...)`` with JAX's inlined ``ndtr``
    reads its erf six steps down (add, mul, mul, select_n, select_n, erfc)."""
    return _special_gate(g, i, 7)


def _real(m: Match) -> bool:
    """Floating operands only (``_mark_library`` marks JAX's inlined ``ndtr``)."""
    _mark_library(m)
    return jnp.issubdtype(m.aval("u").dtype, jnp.floating)


# ------------------------------------------------------------------------------------- examples
_F32 = np.float32(_SQRT2)  # jax.random.truncated_normal's ``np.array(np.sqrt(2), dtype)``


def _jax_truncated(u: Any, lower: Any, upper: Any) -> Any:
    """jax.random.truncated_normal before its fix, from its uniform draw on: erf of the bounds over a
    float32 √2, ``uniform(minval=a, maxval=b)``'s clamp, √2·erf_inv."""
    a, b = lax.erf(lower / _F32), lax.erf(upper / _F32)
    return _F32 * lax.erf_inv(lax.max(a, u * (b - a) + a))


def _ndtr_icdf(u: Any, lower: Any, upper: Any) -> Any:
    """A normal's icdf at the interpolated CDF (numpyro's ``TruncatedNormal`` spelled with ndtr/ndtri)."""
    a = ndtr(lower)
    return ndtri(a + u * (ndtr(upper) - a))


def _draw(u: Any, lo: Any, hi: Any) -> Any:
    """The rule's example: a hand-written erf draw from ``w = u²/(1 + u²)`` in [0, 1) (a uniform
    draw's range, so that every input of the example domain is a draw whose value and derivatives
    exist; the pattern's own programs read ``u`` unconstrained)."""
    w = u * u / (1 + u * u)
    s = jnp.sqrt(2.0)
    a = jax.scipy.special.erf(lo / s)
    return s * lax.erf_inv(a + w * (jax.scipy.special.erf(hi / s) - a))


_THREE = ((8,), (8,), (8,))
NORMAL_INTERVAL_QUANTILE = Rule(
    "normal_interval_quantile", any_of(_ERF_PAIR, _PHI_PAIR), _normal_interval_quantile,
    gate=_gate, where=_real,
    examples=((_jax_truncated, _THREE, (-40.0, 40.0)), (_ndtr_icdf, _THREE, (-40.0, 40.0))),
    example=_draw, example_shapes=_THREE, example_domain=(-40.0, 40.0),
)

#: In ``STABILITY`` before ``SPECIAL_RULES``: ``normal_quantile`` and ``normal_cdf`` would otherwise
#: take the inverse and the bounds' CDFs apart.
SAMPLING_RULES: tuple[Rule, ...] = (NORMAL_INTERVAL_QUANTILE,)
