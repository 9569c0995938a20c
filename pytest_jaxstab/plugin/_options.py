"""Command-line options and ini keys of the plugin (group "jaxstab"), resolved into :class:`Options`.

Every ``--jaxstab-*`` option has an ini key of the same name with underscores (``jaxstab_examples``);
the command line wins over the ini file. The per-case options (``--jaxstab-examples``,
``--jaxstab-seed``, ``--jaxstab-judge``, ...) are generated from ``jst.settings``' declaration
(``pytest_jaxstab._settings.OPTIONS``) and resolved once into the session's settings: declared
defaults < ini keys < the profile (``--jaxstab-profile`` / ``jaxstab_profile``) < the command line; a
marker or a call overrides them per case. The options written out here are the run's own (reports,
baselines). Paths given on the command line are relative to the directory
pytest was invoked from, ini paths to the ini file's directory, and the default baseline to the rootdir.
This module imports neither JAX nor Hypothesis.
"""

from __future__ import annotations

import dataclasses
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
    "PROFILE_OPTION",
    "SEARCH_OPTION",
    "TIMING_OPTION",
    "Options",
    "ReportTarget",
    "add_options",
    "add_scan_options",
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
PROFILE_OPTION = "--jaxstab-profile"
# ``--jaxstab-scan`` (plugin/_scan.py), declared here so that start-up does not import the scan
SCAN_OPTION = "--jaxstab-scan"
DIMS_OPTION = "--jaxstab-scan-dims"
DOMAIN_INI = "jaxstab_scan_domain"
#: Size of a symbolic dimension no setting names: small (the oracle's cost grows with it), and above 2
#: so reductions mix more than a pair of values.
DEFAULT_DIM_SIZE = 4
# The verdict's lenses (as pytest_jaxstab._check._verdict.JUDGES; spelt here so that the plugin's
# start-up does not import the check machinery).
JUDGES = ("stability", "accuracy")

DEFAULT_BASELINE = ".jaxstab/baseline.json"
# argparse's value for a bare `--jaxstab-compare` / `--jaxstab-save-baseline` (no PATH given).
_DEFAULT_PATH = "\0default"

#: The run's own ini keys; the per-case ones come from the settings' declaration (``_settings_ini``).
_INI = {
    "jaxstab_report": "report formats, one per line or space-separated: term, json:PATH, html:PATH",
    "jaxstab_save_baseline": "save the baseline on every run: true, or a PATH",
    "jaxstab_compare": "compare with the baseline on every run: true, or a PATH",
    "jaxstab_compare_fail": "regression margins, e.g. bits:2 or bits:2,overflows:0",
    "jaxstab_baseline": f"the baseline file used when no PATH is given (default {DEFAULT_BASELINE})",
    "jaxstab_profile": "the jst.settings profile of every case (registered with "
                       "jst.settings.register_profile in conftest.py); --jaxstab-profile wins",
}


def _shown_default(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return str(value).lower()
    return f"{value:g}" if isinstance(value, float) else str(value)


def add_settings_options(group: Any, parser: pytest.Parser) -> None:
    """One ``--jaxstab-X`` option and one ``jaxstab_X`` ini key per declared option that takes them."""
    from .._settings import options

    for opt in options("ini"):
        key, flag = opt.ini_key, opt.flag
        assert key is not None and flag is not None
        help_ = f"{opt.doc} (default {_shown_default(opt.default)}); a marker's or a call's {opt.name}= wins."
        if opt.cli is not None:
            group.addoption(flag, action="store", default=None, dest=key, help=help_, **dict(opt.cli))
        elif isinstance(opt.default, bool):
            group.addoption(flag, action="store_true", default=None, dest=key, help=help_)
            group.addoption("--no-" + flag[2:], action="store_false", dest=key,
                            help=f"the opposite of {flag} (overrides the {key} ini key).")
        else:
            group.addoption(flag, action="store", default=None, metavar=opt.metavar, dest=key, help=help_)
        parser.addini(key, f"{opt.doc} (default {_shown_default(opt.default)})", type="string", default="")


def add_options(parser: pytest.Parser) -> None:
    """Registers the "jaxstab" option group and the ini keys."""
    group = parser.getgroup("jaxstab", "numerical stability of JAX code (pytest-jaxstab)")
    group.addoption(REPORT_OPTION, action="append", nargs="?", const="term", default=None,
                    metavar="TYPE", dest="jaxstab_report",
                    help="report type: term (default when the option has no value), json:PATH, html:PATH. "
                         "Repeatable, like --cov-report.")
    group.addoption(SAVE_BASELINE_OPTION, action="store", nargs="?", const=_DEFAULT_PATH, default=None,
                    metavar="PATH", dest="jaxstab_save_baseline",
                    help=f"save the cases' figures and worst inputs (default {DEFAULT_BASELINE} under "
                         "the rootdir): the cases that ran are written, every other entry is kept. Draws "
                         "use a fixed seed. Use --jaxstab-save-baseline=PATH.")
    group.addoption(PRUNE_OPTION, action="store_true", default=False, dest="jaxstab_prune_baseline",
                    help="with --jaxstab-save-baseline: also remove the stale entries (tests or checks that "
                         "are gone). Only in a run of the whole suite (no node ids, -k, -m, --lf, "
                         "--collect-only); deliberately not an ini key.")
    group.addoption(COMPARE_OPTION, action="store", nargs="?", const=_DEFAULT_PATH, default=None,
                    metavar="PATH", dest="jaxstab_compare",
                    help="compare with a saved baseline: re-check its worst inputs first, fuzz with a fixed "
                         "seed, fail only the cases that got worse. Use --jaxstab-compare=PATH.")
    group.addoption(COMPARE_FAIL_OPTION, action="store", default=None, metavar="EXPR",
                    dest="jaxstab_compare_fail",
                    help="how much worse counts as a regression: bits:N (max error up by more than N bits) "
                         "and/or overflows:N, comma-separated. Default: any growth.")
    group.addoption(PROFILE_OPTION, action="store", default=None, metavar="NAME", dest="jaxstab_profile",
                    help="the jst.settings profile of every case, registered with "
                         "jst.settings.register_profile(NAME, ...) in conftest.py: its values override "
                         "the ini keys; the command line's --jaxstab-* options and a marker's arguments "
                         "override it.")
    add_settings_options(group, parser)
    for name, help_ in _INI.items():
        parser.addini(name, help_, type="string", default="")
    add_scan_options(parser)


def add_scan_options(parser: pytest.Parser) -> None:
    """The scan's options and ini keys, in the "jaxstab" group."""
    group = parser.getgroup("jaxstab")
    group.addoption(SCAN_OPTION, action="append", default=None, metavar="PACKAGE[.module]",
                    dest="jaxstab_scan",
                    help="check every public function of PACKAGE (or one module) whose array arguments "
                         "carry jaxtyping float annotations, each as a test item; repeatable.")
    group.addoption(DIMS_OPTION, action="store", default=None, metavar="NAME=SIZE,...",
                    dest="jaxstab_scan_dims",
                    help=f"sizes of symbolic dimensions for --jaxstab-scan (default {DEFAULT_DIM_SIZE}).")
    parser.addini("jaxstab_scan", "modules or packages to scan (see --jaxstab-scan)", type="args", default=[])
    parser.addini("jaxstab_scan_dims", "NAME=SIZE pairs for --jaxstab-scan's symbolic dimensions",
                  type="args", default=[])
    parser.addini("jaxstab_scan_config", "per function, one a line: module.function = {'domain': (0, 10), "
                  "'static': {...}, 'dims': {...}, 'dtype': ..., 'skip': reason}", type="linelist",
                  default=[])
    parser.addini(DOMAIN_INI, "LO HI: the domain of every scanned function that declares none "
                  "(e.g. -1e4 1e4); @jst.domain and jaxstab_scan_config win", type="string", default="")


@dataclasses.dataclass(frozen=True)
class ReportTarget:
    """One ``--jaxstab-report``: ``kind`` is "term", "json" or "html"; ``path`` for files."""

    kind: str
    path: Path | None = None


@dataclasses.dataclass(frozen=True)
class Options:
    """The plugin's settings for one session: the run's own options and the cases' ``jst.settings``."""

    reports: tuple[ReportTarget, ...] = ()
    save_baseline: Path | None = None
    compare: Path | None = None
    compare_fail: str | None = None
    prune: bool = False
    #: The session's ``jst.settings`` (declared defaults < ini < profile < command line); None: the
    #: declared defaults.
    settings: Any = None
    profile: str | None = None

    def _value(self, name: str) -> Any:
        if self.settings is not None:
            return getattr(self.settings, name)
        from .._settings import option

        opt = option(name)
        return None if opt is None else opt.default

    @property
    def examples(self) -> int | None:
        """Inputs per case when a layer set it (recorded in the JSON report), else None."""
        return None if self.settings is None else self.settings.explicit().get("max_examples")

    @property
    def seed(self) -> int | None:
        return self._value("seed")

    @property
    def timing(self) -> bool:
        return bool(self._value("timing"))

    @property
    def search(self) -> bool:
        return bool(self._value("search"))

    @property
    def tune_precision(self) -> bool:
        return bool(self._value("tune_precision"))

    @property
    def judge(self) -> str:
        return str(self._value("judge"))

    @property
    def derandomize(self) -> bool:
        """Saving and comparing draw one fixed sequence per case, so figures move only with the code."""
        return self.compare is not None or self.save_baseline is not None


def _ini(config: pytest.Config, name: str) -> str:
    value = config.getini(name)
    return str(value).strip() if value is not None else ""


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


def _parsed(opt: Any, raw: Any, source: str) -> Any:
    from .._settings import Invalid

    if isinstance(raw, bool):  # a --jaxstab-X / --no-jaxstab-X flag
        return raw
    try:
        return opt.parse(str(raw).strip())
    except Invalid as exc:
        raise pytest.UsageError(f"{source}={raw!r}: expected {exc}") from None


def resolve_settings(config: pytest.Config) -> tuple[Any, str | None]:
    """The session's ``jst.settings`` and the profile's name: declared defaults < ini keys < the
    profile < the command line, each value validated (a ``pytest.UsageError`` naming the option)."""
    from .._errors import SettingsError
    from .._settings import options, root, settings

    ini: dict[str, Any] = {}
    cli: dict[str, Any] = {}
    for opt in options("ini"):
        key, flag = str(opt.ini_key), str(opt.flag)
        raw = _ini(config, key)
        if raw:
            ini[opt.name] = _parsed(opt, raw, key)
        value = config.getoption(key, None)
        if value is not None:
            cli[opt.name] = _parsed(opt, value, flag)
    name = config.getoption("jaxstab_profile", None) or _ini(config, "jaxstab_profile") or None
    try:
        profile = settings.get_profile(name) if name is not None else settings.default
        chosen = settings(settings(settings(root(), **ini), **profile.explicit()), **cli)
    except SettingsError as exc:
        source = PROFILE_OPTION if config.getoption("jaxstab_profile", None) else "jaxstab_profile"
        raise pytest.UsageError(f"{source}: {exc}" if name is not None else str(exc)) from None
    return chosen, name


def resolve_options(config: pytest.Config) -> Options:
    """Reads and validates the options; a bad value is a ``pytest.UsageError`` naming the option."""
    chosen, profile = resolve_settings(config)
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
    return Options(reports=reports, save_baseline=save, compare=compare, compare_fail=compare_fail,
                   prune=prune, settings=chosen, profile=profile)


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


def describe(options: Options) -> str | None:
    """A header line for ``pytest -v`` (None when every option is at its default)."""
    parts: list[str] = []
    if options.profile is not None:
        parts.append(f"profile={options.profile}")
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
    if options.tune_precision:
        parts.append("tune-precision")
    return f"jaxstab: {', '.join(parts)}" if parts else None
