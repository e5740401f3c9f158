"""kuberay.rayjob.ray_state: a RayJob's or RayCluster's status read once, each question answered from it."""

from __future__ import annotations

import pytest

from raybridge.kuberay.rayjob import ray_state


def rayjob(status=None, spec=None, kind="RayJob"):
    return {"kind": kind, "metadata": {"name": "j", "namespace": "ns"}, "spec": spec or {}, "status": status}


# (case, object, ended, suspended, ready, at_deadline, submitted_id, shown)
ROWS = [
    ("new, nothing written yet", rayjob(), False, False, False, False, "", "New"),
    ("waiting with its dashboard", rayjob({"jobDeploymentStatus": "Waiting", "dashboardURL": "h:8265"}, {"jobId": "s1"}),
     False, False, True, False, "s1", "Waiting"),
    ("running without a dashboard yet", rayjob({"jobDeploymentStatus": "Running", "jobId": "s1"}), False, False, False, False, "s1", "Running"),
    ("suspended by Kueue", rayjob({"jobDeploymentStatus": "Suspended"}), False, True, False, False, "", "Suspended"),
    ("failed at its deadline", rayjob({"jobDeploymentStatus": "Failed", "reason": "DeadlineExceeded"}), True, False, False, True, "", "Failed"),
    ("failed at the pre-running deadline", rayjob({"jobDeploymentStatus": "Failed", "reason": "PreRunningDeadlineExceeded"}),
     True, False, False, True, "", "Failed"),
    ("failed otherwise", rayjob({"jobDeploymentStatus": "Failed", "reason": "AppFailed"}), True, False, False, False, "", "Failed"),
    ("complete", rayjob({"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED", "jobId": "s1"}), True, False, False, False, "s1", "Complete"),
    ("a ready RayCluster", rayjob({"state": "ready"}, kind="RayCluster"), False, False, True, False, "", "ready"),
    ("fields of the wrong type read as absent", rayjob({"jobDeploymentStatus": 3, "jobId": ["x"], "dashboardURL": {}}),
     False, False, False, False, "", "New"),
    ("no status at all", {"kind": "RayJob", "metadata": {}, "status": "garbage"}, False, False, False, False, "", "New"),
]  # fmt: skip


@pytest.mark.parametrize("case,obj,ended,suspended,ready,at_deadline,submitted,shown", ROWS, ids=[r[0] for r in ROWS])
def test_each_question_of_a_rayjob_is_read_from_one_view(case, obj, ended, suspended, ready, at_deadline, submitted, shown):
    state = ray_state(obj)
    assert (state.ended, state.suspended, state.ready, state.at_deadline) == (ended, suspended, ready, at_deadline)
    assert (state.submitted_id, state.shown()) == (submitted, shown)


def test_taken_when_kuberay_polls_the_id_or_the_rayjob_ended():
    assert ray_state(rayjob({"jobDeploymentStatus": "Running", "jobId": "s1"})).taken("s1")
    assert not ray_state(rayjob({"jobDeploymentStatus": "Running", "jobId": "other"})).taken("s1")
    assert ray_state(rayjob({"jobDeploymentStatus": "Failed"})).taken("s1")
    assert ray_state(rayjob({"jobDeploymentStatus": "Failed", "reason": "X", "message": "m"})).why() == "X: m"


# (case, status, kind, workers ready, workers desired)
WORKER_ROWS = [
    ("none written yet", {}, "RayJob", 0, None),
    ("two of four ready", {"rayClusterStatus": {"readyWorkerReplicas": 2, "desiredWorkerReplicas": 4}}, "RayJob", 2, 4),
    ("ready left out until one is", {"rayClusterStatus": {"desiredWorkerReplicas": 4}}, "RayJob", 0, 4),
    ("counts of the wrong type", {"rayClusterStatus": {"readyWorkerReplicas": "2", "desiredWorkerReplicas": True}}, "RayJob", 0, None),
    ("rayClusterStatus not an object", {"rayClusterStatus": [1]}, "RayJob", 0, None),
    ("a RayCluster's are not read here", {"rayClusterStatus": {"readyWorkerReplicas": 2, "desiredWorkerReplicas": 4}}, "RayCluster", 0, None),
]  # fmt: skip


@pytest.mark.parametrize("case,status,kind,ready,desired", WORKER_ROWS, ids=[r[0] for r in WORKER_ROWS])
def test_a_rayjob_s_workers_are_read_with_its_state(case, status, kind, ready, desired):
    state = ray_state(rayjob(status, kind=kind))
    assert (state.workers_ready, state.workers_desired) == (ready, desired)
