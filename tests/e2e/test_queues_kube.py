"""`queues generate --from-cluster` and `queues fairshare --from-cluster` against the test API server.

The generated Kueue objects are applied through the official client (so the
server checks them against the CRD schemas, strictly) and the simulated Kueue
and KubeRay admit GPU RayClusters through a generated queue: each pod set gets
the flavor of its resources, and the pods carry that flavor's node labels.
"""

from __future__ import annotations

import json
import time

import kubernetes.client
import pytest

from tests.helpers import cli_env, run_cli
from kubesim.controllers import FakeKubeRay, FakeKueue
from kubesim.fixtures import make_gpu_node, raycluster_manifest, wait_for
from kubesim.server import KubeApiServer

KUEUE = "kueue.x-k8s.io/v1beta2"
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


def apply(api_client, objects):
    """Create each object through the official client, as `kubectl apply` of a fresh cluster would."""
    core, custom = kubernetes.client.CoreV1Api(api_client), kubernetes.client.CustomObjectsApi(api_client)
    for obj in objects:
        if obj["apiVersion"] == "v1" and obj["kind"] == "Namespace":
            core.create_namespace(obj)
            continue
        group, version = obj["apiVersion"].split("/")
        plural = obj["kind"].lower() + ("es" if obj["kind"].endswith("s") else "s")
        namespace = obj["metadata"].get("namespace")
        if namespace:
            custom.create_namespaced_custom_object(group, version, namespace, plural, obj)
        else:
            custom.create_cluster_custom_object(group, version, plural, obj)


def test_generated_kueue_queues_admit_gpu_jobs_on_their_vendors_nodes(cluster):
    server, _ = cluster
    out = kube_cli(cluster, "queues", "generate", "--from-cluster", "-o", "json")
    assert out.returncode == 0, out.stderr
    assert "node h100-down (8 nvidia.com/gpu) left out: not Ready" in out.stderr
    objects = json.loads(out.stdout)["items"]
    api_client = server.api_client()
    apply(api_client, objects)
    assert [cq["metadata"]["name"] for cq in server.list_objects(KUEUE, "ClusterQueue")] == ["team-1", "team-2"]

    kueue = FakeKueue(server).start()
    # RayClusters only: the simulated KubeRay talks to a Ray dashboard for RayJobs alone
    kuberay = FakeKubeRay(server, dashboard_address="127.0.0.1:9").start()
    try:
        jobs = {
            "amd": raycluster_manifest("amd-job", namespace="team-1", queue="team-1", workers=2, gpus_per_worker=4, vendor_key="amd.com/gpu"),
            "nvidia": raycluster_manifest("nv-job", namespace="team-1", queue="team-1", workers=1, gpus_per_worker=4, vendor_key="nvidia.com/gpu"),
        }
        for job in jobs.values():
            server.create_object(job)
        expected = {
            "amd": ("amd-instinct-mi300x-oam", {"amd.com/gpu.product-name": AMD_PRODUCT}, "amd.com/gpu"),
            "nvidia": ("nvidia-h100-80gb-hbm3", {"nvidia.com/gpu.product": H100}, "nvidia.com/gpu"),
        }
        for vendor, job in jobs.items():
            name = job["metadata"]["name"]
            flavor, labels, gpu_key = expected[vendor]
            # The generated ClusterQueues ask for the gpu-provisioning check: quota is reserved, but the
            # job is admitted (and its pods created) only once the autoscaler has provisioned it all.
            reserved = wait_for(lambda: _reserved(server, name), what=f"quota reservation of {name}")
            assert _admitted(server, name) is None, "admitted before the provisioning check was Ready"
            assert _pods(server, name, expect=0) == [], "pods created before admission"
            kueue.set_admission_check("team-1", reserved["metadata"]["name"], "gpu-provisioning", "Ready")
            workload = wait_for(lambda: _admitted(server, name), what=f"admission of {name}")
            assignments = {a["name"]: a["flavors"] for a in workload["status"]["admission"]["podSetAssignments"]}
            # one flavor per pod set and resource group: the workers' cpu and memory come with their GPUs
            assert assignments["workers"] == {"cpu": flavor, "memory": flavor, gpu_key: flavor}
            assert assignments["head"] == {"cpu": "cpu-nodes", "memory": "cpu-nodes"}
            pods = wait_for(lambda: _pods(server, name, expect=1 + job["spec"]["workerGroupSpecs"][0]["replicas"]), what=f"pods of {name}")
            for pod in pods:
                group = pod["metadata"]["labels"]["ray.io/group"]
                selector = pod["spec"].get("nodeSelector") or {}
                assert selector == (labels if group == "workers" else {}), (pod["metadata"]["name"], selector)
    finally:
        kuberay.stop()
        kueue.stop()
        api_client.close()


def _reserved(server, name):
    for wl in server.list_objects(KUEUE, "Workload", "team-1"):
        owners = wl["metadata"].get("ownerReferences") or []
        reserved = any(c["type"] == "QuotaReserved" and c["status"] == "True" for c in (wl.get("status") or {}).get("conditions") or [])
        if any(o["name"] == name for o in owners) and reserved:
            return wl
    return None


def _admitted(server, name):
    for wl in server.list_objects(KUEUE, "Workload", "team-1"):
        owners = wl["metadata"].get("ownerReferences") or []
        admitted = any(c["type"] == "Admitted" and c["status"] == "True" for c in (wl.get("status") or {}).get("conditions") or [])
        if any(o["name"] == name for o in owners) and admitted:
            return wl
    return None


def _pods(server, cluster_name, expect):
    pods = [p for p in server.list_objects("v1", "Pod", "team-1") if p["metadata"]["labels"].get("ray.io/cluster") == cluster_name]
    return pods if len(pods) == expect else None


def test_generated_v1beta1_objects_are_accepted_by_the_server(cluster):
    server, _ = cluster
    out = kube_cli(cluster, "queues", "generate", "--from-cluster", "--kueue-api", "v1beta1", "--no-namespaces", "-o", "json")
    assert out.returncode == 0, out.stderr
    api_client = server.api_client()
    try:
        apply(api_client, json.loads(out.stdout)["items"][: -2])  # the LocalQueues need namespaces
    finally:
        api_client.close()
    assert len(server.list_objects("kueue.x-k8s.io/v1beta1", "ClusterQueue")) == 2


# --- fair share from the cluster ----------------------------------------------------------------------
def kai_queue(name, parent=None, gpu_quota=0, weight=1):
    spec = {"resources": {"gpu": {"quota": gpu_quota, "limit": -1, "overQuotaWeight": weight}}}
    if parent:
        spec["parentQueue"] = parent
    return {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": name}, "spec": spec}


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


def test_fairshare_from_a_cluster_without_kai_says_so(tmp_path):
    from kubesim.schemas import crds

    server = KubeApiServer(crds=[c for (group, _), c in crds().items() if group != "scheduling.run.ai"]).start()
    try:
        kubeconfig = server.write_kubeconfig(tmp_path / "config")
        out = run_cli("queues", "fairshare", "--from-cluster", env=cli_env(KUBECONFIG=str(kubeconfig)))
    finally:
        server.stop()
    assert out.returncode == 3, out.stderr
    assert "listing KAI queues: the cluster serves no scheduling.run.ai/v2 Queue resource (is KAI-Scheduler installed?)" in out.stderr
    assert "Traceback" not in out.stderr
