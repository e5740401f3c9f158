"""Pods whose GPUs come through ResourceClaims: demand in whole devices per claim, a shared claim once, and why a
pod is not demand where it is not; GPU-sharing pods that could land only on DRA-only nodes are reported, not planned.

Karpenter v1.14.1 skips pods with DRA requirements by default (`--ignore-dra-requests`, options.go), and
cluster-autoscaler reads them only with `--enable-dynamic-resource-allocation`: without the adjuster, such a pod of
KAI's waits with no autoscaler asking for its node. Newer KAI refuses fractional pods on DRA-only nodes
("fractional/shared GPU pods are not yet supported on DRA-only nodes", v0.17.0 node_info.go).
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from raybridge.adjuster.decision.demand import select_demand
from raybridge.adjuster.decision.plan import plan_placeholders
from raybridge.adjuster.decision.placeholders import PROVIDED, ExistingPlaceholder
from raybridge.adjuster.decision.reconcile import reconcile
from raybridge.adjuster.decision.settings import AdjusterSettings
from raybridge.core.dra import GPU_DRIVERS
from tests.builders import device_class, dra_device, gpu_node, resource_claim, resource_slice
from tests.unit.adjuster_objects import NOW, ago, pod

SETTINGS = AdjusterSettings(grace_period_seconds=0)
NVIDIA_CLASS = device_class("gpu.nvidia.com", GPU_DRIVERS["gpu.nvidia.com"].class_selector)
OTHER_CLASS = device_class("nic.example.com", "device.driver == 'nic.example.com'")


def slice_of(node: str, gpus: int = 8):
    return resource_slice(node, [dra_device(f"gpu-{i}") for i in range(gpus)])


#: Nodes whose GPUs the device plugin counts and the DRA driver publishes (the same 8 GPUs).
BOTH = {"nodes": [gpu_node("both-0", 8, product="NVIDIA-H100-80GB-HBM3", memory_mib=81559)], "slices": [slice_of("both-0")]}
#: Nodes whose GPUs are DRA devices alone.
DRA_ONLY = {"nodes": [gpu_node("dra-0", 0)], "slices": [slice_of("dra-0")]}
#: Nodes whose GPUs only the device plugin counts.
PLUGIN_ONLY = {"nodes": [gpu_node("plugin-0", 8)], "slices": []}
NONE_KNOWN = {"nodes": None, "slices": []}


def claim_pod(name: str, *claims: str, templates: tuple[tuple[str, str], ...] = (), created: float = 60, **kwargs):
    """A pending pod of KAI's with a claim per name in `claims` (resourceClaimName), and per (name, claim made from a
    template or '') in `templates`."""
    entries = [{"name": f"c{i}", "resourceClaimName": c} for i, c in enumerate(claims)]
    entries += [{"name": own, "resourceClaimTemplateName": "gpu-template"} for own, _ in templates]
    obj = pod(name, resourceClaims=entries, **kwargs)
    obj["metadata"]["creationTimestamp"] = ago(created)
    made = [{"name": own, "resourceClaimName": claim} for own, claim in templates if claim]
    if made:
        obj["status"]["resourceClaimStatuses"] = made
    return obj


def judge(pods, where, claims=(), settings=SETTINGS):
    selection = select_demand(pods, where["nodes"], settings, NOW, slices=where["slices"], classes=[NVIDIA_CLASS, OTHER_CLASS],
                              claims=list(claims))
    got = {}
    for piece in selection.pieces:
        got[piece.pod.split("/")[1]] = ("piece", piece.devices, piece.source, piece.group.device_class, piece.group.resource_key)
    for ignored in selection.ignored:
        got[ignored.pod.split("/")[1]] = ("ignored", ignored.code, ignored.reason)
    for code, count in selection.skipped.items():
        got[code] = ("skipped", count)
    return got


# (case, pods, nodes, claims, settings, expected: {pod: ("piece", devices) | ("ignored", code, reason fragment) | ("skipped", n)})
ROWS = [
    ("a claim of 2 GPUs: 2 whole devices, asked for as the device plugin's resource",
     [claim_pod("a", "a-gpus")], BOTH, [resource_claim("a-gpus", "team", count=2)], SETTINGS, {"a": ("piece", 2)}),
    ("two claims of 1 and 2: 3 devices on one node",
     [claim_pod("a", "a-one", "a-two")], BOTH, [resource_claim("a-one", "team"), resource_claim("a-two", "team", count=2)], SETTINGS,
     {"a": ("piece", 3)}),
    ("a claim made from a template, as its status names it",
     [claim_pod("a", templates=(("gpus", "a-gpus-x7k2p"),))], BOTH, [resource_claim("a-gpus-x7k2p", "team", count=4)], SETTINGS,
     {"a": ("piece", 4)}),
    ("a claim two pods share: its devices once, for the older pod",
     [claim_pod("young", "shared", created=30), claim_pod("old", "shared", created=90)], BOTH, [resource_claim("shared", "team", count=2)],
     SETTINGS, {"old": ("piece", 2), "young": ("ignored", "claim-shared", "counted for team/old")}),
    ("its own claim and one it shares: its own devices alone",
     [claim_pod("old", "shared", created=90), claim_pod("young", "shared", "mine", created=30)], BOTH,
     [resource_claim("shared", "team", count=2), resource_claim("mine", "team", count=1)], SETTINGS,
     {"old": ("piece", 2), "young": ("piece", 1)}),
    ("a template's claim not made yet", [claim_pod("a", templates=(("gpus", ""),))], BOTH, [], SETTINGS,
     {"a": ("ignored", "claim-unknown", "none is made from it yet")}),
    ("a claim that is not there", [claim_pod("a", "gone")], BOTH, [], SETTINGS, {"a": ("ignored", "claim-unknown", "team/gone is not there")}),
    ("all devices of the class", [claim_pod("a", "a-all")], BOTH, [resource_claim("a-all", "team", all_devices=True)], SETTINGS,
     {"a": ("ignored", "claim-unplannable", "allocationMode All")}),
    ("one of several alternatives", [claim_pod("a", "a-alt")], BOTH, [resource_claim("a-alt", "team", alternatives=True)], SETTINGS,
     {"a": ("ignored", "claim-unplannable", "firstAvailable")}),
    ("its claim holds devices already", [claim_pod("a", "a-gpus")], BOTH, [resource_claim("a-gpus", "team", allocated_on="both-0")], SETTINGS,
     {"a": ("ignored", "claim-allocated", "holds devices already")}),
    ("a claim of another class (a NIC): not a GPU, not looked at", [claim_pod("a", "a-nic")], BOTH,
     [resource_claim("a-nic", "team", "nic.example.com")], SETTINGS, {}),
    ("nodes with the class's devices alone: the autoscaler reads no DRA, and a placeholder would not fit them",
     [claim_pod("a", "a-gpus")], DRA_ONLY, [resource_claim("a-gpus", "team")], SETTINGS,
     {"a": ("ignored", "dra-only-nodes", "have them as DRA devices alone")}),
    ("nodes with the device plugin's GPUs alone: no device of the class to claim",
     [claim_pod("a", "a-gpus")], PLUGIN_ONLY, [resource_claim("a-gpus", "team")], SETTINGS,
     {"a": ("ignored", "claim-unplannable", "no node it may land on publishes any")}),
    ("no node known (a pool from zero): planned", [claim_pod("a", "a-gpus")], NONE_KNOWN, [resource_claim("a-gpus", "team", count=2)], SETTINGS,
     {"a": ("piece", 2)}),
    ("more devices than its nodes have", [claim_pod("a", "a-gpus")], BOTH, [resource_claim("a-gpus", "team", count=16)], SETTINGS,
     {"a": ("ignored", "too-many-devices", "16 gpu.nvidia.com devices")}),
    ("the autoscaler reads DRA: left to it", [claim_pod("a", "a-gpus")], BOTH, [resource_claim("a-gpus", "team")],
     AdjusterSettings(grace_period_seconds=0, autoscaler_reads_dra=True), {"a": ("ignored", "claims-seen-by-autoscaler", "reads itself")}),
    ("another scheduler's pod: not looked at", [claim_pod("a", "a-gpus", scheduler="default-scheduler")], BOTH,
     [resource_claim("a-gpus", "team")], SETTINGS, {}),
    ("bound: counted, not listed", [claim_pod("a", "a-gpus", node_name="both-0", phase="Running")], BOTH,
     [resource_claim("a-gpus", "team", allocated_on="both-0")], SETTINGS, {"bound": ("skipped", 1)}),
    ("not marked Unschedulable yet", [claim_pod("a", "a-gpus", conditions=[])], BOTH, [resource_claim("a-gpus", "team")], SETTINGS,
     {"a": ("ignored", "not-unschedulable", "no PodScheduled")}),
    # GPU-sharing pods (KAI's annotations) beside DRA-only nodes
    ("a fractional pod whose nodes are DRA-only: reported, never planned", [pod("f", "0.5")], DRA_ONLY, [], SETTINGS,
     {"f": ("ignored", "dra-only-nodes", "not yet supported on DRA-only nodes")}),
    ("a gpu-memory pod likewise", [pod("m", memory="20480")], DRA_ONLY, [], SETTINGS,
     {"m": ("ignored", "dra-only-nodes", "KAI shares device-plugin GPUs only")}),
    ("a fractional pod whose nodes have the device plugin too: planned", [pod("f", "0.5")], BOTH, [], SETTINGS, {"f": ("piece", 1)}),
]


@pytest.mark.parametrize("case,pods,where,claims,settings,expected", ROWS, ids=[r[0] for r in ROWS])
def test_claims_are_demand_in_whole_devices_or_say_why_not(case, pods, where, claims, settings, expected):
    got = judge(pods, where, claims, settings)
    assert set(got) == set(expected), got
    for name, want in expected.items():
        if want[0] == "ignored":
            assert got[name][:2] == want[:2] and want[2] in got[name][2], got[name]
        elif want[0] == "piece":
            assert got[name][:2] == want, got[name]
            if got[name][2] == "claim":
                assert got[name][3:] == ("gpu.nvidia.com", "nvidia.com/gpu"), got[name]
        else:
            assert got[name] == want, got[name]


def test_claim_pods_are_packed_into_whole_nodes_of_their_group():
    """Three pods of 3 devices each on 8-GPU nodes: 6 and 3, as the device plugin's resource, apart from the GPU-sharing
    pods' group."""
    pods = [claim_pod(f"c{i}", f"c{i}-gpus", created=60 + i) for i in range(3)] + [pod("f", "0.5")]
    claims = [resource_claim(f"c{i}-gpus", "team", count=3) for i in range(3)]
    plan = plan_placeholders(pods, BOTH["nodes"], SETTINGS, NOW, slices=BOTH["slices"], classes=[NVIDIA_CLASS], claims=claims)
    by_group = {}
    for placeholder in plan.placeholders:
        by_group.setdefault(placeholder.group, []).append((placeholder.gpus, placeholder.resource_key))
    groups = {g.group.id: g.group.device_class for g in plan.groups}
    claimed = [sorted(v) for k, v in by_group.items() if groups[k] == "gpu.nvidia.com"]
    assert claimed == [[(3, "nvidia.com/gpu"), (6, "nvidia.com/gpu")]], by_group
    assert any("ResourceClaims of DeviceClass gpu.nvidia.com" in note for note in plan.notes), plan.notes


def test_devices_allocated_to_claims_leave_no_room_on_their_node():
    """A placeholder's node: 6 of its 8 GPUs are held through claims (the device plugin counts the same GPUs, free).
    Of its 8 pods of half a GPU, the 2 GPUs left hold 4, and 2 GPUs are asked for the other 4. Before, the claimed
    GPUs counted as free room: all 8 were held there, and none was asked for."""
    pods = [pod(f"h{i}", "0.5") for i in range(8)]
    holders = [claim_pod(f"holder{i}", f"held{i}", node_name="both-0", phase="Running") for i in range(3)]
    claims = [resource_claim(f"held{i}", "team", count=2, allocated_on="both-0") for i in range(3)]
    for i, claim in enumerate(claims):  # the 6 devices held, each its own
        for j, result in enumerate(claim["status"]["allocation"]["devices"]["results"]):
            result["device"] = f"gpu-{2 * i + j}"
    group = plan_placeholders(pods, BOTH["nodes"], SETTINGS, NOW).placeholders[0].group
    provided = ExistingPlaceholder("ph", group, 4, PROVIDED, tuple(f"team/h{i}" for i in range(8)), NOW - timedelta(seconds=5), "both-0")
    result = reconcile([*pods, *holders], BOTH["nodes"], [provided], SETTINGS, NOW, provision_timeout_seconds=300, name_prefix="rb",
                       dra={"slices": BOTH["slices"], "classes": [NVIDIA_CLASS], "claims": claims})
    assert len(result.covered_pods) == 4 and sum(p.placeholder.gpus for p in result.create) == 2, result


def test_malformed_claims_and_pods_never_raise():
    """Claims and pod claim lists of the wrong shape read as absent: no exception, no piece from them."""
    odd_pods = [
        pod("a", resourceClaims="all"),
        pod("b", resourceClaims=[7, None, {"name": 3}, {"name": "x", "resourceClaimName": ["list"]}]),
        claim_pod("c", "odd-claim") | {"status": "x"},
        claim_pod("d", "huge"),
    ]
    odd_claims = [
        {"kind": "ResourceClaim", "metadata": {"name": "odd-claim", "namespace": "team"}, "spec": {"devices": {"requests": "x"}}},
        {"kind": "ResourceClaim", "metadata": {"name": "huge", "namespace": "team"},
         "spec": {"devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 10**12}}]}}},
        {"kind": "ResourceClaim", "metadata": "x"},
        "not an object",
    ]
    got = judge(odd_pods, BOTH, odd_claims)
    assert {name: found[:2] for name, found in got.items()} == {"b": ("ignored", "claim-unknown"), "d": ("ignored", "too-many-devices")}, got
    assert "names neither a ResourceClaim nor a ResourceClaimTemplate" in got["b"][2]
