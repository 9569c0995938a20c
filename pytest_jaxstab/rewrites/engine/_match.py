"""Matching patterns against a jaxpr's equations.

A match is only accepted when every equation it swallows (all but the root) has no consumer outside
the match: the rewritten program must neither compute an intermediate twice nor change what another
consumer sees. The exception is a sub-term the pattern marks ``recompute=True``: where it has other
consumers, its equations (and those they read inside the match) stay in the program for them, and
the replacement computes this use's own stable form from the captures. Glue equations JAX inserts
(same-dtype ``convert_element_type``, ``broadcast_in_dim``, ``reshape``, ``copy``,
``squeeze``/``expand_dims``) are seen through and swallowed with the rest.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import numpy as np

from ... import _compat
from ..._dtypes import is_real_kind
from ..._errors import ArgumentTypeError
from ..._primitives import GLUE
from . import _fold
from ._glue import _glue_ok, _reduction_axes
from ._graph import OPEN_SCOPES as OPEN_SCOPES
from ._graph import SCOPE_PREFIX as SCOPE_PREFIX
from ._graph import Graph as Graph
from ._graph import Match as Match
from ._graph import _final as _final
from ._pattern import COMMUTATIVE, AnyOf, Const, Op, Param, Pattern, Var


class _Edges(dict):  # type: ignore[type-arg]
    """Internal use counts per variable; a plain dict (cheap to copy), 0 when absent."""

    def __missing__(self, key: Any) -> int:
        return 0


@dataclasses.dataclass
class _State:
    captures: dict[str, Any]
    atoms: dict[str, Any]
    shared: dict[Any, Any]
    swallowed: set[int]
    edges: _Edges
    recomputable: frozenset[int] = frozenset()  # swallowed equations that may stay for other uses

    def copy(self) -> _State:
        return _State(dict(self.captures), dict(self.atoms), dict(self.shared), set(self.swallowed),
                      _Edges(self.edges), self.recomputable)


def _same_atom(a: Any, b: Any) -> bool:
    if a is b:
        return True
    if _compat.is_literal(a) and _compat.is_literal(b):
        va, vb = np.asarray(_compat.literal_value(a)), np.asarray(_compat.literal_value(b))
        return va.shape == vb.shape and va.dtype == vb.dtype and bool(np.array_equal(va, vb))
    return False


def _scalar_value(g: Graph, atom: Any, state: _State) -> float | None:
    """The constant all elements of ``atom`` equal, seeing through broadcasts; None if not constant."""
    seen = 0
    val: Any
    while True:
        if _compat.is_literal(atom):
            val = np.asarray(_compat.literal_value(atom))
        elif atom in g.const_values:
            if _compat.is_tracer(g.const_values[atom]):  # an enclosing trace's value: not constant
                return None
            val = np.asarray(g.const_values[atom])
        else:
            prod = g.producer_eqn(atom)
            if prod is None:
                return None
            i, eqn = prod
            if seen > 4 or not (g.is_glue(eqn) or _compat.primitive_name(eqn) == "convert_element_type") \
                    or i in g.claimed:
                # computed from constants alone (``_fold``): matched by its value, its equations
                # left in the program (they may have other uses; unused, they are dead code)
                folded = _fold.constant(g, atom)
                if folded is None:
                    return None
                val = folded
            else:
                state.swallowed.add(i)
                if seen == 0:  # the operand the pattern's parent reads: a use inside the match
                    state.edges[atom] += 1
                atom = eqn.invars[0]
                if not _compat.is_literal(atom):
                    state.edges[atom] += 1
                seen += 1
                continue
        if val.size and val.dtype.kind == "c":
            # A complex constant on the real axis is that real number (rules that may rewrite complex
            # expressions are few: `_complex_guard`); any other is no real constant.
            if np.any(val.imag != 0):
                return None
            val = val.real
        if val.size == 0 or not (val.dtype.kind == "b" or is_real_kind(val.dtype)):
            return None
        flat = val.reshape(-1).astype(np.float64)
        if not np.all(flat == flat[0]):
            return None
        return float(flat[0])


def match_atom(g: Graph, pat: Pattern, atom: Any, state: _State, *,
               into_reduction: bool = False) -> Iterator[_State]:
    """All ways ``pat`` matches the value ``atom`` (each a new state).

    ``into_reduction``: ``atom`` is the operand of a reduction, so glue may not change its shape.
    """
    if isinstance(pat, AnyOf):
        for alt in pat.alternatives:
            yield from match_atom(g, alt, atom, state, into_reduction=into_reduction)
        return
    if isinstance(pat, Var):
        if pat.where is not None and not pat.where(_compat.aval(atom)):
            return
        if pat.name in state.atoms:
            if _same_atom(state.atoms[pat.name], atom):
                yield state
            return
        st = state.copy()
        st.captures[pat.name] = atom
        st.atoms[pat.name] = atom
        yield st
        return
    if isinstance(pat, Const):
        st = state.copy()
        v = _scalar_value(g, atom, st)
        if v is None:
            return
        ok = pat.value(v) if callable(pat.value) else v == float(pat.value)
        if ok:
            if pat.name is not None:
                st.captures[pat.name] = v
            yield st
        return
    if not isinstance(pat, Op):
        raise ArgumentTypeError(f"not a pattern: {pat!r}; build one with jst.rewrites.pattern.op, var")
    if pat.keep:  # matched for its structure only: nothing swallowed, its value an operand
        assert pat.name is not None
        if pat.name in state.atoms:
            if _same_atom(state.atoms[pat.name], atom):
                yield state
            return
        inner = dataclasses.replace(pat, keep=False, name=None)
        for st in match_atom(g, inner, atom, state.copy(), into_reduction=into_reduction):
            kept = st.copy()
            kept.swallowed, kept.edges = set(state.swallowed), _Edges(state.edges)
            kept.captures[pat.name] = atom
            kept.atoms[pat.name] = atom
            yield kept
            return
        return
    if not pat.recompute:
        yield from _match_op(g, pat, atom, state, into_reduction)
        return
    for st in _match_op(g, pat, atom, state, into_reduction):
        st.recomputable = st.recomputable | (st.swallowed - state.swallowed)
        yield st


def _match_op(g: Graph, pat: Op, atom: Any, state: _State, into_reduction: bool) -> Iterator[_State]:
    """All ways the (not kept) ``op`` pattern ``pat`` matches ``atom``, glue seen through."""
    key = pat.name if pat.name is not None else id(pat)
    if _compat.is_literal(atom):
        return
    if key not in state.shared and not (pat.prim & _SEEN_THROUGH):
        # the walk below can only end at the head (``Graph.head``, kept per atom): refuse before
        # any state is copied, as most tries end here
        if pat.glue:
            head = g.head(atom)[0]
        else:
            prod = g.producer_eqn(atom)
            head = None if prod is None else _compat.primitive_name(prod[1])
        if head is None or head not in pat.prim:
            return
    st = state.copy()
    st.edges[atom] += 1
    cur = atom
    chain: list[Any] = []  # the glue equations seen through, consumer first
    while True:  # see through glue down to the equation the pattern names
        prod = g.producer_eqn(cur)
        if key in st.shared:  # second use of a shared sub-term: the same (or an identical) equation
            if cur is st.shared[key]:
                if _glue_ok(g, cur, chain, into_reduction):
                    yield st
                return
            dups: list[int] = []
            if prod is not None and _compat.primitive_name(prod[1]) in pat.prim and _equivalent(
                    g, st.shared[key], cur, 4, dups) and not any(j in g.claimed for j in dups) \
                    and _glue_ok(g, cur, chain, into_reduction):
                for j in dups:
                    st.swallowed.add(j)
                    for v in g.eqns[j].invars:
                        if not _compat.is_literal(v):
                            st.edges[v] += 1
                yield st
                return
        if prod is None:
            return
        i, eqn = prod
        if i in st.swallowed and key in st.shared and pat.glue and g.seen_through(eqn):
            # the second use of a shared sub-term through the glue its first use swallowed (a
            # keepdims max read by both ``x - m`` and ``m + log(...)``): the same path, read again
            chain.append(eqn)
            cur = eqn.invars[0]
            continue
        if i in st.swallowed or (i in g.claimed and not _readable_final(g, pat, i)):
            return
        if key not in st.shared and _compat.primitive_name(eqn) in pat.prim:
            break
        if not (pat.glue and g.seen_through(eqn)):
            return
        st.swallowed.add(i)
        chain.append(eqn)
        cur = eqn.invars[0]
        if _compat.is_literal(cur):
            return
        st.edges[cur] += 1
    if not _glue_ok(g, cur, chain, into_reduction):
        return
    for st2 in _match_eqn(g, pat, i, eqn, st):
        st2.shared[key] = cur
        if pat.name is not None:
            st2.atoms.setdefault(pat.name, cur)
        yield st2


def _readable_final(g: Graph, pat: Op, i: int) -> bool:
    """Whether a ``recompute`` sub-term may see equation ``i`` although it is claimed: it is a
    final rule's result (not one another match of this pass takes). Rules compose this way: a rule
    reads the stable form an earlier one produced (``1 - sigmoid(z)`` became ``sigmoid(-z)``, then
    its log is ``-softplus(z)``); the final equations stay for their other uses, or are replaced
    where this match was their only use. A final result is never a match's root, so no replacement
    is matched again at its root and the passes still end."""
    return pat.recompute and i in g.final and i not in g.taken


def _equivalent(g: Graph, a1: Any, a2: Any, depth: int, dups: list[int]) -> bool:
    """Whether ``a2`` is computed by equations identical to those computing ``a1`` (the user wrote
    ``exp(x)`` twice); the duplicate equations are appended to ``dups``."""
    if _same_atom(a1, a2):
        return True
    if depth == 0 or _compat.is_literal(a1) or _compat.is_literal(a2):
        return False
    p1, p2 = g.producer_eqn(a1), g.producer_eqn(a2)
    if p1 is None or p2 is None:
        return False
    e1, e2 = p1[1], p2[1]
    if (e1.primitive is not e2.primitive or len(e1.outvars) != 1 or len(e2.outvars) != 1
            or len(e1.invars) != len(e2.invars) or e1.effects or e2.effects):
        return False
    try:
        if e1.params != e2.params:
            return False
    except Exception:  # params that refuse comparison are not provably equal
        return False
    mark = len(dups)
    if not all(_equivalent(g, u, v, depth - 1, dups) for u, v in zip(e1.invars, e2.invars)):
        del dups[mark:]
        return False
    dups.append(p2[0])
    return True


def _match_eqn(g: Graph, pat: Op, i: int, eqn: Any, state: _State) -> Iterator[_State]:
    if _compat.primitive_name(eqn) not in pat.prim or len(eqn.outvars) != 1:
        return
    if len(eqn.invars) != len(pat.args):
        return
    captured: dict[str, Any] = {}
    for pname, want in pat.params:
        if pname not in eqn.params:
            return
        have = eqn.params[pname]
        if isinstance(want, Param):
            val = want.value(have)
            if val is None and want.read is not None:  # a captured None (a gather's fill) is a value
                return
            captured[want.name] = val
        elif callable(want):
            if not want(have):
                return
        elif have != want:
            return
    for name, val in pat.fixed:  # what this alternative stands for (pattern.fixed)
        if name in captured and captured[name] != val:
            return
        captured[name] = val
    st = state.copy()
    st.swallowed.add(i)
    for name, val in captured.items():
        if name in st.captures and st.captures[name] != val:
            return
        st.captures[name] = val
    orders = [list(eqn.invars)]
    if _compat.primitive_name(eqn) in COMMUTATIVE and len(eqn.invars) == 2:
        orders.append(list(reversed(eqn.invars)))
    reduces = _reduction_axes(eqn) is not None
    for operands in orders:
        yield from _match_args(g, pat.args, operands, st, reduces)


def _match_args(g: Graph, pats: tuple[Pattern, ...], atoms: list[Any], state: _State,
                into_reduction: bool = False) -> Iterator[_State]:
    if not pats:
        yield state
        return
    for st in match_atom(g, pats[0], atoms[0], state, into_reduction=into_reduction):
        yield from _match_args(g, pats[1:], atoms[1:], st, into_reduction)


def root_ops(pat: Pattern) -> tuple[Op, ...]:
    """The ``op`` patterns a pattern can be rooted at (alternatives of ``any_of`` flattened)."""
    roots: list[Op] = []
    stack: list[Pattern] = [pat]
    while stack:
        p = stack.pop(0)
        if isinstance(p, AnyOf):
            stack[0:0] = list(p.alternatives)
        elif isinstance(p, Op):
            roots.append(p)
    return tuple(roots)


def match_root(g: Graph, pat: Pattern, i: int, roots: tuple[Op, ...] | None = None) -> Iterator[Match]:
    """Every acceptable match of ``pat`` rooted at equation ``i`` (use-count checked)."""
    eqn = g.eqns[i]
    if i in g.claimed:
        return
    name = _compat.primitive_name(eqn)
    for rp in root_ops(pat) if roots is None else roots:
        if name not in rp.prim or not _could_match(g, rp, eqn):
            continue
        start = _State({}, {}, {}, set(), _Edges())
        for st in _match_eqn(g, rp, i, eqn, start):
            swallowed = _settle(g, i, st)
            if swallowed is not None:
                yield Match(i, st.captures, st.atoms, swallowed)


def _could_match(g: Graph, pat: Op, eqn: Any) -> bool:
    """A cheap first look: whether each operand's producer (through glue) can be what the pattern's
    arguments name, one level deep. Most equations of a program are refused here, before the full
    match copies any state (the catalogue has many rules rooted at ``add``, ``sub``, ``mul``)."""
    return could_match_heads(pat, _compat.primitive_name(eqn), tuple(g.head(a) for a in eqn.invars))


def could_match_heads(pat: Op, name: str, heads: tuple[tuple[str | None, bool], ...]) -> bool:
    """The first look (``_could_match``) from the root's primitive and its operands' heads alone
    (``Graph.head``): the rewrite pass asks it once per distinct ``(name, heads)`` of a program."""
    if name not in pat.prim or len(heads) != len(pat.args):
        return False
    sig = _signature(pat)
    if sig is None:
        return True
    if all(_fits(w, h) for w, h in zip(sig, heads)):
        return True
    return (name in COMMUTATIVE and len(heads) == 2
            and _fits(sig[0], heads[1]) and _fits(sig[1], heads[0]))


def could_match_deep(pat: Op, name: str, heads2: tuple[Any, ...]) -> bool:
    """The first look two levels deep: ``heads2`` holds, per operand, ``(head, heads of its
    producer's operands)`` (``Graph.head2``). An operand the pattern names by an ``op`` must be
    produced (through glue) by an equation whose own operands can be what that op's arguments
    name. Refuses only what the full match would refuse: a named ``op`` sees through glue to the
    head and then matches that equation's operands."""
    if name not in pat.prim or len(heads2) != len(pat.args):
        return False
    orders = [heads2]
    if name in COMMUTATIVE and len(heads2) == 2:
        orders.append((heads2[1], heads2[0]))
    sig = _signature(pat)
    for hs in orders:
        if sig is not None and not all(_fits(w, h[0]) for w, h in zip(sig, hs)):
            continue
        if all(_operand_could_match(a, h) for a, h in zip(pat.args, hs)):
            return True
    return False


def _operand_could_match(arg: Pattern, head2: Any) -> bool:
    if not (isinstance(arg, Op) and arg.glue and not arg.prim & _SEEN_THROUGH):
        return True  # a variable, a constant or alternatives: the one-level look
    (name, _), below = head2
    if name is None:
        return False  # an input, a literal or a constant: no op pattern matches it
    return below is None or could_match_heads(arg, name, below)


_SIGNATURES: dict[int, tuple[Any, ...] | None] = {}


def _signature(pat: Op) -> tuple[Any, ...] | None:
    """Per argument of ``pat``: None (anything) or ``(primitive names, a constant accepted)``;
    None for the whole when no argument constrains anything. Cached (patterns live as long as
    their rules; the cache holds the pattern so its id is never reused)."""
    key = id(pat)
    if key not in _SIGNATURES:
        sig = tuple(_want(a) for a in pat.args)
        _SIGNATURES[key] = None if all(w is None for w in sig) else sig
        _KEEP_ALIVE.append(pat)
    return _SIGNATURES[key]


_KEEP_ALIVE: list[Op] = []
#: Primitives an op pattern may name that the first look would see through (it then looks no further).
_SEEN_THROUGH = frozenset({*GLUE, "convert_element_type"})


def _want(p: Pattern) -> tuple[frozenset[str], bool] | None:
    # a kept sub-term (``keep``) is matched for its structure as any op is: its head is checked too
    if isinstance(p, Var) or (isinstance(p, Op) and (not p.glue or p.prim & _SEEN_THROUGH)):
        return None
    if isinstance(p, Const):
        return frozenset(), True
    if isinstance(p, Op):
        return p.prim, False
    if isinstance(p, AnyOf):
        parts = [_want(a) for a in p.alternatives]
        if any(w is None for w in parts):
            return None
        return (frozenset().union(*(w[0] for w in parts if w is not None)),
                any(w[1] for w in parts if w is not None))
    return None


def _fits(want: tuple[frozenset[str], bool] | None, head: tuple[str | None, bool]) -> bool:
    if want is None:
        return True
    name, constant = head
    return (constant and want[1]) or (name is not None and name in want[0])


def _settle(g: Graph, root: int, st: _State) -> set[int] | None:
    """The equations the match replaces: all it swallowed when none has a consumer outside the
    match; else, where every such equation is recomputable, all but those and the swallowed
    equations they read (they stay for their other consumers); None when the match is refused."""
    escaping = [j for j in st.swallowed if j != root
                and any(g.uses[v] != st.edges[v] for v in g.eqns[j].outvars)]
    if not escaping:
        return st.swallowed
    if any(j not in st.recomputable for j in escaping):
        return None
    stays: set[int] = set()
    stack = escaping
    while stack:
        j = stack.pop()
        if j in stays:
            continue
        stays.add(j)
        for a in g.eqns[j].invars:
            prod = g.producer_eqn(a)
            if prod is not None and prod[0] in st.swallowed and prod[0] != root:
                stack.append(prod[0])
    return st.swallowed - stays
