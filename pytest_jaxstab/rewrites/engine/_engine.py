"""The rewrite pass: find matches, then re-trace the jaxpr with each match replaced.

The pass is an interpreter in the style of JAX's "Writing custom interpreters": it walks the jaxpr and
binds each equation (under ``jax.make_jaxpr``), except that at the root of a match it calls the rule's
replacement instead and skips the swallowed equations. Replacements run inside the root equation's
source context, so every equation they create points at the user's line. Sub-jaxprs (``jit``, ``scan``,
``while``, ``cond``, the primal body of ``custom_jvp_call``/``custom_vjp_call``) are rewritten
recursively and re-bound with the same primitive and parameters: a custom derivative rule is kept as
it is, attached to the rewritten primal body (it still differentiates the same mathematical function).

Order: equations are visited from the last to the first, so the largest enclosing pattern wins
(``x - log(sum(exp(x)))`` is one ``log_softmax``, not a ``logsumexp`` inside a subtraction); at one
root, rules are tried in the order given (the catalogue's order puts ``softplus`` before ``log1p``).
Passes repeat until nothing matches (a fixed point), at most ``max_passes`` times.

Structural rules (``Rule(matcher=...)``, e.g. ``reduce_into_scan``) run in a second phase, after the
pattern rules have reached their fixed point: they restructure code that is already rewritten (a
loss fused into a ``scan`` keeps the stability rewrites of its terms and of the scan's body, which a
fused region would otherwise hide from the pattern rules). A structural match may produce several
results and run before its root (``Match.extra_outputs``, ``Match.at``).

Lowerings (``_lowering``) run last, once, on a program some rule changed: what one JAX generation
needs for a replacement's primitive to differentiate as well as what it replaced (``expm1`` on 0.10).
"""

from __future__ import annotations

import dataclasses
import functools
import gc
import math
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp

from ... import _compat
from ..._primitives import CALLS, CUSTOM_DERIVATIVES
from ._lowering import LOWERINGS
from ._match import SCOPE_PREFIX, Graph, Match, _final
from ._render import render, render_jaxpr, shorten
from ._rule import Rule

__all__ = ["Applied", "Explanation", "rewrite_jaxpr"]


@dataclasses.dataclass(frozen=True)
class Applied:
    """One rewrite that fired: rule name, the user's ``file:line``, and the expression before/after;
    ``derivative_only``: the rule keeps the value bit for bit and changes only the derivative."""

    rule: str
    location: str | None
    before: str
    after: str
    path: tuple[str, ...] = ()
    derivative_only: bool = False

    def __str__(self) -> str:
        where = self.location or "<no user frame>"
        inside = f" (inside {' > '.join(self.path)})" if self.path else ""
        only = " (derivative only)" if self.derivative_only else ""
        return f"{where}: {self.rule}{only}{inside}\n    - {self.before}\n    + {self.after}"


class Explanation(list[Applied]):
    """The rewrites :func:`jst.explain` found, in program order; ``str()`` is a short before/after."""

    def __str__(self) -> str:
        if not self:
            return "no rewrite applies"
        return "\n".join(str(a) for a in self)

    @property
    def rules(self) -> list[str]:
        """Names of the rules that fired, in order, with repeats."""
        return [a.rule for a in self]


def _gc_paused(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Runs ``fn`` with Python's cyclic garbage collector paused (the outermost call only).

    The pass allocates a few small objects per equation (variables, equations, match bindings), none
    of them garbage until the pass ends; every collection the allocations trigger walks the whole
    growing heap, which made the pass superlinear (a 10x larger program took 12-13x the time; 10.8x
    with the collector paused, bench_rewrite.py). Cycles the pass leaves are collected afterwards.
    """

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if not gc.isenabled():  # a nested call, or a caller that manages the collector itself
            return fn(*args, **kwargs)
        gc.disable()
        try:
            return fn(*args, **kwargs)
        finally:
            gc.enable()

    return wrapper


@_gc_paused
def rewrite_jaxpr(closed: Any, rules: Sequence[Rule], *, describe: bool = False, max_passes: int = 8,
                  path: tuple[str, ...] = (), enclosing: _compat.SourceLine | None = None,
                  lowering: bool = False) -> tuple[Any, list[Applied]]:
    """Rewrite a closed jaxpr to a fixed point; returns ``(new_closed_jaxpr, applied)``.

    ``describe=True`` also renders each rewrite's expression before and after (``Applied.before``,
    ``Applied.after``); ``jst.explain`` asks for it, ``jst.stabilize`` does not. ``lowering=True``
    (the lowering pass, ``_lowering``): ``rules`` may match replacements' equations too.
    """
    if not rules:
        return closed, []
    kw: dict[str, Any] = {"describe": describe, "max_passes": max_passes, "path": path,
                          "enclosing": enclosing, "lowering": lowering}
    if lowering:
        closed, applied, _ = _fixed_point(closed, rules, None, **kw)
        return closed, applied
    patterns = [r for r in rules if r.matcher is None]
    structural = [r for r in rules if r.matcher is not None]
    if patterns and structural:  # two phases (module docstring): pattern rules first
        closed, first, graph = _fixed_point(closed, patterns, None, **kw)
        # the pattern phase's last graph is the program the structural phase starts from
        closed, second, _ = _fixed_point(closed, structural, graph, **kw)
        applied = first + second
    else:
        closed, applied, _ = _fixed_point(closed, rules, None, **kw)
    if applied and LOWERINGS and not path:  # once, on the whole program (``_lowering``); unlisted
        closed, _ = rewrite_jaxpr(closed, LOWERINGS, max_passes=1, enclosing=enclosing, lowering=True)
    return closed, applied


def _fixed_point(closed: Any, rules: Sequence[Rule], graph: Graph | None, *, describe: bool,
                 max_passes: int, path: tuple[str, ...], enclosing: _compat.SourceLine | None,
                 lowering: bool = False) -> tuple[Any, list[Applied], Graph | None]:
    """Passes of ``rules`` until nothing matches: ``(closed, applied, graph)``, ``graph`` the index
    of the returned program when the last pass built one (None otherwise). ``graph``: the index of
    ``closed`` if the caller has it (a pass with no match leaves its graph unchanged)."""
    applied: list[Applied] = []
    if graph is not None:
        graph.dirty = None  # other rules than the pass that left it: each equation is new to them
    for _ in range(max_passes):
        g = graph if graph is not None else Graph(closed, set() if lowering else None)
        graph = None
        plan = _plan(g, rules)
        sub_new: dict[int, dict[_compat.Site, Any]] = {}
        sub_applied: dict[int, list[Applied]] = {}
        for i, eqn in enumerate(g.eqns):
            if i in g.claimed or (g.dirty is not None and i not in g.dirty):
                continue
            subs = _compat.subjaxprs(eqn)
            if not subs:
                continue
            src = _compat.refine_source(enclosing, eqn)
            # a custom derivative's primal body is never differentiated by JAX: a rule that changes
            # only the derivative would change nothing there (and be reported for nothing)
            inner = ([r for r in rules if not r.derivative_only]
                     if _compat.primitive_name(eqn) in CUSTOM_DERIVATIVES else rules)
            for site, sub in subs:
                new_sub, got = rewrite_jaxpr(sub, inner, describe=describe, max_passes=max_passes,
                                             path=(*path, _compat.eqn_name(eqn)), enclosing=src,
                                             lowering=lowering)
                if got and _rebindable(eqn, new_sub):
                    sub_new.setdefault(i, {})[site] = new_sub
                    sub_applied.setdefault(i, []).extend(got)
        if not plan and not sub_new:
            return closed, applied, g
        spliced = None
        if not sub_new and not any(m.extra_outputs or m.at is not None for _, m in plan.values()):
            claimed: set[int] = set()
            touched: set[Any] = set()
            spliced = _splice(g, plan, describe, path, enclosing, claimed, touched)
            if spliced is not None and _only_derivatives(plan):
                applied.extend(spliced[1])
                return spliced[0], applied, None
            if spliced is not None:  # the next pass's index, its replacements already known
                graph = Graph(spliced[0], claimed)
                graph.dirty = _downstream(graph, touched)
        closed, fired = spliced or _retrace(g, plan, sub_new, sub_applied, describe, path, enclosing)
        applied.extend(fired)
        if not plan:
            break  # only sub-jaxprs changed; they are already at their own fixed point
    return closed, applied, None


def _downstream(g: Graph, touched: set[Any]) -> set[int]:
    """The equations of a spliced program a new pass must try again: those reading, at any distance,
    a value whose producer or readers the splice changed (``touched``: the replaced equations'
    operands and results), and those values' producers. A match reads its root's operands down to the
    program's inputs and the use counts of what it swallows, so every other equation would match as
    it did not in the pass before: a program's one rewrite no longer costs a second walk of all of it
    (issue 48)."""
    atoms = set(touched)
    dirty: set[int] = set()
    for i, eqn in enumerate(g.eqns):
        if any(not _compat.is_literal(a) and a in atoms for a in eqn.invars):
            dirty.add(i)
            atoms.update(eqn.outvars)
    dirty.update(j for a in touched if (j := g.producer.get(a)) is not None)
    return dirty


def _only_derivatives(plan: dict[int, tuple[Rule, Match]]) -> bool:
    """Whether the pass is already at its fixed point after this plan: every match a derivative-only
    rule's on its root equation alone (``tanh``, ``logistic``: the same primitive computes the
    value). Such a match claims no equation another root could swallow, and every other equation was
    tried on this same program, so a new pass would try them again for nothing (a network's every
    ``tanh`` cost the pass a second walk of the program; issue 48)."""
    return all(rule.derivative_only and m.swallowed <= {i} for i, (rule, m) in plan.items())


def _rebindable(eqn: Any, new_sub: Any) -> bool:
    # Loop and branch bodies must stay const-free; a replacement that created array constants is
    # only re-bound where the primitive takes a closed jaxpr (calls and custom rules).
    if not new_sub.consts:
        return True
    name = _compat.primitive_name(eqn)
    return name in CALLS or name in CUSTOM_DERIVATIVES


def _plan(g: Graph, rules: Sequence[Rule]) -> dict[int, tuple[Rule, Match]]:
    # Index rules by the primitives their roots can be, keeping the catalogue order per primitive:
    # most equations are then tried against no rule at all.
    by_prim: dict[str, list[Rule]] = {}
    anywhere: list[Rule] = []
    for rule in rules:
        prims = rule.root_primitives
        if prims is None:
            anywhere.append(rule)
        else:
            for p in prims:
                by_prim.setdefault(p, []).append(rule)
    order = {id(r): k for k, r in enumerate(rules)}
    # The first look (``Rule.may_match``) depends on the primitive and its operands' heads two
    # levels deep only: a program repeats few of those, so each is asked once per pass.
    first_look: dict[Any, list[Rule]] = {}
    # a primitive only matcher rules without a ``first_look`` root at (the structural phase's) needs
    # no first look: they take every equation of it, so the operands' heads are not read for them
    blind: dict[str, list[Rule]] = {}
    if all(r.matcher is not None and r.first_look is None for r in anywhere):
        for p, rs in by_prim.items():
            if all(r.matcher is not None and r.first_look is None for r in rs):
                blind[p] = sorted([*rs, *anywhere], key=lambda r: order[id(r)]) if anywhere else rs
    plan: dict[int, tuple[Rule, Match]] = {}
    dirty = g.dirty
    for i in range(len(g.eqns) - 1, -1, -1):
        if i in g.claimed or (dirty is not None and i not in dirty):
            continue
        eqn = g.eqns[i]
        name = _compat.primitive_name(eqn)
        if name not in by_prim and not anywhere:
            continue
        candidates = blind.get(name)
        if candidates is None:
            key = (name, tuple(g.head2(a) for a in eqn.invars))
            candidates = first_look.get(key)
            if candidates is None:
                candidates = [r for r in by_prim.get(name, []) if r.may_match(*key)]
                if anywhere:
                    candidates = sorted([*candidates, *anywhere], key=lambda r: order[id(r)])
                first_look[key] = candidates
        for rule in candidates:
            m = rule.find(g, i)
            if m is not None:
                g.claimed |= m.swallowed
                g.claimed.add(i)
                g.taken |= m.swallowed
                g.taken.add(i)
                plan[i] = (rule, m)
                break
    return plan


def _abstract(atom: Any) -> jax.ShapeDtypeStruct:
    a = _compat.aval(atom)
    return jax.ShapeDtypeStruct(a.shape, a.dtype, weak_type=getattr(a, "weak_type", False))


def _retrace(g: Graph, plan: dict[int, tuple[Rule, Match]], sub_new: dict[int, dict[Any, Any]],
             sub_applied: dict[int, list[Applied]], describe: bool, path: tuple[str, ...],
             enclosing: _compat.SourceLine | None) -> tuple[Any, list[Applied]]:
    closed = g.closed
    fired: list[Applied] = []

    def run(*args: Any) -> list[Any]:
        env: dict[Any, Any] = {}

        def read(a: Any) -> Any:
            return _compat.literal_value(a) if _compat.is_literal(a) else env[a]

        def bind_plain(eqn: Any, params: Any = None) -> None:
            outs = _compat.bind(eqn, [read(a) for a in eqn.invars], params)
            for v, o in zip(eqn.outvars, outs):
                env[v] = o

        for v, c in zip(_compat.constvars(closed), closed.consts):
            env[v] = c
        for v, a in zip(_compat.invars(closed), args):
            env[v] = a

        def apply(i: int) -> None:
            rule, m = plan[i]
            eqn = g.eqns[i]
            operands = _operand_names(m)
            kwargs = {k: (read(v) if k in operands else v) for k, v in m.captures.items()}
            res = _replace(eqn, rule, kwargs, m.extra_outputs, wide=_accumulated(g, m))
            if res is None:  # the replacement refused: compute the swallowed equations as written
                for j in sorted(m.swallowed | {i}):
                    bind_plain(g.eqns[j])
                return
            env[eqn.outvars[0]], extras = res
            env.update(zip(m.extra_outputs, extras))
            src = _compat.refine_source(enclosing, eqn)
            fired.append(Applied(rule.name, None if src is None else str(src),
                                 render(g, i, m) if describe else "",
                                 _render_after(rule, m, kwargs) if describe else "", path,
                                 rule.derivative_only))

        # Matches that run before their root (Match.at), by the equation they run after.
        early: dict[int, list[int]] = {}
        for i, (_, m) in plan.items():
            if m.at is not None and m.at != i:
                early.setdefault(m.at, []).append(i)
        deferred = {root for roots in early.values() for root in roots}
        # only what a match swallowed is skipped: ``g.claimed`` also holds the equations of earlier
        # replacements (final scopes), which are kept and must be bound
        swallowed = {j for _, m in plan.values() for j in m.swallowed}
        for i, eqn in enumerate(g.eqns):
            if i in plan and i not in deferred:
                apply(i)
            elif i in swallowed:
                pass
            else:
                bind_plain(eqn, _compat.replace_subjaxprs(eqn, sub_new[i]) if i in sub_new else None)
                fired.extend(sub_applied.get(i, ()))
            for root in early.get(i, ()):
                apply(root)
        return [read(a) for a in _compat.outvars(closed)]

    new = jax.make_jaxpr(run)(*[_abstract(v) for v in _compat.invars(closed)])
    return new, fired


def _splice(g: Graph, plan: dict[int, tuple[Rule, Match]], describe: bool, path: tuple[str, ...],
            enclosing: _compat.SourceLine | None, claimed: set[int] | None = None,
            touched: set[Any] | None = None) -> tuple[Any, list[Applied]] | None:
    """The rewritten jaxpr built by splicing each replacement's equations in place of its match.

    Unchanged equations are reused as they are (only operands that now come from a replacement are
    renamed), so the cost is the replacements' own traces rather than re-binding the whole program:
    the fast path for pattern rules at this level. Returns None when a replacement refuses to apply
    or creates array constants, and the caller re-traces instead. ``claimed``, if given, receives
    the positions of the new program's equations in a rule's scope (what ``Graph`` would find by
    reading every equation's name stack, known here without reading them); ``touched``, the values
    whose producer or readers changed: the replaced equations' operands and results (``_downstream``).
    """
    reps: dict[int, tuple[_Replacement, list[str]]] = {}
    for i, (rule, m) in plan.items():
        eqn = g.eqns[i]
        names = _operand_names(m)
        static = {k: v for k, v in m.captures.items() if k not in names}
        wide = _accumulated(g, m)
        key = _rep_key(rule, names, [_compat.aval(m.atoms[k]) for k in names], static,
                       _compat.aval(eqn.outvars[0]), wide)
        rep = _REP_CACHE.get(key) if key is not None else None
        if rep is None:
            rep = _trace_replacement(eqn, rule, m, names, static, wide)
            if rep is None:
                return None
            if key is not None:
                if len(_REP_CACHE) >= _REP_CACHE_SIZE:
                    _REP_CACHE.pop(next(iter(_REP_CACHE)))
                _REP_CACHE[key] = rep
        reps[i] = (rep, names)

    swallowed = set().union(*(m.swallowed for _, m in plan.values()))
    subst: dict[Any, Any] = {}
    literal, new_var, with_operands = _compat.Literal, _compat.new_var, _compat.with_operands

    def sub(a: Any) -> Any:
        return a if isinstance(a, literal) else subst.get(a, a)

    eqns: list[Any] = []
    new_constvars: list[Any] = []
    new_consts: list[Any] = []
    fired: list[Applied] = []
    scoped = claimed if claimed is not None else set()
    for j, eqn in enumerate(g.eqns):
        if j in reps:
            rule, m = plan[j]
            rep, names = reps[j]
            # the replacement's variables by slot: its inputs (this match's operands), its
            # constants, then each equation's outputs in order
            slots: list[Any] = [sub(m.atoms[k]) for k in names]
            for v, c in zip(rep.constvars, rep.consts):
                slots.append(new_var(_compat.aval(v)))
                new_constvars.append(slots[-1])
                new_consts.append(c)
            scoped.update(len(eqns) + k for k in rep.scoped)
            for e, ins, outs in rep.eqns:
                invars = [a if k < 0 else slots[k] for k, a in ins]
                outvars = []
                for k, a in outs:
                    if k >= 0:
                        slots.append(new_var(a))
                        a = slots[-1]
                    outvars.append(a)
                # a cached replacement was traced at another root: give it this root's user line
                eqns.append(with_operands(e, invars, outvars, traceback_of=eqn))
            k, out = rep.out
            subst[eqn.outvars[0]] = out if k < 0 else slots[k]
            if touched is not None:
                touched.update(a for a in (*slots, subst[eqn.outvars[0]]) if not isinstance(a, literal))
            src = _compat.refine_source(enclosing, eqn)
            after = shorten(render_jaxpr(rep.closed, names)) if describe else ""
            before = render(g, j, m) if describe else ""
            fired.append(Applied(rule.name, None if src is None else str(src), before, after, path,
                                 rule.derivative_only))
        elif j in swallowed:
            continue
        else:
            if j in g.claimed:  # kept, and claimed before the plan: in a rule's scope
                scoped.add(len(eqns))
            if subst and any(not isinstance(a, literal) and a in subst for a in eqn.invars):
                eqns.append(with_operands(eqn, [sub(a) for a in eqn.invars]))
            else:
                eqns.append(eqn)
    outvars = [sub(a) for a in _compat.outvars(g.closed)]
    if touched is not None:  # the operands of every equation the plan removed
        touched.update(b for j in (*reps, *swallowed) for a in g.eqns[j].invars
                       if not isinstance(b := sub(a), literal))
    return _compat.build_closed(g.closed, eqns, outvars, new_constvars, new_consts), fired


@dataclasses.dataclass(frozen=True)
class _Replacement:
    """A traced replacement, laid out for splicing. Variables are numbered by slot: the inputs, the
    constants, then every equation output in order. ``eqns``: per equation, its operands as
    ``(slot, None)`` or ``(-1, literal)`` and its outputs as ``(slot, aval)`` or ``(-1, dropvar)``;
    ``out``: the result as ``(slot, None)`` or ``(-1, literal)``; ``scoped``: positions of the
    equations in a rule's scope."""

    closed: Any
    constvars: tuple[Any, ...]
    consts: tuple[Any, ...]
    eqns: tuple[tuple[Any, tuple[tuple[int, Any], ...], tuple[tuple[int, Any], ...]], ...]
    out: tuple[int, Any]
    scoped: frozenset[int]


def _trace_replacement(eqn: Any, rule: Rule, m: Match, names: list[str], static: dict[str, Any],
                       wide: bool = False) -> _Replacement | None:
    """The replacement of match ``m`` traced on its operands' types; None if it refused."""
    refused: list[bool] = []

    def fn(*xs: Any) -> Any:
        res = _replace(eqn, rule, {**dict(zip(names, xs)), **static}, wide=wide)
        if res is None:
            refused.append(True)
            out = _compat.aval(eqn.outvars[0])
            return jnp.zeros(out.shape, out.dtype)
        return res[0]

    closed = jax.make_jaxpr(fn)(*[_abstract(m.atoms[k]) for k in names])
    if refused:
        return None
    slot: dict[Any, int] = {}
    for v in (*_compat.invars(closed), *_compat.constvars(closed)):
        slot[v] = len(slot)

    def ref(a: Any) -> tuple[int, Any]:
        return (-1, a) if _compat.is_literal(a) else (slot[a], None)

    laid_out = []
    for e in _compat.eqns(closed):
        ins = tuple(ref(a) for a in e.invars)
        outs: list[tuple[int, Any]] = []
        for o in e.outvars:
            if _compat.is_dropvar(o):
                outs.append((-1, o))
            else:
                slot[o] = len(slot)
                outs.append((slot[o], _compat.aval(o)))
        laid_out.append((e, ins, tuple(outs)))
    (out,) = _compat.outvars(closed)
    scoped = frozenset(k for k, e in enumerate(_compat.eqns(closed)) if _final(e))
    return _Replacement(closed, tuple(_compat.constvars(closed)), tuple(closed.consts),
                        tuple(laid_out), ref(out), scoped)


# Replacement jaxprs by (rule, operand types, static captures, result type): a program repeating a
# pattern (a layer applied many times) traces each replacement once. Bounded, oldest dropped first.
_REP_CACHE: dict[Any, _Replacement] = {}
_REP_CACHE_SIZE = 512


def _rep_key(rule: Rule, names: list[str], avals: list[Any], static: dict[str, Any], out: Any,
             wide: bool = False) -> Any:
    key = (id(rule), rule, tuple(names),
           tuple((tuple(a.shape), a.dtype, getattr(a, "weak_type", False)) for a in avals),
           tuple(sorted(static.items())), (tuple(out.shape), out.dtype), wide)
    try:
        hash(key)
    except TypeError:  # an unhashable captured parameter: trace every time
        return None
    return key


def _operand_names(m: Match) -> list[str]:
    """The captures that are operands (arrays at run time), in capture order; the others (params,
    constants) are static Python values passed to the replacement as they are."""
    return [k for k, v in m.captures.items() if k in m.atoms and m.atoms[k] is v]


def _accumulated(g: Graph, m: Match) -> bool:
    """Whether match ``m`` saw through a low-precision sum's float32 accumulation
    (``Graph.is_accumulation_convert``): then its replacement is computed in float32 (``_replace``)."""
    return any(_compat.primitive_name(g.eqns[j]) == "convert_element_type"
               and g.is_accumulation_convert(g.eqns[j]) for j in m.swallowed)


def _widened(kwargs: dict[str, Any]) -> dict[str, Any]:
    """float16/bfloat16 array operands as float32 (the other captures as they are)."""
    def up(v: Any) -> Any:
        dtype = getattr(v, "dtype", None)
        if dtype is not None and getattr(dtype, "name", "") in ("float16", "bfloat16"):
            return jax.lax.convert_element_type(v, jnp.float32)
        return v
    return {k: up(v) for k, v in kwargs.items()}


def _replace(eqn: Any, rule: Rule, kwargs: dict[str, Any], extra_outputs: Sequence[Any] = (),
             wide: bool = False) -> tuple[Any, list[Any]] | None:
    """The replacement's value for the root (and for ``extra_outputs``), or None to skip the match.

    ``wide``: the match saw through the float32 accumulation of a float16/bfloat16 sum. The stable
    form is then computed in float32 from the low-precision operands and rounded once to the root's
    dtype: the program as written kept its sum in float32, and a form rounding its own steps to the low
    dtype (``max + log1p(sum - 1)`` cancels near 0) could be worse than it where it was right.
    """
    target = _compat.aval(eqn.outvars[0])
    with _compat.user_context(eqn), jax.named_scope(f"{SCOPE_PREFIX}{rule.name}"):
        out = rule.replacement(**(_widened(kwargs) if wide else kwargs))
        extras: list[Any] = []
        if extra_outputs:
            out, values = out
            values = list(values)
            if len(values) != len(extra_outputs):
                return None
            for v, val in zip(extra_outputs, values):
                val, want = jnp.asarray(val), _compat.aval(v)
                if val.shape != want.shape:
                    return None
                extras.append(val if val.dtype == want.dtype
                              else jax.lax.convert_element_type(val, want.dtype))
        out = jnp.asarray(out)
        if out.shape != target.shape:
            if out.size == math.prod(target.shape):  # keepdims glue: same elements, unit axes
                out = jnp.reshape(out, target.shape)
            elif out.ndim == len(target.shape):
                try:
                    out = jnp.broadcast_to(out, target.shape)
                except ValueError:
                    return None
            else:
                return None
        if out.dtype != target.dtype:
            out = jax.lax.convert_element_type(out, target.dtype)
    return out, extras


# ----------------------------------------------------------------------------------- rendering
def _render_after(rule: Rule, m: Match, kwargs: dict[str, Any]) -> str:
    names = _operand_names(m)
    static = {k: v for k, v in kwargs.items() if k not in names}
    avals = [_abstract(m.atoms[k]) for k in names]
    def root_value(*xs: Any) -> Any:  # with extra outputs, only the root's value is rendered
        out = rule.replacement(**dict(zip(names, xs)), **static)
        return out[0] if m.extra_outputs else out

    try:
        closed = jax.make_jaxpr(root_value)(*avals)
    except Exception as exc:  # pragma: no cover - rendering must never break explain
        return f"<{rule.name}: {type(exc).__name__}>"
    return shorten(render_jaxpr(closed, names))
