"""``jst.verify_rule(rule)``: every alternative of a rule's pattern, checked for soundness.

As Herbie tests its rule database, each alternative of the pattern gets the smallest program that
matches it (the alternatives: concrete trees that take every branch of every ``any_of`` at least
once, ``rewrites.engine._instances.alternatives``), built from the pattern; an alternative that cannot
be built is looked for in the rule's own examples (``Rule.example`` and ``Rule.examples``). Each
program is then run in a few contexts — under ``jit``; rewritten as a batched program
(``stabilize(vmap(f))``); its gradient (``grad`` of the sum, the derivative program of the stabilised
function against the exact derivative of the original); inside a sum; with the matched intermediate
also returned (a use outside the match) — as written and through ``jst.stabilize`` with the rule
alone (and, in the ``jit`` context, with the alternative alone), on inputs drawn in the rule's
domain. Every context runs batched over its inputs (one compilation per alternative), so each is also
``vmap(stabilize(f))``; where ``grad`` and the sum are both asked, the sum's value comes from the
gradient's program (``value_and_grad``). The exact result of the program as written
(``jst.oracles.evaluate``) scores both.

An element is **unsound** when the exact result is finite and proven and the rewritten program

- gives a non-finite value where the original's is finite, or
- loses more than :data:`ROUNDING_BITS` beyond what the original loses, and more than
  :data:`ROUNDING_BITS` + :data:`SLACK_BITS` in all, beyond what the problem's conditioning at that
  input explains (docs/architecture.md, "Two lenses: stability and accuracy").

Why these numbers: a stable form rounds a few more (or fewer) times than the form it replaces, so at
one input it may be a few ulps further from the exact result than the original happened to be:
``SLACK_BITS = 3`` (8 ulps) of error anyone may have, and ``ROUNDING_BITS = 2`` (a factor 4) more than
the original. A wrong identity (``exp(a)·exp(a) -> exp(a/2)``) is off by 20 bits and more at ordinary
inputs. Where the problem amplifies its inputs' rounding by ``2^c`` ulps (a variance of clustered data,
a log near 1), both variants may land anywhere within ``c`` bits: the excess is measured beyond ``c``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .. import _compat
from .._dtypes import from_ordinal, to_ordinal
from .._errors import ArgumentTypeError, UnsupportedPrimitive
from ..oracles import error_bits, evaluate
from ..rewrites.engine._engine import rewrite_jaxpr
from ..rewrites.engine._instances import (
    ATTEMPTS,
    _x64,
    alternative_rule,
    alternatives,
    build,
    describe_program,
)
from ..rewrites.engine._rule import Rule
from ._conditioning import conditioning_ulps, reduction_terms

__all__ = ["CONTEXTS", "ROUNDING_BITS", "SLACK_BITS", "AlternativeReport", "Verification", "verify_rule"]

#: Bits a rewritten element may lose beyond the original's (see the module docstring).
ROUNDING_BITS = 2.0
#: Bits any element may lose (a few ulps of a stable form's own rounding).
SLACK_BITS = 3.0
#: The contexts an alternative's program can run in (``verify_rule(contexts=...)``): all of them by
#: default. Every context runs under ``jit`` and batched over its inputs (``vmap(stabilize(f))``);
#: ``vmap`` is the other order, the rewrite applied to the batched program (``stabilize(vmap(f))``).
CONTEXTS = ("jit", "vmap", "grad", "sum", "shared")
#: The batch of the ``vmap`` context's program.
_VMAP_BATCH = 3
_DEFAULT_DOMAIN = (-1e4, 1e4)


@dataclasses.dataclass
class AlternativeReport:
    """One alternative of a rule's pattern: ``status`` is "sound", "unsound", "not built" (no program
    matches it: neither built from the pattern nor among the rule's examples) or "not checked" (its
    program could not be evaluated exactly: ``detail`` says why)."""

    index: int
    pattern: str
    status: str
    source: str = ""  # "pattern" (built from it) or "example N"
    program: str = ""
    contexts: list[str] = dataclasses.field(default_factory=list)  # where the rule fired and was judged
    detail: str = ""


@dataclasses.dataclass
class Verification:
    """What :func:`verify_rule` found: one report per alternative. ``ok``: every alternative was
    built and none is unsound; ``str()`` lists the failures with their programs."""

    rule: str
    alternatives: list[AlternativeReport]

    @property
    def unsound(self) -> list[AlternativeReport]:
        return [a for a in self.alternatives if a.status == "unsound"]

    @property
    def not_built(self) -> list[AlternativeReport]:
        return [a for a in self.alternatives if a.status == "not built"]

    @property
    def ok(self) -> bool:
        return not self.unsound and not self.not_built

    def __str__(self) -> str:
        n = len(self.alternatives)
        sound = sum(a.status == "sound" for a in self.alternatives)
        lines = [f"rule {self.rule!r}: {sound} of {n} alternatives sound"]
        for a in self.alternatives:
            if a.status == "sound":
                continue
            lines.append(f"  alternative {a.index} [{a.status}] {a.pattern}")
            if a.detail:
                lines.append("    " + a.detail.replace("\n", "\n    "))
            if a.program:
                lines.append("    program (" + a.source + "):\n      " + a.program.replace("\n", "\n      "))
        return "\n".join(lines)


@dataclasses.dataclass(frozen=True)
class _Program:
    fn: Callable[..., Any]
    avals: tuple[Any, ...]
    inner: Callable[..., Any] | None
    x64: bool
    domain: Any
    source: str
    text: str


def verify_rule(rule: Rule, *, examples: Sequence[Callable[..., Any]] = (), inputs: int = 12, seed: int = 0,
                contexts: Sequence[str] = CONTEXTS, companions: Sequence[Rule] = (),
                alternatives: Sequence[int] | None = None) -> Verification:
    """Check every alternative of ``rule``'s pattern for soundness (module docstring): the rewritten
    program is never worse than the program as written beyond rounding, in every context.

    Args:
      rule: a :class:`jst.rewrites.Rule` (a user's or the catalogue's).
      examples: more functions of float32 vectors of shape (8,) made of the pattern, for alternatives
        that cannot be built from the pattern (beyond ``rule.example`` and ``rule.examples``).
      inputs: inputs drawn per context, in the rule's ``example_domain`` (default ``(-1e4, 1e4)``).
      seed: the draws' seed (the result is reproducible).
      contexts: a subset of :data:`CONTEXTS`.
      companions: rules applied together with ``rule`` (it is judged where it fires among them): for
        a composable rule whose replacement other rules continue (``log(where(c, a, b))`` becomes
        ``where(c, log a, log b)``, then each log its stable form), the catalogue it composes with.
      alternatives: the indices of the alternatives to check (None: all), in the order
        ``Verification.alternatives`` lists them.

    Returns:
      A :class:`Verification`; ``.ok`` is False when an alternative is unsound or has no program.

    Example:
      >>> import jax.numpy as jnp
      >>> from pytest_jaxstab.rewrites import Rule, pattern as p
      >>> x = p.var("x")
      >>> log_sqrt = Rule("my_log_sqrt", p.op("log", p.op("sqrt", x)), lambda x: 0.5 * jnp.log(x))
      >>> jst_verdict = verify_rule(log_sqrt, inputs=4, contexts=("jit",))
      >>> jst_verdict.ok, [a.status for a in jst_verdict.alternatives]
      (True, ['sound'])
    """
    if not isinstance(rule, Rule):
        raise ArgumentTypeError(f"verify(rule={rule!r}): expected a jst.rewrites.Rule")
    unknown = [c for c in contexts if c not in CONTEXTS]
    if unknown:
        raise ArgumentTypeError(f"verify(contexts=...): unknown {unknown}; choose from {list(CONTEXTS)}")
    # the programs mix float32 with float64 constants as x64 code does: standard promotion, whatever
    # the caller's (a strict test configuration would refuse the very programs under test)
    with jax.numpy_dtype_promotion("standard"):
        return _verify(rule, examples, inputs, seed, contexts, companions, alternatives)


def _verify(rule: Rule, examples: Sequence[Any], inputs: int, seed: int, contexts: Sequence[str],
            companions: Sequence[Rule], chosen: Sequence[int] | None) -> Verification:
    hand = _examples(rule, examples)
    trees: list[Any] = alternatives(rule.pattern) if rule.pattern is not None else [None]
    reports = []
    for index, tree in enumerate(trees):
        if chosen is not None and index not in chosen:
            continue
        alt = alternative_rule(rule, tree) if tree is not None else rule
        label = tree.describe() if tree is not None else f"{rule.name} (structural matcher)"
        program = _program_for(alt, tree, hand, rule)
        if program is None:
            reports.append(AlternativeReport(index, label, "not built", detail=(
                "no program matches this alternative: none could be built from the pattern and none of "
                "the rule's examples matches it; add one (Rule(examples=(fn, ...)) or verify(examples=))")))
            continue
        reports.append(_judge(index, label, rule, alt, program, inputs, seed, contexts, tuple(companions)))
    return Verification(rule.name, reports)


def _examples(rule: Rule, extra: Sequence[Any]) -> list[tuple[Callable[..., Any], Any, Any]]:
    out = []
    if rule.example is not None:
        out.append((rule.example, tuple(rule.example_shapes), rule.example_domain))
    for ex in (*rule.examples, *extra):
        if callable(ex):
            out.append((ex, tuple(rule.example_shapes), rule.example_domain))
        else:  # (fn, shapes, domain); a shape may be a jax.ShapeDtypeStruct (a float64 or int argument)
            fn, shapes, domain = ex
            out.append((fn, tuple(shapes), domain))
    return out


def _program_for(alt: Rule, tree: Any, hand: list[Any], rule: Rule) -> _Program | None:
    domain = _domain(rule.example_domain)
    if tree is not None:
        for attempt in range(ATTEMPTS):
            inst = build(tree, attempt)
            if inst is not None and _fires(alt.name, inst.fn, [alt], inst.avals(), inst.x64):
                return _Program(inst.fn, tuple(inst.avals()), inst.inner, inst.x64, domain, "pattern",
                                describe_program(inst))
    for k, (fn, shapes, dom) in enumerate(hand):
        avals = tuple(s if isinstance(s, jax.ShapeDtypeStruct)
                      else jax.ShapeDtypeStruct(tuple(s), jnp.float32)
                      for s in shapes)
        wide = any(jnp.dtype(a.dtype) == jnp.float64 for a in avals)
        for x64 in ((True,) if wide else (False, True)):
            if _fires(alt.name, fn, [alt], avals, x64):
                with _x64(x64):
                    text = str(jax.make_jaxpr(fn)(*avals))
                return _Program(fn, avals, None, x64, dom, f"example {k}", text)
    return None


def _domain(d: Any) -> Any:
    if isinstance(d, tuple) and len(d) == 2 and all(isinstance(v, (int, float)) for v in d):
        return (float(d[0]), float(d[1]))
    return d


def _judge(index: int, label: str, rule: Rule, alt: Rule, prog: _Program, n: int, seed: int,
           contexts: Sequence[str], companions: tuple[Rule, ...]) -> AlternativeReport:
    report = AlternativeReport(index, label, "sound", prog.source, prog.text)
    rng = np.random.default_rng(seed + 7919 * index)
    others = [c for c in companions if c.name != rule.name]
    with_ = f" with {len(others)} companion rules" if others else " alone"
    try:
        with _x64(prog.x64):
            prepared, with_value = [], "grad" in contexts and "sum" in contexts
            for context in contexts:
                sets = [(f"rule {rule.name!r}{with_}", [rule, *others])]
                if context == "jit" and alt is not rule:
                    sets.append((f"this alternative of {rule.name!r}{with_}", [alt, *others]))
                if context == "sum" and any(c.with_value for c in prepared):
                    continue  # judged from the grad context's program (value_and_grad)
                ctx = _prepare(context, prog, rule.name, sets, n, rng, with_value and context == "grad")
                if ctx is not None:
                    prepared.append(ctx)
            report.contexts = [x for c in prepared for x in (c.context, *(["sum"] if c.with_value else []))]
            if not prepared:
                report.status, report.detail = "not checked", "the rule fired in no context"
                return report
            problem = _run(prepared)
    except UnsupportedPrimitive as exc:
        report.status, report.detail = "not checked", f"the oracle cannot evaluate it: {exc}"
        return report
    if problem:
        report.status, report.detail = "unsound", problem
    return report


@dataclasses.dataclass
class _Context:
    """One context of one alternative: the original and its rewritten variants, inputs, reference."""

    context: str
    fns: list[Callable[..., Any]]  # the original first
    labels: list[str]  # per rewritten variant
    args_list: list[list[np.ndarray]]
    closed: Any  # the program whose exact value is the reference
    # for "grad": the function differentiated, its program (whose exact value says where it is real)
    # and its gradient as written (the original's, re-run at neighbouring inputs: ``_compare``)
    primal: tuple[Callable[..., Any], Any, Callable[..., Any]] | None = None
    # for "grad" with the "sum" context folded in: every fn returns (value, gradient), and the value
    # is judged as the "sum" context, against the primal's program
    with_value: bool = False


def _program_key(closed: Any) -> tuple[str, tuple[tuple[str, tuple[int, ...], bytes], ...]]:
    """What determines a program's values: its text (every sub-jaxpr printed in full, every literal
    to the last bit) and its constants' bits. Not its derivatives: a ``custom_jvp`` rule prints as a
    name only, so this compares programs only where nothing is differentiated."""
    consts = tuple(np.asarray(c) for c in closed.consts)
    return str(closed.jaxpr), tuple((c.dtype.str, c.shape, c.tobytes()) for c in consts)


def _prepare(context: str, prog: _Program, name: str, sets: list[tuple[str, list[Rule]]], n: int,
             rng: np.random.Generator, with_value: bool = False) -> _Context | None:
    """The context's original and rewritten functions (one per rule set where the rule fires) and its
    inputs; None when the context does not apply (no intermediate to share, no float argument to
    differentiate) or the rule fires in no variant of it. ``with_value`` (for "grad"): the functions
    return the sum's value with its gradient, and the value is judged as the "sum" context.

    A variant runs the rewritten program ``jst.stabilize(original, rules=...)`` runs (the rule set's
    rewrite of the traced original), rewritten once; in a context that differentiates nothing, a
    variant whose program is the previous one's (the alternative alone rewrites as the rule does)
    is run once: its values are the same."""
    f, inner = prog.fn, prog.inner
    floats = [i for i, a in enumerate(prog.avals) if jnp.issubdtype(a.dtype, jnp.floating)]
    if context == "shared":
        if inner is None:
            return None
        original: Callable[..., Any] = lambda *a: (f(*a), inner(*a))
    elif context in ("sum", "grad"):
        if context == "grad" and not floats:
            return None
        original = lambda *a: jnp.sum(f(*a))
    elif context == "vmap":
        # the rewrite reads the batched program (a leading axis on every array, reductions and
        # broadcasts one rank up): every context already runs batched over its inputs (``_run``), which
        # is the other order, ``vmap(stabilize(f))``
        original = jax.vmap(f)
    else:
        original = f
    primal = original
    batch = _VMAP_BATCH if context == "vmap" else None
    base = [jax.ShapeDtypeStruct(((batch,) if batch else ()) + tuple(a.shape), a.dtype) for a in prog.avals]
    variants: list[tuple[str, Callable[..., Any]]] = []
    keys: list[Any] = []
    for label, chosen in sets:
        new = _rewritten(name, primal, chosen, base)
        if new is None:
            continue
        if context != "grad" and len(sets) > 1:
            key = _program_key(new)
            if key in keys:
                continue
            keys.append(key)
        variants.append((label, _compat.as_fun(new)))
    if not variants:
        return None
    if context == "grad":
        pick = jax.value_and_grad if with_value else jax.grad
        original = pick(original, argnums=tuple(floats))
        variants = [(label, pick(lambda *a, g=g: g(*a)[0], argnums=tuple(floats))) for label, g in variants]
    args_list = [_draw(prog.avals, prog.domain, rng, batch) for _ in range(n)]
    avals = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in args_list[0]]
    # the exact derivative takes library routines by their mathematics
    if context == "grad":
        primal_closed = jax.make_jaxpr(primal)(*avals)
        differentiated = (primal, primal_closed, jax.grad(primal, argnums=tuple(floats)))
        closed = _grad_reference(primal_closed, avals, floats)
    else:
        closed, differentiated = jax.make_jaxpr(original)(*avals), None
    return _Context(context, [original, *(g for _, g in variants)], [label for label, _ in variants],
                    args_list, closed, differentiated, with_value)


def _run(prepared: list[_Context]) -> str:
    """Every context's original and variants on all its inputs in one jitted function (one XLA
    compilation per alternative: compiling dominates otherwise), then each input judged."""

    def every(stacked: list[list[Any]]) -> list[Any]:
        return [jax.vmap(lambda *a, c=c: [fn(*a) for fn in c.fns])(*st) for c, st in zip(prepared, stacked)]

    stacked = [[np.stack([args[i] for args in c.args_list]) for i in range(len(c.args_list[0]))]
               for c in prepared]
    results = jax.jit(every)(stacked)
    for c, outs in zip(prepared, results):
        for k, args in enumerate(c.args_list):
            at_k = [jax.tree_util.tree_map(lambda v, k=k: np.asarray(v)[k], out) for out in outs]
            run, exact = c.fns[0], None  # each exact result evaluated once, for every variant
            if c.primal is not None:
                fn, primal_closed, grad_fn = c.primal
                primal_exact = evaluate(primal_closed, *args)
                if c.with_value:  # (value, gradient): the sum's value first, judged at every input
                    for label, out in zip(c.labels, at_k[1:]):
                        problem = _compare(primal_closed, at_k[0][0], out[0], args, fn, primal_exact)
                        if problem:
                            return f"context 'sum', {label}: {problem}"
                    at_k = [out[1] for out in at_k]
                    run = grad_fn
                if not _finite(primal_exact):
                    continue  # a derivative where the function is not real means nothing
            for label, out in zip(c.labels, at_k[1:]):
                exact = evaluate(c.closed, *args) if exact is None else exact
                problem = _compare(c.closed, at_k[0], out, args, run, exact)
                if problem:
                    return f"context {c.context!r}, {label}: {problem}"
    return ""


def _rewritten(name: str, fn: Callable[..., Any], rules: Sequence[Rule], avals: Sequence[Any],
               x64: bool = False) -> Any:
    """``fn`` traced at ``avals`` and rewritten by ``rules`` where the rule called ``name`` fires
    there; None where it does not (or ``fn`` does not take them: a rule's example written for other
    shapes)."""
    with _x64(x64):
        try:
            closed = jax.make_jaxpr(fn)(*avals)
        except Exception:
            return None
        new, applied = rewrite_jaxpr(closed, rules, describe=True)
    return new if any(a.rule == name for a in applied) else None


def _fires(name: str, fn: Callable[..., Any], rules: Sequence[Rule], avals: Sequence[Any],
           x64: bool = False) -> bool:
    """Whether the rule called ``name`` fires when ``rules`` rewrite ``fn`` traced at ``avals``."""
    return _rewritten(name, fn, rules, avals, x64) is not None


def _grad_reference(primal: Any, avals: Sequence[Any], floats: Sequence[int]) -> Any:
    """The program whose exact value is the gradient of the program ``primal`` (as
    ``jst.check(grad=True)`` takes it, ``_gradient``): library routines called (``log_ndtr``, erf's
    ``exp_neg_sq``) differentiated by the functions they stand for, never by their bodies'
    approximations."""
    from ..oracles.library._reference import reference_primal

    ref, _ = reference_primal(primal)
    fun = _compat.as_fun(ref)
    return jax.make_jaxpr(jax.grad(lambda *a: fun(*a)[0], argnums=tuple(floats)))(*avals)


def _finite(exact: Any) -> bool:
    return all(bool(np.all(np.isfinite(np.asarray(v)))) for v in jax.tree_util.tree_leaves(exact.values))


#: Neighbouring inputs at which the original is re-run before a rewrite is called worse (see _compare).
NEIGHBOURS = 4


def _compare(closed: Any, original: Any, rewritten: Any, args: Sequence[np.ndarray],
             run_original: Callable[..., Any] | None = None, exact: Any = None) -> str:
    """The first unsound element of ``rewritten`` against ``original`` on ``args``, described; "" if none.

    ``run_original`` (the original function) lets an original that was only lucky at ``args`` be
    told from a better one: before calling the rewrite worse, the original is run at
    :data:`NEIGHBOURS` inputs each element of which is one or two floats away, and its worst error
    there counts as its own (two forms of one formula that round differently are equally good, even
    where one rounds exactly at this input: a sum whose terms cancel, a gradient's difference that
    is 0 here and an ulp next door). A wrong identity is off at every neighbour alike."""
    out_o = jax.tree_util.tree_leaves(original)
    out_r = jax.tree_util.tree_leaves(rewritten)
    exact = evaluate(closed, *args) if exact is None else exact  # (``closed``'s exact value at ``args``)
    values = jax.tree_util.tree_leaves(exact.values)
    certain = jax.tree_util.tree_leaves(exact.certain)
    for leaf, (o, r, e, c) in enumerate(zip(out_o, out_r, values, certain)):
        o, r, e = np.asarray(o), np.asarray(r), np.asarray(e)
        if not np.issubdtype(e.dtype, np.floating):
            continue
        ok = np.broadcast_to(np.asarray(c, bool), e.shape) & np.isfinite(e)
        # Bits past the significand's are no more wrong: a result with no correct bit is as wrong as
        # another, so both are capped at the precision (p + 1: beyond the last bit).
        cap = float(np.finfo(e.dtype).nmant + 2)
        with np.errstate(all="ignore"):
            bo, br = np.minimum(error_bits(o, e), cap), np.minimum(error_bits(r, e), cap)
        blowup = ok & np.isfinite(o) & ~np.isfinite(r)
        worse = ok & (br > bo + ROUNDING_BITS) & (br > SLACK_BITS + ROUNDING_BITS)
        # The underflow zone, as the stability lens judges it: an absolute error within n·2^t smallest
        # normals (n the terms of the program's largest reduction, t = SLACK + ROUNDING bits here) is
        # what flushed subnormal intermediates lose (XLA flushes them on CPU), noted there and never
        # failed ("Two lenses: stability and accuracy").
        tiny = float(np.finfo(e.dtype).tiny)
        with np.errstate(all="ignore"):
            gap = np.abs(r.astype(np.float64) - e.astype(np.float64))
            flushed = gap <= reduction_terms(closed) * 2.0 ** (SLACK_BITS + ROUNDING_BITS) * tiny
        worse &= ~flushed
        if not (blowup.any() or worse.any()):
            continue
        if worse.any() and not blowup.any():
            # this output's conditioning only: one exact evaluation per input element, per output
            dtypes = [np.asarray(v).dtype for v in values]
            (cond,) = conditioning_ulps(closed, list(args), [e], [leaf], dtypes)
            with np.errstate(all="ignore"):
                c_bits = np.where(np.isfinite(cond), np.log2(1.0 + np.nan_to_num(cond)), np.inf)
            worse &= (br - c_bits > np.maximum(bo - c_bits, 0.0) + ROUNDING_BITS) & \
                     (br - c_bits > SLACK_BITS + ROUNDING_BITS)
            if worse.any() and run_original is not None:
                worse &= br > _neighbour_bits(closed, run_original, args, leaf, cap) + ROUNDING_BITS
            if not worse.any():
                continue
        k = int(np.flatnonzero((blowup | worse).reshape(-1))[0])
        shown = ", ".join(np.array2string(np.asarray(a), precision=9) for a in args)
        return (f"at inputs ({shown}) output {leaf} element {k}: exact {e.reshape(-1)[k]!r}, as written "
                f"{o.reshape(-1)[k]!r} ({bo.reshape(-1)[k]:.1f} bits), rewritten {r.reshape(-1)[k]!r} "
                f"({br.reshape(-1)[k]:.1f} bits)")
    return ""


def _neighbour_bits(closed: Any, run_original: Callable[..., Any], args: Sequence[np.ndarray], leaf: int,
                    cap: float) -> np.ndarray:
    """Per element of output ``leaf``, the original's worst error (capped) over inputs next to ``args``."""
    rng = np.random.default_rng(0)
    worst: np.ndarray | None = None
    for _ in range(NEIGHBOURS):
        moved = []
        for a in args:
            a = np.asarray(a)
            if not np.issubdtype(a.dtype, np.floating):
                moved.append(a)
                continue
            steps = rng.integers(1, 3, size=a.shape)
            direction = np.where(rng.random(a.shape) < 0.5, -np.inf, np.inf).astype(a.dtype)
            b = a.copy()
            with np.errstate(all="ignore"):
                for _k in range(2):
                    b = np.where(steps > _k, np.nextafter(b, direction), b)
            moved.append(np.where(np.isfinite(b), b, a).astype(a.dtype))
        o = np.asarray(jax.tree_util.tree_leaves(run_original(*moved))[leaf])
        e = np.asarray(jax.tree_util.tree_leaves(evaluate(closed, *moved).values)[leaf])
        with np.errstate(all="ignore"):
            bits = np.nan_to_num(np.minimum(error_bits(o, e), cap), nan=0.0)
        worst = bits if worst is None else np.maximum(worst, bits)
    assert worst is not None
    return worst


def _draw(avals: Sequence[Any], domain: Any, rng: np.random.Generator, batch: int | None) -> list[np.ndarray]:
    """One input per argument: a third ordinary values (|x| <= 4), a third magnitudes 1e-6..1e6 of
    both signs, a third uniform over the float bit patterns; all inside ``(lo, hi)``. Indices are drawn
    in ``[0, 4)``, predicates true or false alike."""
    lo, hi = domain if isinstance(domain, tuple) and len(domain) == 2 else _DEFAULT_DOMAIN
    out = []
    for a in avals:
        shape = ((batch,) if batch else ()) + tuple(a.shape)
        dtype = np.dtype(a.dtype)
        if not np.issubdtype(dtype, np.floating):
            out.append(rng.integers(0, 2 if dtype == np.bool_ else 4, size=shape).astype(dtype))
            continue
        size = max(1, math.prod(shape))
        pick = rng.integers(0, 3, size=size)
        ordinary = rng.uniform(max(lo, -4.0), min(hi, 4.0), size=size) if max(lo, -4.0) < min(hi, 4.0) \
            else rng.uniform(lo, hi, size=size)
        signs = rng.choice([-1.0, 1.0], size=size)
        mags = np.exp(rng.uniform(math.log(1e-6), math.log(1e6), size=size)) * signs
        olo = int(to_ordinal(np.asarray(lo, dtype), dtype))
        ohi = int(to_ordinal(np.asarray(hi, dtype), dtype))
        bits = np.asarray([from_ordinal(int(v), dtype) for v in rng.integers(olo, ohi + 1, size=size)], dtype)
        value = np.where(pick == 0, ordinary, np.where(pick == 1, np.clip(mags, lo, hi), bits))
        out.append(value.astype(dtype).reshape(shape))
    return out
