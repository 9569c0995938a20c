"""``pytest --jaxstab-scan=PACKAGE[.module]``: jaxtyping-annotated functions checked without tests.

Every public function of the named modules (a package: it and its public submodules) whose arguments
carry jaxtyping array annotations with floating dtypes becomes a test item, node id
``package/module.py::function``, checked as a marked test is (same draws, verdict, report, baseline and
gate). Symbolic dimensions are bound to small sizes (:data:`DEFAULT_DIM_SIZE`, overridden per name by
``--jaxstab-scan-dims=n=8,batch=2`` / ``jaxstab_scan_dims``, and per function by ``@jst.domain(dims=)``).
What annotations cannot say (a domain, static arguments) comes from ``@jst.domain`` or the ini key
``jaxstab_scan_config``, and a domain for every function from ``jaxstab_scan_domain``; a function the
scan cannot check is a skipped item, at the function's own line, whose reason names it and says what to
add, never a guess. A function checked without any domain that fails only above some input magnitude
says so (``_magnitude``).
"""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import pkgutil
import typing
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from .._scan_config import SCAN_ATTRIBUTE, ScanConfig, domain_from_text, scan_config_from

# the options are declared with the others: pytest's start-up then does not import this module
from ._options import DEFAULT_DIM_SIZE, DIMS_OPTION, DOMAIN_INI, SCAN_OPTION

__all__ = ["DEFAULT_DIM_SIZE", "ScanItem", "scan_items"]

#: The floating dtypes the scan checks in, preferred first when an annotation allows several.
_FLOATS = ("float32", "float64", "float16", "bfloat16")


def _usage(message: str) -> pytest.UsageError:
    return pytest.UsageError(f"jaxstab scan: {message}")


def _targets(config: pytest.Config) -> list[str]:
    cli = config.getoption("jaxstab_scan", None) or []
    return [t for value in [*cli, *config.getini("jaxstab_scan")] for t in value.replace(",", " ").split()]


def _dims(config: pytest.Config) -> dict[str, int]:
    raw = config.getoption("jaxstab_scan_dims", None)
    pairs = raw.replace(",", " ").split() if raw else list(config.getini("jaxstab_scan_dims"))
    sizes = {}
    for pair in pairs:
        name, _, size = pair.partition("=")
        if not name or not size.isdigit() or int(size) < 1:
            raise _usage(f"{DIMS_OPTION}/jaxstab_scan_dims: {pair!r}: expected NAME=SIZE with a size >= 1, "
                         "e.g. n=8,batch=2")
        sizes[name] = int(size)
    return sizes


def _default_domain(config: pytest.Config) -> tuple[float, float] | None:
    from .._errors import ArgumentError

    raw = str(config.getini(DOMAIN_INI) or "")
    if not raw.strip():
        return None
    try:
        return domain_from_text(raw, DOMAIN_INI)
    except ArgumentError as exc:
        raise _usage(str(exc)) from None


def _ini_configs(config: pytest.Config) -> dict[str, ScanConfig]:
    from .._errors import ArgumentError

    configs = {}
    for line in config.getini("jaxstab_scan_config"):
        name, sep, value = line.partition("=")
        where = f"jaxstab_scan_config: {line.strip()!r}"
        try:
            raw = ast.literal_eval(value.strip()) if sep else None
        except (ValueError, SyntaxError):
            raw = None
        if not isinstance(raw, dict):
            raise _usage(f"{where}: expected module.function = {{'domain': (lo, hi), 'static': {{...}}}}")
        try:
            configs[name.strip()] = scan_config_from(raw, where)
        except ArgumentError as exc:
            raise _usage(str(exc)) from None
    return configs


def _modules(target: str) -> Iterator[ModuleType]:
    try:
        module = importlib.import_module(target)
    except Exception as exc:  # the user's import error, whatever it is: say which target
        raise _usage(f"{SCAN_OPTION}={target}: cannot import it ({type(exc).__name__}: {exc}); "
                     "is it installed, or on sys.path (pytest's pythonpath ini key)?") from None
    yield module
    for info in pkgutil.walk_packages(getattr(module, "__path__", []), prefix=f"{target}."):
        if any(part.startswith("_") for part in info.name.split(".")):
            continue
        try:
            yield importlib.import_module(info.name)
        except Exception as exc:
            raise _usage(f"{SCAN_OPTION}={target}: cannot import {info.name} "
                         f"({type(exc).__name__}: {exc})") from None


def scan_items(session: pytest.Session) -> list[pytest.Item]:
    """The scan's test items for the session's targets (none when no target is set)."""
    config = session.config
    targets = _targets(config)
    if not targets:
        return []
    try:
        import jaxtyping  # noqa: F401  # pyright: ignore[reportUnusedImport]
    except ImportError:
        raise _usage("needs jaxtyping: pip install 'pytest-jaxstab[jaxtyping]'") from None
    dims, configs, default = _dims(config), _ini_configs(config), _default_domain(config)
    items: list[pytest.Item] = []
    seen: set[str] = set()
    for target in targets:
        for module in _modules(target):
            if module.__name__ in seen or getattr(module, "__file__", None) is None:
                continue
            seen.add(module.__name__)
            functions = [(name, fn) for name, fn in vars(module).items()
                         if not name.startswith("_") and inspect.isfunction(fn)
                         and fn.__module__ == module.__name__]
            if not functions:
                continue
            parent = ScanModule.from_parent(session, path=Path(str(module.__file__)))
            found: list[pytest.Item] = []
            for name, fn in sorted(functions, key=lambda nf: _line(nf[1])):
                qualified = f"{module.__name__}.{name}"
                cfg = getattr(fn, SCAN_ATTRIBUTE, None) or configs.get(qualified) or ScanConfig()
                found.append(ScanItem.from_parent(parent, name=name, fn=fn, cfg=cfg, dims=dims,
                                                  qualified=qualified, default_domain=default))
            # Reported as collected, so the terminal's counts and other plugins see them.
            session.ihook.pytest_collectreport(
                report=pytest.CollectReport(parent.nodeid, "passed", None, list(found)))
            items += found
    return items


def _line(fn: Callable[..., Any]) -> int:
    code = getattr(fn, "__code__", None)
    return code.co_firstlineno if code is not None else 0


class ScanModule(pytest.File):
    """A scanned module: the parent of its functions' items (node id ``package/module.py``)."""

    def collect(self) -> list[pytest.Item]:  # items are made by scan_items, not collected from here
        return []


class ScanItem(pytest.Item):
    """One scanned function, checked as a ``@pytest.mark.stabilize`` test with the shapes and dtype its
    annotations give; skipped, with the reason, when they do not say enough.

    The domain is the function's own (``@jst.domain``, ``jaxstab_scan_config``), else the scan's
    (``jaxstab_scan_domain``), else none: the dtype's whole range, and a failure then says up to which
    magnitude the function passes (:func:`~._magnitude.magnitude_note`)."""

    def __init__(self, *, fn: Callable[..., Any], cfg: ScanConfig, dims: dict[str, int],
                 qualified: str = "", default_domain: tuple[float, float] | None = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.fn = fn
        self.cfg = cfg
        self.dims = {**dims, **cfg.dims}
        self.qualified = qualified or self.name
        self.domain = cfg.domain if cfg.domain is not None else default_domain
        self.plan = plan_call(fn, cfg, self.dims)
        if isinstance(self.plan, str):
            # A mark, not pytest.skip() in runtest: pytest then reports the skip at the item's location
            # (reportinfo: the function's file and line), not at this module's line. skipif, not skip:
            # the terminal's -rs summary drops the line number of a `skip` mark's report.
            self.add_marker(pytest.mark.skipif(True, reason=f"jaxstab scan: {self.qualified}: {self.plan}"))

    def runtest(self) -> None:
        from ._run import COMPLETE_KEY, run_case

        plan = self.plan
        assert not isinstance(plan, str)  # skipped by its mark before runtest
        call, shapes, dtype = plan

        def magnitudes(result: Any, chosen: Any) -> str:
            from ._magnitude import magnitude_note

            return magnitude_note(call, shapes=shapes, dtype=dtype, result=result, chosen=chosen,
                                  name=self.nodeid, qualified=self.qualified)

        # Without a domain, a failure says up to which input magnitude the function passes.
        run_case(self, call, nodeid=self.nodeid, shapes=shapes, dtype=dtype, domain=self.domain,
                 annotate=magnitudes if self.domain is None else None)
        self.stash[COMPLETE_KEY] = True

    def reportinfo(self) -> tuple[Any, int | None, str]:
        return self.path, _line(self.fn) - 1, f"jaxstab scan: {self.name}"

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        return str(excinfo.value) if isinstance(excinfo.value, pytest.fail.Exception) else \
            super().repr_failure(excinfo, style)


def plan_call(fn: Callable[..., Any], cfg: ScanConfig,
              dims: dict[str, int]) -> tuple[Callable[..., Any], list[tuple[int, ...]], str] | str:
    """How to check `fn`: a function of its drawn arrays, their shapes and the dtype; or why it cannot
    be checked (a sentence saying what to add)."""
    if cfg.skip is not None:
        return cfg.skip
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
        params = list(inspect.signature(fn).parameters.values())
    except Exception as exc:  # an annotation that does not resolve (a name only imported for typing)
        return f"its annotations cannot be read ({type(exc).__name__}: {exc})"
    drawn: list[str] = []
    shapes: list[tuple[int, ...]] = []
    dtypes: list[tuple[str, ...]] = []
    for p in params:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or p.name in cfg.static:
            continue
        ann = hints.get(p.name)
        allowed = getattr(ann, "dtypes", None)
        if ann is None or allowed is None or not hasattr(ann, "dims"):
            if p.default is not p.empty:
                continue
            return (f"argument {p.name!r} has no jaxtyping array annotation: annotate it "
                    f"(Float[Array, \"n\"]) or give its value with @jst.domain(static={{{p.name!r}: ...}})")
        floats = tuple(d for d in _FLOATS if d in allowed)
        if not floats:
            return (f"argument {p.name!r} is not a floating array ({getattr(ann, '__name__', ann)}): "
                    f"give its value with @jst.domain(static={{{p.name!r}: ...}})")
        shape = _shape(ann, dims)
        if isinstance(shape, str):
            return f"argument {p.name!r}: {shape}"
        drawn.append(p.name)
        shapes.append(shape)
        dtypes.append(floats)
    if not drawn:
        return "no argument carries a jaxtyping floating array annotation (Float[Array, \"...\"])"
    common = [d for d in _FLOATS if all(d in allowed for allowed in dtypes)]
    dtype = cfg.dtype or (common[0] if common else None)
    if dtype is None or any(dtype not in allowed for allowed in dtypes):
        return "its arguments' annotations allow no common floating dtype: set @jst.domain(dtype=...)"
    static = dict(cfg.static)

    @functools.wraps(fn)
    def call(*arrays: Any) -> Any:
        return fn(**dict(zip(drawn, arrays, strict=True)), **static)

    return call, shapes, dtype


def _shape(ann: Any, dims: dict[str, int]) -> tuple[int, ...] | str:
    shape: list[int] = []
    for dim in ann.dims:
        kind = type(dim).__name__
        if kind == "_FixedDim":
            shape.append(int(dim.size))
        elif kind == "_NamedDim":
            shape.append(dims.get(dim.name, DEFAULT_DIM_SIZE))
        elif kind in ("_NamedVariadicDim", "_AnonymousVariadicDim"):
            continue  # "*batch": bound to no dimensions (the smallest the function must accept)
        elif kind == "_SymbolicDim":
            try:  # "n+1", "2*n": jaxtyping's own dimension expressions, over the bound sizes
                value = eval(dim.elem, {"__builtins__": {}}, {**dims, **_defaults(dim.elem, dims)})
            except Exception:
                return f"dimension {dim.elem!r} cannot be sized: give its names with @jst.domain(dims=...)"
            shape.append(int(value))
        elif kind == "_AnonDim":
            shape.append(DEFAULT_DIM_SIZE)
        else:
            return f"dimension {dim!r} is not supported by the scan: check it with a marked test"
    return tuple(shape)


def _defaults(expr: str, dims: dict[str, int]) -> dict[str, int]:
    names = {n.id for n in ast.walk(ast.parse(expr, mode="eval")) if isinstance(n, ast.Name)}
    return {n: dims.get(n, DEFAULT_DIM_SIZE) for n in names}
