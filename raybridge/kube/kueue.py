"""Kueue's objects as raybridge reads them: Workloads, queues, pending positions.

Read-only. Finds the Workload of a RayJob or RayCluster (by the job-uid
label, else by owner reference), asks the visibility API for the position
in the queue, and reads LocalQueue/ClusterQueue quota when permitted. Every
read degrades to None on 403/404: "why pending" explains what it can see.
v1beta2 first, v1beta1 for clusters older than Kueue 0.15.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from raybridge.core.consts import KUEUE_JOB_UID_LABEL
from raybridge.errors import ClusterUnreachable
from raybridge.kube.client import Kube, raw_get, translate_api_exception

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


# --- reads for the preflight: whether a thing exists, told apart from "may not look" --------


@dataclass(frozen=True)
class Lookup:
    """An object, or None; `readable` False when the API refused to say (403) and nothing is known."""

    found: Optional[dict[str, Any]]
    readable: bool = True


def served_versions(kube: Kube) -> list[str]:
    """The kueue.x-k8s.io versions the API server serves, preferred first; [] when Kueue is not installed."""
    from kubernetes.client.exceptions import ApiException

    try:
        group = raw_get(kube, f"/apis/{GROUP}", timeout=kube.request_timeout)
    except ApiException as exc:
        if exc.status == 404:
            return []
        raise translate_api_exception("reading Kueue's API group", exc) from None
    except (OSError, ValueError) as exc:
        raise ClusterUnreachable(f"reading Kueue's API group: {exc}") from None
    served = [v.get("version") for v in group.get("versions") or [] if isinstance(v, dict)]
    return [v for v in VERSIONS if v in served]


def get_kueue_object(kube: Kube, versions: list[str], plural: str, name: str, namespace: Optional[str] = None) -> Lookup:
    from kubernetes.client.exceptions import ApiException

    api = kube.custom()
    for version in versions[:1]:
        try:
            if namespace:
                return Lookup(api.get_namespaced_custom_object(GROUP, version, namespace, plural, name))
            return Lookup(api.get_cluster_custom_object(GROUP, version, plural, name))
        except ApiException as exc:
            if exc.status == 404:
                return Lookup(None)
            if exc.status in (401, 403):
                return Lookup(None, readable=False)
            raise translate_api_exception(f"reading {plural} {name}", exc) from None
    return Lookup(None)


def list_kueue_objects(kube: Kube, versions: list[str], plural: str, namespace: Optional[str] = None) -> Optional[list[dict[str, Any]]]:
    """Every object of `plural` (in `namespace`), or None when the API refuses to list them."""
    from kubernetes.client.exceptions import ApiException

    api = kube.custom()
    for version in versions[:1]:
        try:
            if namespace:
                result = api.list_namespaced_custom_object(GROUP, version, namespace, plural)
            else:
                result = api.list_cluster_custom_object(GROUP, version, plural)
        except ApiException as exc:
            if exc.status in (401, 403, 404):
                return None
            raise translate_api_exception(f"listing {plural}", exc) from None
        return list((result or {}).get("items") or [])
    return None
