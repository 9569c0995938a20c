"""What having pytest-jaxstab installed costs a suite that never uses it (issue 24).

A one-test suite is run by pytest in a fresh interpreter, with the plugin and with ``-p no:jaxstab``,
alternately (so the load of a shared machine falls on both alike), ``RUNS`` times each. The wall-time
figure is the median of the ``RUNS`` paired ratios (each run with the plugin over the run without it
that follows it: a slow spell of the machine falls on both of a pair), printed with the ratios'
interquartile range and the ratio of the fastest runs (noise on a shared machine only adds time, so the
minimum is the least disturbed figure); the difference of the median peak resident sizes (``ru_maxrss``
of the pytest process) is printed too. Goals: a median paired ratio of at most 1.05 and 10 MiB.

Suites: a JAX-free test; a test that uses JAX (the suite imports JAX itself); and ``--collect-only``
of the JAX-free suite. None has a ``stabilize`` marker or the ``jaxstab`` fixture.

The package's bytecode is compiled first (``compileall``), as ``pip install`` does for an installed
plugin and Python does on the first import: a machine with ``PYTHONDONTWRITEBYTECODE`` set and an
editable install (this project's own ``.venv``) would otherwise compile the plugin's modules from
source in every run, about 12 ms that no installed user pays; the uncompiled figure is printed too.
pytest assertion-rewrites an entry-point plugin's modules and keeps its own bytecode of them beside
the source, which ``compileall`` does not write: the goal's case lets its warm-up run write it, as an
installed plugin's first run does (``PYTHONDONTWRITEBYTECODE`` aside), so the timed runs read it.

    PYTHONPATH=. python benchmarks/bench_startup.py [runs]
"""

from __future__ import annotations

import compileall
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

RUNS = 25
WALL_GOAL = 1.05
MEMORY_GOAL_MIB = 10.0
ROOT = pathlib.Path(__file__).resolve().parents[1]

# pytest in-process, then the process's own peak RSS (KiB on Linux) on the last line.
_DRIVER = ("import resource, sys, pytest; rc = pytest.main(sys.argv[1:]); "
           "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss); sys.exit(rc)")

SUITES = {
    "JAX-free test": ("def test_sum():\n    assert sum([1, 2]) == 3\n", ()),
    "JAX test": ("import jax.numpy as jnp\n\n"
                 "def test_jax():\n    assert float(jnp.sum(jnp.arange(3.0))) == 3.0\n", ()),
    "--collect-only": ("def test_sum():\n    assert sum([1, 2]) == 3\n", ("--collect-only",)),
}


def _plugin_args() -> tuple[str, ...]:
    from importlib import metadata

    installed = any(ep.name == "jaxstab" for ep in metadata.entry_points(group="pytest11"))
    return () if installed else ("-p", "pytest_jaxstab.plugin")


def _one(directory: pathlib.Path, args: tuple[str, ...], write: bool = False) -> tuple[float, float]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if write:  # this run may write bytecode (pytest's rewritten modules among it)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", _DRIVER, "-q", "-p", "no:cacheprovider", *args],
                          cwd=directory, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"pytest failed:\n{proc.stdout}\n{proc.stderr}")
    return wall, int(proc.stdout.strip().splitlines()[-1]) / 1024.0


def _drop_bytecode() -> None:
    for cache in (ROOT / "pytest_jaxstab").rglob("__pycache__"):
        shutil.rmtree(cache, ignore_errors=True)


def main(runs: int = RUNS) -> None:
    with_plugin = _plugin_args()
    if not os.environ.get("PYTHONDONTWRITEBYTECODE"):
        _table(runs, with_plugin, "bytecode written by Python on the first import")
        return
    _drop_bytecode()
    _table(runs, with_plugin, "PYTHONDONTWRITEBYTECODE set, no bytecode: compiled from source each run")
    compileall.compile_dir(str(ROOT / "pytest_jaxstab"), quiet=1)
    try:
        _table(runs, with_plugin, "bytecode compiled first, as an installed plugin has it (the goal's case)",
               warm_writes=True)
    finally:
        _drop_bytecode()


def _table(runs: int, with_plugin: tuple[str, ...], title: str, warm_writes: bool = False) -> None:
    """``warm_writes``: the warm-up run writes bytecode, pytest's assertion-rewritten plugin modules
    included (pytest rewrites an entry-point plugin's modules and caches the result beside them, which
    ``compileall`` does not: an installed plugin's second run reads it; without it every run re-parses
    and rewrites them, about 40 ms here)."""
    print(title)
    print(f"{'suite':<16} {'with (s)':>9} {'without':>9} {'ratio':>7} {'IQR':>13} {'min ratio':>9} "
          f"{'+MiB':>6}   goal: ratio <= {WALL_GOAL}, +MiB <= {MEMORY_GOAL_MIB:g} ({runs} pairs)")
    for name, (body, extra) in SUITES.items():
        with tempfile.TemporaryDirectory() as tmp:
            directory = pathlib.Path(tmp)
            (directory / "test_plain.py").write_text(body, encoding="utf-8")
            on: list[tuple[float, float]] = []
            off: list[tuple[float, float]] = []
            _one(directory, (*with_plugin, *extra), write=warm_writes)  # warm the file cache once
            for _ in range(runs):
                on.append(_one(directory, (*with_plugin, *extra)))
                off.append(_one(directory, ("-p", "no:jaxstab", *extra)))
        wall_on = statistics.median(w for w, _ in on)
        wall_off = statistics.median(w for w, _ in off)
        mem = statistics.median(m for _, m in on) - statistics.median(m for _, m in off)
        ratios = [a / b for (a, _), (b, _) in zip(on, off, strict=True)]
        ratio = statistics.median(ratios)
        low, _, high = statistics.quantiles(ratios, n=4)
        fastest = min(w for w, _ in on) / min(w for w, _ in off)
        verdict = "ok" if ratio <= WALL_GOAL and mem <= MEMORY_GOAL_MIB else "MISSED"
        print(f"{name:<16} {wall_on:9.3f} {wall_off:9.3f} {ratio:7.3f} {low:6.3f}-{high:6.3f} {fastest:9.3f} "
              f"{mem:6.1f}   {verdict}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else RUNS)
