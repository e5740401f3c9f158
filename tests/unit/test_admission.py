"""Plain-words explanations of where a job stands in Kueue and KubeRay."""

from __future__ import annotations

import pytest

from raybridge.kueue.workload import deactivation, eviction_summary, quota, read_workload, workload_state
from raybridge.queues.decision.kueue_explain import explain, progress_line


def cond(kind, status, reason="", message=""):
    return {"type": kind, "status": status, "reason": reason, "message": message}


def workload(*conditions, checks=(), queue="lq"):
    return {
        "metadata": {"name": "rayjob-train-1a2b3"},
        "spec": {
            "queueName": queue,
            "podSets": [
                {"name": "head", "count": 1, "template": {"spec": {"containers": [{"resources": {"requests": {"cpu": "2", "memory": "8Gi"}}}]}}},
                {"name": "workers", "count": 2, "template": {"spec": {"containers": [{"resources": {"limits": {"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": "4"}}}]}}},
            ],
        },
        "status": {"conditions": list(conditions), "admissionChecks": list(checks)},
    }


RAYJOB = {"kind": "RayJob", "metadata": {"name": "train", "namespace": "ml", "labels": {"kueue.x-k8s.io/queue-name": "lq"}}, "status": {"jobDeploymentStatus": "Suspended"}}
PENDING = workload(cond("QuotaReserved", "False", "Pending", "couldn't assign flavors to pod set workers: insufficient unused quota for nvidia.com/gpu in flavor f, 4 more needed"))
ADMITTED = workload(cond("QuotaReserved", "True", "QuotaReserved"), cond("Admitted", "True", "Admitted"))
EVICTED = workload(cond("Evicted", "True", "Preempted", "preempted by a higher priority workload"))
WAITING_CHECK = workload(cond("QuotaReserved", "True"), checks=[{"name": "dws-prov", "state": "Pending", "message": "waiting for capacity"}])

# (case, workload, position, expected state, progress fragments)
ROWS = [
    ("no workload yet", None, None, "none", ["no Workload yet"]),
    ("pending with reason and position", PENDING, {"positionInLocalQueue": 1, "positionInClusterQueue": 3}, "pending", ["queued in lq", "insufficient unused quota", "#2 in its LocalQueue", "#4 in the ClusterQueue"]),
    ("quota reserved, check pending", WAITING_CHECK, None, "pending", ["quota reserved, waiting for admission checks", "dws-prov: Pending (waiting for capacity)"]),
    ("evicted", EVICTED, None, "evicted", ["evicted from lq", "Preempted: preempted by a higher priority workload"]),
    ("evicted, its Workload names no queue (spec.queueName is optional)",
     workload(cond("Evicted", "True", "Preempted", "preempted by a higher priority workload"), queue=None), None, "evicted",
     ["evicted: Preempted: preempted by a higher priority workload"]),
    ("admitted", ADMITTED, None, "admitted", ["admitted by lq"]),
]


@pytest.mark.parametrize("case,wl,position,state,fragments", ROWS, ids=[r[0] for r in ROWS])
def test_progress_line(case, wl, position, state, fragments):
    rayjob = RAYJOB if state != "admitted" else {**RAYJOB, "status": {"jobDeploymentStatus": "Initializing"}}
    assert workload_state(wl) == state
    line = progress_line(rayjob, wl, position)
    for fragment in fragments:
        assert fragment in line


@pytest.mark.parametrize("deployment", ["New", "Suspended", "Suspending"])
def test_admitted_before_kuberay_unsuspends_says_so_not_a_bare_status(deployment):
    """Real Kueue admits a RayJob before KubeRay, which took it New -> Initializing -> Suspending -> Suspended
    meanwhile, has unsuspended it: the line says admitted, not a bare "Suspended"."""
    line = progress_line({**RAYJOB, "status": {"jobDeploymentStatus": deployment}}, ADMITTED, None)
    assert line == "admitted by lq; waiting for KubeRay to start the Ray cluster"


NOT_QUEUED = {"kind": "RayJob", "metadata": {"name": "train", "namespace": "ml", "labels": {}}}

# (case, RayJob's deployment status, queued by Kueue, the line)
UNADMITTED_ROWS = [
    ("queued, no Workload yet", "Suspended", True, "waiting for Kueue to pick the job up (no Workload yet)"),
    ("not queued, new: KubeRay's turn, not Kueue's", "New", False, "waiting for KubeRay to take it up"),
    ("not queued, no status yet", "", False, "waiting for KubeRay to take it up"),
    ("suspending, its Workload gone", "Suspending", True, "suspending: KubeRay is taking its Ray cluster down"),
    ("suspended without a queue", "Suspended", False, "suspended"),
]


@pytest.mark.parametrize("case,deployment,queued,line", UNADMITTED_ROWS, ids=[r[0] for r in UNADMITTED_ROWS])
def test_a_job_without_an_admitted_workload_is_said_in_words_never_a_bare_status(case, deployment, queued, line):
    rayjob = {**(RAYJOB if queued else NOT_QUEUED), "status": {"jobDeploymentStatus": deployment}}
    assert progress_line(rayjob, None, None) == line


def test_requests_add_up_over_pod_sets():
    asks = read_workload(PENDING).requests()
    assert (asks["nvidia.com/gpu"], asks["cpu"], asks["memory"]) == (8, 34, (8 + 128) * 2**30)


def test_explain_compares_asks_with_quota():
    cq = {"spec": {"resourceGroups": [{"flavors": [{"name": "f", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "4"}, {"name": "cpu", "nominalQuota": "64"}]}]}]},
          "status": {"flavorsUsage": [{"name": "f", "resources": [{"name": "nvidia.com/gpu", "total": "4"}]}]}}
    assert quota(cq)["nvidia.com/gpu"] == (4, 4)
    text = "\n".join(explain(RAYJOB, PENDING, {"positionInLocalQueue": 0}, cq, "cq"))
    assert "LocalQueue lq -> ClusterQueue cq" in text
    assert "QuotaReserved=False (Pending: couldn't assign flavors" in text
    assert "nvidia.com/gpu: 8 of 4 quota (4 in use) -- more than the whole quota" in text
    assert "position: #1 in its LocalQueue" in text


def test_explain_without_kueue():
    plain = {**RAYJOB, "metadata": {"name": "x", "namespace": "ml", "labels": {}}}
    assert "Kueue does not manage it" in "\n".join(explain(plain, None, None, None))


def test_explain_when_quota_is_not_readable():
    assert "ClusterQueue quota not readable" in "\n".join(explain(RAYJOB, PENDING, None, None))


def stopped(*conditions, active=False, limit=600):
    """A Workload with spec.active and maximumExecutionTimeSeconds set, as Kueue's job reconciler builds it."""
    wl = workload(*conditions)
    wl["spec"].update(active=active, maximumExecutionTimeSeconds=limit)
    return wl


MAX_EXEC = "The workload is deactivated due to exceeding the maximum execution time"
# (case, workload, state, Kueue's reason (None: not deactivated), the plain words)
DEACTIVATION_ROWS = [
    ("the run-time limit ran out (v0.13 to v0.20 write the same reason)",
     stopped(cond("Evicted", "True", "DeactivatedDueToMaximumExecutionTimeExceeded", MAX_EXEC), cond("Requeued", "False", "DeactivatedDueToMaximumExecutionTimeExceeded", MAX_EXEC)),
     "deactivated", "DeactivatedDueToMaximumExecutionTimeExceeded", "the run-time limit was reached (maximumExecutionTimeSeconds=600)"),
    ("decided, not yet written: DeactivationTarget on a running Workload",
     stopped(cond("Admitted", "True", "Admitted"), cond("DeactivationTarget", "True", "MaximumExecutionTimeExceeded", "exceeding the maximum execution time"), active=True),
     "deactivated", "MaximumExecutionTimeExceeded", "the run-time limit was reached (maximumExecutionTimeSeconds=600)"),
    ("spec.active false, not evicted yet", stopped(cond("Admitted", "True", "Admitted")),
     "deactivated", "Deactivated", "its Workload was deactivated by hand (spec.active: false)"),
    ("deactivated by hand", stopped(cond("Evicted", "True", "Deactivated", "The workload is deactivated")),
     "deactivated", "Deactivated", "its Workload was deactivated by hand (spec.active: false)"),
    ("an admission check rejected it", stopped(cond("Evicted", "True", "DeactivatedDueToAdmissionCheck", "The workload is deactivated due to Admission check(s): prov, were rejected")),
     "deactivated", "DeactivatedDueToAdmissionCheck", "an admission check rejected it (The workload is deactivated due to Admission check(s): prov, were rejected)"),
    ("requeued too often", stopped(cond("Evicted", "True", "DeactivatedDueToRequeuingLimitExceeded", "The workload is deactivated due to exceeding the maximum number of re-queuing retries")),
     "deactivated", "DeactivatedDueToRequeuingLimitExceeded", "Kueue requeued it more often than its requeuing limit allows"),
    ("a cause this version does not know", stopped(cond("Evicted", "True", "DeactivatedDueToSomethingNew", "why")),
     "deactivated", "DeactivatedDueToSomethingNew", "deactivated: DeactivatedDueToSomethingNew: why"),
    ("set active again: it waits to be admitted again",
     stopped(cond("Evicted", "True", "DeactivatedDueToMaximumExecutionTimeExceeded", MAX_EXEC), cond("Requeued", "True", "Reactivated"), active=True),
     "evicted", None, None),
    ("preempted: evicted, requeued", EVICTED, "evicted", None, None),
    ("finished after the limit", stopped(cond("Finished", "True", "Succeeded"), cond("Evicted", "True", "DeactivatedDueToMaximumExecutionTimeExceeded", MAX_EXEC)),
     "finished", None, None),
]  # fmt: skip


@pytest.mark.parametrize("case,wl,state,reason,words", DEACTIVATION_ROWS, ids=[r[0] for r in DEACTIVATION_ROWS])
def test_a_deactivated_workload_is_told_apart_from_an_evicted_one(case, wl, state, reason, words):
    assert workload_state(wl) == state
    found = deactivation(wl)
    if reason is None:
        assert found is None
        return
    assert found.reason == reason
    assert words in found.words
    assert words in progress_line(RAYJOB, wl, None) and "it will not be admitted again" in progress_line(RAYJOB, wl, None)
    assert words in eviction_summary(wl, "lq")
