"""`--policy kai`: KAI's node-scale-adjuster, one pass, as KAI's own tests pin it down, quirks included.

Rows marked with a KAI test name come from github.com/NVIDIA/KAI-Scheduler (commit 72de64fc):
  CA = pkg/nodescaleadjuster/scale_adjuster/calculator_test.go
  SA = pkg/nodescaleadjuster/scale_adjuster/scale_adjuster_test.go
Their pods are built like KAI's test-utils (CreateUnschedulableFractionPod, CreateScalingPod): no
lastTransitionTime, no grace period, nothing but the annotations and the Unschedulable condition.
"""

from __future__ import annotations

import math

import pytest

from raybridge.adjuster.decision.settings import AdjusterSettings
from raybridge.adjuster.decision.plan import plan_placeholders
from raybridge.kai.node_scale_adjuster import go_int64, go_parse_float, go_parse_int, go_round, kai_pass, needed_devices
from tests.unit.adjuster_objects import NOW

SCALING_NS = "kai-scale-adjust"


def frac(namespace, name, fraction, devices=1):
    """KAI test-utils CreateUnschedulableFractionPod: num-devices only written when above 1."""
    ann = {"gpu-fraction": fraction}
    if devices > 1:
        ann["gpu-fraction-num-devices"] = str(devices)
    return unschedulable(namespace, name, ann)


def mem(namespace, name, memory, devices=1):
    ann = {"gpu-memory": memory}
    if devices > 1:
        ann["gpu-fraction-num-devices"] = str(devices)
    return unschedulable(namespace, name, ann)


def unschedulable(namespace, name, annotations, phase="Pending", conditions=True, scheduler="kai-scheduler", node_name=None):
    spec = {"schedulerName": scheduler} if scheduler else {}
    if node_name:
        spec["nodeName"] = node_name
    status = {"phase": phase}
    if conditions:
        status["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]
    return {"metadata": {"name": name, "namespace": namespace, "annotations": annotations}, "spec": spec, "status": status}


def scaling(namespace, name, devices, phase="Pending"):
    """KAI test-utils CreateScalingPod."""
    return {
        "metadata": {
            "name": f"{namespace}-{name}",
            "namespace": SCALING_NS,
            "labels": {"shared-gpu-pod-name": name, "shared-gpu-pod-namespace": namespace},
        },
        "spec": {"containers": [{"name": "scaling-pod", "resources": {"requests": {"nvidia.com/gpu": str(devices)}, "limits": {"nvidia.com/gpu": str(devices)}}}]},
        "status": {"phase": phase},
    }


# (KAI test, pods, pods counted, need)
CALCULATOR_ROWS = [
    ("CA No pods", [], 0, 0),
    ("CA Single pod, all fit into a single device", [frac("ns1", "pod1", "0.2", 2)], 1, 1),
    ("CA Single pod, sum devices is an integer", [frac("ns1", "pod1", "0.5", 2)], 1, 1),
    ("CA Single pod, sum devices is greater than 1", [frac("ns1", "pod1", "0.6", 2)], 1, 2),
    ("CA Multiple pods require single device", [frac("ns1", "pod1", "0.1", 2), frac("ns2", "pod2", "0.5", 1)], 2, 1),
    ("CA Multiple pods require single device - second option", [frac("ns1", "pod1", "0.2", 2), frac("ns2", "pod2", "0.1", 3)], 2, 1),
    ("CA Multiple pods require single device - third option", [frac(f"ns{i}", f"pod{i}", "0.1", 2) for i in range(1, 6)], 5, 1),
    ("CA Multiple pods require multiple devices", [frac("ns1", "pod1", "0.3", 2), frac("ns2", "pod2", "0.5", 1)], 2, 2),
    ("CA Single pod requires GPU memory", [mem("ns1", "pod1", "1024")], 1, 1),
    ("CA Multiple pods require GPU memory", [mem("ns1", f"pod{i}", "1024") for i in range(1, 12)], 11, 2),
    ("CA Mixture of GPU fraction pods and GPU memory pods", [frac("ns1", "fraction-pod1", "0.9", 2), *[mem("ns1", f"mem-pod{i}", "1024") for i in (1, 2, 3)]], 4, 3),
    ("CA Pod Without GPU Fraction annotation", [unschedulable("ns1", "pod1", {})], 0, 0),
    ("CA Pod With invalid Num GPU Devices annotation (fraction abc)", [unschedulable("ns1", "pod1", {"gpu-fraction": "abc"})], 0, 0),
    ("CA Multiple pods, some are invalid", [unschedulable("ns1", "pod1", {}), frac("ns2", "pod2", "0.5")], 1, 1),
    ("CA Pod With invalid Num GPU Devices annotation (devices 0.5)", [unschedulable("namespace1", "pod1", {"gpu-fraction": "0.5", "gpu-fraction-num-devices": "0.5"})], 0, 0),
]


@pytest.mark.parametrize("case,pods,counted,need", CALCULATOR_ROWS, ids=[r[0] for r in CALCULATOR_ROWS])
def test_kai_calculator(case, pods, counted, need):
    got_need, got_counted, _ = needed_devices(pods, 0.1)
    assert (len(got_counted), got_need) == (counted, need)


# (KAI test, pending pods, existing scaling pods, cooldown seconds, scaling pods after the pass {name: GPUs}, in cooldown)
PASS_ROWS = [
    ("SA no pods", [], [], 60, {}, False),
    ("SA simple scenario with multiple pods - nothing to adjust",
     [frac("ns1", "pod1", "0.7"), frac("ns2", "pod2", "0.7"), frac("ns3", "pod3", "0.1")],
     [scaling("ns1", "pod1", 1), scaling("ns2", "pod2", 1)], 60, {"ns1-pod1": 1, "ns2-pod2": 1}, False),
    ("SA two scaling pods - one is no longer needed",
     [frac("ns1", "pod1", "0.7")], [scaling("ns1", "pod1", 1), scaling("ns2", "pod2", 1)], 60, {"ns1-pod1": 1}, True),
    ("SA single unschedulable GPU fraction pod - create scaling pod", [frac("ns1", "pod1", "0.7")], [], 60, {"ns1-pod1": 1}, False),
    ("SA single unschedulable GPU memory pod - create scaling pod", [mem("ns1", "pod1", "1024")], [], 60, {"ns1-pod1": 1}, False),
    ("SA two unschedulable pods - create single scaling pod", [frac("ns1", "pod1", "0.7"), frac("ns2", "pod2", "0.1")], [], 60, {"ns1-pod1": 1}, False),
    ("SA two unschedulable pods - create two scaling pods", [frac("ns1", "pod1", "0.7"), frac("ns2", "pod2", "0.7")], [], 60, {"ns1-pod1": 1, "ns2-pod2": 1}, False),
    ("SA two unschedulable pods and one scaling pod - create another one",
     [frac("ns1", "pod1", "0.7"), frac("ns2", "pod2", "0.7")], [scaling("ns1", "pod1", 1)], 60, {"ns1-pod1": 1, "ns2-pod2": 1}, False),
    ("SA unschedulable pod with 2 devices - fit into single GPU - create a scaling pod", [frac("ns1", "pod1", "0.2", 2)], [], 60, {"ns1-pod1": 2}, False),
    ("SA unschedulable pod with 2 devices - requires two GPUs", [frac("ns1", "pod1", "0.9", 2)], [], 60, {"ns1-pod1": 2}, False),
    ("SA unschedulable pods with 2 devices - fit into single GPU - one scaling pod with 2 GPUs",
     [frac("ns1", "pod1", "0.2", 2), frac("ns2", "pod2", "0.1", 2)], [], 60, {"ns1-pod1": 2}, False),
    ("SA unschedulable pods with 2 devices - fit into 2 GPUs - single scaling pod with 2 GPUs",
     [frac("ns1", "pod1", "0.5", 2), frac("ns2", "pod2", "0.1", 2)], [], 60, {"ns1-pod1": 2}, False),
    ("SA unschedulable pods with 2 devices - fit into 3 GPUs - two scaling pods with 2 GPUs",
     [frac("ns1", "pod1", "0.5", 2), frac("ns2", "pod2", "0.8", 2)], [], 60, {"ns1-pod1": 2, "ns2-pod2": 2}, False),
    ("SA unschedulable pods with multiple devices - fit into a single GPU - create two scaling pods",
     [frac("ns1", "pod1", "0.2", 2), frac("ns2", "pod2", "0.1", 3)], [], 60, {"ns1-pod1": 2, "ns2-pod2": 3}, False),
    ("SA unschedulable pods and one unneeded scaling pod - default cooldown",
     [frac("ns1", "pod1", "0.7"), frac("ns2", "pod2", "0.7")], [scaling("non-existing", "pod", 1)], 60, {}, True),
    ("SA two unschedulable pods and one unneeded scaling pod - no cooldown",
     [frac("ns1", "pod1", "0.7"), frac("ns2", "pod2", "0.7")], [scaling("non-existing", "pod", 1)], 0, {"ns1-pod1": 1, "ns2-pod2": 1}, False),
    ("SA three unschedulable pods and two scaling pods - delete one and create one",
     [frac("ns1", "pod1", "0.7"), frac("ns2", "pod2", "0.7"), frac("ns3", "pod3", "0.2")],
     [scaling("ns1", "pod1", 1), scaling("non-existing", "pod", 1)], 0, {"ns1-pod1": 1, "ns2-pod2": 1}, False),
    ("SA one unschedulable pod - fail to get num needed devices",
     [unschedulable("ns1", "pod1", {"gpu-fraction": "0.7", "gpu-fraction-num-devices": "a3"})], [], 60, {}, False),
    ("SA two unschedulable pods - fail to get num needed devices, skip one",
     [unschedulable("ns1", "pod1", {"gpu-fraction": "0.7", "gpu-fraction-num-devices": "a3"}), frac("ns2", "pod2", "0.7")], [], 60, {"ns2-pod2": 1}, False),
    ("SA one unschedulable fraction pod - fail to parse GPU fraction", [unschedulable("ns1", "pod1", {"gpu-fraction": "a4f"})], [], 60, {}, False),
    ("SA one unschedulable GPU memory pod - fail to parse GPU memory annotation", [unschedulable("ns1", "pod1", {"gpu-memory": "b4f"})], [], 60, {}, False),
    ("SA two unschedulable pods - fail to pase GPU fraction, skip one",
     [unschedulable("ns1", "pod1", {"gpu-fraction": "a4f"}), frac("ns2", "pod2", "0.7")], [], 60, {"ns2-pod2": 1}, False),
    ("SA non-fraction unschedulable pod - nothing to adjust", [unschedulable("ns1", "pod1", {})], [], 60, {}, False),
    ("SA unschedulable pod with succeeded phase - nothing to adjust", [unschedulable("ns1", "pod1", {"gpu-fraction": "0.5"}, phase="Succeeded", conditions=False)], [], 60, {}, False),
    ("SA unschedulable pod with failed phase - nothing to adjust", [unschedulable("ns1", "pod1", {"gpu-fraction": "0.5"}, phase="Failed", conditions=False)], [], 60, {}, False),
    ("SA non-related unschedulable pod - nothing to adjust", [unschedulable("ns1", "pod1", {}, scheduler=None)], [], 60, {}, False),
    ("SA bound pod - nothing to adjust", [unschedulable("ns1", "pod1", {"gpu-fraction": "0.5"}, phase="Running", conditions=False, node_name="some-node")], [], 60, {}, False),
    ("SA pending pod without unschedulable condition - nothing to adjust", [unschedulable("ns1", "pod1", {"gpu-fraction": "0.7"}, conditions=False)], [], 60, {}, False),
]  # fmt: skip


@pytest.mark.parametrize("case,pending,existing,cooldown,after,in_cooldown", PASS_ROWS, ids=[r[0] for r in PASS_ROWS])
def test_kai_pass(case, pending, existing, cooldown, after, in_cooldown):
    result = kai_pass([*pending, *existing], "kai-scheduler", 0.1, SCALING_NS, cooldown_seconds=cooldown)
    got = {s.name: s.devices for s in (*result.kept, *result.created)}
    assert got == after
    assert result.in_cooldown == in_cooldown


def test_kai_scaling_pod_of_a_pod_without_pod_scheduled_is_kept():
    """scaler.go IsScalingPodStillNeeded: no PodScheduled condition -> still needed."""
    target = unschedulable("ns1", "pod1", {"gpu-fraction": "0.5"}, conditions=False)
    result = kai_pass([target, scaling("ns1", "pod1", 1)], "kai-scheduler", 0.1, SCALING_NS)
    assert [s.name for s in result.kept] == ["ns1-pod1"] and not result.deleted


def test_kai_succeeded_scaling_pod_is_deleted_and_starts_the_cooldown():
    pods = [frac("ns1", "pod1", "0.7"), scaling("ns1", "pod1", 1, phase="Succeeded"), frac("ns2", "pod2", "0.7")]
    result = kai_pass(pods, "kai-scheduler", 0.1, SCALING_NS)
    assert result.deleted[0][0] == "ns1-pod1" and "Succeeded" in result.deleted[0][1]
    assert result.in_cooldown and not result.created


# Quirks: KAI's published behaviour where it under-asks, and the corners its code takes.
# (case, pending pods, need, scaling pods created {name: GPUs})
QUIRK_ROWS = [
    ("float sum: 0.33+0.56+0.11 asks for 2", [frac("a", "p1", "0.33"), frac("a", "p2", "0.56"), frac("a", "p3", "0.11")], 2, {"a-p1": 1, "a-p2": 1}),
    ("no packing: three 0.6 pods ask for 2", [frac("a", f"p{i}", "0.6") for i in range(3)], 2, {"a-p0": 1, "a-p1": 1}),
    ("ten pods needing a whole 80 GB GPU each ask for 1", [mem("a", f"p{i}", "81920") for i in range(10)], 1, {"a-p0": 1}),
    ("round half away from zero: 0.125 -> 13 hundredths", [frac("a", f"p{i}", "0.125") for i in range(8)], 2, {"a-p0": 1, "a-p1": 1}),
    ("a negative fraction lowers the need", [frac("a", "p1", "0.9"), frac("a", "p2", "0.9"), frac("a", "p3", "-0.8")], 1, {"a-p1": 1}),
    ("num-devices 0 creates a 0-GPU scaling pod", [unschedulable("a", "p1", {"gpu-fraction": "0.5", "gpu-fraction-num-devices": "0"}), frac("a", "p2", "0.7")], 1, {"a-p1": 0, "a-p2": 1}),
    ("a fraction above 1 is taken as it is", [frac("a", "p1", "2.5")], 3, {"a-p1": 1}),
    ("hex float and underscores parse as in Go", [frac("a", "p1", "0x1p-1"), frac("a", "p2", "0.2_5")], 1, {"a-p1": 1}),
    ("more devices than any node: asked for anyway", [frac("a", "p1", "0.5", 16)], 8, {"a-p1": 16}),
    ("names collide: the second pod gets none", [frac("c", "a-b", "0.7"), frac("c-a", "b", "0.7")], 2, {"c-a-b": 1}),
    ("a pod name over 63 characters: the API refuses its scaling pod", [frac("a", "x" * 64, "0.7"), frac("a", "y", "0.7")], 2, {"a-y": 1}),
    ("negative devices: the API refuses the scaling pod", [unschedulable("a", "p1", {"gpu-fraction": "0.5", "gpu-fraction-num-devices": "-2"}), frac("a", "p2", "0.7")], 0, {}),
]


@pytest.mark.parametrize("case,pending,need,created", QUIRK_ROWS, ids=[r[0] for r in QUIRK_ROWS])
def test_kai_quirks(case, pending, need, created):
    result = kai_pass(pending, "kai-scheduler", 0.1, SCALING_NS)
    assert result.need == need
    assert {s.name: s.devices for s in result.created} == created


def test_kai_nan_fraction_drives_the_need_to_min_int64():
    result = kai_pass([frac("a", "p1", "NaN"), frac("a", "p2", "0.5")], "kai-scheduler", 0.1, SCALING_NS)
    assert result.need < -(10**16)
    assert [s.name for s in result.created] == ["a-p1"]  # 1 device > the largest scaling pod (none yet)


# Go's parsers and conversions
@pytest.mark.parametrize("text,value", [
    ("0.5", 0.5), ("+.5", 0.5), ("5e-1", 0.5), ("0x1p-2", 0.25), ("1_0.5", 10.5), ("Inf", math.inf), ("-infinity", -math.inf),
    ("1e400", None), ("1_", None), ("_1", None), (" 0.5", None), ("0.5 ", None), ("+nan", None), ("infin", None), ("", None), ("0x1", None),
])  # fmt: skip
def test_go_parse_float(text, value):
    got = go_parse_float(text)
    assert got == value


def test_go_parse_float_nan():
    assert math.isnan(go_parse_float("NaN"))


@pytest.mark.parametrize("text,value", [("1024", 1024), ("+7", 7), ("-3", -3), ("1_0", None), ("1.0", None), ("9223372036854775808", None), ("", None)])
def test_go_parse_int(text, value):
    assert go_parse_int(text) == value


@pytest.mark.parametrize("x,rounded", [(12.5, 13.0), (-12.5, -13.0), (0.5, 1.0), (2.5, 3.0), (0.49999999999999994, 0.0), (57.99999999999999, 58.0)])
def test_go_round_half_away_from_zero(x, rounded):
    assert go_round(x) == rounded


@pytest.mark.parametrize("x,value", [(math.nan, -(2**63)), (math.inf, -(2**63)), (-math.inf, -(2**63)), (2.0**63, -(2**63)), (-(2.0**63), -(2**63)), (3.0, 3)])
def test_go_int64_amd64(x, value):
    assert go_int64(x) == value


def test_policy_kai_through_the_planner():
    pods = [frac("a", f"p{i}", "0.6") for i in range(3)]
    plan = plan_placeholders(pods, None, AdjusterSettings(policy="kai"), NOW).to_dict()
    assert plan["policy"] == "kai" and plan["totalGpus"] == 2 and plan["kai"]["need"] == 2
    assert [p["name"] for p in plan["placeholders"]] == ["a-p0", "a-p1"]
    assert all(p["resourceKey"] == "nvidia.com/gpu" for p in plan["placeholders"])
    exact = plan_placeholders(pods, None, AdjusterSettings(grace_period_seconds=0), NOW).to_dict()
    assert exact["totalGpus"] == 3
