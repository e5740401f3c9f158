"""The real Karpenter (kwok cloud provider) in a stack: pending GPU pods make it launch kwok nodes they then run on.

Why: raybridge's node-scale-adjuster relies on an autoscaler turning pending `nvidia.com/gpu` pods into nodes.
These tests check that the stack's Karpenter does that end to end (a NodeClaim, a Node that kwok makes Ready, the
pod bound and Running), which instance type and how many nodes it picks for a batch of pods, as its source says,
and that deleting the pods and NodeClaims lets Karpenter take the nodes away again and the stack stop clean.

What it does not do: test Karpenter's consolidation (the stack's NodePool turns it off, karpenter.py), or raybridge.
"""

from __future__ import annotations

import subprocess
import time
from typing import Any, Callable, Iterator, Optional

import pytest

from testcluster.client import ClusterClient
from testcluster.karpenter import gpu_instance_type
from testcluster.pytest_plugin import _unavailable
from testcluster.stack import Stack, StackOptions

pytestmark = [
    pytest.mark.skipif(_unavailable() is not None, reason=str(_unavailable())),
    pytest.mark.realtime,
    pytest.mark.xdist_group("testcluster-karpenter"),  # one worker, one stack for the module
]

NAMESPACE = "default"
#: The NodePool offers exactly these two GPU types; per GPU they cost the same, so the smaller node is the cheaper.
GPU_4X = gpu_instance_type("gpu-4x", 4, "48", "384Gi", 16.0)
GPU_8X = gpu_instance_type("gpu-8x", 8, "96", "768Gi", 32.0)
#: Bounds: Karpenter batches pending pods for 1 s idle up to 10 s (BATCH_IDLE_DURATION, BATCH_MAX_DURATION).
NODE_READY_SECONDS = 90.0
CLEANUP_SECONDS = 90.0


def _wait(check: Callable[[], Any], timeout: float, what: str, client: Optional[ClusterClient] = None) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:.0f} s: {what}" + (_where(client) if client else ""))
        time.sleep(0.2)


def _where(client: ClusterClient) -> str:
    """What the pods, NodeClaims and Nodes say, for a failed wait."""
    pods = {p["metadata"]["name"]: (p["spec"].get("nodeName"), p["status"].get("phase"), [c.get("message") or c["type"] for c in p["status"].get("conditions") or []])
            for p in client.list_objects("v1", "Pod", NAMESPACE, label_selector="app=karpenter-test")}  # fmt: skip
    claims = {c["metadata"]["name"]: {x["type"]: x["status"] for x in c.get("status", {}).get("conditions") or []} for c in client.list_objects("karpenter.sh/v1", "NodeClaim")}
    nodes = {n["metadata"]["name"]: ([t["key"] for t in n["spec"].get("taints") or []], _ready(n)) for n in client.list_objects("v1", "Node")}
    return f"\npods (node, phase, conditions): {pods}\nNodeClaims: {claims}\nnodes (taints, Ready): {nodes}"


def _pod(name: str, cpu: str, gpus: int) -> dict[str, Any]:
    resources = {"cpu": cpu, "memory": "1Gi", "nvidia.com/gpu": str(gpus)}
    return {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"app": "karpenter-test"}},
        "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                 "resources": {"requests": resources, "limits": {"nvidia.com/gpu": str(gpus)}}}]},
    }  # fmt: skip


def _ready(node: dict) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in node.get("status", {}).get("conditions", []))


def _karpenter_nodes(client: ClusterClient) -> list[dict]:
    return [n for n in client.list_objects("v1", "Node") if n["spec"].get("providerID", "").startswith("kwok://")]


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    options = StackOptions(operators=("karpenter",), karpenter_instance_types=[GPU_4X, GPU_8X], progress=print)
    with Stack(options) as started:
        yield started
    workdir = str(started.workdir)
    ps = subprocess.run(["ps", "-ww", "-eo", "pid=,args="], capture_output=True, text=True).stdout
    assert [line for line in ps.splitlines() if workdir in line and "testcluster-reaper" not in line] == []
    assert not started.workdir.exists()


@pytest.fixture
def client(stack: Stack) -> Iterator[ClusterClient]:
    client = ClusterClient(stack.kubeconfig)
    try:
        assert client.list_objects("v1", "Node") == [], "the stack starts without nodes: Karpenter makes them all"
        yield client
        _clean_up(client)
    finally:
        client.close()


def _clean_up(client: ClusterClient) -> None:
    """Delete the test's pods, then the NodeClaims: Karpenter's termination controller drains and deletes each Node."""
    for pod in client.list_objects("v1", "Pod", NAMESPACE, label_selector="app=karpenter-test"):
        client.delete_object("v1", "Pod", pod["metadata"]["name"], NAMESPACE)
    _wait(lambda: not client.list_objects("v1", "Pod", NAMESPACE, label_selector="app=karpenter-test"), CLEANUP_SECONDS, "the pods were deleted", client)
    for claim in client.list_objects("karpenter.sh/v1", "NodeClaim"):
        client.delete_object("karpenter.sh/v1", "NodeClaim", claim["metadata"]["name"])
    _wait(lambda: not client.list_objects("karpenter.sh/v1", "NodeClaim") and not client.list_objects("v1", "Node"), CLEANUP_SECONDS,
          "Karpenter terminated the NodeClaims and their Nodes", client)  # fmt: skip


def test_a_pending_gpu_pod_gets_a_karpenter_node_that_kwok_makes_ready(client: ClusterClient) -> None:
    created = time.monotonic()
    client.create_object(_pod("gpu-2", "4", 2))
    claims = _wait(lambda: client.list_objects("karpenter.sh/v1", "NodeClaim"), NODE_READY_SECONDS, "Karpenter created a NodeClaim", client)
    claimed = time.monotonic()
    node = _wait(lambda: next((n for n in _karpenter_nodes(client) if _ready(n)), None), NODE_READY_SECONDS, "a Karpenter node became Ready", client)
    node_ready = time.monotonic()
    pod = _wait(lambda: (p := client.get_object("v1", "Pod", "gpu-2", NAMESPACE)) and p["status"].get("phase") == "Running" and p,
                NODE_READY_SECONDS, "the pod was bound and Running", client)  # fmt: skip
    running = time.monotonic()
    print(f"\nkarpenter timings: pod -> NodeClaim {claimed - created:.1f} s, -> Node Ready {node_ready - created:.1f} s, -> pod Running {running - created:.1f} s")

    assert len(claims) == 1 and claims[0]["metadata"]["labels"]["karpenter.sh/nodepool"] == "default"
    node = client.get_object("v1", "Node", node["metadata"]["name"])  # as it is now: registered by Karpenter
    assert node is not None
    labels = node["metadata"]["labels"]
    # Both types fit 2 GPUs and 4 CPU; the kwok provider launches the cheapest offering among the NodeClaim's
    # instance types (toNode, kwok/cloudprovider/cloudprovider.go): gpu-4x at 16.0 before gpu-8x at 32.0.
    assert labels["node.kubernetes.io/instance-type"] == "gpu-4x"
    assert {k: labels.get(k) for k in ("nvidia.com/gpu.count", "nvidia.com/gpu.product", "nvidia.com/gpu.memory")} == {
        "nvidia.com/gpu.count": "4", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.memory": "81559",
    }  # fmt: skip
    assert node["metadata"]["annotations"]["kwok.x-k8s.io/node"] == "fake"
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "4"
    assert {"type": "InternalIP", "address": "127.0.0.1"} in node["status"]["addresses"]
    assert not any(t["key"] == "karpenter.sh/unregistered" for t in node["spec"].get("taints") or [])
    assert pod["spec"]["nodeName"] == node["metadata"]["name"]
    claim = _wait(lambda: next((c for c in client.list_objects("karpenter.sh/v1", "NodeClaim")
                                if {x["type"]: x["status"] for x in c.get("status", {}).get("conditions", [])}.get("Initialized") == "True"), None),
                  NODE_READY_SECONDS, "Karpenter initialized the NodeClaim", client)  # fmt: skip
    assert claim["status"]["nodeName"] == node["metadata"]["name"]


def test_four_pods_of_20_cpu_and_1_gpu_fill_one_gpu_8x(client: ClusterClient) -> None:
    created = time.monotonic()
    for index in range(4):  # within Karpenter's 1 s batch idle window: one scheduling simulation sees all four
        client.create_object(_pod(f"gpu-1-{index}", "20", 1))
    pods = _wait(lambda: (ps := client.list_objects("v1", "Pod", NAMESPACE, label_selector="app=karpenter-test"))
                 and all(p["status"].get("phase") == "Running" for p in ps) and ps, NODE_READY_SECONDS, "the four pods Running", client)  # fmt: skip
    print(f"\nkarpenter timings: 4 pods -> all Running {time.monotonic() - created:.1f} s")
    nodes = _karpenter_nodes(client)
    chosen = sorted(n["metadata"]["labels"]["node.kubernetes.io/instance-type"] for n in nodes)
    print(f"karpenter chose: {chosen}")
    # Karpenter's scheduler (Scheduler.add, pkg/controllers/provisioning/scheduling/scheduler.go) puts each pod on a
    # NodeClaim it is already about to launch before opening a new one (addToInflightNode before addToNewNodeClaim),
    # narrowing that NodeClaim's instance types to those that still fit every pod on it (NodeClaim.CanAdd ->
    # filterInstanceTypesByRequirements -> fits, nodeclaim.go). Two pods (40 CPU, 2 GPUs) fit both; the third
    # (60 CPU) leaves only gpu-8x (gpu-4x allocates 47.9 CPU); the fourth (80 CPU, 4 GPUs) still fits gpu-8x.
    # It does not compare the price of two gpu-4x with one gpu-8x when it packs.
    assert chosen == ["gpu-8x"], chosen
    assert len(client.list_objects("karpenter.sh/v1", "NodeClaim")) == 1
    assert {p["spec"]["nodeName"] for p in pods} == {nodes[0]["metadata"]["name"]}
