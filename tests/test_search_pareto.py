"""Issue 36 deliverable 4: ``jst.improve`` returns the most accurate candidate and the cheapest one within 1
bit of it (Herbie's Pareto output), each re-checked on fresh samples and timed jitted.

The choice rules are tested on made-up figures (what is chosen follows from the figures alone); the whole
path on real programs, with the offers' accuracy judged on an independent bit-uniform sample drawn here
and references from mpmath (never the oracle under test).
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import mpmath
import numpy as np
import pytest

import pytest_jaxstab as jst
from pytest_jaxstab._check._trace import x64_scope
from pytest_jaxstab._search._choose import NEVER_WORSE_MAX_BITS, Rechecked
from pytest_jaxstab._search._pareto import CHEAPEST_WITHIN_BITS, cheapest_within, frontier, most_accurate
from pytest_jaxstab._search._result import Candidate


def _cand(name: str, mean: float, mx: float, cost: float) -> Candidate:
    return Candidate(name, mean, mx, cost, "rewrite")


def _checker(fresh: dict[str, tuple[float, float] | None]):
    """A re-check returning the given fresh (mean, max) per candidate; None: refused by the re-check."""
    seen: list[str] = []



    def checked(c: Candidate) -> Rechecked | None:
        seen.append(c.source)
        got = fresh[c.source]
        return None if got is None else Rechecked(c, got[0], got[1], np.zeros(1, bool))

    return checked, seen


def _held(checked, c: Candidate) -> Rechecked:
    """``checked(c)`` for a candidate the test's re-check keeps."""
    r = checked(c)
    assert r is not None
    return r


# ------------------------------------------------------------------------------------ the choice rules
def test_the_cheapest_within_one_bit_is_the_cheapest_the_recheck_keeps():
    best = _cand("best", 0.2, 1.0, 30)
    pool = [best, _cand("refused", 0.5, 1.0, 5), _cand("far", 1.5, 1.0, 6), _cand("spiky", 0.8, 1.0, 7),
            _cand("ok", 0.9, 2.5, 10), _cand("dearer_ok", 0.3, 1.0, 20)]
    checked, seen = _checker({"best": (0.2, 1.0), "refused": None, "far": (1.5, 1.0),
                              "spiky": (0.8, 1.0 + NEVER_WORSE_MAX_BITS + 0.5), "ok": (0.9, 2.5),
                              "dearer_ok": (0.3, 1.0)})
    r_best = _held(checked, best)
    got = cheapest_within(pool, checked, r_best)
    # "refused" is cheaper but the re-check refuses it; "far" is 1.3 bits above the best's 0.2 (> 1 bit)
    # and is never even re-checked; "spiky" is within 1 bit on average but 2.5 bits worse at its worst.
    assert got.cand.source == "ok"
    assert "far" not in seen
    assert got.mean <= r_best.mean + CHEAPEST_WITHIN_BITS


def test_the_cheapest_is_the_best_itself_when_nothing_cheaper_holds():
    best = _cand("best", 0.2, 1.0, 10)
    checked, _ = _checker({"best": (0.2, 1.0), "dear": (0.1, 1.0), "worse": (3.0, 4.0)})
    r_best = _held(checked, best)
    assert cheapest_within([best, _cand("dear", 0.1, 1.0, 50), _cand("worse", 3.0, 4.0, 2)], checked,
                           r_best) is r_best


def test_the_most_accurate_is_judged_on_both_sample_sets():
    # "lucky" looks best on the search's samples but is 3 bits on the fresh ones; "steady" is 0.4 on both.
    lucky, steady = _cand("lucky", 0.1, 1.0, 9), _cand("steady", 0.4, 1.0, 12)
    pick = _cand("pick", 1.5, 3.0, 4)
    checked, _ = _checker({"lucky": (3.0, 9.0), "steady": (0.4, 1.0), "pick": (1.5, 3.0)})
    got = most_accurate([lucky, steady, pick], checked, _held(checked, pick))
    assert got.cand.source == "steady" and got.mean == pytest.approx(0.4)


def test_the_frontier_keeps_only_candidates_no_other_beats_on_both_error_and_cost():
    a, b, c, d = (_cand("a", 0.1, 1, 20), _cand("b", 0.5, 1, 10), _cand("c", 0.6, 1, 15),
                  _cand("d", 30.0, 60, 5))
    assert [x.source for x in frontier([c, d, b, a])] == ["a", "b", "d"]


# ------------------------------------------------------------------------------------ on real programs
def _ords(v: Any) -> np.ndarray:
    b = v.view(np.int64)
    return np.where(b >= 0, b, -(b & 0x7FFFFFFFFFFFFFFF))


def _bits(got: float, exact: Any) -> float:
    if not math.isfinite(got):
        return 64.0
    return math.log2(1 + abs(int(_ords(np.float64(got)) - _ords(np.float64(float(exact))))))


@pytest.mark.parametrize(("fn", "mfn", "lo", "hi"), [
    (lambda x: jnp.sqrt(x + 1) - jnp.sqrt(x), lambda x: mpmath.sqrt(x + 1) - mpmath.sqrt(x), 0.0, 1e300),
    (lambda x: x - jnp.sin(x), lambda x: x - mpmath.sin(x), -1e3, 1e3),
], ids=["sqrt-difference", "x-minus-sin"])
def test_both_offers_are_accurate_on_an_independent_sample_and_timed(fn, mfn, lo, hi):
    with x64_scope(np.dtype(np.float64)):
        imp = jst.improve(fn, shapes=[()], dtype="float64", domain=(lo, hi))
        assert imp.improved, imp.report()
        acc, cheap = imp.most_accurate, imp.cheapest
        assert acc is not None and cheap is not None
        assert cheap.candidate.cost <= acc.candidate.cost
        assert cheap.mean_bits <= acc.mean_bits + CHEAPEST_WITHIN_BITS
        # The most accurate is at least as accurate as the pick (the pick is the cheapest that fixes).
        assert imp.best is not None and imp.recheck is not None
        assert acc.mean_bits <= max(imp.best.mean_bits, imp.recheck[2]) + 0.1
        # Timed on this machine's backend, with the original, in one run.
        assert acc.seconds.get("cpu", 0) > 0 and cheap.seconds.get("cpu", 0) > 0
        assert imp.original_seconds.get("cpu", 0) > 0
        text = imp.report()
        assert "most accurate:" in text and "cheapest within 1 bit:" in text and "us/call on cpu" in text
        # Independent judge: 256 points bit-uniform over the domain, mpmath at 2200 bits (x + 1 at x = 1e300
        # needs ~1000). Both offers must be as accurate there as they claim (mean within 1 bit of the claim:
        # 256 points, sampling noise).
        rng = np.random.default_rng(1436)
        a, b = _ords(np.float64(lo)), _ords(np.float64(hi))
        o = rng.integers(a, b + 1, size=256)
        xs = np.where(o >= 0, o, (-o) | np.int64(-0x8000000000000000)).astype(np.int64).view(np.float64)
        with mpmath.workprec(2200):
            exact = [mfn(mpmath.mpf(float(x))) for x in xs]
        for offer in (acc, cheap):
            got = np.asarray(jax.jit(offer.fn)(jnp.asarray(xs)))
            errs = [_bits(float(g), e) for g, e in zip(got, exact) if e != 0 or g != 0]
            assert np.mean(errs) <= offer.mean_bits + 1.0, (offer.source, np.mean(errs))
            assert np.mean(errs) < 2.0


def test_nothing_better_offers_neither():
    with x64_scope(np.dtype(np.float64)):
        imp = jst.improve(lambda x: x * 2.0, shapes=[()], dtype="float64", domain=(-1e3, 1e3))
    assert not imp.improved
    assert imp.most_accurate is None and imp.cheapest is None


def test_means_within_the_noise_of_the_samples_tie_and_the_lower_max_wins():
    # 0.12 against 0.15 bits mean is noise (below 0.1 bit); a 5-bit worst case against 1.6 is not.
    spiky, steady = _cand("spiky", 0.12, 5.1, 150), _cand("steady", 0.15, 1.6, 150)
    checked, _ = _checker({"spiky": (0.12, 5.1), "steady": (0.15, 1.6)})
    assert most_accurate([spiky, steady], checked, _held(checked, steady)).cand.source == "steady"
    # A mean lower by more than the noise wins even with a higher max.
    better, _ = _checker({"spiky": (0.01, 5.1), "steady": (0.15, 1.6)})
    assert most_accurate([_cand("spiky", 0.01, 5.1, 150), steady], better,
                         _held(better, steady)).cand.source == "spiky"
