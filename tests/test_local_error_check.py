"""Local error inside jst.check (issue 17): the CaseResult, the failure message and the reports name
the line where most bits are lost, and say whether the rewritten function removes the loss.

Expected lines come from marker comments; the JSON report is validated by the report's own schema
check and round-tripped through CaseResult.from_json.
"""

from __future__ import annotations

import json
import os

import jax.numpy as jnp
import numpy as np

import pytest_jaxstab as jst
from pytest_jaxstab._report._html import _local_error_section
from pytest_jaxstab._report._json import build_report, validate_report
from pytest_jaxstab._report._term import format_table
from pytest_jaxstab._results import CaseResult
from tests.test_local_error import line_of


def growth(x):
    scale = jnp.abs(x) + 2.0
    g = 8.314 * (jnp.exp(x) - 1.0)  # GROWTH
    return g / scale


def sqrt_gap(x):
    s = jnp.sqrt(x)
    gap = jnp.sqrt(x + 1.0) - s  # GAP
    return gap * 0.5


def _assert_at(location: str, fn, marker: str) -> None:
    file, line = location.rsplit(":", 1)
    want_file, want_line = line_of(fn, marker)
    assert os.path.samefile(file, want_file) and int(line) == want_line


def test_check_names_the_cancelling_line_and_that_rewriting_removes_it():
    result = jst.check(growth, shapes=[(4,)], dtype="float32", domain=(-1e-3, 1e-3), seed=1,
                       max_examples=60)
    assert result.outcome == "failed"
    worst = result.local_error[0]
    assert worst.location is not None
    _assert_at(worst.location, growth, "GROWTH")
    assert (worst.primitive, worst.kind) == ("sub", "cancellation")
    assert worst.max_bits > result.tolerance_bits
    assert worst.removed is True  # the expm1 rule replaces exp(x) - 1
    assert "Most bits lost at" in result.message and "# GROWTH" in result.message
    assert "removes this loss" in result.message


def test_without_a_rule_the_loss_stays_and_every_report_shows_it():
    result = jst.check(sqrt_gap, shapes=[(3,)], dtype="float32", domain=(1.0, 1e7), seed=2,
                       max_examples=60)
    assert result.outcome == "failed"
    worst = result.local_error[0]
    assert worst.location is not None
    _assert_at(worst.location, sqrt_gap, "GAP")
    assert worst.removed is False
    assert "still loses them there" in result.message
    # JSON: the list, worst first, with the documented keys; valid; round-trips
    report = json.loads(json.dumps(build_report([result], jax_version="x", backends=["cpu"])))
    validate_report(report)
    entries = report["cases"][0]["local_error"]
    assert entries[0]["primitive"] == "sub"
    assert [e["max_bits"] for e in entries] == sorted((e["max_bits"] for e in entries), reverse=True)
    keys = {"location", "primitive", "kind", "max_bits", "mean_bits", "share_over_tolerance"}
    assert keys <= set(entries[0])
    assert CaseResult.from_json(report["cases"][0]).local_error == result.local_error
    # terminal column and HTML chart
    table = format_table([result], ["cpu"])
    line_no = worst.location.rsplit(":", 1)[1]
    row = next(r for r in table.splitlines() if "sqrt_gap" in r)
    assert "bits lost at" in table and "sub @ " in row and f".py:{line_no} " in row  # cut from the left
    html = "\n".join(_local_error_section(result))
    assert "GAP" in html and "cancellation" in html


def test_a_stable_function_has_no_line_over_tolerance():
    result = jst.check(lambda x: jnp.sqrt(x) * 3.0, shapes=[(4,)], dtype="float32", domain=(1e-3, 1e3),
                       seed=3, max_examples=40)
    assert result.outcome == "passed"
    assert all(e.max_bits <= result.tolerance_bits for e in result.local_error)
    assert np.isfinite([e.max_bits for e in result.local_error]).all()
