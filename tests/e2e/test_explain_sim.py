"""`explain NAME` where the real cluster lacks the parts: on kubesim, the simulated API server.

The objects are written straight onto the server (`create_object`, status included) as
their controllers would have left them, so no simulated controller runs. Each test is here
for a reason the real cluster (test_explain.py) cannot meet:

- KAI (its Queues, PodGroups and scheduler) is not part of the real cluster: the KAI tests
  explain a pod and its PodGroup whose queue is over its fair share, and apply the generated
  KAI Queues against the Queue CRD.
- The ProvisioningRequest's answer: the real cluster has no cluster autoscaler and no
  ProvisioningRequest CRD (so Kueue starts no provisioning controller and none is ever made).
  Here one is, as Kueue makes it: for a Workload with quota reserved whose check is Pending.
- The queue position: the real cluster does not serve Kueue's visibility API (an aggregated
  API); here a handler answers for the LocalQueue as that API would, for a Workload still
  waiting for quota (the only ones it lists).
"""

from __future__ import annotations

import json
import time

import kubernetes.client
import pytest

from tests.helpers import EXAMPLES, cli_env, run_cli
from kubesim.fixtures import make_gpu_node, rayjob_manifest
from kubesim.server import KubeApiServer

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


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    server = KubeApiServer().start()
    kubeconfig = server.write_kubeconfig(tmp_path_factory.mktemp("explain") / "config")
    make_gpu_node(server, "h100-0", gpus=8, product=H100)
    make_gpu_node(server, "a100-0", gpus=4, product=A100, memory_mib=40960)
    server.create_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    for obj in kueue_objects():
        server.create_object(obj)
    for job, name, status in (("train", WAITING, WAITING_STATUS), ("booked", BOOKED, BOOKED_STATUS)):
        rayjob = server.create_object(rayjob_manifest(job, namespace=NS, queue="team-a", workers=2, gpus_per_worker=4))
        server.create_object(workload(name, rayjob, status))
    server.create_object(provisioning_request(server.get_object(KUEUE, "Workload", BOOKED, NS)))
    server.add_handler("GET", r"^/apis/visibility\.kueue\.x-k8s\.io/(v1beta1|v1beta2)/namespaces/ml/localqueues/team-a/pendingworkloads/?$", pending_workloads)
    # KAI: capacity 12 GPUs; team-a (quota 4) runs 6 and wants 6 more, team-b (quota 8) runs 2 and wants 6 more
    for queue in (kai_queue("research", 12), kai_queue("team-a", 4, "research"), kai_queue("team-b", 8, "research")):
        server.create_object(queue)
    server.create_object(POD_GROUP)
    kai_pod(server, "a-run", "team-a", 6, node="h100-0")
    kai_pod(server, "b-run", "team-b", 2, node="a100-0")
    kai_pod(server, "b-wait", "team-b", 6)
    kai_pod(server, "notebook-0", "team-a", 6, pod_group="pg-notebook")
    yield server, str(kubeconfig)
    server.stop()
    assert server.internal_errors == [], server.internal_errors


def explain(cluster, *args):
    return run_cli("explain", *args, "-n", NS, env=cli_env(KUBECONFIG=cluster[1]))


def test_a_workload_waiting_for_quota_has_its_position_from_the_visibility_api(cluster):
    out = explain(cluster, "train")
    assert out.returncode == 0, out.stderr
    assert "position: #1 in its LocalQueue, #3 in the ClusterQueue" in out.stdout, out.stdout
    data = json.loads(explain(cluster, "train", "-o", "json").stdout)
    assert data["kueue"]["position"] == {"positionInLocalQueue": 0, "positionInClusterQueue": 2, "priority": 0}
    # not yet a ProvisioningRequest: Kueue makes one once the quota is reserved
    assert data["kueue"]["admissionChecks"][0]["provisioningRequest"] is None and data["warnings"] == []


def test_a_reserved_workload_s_check_says_what_the_autoscaler_answered(cluster):
    out = explain(cluster, "booked")
    assert out.returncode == 0, out.stderr
    assert f"admission check dws-prov: Pending; ProvisioningRequest {BOOKED}-dws-prov-1: accepted (Accepted: queued for capacity)" in out.stdout, out.stdout
    assert "position:" not in out.stdout  # quota reserved: no longer in the queue
    data = json.loads(explain(cluster, "booked", "-o", "json").stdout)
    assert data["kueue"]["admissionChecks"] == [{"name": "dws-prov", "state": "Pending", "message": "", "provisioningRequest": f"{BOOKED}-dws-prov-1",
                                                 "provisioningState": "accepted", "provisioningMessage": "Accepted: queued for capacity"}]  # fmt: skip
    assert data["warnings"] == []


def test_kai_pod_and_its_pod_group_say_the_queue_is_over_its_fair_share(cluster):
    for name in ("notebook-0", "pg-notebook"):
        out = explain(cluster, name)
        assert out.returncode == 0, out.stderr
        # research divides its 12 GPUs: team-a gets its quota of 4, team-b its 8; team-a's bound pod holds 6
        assert "queue team-a is over its fair share of 4 GPUs: 6 allocated" in out.stdout, out.stdout
        assert "unschedulable on node pool default: OverLimit -- scheduling it would take its queue over the queue's limit" in out.stdout
        assert "queue research is within its fair share of 12 GPUs: 8 allocated, 4 to go" in out.stdout
        assert "millicores" not in out.stdout  # the Queues set no cpu terms: not worded
    assert "Pod ml/notebook-0: Pending; PodScheduled=False (Unschedulable: OverLimit" in explain(cluster, "notebook-0").stdout


def test_kai_json(cluster):
    out = explain(cluster, "notebook-0", "-o", "json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert (data["kind"], data["scheduler"], data["kai"]["podGroup"], data["kai"]["queue"]) == ("Pod", "kai", "pg-notebook", "team-a")
    team_a = data["kai"]["queues"][0]
    assert (team_a["name"], team_a["parent"], team_a["priority"], team_a["allocationSource"]) == ("team-a", "research", 100, "bound pods")
    assert team_a["resources"]["gpu"] == {"configured": True, "quota": 4, "limit": -1, "overQuotaWeight": 1, "request": 12, "deserved": 4, "fairShare": 4, "allocated": 6}
    assert data["kai"]["unschedulableReasons"][0]["reason"] == "OverLimit"


def test_kai_explain_from_saved_objects_says_what_explain_on_the_cluster_says(cluster, tmp_path):
    """The Queues, PodGroup, pods and nodes saved as a List (as `kubectl get -o json` writes it), read with -f."""
    server, _ = cluster
    kinds = [("scheduling.run.ai/v2", "Queue"), ("scheduling.run.ai/v2alpha2", "PodGroup"), ("v1", "Pod"), ("v1", "Node")]
    items = [obj for api_version, kind in kinds for obj in server.list_objects(api_version, kind)]
    saved = tmp_path / "kai.json"
    saved.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    offline = cli_env(KUBECONFIG=str(tmp_path / "none"))
    for name in ("notebook-0", "pg-notebook"):
        for output in ("table", "json"):
            from_files = run_cli("explain", name, "-f", str(saved), "-o", output, env=offline)
            assert from_files.returncode == 0, from_files.stderr
            assert from_files.stdout == explain(cluster, name, "-o", output).stdout


NODES = str(EXAMPLES / "cluster" / "nodes.json")


def test_generated_kai_queues_apply_and_explain_a_pod_in_them(tmp_path):
    out = run_cli("queues", "generate", "--nodes", NODES, "--kai", "-o", "json")
    assert out.returncode == 0, out.stderr
    queues = json.loads(out.stdout)["items"]
    server = KubeApiServer().start()
    try:
        api_client = server.api_client()
        custom = kubernetes.client.CustomObjectsApi(api_client)
        for queue in queues:  # as `kubectl apply` would send them, checked against the Queue CRD
            custom.create_cluster_custom_object("scheduling.run.ai", "v2", "queues", queue)
        api_client.close()
        names = sorted(q["metadata"]["name"] for q in server.list_objects("scheduling.run.ai/v2", "Queue"))
        assert names == sorted(q["metadata"]["name"] for q in queues) and len(names) >= 2
        project = next(q for q in queues if q["spec"].get("parentQueue"))
        make_gpu_node(server, "h100-0", gpus=8, product=H100)
        server.create_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        kai_pod(server, "job-0", project["metadata"]["name"], 2)
        kubeconfig = server.write_kubeconfig(tmp_path / "config")
        explained = run_cli("explain", "job-0", "-n", NS, "-o", "json", env=cli_env(KUBECONFIG=str(kubeconfig)))
        assert explained.returncode == 0, explained.stderr
        chain = [q["name"] for q in json.loads(explained.stdout)["kai"]["queues"]]
        assert chain == [project["metadata"]["name"], project["spec"]["parentQueue"]]
    finally:
        server.stop()
