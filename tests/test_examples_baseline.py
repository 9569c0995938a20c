"""The committed baseline of the example project is current: `make demo` compares with it, and on
unchanged code every case must be known or unchanged (issue 14, item 15: it reported "1 improved").

When this fails after a deliberate change (a rewrite rule, the oracle, the strategies), regenerate the
file with `make demo-baseline` and commit it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import PLUGIN_ARGS

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
BASELINE = EXAMPLES / ".jaxstab" / "baseline.json"


def test_committed_example_baseline_is_current(pytester):
    result = pytester.runpytest(*PLUGIN_ARGS, "-p", "no:cacheprovider", "-q",
                                "-c", str(EXAMPLES / "pytest.ini"), "--rootdir", str(EXAMPLES), str(EXAMPLES),
                                f"--jaxstab-compare={BASELINE}")
    summary = [line for line in result.outlines if line.startswith("jaxstab baseline:")]
    assert summary, result.stdout.str()
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    # Nothing moved: a stale file shows up as improved, regressed, new or stale cases.
    assert " 0 regressed," in summary[0] and " 0 improved," in summary[0], (
        f"{summary[0]}\nexamples/.jaxstab/baseline.json is stale: run `make demo-baseline` and commit it")
    assert " 0 new, 0 stale " in summary[0], summary[0]
