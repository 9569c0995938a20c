"""Shared test setup: pytester for the plugin tests, and how to load the plugin in its runs."""

from __future__ import annotations

from importlib import metadata

import pytest

pytest_plugins = ["pytester"]


def _installed() -> bool:
    # Installed, the plugin loads from its pytest11 entry point; from a source tree it needs -p.
    return any(ep.name == "jaxstab" for ep in metadata.entry_points(group="pytest11"))


#: Arguments that load pytest-jaxstab in a pytester run, installed or not.
PLUGIN_ARGS: tuple[str, ...] = () if _installed() else ("-p", "pytest_jaxstab.plugin")


@pytest.fixture
def run_jaxstab(pytester: pytest.Pytester):
    """Runs pytest in-process on the pytester directory with the plugin loaded; returns the result."""

    def run(*args: str) -> pytest.RunResult:
        return pytester.runpytest(*PLUGIN_ARGS, "-p", "no:cacheprovider", *args)

    return run


def pytest_configure(config: pytest.Config) -> None:
    # pytester's in-process runs restore sys.modules afterwards: import the heavy modules here, once,
    # so that the runs share them instead of importing JAX again each time.
    import hypothesis  # noqa: F401
    import jax.numpy  # noqa: F401

