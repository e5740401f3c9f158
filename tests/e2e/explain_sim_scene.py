"""The objects of `explain`'s scene on kubesim's test API server: Kueue's waiting and reserved Workloads and KAI's
Queues, PodGroup and pods, written as their controllers would have left them.

Why a module of its own: test_explain_sim.py (whose docstring says why each object is simulated) and
test_svg_pictures.py both explain them, through the `explain_sim_cluster` fixture of tests/e2e/conftest.py,
which starts the server and writes them; the tests read the names and helpers here.
What it does not do: start or stop a server (the fixture does).
"""

from __future__ import annotations

import time

KUEUE = "kueue.x-k8s.io/v1beta2"
GPU = "nvidia.com/gpu"
H100 = "NVIDIA-H100-80GB-HBM3"
A100 = "NVIDIA-A100-SXM4-40GB"
NS = "ml"
WAITING, BOOKED = "rayjob-train-4f2a1", "rayjob-booked-9c3e2"
NOW = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


# --- Kueue: the admission check's ProvisioningRequest and the queue position ---------------------
def kueue_objects():
    flavor = [{"name": "h100", "resources": [{"name": "cpu", "nominalQuota": "64"}, {"name": "memory", "nominalQuota": "512Gi"},
                                             {"name": GPU, "nominalQuota": "8"}]}]  # fmt: skip
    return [
        {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "h100"}, "spec": {"nodeLabels": {"nvidia.com/gpu.product": H100}}},
        {"apiVersion": KUEUE, "kind": "ProvisioningRequestConfig", "metadata": {"name": "dws"},
         "spec": {"provisioningClassName": "queued-provisioning.gke.io", "managedResources": [GPU]}},
        {"apiVersion": KUEUE, "kind": "AdmissionCheck", "metadata": {"name": "dws-prov"},
         "spec": {"controllerName": "kueue.x-k8s.io/provisioning-request",
                  "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig", "name": "dws"}}},
        {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": "team-a"},
         "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu", "memory", GPU], "flavors": flavor}],
                  "admissionChecksStrategy": {"admissionChecks": [{"name": "dws-prov"}]}}},
        {"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": "team-a", "namespace": NS}, "spec": {"clusterQueue": "team-a"}},
    ]  # fmt: skip


def workload(name, rayjob, status):
    """The Workload Kueue makes for a RayJob (2 workers x 4 GPUs), with `status`."""
    owner = {"apiVersion": "ray.io/v1", "kind": "RayJob", "name": rayjob["metadata"]["name"], "uid": rayjob["metadata"]["uid"],
             "controller": True, "blockOwnerDeletion": True}  # fmt: skip
    template = rayjob["spec"]["rayClusterSpec"]
    return {
        "apiVersion": KUEUE, "kind": "Workload",
        "metadata": {"name": name, "namespace": NS, "labels": {"kueue.x-k8s.io/job-uid": rayjob["metadata"]["uid"]}, "ownerReferences": [owner]},
        "spec": {"queueName": "team-a", "podSets": [
            {"name": "head", "count": 1, "template": template["headGroupSpec"]["template"]},
            {"name": "workers", "count": 2, "template": template["workerGroupSpecs"][0]["template"]},
        ]},
        "status": status,
    }  # fmt: skip


PENDING_CHECK = [{"name": "dws-prov", "state": "Pending", "message": "", "lastTransitionTime": NOW}]

#: Waiting for quota: in the visibility API's list, no ProvisioningRequest yet (Kueue makes one once quota is reserved).
WAITING_STATUS = {
    "conditions": [{"type": "QuotaReserved", "status": "False", "reason": "Pending", "lastTransitionTime": NOW,
                    "message": f"couldn't assign flavors to pod set workers: insufficient unused quota for {GPU} in flavor h100, 8 more needed"}],
    "admissionChecks": PENDING_CHECK,
}  # fmt: skip

#: Quota reserved, the provisioning check Pending: Kueue has made the ProvisioningRequest, the autoscaler accepted it.
BOOKED_STATUS = {
    "conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "lastTransitionTime": NOW,
                    "message": "Quota reserved in ClusterQueue team-a"}],
    "admission": {"clusterQueue": "team-a", "podSetAssignments": [
        {"name": "head", "count": 1, "flavors": {"cpu": "h100", "memory": "h100"}, "resourceUsage": {"cpu": "1", "memory": "2Gi"}},
        {"name": "workers", "count": 2, "flavors": {"cpu": "h100", "memory": "h100", GPU: "h100"},
         "resourceUsage": {"cpu": "8", "memory": "32Gi", GPU: "8"}},
    ]},
    "admissionChecks": PENDING_CHECK,
}  # fmt: skip


def provisioning_request(booked):
    owner = {"apiVersion": KUEUE, "kind": "Workload", "name": BOOKED, "uid": booked["metadata"]["uid"], "controller": True}
    return {
        "apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest",
        "metadata": {"name": f"{BOOKED}-dws-prov-1", "namespace": NS, "ownerReferences": [owner]},
        "spec": {"provisioningClassName": "queued-provisioning.gke.io", "podSets": [{"count": 2, "podTemplateRef": {"name": f"ppt-{BOOKED}-dws-prov-1-workers"}}]},
        "status": {"conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted", "message": "queued for capacity", "lastTransitionTime": NOW}]},
    }  # fmt: skip


def pending_workloads(match, query, body):
    return 200, {
        "kind": "PendingWorkloadsSummary", "apiVersion": f"visibility.kueue.x-k8s.io/{match.group(1)}", "metadata": {},
        "items": [{"metadata": {"name": WAITING, "namespace": NS}, "priority": 0, "localQueueName": "team-a",
                   "positionInClusterQueue": 2, "positionInLocalQueue": 0}],
    }  # fmt: skip


# --- KAI ------------------------------------------------------------------------------------------
def kai_queue(name, gpu_quota, parent=None):
    spec = {"resources": {"gpu": {"quota": gpu_quota, "limit": -1, "overQuotaWeight": 1}}}
    if parent:
        spec["parentQueue"] = parent
    return {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def kai_pod(server, name, queue, gpus, node=None, pod_group=None, scheduler="kai-scheduler"):
    meta = {"name": name, "namespace": NS, "labels": {"kai.scheduler/queue": queue}}
    if pod_group:
        meta["annotations"] = {"pod-group-name": pod_group}
    requests = {"cpu": "1", "memory": "1Gi", GPU: str(gpus)}
    spec = {"schedulerName": scheduler, "containers": [{"name": "c", "image": "busybox", "resources": {"requests": requests, "limits": requests}}]}
    if node:
        spec["nodeName"] = node
    created = server.create_object({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})
    status = {"phase": "Running" if node else "Pending"}
    if not node:
        status["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "lastTransitionTime": NOW,
                                 "message": "OverLimit: team-a quota has reached the allowable limit of GPUs."}]  # fmt: skip
    server.update_status({**created, "status": status})


POD_GROUP = {
    "apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
    "metadata": {"name": "pg-notebook", "namespace": NS},
    "spec": {"minMember": 1, "queue": "team-a"},
    "status": {"phase": "Pending", "schedulingConditions": [
        {"type": "UnschedulableOnNodePool", "nodePool": "default", "status": "True", "lastTransitionTime": NOW,
         "reasons": [{"reason": "OverLimit", "message": "team-a quota has reached the allowable limit of GPUs"}]}]},
}  # fmt: skip
