"""pytest-jaxstab: find, explain and fix numerical instability in JAX code.

``import pytest_jaxstab as jst``::

    jst.stabilize(fn)            # rewrite unstable patterns (a JAX transformation)
    jst.explain(fn, *args)       # which rewrites fire, at which of your lines
    jst.check(fn, shapes=..., dtype=...)   # fuzz + mpmath oracle, without pytest
    jst.find_nan_origin(fn, *args)         # where a NaN/Inf is born
    jst.time_backends(fn, *args)           # jitted time on every backend present

The names below are the public API; each is imported on first use, so loading the pytest plugin
does not import JAX for test runs that never check a function.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from . import oracles as oracles
    from . import rewrites as rewrites
    from . import strategies as strategies
    from ._check import check as check
    from ._check_trace import ArgumentError as ArgumentError
    from ._errors import JaxstabError as JaxstabError
    from ._errors import TraceError as TraceError
    from ._nan_origin import NanOrigin as NanOrigin
    from ._nan_origin import OperandSummary as OperandSummary
    from ._nan_origin import find_nan_origin as find_nan_origin
    from ._results import CaseResult as CaseResult
    from ._results import VariantStats as VariantStats
    from ._stabilize import explain as explain
    from ._stabilize import stabilize as stabilize
    from ._timing import BackendTiming as BackendTiming
    from ._timing import time_backends as time_backends

_EXPORTS: dict[str, tuple[str, str | None]] = {
    "oracles": (".oracles", None),
    "rewrites": (".rewrites", None),
    "strategies": (".strategies", None),
    "check": ("._check", "check"),
    "ArgumentError": ("._check_trace", "ArgumentError"),
    "JaxstabError": ("._errors", "JaxstabError"),
    "TraceError": ("._errors", "TraceError"),
    "NanOrigin": ("._nan_origin", "NanOrigin"),
    "OperandSummary": ("._nan_origin", "OperandSummary"),
    "find_nan_origin": ("._nan_origin", "find_nan_origin"),
    "CaseResult": ("._results", "CaseResult"),
    "VariantStats": ("._results", "VariantStats"),
    "explain": ("._stabilize", "explain"),
    "stabilize": ("._stabilize", "stabilize"),
    "BackendTiming": ("._timing", "BackendTiming"),
    "time_backends": ("._timing", "time_backends"),
}

__all__ = [
    "ArgumentError",
    "BackendTiming",
    "CaseResult",
    "JaxstabError",
    "NanOrigin",
    "OperandSummary",
    "TraceError",
    "VariantStats",
    "check",
    "explain",
    "find_nan_origin",
    "oracles",
    "rewrites",
    "stabilize",
    "strategies",
    "time_backends",
]


def __getattr__(name: str) -> Any:
    try:
        module, attr = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'pytest_jaxstab' has no attribute {name!r}") from None
    mod = importlib.import_module(module, __name__)
    value = mod if attr is None else getattr(mod, attr)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
