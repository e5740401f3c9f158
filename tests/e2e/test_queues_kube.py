"""`queues generate --from-cluster` on a real cluster of this module's own (testcluster), with nodes of two vendors.

The generated Kueue objects are applied as `kubectl apply --server-side` would (the API
server checks them against Kueue's CRD schemas and Kueue's webhooks check them); the real
Kueue (v0.17.0) and KubeRay (v1.6.1) then admit GPU RayClusters through a generated queue:
each pod set gets the flavor of its resources, its pods carry that flavor's node labels and
the scheduler puts them on that vendor's nodes. The generated v1beta1 objects are the same
objects as the v1beta2 ones, through Kueue's own conversion webhook.

Why a cluster of its own: the generator reads every node and names its flavors, priority
classes and admission check after what it finds, and the session's shared cluster has NVIDIA
nodes only; AMD nodes there would show in every other test. This module's cluster has two AMD
MI300X nodes, an NVIDIA H100 node, a cordoned one and a CPU node. Its tests share one xdist
group, so one worker starts it once.

The test stands in for one controller the cluster lacks: there is no cluster autoscaler and no
ProvisioningRequest CRD, so Kueue starts no provisioning controller, and the generated
`gpu-provisioning` check would never be Active nor Ready. The test marks the check Active and,
once Kueue has reserved quota, the Workload's check Ready, as that controller does once the
autoscaler has provisioned the nodes; everything else is Kueue's and KubeRay's own.

What this does not do: a node that is not Ready (kwok makes every node of the session's cluster
Ready; a node without a kubelet would count in every other module's capacity), and KAI's fair share
(KAI is not part of the session's cluster: here only its absence is checked), are in
test_queues_from_cluster.py, on a stack of its own.
"""

from __future__ import annotations

import json
import time
from typing import Any, Optional

import pytest

from tests.helpers import cli_env, run_cli
from tests.builders import gpu_node, raycluster_manifest
from tests.waits import wait_for
from testcluster.pytest_plugin import own_cluster
from testcluster.stack import StackOptions

KUEUE = "kueue.x-k8s.io/v1beta2"
AMD_PRODUCT = "AMD_Instinct_MI300X_OAM"
H100 = "NVIDIA-H100-80GB-HBM3"
CHECK = "gpu-provisioning"  # the generator's admission check

pytestmark = pytest.mark.xdist_group("queues-kube-own-cluster")


def node(name: str, *, vendor: Optional[str] = None, product: str = "", memory_mib: int = 0, cpu: str = "96", memory: str = "1500Gi",
         cordoned: bool = False) -> dict[str, Any]:
    """A Node as a kubelet would register it (kwok adds the rest): 8 GPUs of `vendor`, or none."""
    capacity = {"cpu": cpu, "memory": memory, "pods": "110"}
    labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"}
    if vendor:
        capacity[f"{vendor}.com/gpu"] = "8"
        labels = gpu_node(name, 8, vendor, product=product, memory_mib=memory_mib)["metadata"]["labels"]
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
            "spec": {"unschedulable": True} if cordoned else {}, "status": {"capacity": capacity, "allocatable": capacity}}  # fmt: skip


NODES = [
    node("mi300x-0", vendor="amd", product=AMD_PRODUCT, memory_mib=196608),
    node("mi300x-1", vendor="amd", product=AMD_PRODUCT, memory_mib=196608),
    node("h100-0", vendor="nvidia", product=H100, memory_mib=81559),
    node("h100-cordoned", vendor="nvidia", product=H100, memory_mib=81559, cordoned=True),
    node("cpu-0", cpu="32", memory="128Gi"),
]


@pytest.fixture(scope="module")
def cluster():
    """(admin client, kubeconfig path) of this module's own stack."""
    from testcluster.client import ClusterClient

    with own_cluster(StackOptions(nodes=NODES)) as stack:
        client = ClusterClient(stack.kubeconfig)
        try:
            yield client, str(stack.kubeconfig)
        finally:
            client.close()


def kube_cli(cluster, *args):
    return run_cli(*args, env=cli_env(KUBECONFIG=cluster[1]))


def apply(client: Any, objects: list[dict[str, Any]]) -> dict[str, Optional[int]]:
    """Server-side apply each object, as `kubectl apply --server-side` (without --force-conflicts): a field another
    apply set to another value is a conflict (409), not overwritten. The objects' generations after it, by kind/name."""
    generations = {}
    with client.api_client() as api_client:
        api = client.dynamic_client(api_client)
        for obj in objects:
            resource = api.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
            meta = obj["metadata"]
            applied = api.server_side_apply(resource, body=obj, name=meta["name"], namespace=meta.get("namespace"), field_manager="kubectl")
            generations[f"{obj['kind']}/{meta.get('namespace', '')}/{meta['name']}"] = applied.metadata.generation
    return generations


def generated(cluster, *flags: str) -> list[dict[str, Any]]:
    out = kube_cli(cluster, "queues", "generate", "--from-cluster", *flags, "-o", "json")
    assert out.returncode == 0, out.stderr
    assert "node h100-cordoned (8 nvidia.com/gpu) left out: cordoned" in out.stderr, out.stderr
    return json.loads(out.stdout)["items"]


def stand_in_for_the_provisioning_controller(client: Any) -> None:
    """Mark the generated admission check Active, as Kueue's provisioning controller would (read again on a conflict)."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    active = {"conditions": [{"type": "Active", "status": "True", "reason": "Active", "message": "", "lastTransitionTime": now}]}
    wait_for(lambda: _written(client, lambda: {**client.get_object(KUEUE, "AdmissionCheck", CHECK), "status": active}),
             timeout=30, what=f"AdmissionCheck {CHECK} marked Active")  # fmt: skip


def set_check_ready(client: Any, workload: dict[str, Any]) -> None:
    """The Workload's admission check Ready, as the provisioning controller sets it once the nodes are there."""

    def ready() -> dict[str, Any]:
        current = client.get_object(KUEUE, "Workload", workload["metadata"]["name"], workload["metadata"]["namespace"])
        checks = current["status"].get("admissionChecks") or []
        assert CHECK in _check_names(current), f"{CHECK} is not among {workload['metadata']['name']}'s checks: {checks}"
        for check in checks:
            if check["name"] == CHECK:
                check.update(state="Ready", message="provisioned", lastTransitionTime=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        return current

    wait_for(lambda: _written(client, ready), timeout=30, what=f"the {CHECK} check of {workload['metadata']['name']} set Ready")


def _written(client: Any, body: Any) -> bool:
    try:
        client.update_status(body())
    except Exception as exc:  # noqa: BLE001 - only a conflict is read again
        if getattr(exc, "status", None) != 409:
            raise
        return False
    return True


def test_generated_kueue_queues_admit_gpu_jobs_on_their_vendors_nodes(cluster):
    client, _ = cluster
    apply(client, generated(cluster))
    names = {cq["metadata"]["name"] for cq in client.list_objects(KUEUE, "ClusterQueue")}
    assert names == {"team-1", "team-2"}
    stand_in_for_the_provisioning_controller(client)
    jobs = {
        "amd": raycluster_manifest("amd-job", namespace="team-1", queue="team-1", workers=2, gpus_per_worker=4, vendor_key="amd.com/gpu"),
        "nvidia": raycluster_manifest("nv-job", namespace="team-1", queue="team-1", workers=1, gpus_per_worker=4, vendor_key="nvidia.com/gpu"),
    }
    for job in jobs.values():
        client.create_object(job)
    expected = {
        "amd": ("amd-instinct-mi300x-oam", {"amd.com/gpu.product-name": AMD_PRODUCT}, "amd.com/gpu", {"mi300x-0", "mi300x-1"}),
        "nvidia": ("nvidia-h100-80gb-hbm3", {"nvidia.com/gpu.product": H100}, "nvidia.com/gpu", {"h100-0"}),
    }
    for vendor, job in jobs.items():
        name = job["metadata"]["name"]
        flavor, labels, gpu_key, vendor_nodes = expected[vendor]
        # The generated ClusterQueues ask for the gpu-provisioning check: quota is reserved, but the
        # job is admitted (and its pods created) only once the autoscaler has provisioned it all.
        reserved = wait_for(lambda: _reserved(client, name), timeout=60, what=f"quota reservation of {name}")
        assert _admitted(client, name) is None, "admitted before the provisioning check was Ready"
        assert _pods(client, name, expect=0) == [], "pods created before admission"
        set_check_ready(client, reserved)
        workload = wait_for(lambda: _admitted(client, name), timeout=60, what=f"admission of {name}")
        assignments = {a["name"]: a["flavors"] for a in workload["status"]["admission"]["podSetAssignments"]}
        # one flavor per pod set and resource group: the workers' cpu and memory come with their GPUs
        assert assignments["workers"] == {"cpu": flavor, "memory": flavor, gpu_key: flavor}
        assert assignments["head"] == {"cpu": "cpu-nodes", "memory": "cpu-nodes"}
        count = 1 + job["spec"]["workerGroupSpecs"][0]["replicas"]
        pods = wait_for(lambda: _scheduled(_pods(client, name, expect=count)), timeout=60, what=f"pods of {name} scheduled")
        for pod in pods:
            group = pod["metadata"]["labels"]["ray.io/group"]
            selector = pod["spec"].get("nodeSelector") or {}
            assert selector == (labels if group == "workers" else {}), (pod["metadata"]["name"], selector)
            if group == "workers":
                assert pod["spec"]["nodeName"] in vendor_nodes, (pod["metadata"]["name"], pod["spec"]["nodeName"])


def _owned_workload(client, name, condition):
    for wl in client.list_objects(KUEUE, "Workload", "team-1"):
        owners = wl["metadata"].get("ownerReferences") or []
        holds = any(c["type"] == condition and c["status"] == "True" for c in (wl.get("status") or {}).get("conditions") or [])
        if any(o["name"] == name for o in owners) and holds:
            return wl
    return None


def _reserved(client, name):
    """The Workload holding quota once Kueue's workload controller has listed its checks' states too.

    The scheduler writes QuotaReserved and the workload controller adds `status.admissionChecks` in a later update of
    its own (kueue v0.17.0 pkg/controller/core/workload_controller.go, reconcileSyncAdmissionChecks), so a Workload
    can hold quota with no check state yet to set Ready.
    """
    workload = _owned_workload(client, name, "QuotaReserved")
    return workload if CHECK in _check_names(workload) else None


def _check_names(workload):
    return {c.get("name") for c in ((workload or {}).get("status") or {}).get("admissionChecks") or []}


class _Workloads:
    """A client listing one Workload, for `_reserved` alone."""

    def __init__(self, workload: dict[str, Any]) -> None:
        self.workload = workload

    def list_objects(self, api_version: str, kind: str, namespace: str) -> list[dict[str, Any]]:
        return [self.workload]


def _workload_of(owner: str, conditions: list[str], checks: list[str]) -> dict[str, Any]:
    status = {"conditions": [{"type": c, "status": "True"} for c in conditions], "admissionChecks": [{"name": n, "state": "Pending"} for n in checks]}
    return {"metadata": {"name": "wl", "ownerReferences": [{"name": owner}]}, "status": status if checks else {"conditions": status["conditions"]}}


@pytest.mark.parametrize("conditions, checks, reserved", [
    (["QuotaReserved"], [CHECK], True),
    (["QuotaReserved"], [], False),  # the scheduler's write, before the workload controller lists the checks
    (["QuotaReserved"], ["another-check"], False),
    ([], [CHECK], False),
])  # fmt: skip
def test_quota_counts_as_reserved_only_once_the_check_is_listed(conditions: list[str], checks: list[str], reserved: bool) -> None:
    assert bool(_reserved(_Workloads(_workload_of("job", conditions, checks)), "job")) is reserved


def _admitted(client, name):
    return _owned_workload(client, name, "Admitted")


def _pods(client, cluster_name, expect):
    pods = [p for p in client.list_objects("v1", "Pod", "team-1") if p["metadata"]["labels"].get("ray.io/cluster") == cluster_name]
    return pods if len(pods) == expect else None


def _scheduled(pods):
    return pods if pods is not None and all(p["spec"].get("nodeName") for p in pods) else None


def test_generated_v1beta1_objects_are_the_v1beta2_objects_through_kueue_s_conversion(cluster):
    """Applied after the v1beta2 ones (again: applying is idempotent, so the order of the tests does not matter), the
    v1beta1 objects are accepted, conflict with no field and change no object's generation: Kueue's conversion
    webhook makes the same objects of them."""
    client, _ = cluster
    v1beta2 = generated(cluster)
    before = apply(client, v1beta2)
    v1beta1 = generated(cluster, "--kueue-api", "v1beta1", "--no-namespaces")
    assert {o["apiVersion"] for o in v1beta1} == {"kueue.x-k8s.io/v1beta1"}
    assert [(o["kind"], o["metadata"]["name"]) for o in v1beta1] == [(o["kind"], o["metadata"]["name"]) for o in v1beta2 if o["kind"] != "Namespace"]
    after = apply(client, v1beta1)
    assert after == {key: generation for key, generation in before.items() if not key.startswith("Namespace/")}
    assert {cq["metadata"]["name"] for cq in client.list_objects("kueue.x-k8s.io/v1beta1", "ClusterQueue")} == {"team-1", "team-2"}


def test_fairshare_from_a_cluster_without_kai_says_so(cluster):
    """The real cluster has no KAI: no scheduling.run.ai Queue resource is served."""
    out = kube_cli(cluster, "queues", "fairshare", "--from-cluster")
    assert out.returncode == 3, out.stderr
    assert "listing KAI queues: the cluster serves no scheduling.run.ai/v2 Queue resource (is KAI-Scheduler installed?)" in out.stderr
    assert "Traceback" not in out.stderr
