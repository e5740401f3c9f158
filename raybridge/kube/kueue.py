"""Kueue's objects as raybridge reads them: Workloads, queues, pending positions.

Read-only. Finds the Workload of a RayJob or RayCluster (by the job-uid
label, else by owner reference), asks the visibility API for the position
in the queue, and reads LocalQueue/ClusterQueue quota and the Cohort objects
that lend to them when permitted. A read
the user may not make (401/403) or of something absent (404) degrades to
None: "why pending" explains what it can see. Every call goes through
`kube.calls.api_call`, so a server that times out, fails or answers
something that is not a Kubernetes object is exit 3 with one line, never a
traceback. v1beta2 first, v1beta1 for clusters older than Kueue 0.15.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Optional

from raybridge.kueue.names import KUEUE_JOB_UID_LABEL
from raybridge.errors import InfraError, RaybridgeError
from raybridge.core.kubeobjects import owned_by
from raybridge.kueue.api import GROUP, OLD_COHORT_VERSION, VERSIONS, VISIBILITY_GROUP as VISIBILITY
from raybridge.kueue.dra import KueueDraSettings, device_class_mappings, feature_gates
from raybridge.kube.calls import PermissionDenied, api_call, checked_items, checked_object
from raybridge.kube.client import Kube
from raybridge.kube.objects import raw_get



def _read(what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Optional[Any]:
    """`api_call`, None when the thing (or this API version) is absent or the user may not read it."""
    try:
        return api_call(what, fn, *args, not_found_ok=True, **kwargs)
    except PermissionDenied:
        return None


def find_workload(kube: Kube, namespace: str, owner: dict[str, Any]) -> Optional[dict[str, Any]]:
    """The Workload that Kueue made for this job, or None (not yet, or no Kueue).

    PermissionDenied when the user may not list Workloads: "no Workload yet" would be a
    false report, and admission and eviction cannot be followed without them.
    """
    api = kube.custom()
    uid = (owner.get("metadata") or {}).get("uid")
    what = f"listing Kueue Workloads in {namespace}"
    for version in VERSIONS:
        result = api_call(what, api.list_namespaced_custom_object, GROUP, version, namespace, "workloads",
                          label_selector=f"{KUEUE_JOB_UID_LABEL}={uid}", not_found_ok=True)
        if result is None:
            continue
        items = checked_items(what, result, "Workload", kube.server)
        if not items:
            everything = api_call(what, api.list_namespaced_custom_object, GROUP, version, namespace, "workloads", not_found_ok=True)
            items = [w for w in checked_items(what, everything or {"items": []}, "Workload", kube.server) if owned_by(w, uid)]
        return items[0] if items else None
    return None


def wait_workload_gone(kube: Kube, namespace: str, owner: dict[str, Any], wait: float) -> bool:
    """True once no Workload of `owner` (a deleted RayJob or RayCluster) is left, False if one still is after
    `wait` seconds or the Workloads can no longer be read. A user who may not list Workloads cannot tell: True.

    Why: the garbage collector removes the Workload before its owner, but Kueue's job reconciler, reading
    the owner from its cache, can create a new one in between (`handleJobWithNoWorkload`, kueue@v0.17.0
    pkg/controller/jobframework/reconciler.go); that one lives until the collector finds its owner gone.
    """
    if not (owner.get("metadata") or {}).get("uid"):
        return True
    deadline = time.monotonic() + wait
    while True:
        try:
            if find_workload(kube, namespace, owner) is None:
                return True
        except PermissionDenied:
            return True
        except RaybridgeError:
            return False
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.2)


def get_local_queue(kube: Kube, namespace: str, name: str) -> Optional[dict[str, Any]]:
    what = f"reading LocalQueue {namespace}/{name}"
    for version in VERSIONS:
        found = _read(what, kube.custom().get_namespaced_custom_object, GROUP, version, namespace, "localqueues", name)
        if found is not None:
            return checked_object(what, found, "LocalQueue", kube.server)
    return None


def get_cluster_queue(kube: Kube, name: str) -> Optional[dict[str, Any]]:
    what = f"reading ClusterQueue {name}"
    for version in VERSIONS:
        found = _read(what, kube.custom().get_cluster_custom_object, GROUP, version, "clusterqueues", name)
        if found is not None:
            return checked_object(what, found, "ClusterQueue", kube.server)
    return None


_NOT_SERVED = object()


def _optional_get(kube: Kube, path: str) -> Any:
    """An optional API's answer; `_NOT_SERVED` on 404, None when it refuses, fails or answers no JSON (not retried)."""
    from kubernetes.client.exceptions import ApiException

    try:
        return raw_get(kube, path, retry=False)
    except ApiException as exc:
        return _NOT_SERVED if exc.status == 404 else None
    except ValueError:
        return None


def pending_position(kube: Kube, namespace: str, local_queue: str, workload_name: str) -> Optional[dict[str, Any]]:
    """{positionInLocalQueue, positionInClusterQueue} from the visibility API, when it answers.

    The visibility API is optional (an aggregated API Kueue may not serve): when it is
    absent, refuses or fails the position is unknown (None). A server that does not
    answer at all is exit 3, as for every other call.
    """
    for version in VERSIONS:
        path = f"/apis/{VISIBILITY}/{version}/namespaces/{namespace}/localqueues/{local_queue}/pendingworkloads"
        data = api_call(f"reading the pending workloads of LocalQueue {namespace}/{local_queue}", _optional_get, kube, path)
        if data is _NOT_SERVED:
            continue
        items = data.get("items") if isinstance(data, dict) else None
        for item in items if isinstance(items, list) else []:
            if isinstance(item, dict) and (item.get("metadata") or {}).get("name") == workload_name:
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
    group = api_call("reading Kueue's API group", raw_get, kube, f"/apis/{GROUP}", not_found_ok=True)
    if group is None:
        return []
    versions = group.get("versions") if isinstance(group, dict) else None
    served = [v.get("version") for v in versions if isinstance(v, dict)] if isinstance(versions, list) else []
    return [v for v in VERSIONS if v in served]


_KINDS = {
    "localqueues": "LocalQueue", "clusterqueues": "ClusterQueue", "resourceflavors": "ResourceFlavor",
    "workloadpriorityclasses": "WorkloadPriorityClass", "workloads": "Workload", "cohorts": "Cohort",
    "admissionchecks": "AdmissionCheck",
}  # fmt: skip


def get_kueue_object(kube: Kube, versions: list[str], plural: str, name: str, namespace: Optional[str] = None) -> Lookup:
    api = kube.custom()
    kind = _KINDS.get(plural)
    what = f"reading {kind or plural} {namespace + '/' if namespace else ''}{name}"
    for version in versions[:1]:
        try:
            if namespace:
                found = api_call(what, api.get_namespaced_custom_object, GROUP, version, namespace, plural, name, not_found_ok=True)
            else:
                found = api_call(what, api.get_cluster_custom_object, GROUP, version, plural, name, not_found_ok=True)
        except PermissionDenied:
            return Lookup(None, readable=False)
        return Lookup(None if found is None else checked_object(what, found, kind, kube.server))
    return Lookup(None)


def list_kueue_objects(kube: Kube, versions: list[str], plural: str, namespace: Optional[str] = None) -> Optional[list[dict[str, Any]]]:
    """Every object of `plural` (in `namespace`), or None when the API refuses to list them."""
    api = kube.custom()
    kind = _KINDS.get(plural)
    what = f"listing Kueue {plural}" + (f" in {namespace}" if namespace else "")
    for version in versions[:1]:
        if namespace:
            result = _read(what, api.list_namespaced_custom_object, GROUP, version, namespace, plural)
        else:
            result = _read(what, api.list_cluster_custom_object, GROUP, version, plural)
        return None if result is None else checked_items(what, result, kind, kube.server)
    return None


def list_cohorts(kube: Kube, versions: list[str]) -> Optional[list[dict[str, Any]]]:
    """Every Cohort object; [] when the cluster serves none; None when the API refuses to list them.

    Cohorts are cluster-scoped and optional: most clusters name cohorts only in their
    ClusterQueues. Kueue 0.13 and later serve them with the other kinds (v1beta1, and
    v1beta2 from 0.15); older releases served them as v1alpha1, tried when those are absent.
    """
    api = kube.custom()
    what = "listing Kueue Cohorts"
    for version in [*versions[:1], OLD_COHORT_VERSION]:
        try:
            result = api_call(what, api.list_cluster_custom_object, GROUP, version, "cohorts", not_found_ok=True)
        except PermissionDenied:
            return None
        if result is not None:
            return checked_items(what, result, "Cohort", kube.server)
    return []


def list_local_queue_names(kube: Kube, namespace: str) -> list[str]:
    """The names of the LocalQueues in `namespace`, sorted; [] when there are none, Kueue is absent or the API will not say."""
    try:
        found = list_kueue_objects(kube, served_versions(kube), "localqueues", namespace)
    except InfraError:
        return []
    return sorted(str((q.get("metadata") or {}).get("name")) for q in found or [])


#: The volume through which Kueue's manifests (Helm and kustomize alike) mount its Configuration, and the key of
#: the ConfigMap behind it (kueue@v0.19.2 charts/kueue/templates/manager/manager.yaml, config/components/manager).
KUEUE_CONFIG_VOLUME = "manager-config"
KUEUE_CONFIG_KEY = "controller_manager_config.yaml"


def kueue_dra_settings(kube: Kube) -> KueueDraSettings:
    """Kueue's release, feature gates and deviceClassMappings, read from its controller manager's Deployment and the
    ConfigMap it mounts; what cannot be read is unknown, with why (never an error)."""
    from raybridge.core.documents import load_yaml
    from raybridge.kube.operators import KUEUE_CONTROLLER_SELECTOR, KUEUE_NAMESPACES, operator_deployments, release_of

    items, unknown_because = operator_deployments(kube, "Kueue's controller manager", KUEUE_CONTROLLER_SELECTOR, KUEUE_NAMESPACES)
    if not items:
        return KueueDraSettings(release=None, unknown_because=unknown_because)
    release = release_of(items, KUEUE_CONTROLLER_SELECTOR)
    deployment = items[0]
    namespace = str((deployment.get("metadata") or {}).get("namespace") or "")
    pod = ((deployment.get("spec") or {}).get("template") or {}).get("spec") or {}
    containers = [c for c in pod.get("containers") or [] if isinstance(c, dict)]
    gates = feature_gates(containers[0].get("args")) if containers else {}
    volume = next((v for v in pod.get("volumes") or [] if isinstance(v, dict) and v.get("name") == KUEUE_CONFIG_VOLUME), None)
    config_map = ((volume or {}).get("configMap") or {}).get("name")
    if not config_map:
        return KueueDraSettings(release.version, gates, None, f"its Deployment mounts no {KUEUE_CONFIG_VOLUME} ConfigMap")
    try:
        found = api_call(
            f"reading ConfigMap {namespace}/{config_map}", kube.core().read_namespaced_config_map, config_map, namespace,
            not_found_ok=True, _preload_content=False,
        )  # fmt: skip
    except PermissionDenied:
        return KueueDraSettings(release.version, gates, None, f"this user may not read ConfigMap {namespace}/{config_map}")
    except RaybridgeError as exc:
        return KueueDraSettings(release.version, gates, None, f"ConfigMap {namespace}/{config_map} could not be read: {exc}")
    if found is None:
        return KueueDraSettings(release.version, gates, None, f"ConfigMap {namespace}/{config_map} does not exist")
    import json

    try:
        data = (json.loads(found.data).get("data") or {}).get(KUEUE_CONFIG_KEY)
        configuration = load_yaml(data, f"ConfigMap {namespace}/{config_map}") if isinstance(data, str) else None
    except (ValueError, RaybridgeError, AttributeError):
        configuration = None
    if not isinstance(configuration, dict):
        return KueueDraSettings(release.version, gates, None, f"ConfigMap {namespace}/{config_map} holds no Configuration")
    return KueueDraSettings(release.version, gates, device_class_mappings(configuration))
