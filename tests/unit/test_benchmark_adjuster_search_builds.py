"""benchmarks/adjuster_search_builds.py measures the searches a pass really makes, and both builds return them alike.

Why: the benchmark's ratio is only worth its table if the searches it replays are a cold pass's (some of them
running bin completion) and if each child really ran the build it names and returned what was recorded; each child
asserts both, so this runs the benchmark's own code on a small generated cluster.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from raybridge.adjuster.decision import searches
from tests.helpers import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))

import adjuster_search_builds as benchmark  # noqa: E402


@pytest.mark.skipif(searches.BUILD.kind != "compiled", reason=f"no compiled searches in this install: {searches.BUILD.reason}")
def test_the_replayed_searches_are_a_cold_pass_and_both_builds_return_them(tmp_path: Path) -> None:
    result = benchmark.measure(30, 2_000, 400, 1, 1, tmp_path)
    assert result["bin completion"] > 0 and result["searches"] > result["bin completion"], result
    assert all(len(samples) == 1 and samples[0] > 0 for samples in result["cpu"].values()), result
