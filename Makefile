# pytest-jaxstab: two commands set everything up on a fresh machine.
#   make demo   -> .venv (Python 3.12, newest tested jax), runs the example suite with the reports
#   make demo-baseline -> re-saves examples/.jaxstab/baseline.json (commit it)
#   make test   -> .venv, runs the test suite and the package's doctests (testpaths in pyproject.toml),
#                  all but the slow tier (tests marked `slow`): a few minutes on 2 cores
#   make test-slow -> the slow tier alone (CI runs `make test` and `make test-slow`: everything once)
#   make test-all -> both tiers in one run
#   make test-compat -> .venv-compat (Python 3.11, jax 0.10.2), runs the fast tier and the slow tests
#                  marked `compat`, less the files that cannot see the JAX version (README, "Supported
#                  versions": why not the whole suite)
#   make check-newest-jax -> .venv-newest with the newest jax the registry serves (whatever pyproject
#                  admits), runs the fast tier on it: how a new JAX release is taken in (README)
#   make lint   -> ruff + pyright in .venv
#   make bench-costs -> every "Measured costs" figure of README in one run (quiet machine)
SHELL := /bin/bash
.ONESHELL:
.SHELLFLAGS := -eu -o pipefail -c

# python3.12 may exist only as a pyenv shim that is not active; fall back to pyenv's own install.
find_python = $(shell for p in $(1) $$(pyenv root 2>/dev/null)/versions/$(2)*/bin/$(1); do \
	  if $$p -c 'import sys' >/dev/null 2>&1; then echo $$p; break; fi; done)
PYTHON ?= $(call find_python,python3.12,3.12)
PYTHON_COMPAT ?= $(call find_python,python3.11,3.11)
JAX_COMPAT_VERSION ?= 0.10.2
VENV ?= .venv
VENV_COMPAT ?= .venv-compat
VENV_NEWEST ?= .venv-newest
PYTEST_ARGS ?=
# The suite starts about fifteen Python processes (two xdist workers, pytester subprocesses, the start-up
# checks): with bytecode writing off (PYTHONDONTWRITEBYTECODE, set on some machines) each one compiles
# and assertion-rewrites the package and the tests from source again, about 6 s of CPU per process.
# The test runs write it (__pycache__ is ignored by git).
RUN_PYTEST = PYTHONDONTWRITEBYTECODE= $(1)/bin/python -m pytest
# The fast tier compiles with JAX's persistent compilation cache, in a directory of its own for the run
# (removed after): half of the tier's CPU is XLA compiling, and the two xdist workers and the pytester
# runs compile many of the same programs (a jitted function built afresh for each check, the same
# primitives dispatched eagerly); the cache hands an identical program's executable out instead.
# Measured on 2 cores at 9b377b1 (jax.monitoring's compile events): 2,211 of 7,726 compiles hit, CPU 575 -> 449 s, wall 5:13 -> 4:04
# (one run each). Every entry is keyed by the program, the compile options and the jax/jaxlib
# versions, and it starts empty: no run reads another's. The slow tier runs without it: its costliest
# tests compile distinct programs (no hit measured on the rule alternatives; the whole tier took
# 1,306 s with it and 1,302 s without, one run each, 2026-12-07).
JAX_CACHE_RUN = cache=$$(mktemp -d) && trap 'rm -rf "$$cache"' EXIT && \
	export JAX_COMPILATION_CACHE_DIR="$$cache" JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0 \
	JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES=-1

.PHONY: demo demo-baseline test test-slow test-all test-compat check-newest-jax lint venv venv-compat clean bench-costs

# install VENV,ARGS: installs ARGS into VENV with uv (README, "Dependencies": a tool of the set-up, never
# of the package). Measured on the 2-core machine, 2026-12-07, a fresh venv: pip 23 (the bundled pip of
# Python 3.12) took 41 s for '.[test]', 22 s of them byte-compiling every installed file and 19 s
# resolving over the machine's three indexes; uv took 3 s from an empty cache (12 s with its
# --compile-bytecode, so not that: the test run's processes compile what they import, about 4 s of CPU,
# and write it). Where uv cannot be installed or fails (a private index that only pip.conf names: uv
# does not read pip's configuration), pip installs as before.
install = { $(1)/bin/python -m pip install --quiet 'uv>=0.5,<1' && \
	$(1)/bin/python -m uv pip install --quiet --python $(1)/bin/python $(2); } || \
	$(1)/bin/python -m pip install --quiet $(2)

$(VENV)/.installed: pyproject.toml
	@test -n "$(PYTHON)" || { echo "error: python3.12 not found; set PYTHON=/path/to/python3.12"; exit 2; }
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(call install,$(VENV),-e '.[test]')
	touch $@

# The linters (ruff, pyright with its Node.js) only where `make lint` asks: not part of `make test`'s set-up
$(VENV)/.lint-installed: $(VENV)/.installed
	$(call install,$(VENV),-e '.[dev]')
	touch $@

$(VENV_COMPAT)/.installed: pyproject.toml
	@test -n "$(PYTHON_COMPAT)" || { echo "error: python3.11 not found; set PYTHON_COMPAT=..."; exit 2; }
	test -x $(VENV_COMPAT)/bin/python || $(PYTHON_COMPAT) -m venv $(VENV_COMPAT)
	$(call install,$(VENV_COMPAT),-e '.[test]' 'jax==$(JAX_COMPAT_VERSION)' 'jaxlib==$(JAX_COMPAT_VERSION)')
	touch $@

venv: $(VENV)/.installed
venv-compat: $(VENV_COMPAT)/.installed

# --dist worksteal: a worker that runs out of tests takes the other's, so the run does not end on one
# worker's long tail (issue 48)
test: venv
	$(JAX_CACHE_RUN)
	$(call RUN_PYTEST,$(VENV)) -n 2 --dist worksteal -m "not slow" $(PYTEST_ARGS)

test-slow: venv
	$(call RUN_PYTEST,$(VENV)) -n 2 --dist worksteal -m slow $(PYTEST_ARGS)

test-all: venv
	$(call RUN_PYTEST,$(VENV)) -n 2 $(PYTEST_ARGS)

test-compat: venv-compat
	$(VENV_COMPAT)/bin/python -c 'import jax, sys; v = jax.__version__; print("jax", v); sys.exit(v != "$(JAX_COMPAT_VERSION)")'
	$(JAX_CACHE_RUN)
	$(call RUN_PYTEST,$(VENV_COMPAT)) -n 2 --dist worksteal -m "(not slow or compat) and not jax_independent" $(PYTEST_ARGS)

# A new JAX release (README, "Supported versions"): the suite's fast tier on the newest jax/jaxlib the
# registry serves, installed over pyproject's range (pip warns that it is outside; that is the point).
# The one expected failure names the untested version (tests/test_compat.py); every other one is work.
check-newest-jax:
	@test -n "$(PYTHON)" || { echo "error: python3.12 not found; set PYTHON=/path/to/python3.12"; exit 2; }
	test -x $(VENV_NEWEST)/bin/python || $(PYTHON) -m venv $(VENV_NEWEST)
	$(VENV_NEWEST)/bin/python -m pip install --quiet --upgrade pip
	$(VENV_NEWEST)/bin/python -m pip install --quiet -e '.[test]'
	$(VENV_NEWEST)/bin/python -m pip install --quiet --upgrade jax jaxlib
	@echo "check-newest-jax: $$(date -u '+%Y-%m-%d'): $$($(VENV_NEWEST)/bin/python -c 'import jax, jaxlib; print("jax", jax.__version__, "jaxlib", jaxlib.__version__)')"
	$(call RUN_PYTEST,$(VENV_NEWEST)) -n 2 -m "not slow" $(PYTEST_ARGS)

lint: $(VENV)/.lint-installed
	$(VENV)/bin/ruff check pytest_jaxstab tests benchmarks examples
	$(VENV)/bin/pyright

demo: venv
	$(VENV)/bin/python -m pytest examples -p no:cacheprovider -q \
	  --jaxstab-report --jaxstab-report=html:jaxstab-report.html --jaxstab-timing \
	  --jaxstab-compare=examples/.jaxstab/baseline.json
	@echo "HTML report: $(CURDIR)/jaxstab-report.html"

# Re-save the example project's committed baseline (after a deliberate change to rules, oracle or
# strategies); tests/test_examples_baseline.py fails while it is stale. Its unstable cases fail this
# run: that is their verdict, and they are saved as known instabilities all the same.
demo-baseline: venv
	$(VENV)/bin/python -m pytest examples -p no:cacheprovider -q \
	  --jaxstab-save-baseline=examples/.jaxstab/baseline.json --jaxstab-prune-baseline || test $$? -eq 1

clean:
	rm -rf $(VENV) $(VENV_COMPAT) $(VENV_NEWEST) jaxstab-report.html .pytest_cache .hypothesis

# Every cost figure of README's "Measured costs" in one run, one script after the other, each ratio
# printed against its goal, with the date and the machine's load before and after (issue 24). Run it
# on a quiet machine: the figures are ratios of interleaved runs, but a busy machine still moves them.
bench-costs: venv
	@echo "start: $$(date -u '+%Y-%m-%d %H:%M UTC'); load: $$(cut -d' ' -f1-3 /proc/loadavg); $$(nproc) cores"
	for s in bench_startup bench_rewrite bench_logsumexp_forms bench_scan bench_oracle bench_harness; do
	  echo "== benchmarks/$$s.py"; PYTHONPATH=. $(VENV)/bin/python benchmarks/$$s.py
	done
	@echo "end: $$(date -u '+%Y-%m-%d %H:%M UTC'); load: $$(cut -d' ' -f1-3 /proc/loadavg)"
