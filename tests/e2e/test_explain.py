"""`explain NAME` as a user runs it, against the test API server: CLI in, words or JSON and exit status out.

The Kueue and KAI objects are written straight onto the server (`create_object`,
status included) as Kueue, the cluster autoscaler and KAI would have left them,
so no simulated controller or Ray head is needed: a RayJob waiting in
ClusterQueue team-a (cohort gpu, flavors a100 and h100 with borrowing limits)
behind a ProvisioningRequest admission check, and a KAI pod whose queue is over
its fair share. The visibility API's answer for the LocalQueue is served by a
handler, as Kueue's aggregated API would answer.
"""

from __future__ import annotations

import json
import time

import kubernetes.client
import pytest
import yaml

from tests.helpers import EXAMPLES, cli_env, run_cli
from kubesim.fixtures import make_gpu_node, rayjob_manifest
from kubesim.server import KubeApiServer

KUEUE = "kueue.x-k8s.io/v1beta2"
GPU = "nvidia.com/gpu"
H100 = "NVIDIA-H100-80GB-HBM3"
A100 = "NVIDIA-A100-SXM4-40GB"
NS = "ml"
WORKLOAD = "rayjob-train-4f2a1"
NOW = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def gpu_flavor(name, gpu, gpu_limits):
    return {"name": name, "resources": [{"name": "cpu", "nominalQuota": "64"}, {"name": "memory", "nominalQuota": "512Gi"},
                                        {"name": GPU, "nominalQuota": gpu, **gpu_limits}]}  # fmt: skip


def cluster_queue(name, flavors, reserved=None):
    obj = {
        "apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": name},
        "spec": {"cohortName": "gpu", "namespaceSelector": {},
                 "resourceGroups": [{"coveredResources": ["cpu", "memory", GPU], "flavors": flavors}],
                 "admissionChecksStrategy": {"admissionChecks": [{"name": "dws-prov"}]}},
    }  # fmt: skip
    if reserved:
        usage = [{"name": f, "resources": [{"name": r, "total": v} for r, v in res.items()]} for f, res in reserved.items()]
        obj["status"] = {"flavorsReservation": usage, "flavorsUsage": usage}
    return obj


def kueue_objects(rayjob):
    owner = {"apiVersion": "ray.io/v1", "kind": "RayJob", "name": "train", "uid": rayjob["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}
    template = rayjob["spec"]["rayClusterSpec"]
    return [
        {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "a100"}, "spec": {"nodeLabels": {"nvidia.com/gpu.product": A100}}},
        {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "h100"}, "spec": {"nodeLabels": {"nvidia.com/gpu.product": H100}}},
        {"apiVersion": KUEUE, "kind": "ProvisioningRequestConfig", "metadata": {"name": "dws"},
         "spec": {"provisioningClassName": "queued-provisioning.gke.io", "managedResources": [GPU]}},
        {"apiVersion": KUEUE, "kind": "AdmissionCheck", "metadata": {"name": "dws-prov"},
         "spec": {"controllerName": "kueue.x-k8s.io/provisioning-request",
                  "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig", "name": "dws"}}},
        cluster_queue("team-a", [gpu_flavor("a100", "4", {"borrowingLimit": "0"}), gpu_flavor("h100", "8", {"borrowingLimit": "4"})],
                      reserved={"h100": {GPU: "6", "cpu": "12", "memory": "96Gi"}}),
        cluster_queue("team-b", [gpu_flavor("a100", "4", {}), gpu_flavor("h100", "8", {"lendingLimit": "2"})]),
        {"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": "team-a", "namespace": NS}, "spec": {"clusterQueue": "team-a"}},
        {
            "apiVersion": KUEUE, "kind": "Workload",
            "metadata": {"name": WORKLOAD, "namespace": NS, "labels": {"kueue.x-k8s.io/job-uid": rayjob["metadata"]["uid"]}, "ownerReferences": [owner]},
            "spec": {"queueName": "team-a", "podSets": [
                {"name": "head", "count": 1, "template": template["headGroupSpec"]["template"]},
                {"name": "workers", "count": 2, "template": template["workerGroupSpecs"][0]["template"]},
            ]},
            "status": {
                "conditions": [{"type": "QuotaReserved", "status": "False", "reason": "Pending", "lastTransitionTime": NOW,
                                "message": f"couldn't assign flavors to pod set workers: insufficient unused quota for {GPU} in flavor h100, 4 more needed"}],
                "admissionChecks": [{"name": "dws-prov", "state": "Pending", "message": "", "lastTransitionTime": NOW}],
            },
        },
    ]  # fmt: skip


def provisioning_request(workload):
    owner = {"apiVersion": KUEUE, "kind": "Workload", "name": WORKLOAD, "uid": workload["metadata"]["uid"], "controller": True}
    return {
        "apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest",
        "metadata": {"name": f"{WORKLOAD}-dws-prov-1", "namespace": NS, "ownerReferences": [owner]},
        "spec": {"provisioningClassName": "queued-provisioning.gke.io", "podSets": [{"count": 2, "podTemplateRef": {"name": f"ppt-{WORKLOAD}-dws-prov-1-workers"}}]},
        "status": {"conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted", "message": "queued for capacity", "lastTransitionTime": NOW}]},
    }  # fmt: skip


def pending_workloads(match, query, body):
    return 200, {
        "kind": "PendingWorkloadsSummary", "apiVersion": f"visibility.kueue.x-k8s.io/{match.group(1)}", "metadata": {},
        "items": [{"metadata": {"name": WORKLOAD, "namespace": NS}, "priority": 0, "localQueueName": "team-a",
                   "positionInClusterQueue": 2, "positionInLocalQueue": 0}],
    }  # fmt: skip


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
    rayjob = server.create_object(rayjob_manifest("train", namespace=NS, queue="team-a", workers=2, gpus_per_worker=5))
    for obj in kueue_objects(rayjob):
        server.create_object(obj)
    server.create_object(provisioning_request(server.get_object(KUEUE, "Workload", WORKLOAD, NS)))
    server.add_handler("GET", r"^/apis/visibility\.kueue\.x-k8s\.io/(v1beta1|v1beta2)/namespaces/ml/localqueues/team-a/pendingworkloads/?$", pending_workloads)
    # KAI: capacity 12 GPUs; team-a (quota 4) runs 6 and wants 6 more, team-b (quota 8) runs 2 and wants 6 more
    for queue in (kai_queue("research", 12), kai_queue("team-a", 4, "research"), kai_queue("team-b", 8, "research")):
        server.create_object(queue)
    server.create_object(POD_GROUP)
    kai_pod(server, "a-run", "team-a", 6, node="h100-0")
    kai_pod(server, "b-run", "team-b", 2, node="a100-0")
    kai_pod(server, "b-wait", "team-b", 6)
    kai_pod(server, "notebook-0", "team-a", 6, pod_group="pg-notebook")
    kai_pod(server, "plain", "team-a", 1, scheduler="default-scheduler")
    yield server, str(kubeconfig)
    server.stop()
    assert server.internal_errors == [], server.internal_errors


def explain(cluster, *args):
    return run_cli("explain", *args, "-n", NS, env=cli_env(KUBECONFIG=cluster[1]))


def test_kueue_text_gives_the_reason_and_the_arithmetic(cluster):
    out = explain(cluster, "train")
    assert out.returncode == 0, out.stderr
    text = out.stdout
    for fragment in [
        "RayJob ml/train",
        "queue: LocalQueue team-a -> ClusterQueue team-a (cohort gpu)",
        f"QuotaReserved=False (Pending: couldn't assign flavors to pod set workers: insufficient unused quota for {GPU} in flavor h100",
        f"admission check dws-prov: Pending; ProvisioningRequest {WORKLOAD}-dws-prov-1: accepted (Accepted: queued for capacity)",
        "position: #1 in its LocalQueue, #3 in the ClusterQueue",
        "pod set workers (2 pods), flavor h100 (candidate):",
        # 10 GPUs: h100 has 8 (6 in use), may borrow 4, and the cohort lends 2 (team-b's lending limit)
        f"{GPU}: 10 of 8 quota (6 in use), borrowing limit 4, the cohort can lend 2 more -- needs to borrow 2 from the cohort",
        f"{GPU}: 10 of 4 quota (0 in use), borrowing limit 0, the cohort can lend 0 more -- more than the whole quota",
        "it could fit: a flavor has enough quota for each pod set once quota is freed or borrowed",
    ]:
        assert fragment in text, (fragment, text)


def test_kueue_json_has_the_same_facts_as_fields(cluster):
    out = explain(cluster, "train", "-o", "json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert (data["kind"], data["scheduler"]) == ("RayJob", "kueue")
    kueue = data["kueue"]
    assert (kueue["localQueue"], kueue["clusterQueue"], kueue["cohort"], kueue["state"], kueue["couldFit"]) == ("team-a", "team-a", "gpu", "pending", True)
    assert kueue["position"] == {"positionInLocalQueue": 0, "positionInClusterQueue": 2, "priority": 0}
    assert kueue["admissionChecks"] == [{"name": "dws-prov", "state": "Pending", "message": "", "provisioningRequest": f"{WORKLOAD}-dws-prov-1",
                                         "provisioningState": "accepted", "provisioningMessage": "Accepted: queued for capacity"}]  # fmt: skip
    gpu_rows = {r["flavor"]: r for r in kueue["flavors"] if r["podSet"] == "workers" and r["resource"] == GPU}
    assert {f: (r["requested"], r["nominalQuota"], r["used"], r["potentialAvailable"], r["verdict"], r["largestNode"]) for f, r in gpu_rows.items()} == {
        "a100": (10, 4, 0, 4, "never-fits", 4), "h100": (10, 8, 6, 10, "needs-borrowing", 8),
    }  # fmt: skip
    assert kueue["requested"][GPU] == 10 and data["warnings"] == []
    as_yaml = yaml.safe_load(explain(cluster, "train", "-o", "yaml").stdout)
    assert as_yaml["kueue"]["flavors"] == kueue["flavors"]


def test_status_of_the_pending_job_shows_the_same_text(cluster):
    explained = explain(cluster, "train")
    status = run_cli("status", "train", "-n", NS, env=cli_env(KUBECONFIG=cluster[1]))
    assert status.returncode == 0, status.stderr
    assert status.stdout == explained.stdout
    as_json = json.loads(run_cli("status", "train", "-n", NS, "-o", "json", env=cli_env(KUBECONFIG=cluster[1])).stdout)
    assert as_json["queueState"] == "pending" and as_json["explanation"] == explained.stdout.splitlines()


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


# (case, NAME, fragment of the one-line error)
BAD_NAMES = [
    ("nothing by that name", "no-such-job", "no RayJob, RayCluster, PodGroup or Pod named 'no-such-job' in namespace ml"),
    ("a pod of another scheduler", "plain", "pod ml/plain is scheduled by default-scheduler, not kai-scheduler"),
]


@pytest.mark.parametrize("case,name,fragment", BAD_NAMES, ids=[r[0] for r in BAD_NAMES])
def test_bad_name_exits_2_with_one_line(cluster, case, name, fragment):
    out = explain(cluster, name)
    assert out.returncode == 2 and fragment in out.stderr, out.stderr
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_unreachable_cluster_exits_3(tmp_path):
    config = tmp_path / "config"
    config.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:9"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}], "users": [{"name": "u", "user": {"token": "t"}}],
    }))  # fmt: skip
    out = run_cli("explain", "train", "--request-timeout", "2", env=cli_env(KUBECONFIG=str(config)))
    assert out.returncode == 3 and out.stderr.startswith("error: ") and "Traceback" not in out.stderr, out.stderr


# --- the generated configs on the server ---------------------------------------------------------
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


def test_submit_dry_run_accepts_the_generated_priority_classes():
    out = run_cli("queues", "generate", "--nodes", NODES, "-o", "json")
    assert out.returncode == 0, out.stderr
    classes = [o["metadata"]["name"] for o in json.loads(out.stdout)["items"] if o["kind"] == "WorkloadPriorityClass"]
    assert "interactive-preemptible" in classes
    dry = run_cli(
        "submit", "--backend", "kubernetes", "--nodes", NODES, "--queue", "team-1", "--entrypoint", "python x.py",
        "--dry-run", "--priority-class", "interactive-preemptible", "-o", "json",
    )  # fmt: skip
    assert dry.returncode == 0, dry.stderr
    assert '"kueue.x-k8s.io/priority-class": "interactive-preemptible"' in dry.stdout
