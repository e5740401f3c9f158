"""Every Python example in docs/python-api.md, run as it stands from the repository's root.

Why this module exists: the Python API page is what a user copies first; an example that does not run,
or prints something else than its comments say, is a broken promise. Each ```python block runs in a fresh
interpreter (no cluster: the local backend's private head, as a user without a kubeconfig gets); what a
`print(...)` line's comment says, and the comment lines that close a block, must be in its output.

What it deliberately does not do: test the API's behaviour case by case (tests/unit/test_python_api.py).
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.helpers import ROOT, cli_env

PAGE = ROOT / "docs" / "python-api.md"
BLOCKS = re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S)


def expected_output(block: str) -> list[str]:
    """What the block says it prints: `print(...)  # OUT` comments, and the comment lines after the last statement."""
    lines = block.rstrip().splitlines()
    said = [line.split("#", 1)[1].strip() for line in lines if line.lstrip().startswith("print(") and "#" in line]
    trailing = []
    for line in reversed(lines):
        if not line.startswith("# "):
            break
        trailing.insert(0, line[2:].strip())
    return said + trailing


def test_the_page_has_examples_and_each_says_what_it_prints():
    assert len(BLOCKS) >= 4
    assert all(expected_output(block) for block in BLOCKS[1:]), "an example that prints nothing checkable"


@pytest.mark.parametrize("block", BLOCKS, ids=[f"example-{i + 1}" for i in range(len(BLOCKS))])
def test_each_example_runs_and_prints_what_it_says(block):
    run = subprocess.run([sys.executable, "-c", block], cwd=str(ROOT), env=cli_env(), capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    for text in expected_output(block):
        assert text in run.stdout, (text, run.stdout, run.stderr)
    assert "Traceback" not in run.stderr
