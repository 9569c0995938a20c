"""pytest-jaxstab: find, explain and fix numerical instability in JAX code.

``import pytest_jaxstab as jst``::

    jst.stabilize(fn)            # rewrite unstable patterns (a JAX transformation)
    jst.explain(fn, *args)       # which rewrites fire, at which of your lines
    jst.check(fn, shapes=..., dtype=...)   # fuzz + exact oracle, without pytest
    jst.verify_rule(rule)                  # is every alternative of a rule sound (the oracle)
    jst.find_nan_origin(fn, *args)         # where a NaN/Inf is born
    jst.time_backends(fn, *args)           # jitted time on every backend present
    jst.local_error(fn, *args)             # which of your lines loses the bits
    jst.improve(fn, shapes=..., dtype=...) # search a more accurate program (egglog + oracle)
    jst.tune_precision(fn, shapes=..., dtype="bfloat16")  # which lines must stay float32
    jst.precision_policy(model, params, batch_shapes, dtype="bfloat16")  # the same, per layer
    jst.precision_policy(loss, params, batch_shapes, dtype="float16", grad=True)  # for training
    jst.settings(max_examples=1000)        # the options of a case, frozen; named profiles

The names below are the public API, listed once in ``_EXPORTS`` (``__all__`` is derived from it); each
is imported on first use, so loading the pytest plugin does not import JAX for test runs that never
check a function. The ``TYPE_CHECKING`` block repeats them for type checkers only, and a test keeps the
two in step.
"""

# No `from __future__ import annotations` and no plain `import typing`/`importlib`: each would put a
# non-public name in this namespace (`dir(pytest_jaxstab)` lists the public names only).
import typing as _typing

__version__: str  # annotation only: the value comes from __getattr__ at first use

if _typing.TYPE_CHECKING:
    from . import oracles as oracles
    from . import rewrites as rewrites
    from . import strategies as strategies
    from ._check import check as check
    from ._check._verify import verify_rule as verify_rule
    from ._diagnostics import BackendTiming as BackendTiming
    from ._diagnostics import NanOrigin as NanOrigin
    from ._diagnostics import OperandSummary as OperandSummary
    from ._diagnostics import find_nan_origin as find_nan_origin
    from ._diagnostics import local_error as local_error
    from ._diagnostics import time_backends as time_backends
    from ._errors import ArgumentError as ArgumentError
    from ._errors import ArgumentTypeError as ArgumentTypeError
    from ._errors import BaselineError as BaselineError
    from ._errors import JaxstabError as JaxstabError
    from ._errors import MarkerError as MarkerError
    from ._errors import OracleError as OracleError
    from ._errors import ReportMergeError as ReportMergeError
    from ._errors import SettingsError as SettingsError
    from ._errors import TraceError as TraceError
    from ._errors import UnknownNameError as UnknownNameError
    from ._errors import UnsupportedPrimitive as UnsupportedPrimitive
    from ._precision import GradientPlan as GradientPlan
    from ._precision import PrecisionPlan as PrecisionPlan
    from ._precision import PrecisionPolicy as PrecisionPolicy
    from ._precision import precision_policy as precision_policy
    from ._precision import tune_precision as tune_precision
    from ._results import CaseResult as CaseResult
    from ._results import VariantStats as VariantStats
    from ._scan_config import domain as domain
    from ._search import Improvement as Improvement
    from ._search import improve as improve
    from ._settings import settings as settings
    from ._stabilize import explain as explain
    from ._stabilize import stabilize as stabilize

#: public name -> (module, attribute or None for the module itself)
_EXPORTS: dict[str, tuple[str, str | None]] = {
    "oracles": (".oracles", None),
    "rewrites": (".rewrites", None),
    "strategies": (".strategies", None),
    "check": ("._check", "check"),
    "verify_rule": ("._check._verify", "verify_rule"),
    "BackendTiming": ("._diagnostics", "BackendTiming"),
    "NanOrigin": ("._diagnostics", "NanOrigin"),
    "OperandSummary": ("._diagnostics", "OperandSummary"),
    "find_nan_origin": ("._diagnostics", "find_nan_origin"),
    "local_error": ("._diagnostics", "local_error"),
    "time_backends": ("._diagnostics", "time_backends"),
    "GradientPlan": ("._precision", "GradientPlan"),
    "PrecisionPlan": ("._precision", "PrecisionPlan"),
    "PrecisionPolicy": ("._precision", "PrecisionPolicy"),
    "precision_policy": ("._precision", "precision_policy"),
    "tune_precision": ("._precision", "tune_precision"),
    "ArgumentError": ("._errors", "ArgumentError"),
    "ArgumentTypeError": ("._errors", "ArgumentTypeError"),
    "BaselineError": ("._errors", "BaselineError"),
    "ReportMergeError": ("._errors", "ReportMergeError"),
    "SettingsError": ("._errors", "SettingsError"),
    "JaxstabError": ("._errors", "JaxstabError"),
    "MarkerError": ("._errors", "MarkerError"),
    "OracleError": ("._errors", "OracleError"),
    "TraceError": ("._errors", "TraceError"),
    "UnknownNameError": ("._errors", "UnknownNameError"),
    "UnsupportedPrimitive": ("._errors", "UnsupportedPrimitive"),
    "CaseResult": ("._results", "CaseResult"),
    "domain": ("._scan_config", "domain"),
    "Improvement": ("._search", "Improvement"),
    "improve": ("._search", "improve"),
    "settings": ("._settings", "settings"),
    "VariantStats": ("._results", "VariantStats"),
    "explain": ("._stabilize", "explain"),
    "stabilize": ("._stabilize", "stabilize"),
}

__all__ = sorted(_EXPORTS)  # pyright: ignore[reportUnsupportedDunderAll]


def __getattr__(name: str) -> "_typing.Any":
    if name == "__version__":
        from ._files import jaxstab_version  # read at first use (importlib.metadata costs ~70 ms)

        globals()[name] = version = jaxstab_version()
        return version
    try:
        module, attr = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'pytest_jaxstab' has no attribute {name!r}") from None
    from importlib import import_module

    mod = import_module(module, __name__)
    value = mod if attr is None else getattr(mod, attr)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(_EXPORTS)
