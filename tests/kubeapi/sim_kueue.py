"""The simulated Kueue: webhooks, job reconciler, scheduler, queue statuses and visibility API.

Why this module exists: raybridge watches what Kueue does with its RayJobs
(suspension, Workloads, admission, quota messages, queue positions). `FakeKueue`
plays Kueue's Ray integration against `tests/kubeapi/server.py` through the
official client (the polling loop and API access are in `sim_common.py`). Its
mutating and validating webhook and the visibility API are registered on the
server with `add_mutating_hook` and `add_handler`. The state machine follows the
Go sources (Kueue `flavorassigner`, `jobframework`) in its transitions, reasons
and messages. The pure decision logic (Workload names, podSets, flavor
assignment, queue order) is unit-tested without a server.

What it deliberately does not do:

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
- Hooks and handlers stay registered after `stop()` (the server cannot
  unregister them); stopping only ends reconciliation.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import re
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Callable, Iterable, Mapping, Optional

from tests.kubeapi.sim_common import (
    RAY_API,
    RAY_GROUP,
    RAY_VERSION,
    Obj,
    PollingController,
    condition_is_true,
    controller_owner,
    find_condition,
    format_quantity,
    now_rfc3339,
    owner_reference,
    parse_quantity,
    pod_requests,
    set_condition,
)

try:  # how a hook on the test server denies a request, as a validating webhook does
    from tests.kubeapi.errors import AdmissionDenied
except ImportError:  # pragma: no cover - the server package is not there yet
    AdmissionDenied = None  # type: ignore[assignment,misc]

KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_VERSION = "v1beta2"
KUEUE_API = f"{KUEUE_GROUP}/{KUEUE_VERSION}"

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
JOB_OWNER_GVK_ANNOTATION = "kueue.x-k8s.io/job-owner-gvk"
JOB_OWNER_NAME_ANNOTATION = "kueue.x-k8s.io/job-owner-name"

# Resources Kueue counts even when no ClusterQueue covers them (so that a
# request for an uncovered one makes the workload inadmissible).
TRACKED_RESOURCES = ("cpu", "memory", "nvidia.com/gpu", "amd.com/gpu")


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
# Kueue
# --------------------------------------------------------------------------

_RAY_PLURALS = {"RayJob": "rayjobs", "RayCluster": "rayclusters"}


@dataclass
class _QueueView:
    """What one pass learned about the queues; read by the visibility API handler."""

    pending_by_cq: dict[str, list[Obj]] = field(default_factory=dict)
    cluster_queues: set[str] = field(default_factory=set)
    local_queues: dict[tuple[str, str], str] = field(default_factory=dict)  # (ns, lq) -> cq


class FakeKueue(PollingController):
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
        return 200, pending_summary(version, view.pending_by_cq.get(cq, []), query, lambda wl: True)

    def _pending_in_lq(self, match: re.Match, query: dict[str, list[str]], body: Optional[bytes]) -> tuple[int, Obj]:
        version, namespace, lq = match.group(1), match.group(2), match.group(3)
        view = self._view
        cq = view.local_queues.get((namespace, lq))
        if cq is None:
            return 404, _not_found("localqueues", lq)
        items = view.pending_by_cq.get(cq, [])
        return 200, pending_summary(
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


def pending_summary(
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
