"""Which equations of a jaxpr an output reads: the interpreter skips the rest (issue 47).

JAX's derivative programs keep equations nothing reads: ``reduce_max``'s derivative writes
``eq(x, max(x))`` and a count of the ties even where the max sits behind a ``stop_gradient``
(``jax.nn.logsumexp(a, b=w)``, a focal loss's log-space weight). Such an equation cannot change any
value, but a decision it cannot make (the balls of ``x_i`` and of the max overlap) raised ``Undecided``
and stopped the whole-program pass, at every precision: no element of the gradient was ever decided.

Skipping them changes no value: an equation is dead when none of its results is read by a live
equation or an output of the same jaxpr, and it has no effects (an effect is kept live). The jaxpr is
not rewritten (JAX's own dead-code elimination would rebuild sub-jaxprs, and the library's routines are
recognised on their calls as traced), so each jaxpr the interpreter runs, sub-jaxprs included, is
analysed on its own.
"""

from __future__ import annotations

from typing import Any

from ... import _compat

__all__ = ["dead"]

#: Jaxprs analysed, by id (holding the jaxpr so that its id stays unique); bounded.
_CACHE: dict[int, tuple[Any, frozenset[int]]] = {}
_CACHE_SIZE = 64


def dead(closed: Any) -> frozenset[int]:
    """The ``id``s of ``closed``'s own equations that neither an output nor a live equation reads."""
    jaxpr = closed.jaxpr if hasattr(closed, "jaxpr") else closed
    hit = _CACHE.get(id(jaxpr))
    if hit is not None and hit[0] is jaxpr:
        return hit[1]
    read = {a for a in _compat.outvars(closed) if not _compat.is_literal(a)}
    out: set[int] = set()
    for eqn in reversed(_compat.eqns(closed)):
        used = any(v in read for v in eqn.outvars if not _compat.is_dropvar(v))
        if not used and not eqn.effects:
            out.add(id(eqn))
            continue
        read.update(a for a in eqn.invars if not _compat.is_literal(a))
    found = frozenset(out)
    if len(_CACHE) >= _CACHE_SIZE:
        _CACHE.pop(next(iter(_CACHE)))
    _CACHE[id(jaxpr)] = (jaxpr, found)
    return found
