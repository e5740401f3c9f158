"""Orphan protection: the bound raybridge renews, what a RayJob carries, the hand-over, and deactivation."""

from __future__ import annotations

import pytest

from raybridge.queues.decision.kueue_workload import deactivation, eviction_summary
from raybridge.jobs.decision.protection import (
    guarded,
    handover_notes,
    handover_patch,
    orphan_bound_problem,
    protections_of,
    renew_interval,
    renewed_deadline,
    unknown_fields,
    with_run_bound,
)

MAX_EXEC = "kueue.x-k8s.io/max-exec-time-seconds"
ACTIVE = "spec.activeDeadlineSeconds"


def rayjob(queued=True, **spec):
    labels = {"kueue.x-k8s.io/queue-name": "q"} if queued else {}
    return {"kind": "RayJob", "metadata": {"name": "j", "labels": labels}, "spec": dict(spec)}


# (case, object as submit creates it, its jobId, expected protections (field, seconds))
GUARDED_ROWS = [
    ("queued, no limit: the renewed bound only", guarded(rayjob(), "j-1"), "j-1", [(ACTIVE, 1800)]),
    ("queued with maxRunSeconds: Kueue's label beside it", guarded(rayjob(), "j-1", 1800, 7200), "j-1", [(ACTIVE, 1800), (f"metadata.labels[{MAX_EXEC}]", 7200)]),
    ("not queued, no limit", guarded(rayjob(queued=False), "j-1", 600), "j-1", [(ACTIVE, 600)]),
    ("not queued, a limit shorter than the bound caps it", guarded(rayjob(queued=False), "j-1", 1800, 300), "j-1", [(ACTIVE, 300)]),
    ("no preRunningDeadlineSeconds: unknown before KubeRay v1.6", guarded(rayjob(preRunningDeadlineSeconds=1800), None), None, [(ACTIVE, 1800)]),
]


@pytest.mark.parametrize("case,obj,job_id,expected", GUARDED_ROWS, ids=[r[0] for r in GUARDED_ROWS])
def test_what_submit_creates(case, obj, job_id, expected):
    assert [(p.field, p.seconds) for p in protections_of(obj)] == expected
    assert obj["spec"].get("jobId") == job_id
    assert "preRunningDeadlineSeconds" not in obj["spec"]


# (case, deployment, seconds since the start was first seen, bound, maxRunSeconds, queued, deadline)
RENEWAL_ROWS = [
    ("queued (suspended): the next start is the bound away", "Suspended", None, 1800, None, True, 1800),
    ("just started", "Initializing", 0.0, 1800, None, True, 1800),
    ("an hour into the run", "Running", 3600.2, 1800, None, True, 5401),
    ("Waiting counts from the start too", "Waiting", 10.0, 1800, None, True, 1810),
    ("suspending after an eviction: the start will be new", "Suspending", 9000.0, 1800, None, True, 1800),
    ("without Kueue maxRunSeconds is the most it reaches", "Running", 3600.0, 1800, 4000, False, 4000),
    ("with Kueue maxRunSeconds is Kueue's, not this", "Running", 3600.0, 1800, 4000, True, 5400),
    ("no start seen yet", "Running", None, 1800, None, True, 1800),
]


@pytest.mark.parametrize("case,deployment,since,bound,max_run,queued,expected", RENEWAL_ROWS, ids=[r[0] for r in RENEWAL_ROWS])
def test_renewed_deadline(case, deployment, since, bound, max_run, queued, expected):
    assert renewed_deadline(deployment, since, bound, max_run, queued) == expected


@pytest.mark.parametrize("bound", [60, 300, 1800, 86400])
def test_a_renewal_interval_leaves_room_for_a_missed_renewal_and_a_late_first_look(bound):
    # The first look at a start may come an interval late; renewals come every interval. The deadline
    # written must outlast the next renewal even then, with one renewal missed.
    interval = renew_interval(bound)
    late_look = interval
    written = renewed_deadline("Running", 100.0, bound, None, True)  # true elapsed is 100 + late_look
    assert written - (100.0 + late_look) > 2 * interval
    assert written - 100.0 <= bound  # and the RayJob fails at most `bound` after the last renewal


@pytest.mark.parametrize("value,problem", [(60, None), (1800, None), (59, "at least 60"), (True, "whole number"), (1.5, "whole number")])
def test_orphan_bound_problem(value, problem):
    found = orphan_bound_problem(value)
    assert (found is None) if problem is None else (problem in found)


# (case, maxRunSeconds, queued, KubeRay knows preRunningDeadlineSeconds, patch, notes say)
HANDOVER_ROWS = [
    ("v1.6+: job id cleared, a readmission waits at most the bound", None, True, True,
     {"spec": {"activeDeadlineSeconds": None, "jobId": None, "preRunningDeadlineSeconds": 1800}}, None),
    ("before v1.6, queued: the id stays, and the gap is said", None, True, False, {"spec": {"activeDeadlineSeconds": None}}, "until someone deletes it"),
    ("before v1.6 with Kueue's limit", 7200, True, False, {"spec": {"activeDeadlineSeconds": None}}, "run-time limit (2h of admitted time)"),
    ("not queued: maxRunSeconds stays the deadline", 7200, False, False, {"spec": {"activeDeadlineSeconds": 7200}}, None),
]  # fmt: skip


@pytest.mark.parametrize("case,max_run,queued,pre_running,patch,note", HANDOVER_ROWS, ids=[r[0] for r in HANDOVER_ROWS])
def test_handover(case, max_run, queued, pre_running, patch, note):
    assert handover_patch(max_run, queued, 1800, pre_running) == patch
    notes = handover_notes(pre_running, queued, max_run)
    assert (notes == []) if note is None else (len(notes) == 1 and note in notes[0])


def test_with_run_bound_on_an_object_without_kueue():
    assert with_run_bound(rayjob(queued=False), 3600)["spec"]["activeDeadlineSeconds"] == 3600
    assert with_run_bound(rayjob(), 3600)["metadata"]["labels"][MAX_EXEC] == "3600"


def test_max_exec_label_without_a_queue_label_is_not_claimed():
    obj = rayjob(queued=False)
    obj["metadata"]["labels"][MAX_EXEC] = "3600"
    assert protections_of(obj) == []


def test_unknown_fields_of_a_strict_refusal():
    message = 'creating RayJob ns/j: RayJob in version "v1" cannot be handled as a RayJob: strict decoding error: unknown field "spec.preRunningDeadlineSeconds", unknown field "spec.x"'
    assert unknown_fields(message) == ["spec.preRunningDeadlineSeconds", "spec.x"]


def test_describe_names_the_bound_in_plain_words():
    (first,) = protections_of(guarded(rayjob(), "j-1"))
    assert first.describe().startswith("if raybridge stops renewing it, the RayJob fails within 30m")


def condition(kind, reason, message):
    return {"type": kind, "status": "True", "reason": reason, "message": message}


EVICTION_ROWS = [
    (
        "preempted in the ClusterQueue",
        {"status": {"admission": {"clusterQueue": "cq"}, "conditions": [
            condition("Evicted", "Preempted", "Preempted to accommodate a workload (UID: u1, JobUID: j1) due to prioritization in the ClusterQueue"),
            condition("Preempted", "InClusterQueue", "Preempted to accommodate a workload (UID: u1, JobUID: j1) due to prioritization in the ClusterQueue")]}},
        "preempted in queue lq (ClusterQueue cq): InClusterQueue: Preempted to accommodate a workload (UID: u1, JobUID: j1)",
    ),
    ("evicted, not preempted", {"status": {"conditions": [condition("Evicted", "PodsReadyTimeout", "Exceeded the PodsReady timeout")]}},
     "evicted from queue lq: PodsReadyTimeout: Exceeded the PodsReady timeout"),
    ("no workload to ask", None, "suspended in queue lq (Kueue took its quota back)"),
]  # fmt: skip


@pytest.mark.parametrize("case,workload,expected", EVICTION_ROWS, ids=[r[0] for r in EVICTION_ROWS])
def test_eviction_summary(case, workload, expected):
    assert eviction_summary(workload, "lq").startswith(expected)


def _wl(active=True, conditions=(), max_seconds=None):
    spec = {"active": active, **({"maximumExecutionTimeSeconds": max_seconds} if max_seconds else {})}
    return {"spec": spec, "status": {"conditions": list(conditions)}}


# Reasons as kueue@v0.13.10 .. v0.20 pkg/controller/core/workload_controller.go writes them.
DEACTIVATION_ROWS = [
    ("admitted", _wl(conditions=[condition("Admitted", "Admitted", "ok")]), None),
    ("preempted: readmitted later", _wl(conditions=[condition("Evicted", "Preempted", "to accommodate")]), None),
    ("the limit passed, not yet deactivated", _wl(conditions=[condition("DeactivationTarget", "MaximumExecutionTimeExceeded", "exceeding the maximum execution time")], max_seconds=600),
     "the run-time limit was reached (maximumExecutionTimeSeconds=600)"),
    ("deactivated for the limit", _wl(False, [condition("Evicted", "DeactivatedDueToMaximumExecutionTimeExceeded",
     "The workload is deactivated due to exceeding the maximum execution time")], 600), "the run-time limit was reached (maximumExecutionTimeSeconds=600)"),
    ("stopped by an admin", _wl(False, [condition("Evicted", "Deactivated", "The workload is deactivated")]),
     "its Workload was deactivated by hand (spec.active: false)"),
    ("active false, no condition yet", _wl(False), "its Workload was deactivated by hand (spec.active: false)"),
    ("no workload", None, None),
]  # fmt: skip


@pytest.mark.parametrize("case,workload,expected", DEACTIVATION_ROWS, ids=[r[0] for r in DEACTIVATION_ROWS])
def test_deactivation_is_told_apart_from_eviction(case, workload, expected):
    found = deactivation(workload)
    assert (found is None) if expected is None else (found is not None and found.words.startswith(expected))
