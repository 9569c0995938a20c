"""The public surface: every exported name resolves, and importing the package stays light."""

from __future__ import annotations

import ast
import pathlib
import re
import subprocess
import sys

import pytest

import pytest_jaxstab as jst


@pytest.mark.parametrize("name", jst.__all__)
def test_every_exported_name_resolves_and_is_documented(name):
    obj = getattr(jst, name)
    assert obj is not None
    assert (getattr(obj, "__doc__", None) or "").strip(), f"{name} has no docstring"


def test_unknown_attribute_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no_such_thing"):
        jst.no_such_thing


def test_importing_the_plugin_does_not_import_jax():
    code = "import sys, pytest_jaxstab.plugin; print('jax' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def _type_checking_imports() -> dict[str, tuple[str, str | None]]:
    """The TYPE_CHECKING block of ``__init__.py`` as ``_EXPORTS`` writes it: name -> (module, attr)."""
    tree = ast.parse(pathlib.Path(jst.__file__).read_text(encoding="utf-8"))
    (block,) = [node for node in tree.body if isinstance(node, ast.If)
                and "TYPE_CHECKING" in ast.unparse(node.test)]
    found: dict[str, tuple[str, str | None]] = {}
    for stmt in block.body:
        assert isinstance(stmt, ast.ImportFrom) and stmt.level == 1, ast.unparse(stmt)
        for alias in stmt.names:
            public = alias.asname or alias.name
            assert public not in found, f"{public} imported twice"
            if stmt.module is None:  # from . import oracles as oracles
                found[public] = (f".{alias.name}", None)
            else:
                found[public] = (f".{stmt.module}", alias.name)
    return found


def test_type_checking_block_lists_exactly_the_exports():
    # What type checkers see is what users get at run time: same names, same sources.
    assert _type_checking_imports() == jst._EXPORTS
    assert jst.__all__ == sorted(jst._EXPORTS)


def test_names_in_the_architecture_pages_api_section_exist():
    # docs/architecture.md, "Public Python API" names jst.x and jst.module.x: each must resolve.
    page = (pathlib.Path(jst.__file__).parents[1] / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = page.split("## Public Python API", 1)[1].split("\n## ", 1)[0]
    names = set(re.findall(r"`jst\.(\w+)", section))
    assert {"stabilize", "explain", "check", "find_nan_origin", "time_backends", "rewrites", "oracles",
            "strategies"} <= names
    for name in names:
        assert name in jst.__all__, f"jst.{name} is not public"
    # members listed after a module name (- `jst.oracles`: `evaluate`, ...) exist in that module
    listed = re.findall(r"^- `jst\.(\w+)`: (.*(?:\n  .*)*)", section, flags=re.M)
    assert {"rewrites", "strategies", "oracles"} <= {module for module, _ in listed}
    for module, members in listed:
        for member in re.findall(r"`(\w+)", members):
            assert hasattr(getattr(jst, module), member), f"jst.{module}.{member}"


@pytest.mark.parametrize("module", ["", "rewrites", "oracles", "strategies", "rewrites.forms"])
def test_dir_and_all_list_exactly_the_public_names(module):
    # issue 37 item 3: no Any, TYPE_CHECKING, annotations, importlib or submodule in the namespace
    obj = jst
    for part in filter(None, module.split(".")):
        obj = getattr(obj, part)
    assert sorted(dir(obj)) == sorted(obj.__all__)
    assert not {"Any", "TYPE_CHECKING", "annotations", "importlib", "engine", "catalogue"} & set(dir(obj))
    for name in obj.__all__:
        assert not name.startswith("_") and hasattr(obj, name)


def test_checks_signature_is_the_public_one():
    # issue 37 item 3: fn, shapes, dtype, domain, settings, name and **options; the run's internals
    # (witnesses, derandomize, profile, derivative, gradient_witnesses) are _check.check_case's.
    import inspect

    params = inspect.signature(jst.check).parameters
    assert list(params) == ["fn", "shapes", "dtype", "domain", "settings", "name", "options"]
    assert params["options"].kind is inspect.Parameter.VAR_KEYWORD


def test_tune_precisions_signature_is_the_public_one():
    # issue 34: fn, shapes, dtype, domain, high, settings and **options (tolerance_ulps, samples, seed,
    # rules); PrecisionPlan is exported beside it
    import inspect

    params = inspect.signature(jst.tune_precision).parameters
    assert list(params) == ["fn", "shapes", "dtype", "domain", "high", "settings", "options"]
    assert params["high"].default == "float32" and params["domain"].default is None
    assert params["options"].kind is inspect.Parameter.VAR_KEYWORD
    assert {"tune_precision", "PrecisionPlan"} <= set(jst.__all__)
