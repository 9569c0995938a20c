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


#: The runs the fast tier takes: in-process scenarios cost 3-8 s each; ``n0``, ``n2`` and ``no-xdist``
#: run in the slow tier, and ``test_plugin_baseline``'s xdist test keeps one xdist run in the fast tier.
FAST_PLUGIN_RUNS = ("serial",)


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



#: Tests the fast tier leaves to the slow one (issue 48: ``make test`` within 5 minutes on 2 cores), by
#: node id, each with the fast-tier test that keeps its contract there. CI's slow tier runs them all.
SLOW_ONLY: dict[str, str] = {
    "tests/test_engine_first_look.py::test_first_look_refuses_no_match_of_any_alternative[STABILITY]":
        "test_engine_first_look's per-rule first-look tests",
    "tests/test_startup.py::test_a_plain_run_loads_only_the_light_modules[collect-only-jax-free]":
        "the same runs without --collect-only",
    "tests/test_startup.py::test_a_plain_run_loads_only_the_light_modules[collect-only-jax-suite]":
        "the same runs without --collect-only",
    "tests/test_oracle_special_functions.py::test_matches_mpmath_correctly_rounded[betainc-float64]":
        "betainc-float32",
    "tests/test_search_never_worse.py::test_the_search_and_the_recheck_agree_on_the_original":
        "test_a_candidate_winning_the_search_samples_but_losing_fresh_ones_is_not_offered",
    "tests/test_search_never_worse.py::test_a_stratum_drawn_by_value_is_judged_by_its_max_only":
        "test_a_candidate_winning_the_search_samples_but_losing_fresh_ones_is_not_offered",
    "tests/test_oracle_random.py::test_check_finds_the_instability_inside_a_dropout_model":
        "test_a_dropout_test_runs_through_the_plugin_with_the_search_on",
    "tests/test_rewrites_gather.py::test_vmap_on_either_side_of_stabilize[f64]": "the f32 case",
    "tests/test_rewrites_gather.py::test_batched_losses_value_and_gradient[optax_ce-f32]": "the other losses",
    "tests/test_rewrites_gather.py::test_large_logits_that_nearly_tie[optax_ce-f64]": "the other losses",
    "tests/test_oracle_ieee.py::test_gammaincinv_is_the_inverse": "test_new_routines_are_their_functions",
    "tests/test_search_pareto.py::test_both_offers_are_accurate_on_an_independent_sample_and_timed[x-minus-sin]":
        "the sqrt-difference case",
    "tests/test_oracle_windows.py::test_gamma_samples_are_evaluated_exactly": "the other samplers' tests",
    "tests/test_tune_precision_draws.py::test_attention_logits_are_kept_high_and_the_plan_holds_on_ordinary_data"
    "[float16]": "the bfloat16 case",
    "tests/test_complex_order.py::test_grad_check_on_complex_inputs[complex64]": "the complex128 case",
    "tests/test_check_scale.py::test_a_layer_norm_verdict_at_a_batch_of_sixteen_rows[_layer_norm_one_pass-failed]":
        "test_conditioning's one-pass norm rows and the two-pass case",
    "tests/test_search_option.py::test_ini_key_turns_the_search_on":
        "test_bad_ini_value_is_a_usage_error (the key is read), test_settings' ini order, "
        "test_search_is_on_by_default (the search runs from the setting)",
    "tests/test_search_plugin.py::test_marker_search_true_searches_under_the_option_off":
        "test_settings' order (the marker over the option), "
        "test_search_proposes_the_improved_program_in_the_failure",
    "tests/test_startup.py::test_a_plain_run_loads_only_the_light_modules[run-jax-suite]": "the jax-free run",
    "tests/test_examples_baseline.py::test_committed_example_baseline_is_current":
        "none in the fast tier: `make demo` compares with the same file, and CI's slow tier runs it",
    # float64 twins of float32 cases that run the same rewrite (the family's rule, as the tier's rule
    # says); the file keeps test_large_logits_that_nearly_tie[tutorial_nll-f64] as its float64 case
    **{f"tests/test_rewrites_gather.py::{t}": "the f32 case" for t in (
        "test_one_row_with_a_computed_label[take-f64]", "test_one_row_with_a_computed_label[index-f64]",
        "test_one_row_with_a_computed_label[log_softmax_index-f64]",
        "test_the_one_hot_spellings[one_hot_product-f64]",
        "test_the_one_hot_spellings[one_hot_log_softmax-f64]",
        "test_one_hot_targets_keep_their_derivative[f64]",
        "test_the_one_hot_spellings[lse_minus_one_hot-f64]")},
    # the costliest first-alternative checks (2.4-8.8 s each on 2 cores, jax 0.10; the second line's
    # 1.7-3.0 s each in a fresh clone's `make test`, jax 0.12.1, 2026-12-07): the slow tier checks every
    # alternative of these rules, the first among them, in jit, grad, sum and shared
    **{"tests/test_rule_alternatives.py::test_the_first_alternative_of_every_rule_is_sound_in_value_and_"
       f"gradient[{rule}]": "test_every_alternative_of_every_rule_is_sound_in_value_gradient_sum_and_shared"
       for rule in ("normal_interval_quantile", "log_gamma_tail", "incomplete_gamma_complement",
                    "lgamma_sum", "log_beta_multivariate", "log_normal_mass",
                    "log_gamma_lower", "lse_minus_selected", "betainc_complement", "log_bessel",
                    "scaled_normal_cdf", "inv_matmul", "lse_minus_weighted")},
    **{f"tests/test_rewrites_normal_tails.py::{t}": "the f32 case" for t in (
        "test_reversed_bounds_stay_nan[f64]", "test_log_logistic_mass_value_and_gradient[logistic.cdf-f64]",
        "test_log_logistic_mass_value_and_gradient[sigmoid-f64]",
        "test_log_logistic_mass_value_and_gradient[logistic.sf-f64]",
        "test_log_logistic_mass_reversed_bounds_and_near_misses[f64]")},
}


#: Test files that cannot see which JAX runs them: they read the package's source and its import
#: graph, or which of its modules a pytest run loads. The oldest-JAX run (`make test-compat`) leaves them
#: out (`-m "... and not jax_independent"`; README, "Supported versions").
JAX_INDEPENDENT: dict[str, str] = {
    "tests/test_layout.py": "the package's files, lines and import arrows, read as text and ASTs",
    "tests/test_startup.py": "which of the package's modules a pytest run imports",
}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.nodeid in SLOW_ONLY:
            item.add_marker(pytest.mark.slow)
        if item.nodeid.split("::", 1)[0] in JAX_INDEPENDENT:
            item.add_marker(pytest.mark.jax_independent)
    _check_tier_ids(config, items)


def _check_tier_ids(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A SLOW_ONLY id that no test has (a typo, a renamed test or parameter) would leave its test in the
    fast tier unnoticed: refuse the run. Checked for the files collected whole (before ``-k``/``-m``
    deselect: this hook runs first), not where the command names tests by id."""
    if any("::" in str(arg) for arg in config.args):
        return
    seen = {item.nodeid for item in items}
    files = {nodeid.split("::", 1)[0] for nodeid in seen}
    missing = [n for n in SLOW_ONLY if n.split("::", 1)[0] in files and n not in seen]
    if missing:
        raise pytest.UsageError("tests/conftest.py SLOW_ONLY names tests that do not exist (renamed? fix the "
                                "ids):\n  " + "\n  ".join(missing))
