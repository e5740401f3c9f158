"""`explain`'s pure parts: Kueue per-flavor arithmetic, admission checks with ProvisioningRequests, KAI queue words.

The Kueue objects are what Kueue v1beta2 writes: a ClusterQueue `team-a` in
cohort `gpu` with one resource group over three flavors (cpu-only nodes, A100s,
H100s) and borrowing limits, a second ClusterQueue `team-b` lending part of its
H100 quota, and a RayJob's Workload with a head and a GPU worker pod set.
"""

from __future__ import annotations

from decimal import Decimal

import pytest

from raybridge.autoscalers.provisioning_request import read_provisioning_state
from raybridge.queues.decision.kueue_explain import BORROWS, FITS, NEVER, WAITS, check_states, explain_kueue
from raybridge.kai.fairshare import Amounts, divide_fair_share
from raybridge.queues.decision.kai_explain import explain_kai
from raybridge.kai.queue import queue_specs, read_kai_queue
from raybridge.core.views import read_pod
from raybridge.kai.pod_group import read_pod_group

GPU = "nvidia.com/gpu"
H100_LABELS = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
A100_LABELS = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"}


def flavor_quota(name, cpu, memory, gpu, gpu_borrowing=None, gpu_lending=None):
    gpu_res = {"name": GPU, "nominalQuota": gpu}
    if gpu_borrowing is not None:
        gpu_res["borrowingLimit"] = gpu_borrowing
    if gpu_lending is not None:
        gpu_res["lendingLimit"] = gpu_lending
    return {"name": name, "resources": [{"name": "cpu", "nominalQuota": cpu}, {"name": "memory", "nominalQuota": memory}, gpu_res]}


def cluster_queue(name, flavors, usage=(), cohort="gpu"):
    spec = {
        "namespaceSelector": {},
        "resourceGroups": [{"coveredResources": ["cpu", "memory", GPU], "flavors": flavors}],
        "admissionChecksStrategy": {"admissionChecks": [{"name": "dws-prov"}]},
    }
    if cohort:
        spec["cohortName"] = cohort
    reservation = [{"name": f, "resources": [{"name": r, "total": v} for r, v in res.items()]} for f, res in usage]
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec,
            "status": {"flavorsReservation": reservation, "flavorsUsage": reservation}}  # fmt: skip


TEAM_A = cluster_queue(
    "team-a",
    [
        flavor_quota("cpu-nodes", "32", "128Gi", "0"),
        flavor_quota("a100", "64", "512Gi", "4", gpu_borrowing="0"),
        flavor_quota("h100", "64", "512Gi", "8", gpu_borrowing="4"),
    ],
    usage=[("h100", {GPU: "6", "cpu": "12", "memory": "96Gi"})],
)
TEAM_B = cluster_queue("team-b", [flavor_quota("a100", "64", "512Gi", "4"), flavor_quota("h100", "64", "512Gi", "8", gpu_lending="2")])
SOLO = cluster_queue("solo", [flavor_quota("a100", "64", "512Gi", "4"), flavor_quota("h100", "64", "512Gi", "8")], cohort=None)
FLAVORS = {
    "cpu-nodes": {"metadata": {"name": "cpu-nodes"}, "spec": {"nodeLabels": {"node-role/cpu": "true"}}},
    "a100": {"metadata": {"name": "a100"}, "spec": {"nodeLabels": A100_LABELS}},
    "h100": {"metadata": {"name": "h100"}, "spec": {"nodeLabels": H100_LABELS}},
}


def node(name, labels, gpus, cpu="96", memory="1024Gi"):
    return {"metadata": {"name": name, "labels": labels}, "spec": {}, "status": {"allocatable": {"cpu": cpu, "memory": memory, GPU: str(gpus)}}}


NODES = [node("h100-0", H100_LABELS, 8), node("a100-0", A100_LABELS, 4), node("cpu-0", {"node-role/cpu": "true"}, 0, cpu="32")]


def pod_set(name, count, cpu, memory, gpus=None):
    requests = {"cpu": cpu, "memory": memory}
    if gpus is not None:
        requests[GPU] = gpus
    return {"name": name, "count": count, "template": {"spec": {"containers": [{"name": "ray", "resources": {"requests": requests, "limits": requests}}]}}}


def workload(worker_gpus, workers=2, checks=(), admission=None):
    status = {
        "conditions": [{"type": "QuotaReserved", "status": "False", "reason": "Pending",
                        "message": f"couldn't assign flavors to pod set workers: insufficient unused quota for {GPU} in flavor h100"}],
        "admissionChecks": list(checks),
    }  # fmt: skip
    if admission:
        status = {"conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "quota reserved"}],
                  "admission": admission, "admissionChecks": list(checks)}  # fmt: skip
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"name": "rayjob-train-4f2a1", "namespace": "ml", "uid": "wl-uid"},
        "spec": {"queueName": "team-a", "podSets": [pod_set("head", 1, "2", "8Gi"), pod_set("workers", workers, "8", "64Gi", worker_gpus)]},
        "status": status,
    }  # fmt: skip


RAYJOB = {"kind": "RayJob", "metadata": {"name": "train", "namespace": "ml", "labels": {"kueue.x-k8s.io/queue-name": "team-a"}},
          "status": {"jobDeploymentStatus": "Suspended"}}  # fmt: skip


def kueue(wl, cq=TEAM_A, members=(TEAM_A, TEAM_B), nodes=NODES, requests=None, position=None):
    return explain_kueue(RAYJOB, wl, position, cq, cq["metadata"]["name"], cohort_members=list(members), flavors=FLAVORS,
                         nodes=nodes, provisioning_requests=requests)  # fmt: skip


def verdicts(explanation, pod_set="workers", resource=GPU):
    return {r.flavor: r.verdict for r in explanation.requests if r.pod_set == pod_set and r.resource == resource}


# (case, worker GPUs per pod, workers, ClusterQueue, cohort members,
#  expected GPU verdict per flavor for the workers, could it ever fit, a fragment of the words)
KUEUE_ROWS = [
    ("10 GPUs: h100 borrows 2 of the 2 team-b lends", "5", 2, TEAM_A, (TEAM_A, TEAM_B),
     {"cpu-nodes": NEVER, "a100": NEVER, "h100": BORROWS}, True, "needs to borrow 2 from the cohort"),
    ("11 GPUs: more than any one flavor can ever hold, although the flavors' quotas sum to 12", "11", 1, TEAM_A, (TEAM_A, TEAM_B),
     {"cpu-nodes": NEVER, "a100": NEVER, "h100": NEVER}, False, "pod set workers fits no flavor of ClusterQueue team-a"),
    ("8 GPUs: within h100's nominal quota, 6 of it in use", "4", 2, TEAM_A, (TEAM_A, TEAM_B),
     {"cpu-nodes": NEVER, "a100": NEVER, "h100": WAITS}, True, "waits for 6 in use to be freed"),
    ("4 GPUs: a100 is free", "2", 2, TEAM_A, (TEAM_A, TEAM_B),
     {"cpu-nodes": NEVER, "a100": FITS, "h100": WAITS}, True, "a100 (candidate)"),
    ("no cohort members listed: only its own quota counts", "5", 2, TEAM_A, (),
     {"cpu-nodes": NEVER, "a100": NEVER, "h100": NEVER}, False, "more than the 8 it could ever hold with borrowing"),
    ("no cohort at all", "5", 2, SOLO, (SOLO,),
     {"a100": NEVER, "h100": NEVER}, False, "no cohort to borrow from"),
    ("one pod bigger than the largest H100 node", "10", 1, TEAM_A, (TEAM_A, TEAM_B),
     {"cpu-nodes": NEVER, "a100": NEVER, "h100": BORROWS}, False, f"one pod's {GPU} 10 > largest node 8"),
]  # fmt: skip


@pytest.mark.parametrize("case,gpus,workers,cq,members,expected,could_fit,fragment", KUEUE_ROWS, ids=[r[0] for r in KUEUE_ROWS])
def test_kueue_per_flavor_verdicts(case, gpus, workers, cq, members, expected, could_fit, fragment):
    explanation = kueue(workload(gpus, workers), cq=cq, members=members)
    assert verdicts(explanation) == expected
    assert explanation.could_fit is could_fit
    assert fragment in "\n".join(explanation.lines())


def test_kueue_cohort_arithmetic_is_kueue_fits():
    h100 = next(r for r in kueue(workload("5")).requests if r.pod_set == "workers" and r.flavor == "h100" and r.resource == GPU)
    # nominal 8; the cohort's lendable quota is team-a's own 8 plus team-b's lending limit 2; borrowing limit 4 allows 12
    assert (h100.requested, h100.nominal, h100.used, h100.borrowing_limit, h100.potential, h100.cohort_can_lend) == (10, 8, 6, 4, 10, 2)
    assert h100.largest_node == 8 and h100.fits_a_node is True


def cohort_object(name, h100_gpus=None, parent=None):
    spec = {"resourceGroups": [{"coveredResources": [GPU], "flavors": [{"name": "h100", "resources": [{"name": GPU, "nominalQuota": h100_gpus}]}]}]} if h100_gpus else {}
    if parent:
        spec["parentName"] = parent
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort", "metadata": {"name": name}, "spec": spec}


# (case, Cohort objects (None: not readable), h100's GPU verdict for 11 GPUs, what team-a could hold, the cohort in words)
COHORT_OBJECT_ROWS = [
    ("no Cohort objects: never", [], NEVER, 10, "(cohort gpu)"),
    ("the gpu Cohort's own 2 GPUs: within team-a's borrowing limit", [cohort_object("gpu", "2")], BORROWS, 12, "(cohort gpu)"),
    ("its parent's quota, capped by team-a's borrowing limit of 4", [cohort_object("gpu", parent="org"), cohort_object("org", "16")], BORROWS, 12, "(cohort gpu under org)"),
    ("Cohorts not readable: unknown, never 'never'", None, BORROWS, 12, "(cohort gpu)"),
]  # fmt: skip


@pytest.mark.parametrize("case,cohorts,verdict,potential,words", COHORT_OBJECT_ROWS, ids=[r[0] for r in COHORT_OBJECT_ROWS])
def test_kueue_counts_the_quota_of_cohort_objects(case, cohorts, verdict, potential, words):
    explanation = explain_kueue(RAYJOB, workload("11", workers=1), None, TEAM_A, "team-a", cohort_members=[TEAM_A, TEAM_B],
                                cohorts=cohorts, flavors=FLAVORS, nodes=None)  # fmt: skip
    h100 = next(r for r in explanation.requests if r.pod_set == "workers" and r.flavor == "h100" and r.resource == GPU)
    assert (h100.verdict, h100.potential) == (verdict, potential)
    assert words in "\n".join(explanation.lines())


def test_kueue_unknown_cohort_lending_is_said_and_kept_out_of_the_json_numbers():
    explanation = explain_kueue(RAYJOB, workload("5"), None, TEAM_B, "team-b", cohort_members=None, flavors=FLAVORS, nodes=None)
    row = next(r for r in explanation.to_dict()["flavors"] if (r["podSet"], r["flavor"], r["resource"]) == ("workers", "h100", GPU))
    assert (row["potentialAvailable"], row["cohortCanLend"]) == (None, None)
    assert "the cohort can lend an unknown amount more" in "\n".join(explanation.lines())


def test_kueue_json_carries_the_facts_as_fields():
    data = kueue(workload("5"), position={"positionInLocalQueue": 0, "positionInClusterQueue": 2}).to_dict()
    assert (data["localQueue"], data["clusterQueue"], data["cohort"], data["state"], data["couldFit"]) == ("team-a", "team-a", "gpu", "pending", True)
    assert data["requested"] == {GPU: 10, "cpu": 18, "memory": 136 * 2**30}
    row = next(r for r in data["flavors"] if (r["podSet"], r["flavor"], r["resource"]) == ("workers", "h100", GPU))
    assert row == {
        "podSet": "workers", "count": 2, "flavor": "h100", "resource": GPU, "assigned": False, "perPod": 5, "requested": 10,
        "nominalQuota": 8, "used": 6, "borrowingLimit": 4, "lendingLimit": None, "cohortCanLend": 2, "potentialAvailable": 10,
        "verdict": BORROWS, "largestNode": 8, "fitsANode": True,
    }  # fmt: skip
    assert data["conditions"][0]["reason"] == "Pending" and data["position"]["positionInClusterQueue"] == 2


def test_kueue_assigned_flavors_are_shown_once_quota_is_reserved():
    admission = {"clusterQueue": "team-a", "podSetAssignments": [
        {"name": "head", "count": 1, "flavors": {"cpu": "cpu-nodes", "memory": "cpu-nodes"}, "resourceUsage": {"cpu": "2", "memory": "8Gi"}},
        {"name": "workers", "count": 2, "flavors": {"cpu": "h100", "memory": "h100", GPU: "h100"}, "resourceUsage": {"cpu": "16", "memory": "128Gi", GPU: "8"}},
    ]}  # fmt: skip
    explanation = kueue(workload("4", checks=[{"name": "dws-prov", "state": "Pending"}], admission=admission))
    assert {(r.pod_set, r.flavor, r.resource): r.requested for r in explanation.requests} == {
        ("head", "cpu-nodes", "cpu"): 2, ("head", "cpu-nodes", "memory"): 8 * 2**30,
        ("workers", "h100", "cpu"): 16, ("workers", "h100", "memory"): 128 * 2**30, ("workers", "h100", GPU): 8,
    }  # fmt: skip
    # quota reserved, the admission check pending: still pending, and it fits
    assert all(r.assigned for r in explanation.requests) and explanation.could_fit is True
    lines = explanation.lines()
    assert "    pod set workers (2 pods), flavor h100 (assigned):" in lines
    assert any("it fits the quota: it waits for something else (admission checks" in line for line in lines)


def provisioning_request(name, owner_uid="wl-uid", **conditions):
    return {
        "apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest",
        "metadata": {"name": name, "namespace": "ml", "ownerReferences": [{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "name": "rayjob-train-4f2a1", "uid": owner_uid}]},
        "spec": {"provisioningClassName": "queued-provisioning.gke.io", "podSets": [{"count": 2, "podTemplateRef": {"name": f"ppt-{name}-workers"}}]},
        "status": {"conditions": [{"type": t, "status": s, "reason": r, "message": m, "lastTransitionTime": "2026-01-01T00:00:00Z"} for t, (s, r, m) in conditions.items()]},
    }  # fmt: skip


# (case, ProvisioningRequests in the namespace, expected request name, expected state)
CHECK_ROWS = [
    ("none yet", [], None, None),
    ("accepted, not provisioned", [provisioning_request("rayjob-train-4f2a1-dws-prov-1", Accepted=("True", "Accepted", "queued"))], "rayjob-train-4f2a1-dws-prov-1", "accepted"),
    ("provisioned", [provisioning_request("rayjob-train-4f2a1-dws-prov-1", Accepted=("True", "A", "ok"), Provisioned=("True", "Provisioned", "nodes ready"))], "rayjob-train-4f2a1-dws-prov-1", "provisioned"),
    ("the latest attempt wins", [provisioning_request("rayjob-train-4f2a1-dws-prov-1", Failed=("True", "OutOfStock", "no H100s")),
                                 provisioning_request("rayjob-train-4f2a1-dws-prov-2", Accepted=("True", "Accepted", "queued"))], "rayjob-train-4f2a1-dws-prov-2", "accepted"),
    ("failed", [provisioning_request("rayjob-train-4f2a1-dws-prov-1", Failed=("True", "OutOfStock", "no H100s in zone"))], "rayjob-train-4f2a1-dws-prov-1", "failed"),
    ("capacity revoked", [provisioning_request("rayjob-train-4f2a1-dws-prov-1", Provisioned=("True", "P", "ok"), CapacityRevoked=("True", "Revoked", "node gone"))], "rayjob-train-4f2a1-dws-prov-1", "capacity-revoked"),
    ("another workload's", [provisioning_request("rayjob-train-4f2a1-dws-prov-1", owner_uid="other", Accepted=("True", "A", "x"))], None, None),
    ("another check's", [provisioning_request("rayjob-train-4f2a1-other-1", Accepted=("True", "A", "x"))], None, None),
]  # fmt: skip


@pytest.mark.parametrize("case,requests,expected_name,expected_state", CHECK_ROWS, ids=[r[0] for r in CHECK_ROWS])
def test_admission_check_with_its_provisioning_request(case, requests, expected_name, expected_state):
    wl = workload("4", checks=[{"name": "dws-prov", "state": "Pending", "message": "waiting for the ProvisioningRequest"}])
    [check] = check_states(wl, requests)
    assert (check.name, check.state, check.provisioning_request, check.provisioning_state) == ("dws-prov", "Pending", expected_name, expected_state)
    text = "\n".join(kueue(wl, requests=requests).lines())
    assert "admission check dws-prov: Pending (waiting for the ProvisioningRequest)" in text
    if expected_name:
        assert f"ProvisioningRequest {expected_name}: {expected_state}" in text


def test_provisioning_state_message():
    request = provisioning_request("x", Failed=("True", "OutOfStock", "no H100s in zone"))
    found = read_provisioning_state(request)
    assert (found.state, found.words()) == ("failed", "OutOfStock: no H100s in zone")


def test_unreadable_cluster_queue_shows_totals_only():
    explanation = explain_kueue(RAYJOB, workload("5"), None, None, "team-a")
    assert explanation.quota_readable is False and explanation.requests == ()
    assert "ClusterQueue quota not readable" in "\n".join(explanation.lines())
    assert dict(explanation.totals)[GPU] == Decimal(10)


# --- KAI -------------------------------------------------------------------------------------------
def kai_queues(objects):
    """The lenient views explain reads the cluster's Queues into."""
    return [read_kai_queue(q) for q in objects]


def kai_queue(name, gpu_quota, parent=None, limit=-1, weight=1, priority=None, allocated=None):
    spec = {"resources": {"gpu": {"quota": gpu_quota, "limit": limit, "overQuotaWeight": weight}}}
    if parent:
        spec["parentQueue"] = parent
    if priority is not None:
        spec["priority"] = priority
    obj = {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": name}, "spec": spec}
    if allocated is not None:
        obj["status"] = {"allocated": {GPU: str(allocated)}}
    return obj


QUEUES = [
    kai_queue("research", 24, allocated=20),
    kai_queue("team-a", 12, parent="research", weight=1, allocated=14),
    kai_queue("team-b", 12, parent="research", weight=1, priority=120, allocated=6),
]
POD_GROUP = {
    "metadata": {"name": "pg-train", "namespace": "ml"},
    "spec": {"minMember": 2, "queue": "team-a"},
    "status": {"phase": "Pending", "schedulingConditions": [{"type": "UnschedulableOnNodePool", "nodePool": "default", "status": "True",
               "reasons": [{"reason": "OverLimit", "message": "team-a quota has reached the allowable limit of GPUs"}]}]},
}  # fmt: skip


def fair_share(demand):
    return divide_fair_share(queue_specs(QUEUES), Amounts(gpu=24), {q: Amounts(gpu=g) for q, g in demand.items()})


# (case, demand per leaf queue, pod allocations when the Queue has no status, queue-a sentence fragment)
KAI_ROWS = [
    ("over its fair share", {"team-a": 16, "team-b": 12}, None, "queue team-a is over its fair share of 12 GPUs: 14 allocated"),
    # team-a's share is capped by its request of 16; research gets what its children request, 18, and has 20
    ("within its fair share", {"team-a": 16, "team-b": 2}, None, "queue team-a is within its fair share of 16 GPUs: 14 allocated, 2 to go"),
    ("the parent over its share", {"team-a": 16, "team-b": 2}, None, "queue research is over its fair share of 18 GPUs: 20 allocated"),
]


@pytest.mark.parametrize("case,demand,allocations,fragment", KAI_ROWS, ids=[r[0] for r in KAI_ROWS])
def test_kai_queue_words(case, demand, allocations, fragment):
    explanation = explain_kai("ml", None, read_pod_group(POD_GROUP), kai_queues(QUEUES), fair_share(demand), allocations)
    text = "\n".join(explanation.lines())
    assert fragment in text
    assert "unschedulable on node pool default: OverLimit -- scheduling it would take its queue over the queue's limit" in text
    assert "priority: team-a 100, research 100" in text
    assert [q.name for q in explanation.queues] == ["team-a", "research"]


def test_kai_allocation_from_bound_pods_when_the_queue_has_no_status():
    queues = [{k: v for k, v in q.items() if k != "status"} for q in QUEUES]
    own = {"team-a": Amounts(gpu=3.5), "team-b": Amounts(gpu=2)}
    explanation = explain_kai("ml", None, read_pod_group(POD_GROUP), kai_queues(queues), fair_share({"team-a": 16, "team-b": 12}), own)
    team_a, research = explanation.queues
    assert (team_a.allocation_source, team_a.resources["gpu"]["allocated"], research.resources["gpu"]["allocated"]) == ("bound pods", 3.5, 5.5)
    data = explanation.to_dict()
    assert data["queues"][0]["resources"]["gpu"] == {"configured": True, "quota": 12, "limit": -1, "overQuotaWeight": 1, "request": 16, "deserved": 12, "fairShare": 12, "allocated": 3.5}
    assert data["unschedulableReasons"] == [{"reason": "OverLimit", "message": "team-a quota has reached the allowable limit of GPUs", "nodePool": "default"}]


def test_kai_pod_in_a_missing_queue():
    pod = {"metadata": {"name": "p", "namespace": "ml", "labels": {"kai.scheduler/queue": "nope"}}, "spec": {}, "status": {"phase": "Pending"}}
    explanation = explain_kai("ml", read_pod(pod), None, kai_queues(QUEUES), None)
    assert explanation.queue == "nope" and explanation.queue_exists is False
    assert "  queue: nope (no such KAI Queue: KAI will not schedule it)" in explanation.lines()
