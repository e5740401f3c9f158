"""The README's offline tour prints what the README shows.

Every command block of the tour section (`$ python -m raybridge ...` and the lines under it) is run as
written; the lines shown must be lines of what it prints (stdout, then stderr), in that order, with
`...` standing for lines left out. The local submit is left to test_local_submit.py: its ports and job
ids change from run to run.
"""

from __future__ import annotations

import re
import shlex

import pytest

from tests.helpers import ROOT, run_cli

TOUR = "## A five-minute tour, offline"
#: Blocks whose output changes from run to run (a private head's port, a job id), checked elsewhere.
LEFT_TO_OTHERS = ("submit examples/hello.yaml",)


def tour_blocks() -> list[tuple[str, list[str]]]:
    text = (ROOT / "README.md").read_text()
    section = text[text.index(TOUR) :]
    section = section[: section.index("\n## ", len(TOUR))]
    blocks = []
    for body in re.findall(r"```\n(.*?)```", section, flags=re.S):
        lines = body.rstrip("\n").split("\n")
        if lines and lines[0].startswith("$ python -m raybridge ") and not any(s in lines[0] for s in LEFT_TO_OTHERS):
            blocks.append((lines[0].removeprefix("$ python -m raybridge "), lines[1:]))
    return blocks


BLOCKS = tour_blocks()


def test_the_tour_has_its_blocks():
    assert len(BLOCKS) >= 5, BLOCKS


@pytest.mark.parametrize("command,shown", BLOCKS, ids=[b[0].split(" -")[0] for b in BLOCKS])
def test_each_tour_command_prints_what_the_readme_shows(command, shown):
    out = run_cli(*shlex.split(command))
    assert out.returncode == 0, out.stderr
    printed = [line.rstrip() for line in (out.stdout + out.stderr).splitlines()]
    at = 0
    for line in shown:
        if line == "...":
            continue
        assert line.rstrip() in printed[at:], f"README shows {line!r}, which `{command}` does not print (after line {at}):\n" + "\n".join(printed)
        at = printed.index(line.rstrip(), at) + 1
