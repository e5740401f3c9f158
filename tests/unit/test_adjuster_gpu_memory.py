"""gpu-memory pods on a group of nodes whose GPUs differ in memory: each node's own memory, as KAI fits them.

KAI v0.12.0 fits a gpu-memory pod on a node by that node's GPU memory (node_info.go MemoryOfEveryGpuOnNode,
gpu_sharing_node_info.go enoughResourcesOnGpu). The smallest memory of a group's nodes, taken for all of them, called a
60 GiB pod too large for a pool of 80 GB and 40 GB GPUs and left it waiting for good; and a placeholder for it with no
word on memory let the autoscaler bring the cheaper 40 GB node.
"""

from __future__ import annotations

from datetime import timedelta
from fractions import Fraction

import pytest

from raybridge.adjuster.decision.demand import select_demand
from raybridge.adjuster.decision.plan import plan_placeholders
from raybridge.adjuster.decision.placeholders import DELETE_CAPACITY_TAKEN, PROVIDED, ExistingPlaceholder
from raybridge.adjuster.decision.reconcile import reconcile
from raybridge.adjuster.decision.settings import AdjusterSettings
from tests.unit.adjuster_objects import NOW, node, pod

SETTINGS = AdjusterSettings(grace_period_seconds=0)
GIB = 1024
#: Two node types of one pool, as GPU feature discovery labels them: A100 80 GB (KAI reads 81900) and A100 40 GB (40900).
BIG = node("a100-80-0", 4, memory="81920")
SMALL = node("a100-40-0", 4, memory="40960")
BOTH = [BIG, SMALL]


def memory_requirement(group):
    """The memory expression of the placeholder's node affinity (in every term), or None."""
    affinity = group.affinity or {}
    terms = affinity.get("nodeAffinity", {}).get("requiredDuringSchedulingIgnoredDuringExecution", {}).get("nodeSelectorTerms", [])
    found = [e for t in terms for e in t.get("matchExpressions", []) if e["key"] == "nvidia.com/gpu.memory"]
    assert not found or len(found) == len(terms), terms
    return (found[0]["operator"], found[0]["values"]) if found else None


# (case, pods, nodes, settings, expected per pod: ("piece", fraction, floor, requirement) | ("ignored", code, reason fragment))
DEMAND_ROWS = [
    ("60 GiB on 80 GB and 40 GB nodes: only the 80 GB GPUs hold it, its share is of them",
     [pod("big", memory=str(60 * GIB))], BOTH, SETTINGS,
     {"big": ("piece", Fraction(60 * GIB, 81900), 81900, ("Gt", ["81899"]))}),
    ("20 GiB on the same nodes: either holds it, its share of the smaller, which may come; the group as it is",
     [pod("small", memory=str(20 * GIB))], BOTH, SETTINGS,
     {"small": ("piece", Fraction(20 * GIB, 40900), 0, None)}),
    ("both kinds at once: the 60 GiB pods apart, on the 80 GB GPUs",
     [pod("big", memory=str(60 * GIB)), pod("small", memory=str(20 * GIB))], BOTH, SETTINGS,
     {"big": ("piece", Fraction(60 * GIB, 81900), 81900, ("Gt", ["81899"])),
      "small": ("piece", Fraction(20 * GIB, 40900), 0, None)}),
    ("a pod bigger than every node type: refused, naming the largest GPU",
     [pod("huge", memory="90000")], BOTH, SETTINGS,
     {"huge": ("ignored", "memory-exceeds-gpu", "at most 81900 MiB")}),
    ("one MiB over the 40 GB GPU as KAI floors it: the 80 GB ones",
     [pod("edge", memory="40901")], BOTH, SETTINGS,
     {"edge": ("piece", Fraction(40901, 81900), 81900, ("Gt", ["81899"]))}),
    ("exactly the 40 GB GPU as KAI floors it: either",
     [pod("edge", memory="40900")], BOTH, SETTINGS,
     {"edge": ("piece", Fraction(1), 0, None)}),
    ("one node type, one memory: the group as it is, its placeholder requires nothing of memory",
     [pod("big", memory=str(60 * GIB))], [BIG], SETTINGS,
     {"big": ("piece", Fraction(60 * GIB, 81900), 0, None)}),
    ("a gpu-fraction pod beside them: no memory, no requirement",
     [pod("half", "0.5")], BOTH, SETTINGS,
     {"half": ("piece", Fraction(1, 2), 0, None)}),
    ("no node known (a pool scaled from zero): both kinds ask for GPUs that hold the largest, at the fallback share",
     [pod("big", memory=str(60 * GIB)), pod("small", memory=str(20 * GIB))], None, SETTINGS,
     {"big": ("piece", Fraction(1, 10), 61500, ("Gt", ["61499"])),
      "small": ("piece", Fraction(1, 10), 61500, ("Gt", ["61499"]))}),
    ("no memory label to require (--gpu-memory-label ''): the groups still split, the placeholders say nothing",
     [pod("big", memory=str(60 * GIB))], BOTH, AdjusterSettings(grace_period_seconds=0, gpu_memory_label=""),
     {"big": ("piece", Fraction(60 * GIB, 81900), 81900, None)}),
    ("another label (Karpenter's AWS one): the requirement names it",
     [pod("big", memory=str(60 * GIB))], BOTH, AdjusterSettings(grace_period_seconds=0, gpu_memory_label="karpenter.k8s.aws/instance-gpu-memory"),
     {"big": ("piece", Fraction(60 * GIB, 81900), 81900, "karpenter.k8s.aws/instance-gpu-memory")}),
]


@pytest.mark.parametrize("case,pods,nodes,settings,expected", DEMAND_ROWS, ids=[r[0] for r in DEMAND_ROWS])
def test_each_pod_is_fitted_to_the_nodes_whose_gpus_hold_it(case, pods, nodes, settings, expected):
    selection = select_demand(pods, nodes, settings, NOW)
    got = {}
    for piece in selection.pieces:
        group = piece.group
        requirement = memory_requirement(group)
        if requirement is None and group.memory_requirement is not None:
            requirement = group.memory_requirement["key"]
        got[piece.pod.split("/")[1]] = ("piece", piece.fraction, group.gpu_memory_floor_mib, requirement)
    for ignored in selection.ignored:
        got[ignored.pod.split("/")[1]] = ("ignored", ignored.code, ignored.reason)
    assert set(got) == set(expected), got
    for name, want in expected.items():
        if want[0] == "ignored":
            assert got[name][:2] == want[:2] and want[2] in got[name][2], got[name]
        else:
            assert got[name] == want, (name, got[name])


def test_a_group_s_nodes_are_those_whose_gpus_hold_it():
    """The 80 GB class is planned on the 80 GB nodes alone: their GPUs per node, not the 40 GB nodes' 8."""
    big8 = node("a100-80-0", 4, memory="81920")
    small8 = node("a100-40-0", 8, memory="40960")
    [piece] = select_demand([pod("big", memory=str(60 * GIB))], [big8, small8], SETTINGS, NOW).pieces
    shape = select_demand([pod("big", memory=str(60 * GIB))], [big8, small8], SETTINGS, NOW).shapes[piece.group]
    assert (shape.nodes, shape.node_gpus, shape.gpu_memory_mib) == (1, 4, 81900)


def test_the_burst_s_placeholders_ask_for_gpus_that_hold_their_pods():
    """8 pods of 60 GiB and 8 of 20 GiB on 4-GPU nodes of 80 GB and 40 GB: the 60 GiB pods, one a GPU (two do not fit
    81900), on two placeholders of 4 that require 80 GB GPUs; the 20 GiB pods, one a 40 GB GPU (two are 40960 >
    40900), on two of 4 that either type holds. Before: 8 pods refused and 8 GPUs asked for any node."""
    pods = [pod(f"big-{i}", memory=str(60 * GIB)) for i in range(8)] + [pod(f"small-{i}", memory=str(20 * GIB)) for i in range(8)]
    plan = plan_placeholders(pods, BOTH, SETTINGS, NOW)
    assert not plan.ignored, plan.ignored
    asked = sorted((p.gpus, memory_requirement_of(p.affinity), sorted({name.split("-")[0].split("/")[1] for name in p.pods}))
                   for p in plan.placeholders)
    assert asked == [(4, "", ["small"]), (4, "", ["small"]), (4, "81899", ["big"]), (4, "81899", ["big"])], asked


def memory_requirement_of(affinity):
    if not affinity:
        return ""
    terms = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    [value] = {e["values"][0] for t in terms for e in t["matchExpressions"] if e["key"] == "nvidia.com/gpu.memory"}
    return value


def test_the_requirement_goes_into_every_term_of_the_pods_own_affinity():
    """Terms are ORed and a term's expressions ANDed: the memory is required whichever term a node matches."""
    either = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}]}}}
    nodes = [node("big-a", 4, memory="81920", labels={"zone": "a"}), node("small-b", 4, memory="40960", labels={"zone": "b"})]
    [placeholder] = plan_placeholders([pod("big", memory=str(60 * GIB), affinity=either)], nodes, SETTINGS, NOW).placeholders
    terms = placeholder.affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert [sorted((e["key"], e["operator"], tuple(e["values"])) for e in t["matchExpressions"]) for t in terms] == [
        [("nvidia.com/gpu.memory", "Gt", ("81899",)), ("zone", "In", ("a",))],
        [("nvidia.com/gpu.memory", "Gt", ("81899",)), ("zone", "In", ("b",))],
    ]


def test_a_node_too_small_for_the_pods_its_placeholder_was_made_for_holds_none_of_them():
    """A placeholder made before any node was known (0.1 a pod) got a 40 GB node: its 60 GiB pods do not fit its GPUs,
    whatever room is left there, so they are asked for again, for 80 GB GPUs. Before, the smallest memory of the group
    called them too large for every GPU: the placeholder was deleted and nothing asked for them again."""
    pods = [pod(f"big-{i}", memory=str(60 * GIB)) for i in range(4)]
    provided = ExistingPlaceholder("ph", "nvidia-x-61500m", 1, PROVIDED, tuple(f"team/big-{i}" for i in range(4)), NOW - timedelta(seconds=5),
                                   "a100-40-0")
    result = reconcile(pods, BOTH, [provided], SETTINGS, NOW, provision_timeout_seconds=300, name_prefix="rb")
    assert dict(result.delete) == {"ph": DELETE_CAPACITY_TAKEN}
    assert not result.covered_pods and not result.plan.ignored
    assert sorted((p.placeholder.gpus, memory_requirement_of(p.placeholder.affinity)) for p in result.create) == [(4, "81899")]


def test_room_on_a_node_holds_a_waiting_pod_by_that_node_s_own_gpu_memory():
    """A placeholder of the 20 GiB pods on an 80 GB node: three a GPU there (3 x 20480 <= 81900), where the plan, on
    the 40 GB GPUs it may also get, counted one a GPU. The node's room holds all 8 on 3 GPUs: nothing asked again."""
    pods = [pod(f"small-{i}", memory=str(20 * GIB)) for i in range(8)]
    group = plan_placeholders(pods, BOTH, SETTINGS, NOW).placeholders[0].group
    provided = ExistingPlaceholder("ph", group, 3, PROVIDED, tuple(f"team/small-{i}" for i in range(8)), NOW - timedelta(seconds=5), "a100-80-0")
    result = reconcile(pods, BOTH, [provided], SETTINGS, NOW, provision_timeout_seconds=300, name_prefix="rb")
    assert result.keep == ("ph",) and len(result.covered_pods) == 8 and not result.create


def test_a_pod_larger_than_every_gpu_of_a_pool_seen_before_is_refused_once_the_pool_is_back_to_zero() -> None:
    """A gpu-memory pod larger than every GPU of a pool scaled from zero cost an empty node: once that node was known the
    pod was refused (memory-exceeds-gpu), and once the empty node was consolidated, the pool was unknown again and the
    pod asked another node for. A pass now says what GPU memory each pool's nodes had (`memories_seen`, which the
    controller keeps for an hour), and a pass that knows no node of the pool refuses such a pod by it."""
    from raybridge.adjuster.decision.demand import ClusterSnapshot
    from raybridge.adjuster.decision.plan import plan_in

    pods = [pod("huge", memory="100000"), pod("small", memory="20000")]
    settings = AdjusterSettings()
    seen = plan_in(ClusterSnapshot.read(pods, [node("h100-0", 8, memory="81559")], NOW), settings)
    assert {i.pod: i.code for i in seen.ignored} == {"team/huge": "memory-exceeds-gpu"}
    assert list(seen.memories_seen.values()) == [81500]  # KAI's reading of 81559
    forgot = plan_in(ClusterSnapshot.read(pods, [], NOW), settings)  # the node consolidated: nothing known
    assert not forgot.ignored and sorted(p for ph in forgot.placeholders for p in ph.pods) == ["team/huge", "team/small"]
    remembered = plan_in(ClusterSnapshot(ClusterSnapshot.read(pods, [], NOW).pods, [], NOW, memories_seen=seen.memories_seen), settings)
    assert [(i.pod, i.code) for i in remembered.ignored] == [("team/huge", "memory-exceeds-gpu")]
    assert "had at most 81500 MiB" in remembered.ignored[0].reason and "when one was last seen" in remembered.ignored[0].reason
    assert [p for ph in remembered.placeholders for p in ph.pods] == ["team/small"]
