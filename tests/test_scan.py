"""``pytest --jaxstab-scan``: jaxtyping-annotated functions checked without tests (issue 23, item 2)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pytest_jaxstab._scan_config import ScanConfig
from pytest_jaxstab.plugin._scan import DEFAULT_DIM_SIZE, plan_call
from tests.conftest import PLUGIN_ARGS

ROOT = Path(__file__).resolve().parents[1]

jaxtyping = pytest.importorskip("jaxtyping")

LAYERS = '''
import jax.numpy as jnp
import pytest_jaxstab as jst
from jaxtyping import Array, Float, Int


def squash(x: Float[Array, "batch dim"]) -> Float[Array, "batch dim"]:
    return jnp.tanh(x)


def softplus(x: Float[Array, "n"]) -> Float[Array, "n"]:
    return jnp.log(1.0 + jnp.exp(x))


# Over float32's whole range x * x overflows above |x| ~ 1.8e19 (the norm does not): it is meant for
# modest magnitudes, and says so.
@jst.domain((-1000.0, 1000.0))
def norm(x: Float[Array, "n"]) -> Float[Array, ""]:
    return jnp.sqrt(jnp.sum(x * x))


def max_along(x: Float[Array, "n m"], axis: int) -> Float[Array, "m"]:
    return jnp.max(x, axis=axis)


def helper(x):
    return x


def count(x: Int[Array, "n"]) -> Int[Array, ""]:
    return jnp.sum(x)


def _private(x: Float[Array, "n"]) -> Float[Array, "n"]:
    return jnp.log(1.0 + jnp.exp(x))
'''

INI = """[pytest]
jaxstab_scan = mlkit
jaxstab_scan_config =
    mlkit.layers.max_along = {"static": {"axis": 0}}
"""


def _package(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makeini(INI)
    pkg = pytester.mkpydir("mlkit")
    (pkg / "layers.py").write_text(LAYERS)
    monkeypatch.syspath_prepend(str(pytester.path))


@pytest.mark.parametrize("workers", ["0", "2"], ids=["serial", "n2"])
def test_a_scanned_package_gives_the_expected_outcomes(pytester, run_jaxstab, monkeypatch, workers):
    _package(pytester, monkeypatch)
    args = ("--jaxstab-seed=0", "--jaxstab-examples=8", "-n", workers, "-rs",
            "--jaxstab-report=json:r.json", "--jaxstab-save-baseline=b.json")
    if workers == "0":
        result = run_jaxstab(*args)
    else:  # xdist workers in their own processes, importing mlkit from the project (as CI does)
        pytest.importorskip("xdist")
        monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(pytester.path), str(ROOT)]))
        result = pytester.runpytest_subprocess(*PLUGIN_ARGS, "-p", "no:cacheprovider", *args)
    result.assert_outcomes(passed=3, failed=1, skipped=2)
    # The unstable one fails with the usual message, named by its node id.
    result.stdout.fnmatch_lines([
        "*mlkit/layers.py::softplus: the function as written is numerically unstable in float32*",
        "*overflow in exp at mlkit/layers.py:12*",
    ])
    result.stdout.fnmatch_lines_random([
        "SKIPPED*jaxstab scan: argument 'x' has no jaxtyping array annotation*",
        "SKIPPED*jaxstab scan: argument 'x' is not a floating array*",
    ])
    assert "_private" not in result.stdout.str()
    report = json.loads((pytester.path / "r.json").read_text())
    cases = {c["nodeid"]: c for c in report["cases"]}
    assert sorted(cases) == ["mlkit/layers.py::max_along", "mlkit/layers.py::norm",
                             "mlkit/layers.py::softplus", "mlkit/layers.py::squash"]
    assert cases["mlkit/layers.py::softplus"]["outcome"] == "failed"
    assert cases["mlkit/layers.py::squash"]["dtype"] == "float32"
    baseline = json.loads((pytester.path / "b.json").read_text())["cases"]
    assert sorted(baseline) == sorted(cases)
    # The same gate as marked tests: compared with the saved baseline, the known instability passes.
    again = run_jaxstab("--jaxstab-examples=8", "-n", "0", "--jaxstab-compare=b.json")
    again.assert_outcomes(passed=4, skipped=2)


def test_without_its_domain_the_function_fails(pytester, run_jaxstab, monkeypatch):
    _package(pytester, monkeypatch)
    layers = pytester.path / "mlkit" / "layers.py"
    layers.write_text(layers.read_text().replace("@jst.domain((-1000.0, 1000.0))\n", ""))
    result = run_jaxstab("--jaxstab-seed=0", "--jaxstab-examples=8", "-n", "0", "-k", "norm")
    result.assert_outcomes(failed=1, deselected=5)
    result.stdout.fnmatch_lines(["*mlkit/layers.py::norm: the function as written is numerically unstable*"])


def _annotated(src: str):
    namespace: dict = {}
    exec("from jaxtyping import Array, Float\n" + src, namespace)
    return next(v for k, v in namespace.items() if k == "f")


@pytest.mark.parametrize(("src", "dims", "shapes"), [
    ('def f(x: Float[Array, "n"]): return x', {}, [(DEFAULT_DIM_SIZE,)]),
    ('def f(x: Float[Array, "n"]): return x', {"n": 7}, [(7,)]),
    ('def f(x: Float[Array, "3 n"], y: Float[Array, "n+1"]): return x', {"n": 2}, [(3, 2), (3,)]),
    ('def f(x: Float[Array, "*batch n"]): return x', {"n": 5}, [(5,)]),
    ('def f(x: Float[Array, ""]): return x', {}, [()]),
])
def test_dimensions_are_bound_to_the_documented_sizes(src, dims, shapes):
    plan = plan_call(_annotated(src), ScanConfig(), dims)
    assert not isinstance(plan, str), plan
    assert plan[1] == shapes and plan[2] == "float32"


def test_a_float64_only_annotation_is_checked_in_float64():
    plan = plan_call(_annotated('from jaxtyping import Float64\ndef f(x: Float64[Array, "n"]): return x'),
                     ScanConfig(), {})
    assert not isinstance(plan, str) and plan[2] == "float64"


def test_jst_domain_rejects_bad_values():
    import pytest_jaxstab as jst

    with pytest.raises(jst.ArgumentError, match=r"static=.*expected a dict"):
        jst.domain(static=[1])  # pyright: ignore[reportArgumentType]  (the bad input under test)
    with pytest.raises(jst.ArgumentError, match=r"dims=.*size >= 1"):
        jst.domain(dims={"n": 0})
