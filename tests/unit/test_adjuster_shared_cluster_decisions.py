"""The planner made fast for many constraint groups decides exactly as it did before (issue 41).

Why: planning a cluster whose pods carry a thousand distinct constraint groups took 24 times the JSON load, and the
speed-up touches what decides (which nodes a group may use, the exact packing's searches). A faster planner that
plans otherwise is a different planner. Each table is a generated shared cluster (shared_cluster_tables.py:
3 to 1,239 groups, pools scaled to zero, busy nodes, anti-affine services) with the offline plan and three passes of
the controller (no placeholder yet; placeholders pending, pods arrived and gone; some on new nodes). The expected
decisions were recorded by the code before the change (fixtures/adjuster/shared_cluster_decisions.json.gz), so any
difference, in a placeholder, a packing's proof, a note or a deletion, fails here with the first place it differs.
"""

from __future__ import annotations

from typing import Any, Optional

import pytest

from tests.unit import shared_cluster_tables as tables

def first_difference(expected: Any, got: Any, where: str = "") -> Optional[str]:
    """The path of the first place two JSON values differ, with both values there (None: equal)."""
    if type(expected) is not type(got):
        return f"{where or '.'}: expected {expected!r:.300}, got {got!r:.300}"
    if isinstance(expected, dict):
        for key in sorted(set(expected) | set(got)):
            if key not in got or key not in expected:
                return f"{where}.{key}: expected {expected.get(key, '<absent>')!r:.300}, got {got.get(key, '<absent>')!r:.300}"
            found = first_difference(expected[key], got[key], f"{where}.{key}")
            if found:
                return found
        return None
    if isinstance(expected, list):
        for index, (a, b) in enumerate(zip(expected, got)):
            found = first_difference(a, b, f"{where}[{index}]")
            if found:
                return found
        if len(expected) != len(got):
            return f"{where}: expected {len(expected)} entries, got {len(got)}"
        return None
    return None if expected == got else f"{where or '.'}: expected {expected!r:.300}, got {got!r:.300}"


#: The full-size table (10,000 pods) costs about 20 s of CPU: the whole suite runs it, the fast tier the others.
CASES = [pytest.param(t, id=t[0], marks=[pytest.mark.slow] if t[2] >= 10_000 else []) for t in tables.TABLES]


@pytest.mark.parametrize("kept_views", [False, True], ids=["views-read-afresh", "views-kept-as-the-controller-does"])
@pytest.mark.parametrize("table", CASES)
def test_decisions_are_those_recorded_before_the_speed_up(table: tuple[str, int, int, int, int], kept_views: bool) -> None:
    name, *shape = table
    got = tables.decisions(name, *shape, kept_views=kept_views)
    for part in ("plan", "pass1", "pass2", "pass3"):
        difference = first_difference(tables.frozen()[name][part], got[part])
        assert difference is None, f"{name} {part}{difference}"


def test_the_tables_exercise_every_step_of_a_pass() -> None:
    """The tables are worth comparing: placeholders created, grown or deleted, pods covered by placeholders that got
    nodes, held nodes, proofs of several kinds, pods left out for several reasons."""
    frozen = tables.frozen()
    full = frozen["1239-groups-full-size"]
    assert len(full["plan"]["groups"]) > 1000
    proofs = [g["proof"] for g in full["plan"]["groups"]]
    for kind in ("first-fit-decreasing meets the lower bound", "bin completion found a packing", "bin completion stopped after",
                 "branch and bound: the search completed", "bin completion's packing could not be grouped"):
        assert any(proof.startswith(kind) for proof in proofs), kind
    assert {i["code"] for i in full["plan"]["ignored"]} >= {"vendor-not-shared", "memory-exceeds-gpu", "quota-blocked"}
    reasons = {reason for table in frozen.values() for part in ("pass2", "pass3") for _, reason in table[part]["delete"]}
    assert {"grown", "held-elsewhere"} <= reasons, reasons
    assert all(frozen[name]["pass3"]["held"] and frozen[name]["pass3"]["covered"] for name in frozen)
    assert any(p["placeholder"].get("perNode") or p["avoid"] for t in frozen.values() for p in t["pass1"]["create"]) or any(
        "perNode" in g for g in full["plan"]["groups"])
