"""Exact packing of GPU fractions into GPUs and nodes: the count, the proof and a packing that holds."""

from __future__ import annotations

import itertools
import random
from fractions import Fraction

import pytest

from raybridge.core.packing import PackItem, lower_bound, pack


def items(*specs):
    """specs: "0.6" or ("0.5", devices)."""
    out = []
    for i, spec in enumerate(specs):
        size, devices = (spec, 1) if isinstance(spec, str) else spec
        out.append(PackItem(f"ns/p{i}", Fraction(size), devices))
    return out


def check_packing(result, pack_items, node_gpus):
    """The packing is real: every pod placed, no GPU over 1, multi-device pods on distinct GPUs of one node."""
    assert sum(n.gpus for n in result.nodes) == result.gpus
    for n in result.nodes:
        assert n.gpus <= result.node_gpus
        assert all(0 < load <= 1 for load in n.loads)
    placed = sorted(p for n in result.nodes for p in n.pods)
    assert placed == sorted(i.pod for i in pack_items)  # each pod on exactly one node
    total_load = sum(load for n in result.nodes for load in n.loads)
    assert total_load == sum(i.size * i.devices for i in pack_items)
    assert result.gpus >= result.lower_bound
    if node_gpus:
        assert result.node_gpus == node_gpus


# (case, items, node GPUs, GPUs, method)
PACK_ROWS = [
    ("three pods of 0.6 need three GPUs, not ceil(1.8)", items("0.6", "0.6", "0.6"), None, 3, "exact"),
    ("0.33 + 0.56 + 0.11 is exactly one GPU", items("0.33", "0.56", "0.11"), None, 1, "exact"),
    ("eleven pods of 0.1 need two", items(*["0.1"] * 11), None, 2, "exact"),
    ("ten pods of 0.1 need one", items(*["0.1"] * 10), None, 1, "exact"),
    ("thirds fill GPUs exactly", items(*["1/3"] * 9), None, 3, "exact"),
    ("a pair that fits", items("0.7", "0.3"), None, 1, "exact"),
    ("0.5 on two devices", items(("0.5", 2)), 8, 2, "exact"),
    ("two 0.5x2 pods share two GPUs", items(("0.5", 2), ("0.5", 2)), 8, 2, "exact"),
    ("0.9x2 and 0.2x2 cannot share", items(("0.9", 2), ("0.2", 2)), 8, 4, "exact"),
    ("0.2x2 and 0.1x3 fit on three GPUs", items(("0.2", 2), ("0.1", 3)), 8, 3, "exact"),
    ("multi-device pods stay within a node", items(("0.5", 2), ("0.5", 2), ("0.5", 2)), 2, 4, "exact"),
    ("single-device pods fill a multi-device pod's GPUs", items(("0.6", 4), *["0.4"] * 4), 8, 4, "exact"),
    ("FFD uses 11, the optimum is 9", items(*["0.51"] * 6, *["0.27"] * 6, *["0.26"] * 6, *["0.23"] * 12), None, 9, "exact"),
    ("memory-derived fractions", items(*[str(Fraction(20000, 81559))] * 4, str(Fraction(2000, 81559))), None, 2, "exact"),
    ("a whole-GPU memory pod", items("1", "0.5"), None, 2, "exact"),
]


@pytest.mark.parametrize("case,pack_items,node_gpus,gpus,method", PACK_ROWS, ids=[r[0] for r in PACK_ROWS])
def test_pack(case, pack_items, node_gpus, gpus, method):
    result = pack(pack_items, node_gpus)
    assert (result.gpus, result.method) == (gpus, method), result.proof
    check_packing(result, pack_items, node_gpus)


def test_ffd_counterexample_needs_the_search():
    pack_items = items(*["0.51"] * 6, *["0.27"] * 6, *["0.26"] * 6, *["0.23"] * 12)
    without_search = pack(pack_items, None, budget=0)
    assert (without_search.gpus, without_search.method, without_search.lower_bound) == (11, "heuristic", 9)  # 11/9 of the optimum, the worst case
    with_search = pack(pack_items, None)
    assert (with_search.gpus, with_search.method) == (9, "exact")
    assert with_search.search_nodes > 0


def test_search_budget_exhausted_says_so():
    rng = random.Random(3)
    pack_items = [PackItem(f"ns/p{i}", Fraction(rng.randint(20, 45), 100)) for i in range(60)]
    result = pack(pack_items, None, budget=5)
    assert result.method in ("heuristic", "exact")
    if result.method == "heuristic":
        assert "stopped after 5 search nodes" in result.proof
    check_packing(result, pack_items, None)


def test_large_groups_use_ffd_and_state_its_bound():
    pack_items = [PackItem(f"ns/p{i}", Fraction(s)) for i, s in enumerate(["0.51", "0.27", "0.26", "0.23", "0.23"] * 120)]
    result = pack(pack_items, None, exact_max_slices=400)
    assert result.method == "heuristic" and "11/9" in result.proof and "600 GPU slices" in result.proof
    check_packing(result, pack_items, None)


def test_node_size_unknown_means_placeholders_no_larger_than_the_largest_pod():
    result = pack(items(("0.5", 3), "0.5", "0.5", "0.5", "0.5"), None)
    assert result.node_gpus == 3
    assert all(n.gpus <= 3 for n in result.nodes)
    assert result.gpus == 4  # 3 GPUs for the 3-device pod and three of the 0.5 pods, one more


def test_items_that_cannot_fit_a_node_are_refused():
    with pytest.raises(ValueError):
        pack(items(("0.5", 9)), 8)
    with pytest.raises(ValueError):
        pack([PackItem("ns/a", Fraction(3, 2))], 8)


# L2 bound against hand-computed values: (sizes over capacity 100, bound)
BOUND_ROWS = [
    ([60, 60, 60], 3),
    ([33, 56, 11], 1),
    ([10] * 11, 2),
    ([51, 51, 49, 49], 2),
    ([70, 40, 40, 40], 3),  # L2 with k=40: the 70 and each 40 pair only with each other
    ([], 0),
]


@pytest.mark.parametrize("sizes,bound", BOUND_ROWS)
def test_lower_bound(sizes, bound):
    assert lower_bound(sizes, 100) == bound


def brute_force_single(sizes, capacity):
    """The true optimum for tiny instances: try every assignment to at most n bins."""
    n = len(sizes)
    for bins in range(1, n + 1):
        for assignment in itertools.product(range(bins), repeat=n):
            loads = [0] * bins
            for s, b in zip(sizes, assignment):
                loads[b] += s
            if max(loads) <= capacity:
                return bins
    return n


def test_exact_matches_brute_force_on_random_small_instances():
    rng = random.Random(11)
    for _ in range(60):
        n = rng.randint(1, 7)
        sizes = [rng.choice([15, 20, 25, 30, 35, 40, 45, 55, 60, 65, 70]) for _ in range(n)]
        pack_items = [PackItem(f"ns/p{i}", Fraction(s, 100)) for i, s in enumerate(sizes)]
        result = pack(pack_items, None)
        assert result.method == "exact"
        assert result.gpus == brute_force_single(sizes, 100), sizes
        check_packing(result, pack_items, None)


def test_random_multi_device_packings_are_feasible_and_never_beat_the_bound():
    rng = random.Random(5)
    for _ in range(80):
        node_gpus = rng.choice([2, 4, 8])
        pack_items = [
            PackItem(f"ns/p{i}", Fraction(rng.randint(1, 10), 10), rng.choice([1, 1, 1, 2, node_gpus]))
            for i in range(rng.randint(1, 25))
        ]
        result = pack(pack_items, node_gpus, budget=2000)
        check_packing(result, pack_items, node_gpus)
        loads = {}
        for n_index, n in enumerate(result.nodes):
            for g, load in enumerate(n.loads):
                loads[(n_index, g)] = load
        assert result.gpus >= max(i.devices for i in pack_items)
