"""The public surface: every exported name resolves, and importing the package stays light."""

from __future__ import annotations

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


def test_design_api_names_are_public():
    # docs/architecture.md "Public Python API"
    for name in ("stabilize", "explain", "check", "find_nan_origin", "time_backends", "rewrites",
                 "oracles", "strategies"):
        assert name in jst.__all__
    assert callable(jst.rewrites.get) and callable(jst.rewrites.register)
    assert callable(jst.oracles.evaluate) and callable(jst.oracles.error_bits)
    assert callable(jst.strategies.floats) and callable(jst.strategies.arrays)
