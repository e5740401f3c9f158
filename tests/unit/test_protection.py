"""Orphan protection: which one an object carries, and the fallback where KubeRay lacks preRunningDeadlineSeconds."""

from __future__ import annotations

import pytest

from raybridge.core.admission import eviction_summary
from raybridge.core.protection import (
    DEFAULT_MAX_RUN_SECONDS,
    protections_of,
    unknown_fields,
    with_run_bound,
    without_pre_running_deadline,
)

MAX_EXEC = "kueue.x-k8s.io/max-exec-time-seconds"


def rayjob(queued=True, **spec):
    labels = {"kueue.x-k8s.io/queue-name": "q"} if queued else {}
    return {"kind": "RayJob", "metadata": {"name": "j", "labels": labels}, "spec": {"preRunningDeadlineSeconds": 1800, **spec}}


def labelled_only(queued):
    """A RayJob whose only protection could be Kueue's max-exec-time label (no preRunningDeadlineSeconds)."""
    obj = rayjob(queued=queued)
    del obj["spec"]["preRunningDeadlineSeconds"]
    obj["metadata"]["labels"][MAX_EXEC] = "3600"
    return obj


# (case, object after the fallback, expected protections (field, seconds))
FALLBACK_ROWS = [
    ("queued: Kueue's label, a day", without_pre_running_deadline(rayjob(), None, queued=True), [(f"metadata.labels[{MAX_EXEC}]", DEFAULT_MAX_RUN_SECONDS)]),
    ("queued with maxRunSeconds", without_pre_running_deadline(rayjob(), 7200, queued=True), [(f"metadata.labels[{MAX_EXEC}]", 7200)]),
    ("not queued: activeDeadlineSeconds", without_pre_running_deadline(rayjob(queued=False), None, queued=False), [("spec.activeDeadlineSeconds", DEFAULT_MAX_RUN_SECONDS)]),
    ("as rendered for KubeRay 1.6+", rayjob(), [("spec.preRunningDeadlineSeconds", 1800)]),
    ("a bound on the run beside it", with_run_bound(rayjob(), 3600), [("spec.preRunningDeadlineSeconds", 1800), (f"metadata.labels[{MAX_EXEC}]", 3600)]),
    ("max-exec label on a job Kueue manages", labelled_only(queued=True), [(f"metadata.labels[{MAX_EXEC}]", 3600)]),
    ("max-exec label without a queue label: Kueue ignores it", labelled_only(queued=False), []),
]


@pytest.mark.parametrize("case,obj,expected", FALLBACK_ROWS, ids=[r[0] for r in FALLBACK_ROWS])
def test_protections(case, obj, expected):
    assert [(p.field, p.seconds) for p in protections_of(obj)] == expected
    assert "preRunningDeadlineSeconds" not in obj["spec"] or expected[0][0] == "spec.preRunningDeadlineSeconds"


def test_nothing_is_claimed_for_what_the_server_dropped():
    dropped = rayjob()
    del dropped["spec"]["preRunningDeadlineSeconds"]
    assert protections_of(dropped) == []


def test_unknown_fields_of_a_strict_refusal():
    message = 'creating RayJob ns/j: RayJob in version "v1" cannot be handled as a RayJob: strict decoding error: unknown field "spec.preRunningDeadlineSeconds", unknown field "spec.x"'
    assert unknown_fields(message) == ["spec.preRunningDeadlineSeconds", "spec.x"]


def test_describe_names_the_bound_in_plain_words():
    (first,) = protections_of(rayjob())
    assert first.describe().startswith("a RayJob whose job has not started within 30m fails")


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
