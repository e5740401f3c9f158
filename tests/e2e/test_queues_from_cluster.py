"""`queues fairshare --from-cluster`, and the not-Ready node of `queues generate --from-cluster`: on a real API server
of this module's own, whose nodes are the ones the numbers are worked out from.

Why a stack of its own (the session's cluster has other nodes, which every module shares, and no KAI):
- fair share from the cluster reads KAI's Queues and the pods of KAI's scheduler: the Queues are applied against
  KAI's own Queue CRD (installed without its scheduler, which does not run: the pods stay as written), and its
  capacity counts the Ready nodes only, so a node that is not Ready is among them.
- a node that is not Ready: kwok plays every node's kubelet and makes any node Ready again (its node-initialize
  stage), so node h100-down carries testcluster's NO_KUBELET_LABEL (kwok leaves it alone), says NotReady as a
  kubelet does, and the node lifecycle controller taints it, as on any cluster.
What this does not do: the generated Kueue objects on a real Kueue, and fair share on a cluster without KAI, are in
test_queues_kube.py, on the session's cluster.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Iterator, Optional

import kubernetes.client
import pytest

from tests.builders import gpu_node
from tests.helpers import cli_env, run_cli
from tests.waits import wait_for

pytestmark = [pytest.mark.xdist_group("queues-from-cluster"), pytest.mark.timeout(600)]  # one stack for the module's tests

AMD_PRODUCT = "AMD_Instinct_MI300X_OAM"
H100 = "NVIDIA-H100-80GB-HBM3"
NOT_READY_TAINT = "node.kubernetes.io/not-ready"


def cpu_node(name: str, cpu: str = "32", memory: str = "128Gi") -> dict[str, Any]:
    return gpu_node(name, 0, cpu=cpu, memory=memory)


def not_ready(client: Any, node: dict[str, Any]) -> None:
    """`node` without a kubelet kwok would play, its Ready condition False as a kubelet reports NotReady; waits until the
    node lifecycle controller has tainted it."""
    from testcluster.kwok import NO_KUBELET_LABEL

    node["metadata"]["labels"][NO_KUBELET_LABEL] = "true"
    status = dict(node.pop("status"))
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    status["conditions"] = [{"type": "Ready", "status": "False", "reason": "KubeletNotReady", "message": "container runtime is down",
                             "lastHeartbeatTime": now, "lastTransitionTime": now}]  # fmt: skip
    name = node["metadata"]["name"]
    client.create_object(node)

    def written() -> bool:  # read again on a conflict: the node lifecycle controller may write it first
        try:
            client.update_status({**client.get_object("v1", "Node", name), "status": status})
        except Exception as exc:  # noqa: BLE001 - only a conflict is read again
            if getattr(exc, "status", None) != 409:
                raise
            return False
        return True

    wait_for(written, timeout=30, what=f"node {name}'s status written")

    def tainted() -> bool:
        found = client.get_object("v1", "Node", name) or {}
        return any(t.get("key") == NOT_READY_TAINT for t in (found.get("spec") or {}).get("taints") or [])

    wait_for(tainted, timeout=60, what=f"the node lifecycle controller to taint node {name} {NOT_READY_TAINT}")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, str]]:
    """(the admin's client, a kubeconfig): two MI300X nodes, an H100 node, a CPU node (all Ready, kwok's) and the H100
    node h100-down that is not; KAI's CRDs."""
    from testcluster.client import ClusterClient
    from testcluster.pytest_plugin import own_cluster
    from testcluster.stack import StackOptions

    nodes = [gpu_node(f"mi300x-{i}", 8, "amd", product=AMD_PRODUCT, memory_mib=196608, cpu="96", memory="1500Gi") for i in range(2)]
    nodes += [gpu_node("h100-0", 8, product=H100, cpu="96", memory="1500Gi"), cpu_node("cpu-0")]
    with own_cluster(StackOptions(operators=(), crds_only=("kai",), nodes=nodes)) as stack:
        client = ClusterClient(stack.kubeconfig)
        try:
            not_ready(client, gpu_node("h100-down", 8, product=H100))
            wait_for(lambda: client.get_object("v1", "ServiceAccount", "default", "default") is not None, timeout=60,
                     what="namespace default's ServiceAccount")  # fmt: skip
            yield client, str(client.write_kubeconfig(Path(tmp_path_factory.mktemp("queues")) / "config"))
        finally:
            client.close()


def kube_cli(cluster: tuple[Any, str], *args: str):
    return run_cli(*args, env=cli_env(KUBECONFIG=cluster[1]))


def test_generate_leaves_a_node_that_is_not_ready_out(cluster):
    out = kube_cli(cluster, "queues", "generate", "--from-cluster", "-o", "json")
    assert out.returncode == 0, out.stderr
    assert "node h100-down (8 nvidia.com/gpu) left out: not Ready" in out.stderr, out.stderr
    assert f"taint {NOT_READY_TAINT}:NoSchedule not tolerated" in out.stderr  # the node lifecycle controller's
    assert "pool nvidia-h100-80gb-hbm3: 8 nvidia.com/gpu, 96 cpu, 1500Gi memory on 1 node (h100-0)" in out.stderr, out.stderr
    assert "nvidia-h100-80gb-hbm3" in {o["metadata"]["name"] for o in json.loads(out.stdout)["items"] if o["kind"] == "ResourceFlavor"}


# --- fair share from the cluster ----------------------------------------------------------------------
def kai_queue(name: str, parent: Optional[str] = None, gpu_quota: int = 0, weight: int = 1) -> dict[str, Any]:
    spec: dict[str, Any] = {"resources": {"gpu": {"quota": gpu_quota, "limit": -1, "overQuotaWeight": weight}}}
    if parent:
        spec["parentQueue"] = parent
    return {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def apply(api_client: Any, objects: list[dict[str, Any]]) -> None:
    """Create each cluster-scoped KAI Queue through the official client, checked against KAI's Queue CRD."""
    custom = kubernetes.client.CustomObjectsApi(api_client)
    for obj in objects:
        custom.create_cluster_custom_object("scheduling.run.ai", "v2", "queues", obj)


def make_pod(client: Any, name: str, *, queue: Optional[str] = None, scheduler: str = "kai-scheduler", gpus: int = 0,
             node: Optional[str] = None, fraction: Optional[str] = None) -> None:  # fmt: skip
    """A pod in namespace default: bound to `node` (kwok runs it; waited for) or left Pending (no KAI scheduler runs)."""
    requests = {"cpu": "1", "memory": "1Gi"}
    if gpus:
        requests["nvidia.com/gpu"] = str(gpus)
    meta: dict[str, Any] = {"name": name, "namespace": "default", "labels": {"kai.scheduler/queue": queue} if queue else {}}
    if fraction:
        meta["annotations"] = {"gpu-fraction": fraction}
    spec: dict[str, Any] = {"schedulerName": scheduler, "containers": [{"name": "c", "image": "busybox", "resources": {"requests": requests, "limits": requests}}]}
    if node:
        spec["nodeName"] = node
    client.create_object({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})
    if node:
        wait_for(lambda: ((client.get_object("v1", "Pod", name, "default") or {}).get("status") or {}).get("phase") == "Running",
                 timeout=60, what=f"kwok to run pod {name}")  # fmt: skip


def test_fairshare_from_the_cluster_reads_queues_nodes_and_kai_pods(cluster):
    client, _ = cluster
    api_client = client.api_client()
    try:
        apply(
            api_client,
            [
                kai_queue("research", gpu_quota=16),
                kai_queue("team-a", "research", gpu_quota=4, weight=1),
                kai_queue("team-b", "research", gpu_quota=4, weight=3),
                kai_queue("stray", "no-such-department", gpu_quota=2),
            ],
        )
    finally:
        api_client.close()
    make_pod(client, "a-0", queue="team-a", gpus=6)
    make_pod(client, "a-1", queue="team-a", fraction="0.5")
    make_pod(client, "b-0", queue="team-b", gpus=8, node="mi300x-0")
    make_pod(client, "other", scheduler="default-scheduler", gpus=2, node="h100-0")
    make_pod(client, "unlabelled", gpus=1)

    out = kube_cli(cluster, "queues", "fairshare", "--from-cluster", "-o", "json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    # Ready nodes: 2 x 8 AMD + 8 NVIDIA (h100-down is not Ready), less the other scheduler's 2 GPUs
    assert data["capacity"]["gpu"] == 22
    assert data["capacity"]["cpu"] == (96 + 96 + 96 + 32) * 1000 - 1000
    gpu = {name: q["gpu"] for name, q in data["queues"].items()}
    assert (gpu["team-a"]["request"], gpu["team-b"]["request"], gpu["research"]["request"]) == (6.5, 8, 14.5)
    # research: 16 deserved, capped by its request of 14.5; team-a 4 + 0.5 over quota (its request), team-b 4 + the rest
    assert gpu["research"]["fairShare"] == 14.5
    assert gpu["team-a"]["fairShare"] == 6.5 and gpu["team-b"]["fairShare"] == 8
    assert "stray" not in data["queues"]
    assert data["dropped"] == [{"queue": "stray", "reason": "parentQueue no-such-department does not exist"}]
    assert "queue stray: parentQueue no-such-department does not exist" in out.stderr
    assert "1 kai-scheduler pods have no kai.scheduler/queue label: not counted" in out.stderr
