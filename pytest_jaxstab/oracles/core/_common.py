"""What every part of the oracle shares: how values are held, the evaluation context, the errors.

Values in the interpreter's environment are numpy arrays of the equation's shape (0-d for scalars):

* floating-point variables (any float dtype) hold **object arrays of Arb balls** (``flint.arb``), each
  of which provably contains the real value the program denotes, or ``None`` where that value provably
  does not exist (``sqrt(-1)``, ``0/0``, ``inf - inf``: NaN in the float program). A ball may also be
  *indeterminate* (NaN midpoint or infinite radius): the working precision did not suffice to say
  anything, so whatever depends on it is undecided and the evaluation escalates;
* integer and boolean variables hold ordinary numpy arrays of their own dtype: indices, counters and
  masks are exact already, and their arithmetic (wrap-around included) is the program's. A decision that
  produces one (a comparison, a float -> int conversion) and cannot be made on the balls at hand raises
  :class:`Undecided` instead of guessing.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import jax.numpy as jnp
import numpy as np
from flint import arb

from ... import _compat
from ..._errors import OracleError, UnsupportedPrimitive

__all__ = ["OracleError", "Undecided", "UnsupportedPrimitive"]

ZERO = arb(0)
ONE = arb(1)
POS_INF = arb.pos_inf()
NEG_INF = arb.neg_inf()
#: A ball that says nothing: what an operation returns when the working precision does not decide it.
INDET = arb.nan()


class Undecided(Exception):
    """A discontinuous decision (comparison, cast to integer, loop exit, ...) is not decided at this
    precision: the balls straddle the decision point. The evaluation at this precision stops; the
    elements it covers are tried again at a higher precision."""


class Context(Protocol):
    """What a primitive rule may ask of the interpreter."""

    prec: int

    def call(self, closed: Any, args: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Evaluates a closed sub-jaxpr on values, at the current precision."""
        ...

    def unsupported(self, eqn: Any, reason: str | None = None) -> UnsupportedPrimitive:
        """The error to raise for ``eqn`` (its location falls back to the enclosing call's)."""
        ...


Rule = Callable[..., Any]


@functools.cache
def _kind(dtype: Any) -> str:
    if jnp.issubdtype(dtype, jnp.complexfloating):
        return "complex"
    return "float" if jnp.issubdtype(dtype, jnp.floating) else "other"


def _as_dtype(dtype: Any) -> Any:
    """``np.dtype(dtype)``, or ``dtype`` itself for JAX's extended dtypes (PRNG keys), which numpy lacks."""
    try:
        return np.dtype(dtype)
    except TypeError:
        return dtype


def is_float(dtype: Any) -> bool:
    """Whether ``dtype`` is a real floating-point dtype (bfloat16 included), i.e. held as balls."""
    return _kind(_as_dtype(dtype)) == "float"


def is_complex(dtype: Any) -> bool:
    """Whether ``dtype`` is complex (held as Arb complex balls, ``_complex``)."""
    return _kind(_as_dtype(dtype)) == "complex"


def out_aval(eqn: Any, i: int = 0) -> Any:
    """The abstract value (shape, dtype) of an equation's ``i``-th result."""
    return _compat.aval(eqn.outvars[i])


def obj(x: Any) -> np.ndarray:
    """``x`` as an object ndarray; a bare ball (numpy returns those for 0-d inputs) becomes a 0-d array."""
    if isinstance(x, np.ndarray):
        return x if x.dtype == object else x.astype(object)
    out = np.empty((), dtype=object)
    out[()] = x
    return out


def _from_int(v: Any) -> arb:
    return arb(int(v))  # exact: arb holds integers of any size exactly


_FROM_INT = np.frompyfunc(_from_int, 1, 1)


def ints_to_arb(x: np.ndarray) -> np.ndarray:
    """Integers or booleans as exact balls."""
    return obj(_FROM_INT(np.asarray(x).astype(object)))


def full(shape: Sequence[int], value: Any) -> np.ndarray:
    """An object array of ``shape`` filled with ``value``."""
    out = np.empty(tuple(shape), dtype=object)
    out.fill(value)
    return out
