"""``reduce_into_scan``: sum a scan's stacked outputs inside the scan instead of after it (issue 8).

A model's output is often the stacked ``ys`` of a ``lax.scan`` and the loss reduces it at once::

    _, ys = lax.scan(body, c0, xs)
    loss = jnp.mean((targets - ys) ** 2)

XLA sees a loop that writes a ``length x ...`` buffer, then a reduction reading it back; it does not
move the reduction into the loop (there is no scan in HLO to fuse into). This rule does: the new scan
computes the loss terms of each step and adds their sum to an accumulator carried by the loop, so the
stack is never built (less memory, one pass over the data).

What is fused (the *region*): every use of the fused ``ys`` must be, transitively, an elementwise
equation (``add``, ``mul``, ``integer_pow``, ``select_n``, ``convert_element_type``... and ``jit``
calls made only of those, such as ``jnp.where``), a ``broadcast_in_dim`` that keeps the scan axis
first, or a ``reduce_sum`` whose axes include the scan axis (axis 0): the *sinks*. A ``mean``
is a ``reduce_sum`` and a division, which stays as it was. The other operands of the region are
loop-invariant (scalars, arrays whose first axis has size 1, broadcasts of arrays without the scan
axis: passed to the new scan as they are) or stacked along the scan axis (``targets``: they become
extra ``xs``). Several ``ys`` of the same scan may be fused together (``sum(ys1 * ys2)``) and several
sinks of the same ``ys`` are fused at once (``sum(ys) + sum(ys ** 2)``), one accumulator each. Carries
and the other ``ys`` of the scan stay outputs of the new scan, unchanged.

Not fused (the rule does not fire, the program stays as written): ``ys`` also used by anything else
(returned, sliced, reshaped, reduced by ``max``, or by a ``reduce_sum`` without the scan axis), a
region operand that depends on the scan's results (``sum(ys * c_final)``), region operations outside
the list above (``custom_jvp``/``custom_vjp`` functions such as ``jax.nn.relu``, ``logaddexp``;
reductions over other axes first), a loss computed inside a ``jit`` that the stacked ``ys`` is passed
to, and a scan nested inside the body of a scan this rule fuses.

Accuracy: the sum is taken in a different order (per step over the other axes, then step after step
in the carry, in the scan's direction), so results differ within summation-order error: a
reordered sum of n terms differs from the exact sum by at most about ``n·eps·sum|terms|`` (the
recursive summation bound), and ``jst.check``/the oracle report the change. That is why the rule is
in the opt-in ``PERFORMANCE`` catalogue.
"""

from __future__ import annotations

import dataclasses
import weakref
from collections.abc import Iterable
from typing import Any

import jax

from ... import _compat
from ..._primitives import ELEMENTWISE
from ..engine._match import SCOPE_PREFIX, Graph, Match

__all__ = ["Fusion", "fuse", "match_reduce_into_scan"]


_MAX_JIT_DEPTH = 4
_MAX_BACKWARD = 512  # equations visited looking for the scan behind a reduction
_MAX_PULLED = 64  # producers of stacked operands moved into the region


@dataclasses.dataclass(frozen=True, eq=False)
class _Step:
    """One operation of the per-step program: ``eqn`` re-bound, a broadcast, or an alias."""

    kind: str  # "eqn" | "bcast" | "alias"
    ins: tuple[Any, ...]  # atoms: outer or inner jaxpr variables, or literals
    outs: tuple[Any, ...]
    eqn: Any = None
    shape: tuple[int, ...] = ()  # bcast: the per-step shape
    dims: tuple[int, ...] = ()  # bcast: the per-step broadcast dimensions


@dataclasses.dataclass(frozen=True, eq=False)
class Fusion:
    """Everything static the replacement needs to rebuild the scan (a match capture)."""

    body: Any
    length: int
    reverse: bool
    unroll: int | bool
    n_consts: int
    n_carry: int
    n_xs: int
    fused_ys: tuple[tuple[int, Any], ...]  # (index in ys, variable) bound to the step's y
    kept_ys: tuple[int, ...]  # ys still emitted stacked (used outside the region)
    leaves: tuple[tuple[str, Any, str], ...]  # (capture name, variable, "stacked"|"squeeze"|"raw")
    steps: tuple[_Step, ...]
    sinks: tuple[tuple[Any, Any, tuple[int, ...]], ...]  # (reduce_sum eqn, operand, per-step axes)
    extras: tuple[tuple[str, int], ...]  # ("carry"|"ys"|"sink", index) per Match.extra_outputs

    def __repr__(self) -> str:
        return f"Fusion(length={self.length}, sinks={len(self.sinks)}, steps={len(self.steps)})"


# ------------------------------------------------------------------------------------- replacement
def fuse(fusion: Fusion, **operands: Any) -> Any:
    """sum over axis 0 of f(scan(...).ys) = the sums of f(y) accumulated step by step in the scan.

    Returns the root sink's value, or ``(root value, [values of the extra outputs])`` when the
    match has extra outputs (``Match.extra_outputs``: carries, other ys, other sinks).
    """
    nc, nk = fusion.n_consts, fusion.n_carry
    consts = [operands[f"const{k}"] for k in range(nc)]
    init = [operands[f"init{k}"] for k in range(nk)]
    xs = [operands[f"xs{k}"] for k in range(fusion.n_xs)]
    stacked_vars, stacked, invariant = [], [], {}
    for name, var, kind in fusion.leaves:
        if kind == "stacked":
            stacked_vars.append(var)
            stacked.append(operands[name])
        elif kind == "squeeze":  # first axis of size 1: the same slice at every step
            invariant[var] = jax.lax.squeeze(operands[name], (0,))
        else:
            invariant[var] = operands[name]
    zeros = [jax.lax.full(_compat.aval(eqn.outvars[0]).shape, 0, _compat.aval(eqn.outvars[0]).dtype)
             for eqn, _, _ in fusion.sinks]

    def body(carry: Any, x: Any) -> Any:
        c, accs = carry
        x_orig, x_leaves = x
        outs = _compat.eval_jaxpr(fusion.body, *consts, *c, *x_orig)
        new_c, ys = outs[:nk], outs[nk:]
        env: dict[Any, Any] = dict(invariant)
        env.update(zip(stacked_vars, x_leaves))
        env.update((var, ys[j]) for j, var in fusion.fused_ys)

        def read(a: Any) -> Any:
            return _compat.literal_value(a) if _compat.is_literal(a) else env[a]

        for st in fusion.steps:
            if st.kind == "eqn":
                env.update(zip(st.outs, _compat.bind(st.eqn, [read(a) for a in st.ins])))
            elif st.kind == "bcast":
                env[st.outs[0]] = jax.lax.broadcast_in_dim(read(st.ins[0]), st.shape, st.dims)
            else:
                env[st.outs[0]] = read(st.ins[0])
        parts = [_compat.bind(eqn, [env[v]], {**eqn.params, "axes": axes})[0]
                 for eqn, v, axes in fusion.sinks]
        accs = [jax.lax.add(acc, part) for acc, part in zip(accs, parts)]
        return (new_c, accs), [ys[j] for j in fusion.kept_ys]

    (c_final, sums), kept = _compat.scan(body, (init, zeros), (xs, stacked), length=fusion.length,
                                         reverse=fusion.reverse, unroll=fusion.unroll)
    kept_by_index = dict(zip(fusion.kept_ys, kept))
    extras = [c_final[k] if kind == "carry" else kept_by_index[k] if kind == "ys" else sums[k]
              for kind, k in fusion.extras]
    return (sums[0], extras) if fusion.extras else sums[0]


# ----------------------------------------------------------------------------------------- matcher
_CONSUMERS: weakref.WeakKeyDictionary[Graph, dict[Any, list[int]]] = weakref.WeakKeyDictionary()
_SCOPED: weakref.WeakKeyDictionary[Graph, set[int]] = weakref.WeakKeyDictionary()


def _consumers(g: Graph) -> dict[Any, list[int]]:
    """var -> indices of the equations reading it (once per operand slot), cached per graph."""
    cons = _CONSUMERS.get(g)
    if cons is None:
        cons = {}
        for j, eqn in enumerate(g.eqns):
            for a in eqn.invars:
                if not _compat.is_literal(a):
                    cons.setdefault(a, []).append(j)
        _CONSUMERS[g] = cons
    return cons


def _taken(g: Graph) -> set[int]:
    """Equations claimed by another match of this pass (replacement-made ones may be re-bound)."""
    scoped = _SCOPED.get(g)
    if scoped is None:
        scoped = {j for j, e in enumerate(g.eqns) if SCOPE_PREFIX in _compat.name_stack(e)}
        _SCOPED[g] = scoped
    return g.claimed - scoped


def _shape(a: Any) -> tuple[int, ...]:
    return tuple(_compat.aval(a).shape)


def _no_sharding(eqn: Any) -> bool:
    return all(eqn.params.get(k) is None for k in ("sharding", "out_sharding"))


def _inner_jaxpr(eqn: Any) -> Any | None:
    for site, sub in _compat.subjaxprs(eqn):
        if site.key == "jaxpr" and site.index is None:
            return sub
    return None


def _jit_ok(eqn: Any, depth: int = 0) -> bool:
    """A ``jit`` call made only of elementwise operations and broadcasts (``jnp.where``)."""
    sub = _inner_jaxpr(eqn)
    if sub is None or depth > _MAX_JIT_DEPTH or _compat.parts(sub)[1]:
        return False
    for e in _compat.eqns(sub):
        name = _compat.primitive_name(e)
        if name == "jit":
            if not _jit_ok(e, depth + 1):
                return False
        elif name not in ELEMENTWISE and name != "broadcast_in_dim":
            return False
    return True


def _is_region_eqn(g: Graph, eqn: Any, rank: int, length: int) -> bool:
    """Whether a consumer of a region value can be computed step by step."""
    name = _compat.primitive_name(eqn)
    outs = eqn.outvars
    if not all(len(_shape(v)) == rank and _shape(v)[0] == length for v in outs):
        return False
    if name in ELEMENTWISE:
        return _no_sharding(eqn)
    if name == "broadcast_in_dim":
        dims = tuple(eqn.params["broadcast_dimensions"])
        return len(_shape(eqn.invars[0])) == rank and dims[:1] == (0,) and _no_sharding(eqn)
    return name == "jit" and _jit_ok(eqn)


def _is_sink(eqn: Any) -> bool:
    return _compat.primitive_name(eqn) == "reduce_sum" and 0 in tuple(eqn.params["axes"])


def _scan_candidates(g: Graph, root_in: Any, rank: int, length: int) -> dict[int, set[Any]]:
    """Scans whose stacked outputs feed ``root_in`` through region-like equations, with those ys."""
    found: dict[int, set[Any]] = {}
    seen: set[Any] = set()
    stack = [root_in]
    while stack and len(seen) < _MAX_BACKWARD:
        a = stack.pop()
        if _compat.is_literal(a) or a in seen:
            continue
        seen.add(a)
        prod = g.producer_eqn(a)
        if prod is None:
            continue
        j, eqn = prod
        if _compat.primitive_name(eqn) == "scan":
            if a in _compat.scan_parts(eqn).ys and eqn.params["length"] == length:
                found.setdefault(j, set()).add(a)
        elif _is_region_eqn(g, eqn, rank, length):
            stack.extend(v for v in eqn.invars if not _compat.is_literal(v) and len(_shape(v)) == rank)
    return found


def match_reduce_into_scan(g: Graph, i: int) -> Match | None:
    """The ``reduce_into_scan`` match rooted at the ``reduce_sum`` equation ``i``, or None."""
    eqn = g.eqns[i]
    if not _is_sink(eqn) or _compat.is_literal(eqn.invars[0]):
        return None
    shape = _shape(eqn.invars[0])
    found = _scan_candidates(g, eqn.invars[0], len(shape), shape[0])
    for s in sorted(found, reverse=True):  # the latest scan first
        m = _analyze(g, i, s, found[s])
        if m is not None:
            return m
    return None


@dataclasses.dataclass
class _Region:
    atoms: set[Any]
    eqns: set[int]
    sinks: set[int]
    leaves: dict[Any, None]  # ordered set


def _grow(g: Graph, start: Iterable[Any], rank: int, length: int, s: int) -> _Region | None:
    """Forward closure of ``start``: every consumer must be a region equation or a sink."""
    cons, taken = _consumers(g), _taken(g)
    region = _Region(set(start), set(), set(), {})
    work = list(region.atoms)
    while work:
        v = work.pop()
        if g.uses[v] != len(cons.get(v, ())):
            return None  # also an output of the jaxpr
        for j in cons.get(v, ()):
            if j in region.eqns or j in region.sinks:
                continue
            e = g.eqns[j]
            if j in taken or j <= s:
                return None
            if _is_sink(e):
                region.sinks.add(j)
            elif _is_region_eqn(g, e, rank, length):
                region.eqns.add(j)
                for out in e.outvars:
                    region.atoms.add(out)
                    work.append(out)
            else:
                return None
    for j in sorted(region.eqns):
        for a in g.eqns[j].invars:
            if not _compat.is_literal(a) and a not in region.atoms:
                region.leaves[a] = None
    return region


def _pullable(g: Graph, leaf: Any, rank: int, length: int, region: set[int]) -> int | None:
    """The producer of a stacked region operand, if it can be computed per step in the region."""
    shp = _shape(leaf)
    prod = g.producer_eqn(leaf)
    if prod is None or len(shp) != rank or shp[0] != length or length == 1:
        return None
    k, eqn = prod
    cons = _consumers(g).get(leaf, ())
    if k in g.claimed or len(eqn.outvars) != 1 or not _no_sharding(eqn):
        return None
    if g.uses[leaf] != len(cons) or not all(j in region for j in cons):
        return None  # also used outside the region: keep it as it is
    name = _compat.primitive_name(eqn)
    if name == "broadcast_in_dim":
        return k if 0 not in tuple(eqn.params["broadcast_dimensions"]) else None
    ok = all(len(_shape(a)) == 0 or (len(_shape(a)) == rank and _shape(a)[0] in (1, length))
             for a in eqn.invars)
    return k if name in ELEMENTWISE and ok else None


def _analyze(g: Graph, i: int, s: int, fused: set[Any]) -> Match | None:
    """The match fusing the region grown from ``fused`` (ys of scan ``s``) into that scan."""
    scan_eqn = g.eqns[s]
    if s in g.claimed:
        return None
    sp = _compat.scan_parts(scan_eqn)
    rank, length = len(_shape(g.eqns[i].invars[0])), sp.length
    region = None
    for _ in range(len(sp.ys) + 1):
        # Start from the stacked outputs that reach the root; absorb the scan's other ys the
        # region reads (``ys1 * ys2``), since a region operand cannot be a result of the scan.
        region = _grow(g, fused, rank, length, s)
        if region is None:
            return None
        more = {a for a in region.leaves if a in sp.ys}
        if not more:
            break
        if any(len(_shape(a)) != rank for a in more):
            return None
        fused = fused | more
    if region is None or not region.sinks or max(region.sinks) != i:
        return None  # the root must be the last sink: the engine visits it first
    region_ys = [v for v in sp.ys if v in region.atoms]
    cons = _consumers(g)
    # Stacked operands computed from loop-invariant or other stacked arrays only for the region
    # (``jnp.broadcast_to(b, ys.shape)``, ``log(targets)``) are computed per step instead: no
    # ``length x ...`` array of them is materialised either.
    pulled: set[int] = set()
    work = list(region.leaves)
    while work and len(pulled) < _MAX_PULLED:
        leaf = work.pop()
        k = _pullable(g, leaf, rank, length, region.eqns | pulled)
        if k is None:
            continue
        pulled.add(k)
        del region.leaves[leaf]
        for a in g.eqns[k].invars:
            if not _compat.is_literal(a) and a not in region.leaves:
                region.leaves[a] = None
                work.append(a)
    # The region's operands must not depend on the scan's results (else fusion would be a cycle).
    after = set(scan_eqn.outvars)
    for j in range(s + 1, i + 1):
        if any(not _compat.is_literal(a) and a in after for a in g.eqns[j].invars):
            after.update(g.eqns[j].outvars)
    if any(leaf in after for leaf in region.leaves):
        return None
    at = max([s] + [p[0] for leaf in region.leaves if (p := g.producer_eqn(leaf)) is not None])
    # Results still used elsewhere: carries, other ys, other sinks.
    extras: list[tuple[str, int]] = []
    extra_vars: list[Any] = []
    used = lambda v: not _compat.is_dropvar(v) and g.uses[v] > 0
    for k, v in enumerate(sp.carry_out):
        if used(v):
            extras.append(("carry", k))
            extra_vars.append(v)
    kept = tuple(k for k, v in enumerate(sp.ys) if v not in region.atoms and used(v))
    for k in kept:
        extras.append(("ys", k))
        extra_vars.append(sp.ys[k])
    sinks = [i, *sorted(region.sinks - {i})]
    for n, j in enumerate(sinks[1:], start=1):
        if used(g.eqns[j].outvars[0]):
            extras.append(("sink", n))
            extra_vars.append(g.eqns[j].outvars[0])
    if any(j <= at for v in extra_vars for j in cons.get(v, ())):
        return None  # a result is needed before the replacement can run
    steps = _steps(g, sorted(region.eqns | pulled), rank, length, set(region_ys), region.leaves)
    if steps is None:
        return None
    # Captures: the scan's operands and the region's leaves (arrays), and the static Fusion.
    captures: dict[str, Any] = {}
    for prefix, atoms in (("const", sp.consts), ("init", sp.carry), ("xs", sp.xs)):
        captures.update((f"{prefix}{k}", a) for k, a in enumerate(atoms))
    leaves = []
    for k, leaf in enumerate(region.leaves):
        shp = _shape(leaf)
        kind = ("raw" if len(shp) != rank else "stacked" if shp[0] == length and length != 1
                else "squeeze")
        name = f"{'stacked' if kind == 'stacked' else 'inv'}{k}"
        captures[name] = leaf
        leaves.append((name, leaf, kind))
    atoms = dict(captures)
    sink_specs = tuple((g.eqns[j], g.eqns[j].invars[0],
                        tuple(a - 1 for a in g.eqns[j].params["axes"] if a != 0)) for j in sinks)
    captures["fusion"] = Fusion(
        sp.body, length, bool(sp.reverse), sp.unroll, len(sp.consts), len(sp.carry), len(sp.xs),
        tuple((k, v) for k, v in enumerate(sp.ys) if v in region.atoms), kept, tuple(leaves),
        steps, sink_specs, tuple(extras))
    swallowed = {s, *region.eqns, *region.sinks, *pulled}
    return Match(i, captures, atoms, swallowed, tuple(extra_vars), at)


def _steps(g: Graph, order: list[int], rank: int, length: int, ys: set[Any],
           leaves: dict[Any, None]) -> tuple[_Step, ...] | None:
    """The per-step program of the region's equations, ``jit`` calls inlined, shapes checked.

    Per step, a value of the region's rank loses its first (scan) axis; a scalar stays a scalar;
    any other value must be loop-invariant (read as is, e.g. the operand of a broadcast).
    """
    strip: dict[Any, bool] = {}  # atom -> whether it is a rank-`rank` value (axis 0 removed per step)
    for v in ys:
        strip[v] = True
    for leaf in leaves:
        shp = _shape(leaf)
        if len(shp) == rank and shp[0] not in (1, length):
            return None
        strip[leaf] = len(shp) == rank
    out: list[_Step] = []
    for j in order:
        if not _flatten(g.eqns[j], list(g.eqns[j].invars), list(g.eqns[j].outvars), rank, strip, out, 0):
            return None
    return tuple(out)


def _kind(a: Any, rank: int, strip: dict[Any, bool]) -> str | None:
    """'R' (stripped per step), 'S' (scalar), 'O' (other invariant) or None (unknown / invalid)."""
    if _compat.is_literal(a):
        return "S" if _shape(a) == () else None
    if a not in strip:
        return None
    if strip[a]:
        return "R"
    return "S" if _shape(a) == () else "O"


def _flatten(eqn: Any, ins: list[Any], outs: list[Any], rank: int, strip: dict[Any, bool],
             steps: list[_Step], depth: int) -> bool:
    """Append the per-step form of ``eqn`` (operands ``ins``, results ``outs``) to ``steps``."""
    name = _compat.primitive_name(eqn)
    kinds = [_kind(a, rank, strip) for a in ins]
    if None in kinds:
        return False
    if name == "jit":
        sub = _inner_jaxpr(eqn)
        if sub is None or depth > _MAX_JIT_DEPTH:
            return False
        # Inner variables are distinct objects: bind the call's operands to them with aliases.
        for inner, outer, kind in zip(_compat.invars(sub), ins, kinds):
            steps.append(_Step("alias", (outer,), (inner,)))
            strip[inner] = kind == "R"
        for e in _compat.eqns(sub):
            if not _flatten(e, list(e.invars), list(e.outvars), rank, strip, steps, depth + 1):
                return False
        for inner, outer in zip(_compat.outvars(sub), outs):
            k = _kind(inner, rank, strip)
            if k is None or (k == "R") != (len(_shape(outer)) == rank) or (k != "R" and k != "S"):
                return False
            steps.append(_Step("alias", (inner,), (outer,)))
            strip[outer] = k == "R"
        return True
    if name == "broadcast_in_dim":
        shp, dims = _shape(outs[0]), tuple(eqn.params["broadcast_dimensions"])
        if len(shp) != rank or not _no_sharding(eqn) or len(ins) != 1:
            return False
        if kinds[0] == "R":
            if dims[:1] != (0,):
                return False
            step_dims = tuple(d - 1 for d in dims[1:])
        else:
            if 0 in dims:
                return False
            step_dims = tuple(d - 1 for d in dims)
        steps.append(_Step("bcast", tuple(ins), tuple(outs), shape=shp[1:], dims=step_dims))
        strip[outs[0]] = True
        return True
    if name not in ELEMENTWISE or not _no_sharding(eqn) or "O" in kinds:
        return False
    stacked = "R" in kinds
    for v in outs:
        if (len(_shape(v)) == rank) != stacked or (not stacked and _shape(v) != ()):
            return False
        strip[v] = stacked
    steps.append(_Step("eqn", tuple(ins), tuple(outs), eqn=eqn))
    return True

