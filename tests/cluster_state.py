"""Cluster state for tests: tests/builders.py's objects created on a cluster, a fresh queue, what a test left behind.

Why this module exists: the tests against the real test cluster (testcluster/client.py `ClusterClient`), the
session's shared one or a stack of their own, set up the same state (a ResourceFlavor, a ClusterQueue with a GPU
quota, a LocalQueue in a namespace of its own, GPU nodes) and check the same leftovers. The helpers take any client
with `ClusterClient`'s methods (`create_object`, `get_object`, `list_objects`, `update_status`).

What it deliberately does not do: no pytest fixtures, no teardown of what it creates (a shared cluster's
namespaces are unique per test; a stack of a test's own is stopped with it), no pods on the nodes.
"""

from __future__ import annotations

import uuid
from typing import Any, Mapping, Optional

from tests.builders import (
    KUEUE_API,
    RAY_API,
    cluster_queue,
    h100_node,
    local_queue,
    resource_flavor,
    workload_priority_class,
)


def make_resource_flavor(
    server: Any, name: str = "default-flavor", node_labels: Optional[Mapping[str, str]] = None
) -> dict:
    """A ResourceFlavor, created unless one of that name exists (also when a test beside this one creates it
    at the same moment, on a cluster the tests share)."""
    existing = server.get_object(KUEUE_API, "ResourceFlavor", name)
    if existing is not None:
        return existing
    try:
        return server.create_object(resource_flavor(name, node_labels))
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
    """builders.cluster_queue's ClusterQueue, created with its flavor (with `node_labels`, if given)."""
    make_resource_flavor(server, flavor, node_labels)
    return server.create_object(cluster_queue(name, gpus, vendor_key, cpu, memory, flavor,
                                              queueing_strategy=queueing_strategy, preemption=preemption))  # fmt: skip


def make_local_queue(server: Any, name: str = "lq", namespace: str = "default", cluster_queue: str = "cq") -> dict:
    return server.create_object(local_queue(name, namespace, cluster_queue))


def make_priority_class(server: Any, name: str, value: int) -> dict:
    return server.create_object(workload_priority_class(name, value))


def make_gpu_node(server: Any, name: str, gpus: int = 8, **kwargs: Any) -> dict:
    """builders.h100_node's Node (the arguments are builders.gpu_node's), created on `server` with its status."""
    node = h100_node(name, gpus, **kwargs)
    status, capacity = node["status"], node["status"]["capacity"]
    created = server.create_object(node)
    if (created.get("status") or {}).get("capacity") != capacity:  # a real API server drops the status of a create
        server.update_status({**created, "status": status})
        created = server.get_object("v1", "Node", name) or created
    return created


def fresh_queue(server: Any, gpus: int = 8, *, preemption: Optional[Mapping[str, Any]] = None) -> tuple[str, str, str]:
    """A new namespace with a LocalQueue -> ClusterQueue of `gpus` GPUs (and `preemption`, if given):
    (namespace, local queue, cluster queue)."""
    suffix = uuid.uuid4().hex[:6]
    namespace = f"team-{suffix}"
    server.create_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    make_cluster_queue(server, f"cq-{suffix}", gpus=gpus, preemption=preemption)
    make_local_queue(server, f"lq-{suffix}", namespace, f"cq-{suffix}")
    return namespace, f"lq-{suffix}", f"cq-{suffix}"


def leftovers(server: Any, namespace: str, kueue_api: str = KUEUE_API) -> dict[str, list[str]]:
    """What still holds (or could hold) quota in `namespace`: RayJobs, RayClusters and Workloads by kind."""
    found = {}
    for api, kind in ((RAY_API, "RayJob"), (RAY_API, "RayCluster"), (kueue_api, "Workload")):
        names = [o["metadata"]["name"] for o in server.list_objects(api, kind, namespace)]
        if names:
            found[kind] = names
    return found
