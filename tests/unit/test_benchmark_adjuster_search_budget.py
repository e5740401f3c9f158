"""benchmarks/adjuster_search_budget.py compares passes at several search budgets on what they really create.

Why: its table is what a choice of the default budget would rest on, so its comparison must see a changed
placeholder (one pod moved, one GPU more) and its passes must really run at the budget they name: a budget of 0 is
first-fit-decreasing alone, which stops every searched group at once.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))

import adjuster_search_budget as benchmark  # noqa: E402


#: The reference pass's placeholders: [GPUs, its pods...].
REFERENCE = [[1, "a"], [2, "b", "c"]]


@pytest.mark.parametrize("case, placeholders, differing, gpus", [
    ("the same placeholders in another order", [[2, "b", "c"], [1, "a"]], 0, 0),
    ("a pod moved to another placeholder", [[1, "a", "c"], [2, "b"]], 4, 0),
    ("one GPU more for the same pods", [[2, "a"], [2, "b", "c"]], 2, 1),
    ("a placeholder fewer", [[2, "b", "c"]], 1, -1),
    ("one placeholder twice", [[1, "a"], [1, "a"], [2, "b", "c"]], 1, 1),
])  # fmt: skip
def test_the_comparison_with_the_reference_budget(case, placeholders, differing, gpus):
    assert benchmark.compare(placeholders, REFERENCE) == {"differing": differing, "gpusAgainst": gpus}, case


def test_each_budget_is_a_pass_of_its_own_and_a_budget_of_nothing_searches_nothing(tmp_path: Path) -> None:
    args = argparse.Namespace(pods=600, nodes=120, runs=1, budgets=[200_000, 0])
    rows = benchmark.measure(20, 1, args, tmp_path)
    default, none = rows
    assert (default["budget"], none["budget"]) == (200_000, 0)
    assert default["differing"] == 0 and default["gpusAgainst"] == 0
    assert default["placeholders"] > 0 and default["gpus"] >= default["placeholders"]
    # Without searches every group with more than one pod to pack is first-fit-decreasing's ("heuristic").
    assert none["heuristic"] > default["heuristic"], rows
    assert none["gpusAgainst"] == none["gpus"] - default["gpus"]
