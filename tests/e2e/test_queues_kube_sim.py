"""`queues fairshare --from-cluster`, and the not-Ready node of `queues generate --from-cluster`: on kubesim.

Why simulated, test by test:
- fair share from the cluster reads KAI's Queues and the pods of KAI's scheduler; KAI (its
  Queue CRD and scheduler) is not part of the real cluster, so the Queues are applied to the
  simulated API server, checked against the Queue CRD, and the pods written as KAI would leave
  them. Its capacity counts Ready nodes only, so a node that is not Ready is among them.
- a node that is not Ready: kwok, which plays every node of the real cluster, makes any node
  Ready again (its node-initialize stage), so only the simulation holds one.
What this does not do: the generated Kueue objects on a real Kueue, and fair share on a cluster
without KAI, are in test_queues_kube.py, on a real cluster.
"""

from __future__ import annotations

import json
import time

import kubernetes.client
import pytest

from tests.helpers import cli_env, run_cli
from tests.cluster_state import make_gpu_node
from kubesim.server import KubeApiServer

AMD_PRODUCT = "AMD_Instinct_MI300X_OAM"
H100 = "NVIDIA-H100-80GB-HBM3"


def make_cpu_node(server, name, cpu="32", memory="128Gi"):
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    allocatable = {"cpu": cpu, "memory": memory, "pods": "110"}
    status = {
        "capacity": dict(allocatable),
        "allocatable": dict(allocatable),
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "lastTransitionTime": now}],
    }
    created = server.create_object({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "spec": {}, "status": status})
    if (created.get("status") or {}).get("allocatable") != allocatable:
        server.update_status({**created, "status": status})


@pytest.fixture
def cluster(tmp_path):
    server = KubeApiServer().start()
    kubeconfig = server.write_kubeconfig(tmp_path / "config")
    for i in range(2):
        make_gpu_node(server, f"mi300x-{i}", vendor="amd", gpus=8, product=AMD_PRODUCT, memory_mib=196608, cpu="96", memory="1500Gi")
    make_gpu_node(server, "h100-0", vendor="nvidia", gpus=8, product=H100, cpu="96", memory="1500Gi")
    make_gpu_node(server, "h100-down", vendor="nvidia", gpus=8, product=H100, ready=False)
    make_cpu_node(server, "cpu-0")
    yield server, str(kubeconfig)
    server.stop()
    assert server.internal_errors == [], server.internal_errors


def kube_cli(cluster, *args):
    return run_cli(*args, env=cli_env(KUBECONFIG=cluster[1]))


def test_generate_leaves_a_node_that_is_not_ready_out(cluster):
    out = kube_cli(cluster, "queues", "generate", "--from-cluster", "-o", "json")
    assert out.returncode == 0, out.stderr
    assert "node h100-down (8 nvidia.com/gpu) left out: not Ready" in out.stderr
    assert "pool nvidia-h100-80gb-hbm3: 8 nvidia.com/gpu, 96 cpu, 1500Gi memory on 1 node (h100-0)" in out.stderr, out.stderr
    assert "nvidia-h100-80gb-hbm3" in {o["metadata"]["name"] for o in json.loads(out.stdout)["items"] if o["kind"] == "ResourceFlavor"}


# --- fair share from the cluster ----------------------------------------------------------------------
def kai_queue(name, parent=None, gpu_quota=0, weight=1):
    spec = {"resources": {"gpu": {"quota": gpu_quota, "limit": -1, "overQuotaWeight": weight}}}
    if parent:
        spec["parentQueue"] = parent
    return {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def apply(api_client, objects):
    """Create each cluster-scoped KAI Queue through the official client, checked against the Queue CRD."""
    custom = kubernetes.client.CustomObjectsApi(api_client)
    for obj in objects:
        custom.create_cluster_custom_object("scheduling.run.ai", "v2", "queues", obj)


def make_pod(server, name, *, queue=None, scheduler="kai-scheduler", gpus=0, node=None, phase="Pending", fraction=None):
    requests = {"cpu": "1", "memory": "1Gi"}
    if gpus:
        requests["nvidia.com/gpu"] = str(gpus)
    meta = {"name": name, "namespace": "default", "labels": {"kai.scheduler/queue": queue} if queue else {}}
    if fraction:
        meta["annotations"] = {"gpu-fraction": fraction}
    spec = {"schedulerName": scheduler, "containers": [{"name": "c", "image": "busybox", "resources": {"requests": requests, "limits": requests}}]}
    if node:
        spec["nodeName"] = node
    created = server.create_object({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})
    server.update_status({**created, "status": {"phase": phase}})


def test_fairshare_from_the_cluster_reads_queues_nodes_and_kai_pods(cluster):
    server, _ = cluster
    api_client = server.api_client()
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
    make_pod(server, "a-0", queue="team-a", gpus=6)
    make_pod(server, "a-1", queue="team-a", fraction="0.5")
    make_pod(server, "b-0", queue="team-b", gpus=8, node="mi300x-0", phase="Running")
    make_pod(server, "other", scheduler="default-scheduler", gpus=2, node="h100-0", phase="Running")
    make_pod(server, "unlabelled", gpus=1)

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

