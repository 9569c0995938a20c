"""Getting a user function ready for ``jst.check``: dtype and shapes checked, x64 scoped, traced once.

JAX's own tracing errors are long and point into our wrappers ("while tracing the function flat_fn at
_compat.py:73"); :func:`trace_case` turns them into one paragraph that names the user's line and says
what to do, as a :class:`~pytest_jaxstab._errors.TraceError`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import linecache
import os
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import jax
import numpy as np

from . import _compat
from ._errors import _HINTS, JaxstabError, TraceError

__all__ = ["ArgumentError", "Prepared", "normalize_shapes", "prepare", "x64_scope"]


class ArgumentError(JaxstabError, ValueError):
    """A bad argument to ``jst.check`` or to the ``stabilize`` marker; the message names it."""

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
# Frames in these directories are never "the user's line" of a tracing error.
_LIBRARY_DIRS = (
    *(os.path.dirname(os.path.abspath(f)) + os.sep
      for f in (getattr(m, "__file__", None) for m in (jax, np, contextlib, inspect)) if f),
    _PACKAGE_DIR,
)
_GENERIC_HINT = ("pytest-jaxstab traces the function with jax.make_jaxpr: it must take arrays and return "
                 "arrays, with no Python branching on array values and no side effects")


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
    enable = getattr(jax, "enable_x64", None)
    if enable is not None:  # jax >= 0.4.3x: a thread-local config context
        with enable(True):
            yield
        return
    old = bool(jax.config.read("jax_enable_x64"))  # pragma: no cover - older JAX
    jax.config.update("jax_enable_x64", True)  # pragma: no cover
    try:  # pragma: no cover
        yield
    finally:  # pragma: no cover
        jax.config.update("jax_enable_x64", old)


@dataclasses.dataclass
class Prepared:
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


def prepare(fn: Callable[..., Any], dtype: np.dtype[Any], shapes: Sequence[tuple[int, ...]]) -> Prepared:
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
        raise _trace_error(fn, exc) from None
    traced = [np.dtype(_compat.aval(v).dtype) for v in _compat.invars(closed)]
    if any(t != dtype for t in traced):
        raise JaxstabError(
            f"asked for {dtype} inputs but JAX traced {', '.join(map(str, traced))}: the check would run "
            f"in another precision than requested. {_x64_hint(dtype)}"
        )
    out_dtypes = [np.dtype(_compat.aval(v).dtype) for v in _compat.outvars(closed)]
    judged = [i for i, d in enumerate(out_dtypes) if jax.numpy.issubdtype(d, jax.numpy.floating)]
    if not judged:
        what = "None" if out_tree.num_leaves == 0 else ", ".join(map(str, out_dtypes))
        raise TraceError(
            f"{_name(fn)} returned {what}: there is no floating-point result to check. The function "
            "under test must return the value to check (a @pytest.mark.stabilize test's body returns it)."
        )
    return Prepared(fn, closed, out_tree, judged, out_dtypes)


def _x64_hint(dtype: np.dtype[Any]) -> str:
    if dtype.itemsize == 8:
        return ("pytest-jaxstab enables jax_enable_x64 for float64 cases; something in the function or "
                "its environment forced 32-bit values (e.g. JAX_ENABLE_X64=0 with jax.config locked).")
    return "Check that the function does not cast its inputs."


def _name(fn: Any) -> str:
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)


def _user_frame(exc: BaseException) -> traceback.FrameSummary | None:
    """The innermost frame of the traceback that is the user's code (not JAX, NumPy or ours)."""
    frames = traceback.extract_tb(exc.__traceback__)
    user = [f for f in frames if not os.path.abspath(f.filename).startswith(_LIBRARY_DIRS)
            and not f.filename.startswith("<")]
    return user[-1] if user else None


def _first_paragraph(exc: BaseException) -> str:
    """JAX's explanation without its pointers into our wrappers, joined into one paragraph."""
    lines = []
    for line in str(exc).strip().splitlines():
        text = line.strip()
        if not text:
            if lines:
                break
            continue
        # These name our tracing wrapper (flat_fn, flat[0]) rather than the user's function.
        if text.startswith(("The error occurred while tracing", "See https://")):
            continue
        lines.append(text)
    paragraph = " ".join(lines)
    return paragraph if len(paragraph) <= 700 else paragraph[:700] + "…"


def short_path(path: str) -> str:
    """``path`` relative to the working directory when it lies below it (as pytest shows paths)."""
    try:
        rel = os.path.relpath(path)
    except ValueError:  # another drive (Windows)
        return path
    return path if rel.startswith("..") else rel


def _trace_error(fn: Any, exc: BaseException) -> TraceError:
    kind = type(exc).__name__
    frame = _user_frame(exc)
    where = ""
    if frame is not None:
        text = (frame.line or linecache.getline(frame.filename, frame.lineno or 0)).strip()
        where = f" at {short_path(frame.filename)}:{frame.lineno}" + (f" (`{text}`)" if text else "")
    hint = _HINTS.get(kind) or next((h for k, h in _HINTS.items()
                                     if any(c.__name__ == k for c in type(exc).__mro__)), _GENERIC_HINT)
    return TraceError(f"JAX cannot trace {_name(fn)}{where}: {kind}: {_first_paragraph(exc)}\n"
                      f"Hint: {hint}.")
