"""The simulated Kueue: webhooks, job reconciler, scheduler, queue statuses and visibility API.

Why this module exists: raybridge watches what Kueue does with its RayJobs
(suspension, Workloads, admission, quota messages, queue positions). `FakeKueue`
plays Kueue's Ray integration against `kubesim/server.py` through the
official client (the polling loop and API access are in `sim_common.py`). Its
mutating and validating webhook and the visibility API are registered on the
server with `add_mutating_hook` and `add_handler`. The state machine follows the
Go sources (Kueue `flavorassigner`, `jobframework`, `scheduler/preemption`) in
its transitions, reasons and messages. The pure decision logic (Workload names,
podSets, flavor assignment, webhook checks, preemption targets, queue order) is
unit-tested without a server.

It plays no release: it follows Kueue's main branch (the newest CRDs, v0.20-devel),
on a server started with those CRDs (`FakeKueue` refuses another). What differs per
release runs on the real Kueue v0.13.10, v0.17.0 and v0.19.2
(tests/e2e/test_release_matrix.py) and, for the releases the Go module proxy does
not serve, is read from their sources as unit tests of raybridge's rules
(docs/testing.md).

What it simulates: the webhook on CREATE and UPDATE (LocalQueue defaulting,
suspension, Kueue's RayJob/RayCluster checks, the queue-name label as a DNS
subdomain, `max-exec-time-seconds`, the queue name, priority class and
max-exec-time immutability rules, the pod-set count and the reserved `head`
group name); no Workload for a job whose WorkloadPriorityClass does not exist
(the job stays suspended until the class appears); flavor assignment per
resource group (one flavor takes all of a pod set's resources of the group;
nodeSelector and untolerated taints rule a flavor out); preemption within a ClusterQueue
(`preemption.withinClusterQueue: LowerPriority` or `LowerOrNewerEqualPriority`)
with Kueue's candidate order, minimal target set, Evicted/Preempted conditions,
messages and events, and an immediate requeue of the preempted workload;
Kueue's quota over the cohort forest (`CohortForest`, `quota_limits`): ClusterQueues
(`cohort`/`cohortName`) lend unused nominal quota, `Cohort` objects add quota of
their own and borrow from their `parentName`, `borrowingLimit` and
`lendingLimit` at every level, a loop of parents schedules nothing (`borrowed`
in the ClusterQueue status); the `Active` condition of ClusterQueues (missing
ResourceFlavor, missing or inactive AdmissionCheck, stopPolicy) and
LocalQueues (stopped, ClusterQueue missing or inactive), and an inactive
queue admitting nothing; the ProvisioningRequest AdmissionCheck's `Active`
condition (its ProvisioningRequestConfig exists); admission checks
(`admissionChecks` or `admissionChecksStrategy`): the Workload reserves quota,
stays `Admitted=False` (`UnsatisfiedChecks`) and its job suspended until every
check is Ready, which a test sets with `set_admission_check()` as the check's
controller would; `maximumExecutionTimeSeconds` from the max-exec-time label,
the admitted time accumulated across admissions, and deactivation when it runs
out (DeactivationTarget, `spec.active=false`, Evicted
`DeactivatedDueToMaximumExecutionTimeExceeded`, the job suspended, never
requeued), as well as any Workload a test sets `spec.active=false` on.

What it deliberately does not do:

- FakeKueue: no preemption across a cohort
  (`reclaimWithinCohort`, `borrowWithinCohort`: a ClusterQueue preempts only
  within its nominal quota), fair sharing, flavorFungibility, or controller for
  an admission check beyond the ProvisioningRequest check's `Active` condition
  (no ProvisioningRequest is created; a Rejected or Retry check does nothing;
  `onFlavors` is not looked at), the Cohort webhook (borrowing and lending
  limits only under a parent), topology-aware scheduling, namespaceSelector,
  HoldAndDrain (a stopped queue only stops admitting), the MultiKueue and
  Terminating inactive reasons, deactivation for RequeuingLimitExceeded or a
  Rejected check, ObjectRetentionPolicies, waitForPodsReady, or elastic
  workload slices. The preemption path in messages names a ClusterQueue's cohort but not
  the cohort's parents. A preemptor's quota is not set aside while its targets
  are being evicted (Kueue's scheduler does that within one cycle). Of the
  webhook, the prebuilt-workload, elastic-job toggle and TAS checks are
  missing; a Workload that the API server refuses (e.g. a worker group name
  that is no DNS label) is retried every pass without an event. Only cpu,
  memory, nvidia.com/gpu, amd.com/gpu and resources a ClusterQueue covers are
  counted; other requests (ephemeral-storage, ...) are ignored instead of making
  the workload inadmissible. Flavor eligibility checks `nodeSelector` and the
  flavor's taints, not required node affinity. Queue order ties within one creation second are
  broken by the order this controller first saw the Workloads. A workload
  evicted with `evict()` is held (`Requeued=False`) until `requeue()` unless
  `evict(..., requeue=True)`, so that tests can look at the evicted state; a
  workload preempted by the scheduler is requeued at once, as in real Kueue.
  Events are written as core/v1 Events with one `count`, without the
  recorder's aggregation.
- Hooks and handlers stay registered after `stop()` (the server cannot
  unregister them); stopping only ends reconciliation.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import re
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from decimal import Decimal
from typing import Any, Callable, Iterable, Mapping, Optional

from kubesim.conversion import convert
from kubesim.schemas import KUEUE_NEWEST
from kubesim.sim_common import (
    RAY_API,
    RAY_GROUP,
    RAY_VERSION,
    REQUEST_TIMEOUT,
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
    from kubesim.errors import AdmissionDenied
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


#: The kueue.x-k8s.io version the simulated Kueue reads and writes, and the visibility API versions it serves.
KUEUE_VERSION_SPOKEN = "v1beta2"
VISIBILITY_VERSIONS = ("v1beta1", "v1beta2")
#: main pkg/controller/jobs/raycluster/raycluster_webhook.go: `ExpectedPodSetsCount > MaxPodSets`.
MAX_POD_SETS = 18
AUTOSCALING_MESSAGE = "a kueue managed job should only use autoscaling when workload slicing is enabled"


def kueue_api_version(server: Any) -> str:
    """`kueue.x-k8s.io/<version>` that the simulated Kueue reads and writes."""
    return f"{KUEUE_GROUP}/{KUEUE_VERSION_SPOKEN}"


MAX_EXEC_TIME_LABEL = "kueue.x-k8s.io/max-exec-time-seconds"
ELASTIC_JOB_ANNOTATION = "kueue.x-k8s.io/elastic-job"
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_DNS1123_SUBDOMAIN_MESSAGE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)


def _go_value(value: Any) -> str:
    """A bad value as apimachinery's field.Error prints it (strings quoted, maps as %#v)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, Mapping):
        inner = ", ".join(f"{json.dumps(str(k))}:{json.dumps(str(v))}" for k, v in sorted(value.items()))
        return "map[string]string{" + inner + "}"
    return str(value)


def _invalid(path: str, value: Any, detail: str) -> str:
    return f"{path}: Invalid value: {_go_value(value)}: {detail}"


def _subdomain_errors(value: str) -> list[str]:
    """apimachinery's IsDNS1123Subdomain messages."""
    errors = []
    if len(value) > 253:
        errors.append("must be no more than 253 characters")
    if not _DNS1123_SUBDOMAIN.fullmatch(value):
        errors.append(_DNS1123_SUBDOMAIN_MESSAGE)
    return errors


def _labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def _is_suspended(obj: Mapping[str, Any]) -> bool:
    return (obj.get("spec") or {}).get("suspend") is True


def _job_on_create_errors(obj: Mapping[str, Any]) -> list[str]:
    """jobframework.ValidateJobOnCreate: the queue name as a CRD name, the max-exec-time label."""
    errors = []
    queue = _labels(obj).get(QUEUE_LABEL)
    if queue is not None and _subdomain_errors(queue):
        errors.append(_invalid(f"metadata.labels[{QUEUE_LABEL}]", queue, ",".join(_subdomain_errors(queue))))
    raw = _labels(obj).get(MAX_EXEC_TIME_LABEL)
    if raw is not None:
        path = f"metadata.labels[{MAX_EXEC_TIME_LABEL}]"
        if not re.fullmatch(r"[+-]?[0-9]+", raw):
            errors.append(_invalid(path, raw, f'strconv.Atoi: parsing {json.dumps(raw)}: invalid syntax'))
        elif int(raw) <= 0:
            errors.append(f"{path}: Invalid value: {int(raw)}: should be greater than 0")
    return errors


def _cluster_spec_errors(obj: Mapping[str, Any], cluster: Mapping[str, Any], path: str) -> list[str]:
    """raycluster.ValidateCreate: no autoscaling, the pod-set count, no worker group named head."""
    errors = []
    # ElasticJobsViaWorkloadSlices, on by default (beta from v0.18)
    elastic = ((obj.get("metadata") or {}).get("annotations") or {}).get(ELASTIC_JOB_ANNOTATION) == "true"
    if cluster.get("enableInTreeAutoscaling") and not elastic:
        errors.append(_invalid(f"{path}.enableInTreeAutoscaling", True, AUTOSCALING_MESSAGE))
    groups = cluster.get("workerGroupSpecs") or []
    if len(groups) + 1 > MAX_POD_SETS:
        errors.append(f"{path}.workerGroupSpecs: Too many: {len(groups) + 1}: must have at most {MAX_POD_SETS} items")
    for index, group in enumerate(groups):
        if group.get("groupName") == "head":
            errors.append(
                f'{path}.workerGroupSpecs[{index}].groupName: Forbidden: "head" is reserved for the head group'
            )
    return errors


def kueue_create_errors(kind: str, obj: Mapping[str, Any]) -> list[str]:
    """Field errors of Kueue's validating webhook for a RayJob/RayCluster on CREATE (`validateCreate`)."""
    if QUEUE_LABEL not in _labels(obj):
        return []  # manageJobsWithoutQueueName is off (Kueue's default)
    spec = obj.get("spec") or {}
    if kind == "RayJob":
        has_selector, has_cluster = bool(spec.get("clusterSelector")), spec.get("rayClusterSpec") is not None
        if has_selector and has_cluster:
            return [
                _invalid(
                    "spec.clusterSelector",
                    spec["clusterSelector"],
                    "a kueue managed job should not use an existing cluster",
                )
            ]
        if has_selector:
            return []  # not managed
        if not has_cluster:
            return [
                "spec.rayClusterSpec: Required value: "
                "rayClusterSpec is required for Kueue-managed jobs that don't use clusterSelector"
            ]
        errors: list[str] = []
        if not spec.get("shutdownAfterJobFinishes"):
            errors.append(
                _invalid(
                    "spec.shutdownAfterJobFinishes",
                    False,
                    "a kueue managed job should delete the cluster after finishing",
                )
            )
        errors += _cluster_spec_errors(obj, spec["rayClusterSpec"] or {}, "spec.rayClusterSpec")
    else:
        errors = _cluster_spec_errors(obj, spec, "spec")
    return errors + _job_on_create_errors(obj)


def kueue_update_errors(
    kind: str,
    old: Mapping[str, Any],
    new: Mapping[str, Any],
    *,
    default_queue_exists: bool = False,
) -> list[str]:
    """Field errors of Kueue's validating webhook for a RayJob/RayCluster on UPDATE (`ValidateUpdate`).

    `default_queue_exists`: the namespace has a LocalQueue named `default`.
    """
    new_queue, old_queue = _labels(new).get(QUEUE_LABEL, ""), _labels(old).get(QUEUE_LABEL, "")
    if not new_queue and not old_queue:  # ValidateRayAndSparkJobUpdates (beta, on from v0.18): an emptied queue too
        return []
    errors: list[str] = []
    queue_path = f"metadata.labels[{QUEUE_LABEL}]"
    if not _is_suspended(new) and new_queue != old_queue:
        errors.append(_invalid(queue_path, new_queue, "field is immutable"))
    if not new_queue and old_queue and default_queue_exists:
        errors.append(_invalid(queue_path, "", "queue-name must not be empty in namespace with default queue"))
    if not _is_suspended(new) or not _is_suspended(old):
        new_max, old_max = _labels(new).get(MAX_EXEC_TIME_LABEL, ""), _labels(old).get(MAX_EXEC_TIME_LABEL, "")
        if new_max != old_max:
            errors.append(_invalid(f"metadata.labels[{MAX_EXEC_TIME_LABEL}]", new_max, "field is immutable"))
    new_wpc, old_wpc = _labels(new).get(PRIORITY_LABEL, ""), _labels(old).get(PRIORITY_LABEL, "")
    wpc_path = f"metadata.labels[{PRIORITY_LABEL}]"
    if not _is_suspended(new) and not old_wpc and new_wpc:
        errors.append(_invalid(wpc_path, new_wpc, "WorkloadPriorityClass cannot be added to a non-suspended workload"))
    elif not new_wpc and old_wpc:
        errors.append(_invalid(wpc_path, new_wpc, "WorkloadPriorityClass cannot be removed from a workload"))
    return errors + kueue_create_errors(kind, new)


def aggregate_message(errors: list[str]) -> str:
    """utilerrors.NewAggregate(...).Error(): one message as it is, several as `[a, b]`, duplicates once."""
    unique = list(dict.fromkeys(errors))
    return unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"


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


def _selector_matches(node_selector: Mapping[str, str], node_labels: Mapping[str, str], label_keys: Iterable[str]) -> bool:
    """flavorSelector (kueue@v0.13.10 flavorassigner.go): the nodeSelector, on the label keys of the resource
    group's flavors only, must hold for a node carrying the flavor's labels."""
    keys = set(label_keys)
    return all(k in node_labels and node_labels[k] == v for k, v in node_selector.items() if k in keys)


def _taint_string(taint: Mapping[str, Any]) -> str:
    """core/v1 Taint.ToString: key=value:Effect, key:Effect without a value."""
    value = f"={taint['value']}" if taint.get("value") else ""
    return f"{taint.get('key', '')}{value}:{taint.get('effect', '')}"


def _tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """core/v1 Toleration.ToleratesTaint."""
    if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
        return False
    if toleration.get("key") and toleration["key"] != taint.get("key"):
        return False
    if (toleration.get("operator") or "Equal") == "Exists":
        return True
    return (toleration.get("value") or "") == (taint.get("value") or "")


def _untolerated_taint(
    pod_tolerations: list[Mapping[str, Any]], flavor_spec: Mapping[str, Any]
) -> Optional[Mapping[str, Any]]:
    """FindMatchingUntoleratedTaint over the flavor's NoSchedule/NoExecute nodeTaints (flavorassigner.go)."""
    tolerations = [*pod_tolerations, *(flavor_spec.get("tolerations") or [])]
    for taint in flavor_spec.get("nodeTaints") or []:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not any(_tolerates(t, taint) for t in tolerations):
            return taint
    return None


def assign_flavors(
    cluster_queue: Mapping[str, Any],
    podsets: list[Mapping[str, Any]],
    used: Mapping[tuple[str, str], Decimal],
    flavor_node_labels: Optional[Mapping[str, Mapping[str, str]]] = None,
    limits: Optional[Mapping[tuple[str, str], tuple[Decimal, Decimal]]] = None,
    flavor_specs: Optional[Mapping[str, Mapping[str, Any]]] = None,
) -> FlavorFit:
    """Pick a flavor per podSet and resource group, first fit in the ClusterQueue's flavor order.

    kueue@v0.13.10 pkg/scheduler/flavorassigner/flavorassigner.go (assignFlavors,
    findFlavorForPodSetResource, fitsResourceQuota); the same at v0.15.8 and main. One flavor
    takes every resource of the group a pod set asks for. `used` is what admitted workloads
    already hold per (flavor, resource). `limits`: (maximum capacity, available) per (flavor,
    resource) where a cohort lends (`quota_limits`); without it, the nominal quota alone.
    `flavor_specs`: the ResourceFlavors' specs, for their taints and tolerations. Messages are
    Kueue's flavorassigner messages.
    """
    flavor_node_labels = flavor_node_labels or {}
    flavor_specs = flavor_specs or {}
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
            label_keys = {k for f in group.get("flavors") or [] for k in flavor_node_labels.get(f["name"]) or {}}
            for flavor in group.get("flavors") or []:
                flavor_name = flavor["name"]
                selector = template_spec.get("nodeSelector") or {}
                taint = _untolerated_taint(template_spec.get("tolerations") or [], flavor_specs.get(flavor_name) or {})
                if taint is not None:
                    reasons.append(f"untolerated taint {_taint_string(taint)} in flavor {flavor_name}")
                    reason = _worse(reason, "NoMatchingFlavor")
                    continue
                if not _selector_matches(selector, flavor_node_labels.get(flavor_name) or {}, label_keys):
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
                    if limits is not None and (flavor_name, resource) in limits:
                        capacity, available = limits[(flavor_name, resource)]
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


def cohort_of(cluster_queue: Mapping[str, Any]) -> str:
    """The cohort a ClusterQueue belongs to (`cohortName` in v1beta2, `cohort` in v1beta1); "" for none."""
    spec = cluster_queue.get("spec") or {}
    return str(spec.get("cohortName") or spec.get("cohort") or "")


_Quota = tuple[Decimal, Optional[Decimal], Optional[Decimal]]  # nominalQuota, borrowingLimit, lendingLimit
_FR = tuple[str, str]  # (flavor, resource): Kueue's resources.FlavorResource


def _quotas(queue_or_cohort: Mapping[str, Any]) -> dict[_FR, _Quota]:
    """(flavor, resource) -> (nominalQuota, borrowingLimit, lendingLimit) of a ClusterQueue or a Cohort.

    kueue@v0.13.10 pkg/cache/resource_quota.go (createResourceQuotas): both kinds use the same resourceGroups.
    """
    found: dict[_FR, _Quota] = {}
    for group in (queue_or_cohort.get("spec") or {}).get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            for quota in flavor.get("resources") or []:
                limits = [quota.get(k) for k in ("borrowingLimit", "lendingLimit")]
                found[(flavor["name"], quota["name"])] = (
                    parse_quantity(quota.get("nominalQuota", 0)),
                    *(None if v is None else parse_quantity(v) for v in limits),
                )
    return found


@dataclass
class _ResourceNode:
    """One ClusterQueue or Cohort in Kueue's cohort forest (kueue@v0.13.10 pkg/cache/resource_node.go resourceNode)."""

    quotas: dict[_FR, _Quota]
    parent: Optional[str]  # the name of the Cohort above; None for a root (or a ClusterQueue without cohort)
    subtree: dict[_FR, Decimal] = field(default_factory=dict)  # SubtreeQuota
    usage: dict[_FR, Decimal] = field(default_factory=dict)  # Usage

    def local_quota(self, fr: _FR) -> Decimal:
        """localQuota (guaranteedQuota up to v0.13): what a lendingLimit keeps out of the parent's reach."""
        lending = self.quotas.get(fr, (Decimal(0), None, None))[2]
        return max(Decimal(0), self.subtree.get(fr, Decimal(0)) - lending) if lending is not None else Decimal(0)


class CohortForest:
    """ClusterQueues, Cohort objects and the cohort names they use, with Kueue's quota arithmetic.

    kueue@v0.13.10 pkg/cache/resource_node.go (updateCohortResourceNode, accumulateFromChild, available,
    potentialAvailable); the same at v0.15.8 and main in pkg/cache/scheduler/resource_node.go, where
    `guaranteedQuota` is renamed `localQuota` and sums saturate at MaxInt64 (no test reaches that).

    A cohort name that no Cohort object carries is a Cohort with no quota and no parent
    (kueue@v0.13.10 pkg/cache/cache.go: the cache creates it implicitly; `parentName` naming a missing
    Cohort likewise: "We use default Cohort (no borrowing/lending limits)", cohort_types.go). A Cohort
    whose chain of parents loops has its whole tree left out of scheduling (pkg/cache/snapshot.go:
    `hierarchy.HasCycle`), so its ClusterQueues admit nothing: `in_cycle`.
    """

    def __init__(
        self,
        cluster_queues: Mapping[str, Mapping[str, Any]],
        cohorts: Optional[Mapping[str, Mapping[str, Any]]] = None,
        used: Optional[Mapping[str, Mapping[_FR, Decimal]]] = None,
    ) -> None:
        used = used or {}
        self.cohorts: dict[str, _ResourceNode] = {}
        for name, cohort in (cohorts or {}).items():
            parent = str((cohort.get("spec") or {}).get("parentName") or "") or None
            self.cohorts[name] = _ResourceNode(_quotas(cohort), parent)
        self.queues: dict[str, _ResourceNode] = {
            name: _ResourceNode(_quotas(cq), cohort_of(cq) or None) for name, cq in cluster_queues.items()
        }
        for node in [*self.queues.values(), *list(self.cohorts.values())]:
            self._implicit(node.parent)
        for name, node in self.queues.items():
            node.subtree = {fr: quota[0] for fr, quota in node.quotas.items()}  # updateClusterQueueResourceNode
            node.usage = {fr: amount for fr, amount in (used.get(name) or {}).items()}
        for root in [name for name, node in self.cohorts.items() if node.parent is None]:
            self._accumulate(root, set())

    def _implicit(self, name: Optional[str]) -> None:
        if name is not None and name not in self.cohorts:
            self.cohorts[name] = _ResourceNode({}, None)

    def in_cycle(self, cq_name: str) -> bool:
        seen: set[str] = set()
        name = self.queues[cq_name].parent
        while name is not None:
            if name in seen:
                return True
            seen.add(name)
            name = self.cohorts[name].parent
        return False

    def _accumulate(self, cohort: str, visiting: set[str]) -> None:
        """updateCohortResourceNode: own nominal quota plus what each child makes visible (minus its localQuota)."""
        if cohort in visiting:
            return
        visiting.add(cohort)
        node = self.cohorts[cohort]
        node.subtree = {fr: quota[0] for fr, quota in node.quotas.items()}
        node.usage = {}
        children: list[_ResourceNode] = []
        for name, child in self.cohorts.items():
            if child.parent == cohort:
                self._accumulate(name, visiting)
                children.append(child)
        children += [queue for queue in self.queues.values() if queue.parent == cohort]
        for child in children:  # accumulateFromChild
            for fr, quota in child.subtree.items():
                node.subtree[fr] = node.subtree.get(fr, Decimal(0)) + quota - child.local_quota(fr)
            for fr, usage in child.usage.items():
                node.usage[fr] = node.usage.get(fr, Decimal(0)) + max(Decimal(0), usage - child.local_quota(fr))

    def _parent(self, node: _ResourceNode) -> Optional[_ResourceNode]:
        return self.cohorts[node.parent] if node.parent is not None else None

    def available(self, node: _ResourceNode, fr: _FR) -> Decimal:
        """available: local room, plus the parent's, capped by the borrowingLimit (may be negative)."""
        parent = self._parent(node)
        if parent is None:
            return node.subtree.get(fr, Decimal(0)) - node.usage.get(fr, Decimal(0))
        from_parent = self.available(parent, fr)
        borrowing = node.quotas.get(fr, (Decimal(0), None, None))[1]
        local = node.local_quota(fr)
        if borrowing is not None:
            stored = node.subtree.get(fr, Decimal(0)) - local
            used_in_parent = max(Decimal(0), node.usage.get(fr, Decimal(0)) - local)
            from_parent = min(stored - used_in_parent + borrowing, from_parent)
        return max(Decimal(0), local - node.usage.get(fr, Decimal(0))) + from_parent

    def potential_available(self, node: _ResourceNode, fr: _FR) -> Decimal:
        """potentialAvailable: the most the node could hold with no usage anywhere, within borrowingLimits."""
        parent = self._parent(node)
        if parent is None:
            return node.subtree.get(fr, Decimal(0))
        most = node.local_quota(fr) + self.potential_available(parent, fr)
        borrowing = node.quotas.get(fr, (Decimal(0), None, None))[1]
        if borrowing is not None:
            most = min(node.subtree.get(fr, Decimal(0)) + borrowing, most)
        return most

    def limits(self, cq_name: str) -> dict[_FR, tuple[Decimal, Decimal]]:
        """(maximum capacity, available) per (flavor, resource) of one ClusterQueue; {} when its cohorts loop."""
        if self.in_cycle(cq_name):
            return {}
        node = self.queues[cq_name]
        return {fr: (self.potential_available(node, fr), self.available(node, fr)) for fr in node.quotas}


def quota_limits(
    cq_name: str,
    cluster_queues: Mapping[str, Mapping[str, Any]],
    used: Mapping[str, Mapping[_FR, Decimal]],
    cohorts: Optional[Mapping[str, Mapping[str, Any]]] = None,
) -> dict[_FR, tuple[Decimal, Decimal]]:
    """(maximum capacity, available) per (flavor, resource) of one ClusterQueue, with what its cohorts lend.

    Kueue's potentialAvailable and available over the whole cohort forest (`CohortForest`): a
    member keeps `subtree - lendingLimit` to itself and lends the rest to its parent; a Cohort adds
    its own nominal quota and lends up to its own lendingLimit further up; `borrowingLimit` caps what
    a node may take from its parent, at every level. `used` is per ClusterQueue; `cohorts` are the
    Cohort objects by name.
    """
    return CohortForest(cluster_queues, cohorts, used).limits(cq_name)


def admission_check_names(cluster_queue: Mapping[str, Any]) -> list[str]:
    """The admission checks a ClusterQueue asks for: v1beta1 `admissionChecks`, or `admissionChecksStrategy`.

    `onFlavors` is not looked at: every check applies to every flavor.
    """
    spec = cluster_queue.get("spec") or {}
    names = [str(n) for n in spec.get("admissionChecks") or []]
    names += [str(c.get("name")) for c in (spec.get("admissionChecksStrategy") or {}).get("admissionChecks") or []]
    return list(dict.fromkeys(names))


PROVISIONING_CONTROLLER = "kueue.x-k8s.io/provisioning-request"


def provisioning_check_condition(check: Mapping[str, Any], config_names: Iterable[str]) -> tuple[bool, str, str]:
    """(active, reason, message) that Kueue's ProvisioningRequest check controller gives its AdmissionCheck.

    kueue@v0.13.10 pkg/controller/admissionchecks/provisioning/admissioncheck_reconciler.go (Reconcile) and
    pkg/util/admissioncheck/admissioncheck.go (ConfigFromRef, refValidForGK); the same at v0.15.8 and main:
    Active only while `spec.parameters` names an existing ProvisioningRequestConfig.
    """
    ref = (check.get("spec") or {}).get("parameters")
    if ref is None:
        return False, "BadParametersRef", "missing parameters reference"
    if not ref.get("name"):
        return False, "BadParametersRef", "empty name: bad parameters reference"
    if ref.get("apiGroup") != KUEUE_GROUP:
        return False, "BadParametersRef", f'wrong group "{ref.get("apiGroup", "")}", expecting "{KUEUE_GROUP}": bad parameters reference'
    if ref.get("kind") != "ProvisioningRequestConfig":
        return False, "BadParametersRef", f'wrong kind "{ref.get("kind", "")}", expecting "ProvisioningRequestConfig": bad parameters reference'
    if ref["name"] not in set(config_names):
        return False, "BadParametersRef", f'provisioningrequestconfigs.{KUEUE_GROUP} "{ref["name"]}" not found'
    return True, "Active", "The admission check is active"


def cluster_queue_inactive(
    cluster_queue: Mapping[str, Any], flavor_names: Iterable[str], admission_checks: Mapping[str, Mapping[str, Any]]
) -> Optional[tuple[str, str]]:
    """(reason, message) of the Active=False condition Kueue gives a ClusterQueue that can admit nothing; None if active.

    kueue@v0.13.10 pkg/cache/clusterqueue.go (updateQueueStatus, inactiveReason, updateLabelKeys,
    updateWithAdmissionChecks; pkg/cache/scheduler/clusterqueue.go at v0.15.8 and main, same reasons and
    words): stopped (`stopPolicy` other than None), a ResourceFlavor it names that does not exist
    (in resource-group order), an AdmissionCheck it names that does not exist or whose `Active`
    condition is not True (both sorted by name). The first reason wins; every message is listed.
    Left out: Terminating, the MultiKueue and topology reasons.
    """
    spec = cluster_queue.get("spec") or {}
    existing = set(flavor_names)
    reasons: list[str] = []
    messages: list[str] = []
    if (spec.get("stopPolicy") or "None") != "None":
        reasons.append("Stopped")
        messages.append("is stopped")
    missing_flavors = [
        str(flavor.get("name"))
        for group in spec.get("resourceGroups") or []
        for flavor in group.get("flavors") or []
        if flavor.get("name") not in existing
    ]
    if missing_flavors:
        reasons.append("FlavorNotFound")
        messages.append(f"references missing ResourceFlavor(s): {','.join(missing_flavors)}")
    names = admission_check_names(cluster_queue)
    missing_checks = sorted(n for n in names if n not in admission_checks)
    inactive_checks = sorted(
        n for n in names if n in admission_checks and not condition_is_true(admission_checks[n], "Active")
    )
    if missing_checks:
        reasons.append("AdmissionCheckNotFound")
        messages.append(f"references missing AdmissionCheck(s): {','.join(missing_checks)}")
    if inactive_checks:
        reasons.append("AdmissionCheckInactive")
        messages.append(f"references inactive AdmissionCheck(s): {','.join(inactive_checks)}")
    if not reasons:
        return None
    return reasons[0], f"Can't admit new workloads: {', '.join(messages)}."


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


_PREEMPTION_REASONS = {
    "InClusterQueue": "prioritization in the ClusterQueue",
    "InCohortReclamation": "reclamation within the cohort",
    "InCohortFairSharing": "Fair Sharing within the cohort",
    "InCohortReclaimWhileBorrowing": "reclamation within the cohort while borrowing",
}


def preemption_message(preemptor: Mapping[str, Any], reason: str, paths: Optional[tuple[str, str]] = None) -> str:
    """The Evicted/Preempted message of a preempted workload (Kueue's preemptionMessage).

    `paths`: (preemptor path, preemptee path) from Kueue v0.15 on (`/<cohort>/<cq>`); None for v0.13.
    """
    meta = preemptor.get("metadata") or {}
    message = (
        f"Preempted to accommodate a workload (UID: {meta.get('uid') or 'UNKNOWN'}, "
        f"JobUID: {(meta.get('labels') or {}).get(JOB_UID_LABEL) or 'UNKNOWN'}) "
        f"due to {_PREEMPTION_REASONS.get(reason, 'UNKNOWN')}"
    )
    if paths is not None:
        message += f"; preemptor path: {paths[0] or 'UNKNOWN'}; preemptee path: {paths[1] or 'UNKNOWN'}"
    return message


def workload_priority(workload: Mapping[str, Any]) -> int:
    return int((workload.get("spec") or {}).get("priority") or 0)


def preemption_targets(
    cluster_queue: Mapping[str, Any],
    preemptor: Mapping[str, Any],
    admitted: list[Obj],
    used: Mapping[tuple[str, str], Decimal],
    flavor_node_labels: Optional[Mapping[str, Mapping[str, str]]] = None,
    flavor_specs: Optional[Mapping[str, Mapping[str, Any]]] = None,
) -> list[Obj]:
    """The admitted workloads of one ClusterQueue that Kueue preempts so that `preemptor` fits; [] if none.

    `preemption.withinClusterQueue`: Never (the default), LowerPriority, or
    LowerOrNewerEqualPriority. Candidates in Kueue's order (already evicted
    first, lower priority first, most recently admitted first, then uid) are
    removed one by one until the preemptor fits; then every target but the
    last is given back if the preemptor still fits without evicting it
    (Kueue's minimal preemptions).
    """
    policy = ((cluster_queue.get("spec") or {}).get("preemption") or {}).get("withinClusterQueue") or "Never"
    if policy not in ("LowerPriority", "LowerOrNewerEqualPriority"):
        return []
    priority = workload_priority(preemptor)
    created = (preemptor.get("metadata") or {}).get("creationTimestamp") or ""

    def eligible(candidate: Obj) -> bool:
        other = workload_priority(candidate)
        if other < priority:
            return True
        newer = ((candidate.get("metadata") or {}).get("creationTimestamp") or "") > created
        return policy == "LowerOrNewerEqualPriority" and other == priority and newer

    def reserved_at(candidate: Obj) -> str:
        cond = find_condition(candidate, "QuotaReserved") or {}
        return cond.get("lastTransitionTime") or "" if cond.get("status") == "True" else ""

    candidates = sorted((c for c in admitted if eligible(c)), key=lambda c: c["metadata"].get("uid", ""))
    candidates.sort(key=reserved_at, reverse=True)
    candidates.sort(key=workload_priority)
    candidates.sort(key=lambda c: not condition_is_true(c, "Evicted"))
    podsets = (preemptor.get("spec") or {}).get("podSets") or []
    remaining = dict(used)

    def take(candidate: Obj, sign: int) -> None:
        for key, amount in admission_usage(candidate).items():
            remaining[key] = remaining.get(key, Decimal(0)) - sign * amount

    targets: list[Obj] = []
    for candidate in candidates:
        take(candidate, 1)
        targets.append(candidate)
        if assign_flavors(cluster_queue, podsets, remaining, flavor_node_labels, None, flavor_specs).fits:
            break
    else:
        return []
    for index in range(len(targets) - 2, -1, -1):
        take(targets[index], -1)
        if assign_flavors(cluster_queue, podsets, remaining, flavor_node_labels, None, flavor_specs).fits:
            del targets[index]
        else:
            take(targets[index], 1)
    return targets


def max_execution_time_seconds(job: Mapping[str, Any]) -> Optional[int]:
    """The Workload's `spec.maximumExecutionTimeSeconds` from the job's max-exec-time label, None if absent or bad.

    kueue@v0.13.10 pkg/controller/jobframework/interface.go (MaximumExecutionTimeSecondsForObject): a
    base-10 int32 above 0; the same at v0.15.8 and main.
    """
    raw = _labels(job).get(MAX_EXEC_TIME_LABEL)
    if raw is None or not re.fullmatch(r"[+-]?[0-9]+", raw):
        return None
    value = int(raw)
    return value if 0 < value < 2**31 else None


def _seconds_since(timestamp: Optional[str]) -> int:
    """Whole seconds from an RFC 3339 timestamp until now (0 when there is none)."""
    if not timestamp:
        return 0
    then = datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    return max(0, int((datetime.now(timezone.utc) - then).total_seconds()))


def max_execution_time_exceeded(workload: Mapping[str, Any], accumulated_field: str) -> bool:
    """Whether an admitted Workload has used up its `maximumExecutionTimeSeconds`.

    kueue@v0.13.10 pkg/controller/core/workload_controller.go (reconcileMaxExecutionTime): the limit, less
    the admitted time of earlier admissions (`accumulated_field`: v1beta1
    `accumulatedPastExexcutionTimeSeconds`, v1beta2 `accumulatedPastExecutionTimeSeconds`), less the
    time since `Admitted` turned True; the same at v0.15.8 and main.
    """
    limit = (workload.get("spec") or {}).get("maximumExecutionTimeSeconds")
    admitted = find_condition(workload, "Admitted")
    if limit is None or admitted is None or admitted.get("status") != "True":
        return False
    past = int((workload.get("status") or {}).get(accumulated_field) or 0)
    return int(limit) - past - _seconds_since(admitted.get("lastTransitionTime")) <= 0


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
        if getattr(server, "kueue", KUEUE_NEWEST) != KUEUE_NEWEST:
            raise ValueError(f"the simulated Kueue plays no release: start its server with the newest CRDs, not {server.kueue}")
        self._version = KUEUE_VERSION_SPOKEN
        self._wpc_reported: set[tuple[str, str]] = set()  # (job uid, class) whose missing class was reported

    # ---- webhook and visibility API -------------------------------------
    def _register(self) -> None:
        if self._registered:
            return
        self._registered = True
        for kind in ("RayJob", "RayCluster"):
            self._server.add_mutating_hook(RAY_GROUP, kind, self._make_webhook(kind))
        versions = "|".join(VISIBILITY_VERSIONS)
        prefix = rf"^/apis/visibility\.kueue\.x-k8s\.io/({versions})"
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
            # The validating webhook (verbs create;update) runs after every mutating one.
            old = None
            if operation == "UPDATE":
                old = self._server.get_object(RAY_API, kind, meta.get("name", ""), namespace)
            if old is None:
                errors = kueue_create_errors(kind, obj)
            else:
                errors = kueue_update_errors(
                    kind,
                    old,
                    obj,
                    default_queue_exists=bool(self._default_queue)
                    and (namespace, self._default_queue) in self._view.local_queues,
                )
            if errors and AdmissionDenied is not None:
                raise AdmissionDenied(f"v{kind.lower()}.kb.io", aggregate_message(errors))

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
            wl = self._api.get(KUEUE_GROUP, self._version, "workloads", workload_name, namespace)
            if wl is None:
                raise LookupError(f"workload {namespace}/{workload_name} not found")
            preempted_reason = "InClusterQueue" if reason == "Preempted" else None
            wl = self._mark_evicted(wl, reason, message, preempted_reason)
            if requeue:
                self._held.discard((namespace, workload_name))
            else:
                self._held.add((namespace, workload_name))
            job = self._owner_job(wl)
            if job is not None:
                self._stop_job(job[0], job[1], wl)

    def _mark_evicted(
        self,
        wl: Obj,
        reason: str,
        message: str,
        preempted_reason: Optional[str],
        *,
        stats: Optional[tuple[str, str]] = None,
        drop: tuple[str, ...] = (),
    ) -> Obj:
        """workload.Evict: Evicted=True (+ Preempted=True), the eviction counted, the events Kueue records.

        `stats`: the (reason, underlyingCause) counted in schedulingStats.evictions; by default
        (reason, ""), as the scheduler's preemption passes it. `drop`: conditions removed in the same
        write (a deactivation's DeactivationTarget). The Evicted event is recorded only for a
        Workload that held quota, as Kueue's Evict does.
        """
        status = copy.deepcopy(wl.get("status") or {})
        now = now_rfc3339()
        conditions = [c for c in status.get("conditions") or [] if c.get("type") not in drop]
        conds = set_condition(conditions, "Evicted", True, reason, message, now)
        if preempted_reason:
            conds = set_condition(conds, "Preempted", True, preempted_reason, message, now)
        status["conditions"] = conds
        stats_reason, cause = stats or (reason, "")
        evictions = list((status.get("schedulingStats") or {}).get("evictions") or [])
        for entry in evictions:
            if entry.get("reason") == stats_reason and entry.get("underlyingCause", "") == cause:
                entry["count"] = int(entry.get("count") or 0) + 1
                break
        else:
            evictions.append({"reason": stats_reason, "underlyingCause": cause, "count": 1})
        status["schedulingStats"] = {**(status.get("schedulingStats") or {}), "evictions": evictions}
        for check in status.get("admissionChecks") or []:  # resetChecksOnEviction
            if check.get("state") != "Pending":
                previous = check.get("state")
                reset = f"Reset to Pending after eviction. Previously: {previous}"
                check.update(state="Pending", lastTransitionTime=now, message=reset)
        updated = self._api.patch_status(KUEUE_GROUP, self._version, "workloads", wl, status)
        if status.get("admission"):
            self._record_event(updated, "Normal", f"EvictedDueTo{reason}", message, "kueue-admission")
        if preempted_reason:
            self._record_event(updated, "Normal", "Preempted", message, "kueue-admission")
        return updated

    def _record_event(self, involved: Obj, event_type: str, reason: str, message: str, component: str) -> None:
        """A core/v1 Event about `involved`, as Kueue's event recorders write them (best effort, as theirs)."""
        meta = involved["metadata"]
        now = now_rfc3339()
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{meta['name']}.{uuid.uuid4().hex[:16]}", "namespace": meta["namespace"]},
            "involvedObject": {
                "apiVersion": involved.get("apiVersion"),
                "kind": involved.get("kind"),
                "name": meta["name"],
                "namespace": meta["namespace"],
                "uid": meta.get("uid"),
                "resourceVersion": meta.get("resourceVersion"),
            },
            "reason": reason,
            "message": message,
            "type": event_type,
            "source": {"component": component},
            "reportingComponent": component,
            "reportingInstance": "",
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        try:
            self._api.core.create_namespaced_event(meta["namespace"], event, _request_timeout=REQUEST_TIMEOUT)
        except Exception as error:  # an event that cannot be written is dropped, as client-go's recorder does
            self._note_error(f"recording event {reason} for {meta['name']}: {error}")

    def set_admission_check(
        self, namespace: str, workload_name: str, check: str, state: str = "Ready", message: str = ""
    ) -> None:
        """Set one admission check's state, as its controller (e.g. Kueue's ProvisioningRequest one) does."""
        with self._lock:
            wl = self._api.get(KUEUE_GROUP, self._version, "workloads", workload_name, namespace)
            if wl is None:
                raise LookupError(f"workload {namespace}/{workload_name} not found")
            status = copy.deepcopy(wl.get("status") or {})
            checks = [c for c in status.get("admissionChecks") or [] if c.get("name") != check]
            checks.append({"name": check, "state": state, "lastTransitionTime": now_rfc3339(), "message": message})
            status["admissionChecks"] = checks
            self._api.patch_status(KUEUE_GROUP, self._version, "workloads", wl, status)

    def requeue(self, namespace: str, workload_name: str) -> None:
        """Let a held evicted workload compete for quota again (`Requeued=True`)."""
        with self._lock:
            self._held.discard((namespace, workload_name))
            wl = self._api.get(KUEUE_GROUP, self._version, "workloads", workload_name, namespace)
            if wl is None:
                return
            status = copy.deepcopy(wl.get("status") or {})
            status["conditions"] = set_condition(
                status.get("conditions") or [], "Requeued", True, "BackoffFinished", "The workload backoff was finished"
            )
            self._api.patch_status(KUEUE_GROUP, self._version, "workloads", wl, status)

    # ---- reconcile ------------------------------------------------------
    def _reconcile(self) -> None:
        api = self._api
        cluster_queues = {cq["metadata"]["name"]: cq for cq in api.list(KUEUE_GROUP, self._version, "clusterqueues")}
        local_queues = {
            (lq["metadata"]["namespace"], lq["metadata"]["name"]): lq
            for lq in api.list(KUEUE_GROUP, self._version, "localqueues")
        }
        flavor_specs = {
            rf["metadata"]["name"]: rf.get("spec") or {} for rf in api.list(KUEUE_GROUP, self._version, "resourceflavors")
        }
        flavor_labels = {name: spec.get("nodeLabels") or {} for name, spec in flavor_specs.items()}
        cohorts = {co["metadata"]["name"]: co for co in api.list(KUEUE_GROUP, self._version, "cohorts")}
        checks = {ac["metadata"]["name"]: ac for ac in api.list(KUEUE_GROUP, self._version, "admissionchecks")}
        configs = [c["metadata"]["name"] for c in api.list(KUEUE_GROUP, self._version, "provisioningrequestconfigs")]
        self._each(list(checks.values()), lambda ac: self._sync_provisioning_check(ac, configs, checks), "status of admissioncheck")
        inactive = {
            name: why
            for name, cq in cluster_queues.items()
            if (why := cluster_queue_inactive(cq, flavor_labels, checks)) is not None
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
        for wl in api.list(KUEUE_GROUP, self._version, "workloads"):
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
        self._schedule(workloads, jobs, cluster_queues, local_queues, flavor_specs, cohorts, inactive)
        self._each(
            list(workloads.items()), lambda item: self._sync_job(item[1], *jobs[item[0]]), "syncing job of workload"
        )
        self._update_queue_statuses(workloads.values(), cluster_queues, local_queues, inactive)

    def _sync_provisioning_check(self, check: Obj, configs: list[str], checks: dict[str, Obj]) -> None:
        """The ProvisioningRequest check controller's AdmissionCheck reconciler: its `Active` condition.

        Only checks of controller `kueue.x-k8s.io/provisioning-request`; another controller's check is
        active when its own controller (or the test) says so. Written only when the status flips, as Kueue does.
        """
        if (check.get("spec") or {}).get("controllerName") != PROVISIONING_CONTROLLER:
            return
        active, reason, message = provisioning_check_condition(check, configs)
        if (find_condition(check, "Active") or {}).get("status") == ("True" if active else "False"):
            return
        status = copy.deepcopy(check.get("status") or {})
        status["conditions"] = set_condition(status.get("conditions") or [], "Active", active, reason, message)
        updated = self._api.patch_status(KUEUE_GROUP, self._version, "admissionchecks", check, status)
        checks[check["metadata"]["name"]] = updated

    def _owner_job(self, wl: Obj) -> Optional[tuple[str, Obj]]:
        owner = controller_owner(wl)
        if not owner or owner.get("kind") not in _RAY_PLURALS:
            return None
        job = self._api.get(
            RAY_GROUP, RAY_VERSION, _RAY_PLURALS[owner["kind"]], owner["name"], wl["metadata"]["namespace"]
        )
        return (owner["kind"], job) if job else None

    def _priority(self, job: Obj) -> tuple[int, Optional[Obj]]:
        """(priority, priorityClassRef) from the job's WorkloadPriorityClass label; LookupError if it names none.

        Kueue's ExtractPriority: a label naming a missing class is an error, so no Workload is built.
        """
        name = (job["metadata"].get("labels") or {}).get(PRIORITY_LABEL)
        if not name:
            return 0, None
        wpc = self._api.get(KUEUE_GROUP, self._version, "workloadpriorityclasses", name, None)
        if wpc is None:
            raise LookupError(name)
        ref = {"group": KUEUE_GROUP, "kind": "WorkloadPriorityClass", "name": name}
        return int(wpc.get("value") or 0), ref

    def _create_workload(self, kind: str, job: Obj, workloads: dict[str, Obj]) -> None:
        if kind == "RayJob" and rayjob_finished(job):
            return
        meta = job["metadata"]
        try:
            priority, priority_ref = self._priority(job)
        except LookupError as missing:
            # The job reconciler fails to prepare the Workload and retries with backoff; the job
            # stays suspended. It also records a Warning event on the job (main, kueue#13775).
            key = (meta["uid"], str(missing.args[0]))
            if key not in self._wpc_reported:
                self._record_event(
                    job,
                    "Warning",
                    "WorkloadPriorityClassNotFound",
                    f"WorkloadPriorityClass {json.dumps(missing.args[0])} not found",
                    f"{RAY_GROUP}/{kind.lower()}-kueue-controller",
                )
            self._wpc_reported.add(key)
            return
        spec: Obj = {"queueName": meta["labels"][QUEUE_LABEL], "podSets": ray_podsets(kind, job), "priority": priority}
        if priority_ref:
            spec["priorityClassRef"] = priority_ref
        max_seconds = max_execution_time_seconds(job)
        if max_seconds is not None:
            spec["maximumExecutionTimeSeconds"] = max_seconds
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
        wl = convert(KUEUE_GROUP, "Workload", wl, self._version)  # v1beta1: priorityClassSource + Name
        if not (job.get("spec") or {}).get("suspend", False):
            # A job that runs without a Workload is stopped first (Kueue's job reconciler).
            self._api.patch(RAY_GROUP, RAY_VERSION, _RAY_PLURALS[kind], job, {"spec": {"suspend": True}})
        created = self._api.create(KUEUE_GROUP, self._version, "workloads", wl)
        self._arrival[created["metadata"]["uid"]] = next(self._arrivals)
        workloads[meta["uid"]] = created

    def _sync_workload(self, wl: Obj, kind: str, job: Obj, workloads: dict[str, Obj]) -> None:
        """Finished, deactivation, and the end of an eviction (quota goes back once the job is inactive)."""
        status = copy.deepcopy(wl.get("status") or {})
        conds = status.get("conditions") or []
        key = (wl["metadata"]["namespace"], wl["metadata"]["name"])
        if condition_is_true(wl, "Finished"):
            return
        finished = rayjob_finished(job) if kind == "RayJob" else None
        if finished is None and self._deactivation_step(wl, job["metadata"]["uid"], workloads):
            return
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
            # kueue@v0.13.10 pkg/controller/jobframework/reconciler.go ("handle eviction"): the reservation
            # goes, Admitted turns False (its admitted time is accumulated, SyncAdmittedCondition), and
            # Requeued says whether the Workload competes again; a deactivated one never does.
            message = (find_condition(wl, "Evicted") or {}).get("message", "")
            status.pop("admission", None)
            conds = set_condition(conds, "QuotaReserved", False, "Pending", message)
            self._accumulate_admitted_time(wl, status)
            conds = set_condition(conds, "Admitted", False, "NoReservation", "The workload has no reservation")
            evicted_reason = (find_condition(wl, "Evicted") or {}).get("reason", "Evicted")
            requeued = key not in self._held and (wl.get("spec") or {}).get("active") is not False
            status["conditions"] = set_condition(conds, "Requeued", requeued, evicted_reason, message)
        elif status.get("admission") and status.get("admissionChecks") and not condition_is_true(wl, "Evicted"):
            # SyncAdmittedCondition: Admitted once every admission check is Ready (and not before).
            ready = all(c.get("state") == "Ready" for c in status["admissionChecks"])
            if ready == condition_is_true(wl, "Admitted"):
                return
            status["conditions"] = set_condition(
                conds,
                "Admitted",
                ready,
                "Admitted" if ready else "UnsatisfiedChecks",
                "The workload is admitted" if ready else "The workload has not all checks ready",
            )
        else:
            return
        workloads[job["metadata"]["uid"]] = self._api.patch_status(KUEUE_GROUP, self._version, "workloads", wl, status)

    @property
    def _accumulated_field(self) -> str:
        """The Workload status field of earlier admissions' run time (v1beta2's spelling)."""
        return "accumulatedPastExecutionTimeSeconds"

    def _accumulate_admitted_time(self, wl: Obj, status: Obj) -> None:
        """SyncAdmittedCondition: when Admitted turns False, add the time it was True to the accumulated run time."""
        admitted = find_condition(wl, "Admitted")
        if admitted is None or admitted.get("status") != "True":
            return
        field_name = self._accumulated_field
        status[field_name] = int(status.get(field_name) or 0) + _seconds_since(admitted.get("lastTransitionTime"))

    def _deactivation_step(self, wl: Obj, uid: str, workloads: dict[str, Obj]) -> bool:
        """One step of Kueue's deactivation of a Workload; True when it wrote something this pass.

        kueue@v0.13.10 pkg/controller/core/workload_controller.go (Reconcile, reconcileMaxExecutionTime),
        the same steps at v0.15.8 and main:
        1. admitted longer than `maximumExecutionTimeSeconds`: `DeactivationTarget=True`
           (MaximumExecutionTimeExceeded, "exceeding the maximum execution time"), the accumulated time
           cleared, a Warning event MaximumExecutionTimeExceeded;
        2. a target on an active Workload: `spec.active=false` (an Update of the Workload);
        3. an inactive Workload not yet evicted: Evicted=True, reason `Deactivated` or
           `DeactivatedDueTo<target reason>`, message "The workload is deactivated[ due to <target
           message>]", the target removed. The job reconciler then suspends the job and clears the
           reservation (`_sync_workload`), with Requeued=False: it never competes again.
        """
        spec = wl.get("spec") or {}
        if spec.get("active") is not False:
            if condition_is_true(wl, "DeactivationTarget"):
                updated = copy.deepcopy(wl)
                updated["spec"]["active"] = False
                workloads[uid] = self._api.replace(KUEUE_GROUP, self._version, "workloads", updated)
                return True
            if not condition_is_true(wl, "Evicted") and max_execution_time_exceeded(wl, self._accumulated_field):
                status = copy.deepcopy(wl.get("status") or {})
                status["conditions"] = set_condition(
                    status.get("conditions") or [], "DeactivationTarget", True,
                    "MaximumExecutionTimeExceeded", "exceeding the maximum execution time",
                )  # fmt: skip
                status.pop(self._accumulated_field, None)
                updated = self._api.patch_status(KUEUE_GROUP, self._version, "workloads", wl, status)
                workloads[uid] = updated
                limit = int(spec["maximumExecutionTimeSeconds"])
                self._record_event(
                    updated, "Warning", "MaximumExecutionTimeExceeded",
                    f"The maximum execution time ({limit}s) exceeded", "kueue-workload-controller",
                )  # fmt: skip
                return True
            return False
        if condition_is_true(wl, "Evicted"):
            return False
        target = find_condition(wl, "DeactivationTarget")
        cause = str((target or {}).get("reason") or "")
        message = "The workload is deactivated" + (f" due to {target.get('message', '')}" if target else "")
        reason = f"DeactivatedDueTo{cause}" if cause else "Deactivated"
        stats = ("Deactivated", cause)
        workloads[uid] = self._mark_evicted(wl, reason, message, None, stats=stats, drop=("DeactivationTarget",))
        return True

    def _schedule(
        self,
        workloads: dict[str, Obj],
        jobs: dict[str, tuple[str, Obj]],
        cluster_queues: dict[str, Obj],
        local_queues: dict[tuple[str, str], Obj],
        flavor_specs: dict[str, Obj],
        cohorts: dict[str, Obj],
        inactive: dict[str, tuple[str, str]],
    ) -> None:
        flavor_labels = {name: spec.get("nodeLabels") or {} for name, spec in flavor_specs.items()}
        used: dict[str, dict[tuple[str, str], Decimal]] = {name: {} for name in cluster_queues}
        pending: dict[str, list[tuple[str, Obj]]] = {name: [] for name in cluster_queues}
        admitted: dict[str, list[str]] = {name: [] for name in cluster_queues}  # cq -> job uids
        for uid, wl in workloads.items():
            status = wl.get("status") or {}
            if condition_is_true(wl, "Finished"):
                continue
            if status.get("admission"):
                admitted.setdefault(status["admission"].get("clusterQueue", ""), []).append(uid)
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
            if ((lq.get("spec") or {}).get("stopPolicy") or "None") != "None":
                # kueue@v0.13.10 workload_controller.go (Reconcile: !lqActive); main getQueueBlocker: Suspended.
                message = f"LocalQueue {lq_name} is inactive"
                self._set_pending(uid, workloads, "Inadmissible", message, granular="Suspended")
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
            if cq_name in inactive:
                # kueue@v0.13.10 pkg/controller/core/workload_controller.go (Reconcile: !ClusterQueueActive);
                # main getQueueBlocker: reason Suspended with UnadmittedWorkloadsObservability.
                for uid, wl in entries:
                    message = f"ClusterQueue {cq_name} is inactive"
                    self._set_pending(uid, workloads, "Inadmissible", message, granular="Suspended")
                new_pending[cq_name] = [self._pending_item(workloads[uid]) for uid, _ in entries]
                continue
            forest = CohortForest(cluster_queues, cohorts)
            if forest.in_cycle(cq_name):
                new_pending[cq_name] = [self._pending_item(wl) for _, wl in entries]
                continue  # pkg/cache/snapshot.go: a ClusterQueue under a Cohort cycle is not scheduled
            blocked = False
            for uid, wl in entries:
                limits = quota_limits(cq_name, cluster_queues, used, cohorts)
                podsets = wl["spec"]["podSets"]
                fit = None if blocked else assign_flavors(cq, podsets, used[cq_name], flavor_labels, limits, flavor_specs)
                if fit is not None and fit.fits:
                    self._admit(uid, workloads, cq_name, fit, admission_check_names(cq))
                    for key, amount in fit.usage.items():
                        used[cq_name][key] = used[cq_name].get(key, Decimal(0)) + amount
                    continue
                if fit is not None and fit.reason == "WaitingForQuota":
                    holders = [workloads[held] for held in admitted.get(cq_name, [])]
                    targets = preemption_targets(cq, wl, holders, used[cq_name], flavor_labels, flavor_specs)
                    if targets:
                        self._preempt(targets, wl, cq_name, cq, workloads)
                        message = f"{fit.message}. Pending the preemption of {len(targets)} workload(s)"
                        self._set_pending(uid, workloads, "Pending", message, granular="WaitingForPreemptedWorkloads")
                        blocked = strict
                        still_pending.append((uid, workloads[uid]))
                        continue
                if fit is not None:
                    self._set_pending(uid, workloads, "Pending", fit.message, granular=fit.reason)
                    blocked = strict
                still_pending.append((uid, workloads[uid]))
            new_pending[cq_name] = [self._pending_item(wl) for _, wl in still_pending]
        self._view.pending_by_cq = new_pending

    def _preempt(self, targets: list[Obj], preemptor: Obj, cq_name: str, cq: Obj, workloads: dict[str, Obj]) -> None:
        """Preemptor.IssuePreemptions: evict each target not yet evicted; a preempted workload is requeued at once."""
        spec = cq.get("spec") or {}
        cohort = spec.get("cohortName") or spec.get("cohort")
        path = "/" + "/".join([cohort, cq_name] if cohort else [cq_name])
        paths = (path, path)
        message = preemption_message(preemptor, "InClusterQueue", paths)
        for target in targets:
            if condition_is_true(target, "Evicted"):
                continue  # preemption ongoing
            job_uid = (controller_owner(target) or {}).get("uid", "")
            self._held.discard((target["metadata"]["namespace"], target["metadata"]["name"]))
            workloads[job_uid] = self._mark_evicted(target, "Preempted", message, "InClusterQueue")

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
        workloads[uid] = self._api.patch_status(KUEUE_GROUP, self._version, "workloads", wl, status)

    def _admit(self, uid: str, workloads: dict[str, Obj], cq_name: str, fit: FlavorFit, checks: list[str]) -> None:
        """Reserve quota; Admitted too unless the ClusterQueue has admission checks (then once all are Ready)."""
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
        states = {c.get("name"): c for c in status.get("admissionChecks") or []}
        if checks:
            status["admissionChecks"] = [
                states.get(name) or {"name": name, "state": "Pending", "lastTransitionTime": now, "message": ""}
                for name in checks
            ]
        if all(c.get("state") == "Ready" for c in status.get("admissionChecks") or []):
            conds = set_condition(conds, "Admitted", True, "Admitted", "The workload is admitted", now)
        else:
            conds = set_condition(
                conds, "Admitted", False, "UnsatisfiedChecks", "The workload has not all checks ready", now
            )
        for previous in ("Evicted", "Preempted"):
            cond = find_condition(wl, previous)
            if cond and cond.get("status") == "True":
                conds = set_condition(
                    conds, previous, False, "QuotaReserved", f"Previously: {cond.get('message', '')}", now
                )
        status["conditions"] = conds
        workloads[uid] = self._api.patch_status(KUEUE_GROUP, self._version, "workloads", wl, status)

    def _sync_job(self, wl: Obj, kind: str, job: Obj) -> None:
        """Start the job of an admitted workload; stop the job of one that is not admitted."""
        if condition_is_true(wl, "Finished"):
            return
        suspended = (job.get("spec") or {}).get("suspend") is True
        admitted = condition_is_true(wl, "Admitted") and not condition_is_true(wl, "Evicted")
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
                rf = self._api.get(KUEUE_GROUP, self._version, "resourceflavors", flavor, None)
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
        self,
        workloads: Iterable[Obj],
        cluster_queues: dict[str, Obj],
        local_queues: dict[tuple[str, str], Obj],
        inactive: dict[str, tuple[str, str]],
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
                lambda obj: self._write_queue_status("clusterqueues", obj, bucket(("cq", name)), cq, inactive.get(name)),
                "status of clusterqueue",
            )
        for key, lq in local_queues.items():
            cq_name = (lq.get("spec") or {}).get("clusterQueue", "")
            cq = cluster_queues.get(cq_name)
            self._each(
                [lq],
                lambda obj: self._write_queue_status("localqueues", obj, bucket(("lq",) + key), cq, inactive.get(cq_name)),
                "status of localqueue",
            )

    def _write_queue_status(
        self, plural: str, queue: Obj, counter: dict[str, Any], cq: Optional[Obj], cq_inactive: Optional[tuple[str, str]]
    ) -> None:
        """The status a ClusterQueue or LocalQueue controller writes: counts, usage per flavor, the Active condition.

        kueue@v0.13.10 pkg/controller/core/clusterqueue_controller.go (updateCqStatusIfChanged: Active from the
        cache's inactiveReason) and localqueue_controller.go (Reconcile: ClusterQueueDoesNotExist,
        ClusterQueueIsInactive); the same words at v0.15.8 and main.
        """
        flavors = []
        for group in ((cq or {}).get("spec") or {}).get("resourceGroups") or []:
            for flavor in group.get("flavors") or []:
                resources = []
                for quota in flavor.get("resources") or []:
                    total = counter["usage"].get((flavor["name"], quota["name"]), Decimal(0))
                    entry = {"name": quota["name"], "total": format_quantity(total)}
                    if plural == "clusterqueues":
                        nominal = parse_quantity(quota.get("nominalQuota", 0))
                        entry["borrowed"] = format_quantity(max(Decimal(0), total - nominal))
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
        if plural == "clusterqueues" and cq_inactive is not None:
            active = set_condition(conds, "Active", False, *cq_inactive)
        elif plural == "clusterqueues":
            active = set_condition(conds, "Active", True, "Ready", "Can admit new workloads")
        elif ((queue.get("spec") or {}).get("stopPolicy") or "None") != "None":
            active = set_condition(conds, "Active", False, "Stopped", "LocalQueue is stopped")
        elif cq is None:
            active = set_condition(
                conds, "Active", False, "ClusterQueueDoesNotExist", "Can't submit new workloads to clusterQueue"
            )
        elif cq_inactive is not None:
            active = set_condition(
                conds, "Active", False, "ClusterQueueIsInactive", "Can't submit new workloads to clusterQueue"
            )
        else:
            active = set_condition(conds, "Active", True, "Ready", "Can submit new workloads to localQueue")
        if [(c["type"], c["status"], c["reason"], c["message"]) for c in active] != [
            (c.get("type"), c.get("status"), c.get("reason"), c.get("message")) for c in conds
        ]:
            status["conditions"] = active
        if plural == "localqueues":  # v1beta1 calls it flavorUsage
            status = convert(KUEUE_GROUP, "LocalQueue", {"apiVersion": KUEUE_API, "status": status}, self._version)[
                "status"
            ]
        self._api.patch_status(KUEUE_GROUP, self._version, plural, queue, status)


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
