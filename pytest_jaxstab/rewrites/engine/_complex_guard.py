"""Which rules may rewrite complex-valued expressions: those whose identity holds for complex numbers.

Most of the catalogue's identities are real ones: a shift by ``max(x)`` needs an order (``logsumexp``,
``softmax``, ``logaddexp``, ``softplus``), ``log(exp(z)) = z`` fails once ``|Im z| > pi`` (``log``'s
principal branch), ``sqrt(x^2 + y^2) = hypot(x, y)`` reads ``x^2`` as ``|x|^2``, and guards written with
comparisons (``where(|x| < c, ...)``) have no meaning for complex operands. So a rule refuses a match
that touches a complex value (a captured operand, the root's result, or a swallowed equation's result)
unless the rule says its identity holds for complex arguments: ``Rule(complex_ok=True)`` for a user's
rule, ``COMPLEX_VALID`` for the built-in ones (each listed with the reason it holds).
"""

from __future__ import annotations

from typing import Any

from ... import _compat
from ._match import Graph, Match

__all__ = ["COMPLEX_VALID", "touches_complex"]

#: Built-in rules whose identity and replacement hold for complex arguments (principal branches).
COMPLEX_VALID: dict[str, str] = {
    "log1p": "log(1 + z) = log1p(z) and log(1 - z) = log1p(-z): log1p is defined as the principal "
             "log(1 + z), and jnp.log1p takes complex values",
    "expm1": "exp(z) - 1 = expm1(z) and 1 - exp(z) = -expm1(z) for every complex z; jnp.expm1 takes "
             "complex values",
    "inv_matmul": "inv(A) @ b = solve(A, b) over any field; jnp.linalg.solve takes complex matrices",
}


def _is_complex(atom: Any) -> bool:
    dtype = getattr(_compat.aval(atom), "dtype", None)
    # complex64/complex128 are numpy's only complex kinds (extended types such as PRNG keys have
    # no numpy kind 'c'); asked for every atom of every match, so no issubdtype
    return dtype is not None and getattr(dtype, "kind", None) == "c"


def touches_complex(graph: Graph, match: Match) -> bool:
    """Whether a match reads or makes a complex value (then only complex-valid rules may rewrite it)."""
    if any(_is_complex(a) for a in match.atoms.values()):
        return True
    for i in (match.root, *match.swallowed):
        eqn = graph.eqns[i]
        if any(_is_complex(v) for v in (*eqn.outvars, *eqn.invars)):
            return True
    return False
