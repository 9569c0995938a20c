"""What having the plugin installed costs a suite that never uses it: the modules a plain run loads.

A run without a ``stabilize``-marked test and without the ``jaxstab`` fixture must load only the
plugin's light modules (hooks, options, marker parsing, the session object): no JAX, numpy,
Hypothesis, python-flint or mpmath because of pytest-jaxstab, and none of the check pipeline,
``_results`` or ``_baseline``. Each run is a fresh interpreter (a subprocess), compared with the same
run under ``-p no:jaxstab``, so other installed plugins (jaxtyping imports numpy) do not count.
The time and memory this saves are measured in ``benchmarks/bench_startup.py``, not here.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

from tests.conftest import PLUGIN_ARGS

ROOT = pathlib.Path(__file__).resolve().parents[1]

#: Everything pytest-jaxstab may import in a run that checks nothing: the package (its ``__init__`` is
#: lazy), the plugin's hooks and the three modules they need at start-up, and the error classes the
#: marker parser raises.
LIGHT = {
    "pytest_jaxstab",
    "pytest_jaxstab._errors",
    "pytest_jaxstab._settings",
    "pytest_jaxstab.plugin",
    "pytest_jaxstab.plugin._marker",
    "pytest_jaxstab.plugin._options",
    "pytest_jaxstab.plugin._session",
    # Standard-library only: the report paths' base (_files, set at session start so reports name files
    # relative to the rootdir). The scan (plugin._scan) is imported only by a run that scans: its
    # options are declared in plugin._options.
    "pytest_jaxstab._files",
}
HEAVY_ROOTS = ("jax", "jaxlib", "numpy", "hypothesis", "flint", "mpmath", "egglog", "matplotlib")

_RECORDER = """
import json, os, sys

def pytest_unconfigure(config):
    with open(os.environ["JAXSTAB_MODULES_OUT"], "w") as f:
        json.dump(sorted(sys.modules), f)
"""


def _loaded(tmp_path: pathlib.Path, tag: str, *args: str) -> set[str]:
    """The modules loaded by the end of ``pytest *args`` on the suite in ``tmp_path``."""
    out = tmp_path / f"modules-{tag}.json"
    env = {**os.environ, "JAXSTAB_MODULES_OUT": str(out),
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return set(json.loads(out.read_text(encoding="utf-8")))


def _suite(tmp_path: pathlib.Path, body: str) -> None:
    (tmp_path / "conftest.py").write_text(_RECORDER, encoding="utf-8")
    (tmp_path / "test_plain.py").write_text(body, encoding="utf-8")


JAX_FREE = "def test_sum():\n    assert sum([1, 2]) == 3\n"
# A JAX suite: JAX is loaded by the tests themselves, but nothing of pytest-jaxstab's check pipeline.
JAX_SUITE = ("import jax.numpy as jnp\n\n"
             "def test_jax():\n    assert float(jnp.sum(jnp.arange(3.0))) == 3.0\n")


@pytest.mark.parametrize("body", [JAX_FREE, JAX_SUITE], ids=["jax-free", "jax-suite"])
@pytest.mark.parametrize("extra", [(), ("--collect-only",)], ids=["run", "collect-only"])
def test_a_plain_run_loads_only_the_light_modules(tmp_path, body, extra):
    _suite(tmp_path, body)
    with_plugin = _loaded(tmp_path, "with", *PLUGIN_ARGS, *extra)
    without = _loaded(tmp_path, "without", "-p", "no:jaxstab", *extra)
    ours = {m for m in with_plugin if m.split(".")[0] == "pytest_jaxstab"}
    assert ours == LIGHT, f"unexpected: {sorted(ours - LIGHT)}; missing: {sorted(LIGHT - ours)}"
    added_heavy = sorted(m for m in with_plugin - without if m.split(".")[0] in HEAVY_ROOTS)
    assert added_heavy == [], f"the plugin imported {added_heavy[:10]}"


def test_a_marked_test_loads_the_pipeline(tmp_path):
    """The converse, so the test above cannot pass by the plugin not running at all."""
    _suite(tmp_path, "import pytest\nimport jax.numpy as jnp\n\n"
                     "@pytest.mark.stabilize(dtype='float64', shapes=[(3,)], max_examples=3, apply=True)\n"
                     "def test_lse(x):\n    return jnp.log(jnp.sum(jnp.exp(x)))\n")
    loaded = _loaded(tmp_path, "marked", *PLUGIN_ARGS, "--jaxstab-examples=3")
    assert {"pytest_jaxstab.plugin._run", "pytest_jaxstab._check._case", "flint"} <= loaded


def test_importing_the_package_reads_no_metadata():
    """``__version__`` is read at first use: ``importlib.metadata`` costs ~70 ms at every start."""
    code = ("import sys, pytest_jaxstab as j; before = 'importlib.metadata' in sys.modules; "
            "v = j.__version__; print(before, isinstance(v, str) and v != '')")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert out.stdout.split() == ["False", "True"]
