"""The graph a rewrite pass works on, and what a match of a pattern in it is (``Graph``, ``Match``).

Split from ``_match`` (the matcher) so that the glue rules (``_glue``) and the matcher both read it.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any

from ... import _compat
from ..._primitives import GLUE
from . import _fold

#: Equations created by a rule's replacement carry this scope and are never matched again, so a
#: replacement containing its own pattern (the corrected variance contains a variance) is final.
SCOPE_PREFIX = "jaxstab_"
#: Names of rules whose replacements other rules may match (``Rule(composable=True)``): a small
#: identity (``exp(a)**2 = exp(2a)``) whose result another rule continues (``x / exp(2a)``).
OPEN_SCOPES: set[str] = set()


def _final(eqn: Any) -> bool:
    """Whether ``eqn`` was created by a replacement whose result is final (never matched again):
    inside the scope of any rule that is not composable, also where a composable rule's scope
    encloses it (a composable replacement that inlines code a final rule produced)."""
    if not _compat.in_scope_named(eqn, SCOPE_PREFIX):
        return False
    if not OPEN_SCOPES:
        return True
    return any(name.startswith(SCOPE_PREFIX) and name[len(SCOPE_PREFIX):] not in OPEN_SCOPES
               for name in _compat.scope_names(eqn))



#: ``Graph.head`` and ``Graph.head2`` of a literal: produced by no equation, a constant.
_LITERAL_HEAD: tuple[str | None, bool] = (None, True)
_LITERAL_HEAD2: tuple[tuple[str | None, bool], tuple[Any, ...] | None] = (_LITERAL_HEAD, None)


class Graph:
    """Producer and use-count index of one (closed) jaxpr, built once per rewrite pass."""

    def __init__(self, closed: Any, claimed: set[int] | None = None) -> None:
        """``claimed``: the equations already known to be a rule's replacement (the rewrite pass
        passes the set its splice produced); None finds them by their name scope."""
        self.closed = closed
        self.eqns = _compat.eqns(closed)
        self.producer: dict[Any, int] = {}
        self.uses: Counter[Any] = Counter()
        self.const_values = dict(zip(_compat.constvars(closed), closed.consts))
        #: The outputs of equations ``_fold`` may fold: a foldable primitive whose operands are all
        #: literals, constants or such outputs (found in the same walk; ``_fold.constant`` evaluates)
        self.from_constants: set[Any] = {v for v, c in self.const_values.items() if not _compat.is_tracer(c)}
        literal, foldable, known = _compat.Literal, _fold.FOLDABLE, self.from_constants
        for i, eqn in enumerate(self.eqns):
            for v in eqn.outvars:
                self.producer[v] = i
            computed = True
            for a in eqn.invars:
                if not isinstance(a, literal):
                    self.uses[a] += 1
                    computed = computed and a in known
            if computed and len(eqn.outvars) == 1 and _compat.primitive_name(eqn) in foldable:
                known.add(eqn.outvars[0])
        for a in _compat.outvars(closed):
            if not _compat.is_literal(a):
                self.uses[a] += 1
        self.claimed: set[int] = set(claimed) if claimed is not None else {
            i for i, eqn in enumerate(self.eqns) if _final(eqn)}
        self._heads: dict[int, tuple[str | None, bool]] = {}
        self._heads2: dict[int, Any] = {}
        self._consumers: dict[Any, list[int]] | None = None
        #: The final equations (earlier replacements) as the pass found them, and the equations
        #: this pass's matches took so far: a ``recompute`` sub-term may read a final result
        #: (``log(1 - p)`` after ``1 - p`` became a stable sigmoid) but never what another match of
        #: the same pass replaces.
        self.final: frozenset[int] = frozenset(self.claimed)
        self.taken: set[int] = set()
        #: Values of atoms the program computes from constants alone (``_fold.constant``), by atom.
        self.folded: dict[Any, Any] = {}
        #: The equations a pass tries (None: all); after a splice, those its changes reach
        #: (``_engine._downstream``): every other one matched nothing in the pass before.
        self.dirty: set[int] | None = None
        #: Rules' per-graph caches (their gates' sweeps), by the rule's key: they live and die with the
        #: graph, and a dict lookup costs a tenth of a weak-keyed one (a gate is asked per equation).
        self.memo: dict[str, Any] = {}

    def consumers(self, atom: Any) -> list[int]:
        """The indices of the equations reading ``atom``, in program order (built on first use)."""
        if self._consumers is None:
            self._consumers = {}
            for i, eqn in enumerate(self.eqns):
                for a in eqn.invars:
                    if not _compat.is_literal(a):
                        users = self._consumers.setdefault(a, [])
                        if not users or users[-1] != i:
                            users.append(i)
        return self._consumers.get(atom, [])

    def producer_eqn(self, atom: Any) -> tuple[int, Any] | None:
        if _compat.is_literal(atom):
            return None
        i = self.producer.get(atom)
        return None if i is None else (i, self.eqns[i])

    def producer_past_glue(self, atom: Any, limit: int = 16) -> Any:
        """The first non-glue equation producing ``atom``, seeing through at most ``limit`` glue
        equations (None for an input or a literal, or past the limit)."""
        for _ in range(limit):
            prod = self.producer_eqn(atom)
            if prod is None:
                return None
            if not self.seen_through(prod[1]):
                return prod[1]
            atom = prod[1].invars[0]
        return None

    def head(self, atom: Any) -> tuple[str | None, bool]:
        """``(primitive, constant)``: the primitive producing ``atom`` once glue is seen through (None
        for an input or a literal), and whether it is a constant a ``const`` pattern may match."""
        if _compat.is_literal(atom):  # every literal's (a program holds one per use)
            return _LITERAL_HEAD
        key = id(atom)
        got = self._heads.get(key)
        if got is None:
            got = self._heads[key] = self._head(atom)
        return got

    def head2(self, atom: Any) -> tuple[tuple[str | None, bool], tuple[Any, ...] | None]:
        """``(head(atom), heads of the operands of the equation producing it through glue)``; the
        second part None where no equation produces it (an input, a literal, past the glue limit)."""
        if _compat.is_literal(atom):
            return _LITERAL_HEAD2
        key = id(atom)
        got = self._heads2.get(key)
        if got is None:
            prod = self.producer_past_glue(atom)
            below = None if prod is None else tuple(self.head(b) for b in prod.invars)
            got = self._heads2[key] = (self.head(atom), below)
        return got

    def _head(self, atom: Any) -> tuple[str | None, bool]:
        # One walk down the glue serves both answers: an op pattern sees through glue to the first
        # other equation (at most 16), a const pattern through glue and same-type conversions to a
        # literal or a constant (at most 6, as ``_scalar_value``). The pass asks once per atom.
        name: str | None = None
        constant = False
        a = atom
        const_steps = 0  # glue seen through so far
        decided = False  # the constant's walk ended at an accumulation conversion the op walk passes
        for _ in range(16):
            if _compat.is_literal(a) or a in self.const_values:
                constant = constant if decided else const_steps < 6
                break
            i = self.producer.get(a)
            if i is None:
                break
            eqn = self.eqns[i]
            if self.is_glue(eqn):
                const_steps += 1
            elif self.is_accumulation_convert(eqn):
                if not decided:  # as for any conversion: the constant's answer is found past it
                    constant, decided = self._constant_past(eqn.invars[0], 5 - const_steps), True
            else:
                name = _compat.primitive_name(eqn)
                if name == "convert_element_type" and not decided:  # ends the op walk, not the constant's
                    constant = self._constant_past(eqn.invars[0], 5 - const_steps)
                if not constant and not decided:  # computed from constants alone (``_fold``)
                    constant = _fold.constant(self, a) is not None
                break
            a = eqn.invars[0]
        return name, constant

    def _constant_past(self, atom: Any, steps: int) -> bool:
        a = atom
        for _ in range(max(steps, 0)):
            if _compat.is_literal(a) or a in self.const_values:
                return True
            prod = self.producer_eqn(a)
            if prod is None or not (self.is_glue(prod[1])
                                    or _compat.primitive_name(prod[1]) == "convert_element_type"):
                return False
            a = prod[1].invars[0]
        return False

    def is_glue(self, eqn: Any) -> bool:
        name = _compat.primitive_name(eqn)
        if name in GLUE:
            return len(eqn.outvars) == 1
        if name == "convert_element_type":
            return _compat.aval(eqn.invars[0]).dtype == _compat.aval(eqn.outvars[0]).dtype
        return False

    def seen_through(self, eqn: Any) -> bool:
        """Whether an op pattern sees through ``eqn``: glue, or one of the two conversions of a
        low-precision sum's float32 accumulation (:meth:`is_accumulation_convert`)."""
        return self.is_glue(eqn) or self.is_accumulation_convert(eqn)

    def is_accumulation_convert(self, eqn: Any) -> bool:
        """Whether ``eqn`` is one side of ``convert(low -> f32) -> reduce_sum -> convert(f32 -> low)``
        with nothing else reading the float32 values: how ``jnp.sum``/``jnp.mean`` of float16 and
        bfloat16 accumulate. Seen through, a rule written against the float32 spelling matches the low
        one; its replacement's own sums (``jnp.sum`` in the forms) accumulate in float32 the same way.
        Another reader of the float32 sum or of the widened operand ends it: swallowing would change
        what that reader sees."""
        if _compat.primitive_name(eqn) != "convert_element_type" or len(eqn.outvars) != 1:
            return False
        src, dst = (_compat.aval(eqn.invars[0]).dtype, _compat.aval(eqn.outvars[0]).dtype)
        names = {getattr(src, "name", str(src)), getattr(dst, "name", str(dst))}
        if names not in ({"float16", "float32"}, {"bfloat16", "float32"}):
            return False
        if dst.itemsize > src.itemsize:  # widening: read only by a reduce_sum narrowed back to src
            users = self.consumers(eqn.outvars[0])
            if len(users) != 1 or self.uses[eqn.outvars[0]] != 1:
                return False
            red = self.eqns[users[0]]
            return self._narrowed_sum(red, src)
        prod = self.producer_eqn(eqn.invars[0])  # narrowing: of a reduce_sum of a widened dst
        return prod is not None and self.uses[eqn.invars[0]] == 1 and self._narrowed_sum(prod[1], dst)

    def _narrowed_sum(self, red: Any, low: Any) -> bool:
        """``red`` is a one-operand reduce_sum of a conversion from ``low``, its result read once, by a
        conversion back to ``low``."""
        if _compat.primitive_name(red) != "reduce_sum" or len(red.invars) != 1 or len(red.outvars) != 1:
            return False
        wide = self.producer_eqn(red.invars[0])
        if wide is None or _compat.primitive_name(wide[1]) != "convert_element_type" \
                or _compat.aval(wide[1].invars[0]).dtype != low or self.uses[red.invars[0]] != 1:
            return False
        out = red.outvars[0]
        users = self.consumers(out)
        if len(users) != 1 or self.uses[out] != 1:
            return False
        back = self.eqns[users[0]]
        return (_compat.primitive_name(back) == "convert_element_type"
                and _compat.aval(back.outvars[0]).dtype == low)


@dataclasses.dataclass
class Match:
    """A successful match: captures for the replacement and the equations it replaces.

    Pattern matches fill the first four fields only. Two optional fields serve structural rules
    (``Rule(matcher=...)``) whose region has several results, e.g. ``reduce_into_scan``, which
    replaces a ``scan`` whose carry and other outputs stay in use:

    - ``extra_outputs``: outvars of swallowed equations (other than the root's) that stay in use
      outside the match. The replacement then returns ``(root_value, [value per extra output])``
      in this order; each value must have the variable's shape (its dtype is cast).
    - ``at``: the index of the equation after which the replacement runs (default: at the root).
      A matcher sets it when the replacement's results are needed before the root: it must be no
      earlier than the producer of every operand the swallowed equations read from outside, and
      every outside use of the root's and the extra outputs must come after it.
    """

    root: int
    captures: dict[str, Any]  # name -> operand atom (Var captures) or value (Param/Const)
    atoms: dict[str, Any]  # name -> atom, for Var captures (avals for predicates)
    swallowed: set[int]
    extra_outputs: tuple[Any, ...] = ()
    at: int | None = None

    def aval(self, name: str) -> Any:
        """The abstract value (``.shape``, ``.dtype``) of a captured operand."""
        return _compat.aval(self.atoms[name])
