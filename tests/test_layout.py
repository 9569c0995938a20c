"""The layout the docs describe is the layout on disk: README's Layout table, docs/architecture.md."""

from __future__ import annotations

import functools
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
    # and nothing it names as part of the package is gone (sub-packages and their modules by path)
    listed = {n for n in named if n.endswith("/") or n.endswith(".py")}
    outside = {"pytest_jaxstab/", "tests/", "docs/", "ci/", "examples/", "benchmarks/"}
    nested = {f"{p.parent.relative_to(PACKAGE).as_posix()}/" for p in PACKAGE.rglob("__init__.py")}
    nested |= {p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.py")}
    assert listed - folders - modules - outside - nested == set()


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
    # the recipe runs pytest directly or through the Makefile's RUN_PYTEST (bytecode written)
    run_pytest = make.split("\nRUN_PYTEST = ", 1)[1].split("\n", 1)[0] if "\nRUN_PYTEST = " in make else ""
    assert "-m pytest" in test_recipe or ("RUN_PYTEST" in test_recipe and "-m pytest" in run_pytest)
    assert "tests/" not in test_recipe  # no path that narrows testpaths


def _imports_in_turn(modules: list[str]) -> list[set[str]]:
    """Which of pytest, hypothesis and jax are loaded after importing each of ``modules`` in turn, in
    one fresh interpreter. Importing only adds to ``sys.modules``: a module absent after the k-th import
    was imported by none of the first k, and one that appears first after the k-th was imported by it
    (one interpreter for all, where one each took 7 s of the fast tier)."""
    import subprocess
    import sys

    code = ("import importlib, sys\n"
            f"for m in {modules!r}:\n"
            "    importlib.import_module(m)\n"
            "    print(' '.join(n for n in ('pytest', 'hypothesis', 'jax') if n in sys.modules) or '-')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return [set(line.split()) - {"-"} for line in out.stdout.splitlines()]


def test_stages_know_only_the_stages_to_their_left():
    # docs/architecture.md, "Data flow": nothing left of the plugin imports pytest, and the oracle and
    # the rewrites do not import the fuzzer (Hypothesis). The stages that must not load Hypothesis are
    # imported first, so that a stage loading it later cannot hide one of theirs.
    stages = ["oracles", "rewrites", "strategies", "_check", "_diagnostics", "_report", "_baseline"]
    loaded = _imports_in_turn([f"pytest_jaxstab.{stage}" for stage in stages])
    assert len(loaded) == len(stages)
    for stage, modules in zip(stages, loaded):
        banned = {"pytest", "hypothesis"} if stage in ("oracles", "rewrites") else {"pytest"}
        assert modules & banned == set(), stage
    assert "jax" in loaded[0]  # the probe sees what an import loads


# --- The import graph (docs/architecture.md, "Stage order") ---------------------------------------------
#
# Every import of a package module by another counts as an arrow: at module level, inside a function
# (a lazy import is an arrow taken later), under TYPE_CHECKING, relative or absolute.

MAX_LINES = 600
MAX_ROOT_MODULES = 10


def _module_name(path: pathlib.Path) -> str:
    """``rewrites.engine._match``; a package's ``__init__`` keeps it: ``rewrites.__init__``."""
    return ".".join(path.relative_to(PACKAGE).with_suffix("").parts)


@functools.cache
def _import_graph() -> dict[str, set[str]]:
    """Read once a session: three tests walk it."""
    import ast

    files = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    packages = {name.rpartition(".")[0] for name in files if name.endswith("__init__")}

    def existing(dotted: str) -> str | None:
        """The module a dotted name (relative to the package) is, or the nearest one containing it."""
        while dotted:
            if dotted in files:
                return dotted
            if dotted in packages or dotted == "":
                return f"{dotted}.__init__"
            dotted = dotted.rpartition(".")[0]
        return "__init__"

    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        here = name.split(".")[:-1]  # the package this module is in
        arrows: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = here[:len(here) - (node.level - 1)] if node.level > 1 else here
                    parts = base + (node.module.split(".") if node.module else [])
                elif node.module and (node.module + ".").startswith("pytest_jaxstab."):
                    parts = node.module.split(".")[1:]
                else:
                    continue
                for alias in node.names:
                    sub = ".".join([*parts, alias.name])
                    target = sub if sub in files or sub in packages else ".".join(parts)
                    arrows.add(existing(target) or "__init__")
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if (alias.name + ".").startswith("pytest_jaxstab."):
                        arrows.add(existing(".".join(alias.name.split(".")[1:])) or "__init__")
        arrows.discard(name)
        graph[name] = arrows
    return graph


def _stage_order() -> list[tuple[str, str, list[str]]]:
    """docs/architecture.md's "Stage order" block, one ``tier  stage  members...`` per line.

    ``tier`` is ``N`` for a stage, ``N.M`` for a part of stage ``N`` (its sub-packages, in their own
    order); members are module paths in the package (``rewrites.engine``, ``_errors``,
    ``rewrites.__init__``), and a module belongs to the longest member that contains it.
    """
    text = ARCHITECTURE.read_text(encoding="utf-8")
    section = re.search(r"^## Stage order\n(.*?)(?=^## |\Z)", text, flags=re.S | re.M)
    assert section is not None, "docs/architecture.md has no Stage order section"
    block = re.search(r"```\n(# tier.*?)```", section.group(1), flags=re.S)
    assert block is not None, "the Stage order section has no fenced block"
    rows = []
    for line in block.group(1).splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            tier, stage, *members = line.split()
            rows.append((tier, stage, members))
    return rows


def _place(module: str, rows: list[tuple[str, str, list[str]]], parts: bool) -> tuple[int, str] | None:
    """The (tier, name) of ``module``'s stage (``parts=False``) or of its part of a stage."""
    best: tuple[int, tuple[int, str]] | None = None
    for tier, stage, members in rows:
        if ("." in tier) != parts:
            continue
        for member in members:
            inside = module == member or module.startswith(member + ".")
            if inside and (best is None or len(member) > best[0]):
                best = (len(member), (int(tier.rpartition(".")[2]), stage))
    return None if best is None else best[1]


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle of ``graph`` (its modules in order, the first repeated last), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt):], nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state:
            found = visit(start)
            if found:
                return found
    return None


def test_no_import_circle():
    cycle = _cycle(_import_graph())
    assert cycle is None, "import circle: " + " -> ".join(cycle or [])


def test_every_module_belongs_to_a_declared_stage():
    rows = _stage_order()
    graph = _import_graph()
    assert [m for m in sorted(graph) if _place(m, rows, parts=False) is None] == []
    # a stage cut into parts: every module of it is in one of its parts
    cut = {_place(m, rows, parts=False) for m in graph if _place(m, rows, parts=True)}
    assert [m for m in sorted(graph)
            if _place(m, rows, parts=False) in cut and not _place(m, rows, parts=True)] == []


def test_no_arrow_runs_against_the_stage_order():
    # An arrow goes to a module of the same stage or of a lower tier: never up, never sideways to a
    # peer of the same tier (rewrites and strategies know nothing of each other). Inside a stage cut
    # into parts, the same between its parts.
    rows = _stage_order()
    wrong = []
    for module, targets in sorted(_import_graph().items()):
        for target in sorted(targets):
            for parts in (False, True):
                here, there = _place(module, rows, parts), _place(target, rows, parts)
                if parts and _place(module, rows, False) != _place(target, rows, False):
                    continue  # parts are compared inside one stage only
                if here and there and here[1] != there[1] and there[0] >= here[0]:
                    wrong.append(f"{module} ({here[1]}) -> {target} ({there[1]})")
                    break
    assert wrong == []


def test_no_module_is_over_the_line_limit():
    long = {_module_name(p): n for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert long == {}


def test_the_package_root_holds_at_most_ten_modules():
    root = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(root) <= MAX_ROOT_MODULES, root
