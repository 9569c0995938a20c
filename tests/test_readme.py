"""The README's Python examples run as written and do what they say."""

from __future__ import annotations

import pathlib
import re

import pytest

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


def _python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_readme_has_the_usage_and_rule_examples():
    blocks = _python_blocks()
    assert len(blocks) >= 2
    assert any("jst.stabilize" in b and "pytest.mark.stabilize" in b for b in blocks)
    assert any("Rule(" in b for b in blocks)


@pytest.mark.parametrize("index", range(len(_python_blocks())))
def test_readme_block_runs(index, capsys):
    code = _python_blocks()[index]
    namespace: dict[str, object] = {"__name__": f"readme_block_{index}"}
    exec(compile(code, f"README.md[python block {index}]", "exec"), namespace)
    out = capsys.readouterr().out
    if "stable(jnp.array([1000.0, 0.0]))" in code:
        lines = out.splitlines()
        assert lines[0].strip() == "1000.0"  # the stabilized logsumexp does not overflow
        assert lines[1].replace(" ", "") == "[1.0.]"  # its gradient is softmax
        assert "logsumexp" in out  # explain names the rule
