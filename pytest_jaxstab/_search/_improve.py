"""``jst.improve``: search for a more accurate program, judged by the exact oracle (Herbie for jaxprs).

Pipeline: trace the function and lower it to a term (elementwise operators and whole-array reductions)
→ localize (``_localize``): ``jst.local_error`` at drawn points picks the elementwise region around the
worst line and, inside it, the sub-expression rooted at the worst operation → equality saturation of
that sub-expression with egglog over the identities
of ``_rules`` → candidates extracted from the e-graph by an accuracy-guided beam search, each judged on
fuzzed samples (the region with the sub-expression replaced) against the oracle's exact values of the
ORIGINAL region → regime inference (up to three
candidates joined by ``jnp.where``) → the winner re-checked on fresh samples. A candidate is offered only
if it was derived from identities (or joins such candidates), its mean error is lower, its max error is
not higher, and at no sample is it more than ``_WORSE_BITS`` worse than the original; otherwise the
result says that nothing better was found. The winner is spliced back into the whole program (the
lines that lose nothing, and the reductions around the region, stay as written).
"""

from __future__ import annotations

import functools
import inspect
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from .._check._trace import normalize_shapes, positional, trace_case, x64_scope
from .._dtypes import is_complex_dtype, resolve_dtype
from .._errors import ArgumentError, JaxstabError, function_name
from .._settings import layered
from .._settings import settings as Settings
from ._egraph import SaturationError, saturate
from ._expr import Term, cost, evaluate_jax, replace, subterms
from ._extract import Extractor
from ._judge import Samples, draw, jax_function
from ._localize import Focus, batches_for, localize
from ._lower import Unsupported, lower_program
from ._regimes import infer
from ._result import Candidate, Improvement
from ._series import series_candidates
from ._source import expression, function_source

__all__ = ["improve"]

#: Rounding noise allowed per sample: a rewrite with a few more operations may lose up to this much
#: where the original happens to be correctly rounded (1 ulp = 1 bit, 3 ulps = 2 bits).
_WORSE_BITS = 2.0
#: Differences of mean error below this are noise of the samples, not accuracy (ties go to the cheaper).
_NOISE_BITS = 0.1
#: Candidates judged jitted (and offered to the regime inference) after the eager search.
_FINALISTS = 8


def improve(fn: Callable[..., Any], *, shapes: Any, dtype: Any, domain: Any = None, settings: Any = None,
            **options: Any) -> Improvement:
    """Search for a more accurate program computing ``fn`` (equality saturation judged by the oracle).

    ``fn`` must compute one float result elementwise from its array inputs with operations the search
    knows (arithmetic, sqrt, cbrt, exp, log, expm1, log1p, trigonometric, hyperbolic, pow, ...). The
    search rewrites the expression with real-number identities (egglog), judges every candidate on
    inputs drawn by ``jst.strategies`` against ``jst.oracles``' exact values of the original, combines
    candidates by input range, and re-checks the winner on fresh inputs.

    Args:
      fn: the function (positional array arguments, or keyword ones named by ``shapes``).
      shapes: as for ``jst.check``: a list of shapes (one per positional argument) or a dict of names.
        The search works per element, so only the number and names of the arguments matter.
      dtype: "float16", "bfloat16", "float32" or "float64".
      domain: the input domain, as for ``jst.strategies.floats`` (e.g. ``(0, None)``).
      settings: a ``jst.settings`` to start from (default: the loaded profile).
      **options: the ``jst.settings`` options ``jst.improve`` takes: ``max_examples`` (inputs drawn for
        the search, and again for the re-check; default 100), ``seed`` (None: seed 0, the search is
        deterministic by default), ``time_limit`` (seconds for saturation plus candidate search, default
        15; the result says when it was hit), ``node_limit`` (e-nodes after which saturation stops,
        default 5000), ``iter_limit`` (saturation iterations at most, default 8).

    Returns:
      An :class:`Improvement` (``.fn``, ``.source``, ``.frontier``, ``.report()``); when the
      expression has an unsupported operation or nothing better is found, ``improved`` is False and
      ``status`` says why.

    Raises:
      ArgumentError: a bad dtype or shapes; ``SettingsError`` for a bad limit, seed or unknown option.
      TraceError: JAX cannot trace ``fn``.

    Example::

        imp = jst.improve(lambda x: jnp.sqrt(x + 1) - jnp.sqrt(x), shapes=[()], dtype="float64",
                          domain=(0, None))
        print(imp.source)   # def ...(x): return 1.0 / (jnp.sqrt(x + 1.0) + jnp.sqrt(x))
    """
    s = layered(Settings.default, {"settings": settings, **options}, "improve", where="jst.improve()")
    if is_complex_dtype(dtype):
        raise ArgumentError(f"dtype={dtype!r}: jst.improve searches identities of real numbers; complex "
                            "functions are checked (jst.check) but not searched")
    try:
        dt = resolve_dtype(dtype)
    except (TypeError, ValueError) as exc:
        raise ArgumentError(f"dtype={dtype!r}: {exc}") from None
    names, shape_list, by_keyword = normalize_shapes(shapes)
    param_names = _param_names(fn, names, by_keyword)
    with x64_scope(dt):
        return _improve(fn, dt, shape_list, names, by_keyword, param_names, domain, int(s.max_examples),
                        0 if s.seed is None else int(s.seed), float(s.time_limit), int(s.node_limit),
                        int(s.iter_limit))


def _param_names(fn: Callable[..., Any], names: list[str], by_keyword: bool) -> list[str]:
    if by_keyword:
        return list(names)
    try:
        params = [p.name for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    return params[:len(names)] if len(params) >= len(names) else [f"x{i}" for i in range(len(names))]


def _improve(fn: Callable[..., Any], dt: np.dtype[Any], shapes: list[tuple[int, ...]], names: list[str],
             by_keyword: bool, params: list[str], domain: Any, n: int, seed: int, time_limit: float,
             node_limit: int, iter_limit: int) -> Improvement:
    times: dict[str, float] = {}
    t0 = time.perf_counter()
    case = trace_case(positional(fn, names, by_keyword), dt, shapes)
    fname = getattr(fn, "__name__", "improved")
    fname = "improved" if fname == "<lambda>" else f"{fname}_improved"
    try:
        whole, sites = lower_program(case.closed)
    except Unsupported as exc:
        return Improvement(fn, "", False, f"not searched: {exc}")

    def result(status: str, **kw: Any) -> Improvement:
        return Improvement(fn, function_source(whole, params, fname), False, status, times=times, **kw)

    try:
        points = draw(dt, len(names), domain, n, seed)
    except (ValueError, TypeError) as exc:
        raise ArgumentError(f"domain={domain!r}: {exc}") from None
    try:
        focus = _localize(fn, names, by_keyword, dt, shapes, whole, sites, points)
    except Unsupported as exc:
        return result(f"not searched: {exc}")
    original, sub = focus.region, focus.sub
    times["localize"] = time.perf_counter() - t0

    t = time.perf_counter()
    try:
        samples = Samples.build(original, dt, points)
    except JaxstabError as exc:
        return result(f"not searched: the oracle cannot judge {function_name(fn)}: {exc}")
    if samples.count == 0:
        return result("not searched: no sample could be judged (every input outside the domain or uncertain)")
    orig, orig_errs = _measure(original, samples, params, "original")
    times["judge"] = time.perf_counter() - t

    t = time.perf_counter()
    deadline = t0 + time_limit
    try:
        data, stats = saturate(sub, node_limit=node_limit, iter_limit=iter_limit,
                               time_limit=max(0.5, time_limit * 0.4))
    except SaturationError as exc:
        return result(f"nothing better found: {exc}", original=orig, best=orig, frontier=[orig],
                      samples=samples.count)
    times["saturate"] = time.perf_counter() - t

    t = time.perf_counter()
    ex = Extractor(data)
    found = ex.candidates(sub, lambda u: _mean(samples.eager_errors(replace(original, sub, u))), beam=4,
                          rounds=4, per_class=12, max_cost=max(4 * cost(sub), cost(sub) + 60),
                          deadline=deadline)
    scores = {replace(original, sub, u): v for u, v in found.items()}
    times["extract"] = time.perf_counter() - t
    hit_limit = time.perf_counter() > deadline

    t = time.perf_counter()
    # Ties go to the cheaper, then to the one closest to what the user wrote. Means within _NOISE_BITS
    # are ties: a longer form that happens to round better on these samples is fitting noise.
    written = set(subterms(original))
    ranked = sorted(scores, key=lambda u: (_quantize(scores[u]), cost(u),
                                           -len(written.intersection(subterms(u)))))
    finalists = _distinct(ranked, samples, _FINALISTS)
    kinds = dict.fromkeys(finalists, "rewrite")
    times["judge"] += time.perf_counter() - t

    t = time.perf_counter()
    if len(names) == 1:  # a fraction of a second: not subject to the time limit
        for series in series_candidates(sub):  # of the localized sub-term: the rest stays as written
            term = replace(original, sub, series)
            finalists.append(term)
            kinds[term] = "series"
    times["series"] = time.perf_counter() - t

    t = time.perf_counter()
    measured = [_measure(u, samples, params, kinds[u]) for u in finalists]
    times["judge"] += time.perf_counter() - t

    t = time.perf_counter()
    if measured:
        errs = np.array([e for _, e in measured])
        regime = infer(finalists, errs, samples, original)
        if regime is not None:
            used = {kinds[u] for u in finalists if u in subterms(regime)}
            measured.append(_measure(regime, samples, params, "regimes with series approximation"
                                     if "series" in used else "regimes"))
    times["regimes"] = time.perf_counter() - t

    safe = [c for c, errs in measured if c.term != original and _safe(errs, orig_errs)]
    frontier = _pareto([orig, *safe])
    why = f" (saturation: {stats.iterations} iterations, {stats.nodes} e-nodes, stopped: {stats.stopped}" + (
        "; time limit hit" if hit_limit else "") + focus.describe() + ")"
    if not safe:
        return result("nothing better found" + why, original=orig, best=orig, frontier=frontier,
                      samples=samples.count)

    t = time.perf_counter()
    fresh = Samples.build(original, dt, draw(dt, len(names), domain, n, seed + 1))
    best, recheck = None, None
    o = fresh.jit_errors(jax_function(original, dt))
    for cand in sorted(safe, key=lambda c: (_quantize(c.mean_bits), c.cost)):
        if fresh.count == 0:
            break
        b = fresh.jit_errors(jax_function(cand.term, dt))
        if _safe(b, o):
            best, recheck = cand, (_mean(o), _max(o), _mean(b), _max(b))
            break
    times["recheck"] = time.perf_counter() - t
    if best is None:
        return result("nothing better found: the candidates did not hold up on fresh samples" + why,
                      original=orig, best=orig, frontier=frontier, samples=samples.count)
    program = replace(whole, original, best.term)
    return Improvement(_callable(fn, program, dt, names, by_keyword),
                       function_source(program, params, fname),
                       True, f"improved: mean {orig.mean_bits:.2f} -> {best.mean_bits:.2f} bits, max "
                       f"{orig.max_bits:.2f} -> {best.max_bits:.2f} bits" + why, original=orig, best=best,
                       frontier=frontier, recheck=recheck, samples=samples.count, times=times)


def _localize(fn: Callable[..., Any], names: list[str], by_keyword: bool, dt: np.dtype[Any],
              shapes: list[tuple[int, ...]], whole: Term, sites: Any, points: list[np.ndarray]) -> Focus:
    """The region and sub-expression to search: by local error at the drawn ``points``."""
    loc_shapes, batches = batches_for(points, shapes)
    closed = trace_case(positional(fn, names, by_keyword), dt, loc_shapes).closed if batches else None
    return localize(whole, sites, closed, [[b for b in batch] for batch in batches])


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
    errs = samples.jit_errors(jax_function(term, samples.dtype))
    return Candidate(expression(term, params), _mean(errs), _max(errs), cost(term), kind, term), errs


def _safe(cand: np.ndarray, orig: np.ndarray) -> bool:
    """Better on average, no worse at the worst, never more than rounding noise worse anywhere."""
    ok = ~np.isnan(orig)
    if not ok.any():
        return False
    c, o = np.nan_to_num(cand[ok], nan=64.0), orig[ok]
    return bool(c.mean() < o.mean() - 0.05 and c.max() <= o.max() and np.all(c <= o + _WORSE_BITS))


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


def _pareto(cands: list[Candidate]) -> list[Candidate]:
    out: list[Candidate] = []
    for c in sorted(cands, key=lambda c: (_quantize(c.mean_bits), c.cost)):
        if not out or c.cost < out[-1].cost:
            out.append(c)
    return out


def _callable(fn: Callable[..., Any], term: Term, dt: np.dtype[Any], names: list[str],
              by_keyword: bool) -> Callable[..., Any]:
    import jax.numpy as jnp

    @functools.wraps(fn)
    def improved(*args: Any, **kwargs: Any) -> Any:
        if by_keyword:
            bound = dict(zip(names, args))
            bound.update(kwargs)
            vals = [jnp.asarray(bound[n]) for n in names]
        else:
            vals = [jnp.asarray(a) for a in args]
        return evaluate_jax(term, vals, dt)

    return improved
