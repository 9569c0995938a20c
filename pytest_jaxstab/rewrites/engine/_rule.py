"""Rules (a pattern plus a replacement written as ordinary JAX code) and the rule registry."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ..._errors import ArgumentError, ArgumentTypeError, UnknownNameError
from ._complex_guard import COMPLEX_VALID, touches_complex
from ._match import OPEN_SCOPES, Graph, Match, could_match_deep, match_root, root_ops
from ._pattern import Pattern

__all__ = ["Rule", "get", "register", "registered", "resolve"]


@dataclasses.dataclass(frozen=True, eq=False)
class Rule:
    """A rewrite: where ``pattern`` matches, the matched expression is replaced.

    Args:
      name: unique rule name (reported by ``jst.explain`` and the reports).
      pattern: a term built with ``jst.rewrites.pattern`` (``op``, ``var``, ``const``, ``param``,
        ``any_of``). The root must be an ``op`` (or ``any_of`` ops).
      replacement: ordinary JAX code called with the captures as keyword arguments (operands as
        arrays/tracers, captured params and constants as Python values); returns the new value of
        the root. Its result is broadcast/cast to the root's shape and dtype when it differs only by
        broadcasting or weak typing; any other mismatch skips the match.
      where: optional predicate on the :class:`Match` (captured avals and params) to refuse a match,
        e.g. ``lambda m: m.captures["axes"] == m.captures["axes2"]``.
      doc: the identity, for humans (defaults to the replacement's docstring).
      matcher: for structural rules a pattern cannot express (e.g. ``reduce_into_scan``): a function
        ``(graph, eqn_index) -> Match | None`` used instead of ``pattern``; ``replacement`` then gets
        ``match.captures`` as keyword arguments as usual.
      roots: for a ``matcher`` rule, the primitive names a match can be rooted at: the pass then
        asks the matcher only at those equations (None: at every equation).
      first_look: optional test ``(primitive, heads2) -> bool`` of what the pass already knows of an
        equation: its primitive and, per operand, ``Graph.head2`` (the operand's head once glue is
        seen through, and the heads of its producer's operands). The pass asks it once per distinct
        ``(primitive, heads2)`` (a program repeats few), where a ``gate`` or a ``matcher`` is asked
        at every equation. It must be a necessary condition of a match: False refuses it.
      example / example_shapes / example_domain: a small function made of the pattern, its input
        shapes and domain: used by the catalogue soundness test and the docs.
      examples: more programs made of the pattern, for alternatives that :func:`verify` cannot build
        from the pattern itself (an index read from the inputs, a library call it does not know):
        functions of ``example_shapes`` arrays, or ``(fn, shapes, domain)`` triples.
      complex_ok: the identity (and the replacement) hold for complex arguments; without it a match
        that reads or makes a complex value is refused (``_complex_guard``).
      gate: optional cheap test ``(graph, eqn_index) -> bool`` run before the pattern is matched at
        an equation, for patterns the built-in first look cannot refuse (an argument seen through
        glue, many alternatives): e.g. "the operand is produced by a selection". False refuses.
      composable: the replacement's equations may be matched by rules again (by default a
        replacement is final). For small identities whose result another rule continues:
        ``exp(a)**2 -> exp(2a)``, then ``x / exp(2a) -> x * exp(-2a)``. The replacement must not
        contain its own pattern (the passes would repeat it up to ``max_passes`` times).
      derivative_only: the replacement computes the same value with the same primitives, bit for
        bit, and changes only how the program differentiates (``logistic`` with the derivative
        ``s(x)·s(-x)``). Not applied inside a custom derivative's primal body (its derivative is the
        rule's, never the primitive's); reported by :func:`jst.explain` as "derivative only", and
        in a check's report only where the check judges the derivative (``grad=True``).

    Example (a user rule: ``x * 2 ** k`` in floating point written as ``ldexp``-style scaling)::

        from pytest_jaxstab.rewrites import Rule, pattern as p
        x = p.var("x")
        rule = Rule("log_sqrt", p.op("log", p.op("sqrt", x)), lambda x: 0.5 * jnp.log(x))
    """

    name: str
    pattern: Pattern | None
    replacement: Callable[..., Any]
    where: Callable[[Match], bool] | None = None
    doc: str = ""
    matcher: Callable[[Graph, int], Match | None] | None = None
    example: Callable[..., Any] | None = None
    example_shapes: Sequence[tuple[int, ...]] = ((8,),)
    example_domain: Any = None
    examples: Sequence[Any] = ()
    complex_ok: bool = False
    composable: bool = False
    gate: Callable[[Graph, int], bool] | None = None
    roots: frozenset[str] | None = None
    derivative_only: bool = False
    first_look: Callable[[str, tuple[Any, ...]], bool] | None = None

    def __post_init__(self) -> None:
        if not self.name or not isinstance(self.name, str):
            raise ArgumentError(f"Rule(name={self.name!r}): the name must be a non-empty string")
        if self.pattern is None and self.matcher is None:
            raise ArgumentError(f"Rule {self.name!r}: no pattern and no matcher; give a pattern (or matcher)")
        if not callable(self.replacement):
            raise ArgumentTypeError(f"Rule {self.name!r}: replacement={self.replacement!r} must be callable")
        if not self.doc:
            object.__setattr__(self, "doc", (self.replacement.__doc__ or "").strip())
        roots = root_ops(self.pattern) if self.pattern is not None else ()
        if self.pattern is not None and not roots:
            raise ArgumentError(f"Rule {self.name!r}: the pattern's root must be an op(...) (or any_of ops)")
        object.__setattr__(self, "_roots", roots)
        if self.matcher is not None:
            prims = None if self.roots is None else frozenset(self.roots)
        else:
            prims = frozenset().union(*(r.prim for r in roots))
        object.__setattr__(self, "_root_primitives", prims)
        if self.composable:
            OPEN_SCOPES.add(self.name)

    @property
    def root_primitives(self) -> frozenset[str] | None:
        """Primitive names a match can be rooted at (None: any, for ``matcher`` rules)."""
        return self._root_primitives  # type: ignore[attr-defined]

    def may_match(self, name: str, heads2: tuple[Any, ...]) -> bool:
        """The first look: whether a match can be rooted at an equation of primitive ``name`` whose
        operands are ``heads2`` (``Graph.head2``: each one's head and the heads of its producer's
        operands): the rule's ``first_look``, and its pattern's (a ``matcher`` rule has none)."""
        if self.first_look is not None and not self.first_look(name, heads2):
            return False
        if self.matcher is not None:
            return True
        return any(could_match_deep(rp, name, heads2) for rp in self._roots)  # type: ignore[attr-defined]

    def find(self, graph: Graph, i: int) -> Match | None:
        """The first acceptable match rooted at equation ``i`` of ``graph``, or None."""
        if self.matcher is not None:
            m = self.matcher(graph, i)
            ok = m is not None and (self.where is None or self.where(m)) and self._domain_ok(graph, m)
            return m if ok else None
        assert self.pattern is not None
        if self.gate is not None and not self.gate(graph, i):
            return None
        for m in match_root(graph, self.pattern, i, self._roots):  # type: ignore[attr-defined]
            if (self.where is None or self.where(m)) and self._domain_ok(graph, m):
                return m
        return None

    def _domain_ok(self, graph: Graph, m: Match) -> bool:
        """Real identities stay off complex values (``_complex_guard``)."""
        return self.complex_ok or self.name in COMPLEX_VALID or not touches_complex(graph, m)

    def __repr__(self) -> str:
        return f"Rule({self.name!r})"


_REGISTRY: dict[str, Rule] = {}


def register(rule: Rule, *, replace: bool = False) -> Rule:
    """Register a rule so it can be named (``rules=["name"]``, ``jst.rewrites.get("name")``).

    Registering a second rule under a taken name is an error unless ``replace=True``.
    """
    if not isinstance(rule, Rule):
        raise ArgumentTypeError(f"register(rule={rule!r}): expected a Rule, got {type(rule).__name__}")
    if rule.name in _REGISTRY and _REGISTRY[rule.name] is not rule and not replace:
        raise ArgumentError(f"register(): a rule named {rule.name!r} is already registered; "
                            "pass replace=True")
    _REGISTRY[rule.name] = rule
    return rule


def get(name: str) -> Rule:
    """The registered rule called ``name`` (built-in or user-registered)."""
    try:
        return _REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY))
        raise UnknownNameError(f"unknown rewrite rule {name!r}; known rules: {known}") from None


def registered() -> dict[str, Rule]:
    """All registered rules by name (a copy)."""
    return dict(_REGISTRY)


def resolve(rules: Iterable[Rule | str] | None, exclude: Iterable[Rule | str] = (),
            default: Sequence[Rule] = ()) -> tuple[Rule, ...]:
    """Normalise a ``rules=`` argument (rules or names; None = ``default``) minus ``exclude``."""
    if isinstance(rules, (str, Rule)):
        rules = [rules]
    chosen = list(default) if rules is None else [get(r) if isinstance(r, str) else r for r in rules]
    for r in chosen:
        if not isinstance(r, Rule):
            raise ArgumentTypeError(f"rules=: expected Rule objects or rule names (registered()), got {r!r}")
    if isinstance(exclude, (str, Rule)):
        exclude = [exclude]
    drop = set()
    for e in exclude:
        name = e if isinstance(e, str) else e.name
        if isinstance(e, str):
            get(name)  # unknown names are an error, not silently ignored
        drop.add(name)
    return tuple(r for r in chosen if r.name not in drop)
