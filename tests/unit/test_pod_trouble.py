"""core/pod_trouble.py and jobs/cluster_wait.py StartWatch: what a starting Ray cluster's pods and a silent operator
add to the wait's line.

Why this module exists: a slow start and one that will never end looked alike (issue 40); these pin down which
kubelet reasons count as trouble, how a line names them, which end the wait, and when an operator counts as silent.
"""

from __future__ import annotations

import pytest

from raybridge.core.pod_trouble import permanent, pod_trouble, pods_trouble, trouble_words
from raybridge.core.views import read_pod
from raybridge.errors import BadInput


def pod(name: str, *, waiting: str = "", message: str = "", restarts: int = 0, phase: str = "Pending", unschedulable: str = "",
        init: bool = False, deleting: bool = False) -> dict:
    statuses = [{"name": "c", "restartCount": restarts, "state": {"waiting": {"reason": waiting, "message": message}} if waiting else {"running": {}}}]
    conditions = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": unschedulable}] if unschedulable else []
    meta = {"name": name, **({"deletionTimestamp": "2026-01-01T00:00:00Z"} if deleting else {})}
    return {"metadata": meta, "status": {"phase": phase, "conditions": conditions, ("initContainerStatuses" if init else "containerStatuses"): statuses}}


ROWS = [
    ("an image not pulled", pod("h", waiting="ImagePullBackOff", message='Back-off pulling image "x"'), 'ImagePullBackOff (Back-off pulling image "x")'),
    ("a crash loop counts its restarts", pod("h", waiting="CrashLoopBackOff", message="back-off 40s", restarts=3, phase="Running"),
     "CrashLoopBackOff (back-off 40s; 3 restarts)"),
    ("an init container's trouble", pod("h", waiting="ErrImagePull", init=True), "ErrImagePull"),
    ("no node for it", pod("h", unschedulable="0/3 nodes are available"), "Unschedulable (0/3 nodes are available)"),
    ("a start under way is no trouble", pod("h", waiting="ContainerCreating"), None),
    ("a pod being deleted is no trouble", pod("h", waiting="CrashLoopBackOff", deleting=True), None),
    ("a message on several lines is one line, cut", pod("h", waiting="CreateContainerConfigError", message="a\nb" + "x" * 300),
     "CreateContainerConfigError (a b" + "x" * 154 + "...)"),
]


@pytest.mark.parametrize("case,obj,expected", ROWS, ids=[r[0] for r in ROWS])
def test_what_keeps_a_pod_from_running(case, obj, expected):
    assert pod_trouble(read_pod(obj)) == expected


def test_a_line_names_two_pods_and_counts_the_rest_and_only_an_invalid_name_is_permanent():
    pods = [read_pod(pod(f"w{i}", waiting="ImagePullBackOff")) for i in range(4)]
    troubles = pods_trouble(pods)
    assert trouble_words(troubles) == "pod w0: ImagePullBackOff; pod w1: ImagePullBackOff (and 2 more pods)"
    assert permanent(troubles) is None
    assert permanent(pods_trouble([read_pod(pod("h", waiting="InvalidImageName", message="bad"))])) == "pod h: InvalidImageName (bad)"


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _state(deployment: str = "", cluster: str = ""):
    from raybridge.kuberay.rayjob import ray_state

    return ray_state({"kind": "RayJob", "metadata": {"name": "j"}, "status": {"jobDeploymentStatus": deployment, "rayClusterName": cluster}})


def test_an_operator_is_silent_once_its_own_step_takes_longer_than_silent_seconds():
    from raybridge.jobs.cluster_wait import SILENT_SECONDS, StartWatch

    clock = _Clock()
    watch = StartWatch(None, "ns", "RayJob", queued=False, clock=clock)  # type: ignore[arg-type]
    assert watch.notes(_state(), None) == ""
    clock.now = SILENT_SECONDS - 1
    assert watch.notes(_state(), None) == ""
    clock.now = SILENT_SECONDS
    assert watch.notes(_state(), None).startswith("KubeRay has not acted on it in 20s: is the KubeRay operator running?")
    queued = StartWatch(None, "ns", "RayJob", queued=True, clock=clock)  # type: ignore[arg-type]
    assert queued.notes(_state("Suspended"), None) == ""
    clock.now += SILENT_SECONDS
    assert queued.notes(_state("Suspended"), None).startswith("Kueue has made no Workload for it in 20s")


def test_a_job_waiting_in_its_queue_is_not_an_operator_silent():
    from raybridge.jobs.cluster_wait import SILENT_SECONDS, StartWatch
    from raybridge.kueue.workload import workload_view

    clock = _Clock()
    watch = StartWatch(None, "ns", "RayJob", queued=True, clock=clock)  # type: ignore[arg-type]
    pending = workload_view({"metadata": {"name": "w"}, "spec": {"queueName": "q"}, "status": {"conditions": [
        {"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": "insufficient quota"}]}})
    watch.notes(_state("Suspended"), pending)
    clock.now = 10 * SILENT_SECONDS
    assert watch.notes(_state("Suspended"), pending) == ""


def test_an_invalid_image_ends_the_wait(monkeypatch):
    from raybridge.jobs import cluster_wait

    monkeypatch.setattr(cluster_wait, "list_namespaced_pods", lambda *_a: [pod("j-head-x", waiting="InvalidImageName", message="bad")])
    watch = cluster_wait.StartWatch(None, "ns", "RayJob", queued=False, clock=_Clock())  # type: ignore[arg-type]
    with pytest.raises(BadInput, match="RayJob ns/j cannot start: pod j-head-x: InvalidImageName"):
        watch.notes(_state("Initializing", "j-abc"), None)
