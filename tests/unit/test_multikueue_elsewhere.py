"""A job Kueue's MultiKueue runs in a worker cluster, seen from the manager: what `status` says, what `logs`,
`stop` and `dashboard` answer there (raybridge/kueue/multikueue.py), and the bound `submit --no-wait` gives it
(raybridge/jobs/queued.py).

Why it exists: the manager's RayJob carries the worker's status, copied back by Kueue (Ray cluster name, dashboard
URL, Running), while the Ray cluster is in the worker. `status` pointed at `raybridge dashboard` in this cluster and
`dashboard`, `logs` and `stop` looked for a head pod here and failed with "no running head pod" (exit 3); `submit
--no-wait` judged the orphan bound by this cluster's KubeRay operator (none, in a manager: no bound, and a note about
an operator that does not run the job). Each is checked here on plain objects, the CLI on the real programs in tests/e2e/test_multikueue_real.py.

What it deliberately does not do: talk to an API server (the lookups are stood in for), or test a job this cluster
runs (test_explain.py and the e2e modules do).
"""

from __future__ import annotations

from typing import Any, Optional

import pytest

from raybridge.errors import BadInput
from raybridge.jobs import lifecycle
from raybridge.jobs.queued import orphan_note, pre_running_bound
from raybridge.kueue.multikueue import elsewhere_refusal
from raybridge.kueue.workload import read_workload
from raybridge.queues.decision.kueue_explain import explain_kueue

MULTIKUEUE = "kueue.x-k8s.io/multikueue"


def rayjob(managed_by: Optional[str] = MULTIKUEUE) -> dict[str, Any]:
    """The manager's RayJob once Kueue copied the worker's status back: Running, with its cluster and dashboard."""
    spec: dict[str, Any] = {"entrypoint": "python -c 'print(1)'", "submissionMode": "K8sJobMode"}
    if managed_by:
        spec["managedBy"] = managed_by
    return {
        "apiVersion": "ray.io/v1", "kind": "RayJob",
        "metadata": {"name": "far-job", "namespace": "team", "uid": "job-uid", "labels": {"kueue.x-k8s.io/queue-name": "team-queue"}},
        "spec": spec,
        "status": {"jobDeploymentStatus": "Running", "jobId": "far-job-1", "rayClusterName": "far-job-abcde",
                   "dashboardURL": "far-job-abcde-head-svc.team.svc.cluster.local:8265"},
    }  # fmt: skip


def workload(cluster_name: str = "worker-1") -> dict[str, Any]:
    status: dict[str, Any] = {
        "conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "reserved"},
                       {"type": "Admitted", "status": "True", "reason": "Admitted", "message": "admitted"}],
        "admissionChecks": [{"name": "multikueue", "state": "Ready", "message": f'The workload got reservation on "{cluster_name}"'}],
    }  # fmt: skip
    if cluster_name:
        status["clusterName"] = cluster_name
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": {"name": "rayjob-far-job-1", "namespace": "team"},
            "spec": {"queueName": "team-queue", "podSets": []}, "status": status}  # fmt: skip


def test_status_says_the_job_runs_in_the_worker_and_does_not_offer_the_dashboard_here() -> None:
    lines = explain_kueue(rayjob(), workload(), None, None, "cq").lines()
    text = "\n".join(lines)
    assert ("  runs in: worker cluster worker-1 (MultiKueueCluster worker-1) (Kueue's MultiKueue copies the job there and its "
            "status back here; its Ray cluster, dashboard and logs are there, not in this cluster)") in lines, text
    assert "from here: raybridge dashboard" not in text
    assert ("  dashboard: far-job-abcde-head-svc.team.svc.cluster.local:8265 (in the worker cluster: raybridge dashboard far-job "
            "-n team with its kubeconfig)") in lines, text
    assert explain_kueue(rayjob(), workload(), None, None, "cq").to_dict()["runsIn"] == "worker cluster worker-1 (MultiKueueCluster worker-1)"


def test_status_before_dispatch_says_a_worker_will_run_it() -> None:
    text = "\n".join(explain_kueue(rayjob(), workload(cluster_name=""), None, None, "cq").lines())
    assert "runs in: a worker cluster, once Kueue's MultiKueue dispatches it" in text


def test_a_job_this_cluster_runs_keeps_its_dashboard_line() -> None:
    explanation = explain_kueue(rayjob(managed_by=None), workload(cluster_name=""), None, None, "cq")
    assert "  dashboard: far-job-abcde-head-svc.team.svc.cluster.local:8265 (in the cluster; from here: raybridge dashboard far-job -n team)" in explanation.lines()
    assert explanation.runs_in is None and elsewhere_refusal(rayjob(managed_by=None), None, "logs") is None


class _Kube:
    namespace = "team"


@pytest.fixture
def manager_copy(monkeypatch: pytest.MonkeyPatch) -> None:
    """The lookups of a manager that holds the dispatched RayJob and its Workload; a head pod lookup fails the test."""
    monkeypatch.setattr(lifecycle, "find_job", lambda kube, name: (None, rayjob()))
    monkeypatch.setattr(lifecycle, "find_workload", lambda kube, namespace, obj: workload())

    def no_head_pod(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("looked for the Ray cluster in the manager")

    monkeypatch.setattr(lifecycle, "head_pod", no_head_pod)
    monkeypatch.setattr(lifecycle, "connect_dashboard", no_head_pod)


@pytest.mark.parametrize("command", ["logs", "stop", "dashboard"])
def test_commands_that_reach_the_ray_cluster_name_the_worker_instead(manager_copy: None, command: str) -> None:
    calls = {
        "logs": lambda: lifecycle.job_logs(_Kube(), "far-job", lambda _: None),  # type: ignore[arg-type]
        "stop": lambda: lifecycle.stop_job(_Kube(), "far-job"),  # type: ignore[arg-type]
        "dashboard": lambda: lifecycle.forward_dashboard(_Kube(), "far-job"),  # type: ignore[arg-type]
    }
    with pytest.raises(BadInput) as raised:
        calls[command]()
    assert str(raised.value) == (
        "RayJob team/far-job runs in worker cluster worker-1 (MultiKueueCluster worker-1): Kueue's MultiKueue copies it there "
        "(spec.managedBy kueue.x-k8s.io/multikueue) and only its status back here, so its Ray cluster, dashboard and logs are "
        f"not in this cluster; run `raybridge {command} far-job -n team` with that cluster's kubeconfig (`raybridge delete far-job` "
        "here removes it from both)"
    )


def test_a_multikueue_job_carries_the_bound_for_the_worker_whatever_this_cluster_runs() -> None:
    """`submit --no-wait` to a MultiKueue queue: the worker's operator runs the job, not this cluster's (often none): the
    bound goes in the spec Kueue copies, and the note speaks of the worker's operator, not of this cluster's."""
    assert pre_running_bound(None, 1800, multikueue=True) == 1800
    assert pre_running_bound("v1.5.0", 1800, multikueue=True) == 1800
    assert pre_running_bound(None, 1800, multikueue=False) is None and pre_running_bound("v1.6.1", 1800, multikueue=False) == 1800
    unknown = "unknown (no Deployment labelled app.kubernetes.io/name=kuberay-operator)"
    note = orphan_note("far-job", 1800, unknown, multikueue=True)
    assert note == ("orphan protection: where the worker cluster's KubeRay operator is v1.6 or later (its release is not visible "
                    "from here), a Ray cluster that does not start fails within 1800s of each admission and frees its quota "
                    "(spec.preRunningDeadlineSeconds)")  # fmt: skip
    assert "this cluster's RayJob CRD does not know preRunningDeadlineSeconds" in orphan_note("far-job", None, unknown, multikueue=True)
    assert orphan_note("far-job", None, unknown, multikueue=False).startswith(f"KubeRay operator {unknown} honours no preRunningDeadlineSeconds")
