"""Which pending pods are demand for new GPUs, how much, and in which constraint group."""

from __future__ import annotations

import math
import random
from fractions import Fraction

import pytest

from raybridge.adjuster.decision.settings import AdjusterSettings
from raybridge.adjuster.decision.demand import select_demand
from raybridge.kai.share import parse_fraction, parse_whole
from tests.unit.adjuster_objects import NOW, node, pod

SETTINGS = AdjusterSettings(grace_period_seconds=10)  # the grace period rows; shipped: 0
H100 = node("h100-0", 8, memory="81559")


def judge(p, nodes=None, settings=SETTINGS, pod_groups=()):
    selection = select_demand([p], nodes, settings, NOW, pod_groups)
    if selection.pieces:
        piece = selection.pieces[0]
        return ("piece", piece.fraction, piece.devices, piece.source)
    if selection.ignored:
        return ("ignored", selection.ignored[0].code, selection.ignored[0].reason)
    if selection.skipped:
        return ("skipped", next(iter(selection.skipped)))
    return None


QUOTA_MESSAGE = (
    "Node-Pool 'default': OverLimit: team-a quota has reached the allowable limit of GPUs. "
    "Limit is 2 GPUs, currently 2 GPUs allocated and workload requested 0.5 GPUs."
)
NONPREEMPTIBLE_MESSAGE = (
    "NonPreemptibleOverQuota: Non-preemptible workload is over quota. Workload requested 1 GPUs, but team-a quota is "
    "2 GPUs, while 2 GPUs are already allocated for non-preemptible pods. Use a preemptible workload to go over quota."
)
NODE_SHORTAGE_MESSAGE = "Not enough resources for the workload: node-group(s) didn't have enough resources: GPUs."

# (case, pod, nodes, expected)
#   expected: ("piece", fraction, devices, source) | ("ignored", code, reason fragment) | ("skipped", code) | None
SELECTION_ROWS = [
    ("fraction counts", pod("a", "0.5"), None, ("piece", Fraction(1, 2), 1, "gpu-fraction")),
    ("decimal stays exact", pod("a", "0.11"), None, ("piece", Fraction(11, 100), 1, "gpu-fraction")),
    ("exponent form", pod("a", "25e-2"), None, ("piece", Fraction(1, 4), 1, "gpu-fraction")),
    ("several devices", pod("a", "0.3", devices="4"), None, ("piece", Fraction(3, 10), 4, "gpu-fraction")),
    ("memory converts with the node's GPU memory as KAI floors it (81900)", pod("a", memory="40960"), [node("n", memory="81920")], ("piece", Fraction(40960, 81900), 1, "gpu-memory")),
    ("memory without known nodes falls back", pod("a", memory="40960"), None, ("piece", Fraction(1, 10), 1, "gpu-memory-fallback")),
    ("memory on nodes without a memory label falls back", pod("a", memory="1000"), [node("n", memory=None)], ("piece", Fraction(1, 10), 1, "gpu-memory-fallback")),
    ("a pod for AMD GPUs: KAI shares NVIDIA's alone", pod("a", memory="49152"), [node("m", 8, "amd", memory="192G")], ("ignored", "vendor-not-shared", "amd.com/gpu")),
    ("memory larger than the GPU", pod("a", memory="90000"), [H100], ("ignored", "memory-exceeds-gpu", "81500 MiB")),
    ("the label's MiB are more than KAI's floored memory", pod("a", memory="81559"), [H100], ("ignored", "memory-exceeds-gpu", "81500 MiB")),
    ("KAI's floored memory is a whole GPU", pod("a", memory="81500"), [H100], ("piece", Fraction(1), 1, "gpu-memory")),
    ("fraction wins over memory", pod("a", "0.25", memory="80000"), [H100], ("piece", Fraction(1, 4), 1, "gpu-fraction")),
    # not waiting for nodes
    ("bound pod", pod("a", "0.5", node_name="n1"), None, ("skipped", "bound")),
    ("succeeded", pod("a", "0.5", phase="Succeeded"), None, ("skipped", "finished")),
    ("failed", pod("a", "0.5", phase="Failed"), None, ("skipped", "finished")),
    ("other scheduler", pod("a", "0.5", scheduler="default-scheduler"), None, ("ignored", "other-scheduler", "not kai-scheduler")),
    ("no scheduler name is the default scheduler", pod("a", "0.5", scheduler=None), None, ("ignored", "other-scheduler", "default-scheduler")),
    ("not yet looked at", pod("a", "0.5", conditions=[]), None, ("ignored", "not-unschedulable", "no PodScheduled")),
    ("scheduled condition true", pod("a", "0.5", status="True", reason=""), None, ("ignored", "not-unschedulable", "PodScheduled True")),
    ("another reason", pod("a", "0.5", reason="SchedulerError"), None, ("ignored", "not-unschedulable", "SchedulerError")),
    ("inside the grace period", pod("a", "0.5", waited=3), None, ("ignored", "grace-period", "3.0 s, under the 10 s")),
    ("just past the grace period", pod("a", "0.5", waited=10), None, ("piece", Fraction(1, 2), 1, "gpu-fraction")),
    ("clock skew: transition in the future", pod("a", "0.5", waited=-30), None, ("ignored", "grace-period", "0.0 s")),
    ("no transition time", pod("a", "0.5", waited=None), None, ("ignored", "grace-period", "no valid lastTransitionTime")),
    ("quota: OverLimit message", pod("a", "0.5", message=QUOTA_MESSAGE), None, ("ignored", "quota-blocked", "OverLimit")),
    ("quota: non-preemptible over quota", pod("a", "0.5", message=NONPREEMPTIBLE_MESSAGE), None, ("ignored", "quota-blocked", "NonPreemptibleOverQuota")),
    ("quota: missing queue", pod("a", "0.5", message="QueueDoesNotExist: queue team-x does not exist."), None, ("ignored", "quota-blocked", "QueueDoesNotExist")),
    ("node shortage counts", pod("a", "0.5", message=NODE_SHORTAGE_MESSAGE), None, ("piece", Fraction(1, 2), 1, "gpu-fraction")),
    ("being deleted", pod("a", "0.5") | {"metadata": {"name": "a", "namespace": "team", "annotations": {"gpu-fraction": "0.5"}, "deletionTimestamp": "2025-06-01T11:59:00Z"}}, None, ("ignored", "deleting", "being deleted")),
    ("whole GPUs are the autoscaler's", pod("a", "0.5", containers=[{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]), None, ("ignored", "whole-gpu-request", "1 nvidia.com/gpu")),
    # bad values
    ("NaN", pod("a", "NaN"), None, ("ignored", "bad-annotation", "NaN or infinite")),
    ("inf", pod("a", "inf"), None, ("ignored", "bad-annotation", "NaN or infinite")),
    ("-Infinity", pod("a", "-Infinity"), None, ("ignored", "bad-annotation", "NaN or infinite")),
    ("zero", pod("a", "0"), None, ("ignored", "bad-annotation", "out of range")),
    ("one", pod("a", "1"), None, ("ignored", "bad-annotation", "out of range")),
    ("above one", pod("a", "1.5"), None, ("ignored", "bad-annotation", "out of range")),
    ("negative", pod("a", "-0.5"), None, ("ignored", "bad-annotation", "out of range")),
    ("huge exponent", pod("a", "1e999999999"), None, ("ignored", "bad-annotation", "out of range")),
    ("tiny exponent", pod("a", "1e-999999999"), None, ("ignored", "bad-annotation", "out of range")),
    ("words", pod("a", "half"), None, ("ignored", "bad-annotation", "not a number")),
    ("empty", pod("a", ""), None, ("ignored", "bad-annotation", "both empty or absent")),
    ("empty fraction, valid memory: KAI reads the memory", pod("a", "", memory="40960"), [node("n", memory="81920")], ("piece", Fraction(40960, 81900), 1, "gpu-memory")),
    ("empty fraction and empty memory", pod("a", "", memory=""), None, ("ignored", "bad-annotation", "both empty or absent")),
    ("empty fraction, bad memory", pod("a", "", memory="lots"), None, ("ignored", "bad-annotation", "not a whole number")),
    ("padded", pod("a", " 0.5"), None, ("ignored", "bad-annotation", "not a number")),
    ("Go's hex float, which KAI reads", pod("a", "0x1p-2"), None, ("piece", Fraction(1, 4), 1, "gpu-fraction")),
    ("'_' between digits, which KAI reads", pod("a", "0.2_5"), None, ("piece", Fraction(1, 4), 1, "gpu-fraction")),
    ("a trailing newline", pod("a", "0.5\n"), None, ("ignored", "bad-annotation", "not a number")),
    ("Arabic-Indic digits", pod("a", "\u0660.\u0665"), None, ("ignored", "bad-annotation", "not a number")),
    ("number, not a string", pod("a", annotations={"gpu-fraction": 0.5}), None, ("ignored", "bad-annotation", "not a string")),
    ("very long", pod("a", "0." + "1" * 100), None, ("ignored", "bad-annotation", "characters long")),
    ("memory not a whole number", pod("a", memory="2.5"), None, ("ignored", "bad-annotation", "not a whole number")),
    ("memory with a unit", pod("a", memory="2Gi"), None, ("ignored", "bad-annotation", "not a whole number")),
    ("memory zero", pod("a", memory="0"), None, ("ignored", "bad-annotation", "at least 1")),
    ("memory negative", pod("a", memory="-100"), None, ("ignored", "bad-annotation", "at least 1")),
    ("memory in full-width digits", pod("a", memory="\uff11\uff10\uff12\uff14"), None, ("ignored", "bad-annotation", "not a whole number")),
    ("devices with a trailing newline", pod("a", "0.5", devices="2\n"), None, ("ignored", "bad-annotation", "not a whole number")),
    ("devices zero", pod("a", "0.5", devices="0"), None, ("ignored", "bad-annotation", "at least 1")),
    ("devices fractional", pod("a", "0.5", devices="0.5"), None, ("ignored", "bad-annotation", "not a whole number")),
    ("devices NaN", pod("a", "0.5", devices="NaN"), None, ("ignored", "bad-annotation", "NaN or infinite")),
    ("more devices than any node has", pod("a", "0.5", devices="16"), [H100], ("ignored", "too-many-devices", "16 devices")),
    ("devices within the node", pod("a", "0.5", devices="8"), [H100], ("piece", Fraction(1, 2), 8, "gpu-fraction")),
    # no node of its group known (a pool scaled from zero): the bound on what any GPU node holds, before any work
    ("300000 devices, no node known", pod("a", "0.5", devices="300000"), None, ("ignored", "too-many-devices", "no GPU node holds more than 64")),
    ("65 devices, no node known", pod("a", "0.5", devices="65"), None, ("ignored", "too-many-devices", "65 devices")),
    ("64 devices, no node known", pod("a", "0.5", devices="64"), None, ("piece", Fraction(1, 2), 64, "gpu-fraction")),
    ("18 digits of devices", pod("a", "0.5", devices="9" * 18), None, ("ignored", "too-many-devices", "no GPU node holds")),
    ("bad vendor annotation", pod("a", "0.5", annotations={"raybridge.io/gpu-vendor": "intel"}), None, ("ignored", "bad-annotation", "intel")),
    ("bad nodeSelector", pod("a", "0.5", nodeSelector={"pool": 7}), None, ("ignored", "bad-constraints", "nodeSelector")),
    ("bad tolerations", pod("a", "0.5", tolerations="all"), None, ("ignored", "bad-constraints", "tolerations")),
    ("bad affinity operator", pod("a", "0.5", affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "k", "operator": "Near"}]}]}}}), None, ("ignored", "bad-constraints", "Near")),
    ("no annotations: not ours", pod("a"), None, None),
    ("no name", pod("a", "0.5") | {"metadata": {"namespace": "team", "annotations": {"gpu-fraction": "0.5"}}}, None, ("ignored", "malformed", "metadata.name")),
    ("spec is a string", pod("a", "0.5") | {"spec": "x"}, None, ("ignored", "malformed", "no spec")),
]


@pytest.mark.parametrize("case,p,nodes,expected", SELECTION_ROWS, ids=[r[0] for r in SELECTION_ROWS])
def test_selection(case, p, nodes, expected):
    got = judge(p, nodes)
    if expected is None or expected[0] != "ignored":
        assert got == expected
    else:
        assert got[:2] == expected[:2], got
        assert expected[2] in got[2], got


def test_grace_period_zero_counts_pods_without_a_timestamp():
    assert judge(pod("a", "0.5", waited=None), settings=AdjusterSettings(grace_period_seconds=0))[0] == "piece"
    assert judge(pod("a", "0.5", waited=1), settings=AdjusterSettings(grace_period_seconds=0))[0] == "piece"


def test_other_scheduler_name_is_configurable():
    settings = AdjusterSettings(scheduler_name="my-kai")
    assert judge(pod("a", "0.5", scheduler="my-kai"), settings=settings)[0] == "piece"
    assert judge(pod("a", "0.5"), settings=settings)[1] == "other-scheduler"


def test_pod_group_condition_marks_quota_blocking():
    p = pod("a", "0.5", annotations={"pod-group-name": "pg-a"})
    pg = {
        "kind": "PodGroup",
        "metadata": {"name": "pg-a", "namespace": "team"},
        "status": {"schedulingConditions": [{"type": "UnschedulableOnNodePool", "status": "True", "reasons": [{"reason": "OverLimit", "message": "x"}]}]},
    }
    assert judge(p, pod_groups=[pg])[1] == "quota-blocked"
    elsewhere = pg | {"metadata": {"name": "pg-a", "namespace": "other"}}
    assert judge(p, pod_groups=[elsewhere])[0] == "piece"
    node_shortage = pg | {"status": {"schedulingConditions": [{"status": "True", "reasons": [{"reason": "Not enough resources for the workload"}]}]}}
    assert judge(p, pod_groups=[node_shortage])[0] == "piece"


# (case, pod, nodes, default vendor, expected vendor)
VENDOR_ROWS = [
    ("default nvidia", pod("a", "0.5"), None, "nvidia", "nvidia"),
    ("default flag amd", pod("a", "0.5"), None, "amd", "amd"),
    ("annotation amd", pod("a", "0.5", annotations={"raybridge.io/gpu-vendor": "amd"}), None, "nvidia", "amd"),
    ("annotation upper case", pod("a", "0.5", annotations={"raybridge.io/gpu-vendor": "AMD"}), None, "nvidia", "amd"),
    ("only AMD nodes match its selector", pod("a", "0.5", nodeSelector={"pool": "mi300"}), [node("m", 8, "amd", labels={"pool": "mi300"}), node("h", 8, labels={"pool": "h100"})], "nvidia", "amd"),
    ("both vendors match: the default", pod("a", "0.5"), [node("m", 8, "amd"), node("h", 8)], "nvidia", "nvidia"),
    ("AMD taint tolerated only", pod("a", "0.5", tolerations=[{"key": "amd.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]),
     [node("m", 8, "amd", taints=[{"key": "amd.com/gpu", "effect": "NoSchedule"}]), node("h", 8, taints=[{"key": "nvidia.com/gpu", "effect": "NoSchedule"}])], "nvidia", "amd"),  # fmt: skip
    ("no nodes: an AMD label key in the selector", pod("a", "0.5", nodeSelector={"amd.com/gpu.product-name": "MI300X"}), None, "nvidia", "amd"),
    ("affinity In an AMD label", pod("a", "0.5", affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["mi300"]}]}]}}}), [node("m", 8, "amd", labels={"gpu": "mi300"}), node("h", 8, labels={"gpu": "h100"})], "nvidia", "amd"),  # fmt: skip
]


@pytest.mark.parametrize("case,p,nodes,default,expected", VENDOR_ROWS, ids=[r[0] for r in VENDOR_ROWS])
def test_vendor(case, p, nodes, default, expected):
    """The vendor a pod's GPUs are of; KAI shares NVIDIA's alone, so an AMD pod is ignored, naming AMD's GPUs."""
    selection = select_demand([p], nodes, AdjusterSettings(default_vendor=default), NOW)
    resource_key = {"amd": "amd.com/gpu", "nvidia": "nvidia.com/gpu"}[expected]
    if expected == "nvidia":
        assert selection.pieces, selection.ignored
        assert (selection.pieces[0].group.vendor, selection.pieces[0].group.resource_key) == (expected, resource_key)
    else:
        [ignored] = selection.ignored
        assert ignored.code == "vendor-not-shared" and f"a node with {resource_key} would not let" in ignored.reason


def groups_of(pods, nodes=None):
    selection = select_demand(pods, nodes, SETTINGS, NOW)
    return {p.pod.split("/")[1]: p.group for p in selection.pieces}


def test_constraint_groups_split_and_merge():
    pods = [
        pod("plain1", "0.5"),
        pod("plain2", "0.5", tolerations=[{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}]),
        pod("sel-a", "0.5", nodeSelector={"pool": "a", "zone": "1"}),
        pod("sel-a-reordered", "0.5", nodeSelector={"zone": "1", "pool": "a"}),
        pod("sel-b", "0.5", nodeSelector={"pool": "b"}),
        pod("tolerant", "0.5", tolerations=[{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}]),
        pod("aff", "0.5", affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["b", "a"]}]}]}}}),
        pod("aff-same", "0.5", affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["a", "b"]}]}]}}}),
    ]
    g = groups_of(pods)
    assert g["plain1"] == g["plain2"]  # the default not-ready toleration says nothing about the node group
    assert g["sel-a"] == g["sel-a-reordered"]
    assert g["aff"] == g["aff-same"]
    distinct = {g[k] for k in ("plain1", "sel-a", "sel-b", "tolerant", "aff")}
    assert len(distinct) == 5
    assert g["sel-a"].node_selector == {"pool": "a", "zone": "1"}
    assert g["tolerant"].tolerations == [{"effect": "NoSchedule", "key": "spot", "operator": "Exists"}]
    assert g["aff"].affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == ["a", "b"]


# (case, pod, nodes, expected fraction) - gpu-memory against the GPUs of the nodes the pod may use
MEMORY_ROWS = [
    ("the smallest GPU among the nodes it may use", pod("a", memory="20480"), [node("big", memory="81920"), node("small", memory="40960")], Fraction(20480, 40900)),
    ("its selector picks the big ones", pod("a", memory="20480", nodeSelector={"size": "big"}), [node("big", memory="81920", labels={"size": "big"}), node("small", memory="40960")], Fraction(20480, 81900)),
    ("a tainted node it cannot use does not count", pod("a", memory="20480"), [node("big", memory="81920"), node("small", memory="40960", taints=[{"key": "x", "effect": "NoSchedule"}])], Fraction(20480, 81900)),
    ("PreferNoSchedule does not keep it off", pod("a", memory="20480"), [node("big", memory="81920"), node("small", memory="40960", taints=[{"key": "x", "effect": "PreferNoSchedule"}])], Fraction(20480, 40900)),
    ("only nodes of its vendor", pod("a", memory="20480"), [node("h", memory="81920"), node("m", 8, "amd", memory="20G")], Fraction(20480, 81900)),
    ("KAI floors the GPU memory to 100 MiB", pod("a", memory="2000"), [node("h", memory="81559")], Fraction(2000, 81500)),
    ("GFD's bytes read as KAI reads them", pod("a", memory="20480"), [node("h", memory=str(81920 * 2**20))], Fraction(20480, 81900)),
]


@pytest.mark.parametrize("case,p,nodes,expected", MEMORY_ROWS, ids=[r[0] for r in MEMORY_ROWS])
def test_memory_conversion(case, p, nodes, expected):
    selection = select_demand([p], nodes, SETTINGS, NOW)
    assert [x.fraction for x in selection.pieces] == [expected], selection.ignored


def test_memory_fallback_fraction_is_a_setting():
    selection = select_demand([pod("a", memory="100")], None, AdjusterSettings(memory_fallback_fraction=Fraction(1, 4)), NOW)
    assert selection.pieces[0].fraction == Fraction(1, 4)


# (raw, value or None, problem fragment)
PARSE_ROWS = [
    ("0.5", Fraction(1, 2), None),
    ("+0.5", Fraction(1, 2), None),
    (".5", Fraction(1, 2), None),
    ("0.999999", Fraction(999999, 1000000), None),
    ("5E-1", Fraction(1, 2), None),
    ("1_0", None, "out of range"),  # Go reads 10
    ("0_1", None, "out of range"),  # Go reads 1: '_' between digits, leading zero and all
    ("0x1p-1", Fraction(1, 2), None),
    ("0x_1p-1", Fraction(1, 2), None),
    ("0x1p-1_0", Fraction(1, 1024), None),
    ("1_.5", None, "not a number"),
    ("0,5", None, "not a number"),
    ("0.5\n", None, "not a number"),
    ("0.5 ", None, "not a number"),
    ("\uff10.\uff15", None, "not a number"),
    ("Inf", None, "NaN or infinite"),
    ("nan", None, "NaN"),
    ("-nan", None, "NaN"),
    ("1e400", None, "out of range"),
    (None, None, "not a string"),
    ([], None, "not a string"),
]


@pytest.mark.parametrize("raw,value,problem", PARSE_ROWS)
def test_parse_fraction(raw, value, problem):
    got, why = parse_fraction(raw)
    assert got == value
    assert (why is None) if problem is None else (problem in why)


@pytest.mark.parametrize("raw,value", [("1", 1), ("+8", 8), ("08", 8), ("1e3", None), ("9" * 19, None), ("", None), (" 1", None)])
def test_parse_whole(raw, value):
    assert parse_whole(raw, "x", 1)[0] == value


GARBAGE = [None, 0, -1, 1.5, math.nan, math.inf, "", "x", [], [1, "a"], {}, {"a": None}, True, {"nested": {"deep": [None]}}]


def test_garbage_never_crashes_and_never_counts():
    rng = random.Random(7)
    template = pod("a", "0.5", devices="2", nodeSelector={"k": "v"}, tolerations=[{"key": "k", "operator": "Exists"}])
    paths = [
        ("metadata",), ("metadata", "annotations"), ("metadata", "annotations", "gpu-fraction"),
        ("metadata", "annotations", "gpu-fraction-num-devices"), ("metadata", "name"), ("metadata", "namespace"),
        ("spec",), ("spec", "nodeSelector"), ("spec", "tolerations"), ("spec", "affinity"), ("spec", "containers"),
        ("spec", "schedulerName"), ("spec", "nodeName"), ("status",), ("status", "phase"), ("status", "conditions"),
    ]  # fmt: skip
    nodes_garbage = [node("n"), {"metadata": None}, {"metadata": {"name": "x", "labels": []}, "status": {"allocatable": {"nvidia.com/gpu": "NaN"}}}, None, 7]
    for _ in range(400):
        p = __import__("copy").deepcopy(template)
        for _ in range(rng.randint(1, 3)):
            path = rng.choice(paths)
            target = p
            for part in path[:-1]:
                target = target.get(part) if isinstance(target, dict) else None
            if isinstance(target, dict):
                target[path[-1]] = rng.choice(GARBAGE)
        selection = select_demand([p, "not a pod", None], nodes_garbage, SETTINGS, NOW)
        for piece in selection.pieces:  # whatever survives is a valid piece
            assert 0 < piece.fraction < 1 and piece.devices >= 1
