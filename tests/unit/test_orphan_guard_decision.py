"""Orphan protection: the bound raybridge renews, what a RayJob carries, the hand-over, and deactivation."""

from __future__ import annotations

import pytest

from raybridge.kueue.workload import deactivation, eviction_summary
from raybridge.kuberay.releases import pre_running_supported
from raybridge.jobs.decision.orphan_guard import (
    Renewal,
    guarded,
    handover_notes,
    handover_patch,
    kueue_limits_run,
    orphan_bound_problem,
    protections_of,
    renew_interval,
    renewed_deadline,
    seconds_since_start,
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


def test_a_deadline_that_is_the_run_time_limit_is_said_as_the_limit():
    obj = guarded(rayjob(queued=False), "j-1", 1800, 20)
    (limit,) = protections_of(obj, max_run_seconds=20)
    assert limit.run_limit and limit.describe().startswith("the RayJob fails 20s after it starts, its run-time limit (maxRunSeconds")
    (bound,) = protections_of(guarded(rayjob(queued=False), "j-1", 1800, 7200), max_run_seconds=7200)
    assert not bound.run_limit  # the bound is shorter: the deadline is the bound


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


def stored(labels: dict[str, str]) -> dict:
    return {"metadata": {"labels": labels}, "spec": {}}


# (case, labels of the RayJob as stored, Kueue enforces maxRunSeconds)
KUEUE_LIMIT_ROWS = [
    ("queue and limit labels", {"kueue.x-k8s.io/queue-name": "q", MAX_EXEC: "20"}, True),
    ("a queue Kueue defaulted, no limit label: the deadline holds the limit", {"kueue.x-k8s.io/queue-name": "default"}, False),
    ("no queue: Kueue ignores the label", {MAX_EXEC: "20"}, False),
]


@pytest.mark.parametrize("case,labels,expected", KUEUE_LIMIT_ROWS, ids=[r[0] for r in KUEUE_LIMIT_ROWS])
def test_kueue_limits_run(case, labels, expected):
    assert kueue_limits_run(stored(labels)) is expected


def test_a_limit_kueue_does_not_enforce_caps_every_renewal():
    # Created without a queue (limit in activeDeadlineSeconds); Kueue's LocalQueue defaulting then added its queue.
    renewal = Renewal(1800, 20, kueue_limits_run(stored({"kueue.x-k8s.io/queue-name": "default"})), "j-1", False)
    obj = {"spec": {"activeDeadlineSeconds": 20}, "status": {"jobDeploymentStatus": "Running"}}
    assert renewal.fields(obj, 5.0) == {}


START = "2026-01-01T00:00:00Z"
START_EPOCH = 1767225600.0

# (case, start, seconds seen on the local clock, server clock, measure)
SINCE_ROWS = [
    ("no start yet", "", 10.0, START_EPOCH + 50, None),
    ("the server's clock when the machine slept", START, 10.0, START_EPOCH + 3610, 3610.0),
    ("the local clock when it saw more", START, 100.0, START_EPOCH + 50, 100.0),
    ("a server clock behind the start counts nothing", START, 5.0, START_EPOCH - 30, 5.0),
    ("no Date header", START, 7.0, None, 7.0),
    ("a start that is no time", "yesterday", 7.0, START_EPOCH, 7.0),
]


@pytest.mark.parametrize("case,start,seen,server,expected", SINCE_ROWS, ids=[r[0] for r in SINCE_ROWS])
def test_seconds_since_start(case, start, seen, server, expected):
    assert seconds_since_start(start, seen, server) == expected


def job(deployment, spec_id="j-1", status_id="j-1", pre_running=None, deadline=1800):
    spec = {"activeDeadlineSeconds": deadline}
    if spec_id:
        spec["jobId"] = spec_id
    if pre_running is not None:
        spec["preRunningDeadlineSeconds"] = pre_running
    return {"spec": spec, "status": {"jobDeploymentStatus": deployment, "jobId": status_id}}


# (case, operator v1.6+, RayJob, seconds since its start, fields written)
RENEWAL_FIELD_ROWS = [
    ("before v1.6: the deadline alone", False, job("Running"), 100.0, {"activeDeadlineSeconds": 1900}),
    ("v1.6, still initializing: the id stays until KubeRay takes it", True, job("Initializing", status_id=""), 10.0, {"activeDeadlineSeconds": 1810}),
    ("v1.6, KubeRay polls the job: the id goes, pre-running is the bound", True, job("Running"), 100.0,
     {"activeDeadlineSeconds": 1900, "jobId": None, "preRunningDeadlineSeconds": 1800}),
    ("v1.6, id polled is another: left alone", True, job("Running", status_id="other"), 100.0, {"activeDeadlineSeconds": 1900}),
    ("v1.6, readmitted and waiting for the submitter: pre-running kept ahead", True, job("Waiting", spec_id="", status_id="", pre_running=1800),
     600.0, {"activeDeadlineSeconds": 2400, "preRunningDeadlineSeconds": 2400}),
    ("v1.6, id handed back, not yet taken: pre-running still ahead", True, job("Waiting", status_id="", pre_running=2400), 650.0,
     {"activeDeadlineSeconds": 2450, "preRunningDeadlineSeconds": 2450}),
    ("v1.6, running again after it: the bound, counted from the next start", True, job("Running", spec_id="", pre_running=2450), 700.0,
     {"activeDeadlineSeconds": 2500, "preRunningDeadlineSeconds": 1800}),
    ("v1.6, suspended: both the bound", True, job("Suspended", spec_id="", status_id="", pre_running=2450, deadline=2500), None,
     {"activeDeadlineSeconds": 1800, "preRunningDeadlineSeconds": 1800}),
]  # fmt: skip


@pytest.mark.parametrize("case,pre_running,obj,since,expected", RENEWAL_FIELD_ROWS, ids=[r[0] for r in RENEWAL_FIELD_ROWS])
def test_renewal_fields(case, pre_running, obj, since, expected):
    assert Renewal(1800, None, True, "j-1", pre_running).fields(obj, since) == expected


@pytest.mark.parametrize(
    "version,supported",
    [("v1.6.1", True), ("v1.6.0", True), ("1.7.0", True), ("v1.7.0-rc.0", True), ("v1.5.2", False), ("v1.3.2", False),
     ("latest", False), ("", False), (None, False), ("v2.0.0", True)],
)  # fmt: skip
def test_pre_running_supported_by_operator_release(version, supported):
    assert pre_running_supported(version) is supported
