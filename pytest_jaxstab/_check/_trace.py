"""Getting a user function ready for ``jst.check``: dtype and shapes checked, x64 scoped, traced once.

JAX's own tracing errors are long and point into our wrappers ("while tracing the function flat_fn at
_compat.py:73"); :func:`trace_case` turns them into one paragraph that names the user's line and says
what to do, as a :class:`~pytest_jaxstab._errors.TraceError`.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import jax
import numpy as np

from .. import _compat
from .._errors import ArgumentError, JaxstabError, TraceError, function_name, trace_error

__all__ = ["ArgumentError", "TracedCase", "normalize_shapes", "trace_case", "x64_scope"]


def normalize_shapes(shapes: Any) -> tuple[list[str], list[tuple[int, ...]], bool]:
    """``shapes=`` as (argument names, shapes, by keyword?).

    A mapping names keyword arguments (``{"x": (16,)}``); a sequence gives positional ones
    (``[(8, 4), (8,)]``); a single shape tuple of ints is one positional argument.

    Raises:
        ArgumentError: naming ``shapes`` and what is wrong with it.
    """
    if isinstance(shapes, Mapping):
        names = list(shapes)
        if not all(isinstance(n, str) for n in names):
            raise ArgumentError(f"shapes={shapes!r}: the keys must be argument names (strings)")
        return names, [_shape(shapes[n], f"shapes[{n!r}]") for n in names], True
    if isinstance(shapes, (str, bytes)) or not isinstance(shapes, Sequence):
        raise ArgumentError(f"shapes={shapes!r}: expected a dict of argument name -> shape, or a list of "
                        "shapes (one per positional argument), e.g. shapes={'x': (16,)} or [(8, 4), (8,)]")
    if shapes and all(isinstance(d, (int, np.integer)) and not isinstance(d, bool) for d in shapes):
        # shapes=(16,) is one argument of shape (16,), not sixteen arguments.
        shapes = [tuple(shapes)]
    out = [_shape(s, f"shapes[{i}]") for i, s in enumerate(shapes)]
    return [f"arg{i}" for i in range(len(out))], out, False


def _shape(s: Any, where: str) -> tuple[int, ...]:
    if isinstance(s, (int, np.integer)) and not isinstance(s, bool):
        s = (int(s),)
    if not isinstance(s, Sequence) or isinstance(s, (str, bytes)):
        raise ArgumentError(f"{where}={s!r}: a shape is a tuple of ints, e.g. (8, 4)")
    dims = []
    for d in s:
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 0:
            raise ArgumentError(f"{where}={tuple(s)!r}: dimensions must be non-negative ints")
        dims.append(int(d))
    return tuple(dims)


@contextlib.contextmanager
def x64_scope(dtype: np.dtype[Any]) -> Iterator[None]:
    """Enables JAX's 64-bit mode for the block when ``dtype`` is 64-bit; restores the old setting.

    Other dtypes run under whatever the user configured.
    """
    if dtype.itemsize != 8:
        yield
        return
    with _compat.enable_x64():
        yield


@dataclasses.dataclass
class TracedCase:
    """A traced function: its closed jaxpr over the flat inputs, and which outputs are judged."""

    fn: Callable[..., Any]  # positional-arrays version of the user's function
    closed: Any
    out_tree: Any
    judged_outputs: list[int]  # indices of floating-point outputs
    out_dtypes: list[np.dtype[Any]]


def positional(fn: Callable[..., Any], names: Sequence[str], by_keyword: bool) -> Callable[..., Any]:
    """``fn`` as a function of positional arrays (keyword arguments bound by ``names``)."""
    if not by_keyword:
        return fn

    def call(*arrays: Any) -> Any:
        return fn(**dict(zip(names, arrays)))

    call.__name__ = getattr(fn, "__name__", "fn")
    call.__qualname__ = getattr(fn, "__qualname__", call.__name__)
    return call


def trace_case(fn: Callable[..., Any], dtype: np.dtype[Any], shapes: Sequence[tuple[int, ...]]) -> TracedCase:
    """Traces ``fn`` on zeros of ``shapes`` and ``dtype`` (call it inside :func:`x64_scope`).

    Raises:
        TraceError: JAX cannot trace ``fn``, or ``fn`` returns no floating-point array.
        JaxstabError: JAX traced another dtype than asked for (x64 could not be enabled).
    """
    example = [np.zeros(s, dtype) for s in shapes]
    try:
        closed, _, out_tree = _compat.trace(fn, *example)
    except JaxstabError:
        raise
    except Exception as exc:
        raise trace_error(fn, exc) from None
    traced = [np.dtype(_compat.aval(v).dtype) for v in _compat.invars(closed)]
    if any(t != dtype for t in traced):
        raise JaxstabError(
            f"asked for {dtype} inputs but JAX traced {', '.join(map(str, traced))}: the check would run "
            f"in another precision than requested. {_x64_hint(dtype)}"
        )
    keys = [i for i, v in enumerate(_compat.outvars(closed))
            if jax.dtypes.issubdtype(_compat.aval(v).dtype, jax.dtypes.prng_key)]
    if keys:
        raise TraceError(
            f"{function_name(fn)} returns a PRNG key (output {keys[0]}): a key is not a value to check. "
            "Return only the arrays to judge (e.g. drop the new key from the returned tuple).")
    out_dtypes = [np.dtype(_compat.aval(v).dtype) for v in _compat.outvars(closed)]
    judged = [i for i, d in enumerate(out_dtypes) if jax.numpy.issubdtype(d, jax.numpy.inexact)]
    if not judged:
        what = "None" if out_tree.num_leaves == 0 else ", ".join(map(str, out_dtypes))
        raise TraceError(
            f"{function_name(fn)} returned {what}: there is no floating-point result to check. The function "
            "under test must return the value to check (a @pytest.mark.stabilize test's body returns it)."
        )
    return TracedCase(fn, closed, out_tree, judged, out_dtypes)


def _x64_hint(dtype: np.dtype[Any]) -> str:
    if dtype.itemsize == 8:
        return ("pytest-jaxstab enables jax_enable_x64 for float64 cases; something in the function or "
                "its environment forced 32-bit values (e.g. JAX_ENABLE_X64=0 with jax.config locked).")
    return "Check that the function does not cast its inputs."
