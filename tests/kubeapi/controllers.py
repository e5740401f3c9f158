"""Simulated Kueue and KubeRay controllers for the in-process Kubernetes API server.

Why this module exists: raybridge creates RayJobs and RayClusters and then
watches what Kueue and KubeRay do with them (suspension, Workloads, admission,
quota messages, queue positions, cluster readiness, the dashboard URL, job
status). Without a cluster, these two classes play those controllers against
`tests/kubeapi/server.py`, so raybridge can be tested end to end through the
official `kubernetes` client against objects that look like the real ones.

How they work: each runs one daemon thread that lists the objects it cares
about every `interval` seconds and reconciles them, talking to the server only
through the official client (`CustomObjectsApi`, `CoreV1Api`). The parts that a
real cluster runs as webhooks or aggregated APIs (Kueue's webhooks and
visibility API, the kubelet side of a port-forward) are registered on the
server with `add_mutating_hook`, `add_handler` and `set_port_forward_target`.
Errors are logged and retried on the next pass; a pass never kills the thread.
The state machines follow the Go sources (KubeRay `rayjob_controller.go`,
`utils/validation.go`; Kueue `flavorassigner`, `jobframework`) in their
transitions, reasons and messages.

What they deliberately do not do:

- FakeKueue: no cohorts, borrowing, lending, preemption (only the `evict()`
  knob), fair sharing, admission checks, topology-aware scheduling,
  namespaceSelector, stopPolicy, deactivation of an admitted Workload, or
  elastic workload slices. Of Kueue's validating webhook only the RayJob and
  RayCluster create checks are there. Only cpu, memory, nvidia.com/gpu,
  amd.com/gpu and resources a ClusterQueue covers are counted; other requests
  (ephemeral-storage, ...) are ignored instead of making the workload
  inadmissible. Flavor eligibility checks `nodeSelector` only (not node
  affinity or taints). Queue order ties within one creation second are broken
  by the order this controller first saw the Workloads. An evicted workload is
  held (`Requeued=False`) until `requeue()` unless `evict(..., requeue=True)`,
  so that tests can look at the evicted state; real Kueue requeues a preempted
  workload at once.
- FakeKubeRay: no real pods or processes; all Ray pods report `podIP`
  127.0.0.1 and every Ray job runs on the one real Ray head the test started,
  so the fake stops a Ray job where the real cluster would have died with it
  (suspension, deletion). No autoscaling, no submitter Kubernetes Job
  (K8sJobMode is submitted over HTTP like HTTPMode), no finalizer on RayJobs,
  no RayService, no deletionStrategy, no cron schedules, no auth tokens, no
  GCS fault tolerance. Like the real operator it ignores `suspend` while a
  RayJob is `Waiting` for its job id.
- Hooks and handlers stay registered after `stop()` (the server cannot
  unregister them); stopping only ends reconciliation.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import logging
import random
import re
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from datetime import datetime, timezone
from decimal import Decimal
from typing import Any, Callable, Iterable, Mapping, Optional

import yaml
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

try:  # how a hook on the test server denies a request, as a validating webhook does
    from tests.kubeapi.errors import AdmissionDenied
except ImportError:  # pragma: no cover - the server package is not there yet
    AdmissionDenied = None  # type: ignore[assignment,misc]

log = logging.getLogger(__name__)

Obj = dict[str, Any]

KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_VERSION = "v1beta2"
KUEUE_API = f"{KUEUE_GROUP}/{KUEUE_VERSION}"
RAY_GROUP = "ray.io"
RAY_VERSION = "v1"
RAY_API = f"{RAY_GROUP}/{RAY_VERSION}"

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
JOB_OWNER_GVK_ANNOTATION = "kueue.x-k8s.io/job-owner-gvk"
JOB_OWNER_NAME_ANNOTATION = "kueue.x-k8s.io/job-owner-name"

# Resources Kueue counts even when no ClusterQueue covers them (so that a
# request for an uncovered one makes the workload inadmissible).
TRACKED_RESOURCES = ("cpu", "memory", "nvidia.com/gpu", "amd.com/gpu")
GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu")

DASHBOARD_PORT = 8265
HEAD_SERVICE_PORTS = (("client", 10001), ("dashboard", DASHBOARD_PORT), ("gcs-server", 6379), ("metrics", 8080))
CLUSTER_DOMAIN = "cluster.local"
# k8s.io/apimachinery/pkg/util/rand: the alphabet of rand.String, used by KubeRay names.
_K8S_RAND_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"

REQUEST_TIMEOUT = 5.0


# --------------------------------------------------------------------------
# Small helpers: time, names, conditions, quantities
# --------------------------------------------------------------------------


def now_rfc3339() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def random_suffix(length: int = 5) -> str:
    return "".join(random.choice(_K8S_RAND_ALPHABET) for _ in range(length))


def find_condition(obj: Mapping[str, Any], cond_type: str) -> Optional[Obj]:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == cond_type:
            return cond
    return None


def condition_is_true(obj: Mapping[str, Any], cond_type: str) -> bool:
    cond = find_condition(obj, cond_type)
    return bool(cond and cond.get("status") == "True")


def set_condition(
    conditions: list[Obj], cond_type: str, status: bool, reason: str, message: str, now: Optional[str] = None
) -> list[Obj]:
    """Return `conditions` with one condition set, as meta.SetStatusCondition does.

    lastTransitionTime changes only when the status changes.
    """
    now = now or now_rfc3339()
    value = "True" if status else "False"
    out = [dict(c) for c in conditions]
    for cond in out:
        if cond.get("type") == cond_type:
            if cond.get("status") != value:
                cond["lastTransitionTime"] = now
            cond.update(status=value, reason=reason, message=message)
            return out
    out.append({"type": cond_type, "status": value, "reason": reason, "message": message, "lastTransitionTime": now})
    return out


_QUANTITY = re.compile(
    r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))([eE][+-]?[0-9]+|Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$"
)
_BINARY_SUFFIXES = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}


def parse_quantity(value: Any) -> Decimal:
    """A Kubernetes quantity ("500m", "4Gi", "1e3", 2) as an exact Decimal."""
    if isinstance(value, bool):
        raise ValueError(f"not a quantity: {value!r}")
    if isinstance(value, (int, float)):
        return Decimal(str(value))
    match = _QUANTITY.match(str(value).strip())
    if not match:
        raise ValueError(f"not a quantity: {value!r}")
    number, suffix = Decimal(match.group(1)), match.group(2) or ""
    if suffix in _BINARY_SUFFIXES:
        return number * (1024 ** _BINARY_SUFFIXES[suffix])
    if suffix in _DECIMAL_SUFFIXES:
        return number.scaleb(_DECIMAL_SUFFIXES[suffix])
    return number.scaleb(int(suffix[1:]))


def format_quantity(amount: Decimal) -> str:
    """Quantity text: "4", "500m", "4Gi", "512M" (the shortest of the binary and decimal spellings)."""
    if amount == amount.to_integral_value():
        whole = int(amount)
        candidates = [str(whole)]
        if whole:
            for suffixes, base in ((_BINARY_SUFFIXES, 1024), (_DECIMAL_SUFFIXES, 1000)):
                for suffix, power in sorted(suffixes.items(), key=lambda kv: -kv[1]):
                    step = base ** (power if base == 1024 else power // 3) if power > 0 else 0
                    if step and whole % step == 0:
                        candidates.append(f"{whole // step}{suffix}")
                        break
        return min(candidates, key=len)
    milli = amount * 1000
    if milli == milli.to_integral_value():
        return f"{int(milli)}m"
    return format(amount.normalize(), "f")


def container_requests(container: Mapping[str, Any]) -> dict[str, Decimal]:
    """Requests of one container; a resource with only a limit requests its limit (API defaulting)."""
    resources = container.get("resources") or {}
    merged = dict(resources.get("limits") or {})
    merged.update(resources.get("requests") or {})
    return {name: parse_quantity(value) for name, value in merged.items()}


def pod_requests(pod_spec: Mapping[str, Any]) -> dict[str, Decimal]:
    """Effective requests of a pod: containers and sidecars summed, other init containers as a max."""
    total: dict[str, Decimal] = {}
    init_max: dict[str, Decimal] = {}
    for container in pod_spec.get("initContainers") or []:
        for name, amount in container_requests(container).items():
            if container.get("restartPolicy") == "Always":
                total[name] = total.get(name, Decimal(0)) + amount
            else:
                init_max[name] = max(init_max.get(name, Decimal(0)), amount)
    for container in pod_spec.get("containers") or []:
        for name, amount in container_requests(container).items():
            total[name] = total.get(name, Decimal(0)) + amount
    for name, amount in init_max.items():
        total[name] = max(total.get(name, Decimal(0)), amount)
    return total


def controller_owner(obj: Mapping[str, Any]) -> Optional[Obj]:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return ref
    return None


def owner_reference(obj: Mapping[str, Any]) -> Obj:
    meta = obj["metadata"]
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def merge_patch_for(old: Any, new: Any) -> Any:
    """The JSON merge patch (RFC 7386) that turns `old` into `new`."""
    if not isinstance(old, dict) or not isinstance(new, dict):
        return new
    patch: Obj = {}
    for key in old.keys() - new.keys():
        patch[key] = None
    for key, value in new.items():
        if key not in old:
            patch[key] = value
        elif old[key] != value:
            patch[key] = merge_patch_for(old[key], value)
    return patch


# --------------------------------------------------------------------------
# Kueue decision logic (pure, unit-tested without a server)
# --------------------------------------------------------------------------


def workload_name(kind: str, owner_name: str, owner_uid: str) -> str:
    """`<lowercase kind>-<owner name>-<5 hex>`, as jobframework's GetWorkloadNameForOwnerWithGVK."""
    digest = hashlib.sha1(f"{owner_name}/{owner_uid}/{RAY_API}, Kind={kind}".encode()).hexdigest()[:5]
    prefix = f"{kind.lower()}-{owner_name}"[: 253 - 6]
    return f"{prefix}-{digest}"


def is_kueue_managed(kind: str, obj: Mapping[str, Any]) -> bool:
    """Whether Kueue's Ray integration manages this RayJob/RayCluster."""
    meta = obj.get("metadata") or {}
    if QUEUE_LABEL not in (meta.get("labels") or {}):
        return False
    owner = controller_owner(obj)
    if kind == "RayCluster" and owner and owner.get("kind") == "RayJob":
        return False  # the RayJob's Workload covers it
    spec = obj.get("spec") or {}
    if kind == "RayJob" and spec.get("clusterSelector") and not spec.get("rayClusterSpec"):
        return False
    return True


MAX_POD_SETS = 18  # jobframework.MaxPodSets


def kueue_create_errors(kind: str, obj: Mapping[str, Any]) -> list[str]:
    """Field errors of Kueue's validating webhook for a managed RayJob/RayCluster on CREATE."""
    if QUEUE_LABEL not in ((obj.get("metadata") or {}).get("labels") or {}):
        return []
    spec = obj.get("spec") or {}
    errors: list[str] = []
    if kind == "RayJob":
        if spec.get("clusterSelector") and not spec.get("rayClusterSpec"):
            return []  # not managed
        if not spec.get("rayClusterSpec"):
            return [
                "spec.rayClusterSpec: Required value: "
                "rayClusterSpec is required for Kueue-managed jobs that don't use clusterSelector"
            ]
        if not spec.get("shutdownAfterJobFinishes"):
            errors.append(
                "spec.shutdownAfterJobFinishes: Invalid value: false: "
                "a kueue managed job should delete the cluster after finishing"
            )
        if spec.get("clusterSelector"):
            errors.append(
                f"spec.clusterSelector: Invalid value: {_go_map(spec['clusterSelector'])}: "
                "a kueue managed job should not use an existing cluster"
            )
    cluster = ray_cluster_spec_of(kind, obj)
    if cluster.get("enableInTreeAutoscaling"):
        errors.append(
            "spec.rayClusterSpec.enableInTreeAutoscaling: Invalid value: true: "
            "a kueue managed job should not use autoscaling"
        )
    groups = cluster.get("workerGroupSpecs") or []
    if len(groups) > MAX_POD_SETS - 1:
        errors.append(
            f"spec.rayClusterSpec.workerGroupSpecs: Too many: {len(groups)}: must have at most {MAX_POD_SETS - 1} items"
        )
    return errors


def _go_map(value: Mapping[str, Any]) -> str:
    return "map[" + " ".join(f"{k}:{v}" for k, v in sorted(value.items())) + "]"


def ray_cluster_spec_of(kind: str, job: Mapping[str, Any]) -> Obj:
    spec = job.get("spec") or {}
    return (spec.get("rayClusterSpec") or {}) if kind == "RayJob" else dict(spec)


def _podset_template(template: Mapping[str, Any]) -> Obj:
    meta = template.get("metadata") or {}
    out: Obj = {"spec": copy.deepcopy(template.get("spec") or {})}
    kept = {k: copy.deepcopy(meta[k]) for k in ("labels", "annotations") if meta.get(k)}
    if kept:
        out["metadata"] = kept
    return out


def default_submitter_template(cluster_spec: Mapping[str, Any]) -> Obj:
    """KubeRay's GetDefaultSubmitterTemplate: the head image, 500m/200Mi requested, 1/1Gi limits."""
    head_containers = (((cluster_spec.get("headGroupSpec") or {}).get("template") or {}).get("spec") or {}).get(
        "containers"
    ) or [{}]
    return {
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "ray-job-submitter",
                    "image": head_containers[0].get("image", "rayproject/ray"),
                    "resources": {
                        "requests": {"cpu": "500m", "memory": "200Mi"},
                        "limits": {"cpu": "1", "memory": "1Gi"},
                    },
                }
            ],
        }
    }


def ray_podsets(kind: str, job: Mapping[str, Any]) -> list[Obj]:
    """Workload podSets for a RayJob/RayCluster: head, one per worker group, submitter in K8sJobMode."""
    cluster = ray_cluster_spec_of(kind, job)
    podsets = [
        {
            "name": "head",
            "count": 1,
            "template": _podset_template((cluster.get("headGroupSpec") or {}).get("template") or {}),
        }
    ]
    for group in cluster.get("workerGroupSpecs") or []:
        count = int(group.get("replicas", 0)) * int(group.get("numOfHosts", 1) or 1)
        podsets.append(
            {"name": group["groupName"], "count": count, "template": _podset_template(group.get("template") or {})}
        )
    spec = job.get("spec") or {}
    if kind == "RayJob" and spec.get("submissionMode", "K8sJobMode") == "K8sJobMode":
        template = spec.get("submitterPodTemplate")
        podsets.append(
            {
                "name": "submitter",
                "count": 1,
                "template": _podset_template(template) if template else default_submitter_template(cluster),
            }
        )
    return podsets


@dataclass(frozen=True)
class FlavorFit:
    """The outcome of assigning flavors to a workload's podSets in one ClusterQueue."""

    pod_set_assignments: Optional[list[Obj]]  # status.admission.podSetAssignments when it fits
    reason: str = ""  # granular QuotaReserved=False reason when it does not fit
    message: str = ""
    usage: dict[tuple[str, str], Decimal] = field(default_factory=dict)  # (flavor, resource) -> amount

    @property
    def fits(self) -> bool:
        return self.pod_set_assignments is not None


_REASON_SEVERITY = {"WaitingForQuota": 1, "ExceedsMaxQuota": 2, "NoMatchingFlavor": 3}


def _worse(a: str, b: str) -> str:
    return a if _REASON_SEVERITY.get(a, 0) >= _REASON_SEVERITY.get(b, 0) else b


def _selector_matches(node_selector: Mapping[str, str], node_labels: Mapping[str, str]) -> bool:
    return all(node_selector[k] == v for k, v in node_labels.items() if k in node_selector)


def assign_flavors(
    cluster_queue: Mapping[str, Any],
    podsets: list[Mapping[str, Any]],
    used: Mapping[tuple[str, str], Decimal],
    flavor_node_labels: Optional[Mapping[str, Mapping[str, str]]] = None,
) -> FlavorFit:
    """Pick a flavor per podSet and resource group, first fit in the ClusterQueue's flavor order.

    `used` is what admitted workloads already hold per (flavor, resource).
    Messages are Kueue's flavorassigner messages.
    """
    flavor_node_labels = flavor_node_labels or {}
    groups = (cluster_queue.get("spec") or {}).get("resourceGroups") or []
    covered = {r for g in groups for r in g.get("coveredResources") or []}
    assumed: dict[tuple[str, str], Decimal] = {}
    assignments: list[Obj] = []
    for podset in podsets:
        name, count = podset["name"], int(podset.get("count", 1))
        template_spec = (podset.get("template") or {}).get("spec") or {}
        per_pod = pod_requests(template_spec)
        requests = {
            r: q * count
            for r, q in sorted(per_pod.items())
            if q > 0 and count > 0 and (r in TRACKED_RESOURCES or r in covered)
        }
        prefix = f"couldn't assign flavors to pod set {name}: "
        for resource in requests:
            if resource not in covered:
                return FlavorFit(None, "NoMatchingFlavor", f"{prefix}resource {resource} unavailable in ClusterQueue")
        chosen_flavors: dict[str, str] = {}
        for group in groups:
            group_requests = {r: q for r, q in requests.items() if r in (group.get("coveredResources") or [])}
            if not group_requests:
                continue
            reasons: list[str] = []
            reason = ""
            chosen = None
            for flavor in group.get("flavors") or []:
                flavor_name = flavor["name"]
                selector = template_spec.get("nodeSelector") or {}
                if not _selector_matches(selector, flavor_node_labels.get(flavor_name) or {}):
                    reasons.append(f"flavor {flavor_name} doesn't match node affinity")
                    reason = _worse(reason, "NoMatchingFlavor")
                    continue
                nominal = {q["name"]: parse_quantity(q["nominalQuota"]) for q in flavor.get("resources") or []}
                fits = True
                for resource, amount in group_requests.items():
                    before = assumed.get((flavor_name, resource), Decimal(0))
                    wanted = before + amount
                    capacity = nominal.get(resource, Decimal(0))
                    available = capacity - used.get((flavor_name, resource), Decimal(0))
                    if wanted > capacity:
                        fits = False
                        reason = _worse(reason, "ExceedsMaxQuota")
                        reasons.append(
                            f"insufficient quota for {resource} in flavor {flavor_name}, previously considered "
                            f"podsets requests ({format_quantity(before)}) + current podset request "
                            f"({format_quantity(amount)}) > maximum capacity ({format_quantity(capacity)})"
                        )
                    elif wanted > available:
                        fits = False
                        reason = _worse(reason, "WaitingForQuota")
                        reasons.append(
                            f"insufficient unused quota for {resource} in flavor {flavor_name}, "
                            f"{format_quantity(wanted - available)} more needed"
                        )
                if fits:
                    chosen = flavor_name
                    break
            if chosen is None:
                return FlavorFit(None, reason or "NoMatchingFlavor", prefix + ", ".join(reasons))
            for resource, amount in group_requests.items():
                chosen_flavors[resource] = chosen
                assumed[(chosen, resource)] = assumed.get((chosen, resource), Decimal(0)) + amount
        assignments.append(
            {
                "name": name,
                "flavors": chosen_flavors,
                "resourceUsage": {r: format_quantity(q) for r, q in requests.items()},
                "count": count,
            }
        )
    return FlavorFit(assignments, usage=assumed)


def admission_usage(workload: Mapping[str, Any]) -> dict[tuple[str, str], Decimal]:
    """(flavor, resource) -> amount held by a workload's status.admission."""
    usage: dict[tuple[str, str], Decimal] = {}
    admission = (workload.get("status") or {}).get("admission") or {}
    for psa in admission.get("podSetAssignments") or []:
        for resource, flavor in (psa.get("flavors") or {}).items():
            amount = parse_quantity((psa.get("resourceUsage") or {}).get(resource, 0))
            usage[(flavor, resource)] = usage.get((flavor, resource), Decimal(0)) + amount
    return usage


def queue_order_key(workload: Mapping[str, Any]) -> tuple[int, str]:
    """Kueue's queue order: higher priority first, then older first."""
    meta = workload.get("metadata") or {}
    return (-int((workload.get("spec") or {}).get("priority") or 0), meta.get("creationTimestamp") or "")


def _revision(obj: Mapping[str, Any]) -> int:
    """The resourceVersion as a number where the server uses numbers (etcd does), else 0."""
    value = (obj.get("metadata") or {}).get("resourceVersion") or ""
    return int(value) if value.isdigit() else 0


def rayjob_finished(job: Mapping[str, Any]) -> Optional[tuple[bool, str]]:
    """(success, message) when Kueue considers the RayJob finished, else None (Kueue's RayJob.Finished)."""
    status = job.get("status") or {}
    deployment = status.get("jobDeploymentStatus", "")
    finished = deployment in ("Complete", "Failed") or (
        deployment == "ValidationFailed" and not status.get("rayClusterName")
    )
    if not finished:
        return None
    return status.get("jobStatus") == "SUCCEEDED", status.get("message") or ""


def job_is_active(kind: str, job: Mapping[str, Any]) -> bool:
    """Kueue's IsActive: whether the job still runs pods (so quota cannot be released yet)."""
    status = job.get("status") or {}
    if kind == "RayJob":
        return status.get("jobDeploymentStatus", "") not in ("", "Suspended")
    return status.get("state", "") not in ("", "suspended")


# --------------------------------------------------------------------------
# KubeRay decision logic (pure)
# --------------------------------------------------------------------------


def validate_rayjob(job: Mapping[str, Any]) -> Optional[str]:
    """The subset of KubeRay's ValidateRayJobSpec that raybridge can trip over; the error text or None."""
    spec = job.get("spec") or {}
    shutdown = bool(spec.get("shutdownAfterJobFinishes"))
    if spec.get("suspend") and not shutdown:
        return (
            "The RayJob spec is invalid: a RayJob with shutdownAfterJobFinishes set to false "
            "is not allowed to be suspended"
        )
    if int(spec.get("ttlSecondsAfterFinished") or 0) < 0:
        return "The RayJob spec is invalid: TTLSecondsAfterFinished must be a non-negative integer"
    if not shutdown and int(spec.get("ttlSecondsAfterFinished") or 0) > 0:
        return (
            "The RayJob spec is invalid: a RayJob with shutdownAfterJobFinishes set to false "
            "cannot have TTLSecondsAfterFinished"
        )
    selector_mode = bool(spec.get("clusterSelector"))
    if spec.get("suspend") and selector_mode:
        return "The RayJob spec is invalid: the ClusterSelector mode doesn't support the suspend operation"
    if not spec.get("rayClusterSpec") and not selector_mode:
        return "The RayJob spec is invalid: one of RayClusterSpec or ClusterSelector must be set"
    backoff = spec.get("backoffLimit")
    if spec.get("submissionMode") == "InteractiveMode" and backoff is not None and int(backoff) > 0:
        return "The RayJob spec is invalid: BackoffLimit is incompatible with InteractiveMode"
    if spec.get("runtimeEnvYAML"):
        try:
            yaml.safe_load(spec["runtimeEnvYAML"])
        except yaml.YAMLError as exc:
            return f"failed to unmarshal RuntimeEnvYAML: {exc}"
    deadline = spec.get("activeDeadlineSeconds")
    if deadline is not None and int(deadline) <= 0:
        return "The RayJob spec is invalid: activeDeadlineSeconds must be a positive integer"
    if backoff is not None and int(backoff) < 0:
        return "The RayJob spec is invalid: backoffLimit must be a positive integer"
    return None


def head_service_name(cluster: Mapping[str, Any]) -> str:
    head = (cluster.get("spec") or {}).get("headGroupSpec") or {}
    override = ((head.get("headService") or {}).get("metadata") or {}).get("name")
    return override or f"{cluster['metadata']['name']}-head-svc"


def _seconds_since(timestamp: Optional[str]) -> float:
    if not timestamp:
        return 0.0
    then = datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    return (datetime.now(timezone.utc) - then).total_seconds()


# --------------------------------------------------------------------------
# Talking to the server through the official client
# --------------------------------------------------------------------------


class _Api:
    """Thin dict-in, dict-out wrapper over CustomObjectsApi/CoreV1Api."""

    def __init__(self, api_client: k8s.ApiClient) -> None:
        self.api_client = api_client
        self.custom = k8s.CustomObjectsApi(api_client)
        self.core = k8s.CoreV1Api(api_client)

    # custom objects -------------------------------------------------------
    def list(self, group: str, version: str, plural: str, namespace: Optional[str] = None) -> list[Obj]:
        if namespace:
            result = self.custom.list_namespaced_custom_object(
                group, version, namespace, plural, _request_timeout=REQUEST_TIMEOUT
            )
        else:
            result = self.custom.list_cluster_custom_object(group, version, plural, _request_timeout=REQUEST_TIMEOUT)
        return list(result.get("items") or [])

    def get(self, group: str, version: str, plural: str, name: str, namespace: Optional[str]) -> Optional[Obj]:
        try:
            if namespace:
                return self.custom.get_namespaced_custom_object(
                    group, version, namespace, plural, name, _request_timeout=REQUEST_TIMEOUT
                )
            return self.custom.get_cluster_custom_object(group, version, plural, name, _request_timeout=REQUEST_TIMEOUT)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def create(self, group: str, version: str, plural: str, obj: Obj) -> Obj:
        namespace = obj["metadata"].get("namespace")
        if namespace:
            return self.custom.create_namespaced_custom_object(
                group, version, namespace, plural, obj, _request_timeout=REQUEST_TIMEOUT
            )
        return self.custom.create_cluster_custom_object(group, version, plural, obj, _request_timeout=REQUEST_TIMEOUT)

    def patch(self, group: str, version: str, plural: str, obj: Mapping[str, Any], body: Obj) -> Obj:
        meta = obj["metadata"]
        if meta.get("namespace"):
            return self.custom.patch_namespaced_custom_object(
                group, version, meta["namespace"], plural, meta["name"], body, _request_timeout=REQUEST_TIMEOUT
            )
        return self.custom.patch_cluster_custom_object(
            group, version, plural, meta["name"], body, _request_timeout=REQUEST_TIMEOUT
        )

    def replace(self, group: str, version: str, plural: str, obj: Obj) -> Obj:
        meta = obj["metadata"]
        if meta.get("namespace"):
            return self.custom.replace_namespaced_custom_object(
                group, version, meta["namespace"], plural, meta["name"], obj, _request_timeout=REQUEST_TIMEOUT
            )
        return self.custom.replace_cluster_custom_object(
            group, version, plural, meta["name"], obj, _request_timeout=REQUEST_TIMEOUT
        )

    def patch_status(self, group: str, version: str, plural: str, obj: Obj, new_status: Obj) -> Obj:
        """Merge-patch status from what `obj` has to `new_status`, failing with 409 if `obj` is stale."""
        patch = merge_patch_for(obj.get("status") or {}, new_status)
        if not patch:
            return obj
        meta = obj["metadata"]
        # The resourceVersion makes it a conditional write, as a controller's Status().Update() is.
        body = {"metadata": {"resourceVersion": meta.get("resourceVersion")}, "status": patch}
        if meta.get("namespace"):
            return self.custom.patch_namespaced_custom_object_status(
                group, version, meta["namespace"], plural, meta["name"], body, _request_timeout=REQUEST_TIMEOUT
            )
        return self.custom.patch_cluster_custom_object_status(
            group, version, plural, meta["name"], body, _request_timeout=REQUEST_TIMEOUT
        )

    def delete(self, group: str, version: str, plural: str, name: str, namespace: Optional[str]) -> None:
        try:
            if namespace:
                self.custom.delete_namespaced_custom_object(
                    group,
                    version,
                    namespace,
                    plural,
                    name,
                    propagation_policy="Background",
                    _request_timeout=REQUEST_TIMEOUT,
                )
            else:
                self.custom.delete_cluster_custom_object(
                    group, version, plural, name, propagation_policy="Background", _request_timeout=REQUEST_TIMEOUT
                )
        except ApiException as exc:
            if exc.status != 404:
                raise

    # core -----------------------------------------------------------------
    def _plain(self, model: Any) -> Obj:
        return self.api_client.sanitize_for_serialization(model)

    def list_pods(self, namespace: str, label_selector: str) -> list[Obj]:
        result = self.core.list_namespaced_pod(
            namespace, label_selector=label_selector, _request_timeout=REQUEST_TIMEOUT
        )
        return [self._plain(p) for p in result.items or []]

    def create_pod(self, pod: Obj) -> Obj:
        created = self.core.create_namespaced_pod(
            pod["metadata"]["namespace"], k8s.V1Pod.from_dict(pod), _request_timeout=REQUEST_TIMEOUT
        )
        return self._plain(created)

    def patch_pod_status(self, namespace: str, name: str, status: Obj) -> None:
        self.core.patch_namespaced_pod_status(
            name,
            namespace,
            {"status": status},
            _content_type="application/merge-patch+json",
            _request_timeout=REQUEST_TIMEOUT,
        )

    def delete_pod(self, namespace: str, name: str) -> None:
        try:
            self.core.delete_namespaced_pod(name, namespace, grace_period_seconds=0, _request_timeout=REQUEST_TIMEOUT)
        except ApiException as exc:
            if exc.status != 404:
                raise

    def get_service(self, namespace: str, name: str) -> Optional[Obj]:
        try:
            return self._plain(self.core.read_namespaced_service(name, namespace, _request_timeout=REQUEST_TIMEOUT))
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def create_service(self, service: Obj) -> Obj:
        created = self.core.create_namespaced_service(
            service["metadata"]["namespace"], k8s.V1Service.from_dict(service), _request_timeout=REQUEST_TIMEOUT
        )
        return self._plain(created)

    def patch_service(self, namespace: str, name: str, body: Obj) -> None:
        self.core.patch_namespaced_service(
            name, namespace, body, _content_type="application/merge-patch+json", _request_timeout=REQUEST_TIMEOUT
        )


# --------------------------------------------------------------------------
# The polling loop shared by both controllers
# --------------------------------------------------------------------------


def _ident(item: Any) -> str:
    """namespace/name of the first object in `item` (an object or a tuple holding one)."""
    for candidate in item if isinstance(item, tuple) else (item,):
        if isinstance(candidate, dict) and "metadata" in candidate:
            meta = candidate["metadata"]
            return f"{meta.get('namespace', '')}/{meta.get('name', '')}".lstrip("/")
    return repr(item)[:80]


class _PollingController:
    """A daemon thread running `_reconcile()` every `interval` seconds until `stop()`."""

    name = "controller"

    def __init__(self, server: Any, *, interval: float = 0.05) -> None:
        self._server = server
        self._interval = interval
        self._api = _Api(server.api_client())
        self._lock = threading.RLock()
        self._stopping = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._passes = 0
        self._pass_done = threading.Condition()
        self._last_error: Optional[str] = None

    def start(self) -> "_PollingController":
        """Start reconciling (again, after `stop()`); idempotent while running."""
        if self._thread is not None and self._thread.is_alive():
            return self
        if self._thread is not None:  # restarted: a stopped controller closed its client
            self._api = _Api(self._server.api_client())
        self._stopping.clear()
        self._register()
        self._thread = threading.Thread(target=self._run, name=f"fake-{self.name}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop reconciling; returns once the current pass has ended (a few seconds at most)."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=REQUEST_TIMEOUT + 1)
        close = getattr(self._api.api_client, "close", None)
        if callable(close):
            try:
                close()
            except Exception:  # pragma: no cover - best effort
                pass

    def __enter__(self) -> "_PollingController":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def wait_passes(self, count: int = 2, timeout: float = 10.0) -> None:
        """Block until `count` more full reconcile passes have run (to let state settle)."""
        with self._pass_done:
            target = self._passes + count
            if not self._pass_done.wait_for(lambda: self._passes >= target, timeout=timeout):
                raise TimeoutError(f"fake {self.name} did not complete {count} passes in {timeout}s")

    @property
    def last_error(self) -> Optional[str]:
        """The last reconcile error, for test diagnostics."""
        return self._last_error

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                with self._lock:
                    self._reconcile()
            except Exception as exc:  # never die: log and retry on the next pass
                self._note_error(f"pass failed: {exc!r}")
            with self._pass_done:
                self._passes += 1
                self._pass_done.notify_all()
            self._stopping.wait(self._interval)

    def _note_error(self, message: str) -> None:
        if message != self._last_error:
            log.warning("fake %s: %s", self.name, message, exc_info=log.isEnabledFor(logging.DEBUG))
        self._last_error = message

    def _each(self, items: Iterable[Any], fn: Callable[[Any], None], what: str) -> None:
        """Run `fn` on every item; one failing item does not stop the others."""
        for item in items:
            try:
                fn(item)
            except ApiException as exc:
                if exc.status in (404, 409):  # gone or changed during the pass; the next pass sees why
                    log.debug("fake %s: %s %s: %s", self.name, what, _ident(item), exc.reason)
                else:
                    self._note_error(f"{what} {_ident(item)}: {exc.status} {exc.reason}: {exc.body}")
            except Exception as exc:
                self._note_error(f"{what} {_ident(item)}: {exc!r}")

    def _register(self) -> None:
        """Register webhooks and aggregated APIs; called by every `start()`."""

    def _reconcile(self) -> None:
        raise NotImplementedError


# --------------------------------------------------------------------------
# Kueue
# --------------------------------------------------------------------------

_RAY_PLURALS = {"RayJob": "rayjobs", "RayCluster": "rayclusters"}


@dataclass
class _QueueView:
    """What one pass learned about the queues; read by the visibility API handler."""

    pending_by_cq: dict[str, list[Obj]] = field(default_factory=dict)
    cluster_queues: set[str] = field(default_factory=set)
    local_queues: dict[tuple[str, str], str] = field(default_factory=dict)  # (ns, lq) -> cq


class FakeKueue(_PollingController):
    """Kueue's webhook, job reconciler, scheduler and visibility API for RayJob and RayCluster.

    `namespace_default_queue`: the LocalQueue name that Kueue's LocalQueue
    defaulting uses (real Kueue: "default"); None turns defaulting off.
    `granular_reasons`: use the UnadmittedWorkloadsObservability reasons
    (WaitingForQuota, ExceedsMaxQuota, NoMatchingFlavor, Misconfigured) instead
    of the default Pending/Inadmissible.
    """

    name = "kueue"

    def __init__(
        self,
        server: Any,
        *,
        namespace_default_queue: Optional[str] = None,
        granular_reasons: bool = False,
        interval: float = 0.05,
    ) -> None:
        super().__init__(server, interval=interval)
        self._default_queue = namespace_default_queue
        self._granular = granular_reasons
        self._view = _QueueView()
        self._registered = False
        self._held: set[tuple[str, str]] = set()  # evicted workloads waiting for requeue()
        self._arrival: dict[str, int] = {}  # Workload uid -> order first seen; breaks timestamp ties
        self._arrivals = itertools.count()

    # ---- webhook and visibility API -------------------------------------
    def _register(self) -> None:
        if self._registered:
            return
        self._registered = True
        for kind in ("RayJob", "RayCluster"):
            self._server.add_mutating_hook(RAY_GROUP, kind, self._make_webhook(kind))
        prefix = r"^/apis/visibility\.kueue\.x-k8s\.io/(v1beta1|v1beta2)"
        self._server.add_handler("GET", prefix + r"/clusterqueues/([^/]+)/pendingworkloads/?$", self._pending_in_cq)
        self._server.add_handler(
            "GET", prefix + r"/namespaces/([^/]+)/localqueues/([^/]+)/pendingworkloads/?$", self._pending_in_lq
        )

    def _make_webhook(self, kind: str) -> Callable[[Obj, str], None]:
        def webhook(obj: Obj, operation: str) -> None:
            meta = obj.setdefault("metadata", {})
            labels = meta.get("labels") or {}
            namespace = meta.get("namespace") or "default"
            if (
                operation == "CREATE"
                and QUEUE_LABEL not in labels
                and self._default_queue
                and (namespace, self._default_queue) in self._view.local_queues
                and not controller_owner(obj)
            ):
                meta.setdefault("labels", {})[QUEUE_LABEL] = self._default_queue
            if operation == "CREATE" and is_kueue_managed(kind, obj):
                obj.setdefault("spec", {})["suspend"] = True
                errors = kueue_create_errors(kind, obj)
                if errors and AdmissionDenied is not None:
                    message = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
                    raise AdmissionDenied(f"v{kind.lower()}.kb.io", message)

        return webhook

    def _pending_in_cq(self, match: re.Match, query: dict[str, list[str]], body: Optional[bytes]) -> tuple[int, Obj]:
        version, cq = match.group(1), match.group(2)
        view = self._view
        if cq not in view.cluster_queues:
            return 404, _not_found("clusterqueues", cq)
        return 200, _pending_summary(version, view.pending_by_cq.get(cq, []), query, lambda wl: True)

    def _pending_in_lq(self, match: re.Match, query: dict[str, list[str]], body: Optional[bytes]) -> tuple[int, Obj]:
        version, namespace, lq = match.group(1), match.group(2), match.group(3)
        view = self._view
        cq = view.local_queues.get((namespace, lq))
        if cq is None:
            return 404, _not_found("localqueues", lq)
        items = view.pending_by_cq.get(cq, [])
        return 200, _pending_summary(
            version, items, query, lambda wl: wl["namespace"] == namespace and wl["localQueueName"] == lq
        )

    # ---- test knobs -----------------------------------------------------
    def evict(
        self,
        namespace: str,
        workload_name: str,
        reason: str = "Preempted",
        message: str = "Preempted to accommodate a higher priority Workload",
        *,
        requeue: bool = False,
    ) -> None:
        """Evict an admitted workload as Kueue's preemption does.

        Sets `Evicted=True` (and `Preempted=True` for reason Preempted) and
        suspends the job; once the job is no longer active, the reconcile
        pass clears the admission and releases the quota. With requeue=False
        the workload then waits (`Requeued=False`) until `requeue()`.
        """
        with self._lock:
            wl = self._api.get(KUEUE_GROUP, KUEUE_VERSION, "workloads", workload_name, namespace)
            if wl is None:
                raise LookupError(f"workload {namespace}/{workload_name} not found")
            status = copy.deepcopy(wl.get("status") or {})
            now = now_rfc3339()
            conds = set_condition(status.get("conditions") or [], "Evicted", True, reason, message, now)
            if reason == "Preempted":
                conds = set_condition(conds, "Preempted", True, "InClusterQueue", message, now)
            status["conditions"] = conds
            evictions = list((status.get("schedulingStats") or {}).get("evictions") or [])
            cause = "InClusterQueue" if reason == "Preempted" else ""
            for entry in evictions:
                if entry.get("reason") == reason and entry.get("underlyingCause") == cause:
                    entry["count"] = int(entry.get("count") or 0) + 1
                    break
            else:
                evictions.append({"reason": reason, "underlyingCause": cause, "count": 1})
            status["schedulingStats"] = {**(status.get("schedulingStats") or {}), "evictions": evictions}
            self._api.patch_status(KUEUE_GROUP, KUEUE_VERSION, "workloads", wl, status)
            if requeue:
                self._held.discard((namespace, workload_name))
            else:
                self._held.add((namespace, workload_name))
            job = self._owner_job(wl)
            if job is not None:
                self._stop_job(job[0], job[1], wl)

    def requeue(self, namespace: str, workload_name: str) -> None:
        """Let a held evicted workload compete for quota again (`Requeued=True`)."""
        with self._lock:
            self._held.discard((namespace, workload_name))
            wl = self._api.get(KUEUE_GROUP, KUEUE_VERSION, "workloads", workload_name, namespace)
            if wl is None:
                return
            status = copy.deepcopy(wl.get("status") or {})
            status["conditions"] = set_condition(
                status.get("conditions") or [], "Requeued", True, "BackoffFinished", "The workload backoff was finished"
            )
            self._api.patch_status(KUEUE_GROUP, KUEUE_VERSION, "workloads", wl, status)

    # ---- reconcile ------------------------------------------------------
    def _reconcile(self) -> None:
        api = self._api
        cluster_queues = {cq["metadata"]["name"]: cq for cq in api.list(KUEUE_GROUP, KUEUE_VERSION, "clusterqueues")}
        local_queues = {
            (lq["metadata"]["namespace"], lq["metadata"]["name"]): lq
            for lq in api.list(KUEUE_GROUP, KUEUE_VERSION, "localqueues")
        }
        flavor_labels = {
            rf["metadata"]["name"]: (rf.get("spec") or {}).get("nodeLabels") or {}
            for rf in api.list(KUEUE_GROUP, KUEUE_VERSION, "resourceflavors")
        }
        self._view = _QueueView(
            pending_by_cq=self._view.pending_by_cq,
            cluster_queues=set(cluster_queues),
            local_queues={k: (lq.get("spec") or {}).get("clusterQueue", "") for k, lq in local_queues.items()},
        )
        jobs: dict[str, tuple[str, Obj]] = {}  # uid -> (kind, job)
        for kind, plural in _RAY_PLURALS.items():
            for job in api.list(RAY_GROUP, RAY_VERSION, plural):
                if is_kueue_managed(kind, job) and not job["metadata"].get("deletionTimestamp"):
                    jobs[job["metadata"]["uid"]] = (kind, job)
        workloads: dict[str, Obj] = {}  # job uid -> workload
        for wl in api.list(KUEUE_GROUP, KUEUE_VERSION, "workloads"):
            owner = controller_owner(wl)
            if owner and owner.get("uid") in jobs and not wl["metadata"].get("deletionTimestamp"):
                workloads[owner["uid"]] = wl

        for wl in sorted(workloads.values(), key=queue_order_key):
            self._arrival.setdefault(wl["metadata"]["uid"], next(self._arrivals))
        missing = [(kind, job) for uid, (kind, job) in jobs.items() if uid not in workloads]
        missing.sort(key=lambda item: (item[1]["metadata"].get("creationTimestamp") or "", _revision(item[1])))
        self._each(missing, lambda item: self._create_workload(item[0], item[1], workloads), "creating workload for")
        live = {wl["metadata"]["uid"] for wl in workloads.values()}
        self._arrival = {uid: n for uid, n in self._arrival.items() if uid in live}
        self._each(
            list(workloads.items()),
            lambda item: self._sync_workload(item[1], *jobs[item[0]], workloads),
            "syncing workload",
        )
        self._schedule(workloads, jobs, cluster_queues, local_queues, flavor_labels)
        self._each(
            list(workloads.items()), lambda item: self._sync_job(item[1], *jobs[item[0]]), "syncing job of workload"
        )
        self._update_queue_statuses(workloads.values(), cluster_queues, local_queues)

    def _owner_job(self, wl: Obj) -> Optional[tuple[str, Obj]]:
        owner = controller_owner(wl)
        if not owner or owner.get("kind") not in _RAY_PLURALS:
            return None
        job = self._api.get(
            RAY_GROUP, RAY_VERSION, _RAY_PLURALS[owner["kind"]], owner["name"], wl["metadata"]["namespace"]
        )
        return (owner["kind"], job) if job else None

    def _priority(self, job: Obj) -> tuple[int, Optional[Obj]]:
        name = (job["metadata"].get("labels") or {}).get(PRIORITY_LABEL)
        if not name:
            return 0, None
        wpc = self._api.get(KUEUE_GROUP, KUEUE_VERSION, "workloadpriorityclasses", name, None)
        ref = {"group": KUEUE_GROUP, "kind": "WorkloadPriorityClass", "name": name}
        return (int(wpc.get("value") or 0) if wpc else 0), ref

    def _create_workload(self, kind: str, job: Obj, workloads: dict[str, Obj]) -> None:
        if kind == "RayJob" and rayjob_finished(job):
            return
        meta = job["metadata"]
        priority, priority_ref = self._priority(job)
        spec: Obj = {"queueName": meta["labels"][QUEUE_LABEL], "podSets": ray_podsets(kind, job), "priority": priority}
        if priority_ref:
            spec["priorityClassRef"] = priority_ref
        wl = {
            "apiVersion": KUEUE_API,
            "kind": "Workload",
            "metadata": {
                "name": workload_name(kind, meta["name"], meta["uid"]),
                "namespace": meta["namespace"],
                "labels": {JOB_UID_LABEL: meta["uid"]},
                "annotations": {
                    JOB_OWNER_GVK_ANNOTATION: f"{RAY_API}, Kind={kind}",
                    JOB_OWNER_NAME_ANNOTATION: meta["name"],
                },
                "ownerReferences": [owner_reference(job)],
            },
            "spec": spec,
        }
        if not (job.get("spec") or {}).get("suspend", False):
            # A job that runs without a Workload is stopped first (Kueue's job reconciler).
            self._api.patch(RAY_GROUP, RAY_VERSION, _RAY_PLURALS[kind], job, {"spec": {"suspend": True}})
        created = self._api.create(KUEUE_GROUP, KUEUE_VERSION, "workloads", wl)
        self._arrival[created["metadata"]["uid"]] = next(self._arrivals)
        workloads[meta["uid"]] = created

    def _sync_workload(self, wl: Obj, kind: str, job: Obj, workloads: dict[str, Obj]) -> None:
        """Finished, and the end of an eviction (quota goes back once the job is inactive)."""
        status = copy.deepcopy(wl.get("status") or {})
        conds = status.get("conditions") or []
        key = (wl["metadata"]["namespace"], wl["metadata"]["name"])
        if condition_is_true(wl, "Finished"):
            return
        finished = rayjob_finished(job) if kind == "RayJob" else None
        if finished is not None:
            success, message = finished
            status["conditions"] = set_condition(
                conds,
                "Finished",
                True,
                "Succeeded" if success else "Failed",
                message or ("Job finished successfully" if success else "Job failed"),
            )
        elif status.get("admission") and condition_is_true(wl, "Evicted"):
            if (job.get("spec") or {}).get("suspend") is not True:
                self._stop_job(kind, job, wl)
            if job_is_active(kind, job):
                return  # quota is released only once the job's pods are gone
            message = (find_condition(wl, "Evicted") or {}).get("message", "")
            status.pop("admission", None)
            conds = set_condition(conds, "QuotaReserved", False, "Pending", message)
            conds = set_condition(conds, "Admitted", False, "NoReservation", "The workload has no reservation")
            evicted_reason = (find_condition(wl, "Evicted") or {}).get("reason", "Evicted")
            held = key in self._held
            status["conditions"] = set_condition(conds, "Requeued", not held, evicted_reason, message)
        else:
            return
        workloads[job["metadata"]["uid"]] = self._api.patch_status(KUEUE_GROUP, KUEUE_VERSION, "workloads", wl, status)

    def _schedule(
        self,
        workloads: dict[str, Obj],
        jobs: dict[str, tuple[str, Obj]],
        cluster_queues: dict[str, Obj],
        local_queues: dict[tuple[str, str], Obj],
        flavor_labels: dict[str, dict[str, str]],
    ) -> None:
        used: dict[str, dict[tuple[str, str], Decimal]] = {name: {} for name in cluster_queues}
        pending: dict[str, list[tuple[str, Obj]]] = {name: [] for name in cluster_queues}
        for uid, wl in workloads.items():
            status = wl.get("status") or {}
            if condition_is_true(wl, "Finished"):
                continue
            if status.get("admission"):
                cq_usage = used.setdefault(status["admission"].get("clusterQueue", ""), {})
                for key, amount in admission_usage(wl).items():
                    cq_usage[key] = cq_usage.get(key, Decimal(0)) + amount
                continue
            if (wl.get("spec") or {}).get("active") is False:
                continue
            requeued = find_condition(wl, "Requeued")
            if requeued is not None and requeued.get("status") == "False":
                continue
            lq_name = (wl.get("spec") or {}).get("queueName", "")
            lq = local_queues.get((wl["metadata"]["namespace"], lq_name))
            if lq is None:
                self._set_pending(
                    uid, workloads, "Inadmissible", f"LocalQueue {lq_name} doesn't exist", granular="Misconfigured"
                )
                continue
            cq_name = (lq.get("spec") or {}).get("clusterQueue", "")
            if cq_name not in cluster_queues:
                self._set_pending(
                    uid, workloads, "Inadmissible", f"ClusterQueue {cq_name} doesn't exist", granular="Misconfigured"
                )
                continue
            pending[cq_name].append((uid, wl))

        new_pending: dict[str, list[Obj]] = {}
        for cq_name, entries in pending.items():
            cq = cluster_queues[cq_name]
            strict = (cq.get("spec") or {}).get("queueingStrategy") == "StrictFIFO"
            entries.sort(key=lambda e: (queue_order_key(e[1]), self._arrival.get(e[1]["metadata"]["uid"], 0)))
            still_pending: list[tuple[str, Obj]] = []
            blocked = False
            for uid, wl in entries:
                fit = None if blocked else assign_flavors(cq, wl["spec"]["podSets"], used[cq_name], flavor_labels)
                if fit is not None and fit.fits:
                    self._admit(uid, workloads, cq_name, fit)
                    for key, amount in fit.usage.items():
                        used[cq_name][key] = used[cq_name].get(key, Decimal(0)) + amount
                    continue
                if fit is not None:
                    self._set_pending(uid, workloads, "Pending", fit.message, granular=fit.reason)
                    blocked = strict
                still_pending.append((uid, workloads[uid]))
            new_pending[cq_name] = [self._pending_item(wl) for _, wl in still_pending]
        self._view.pending_by_cq = new_pending

    @staticmethod
    def _pending_item(wl: Obj) -> Obj:
        meta = wl["metadata"]
        return {
            "name": meta["name"],
            "namespace": meta["namespace"],
            "creationTimestamp": meta.get("creationTimestamp"),
            "ownerReferences": copy.deepcopy(meta.get("ownerReferences") or []),
            "priority": int((wl.get("spec") or {}).get("priority") or 0),
            "localQueueName": (wl.get("spec") or {}).get("queueName", ""),
        }

    def _set_pending(self, uid: str, workloads: dict[str, Obj], reason: str, message: str, *, granular: str) -> None:
        wl = workloads[uid]
        reason = granular if self._granular and granular else reason
        current = find_condition(wl, "QuotaReserved")
        if (
            current
            and current.get("status") == "False"
            and current.get("reason") == reason
            and current.get("message") == message
        ):
            return
        status = copy.deepcopy(wl.get("status") or {})
        conds = set_condition(status.get("conditions") or [], "QuotaReserved", False, reason, message)
        status["conditions"] = set_condition(
            conds, "Admitted", False, "NoReservation", "The workload has no reservation"
        )
        workloads[uid] = self._api.patch_status(KUEUE_GROUP, KUEUE_VERSION, "workloads", wl, status)

    def _admit(self, uid: str, workloads: dict[str, Obj], cq_name: str, fit: FlavorFit) -> None:
        wl = workloads[uid]
        status = copy.deepcopy(wl.get("status") or {})
        now = now_rfc3339()
        status["admission"] = {"clusterQueue": cq_name, "podSetAssignments": fit.pod_set_assignments}
        conds = set_condition(
            status.get("conditions") or [],
            "QuotaReserved",
            True,
            "QuotaReserved",
            f"Quota reserved in ClusterQueue {cq_name}",
            now,
        )
        conds = set_condition(conds, "Admitted", True, "Admitted", "The workload is admitted", now)
        for previous in ("Evicted", "Preempted"):
            cond = find_condition(wl, previous)
            if cond and cond.get("status") == "True":
                conds = set_condition(
                    conds, previous, False, "QuotaReserved", f"Previously: {cond.get('message', '')}", now
                )
        status["conditions"] = conds
        workloads[uid] = self._api.patch_status(KUEUE_GROUP, KUEUE_VERSION, "workloads", wl, status)

    def _sync_job(self, wl: Obj, kind: str, job: Obj) -> None:
        """Start the job of an admitted workload; stop the job of one that is not admitted."""
        if condition_is_true(wl, "Finished"):
            return
        suspended = (job.get("spec") or {}).get("suspend") is True
        admitted = bool((wl.get("status") or {}).get("admission")) and not condition_is_true(wl, "Evicted")
        if admitted and suspended:
            self._start_job(kind, job, wl)
        elif not admitted and not suspended:
            self._stop_job(kind, job, wl)

    def _job_templates(self, kind: str, job: Obj) -> dict[str, Obj]:
        """Podset name -> the job's pod template (the live dicts inside `job`)."""
        cluster = job["spec"].setdefault("rayClusterSpec", {}) if kind == "RayJob" else job["spec"]
        templates = {"head": cluster.setdefault("headGroupSpec", {}).setdefault("template", {})}
        for group in cluster.get("workerGroupSpecs") or []:
            templates[group["groupName"]] = group.setdefault("template", {})
        return templates

    def _start_job(self, kind: str, job: Obj, wl: Obj) -> None:
        """RunWithPodSetsInfo: inject the flavors' nodeLabels as nodeSelector, then unsuspend."""
        node_labels: dict[str, dict[str, str]] = {}
        for psa in ((wl.get("status") or {}).get("admission") or {}).get("podSetAssignments") or []:
            labels: dict[str, str] = {}
            for flavor in sorted(set((psa.get("flavors") or {}).values())):
                rf = self._api.get(KUEUE_GROUP, KUEUE_VERSION, "resourceflavors", flavor, None)
                labels.update(((rf or {}).get("spec") or {}).get("nodeLabels") or {})
            if labels:
                node_labels[psa["name"]] = labels
        self._set_suspend(kind, job, True, node_labels, replace=False)

    def _stop_job(self, kind: str, job: Obj, wl: Obj) -> None:
        """Suspend the job and restore the nodeSelectors recorded in the Workload (RestorePodSetsInfo)."""
        originals = {
            ps["name"]: ((ps.get("template") or {}).get("spec") or {}).get("nodeSelector") or {}
            for ps in (wl.get("spec") or {}).get("podSets") or []
        }
        self._set_suspend(kind, job, False, originals, replace=True)

    def _set_suspend(
        self, kind: str, job: Obj, start: bool, node_selectors: dict[str, dict[str, str]], *, replace: bool
    ) -> None:
        """Flip spec.suspend; merge in (start) or put back (stop) per-podSet nodeSelectors.

        A plain merge patch when no template changes, else an Update of the whole object.
        """
        updated = copy.deepcopy(job)
        for name, template in self._job_templates(kind, updated).items():
            if name not in node_selectors:
                continue
            spec = template.setdefault("spec", {})
            selector = (
                dict(node_selectors[name]) if replace else {**(spec.get("nodeSelector") or {}), **node_selectors[name]}
            )
            if selector:
                spec["nodeSelector"] = selector
            else:
                spec.pop("nodeSelector", None)
        updated["spec"]["suspend"] = not start
        plural = _RAY_PLURALS[kind]
        if updated["spec"] == {**job["spec"], "suspend": not start}:
            self._api.patch(RAY_GROUP, RAY_VERSION, plural, job, {"spec": {"suspend": not start}})
        else:
            self._api.replace(RAY_GROUP, RAY_VERSION, plural, updated)

    def _update_queue_statuses(
        self, workloads: Iterable[Obj], cluster_queues: dict[str, Obj], local_queues: dict[tuple[str, str], Obj]
    ) -> None:
        counters: dict[Any, dict[str, Any]] = {}

        def bucket(key: Any) -> dict[str, Any]:
            return counters.setdefault(key, {"pending": 0, "reserving": 0, "admitted": 0, "usage": {}})

        for wl in workloads:
            if condition_is_true(wl, "Finished"):
                continue
            lq_key = (wl["metadata"]["namespace"], (wl.get("spec") or {}).get("queueName", ""))
            lq = local_queues.get(lq_key)
            cq_name = ((wl.get("status") or {}).get("admission") or {}).get("clusterQueue") or (
                ((lq or {}).get("spec") or {}).get("clusterQueue")
            )
            targets = [bucket(("lq",) + lq_key), bucket(("cq", cq_name))]
            for counter in targets:
                if (wl.get("status") or {}).get("admission"):
                    counter["reserving"] += 1
                    counter["admitted"] += int(condition_is_true(wl, "Admitted"))
                    for key, amount in admission_usage(wl).items():
                        counter["usage"][key] = counter["usage"].get(key, Decimal(0)) + amount
                else:
                    counter["pending"] += 1

        for name, cq in cluster_queues.items():
            self._each(
                [cq],
                lambda obj: self._write_queue_status("clusterqueues", obj, bucket(("cq", name)), cq),
                "status of clusterqueue",
            )
        for key, lq in local_queues.items():
            cq = cluster_queues.get((lq.get("spec") or {}).get("clusterQueue", ""))
            self._each(
                [lq],
                lambda obj: self._write_queue_status("localqueues", obj, bucket(("lq",) + key), cq),
                "status of localqueue",
            )

    def _write_queue_status(self, plural: str, queue: Obj, counter: dict[str, Any], cq: Optional[Obj]) -> None:
        flavors = []
        for group in ((cq or {}).get("spec") or {}).get("resourceGroups") or []:
            for flavor in group.get("flavors") or []:
                resources = []
                for quota in flavor.get("resources") or []:
                    total = counter["usage"].get((flavor["name"], quota["name"]), Decimal(0))
                    entry = {"name": quota["name"], "total": format_quantity(total)}
                    if plural == "clusterqueues":
                        entry["borrowed"] = "0"
                    resources.append(entry)
                flavors.append({"name": flavor["name"], "resources": resources})
        status = copy.deepcopy(queue.get("status") or {})
        status.update(
            pendingWorkloads=counter["pending"],
            reservingWorkloads=counter["reserving"],
            admittedWorkloads=counter["admitted"],
            flavorsReservation=flavors,
            flavorsUsage=copy.deepcopy(flavors),
        )
        conds = status.get("conditions") or []
        if plural == "clusterqueues":
            active = set_condition(conds, "Active", True, "Ready", "Can admit new workloads")
        elif cq is not None:
            active = set_condition(conds, "Active", True, "Ready", "Can submit new workloads to localQueue")
        else:
            active = set_condition(
                conds, "Active", False, "ClusterQueueDoesNotExist", "Can't submit new workloads to clusterQueue"
            )
        if [(c["type"], c["status"], c["reason"]) for c in active] != [
            (c.get("type"), c.get("status"), c.get("reason")) for c in conds
        ]:
            status["conditions"] = active
        self._api.patch_status(KUEUE_GROUP, KUEUE_VERSION, plural, queue, status)


def _not_found(resource: str, name: str) -> Obj:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": f'{resource}.{KUEUE_GROUP} "{name}" not found',
        "reason": "NotFound",
        "details": {"name": name, "group": KUEUE_GROUP, "kind": resource},
        "code": 404,
    }


def _pending_summary(
    version: str, ordered: list[Obj], query: Mapping[str, list[str]], selected: Callable[[Obj], bool]
) -> Obj:
    """A PendingWorkloadsSummary with positions in the ClusterQueue and in each LocalQueue."""

    def number(name: str, default: int) -> int:
        try:
            return int((query.get(name) or [default])[0])
        except (TypeError, ValueError):
            return default

    limit, offset = number("limit", 1000), number("offset", 0)
    items = []
    in_lq: dict[tuple[str, str], int] = {}
    for position, wl in enumerate(ordered):
        lq_key = (wl["namespace"], wl["localQueueName"])
        lq_position = in_lq.get(lq_key, 0)
        in_lq[lq_key] = lq_position + 1
        if not selected(wl):
            continue
        items.append(
            {
                "metadata": {
                    "name": wl["name"],
                    "namespace": wl["namespace"],
                    "creationTimestamp": wl["creationTimestamp"],
                    "ownerReferences": wl["ownerReferences"],
                },
                "priority": wl["priority"],
                "localQueueName": wl["localQueueName"],
                "positionInClusterQueue": position,
                "positionInLocalQueue": lq_position,
            }
        )
    return {
        "kind": "PendingWorkloadsSummary",
        "apiVersion": f"visibility.kueue.x-k8s.io/{version}",
        "metadata": {"creationTimestamp": None},
        "items": items[offset : offset + limit],
    }


# --------------------------------------------------------------------------
# KubeRay
# --------------------------------------------------------------------------


class _DashboardClient:
    """The few Ray Job API calls the RayJob controller makes (plain urllib)."""

    def __init__(self, address: str) -> None:
        self.base = f"http://{address}"

    def job_info(self, job_id: str) -> Optional[Obj]:
        """The job's JobDetails, or None when the dashboard does not know the job (404)."""
        url = f"{self.base}/api/jobs/{urllib.parse.quote(job_id, safe='')}"
        try:
            with urllib.request.urlopen(url, timeout=3) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            raise

    def submit(self, job_id: str, spec: Mapping[str, Any]) -> None:
        body: Obj = {"entrypoint": spec.get("entrypoint", ""), "submission_id": job_id}
        if spec.get("runtimeEnvYAML"):
            body["runtime_env"] = yaml.safe_load(spec["runtimeEnvYAML"])
        if spec.get("metadata"):
            body["metadata"] = spec["metadata"]
        for field_name, key in (
            ("entrypointNumCpus", "entrypoint_num_cpus"),
            ("entrypointNumGpus", "entrypoint_num_gpus"),
        ):
            if spec.get(field_name) is not None:
                body[key] = spec[field_name]
        if spec.get("entrypointResources"):
            body["entrypoint_resources"] = json.loads(spec["entrypointResources"])
        self._post("/api/jobs/", body)

    def stop(self, job_id: str) -> None:
        try:
            self._post(f"/api/jobs/{urllib.parse.quote(job_id, safe='')}/stop", {})
        except urllib.error.HTTPError as exc:
            if exc.code != 404:
                raise

    def _post(self, path: str, body: Obj) -> None:
        request = urllib.request.Request(
            self.base + path,
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            response.read()


def _ray_node_labels(cluster_name: str, node_type: str, group: str) -> dict[str, str]:
    return {
        "ray.io/cluster": cluster_name,
        "ray.io/node-type": node_type,
        "ray.io/group": group,
        "ray.io/is-ray-node": "yes",
        "ray.io/identifier": f"{cluster_name}-{node_type}",
        "app.kubernetes.io/name": "kuberay",
        "app.kubernetes.io/created-by": "kuberay-operator",
    }


class FakeKubeRay(_PollingController):
    """KubeRay's RayJob and RayCluster controllers, backed by one real Ray head.

    `dashboard_address` ("host:port") is the real Ray dashboard that every
    simulated cluster stands for. In "direct" mode `status.dashboardURL` is that
    address; in "service" mode it is the in-cluster name
    `<cluster>-head-svc.<ns>.svc.cluster.local:8265`, and a port-forward to a
    head pod's port 8265 reaches the real dashboard. `ready_delay` is how long
    a cluster waits before its pods exist and it turns ready.
    """

    name = "kuberay"

    def __init__(
        self,
        server: Any,
        *,
        dashboard_address: str,
        dashboard_url_mode: str = "direct",
        ready_delay: float = 0.0,
        interval: float = 0.05,
    ) -> None:
        if dashboard_url_mode not in ("direct", "service"):
            raise ValueError(f"dashboard_url_mode must be 'direct' or 'service', not {dashboard_url_mode!r}")
        super().__init__(server, interval=interval)
        self._dashboard_address = dashboard_address
        self._dashboard = _DashboardClient(dashboard_address)
        self._url_mode = dashboard_url_mode
        self._ready_delay = ready_delay
        self._first_seen: dict[str, float] = {}  # RayCluster uid -> monotonic time
        self._ray_jobs: dict[str, str] = {}  # RayJob uid -> Ray job id it is running

    def _register(self) -> None:
        # Set on every start: another FakeKubeRay on the same server may have taken it over meanwhile.
        self._server.set_port_forward_target(self._port_forward_target)

    def _port_forward_target(self, namespace: str, pod_name: str, port: int) -> tuple[str, int]:
        if int(port) != DASHBOARD_PORT:
            raise ConnectionRefusedError(
                f"only the dashboard port {DASHBOARD_PORT} of a Ray head is simulated, not {port}"
            )
        host, _, dash_port = self._dashboard_address.rpartition(":")
        return host, int(dash_port)

    def dashboard_url(self, cluster: Mapping[str, Any]) -> str:
        if self._url_mode == "direct":
            return self._dashboard_address
        namespace = cluster["metadata"]["namespace"]
        return f"{head_service_name(cluster)}.{namespace}.svc.{CLUSTER_DOMAIN}:{DASHBOARD_PORT}"

    # ---- reconcile ------------------------------------------------------
    def _reconcile(self) -> None:
        clusters = self._api.list(RAY_GROUP, RAY_VERSION, "rayclusters")
        live = {c["metadata"]["uid"] for c in clusters}
        for uid in list(self._first_seen):
            if uid not in live:
                del self._first_seen[uid]
        self._each(clusters, self._reconcile_cluster, "raycluster")
        by_key = {
            (c["metadata"]["namespace"], c["metadata"]["name"]): c
            for c in self._api.list(RAY_GROUP, RAY_VERSION, "rayclusters")
        }
        rayjobs = self._api.list(RAY_GROUP, RAY_VERSION, "rayjobs")
        self._each(rayjobs, lambda job: self._reconcile_rayjob(job, by_key), "rayjob")
        # A deleted RayJob takes its cluster (and so its Ray job) with it; KubeRay's finalizer stops the job.
        live_jobs = {job["metadata"]["uid"] for job in rayjobs}
        for uid in [uid for uid in self._ray_jobs if uid not in live_jobs]:
            self._stop_ray_job(self._ray_jobs.pop(uid))

    # RayCluster -----------------------------------------------------------
    def _reconcile_cluster(self, cluster: Obj) -> None:
        meta = cluster["metadata"]
        if meta.get("deletionTimestamp"):
            return
        namespace, name = meta["namespace"], meta["name"]
        self._first_seen.setdefault(meta["uid"], time.monotonic())
        pods = self._api.list_pods(namespace, f"ray.io/cluster={name}")
        status = copy.deepcopy(cluster.get("status") or {})
        conds = status.get("conditions") or []
        if (cluster.get("spec") or {}).get("suspend"):
            if pods:
                for pod in pods:
                    self._api.delete_pod(namespace, pod["metadata"]["name"])
                conds = set_condition(conds, "RayClusterSuspending", True, "RayClusterSuspending", "")
            else:
                conds = set_condition(conds, "RayClusterSuspending", False, "RayClusterSuspended", "")
                conds = set_condition(conds, "RayClusterSuspended", True, "RayClusterSuspended", "")
                conds = set_condition(conds, "HeadPodReady", False, "HeadPodNotFound", "Head Pod not found")
                status.update(state="suspended", readyWorkerReplicas=0, availableWorkerReplicas=0, head={})
            status["conditions"] = conds
            self._write_cluster_status(cluster, status)
            return
        if find_condition(cluster, "RayClusterSuspended"):
            conds = set_condition(conds, "RayClusterSuspended", False, "RayClusterSuspended", "")
        if time.monotonic() - self._first_seen[meta["uid"]] < self._ready_delay:
            conds = set_condition(conds, "HeadPodReady", False, "HeadPodNotFound", "Head Pod not found")
            conds = set_condition(
                conds,
                "RayClusterProvisioned",
                False,
                "RayClusterPodsProvisioning",
                "RayCluster Pods are being provisioned for first time",
            )
            status["conditions"] = conds
            status.pop("state", None)
            self._write_cluster_status(cluster, status)
            return
        head_pod = self._ensure_pods(cluster, pods)
        service = self._ensure_head_service(cluster)
        spec = cluster.get("spec") or {}
        desired = sum(
            int(g.get("replicas", 0)) * int(g.get("numOfHosts", 1) or 1) for g in spec.get("workerGroupSpecs") or []
        )
        totals: dict[str, Decimal] = {}
        templates = [((spec.get("headGroupSpec") or {}).get("template") or {}, 1)] + [
            (g.get("template") or {}, int(g.get("replicas", 0)) * int(g.get("numOfHosts", 1) or 1))
            for g in spec.get("workerGroupSpecs") or []
        ]
        for template, count in templates:
            for resource, amount in pod_requests(template.get("spec") or {}).items():
                totals[resource] = totals.get(resource, Decimal(0)) + amount * count
        conds = set_condition(conds, "HeadPodReady", True, "HeadPodRunningAndReady", "")
        conds = set_condition(
            conds,
            "RayClusterProvisioned",
            True,
            "AllPodRunningAndReadyFirstTime",
            "All Ray Pods are ready for the first time",
        )
        transitions = dict(status.get("stateTransitionTimes") or {})
        if status.get("state") != "ready":
            transitions["ready"] = now_rfc3339()
        status.update(
            state="ready",
            conditions=conds,
            head={
                "podIP": "127.0.0.1",
                "podName": head_pod,
                "serviceName": head_service_name(cluster),
                "serviceIP": (service.get("spec") or {}).get("clusterIP") or "",
            },
            endpoints={port_name: str(port) for port_name, port in HEAD_SERVICE_PORTS},
            desiredWorkerReplicas=desired,
            readyWorkerReplicas=desired,
            availableWorkerReplicas=desired,
            minWorkerReplicas=sum(int(g.get("minReplicas", 0)) for g in spec.get("workerGroupSpecs") or []),
            maxWorkerReplicas=sum(int(g.get("maxReplicas", 2**31 - 1)) for g in spec.get("workerGroupSpecs") or []),
            desiredCPU=format_quantity(totals.get("cpu", Decimal(0))),
            desiredMemory=format_quantity(totals.get("memory", Decimal(0))),
            desiredGPU=format_quantity(sum((totals.get(r, Decimal(0)) for r in GPU_RESOURCES), Decimal(0))),
            desiredTPU=format_quantity(totals.get("google.com/tpu", Decimal(0))),
            stateTransitionTimes=transitions,
        )
        if meta.get("generation") is not None:
            status["observedGeneration"] = meta["generation"]
        self._write_cluster_status(cluster, status)

    def _write_cluster_status(self, cluster: Obj, status: Obj) -> None:
        if status != (cluster.get("status") or {}):
            status["lastUpdateTime"] = now_rfc3339()
            self._api.patch_status(RAY_GROUP, RAY_VERSION, "rayclusters", cluster, status)

    def _ensure_pods(self, cluster: Obj, pods: list[Obj]) -> str:
        """Create the missing head and worker pods (Running, Ready); return the head pod's name."""
        spec = cluster.get("spec") or {}
        name = cluster["metadata"]["name"]
        existing: dict[str, list[str]] = {}
        for pod in pods:
            group = (pod["metadata"].get("labels") or {}).get("ray.io/group", "")
            existing.setdefault(group, []).append(pod["metadata"]["name"])
        heads = existing.get("headgroup") or [
            self._create_pod(
                cluster,
                (spec.get("headGroupSpec") or {}).get("template") or {},
                "head",
                "headgroup",
                f"{name}-head-{random_suffix()}",
            )
        ]
        for group in spec.get("workerGroupSpecs") or []:
            wanted = int(group.get("replicas", 0)) * int(group.get("numOfHosts", 1) or 1)
            for _ in range(wanted - len(existing.get(group["groupName"], []))):
                pod_name = f"{name}-{group['groupName']}-worker-{random_suffix()}"
                self._create_pod(cluster, group.get("template") or {}, "worker", group["groupName"], pod_name)
        return heads[0]

    def _create_pod(self, cluster: Obj, template: Obj, node_type: str, group: str, pod_name: str) -> str:
        template_meta = template.get("metadata") or {}
        labels = {
            **(template_meta.get("labels") or {}),
            **_ray_node_labels(cluster["metadata"]["name"], node_type, group),
        }
        pod_meta: Obj = {
            "name": pod_name,
            "namespace": cluster["metadata"]["namespace"],
            "labels": labels,
            "ownerReferences": [owner_reference(cluster)],
        }
        if template_meta.get("annotations"):
            pod_meta["annotations"] = dict(template_meta["annotations"])
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": pod_meta,
            "spec": copy.deepcopy(template.get("spec") or {}),
        }
        created = self._api.create_pod(pod)
        now = now_rfc3339()
        containers = (created.get("spec") or {}).get("containers") or []
        self._api.patch_pod_status(
            pod_meta["namespace"],
            pod_name,
            {
                "phase": "Running",
                "podIP": "127.0.0.1",
                "podIPs": [{"ip": "127.0.0.1"}],
                "hostIP": "127.0.0.1",
                "startTime": now,
                "conditions": [
                    {"type": t, "status": "True", "lastTransitionTime": now}
                    for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
                ],
                "containerStatuses": [
                    {
                        "name": c.get("name", "ray"),
                        "image": c.get("image", ""),
                        "imageID": "",
                        "ready": True,
                        "started": True,
                        "restartCount": 0,
                        "state": {"running": {"startedAt": now}},
                    }
                    for c in containers
                ],
            },
        )
        return pod_name

    def _ensure_head_service(self, cluster: Obj) -> Obj:
        namespace, name = cluster["metadata"]["namespace"], cluster["metadata"]["name"]
        service_name = head_service_name(cluster)
        existing = self._api.get_service(namespace, service_name)
        if existing is not None:
            return existing
        return self._api.create_service(
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {
                    "name": service_name,
                    "namespace": namespace,
                    "labels": _ray_node_labels(name, "head", "headgroup"),
                    "ownerReferences": [owner_reference(cluster)],
                },
                "spec": {
                    "type": "ClusterIP",
                    "selector": {"ray.io/cluster": name, "ray.io/node-type": "head"},
                    "ports": [
                        {"name": port_name, "port": port, "targetPort": port, "protocol": "TCP"}
                        for port_name, port in HEAD_SERVICE_PORTS
                    ],
                },
            }
        )

    # RayJob ---------------------------------------------------------------
    def _reconcile_rayjob(self, job: Obj, clusters: dict[tuple[str, str], Obj]) -> None:
        meta = job["metadata"]
        if meta.get("deletionTimestamp") or (job.get("spec") or {}).get("managedBy") not in (
            None,
            "ray.io/kuberay-operator",
        ):
            return
        old = job.get("status") or {}
        status = copy.deepcopy(old)
        spec = job.get("spec") or {}
        error = validate_rayjob(job)
        if error:
            status.update(jobDeploymentStatus="ValidationFailed", reason="ValidationFailed", message=error)
            self._write_rayjob_status(job, old, status)
            return
        deployment = status.get("jobDeploymentStatus", "")
        namespace = meta["namespace"]
        cluster_name = status.get("rayClusterName", "")
        cluster = clusters.get((namespace, cluster_name)) if cluster_name else None

        if deployment == "":
            interactive = spec.get("submissionMode") == "InteractiveMode"
            if not status.get("jobId") and not interactive:
                status["jobId"] = spec.get("jobId") or f"{meta['name']}-{random_suffix()}"
            status.setdefault("rayClusterName", f"{meta['name']}-{random_suffix()}")
            status.setdefault("jobStatus", "")
            status["jobDeploymentStatus"] = "Initializing"
            status["startTime"] = now_rfc3339()
        elif deployment == "Initializing":
            if spec.get("suspend"):
                status["jobDeploymentStatus"] = "Suspending"
            elif not self._deadline_exceeded(spec, status):
                cluster = cluster or self._create_cluster_for(job, status["rayClusterName"])
                if not status.get("dashboardURL"):
                    if (cluster.get("status") or {}).get("state") != "ready":
                        status["rayClusterStatus"] = copy.deepcopy(cluster.get("status") or {})
                        self._write_rayjob_status(job, old, status)
                        return
                    status["dashboardURL"] = self.dashboard_url(cluster)
                if spec.get("submissionMode") == "InteractiveMode":
                    status["jobDeploymentStatus"] = "Waiting"
                else:
                    status["jobDeploymentStatus"] = "Running"
        elif deployment == "Waiting":
            if not spec.get("jobId"):
                self._deadline_exceeded(spec, status)
            else:
                status["jobId"] = spec["jobId"]
                status["jobDeploymentStatus"] = "Running"
        elif deployment == "Running":
            if spec.get("suspend"):
                status["jobDeploymentStatus"] = "Suspending"
            elif not self._deadline_exceeded(spec, status):
                cluster = cluster or self._create_cluster_for(job, status["rayClusterName"])
                self._ensure_rayjob_service(job, cluster)
                self._ray_jobs[meta["uid"]] = status["jobId"]
                if not self._poll_ray_job(job, cluster, status):
                    return
        elif deployment in ("Suspending", "Retrying"):
            if cluster is not None:
                if status.get("jobId"):
                    self._stop_ray_job(status["jobId"])  # the cluster takes the job with it
                self._ray_jobs.pop(meta["uid"], None)
                self._api.delete(RAY_GROUP, RAY_VERSION, "rayclusters", cluster_name, namespace)
                return
            for key in (
                "rayClusterStatus",
                "rayClusterName",
                "dashboardURL",
                "jobId",
                "message",
                "reason",
                "rayJobInfo",
            ):
                status.pop(key, None)
            status["jobStatus"] = ""
            status["jobDeploymentStatus"] = "Suspended" if deployment == "Suspending" else ""
        elif deployment == "Suspended":
            if spec.get("suspend"):
                return
            status.update(jobStatus="", jobDeploymentStatus="")
        elif deployment in ("Complete", "Failed"):
            self._ray_jobs.pop(meta["uid"], None)
            if spec.get("shutdownAfterJobFinishes") and cluster is not None and not spec.get("clusterSelector"):
                ttl = int(spec.get("ttlSecondsAfterFinished") or 0)
                if _seconds_since(status.get("endTime")) >= ttl:
                    self._api.delete(RAY_GROUP, RAY_VERSION, "rayclusters", cluster_name, namespace)
            return
        else:
            return  # ValidationFailed and unknown states stay as they are
        self._count_attempts(spec, status)
        self._write_rayjob_status(job, old, status)

    def _deadline_exceeded(self, spec: Obj, status: Obj) -> bool:
        """activeDeadlineSeconds (any pre-terminal state) and preRunningDeadlineSeconds (before Running)."""
        elapsed = _seconds_since(status.get("startTime"))
        active = spec.get("activeDeadlineSeconds")
        if active is not None and elapsed >= int(active):
            status.update(
                jobDeploymentStatus="Failed",
                reason="DeadlineExceeded",
                message=(
                    f"The RayJob has passed the activeDeadlineSeconds. "
                    f"StartTime: {status.get('startTime')}. ActiveDeadlineSeconds: {active}"
                ),
            )
            return True
        pre_running = spec.get("preRunningDeadlineSeconds")
        if (
            pre_running  # zero disables it
            and status.get("jobDeploymentStatus") in ("Initializing", "Waiting")
            and elapsed >= int(pre_running)
        ):
            status.update(
                jobDeploymentStatus="Failed",
                reason="PreRunningDeadlineExceeded",
                message=(
                    f"The RayJob has passed the preRunningDeadlineSeconds. "
                    f"StartTime: {status.get('startTime')}. PreRunningDeadlineSeconds: {pre_running}"
                ),
            )
            return True
        return False

    def _poll_ray_job(self, job: Obj, cluster: Obj, status: Obj) -> bool:
        """Mirror the Ray job's status from the dashboard; False when there is nothing to update."""
        job_id = status.get("jobId", "")
        try:
            info = self._dashboard.job_info(job_id)
            if info is None:
                if (job.get("spec") or {}).get("submissionMode") in (None, "HTTPMode", "K8sJobMode"):
                    self._dashboard.submit(job_id, job.get("spec") or {})
                return False  # InteractiveMode: the user has not submitted yet
        except (urllib.error.URLError, OSError, ValueError) as exc:
            self._note_error(f"dashboard {self._dashboard_address} for job {job_id}: {exc!r}")
            return False
        ray_status = info.get("status", "")
        deployment = "Running"
        reason = ""
        if ray_status in ("SUCCEEDED", "STOPPED", "FAILED"):
            deployment = "Failed" if ray_status == "FAILED" else "Complete"
            reason = "AppFailed" if ray_status == "FAILED" else ""
        status["rayClusterStatus"] = copy.deepcopy(cluster.get("status") or {})
        status.update(jobStatus=ray_status, jobDeploymentStatus=deployment, message=info.get("message") or "")
        if reason:
            status["reason"] = reason
        else:
            status.pop("reason", None)
        info_times = {}
        for key, field_name in (("start_time", "startTime"), ("end_time", "endTime")):
            if info.get(key):
                info_times[field_name] = datetime.fromtimestamp(int(info[key]) / 1000, timezone.utc).strftime(
                    "%Y-%m-%dT%H:%M:%SZ"
                )
        if info_times:
            status["rayJobInfo"] = info_times
        return True

    def _stop_ray_job(self, job_id: str) -> None:
        try:
            self._dashboard.stop(job_id)
        except (urllib.error.URLError, OSError) as exc:
            self._note_error(f"stopping Ray job {job_id}: {exc!r}")

    @staticmethod
    def _count_attempts(spec: Obj, status: Obj) -> None:
        """checkBackoffLimitAndUpdateStatusIfNeeded: counters, and Retrying while the backoff allows."""
        failed = int(status.get("failed") or 0) + int(status.get("jobDeploymentStatus") == "Failed")
        succeeded = int(status.get("succeeded") or 0) + int(
            status.get("jobDeploymentStatus") == "Complete" and status.get("jobStatus") == "SUCCEEDED"
        )
        status.update(failed=failed, succeeded=succeeded)
        backoff = spec.get("backoffLimit")
        if (
            status.get("jobDeploymentStatus") == "Failed"
            and backoff is not None
            and failed < int(backoff) + 1
            and status.get("reason") != "DeadlineExceeded"
        ):
            status["jobDeploymentStatus"] = "Retrying"

    def _write_rayjob_status(self, job: Obj, old: Obj, status: Obj) -> None:
        """updateRayJobStatus: write only when jobStatus or jobDeploymentStatus changed."""
        if (old.get("jobStatus"), old.get("jobDeploymentStatus")) == (
            status.get("jobStatus"),
            status.get("jobDeploymentStatus"),
        ):
            return
        if status.get("jobDeploymentStatus") in ("Complete", "Failed"):
            status["endTime"] = now_rfc3339()
        self._api.patch_status(RAY_GROUP, RAY_VERSION, "rayjobs", job, status)

    def _create_cluster_for(self, job: Obj, cluster_name: str) -> Obj:
        meta = job["metadata"]
        labels = dict(meta.get("labels") or {})
        labels.update({"ray.io/originated-from-cr-name": meta["name"], "ray.io/originated-from-crd": "RayJob"})
        cluster_meta: Obj = {
            "name": cluster_name,
            "namespace": meta["namespace"],
            "labels": labels,
            "ownerReferences": [owner_reference(job)],
        }
        if meta.get("annotations"):
            cluster_meta["annotations"] = dict(meta["annotations"])
        cluster = {
            "apiVersion": RAY_API,
            "kind": "RayCluster",
            "metadata": cluster_meta,
            "spec": copy.deepcopy((job.get("spec") or {}).get("rayClusterSpec") or {}),
        }
        try:
            return self._api.create(RAY_GROUP, RAY_VERSION, "rayclusters", cluster)
        except ApiException as exc:
            if exc.status != 409:
                raise
            existing = self._api.get(RAY_GROUP, RAY_VERSION, "rayclusters", cluster_name, meta["namespace"])
            if existing is None:
                raise
            return existing

    def _ensure_rayjob_service(self, job: Obj, cluster: Obj) -> None:
        """reconcileServices: `<rayjob>-head-svc`, selecting the current cluster's head."""
        namespace = job["metadata"]["namespace"]
        service_name = f"{job['metadata']['name']}-head-svc"
        selector = {"ray.io/cluster": cluster["metadata"]["name"], "ray.io/node-type": "head"}
        existing = self._api.get_service(namespace, service_name)
        if existing is None:
            self._api.create_service(
                {
                    "apiVersion": "v1",
                    "kind": "Service",
                    "metadata": {
                        "name": service_name,
                        "namespace": namespace,
                        "ownerReferences": [owner_reference(job)],
                    },
                    "spec": {
                        "type": "ClusterIP",
                        "selector": selector,
                        "ports": [
                            {"name": port_name, "port": port, "targetPort": port, "protocol": "TCP"}
                            for port_name, port in HEAD_SERVICE_PORTS
                        ],
                    },
                }
            )
        elif (existing.get("spec") or {}).get("selector") != selector:
            self._api.patch_service(namespace, service_name, {"spec": {"selector": selector}})
