"""Kueue's objects as raybridge reads them: Workloads, queues, pending positions.

Read-only. Finds the Workload of a RayJob or RayCluster (by the job-uid
label, else by owner reference), asks the visibility API for the position
in the queue, and reads LocalQueue/ClusterQueue quota when permitted. Every
read degrades to None on 403/404: "why pending" explains what it can see.
v1beta2 first, v1beta1 for clusters older than Kueue 0.15.
"""

from __future__ import annotations

import json
from typing import Any, Optional

from raybridge.core.consts import KUEUE_JOB_UID_LABEL
from raybridge.kube.client import Kube, raw_get

GROUP = "kueue.x-k8s.io"
VERSIONS = ("v1beta2", "v1beta1")
VISIBILITY = "visibility.kueue.x-k8s.io"


def _try(fn: Any, *args: Any, **kwargs: Any) -> Optional[Any]:
    from kubernetes.client.exceptions import ApiException

    try:
        return fn(*args, **kwargs)
    except ApiException as exc:
        if exc.status in (401, 403, 404, 503):
            return None
        raise


def find_workload(kube: Kube, namespace: str, owner: dict[str, Any]) -> Optional[dict[str, Any]]:
    """The Workload that Kueue made for this job, or None (not yet, or no Kueue)."""
    api = kube.custom()
    uid = owner.get("metadata", {}).get("uid")
    for version in VERSIONS:
        result = _try(api.list_namespaced_custom_object, GROUP, version, namespace, "workloads", label_selector=f"{KUEUE_JOB_UID_LABEL}={uid}")
        if result is None:
            continue
        items = result.get("items") or []
        if not items:
            everything = _try(api.list_namespaced_custom_object, GROUP, version, namespace, "workloads") or {}
            items = [w for w in everything.get("items") or [] if any(r.get("uid") == uid for r in w["metadata"].get("ownerReferences") or [])]
        return items[0] if items else None
    return None


def get_local_queue(kube: Kube, namespace: str, name: str) -> Optional[dict[str, Any]]:
    for version in VERSIONS:
        found = _try(kube.custom().get_namespaced_custom_object, GROUP, version, namespace, "localqueues", name)
        if found is not None:
            return found
    return None


def get_cluster_queue(kube: Kube, name: str) -> Optional[dict[str, Any]]:
    for version in VERSIONS:
        found = _try(kube.custom().get_cluster_custom_object, GROUP, version, "clusterqueues", name)
        if found is not None:
            return found
    return None


def pending_position(kube: Kube, namespace: str, local_queue: str, workload_name: str) -> Optional[dict[str, Any]]:
    """{positionInLocalQueue, positionInClusterQueue} from the visibility API, when it answers."""
    from kubernetes.client.exceptions import ApiException

    for version in ("v1beta2", "v1beta1"):
        path = f"/apis/{VISIBILITY}/{version}/namespaces/{namespace}/localqueues/{local_queue}/pendingworkloads"
        try:
            data = raw_get(kube, path)
        except ApiException:
            continue
        except (OSError, ValueError):
            return None
        for item in data.get("items") or []:
            if item.get("metadata", {}).get("name") == workload_name:
                return {k: item.get(k) for k in ("positionInLocalQueue", "positionInClusterQueue", "priority")}
        return None
    return None
