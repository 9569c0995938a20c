"""The body of ``jst.improve``: catalogue first, then localize, saturate, extract, judge, re-check.

1. The program is lowered to a term (``_lower``). A program with reductions is an *array program*: it is
   judged whole, on stacked examples of whole arrays (``_judge.draw_arrays``, ``vmap``); otherwise on
   scalar points, per element, as before.
2. The catalogue (``jst.stabilize``'s rewrite, the public rewrites) is measured first. When it is better
   than the original, the search starts from it (its term), and it is a candidate itself: the search
   never answers "nothing better" where the catalogue already is.
3. Phases: the sub-term local error points at, saturated first with the rule families that address the
   kinds of loss local error reports there (``_egraph.families_by_kind``: an overflow calls for scaling
   and log space, a cancellation for expm1/log1p, conjugates and differences of squares); when that does
   not reach :data:`_ACCURATE_BITS`, with every family its operators can use (``_egraph.families_for``);
   when that finds nothing better and time is left, the whole program with every family. A smaller rule
   set saturates further in the same time. The time budget is shared by the phases.
4. The candidates are re-checked on fresh samples drawn the same way (``_sampler``; never worse than the
   original there too: ``_choose.safe`` and ``worse_than``) and one is chosen by ``_choose.choose``: the
   cheapest that meets the fix criterion (mean <= 2 bits, max <= 8 bits) on both sample sets, else the
   most accurate, a bounded worst case first; its figures
   are the worse of the two sets, so a re-check that finds a larger error is stated, never hidden.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from .._check._trace import positional, trace_case
from .._dtypes import dtype_info
from .._errors import ArgumentError, JaxstabError, function_name
from . import _pareto as pareto
from ._choose import WORSE_BITS, Rechecked, choose, worse_than
from ._choose import safe as _safe
from ._egraph import BASE_FAMILIES, SaturationError, families_by_kind, families_for, saturate
from ._expr import Term, cost, is_array_program, replace, subterms, variables
from ._extract import Extractor
from ._gamma import lgamma_pairings
from ._judge import Samples, program_callable
from ._localize import Focus, batches_for, localize, localize_whole
from ._lower import Shapes, Unsupported, lower_program, reduction_counts
from ._measured import catalogue as catalogue_of
from ._measured import catalogue_reference, conditioning, lifted
from ._regimes import infer
from ._result import Candidate, Improvement, Offer
from ._roots import root_candidates
from ._rules import RULES, rules_for
from ._sampler import RECHECK_POINTS, domains, sample, strata
from ._series import series_candidates
from ._source import expression, function_source
from ._subterm_rewrites import identity_candidates

__all__ = ["run"]

_PHASE_NOTES = {"kind": " (rule families chosen by the kind of loss)", "operators": "",
                "whole": " (whole program, every rule family)"}

#: Rounding noise allowed per sample (``_choose.safe``).
_WORSE_BITS = WORSE_BITS
#: Differences of mean error below this are noise of the samples, not accuracy (ties go to the cheaper).
_NOISE_BITS = 0.1
#: Candidates judged jitted (and offered to the regime inference) after the eager search.
_FINALISTS = 8
#: Where a candidate's max error on fresh samples exceeds its claimed max by more than this, the points
#: above it are excused when the problem is that ill-conditioned there (the stability lens).
_CONTRADICTS_BITS = 8.0
#: A catalogue rewrite this accurate on the samples (mean and max bits) ends the search: it is offered.
_DONE_MEAN_BITS = 0.5
_DONE_MAX_BITS = 2.0
#: Examples of whole arrays drawn for an array program (each is many elements; the oracle's cost grows
#: with the elements, so fewer examples than scalar points).
_ARRAY_EXAMPLES = 48
#: A phase whose best candidate is this accurate (mean bits on the samples) ends the search for more
#: rule families (the issue's bar for "accurate", Herbie's too).
_ACCURATE_BITS = 2.0
#: Shares of the time left that a phase's saturation and its extraction may take, by phase.
_SHARES = {"kind": (0.2, 0.4), "operators": (0.3, 0.6), "whole": (0.5, 1.0)}


def run(fn: Callable[..., Any], dt: np.dtype[Any], shapes: list[tuple[int, ...]], names: list[str],
        by_keyword: bool, params: list[str], domain: Any, n: int, seed: int, time_limit: float,
        node_limit: int, iter_limit: int) -> Improvement:
    times: dict[str, float] = {}
    t0 = time.perf_counter()
    deadline = t0 + time_limit
    case = trace_case(positional(fn, names, by_keyword), dt, shapes)
    fname = getattr(fn, "__name__", "improved")
    fname = "improved" if fname == "<lambda>" else f"{fname}_improved"
    try:
        whole, sites = lower_program(case.closed)
    except Unsupported as exc:
        return Improvement(fn, "", False, f"not searched: {exc}")
    out_shape = tuple(getattr(case.closed.out_avals[0], "shape", ()))
    array = is_array_program(whole)

    chosen: dict[str, tuple[str, ...]] = {}  # kind of loss -> the rule families it chose (searched)

    def result(status: str, **kw: Any) -> Improvement:
        return Improvement(fn, function_source(whole, params, fname, out_shape if array else None), False,
                           status, times=times, families=chosen, **kw)

    try:
        doms = domains(dt, domain, len(names))
    except (ValueError, TypeError) as exc:
        raise ArgumentError(f"domain={domain!r}: {exc}") from None

    reference = whole  # whose exact values the candidates are judged against (the catalogue's, below)

    def drawn(region: Term, count: int, at: int) -> Samples:
        """Valid-output points of the whole program (``_sampler``), judged against ``region``."""
        got = sample(reference, dt, shapes if array else [()] * len(names), doms, count, at,
                     out_shape if array else None)
        if region == whole:
            return got
        return dataclasses.replace(Samples.build(region, dt, got.args, out_shape if array else None),
                                   strata=got.strata)

    t = time.perf_counter()
    try:
        samples = drawn(whole, min(n, _ARRAY_EXAMPLES) if array else n, seed)
    except JaxstabError as exc:
        return result(f"not searched: the oracle cannot judge {function_name(fn)}: {exc}")
    if samples.count == 0:  # no exact value anywhere (0·log 0): the catalogue's limit, where it has one
        reference = catalogue_reference(fn, names, by_keyword, dt, shapes, array, whole) or whole
        if reference != whole:
            try:
                samples = drawn(whole, min(n, _ARRAY_EXAMPLES) if array else n, seed)
            except JaxstabError:
                reference = whole
    points = samples.args
    times["judge"] = time.perf_counter() - t
    try:  # against the catalogue's values the whole program is the region: its lines have none of their own
        focus = (Focus(whole, whole, None) if reference != whole else
                 _focus(positional(fn, names, by_keyword), dt, shapes, whole, sites, points, array))
    except Unsupported as exc:
        return result(f"not searched: {exc}")
    original = focus.region
    times["localize"] = time.perf_counter() - t0 - times["judge"]
    # At inputs where the problem is ill-conditioned, a candidate is judged by the stability lens.
    cond = conditioning(fn, names, by_keyword, dt, shapes, case, array, deadline + 0.25 * time_limit
                        ) if original == whole == reference else None

    bits = dtype_info(dt).mantissa_bits

    def judged_safe(errs: np.ndarray, ref: np.ndarray, smp: Samples) -> tuple[bool, np.ndarray, np.ndarray]:
        """Whether ``errs`` is safe against ``ref`` on ``smp``, the errors as judged (an element excused
        by the conditioning counts as the original's there) and where it was excused."""
        none = np.zeros(np.shape(errs), bool)
        if _safe(errs, ref, bits) or cond is None:
            return _safe(errs, ref, bits), errs, none
        excused = cond.excused(smp, errs, ref, _WORSE_BITS)
        adjusted = np.where(excused, np.minimum(np.nan_to_num(errs, nan=64.0), ref), errs)
        return _safe(adjusted, ref, bits), adjusted, excused

    t = time.perf_counter()
    try:
        if original != whole:
            samples = dataclasses.replace(Samples.build(original, dt, points, out_shape if array else None),
                                          strata=samples.strata)
    except JaxstabError as exc:
        return result(f"not searched: the oracle cannot judge {function_name(fn)}: {exc}")
    if samples.count == 0:
        return result("not searched: no sample could be judged (no input in the domain where the exact "
                      "result is a finite float the oracle is certain of)")
    orig, orig_errs = _measure(original, samples, params, "original")
    times["judge"] += time.perf_counter() - t

    # The catalogue's rewrite: a candidate, and where the search starts when it is better.
    t = time.perf_counter()
    catalogue = catalogue_of(fn, names, by_keyword, dt, shapes, samples, array)
    start, start_focus = original, focus
    measured: list[tuple[Candidate, np.ndarray]] = []
    cat_callable: tuple[Candidate, np.ndarray, Callable[..., Any]] | None = None
    if catalogue is not None:
        cat_term, cat_sites, cat_fn, cat_errs = catalogue
        if cat_term is not None and cat_term != original:
            cand = Candidate(expression(cat_term, params), _mean(cat_errs), _max(cat_errs), cost(cat_term),
                             "catalogue", cat_term)
            measured.append((cand, cat_errs))
            if _mean(cat_errs) < orig.mean_bits - _NOISE_BITS:
                start = cat_term
                try:
                    start_focus = _focus(cat_fn, dt, shapes, cat_term, cat_sites, points, array)
                except Unsupported:
                    start_focus = Focus(cat_term, cat_term, None, focus.kinds)
                if start_focus.region != cat_term:
                    start_focus = Focus(cat_term, cat_term, None)
                if not start_focus.kinds:  # the losses the rewrite left are of the kinds found first
                    start_focus = dataclasses.replace(start_focus, kinds=focus.kinds)
        elif cat_term is None:
            cand = Candidate(f"jst.stabilize({function_name(fn)})", _mean(cat_errs), _max(cat_errs),
                             float("inf"), "catalogue")
            cat_callable = (cand, cat_errs, cat_fn)
    times["catalogue"] = time.perf_counter() - t

    # Phase 1: the localized sub-term, the families its kinds of loss call for; phase 2 (unless phase 1
    # reached _ACCURATE_BITS): the same sub-term, every family its operators can use; phase 3 (only when
    # nothing better than the start was found): the whole program, every family.
    by_kind = families_by_kind(start_focus.sub, start_focus.kinds)
    for_ops = families_for(start_focus.sub)
    phases: list[tuple[Term, frozenset[str], str]] = []
    if by_kind:
        kind_set = BASE_FAMILIES | {f for fams in by_kind.values() for f in fams}
        if kind_set != for_ops:
            phases.append((start_focus.sub, kind_set, "kind"))
    phases += [(start_focus.sub, for_ops, "operators"), (start, frozenset(r.family for r in RULES), "whole")]
    counts = reduction_counts(start, shapes)
    kinds: dict[Term, str] = {}
    finalists: list[Term] = []
    stats_text = ""
    hit_limit = False
    start_mean = _mean(samples.eager_errors(start)) if start != original else orig.mean_bits
    # The catalogue's rewrite already correctly rounded (or nearly) everywhere: nothing left to search for.
    done = any(c.kind == "catalogue" and c.mean_bits <= _DONE_MEAN_BITS and c.max_bits <= _DONE_MAX_BITS
               and _safe(e, orig_errs, bits) for c, e in measured)
    if cat_callable is not None and _safe(cat_callable[1], orig_errs, bits):
        cat = cat_callable[0]
        done = done or (cat.mean_bits <= _DONE_MEAN_BITS and cat.max_bits <= _DONE_MAX_BITS)
    for index, (sub, families, label) in enumerate(phases):
        if done:
            break
        left = deadline - time.perf_counter()
        if index > 0:
            best_so_far = _best_eager(finalists, samples)
            if left < 1.0 or best_so_far <= _ACCURATE_BITS or (
                    label == "whole" and best_so_far < start_mean - _NOISE_BITS):
                break
        sat_share, ext_share = _SHARES[label]
        t = time.perf_counter()
        try:
            data, stats = saturate(sub, node_limit=node_limit, iter_limit=iter_limit, counts=counts,
                                   time_limit=max(0.5, left * sat_share), families=families)
        except SaturationError as exc:
            stats_text = str(exc)
            continue
        if index == 0 and label in ("kind", "operators"):
            chosen.update(by_kind)
        times["saturate"] = times.get("saturate", 0.0) + time.perf_counter() - t
        stats_text = (f"saturation: {stats.iterations} iterations, {stats.nodes} e-nodes, stopped: "
                      f"{stats.stopped}" + _PHASE_NOTES[label])

        t = time.perf_counter()
        ex = Extractor(data, RULES + rules_for(sub, counts))
        local = _locally_improved(ex, start, sub, samples, deadline, shapes)
        now = time.perf_counter()
        phase_deadline = deadline if ext_share >= 1.0 else now + max(0.5, (deadline - now) * ext_share)
        found = ex.candidates(sub, lambda u, s=sub: _scored(samples, replace(start, s, u)), beam=4,
                              rounds=4, per_class=12, max_cost=max(4 * cost(sub), cost(sub) + 60),
                              deadline=phase_deadline)
        scores = {replace(start, sub, u): v for u, v in found.items() if np.isfinite(v)}
        if local is not None and np.isfinite(_scored(samples, local)):
            scores[local] = _scored(samples, local)
        times["extract"] = times.get("extract", 0.0) + time.perf_counter() - t
        hit_limit = hit_limit or time.perf_counter() > deadline

        t = time.perf_counter()
        written = set(subterms(original))
        ranked = sorted(scores, key=lambda u: (_quantize(scores[u]), cost(u),
                                               -len(written.intersection(subterms(u)))))
        for term in _distinct(ranked, samples, _FINALISTS):
            if term not in kinds:
                kinds[term] = "rewrite"
                finalists.append(term)
        times["judge"] += time.perf_counter() - t

    t = time.perf_counter()
    if len(names) == 1 and not array:  # a fraction of a second: not subject to the time limit
        for series in series_candidates(focus.sub):  # of the localized sub-term: the rest as written
            term = replace(original, focus.sub, series)
            finalists.append(term)
            kinds[term] = "series"
    # Sums of lgamma terms paired by the difference of their arguments (a log binomial coefficient),
    # b +- sqrt(b*b + r) by its conjugate and scaled (``_roots``), and the identities tried at every
    # sub-term as written (``_subterm_rewrites``): rewrites the e-graph reaches only after many steps.
    for base in dict.fromkeys((original, start)):
        found = identity_candidates(base, array, focus.sub if base == original else None)
        pairs = (*lgamma_pairings(base), *root_candidates(base, dt))
        for term, kind in [(u, "rewrite") for u in pairs] + found:
            if term not in kinds:
                finalists.append(term)
                kinds[term] = kind
    times["series"] = time.perf_counter() - t

    t = time.perf_counter()
    judged = [_measure(u, samples, params, kinds[u]) for u in finalists]
    measured += judged
    times["judge"] += time.perf_counter() - t

    t = time.perf_counter()
    if finalists:
        errs = np.array([e for _, e in judged])
        regime = infer(finalists, errs, samples, original)
        if regime is not None:
            used = {kinds.get(u) for u in finalists if u in subterms(regime)}
            measured.append(_measure(regime, samples, params, "regimes with series approximation"
                                     if "series" in used else "regimes"))
    times["regimes"] = time.perf_counter() - t

    safe = [c for c, errs in measured if c.term != original and judged_safe(errs, orig_errs, samples)[0]]
    if cat_callable is not None and judged_safe(cat_callable[1], orig_errs, samples)[0]:
        safe.append(cat_callable[0])
    frontier = pareto.frontier([orig, *[c for c in safe if c.term is not None]])
    why = stats_text + ("; time limit hit" if hit_limit else "") + focus.describe() + (
        "" if reference == whole else "; judged against the exact values of jst.stabilize's program: the "
        "written one has none at any input drawn (0·log 0, 0·inf), the rewrite gives their limit")
    why = f" ({why.removeprefix('; ')})" if why else ""
    if not safe:
        return result("nothing better found" + why, original=orig, best=orig, frontier=frontier,
                      samples=samples.count)

    t = time.perf_counter()
    # Fresh points of the same distribution as the search's (``_sampler``), more of them: the never-worse
    # rule is decided here.
    fresh = drawn(original, min(n, _ARRAY_EXAMPLES) if array else max(n, RECHECK_POINTS), seed + 1)
    o = fresh.jit_errors(fresh.function(original))
    refused: list[str] = []  # why candidates better on the search's samples are not offered

    def program_of(cand: Candidate) -> Callable[..., Any]:  # evaluates the candidate on the fresh points
        if cand.term is None:
            assert cat_callable is not None
            return lifted(cat_callable[2], array)
        return fresh.function(cand.term)

    def rechecked(cand: Candidate) -> Rechecked | None:
        if fresh.count == 0:
            return None
        b = fresh.jit_errors(program_of(cand))
        # Raw errors (no point excused: what an independent measure sees): the mean on all points and on
        # the bit-pattern stratum (Herbie's measure), the max on each stratum apart.
        masks = strata(fresh)
        worse = worse_than(b, o) or next(filter(None, (worse_than(b[m], o[m], mean=k == 0)
                                                       for k, m in enumerate(masks))), None)
        if worse is not None:
            refused.append(worse)
            return None
        ok, b, excused = judged_safe(b, o, fresh)
        if ok and cond is not None and _max(b) > cand.max_bits + _CONTRADICTS_BITS:
            # Above its claim only where the problem is that ill-conditioned: within the conditioning.
            claim = np.full(np.shape(b), cand.max_bits + _CONTRADICTS_BITS - _WORSE_BITS)
            high = cond.excused(fresh, b, claim, _WORSE_BITS)
            b = np.where(high, np.minimum(np.nan_to_num(b, nan=64.0), cand.max_bits), b)
            excused = excused | high
        return Rechecked(cand, _mean(b), _max(b), excused) if ok else None

    checked = functools.cache(rechecked)  # each candidate compiled and judged once on the fresh points
    chosen_one = choose(safe, checked)
    best, recheck = None, None
    if chosen_one is not None:
        best = chosen_one.cand
        recheck = (_mean(o), _max(o), chosen_one.fresh_mean, chosen_one.fresh_max)
        if cond is not None:
            cond.count(chosen_one.excused)
    times["recheck"] = time.perf_counter() - t
    if best is None:
        because = (f"{len(refused)} worse than the original on them, the first {refused[0]}" if refused
                   else "none better than the original at every point there")
        return result(f"nothing better found: the candidates did not hold up on {fresh.count} fresh samples "
                      f"({because})" + why, original=orig, best=orig, frontier=frontier,
                      samples=samples.count)
    assert chosen_one is not None and recheck is not None
    status = (f"improved: mean {max(orig.mean_bits, recheck[0]):.2f} -> {chosen_one.mean:.2f} bits, max "
              f"{max(orig.max_bits, recheck[1]):.2f} -> {chosen_one.max:.2f} bits (the worse of the search's "
              "and the re-check's samples)" + why)
    if cond is not None and cond.excused_points:
        status += (f"; judged by the stability lens at {cond.excused_points} ill-conditioned sample(s), "
                   "where its error is within the problem's conditioning (the original's luck there)")

    def offer(r: Rechecked, seconds: dict[str, float]) -> Offer:
        if r.cand.term is None:
            assert cat_callable is not None
            return Offer(r.cand, functools.wraps(fn)(cat_callable[2]), f"{fname} = jst.stabilize("
                                f"{getattr(fn, '__name__', 'fn')})\n", r.mean, r.max, seconds)
        program = replace(whole, original, r.cand.term)
        return Offer(r.cand, program_callable(fn, program, dt, names, by_keyword, out_shape),
                            function_source(program, params, fname, out_shape if array else None), r.mean,
                            r.max, seconds)

    t = time.perf_counter()
    (accurate, cheap), secs = pareto.offers(safe, checked, chosen_one, fresh.function(original), program_of,
                                            fresh.args)
    times["pareto"] = time.perf_counter() - t
    pick, accurate_offer, cheap_offer = (offer(r, secs[id(r)]) for r in (chosen_one, accurate, cheap))
    return Improvement(pick.fn, pick.source, True, status, original=orig, best=best, frontier=frontier,
                       recheck=recheck, samples=samples.count, times=times, families=chosen,
                       most_accurate=accurate_offer, cheapest=cheap_offer, original_seconds=secs[0])


def _focus(fn: Callable[..., Any], dt: np.dtype[Any], shapes: list[tuple[int, ...]], whole: Term, sites: Any,
           points: list[np.ndarray], array: bool) -> Focus:
    """The region and sub-expression to search: by local error at the drawn ``points``."""
    if array:
        batches = [[p[i] for p in points] for i in range(min(8, len(points[0]) if points else 0))]
        closed = trace_case(fn, dt, shapes).closed
        return localize_whole(whole, sites, closed, batches)
    loc_shapes, batches = batches_for(points, shapes)
    closed = trace_case(fn, dt, loc_shapes).closed if batches else None
    return localize(whole, sites, closed, [list(batch) for batch in batches])


#: Sub-terms judged on their own by :func:`_locally_improved`, and exact evaluations it may spend.
_LOCAL_TERMS = 16
_LOCAL_ORACLE_CALLS = 96


def _locally_improved(ex: Extractor, start: Term, sub: Term, samples: Samples, deadline: float,
                      shapes: list[tuple[int, ...]]) -> Term | None:
    """``start`` with ``sub`` rebuilt bottom-up, each of its sub-terms by the node of its e-class most
    accurate against that sub-term's OWN exact values (the oracle's, at the same points).

    Every term of an e-class computes the same real function, so the exact values of the written sub-term
    judge all of them. Where a loss has several independent troubles (``log(exp(a) / exp(b))`` and
    ``exp(a)**2 / exp(b)**2`` in one KL divergence), fixing one alone does not lower the program's
    error and the beam search sees no progress; judged one by one, each fix is plain (Herbie localizes
    the same way). A node's operands are the improved sub-terms where they are written sub-terms, else
    the cheapest term of their class.
    """
    from ._rules import apply_at_root

    array = samples.out_shape is not None
    shape_of = Shapes(shapes).of if array else None
    ops = [t for t in dict.fromkeys(_postorder(sub)) if t[0] not in ("var", "const")]
    if len(ops) > _LOCAL_TERMS:
        ops = ops[-_LOCAL_TERMS:]  # the larger ones (post-order ends with the biggest)
    calls = [0]

    def exact_of(t: Term) -> Samples | None:
        if calls[0] >= _LOCAL_ORACLE_CALLS or time.perf_counter() > deadline:
            return None
        calls[0] += 1
        try:
            return Samples.build(t, samples.dtype, samples.args, shape_of(t) if shape_of else None)
        except (JaxstabError, Unsupported, ValueError, TypeError):
            return None

    best: dict[str, Term] = {}
    improved: dict[Term, Term] = {}

    def child(c: str) -> Term:
        """The most accurate of a few alternatives of class ``c`` (judged on its own exact values)."""
        hit = best.get(c)
        if hit is not None:
            return hit
        cheapest = ex.term(c)
        best[c] = cheapest
        alts = [a for a in ex.alternatives(c, 8) if a != cheapest]
        own = exact_of(cheapest) if alts and variables(cheapest) and cheapest[0] != "var" else None
        if own is not None:
            base = _judged(own, cheapest)
            scored = [(_judged(own, a), i, a) for i, a in enumerate(alts)]
            err, _, choice = min(scored)
            if err < base - 0.5:
                best[c] = choice
        return best[c]

    for t in ops:
        cls = ex.class_of(t)
        own = exact_of(t) if cls is not None and variables(t) else None
        if own is None or cls is None:
            continue
        current = _rebuild(t, improved)
        options = [current]
        for kind, payload in ex.nodes(cls, 40):
            if kind in ("var", "const") or time.perf_counter() > deadline:
                continue
            options.append((kind, *(child(str(c)) for c in payload)))
        options += [ex.fold(alt) for alt in apply_at_root(current, ex.rules)]
        scored = [(_judged(own, o), i, o) for i, o in enumerate(dict.fromkeys(options))]
        err, _, choice = min(scored)
        if err < scored[0][0] - 0.5:
            improved[t] = choice
            best[cls] = choice
        else:
            best[cls] = current
    new = replace(start, sub, _rebuild(sub, improved))
    return new if new != start else None


def _judged(own: Samples, term: Term) -> float:
    """Mean error of ``term`` against a sub-term's exact values; inf when it cannot be evaluated there
    (a term of the class that reads no input, a shape the sub-term's samples do not have)."""
    try:
        return _mean(own.eager_errors(term))
    except Exception:  # a candidate that fails to evaluate is simply not chosen
        return float("inf")


def _postorder(term: Term) -> list[Term]:
    if term[0] in ("var", "const"):
        return [term]
    return [u for c in term[1:] for u in _postorder(c)] + [term]


def _rebuild(term: Term, improved: dict[Term, Term]) -> Term:
    hit = improved.get(term)
    if hit is not None:
        return hit
    if term[0] in ("var", "const"):
        return term
    return (term[0], *(_rebuild(c, improved) for c in term[1:]))


def _best_eager(terms: list[Term], samples: Samples) -> float:
    return min((_mean(samples.eager_errors(u)) for u in terms), default=float("inf"))


def _scored(samples: Samples, term: Term) -> float:
    """Mean error of ``term`` on ``samples``; inf where it cannot be evaluated there (an identity that
    holds elementwise but not for the shapes of an array program: a selection moved across a broadcast)."""
    try:
        return _mean(samples.eager_errors(term))
    except (ValueError, TypeError, IndexError):
        return float("inf")


def _quantize(bits: float) -> float:
    return round(bits / _NOISE_BITS) * _NOISE_BITS if np.isfinite(bits) else bits


def _mean(errs: np.ndarray) -> float:
    vals = errs[~np.isnan(errs)]
    return float(vals.mean()) if vals.size else float("inf")


def _max(errs: np.ndarray) -> float:
    vals = errs[~np.isnan(errs)]
    return float(vals.max()) if vals.size else float("inf")


def _measure(term: Term, samples: Samples, params: list[str], kind: str) -> tuple[Candidate, np.ndarray]:
    """The candidate's figures from its jitted float results, and its errors per sample."""
    errs = samples.jit_errors(samples.function(term))
    return Candidate(expression(term, params), _mean(errs), _max(errs), cost(term), kind, term), errs


def _distinct(ranked: list[Term], samples: Samples, k: int) -> list[Term]:
    """The ``k`` best terms with pairwise different error profiles (copies differ only in form)."""
    out: list[Term] = []
    seen: set[bytes] = set()
    for term in ranked:
        key = np.round(np.nan_to_num(samples.eager_errors(term), nan=-1.0), 3).tobytes()
        if key not in seen:
            seen.add(key)
            out.append(term)
        if len(out) >= k:
            break
    return out
