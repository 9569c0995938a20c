"""The error tree: every public entry point given a bad argument raises a ``jst.JaxstabError`` whose
message names the argument, and stays the built-in class callers may catch (ValueError, TypeError,
KeyError)."""

# pyright: reportArgumentType=false, reportCallIssue=false
# (every call here passes a bad argument on purpose)

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

import pytest_jaxstab as jst


def _f(x):
    return jnp.tanh(x)


_CHECK = {"shapes": [(2,)], "dtype": "float32"}

#: (what is called, the argument its message must name, the built-in class it must still be)
CASES = [
    ("stabilize rules=[42]", lambda: jst.stabilize(_f, rules=[42]), "rules", TypeError),
    ("explain rules=[42]", lambda: jst.explain(_f, np.ones(2, np.float32), rules=[42]), "rules", TypeError),
    ("stabilize unknown rule", lambda: jst.stabilize(_f, rules=["no_such_rule"]), "no_such_rule", KeyError),
    ("rewrites.get", lambda: jst.rewrites.get("no_such_rule"), "no_such_rule", KeyError),
    ("Rule name=''", lambda: jst.rewrites.Rule(name="", pattern=jst.rewrites.pattern.op(
        "log", jst.rewrites.pattern.var("x")), replacement=jnp.log), "name", ValueError),
    ("Rule no pattern", lambda: jst.rewrites.Rule(name="r", pattern=None, replacement=jnp.log), "pattern",
     ValueError),
    ("Rule replacement", lambda: jst.rewrites.Rule(name="r", pattern=jst.rewrites.pattern.op(
        "log", jst.rewrites.pattern.var("x")), replacement=3), "replacement", TypeError),
    ("register", lambda: jst.rewrites.register("softplus"), "rule", TypeError),
    ("arrays shape=-1", lambda: jst.strategies.arrays("float32", shape=-1), "shape", ValueError),
    ("arrays shape='x'", lambda: jst.strategies.arrays("float32", shape=object()), "shape", TypeError),
    ("arrays dtype", lambda: jst.strategies.arrays("int8", shape=3), "dtype", ValueError),
    ("floats domain", lambda: jst.strategies.floats("float32", domain="wide"), "domain", TypeError),
    ("Domain lo=nan", lambda: jst.strategies.Domain(lo=float("nan")), "lo", ValueError),
    ("Domain where=3", lambda: jst.strategies.Domain(where=3), "where", TypeError),
    ("Domain empty", lambda: jst.strategies.Domain(lo=2, hi=1), "domain", ValueError),
    ("check max_examples", lambda: jst.check(_f, **_CHECK, max_examples=0), "max_examples", ValueError),
    ("check dtype", lambda: jst.check(_f, shapes=[(2,)], dtype="int8"), "dtype", ValueError),
    ("check shapes", lambda: jst.check(_f, shapes="x", dtype="float32"), "shapes", ValueError),
    ("check domain", lambda: jst.check(_f, **_CHECK, domain=(3, 1)), "domain", ValueError),
    ("check judge", lambda: jst.check(_f, **_CHECK, judge="precision"), "judge", ValueError),
    ("check oracle_budget", lambda: jst.check(_f, **_CHECK, oracle_budget=-1), "oracle_budget", ValueError),
    ("check rules", lambda: jst.check(_f, **_CHECK, rules=["no_such_rule"]), "rules", ValueError),
    ("check unknown option", lambda: jst.check(_f, **_CHECK, max_exampels=3), "max_exampels", ValueError),
    ("check search (a plugin option)", lambda: jst.check(_f, **_CHECK, search=True), "search", ValueError),
    ("check settings=", lambda: jst.check(_f, **_CHECK, settings={"seed": 1}), "settings", ValueError),
    ("improve node_limit", lambda: jst.improve(_f, shapes=[()], dtype="float32", node_limit=0), "node_limit",
     ValueError),
    ("improve tolerance_bits", lambda: jst.improve(_f, shapes=[()], dtype="float32", tolerance_bits=2),
     "tolerance_bits", ValueError),
    ("settings value", lambda: jst.settings(tolerance_bits="lots"), "tolerance_bits", ValueError),
    ("settings unknown", lambda: jst.settings(tolerence_bits=2), "tolerence_bits", ValueError),
    ("settings parent", lambda: jst.settings({"seed": 1}), "parent", ValueError),
    ("unknown profile", lambda: jst.settings.get_profile("no_such_profile"), "no_such_profile", ValueError),
    ("register_profile name", lambda: jst.settings.register_profile(""), "name", ValueError),
    ("find_nan_origin fn", lambda: jst.find_nan_origin(3, np.ones(2)), "fn", TypeError),
    ("time_backends fn", lambda: jst.time_backends(3, np.ones(2)), "fn", TypeError),
    ("time_backends min_repeats", lambda: jst.time_backends(_f, np.ones(2, np.float32), min_repeats=0),
     "min_repeats", ValueError),
    ("oracles.evaluate", lambda: jst.oracles.evaluate(3), "evaluate", TypeError),
]


@pytest.mark.parametrize(("call", "argument", "builtin"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_bad_argument_is_a_jaxstab_error_naming_it(call, argument, builtin):
    with pytest.raises(jst.JaxstabError) as info:
        call()
    assert isinstance(info.value, builtin), type(info.value).__mro__
    assert argument in str(info.value), str(info.value)


def test_the_tree_has_one_root_and_keeps_the_builtin_classes():
    for cls in (jst.ArgumentError, jst.ArgumentTypeError, jst.UnknownNameError, jst.SettingsError,
                jst.MarkerError, jst.TraceError, jst.UnsupportedPrimitive, jst.OracleError, jst.BaselineError,
                jst.ReportMergeError):
        assert issubclass(cls, jst.JaxstabError), cls
    assert issubclass(jst.ArgumentTypeError, TypeError) and issubclass(jst.ArgumentTypeError, ValueError)
    assert issubclass(jst.UnknownNameError, KeyError)
    assert str(jst.UnknownNameError("unknown rewrite rule 'x'")) == "unknown rewrite rule 'x'"  # no quotes


MARKERS = """
import jax.numpy as jnp
import pytest

@pytest.mark.stabilize(dtype="float32", shapes={{"x": (2,)}}, {arg})
def test_marked(x):
    return jnp.tanh(x)
"""


@pytest.mark.parametrize(("arg", "named"), [
    ("max_examples=0", "max_examples=0"),
    ("seed='zero'", "seed='zero'"),
    ("judge='precision'", "judge='precision'"),
    ("oracle_budget=-5", "oracle_budget=-5"),
    ("rules=['no_such_rule']", "no_such_rule"),
    ("grad='yes'", "grad='yes'"),
    ("settings=3", "settings=3"),
    ("time_limit=3", "unknown argument time_limit"),  # jst.improve's, not the marker's
])
def test_a_bad_marker_argument_fails_its_test_naming_it(pytester, run_jaxstab, arg, named):
    pytester.makepyfile(test_m=MARKERS.format(arg=arg))
    result = run_jaxstab()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([f"*bad @pytest.mark.stabilize: *{named}*"])
