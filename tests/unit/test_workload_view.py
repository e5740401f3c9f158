"""A malformed Workload (or ClusterQueue, ProvisioningRequest, queue position) reads as absent, never raises.

Objects reach `raybridge.kueue.workload` from files users wrote as well as from the API server; each
row is one malformed field, the call that reads it, and what it reads as. Well-formed objects read as
before: `test_admission.py`, `test_explain.py` and `test_orphan_guard_decision.py` hold those.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any, Callable

import pytest

from raybridge.autoscalers.provisioning_request import read_provisioning_state
from raybridge.kueue.workload import (
    deactivation,
    eviction_summary,
    position_words,
    quota,
    read_workload,
    workload_of,
    workload_state,
)
from raybridge.queues.decision.kueue_explain import check_states, explain_kueue, progress_line

ADMITTED = {"type": "Admitted", "status": "True", "reason": "Admitted", "message": "admitted by team-a"}
PREEMPTED = {"type": "Evicted", "status": "True", "reason": "Preempted", "message": "preempted by a higher priority workload"}
WORKER = {"name": "workers", "count": 2, "template": {"spec": {"containers": [{"resources": {"requests": {"cpu": "8"}}}]}}}
RAYJOB = {"kind": "RayJob", "metadata": {"name": "train", "namespace": "ml", "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
          "status": {"jobDeploymentStatus": "Suspended"}}  # fmt: skip
GPU_FLAVOR = {"name": "h100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "8"}]}
CPU_GROUP = {"coveredResources": ["cpu"], "flavors": [{"name": "h100", "resources": [{"name": "cpu", "nominalQuota": "64"}]}]}


def _state(request: Any) -> tuple[str, str]:
    found = read_provisioning_state(request)
    return found.state, found.words()


def workload(spec: Any = None, status: Any = None) -> dict[str, Any]:
    """A Workload of queue `lq` with one worker pod set, its spec and status replaced where given."""
    return {"metadata": {"name": "rayjob-train-1a2b3", "uid": "wl-uid"},
            "spec": {"queueName": "lq", "podSets": [WORKER]} if spec is None else spec,
            "status": {} if status is None else status}  # fmt: skip


def cluster_queue(groups: Any) -> dict[str, Any]:
    return {"metadata": {"name": "team-a"}, "spec": {"resourceGroups": groups}}


def owned_workload(name: str, uid: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"kueue.x-k8s.io/job-uid": uid}}}


def counts(pod_sets: list[Any]) -> list[tuple[str, int]]:
    return [(p.name, p.count) for p in pod_sets]


ROWS: list[tuple[str, Callable[[], Any], Any]] = [
    # (case, the call, what it reads as)
    ("a condition entry that is text is left out",
     lambda: workload_state(workload(status={"conditions": ["Admitted", ADMITTED]})), "admitted"),
    ("status.conditions an object, not a list",
     lambda: workload_state(workload(status={"conditions": ADMITTED})), "pending"),
    ("status a list",
     lambda: workload_state(workload(status=[ADMITTED])), "pending"),
    ("spec a list: active, no pod sets",
     lambda: (workload_state(workload(spec=["active"])), deactivation(workload(spec=["active"]))), ("pending", None)),
    ("the Workload a list of text",
     lambda: workload_state(["Workload"]), "pending"),
    ("podSets count not a number reads as Kueue's default, 1",
     lambda: counts(read_workload(workload(spec={"podSets": [{**WORKER, "count": "x"}]})).pod_sets), [("workers", 1)]),
    ("a podSets entry that is text is left out",
     lambda: counts(read_workload(workload(spec={"podSets": ["workers", WORKER]})).pod_sets), [("workers", 2)]),
    ("podSets entry without a name is Kueue's default, main",
     lambda: counts(read_workload(workload(spec={"podSets": [{"count": 3}]})).pod_sets), [("main", 3)]),
    ("an admissionChecks entry that is text is left out",
     lambda: [c.words() for c in read_workload(workload(status={"admissionChecks": ["dws-prov", {"name": "dws-prov", "state": "Ready"}]})).admission_checks],
     ["dws-prov: Ready"]),
    ("check_states: an admissionChecks entry that is text is left out",
     lambda: [c.name for c in check_states(workload(status={"admissionChecks": ["dws-prov"]}), [])], []),
    ("status.admission a list: no ClusterQueue named",
     lambda: eviction_summary(workload(status={"admission": ["team-a"], "conditions": [PREEMPTED]}), "lq"),
     "evicted from queue lq: Preempted: preempted by a higher priority workload"),
    ("a condition entry that is a number, in the eviction summary",
     lambda: eviction_summary(workload(status={"conditions": [7, PREEMPTED]}), None),
     "evicted from its queue: Preempted: preempted by a higher priority workload"),
    ("a podSetAssignments entry that is text is left out",
     lambda: [r.flavor for r in explain_kueue(RAYJOB, workload(status={"admission": {"clusterQueue": "team-a", "podSetAssignments": ["workers"]}}),
                                               None, cluster_queue([]), "team-a").requests], []),
    ("podSetAssignment flavors a list: not assigned yet",
     lambda: [r.assigned for r in explain_kueue(
         RAYJOB, workload(status={"admission": {"podSetAssignments": [{"name": "workers", "flavors": ["h100"]}]}}),
         None, cluster_queue([CPU_GROUP]), "team-a").requests], [False]),
    ("progress_line: a condition entry that is text is left out",
     lambda: progress_line(RAYJOB, workload(status={"conditions": ["QuotaReserved"]}), None), "queued in lq"),
    ("explain_kueue: podSets count not a number reads as 1",
     lambda: [(r.pod_set, r.count, r.requested) for r in explain_kueue(
         RAYJOB, workload(spec={"queueName": "lq", "podSets": [{**WORKER, "count": "x"}]}), None, cluster_queue([CPU_GROUP]), "team-a").requests],
     [("workers", 1, Decimal(8))]),
    ("quota: a resourceGroups entry that is text is left out",
     lambda: quota(cluster_queue(["gpu", {"flavors": [GPU_FLAVOR]}])), {"nvidia.com/gpu": (Decimal(8), Decimal(0))}),
    ("quota: a flavor entry that is text is left out",
     lambda: quota(cluster_queue([{"flavors": ["h100", GPU_FLAVOR]}])), {"nvidia.com/gpu": (Decimal(8), Decimal(0))}),
    ("quota: a resources entry that is text is left out",
     lambda: quota(cluster_queue([{"flavors": [{"name": "h100", "resources": ["nvidia.com/gpu", *GPU_FLAVOR["resources"]]}]}])),
     {"nvidia.com/gpu": (Decimal(8), Decimal(0))}),
    ("quota: resourceGroups an object, not a list",
     lambda: quota(cluster_queue({"flavors": [GPU_FLAVOR]})), {}),
    ("quota: spec a list",
     lambda: quota({"metadata": {"name": "team-a"}, "spec": ["resourceGroups"]}), {}),
    ("a ProvisioningRequest condition entry that is text is left out",
     lambda: _state({"status": {"conditions": ["Provisioned", {"type": "Accepted", "status": "True", "reason": "Accepted"}]}}),
     ("accepted", "Accepted")),
    ("a ProvisioningRequest's status a list",
     lambda: _state({"status": ["Provisioned"]}), ("waiting", "the autoscaler has not accepted it yet")),
    ("a queue position that is not a number reads as unknown",
     lambda: position_words({"positionInLocalQueue": "first", "positionInClusterQueue": 3}), "#4 in the ClusterQueue"),
    ("workload_of: a Workload entry that is text is passed over",
     lambda: workload_of({"metadata": {"uid": "u1"}}, ["wl", owned_workload("mine", "u1")]), owned_workload("mine", "u1")),
    ("workload_of: an owner that is not an object has no Workload",
     lambda: workload_of(["RayJob"], [owned_workload("mine", "u1")]), None),  # type: ignore[arg-type]
]


@pytest.mark.parametrize("case,call,expected", ROWS, ids=[r[0] for r in ROWS])
def test_malformed_reads_as_absent(case: str, call: Callable[[], Any], expected: Any) -> None:
    assert call() == expected


def test_the_view_of_a_malformed_workload_says_what_it_could_read() -> None:
    view = read_workload({"metadata": {"name": "wl", "labels": ["x"]},
                          "spec": {"queueName": 5, "active": "no", "maximumExecutionTimeSeconds": "60",
                                   "podSets": [{"name": 3, "count": True}, "workers"]},
                          "status": {"admission": {"clusterQueue": ["team-a"]}, "admissionChecks": [{"name": "dws-prov", "state": 1}],
                                     "conditions": [{"type": "Admitted", "status": True}, "Finished"]}})  # fmt: skip
    assert (view.meta.name, dict(view.meta.labels), view.queue_name, view.cluster_queue) == ("wl", {}, "", "")
    assert view.active and view.maximum_execution_time_seconds is None
    assert counts(list(view.pod_sets)) == [("main", 1)]
    assert [c.words() for c in view.admission_checks] == ["dws-prov: "]
    assert [(c.type, c.status) for c in view.conditions] == [("Admitted", "")]
    assert view.state == "pending" and view.deactivation is None and view.requests() == {}
    for anything in (None, ["a"], 3, "Workload"):
        assert read_workload(anything).state == "pending"


def test_a_pod_set_of_count_zero_asks_for_nothing_as_kueue_totals_it() -> None:
    """kueue@v0.17.0 pkg/workload/workload.go totalRequestsFromPodSets multiplies one pod's requests by the count."""
    idle = {**WORKER, "name": "idle", "count": 0}
    assert read_workload(workload(spec={"queueName": "lq", "podSets": [WORKER, idle]})).requests() == {"cpu": Decimal(16)}


def test_what_kueue_counted_and_the_template_does_not_show_is_added_per_pod() -> None:
    """A DRA job's GPUs: its pods' templates name a claim, and Kueue v0.19 counts the claim's devices under the mapped
    resource in `status.resourceRequests` (pending) or the admission's `resourceUsage` (admitted)."""
    template = {"spec": {"containers": [{"name": "w", "resources": {"requests": {"cpu": "4"}, "claims": [{"name": "gpus"}]}}],
                         "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": "t-gpus"}]}}  # fmt: skip
    pending = {"spec": {"podSets": [{"name": "workers", "count": 2, "template": template}]},
               "status": {"resourceRequests": [{"name": "workers", "resources": {"cpu": "8", "nvidia.com/gpu": "16"}}]}}  # fmt: skip
    view = read_workload(pending)
    assert view.pod_sets[0].per_pod == {"cpu": Decimal(4), "nvidia.com/gpu": Decimal(8)}
    assert view.requests() == {"cpu": Decimal(8), "nvidia.com/gpu": Decimal(16)}
    admitted = {"spec": pending["spec"], "status": {"admission": {"clusterQueue": "cq", "podSetAssignments": [
        {"name": "workers", "flavors": {"nvidia.com/gpu": "h100"}, "resourceUsage": {"cpu": "8", "nvidia.com/gpu": "16"}}]}}}  # fmt: skip
    assert read_workload(admitted).requests()["nvidia.com/gpu"] == Decimal(16)
    plain = {"spec": pending["spec"]}  # not yet considered by Kueue: the template's requests only
    assert "nvidia.com/gpu" not in read_workload(plain).requests()
