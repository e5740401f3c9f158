"""The scene `explain` is tested on where the session's cluster lacks the parts: a real API server of a module's own
with the real Kueue (v0.17.0) serving its visibility API, cluster-autoscaler's answer to a ProvisioningRequest, and
KAI's Queues, PodGroup and pods written as KAI would have left them.

Why a module of its own: test_explain_sim.py (whose docstring says why each part is as it is) and
test_svg_pictures.py both explain it, each on a stack of its own (`scene_stack`); the tests read the names and
helpers here. What is real and what is written by hand:
- Kueue (kueue=True): the RayJobs are queued and admitted by the real Kueue, started after the ProvisioningRequest
  CRD, so its provisioning admission check controller runs: it marks the check Active, reserves `booked`'s quota
  and makes its ProvisioningRequest, which the scene then answers as cluster-autoscaler would (Accepted; the
  autoscaler cannot run here); `train` waits for quota behind two RayJobs of higher priority from another
  LocalQueue, and its position is the visibility API's, served by Kueue through the API server's aggregator.
- KAI: its CRDs without its scheduler; the Queues, the PodGroup and the pods' status are written through the
  status subresource as KAI's scheduler would have left them; the bound pods run on kwok's nodes.
What it does not do: run KAI or the cluster autoscaler, or touch the session's shared cluster.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Optional

from tests.builders import h100_node, rayjob_manifest
from tests.e2e.explain_scene import condition, workload_of
from tests.waits import wait_for

KUEUE = "kueue.x-k8s.io/v1beta2"
PR_API = "autoscaling.x-k8s.io/v1"
GPU = "nvidia.com/gpu"
H100 = "NVIDIA-H100-80GB-HBM3"
A100 = "NVIDIA-A100-SXM4-40GB"
NS = "ml"
LQ, BATCH_LQ, CHECK = "team-a", "team-a-batch", "dws-prov"
NOW = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
NODES = [h100_node("h100-0", 8), h100_node("a100-0", 4, product=A100, memory_mib=40960)]


@dataclass(frozen=True)
class Scene:
    """The admin's client and kubeconfig; with Kueue, the Workloads Kueue made for RayJobs `booked` and `train`."""

    client: Any
    kubeconfig: str
    booked: str = ""
    waiting: str = ""


# --- Kueue: the admission check's ProvisioningRequest and the queue position ---------------------
def kueue_objects() -> list[dict[str, Any]]:
    flavor = [{"name": "h100", "resources": [{"name": "cpu", "nominalQuota": "64"}, {"name": "memory", "nominalQuota": "512Gi"},
                                             {"name": GPU, "nominalQuota": "8"}]}]  # fmt: skip
    return [
        {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "h100"}, "spec": {"nodeLabels": {"nvidia.com/gpu.product": H100}}},
        {"apiVersion": KUEUE, "kind": "ProvisioningRequestConfig", "metadata": {"name": "dws"},
         "spec": {"provisioningClassName": "queued-provisioning.gke.io", "managedResources": [GPU]}},
        {"apiVersion": KUEUE, "kind": "AdmissionCheck", "metadata": {"name": CHECK},
         "spec": {"controllerName": "kueue.x-k8s.io/provisioning-request",
                  "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig", "name": "dws"}}},
        {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": "team-a"},
         "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu", "memory", GPU], "flavors": flavor}],
                  "admissionChecksStrategy": {"admissionChecks": [{"name": CHECK}]}}},
        {"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": LQ, "namespace": NS}, "spec": {"clusterQueue": "team-a"}},
        {"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": BATCH_LQ, "namespace": NS}, "spec": {"clusterQueue": "team-a"}},
        {"apiVersion": KUEUE, "kind": "WorkloadPriorityClass", "metadata": {"name": "urgent"}, "value": 100},
    ]  # fmt: skip


def _accepted(client: Any, name: str) -> None:
    """ProvisioningRequest `name` answered as cluster-autoscaler answers one it queues (Accepted, not yet Provisioned)."""
    found = client.get_object(PR_API, "ProvisioningRequest", name, NS)
    accepted = {"type": "Accepted", "status": "True", "reason": "Accepted", "message": "queued for capacity", "lastTransitionTime": NOW}
    client.update_status({**found, "status": {**(found.get("status") or {}), "conditions": [accepted]}})


def _position(client: Any, workload: str) -> Optional[int]:
    """`workload`'s place in ClusterQueue team-a as Kueue's visibility API lists it (None while it is not listed)."""
    import json

    api = client.api_client()
    try:
        method, url, headers, _, _ = api.param_serialize(
            method="GET", resource_path="/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/team-a/pendingworkloads",
            header_params={"Accept": "application/json"}, auth_settings=["BearerToken"],
        )  # fmt: skip
        response = api.call_api(method, url, header_params=headers, _request_timeout=10)
        response.read()
        items = json.loads(response.data).get("items") or [] if response.status == 200 else []
    finally:
        api.close()
    return next((i.get("positionInClusterQueue") for i in items if i["metadata"]["name"] == workload), None)


def _queue_kueue_scene(client: Any) -> Scene:
    """The ClusterQueue and its check (Active once Kueue's provisioning controller has seen its config); RayJob
    `booked` (2 x 4 GPUs: the whole quota) reserved, its ProvisioningRequest accepted; two RayJobs of priority
    `urgent` from LocalQueue team-a-batch, then `train`, all three waiting for quota."""
    for obj in kueue_objects():
        client.create_object(obj)
    wait_for(lambda: (condition(client.get_object(KUEUE, "AdmissionCheck", CHECK), "Active") or {}).get("status") == "True",
             timeout=60, what="Kueue's provisioning controller to mark the admission check Active")  # fmt: skip
    client.create_object(rayjob_manifest("booked", namespace=NS, queue=LQ, workers=2, gpus_per_worker=4))
    wait_for(lambda: (condition(workload_of(client, NS, "booked"), "QuotaReserved") or {}).get("status") == "True",
             timeout=60, what="Kueue to reserve RayJob booked's quota")  # fmt: skip
    booked = workload_of(client, NS, "booked")["metadata"]["name"]
    request = f"{booked}-{CHECK}-1"  # Kueue's name for its first try (provisioning.ProvisioningRequestName)
    wait_for(lambda: client.get_object(PR_API, "ProvisioningRequest", request, NS) is not None, timeout=60,
             what=f"Kueue to make ProvisioningRequest {request}")  # fmt: skip
    _accepted(client, request)
    for name in ("early-0", "early-1"):
        job = rayjob_manifest(name, namespace=NS, queue=BATCH_LQ, workers=1, gpus_per_worker=1)
        job["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "urgent"
        client.create_object(job)
    client.create_object(rayjob_manifest("train", namespace=NS, queue=LQ, workers=2, gpus_per_worker=4))

    def train_queued_third() -> bool:
        workload = workload_of(client, NS, "train")
        return workload is not None and _position(client, workload["metadata"]["name"]) == 2

    wait_for(train_queued_third, timeout=60, what="Kueue's visibility API to list train third in ClusterQueue team-a")
    return Scene(client, "", booked, workload_of(client, NS, "train")["metadata"]["name"])


# --- KAI ------------------------------------------------------------------------------------------
def kai_queue(name: str, gpu_quota: int, parent: Optional[str] = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"resources": {"gpu": {"quota": gpu_quota, "limit": -1, "overQuotaWeight": 1}}}
    if parent:
        spec["parentQueue"] = parent
    return {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def kai_pod(client: Any, name: str, queue: str, gpus: int, node: Optional[str] = None, pod_group: Optional[str] = None) -> None:
    """A pod of KAI's scheduler: bound to `node` (kwok runs it), or left Pending with KAI's OverLimit reason."""
    meta: dict[str, Any] = {"name": name, "namespace": NS, "labels": {"kai.scheduler/queue": queue}}
    if pod_group:
        meta["annotations"] = {"pod-group-name": pod_group}
    requests = {"cpu": "1", "memory": "1Gi", GPU: str(gpus)}
    spec: dict[str, Any] = {"schedulerName": "kai-scheduler", "containers": [{"name": "c", "image": "busybox", "resources": {"requests": requests, "limits": requests}}]}
    if node:
        spec["nodeName"] = node
    created = client.create_object({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})
    if node:
        wait_for(lambda: (client.get_object("v1", "Pod", name, NS) or {}).get("status", {}).get("phase") == "Running", timeout=60,
                 what=f"kwok to run pod {name} on {node}")  # fmt: skip
        return
    unschedulable = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "lastTransitionTime": NOW,
                     "message": "OverLimit: team-a quota has reached the allowable limit of GPUs."}  # fmt: skip
    client.update_status({**created, "status": {"phase": "Pending", "conditions": [unschedulable]}})


POD_GROUP = {
    "apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
    "metadata": {"name": "pg-notebook", "namespace": NS},
    "spec": {"minMember": 1, "queue": "team-a"},
    "status": {"phase": "Pending", "schedulingConditions": [
        {"type": "UnschedulableOnNodePool", "nodePool": "default", "status": "True", "lastTransitionTime": NOW,
         "reasons": [{"reason": "OverLimit", "message": "team-a quota has reached the allowable limit of GPUs"}]}]},
}  # fmt: skip


def _write_kai_scene(client: Any) -> None:
    """KAI: capacity 12 GPUs; team-a (quota 4) runs 6 and wants 6 more, team-b (quota 8) runs 2 and wants 6 more."""
    for queue in (kai_queue("research", 12), kai_queue("team-a", 4, "research"), kai_queue("team-b", 8, "research")):
        client.create_object(queue)
    client.create_object(POD_GROUP)
    kai_pod(client, "a-run", "team-a", 6, node="h100-0")
    kai_pod(client, "b-run", "team-b", 2, node="a100-0")
    kai_pod(client, "b-wait", "team-b", 6)
    kai_pod(client, "notebook-0", "team-a", 6, pod_group="pg-notebook")


@contextlib.contextmanager
def scene_stack(workdir: Path, *, kueue: bool) -> Iterator[Scene]:
    """A stack of the caller's own with the scene (KAI's part; with `kueue`, Kueue's too), stopped after; skipped where
    Go is absent. Nodes h100-0 (8 H100s) and a100-0 (4 A100s of 40 GiB)."""
    from testcluster.client import ClusterClient
    from testcluster.pytest_plugin import own_cluster
    from testcluster.stack import StackOptions

    options = StackOptions(operators=("kueue",) if kueue else (), crds_only=("kuberay", "kai", "autoscaler") if kueue else ("kai",),
                           kueue_feature_gates={"VisibilityOnDemand": True} if kueue else {}, nodes=NODES)  # fmt: skip
    with own_cluster(options) as stack:
        client = ClusterClient(stack.kubeconfig)
        try:
            client.create_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
            wait_for(lambda: client.get_object("v1", "ServiceAccount", "default", NS) is not None, timeout=60,
                     what=f"namespace {NS}'s default ServiceAccount")  # fmt: skip
            scene = _queue_kueue_scene(client) if kueue else Scene(client, "")
            _write_kai_scene(client)
            kubeconfig = client.write_kubeconfig(workdir / "config", namespace=NS)
            yield Scene(client, str(kubeconfig), scene.booked, scene.waiting)
        finally:
            client.close()
