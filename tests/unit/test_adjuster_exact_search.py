"""The exact packing, made fast, finds what it found before, step for step; and a pass packs a group once.

Why: both searches stop after a budget of steps with the best found, so a faster search that visited states in
another order, or counted its steps otherwise, would run out elsewhere and pack otherwise. The fixture holds 80
pack calls of generated shared clusters (fixtures/adjuster/hard_packings.json.gz: the 40 slowest of 4,648 and 40
more that searched) with what the searches before the speed-up returned: the GPUs, the bound, the proof, the steps
taken (`search_nodes`) and every node's pods per GPU. 27 of them run bin completion out of its 200,000 steps. Each
case runs on both builds of the searches: the source as it is, and the copy setup.py compiled with mypyc.
"""

from __future__ import annotations

import gzip
import json
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raybridge.adjuster.decision import exact_search, packing, searches
from raybridge.adjuster.decision.packing import PackItem, Packing, pack

CASES = json.loads(gzip.decompress((Path(__file__).parent / "fixtures" / "adjuster" / "hard_packings.json.gz").read_bytes()))


def _as_dict(found: Packing) -> dict[str, Any]:
    return {"gpus": found.gpus, "lowerBound": found.lower_bound, "method": found.method, "proof": found.proof,
            "searchNodes": found.search_nodes, "nodeGpus": found.node_gpus,
            "nodes": [[n.gpus, list(n.pods), [str(x) for x in n.loads], [list(g) for g in n.gpu_pods]] for n in found.nodes]}


def _runs_out(case: dict[str, Any]) -> bool:
    return case["expected"]["proof"].startswith("bin completion stopped after")


#: A search run out of its 200,000 steps costs about a fifth of a CPU-second interpreted, the 26 after the first 4.8 s: the
#: whole suite runs them all, the fast tier the first (the budget's stop) and the searches that end by themselves. Compiled,
#: the fast tier runs them all (1.2 s).
FIRST_RUN_OUT = next(index for index, case in enumerate(CASES) if _runs_out(case))
STEP_CASES = [
    pytest.param(build, index, id=f"{build}-{index}", marks=[pytest.mark.slow] if build == "interpreted" and _runs_out(case) and index != FIRST_RUN_OUT else [])
    for build in ("interpreted", "compiled") for index, case in enumerate(CASES)
]  # fmt: skip


def _run_as(build: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make `pack` search with the source as it is, or with the compiled copy (skipped where this install has none)."""
    module = exact_search
    if build == "compiled":
        module, chosen = searches.choose()
        if chosen.kind != "compiled":
            pytest.skip(f"no compiled searches in this install: {chosen.reason}")
    for name in ("BinCompletion", "BranchAndBound", "SearchState"):
        monkeypatch.setattr(packing, name, getattr(module, name))


@pytest.mark.parametrize(("build", "case"), STEP_CASES)
def test_each_search_returns_what_it_did_before_step_for_step(build: str, case: int, monkeypatch: pytest.MonkeyPatch) -> None:
    _run_as(build, monkeypatch)
    given = CASES[case]
    items = [PackItem(pod, Fraction(num, den), devices) for pod, num, den, devices in given["items"]]
    packing._packings.clear()  # searched here, not remembered from another case
    found = pack(items, given["nodeGpus"], given["exactMaxSlices"], given["budget"])
    assert _as_dict(found) == given["expected"]


def test_the_fixture_runs_both_searches_out_of_budget() -> None:
    proofs = [c["expected"]["proof"] for c in CASES]
    assert sum(p.startswith("bin completion stopped after 200000 steps") for p in proofs) >= 20
    assert sum(p.startswith("branch and bound: the search completed") for p in proofs) >= 10


def test_a_group_packed_again_is_not_searched_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """The controller plans every pass; a group whose pods did not change costs nothing the second time, and the
    same pods under other arguments, or other pods, are packed afresh."""
    calls: list[int] = []
    real = packing._pack
    monkeypatch.setattr(packing, "_pack", lambda items, *rest: calls.append(len(items)) or real(items, *rest))
    packing._packings.clear()
    items = [PackItem(f"p{i}", Fraction(3, 5)) for i in range(7)]
    first = pack(items, 8)
    assert pack(list(items), 8) is first and calls == [7]
    pack(items, 4)
    pack(items[:6], 8)
    assert calls == [7, 7, 6]


def test_at_most_the_last_packings_are_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(packing, "PACKINGS_KEPT", 3)
    packing._packings.clear()
    for i in range(5):
        pack([PackItem(f"p{i}", Fraction(1, 2))], 8)
    pack([PackItem("p2", Fraction(1, 2))], 8)  # used again: the newest
    pack([PackItem("p9", Fraction(1, 2))], 8)
    assert [key[0][0][0] for key in packing._packings] == ["p4", "p2", "p9"]


#: Groups that send the packing past first fit decreasing: shares near a half (a quarter to three quarters of a GPU, in
#: twentieths) on one to four devices. Of 60 drawn, about half go to bin completion or branch and bound, and one in
#: seven runs out of its budget.
_SHARES = st.integers(min_value=5, max_value=15).map(lambda n: Fraction(n, 20))
_ITEMS = st.lists(st.tuples(_SHARES, st.sampled_from([1, 1, 1, 2, 2, 3, 4])), min_size=8, max_size=60)


@settings(max_examples=80, deadline=None, derandomize=True)
@given(items=_ITEMS, node_gpus=st.sampled_from([4, 8]), budget=st.sampled_from([500, 2_000, 20_000]))
def test_both_builds_pack_alike_where_the_fixture_does_not_reach(items: list[tuple[Fraction, int]], node_gpus: int, budget: int) -> None:
    """Beyond the 80 recorded cases: generated groups, small budgets so that many searches run out of them, packed by
    the source as it is and by the compiled copy, must give the same GPUs, proof, steps and pods per GPU."""
    pack_items = [PackItem(f"p{i}", share, min(devices, node_gpus)) for i, (share, devices) in enumerate(items)]
    found = {}
    with pytest.MonkeyPatch.context() as patch:
        for build in ("compiled", "interpreted"):  # compiled first: skipped at once where this install has none
            _run_as(build, patch)
            found[build] = _as_dict(packing._pack(pack_items, node_gpus, 400, budget))
    assert found["compiled"] == found["interpreted"]
