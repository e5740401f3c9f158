"""`submit --backend kubernetes` when Kueue takes the running job away, on the real cluster (testcluster:
kube-apiserver, the scheduler, kwok nodes, KubeRay v1.6.1 and Kueue v0.17.0).

Why this module exists: on a real cluster an evicted RayJob's Ray cluster is deleted and, after
readmission, a new one is built that has never heard of the job. raybridge must notice the eviction,
say who preempted it, wait for readmission within --timeout and submit the entrypoint again, or give up
and delete what it created. A Workload Kueue deactivated (by hand, or when the run-time limit ran out)
is the end of the job: exit 1, never a wait for readmission. The evictions here are Kueue's own: a
higher-priority RayJob preempts the job in a ClusterQueue with `preemption.withinClusterQueue:
LowerPriority` (Kueue readmits the job once that RayJob is deleted), and `spec.active: false` on the
Workload deactivates it.

What the real cluster does not do as a real one does: every head pod stands for the session's one
local Ray head, which outlives the head pod that the eviction deletes; the evicted run of the job runs
on in it, and its log stays on its disk. A real head dies with its pod, its jobs and logs with it: the
tests end that run on the shared head themselves (`HeadJobs.end`: stopped, deleted, its log removed)
after the eviction and before the readmission, so that the new cluster has never heard of the job, as
on a real cluster; and after each test they end what raybridge left running there.

What it deliberately does not do: test Kueue's choice of whom to preempt (one job and one
higher-priority RayJob in a queue of 8 GPUs), or the submit paths without an eviction
(test_kube_submit.py).
"""

from __future__ import annotations

import subprocess
import sys
import threading
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Optional

import pytest

from tests.helpers import ROOT, cli_env, run_cli
from tests.builders import rayjob_manifest
from tests.cluster_state import fresh_queue, leftovers, make_priority_class
from tests.waits import wait_for

RAY, KUEUE = "ray.io/v1", "kueue.x-k8s.io/v1beta2"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"


@pytest.fixture(scope="module")
def cluster(real_cluster):
    """(client, kubeconfig path): the admin's view of the session's real cluster."""
    client = real_cluster.client()
    try:
        yield client, str(real_cluster.kubeconfig)
    finally:
        client.close()


@pytest.fixture
def preemptible(cluster):
    """A fresh namespace and LocalQueue whose ClusterQueue (8 GPUs) preempts lower-priority Workloads for
    higher ones, and two WorkloadPriorityClasses of this test's own: (namespace, local queue, low, high)."""
    server = cluster[0]
    namespace, lq, cq = fresh_queue(server, preemption={"withinClusterQueue": "LowerPriority"})
    low, high = f"low-{cq}", f"high-{cq}"
    make_priority_class(server, low, 100)
    make_priority_class(server, high, 1000)
    yield namespace, lq, low, high
    for name in (low, high):
        server.delete_object(KUEUE, "WorkloadPriorityClass", name)


class Cli:
    """`raybridge ...` running in the background, its output collected as it comes."""

    def __init__(self, cluster, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "raybridge", *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=cli_env(KUBECONFIG=cluster[1]), cwd=str(ROOT),
        )  # fmt: skip
        self.out: list[str] = []
        self.err: list[str] = []
        self._readers = [
            threading.Thread(target=self._read, args=(self.proc.stdout, self.out), daemon=True),
            threading.Thread(target=self._read, args=(self.proc.stderr, self.err), daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    @staticmethod
    def _read(stream, into: list[str]) -> None:
        for line in stream:
            into.append(line)

    @property
    def stdout(self) -> str:
        return "".join(self.out)

    @property
    def stderr(self) -> str:
        return "".join(self.err)

    def wait_for(self, text: str, where: str = "stdout", timeout: float = 120) -> None:
        wait_for(lambda: text in getattr(self, where) or self.proc.poll() is not None, timeout=timeout, what=text)
        assert text in getattr(self, where), f"never saw {text!r}:\n{self.stdout}\n{self.stderr}"

    def kill_if_running(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()

    def finish(self, timeout: float = 180) -> int:
        try:
            code = self.proc.wait(timeout=timeout)
        finally:
            self.kill_if_running()
        for reader in self._readers:
            reader.join(timeout=5)
        return code


def workload_of(server, namespace: str, job: str) -> dict[str, Any]:
    """The Workload Kueue made for RayJob `job` (its name starts with rayjob-<job>-)."""
    workloads = [w for w in server.list_objects(KUEUE, "Workload", namespace) if w["metadata"]["name"].startswith(f"rayjob-{job}-")]
    assert len(workloads) == 1, workloads
    return workloads[0]


def condition_true(obj: dict[str, Any], kind: str) -> bool:
    return any(c["type"] == kind and c["status"] == "True" for c in (obj.get("status") or {}).get("conditions") or [])


def preemptor(namespace: str, lq: str, priority_class: str) -> dict[str, Any]:
    """Someone else's RayJob asking for the queue's 8 GPUs at a higher priority (InteractiveMode without a
    job id: once admitted it waits, holding the quota, until deleted)."""
    manifest = rayjob_manifest("preemptor", namespace=namespace, queue=lq, workers=1, gpus_per_worker=8)
    manifest["metadata"]["labels"][PRIORITY_LABEL] = priority_class
    return manifest


def counting_entrypoint(runs: Path) -> str:
    """Prints `attempt <random id>`; the first run waits (to be evicted), a later one finishes at once.

    Each run adds a line to `runs`: the log file its head writes its output to (its stdout). Every head pod
    stands for one local head, so every run sees the file, and the test can remove a log as a head pod's
    end removes it on a real cluster.
    """
    return (
        "import os, pathlib, time, uuid; runs = pathlib.Path(%r); first = not runs.exists(); "
        "runs.open('a').write(os.readlink('/proc/self/fd/1') + chr(10)); "
        "print('attempt', uuid.uuid4().hex[:6], flush=True); time.sleep(300 if first else 1); print('finished', flush=True)"
    ) % str(runs)


@pytest.mark.parametrize(
    "readmitted_at_once",
    [False, True],
    ids=["readmitted-after-the-report", "readmitted-as-soon-as-evicted"],
)
def test_an_evicted_job_is_reported_and_runs_again_on_the_new_cluster(cluster, preemptible, head, tmp_path, readmitted_at_once):
    """Preempted by a higher-priority RayJob, readmitted once that RayJob is deleted: after raybridge said so,
    or as soon as Kueue evicted the job (raybridge may find the RayJob on its new cluster already)."""
    server = cluster[0]
    namespace, lq, low, high = preemptible
    run = Cli(cluster, "submit", "-n", namespace, "--queue", lq, "--priority-class", low, "--name", "evicted", "--gpus", "8",
              "--timeout", "120", "--", "python", "-c", counting_entrypoint(tmp_path / "runs"))  # fmt: skip
    try:
        run.wait_for("attempt")
        first_cluster = server.get_object(RAY, "RayJob", "evicted", namespace)["status"]["rayClusterName"]
        [first_run] = head.track(run.stderr)
        server.create_object(preemptor(namespace, lq, high))
        wait_for(lambda: condition_true(workload_of(server, namespace, "evicted"), "Evicted"), timeout=60, what="Kueue to evict the job")
        first_log = Path((tmp_path / "runs").read_text().splitlines()[0])
        if not readmitted_at_once:
            run.wait_for(f"evicted: preempted in queue {lq}", where="stderr", timeout=60)
            wait_for(lambda: server.get_object(RAY, "RayCluster", first_cluster, namespace) is None, timeout=60,
                     what="the evicted cluster deleted")  # fmt: skip
        else:
            # A job does not die before its head: the first run ends once KubeRay is deleting the evicted cluster
            # (ended earlier, the shared head reported it FAILED while the cluster still stood and the Workload was
            # already readmitted), and before the new cluster's head (the same shared head) could be asked for it.
            wait_for(lambda: (server.get_object(RAY, "RayCluster", first_cluster, namespace) or {"metadata": {"deletionTimestamp": "gone"}})
                     ["metadata"].get("deletionTimestamp"), timeout=60, what="KubeRay deleting the evicted cluster")  # fmt: skip
        head.end(first_run, log=first_log)  # the evicted head pod's end
        server.delete_object(RAY, "RayJob", "preemptor", namespace)  # frees the quota: Kueue readmits the job
        code = run.finish()
    finally:
        run.kill_if_running()
        head.track(run.stderr)
    assert code == 0, run.stderr
    # Kueue v0.17.0 pkg/scheduler/preemption/preemption.go preemptionMessage, under the Preempted condition's reason
    assert f"evicted: preempted in queue {lq}" in run.stderr
    assert "InClusterQueue: Preempted to accommodate a workload (UID: " in run.stderr
    assert "due to prioritization in the ClusterQueue" in run.stderr
    assert f"Ray cluster {first_cluster} is gone" in run.stderr
    attempts = [line for line in run.stdout.splitlines() if line.startswith("attempt ")]
    assert len(attempts) == 2 and attempts[0] != attempts[1], run.stdout  # two runs, on two clusters
    assert run.stdout.rstrip().endswith("finished"), run.stdout
    assert run.stderr.count("submitted evicted-") == 2, run.stderr
    assert "lost the Ray dashboard" not in run.stderr and "Traceback" not in run.stderr
    # Kueue admits (again) before KubeRay has unsuspended the RayJob: when raybridge looks in between, it says
    # "admitted by <queue>; waiting for KubeRay to start the Ray cluster", never a bare "Suspended" or "New".
    assert not {"New", "Suspended", "Suspending"} & set(run.stderr.splitlines()), run.stderr
    assert f"deleted RayJob {namespace}/evicted" in run.stderr
    wait_for(lambda: leftovers(server, namespace) == {}, timeout=60, what="nothing left")


def test_an_evicted_job_that_is_never_readmitted_exits_3_and_deletes_everything(cluster, preemptible, head):
    """The higher-priority RayJob keeps the quota: no readmission within --timeout. The bound also covers the first
    wait for the Ray cluster, which on a busy machine took more than 5 s: 15 s leaves it room."""
    server = cluster[0]
    namespace, lq, low, high = preemptible
    run = Cli(cluster, "submit", "-n", namespace, "--queue", lq, "--priority-class", low, "--name", "stranded", "--gpus", "8",
              "--timeout", "15", "--", "python", "-c", "import time; print('running', flush=True); time.sleep(300)")  # fmt: skip
    try:
        run.wait_for("running")
        server.create_object(preemptor(namespace, lq, high))
        code = run.finish(timeout=120)
    finally:
        run.kill_if_running()
        head.track(run.stderr)
    assert code == 3, run.stderr
    assert f"evicted: preempted in queue {lq}" in run.stderr
    assert "was not admitted again within 15s after its eviction" in run.stderr
    assert "Traceback" not in run.stderr
    assert f"deleted RayJob {namespace}/stranded" in run.stderr

    def only_the_preemptor_left() -> bool:
        left = leftovers(server, namespace)
        return left.get("RayJob") == ["preemptor"] and not any("stranded" in name for names in left.values() for name in names)

    wait_for(only_the_preemptor_left, timeout=60, what="nothing of the stranded job left")
    server.delete_object(RAY, "RayJob", "preemptor", namespace)
    wait_for(lambda: leftovers(server, namespace) == {}, timeout=60, what="nothing left")


def parse_time(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)


@pytest.mark.realtime  # the bound after the readmission is waited out on KubeRay's own clock
def test_an_eviction_after_raybridge_died_frees_the_new_cluster_within_the_bound_whatever_the_jobs_age(cluster, preemptible, head):
    """raybridge SIGKILLed once the job has run longer than the bound; then Kueue preempts the job and, once
    the preemptor is gone, admits it again. KubeRay v1.6.1 sets a new startTime at the readmission
    (initRayJobStatusIfNeed), so a renewed activeDeadlineSeconds (the job's age at the kill plus the bound)
    would hold the new cluster that long; with the job id cleared the RayJob waits in Waiting and fails at
    preRunningDeadlineSeconds, the bound after its new start, and Kueue frees the quota."""
    server = cluster[0]
    namespace, lq, low, high = preemptible
    bound = 60
    run = Cli(cluster, "-v", "submit", "-n", namespace, "--queue", lq, "--priority-class", low, "--name", "orphaned", "--gpus", "8",
              "--orphan-timeout", str(bound), "--", "python", "-c", "import time; print('running', flush=True); time.sleep(900)")  # fmt: skip
    try:
        run.wait_for("running")
        [first_run] = head.track(run.stderr)

        def job_id_cleared() -> bool:
            return not (server.get_object(RAY, "RayJob", "orphaned", namespace)["spec"]).get("jobId")

        wait_for(job_id_cleared, timeout=60, what="raybridge clearing spec.jobId once KubeRay polls the job")
        first_start = parse_time(server.get_object(RAY, "RayJob", "orphaned", namespace)["status"]["startTime"])
        # Older than the bound, renewed all along: the deadline written is the age plus the bound.
        wait_for(lambda: datetime.now(timezone.utc) - first_start > timedelta(seconds=bound + 5), timeout=bound + 30,
                 interval=1, what="the job older than the bound")  # fmt: skip
    finally:
        run.proc.kill()  # SIGKILL: no clean-up of any kind runs
        run.finish(timeout=30)
    assert "KubeRay operator v1.6.1 (Deployment kuberay-system/kuberay-operator) honours preRunningDeadlineSeconds" in run.stderr
    server.create_object(preemptor(namespace, lq, high))
    wait_for(lambda: condition_true(workload_of(server, namespace, "orphaned"), "Evicted"), timeout=60, what="Kueue to evict the job")
    head.end(first_run)  # the evicted head pod's end
    server.delete_object(RAY, "RayJob", "preemptor", namespace)  # frees the quota: Kueue readmits the job

    def restarted() -> Optional[datetime]:
        status = server.get_object(RAY, "RayJob", "orphaned", namespace).get("status") or {}
        start = status.get("startTime")
        return parse_time(start) if start and parse_time(start) > first_start else None

    new_start = wait_for(restarted, timeout=60, interval=0.5, what="the RayJob admitted again, with a new start")

    def failed() -> Optional[dict[str, Any]]:
        job = server.get_object(RAY, "RayJob", "orphaned", namespace)
        return job if (job.get("status") or {}).get("jobDeploymentStatus") == "Failed" else None

    job = wait_for(failed, timeout=bound + 45, interval=1, what=f"the readmitted RayJob failed within {bound}s of its new start")
    assert job["status"]["reason"] == "PreRunningDeadlineExceeded", job["status"]
    failed_after = datetime.now(timezone.utc) - new_start
    assert failed_after < timedelta(seconds=bound + 45), failed_after
    wait_for(lambda: condition_true(workload_of(server, namespace, "orphaned"), "Finished"), timeout=60, what="Kueue freeing the quota")
    server.delete_object(RAY, "RayJob", "orphaned", namespace)
    wait_for(lambda: leftovers(server, namespace) == {}, timeout=60, what="nothing left")


def deactivate(server, namespace: str, job: str) -> None:
    """`spec.active: false` on the job's Workload, as an admin does (again on a conflict with Kueue's own writes)."""
    for _ in range(20):
        workload = workload_of(server, namespace, job)
        workload["spec"]["active"] = False
        try:
            server.replace_object(workload)
            return
        except Exception as exc:  # 409: Kueue wrote the Workload since it was read
            if getattr(exc, "status", None) != 409:
                raise
    raise AssertionError(f"the Workload of {job} kept changing under the deactivation")


def test_a_workload_deactivated_by_hand_ends_the_run_with_exit_1_not_a_wait_for_readmission(cluster, queue, head):
    """Kueue evicts a deactivated Workload (reason Deactivated) and never readmits it: that is the job's end."""
    server = cluster[0]
    namespace, lq, _ = queue
    run = Cli(cluster, "submit", "-n", namespace, "--queue", lq, "--name", "halted", "--timeout", "60",
              "--", "python", "-c", "import time; print('running', flush=True); time.sleep(300)")  # fmt: skip
    try:
        run.wait_for("running")
        deactivate(server, namespace, "halted")
        code = run.finish(timeout=120)
    finally:
        run.kill_if_running()
        head.track(run.stderr)
    assert code == 1, run.stderr
    assert "its Workload was deactivated by hand (spec.active: false); Kueue will not run it again" in run.stderr
    assert "waiting up to" not in run.stderr and "Traceback" not in run.stderr
    assert f"deleted RayJob {namespace}/halted" in run.stderr
    wait_for(lambda: leftovers(server, namespace) == {}, timeout=60, what="nothing left")


def test_the_run_time_limit_ends_the_run_with_exit_1_not_a_wait_for_readmission(cluster, queue, head, tmp_path: Path):
    """maxRunSeconds runs out: Kueue deactivates the Workload (never requeued; kueue@v0.17.0
    workload_controller.go) and suspends the RayJob. That is the end of the job, not an eviction."""
    server = cluster[0]
    namespace, lq, _ = queue
    spec = tmp_path / "limited.yaml"
    spec.write_text(
        "name: limited\nmaxRunSeconds: 6\n"
        "entrypoint: python -c \"import time; print('running', flush=True); time.sleep(300)\"\n"
    )
    out = run_cli("submit", str(spec), "-n", namespace, "--queue", lq, "--timeout", "60", env=cli_env(KUBECONFIG=cluster[1]), timeout=240)
    head.track(out.stderr)
    assert out.returncode == 1, out.stderr
    assert "the run-time limit was reached (maximumExecutionTimeSeconds=6)" in out.stderr, out.stderr
    assert "waiting up to" not in out.stderr and "Traceback" not in out.stderr
    assert f"deleted RayJob {namespace}/limited" in out.stderr
    wait_for(lambda: leftovers(server, namespace) == {}, timeout=60, what="nothing left")
