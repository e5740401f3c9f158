"""`submit` without `--queue` on a cluster whose Kueue manages every job, on the real programs (testcluster:
KubeRay v1.6.1 and Kueue v0.17.0, with `manageJobsWithoutQueueName: true`, a stack of this module's own).

Why this module exists: what happens to a RayJob that names no queue is Kueue's webhook's choice, not
raybridge's (kueue@v0.17.0 pkg/controller/jobs/rayjob/rayjob_webhook.go Default: ApplyDefaultLocalQueue, then
ApplyDefaultForSuspend). With a LocalQueue named `default` in the namespace the job is put in it (LocalQueue
defaulting, GA from v0.17): the user's `maxRunSeconds`, which raybridge renders as `activeDeadlineSeconds`
for a job without a queue, must still end the run. Without one, a manager of every job suspends it and
nothing will ever admit it: raybridge must say so at once, exit 2, and leave nothing behind.

What it deliberately does not do: test the default queue's admission itself (Kueue's), or jobs that name
a queue (test_kube_submit.py).
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import urlparse

import pytest
import yaml

from tests.builders import KUEUE_API, h100_node
from tests.cluster_state import leftovers, make_cluster_queue, make_local_queue
from tests.waits import wait_for
from tests.helpers import cli_env, run_cli

#: One stack for the module's tests: dealt to several workers, each started its own (about 45 s of both cores each).
pytestmark = pytest.mark.xdist_group("kueue-manages-every-job")


@pytest.fixture(scope="module")
def stack(ray_head: Any) -> Iterator[Any]:
    from testcluster.pytest_plugin import own_cluster
    from testcluster.stack import StackOptions

    options = StackOptions(
        nodes=[h100_node(f"gpu-{i}") for i in range(2)],
        ray_dashboard=urlparse(ray_head.dashboard_url).netloc,
        kueue_config={"manageJobsWithoutQueueName": True},
    )
    with own_cluster(options) as started:
        yield started


@pytest.fixture
def server(stack: Any) -> Iterator[Any]:
    from testcluster.client import ClusterClient

    client = ClusterClient(stack.kubeconfig)
    try:
        yield client
    finally:
        client.close()


def namespace_with(server: Any, *local_queues: str) -> str:
    """A fresh namespace with these LocalQueues, each on a ClusterQueue of 8 GPUs of its own."""
    suffix = uuid.uuid4().hex[:6]
    namespace = f"team-{suffix}"
    server.create_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    for name in local_queues:
        make_cluster_queue(server, f"cq-{name}-{suffix}", gpus=8)
        make_local_queue(server, name, namespace, f"cq-{name}-{suffix}")
    for name in local_queues:  # Kueue's webhook defaults a job's queue only to a LocalQueue its cache has seen
        wait_for(lambda: (server.get_object(KUEUE_API, "LocalQueue", name, namespace) or {}).get("status"),
                 timeout=30, what=f"Kueue to see LocalQueue {name}")  # fmt: skip
    return namespace


def cli(stack: Any, *args: str, timeout: float = 180) -> Any:
    return run_cli(*args, env=cli_env(KUBECONFIG=str(stack.kubeconfig)), timeout=timeout)


def test_a_job_that_names_no_queue_where_kueue_would_never_admit_it_is_refused_at_once(stack: Any, server: Any) -> None:
    namespace = namespace_with(server, "team-queue", "other")
    started = time.monotonic()
    out = cli(stack, "submit", "-n", namespace, "--name", "unqueued", "--", "python", "-c", "print('never')")
    took = time.monotonic() - started
    assert out.returncode == 2, out.stderr
    assert (
        f"RayJob {namespace}/unqueued names no queue and was suspended on creation: this cluster's Kueue manages jobs "
        f"without a queue name (manageJobsWithoutQueueName) and {namespace} has no LocalQueue named 'default'"
    ) in out.stderr
    assert f"pass --queue (LocalQueues in {namespace}: other, team-queue)" in out.stderr
    assert "Traceback" not in out.stderr and "never" not in out.stdout
    assert took < 60, f"took {took:.0f}s: waited instead of saying so"
    wait_for(lambda: leftovers(server, namespace) == {}, timeout=30, what="nothing left")


def test_max_run_seconds_ends_a_job_kueue_put_in_the_default_local_queue(stack: Any, server: Any, tmp_path: Path) -> None:
    """No --queue: rendered without Kueue's labels, the limit in activeDeadlineSeconds; Kueue's defaulting then
    adds the queue label, and the renewals must keep the limit, not replace it with the orphan bound."""
    namespace = namespace_with(server, "default")
    spec = tmp_path / "limited.yaml"
    spec.write_text(yaml.safe_dump({
        "name": "limited", "maxRunSeconds": 20,
        "entrypoint": "python -c \"import time; print('started', flush=True); time.sleep(300); print('ran past the limit')\"",
    }))  # fmt: skip
    started = time.monotonic()
    out = cli(stack, "submit", str(spec), "-n", namespace, timeout=240)
    took = time.monotonic() - started
    assert f"created RayJob {namespace}/limited in queue default" in out.stderr, out.stderr
    assert out.returncode == 1, out.stderr
    assert "ran past the limit" not in out.stdout
    assert "the run-time limit of 20s (maxRunSeconds) was reached" in out.stderr, out.stderr
    assert "orphan protection: the RayJob fails 20s after it starts, its run-time limit (maxRunSeconds" in out.stderr, out.stderr
    # KubeRay fails the RayJob at 20 s (and would delete its cluster only ttlSecondsAfterFinished, 60 s, later):
    # raybridge's guard looks as the limit runs out and ends the Ray job then.
    assert took < 60, f"took {took:.0f}s: the limit of 20 s did not end the run\n{out.stderr}"
    wait_for(lambda: leftovers(server, namespace) == {}, timeout=60, what="nothing left")


def test_check_says_a_job_without_a_queue_would_never_be_admitted_as_submit_refuses_it(stack: Any, server: Any) -> None:
    """`check` without --queue in a namespace with no `default` LocalQueue: missing (exit 1), naming the LocalQueues, as
    `submit` refuses the job; with --queue, or with a `default` LocalQueue, nothing is missing. Asked of Kueue itself
    (a dry-run create through its webhook): nothing is created."""
    namespace = namespace_with(server, "team-queue")
    out = cli(stack, "check", "-n", namespace, "-o", "json")
    assert out.returncode == 1, out.stdout
    import json

    missing = [row for row in json.loads(out.stdout)["checks"] if row["status"] == "missing"]
    assert missing == [{"check": "queue", "status": "missing", "detail": (
        f"no --queue: this cluster's Kueue manages jobs without a queue name (manageJobsWithoutQueueName) and {namespace} has no "
        f"LocalQueue named default, so Kueue would hold the job for ever and submit refuses it (LocalQueues here: team-queue)")}], missing
    assert server.list_objects("ray.io/v1", "RayJob", namespace) == []
    assert cli(stack, "check", "-n", namespace, "--queue", "team-queue").returncode == 0
    with_default = namespace_with(server, "default")
    assert cli(stack, "check", "-n", with_default).returncode == 0
