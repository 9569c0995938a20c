"""Errors pytest-jaxstab raises for bad input: each names what is wrong and what to do."""

from __future__ import annotations

__all__ = ["JaxstabError", "TraceError"]


class JaxstabError(Exception):
    """Base class of pytest-jaxstab's own errors."""


class TraceError(JaxstabError):
    """The function under test cannot be traced by JAX (Python control flow on a traced value,
    side effects, a non-array argument that should be static, ...)."""


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


def trace_error(fn: object, exc: BaseException) -> TraceError:
    """A one-paragraph :class:`TraceError` for ``exc`` raised while tracing ``fn``."""
    kind = type(exc).__name__
    first = str(exc).strip().split("\n\n")[0].strip()
    if len(first) > 600:
        first = first[:600] + "…"
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
    hint = _HINTS.get(kind, "pytest-jaxstab checks functions JAX can trace with jax.make_jaxpr: array "
                            "arguments in, arrays out, no side effects")
    return TraceError(f"JAX cannot trace {name}: {kind}: {first}\nHint: {hint}.")
