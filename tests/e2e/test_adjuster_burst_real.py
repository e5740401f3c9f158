"""`benchmarks/adjuster_burst_vs_kai.py --stack real` measures something: on one small scenario, both raybridge's
adjuster and KAI's own node-scale-adjuster binary bring every pod of the burst up on the real stack.

Why: the real-stack mode starts KAI's node-scale-adjuster, which the test stacks otherwise never run (its flags, its
scaling pods' service account, the Stage that makes its scaling pods exit), and reads its numbers from a watch; a
side that silently never ran, or a burst that never came up, would print a table of timeouts that reads like a
result. This runs the benchmark's own code, not a stand-in, and checks only that both sides appear and that each
had every pod Running with some GPUs asked and a node added: the numbers themselves are for docs/benchmarks.md.
"""

from __future__ import annotations

import sys

import pytest

from testcluster.pytest_plugin import _unavailable
from tests.helpers import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))

import adjuster_burst_vs_kai as benchmark  # noqa: E402

pytestmark = [
    pytest.mark.skipif(_unavailable() is not None, reason=str(_unavailable())),
    pytest.mark.realtime,
    pytest.mark.xdist_group("testcluster-adjuster-burst-real"),  # one stack for the module's tests
    pytest.mark.timeout(900),
]

SCENARIO = "8 pods x 2 devices x 0.5"  # the smallest: 8 GPUs, one node on either side


def test_the_real_stack_mode_runs_both_sides_and_every_pod(capsys: pytest.CaptureFixture[str]) -> None:
    assert benchmark.main(["--stack", "real", "--runs", "1", "--scenario", SCENARIO, "--timeout", "300"]) == 0
    out = capsys.readouterr().out
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in out.splitlines() if line.startswith(f"| {SCENARIO} |")]
    per_run = rows[: len(rows) // 2]  # each run's row, then the medians' table
    assert [row[1] for row in per_run] == ["raybridge", "KAI node-scale-adjuster"], out
    for _, side, seconds, asked, nodes, _rounds in per_run:
        assert not seconds.startswith(">"), f"{side}: not every pod ran within 300 s\n{out}"  # '> 300 (k/8 running)'
        assert float(seconds) > 0, out
        assert int(asked) >= 8, f"{side} asked for {asked} GPUs; the 8 pods need 8\n{out}"
        assert int(nodes.split()[0]) >= 1, f"{side}: no node added\n{out}"
