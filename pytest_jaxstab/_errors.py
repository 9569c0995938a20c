"""Every error pytest-jaxstab raises for bad input, under one root, and the one tracing-error formatter.

``except jst.JaxstabError`` catches all of them::

    JaxstabError
    ├── ArgumentError (also a ValueError)   bad argument to a public function or class
    │   ├── ArgumentTypeError (also a TypeError)  an argument of the wrong type
    │   ├── UnknownNameError (also a KeyError)    a name that is not registered (a rule name)
    │   ├── SettingsError                   a bad jst.settings value, unknown option or profile
    │   └── MarkerError                     a bad @pytest.mark.stabilize
    ├── TraceError                          JAX cannot trace the function (names the user's line)
    ├── UnsupportedPrimitive                the exact oracle has no semantics for a primitive
    ├── OracleError (also a RuntimeError)   the exact evaluation cannot proceed
    ├── BaselineError                       a baseline file that cannot be used
    └── ReportMergeError                    shard reports that cannot be merged

Each message names the argument (or file), what is wrong and what to do about it. Errors that were a
``TypeError`` before the tree existed are :class:`ArgumentTypeError`, so ``except TypeError`` keeps
working; every other bad argument is an :class:`ArgumentError`, a ``ValueError``.
"""

from __future__ import annotations

import contextlib
import inspect
import linecache
import os
import traceback
from collections.abc import Iterator

__all__ = [
    "ArgumentError",
    "ArgumentTypeError",
    "BaselineError",
    "JaxstabError",
    "MarkerError",
    "OracleError",
    "ReportMergeError",
    "SettingsError",
    "TraceError",
    "UnknownNameError",
    "UnsupportedPrimitive",
    "trace_error",
    "tracing",
]


class JaxstabError(Exception):
    """Root of pytest-jaxstab's own errors."""


class ArgumentError(JaxstabError, ValueError):
    """A bad argument to a public function or class (``jst.check``, ``jst.stabilize``, the marker,
    ``jst.strategies``, ``jst.rewrites.Rule``, ...); the message names it and what is expected."""


class ArgumentTypeError(ArgumentError, TypeError):
    """An argument of the wrong type (a rule that is not a ``Rule``, a pattern that is not a
    ``Pattern``); also a ``TypeError``, as Python's own wrong-type errors are."""


class UnknownNameError(ArgumentError, KeyError):
    """A name looked up and not found (``jst.rewrites.get("nope")``); also a ``KeyError``, as a failed
    lookup is. Its message reads as a sentence (a plain ``KeyError`` would quote it)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class SettingsError(ArgumentError):
    """A bad ``jst.settings`` value, an option an entry point does not take, or an unknown profile;
    the message names the option and what it expects."""


class MarkerError(ArgumentError):
    """A bad ``stabilize`` marker; the message names the argument and what is expected."""


class TraceError(JaxstabError):
    """The function under test cannot be traced by JAX (Python control flow on a traced value,
    side effects, a non-array argument that should be static, ...)."""


class UnsupportedPrimitive(JaxstabError):
    """The oracle has no exact semantics for a primitive the program uses.

    The oracle never falls back to floating point: a verdict judged against a float result would be
    meaningless. ``name`` is the primitive, ``location`` the user's ``file:line`` (or None).
    """

    def __init__(self, name: str, location: str | None, reason: str | None = None) -> None:
        self.name = name
        self.location = location
        self.reason = reason
        where = f" at {_short_location(location)}" if location else ""
        why = f" ({reason})" if reason else ""
        super().__init__(
            f"the exact oracle does not support the primitive {name!r}{where}{why}. Rewrite this part "
            f"with supported operations, leave this function out of oracle-checked cases (don't mark it "
            f"with @pytest.mark.stabilize, or mark the case xfail), or file an issue at pytest-jaxstab "
            f"asking for {name!r}; pytest_jaxstab.oracles.SUPPORTED_PRIMITIVES lists what is supported."
        )


def _short_location(location: str) -> str:
    """``file:line`` with the file relative to the rootdir (or working directory), as messages show it."""
    from ._files import short_path

    file, sep, line = location.rpartition(":")
    return f"{short_path(file)}:{line}" if sep and line.isdigit() else short_path(location)


class OracleError(JaxstabError, RuntimeError):
    """The exact evaluation cannot proceed (a loop that does not end, an input the oracle cannot take)."""


class BaselineError(JaxstabError):
    """A baseline file that cannot be used: missing, not JSON, wrong version or wrong content.

    Attributes:
        path: the file.
        problem: what is wrong with it.
    """

    def __init__(self, path: str | os.PathLike[str], problem: str, fix: str) -> None:
        self.path = str(path)
        self.problem = problem
        super().__init__(f"jaxstab baseline {self.path}: {problem}; fix it, or {fix}")


_HINTS = {
    "TracerBoolConversionError": "a Python `if`/`while`/`and` on a traced value: use jnp.where, "
    "lax.cond or lax.while_loop, or make that argument static with functools.partial",
    "ConcretizationTypeError": "a traced value used where a concrete Python value is needed (a shape, "
    "an index, a Python branch): use lax control flow, or bind that argument with functools.partial",
    "TracerIntegerConversionError": "a traced value converted to a Python int: bind that argument with "
    "functools.partial or use lax operations",
    "TracerArrayConversionError": "a traced value converted to a NumPy array (np.* on a jax value, or "
    ".tolist()/.item()): use jax.numpy instead of numpy inside the function",
    "UnexpectedTracerError": "a traced value escaped the function (stored in a global or attribute): "
    "return it instead of saving it",
}
_GENERIC_HINT = ("pytest-jaxstab traces the function with jax.make_jaxpr: it must take arrays and return "
                 "arrays, with no Python branching on array values and no side effects")


def _library_dirs() -> tuple[str, ...]:
    """Directories whose frames are never "the user's line": JAX, NumPy, the standard library, ours."""
    import jax
    import numpy

    mods = (jax, numpy, contextlib, inspect)
    dirs = [os.path.dirname(os.path.abspath(f)) + os.sep
            for f in (getattr(m, "__file__", None) for m in mods) if f]
    return (*dirs, os.path.dirname(os.path.abspath(__file__)) + os.sep)


def _user_frame(exc: BaseException) -> traceback.FrameSummary | None:
    """The innermost frame of the traceback that is the user's code (not JAX, NumPy or ours)."""
    library = _library_dirs()
    frames = traceback.extract_tb(exc.__traceback__)
    user = [f for f in frames if not os.path.abspath(f.filename).startswith(library)
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


def function_name(fn: object) -> str:
    """The name a message gives ``fn``: its qualified name, else its repr."""
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)


def require_callable(entry: str, fn: object, what: str = "a function of JAX arrays") -> None:
    """Raises :class:`ArgumentTypeError` unless ``fn`` is callable: every public entry point that takes a
    user function checks it first, so ``jst.stabilize(5)`` says so instead of failing later."""
    if not callable(fn):
        raise ArgumentTypeError(
            f"{entry}: fn must be a callable ({what}); got {fn!r:.60} ({type(fn).__name__}). Pass the "
            "function itself, not its name or its result (e.g. jst.stabilize(loss), not "
            "jst.stabilize(loss(x))).")


def trace_error(fn: object, exc: BaseException) -> TraceError:
    """The :class:`TraceError` for ``exc`` raised while tracing ``fn``: the user's line, JAX's reason, a hint.

    Used by every entry point that traces a user function (``stabilize``, ``check``, the diagnostics),
    so one mistake reads the same wherever it is made.
    """
    from ._files import short_path

    kind = type(exc).__name__
    frame = _user_frame(exc)
    where = ""
    if frame is not None:
        text = (frame.line or linecache.getline(frame.filename, frame.lineno or 0)).strip()
        where = f" at {short_path(frame.filename)}:{frame.lineno}" + (f" (`{text}`)" if text else "")
    hint = _HINTS.get(kind) or next((h for k, h in _HINTS.items()
                                     if any(c.__name__ == k for c in type(exc).__mro__)), _GENERIC_HINT)
    return TraceError(f"JAX cannot trace {function_name(fn)}{where}: {kind}: {_first_paragraph(exc)}\n"
                      f"Hint: {hint}.")


@contextlib.contextmanager
def tracing(fn: object) -> Iterator[None]:
    """Turns an error raised while JAX traces ``fn`` into a :class:`TraceError` naming the user's line
    (every entry point that traces a user function uses it); our own errors and others pass through."""
    try:
        yield
    except JaxstabError:
        raise
    except (TypeError, ValueError, IndexError, NotImplementedError) as exc:
        raise trace_error(fn, exc) from exc
    except Exception as exc:  # JAX's tracer errors have no common public base class
        if type(exc).__module__.startswith("jax"):
            raise trace_error(fn, exc) from exc
        raise


class ReportMergeError(JaxstabError):
    """Shard reports that cannot be merged (`python -m pytest_jaxstab merge`): unreadable, truncated,
    from different runs (seed, lens, versions) or overlapping; nothing is written."""
