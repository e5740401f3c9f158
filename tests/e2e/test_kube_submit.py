"""`submit --backend kubernetes` end to end, on the real cluster (testcluster): kube-apiserver,
the scheduler and controller manager, kwok nodes, the KubeRay operator and Kueue, with the
session's real local Ray head standing for every head pod (reached by port-forward, as on a
real cluster).

Every test checks what a user sees (exit status, output) and that nothing is left
holding quota (no RayJob, RayCluster or Workload remains unless asked for). A fault is injected by the fault proxy
in front of the real API server (testcluster/fault_proxy.py, the `fault_proxy` fixture); an operator slowed
down is the real KubeRay behind a fault proxy of its own (test_operator_settings_real.py).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import EXAMPLES, ROOT, cli_env, run_cli, wait_for_output
from tests.builders import rayjob_manifest
from tests.cluster_state import leftovers
from tests.waits import wait_for

RAY = "ray.io/v1"


@pytest.fixture(scope="module")
def cluster(real_cluster):
    """(client, kubeconfig path, None, None): the shape the simulated cluster once had, without the simulated
    controllers (the real ones run)."""
    client = real_cluster.client()
    try:
        yield client, str(real_cluster.kubeconfig), None, None
    finally:
        client.close()


def kube_cli(cluster, *args, timeout=180):
    return run_cli(*args, env=cli_env(KUBECONFIG=cluster[1]), timeout=timeout)


def test_submit_runs_through_kueue_and_kuberay_and_cleans_up(cluster, queue):
    server = cluster[0]
    namespace, lq, _ = queue
    out = kube_cli(cluster, "submit", str(EXAMPLES / "hello.yaml"), "-n", namespace, "--queue", lq, "--gpus", "8")
    assert out.returncode == 0, out.stderr
    assert "backend: kubernetes (a kubeconfig" in out.stderr
    assert f"created RayJob {namespace}/hello in queue {lq}" in out.stderr
    assert "is ready" in out.stderr and "submitted hello-" in out.stderr
    assert "sum of squares: 285" in out.stdout
    assert "NUM_GPUS=8 NUM_REPLICAS=1" in out.stdout  # the allocation reached the job
    assert f"deleted RayJob {namespace}/hello" in out.stderr
    assert leftovers(server, namespace) == {}


def test_transient_api_errors_while_waiting_are_ridden_out(cluster, queue, fault_proxy):
    namespace, lq, _ = queue
    # Within --timeout the client retries a failed read itself (kube/client.py RetryPolicy): the user sees nothing of it.
    fault = fault_proxy.arm("GET", rf"/apis/ray.io/v1/namespaces/{namespace}/rayjobs/hiccup", code=500, times=2)
    out = run_cli("submit", "-n", namespace, "--queue", lq, "--name", "hiccup", "--", "python", "-c", "print('made it')",
                  env=cli_env(KUBECONFIG=str(fault_proxy.kubeconfig)), timeout=180)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert fault.hits == 2 and "made it" in out.stdout
    assert leftovers(cluster[0], namespace) == {}


def test_failing_job_exits_1_and_cleans_up(cluster, queue):
    namespace, lq, _ = queue
    out = kube_cli(cluster, "submit", "-n", namespace, "--queue", lq, "--name", "fails", "--", "python", "-c", "import sys; print('bad'); sys.exit(4)")
    assert out.returncode == 1, out.stderr
    assert "bad" in out.stdout and "failed" in out.stderr
    assert leftovers(cluster[0], namespace) == {}


def test_not_admitted_within_timeout_exits_3_and_frees_the_queue(cluster, queue):
    server = cluster[0]
    namespace, lq, _ = queue
    # Someone else's RayJob holds the queue's 8 GPUs (InteractiveMode without a job id: it waits, admitted).
    server.create_object(rayjob_manifest("holder", namespace=namespace, queue=lq, workers=1, gpus_per_worker=8))
    wait_for(lambda: (server.get_object(RAY, "RayJob", "holder", namespace) or {}).get("status", {}).get("jobDeploymentStatus") == "Waiting", timeout=60)
    out = kube_cli(cluster, "submit", "-n", namespace, "--queue", lq, "--name", "late", "--gpus", "8", "--timeout", "4", "--", "python", "-c", "1")
    assert out.returncode == 3, out.stderr
    assert "queued in " + lq in out.stderr and "insufficient" in out.stderr
    assert "was not admitted within 4s" in out.stderr
    assert set(leftovers(server, namespace).get("RayJob", [])) == {"holder"}


@pytest.mark.realtime
def test_a_request_that_can_never_be_admitted_is_refused_at_once_with_the_arithmetic(cluster, queue):
    namespace, lq, cq = queue
    started = time.monotonic()
    out = kube_cli(cluster, "submit", "-n", namespace, "--queue", lq, "--name", "too-big", "--replicas", "2", "--gpus-per-replica", "8", "--timeout", "600", "--", "python", "-c", "1")
    assert out.returncode == 2, out.stderr
    assert f"pod set workers asks for 16 nvidia.com/gpu (2 x 8), more than ClusterQueue {cq} can ever hold" in out.stderr
    assert "flavor default-flavor: 8" in out.stderr
    assert time.monotonic() - started < 60
    assert leftovers(cluster[0], namespace) == {}


def test_missing_local_queue_is_refused_listing_the_queues_there(cluster, queue):
    namespace, lq, _ = queue
    out = kube_cli(cluster, "submit", "-n", namespace, "--queue", "no-such-queue", "--name", "orphan", "--timeout", "300", "--", "python", "-c", "1")
    assert out.returncode == 2, out.stderr
    assert f"LocalQueue no-such-queue does not exist in namespace {namespace} (LocalQueues there: {lq})" in out.stderr
    assert leftovers(cluster[0], namespace) == {}


def test_missing_priority_class_and_namespace_are_refused_before_anything_is_created(cluster, queue):
    namespace, lq, _ = queue
    out = kube_cli(cluster, "submit", "-n", namespace, "--queue", lq, "--priority-class", "nope", "--name", "p", "--", "python", "-c", "1")
    assert out.returncode == 2, out.stderr
    assert "WorkloadPriorityClass nope does not exist" in out.stderr
    missing = kube_cli(cluster, "submit", "-n", "no-such-ns", "--queue", lq, "--name", "p", "--", "python", "-c", "1")
    assert missing.returncode == 2, missing.stderr
    assert "namespace no-such-ns does not exist" in missing.stderr and "CRD" not in missing.stderr
    assert leftovers(cluster[0], namespace) == {}


def test_status_explains_a_pending_job_and_ctrl_c_cleans_up(cluster, queue):
    server = cluster[0]
    namespace, lq, cq = queue
    # Hold the queue's whole quota with a first, long-running job.
    first = subprocess.Popen(
        [sys.executable, "-m", "raybridge", "submit", "-n", namespace, "--queue", lq, "--name", "holder", "--gpus", "8", "--", "python", "-c", "import time; print('holding', flush=True); time.sleep(300)"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env(KUBECONFIG=cluster[1]), cwd=str(ROOT),
    )  # fmt: skip
    second = None
    try:
        wait_for_output(first, "holding")
        second = subprocess.Popen(
            [sys.executable, "-m", "raybridge", "submit", "-n", namespace, "--queue", lq, "--name", "waiter", "--gpus", "8", "--", "python", "-c", "1"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env(KUBECONFIG=cluster[1]), cwd=str(ROOT),
        )  # fmt: skip
        deadline = time.monotonic() + 30
        report = None
        while time.monotonic() < deadline:
            status = kube_cli(cluster, "status", "waiter", "-n", namespace, "-o", "json")
            # The Workload is pending as soon as it exists; Kueue writes QuotaReserved=False at its first try to
            # admit it, a moment later on a busy machine: wait for both, as a user reading it again would.
            if status.returncode == 0 and json.loads(status.stdout)["queueState"] == "pending":
                report = json.loads(status.stdout)
                if "QuotaReserved=False" in "\n".join(report["explanation"]):
                    break
            time.sleep(0.5)
        assert report is not None, "the second job never showed as pending"
        text = "\n".join(report["explanation"])
        assert f"LocalQueue {lq} -> ClusterQueue {cq}" in text
        assert "QuotaReserved=False" in text
        assert f"why, per pod set and flavor against the quota: raybridge explain waiter -n {namespace}" in text
        explained = kube_cli(cluster, "explain", "waiter", "-n", namespace)
        assert "nvidia.com/gpu: 8 of 8 quota (8 in use)" in explained.stdout, explained.stdout
        table = kube_cli(cluster, "status", "waiter", "-n", namespace)
        assert "QuotaReserved=False" in table.stdout
        listed = json.loads(kube_cli(cluster, "list", "-n", namespace, "-o", "json").stdout)
        assert {r["name"] for r in listed} == {"holder", "waiter"}
        second.send_signal(signal.SIGINT)
        assert second.wait(timeout=30) == 130
        assert server.get_object(RAY, "RayJob", "waiter", namespace) is None
        first.send_signal(signal.SIGINT)
        assert first.wait(timeout=60) == 130
        assert "interrupted: stopping the job" in first.stderr.read()
    finally:
        for proc in (first, second):
            if proc is not None:
                proc.kill()
    assert leftovers(server, namespace) == {}


def test_stop_of_a_queued_job_says_it_has_not_started_and_how_to_take_it_out(cluster, queue):
    """A queued RayJob (suspended by Kueue, its job id set as raybridge sets it) has no Ray cluster: `stop` says it is
    queued and how to remove it (exit 2), not that its cluster ended and took its logs (exit 3)."""
    server = cluster[0]
    namespace, lq, _ = queue
    server.create_object(rayjob_manifest("holder", namespace=namespace, queue=lq, workers=1, gpus_per_worker=8))
    server.create_object(rayjob_manifest("queued", namespace=namespace, queue=lq, workers=1, gpus_per_worker=8, jobId="queued-1234"))
    wait_for(lambda: (server.get_object(RAY, "RayJob", "queued", namespace) or {}).get("status", {}).get("jobDeploymentStatus") == "Suspended", timeout=60)
    stopped = kube_cli(cluster, "stop", "queued", "-n", namespace)
    assert stopped.returncode == 2, stopped.stderr
    assert (
        "error: RayJob queued is queued (state: Suspended): its Ray job queued-1234 is not running, so there is nothing to reach "
        "yet; `raybridge status queued` says where it stands, `raybridge delete queued` takes it out of the queue"
    ) in stopped.stderr, stopped.stderr
    assert "logs went with it" not in stopped.stderr
    for name in ("queued", "holder"):
        assert kube_cli(cluster, "delete", name, "-n", namespace).returncode == 0
    assert leftovers(server, namespace) == {}


def test_dashboard_through_port_forward(cluster, queue):
    """KubeRay's dashboardURL is the in-cluster service name (unreachable from here): raybridge port-forwards
    to the head pod through the API server, and kwok's kubelet sends the stream to the Ray head."""
    namespace, lq, _ = queue
    out = kube_cli(cluster, "submit", "-n", namespace, "--queue", lq, "--name", "pf", "--", "python", "-c", "print('through the tunnel')")
    assert out.returncode == 0, out.stderr
    assert "port-forwarding 127.0.0.1:" in out.stderr
    assert "through the tunnel" in out.stdout
    assert leftovers(cluster[0], namespace) == {}


def test_failure_after_admission_deletes_everything(cluster, queue):
    """The dashboard cannot be reached: exit 3, and the admitted RayJob does not keep the quota."""
    server = cluster[0]
    namespace, lq, _ = queue
    out = kube_cli(cluster, "submit", "-n", namespace, "--queue", lq, "--name", "unreachable", "--dashboard-address", "127.0.0.1:9", "--", "python", "-c", "1")
    assert out.returncode == 3, out.stderr
    assert "cannot reach the Ray Job API" in out.stderr and "Traceback" not in out.stderr
    assert "deleted RayJob" in out.stderr
    assert leftovers(server, namespace) == {}


def test_existing_name_is_bad_input_and_the_existing_job_is_untouched(cluster, queue):
    server = cluster[0]
    namespace, lq, _ = queue
    keep = kube_cli(cluster, "submit", "-n", namespace, "--queue", lq, "--name", "taken", "--no-wait", "--", "python", "-c", "print('first')")
    assert keep.returncode == 0, keep.stderr
    again = kube_cli(cluster, "submit", "-n", namespace, "--queue", lq, "--name", "taken", "--", "python", "-c", "1")
    assert again.returncode == 2
    assert "already exists" in again.stderr
    assert server.get_object(RAY, "RayJob", "taken", namespace) is not None
    deleted = kube_cli(cluster, "delete", "taken", "-n", namespace)
    assert deleted.returncode == 0, deleted.stderr
    assert leftovers(server, namespace) == {}


def test_no_wait_then_logs_follow_then_delete(cluster, queue, submitters):
    """`logs -f` right after `submit --no-wait` waits for the queued job to start, then follows it."""
    namespace, lq, _ = queue
    submitters(cluster[0], namespace)
    out = kube_cli(cluster, "submit", "-n", namespace, "--queue", lq, "--name", "later", "--no-wait", "--keep", "-o", "json", "--", "python", "-c", "import time; time.sleep(2); print('done later')")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["status"] == "SUBMITTED"
    logs = kube_cli(cluster, "logs", "later", "-n", namespace, "--follow")
    assert logs.returncode == 0, logs.stderr
    assert "done later" in logs.stdout
    assert kube_cli(cluster, "delete", "later", "-n", namespace).returncode == 0
    assert leftovers(cluster[0], namespace) == {}


def test_raycluster_kind_is_created_and_explained(cluster, queue):
    server = cluster[0]
    namespace, lq, _ = queue
    out = kube_cli(cluster, "submit", "-n", namespace, "--queue", lq, "--name", "interactive", "--kind", "RayCluster", "--gpus", "8")
    assert out.returncode == 0, out.stderr
    assert "port-forward svc/interactive-head-svc 8265:8265" in out.stdout
    assert server.get_object(RAY, "RayCluster", "interactive", namespace) is not None
    status = kube_cli(cluster, "status", "interactive", "-n", namespace)
    assert "RayCluster" in status.stdout and "admitted" in status.stdout
    assert kube_cli(cluster, "delete", "interactive", "-n", namespace).returncode == 0
    assert leftovers(server, namespace) == {}


def test_status_of_unknown_name_is_bad_input(cluster, queue):
    out = kube_cli(cluster, "status", "nope", "-n", queue[0])
    assert out.returncode == 2 and "no RayJob or RayCluster named 'nope'" in out.stderr


def test_dry_run_creates_nothing(cluster, queue):
    namespace, lq, _ = queue
    out = kube_cli(cluster, "submit", str(EXAMPLES / "hello.yaml"), "-n", namespace, "--queue", lq, "--gpus", "4", "--dry-run", "-o", "json")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["backend"] == "kubernetes" and result["objects"][0]["kind"] == "RayJob"
    assert result["plan"]["gpusPerReplica"] == 4
    assert leftovers(cluster[0], namespace) == {}


def test_stop_a_running_job(cluster, queue, submitters):
    server = cluster[0]
    namespace, lq, _ = queue
    submitters(server, namespace)
    out = kube_cli(cluster, "submit", "-n", namespace, "--queue", lq, "--name", "long", "--no-wait", "--", "python", "-c", "import time; time.sleep(300)")
    assert out.returncode == 0, out.stderr
    wait_for(lambda: (server.get_object(RAY, "RayJob", "long", namespace) or {}).get("status", {}).get("jobStatus") == "RUNNING",
             timeout=120, what="the queued job to run")  # fmt: skip
    stopped = kube_cli(cluster, "stop", "long", "-n", namespace)
    assert stopped.returncode == 0, stopped.stderr
    assert "Ray job long-" in stopped.stderr
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        rayjob = server.get_object(RAY, "RayJob", "long", namespace) or {}
        if (rayjob.get("status") or {}).get("jobStatus") == "STOPPED":
            break
        time.sleep(0.5)
    assert (rayjob.get("status") or {}).get("jobStatus") == "STOPPED"
    assert kube_cli(cluster, "delete", "long", "-n", namespace).returncode == 0
    assert leftovers(server, namespace) == {}


def test_a_real_submit_on_amd_nodes_warns_of_the_unpinned_default_image_once(cluster, queue):
    """As the dry run and render do: the AMD default image is a moving ROCm tag, said once, before the checks
    (here the queue, which covers no AMD GPUs, refuses the job: nothing is created)."""
    namespace, lq, _ = queue
    nodes = str(EXAMPLES / "cluster" / "nodes.json")
    out = kube_cli(cluster, "submit", "-n", namespace, "--queue", lq, "--name", "amd", "--gpus", "8", "--gpu-vendor", "amd",
                   "--nodes", nodes, "--timeout", "3", "--", "python", "-c", "1")  # fmt: skip
    warning = "warning: image rocm/ray:latest is the AMD default: Ray publishes no ROCm image"
    assert out.returncode == 2 and "does not cover amd.com/gpu" in out.stderr, out.stderr
    assert out.stderr.count(warning) == 1, out.stderr
    pinned = kube_cli(cluster, "submit", "-n", namespace, "--queue", lq, "--name", "amd-pinned", "--gpus", "8", "--gpu-vendor", "amd",
                      "--nodes", nodes, "--image", "rocm/ray:6.3", "--timeout", "3", "--", "python", "-c", "1")  # fmt: skip
    assert warning not in pinned.stderr, pinned.stderr
    assert leftovers(cluster[0], namespace) == {}


def test_dashboard_forwards_a_jobs_dashboard_for_the_plain_ray_cli(cluster, queue, submitters):
    """`dashboard NAME` forwards the job's Ray dashboard to 127.0.0.1 and prints how the plain Ray CLI reaches it: the
    real `ray job status` and `ray job logs` work there; Ctrl-C ends it with exit 0. `status` points to it rather than
    printing only the head Service's in-cluster name; a queued job has no dashboard yet (exit 2, saying so)."""
    import re
    import socket

    server = cluster[0]
    namespace, lq, _ = queue
    submitters(server, namespace)
    out = kube_cli(cluster, "submit", "-n", namespace, "--queue", lq, "--name", "shown", "--no-wait", "--",
                   "python", "-c", "import time; print('on the dashboard', flush=True); time.sleep(300)")  # fmt: skip
    assert out.returncode == 0, out.stderr
    job_id = wait_for(lambda: (lambda r: (r.get("status") or {}).get("jobStatus") == "RUNNING" and r["spec"]["jobId"])(
        server.get_object(RAY, "RayJob", "shown", namespace) or {"spec": {}}), timeout=120, what="the job to run")  # fmt: skip
    status = kube_cli(cluster, "status", "shown", "-n", namespace)
    assert f"(in the cluster; from here: raybridge dashboard shown -n {namespace})" in status.stdout, status.stdout
    forward = subprocess.Popen([sys.executable, "-m", "raybridge", "dashboard", "shown", "-n", namespace, "--port", "0"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env(KUBECONFIG=cluster[1]), cwd=str(ROOT))  # fmt: skip
    try:
        first = forward.stdout.readline()
        url = re.match(r"dashboard: (http://127\.0\.0\.1:\d+)$", first.strip())
        assert url, first + forward.stderr.read() if forward.poll() is not None else first
        shown = [forward.stdout.readline().strip() for _ in range(4)]
        assert shown[0] == f"ray job status --address {url.group(1)} {job_id}", shown
        ray = str(Path(sys.executable).with_name("ray"))
        env = {k: v for k, v in cli_env().items() if not k.startswith("RAY_")}
        asked = subprocess.run([ray, "job", "status", "--address", url.group(1), job_id], capture_output=True, text=True, timeout=120, env=env)
        assert asked.returncode == 0 and "RUNNING" in asked.stdout + asked.stderr, asked.stdout + asked.stderr
        logs = subprocess.run([ray, "job", "logs", "--address", url.group(1), job_id], capture_output=True, text=True, timeout=120, env=env)
        assert "on the dashboard" in logs.stdout, logs.stdout + logs.stderr
        forward.send_signal(signal.SIGINT)
        assert forward.wait(timeout=30) == 0
        assert "forward ended" in forward.stderr.read()
        port = int(url.group(1).rsplit(":", 1)[1])
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
    finally:
        forward.kill()
    assert kube_cli(cluster, "stop", "shown", "-n", namespace).returncode == 0
    assert kube_cli(cluster, "delete", "shown", "-n", namespace).returncode == 0
    server.create_object(rayjob_manifest("full", namespace=namespace, queue=lq, workers=1, gpus_per_worker=8))
    server.create_object(rayjob_manifest("waits", namespace=namespace, queue=lq, workers=1, gpus_per_worker=8, jobId="waits-1"))
    wait_for(lambda: (server.get_object(RAY, "RayJob", "waits", namespace) or {}).get("status", {}).get("jobDeploymentStatus") == "Suspended", timeout=60)
    queued = kube_cli(cluster, "dashboard", "waits", "-n", namespace)
    assert queued.returncode == 2 and "RayJob waits is queued (state: Suspended)" in queued.stderr, queued.stderr
    for name in ("waits", "full"):
        assert kube_cli(cluster, "delete", name, "-n", namespace).returncode == 0
    assert leftovers(server, namespace) == {}


def test_a_plain_submit_leaves_the_orphan_bound_to_the_docs_and_v_says_it(cluster, queue):
    """Issue 40, point 8: the two orphan-protection paragraphs every submit printed (the bound, and the bound after
    an eviction on this operator) are the same each time: docs/lifecycle.md says them, `-v` prints them."""
    namespace, lq, _ = queue
    plain = kube_cli(cluster, "submit", "-n", namespace, "--queue", lq, "--name", "quiet", "--", "python", "-c", "print('ran')")
    assert plain.returncode == 0, plain.stderr
    assert "orphan protection" not in plain.stderr, plain.stderr
    told = kube_cli(cluster, "-v", "submit", "-n", namespace, "--queue", lq, "--name", "told", "--", "python", "-c", "print('ran')")
    assert told.returncode == 0, told.stderr
    assert "orphan protection: if raybridge stops renewing it, the RayJob fails within 30m" in told.stderr
    assert "orphan protection after an eviction: KubeRay operator v1.6.1" in told.stderr
    assert leftovers(cluster[0], namespace) == {}


def _multikueue_queue(server: Any, namespace: str, local_queue: str) -> tuple[str, str]:
    """A LocalQueue `local_queue` on a ClusterQueue of 8 GPUs whose MultiKueue AdmissionCheck names a MultiKueueConfig
    that does not exist (one real cluster: no worker to name): (the check's name, the ClusterQueue's name)."""
    import uuid

    suffix = uuid.uuid4().hex[:6]
    check, cq, kueue = f"mk-{suffix}", f"cq-mk-{suffix}", "kueue.x-k8s.io/v1beta2"
    server.create_object({"apiVersion": kueue, "kind": "AdmissionCheck", "metadata": {"name": check},
                          "spec": {"controllerName": "kueue.x-k8s.io/multikueue",
                                   "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": check}}})  # fmt: skip
    server.create_object({"apiVersion": kueue, "kind": "ClusterQueue", "metadata": {"name": cq}, "spec": {
        "namespaceSelector": {}, "admissionChecksStrategy": {"admissionChecks": [{"name": check}]},
        "resourceGroups": [{"coveredResources": ["cpu", "memory", "nvidia.com/gpu"], "flavors": [{"name": "default-flavor", "resources": [
            {"name": "cpu", "nominalQuota": "64"}, {"name": "memory", "nominalQuota": "512Gi"}, {"name": "nvidia.com/gpu", "nominalQuota": "8"}]}]}]}})  # fmt: skip
    server.create_object({"apiVersion": kueue, "kind": "LocalQueue", "metadata": {"name": local_queue, "namespace": namespace}, "spec": {"clusterQueue": cq}})
    return check, cq


def test_a_queue_that_sends_jobs_to_worker_clusters_is_refused_before_anything_exists(cluster, queue):
    """Issue 40, point 7: a ClusterQueue with a MultiKueue AdmissionCheck runs its jobs in a worker cluster, where
    raybridge could neither reach the Ray dashboard nor renew the bound: a followed submit is refused (exit 2) naming
    MultiKueue and the way out (--no-wait), before anything is created. The check's MultiKueueConfig names no
    reachable worker here (one real cluster), which only makes Kueue hold the queue inactive."""
    server = cluster[0]
    namespace, _, _ = queue
    check, cq = _multikueue_queue(server, namespace, "remote")
    out = kube_cli(cluster, "submit", "-n", namespace, "--queue", "remote", "--name", "far", "--", "python", "-c", "1")
    assert out.returncode == 2, out.stderr
    assert (f"error: LocalQueue remote -> ClusterQueue {cq} sends its jobs to worker clusters (MultiKueue admission check "
            f"{check}): Kueue runs the RayJob in a worker cluster, whose Ray dashboard raybridge cannot reach") in out.stderr, out.stderr
    assert "queue it with --no-wait" in out.stderr
    assert leftovers(server, namespace) == {}


def test_no_wait_on_a_queue_whose_worker_clusters_are_unreachable_is_refused_before_anything_exists(cluster, queue):
    """Issue 40, point 7, the way out: `--no-wait` hands a job to Kueue, which copies it to a worker cluster
    (MultiKueue). Where the queue's MultiKueue AdmissionCheck is inactive (its MultiKueueConfig names no reachable
    worker: one real cluster here), Kueue admits nothing from the queue, and `--no-wait` is refused before anything
    exists, naming the inactive check, rather than queued for ever."""
    server = cluster[0]
    namespace, _, _ = queue
    check, cq = _multikueue_queue(server, namespace, "far-away")
    wait_for(lambda: "AdmissionCheckInactive" in str((server.get_object("kueue.x-k8s.io/v1beta2", "ClusterQueue", cq) or {}).get("status")),
             timeout=30, what="Kueue to hold the queue inactive")  # fmt: skip
    out = kube_cli(cluster, "submit", "--no-wait", "-n", namespace, "--queue", "far-away", "--name", "far", "--", "python", "-c", "print(1)")
    assert out.returncode == 2, out.stderr
    assert f"error: ClusterQueue {cq} (behind LocalQueue far-away) is not active: AdmissionCheckInactive" in out.stderr, out.stderr
    assert check in out.stderr and "Traceback" not in out.stderr
    assert leftovers(server, namespace) == {}


def test_queue_job_from_python_does_what_no_wait_does(cluster, queue):
    """`raybridge.queue_job`: the RayJob created to run by itself (K8sJobMode), returned at once."""
    import raybridge

    server = cluster[0]
    namespace, lq, _ = queue
    queued = raybridge.queue_job(str(EXAMPLES / "hello.yaml"), overrides={"queue": lq, "name": "from-python"}, kubeconfig=cluster[1],
                                 namespace=namespace, progress=lambda _: None)  # fmt: skip
    assert (queued.name, queued.namespace, queued.queue) == ("from-python", namespace, lq)
    stored = server.get_object(RAY, "RayJob", "from-python", namespace)
    assert stored["spec"]["submissionMode"] == "K8sJobMode" and stored["spec"]["jobId"] == queued.submission_id
    assert server.get_object("v1", "ConfigMap", "from-python-working-dir", namespace) is not None
    assert kube_cli(cluster, "delete", "from-python", "-n", namespace).returncode == 0
    wait_for(lambda: leftovers(server, namespace) == {}, timeout=30, what="nothing left")
