"""`submit` on real operators set up as the session's cluster is not: LocalQueue defaulting off, KubeRay held back.

Why this module exists, first: Kueue v0.17 and later lock LocalQueueDefaulting on, but before that it is a feature gate a
cluster may turn off (kueue@v0.13.10 pkg/features/kube_features.go LocalQueueDefaulting; its webhook fills in the
queue only with the gate on, pkg/controller/jobframework/defaults.go ApplyDefaultLocalQueue). Here the real Kueue
v0.13.10 runs with `--feature-gates=LocalQueueDefaulting=false` beside the real KubeRay, and a namespace holds a
LocalQueue named `default`: the RayJob raybridge creates carries no queue, Kueue does not manage it, and raybridge
must still bound it with the renewed orphan deadline and say it is not queued.
Second: an operator that is stuck or far behind (a crash loop, a full workqueue) is the real KubeRay held back
(`Stack.paused`: SIGSTOP to its process, SIGCONT after), which the session's shared cluster cannot do to its
operator without stopping every other test's jobs: raybridge's wait must end at --timeout with one line, and its
clean-up must not need the operator.

Third: an operator busy between two of its own reconciles (Waiting and Running, a few milliseconds apart:
kuberay@v1.6.1 rayjob_controller.go reconciles again on its own status write, so no signal lands there reliably) is
the real KubeRay whose status writes reach the API server late: it talks to it through a fault proxy of its own
(`StackOptions.kuberay_through_fault_proxy`).

What it deliberately does not do: the rows with defaulting on (the defaulted queue, test_kube_preflight.py on the
session's cluster), or anything else per release (test_release_matrix.py).
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Iterator
from urllib.parse import urlparse

import pytest

from tests.e2e.test_release_matrix import created_rayjobs
from tests.helpers import cli_env, run_cli
from tests.builders import h100_node
from tests.cluster_state import leftovers
from tests.waits import wait_for

#: One stack for the module's tests: dealt to several workers, each started its own (about 45 s of both cores each).
pytestmark = pytest.mark.xdist_group("operator-settings-real")

KUEUE = "kueue.x-k8s.io/v1beta1"  # Kueue v0.13 serves v1beta1 only
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
MAX_EXEC_LABEL = "kueue.x-k8s.io/max-exec-time-seconds"
ORPHAN_LINE = (
    "orphan protection: if raybridge stops renewing it, the RayJob fails within 30m and frees its cluster and quota "
    "(spec.activeDeadlineSeconds, renewed while raybridge runs)"
)


@pytest.fixture(scope="module")
def stack(ray_head: Any) -> Iterator[Any]:
    """Kueue v0.13.10 with LocalQueueDefaulting off, KubeRay at the stack's default release (v1.6.1) talking to the API
    server through a fault proxy (`stack.kuberay_faults`), one 8-GPU node."""
    from testcluster.pytest_plugin import own_cluster
    from testcluster.stack import StackOptions

    options = StackOptions(
        operators=("kuberay", "kueue"), versions={"kueue": "v0.13.10"}, kueue_feature_gates={"LocalQueueDefaulting": False},
        nodes=[h100_node("gpu-0")], ray_dashboard=urlparse(ray_head.dashboard_url).netloc, kuberay_through_fault_proxy=True,
    )  # fmt: skip
    with own_cluster(options) as started:
        yield started


@pytest.fixture(scope="module")
def admin(stack: Any) -> Iterator[Any]:
    from testcluster.client import ClusterClient

    client = ClusterClient(stack.kubeconfig)
    try:
        yield client
    finally:
        client.close()


def _namespace_with_default_queue(admin: Any) -> str:
    """A fresh namespace whose LocalQueue `default` leads to a ClusterQueue with 8 GPUs: what defaulting would pick."""
    suffix = uuid.uuid4().hex[:6]
    namespace, cq = f"team-{suffix}", f"cq-{suffix}"
    admin.create_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    if admin.get_object(KUEUE, "ResourceFlavor", "default-flavor") is None:
        admin.create_object({"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "default-flavor"}})
    quota = [("cpu", "64"), ("memory", "512Gi"), ("nvidia.com/gpu", "8")]
    group = {"coveredResources": [n for n, _ in quota],
             "flavors": [{"name": "default-flavor", "resources": [{"name": n, "nominalQuota": q} for n, q in quota]}]}  # fmt: skip
    admin.create_object({"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": cq},
                         "spec": {"namespaceSelector": {}, "resourceGroups": [group]}})  # fmt: skip
    admin.create_object({"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": "default", "namespace": namespace},
                         "spec": {"clusterQueue": cq}})  # fmt: skip
    wait_for(lambda: (admin.get_object(KUEUE, "LocalQueue", "default", namespace) or {}).get("status"),
             timeout=30, what="Kueue to see LocalQueue default")  # with the gate on, its webhook would now default to it
    # A ClusterQueue Kueue met before the flavor it names is inactive (FlavorNotFound) until Kueue sees the flavor;
    # raybridge refuses to submit to an inactive one, so the job waits for Kueue's verdict, as a user's would.
    wait_for(lambda: any(c.get("type") == "Active" and c.get("status") == "True"
                         for c in ((admin.get_object(KUEUE, "ClusterQueue", cq) or {}).get("status") or {}).get("conditions") or []),
             timeout=60, what=f"Kueue to make ClusterQueue {cq} active")  # fmt: skip
    return namespace


def test_a_job_kueue_does_not_manage_is_guarded_and_said_to_be_unqueued(stack: Any, admin: Any) -> None:
    """No --queue, a `default` LocalQueue, defaulting off: the created RayJob carries no queue (as Kueue's webhook
    stored it), the output says it is not queued, and it is bounded by the renewed deadline; it runs and is cleaned up."""
    namespace = _namespace_with_default_queue(admin)
    with created_rayjobs(str(stack.kubeconfig), namespace) as created:
        out = run_cli("submit", "-v", "-n", namespace, "--name", "unqueued", "--", "python", "-c", "print('ran unqueued')",
                      env=cli_env(KUBECONFIG=str(stack.kubeconfig)), timeout=240)  # fmt: skip
        assert out.returncode == 0, out.stderr
        wait_for(lambda: created, timeout=10, what="the RayJob's creation, as the API server stored it")
    labels = created[0]["metadata"].get("labels") or {}
    assert QUEUE_LABEL not in labels and MAX_EXEC_LABEL not in labels, labels
    assert f"created RayJob {namespace}/unqueued (not queued by Kueue)" in out.stderr
    assert ORPHAN_LINE in out.stderr  # -v: the orphan bound's line
    assert created[0]["spec"]["activeDeadlineSeconds"] > 0
    assert "ran unqueued" in out.stdout and "Traceback" not in out.stderr
    assert f"deleted RayJob {namespace}/unqueued" in out.stderr and "kept RayJob" not in out.stderr  # deleted, not also "kept"
    assert admin.list_objects(KUEUE, "Workload", namespace) == []  # Kueue never took it
    wait_for(lambda: leftovers(admin, namespace, KUEUE) == {}, timeout=30, what=f"nothing left in {namespace}")


def test_a_kuberay_held_back_past_the_timeout_ends_in_one_line_and_leaves_nothing(stack: Any, admin: Any) -> None:
    """KubeRay paused before the submit: Kueue admits the RayJob, no cluster comes, and at --timeout raybridge exits 3
    saying the RayJob was not ready, and deletes it without the operator (which never put its finalizer on it); once
    the operator runs again, nothing comes back."""
    namespace = _namespace_with_default_queue(admin)
    env = cli_env(KUBECONFIG=str(stack.kubeconfig))
    with stack.paused("kuberay"):
        out = run_cli("submit", "-n", namespace, "--queue", "default", "--name", "stuck", "--timeout", "20",
                      "--", "python", "-c", "print('never')", env=env, timeout=120)  # fmt: skip
        assert out.returncode == 3, out.stderr
        assert f"RayJob {namespace}/stuck was not ready within 20s" in out.stderr, out.stderr
        assert "Traceback" not in out.stderr and "never" not in out.stdout
        wait_for(lambda: leftovers(admin, namespace, KUEUE) == {}, timeout=30, what=f"nothing left in {namespace}, the operator still held")
        assert stack.processes and all(p.running() for p in stack.processes)
    time.sleep(3)  # the operator's first reconciles after it resumes
    assert leftovers(admin, namespace, KUEUE) == {}
    assert admin.list_objects("ray.io/v1", "RayCluster", namespace) == []


def test_detach_hands_the_job_over_only_once_kuberay_has_taken_it(stack: Any, admin: Any) -> None:
    """`JobHandle.detach()` (the Python API's hand-over of a job raybridge runs) clears spec.jobId (KubeRay v1.6+) only
    once KubeRay has taken it into status.jobId. Cleared while a busy operator still had the RayJob in Waiting, KubeRay
    would never poll the job: the RayJob would stay Waiting until preRunningDeadlineSeconds failed it, its job still
    running, and `stop` found no job. The real KubeRay is made busy by its own requests: every status write of this
    RayJob reaches the API server 2 s late (the fault proxy in front of it), so the hand-over comes while the status
    the operator has decided is still on its way. (`submit --no-wait` queues a K8sJobMode RayJob instead.)"""
    import raybridge

    namespace = _namespace_with_default_queue(admin)
    assert stack.kuberay_faults is not None
    late = stack.kuberay_faults.arm("*", rf"/apis/ray\.io/v1/namespaces/{namespace}/rayjobs/busy/status", code=None, times=None, delay=2.0)
    try:
        spec = {"name": "busy", "queue": "default", "entrypoint": "python -c 'import time; time.sleep(300)'"}
        handle = raybridge.submit(spec, backend="kubernetes", kubeconfig=str(stack.kubeconfig), namespace=namespace, progress=lambda _: None)
        handle.detach()
        job_id = handle.submission_id
    finally:
        late.clear()
    assert late.hits >= 1  # the operator's status writes were held
    rayjob = admin.get_object("ray.io/v1", "RayJob", "busy", namespace)
    assert rayjob["status"].get("jobId") == job_id, rayjob["status"]
    assert not rayjob["spec"].get("jobId") and rayjob["spec"]["preRunningDeadlineSeconds"]  # handed over
    wait_for(lambda: (admin.get_object("ray.io/v1", "RayJob", "busy", namespace) or {}).get("status", {}).get("jobDeploymentStatus") == "Running",
             timeout=30, what="KubeRay polling the job it took")  # fmt: skip
    env = cli_env(KUBECONFIG=str(stack.kubeconfig))
    stopped = run_cli("stop", "busy", "-n", namespace, env=env, timeout=120)
    assert stopped.returncode == 0, stopped.stderr
    assert run_cli("delete", "busy", "-n", namespace, env=env, timeout=120).returncode == 0
    wait_for(lambda: leftovers(admin, namespace, KUEUE) == {}, timeout=60, what=f"nothing left in {namespace}")
