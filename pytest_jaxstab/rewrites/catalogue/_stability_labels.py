"""A label-weighted log-probability with masked classes: ``t · log_softmax(x)`` where ``x`` is -inf.

Masking a class by a ``-inf`` logit (an attention mask, an invalid action, a padded vocabulary entry)
makes its log-probability -inf, and a label or target weight of 0 on it gives ``0·-inf = NaN``: the
whole cross-entropy is NaN where the limit along the weight is 0 (the class contributes nothing).
``masked_log_prob`` (structural, rooted at the product) takes ``t · L`` with ``L`` a log-softmax
(``jax.nn.log_softmax``'s call, or the catalogue's own form: ``x - logsumexp(x)`` and its spellings,
which the pattern rules rewrote first) and reads ``L`` as 0 where ``t`` is 0 and ``L`` is -inf
(``forms/_labels.masked_log_prob``): the product is the program's elsewhere, bit for bit.
``one_hot_nll`` does the same inside its sum for the rows that are not one-hot.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from ... import _compat
from ..engine._match import SCOPE_PREFIX, Graph, Match
from ..engine._rule import Rule
from ..forms import _labels

__all__ = ["MASKED_LOG_PROB"]

_CALLS = frozenset({"jit", "pjit"})
_FORM_SCOPE = SCOPE_PREFIX + "log_softmax"


def _masked_log_prob(t: Any, log_p: Any, dot: Any = None, first: bool = True) -> Any:
    """t · log_p = t · where(t == 0 and log_p == -inf, 0, log_p): 0 for a masked class of weight 0;
    the same for ``sum(t · log_p)`` as a ``dot_general`` pairing each element with its own."""
    masked = _labels.masked_log_prob(t, log_p)
    if dot is None:
        return t * masked
    (out,) = _compat.bind(dot, [t, masked] if first else [masked, t])
    return out


def _log_softmax(g: Graph, atom: Any) -> bool:
    """Whether ``atom`` is a log-softmax: JAX's call, or the catalogue's form of one."""
    eqn = g.producer_past_glue(atom)
    if eqn is None:
        return False
    name = _compat.primitive_name(eqn)
    if name in _CALLS:
        return _compat.library_function(eqn) == "log_softmax"
    # the result of log_softmax's (or log_softmax_fast's) replacement: what a product outside it
    # reads is the replacement's value, a log-softmax of the same shape
    return _compat.in_scope_named(eqn, _FORM_SCOPE)


def _elementwise_dot(eqn: Any) -> bool:
    """A ``dot_general`` of two operands of one shape pairing each element with its own
    (``einsum('bi,bi->b', t, log_p)``): a sum of their products."""
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    a, b = (tuple(_compat.aval(v).shape) for v in eqn.invars)
    return a == b and tuple(lc) == tuple(rc) and tuple(lb) == tuple(rb)


def _match(g: Graph, i: int) -> Match | None:
    eqn = g.eqns[i]
    if len(eqn.invars) != 2:
        return None
    dot = _compat.primitive_name(eqn) == "dot_general"
    if dot and not _elementwise_dot(eqn):
        return None
    # the producer look first: most products of a program read no log-softmax (the pass asks each)
    for first, (t, log_p) in ((True, eqn.invars), (False, eqn.invars[::-1])):
        if _compat.is_literal(t) or t is log_p or not _log_softmax(g, log_p):
            continue
        if tuple(_compat.aval(t).shape) != tuple(_compat.aval(log_p).shape):
            continue
        if not jnp.issubdtype(_compat.aval(eqn.outvars[0]).dtype, jnp.floating):
            return None
        captures = {"t": t, "log_p": log_p, "dot": eqn if dot else None, "first": first}
        return Match(i, captures, {"t": t, "log_p": log_p}, {i})
    return None


def _soft_targets(x: Any, t: Any) -> Any:
    return -jnp.sum(t * jax.nn.log_softmax(x), axis=-1)


MASKED_LOG_PROB = Rule(
    "masked_log_prob", None, _masked_log_prob, matcher=_match, roots=frozenset({"mul", "dot_general"}),
    example=_soft_targets, example_shapes=((4, 8), (4, 8)), example_domain=(0.0, 10.0),
    examples=((lambda x, t: -jnp.einsum("bi,bi->b", t, jax.nn.log_softmax(x)), ((4, 8), (4, 8)),
               (0.0, 10.0)),),
)
