"""``@jst.domain``: what ``pytest --jaxstab-scan`` cannot read from a function's jaxtyping annotations.

The scan draws every floating jaxtyping-annotated argument over the full range of its dtype and binds
symbolic dimensions to small sizes. A function defined on part of the real line (``log``, ``sqrt``), or
taking arguments that are not arrays (an axis, a flag), says so here; the scan never guesses.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from ._errors import ArgumentError

__all__ = ["SCAN_ATTRIBUTE", "ScanConfig", "domain", "domain_from_text", "scan_config_from"]

#: The attribute ``@jst.domain`` sets on a function.
SCAN_ATTRIBUTE = "__jaxstab_scan__"

F = TypeVar("F", bound=Callable[..., Any])


@dataclasses.dataclass(frozen=True)
class ScanConfig:
    """How the scan checks one function: its inputs' domain, static arguments, dimension sizes, dtype."""

    domain: Any = None
    static: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    dims: Mapping[str, int] = dataclasses.field(default_factory=dict)
    dtype: str | None = None
    skip: str | None = None


def domain(bounds: Any = None, /, *, static: Mapping[str, Any] | None = None,
           dims: Mapping[str, int] | None = None, dtype: str | None = None,
           skip: str | None = None) -> Callable[[F], F]:
    """Tells ``pytest --jaxstab-scan`` how to check the decorated function; returns it unchanged.

    Args:
        bounds: the inputs the function is meant for, as the marker's ``domain=`` takes it: ``(lo, hi)``
            for every array argument, or a dict by argument name.
        static: values of the arguments that are not drawn (an axis, a flag, a size), by name.
        dims: sizes of symbolic dimensions for this function (``{"n": 8}``), over the session's.
        dtype: the floating dtype to check in, when the annotation allows several (default float32).
        skip: a reason not to check it (listed as a skipped test with this reason).

    Raises:
        ArgumentError: a value of the wrong type.

    Example:
        >>> import pytest_jaxstab as jst
        >>> @jst.domain((0, 10), static={"axis": 0})
        ... def log_mean(x, axis):
        ...     return x
        >>> log_mean.__jaxstab_scan__.static
        {'axis': 0}
    """
    config = _validated(bounds, static, dims, dtype, skip, "@jst.domain")

    def mark(fn: F) -> F:
        setattr(fn, SCAN_ATTRIBUTE, config)
        return fn

    return mark


def scan_config_from(raw: Mapping[str, Any], where: str) -> ScanConfig:
    """A :class:`ScanConfig` from an ini entry's dict (keys domain, static, dims, dtype, skip)."""
    unknown = sorted(set(raw) - {"domain", "static", "dims", "dtype", "skip"})
    if unknown:
        raise ArgumentError(f"{where}: unknown key(s) {', '.join(unknown)}; use domain, static, dims, "
                            "dtype or skip")
    return _validated(raw.get("domain"), raw.get("static"), raw.get("dims"), raw.get("dtype"),
                      raw.get("skip"), where)


def _validated(bounds: Any, static: Any, dims: Any, dtype: Any, skip: Any, where: str) -> ScanConfig:
    if static is not None and not (isinstance(static, Mapping) and all(isinstance(k, str) for k in static)):
        raise ArgumentError(f"{where}: static={static!r}: expected a dict of argument name to value")
    if dims is not None and not (isinstance(dims, Mapping) and all(
            isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) and v >= 1
            for k, v in dims.items())):
        raise ArgumentError(f"{where}: dims={dims!r}: expected a dict of dimension name to a size >= 1")
    if dtype is not None and not isinstance(dtype, str):
        raise ArgumentError(f"{where}: dtype={dtype!r}: expected a dtype name such as 'float32'")
    if skip is not None and not isinstance(skip, str):
        raise ArgumentError(f"{where}: skip={skip!r}: expected the reason, a string")
    return ScanConfig(bounds, dict(static or {}), dict(dims or {}), dtype, skip)


def domain_from_text(text: str, where: str) -> tuple[float, float]:
    """``(lo, hi)`` from an ini value such as ``-1e4 1e4`` or ``(-1e4, 1e4)``: two finite numbers, lo < hi.

    Raises:
        ArgumentError: anything else, naming ``where`` (the ini key) and the value.

    Example:
        >>> domain_from_text("(-1e4, 1e4)", "jaxstab_scan_domain")
        (-10000.0, 10000.0)
    """
    parts = text.strip().strip("()[]").replace(",", " ").split()
    try:
        lo, hi = (float(p) for p in parts)
    except ValueError:  # not two numbers
        lo = hi = math.nan
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise ArgumentError(f"{where} = {text.strip()!r}: expected two finite numbers LO HI with LO < HI, "
                            "e.g. -1e4 1e4 or (-1e4, 1e4)")
    return lo, hi
