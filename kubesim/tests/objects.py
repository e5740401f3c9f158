"""Objects kubesim's own tests create on the test API server: Kueue's queues, RayJobs and RayClusters shaped like
raybridge's, a controller's status report, and a bounded wait.

Why here and not in tests/builders.py: kubesim imports nothing of raybridge or its test suite
(test_independence.py), its own tests included; raybridge's tests build their objects with tests/builders.py.
What it deliberately does not do: no pytest fixtures, no teardown (the server is thrown away with the test).
"""

from __future__ import annotations

import time
from typing import Any, Callable, Mapping, Optional, TypeVar

from kubesim.errors import ApiError

T = TypeVar("T")

KUEUE_API = "kueue.x-k8s.io/v1beta2"
RAY_API = "ray.io/v1"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
RAY_IMAGE = "rayproject/ray:2.55.1"


def make_resource_flavor(
    server: Any, name: str = "default-flavor", node_labels: Optional[Mapping[str, str]] = None
) -> dict:
    """A ResourceFlavor, created unless one of that name exists (also when a test beside this one creates it
    at the same moment, on a cluster the tests share)."""
    existing = server.get_object(KUEUE_API, "ResourceFlavor", name)
    if existing is not None:
        return existing
    spec: dict[str, Any] = {}
    if node_labels:
        spec["nodeLabels"] = dict(node_labels)
    try:
        return server.create_object(
            {"apiVersion": KUEUE_API, "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": spec}
        )
    except Exception as exc:  # a test beside this one on a shared cluster created it first: 409 AlreadyExists
        if getattr(exc, "status", None) != 409 and getattr(exc, "code", None) != 409:
            raise
        return server.get_object(KUEUE_API, "ResourceFlavor", name)


def make_cluster_queue(
    server: Any,
    name: str = "cq",
    gpus: int = 8,
    vendor_key: str = "nvidia.com/gpu",
    cpu: str = "64",
    memory: str = "512Gi",
    flavor: str = "default-flavor",
    *,
    node_labels: Optional[Mapping[str, str]] = None,
    queueing_strategy: Optional[str] = None,
    preemption: Optional[Mapping[str, Any]] = None,
) -> dict:
    """A ClusterQueue with one resource group (cpu, memory and the GPU key) in one flavor.

    The flavor is created too (with `node_labels`, if given). `gpus=0` leaves the
    GPU key out of the queue. `preemption`: the queue's `spec.preemption`
    (e.g. `{"withinClusterQueue": "LowerPriority"}`).
    """
    make_resource_flavor(server, flavor, node_labels)
    covered = ["cpu", "memory"]
    resources = [{"name": "cpu", "nominalQuota": cpu}, {"name": "memory", "nominalQuota": memory}]
    if gpus and vendor_key:
        covered.append(vendor_key)
        resources.append({"name": vendor_key, "nominalQuota": str(gpus)})
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "resourceGroups": [{"coveredResources": covered, "flavors": [{"name": flavor, "resources": resources}]}],
    }
    if queueing_strategy:
        spec["queueingStrategy"] = queueing_strategy
    if preemption:
        spec["preemption"] = dict(preemption)
    return server.create_object(
        {"apiVersion": KUEUE_API, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}
    )


def make_local_queue(server: Any, name: str = "lq", namespace: str = "default", cluster_queue: str = "cq") -> dict:
    return server.create_object(
        {
            "apiVersion": KUEUE_API,
            "kind": "LocalQueue",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"clusterQueue": cluster_queue},
        }
    )


def make_priority_class(server: Any, name: str, value: int) -> dict:
    return server.create_object(
        {"apiVersion": KUEUE_API, "kind": "WorkloadPriorityClass", "metadata": {"name": name}, "value": value}
    )


def _pod_template(cpu: str, memory: str, gpus: int, vendor_key: str, container: str) -> dict:
    amounts: dict[str, Any] = {"cpu": cpu, "memory": memory}
    if gpus:
        amounts[vendor_key] = str(gpus)
    return {
        "spec": {
            "containers": [
                {
                    "name": container,
                    "image": RAY_IMAGE,
                    "resources": {"requests": dict(amounts), "limits": dict(amounts)},
                }
            ]
        }
    }


def ray_cluster_spec(
    *, workers: int = 1, gpus_per_worker: int = 0, vendor_key: str = "nvidia.com/gpu", group: str = "workers"
) -> dict:
    """A RayCluster spec: a small head and one fixed-size worker group."""
    spec: dict[str, Any] = {
        "rayVersion": "2.55.1",
        "headGroupSpec": {
            "rayStartParams": {"dashboard-host": "0.0.0.0"},
            "template": _pod_template("1", "2Gi", 0, vendor_key, "ray-head"),
        },
        "workerGroupSpecs": [],
    }
    if workers:
        worker_params = {"num-gpus": str(gpus_per_worker)} if gpus_per_worker else {}
        spec["workerGroupSpecs"].append(
            {
                "groupName": group,
                "replicas": workers,
                "minReplicas": workers,
                "maxReplicas": workers,
                "rayStartParams": worker_params,
                "template": _pod_template("4", "16Gi", gpus_per_worker, vendor_key, "ray-worker"),
            }
        )
    return spec


def rayjob_manifest(
    name: str,
    *,
    namespace: str = "default",
    queue: Optional[str] = "lq",
    workers: int = 1,
    gpus_per_worker: int = 0,
    vendor_key: str = "nvidia.com/gpu",
    submission_mode: str = "InteractiveMode",
    entrypoint: str = "python -c 'print(42)'",
    **spec_overrides: Any,
) -> dict:
    """A RayJob as raybridge submits it (InteractiveMode, shutdownAfterJobFinishes, queue label)."""
    labels = {QUEUE_LABEL: queue} if queue else {}
    spec: dict[str, Any] = {
        "entrypoint": entrypoint,
        "submissionMode": submission_mode,
        "shutdownAfterJobFinishes": True,
        "rayClusterSpec": ray_cluster_spec(workers=workers, gpus_per_worker=gpus_per_worker, vendor_key=vendor_key),
    }
    spec.update(spec_overrides)
    return {
        "apiVersion": RAY_API,
        "kind": "RayJob",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": spec,
    }


def raycluster_manifest(
    name: str,
    *,
    namespace: str = "default",
    queue: Optional[str] = "lq",
    workers: int = 1,
    gpus_per_worker: int = 0,
    vendor_key: str = "nvidia.com/gpu",
) -> dict:
    labels = {QUEUE_LABEL: queue} if queue else {}
    return {
        "apiVersion": RAY_API,
        "kind": "RayCluster",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": ray_cluster_spec(workers=workers, gpus_per_worker=gpus_per_worker, vendor_key=vendor_key),
    }


def wait_for(
    probe: Callable[[], Optional[T]], timeout: float = 10.0, interval: float = 0.05, what: str = "condition"
) -> T:
    """Call `probe` until it returns something truthy; return that, or raise TimeoutError with the last value."""
    deadline = time.monotonic() + timeout
    last: Optional[T] = None
    while True:
        last = probe()
        if last:
            return last
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}; last value: {last!r}")
        time.sleep(interval)


def report_status(server: Any, api_version: str, kind: str, name: str, status: dict, namespace: str = "default") -> dict:
    """Replace an object's status as its controller reports it: read, change, write, again on a conflict.

    A controller whose status update conflicts reads the object again (KubeRay requeues
    its reconcile); a test standing in for it must too, since the simulated controllers
    (Kueue unsuspending a RayJob, say) may update the object between the read and the write.
    """
    for _ in range(50):
        obj = server.get_object(api_version, kind, name, namespace)
        try:
            return server.update_status({**obj, "status": status})
        except ApiError as error:
            if error.code != 409:
                raise
    raise AssertionError(f"{kind} {namespace}/{name}: its status update kept conflicting")
