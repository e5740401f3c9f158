"""`submit --backend kubernetes` when Kueue evicts the running job, and against a token-protected Ray cluster.

Why this module exists: on a real cluster an evicted RayJob's Ray cluster is
deleted and, after readmission, a new one is built that has never heard of the
job. The simulated KubeRay gives every RayCluster its own Ray jobs (its own
dashboard in front of the one real Ray head), so these tests see what a user
on a real cluster sees: raybridge must notice the eviction, say who preempted
it, wait for readmission within --timeout and submit the entrypoint again, or
give up and delete what it created. The token tests check that every Job API
call carries the token KubeRay put in the cluster's Secret, and that the
simulated dashboard refuses calls without it.

What it deliberately does not do: test Kueue's choice of whom to preempt
(`FakeKueue.evict` stands in for it) or the submit paths without an eviction
(tests/e2e/test_kube_submit.py).
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlparse

import pytest

from tests.helpers import ROOT, cli_env, run_cli
from kubesim.fixtures import fresh_queue, leftovers, simulated_cluster, wait_for

RAY, KUEUE = "ray.io/v1", "kueue.x-k8s.io/v1beta2"


@pytest.fixture(scope="module")
def cluster(ray_head, tmp_path_factory):
    with simulated_cluster(urlparse(ray_head.dashboard_url).netloc, tmp_path_factory.mktemp("kube") / "config") as parts:
        yield parts


@pytest.fixture
def queue(cluster):
    """A fresh LocalQueue -> ClusterQueue with 8 GPUs, in a fresh namespace."""
    return fresh_queue(cluster[0])


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

    def finish(self, timeout: float = 180) -> int:
        try:
            code = self.proc.wait(timeout=timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
        for reader in self._readers:
            reader.join(timeout=5)
        return code


def workload_of(server, namespace):
    workloads = server.list_objects(KUEUE, "Workload", namespace)
    assert len(workloads) == 1, workloads
    return workloads[0]["metadata"]["name"]


ATTEMPT = (
    "import time, uuid; print('attempt', uuid.uuid4().hex[:6], flush=True); "
    "time.sleep(6); print('finished', flush=True)"
)


@pytest.mark.parametrize(
    "readmitted_at_once",
    [False, True],
    ids=["readmitted-after-the-report", "readmitted-before-raybridge-looks"],
)
def test_an_evicted_job_is_reported_and_runs_again_on_the_new_cluster(cluster, queue, readmitted_at_once):
    server, _, kueue, _ = cluster
    namespace, lq, _ = queue
    run = Cli(cluster, "submit", "-n", namespace, "--queue", lq, "--name", "evicted", "--gpus", "8", "--timeout", "120",
              "--", "python", "-c", ATTEMPT)  # fmt: skip
    try:
        run.wait_for("attempt")
        first_cluster = server.get_object(RAY, "RayJob", "evicted", namespace)["status"]["rayClusterName"]
        kueue.evict(namespace, workload_of(server, namespace), requeue=readmitted_at_once)
        if not readmitted_at_once:
            # "(ClusterQueue ...)" follows while the Workload still shows its admission, depending on timing.
            run.wait_for(f"evicted: preempted in queue {lq}", where="stderr", timeout=60)
            wait_for(lambda: server.get_object(RAY, "RayCluster", first_cluster, namespace) is None, timeout=30,
                     what="the evicted cluster deleted")  # fmt: skip
            kueue.requeue(namespace, workload_of(server, namespace))
        code = run.finish()
    finally:
        if run.proc.poll() is None:
            run.proc.kill()
    assert code == 0, run.stderr
    assert "Preempted to accommodate a higher priority Workload" in run.stderr
    assert f"Ray cluster {first_cluster} is gone" in run.stderr
    attempts = [line for line in run.stdout.splitlines() if line.startswith("attempt ")]
    assert len(attempts) == 2 and attempts[0] != attempts[1], run.stdout  # two runs, on two clusters
    assert run.stdout.rstrip().endswith("finished"), run.stdout
    assert run.stderr.count("submitted evicted-") == 2, run.stderr
    assert "lost the Ray dashboard" not in run.stderr and "Traceback" not in run.stderr
    assert f"deleted RayJob {namespace}/evicted" in run.stderr
    assert leftovers(server, namespace) == {}


def test_an_evicted_job_that_is_never_readmitted_exits_3_and_deletes_everything(cluster, queue):
    server, _, kueue, _ = cluster
    namespace, lq, _ = queue
    run = Cli(cluster, "submit", "-n", namespace, "--queue", lq, "--name", "stranded", "--timeout", "5",
              "--", "python", "-c", "import time; print('running', flush=True); time.sleep(300)")  # fmt: skip
    try:
        run.wait_for("running")
        kueue.evict(namespace, workload_of(server, namespace))  # held: never requeued
        code = run.finish(timeout=120)
    finally:
        if run.proc.poll() is None:
            run.proc.kill()
    assert code == 3, run.stderr
    assert "evicted: preempted in queue" in run.stderr
    assert "was not admitted again within 5s after its eviction" in run.stderr
    assert "Traceback" not in run.stderr
    wait_for(lambda: leftovers(server, namespace) == {}, timeout=30, what="nothing left")


def _call(address: str, path: str, token: str | None) -> int:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    url = address if "://" in address else f"http://{address}"
    try:
        with urllib.request.urlopen(urllib.request.Request(url + path, headers=headers), timeout=5) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


LONG_NAME = "locked-" + "x" * 39  # 46 characters: its cluster (+6) is 52, and KubeRay keeps the last 50 for the Secret


@pytest.mark.parametrize("name", ["locked", LONG_NAME], ids=["short-name", "46-character-name"])
def test_token_auth_submit_status_logs_and_stop(cluster, queue, tmp_path: Path, name: str):
    server = cluster[0]
    namespace, lq, _ = queue
    spec = tmp_path / "locked.yaml"
    spec.write_text(
        f"name: {name}\nauthMode: token\n"
        "entrypoint: python -c \"import time; print('behind the token', flush=True); time.sleep(300)\"\n"
    )
    env = cli_env(KUBECONFIG=cluster[1])
    out = run_cli("submit", str(spec), "-n", namespace, "--queue", lq, "--no-wait", env=env, timeout=180)
    assert out.returncode == 0, out.stderr

    status = server.get_object(RAY, "RayJob", name, namespace)["status"]
    cluster_name = status["rayClusterName"]
    # kuberay@v1.5.2 utils.CheckName: the Secret keeps the last 50 characters of the cluster's name.
    secret = server.get_object("v1", "Secret", cluster_name[-50:], namespace)
    assert (len(cluster_name) > 50) == (name == LONG_NAME)
    token = base64.b64decode(secret["data"]["auth_token"]).decode()
    address = status["dashboardURL"]
    assert [_call(address, "/api/version", t) for t in (None, "wrong", token)] == [401, 403, 200]
    job_id = status["jobId"]
    assert _call(address, f"/api/jobs/{job_id}", None) == 401

    shown = run_cli("status", name, "-n", namespace, "-o", "json", env=env, timeout=60)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["jobStatus"] in ("PENDING", "RUNNING")
    wait_for(lambda: "behind the token" in run_cli("logs", name, "-n", namespace, env=env, timeout=60).stdout,
             timeout=60, what="the log through the token")  # fmt: skip
    stopped = run_cli("stop", name, "-n", namespace, env=env, timeout=60)
    assert stopped.returncode == 0, stopped.stderr
    wait_for(lambda: (server.get_object(RAY, "RayJob", name, namespace) or {}).get("status", {}).get("jobStatus")
             == "STOPPED", timeout=60, what="STOPPED")  # fmt: skip
    assert run_cli("delete", name, "-n", namespace, env=env, timeout=60).returncode == 0
    wait_for(lambda: leftovers(server, namespace) == {}, timeout=30, what="nothing left")



def test_the_run_time_limit_ends_the_run_with_exit_1_not_a_wait_for_readmission(cluster, queue, tmp_path: Path):
    """maxRunSeconds runs out: Kueue deactivates the Workload (never requeued; kueue@v0.13.10..v0.20
    workload_controller.go) and suspends the RayJob. That is the end of the job, not an eviction."""
    server = cluster[0]
    namespace, lq, _ = queue
    spec = tmp_path / "limited.yaml"
    spec.write_text(
        "name: limited\nmaxRunSeconds: 6\n"
        "entrypoint: python -c \"import time; print('running', flush=True); time.sleep(300)\"\n"
    )
    out = run_cli("submit", str(spec), "-n", namespace, "--queue", lq, "--timeout", "60", env=cli_env(KUBECONFIG=cluster[1]), timeout=240)
    assert out.returncode == 1, out.stderr
    assert "the run-time limit was reached" in out.stderr, out.stderr
    assert "waiting up to" not in out.stderr and "Traceback" not in out.stderr
    assert f"deleted RayJob {namespace}/limited" in out.stderr
    wait_for(lambda: leftovers(server, namespace) == {}, timeout=30, what="nothing left")
