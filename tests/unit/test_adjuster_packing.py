"""Exact packing of GPU fractions into GPUs and nodes: the count, the proof and a packing that holds."""

from __future__ import annotations

import itertools
import math
import random
from fractions import Fraction

import pytest

from raybridge.adjuster.decision.best_fit import greedy_leftovers
from raybridge.adjuster.decision.packing import PackedNode, PackItem, fewest_nodes, lower_bound, pack


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
    by_pod = {i.pod: i for i in pack_items}
    for node_index, n in enumerate(result.nodes):
        assert len(n.gpu_pods) == n.gpus
        for gpu_pods, load in zip(n.gpu_pods, n.loads):
            assert len(set(gpu_pods)) == len(gpu_pods)  # a pod's slices are on distinct GPUs
            assert sum(by_pod[p].size for p in gpu_pods) == load
    homes = {}
    for node_index, n in enumerate(result.nodes):
        for gpu_pods in n.gpu_pods:
            for p in gpu_pods:
                homes.setdefault(p, []).append(node_index)
    for i in pack_items:  # each pod on `devices` GPUs, all of one node
        assert len(homes[i.pod]) == i.devices and len(set(homes[i.pod])) == 1, (i, homes[i.pod])
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
    ("the bound says 3, no GPU takes three of these", items(*["0.4"] * 5, "0.35", "0.3"), None, 4, "exact"),
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


def mixed_group(seed: str, index: int, size: int) -> list:
    """The mix of benchmarks/adjuster_packing_exactness.py: 60% fractions, 40% gpu-memory of an 80 GB GPU, 8% on two devices."""
    rng = random.Random(seed)
    for _ in range(index + 1):
        out = []
        for i in range(size):
            if rng.random() < 0.6:
                fraction = Fraction(rng.choice(["0.1", "0.125", "0.2", "0.25", "0.3", "0.33", "0.5", "0.6", "0.75"]))
            else:
                fraction = Fraction(rng.choice([2000, 4096, 10240, 20000, 40000]), 81559)
            out.append(PackItem(f"ns/p{i}", fraction, 2 if rng.random() < 0.08 else 1))
    return out


# (case, pieces, GPUs = the lower bound): groups of the sizes that occur where first-fit-decreasing is one GPU over
MIXED_ROWS = [
    ("100 pieces, 16 on two devices", mixed_group("1-100", 11, 100), 38),
    ("100 pieces, 5 on two devices", mixed_group("1-100", 9, 100), 29),
    ("200 pieces, 16 on two devices", mixed_group("1-200", 3, 200), 67),
]


@pytest.mark.parametrize("case,pack_items,gpus", MIXED_ROWS, ids=[r[0] for r in MIXED_ROWS])
def test_mixed_groups_of_a_few_hundred_pieces_are_proven_optimal(case, pack_items, gpus):
    assert pack(pack_items, 8, budget=0).gpus == gpus + 1  # first-fit-decreasing alone misses by one
    result = pack(pack_items, 8)
    assert (result.gpus, result.lower_bound, result.method) == (gpus, gpus, "exact"), result.proof
    check_packing(result, pack_items, 8)


def test_an_unreachable_bound_is_raised_by_the_proof():
    result = pack(items(*["0.4"] * 5, "0.35", "0.3"), None)
    assert (result.gpus, result.lower_bound) == (4, 4)  # L2 says 3; bin completion proves 3 too few
    assert "3 GPUs cannot hold" in result.proof


def test_search_budget_exhausted_says_so():
    rng = random.Random(3)
    pack_items = [PackItem(f"ns/p{i}", Fraction(rng.randint(20, 45), 100)) for i in range(60)]
    result = pack(pack_items, None, budget=5)
    assert result.method in ("heuristic", "exact")
    if result.method == "heuristic":
        assert "bin completion stopped after 5 steps" in result.proof
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
    ([30, 30, 30, 40, 50, 60, 60, 90, 100, 100], 7),  # L2 says 6; u^(2) counts each 30 and 40 as 1/2, each 60 as 1
    ([], 0),
]


@pytest.mark.parametrize("sizes,bound", BOUND_ROWS)
def test_lower_bound(sizes, bound):
    assert lower_bound(sizes, 100) == bound


def _fewest_bins(sizes: list[int], capacity: int) -> int:
    """The optimum by exhaustive search (small inputs only)."""
    best = len(sizes)

    def place(i: int, bins: list[int]) -> None:
        nonlocal best
        if len(bins) >= best:
            return
        if i == len(sizes):
            best = len(bins)
            return
        tried = set()
        for b, used in enumerate(bins):
            if used + sizes[i] <= capacity and used not in tried:
                tried.add(used)
                bins[b] += sizes[i]
                place(i + 1, bins)
                bins[b] -= sizes[i]
        place(i + 1, [*bins, sizes[i]])

    place(0, [])
    return best


def test_the_lower_bound_never_exceeds_the_optimum():
    rng = random.Random(7)
    for _ in range(400):
        capacity = rng.choice([10, 12, 60, 100])
        sizes = sorted((rng.randint(1, capacity) for _ in range(rng.randint(1, 9))), reverse=True)
        assert lower_bound(sizes, capacity) <= _fewest_bins(sizes, capacity), (sizes, capacity)


def test_a_packing_one_gpu_above_l2_is_proven_optimal_by_the_stronger_bound():
    pack_items = mixed_group("1-300", 0, 300)  # 300 pieces
    assert math.ceil(sum(i.size * i.devices for i in pack_items)) == 90  # the plain sum (and L2) says 90; 91 are needed
    result = pack(pack_items, 8)
    assert (result.gpus, result.lower_bound, result.method) == (91, 91, "exact"), result.proof


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


# (case, pods in the scheduler's order, node sizes, positions left without room)
GREEDY_ROWS = [
    ("small first: best fit strands the second 0.7", items("0.3", "0.3", "0.7", "0.7"), [2], [3]),
    ("large first: best fit finds the exact packing", items("0.7", "0.7", "0.3", "0.3"), [2], []),
    ("two 0.5x2 pods share a node's two GPUs", items(("0.5", 2), ("0.5", 2)), [2], []),
    ("a second node takes the second wide pod", items(("0.6", 2), ("0.6", 2)), [2, 2], []),
    ("a wide pod needs distinct GPUs of one node", items(("0.6", 2)), [1, 1], [0]),
    ("the fullest GPU with room", items("0.5", "0.4", "0.5", "0.6"), [2], [3]),
    ("nothing to place", [], [1], []),
]


@pytest.mark.parametrize("case,pods,node_sizes,left", GREEDY_ROWS, ids=[r[0] for r in GREEDY_ROWS])
def test_greedy_leftovers(case, pods, node_sizes, left):
    assert greedy_leftovers(pods, node_sizes) == left


def naive_best_fit(pods, node_sizes):
    """The scheduler model spelt out: every node, its fullest GPUs with room, the least spare space, the first node."""
    free = [[Fraction(1)] * n for n in node_sizes]
    left = []
    for index, item in enumerate(pods):
        best = None
        for node, gpus in enumerate(free):
            fits = sorted((room, g) for g, room in enumerate(gpus) if room >= item.size)[: item.devices]
            if len(fits) == item.devices:
                slack = sum(room - item.size for room, _ in fits)
                if best is None or slack < best[0]:
                    best = (slack, node, [g for _, g in fits])
        if best is None:
            left.append(index)
            continue
        for g in best[2]:
            free[best[1]][g] -= item.size
    return left


def test_greedy_leftovers_matches_the_scheduler_model_spelt_out():
    rng = random.Random(17)
    for _ in range(200):
        node_sizes = [rng.choice([1, 2, 4, 8]) for _ in range(rng.randint(1, 6))]
        widest = max(node_sizes)
        pods = [PackItem(f"ns/p{i}", Fraction(rng.randint(1, 20), 20), rng.choice([1, 1, 1, 2, widest])) for i in range(rng.randint(0, 40))]
        assert greedy_leftovers(pods, node_sizes) == naive_best_fit(pods, node_sizes), (pods, node_sizes)


# --- regrouping a packing's GPUs into the fewest nodes ------------------------------------------------


def node(*gpus):
    """gpus: per GPU, the pods on it ("a b"); every GPU's load is 1/2 per pod, to check loads travel with their GPU."""
    gpu_pods = tuple(tuple(g.split()) for g in gpus)
    return PackedNode(len(gpus), tuple(sorted({p for g in gpu_pods for p in g})), tuple(Fraction(len(g), 2) for g in gpu_pods), gpu_pods)


# (case, nodes, node GPUs, node sizes after)
FEWEST_ROWS = [
    ("single-device GPUs of 7, 7 and 2 fill two nodes of 8", [node(*"abcdefg"), node(*"hijklmn"), node("o", "p")], 8, [8, 8]),
    ("already as few as they go: unchanged", [node(*"abcdefgh"), node("i")], 8, [8, 1]),
    ("a 4-device pod's GPUs stay on one node", [node("x", "x", "x", "x", "a", "b"), node("y", "y", "y", "y", "c", "d"), node("e", "f", "g", "h")], 8, [8, 8]),
    ("pods sharing GPUs chain their GPUs into one part", [node("x", "x y", "y"), node("z", "z w", "w"), node("a"), node("b")], 4, [4, 4]),
    ("a 5-GPU and a 2-GPU part share a node", [node(*["x"] * 5), node(*["y"] * 5), node("z", "z")], 8, [7, 5]),
    ("parts that fit no better: unchanged", [node(*["x"] * 5), node(*["y"] * 5), node(*["z"] * 5)], 8, [5, 5, 5]),
]


@pytest.mark.parametrize("case,nodes,node_gpus,sizes", FEWEST_ROWS, ids=[r[0] for r in FEWEST_ROWS])
def test_fewest_nodes(case, nodes, node_gpus, sizes):
    result = fewest_nodes(nodes, node_gpus)
    assert sorted(n.gpus for n in result) == sorted(sizes)
    # the same GPUs with the same pods and loads, only regrouped
    assert sorted((g, load) for n in result for g, load in zip(n.gpu_pods, n.loads)) == sorted(
        (g, load) for n in nodes for g, load in zip(n.gpu_pods, n.loads))
    for n in result:
        assert n.gpus <= node_gpus and n.pods == tuple(sorted({p for g in n.gpu_pods for p in g}))
    homes = {}
    for index, n in enumerate(result):
        for p in n.pods:
            assert homes.setdefault(p, index) == index, f"{p} split over two nodes"


def test_fewest_nodes_leaves_nodes_without_per_gpu_pods_alone():
    nodes = [PackedNode(7, ("a",), (Fraction(1),) * 7), PackedNode(7, ("b",), (Fraction(1),) * 7), PackedNode(2, ("c",), (Fraction(1),) * 2)]
    assert fewest_nodes(nodes, 8) == tuple(nodes)
