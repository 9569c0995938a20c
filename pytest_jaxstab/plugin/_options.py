"""Command-line options and ini keys of the plugin (group "jaxstab"), resolved into :class:`Options`.

Every ``--jaxstab-*`` option has an ini key of the same name with underscores (``jaxstab_examples``);
the command line wins over the ini file. Paths given on the command line are relative to the directory
pytest was invoked from, ini paths to the ini file's directory, and the default baseline to the rootdir.
This module imports neither JAX nor Hypothesis.
"""

from __future__ import annotations

import dataclasses
import math
import os
from pathlib import Path
from typing import Any

import pytest

__all__ = [
    "COMPARE_FAIL_OPTION",
    "COMPARE_OPTION",
    "DEFAULT_BASELINE",
    "EXAMPLES_OPTION",
    "NO_TIMING_OPTION",
    "ORACLE_BUDGET_OPTION",
    "PRUNE_OPTION",
    "REPORT_OPTION",
    "SAVE_BASELINE_OPTION",
    "SEED_OPTION",
    "SEARCH_OPTION",
    "TIMING_OPTION",
    "Options",
    "ReportTarget",
    "add_options",
    "resolve_options",
]

REPORT_OPTION = "--jaxstab-report"
EXAMPLES_OPTION = "--jaxstab-examples"
SEED_OPTION = "--jaxstab-seed"
SAVE_BASELINE_OPTION = "--jaxstab-save-baseline"
COMPARE_OPTION = "--jaxstab-compare"
COMPARE_FAIL_OPTION = "--jaxstab-compare-fail"
TIMING_OPTION = "--jaxstab-timing"
PRUNE_OPTION = "--jaxstab-prune-baseline"
ORACLE_BUDGET_OPTION = "--jaxstab-oracle-budget"
NO_TIMING_OPTION = "--no-jaxstab-timing"
SEARCH_OPTION = "--jaxstab-search"
JUDGE_OPTION = "--jaxstab-judge"
# The verdict's lenses (as pytest_jaxstab._check._verdict.JUDGES; spelt here so that the plugin's
# start-up does not import the check machinery).
JUDGES = ("stability", "accuracy")

DEFAULT_BASELINE = ".jaxstab/baseline.json"
# argparse's value for a bare `--jaxstab-compare` / `--jaxstab-save-baseline` (no PATH given).
_DEFAULT_PATH = "\0default"

_INI = {
    "jaxstab_report": "report formats, one per line or space-separated: term, json:PATH, html:PATH",
    "jaxstab_examples": "inputs drawn per case (default: the active Hypothesis profile's max_examples)",
    "jaxstab_seed": "fixed seed for the draws (reproducible runs)",
    "jaxstab_save_baseline": "save the baseline on every run: true, or a PATH",
    "jaxstab_compare": "compare with the baseline on every run: true, or a PATH",
    "jaxstab_compare_fail": "regression margins, e.g. bits:2 or bits:2,overflows:0",
    "jaxstab_timing": "time both variants of every case on every JAX backend (true/false)",
    "jaxstab_search": "propose jst.improve's program in the failure of every case the catalogue does not "
                      "fix (true/false; default true)",
    "jaxstab_oracle_budget": "largest estimated oracle cost of one case (elements x examples x equations); "
                             "default 5e7, none: no limit",
    "jaxstab_judge": "the verdict's lens: stability (default: error beyond the problem's conditioning) or "
                     "accuracy (forward error); a marker's judge= wins",
    "jaxstab_baseline": f"the baseline file used when no PATH is given (default {DEFAULT_BASELINE})",
}


def add_options(parser: pytest.Parser) -> None:
    """Registers the "jaxstab" option group and the ini keys."""
    group = parser.getgroup("jaxstab", "numerical stability of JAX code (pytest-jaxstab)")
    group.addoption(REPORT_OPTION, action="append", nargs="?", const="term", default=None,
                    metavar="TYPE", dest="jaxstab_report",
                    help="report type: term (default when the option has no value), json:PATH, html:PATH. "
                         "Repeatable, like --cov-report.")
    group.addoption(EXAMPLES_OPTION, action="store", default=None, metavar="N", dest="jaxstab_examples",
                    help="inputs drawn per case (default: the Hypothesis profile's max_examples); a "
                         "marker's max_examples= still wins.")
    group.addoption(SEED_OPTION, action="store", default=None, metavar="N", dest="jaxstab_seed",
                    help="fixed seed: reproducible draws, no example database.")
    group.addoption(SAVE_BASELINE_OPTION, action="store", nargs="?", const=_DEFAULT_PATH, default=None,
                    metavar="PATH", dest="jaxstab_save_baseline",
                    help=f"save the cases' figures and worst inputs (default {DEFAULT_BASELINE} under "
                         "the rootdir): the cases that ran are written, every other entry is kept. Draws "
                         "use a fixed seed. Use --jaxstab-save-baseline=PATH.")
    group.addoption(PRUNE_OPTION, action="store_true", default=False, dest="jaxstab_prune_baseline",
                    help="with --jaxstab-save-baseline: also remove the stale entries (tests or checks that "
                         "are gone). Only in a run of the whole suite (no node ids, -k, -m, --lf, "
                         "--collect-only); deliberately not an ini key.")
    group.addoption(ORACLE_BUDGET_OPTION, action="store", default=None, metavar="N",
                    dest="jaxstab_oracle_budget",
                    help="largest estimated oracle cost of one case, in scalar operations (elements x "
                         "examples x equations; default 5e7): above it a case fails at once with the "
                         "figure. 'none' lifts the limit; a marker's oracle_budget= wins.")
    group.addoption(COMPARE_OPTION, action="store", nargs="?", const=_DEFAULT_PATH, default=None,
                    metavar="PATH", dest="jaxstab_compare",
                    help="compare with a saved baseline: re-check its worst inputs first, fuzz with a fixed "
                         "seed, fail only the cases that got worse. Use --jaxstab-compare=PATH.")
    group.addoption(COMPARE_FAIL_OPTION, action="store", default=None, metavar="EXPR",
                    dest="jaxstab_compare_fail",
                    help="how much worse counts as a regression: bits:N (max error up by more than N bits) "
                         "and/or overflows:N, comma-separated. Default: any growth.")
    group.addoption(TIMING_OPTION, action="store_true", default=None, dest="jaxstab_timing",
                    help="time both jitted variants of each case on every backend present.")
    group.addoption(NO_TIMING_OPTION, action="store_false", dest="jaxstab_timing",
                    help="do not time (overrides the jaxstab_timing ini key).")
    group.addoption(SEARCH_OPTION, action="store", nargs="?", const="on", default=None, choices=("on", "off"),
                    dest="jaxstab_search",
                    help="on (the default): for every case (marked test or jaxstab.check) that fails and "
                         "that the catalogue does not fix, search for a more accurate program (jst.improve, "
                         "time-limited per case) and show it in the failure message; off: no search. A "
                         "marker's search=False/True overrides this for its test.")
    group.addoption(JUDGE_OPTION, action="store", default=None, choices=JUDGES, dest="jaxstab_judge",
                    help="the verdict's lens: stability (default; an input fails when its error exceeds what "
                         "the problem's conditioning explains by more than the tolerance) or accuracy (the "
                         "forward error, as Herbie). A marker's judge= wins.")
    for name, help_ in _INI.items():
        parser.addini(name, help_, type="string", default="")


@dataclasses.dataclass(frozen=True)
class ReportTarget:
    """One ``--jaxstab-report``: ``kind`` is "term", "json" or "html"; ``path`` for files."""

    kind: str
    path: Path | None = None


@dataclasses.dataclass(frozen=True)
class Options:
    """The plugin's settings for one session."""

    reports: tuple[ReportTarget, ...] = ()
    examples: int | None = None
    seed: int | None = None
    save_baseline: Path | None = None
    compare: Path | None = None
    compare_fail: str | None = None
    timing: bool = False
    prune: bool = False
    search: bool = True
    oracle_budget: float | None = None  # None: jst.check's default; math.inf: no limit
    judge: str = "stability"

    @property
    def derandomize(self) -> bool:
        """Saving and comparing draw one fixed sequence per case, so figures move only with the code."""
        return self.compare is not None or self.save_baseline is not None


def _ini(config: pytest.Config, name: str) -> str:
    value = config.getini(name)
    return str(value).strip() if value is not None else ""


def _int(value: str, source: str, *, minimum: int) -> int:
    try:
        number = int(value)
    except ValueError:
        raise pytest.UsageError(f"{source}={value!r}: expected an integer") from None
    if number < minimum:
        raise pytest.UsageError(f"{source}={value!r}: expected an integer >= {minimum}")
    return number


def _truthy(value: str) -> bool | None:
    low = value.lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("", "0", "false", "no", "off"):
        return False
    return None


def _looks_like_test_path(value: str) -> bool:
    """A node id, a Python file or an existing directory: what a bare option may have swallowed."""
    return "::" in value or value.endswith(".py") or Path(value).is_dir()


def _path_option(config: pytest.Config, dest: str, ini: str, option: str) -> Path | None:
    """A baseline path from the command line (``_DEFAULT_PATH`` when bare) or the ini key, or None."""
    default = _default_baseline(config)
    value = config.getoption(dest)
    if value == _DEFAULT_PATH:
        return default
    if value is not None:
        if _looks_like_test_path(str(value)):
            # `--jaxstab-save-baseline test_a.py::test_x`: argparse gave the test path to the option.
            raise pytest.UsageError(
                f"{option} {value}: {value!r} is a test path, not a baseline file (a bare {option} takes "
                f"the next argument as its PATH). Write {option}=PATH for a file, or put the test paths "
                f"before {option}.")
        return Path(config.invocation_params.dir, value)
    raw = _ini(config, ini)
    flag = _truthy(raw)
    if flag is not None:
        return default if flag else None
    return _ini_base(config) / raw


def _ini_base(config: pytest.Config) -> Path:
    return Path(config.inipath).parent if config.inipath is not None else Path(config.rootpath)


def _default_baseline(config: pytest.Config) -> Path:
    raw = _ini(config, "jaxstab_baseline")
    if raw:
        return _ini_base(config) / raw
    return Path(config.rootpath) / DEFAULT_BASELINE


def _reports(config: pytest.Config) -> tuple[ReportTarget, ...]:
    raw = config.getoption("jaxstab_report")
    source = REPORT_OPTION
    if raw is None:
        raw = _ini(config, "jaxstab_report").split()
        source = "jaxstab_report"
    base = Path(config.invocation_params.dir) if source == REPORT_OPTION else _ini_base(config)
    targets: list[ReportTarget] = []
    for spec in raw:
        kind, sep, path = str(spec).partition(":")
        kind = kind.strip().lower()
        if kind == "term" and not path:
            target = ReportTarget("term")
        elif kind in ("json", "html") and sep and path.strip():
            target = ReportTarget(kind, base / path.strip())
        elif kind in ("json", "html"):
            raise pytest.UsageError(f"{source}={spec!r}: {kind} needs a file, e.g. {kind}:jaxstab.{kind}")
        elif source == REPORT_OPTION and _looks_like_test_path(str(spec)):
            raise pytest.UsageError(
                f"{REPORT_OPTION} {spec}: {str(spec)!r} is a test path, not a report type (a bare "
                f"{REPORT_OPTION} takes the next argument as its TYPE). Write {REPORT_OPTION}=term, or put "
                f"the test paths before {REPORT_OPTION}.")
        else:
            raise pytest.UsageError(f"{source}={spec!r}: expected term, json:PATH or html:PATH")
        if target not in targets:
            targets.append(target)
    return tuple(targets)


def _int_setting(config: pytest.Config, name: str, option: str, *, minimum: int) -> int | None:
    """An integer from the command line (``option``), else from the ini key ``name``, else None."""
    raw = config.getoption(name)
    if raw is not None:
        return _int(raw, option, minimum=minimum)
    if _ini(config, name):
        return _int(_ini(config, name), name, minimum=minimum)
    return None


def _bool_setting(config: pytest.Config, name: str) -> bool:
    """A true/false setting: the command line (``dest`` ``name``) wins, else the ini key ``name``."""
    value = config.getoption(name)
    if value is not None:
        return bool(value)
    flag = _truthy(_ini(config, name))
    if flag is None:
        raise pytest.UsageError(f"{name}={_ini(config, name)!r}: expected true or false")
    return flag


def _search_setting(config: pytest.Config) -> bool:
    """``--jaxstab-search[=on|off]`` wins, else the ini key ``jaxstab_search``; on when neither is given."""
    value = config.getoption("jaxstab_search")
    if value is not None:
        return value == "on"
    if not _ini(config, "jaxstab_search"):
        return True
    return _bool_setting(config, "jaxstab_search")


def resolve_options(config: pytest.Config) -> Options:
    """Reads and validates the options; a bad value is a ``pytest.UsageError`` naming the option."""
    examples = _int_setting(config, "jaxstab_examples", EXAMPLES_OPTION, minimum=1)
    seed = _int_setting(config, "jaxstab_seed", SEED_OPTION, minimum=0)
    timing = _bool_setting(config, "jaxstab_timing")
    search = _search_setting(config)
    compare_fail = config.getoption("jaxstab_compare_fail") or _ini(config, "jaxstab_compare_fail") or None
    if compare_fail is not None:
        from .._baseline import parse_compare_fail

        try:
            parse_compare_fail(compare_fail)
        except ValueError as exc:
            raise pytest.UsageError(str(exc)) from None
    reports = _reports(config)
    save = _path_option(config, "jaxstab_save_baseline", "jaxstab_save_baseline", SAVE_BASELINE_OPTION)
    compare = _path_option(config, "jaxstab_compare", "jaxstab_compare", COMPARE_OPTION)
    # Found now, not after every test ran: a path that cannot be written is a usage error.
    if save is not None:
        _check_writable(save, SAVE_BASELINE_OPTION)
    for target in reports:
        if target.path is not None:
            _check_writable(target.path, f"{REPORT_OPTION}={target.kind}")
    prune = bool(config.getoption("jaxstab_prune_baseline"))
    if prune:
        _check_prune(config, save)
    return Options(
        reports=reports,
        examples=examples,
        seed=seed,
        save_baseline=save,
        compare=compare,
        compare_fail=compare_fail,
        timing=bool(timing),
        prune=prune,
        search=bool(search),
        oracle_budget=_oracle_budget(config),
        judge=_judge(config),
    )


def _check_writable(path: Path, source: str) -> None:
    """Raises a usage error when ``path`` cannot be written (its directory is created when missing)."""
    if path.is_dir():
        raise pytest.UsageError(f"{source}: {path} is a directory; give a file, e.g. {path / 'jaxstab.json'}")
    ancestor = path.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise pytest.UsageError(f"{source}: cannot write {path}: {ancestor} is not a directory")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise pytest.UsageError(f"{source}: cannot write {path}: no permission to write in {ancestor}")


def _check_prune(config: pytest.Config, save: Path | None) -> None:
    """Pruning removes entries: only with a save, and only in a run that selects the whole suite."""
    if save is None:
        raise pytest.UsageError(f"{PRUNE_OPTION} goes with --jaxstab-save-baseline (it removes the stale "
                                "entries of the baseline being saved)")
    subset = [arg for arg in config.args if "::" in arg]
    reasons = []
    if subset:
        reasons.append(f"test ids were selected ({', '.join(subset)})")
    if config.getoption("keyword", None):
        reasons.append("-k selects a subset")
    if config.getoption("markexpr", None):
        reasons.append("-m selects a subset")
    for dest, flag in (("lf", "--lf"), ("stepwise", "--sw"), ("collectonly", "--collect-only")):
        if config.getoption(dest, None):
            reasons.append(f"{flag} runs a subset")
    if reasons:
        raise pytest.UsageError(
            f"{PRUNE_OPTION} needs a run of the whole suite, and here {'; '.join(reasons)}: a stale entry "
            "could not be told from one whose test was not selected. Run without the selection to prune, or "
            "drop the option to save without pruning.")


def _judge(config: pytest.Config) -> str:
    raw = config.getoption("jaxstab_judge")
    if raw is None:
        raw = _ini(config, "jaxstab_judge")
        if raw is not None and str(raw).strip() and str(raw).strip() not in JUDGES:
            raise pytest.UsageError(f"jaxstab_judge = {raw!r}: expected stability or accuracy")
    return str(raw).strip() if raw is not None and str(raw).strip() else "stability"


def _oracle_budget(config: pytest.Config) -> float | None:
    raw = config.getoption("jaxstab_oracle_budget")
    source = ORACLE_BUDGET_OPTION
    if raw is None:
        raw, source = _ini(config, "jaxstab_oracle_budget"), "jaxstab_oracle_budget"
    if raw is None or str(raw).strip() == "":
        return None
    text = str(raw).strip().lower()
    if text == "none":
        return math.inf
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0 or value == math.inf:
        raise pytest.UsageError(f"{source}={raw!r}: expected a number > 0 (e.g. 1e8), or none for no limit")
    return value


def describe(options: Options) -> str | None:
    """A header line for ``pytest -v`` (None when every option is at its default)."""
    parts: list[str] = []
    if options.examples is not None:
        parts.append(f"examples={options.examples}")
    if options.seed is not None:
        parts.append(f"seed={options.seed}")
    if options.compare is not None:
        parts.append(f"compare={options.compare}")
    if options.save_baseline is not None:
        parts.append(f"save-baseline={options.save_baseline}")
    if options.prune:
        parts.append("prune-baseline")
    if options.timing:
        parts.append("timing")
    if not options.search:
        parts.append("search=off")
    return f"jaxstab: {', '.join(parts)}" if parts else None


def marker_kwargs_doc() -> dict[str, Any]:
    """The marker's keyword arguments and their meaning (for ``pytest --markers`` and validation)."""
    return {
        "dtype": "float16, bfloat16, float32 or float64 (required)",
        "shapes": "{name: shape} of the drawn array parameters, or a list of shapes for the first ones",
        "domain": "(lo, hi), a Domain, a predicate, or one per argument",
        "max_examples": "inputs drawn",
        "tolerance_bits": "max error allowed, in bits (default 8)",
        "rules": "rewrite rules or names (default: the stability catalogue)",
        "apply": "judge the rewritten function (default False)",
        "timing": "time both variants on every backend",
        "atol": "absolute differences below this count 0 bits",
        "oracle_budget": "largest estimated oracle cost (elements x examples x equations); None: no limit",
        "judge": "the verdict's lens: 'stability' (default) or 'accuracy' (default --jaxstab-judge)",
    }
