"""What every part of the oracle shares: how values are held, the evaluation context, the errors.

Values in the interpreter's environment are numpy arrays of the equation's shape (0-d for scalars):

* floating-point variables (any float dtype) hold **object arrays of exact ``mpmath.mpf``** numbers, the
  real values the program denotes (computed at the working precision);
* integer and boolean variables hold ordinary numpy arrays of their own dtype: indices, counters and
  masks are exact already, and their arithmetic (wrap-around included) is the program's.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import jax.numpy as jnp
import mpmath
import numpy as np
from mpmath import libmp

from .. import _compat
from .._errors import OracleError, UnsupportedPrimitive

__all__ = ["OracleError", "UnsupportedPrimitive"]

#: Rounding mode of every mpmath operation: to nearest, ties to even.
RND = libmp.round_nearest
#: Builds an ``mpf`` of the global context from a raw ``(sign, man, exp, bc)`` tuple, without rounding.
make = mpmath.mp.make_mpf

NAN = make(libmp.fnan)
INF = make(libmp.finf)
NINF = make(libmp.fninf)
ZERO = make(libmp.fzero)
ONE = make(libmp.fone)

#: Arguments with ``|x| >= 2**MAG_LIMIT`` are beyond what exp/sin/erfc/... can evaluate in bounded time
#: (exp needs ``MAG_LIMIT`` extra bits, sin needs pi to as many). No input is that large (float64's
#: largest is below 2**1024): such values only arise inside a program (nested exponentials, high
#: powers). Those operations then saturate (exp -> inf or 0) or give NaN (sin), and the evaluation is
#: flagged so that its non-finite results are reported uncertain rather than trusted.
MAG_LIMIT = 2048

_STATE = threading.local()


def beyond_reach(value: Any) -> Any:
    """Records that an operation met an argument beyond ``MAG_LIMIT`` and returns its stand-in value."""
    _STATE.beyond = getattr(_STATE, "beyond", 0) + 1
    return value


def beyond_reach_count() -> int:
    """How many times :func:`beyond_reach` was called in this thread so far."""
    return getattr(_STATE, "beyond", 0)


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
def _kind(dtype: np.dtype) -> str:
    if jnp.issubdtype(dtype, jnp.complexfloating):
        return "complex"
    return "float" if jnp.issubdtype(dtype, jnp.floating) else "other"


def is_float(dtype: Any) -> bool:
    """Whether ``dtype`` is a real floating-point dtype (bfloat16 included), i.e. held as mpf."""
    return _kind(np.dtype(dtype)) == "float"


def is_complex(dtype: Any) -> bool:
    """Whether ``dtype`` is complex (the oracle denotes real functions only)."""
    return _kind(np.dtype(dtype)) == "complex"


def out_aval(eqn: Any, i: int = 0) -> Any:
    """The abstract value (shape, dtype) of an equation's ``i``-th result."""
    return _compat.aval(eqn.outvars[i])


def obj(x: Any) -> np.ndarray:
    """``x`` as an object ndarray; a bare mpf (numpy returns those for 0-d inputs) becomes a 0-d array."""
    if isinstance(x, np.ndarray):
        return x if x.dtype == object else x.astype(object)
    out = np.empty((), dtype=object)
    out[()] = x
    return out


def _from_int(v: Any) -> Any:
    return make(libmp.from_int(int(v)))


_FROM_INT = np.frompyfunc(_from_int, 1, 1)


def ints_to_mpf(x: np.ndarray) -> np.ndarray:
    """Integers or booleans as exact mpf (``mpf(int)`` would round big ints to the context precision)."""
    return obj(_FROM_INT(np.asarray(x).astype(object)))


def full(shape: Sequence[int], value: Any) -> np.ndarray:
    """An object array of ``shape`` filled with ``value``."""
    out = np.empty(tuple(shape), dtype=object)
    out.fill(value)
    return out
