"""The shape each search term evaluates to, checked against the traced program's at every equation.

``_lower`` reads a traced program equation by equation into a term; :class:`Shapes` keeps the term's
shape beside it (reductions keep their axes, spread values stay small) and refuses, with
:class:`Unsupported`, any equation whose result the term would compute in another shape or order.
Axes that a broadcast or reshape puts where trailing broadcasting would not are placed with an
``rs_<shape>`` reshape (``_expr.reshape_name``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import _compat
from ._expr import (
    Table,
    Term,
    broadcast_name,
    broadcast_shape,
    is_broadcast,
    is_reduction,
    is_selection,
    reduction_axes,
    reshape_name,
    reshape_shape,
    selection_shape,
)

__all__ = ["REDUCE", "SELECT", "Shapes", "Unsupported", "located", "nonunit"]

#: Equations that only insert or drop size-1 axes (or spread along new ones): ``Shapes._placed``.
_AXES_MOVED = frozenset({"broadcast_in_dim", "reshape", "expand_dims", "squeeze"})
REDUCE = {"reduce_sum": "sum", "reduce_prod": "prod", "reduce_max": "max", "reduce_min": "min"}
#: Static selections (``_expr.selection_name``): a slice, and a dynamic slice or gather at constant indices.
SELECT = {"slice", "dynamic_slice", "gather"}


class Unsupported(Exception):
    """The program is not an elementwise expression the search can take; ``str()`` says what."""


class Shapes:
    """The shape each term evaluates to (``_expr.evaluate_jax``: reductions keep their axes, broadcasts
    and reshapes are identities), checked against the traced program's shape at every equation.

    A term's elements are in the traced value's order when the two shapes have the same dimensions
    other than 1 (``[n, 1]`` for ``[n]``); a broadcast must put its operand where trailing broadcasting
    would. Where either fails, :class:`Unsupported` (the identity reading would compute another thing).
    """

    def __init__(self, inputs: list[tuple[int, ...]]) -> None:
        self.inputs = inputs
        self.memo: dict[Term, tuple[int, ...]] = {}

    def of(self, term: Term) -> tuple[int, ...]:
        hit = self.memo.get(term)
        if hit is not None:
            return hit
        if term[0] == "var":
            out = self.inputs[term[1]]
        elif term[0] == "const":
            out = term[1].shape if isinstance(term[1], Table) else ()
        elif term[0] == "scalar":
            out = ()
        elif is_broadcast(term[0]):
            out = broadcast_shape(term[0]) or ()
        elif reshape_shape(term[0]) is not None:
            out = reshape_shape(term[0]) or ()
        elif is_selection(term[0]):
            out = selection_shape(term[0])
        elif is_reduction(term[0]):
            parsed = reduction_axes(term[0])
            assert parsed is not None
            inner = self.of(term[1])
            axes = range(len(inner)) if parsed[1] is None else parsed[1]
            out = tuple(1 if i in axes else d for i, d in enumerate(inner))
        else:
            try:
                out = tuple(np.broadcast_shapes(*(self.of(c) for c in term[1:])))
            except ValueError:
                raise Unsupported("operands whose shapes the search cannot line up") from None
        self.memo[term] = out
        return out

    def widened(self, term: Term, real: tuple[int, ...]) -> Term:
        """``term`` spread to the traced shape ``real`` (``bcast_<real>``) where its own shape is smaller
        and broadcasts to it (a value spread over an array: ``c * ones(n)``, ``full``, a scalar's
        ``broadcast_in_dim``); ``term`` itself where the two have the same dimensions other than 1."""
        kept = self.of(term)
        if nonunit(kept) == nonunit(real) or len(kept) > len(real):
            return term
        padded = (1,) * (len(real) - len(kept)) + kept
        if any(k not in (1, r) for k, r in zip(padded, real)):
            return term
        return (broadcast_name(real), term)

    def fit(self, term: Term, real: tuple[int, ...], name: str, eqn: Any, operands: list[tuple[int, ...]],
            widen: bool) -> Term:
        """``term`` checked against the traced shape (:meth:`check`). A broadcast that spreads its
        operand stays that operand, small, so that identities still see ``where(c, exp(x), 0.0)``; an
        elementwise result that is smaller than the trace because all its operands were is widened there
        (with ``widen``: an array program), as a reduction, a selection or a product widens what it reads."""
        if widen and name in _AXES_MOVED:
            term = self._placed(term, real, name, eqn, operands)
        if widen and name == "broadcast_in_dim" and self._spreads(term, real, eqn, operands):
            return term
        if widen and name not in REDUCE and name not in SELECT and name != "broadcast_in_dim":
            term = self.widened(term, real)
        self.check(term, real, name, eqn, operands)
        return term

    def _placed(self, term: Term, real: tuple[int, ...], name: str, eqn: Any,
                operands: list[tuple[int, ...]]) -> Term:
        """``term`` reshaped (``rs_<shape>``) so that its axes sit where the traced equation puts them
        (``x[:, None]``: the operand's axis first, a new one after), where trailing broadcasting would
        put them elsewhere; ``term`` itself where it already lines up or the equation merges axes."""
        if name == "broadcast_in_dim":
            target = [1] * len(real)
            for i, d in enumerate(eqn.params["broadcast_dimensions"]):
                target[int(d)] = operands[0][i]
            placed = tuple(target)
        else:
            placed = real
        kept = self.of(term)
        if nonunit(kept) != nonunit(placed) or _lead_stripped(kept) == _lead_stripped(placed):
            return term
        if len(placed) < len(kept):  # a squeeze of axes a reduction or selection kept: left kept, as
            return term              # every other term keeps them (their shapes compare by nonunit)
        return (reshape_name(placed), term)

    def aligned(self, args: list[Term], operands: list[tuple[int, ...]], real: tuple[int, ...]) -> list[Term]:
        """The operands of an elementwise equation, each placed at its traced shape (``rs_``) where their
        kept shapes would broadcast to another than ``real``'s: a squeezed reduction's kept ``(n, 1)``
        beside an ``(n,)`` input. Unchanged where they already broadcast as traced."""
        try:
            spread = tuple(np.broadcast_shapes(*(self.of(t) for t in args)))
        except ValueError:
            spread = None
        if spread is not None and nonunit(spread) == nonunit(real):
            return args
        out = []
        for term, traced in zip(args, operands):
            kept = self.of(term)
            scalar = term[0] == "const" and not isinstance(term[1], Table)
            if not scalar and traced and kept != traced and nonunit(kept) == nonunit(traced):
                term = (reshape_name(traced), term)
            out.append(term)
        return out

    def _spreads(self, term: Term, real: tuple[int, ...], eqn: Any, operands: list[tuple[int, ...]]) -> bool:
        """Whether a ``broadcast_in_dim`` only repeats its operand ``term`` along new or unit axes, the
        operand's own axes where trailing broadcasting puts them."""
        kept = self.of(term)
        if len(kept) > len(real):
            return False
        expected = [1] * len(real)
        for i, d in enumerate(eqn.params["broadcast_dimensions"]):
            expected[int(d)] = operands[0][i]
        padded = (1,) * (len(real) - len(kept)) + kept
        return (all(k in (1, e) for k, e in zip(padded, expected))
                and nonunit(padded) == nonunit(tuple(expected)))

    def check(self, term: Term, real: tuple[int, ...], name: str, eqn: Any,
              operands: list[tuple[int, ...]]) -> None:
        kept = self.of(term)
        bad = nonunit(kept) != nonunit(real)
        if (name in REDUCE or name in SELECT) and self.of(term[1]) != operands[0]:
            # The axes refer to the operand as traced: it must be that exact shape, unless the reduction
            # takes every element (sum of a matrix-vector product, whose term keeps a unit axis).
            whole = is_reduction(term[0]) and (reduction_axes(term[0]) or ("", ()))[1] is None
            bad = not (whole and nonunit(self.of(term[1])) == nonunit(operands[0]))
        if name == "broadcast_in_dim" and nonunit(kept):
            expected = [1] * len(real)
            for i, d in enumerate(eqn.params["broadcast_dimensions"]):
                expected[int(d)] = operands[0][i]
            padded = (1,) * (len(real) - len(kept)) + kept
            bad = len(kept) > len(real) or any(k not in (1, e) for k, e in zip(padded, expected))
            bad = bad or (nonunit(padded) != nonunit(tuple(expected)))
        if bad:
            raise Unsupported(f"{name} ({located(eqn)}) rearranges axes in a way the search cannot follow "
                              f"(shape {real}); it takes elementwise operations, reductions and broadcasts "
                              "of their results")


def nonunit(shape: tuple[int, ...]) -> tuple[int, ...]:
    """``shape`` less its size-1 axes (two terms in the same element order have the same)."""
    return tuple(d for d in shape if d != 1)


def _lead_stripped(shape: tuple[int, ...]) -> tuple[int, ...]:
    """``shape`` less its leading size-1 axes: two shapes equal so broadcast alike against any third."""
    k = 0
    while k < len(shape) and shape[k] == 1:
        k += 1
    return shape[k:]


def located(eqn: Any) -> str:
    """Where ``eqn`` was written (the user's ``file:line``), for a refusal's message."""
    return _compat.location(eqn) or "in the traced program"
