"""The layout the docs describe is the layout on disk: README's Layout table, docs/architecture.md."""

from __future__ import annotations

import pathlib
import re

import pytest_jaxstab

PACKAGE = pathlib.Path(pytest_jaxstab.__file__).resolve().parent
ROOT = PACKAGE.parent
ARCHITECTURE = ROOT / "docs" / "architecture.md"


def _layout_section() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    match = re.search(r"^## Layout\n(.*?)(?=^## |\Z)", text, flags=re.S | re.M)
    assert match is not None, "README.md has no Layout section"
    return match.group(1)


def test_readme_layout_names_every_stage_folder_and_root_module():
    named = set(re.findall(r"`([\w./]+)`", _layout_section()))
    folders = {f"{p.name}/" for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    modules = {p.name for p in PACKAGE.glob("*.py") if not p.name.startswith("__")}
    assert folders - named == set(), "folders missing from README's Layout"
    assert modules - named == set(), "modules missing from README's Layout"
    # and nothing it names as part of the package is gone
    listed = {n for n in named if n.endswith("/") or n.endswith(".py")}
    outside = {"pytest_jaxstab/", "tests/", "docs/", "ci/", "examples/", "benchmarks/"}
    assert listed - folders - modules - outside == set()


def _headings() -> set[str]:
    return set(re.findall(r"^## (.+)$", ARCHITECTURE.read_text(encoding="utf-8"), flags=re.M))


def _citations() -> list[tuple[str, str]]:
    cited = []
    for folder in ("pytest_jaxstab", "tests", "benchmarks"):
        for path in (ROOT / folder).rglob("*.py"):
            text = re.sub(r"\s+", " ", path.read_text(encoding="utf-8"))
            cited += [(str(path.relative_to(ROOT)), m) for m in
                      re.findall(r'docs/architecture\.md,? \(?"([^"]+)"', text)]
    return cited


def test_cited_sections_of_the_architecture_page_exist():
    cited = _citations()
    assert len(cited) >= 10  # the code does cite it (the pattern finds the citations)
    headings = _headings()
    assert [(where, section) for where, section in cited if section not in headings] == []


def test_the_architecture_page_covers_the_contracts():
    headings = _headings()
    for section in ("Data flow", "Stages and their contracts", "The error metric", "The oracle", "The gate",
                    "Errors", "Compatibility modules", "Where new code goes"):
        assert section in headings
    text = ARCHITECTURE.read_text(encoding="utf-8")
    for folder in (f"{p.name}/" for p in PACKAGE.iterdir() if (p / "__init__.py").exists()):
        assert f"`{folder}`" in text, f"{folder} has no contract in docs/architecture.md"


def test_no_code_cites_the_retired_design_page():
    offenders = [str(p.relative_to(ROOT)) for folder in ("pytest_jaxstab", "tests", "benchmarks")
                 for p in (ROOT / folder).rglob("*.py")
                 if "DESIGN" + ".md" in p.read_text(encoding="utf-8")]
    assert offenders == []


def test_the_suite_runs_the_packages_doctests():
    # `pytest` / `make test` with no path collects tests/ and the package's >>> examples.
    import tomllib

    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    ini = pyproject["tool"]["pytest"]["ini_options"]
    assert "--doctest-modules" in ini["addopts"]
    assert set(ini["testpaths"]) == {"tests", "pytest_jaxstab"}
    make = (ROOT / "Makefile").read_text(encoding="utf-8")
    test_recipe = make.split("\ntest: ", 1)[1].split("\n\n", 1)[0]
    assert "-m pytest" in test_recipe and "tests/" not in test_recipe  # no path that narrows testpaths


def _imports(module: str) -> set[str]:
    import subprocess
    import sys

    code = (f"import sys, {module}; "
            "print(' '.join(m for m in ('pytest', 'hypothesis', 'jax') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(out.stdout.split())


def test_stages_know_only_the_stages_to_their_left():
    # docs/architecture.md, "Data flow": nothing left of the plugin imports pytest, and the oracle and
    # the rewrites do not import the fuzzer (Hypothesis).
    for stage in ("oracles", "rewrites"):
        assert _imports(f"pytest_jaxstab.{stage}") & {"pytest", "hypothesis"} == set(), stage
    for stage in ("strategies", "_check", "_diagnostics", "_report", "_baseline"):
        assert "pytest" not in _imports(f"pytest_jaxstab.{stage}"), stage
