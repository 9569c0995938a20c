"""The "double where": a ``where``-guarded branch fed a safe input, so its gradient is finite.

``jnp.where(x > 0, jnp.sqrt(x), 0.0)`` is fine forward, but its gradient at x < 0 is NaN: the untaken
branch ``sqrt(x)`` is still computed, its derivative there is NaN (or inf), and a zero cotangent
times NaN is NaN. The standard fix feeds the guarded branch an input it is safe at wherever its
value is not used::

    safe_x = jnp.where(x > 0, x, 1.0)
    jnp.where(x > 0, jnp.sqrt(safe_x), 0.0)

The values are unchanged (where the branch is taken, it sees x itself); where it is not, its
derivative is evaluated at a point inside the guard. The rule matches ``where(x OP c, A, B)`` with
``OP`` a comparison of an operand ``x`` with a constant ``c``, and ``A`` and/or ``B`` computed from ``x``
by element-wise equations used nowhere else; each such branch is re-computed on its safe input.
A pattern cannot say "any element-wise function of x", so this is a structural rule
(``Rule(matcher=...)``) built on the same :class:`Match` as the pattern rules.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import jax.numpy as jnp
import numpy as np
from jax import lax

from ... import _compat
from ..._dtypes import is_real_kind
from ..._primitives import ELEMENTWISE
from ._match import SCOPE_PREFIX, Graph, Match
from ._rule import Rule

__all__ = ["GUARDED_WHERE", "MASKED_CLIP", "MASKED_WHERE"]

# x OP c holds for a point strictly inside the guard: c shifted by half its magnitude (at least 0.5)
_FLIP = {"lt": "gt", "gt": "lt", "le": "ge", "ge": "le", "ne": "ne", "eq": "eq"}
_NEGATE = {"lt": "ge", "ge": "lt", "gt": "le", "le": "gt", "ne": "eq", "eq": "ne"}


def _inside(op: str, c: float) -> float | None:
    """A point where ``x OP c`` holds, away from the boundary (None: no such finite point)."""
    step = max(0.5, abs(c) / 2)
    point = {"lt": c - step, "le": c - step, "gt": c + step, "ge": c + step,
             "ne": c + step, "eq": c}[op]
    return point if math.isfinite(point) else None


def scalar_constant(g: Graph, atom: Any) -> float | None:
    """The value of ``atom`` where it is a one-element real literal or constant of the program (not an
    enclosing trace's value); None otherwise."""
    if _compat.is_literal(atom):
        v = _compat.literal_value(atom)
    elif atom in g.const_values:
        v = g.const_values[atom]
    else:
        return None
    if _compat.is_tracer(v):  # a value of an enclosing trace: not a constant here
        return None
    try:  # numpy, not jnp: under an enclosing jit a jnp operation would be staged, not computed
        arr = np.asarray(v)
        if arr.size != 1 or not is_real_kind(arr.dtype):
            return None
        return float(arr.reshape(()))
    except (TypeError, ValueError):
        return None


#: Where a ``jnp.where`` can be rooted (``_where_operands``): the guards' matchers are asked only there.
_WHERE_ROOTS = frozenset({"select_n", "jit", "pjit"})


def _where_operands(g: Graph, i: int) -> tuple[Any, Any, Any] | None:
    """``(pred, on_true, on_false)`` of a ``jnp.where`` at equation ``i`` (a ``jit`` named
    ``_where`` around ``select_n``, or a bare two-way ``select_n``). None for an integer or boolean
    ``where`` (index arithmetic, as ``take_along_axis`` wraps negative indices): it has no derivative
    to guard."""
    eqn = g.eqns[i]
    if len(eqn.outvars) != 1 or not jnp.issubdtype(_compat.aval(eqn.outvars[0]).dtype, jnp.inexact):
        return None
    name = _compat.primitive_name(eqn)
    if name == "select_n" and len(eqn.invars) == 3:
        p, f, t = eqn.invars
        return p, t, f
    if name in ("jit", "pjit") and eqn.params.get("name") == "_where" and len(eqn.invars) == 3:
        subs = _compat.subjaxprs(eqn)
        if len(subs) != 1:
            return None
        inner = _compat.eqns(subs[0][1])
        if not inner or _compat.primitive_name(inner[-1]) != "select_n" or len(inner[-1].invars) != 3:
            return None
        p, t, f = eqn.invars  # jnp.where(condition, x, y)
        return p, t, f
    return None


def _elementwise_cone(g: Graph, branch: Any, shape: tuple[int, ...] | None, stop: Any = None,
                      claimed_too: bool = False) -> set[int]:
    """The unclaimed single-output element-wise equations of ``shape`` that compute ``branch``,
    walked back from it (not past ``stop``): the cone a guard may re-bind. ``claimed_too``: an
    earlier rule's element-wise result too (a cone re-computed, never swallowed, may copy it)."""
    members: set[int] = set()
    stack = [branch]
    while stack:
        a = stack.pop()
        if _compat.is_literal(a) or a is stop:
            continue
        prod = g.producer_eqn(a)
        if prod is None:
            continue
        j, e = prod
        if j in members:
            continue
        if ((j in g.claimed and not claimed_too) or _compat.primitive_name(e) not in ELEMENTWISE
                or len(e.outvars) != 1 or tuple(_compat.aval(e.outvars[0]).shape) != shape):
            continue  # computed outside the cone: an operand of it
        members.add(j)
        stack.extend(e.invars)
    return members


def _private(g: Graph, members: set[int], out: Any) -> bool:
    """Whether every use of a member's result is inside the cone or the root's one read of ``out``,
    the branch the cone computes (so re-binding the cone leaves every other use as it is). The root's
    other operands are uses outside: ``where(p, f(log t), log t)`` shares ``log t`` with the other
    branch, which swallowing it would leave unbound (``jax.scipy.special.betaln`` crashed, issue 47)."""
    consumers: dict[Any, int] = {out: 1}
    for k in members:
        for a in g.eqns[k].invars:
            if not _compat.is_literal(a):
                consumers[a] = consumers.get(a, 0) + 1
    return all(g.uses[g.eqns[j].outvars[0]] == consumers.get(g.eqns[j].outvars[0], 0) for j in members)


def _cone(g: Graph, branch: Any, x: Any, root: int) -> list[int] | None:
    """Equations computing ``branch`` element-wise from ``x`` (and outside operands) that nothing
    outside the cone and the root uses; None when ``branch`` does not depend on x through one."""
    out_shape = tuple(_compat.aval(branch).shape) if not _compat.is_literal(branch) else None
    members = _elementwise_cone(g, branch, out_shape, stop=x)
    # private, and it must use x: some member reads x directly
    if not members or not _private(g, members, branch):
        return None
    if not any(any(a is x for a in g.eqns[j].invars) for j in members):
        return None
    return sorted(members)


def _replayer(g: Graph, cone: list[int], x: Any, out: Any) -> tuple[Callable[..., Any], list[Any]]:
    """A function of (x, *free operands) re-binding the cone's equations; and the free operands."""
    produced = {v for j in cone for v in g.eqns[j].outvars}
    free: list[Any] = []
    for j in cone:
        for a in g.eqns[j].invars:
            if not _compat.is_literal(a) and a is not x and a not in produced and a not in free:
                free.append(a)
    eqns = [g.eqns[j] for j in cone]

    def replay(xv: Any, *free_values: Any) -> Any:
        env: dict[Any, Any] = {x: xv, **dict(zip(free, free_values))}

        def read(a: Any) -> Any:
            if _compat.is_literal(a):
                return _compat.literal_value(a)
            if a in env:
                return env[a]
            return g.const_values[a]

        for e in eqns:
            (v,) = _compat.bind(e, [read(a) for a in e.invars])
            env[e.outvars[0]] = v
        return env[out]

    return replay, free


def _match_guard(g: Graph, i: int) -> Match | None:
    if _compat.in_scope_named(g.eqns[i], f"{SCOPE_PREFIX}guarded_where"):  # its own where: left alone
        return None
    ops = _where_operands(g, i)
    if ops is None:
        return None
    pred, on_true, on_false = ops
    prod = g.producer_eqn(pred)
    if prod is None:
        return None
    _, cmp = prod
    op = _compat.primitive_name(cmp)
    if op not in _FLIP or len(cmp.invars) != 2:
        return None
    a0, a1 = cmp.invars
    c = scalar_constant(g, a1)
    x = a0
    if c is None:
        c, x, op = scalar_constant(g, a0), a1, _FLIP[op]
    if c is None or _compat.is_literal(x) or x in g.const_values:
        return None
    shape = tuple(_compat.aval(g.eqns[i].outvars[0]).shape)
    if tuple(_compat.aval(x).shape) != shape or tuple(_compat.aval(pred).shape) != shape:
        return None
    captures: dict[str, Any] = {"pred": pred, "x": x}
    atoms: dict[str, Any] = {"pred": pred, "x": x}
    swallowed = {i}
    plans = []
    for label, branch, holds in (("t", on_true, op), ("f", on_false, _NEGATE[op])):
        cone = None if _compat.is_literal(branch) else _cone(g, branch, x, i)
        safe = _inside(holds, c)
        if cone is None or safe is None or any(j in swallowed for j in cone):
            captures[label] = branch
            atoms[label] = branch
            continue
        replay, free = _replayer(g, cone, x, branch)
        swallowed |= set(cone)
        plans.append((label, replay, len(free), safe))
        for k, a in enumerate(free):
            captures[f"{label}{k}"] = a
            atoms[f"{label}{k}"] = a
    return _planned_match(i, captures, atoms, swallowed, plans)


def _planned_match(i: int, captures: dict[str, Any], atoms: dict[str, Any], swallowed: set[int],
                   plans: list[Any]) -> Match | None:
    """The guard's match at equation ``i`` once its branches are planned (None: no branch to guard).
    Operands that are literals (a constant branch) become static values, not operands."""
    if not plans:
        return None
    captures["plans"] = tuple(plans)
    for k in [k for k, a in atoms.items() if _compat.is_literal(a)]:
        captures[k] = _compat.literal_value(atoms.pop(k))
    return Match(i, captures, atoms, swallowed)


def _guarded_where(pred: Any, x: Any, plans: tuple[Any, ...], **rest: Any) -> Any:
    """where(x OP c, A(x), B(x)) = where(x OP c, A(where(x OP c, x, a)), B(where(x OP c, b, x))),
    a and b points where the guard holds and fails (values unchanged; finite gradients)."""
    branches: dict[str, Any] = {"t": rest.get("t"), "f": rest.get("f")}
    for label, replay, n_free, safe in plans:
        free = [rest[f"{label}{k}"] for k in range(n_free)]
        keep = pred if label == "t" else jnp.logical_not(pred)
        safe_x = jnp.where(keep, x, jnp.asarray(safe, x.dtype))
        branches[label] = replay(safe_x, *free)
    return jnp.where(pred, branches["t"], branches["f"])


# Composable, as ``masked_where`` below: the branch it re-binds on a safe input stays open to the
# structural rules after it (``xlogy``); its own ``where`` is never matched again.
GUARDED_WHERE = Rule("guarded_where", None, _guarded_where, matcher=_match_guard, roots=_WHERE_ROOTS,
                     composable=True,
                     example=lambda x: jnp.where(x > 0, x * jnp.log(x), 0.0), example_shapes=((8,),))


# ------------------------------------------------------------------------------------ masked where
# Primitives whose derivative is inf or NaN somewhere its value is finite (or that overflow): an
# untaken branch made of one of them gives 0·inf = NaN in the gradient of a where.
_RISKY = frozenset({"exp", "exp2", "expm1", "log", "log1p", "div", "sqrt", "rsqrt", "cbrt", "pow",
                    "integer_pow", "tan", "atanh", "acos", "asin", "lgamma", "digamma", "erf_inv",
                    "cosh", "sinh", "logistic"})


def _broadcasts_to(shape: tuple[int, ...], out: tuple[int, ...]) -> bool:
    return not shape or (len(shape) == len(out) and all(d in (1, o) for d, o in zip(shape, out)))


# A predicate that tests a value for NaN or inf: the branch it guards may be NaN or inf itself, and then
# every derivative in its cone is (a square of a NaN, nanvar's centred values: jax#8128).
_FINITE_TESTS = frozenset({"isnan", "isinf", "isfinite", "isposinf", "isneginf"})
_BOOL_LOGIC = frozenset({"not", "and", "or"})


def _tested_for_finiteness(g: Graph, pred: Any, depth: int = 4) -> set[Any]:
    """The values whose NaN or inf ``pred`` tests (``isnan`` as ``ne(v, v)``, ``is_finite``, a
    comparison with inf, the ``isinf`` family's calls), seen through ``not``/``and``/``or``."""
    prod = g.producer_eqn(pred)
    if prod is None or depth == 0:
        return set()
    eqn = prod[1]
    name = _compat.primitive_name(eqn)
    if name in _BOOL_LOGIC:
        return set().union(*(_tested_for_finiteness(g, a, depth - 1) for a in eqn.invars))
    if name == "is_finite" or (name in ("jit", "pjit") and eqn.params.get("name") in _FINITE_TESTS):
        return {eqn.invars[0]}
    if name in ("ne", "eq") and len(eqn.invars) == 2:
        a0, a1 = eqn.invars
        if a0 is a1:
            return {a0}
        for v, c in ((a0, a1), (a1, a0)):
            k = scalar_constant(g, c)
            if k is not None and math.isinf(k):
                inner = g.producer_eqn(v)
                return {v} | ({inner[1].invars[0]} if inner and _compat.primitive_name(inner[1]) == "abs"
                              else set())
    return set()


def _read_outside_only_by_tests(g: Graph, members: set[int], root: int) -> bool:
    """Whether every use of a member's result outside the cone and the root is by an equation whose
    results are all boolean (a test: no derivative flows back through it)."""
    inside = members | {root}
    for j in members:
        for k in g.consumers(g.eqns[j].outvars[0]):
            if k in inside:
                continue
            if not all(np.dtype(_compat.aval(o).dtype) == np.bool_ for o in g.eqns[k].outvars):
                return False
    outs = set(_compat.outvars(g.closed))
    return not any(g.eqns[j].outvars[0] in outs for j in members)


def _private_core(g: Graph, members: set[int], branch: Any) -> set[int]:
    """The members whose results are read only inside the rest of them or (``branch``) by the root:
    the part of a cone a guard may swallow when some of its values have other uses (``x - m`` both
    exponentiated under a mask and returned: only the ``exp`` is the branch's own)."""
    core = {j for j in members if j not in g.claimed}
    reads: dict[Any, int] = {}
    for j in core:
        for a in g.eqns[j].invars:
            if not _compat.is_literal(a):
                reads[a] = reads.get(a, 0) + 1
    todo = sorted(core)
    while todo:  # a worklist: dropping a member may leave its operands' producers read outside
        j = todo.pop()
        out = g.eqns[j].outvars[0]
        if j not in core or g.uses[out] == reads.get(out, 0) + (out is branch):
            continue
        core.discard(j)
        for a in g.eqns[j].invars:
            if not _compat.is_literal(a):
                reads[a] -= 1
                producer = g.producer.get(a)
                if producer in core:
                    todo.append(producer)
    return core


def _masked_cone(g: Graph, branch: Any, root: int, pred: Any = None) -> tuple[list[int], bool] | None:
    """The element-wise equations computing ``branch`` (of the root's shape) and whether the guard
    may swallow them; None when there are none, or none is risky (and ``pred`` does not test their
    values for NaN or inf), or an operand from outside has another shape. A cone whose results are
    read outside only by tests (``isnan(c)`` guarding ``c`` itself) is re-computed, not swallowed; a
    cone some of whose values have other uses gives up those and keeps its private core."""
    if _compat.is_literal(branch):
        return None
    shape = tuple(_compat.aval(branch).shape)
    members = _elementwise_cone(g, branch, shape, claimed_too=True)
    if not members:
        return None
    tested = _tested_for_finiteness(g, pred) if pred is not None else set()

    def risky(cone: set[int]) -> bool:
        return any(_compat.primitive_name(g.eqns[j]) in _RISKY or g.eqns[j].outvars[0] in tested
                   for j in cone)

    if not risky(members):
        return None
    # an earlier rule's result (``log1p`` for ``log(1 - p)``) is copied, never swallowed
    if not members & g.claimed and _private(g, members, branch):
        swallow = True
    elif _read_outside_only_by_tests(g, members, root):
        swallow = False
    else:  # a member's value is used outside: it stays as it is, and the rest is the cone
        members = _private_core(g, members, branch)
        if not members or not risky(members):
            return None
        swallow = True
    values = {g.eqns[j].outvars[0] for j in members}
    for j in members:  # every operand from outside broadcasts to the where's shape (a scalar, a
        for a in g.eqns[j].invars:  # keepdims max): masked, it takes that shape
            if (not _compat.is_literal(a) and a not in values
                    and not _broadcasts_to(tuple(_compat.aval(a).shape), shape)):
                return None
    return sorted(members), swallow


def _match_masked(g: Graph, i: int) -> Match | None:
    if _compat.in_scope_named(g.eqns[i], SCOPE_PREFIX):  # a replacement's own where: left alone
        return None
    ops = _where_operands(g, i)
    if ops is None:
        return None
    pred, on_true, on_false = ops
    shape = tuple(_compat.aval(g.eqns[i].outvars[0]).shape)
    if _compat.is_literal(pred) or tuple(_compat.aval(pred).shape) != shape:
        return None
    captures: dict[str, Any] = {"pred": pred}
    atoms: dict[str, Any] = {"pred": pred}
    swallowed = {i}
    plans = []
    for label, branch in (("t", on_true), ("f", on_false)):
        found = _masked_cone(g, branch, i, pred)
        cone, swallow = found if found is not None else (None, False)
        if cone is None or any(j in swallowed for j in cone):
            captures[label] = branch
            atoms[label] = branch
            continue
        replay, free = _replayer(g, cone, None, branch)
        if swallow:
            swallowed |= set(cone)
        plans.append((label, replay, len(free)))
        for k, a in enumerate(free):
            captures[f"{label}{k}"] = a
            atoms[f"{label}{k}"] = a
    return _planned_match(i, captures, atoms, swallowed, plans)


def _derivative_kept(keep: Any, v: Any) -> Any:
    """``v`` where ``keep`` holds, ``stop_gradient(v)`` elsewhere (the same values); an integer or
    boolean operand, which carries no derivative, as it is."""
    if not jnp.issubdtype(jnp.result_type(v), jnp.inexact):
        return v
    return jnp.where(keep, v, lax.stop_gradient(v))


def _masked_where(pred: Any, plans: tuple[Any, ...], **rest: Any) -> Any:
    """where(m, A(u, ...), B(v, ...)) = where(m, A(u', ...), B(v', ...)), each operand u of a branch
    replaced by u' = where(m, u, stop_gradient(u)) (the mask negated for the false branch): the
    same values, and the untaken branch's derivative (inf or NaN at a masked element: exp of a
    large masked logit, log of a masked 0) never meets the zero cotangent it would be multiplied by.
    """
    branches: dict[str, Any] = {"t": rest.get("t"), "f": rest.get("f")}
    for label, replay, n_free in plans:
        keep = pred if label == "t" else jnp.logical_not(pred)
        branches[label] = replay(None, *[_derivative_kept(keep, rest[f"{label}{k}"]) for k in range(n_free)])
    return jnp.where(pred, branches["t"], branches["f"])


# Composable: the branches it re-binds (masked operands, the program's own equations) stay open to
# the structural rules after it, which would otherwise never see them (an ``xlogy`` product inside a
# ``where``: chi²'s log-density at 0, issue 47). No rule's ``where`` is matched again (the scope test
# in ``_match_masked``).
# Derivative only: the values are the program's own, bit for bit (a select between equal values, the
# same primitives re-bound), so it is never applied inside a custom derivative's primal body, whose
# derivative is the rule's (jax.nn.soft_sign's where(isinf(x), sign(x), x / (|x| + 1)) in 0.12.1).
MASKED_WHERE = Rule(
    "masked_where", None, _masked_where, matcher=_match_masked, roots=_WHERE_ROOTS, composable=True,
    derivative_only=True,
    example=lambda x, m: jnp.where(m > 0, jnp.exp(x), 0.0), example_shapes=((8,), (8,)))


# ------------------------------------------------------------------------------------ masked clip
# A clip is a where in disguise: ``max(u, c)`` takes ``c`` where ``u < c``, and there ``u``'s cone
# still meets a zero cotangent. ``jnp.clip(jnp.log(p), -100)`` (a binary cross-entropy's clamped log)
# at ``p = 0`` is ``0 · inf = NaN`` in the backward pass, and so is ``jnp.maximum(jnp.sqrt(v), eps)``
# at ``v = 0`` (issue 47: "0 · inf in the backward pass of clipped logs and roots at 0").
_CLIP_ROOTS = frozenset({"max", "min", "clamp", "jit", "pjit"})


def _clip_operands(g: Graph, i: int) -> tuple[int, dict[int, Any]] | None:
    """``(k, bounds)`` of a clip at equation ``i``: ``max``/``min`` of an array and a scalar
    constant, ``clamp`` with constant bounds, or ``jnp.clip``'s call (a ``jit`` named ``clip``);
    ``k`` the clipped operand's position, ``bounds`` the other operands' values by position."""
    eqn = g.eqns[i]
    name = _compat.primitive_name(eqn)
    if len(eqn.outvars) != 1 or not jnp.issubdtype(_compat.aval(eqn.outvars[0]).dtype, jnp.floating):
        return None
    if name in ("jit", "pjit") and eqn.params.get("name") != "clip":
        return None
    if name not in ("max", "min", "clamp", "jit", "pjit") or len(eqn.invars) < 2:
        return None
    shape = tuple(_compat.aval(eqn.outvars[0]).shape)
    bounds: dict[int, Any] = {}
    clipped = []
    for k, a in enumerate(eqn.invars):
        value = scalar_constant(g, a)
        if value is None:
            clipped.append(k)
        else:
            bounds[k] = np.asarray(value, dtype=_compat.aval(a).dtype)
    if len(clipped) != 1 or tuple(_compat.aval(eqn.invars[clipped[0]]).shape) != shape:
        return None
    if name == "clamp" and clipped != [1]:
        return None
    if name in ("jit", "pjit") and clipped != [0]:
        return None
    return clipped[0], bounds


def _match_clipped(g: Graph, i: int) -> Match | None:
    if _compat.in_scope_named(g.eqns[i], SCOPE_PREFIX):  # a replacement's own clip: left alone
        return None
    found = _clip_operands(g, i)
    if found is None:
        return None
    k, bounds = found
    eqn = g.eqns[i]
    branch = eqn.invars[k]
    cone_found = _masked_cone(g, branch, i)
    if cone_found is None:
        return None
    cone, swallow = cone_found
    replay, free = _replayer(g, cone, None, branch)

    def clip(u: Any) -> Any:
        (out,) = _compat.bind(eqn, [u if n == k else bounds[n] for n in range(len(eqn.invars))])
        return out

    captures: dict[str, Any] = {"plan": (clip, replay, len(free))}
    atoms = {f"u{n}": a for n, a in enumerate(free)}
    captures.update(atoms)
    return Match(i, captures, atoms, {i} | (set(cone) if swallow else set()))


def _masked_clip(plan: Any, **free: Any) -> Any:
    """clip(u(v, ...)) = clip(u(v', ...)), v' = where(keep, v, stop_gradient(v)) with keep where the
    clip leaves ``u`` as it is: the same values, and where the bound is taken, ``u``'s derivative
    (inf at a log's or a root's 0) never meets the zero cotangent it would be multiplied by. At a
    tie (``u`` equal to the bound) ``u`` keeps its derivative, as JAX's (half of it for max/min)."""
    clip, replay, n_free = plan
    values = [free[f"u{n}"] for n in range(n_free)]
    u0 = replay(None, *[lax.stop_gradient(v) for v in values])
    keep = clip(u0) == u0
    return clip(replay(None, *[_derivative_kept(keep, v) for v in values]))


# Composable and derivative only for the same reasons as ``masked_where``; its own clip is never
# matched again.
MASKED_CLIP = Rule(
    "masked_clip", None, _masked_clip, matcher=_match_clipped, roots=_CLIP_ROOTS, composable=True,
    derivative_only=True,
    example=lambda p: jnp.clip(jnp.log(p), -100.0), example_shapes=((8,),), example_domain=(0.0, 10.0))
