"""benchmarks/adjuster_vs_kai.py measures something: on one seed of each trace both policies bring every pod up.

Why: the benchmark's nodes once had no CPU, so raybridge's planner (rightly) found every pod too large and the table
read "0 GPUs added, never" for raybridge, unnoticed for a while. This runs the benchmark's own simulation, not a
stand-in, and checks only that each policy placed every pod with at least the proven lower bound of GPUs: the
numbers themselves are for docs/benchmarks.md.
"""

from __future__ import annotations

import sys

import pytest

from tests.helpers import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))

import adjuster_vs_kai as benchmark  # noqa: E402


@pytest.mark.parametrize("trace", benchmark.TRACES)
@pytest.mark.parametrize("policy", ["exact", "kai"])
def test_each_policy_places_every_pod_of_the_trace(trace: str, policy: str) -> None:
    result = benchmark.simulate(trace, 1, policy, 120)
    assert result.never == 0 and result.all_running_s is not None, result
    assert result.gpus >= result.optimum > 0, result
