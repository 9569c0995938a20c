"""The records of ``find_nan_origin``: where a non-finite value is born, formatted for people and JSON.

The definitions (origin, kinds, which one is reported) are in the docstring of ``_nan_origin``; the
walker that finds them is ``_nan_walk``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax.numpy as jnp
import numpy as np

__all__ = ["NanOrigin", "OperandSummary"]

Key = tuple[str, "str | None", tuple[str, ...]]


# ------------------------------------------------------------------------------------------ records
@dataclasses.dataclass(frozen=True)
class OperandSummary:
    """One operand (or the output) of the equation where a non-finite value was born.

    ``min``/``max`` ignore NaNs (None when every element is NaN, for complex and for empty arrays);
    ``value`` is the element at the offending index where shapes allow (elementwise primitives,
    scalars), else None; ``constant`` marks literals and captured constants.
    """

    name: str
    shape: tuple[int, ...]
    dtype: str
    min: float | None
    max: float | None
    n_nan: int
    n_inf: int
    value: float | complex | None = None
    constant: bool = False

    def __str__(self) -> str:
        desc = f"{self.name}: {_short_dtype(self.dtype)}[{','.join(map(str, self.shape))}]"
        if not self.shape and self.value is not None:
            desc += f" = {_fmt(self.value, self.dtype)}"
        elif self.min is not None and self.max is not None:
            desc += f" min {_fmt(self.min, self.dtype)} max {_fmt(self.max, self.dtype)}"
        if self.shape and (self.n_nan or self.n_inf):
            desc += f" ({self.n_nan} nan, {self.n_inf} inf)"
        return desc + (" (constant)" if self.constant else "")


@dataclasses.dataclass(frozen=True)
class NanOrigin:
    """Where a non-finite value is born: see the module docstring for the exact definitions.

    Attributes:
        primitive: the primitive's name (``exp``, ``div``; for a constant, the consuming primitive).
        location: the user's ``file:line``; for equations inside library code with no user frame
            (``jax.nn.softplus``), that of the nearest enclosing equation that has one. None if none.
        path: the nested calls down to the equation, e.g. ``("jit(softplus)",
            "custom_jvp_call(logaddexp)", "log1p")``.
        operands: summaries of the equation's operands, named ``a``, ``b``, ... in order.
        kind: ``"overflow"``, ``"invalid"``, ``"division by zero"`` or ``"constant"``.
        code: the text of the line at ``location``.
        index: the first offending element of the output that reaches the function's result (the first
            offending element when none does; of the constant for ``"constant"``).
        output: summary of the output holding it (None for ``"constant"``).
        count: how many output elements were born non-finite there (first occurrence).
        steps: for origins inside ``scan``/``while`` bodies, the iteration of each enclosing loop,
            outermost first (``()`` outside loops).
        reaches_output: whether non-finite values born here reach the function's result.
    """

    primitive: str
    location: str | None
    path: tuple[str, ...]
    operands: tuple[OperandSummary, ...]
    kind: str
    code: str | None = None
    index: tuple[int, ...] | None = None
    output: OperandSummary | None = None
    count: int = 1
    steps: tuple[int, ...] = ()
    reaches_output: bool = True

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict: the fields (operands as dicts) plus ``"message"``, the ``str()``."""
        d = dataclasses.asdict(self)
        d["path"], d["steps"] = list(self.path), list(self.steps)
        d["index"] = None if self.index is None else list(self.index)
        d["message"] = str(self)
        return _jsonable(d)

    @property
    def path_str(self) -> str:
        """The path as ``jit(f) > scan > exp``."""
        return " > ".join(self.path)

    def __str__(self) -> str:
        name = self.path[-1] if self.path else self.primitive
        where = self.location or "<no source location>"
        head = f"{self.kind}: "
        if self.kind == "constant":
            bad = next((o for o in self.operands if o.constant and o.value is not None
                        and not _finite_scalar(o.value)), None)
            what = _fmt(bad.value, bad.dtype) if bad else "non-finite"
            article = "an" if what == "inf" else "a"
            head += f"{article} {what} constant " + (
                "is returned" if self.primitive == "output" else f"enters {name}")
        else:
            head += name
        text = f"{head} at {where}" + (f" (`{self.code}`)" if self.code else "")
        text += f" via {self.path_str}"
        if self.steps:
            text += f" at loop step {', '.join(map(str, self.steps))}"
        if self.operands:
            text += "; operand" + ("s " if len(self.operands) > 1 else " ")
            text += ", ".join(str(o) for o in self.operands)
        if self.output is not None and self.index is not None:
            idx = _fmt_index(self.index)
            text += f"; output{idx} = {_fmt(self.output.value, self.output.dtype)}"
            froms = [f"{o.name}{_fmt_index(self.index) if o.shape else ''} = {_fmt(o.value, o.dtype)}"
                     for o in self.operands if o.value is not None]
            if froms:
                text += " from " + ", ".join(froms)
            if self.count > 1:
                text += f" ({self.count} elements)"
        if not self.reaches_output:
            text += " (masked: does not reach the result)"
        return text



# -------------------------------------------------------------------------------------------- helpers
def _inexact(v: Any) -> bool:
    dtype = getattr(v, "dtype", None)
    if dtype is None:
        dtype = np.asarray(v).dtype
    try:
        return bool(jnp.issubdtype(dtype, jnp.inexact))
    except TypeError:  # extended dtypes (PRNG keys, float0) are never non-finite
        return False


def _finite_scalar(v: Any) -> bool:
    return bool(np.isfinite(v))


def _summary(name: str, atom: Any, v: Any, value: Any, constant: bool) -> OperandSummary:
    h = np.asarray(v)
    aval = None if atom is None else getattr(atom, "aval", None)
    dtype = str(aval.dtype if aval is not None and hasattr(aval, "dtype") else h.dtype)
    shape = tuple(aval.shape) if aval is not None and hasattr(aval, "shape") else tuple(h.shape)
    lo = hi = None
    n_nan = n_inf = 0
    if _inexact(h):
        n_nan = int(np.isnan(h).sum())
        n_inf = int(np.isinf(h).sum())
        if not jnp.issubdtype(h.dtype, jnp.complexfloating):
            rest = h[~np.isnan(h)].astype(np.float64)
            if rest.size:
                lo, hi = float(rest.min()), float(rest.max())
    elif h.size and h.dtype.kind in "iu":
        lo, hi = float(h.min()), float(h.max())
    return OperandSummary(name, shape, dtype, lo, hi, n_nan, n_inf, value, constant)


def _letter(i: int) -> str:
    return chr(ord("a") + i) if i < 26 else f"op{i}"


_SHORT = {"bfloat16": "bf16", "bool": "bool"}


def _short_dtype(dtype: str) -> str:
    if dtype in _SHORT:
        return _SHORT[dtype]
    for long, short in (("float", "f"), ("complex", "c"), ("uint", "u"), ("int", "i")):
        if dtype.startswith(long):
            return short + dtype[len(long):]
    return dtype


def _fmt(v: Any, dtype: str) -> str:
    """Shortest repr of ``v`` in ``dtype`` (``120.5``, ``inf``, ``3.4028235e+38``)."""
    if v is None:
        return "?"
    try:
        return str(jnp.dtype(dtype).type(v))
    except (TypeError, ValueError, OverflowError):
        return str(v)


def _fmt_index(index: tuple[int, ...]) -> str:
    return f"[{','.join(map(str, index))}]" if index else ""


def _jsonable(v: Any) -> Any:
    """Non-finite floats as strings (``"nan"``, ``"inf"``) and complex as ``[re, im]``: strict JSON."""
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, complex):
        return [_jsonable(v.real), _jsonable(v.imag)]
    if isinstance(v, float) and not np.isfinite(v):
        return str(v)
    return v
