"""The "jaxstab" terminal section fits pytest's terminal width (issue 37, item 3): columns by rank, long
case names cut in the middle, the rest named under the table and shown with ``-v``; the legend and the
baseline summary wrapped. The width is ``COLUMNS``, as pytest's own terminal writer reads it."""

from __future__ import annotations

import re

import pytest

SUITE = '''
import jax.numpy as jnp
import pytest

@pytest.mark.stabilize(dtype="float32", shapes={"x": (4,)}, domain=(-5, 5))
def test_stable(x):
    return jnp.tanh(x)

# exp overflows float32 above ~88.7: unstable, the NaN born in exp, fixed by the logsumexp rewrite.
@pytest.mark.stabilize(dtype="float32", shapes={"x": (4,)}, domain=(85, 100))
def test_overflow(x):
    return jnp.log(jnp.sum(jnp.exp(x)))

@pytest.mark.parametrize("name", ["a_rather_long_parametrization_that_keeps_going_and_going_end"])
@pytest.mark.stabilize(dtype="float32", shapes={"x": (4,)}, domain=(-5, 5))
def test_with_a_long_name_for_its_case_column(x, name):
    return jnp.sin(x)
'''

ARGS = ("--jaxstab-examples=5", "--jaxstab-seed=0", "--jaxstab-report", "-p", "no:xdist")
#: Every column's title: the first table holds some, the rest are named under it or follow with -v.
TITLES = ("case", "verdict", "max", "rules fired", "NaN origin", "beyond", "ovf", "bits lost at", "mean",
          "dtype", "samples", "disc/unc")


def section(result: pytest.RunResult) -> list[str]:
    """The lines of the "jaxstab" section of the terminal summary (its own ==== line excluded)."""
    lines = result.outlines
    start = next(i for i, line in enumerate(lines) if re.fullmatch(r"=+ jaxstab =+", line))
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("====")), len(lines))
    assert end > start + 3, lines[start:]
    return lines[start + 1:end]


@pytest.mark.parametrize("columns", [80, 100, 120, 400])
def test_the_section_fits_the_terminal(pytester, run_jaxstab, monkeypatch, columns):
    pytester.makepyfile(test_models=SUITE)
    monkeypatch.setenv("COLUMNS", str(columns))
    result = run_jaxstab(*ARGS)
    result.assert_outcomes(passed=2, failed=1)
    lines = section(result)
    assert max(len(line) for line in lines) <= columns, "\n".join(lines)
    header = next(line for line in lines if line.startswith("case "))
    # The first ranks are always there: the case, the verdict, both max errors, the fix.
    assert re.search(r"^case\s.*\bmax\s.*\bmax\s.*\bverdict\s.*\brules fired\b", header), header
    assert re.search(r"^\s+original\s+(.*\s)?rewritten", lines[lines.index(header) - 1])
    overflow = next(line for line in lines if "test_overflow" in line)
    assert re.search(r"\bunstable/s\b.*\blogsumexp", overflow), overflow
    long_row = next(line for line in lines if "test_with_a_lon" in line)
    if columns == 400:
        assert all(re.search(rf"(^|\s){re.escape(t)}(\s|$)", header) for t in TITLES), header
        assert not any("not shown at this width" in line for line in lines)
        # Room enough: the whole name, file included.
        assert long_row.startswith("test_models.py::test_with_a_long_name_for_its_case_column[a_rather_"
                                   "long_parametrization_that_keeps_going_and_going_end] ")
    else:
        # A long name is cut in the middle: its start and its parametrization's end stay visible.
        assert re.match(r"(test_models\.py::)?test_with_a_lon\S*…\S*_end\] ", long_row), long_row
        missing = [t for t in TITLES if not re.search(rf"(^|\s){re.escape(t)}(\s|$)", header)]
        assert missing, header  # something had to give at this width ...
        note = " ".join(lines[next(i for i, line in enumerate(lines) if "not shown at this width" in line):])
        assert all(t in note for t in missing if t not in ("max", "ovf", "mean")), note  # ... and is named
        assert "pytest -v" in note


def test_verbose_shows_every_column_in_tables_that_fit(pytester, run_jaxstab, monkeypatch):
    pytester.makepyfile(test_models=SUITE)
    run_jaxstab(*ARGS, "--jaxstab-save-baseline")
    monkeypatch.setenv("COLUMNS", "80")
    result = run_jaxstab(*ARGS, "-v", "--jaxstab-compare")
    lines = section(result)
    assert max(len(line) for line in lines) <= 80, "\n".join(lines)
    headers = [line for line in lines if line.startswith("case ")]
    assert len(headers) >= 2  # the columns that did not fit follow, each table led by the case
    titles = " ".join(headers)
    assert all(re.search(rf"(^|\s){re.escape(t)}(\s|$)", titles) for t in [*TITLES, "gate"]), headers
    assert not any("not shown at this width" in line for line in lines)
    # Each further table has a row per case too, the figures beside their case.
    assert sum(1 for line in lines if "test_overflow" in line.split("  ")[0]) == len(headers)
    # The baseline summary is part of the section: wrapped too, its content intact.
    summary = " ".join(line.strip() for line in lines)
    assert "jaxstab baseline: 0 regressed, 1 known" in summary
