"""Shared test setup: pytester and how to load the plugin in its runs, the ways to run a plugin scenario
(serial, ``-n 0``, ``-n 2``, ``-p no:xdist``), and strict dtype promotion for every test."""

from __future__ import annotations

from importlib import metadata

import pytest

pytest_plugins = ["pytester"]


def _installed() -> bool:
    # Installed, the plugin loads from its pytest11 entry point; from a source tree it needs -p.
    return any(ep.name == "jaxstab" for ep in metadata.entry_points(group="pytest11"))


#: Arguments that load pytest-jaxstab in a pytester run, installed or not.
PLUGIN_ARGS: tuple[str, ...] = () if _installed() else ("-p", "pytest_jaxstab.plugin")


#: How a plugin scenario runs, as syrupy runs its own: the default (serial, xdist loaded), xdist loaded
#: but off, two xdist workers, and xdist not loaded at all. Reports and baselines must not differ.
PLUGIN_RUNS: dict[str, tuple[str, ...]] = {
    "serial": (),
    "n0": ("-n", "0"),
    "n2": ("-n", "2"),
    "no-xdist": ("-p", "no:xdist"),
}


#: The runs the fast tier takes: xdist in-process scenarios cost 3-8 s each; ``n0`` and ``n2`` run in the
#: slow tier, and ``test_plugin_baseline``'s xdist test keeps one xdist run in the fast tier.
FAST_PLUGIN_RUNS = ("serial", "no-xdist")


@pytest.fixture(params=[r if r in FAST_PLUGIN_RUNS else pytest.param(r, marks=pytest.mark.slow)
                        for r in PLUGIN_RUNS])
def plugin_args(request: pytest.FixtureRequest) -> tuple[str, ...]:
    """Extra pytest arguments of one way to run a plugin scenario (see :data:`PLUGIN_RUNS`)."""
    args = PLUGIN_RUNS[request.param]
    if "-n" in args:
        pytest.importorskip("xdist")
    return args


@pytest.fixture(autouse=True)
def _strict_dtype_promotion():
    """Every test runs under JAX's strict dtype promotion (as equinox's tests do): a mixed-dtype
    operation that would silently promote is an error, so no test passes on an implicit cast."""
    import jax

    with jax.numpy_dtype_promotion("strict"):
        yield


#: The terminal width of scenario runs (``COLUMNS``): every column of the "jaxstab" table and unwrapped
#: summary lines, whatever the terminal running the suite. A test about the width sets its own.
WIDE_TERMINAL = "400"


@pytest.fixture
def run_jaxstab(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch):
    """Runs pytest in-process on the pytester directory with the plugin loaded; returns the result.

    The terminal is :data:`WIDE_TERMINAL` columns wide unless the test sets ``COLUMNS`` after
    requesting this fixture: the table fits the terminal, and most scenarios assert on every column.

    Each run's Hypothesis example database lives in the pytester directory, as a user project's does.
    Hypothesis fixes its default database path once per process (this repository's ``.hypothesis``), so
    without this, in-process runs of unrelated scenarios would replay each other's stored failures.
    """
    from hypothesis import settings
    from hypothesis.database import DirectoryBasedExampleDatabase

    monkeypatch.setenv("COLUMNS", WIDE_TERMINAL)

    def run(*args: str, search: bool = False) -> pytest.RunResult:
        # The search is on by default in the plugin; scenario suites that are not about it run with it
        # off (each failing case would search for seconds). search=True: the plugin's own default.
        if not search and not any(arg.startswith("--jaxstab-search") for arg in args):
            args = ("--jaxstab-search=off", *args)
        previous = settings.get_current_profile_name()
        settings.register_profile(
            "jaxstab-pytester", parent=settings.get_profile(previous),
            database=DirectoryBasedExampleDatabase(str(pytester.path / ".hypothesis" / "examples")))
        settings.load_profile("jaxstab-pytester")
        try:
            return pytester.runpytest(*PLUGIN_ARGS, "-p", "no:cacheprovider", *args)
        finally:
            settings.load_profile(previous)

    return run


def pytest_configure(config: pytest.Config) -> None:
    # pytester's in-process runs restore sys.modules afterwards: import the heavy modules here, once,
    # so that the runs share them instead of importing JAX again each time.
    import hypothesis  # noqa: F401
    import jax.numpy  # noqa: F401

