"""One sampler for the search and its re-check: valid-output points, uniform over float bit patterns.

Herbie (and Rival, its sampler) draws each input uniformly over the bit patterns of the float type that
lie inside the precondition, and keeps a point only where the exact output is a finite value; it draws
again until it has as many such points as it asked for. ``jst.improve`` does the same, for the samples
that judge candidates in the search AND for the fresh samples of the re-check, so both sets are draws of
one distribution and a candidate's figures on one predict its figures on the other (issue 36: with
Hypothesis's draws for the search, a quarter of them special values and float64's low mantissa bits
left to Hypothesis, ``cbrt(x + 1) - cbrt(x)`` was judged on inputs where ``x + 1`` is exact).

Uniform over bit patterns is uniform over ordinals (``_dtypes.to_ordinal``): every binade of the domain
gets the same share, as in Herbie. A quarter of the points (:data:`BY_VALUE_SHARE`, a stratum of its
own in both sets) is drawn uniformly over the domain's values instead, where a bounded domain's large
magnitudes are, which bit-uniform points rarely reach. A domain's predicate (``Domain(where=...)``)
filters the draws; points where the oracle is uncertain, the exact result is not real (NaN), or it
overflows the dtype are drawn again. For array programs a point is a whole example (each element drawn
the same way), kept when every element of the exact output is finite.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._dtypes import dtype_info, from_ordinal
from ..strategies._domain import ResolvedDomain, per_argument_domains
from ._expr import Term
from ._judge import Samples

__all__ = ["BY_VALUE_SHARE", "RECHECK_POINTS", "domains", "sample", "strata"]

#: Valid points of the re-check (scalar programs; at least the search's count). The never-worse rule is
#: decided on them, so they must find a bad region where an independent bit-uniform sample would: a
#: region holding 1% of the valid bit patterns is missed by 512 points with probability 0.99**512 < 0.6%
#: (by 256, Herbie's search count: 7.6%); a paired mean over 512 points has a standard error of
#: sd / 22.6 (about 0.4 bits where the per-point differences spread over 10 bits).
RECHECK_POINTS = 512
#: Share of the points drawn uniformly over the domain's VALUES rather than its bit patterns, in the search
#: and in the re-check alike. Bit-uniform points put one binade's share on each binade: over
#: ``(-30, 2.5)`` in float32 fewer than 1% have ``|z| > 10``, where ``log(erfc(-z / sqrt 2) / 2)``
#: underflows, so a search on them alone never sees the loss a user's data there shows. A quarter is
#: enough to see it (25 of the search's 100 points) and leaves three quarters to Herbie's measure; the
#: never-worse rule holds on each stratum apart (``_pipeline``).
BY_VALUE_SHARE = 0.25
#: Rounds of drawing again for the points that were not valid, and how many draws one round may make
#: per point still wanted (a domain where most outputs are undefined, b*b < 4*a*c for a quadratic root,
#: needs a few rounds; one where nearly none is defined ends with the points it has).
_ROUNDS = 6
_MAX_DRAWS_PER_POINT = 16


def domains(dtype: np.dtype[Any], domain: Any, count: int) -> list[ResolvedDomain]:
    """The ``domain=`` argument, one resolved domain per input (raises ArgumentError for a bad one)."""
    info = dtype_info(dtype)
    return [d.resolve(info) for d in per_argument_domains(domain, count)]


def _draw(rng: np.random.Generator, dom: ResolvedDomain, shape: tuple[int, ...], by_value: bool
          ) -> tuple[np.ndarray, np.ndarray]:
    """Values uniform over the domain's bit patterns (``by_value``: over its values), and which pass its
    predicate (per point: all elements of an example)."""
    if by_value:
        lo, hi = (float(v) for v in from_ordinal(np.array([dom.lo_ord, dom.hi_ord]), dom.info.dtype))
        u = rng.random(shape)  # lo (1 - u) + hi u: no overflow where hi - lo would be
        values = np.clip((lo * (1.0 - u) + hi * u).astype(dom.info.dtype), lo, hi).astype(dom.info.dtype)
    else:
        ords = rng.integers(dom.lo_ord, dom.hi_ord, size=shape, endpoint=True, dtype=np.int64)
        values = np.asarray(from_ordinal(ords, dom.info.dtype)).reshape(shape)
    if dom.where is None:
        return values, np.ones(shape[:1], bool)
    passed = np.array([bool(dom.where(v)) for v in values.reshape(-1)], bool).reshape(shape)
    return values, passed.reshape(shape[0], -1).all(axis=1)


def sample(program: Term, dtype: np.dtype[Any], shapes: list[tuple[int, ...]], doms: list[ResolvedDomain],
           n: int, seed: int, out_shape: tuple[int, ...] | None = None) -> Samples:
    """Up to ``n`` valid-output points of ``program`` (reproducible): :data:`BY_VALUE_SHARE` of them
    uniform over the domain's values, the rest uniform over its bit patterns (listed first).

    Args:
      program: the term whose exact output decides which points are valid (and is the samples' exact).
      dtype: the float dtype; ``shapes``: one per input, ``()`` for scalar points; ``doms``: from
        :func:`domains`; ``seed``: the search uses its seed, the re-check the next one.
      out_shape: an array program's output shape (``Samples.out_shape``), None for scalar points.

    Returns:
      :class:`Samples` with every point valid and ``strata`` set; fewer than ``n`` points when the domain
      has too few valid ones to find in :data:`_ROUNDS` rounds (the caller says so when none is left).

    Raises:
      JaxstabError: the oracle cannot evaluate ``program``.
    """
    rng = np.random.default_rng(seed)
    by_value = round(n * BY_VALUE_SHARE)
    parts = [p for p in (_stratum(program, dtype, shapes, doms, n - by_value, rng, out_shape, False),
                         _stratum(program, dtype, shapes, doms, by_value, rng, out_shape, True)) if p]
    if not parts:
        shape = (0, *(out_shape or ()))
        return Samples(dtype, [np.zeros((0, *s), dtype) for s in shapes], np.zeros(shape, dtype),
                       np.zeros(shape, bool), out_shape, np.zeros(0, bool))
    args = [np.concatenate([k.args[i] for k in parts]) for i in range(len(shapes))]
    exact, valid = np.concatenate([k.exact for k in parts]), np.concatenate([k.valid for k in parts])
    strata = np.concatenate([np.full(len(k.exact), k.strata is not None) for k in parts])
    return Samples(dtype, args, exact, valid, out_shape, strata)


def _stratum(program: Term, dtype: np.dtype[Any], shapes: list[tuple[int, ...]], doms: list[ResolvedDomain],
             n: int, rng: np.random.Generator, out_shape: tuple[int, ...] | None, by_value: bool,
             ) -> Samples | None:
    """Up to ``n`` valid points of one stratum, drawn again for the invalid ones; ``strata`` is not None
    on the result for the by-value stratum (a marker :func:`sample` turns into the mask)."""
    kept: list[Samples] = []
    have, rate = 0, 1.0
    for _ in range(_ROUNDS):
        want = n - have
        if want <= 0:
            break
        batch = min(_MAX_DRAWS_PER_POINT * want, math.ceil(want / max(rate, 1.0 / _MAX_DRAWS_PER_POINT)) + 8)
        drawn = [_draw(rng, d, (batch, *s), by_value) for d, s in zip(doms, shapes)]
        inside = np.logical_and.reduce([ok for _, ok in drawn]) if drawn else np.zeros(0, bool)
        if not inside.any():
            rate = 0.0
            continue
        s = Samples.build(program, dtype, [v[inside] for v, _ in drawn], out_shape)
        good = s.valid & np.isfinite(s.exact)
        good = good.reshape(len(good), -1).all(axis=1) if out_shape is not None else good
        rate = float(good.sum()) / batch
        pick = np.flatnonzero(good)[:want]
        if pick.size:
            kept.append(Samples(dtype, [a[pick] for a in s.args], s.exact[pick], s.valid[pick], out_shape))
            have += pick.size
    if not kept:
        return None
    args = [np.concatenate([k.args[i] for k in kept]) for i in range(len(shapes))]
    exact, valid = np.concatenate([k.exact for k in kept]), np.concatenate([k.valid for k in kept])
    return Samples(dtype, args, exact, valid, out_shape, np.ones(0, bool) if by_value else None)


def strata(smp: Samples) -> list[np.ndarray]:
    """Masks of the points of each stratum :func:`sample` drew (bit patterns, values), empty ones left out;
    one mask of every point for samples drawn otherwise."""
    if smp.strata is None:
        return [np.ones(len(smp.exact), bool)]
    return [m for m in (~smp.strata, smp.strata) if m.any()]
