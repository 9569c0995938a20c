"""Derivatives repaired as programs: ``jst.improve(fn, ..., derivatives=True)`` (issue 47).

The derivative of an elementwise function is a program too, and it loses the way programs do: JAX's
chain rule spells ``d/dg [g / (|g| + e)]`` as ``1/(|g| + e) - |g|/(|g| + e)^2``, which cancels where the
exact value is ``e/(|g| + e)^2``; a user's ``custom_jvp`` tangent ``s * (1 - s)`` cancels at saturation.
Here each partial derivative is traced as an elementwise program of its own (reverse mode, as
``jax.grad`` computes it: ``jax.vjp`` with a cotangent of ones, for an elementwise function the
diagonal of its Jacobian), measured against
the oracle's exact value OF THAT PROGRAM on the search's samples, and where it misses the fix criterion
(``_choose.fixes``: mean <= 2 bits, max <= 8 bits) the search (``_pipeline.run``, unchanged) looks for
a better program computing it. The reference is the derivative program of the function as written: the
exact derivative where each primitive's JVP is exact, and what the user declared where a ``custom_jvp``
rule stands in.

What is found is installed through ``jax.custom_jvp``: the primal is the function as written (or the
value search's program when it ran and improved the value), its values bit for bit; the tangent is
``sum_i partial_i(x) * dx_i``, the improved program for each improved partial and autodiff's own
derivative of the function as written for the others. The installed derivative is measured again on the
same samples (the ``after`` figures), so what the report states is what ``jax.grad(result.fn)`` computes.
"""

from __future__ import annotations

import dataclasses
import functools
import keyword
import re
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .._check._trace import positional, trace_case
from .._errors import ArgumentError, JaxstabError
from ._choose import FIX_MAX_BITS, FIX_MEAN_BITS, fixes
from ._expr import is_array_program
from ._judge import Samples
from ._lower import Unsupported, lower_program
from ._pipeline import run
from ._result import Improvement, Partial
from ._sampler import domains, sample
from ._source import function_source

__all__ = ["DERIVATIVES", "check_derivatives", "improve_derivatives"]

#: The values ``jst.improve``'s ``derivatives=`` takes: the value only; the value and each partial
#: derivative; the partial derivatives only (the value as written).
DERIVATIVES = (False, True, "only")
#: Why a partial with no valid sample is left as autodiff builds it.
_UNJUDGED = ("not searched: no sample could be judged (no input in the domain where the exact derivative "
             "is a finite float the oracle is certain of)")
#: The least time a search is given, however many share the budget (below it saturation does nothing).
_MIN_SECONDS = 1.0


def check_derivatives(value: Any) -> bool | str:
    """``derivatives=`` validated: False, True or ``"only"``.

    Raises:
        ArgumentError: any other value, naming it and the accepted ones.
    """
    if isinstance(value, bool) or (isinstance(value, str) and value == "only"):
        return value
    raise ArgumentError(f"derivatives={value!r}: expected False (search the value only), True (the value "
                        "and each partial derivative) or \"only\" (the partial derivatives only, the value "
                        "as written)")


def improve_derivatives(fn: Callable[..., Any], dt: np.dtype[Any], shapes: list[tuple[int, ...]],
                        names: list[str], by_keyword: bool, params: list[str], domain: Any, n: int, seed: int,
                        time_limit: float, node_limit: int, iter_limit: int, *, value: bool) -> Improvement:
    """``jst.improve`` with ``derivatives=True`` (``value``) or ``"only"``: the partial derivatives
    searched, installed through ``jax.custom_jvp`` (the module's docstring). Call inside ``x64_scope``."""
    deadline = time.perf_counter() + time_limit
    pos = positional(fn, names, by_keyword)
    base = _base_name(fn)
    try:
        whole, _ = lower_program(trace_case(pos, dt, shapes).closed)
    except Unsupported as exc:
        return Improvement(fn, "", False, f"not searched: {exc}")
    if is_array_program(whole):
        return Improvement(fn, "", False, "not searched: derivatives are searched for elementwise functions "
                           "only (this one reduces, selects or reads a closed-over array, so its partial "
                           "derivatives are not one number per element); derivatives=False searches its "
                           "value")
    try:
        doms = domains(dt, domain, len(names))
    except (ValueError, TypeError) as exc:
        raise ArgumentError(f"domain={domain!r}: {exc}") from None

    # Each partial: its program, its term, its samples and its figures as differentiated. Traced at
    # scalars where the function takes them: elementwise, a partial is one number per element, and at
    # the arguments' shapes a partial that reads fewer of them (d/dx (x * y) = y) would be spread there.
    programs = [_partial(pos, i, f"{base}_d_{params[i]}") for i in range(len(names))]
    pshapes: list[tuple[int, ...]] = [()] * len(names)
    try:
        trace_case(pos, dt, pshapes)
    except JaxstabError as exc:
        return Improvement(fn, "", False, "not searched: derivatives are searched per element, and the "
                           f"function cannot be called with scalar arguments: {exc}")
    terms, judged = [], []
    for i, prog in enumerate(programs):
        try:
            term, _ = lower_program(trace_case(prog, dt, pshapes).closed)
        except (Unsupported, JaxstabError) as exc:  # a custom_vjp rule has no forward derivative
            return Improvement(fn, "", False, f"not searched: the derivative by {params[i]} is not a program "
                               f"the search takes: {exc}")
        try:
            smp = sample(term, dt, [()] * len(names), doms, n, seed)
        except JaxstabError as exc:
            return Improvement(fn, "", False, f"not searched: the oracle cannot judge the derivative by "
                               f"{params[i]}: {exc}")
        terms.append(term)
        judged.append(smp)
    before = [_figures(smp, _at_points(prog, pshapes)) if smp.count else None
              for smp, prog in zip(judged, programs)]
    wanted = [i for i, b in enumerate(before) if b is not None and not fixes(*b)]

    searches = len(wanted) + int(value)
    value_imp: Improvement | None = None
    if value:
        value_imp = run(fn, dt, shapes, names, by_keyword, params, domain, n, seed,
                        _share(deadline, searches), node_limit, iter_limit)
        searches -= 1
    found: dict[int, Improvement] = {}
    chosen: dict[int, tuple[Callable[..., Any], str]] = {}  # partial -> (program, its source)
    for i in wanted:
        name = f"{base}_d_{params[i]}"
        share = _share(deadline, searches)

        def search(prog: Callable[..., Any], share: float = share) -> Improvement:
            return run(prog, dt, pshapes, names, False, params, domain, n, seed, share, node_limit,
                       iter_limit)

        def source_of(prog: Callable[..., Any], name: str = name) -> str:
            return function_source(lower_program(trace_case(prog, dt, pshapes).closed)[0], params, name)

        b = before[i]
        assert b is not None  # ``wanted`` holds judged partials only
        pick = _forward_or_searched(programs[i], _partial(pos, i, name, forward=True), judged[i], pshapes, b,
                                    search, source_of)
        found[i] = pick[2]
        if pick[0] is not None:
            chosen[i] = (pick[0], pick[1])
        searches -= 1

    better = {i: found[i] for i in chosen}
    value_better = value_imp is not None and value_imp.improved
    primal = value_imp.fn if value_better and value_imp is not None else fn
    improved_partials = {i: positional(prog, names, False) for i, (prog, _) in chosen.items()}
    installed = _install(fn, positional(primal, names, by_keyword), pos, improved_partials, names, by_keyword)
    inst_pos = positional(installed, names, by_keyword)

    partials = []
    for i, b in enumerate(before):
        own = function_source(terms[i], params, f"{base}_d_{params[i]}")
        if b is None:
            partials.append(Partial(params[i], (float("nan"), float("nan")), None, False, _UNJUDGED, own))
            continue
        imp = found.get(i)
        if imp is None:
            status = (f"within the fix criterion (mean <= {FIX_MEAN_BITS:g} bits, max <= {FIX_MAX_BITS:g} "
                      "bits): not searched")
        else:
            status = imp.status
        after = (_figures(judged[i], _at_points(_partial(inst_pos, i, "installed"), pshapes)) if i in better
                 else None)
        partials.append(Partial(params[i], b, after, i in better, status,
                                _pasteable(chosen[i][1], own) if i in chosen else own, imp))

    improved = bool(better) or value_better
    status = _status(partials, value_imp)
    value_source = function_source(whole, params, f"{base}_value")
    if value_better and value_imp is not None:  # the catalogue's rewrite reads the value's own def
        value_source = _pasteable(value_imp.source.replace(f"jst.stabilize({base})",
                                                           f"jst.stabilize({base}_value)"), value_source)
    source = _source(base, params, value_source, [p.source for p in partials])
    kept = value_imp if value_imp is not None else Improvement(fn, "", False, "")
    return dataclasses.replace(kept, fn=installed if improved else fn, source=source, improved=improved,
                               status=status, partials=tuple(partials), value=value_imp)


def _share(deadline: float, searches: int) -> float:
    """Seconds for the next search: an equal share of what is left among the searches still to run."""
    return max(_MIN_SECONDS, (deadline - time.perf_counter()) / max(searches, 1))


def _base_name(fn: Callable[..., Any]) -> str:
    name = getattr(fn, "__name__", "f")
    return name if name.isidentifier() and not keyword.iskeyword(name) else "f"


def _partial(pos: Callable[..., Any], i: int, name: str, forward: bool = False) -> Callable[..., Any]:
    """The partial derivative of ``pos`` by its argument ``i`` as a function of the same arguments, as
    ``jax.grad`` computes it: reverse mode (``jax.vjp`` with a cotangent of ones), the arguments first
    broadcast to one shape so that, ``pos`` being elementwise, the pull-back of ones is the diagonal of
    the Jacobian. Reverse mode, not ``jax.jvp``: the two are different programs, and the one users run
    is the gradient's (Huber's ``0.5·q² + d·(|e| - q)``, ``q = min(|e|, d)``, is exact in forward
    mode, where ``d·(s - s)`` is 0, and cancels in reverse, where the cotangents ``d + (q - d)`` meet).
    ``forward``: the same partial in forward mode (``jax.jvp`` with ones on argument ``i``), the same
    mathematics in another program (``_forward_or_searched`` tries it first)."""
    def derivative(*args: Any) -> Any:
        args = tuple(jnp.asarray(a) for a in args)
        if not forward:
            args = tuple(jnp.broadcast_arrays(*args))

        def of_one(a: Any) -> Any:
            return pos(*args[:i], a, *args[i + 1:])

        if forward:
            return jax.jvp(of_one, (args[i],), (jnp.ones_like(args[i]),))[1]
        out, pull = jax.vjp(of_one, args[i])
        return pull(jnp.ones_like(out))[0]

    derivative.__name__ = derivative.__qualname__ = name
    return derivative


def _forward_or_searched(reverse: Callable[..., Any], forward: Callable[..., Any], judged: Samples,
                         shapes: list[tuple[int, ...]], before: tuple[float, float],
                         search: Callable[[Callable[..., Any]], Improvement],
                         source_of: Callable[[Callable[..., Any]], str],
                         ) -> tuple[Callable[..., Any] | None, str, Improvement]:
    """For a partial whose reverse-mode program (``before``) misses the fix criterion: the forward-mode
    program itself where it meets it on the same samples (no search: Huber's), else the search's
    program from the forward spelling, else from the reverse one, each measured on the reverse
    program's samples (the same exact derivative) and taken only where it beats ``before``.
    ``(program or None, its source, the search's Improvement)``."""
    fwd_fig = _figures(judged, _at_points(forward, shapes))
    if fixes(*fwd_fig):
        note = (f"the forward-mode derivative meets the fix criterion where reverse mode loses: mean "
                f"{before[0]:.2f} -> {fwd_fig[0]:.2f} bits, max {before[1]:.2f} -> {fwd_fig[1]:.2f} bits")
        return forward, source_of(forward), Improvement(forward, "", True, note)
    last: Improvement | None = None
    for start in (forward, reverse):
        imp = search(start)
        last = imp
        if imp.improved:
            found = positional(imp.fn, [f"x{k}" for k in range(len(shapes))], False)
            fig = _figures(judged, _at_points(found, shapes))
            if fig[1] < before[1] or (fig[1] == before[1] and fig[0] < before[0]):
                return imp.fn, imp.source, imp
    assert last is not None
    return None, "", last


def _at_points(program: Callable[..., Any], shapes: list[tuple[int, ...]]) -> Callable[..., Any]:
    """``program`` (elementwise, traced at ``shapes``) as a function of 1-D arrays of scalar points: each
    point broadcast to the arguments' shapes (a program may reshape to them), one element of the result
    kept."""
    def at(*points: Any) -> Any:
        def one(*scalars: Any) -> Any:
            return jnp.ravel(program(*(jnp.broadcast_to(v, s) for v, s in zip(scalars, shapes))))[0]

        return jax.vmap(one)(*points)

    return at


def _figures(samples: Samples, program: Callable[..., Any]) -> tuple[float, float]:
    """Mean and max bits of ``program`` (jitted, as users run it) on ``samples``; a point where it has no
    value counts 64 bits, as the search counts it."""
    errs = samples.jit_errors(program)
    vals = np.nan_to_num(errs[samples.valid], nan=64.0)
    return (float(vals.mean()), float(vals.max())) if vals.size else (float("inf"), float("inf"))


def _install(fn: Callable[..., Any], primal: Callable[..., Any], original: Callable[..., Any],
             partials: dict[int, Callable[..., Any]], names: list[str], by_keyword: bool,
             ) -> Callable[..., Any]:
    """``primal`` with the tangent ``sum_i partials[i](x) * dx_i`` (autodiff's derivative of ``original``
    for the arguments without an improved partial), with ``fn``'s signature."""
    @jax.custom_jvp
    def repaired(*args: Any) -> Any:
        return primal(*args)

    @repaired.defjvp
    def _repaired_jvp(primals: Sequence[Any], tangents: Sequence[Any]) -> tuple[Any, Any]:
        out = primal(*primals)  # the values from the primal program, bit for bit
        rest = [jnp.zeros_like(t) if k in partials else t for k, t in enumerate(tangents)]
        # autodiff's own derivative for the arguments left as written (zero when every one is repaired)
        total = jax.jvp(original, tuple(primals), tuple(rest))[1] if len(partials) < len(tangents) else 0.0
        for k, part in partials.items():
            total = total + part(*primals) * tangents[k]
        return out, jnp.broadcast_to(total, jnp.shape(out)).astype(jnp.result_type(out))

    @functools.wraps(fn)
    def improved(*args: Any, **kwargs: Any) -> Any:
        if by_keyword:
            bound = dict(zip(names, args))
            bound.update(kwargs)
            return repaired(*(bound[n] for n in names))
        return repaired(*args)

    return improved


def _status(partials: list[Partial], value: Improvement | None) -> str:
    """One line: which partials improved (before -> after bits), else why none did."""
    better = [p for p in partials if p.improved and p.after is not None]
    parts = [f"d/d{p.argument} mean {p.before[0]:.2f} -> {p.after[0]:.2f} bits, max {p.before[1]:.2f} -> "
             f"{p.after[1]:.2f} bits" for p in better if p.after is not None]
    head = ("improved the derivative: " + "; ".join(parts)) if parts else "no partial derivative improved"
    if not parts:
        fine = all(p.search is None and p.after is None and p.before[1] <= FIX_MAX_BITS for p in partials)
        head += (" (each is within the fix criterion as differentiated: nothing to repair)" if fine
                 else " (" + "; ".join(f"d/d{p.argument}: {p.status}" for p in partials) + ")")
    if value is not None:
        head += f"; value: {value.status}"
    return head


def _source(base: str, params: list[str], value_source: str, partial_sources: list[str]) -> str:
    """The pasteable program: the primal's and each partial's ``def``, then ``base`` as a
    ``jax.custom_jvp`` calling the primal, its ``defjvp`` the sum of partial times tangent."""
    primal = _defined(value_source)
    parts = [_defined(s) for s in partial_sources]
    taken = set(params)
    p_name, t_name = _fresh("primals", taken), _fresh("tangents", taken)
    dots = [_fresh(f"{p}_dot", taken | {p_name, t_name}) for p in params]
    args = ", ".join(params)
    tangent = " + ".join(f"{name}({args}) * {dot}" for name, dot in zip(parts, dots))
    blocks: list[str] = ["import jax\nimport jax.numpy as jnp\n"]
    for text in (value_source, *partial_sources):
        for block in _blocks(text):
            if block not in blocks:  # a helper (log_gamma_difference) two programs print once
                blocks.append(block)
    blocks.append(f"@jax.custom_jvp\ndef {base}({args}):\n    return {primal}({args})\n")
    unpack = (lambda names: f"({names[0]},)" if len(names) == 1 else ", ".join(names))
    blocks.append(f"@{base}.defjvp\ndef {base}_jvp({p_name}, {t_name}):\n"
                  f"    {unpack(params)} = {p_name}\n    {unpack(dots)} = {t_name}\n"
                  f"    return {primal}({args}), {tangent}\n")
    return "\n\n".join(b.rstrip("\n") for b in blocks) + "\n"


def _pasteable(found: str, own: str) -> str:
    """An improved partial's source; where the search's pick is the catalogue's rewrite of the partial
    (``name = jst.stabilize(partial)``), the partial's own ``def`` first, which that line reads."""
    if re.search(r"^def ", found, re.M):
        return found
    return f"import pytest_jaxstab as jst\n{own}\n{found}"


def _defined(source: str) -> str:
    """The name the last top-level ``def`` (or assignment) of ``source`` defines."""
    found = re.findall(r"^(?:def (\w+)\(|(\w+) = )", source, re.M)
    return (found[-1][0] or found[-1][1]) if found else "f"


def _blocks(source: str) -> list[str]:
    """``source``'s top-level definitions, one text each."""
    return [b.strip("\n") + "\n" for b in re.split(r"\n(?=\S)", source) if b.strip()]


def _fresh(name: str, taken: set[str]) -> str:
    while name in taken:
        name += "_"
    return name
