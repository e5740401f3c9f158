"""The submit flow against a real cluster (KubeRay and Kueue installed), opt-in.

Set RAYBRIDGE_E2E_KUBECONFIG to a kubeconfig, and optionally
RAYBRIDGE_E2E_NAMESPACE (default "default"), RAYBRIDGE_E2E_QUEUE (a LocalQueue
there) and RAYBRIDGE_E2E_GPUS (GPUs to ask for, default 0). Skipped otherwise.

What each test covers of the real-cluster behaviour raybridge relies on:
- the orphan protection the cluster's KubeRay really keeps (strict field
  validation; preRunningDeadlineSeconds from v1.6, Kueue's label before);
- preflight: a missing namespace, LocalQueue and WorkloadPriorityClass, and a
  request that can never be admitted, all exit 2 before anything is created;
- the queue the created object really carries (Kueue's LocalQueue defaulting);
- a queue name Kueue's webhook would refuse, refused before sending;
- eviction: with RAYBRIDGE_E2E_HIGH_PRIORITY (a WorkloadPriorityClass above the
  queue's default) a second job preempts the first, which is submitted again;
- token authentication (authMode: token; KubeRay v1.5 and later), with
  RAYBRIDGE_E2E_TOKEN_AUTH=1.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import pytest

from tests.helpers import EXAMPLES, ROOT, cli_env, run_cli, wait_for_output

KUBECONFIG = os.environ.get("RAYBRIDGE_E2E_KUBECONFIG")
NAMESPACE = os.environ.get("RAYBRIDGE_E2E_NAMESPACE", "default")
QUEUE = os.environ.get("RAYBRIDGE_E2E_QUEUE")
GPUS = os.environ.get("RAYBRIDGE_E2E_GPUS", "0")
HIGH_PRIORITY = os.environ.get("RAYBRIDGE_E2E_HIGH_PRIORITY")
TOKEN_AUTH = os.environ.get("RAYBRIDGE_E2E_TOKEN_AUTH") == "1"

pytestmark = [
    pytest.mark.realcluster,
    pytest.mark.skipif(not KUBECONFIG, reason="RAYBRIDGE_E2E_KUBECONFIG is not set"),
]


def real_env() -> dict[str, str]:
    return cli_env(KUBECONFIG=KUBECONFIG or "", HOME=os.environ.get("HOME", "/root"))


def real(*args: str, timeout: float = 1800):
    return run_cli(*args, env=real_env(), timeout=timeout)


def unique() -> str:
    return f"rb-e2e-{uuid.uuid4().hex[:6]}"


def gone(name: str) -> bool:
    listed = json.loads(real("list", "-n", NAMESPACE, "-o", "json").stdout or "[]")
    return name not in {row["name"] for row in listed}


def queue_flags() -> list[str]:
    return ["--queue", QUEUE] if QUEUE else []


def test_discover_reads_the_nodes():
    out = real("discover", "-o", "json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["source"] == "kubernetes"


def test_submit_end_to_end_and_clean_up():
    name = f"rb-e2e-{uuid.uuid4().hex[:6]}"
    out = real("submit", str(EXAMPLES / "hello.yaml"), "-n", NAMESPACE, "--name", name, "--gpus", GPUS, *queue_flags())
    assert out.returncode == 0, out.stderr
    assert "sum of squares: 285" in out.stdout
    listed = json.loads(real("list", "-n", NAMESPACE, "-o", "json").stdout)
    assert name not in {row["name"] for row in listed}


def test_timeout_leaves_nothing_behind():
    name = f"rb-e2e-{uuid.uuid4().hex[:6]}"
    out = real("submit", "-n", NAMESPACE, "--name", name, "--timeout", "1", *queue_flags(), "--", "python", "-c", "1")
    assert out.returncode in (0, 3), out.stderr
    listed = json.loads(real("list", "-n", NAMESPACE, "-o", "json").stdout)
    assert name not in {row["name"] for row in listed}


def _stored_rayjob(name: str) -> dict:
    from kubernetes import client, config

    api = config.new_client_from_config(config_file=KUBECONFIG)
    try:
        return client.CustomObjectsApi(api).get_namespaced_custom_object("ray.io", "v1", NAMESPACE, "rayjobs", name)
    finally:
        api.close()


def test_the_orphan_protection_reported_is_the_one_the_server_kept():
    """Bug 1: on KubeRay before v1.6 the field is unknown; what is claimed must be on the stored object."""
    name = unique()
    out = real("-v", "submit", str(EXAMPLES / "hello.yaml"), "-n", NAMESPACE, "--name", name, "--keep", *queue_flags())
    try:
        assert out.returncode == 0, out.stderr
        assert "orphan protection: " in out.stderr and "no orphan protection" not in out.stderr
        line = next(text for text in out.stderr.splitlines() if "orphan protection: " in text)
        stored = _stored_rayjob(name)
        if "preRunningDeadlineSeconds=" in line:
            assert stored["spec"].get("preRunningDeadlineSeconds"), "claimed a field the server dropped"
        elif "max-exec-time-seconds=" in line:
            labels = stored["metadata"].get("labels") or {}
            assert labels.get("kueue.x-k8s.io/max-exec-time-seconds") and labels.get("kueue.x-k8s.io/queue-name"), labels
        else:
            assert stored["spec"].get("activeDeadlineSeconds"), line
    finally:
        real("delete", name, "-n", NAMESPACE)


@pytest.mark.parametrize(
    "flags,fragment",
    [
        (["-n", "rb-e2e-no-such-namespace"], "namespace rb-e2e-no-such-namespace does not exist"),
        (["--queue", "rb-e2e-no-such-queue"], "LocalQueue rb-e2e-no-such-queue does not exist"),
        (["--priority-class", "rb-e2e-no-such-class"], "WorkloadPriorityClass rb-e2e-no-such-class does not exist"),
        (["--queue", "Not_A_Queue"], "queue: must"),
    ],
)
def test_preflight_refuses_before_anything_is_created(flags, fragment):
    name = unique()
    args = ["-n", NAMESPACE, *queue_flags(), *flags] if "-n" not in flags else [*queue_flags(), *flags]
    out = real("submit", "--name", name, *args, "--", "python", "-c", "1", timeout=300)
    assert out.returncode == 2, out.stderr
    assert fragment in out.stderr
    assert gone(name)


@pytest.mark.skipif(not QUEUE, reason="RAYBRIDGE_E2E_QUEUE is not set")
def test_a_request_that_can_never_be_admitted_is_refused_at_once():
    name = unique()
    out = real("submit", "-n", NAMESPACE, "--name", name, "--queue", QUEUE, "--replicas", "1000", "--gpus-per-replica", "8", "--", "python", "-c", "1", timeout=300)
    assert out.returncode == 2, out.stderr
    assert "can ever hold" in out.stderr or "does not cover" in out.stderr
    assert gone(name)


def test_the_queue_reported_is_the_one_the_object_carries():
    name = unique()
    out = real("submit", str(EXAMPLES / "hello.yaml"), "-n", NAMESPACE, "--name", name, *queue_flags())
    assert out.returncode == 0, out.stderr
    if QUEUE:
        assert f"in queue {QUEUE}" in out.stderr
    else:
        assert "in queue default" in out.stderr or "(not queued by Kueue)" in out.stderr


@pytest.mark.skipif(not (QUEUE and HIGH_PRIORITY), reason="RAYBRIDGE_E2E_QUEUE and RAYBRIDGE_E2E_HIGH_PRIORITY are not set")
def test_a_preempted_job_is_submitted_again_after_readmission():
    low, high = unique(), unique()
    first = subprocess.Popen(
        [sys.executable, "-m", "raybridge", "submit", "-n", NAMESPACE, "--queue", QUEUE, "--name", low, "--gpus", GPUS, "--",
         "python", "-c", "import time; print('low running', flush=True); time.sleep(120)"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=real_env(), cwd=str(ROOT),
    )  # fmt: skip
    try:
        wait_for_output(first, "low running", timeout=1800)
        preemptor = real("submit", "-n", NAMESPACE, "--queue", QUEUE, "--priority-class", HIGH_PRIORITY, "--name", high,
                         "--gpus", GPUS, "--", "python", "-c", "print('high done')")  # fmt: skip
        assert preemptor.returncode == 0, preemptor.stderr
        out, err = first.communicate(timeout=1800)
        assert first.returncode == 0, err
        assert "preempted in queue" in err and "submitted" in err.split("preempted in queue", 1)[1]
    finally:
        first.kill()
    assert gone(low) and gone(high)


@pytest.mark.skipif(not TOKEN_AUTH, reason="RAYBRIDGE_E2E_TOKEN_AUTH is not set (needs KubeRay v1.5 or later)")
def test_token_authentication(tmp_path):
    spec = tmp_path / "job.yaml"
    spec.write_text("entrypoint: python -c \"print('authenticated')\"\nauthMode: token\n")
    out = real("submit", str(spec), "-n", NAMESPACE, "--name", unique(), *queue_flags())
    assert out.returncode == 0, out.stderr
    assert "authenticated" in out.stdout

