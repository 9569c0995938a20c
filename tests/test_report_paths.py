"""Paths in reports are relative to pytest's rootdir, absolute only outside it (issue 23, item 3)."""

from __future__ import annotations

import json
import os

import pytest

from pytest_jaxstab._report._paths import relative_location

HELPERS = '''
import jax.numpy as jnp

def softplus(x):
    return jnp.log(1.0 + jnp.exp(x))
'''

TESTS = '''
import pytest
from mlkit.helpers import softplus

@pytest.mark.stabilize(dtype="float32", shapes={"x": (4,)}, domain=(80, 100))
def test_softplus(x):
    return softplus(x)
'''


def test_reports_name_files_relative_to_the_rootdir(pytester, run_jaxstab, monkeypatch):
    pytester.makeini("[pytest]\n")  # the rootdir: pytester.path, whatever the working directory
    pkg = pytester.mkpydir("mlkit")
    (pkg / "helpers.py").write_text(HELPERS)
    tests = pytester.mkdir("tests")
    (tests / "test_models.py").write_text(TESTS)
    monkeypatch.syspath_prepend(str(pytester.path))
    # Run from a subdirectory (as `cd tests && pytest`): paths stay relative to the rootdir, not cwd.
    monkeypatch.chdir(tests)
    result = run_jaxstab("--jaxstab-seed=0", "--jaxstab-examples=8", "-n", "0", "test_models.py",
                         f"--jaxstab-report=json:{pytester.path / 'r.json'}",
                         f"--jaxstab-report=html:{pytester.path / 'r.html'}")
    result.assert_outcomes(failed=1)
    # The failure message names the file as the node ids do (relative to the rootdir, not to cwd).
    result.stdout.fnmatch_lines(["*overflow in exp at mlkit/helpers.py:5"])
    report = json.loads((pytester.path / "r.json").read_text())
    locations = [loc for case in report["cases"]
                 for key in ("rewrites", "nan_origins", "local_error")
                 for loc in (r["location"] for r in case[key]) if loc]
    assert locations, "the unstable cases should name where they lose bits"
    # Line 5 of HELPERS (its text starts with a newline): softplus's log(1 + exp(x)); its rewrite, NaN
    # origin (exp overflows) and local error are all there.
    assert set(locations) == {"mlkit/helpers.py:5"} and len(locations) >= 3
    root = str(pytester.path)
    assert root not in (pytester.path / "r.json").read_text()
    html = (pytester.path / "r.html").read_text()
    assert "mlkit/helpers.py:5" in html
    assert f"{root}{os.sep}mlkit" not in html


@pytest.mark.parametrize(("location", "expected"), [
    ("/r/proj/src/m.py:12", "src/m.py:12"),
    ("/r/proj/m.py:1", "m.py:1"),
    ("/r/other/m.py:3", "/r/other/m.py:3"),     # outside the rootdir: absolute
    ("/r/projection/m.py:3", "/r/projection/m.py:3"),  # a sibling sharing the prefix is outside
    (None, None),
    ("<unknown>", os.path.abspath("<unknown>")),
])
def test_relative_location(location, expected):
    if os.sep != "/":
        pytest.skip("POSIX paths")
    assert relative_location(location, "/r/proj") == expected
