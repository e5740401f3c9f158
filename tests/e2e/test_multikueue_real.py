"""`submit --no-wait` to a MultiKueue queue with a live worker cluster, on the real programs: two stacks of this
module's own (testcluster), a manager and a worker, joined by Kueue's MultiKueue as Kueue's docs set it up
(site/content/en/docs/tasks/manage/setup_multikueue.md, tasks/run/multikueue/kuberay.md).

Why this module exists: test_kube_submit.py shows on one cluster that a followed submit to a MultiKueue queue is
refused and that `--no-wait` to a queue whose check is inactive is refused; what happens when the check is active
needs a worker Kueue can reach. Here the user's `submit --no-wait` on the manager must go through, the RayJob must
be copied to the worker (with the orphan bound, for the worker's KubeRay), where KubeRay makes its Ray cluster;
`status` on the manager must say what Kueue copied back and which worker runs it, `logs` and `dashboard` there must
name the worker rather than look for a head pod the manager does not have, and `delete` on the manager must leave
nothing in either cluster.

The manager holds KubeRay's CRDs and no KubeRay operator (what Kueue's kuberay.md allows, and the harder case for
raybridge: nothing in the manager runs a RayJob); Kueue v0.17.0 in both (its default release here), MultiKueue on by
default there (pkg/features/kube_features.go: beta and on since v0.9), `ray.io/rayjob` among its default
integrations. The manager's Kueue, which runs as a process on this machine, reaches the worker's API server on
127.0.0.1 with the worker's admin kubeconfig (certificates embedded, as Kueue requires: multikueuecluster.go
`validateKubeconfig`).

What it deliberately does not do: run the job to its end in the worker (kwok's pods run nothing; whether the
worker's KubeRay runs a RayJob is test_kube_submit.py's subject), or test the refusals again.
"""

from __future__ import annotations

import base64
import time
import uuid
from typing import Any, Iterator, NamedTuple

import pytest

from tests.builders import KUEUE_API, RAY_API, h100_node
from tests.cluster_state import leftovers, make_cluster_queue, make_local_queue, make_resource_flavor
from tests.waits import wait_for
from tests.helpers import cli_env, run_cli

MULTIKUEUE = "kueue.x-k8s.io/multikueue"
KUEUE_NAMESPACE = "kueue-system"
#: The manager Kueue's integrations: MultiKueue watches each one's kind in every worker and holds a worker whose API
#: lacks one inactive (multikueuecluster.go `remoteClient.setConfig`: "Unable to start the watcher"), so the manager
#: names only what the worker serves, not the release's default list (Kubeflow's jobs, AppWrappers, JobSets...).
MANAGER_INTEGRATIONS = ["batch/job", "ray.io/rayjob", "ray.io/raycluster"]
#: The bound on each wait for Kueue or KubeRay: each answers within seconds on an idle machine.
WAIT_SECONDS = 60.0


class Clusters(NamedTuple):
    """The two stacks, a client of each, and the names shared by both: the namespace and the LocalQueue."""

    manager: Any
    worker: Any
    manager_client: Any
    worker_client: Any
    namespace: str
    local_queue: str
    check: str
    #: The MultiKueueCluster that stands for the worker in the manager.
    worker_cluster: str


def _condition(obj: dict[str, Any] | None, kind: str) -> str:
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind:
            return f"{cond.get('status')}: {cond.get('reason')}: {cond.get('message')}"
    return ""


def _multikueue_state(stack: Any, client: Any, check: str) -> str:
    """Why MultiKueue is not active, for a failure's message: the conditions Kueue set, its log's MultiKueue lines."""
    lines = [f"{kind}: {_condition(obj, 'Active') or 'no Active condition'}" for kind, obj in (
        ("AdmissionCheck", client.get_object(KUEUE_API, "AdmissionCheck", check)),
        *((f"MultiKueueCluster {c['metadata']['name']}", c) for c in client.list_objects(KUEUE_API, "MultiKueueCluster")))]  # fmt: skip
    log = stack.workdir / "logs" / "kueue.log"
    if log.exists():
        lines += [line[:400] for line in log.read_text(errors="replace").splitlines() if "multikueue" in line.lower()][-5:]
    return "\n".join(lines)


def _setup_worker(client: Any, namespace: str, local_queue: str, suffix: str) -> None:
    """The worker's namespace and LocalQueue, of the manager's names (MultiKueue creates the copy there), on a
    ClusterQueue of 8 GPUs."""
    client.create_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    make_cluster_queue(client, f"cq-worker-{suffix}", gpus=8)
    make_local_queue(client, local_queue, namespace, f"cq-worker-{suffix}")


def _setup_manager(client: Any, worker: Any, namespace: str, local_queue: str, suffix: str) -> tuple[str, str]:
    """MultiKueue in the manager as setup_multikueue.md has it: the worker's kubeconfig in a Secret of kueue-system,
    a MultiKueueCluster, a MultiKueueConfig, the AdmissionCheck, a ClusterQueue using it and the LocalQueue; the
    check's name and the MultiKueueCluster's."""
    secret, cluster, check = f"worker-{suffix}", f"worker-{suffix}", f"multikueue-{suffix}"
    kubeconfig = worker.kubeconfig.read_bytes()
    client.create_object({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": secret, "namespace": KUEUE_NAMESPACE},
                          "data": {"kubeconfig": base64.b64encode(kubeconfig).decode("ascii")}})  # fmt: skip
    client.create_object({"apiVersion": KUEUE_API, "kind": "MultiKueueCluster", "metadata": {"name": cluster},
                          "spec": {"clusterSource": {"kubeConfig": {"locationType": "Secret", "location": secret}}}})  # fmt: skip
    client.create_object({"apiVersion": KUEUE_API, "kind": "MultiKueueConfig", "metadata": {"name": check}, "spec": {"clusters": [cluster]}})
    client.create_object({"apiVersion": KUEUE_API, "kind": "AdmissionCheck", "metadata": {"name": check},
                          "spec": {"controllerName": MULTIKUEUE,
                                   "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": check}}})  # fmt: skip
    client.create_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    make_resource_flavor(client, "default-flavor")
    quota = [{"name": "cpu", "nominalQuota": "64"}, {"name": "memory", "nominalQuota": "512Gi"}, {"name": "nvidia.com/gpu", "nominalQuota": "8"}]
    client.create_object({"apiVersion": KUEUE_API, "kind": "ClusterQueue", "metadata": {"name": f"cq-manager-{suffix}"}, "spec": {
        "namespaceSelector": {}, "admissionChecksStrategy": {"admissionChecks": [{"name": check}]},
        "resourceGroups": [{"coveredResources": ["cpu", "memory", "nvidia.com/gpu"], "flavors": [{"name": "default-flavor", "resources": quota}]}]}})  # fmt: skip
    make_local_queue(client, local_queue, namespace, f"cq-manager-{suffix}")
    return check, cluster


@pytest.fixture(scope="module")
def clusters() -> Iterator[Clusters]:
    from testcluster.pytest_plugin import own_cluster
    from testcluster.stack import StackOptions

    suffix = uuid.uuid4().hex[:6]
    namespace, local_queue = f"team-{suffix}", "team-queue"
    worker_options = StackOptions(operators=("kuberay", "kueue"), nodes=[h100_node("worker-gpu-0")])
    manager_options = StackOptions(operators=("kueue",), crds_only=("kuberay",), kueue_config={"integrations": {"frameworks": MANAGER_INTEGRATIONS}})
    with own_cluster(worker_options) as worker, own_cluster(manager_options) as manager:
        from testcluster.client import ClusterClient

        worker_client, manager_client = ClusterClient(worker.kubeconfig), ClusterClient(manager.kubeconfig)
        try:
            _setup_worker(worker_client, namespace, local_queue, suffix)
            check, worker_cluster = _setup_manager(manager_client, worker, namespace, local_queue, suffix)
            try:
                wait_for(lambda: _condition(manager_client.get_object(KUEUE_API, "AdmissionCheck", check), "Active").startswith("True"),
                         timeout=WAIT_SECONDS, interval=0.5, what=f"AdmissionCheck {check} to become Active")  # fmt: skip
                # The ClusterQueue follows its check a moment later; until then Kueue (and so raybridge) holds it inactive.
                wait_for(lambda: _condition(manager_client.get_object(KUEUE_API, "ClusterQueue", f"cq-manager-{suffix}"), "Active").startswith("True"),
                         timeout=WAIT_SECONDS, interval=0.5, what="the manager's ClusterQueue to become Active")  # fmt: skip
            except TimeoutError as exc:
                raise TimeoutError(f"{exc}\n{_multikueue_state(manager, manager_client, check)}") from None
            yield Clusters(manager, worker, manager_client, worker_client, namespace, local_queue, check, worker_cluster)
        finally:
            worker_client.close()
            manager_client.close()


def _cli(stack: Any, *args: str) -> Any:
    return run_cli(*args, env=cli_env(KUBECONFIG=str(stack.kubeconfig)), timeout=120)


def _admitted_through_the_worker(client: Any, namespace: str, check: str) -> dict[str, Any] | None:
    """The manager's Workload once Kueue admitted it with the MultiKueue check Ready (the worker admitted its copy)."""
    for workload in client.list_objects(KUEUE_API, "Workload", namespace):
        states = {c.get("name"): c.get("state") for c in (workload.get("status") or {}).get("admissionChecks") or []}
        if states.get(check) == "Ready" and _condition(workload, "Admitted").startswith("True"):
            return workload
    return None


def _rayclusters_of(client: Any, namespace: str, rayjob: str) -> list[str]:
    return [c["metadata"]["name"] for c in client.list_objects(RAY_API, "RayCluster", namespace)
            if any(o.get("kind") == "RayJob" and o.get("name") == rayjob for o in c["metadata"].get("ownerReferences") or [])]  # fmt: skip


def _running_on(client: Any, namespace: str, rayjob: str, ray_cluster: str) -> dict[str, Any] | None:
    """The RayJob's status once it says Running on `ray_cluster` (in the worker: its submitter Job exists; kwok's pods
    then run on, so it stays Running)."""
    status = (client.get_object(RAY_API, "RayJob", rayjob, namespace) or {}).get("status") or {}
    return status if status.get("rayClusterName") == ray_cluster and status.get("jobDeploymentStatus") == "Running" else None


def test_no_wait_to_a_multikueue_queue_runs_in_the_worker_and_delete_cleans_up_both_clusters(clusters: Clusters) -> None:
    manager, worker, namespace, name = clusters.manager_client, clusters.worker_client, clusters.namespace, "far-job"
    started = time.monotonic()
    out = _cli(clusters.manager, "submit", "--no-wait", "-n", namespace, "--queue", clusters.local_queue, "--name", name,
               "--", "python", "-c", "print(1)")  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr
    assert (f"sends its jobs to worker clusters (MultiKueue): KubeRay in the worker runs it; `raybridge status {name}` "
            "shows what Kueue copies back here, its Ray cluster and logs live in the worker cluster") in out.stderr, out.stderr
    stored = manager.get_object(RAY_API, "RayJob", name, namespace)
    assert stored is not None and stored["spec"].get("managedBy") == MULTIKUEUE, stored
    # No operator here to judge by: the bound goes to the worker's, which Kueue copies the spec to.
    bound = stored["spec"].get("preRunningDeadlineSeconds")
    assert bound, stored["spec"]
    assert f"orphan protection: where the worker cluster's KubeRay operator is v1.6 or later (its release is not visible from here), " \
           f"a Ray cluster that does not start fails within {bound}s" in out.stderr, out.stderr
    assert "honours no preRunningDeadlineSeconds" not in out.stderr, out.stderr

    workload = wait_for(lambda: _admitted_through_the_worker(manager, namespace, clusters.check), timeout=WAIT_SECONDS,
                        interval=0.5, what="the manager's Workload admitted with its MultiKueue check Ready")  # fmt: skip
    copy = wait_for(lambda: worker.get_object(RAY_API, "RayJob", name, namespace), timeout=WAIT_SECONDS, interval=0.5,
                    what="the RayJob's copy in the worker")  # fmt: skip
    assert copy["spec"].get("managedBy") in (None, "ray.io/kuberay-operator"), copy["spec"].get("managedBy")
    assert copy["spec"].get("preRunningDeadlineSeconds") == bound  # the worker's KubeRay v1.6.1 honours it
    [ray_cluster] = wait_for(lambda: _rayclusters_of(worker, namespace, name), timeout=WAIT_SECONDS, interval=0.5,
                             what="the worker's KubeRay to make the copy's RayCluster")  # fmt: skip
    assert _rayclusters_of(manager, namespace, name) == []  # nothing runs it in the manager
    # No KubeRay runs in the manager: a status there naming the worker's Ray cluster is Kueue's copy of the worker's.
    wait_for(lambda: _running_on(worker, namespace, name, ray_cluster), timeout=WAIT_SECONDS, interval=0.5, what="the copy to run")
    wait_for(lambda: _running_on(manager, namespace, name, ray_cluster), timeout=WAIT_SECONDS, interval=0.5,
             what="Kueue to copy the worker's status back to the manager")  # fmt: skip
    print(f"admitted through the worker ({workload['metadata']['name']}) in {time.monotonic() - started:.1f} s")

    status = _cli(clusters.manager, "status", name, "-n", namespace)
    assert status.returncode == 0, status.stderr
    worker_words = f"worker cluster {clusters.worker_cluster} (MultiKueueCluster {clusters.worker_cluster})"
    assert "  deployment: Running; " in status.stdout, status.stdout
    assert f"  runs in: {worker_words} (Kueue's MultiKueue copies the job there and its status back here; " in status.stdout, status.stdout
    assert f"admission check {clusters.check}: Ready" in status.stdout, status.stdout
    assert "from here: raybridge dashboard" not in status.stdout, status.stdout  # its dashboard is in the worker
    for command in ("logs", "dashboard"):  # they would look for the Ray cluster here: they name the worker instead
        refused = _cli(clusters.manager, command, name, "-n", namespace)
        assert refused.returncode == 2, (command, refused.stderr)
        assert f"error: RayJob {namespace}/{name} runs in {worker_words}: Kueue's MultiKueue copies it there" in refused.stderr, refused.stderr
        assert f"run `raybridge {command} {name} -n {namespace}` with that cluster's kubeconfig" in refused.stderr, refused.stderr

    deleted = _cli(clusters.manager, "delete", name, "-n", namespace)
    assert deleted.returncode == 0, deleted.stderr
    assert f"deleted RayJob {namespace}/{name}" in deleted.stderr, deleted.stderr
    assert manager.get_object(RAY_API, "RayJob", name, namespace) is None
    wait_for(lambda: worker.get_object(RAY_API, "RayJob", name, namespace) is None, timeout=WAIT_SECONDS, interval=0.5,
             what="Kueue to remove the worker's copy")  # fmt: skip
    wait_for(lambda: leftovers(manager, namespace) == {} and leftovers(worker, namespace) == {}, timeout=WAIT_SECONDS,
             interval=0.5, what="nothing left in either cluster")  # fmt: skip
    print(f"submitted, followed and deleted in {time.monotonic() - started:.1f} s")
