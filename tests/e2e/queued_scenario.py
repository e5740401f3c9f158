"""A job queued with `submit --no-wait` and left alone: queued, admitted, preempted, readmitted, run to the end.

What a user who queues a job and walks away relies on, played on a real cluster of one release (test_release_matrix.py
runs it on each): the command returns within 2 s of creating the RayJob while the queue is full; nobody being
there, the job runs once Kueue admits it, with the working dir it was submitted with (here `main.py`, which only
that working dir holds); a higher-priority job preempts it; once readmitted it runs again, to the end; and `logs`,
`delete` leave nothing behind. KubeRay's submitter pods are played by tests/e2e/submitter_stand_in.py (kwok runs
no container); the preempted run, which the shared Ray head outlives, is ended as the head pod's end would end it
(tests/e2e/shared_head.py).

What it deliberately does not do: choose whom Kueue preempts (one job, one higher-priority RayJob, 8 GPUs).
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from tests.builders import rayjob_manifest
from tests.cluster_state import leftovers
from tests.waits import wait_for
from tests.e2e.shared_head import HeadJobs
from tests.e2e.submitter_stand_in import SubmitterStandIn
from tests.helpers import ROOT, cli_env, run_cli

RAY = "ray.io/v1"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"

MAIN_PY = '''import os, pathlib, time, uuid
runs = pathlib.Path(%r)
first = not runs.exists()
with runs.open("a") as record:
    record.write(os.readlink("/proc/self/fd/1") + chr(10))
print("attempt", uuid.uuid4().hex[:6], "in", os.path.basename(os.getcwd()) or "/", flush=True)
time.sleep(300 if first else 1)
print("finished: main.py came with the working dir", flush=True)
'''


def preemptible_queue(server: Any, kueue_api: str) -> tuple[str, str, str, str]:
    """A fresh namespace, LocalQueue -> ClusterQueue of 8 GPUs that preempts lower priorities, and two
    WorkloadPriorityClasses: (namespace, LocalQueue, low, high)."""
    suffix = uuid.uuid4().hex[:6]
    namespace, lq, cq, low, high = f"team-{suffix}", f"lq-{suffix}", f"cq-{suffix}", f"low-{suffix}", f"high-{suffix}"
    server.create_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    flavor = f"flavor-{suffix}"
    server.create_object({"apiVersion": kueue_api, "kind": "ResourceFlavor", "metadata": {"name": flavor}})
    quota = [("cpu", "64"), ("memory", "512Gi"), ("nvidia.com/gpu", "8")]
    server.create_object({
        "apiVersion": kueue_api, "kind": "ClusterQueue", "metadata": {"name": cq},
        "spec": {"namespaceSelector": {}, "preemption": {"withinClusterQueue": "LowerPriority"},
                 "resourceGroups": [{"coveredResources": [n for n, _ in quota],
                                     "flavors": [{"name": flavor, "resources": [{"name": n, "nominalQuota": q} for n, q in quota]}]}]},
    })  # fmt: skip
    server.create_object({"apiVersion": kueue_api, "kind": "LocalQueue", "metadata": {"name": lq, "namespace": namespace}, "spec": {"clusterQueue": cq}})
    for name, value in ((low, 10), (high, 1000)):
        server.create_object({"apiVersion": kueue_api, "kind": "WorkloadPriorityClass", "metadata": {"name": name}, "value": value})
    return namespace, lq, low, high


def _workload(server: Any, kueue_api: str, namespace: str, job: str) -> dict[str, Any]:
    found = [w for w in server.list_objects(kueue_api, "Workload", namespace) if w["metadata"]["name"].startswith(f"rayjob-{job}-")]
    return found[0] if len(found) == 1 else {}


def _condition(obj: dict[str, Any], kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True" for c in (obj.get("status") or {}).get("conditions") or [])


def submit_no_wait(kubeconfig: str, *args: str) -> tuple[int, str, str, float]:
    """`submit --no-wait ARGS` as a process of its own: (exit status, stdout, stderr, seconds from the line saying the
    RayJob was created to the process's exit)."""
    proc = subprocess.Popen([sys.executable, "-m", "raybridge", "submit", "--no-wait", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=cli_env(KUBECONFIG=kubeconfig), cwd=str(ROOT))  # fmt: skip
    assert proc.stderr is not None and proc.stdout is not None
    lines: list[str] = []
    created_at: list[float] = []

    def read_stderr() -> None:
        for line in proc.stderr:  # type: ignore[union-attr]
            lines.append(line)
            if not created_at and line.startswith("created RayJob "):
                created_at.append(time.monotonic())

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    try:
        code = proc.wait(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()  # a submit that waits for the queue: what --no-wait must not do
        proc.wait(10)
        code = -9
    ended = time.monotonic()
    reader.join(10)
    return code, proc.stdout.read(), "".join(lines), (ended - created_at[0]) if created_at else float("inf")


def run_queued_job_through_a_preemption(server: Any, kubeconfig: str, kueue_api: str, head: HeadJobs, dashboard_url: str, tmp_path: Path) -> None:
    namespace, lq, low, high = preemptible_queue(server, kueue_api)
    holder = rayjob_manifest("holder", namespace=namespace, queue=lq, workers=1, gpus_per_worker=8)
    holder["metadata"]["labels"][PRIORITY_LABEL] = high
    server.create_object(holder)  # someone else's job holds the queue's 8 GPUs
    wait_for(lambda: _condition(_workload(server, kueue_api, namespace, "holder"), "Admitted"), timeout=60, what="the holder admitted")
    workdir = tmp_path / "project"
    workdir.mkdir()
    runs = tmp_path / "runs"
    (workdir / "main.py").write_text(MAIN_PY % str(runs))
    with SubmitterStandIn(server, dashboard_url, {namespace}) as submitters:
        code, _, stderr, returned_in = submit_no_wait(
            kubeconfig, "-n", namespace, "--queue", lq, "--priority-class", low, "--name", "queued", "--gpus", "8",
            "--working-dir", str(workdir), "--", "python", "main.py",
        )  # fmt: skip
        # It returned by itself (a submit that waited for the queue would be killed at 120 s: code -9) while the holder
        # keeps the job from being admitted. How soon is measured, not asserted (a loaded machine is slower): printed.
        assert code == 0, stderr
        print(f"submit --no-wait returned {returned_in:.2f} s after creating the RayJob")
        assert f"created RayJob {namespace}/queued in queue {lq}: it runs by itself once Kueue admits it" in stderr, stderr
        assert f"zipped into ConfigMap {namespace}/queued-working-dir" in stderr, stderr
        rayjob = server.get_object(RAY, "RayJob", "queued", namespace)
        assert rayjob["spec"]["submissionMode"] == "K8sJobMode", rayjob["spec"]
        submission_id = rayjob["spec"]["jobId"]
        head.seen.add(submission_id)
        # Queued behind the holder: nothing runs, nothing holds quota for it.
        wait_for(lambda: (_workload(server, kueue_api, namespace, "queued").get("status") or {}).get("conditions"), timeout=30, what="a Workload")
        time.sleep(2)
        assert not _condition(_workload(server, kueue_api, namespace, "queued"), "QuotaReserved")
        assert head.status(submission_id) is None
        status = run_cli("status", "queued", "-n", namespace, env=cli_env(KUBECONFIG=kubeconfig))
        assert status.returncode == 0 and "pending" in status.stdout.lower(), status.stdout + status.stderr
        # The holder goes; nobody is watching the queued job: it is admitted and runs.
        server.delete_object(RAY, "RayJob", "holder", namespace)
        wait_for(lambda: runs.exists(), timeout=180, what=f"the queued job to run (submitters: {submitters.log_text()[-2000:]})")
        first_cluster = server.get_object(RAY, "RayJob", "queued", namespace)["status"]["rayClusterName"]
        # A higher-priority job preempts it: KubeRay deletes its cluster and its submitter; its run ends with the head pod.
        preemptor = rayjob_manifest("preemptor", namespace=namespace, queue=lq, workers=1, gpus_per_worker=8)
        preemptor["metadata"]["labels"][PRIORITY_LABEL] = high
        server.create_object(preemptor)
        wait_for(lambda: _condition(_workload(server, kueue_api, namespace, "queued"), "Evicted")
                 or not _condition(_workload(server, kueue_api, namespace, "queued"), "Admitted"), timeout=60, what="Kueue to preempt it")  # fmt: skip
        wait_for(lambda: server.get_object(RAY, "RayCluster", first_cluster, namespace) is None, timeout=90, what="the preempted cluster deleted")
        head.end(submission_id, log=Path(runs.read_text().splitlines()[0]))
        server.delete_object(RAY, "RayJob", "preemptor", namespace)  # Kueue readmits it; still nobody watching
        done = wait_for(lambda: (lambda s: s if s.get("jobDeploymentStatus") in ("Complete", "Failed") else None)(
            (server.get_object(RAY, "RayJob", "queued", namespace) or {}).get("status") or {}), timeout=240,
            what=f"the readmitted job to end (submitters: {submitters.log_text()[-2000:]})")  # fmt: skip
    assert (done["jobDeploymentStatus"], done.get("jobStatus")) == ("Complete", "SUCCEEDED"), done
    assert done["rayClusterName"] != first_cluster
    assert len(runs.read_text().splitlines()) == 2, runs.read_text()  # it ran again after the readmission
    assert [code for _, code in submitters.finished][-1:] == [0], submitters.finished
    logs = run_cli("logs", "queued", "-n", namespace, env=cli_env(KUBECONFIG=kubeconfig))
    assert logs.returncode == 0 and "finished: main.py came with the working dir" in logs.stdout, logs.stdout + logs.stderr
    deleted = run_cli("delete", "queued", "-n", namespace, env=cli_env(KUBECONFIG=kubeconfig))
    assert deleted.returncode == 0, deleted.stderr
    wait_for(lambda: leftovers(server, namespace, kueue_api) == {} and server.get_object("v1", "ConfigMap", "queued-working-dir", namespace) is None,
             timeout=60, what="nothing left, the working dir's ConfigMap included")  # fmt: skip
