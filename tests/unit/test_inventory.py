"""Inventory from Node and Pod JSON: vendors, models, memory, eligibility, free GPUs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from raybridge.core.inventory import inventory_from_nodes, items_of, pod_gpu_requests
from raybridge.core.views import read_pod
from raybridge.jobs.decision.spec import Toleration

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "cluster"


def load(name: str, kind: str) -> list[dict]:
    return items_of(json.loads((EXAMPLES / name).read_text()), kind)


@pytest.fixture(scope="module")
def inventory():
    return inventory_from_nodes(load("nodes.json", "Node"), load("pods.json", "Pod"))


def by_name(inventory, name):
    return next(n for n in inventory.nodes if n.name == name)


# (node, vendor, gpus, model, memory MiB, eligible, reason fragment, free)
NODE_ROWS = [
    ("mi300x-0", "amd", 8, "AMD_Instinct_MI300X_OAM", 192 * 1024, True, None, 2),
    ("mi300x-1", "amd", 8, "AMD_Instinct_MI300X_OAM", 192 * 1024, True, None, 8),  # the pod there Succeeded
    ("mi300x-2", "amd", 8, "AMD_Instinct_MI300X_OAM", 192 * 1024, True, None, 8),  # its own GPU taint is tolerated
    ("h100-0", "nvidia", 8, "NVIDIA-H100-80GB-HBM3", 81559, True, None, 0),  # Pending pods bound to a node count
    ("h100-1", "nvidia", 8, "NVIDIA-H100-80GB-HBM3", 81559, False, "cordoned", 8),
    ("h100-2", "nvidia", 4, "NVIDIA-H100-80GB-HBM3", 81559, False, "taint maintenance=true:NoExecute", 4),
    ("cpu-0", None, 0, None, None, True, None, None),
]


@pytest.mark.parametrize("name,vendor,gpus,model,memory,eligible,reason,free", NODE_ROWS, ids=[r[0] for r in NODE_ROWS])
def test_nodes(inventory, name, vendor, gpus, model, memory, eligible, reason, free):
    node = by_name(inventory, name)
    assert (node.vendor, node.gpus, node.model, node.memory_mib, node.eligible, node.free) == (vendor, gpus, model, memory, eligible, free)
    if reason:
        assert any(reason in r for r in node.reasons)


def test_capacity_counts_only_eligible_nodes(inventory):
    amd, nvidia = inventory.capacity("amd"), inventory.capacity("nvidia")
    assert (amd.total, amd.min_per_node, amd.nodes) == (24, 8, 3)
    assert (nvidia.total, nvidia.min_per_node, nvidia.nodes) == (8, 8, 1)
    assert inventory.vendors(eligible_only=False) == {"amd": 24, "nvidia": 20}


def test_not_ready_node_is_ineligible():
    node = {"metadata": {"name": "x"}, "status": {"allocatable": {"nvidia.com/gpu": "4"}, "conditions": [{"type": "Ready", "status": "Unknown"}]}}
    inv = inventory_from_nodes([node])
    assert inv.nodes[0].reasons == ("not Ready",)


@pytest.mark.parametrize(
    "toleration,tolerated",
    [
        (dict(key="maintenance", operator="Equal", value="true", effect="NoExecute"), True),
        (dict(key="maintenance", operator="Exists"), True),
        (dict(operator="Exists"), True),
        (dict(key="maintenance", operator="Equal", value="false"), False),
        (dict(key="maintenance", operator="Exists", effect="NoSchedule"), False),
    ],
)
def test_tolerations_make_tainted_nodes_count(toleration, tolerated):
    inv = inventory_from_nodes(load("nodes.json", "Node"), tolerations=[Toleration(**toleration)])
    assert by_name(inv, "h100-2").eligible is tolerated


def test_pod_requests_take_init_containers_into_account():
    pod = {"spec": {"containers": [{"resources": {"limits": {"amd.com/gpu": "2"}}}, {"resources": {"requests": {"amd.com/gpu": "1"}}}],
                    "initContainers": [{"resources": {"requests": {"amd.com/gpu": "4"}}}]}}
    assert pod_gpu_requests(read_pod(pod)) == {"amd.com/gpu": 4}


def test_items_of_rejects_the_wrong_kind():
    with pytest.raises(ValueError, match="expected Node objects, found Pod"):
        items_of({"items": [{"kind": "Pod"}]}, "Node")
    with pytest.raises(ValueError, match="kubectl get nodes -o json"):
        items_of({"hello": 1}, "Node")


def _node(name, gpus="8", **extra):
    node = {
        "metadata": {"name": name, "labels": {}},
        "status": {"allocatable": {"nvidia.com/gpu": gpus}, "conditions": [{"type": "Ready", "status": "True"}]},
    }
    node.update(extra)
    return node


def _pod(name, node, gpus, namespace="ns", phase="Running"):
    return {
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]},
        "status": {"phase": phase},
    }


# (case, nodes, pods, expected GPUs per node name, warning fragments)
MALFORMED_ROWS = [
    ("millicores of a GPU", [_node("a", "500m")], None, {"a": 0}, ["node a: nvidia.com/gpu '500m' is not a whole number of GPUs: counted as 0"]),
    ("negative GPUs", [_node("a", "-4")], None, {"a": 0}, ["node a: nvidia.com/gpu '-4' is not a whole number"]),
    ("null GPUs", [_node("a", None)], None, {"a": 0}, ["node a: nvidia.com/gpu None is not a whole number"]),
    ("garbage GPUs", [_node("a", {"x": 1})], None, {"a": 0}, ["is not a whole number of GPUs"]),
    ("a node listed twice counts once", [_node("a"), _node("a", "4")], None, {"a": 8}, ["node a is listed more than once: counted once"]),
    ("a node without a name is skipped", [_node("a"), {"metadata": {}}], None, {"a": 8}, ["item 1 of the node list has no metadata.name: skipped"]),
    ("metadata of the wrong type", [_node("a"), {"metadata": ["x"]}], None, {"a": 8}, ["item 1"]),
    ("labels, status and taints of the wrong type", [_node("a", spec={"taints": "x"}), {"metadata": {"name": "b", "labels": []}, "status": []}], None, {"a": 8, "b": 0}, []),
    ("a pod asking for half a GPU", [_node("a")], [{"metadata": {"name": "p", "namespace": "ns"}, "spec": {"nodeName": "a", "containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": "0.5"}}}]}}], {"a": 8}, ["pod ns/p container c: nvidia.com/gpu '0.5' is not a whole number"]),
    ("a pod that is not an object", [_node("a")], ["x"], {"a": 8}, ["item 0 of the pod list is not an object: skipped"]),
    ("a pod whose spec is no object", [_node("a")], [{"spec": "y"}], {"a": 8}, []),  # an unbound pod holds nothing
    ("a nodeName of the wrong type", [_node("a")], [{"metadata": {"name": "p", "namespace": "ns"}, "spec": {"nodeName": 3}}], {"a": 8}, ["pod ns/p: spec.nodeName 3 is not a node name: its GPUs are not counted"]),
    ("containers of the wrong type", [_node("a")], [{"metadata": {"name": "p", "namespace": "ns"}, "spec": {"nodeName": "a", "containers": "z"}}], {"a": 8}, ["pod ns/p: spec.containers is not a list: its GPUs counted as 0"]),
    ("initContainers of the wrong type", [_node("a")], [{"metadata": {"name": "p", "namespace": "ns"}, "spec": {"nodeName": "a", "initContainers": {}}}], {"a": 8}, ["pod ns/p: spec.initContainers is not a list"]),
    ("a pod listed twice", [_node("a")], [_pod("p", "a", 2), _pod("p", "a", 2)], {"a": 8}, ["pod ns/p is listed more than once: counted once"]),
]


# (case, pods, free GPUs on node a): a pod listed twice holds its GPUs once
FREE_ROWS = [
    ("one pod", [_pod("p", "a", 2)], 6),
    ("the same pod twice", [_pod("p", "a", 2), _pod("p", "a", 2)], 6),
    ("two pods of one name in two namespaces", [_pod("p", "a", 2), _pod("p", "a", 2, namespace="other")], 4),
    ("a finished pod", [_pod("p", "a", 2, phase="Succeeded")], 8),
]


@pytest.mark.parametrize("case,pods,free", FREE_ROWS, ids=[r[0] for r in FREE_ROWS])
def test_free_gpus_count_each_pod_once(case, pods, free):
    assert inventory_from_nodes([_node("a")], pods).nodes[0].free == free


# (case, Ready conditions, eligible, reasons): for nodes with and without GPUs
READY_ROWS = [
    ("Ready", [{"type": "Ready", "status": "True"}], True, ()),
    ("not Ready", [{"type": "Ready", "status": "False"}], False, ("not Ready",)),
    ("no Ready condition", [{"type": "MemoryPressure", "status": "False"}], False, ("not Ready (no Ready condition)",)),
    ("no conditions at all", None, False, ("not Ready (no Ready condition)",)),
]


@pytest.mark.parametrize("case,conditions,eligible,reasons", READY_ROWS, ids=[r[0] for r in READY_ROWS])
@pytest.mark.parametrize("gpus", ["8", "0"])
def test_a_node_that_is_not_ready_says_why(case, conditions, eligible, reasons, gpus):
    node = _node("a", gpus)
    node["status"]["conditions"] = conditions
    entry = inventory_from_nodes([node]).nodes[0]
    assert (entry.eligible, entry.reasons) == (eligible, reasons)


@pytest.mark.parametrize("case,nodes,pods,gpus,warnings", MALFORMED_ROWS, ids=[r[0] for r in MALFORMED_ROWS])
def test_malformed_nodes_and_pods_are_warned_about_never_raised(case, nodes, pods, gpus, warnings):
    inventory = inventory_from_nodes(nodes, pods)
    assert {n.name: n.gpus for n in inventory.nodes} == gpus
    joined = " | ".join(inventory.warnings)
    for fragment in warnings:
        assert fragment in joined
    if not warnings:
        assert inventory.warnings == ()


@pytest.mark.parametrize(
    "document,fragment",
    [
        (42, "expected a Node list"),
        ({"items": ["a", "b"]}, "2 of 2 items are not Node objects"),
        ([{"spec": {}}], "1 of 1 items are not Node objects"),
        ({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}, "expected a Node list"),
    ],
)
def test_input_that_is_not_node_json_at_all_is_refused(document, fragment):
    with pytest.raises(ValueError, match=fragment):
        items_of(document, "Node")
