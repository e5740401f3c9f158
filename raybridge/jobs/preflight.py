"""Before anything is created on a cluster: does everything the job names exist, and could it ever run?

A real Kueue never creates a Workload for a missing WorkloadPriorityClass,
leaves a job for a missing or stopped LocalQueue or an inactive ClusterQueue
(Kueue's `Active=False` condition: a flavor or admission check it names is
missing or inactive, or it is stopped) pending forever, and never admits one
that no flavor of its ClusterQueue can ever take (`kueue.fit`: one flavor per
pod set and resource group, the quota its cohorts can lend, Cohort objects and
their parents included). Each of those would make the user wait out the whole
timeout in silence; here each is one line and exit 2, listing what does exist.
A namespace that does not exist is said as such, and so is a missing token Secret
the job names (`authSecret`): KubeRay would leave its cluster unmade.

What the API does not let this user read (ClusterQueues and Cohorts are
cluster-scoped) is skipped with a note, never guessed: a LocalQueue's own
status still tells a user who may not read its ClusterQueue that the
ClusterQueue is inactive, and unknown cohort lending is never counted
against the job. It creates nothing and prints nothing; the caller reports
the notes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Mapping, Optional

from raybridge.kueue.names import KUEUE_PRIORITY_LABEL, KUEUE_QUEUE_LABEL, MULTIKUEUE_CONTROLLER
from raybridge.kueue.fit import admission_problems, cohort_of, ray_podsets
from raybridge.errors import BadInput
from raybridge.kube.client import Kube
from raybridge.kube.objects import list_namespace_names, namespace_exists, read_secret_value
from raybridge.kube.kueue import get_kueue_object, list_cohorts, list_kueue_objects, served_versions

#: Kueue's name for the LocalQueue it puts unlabelled jobs into (LocalQueue defaulting).
DEFAULT_LOCAL_QUEUE = "default"


@dataclass(frozen=True)
class Preflight:
    """What the checks found: Kueue's served versions, the queue the job will land in, and notes."""

    queue: Optional[str] = None
    cluster_queue: Optional[str] = None
    notes: tuple[str, ...] = field(default=())
    #: The MultiKueue admission check of the ClusterQueue: its jobs run in a worker cluster ("" when none).
    multikueue: str = ""


def admission_check_names(cluster_queue: dict[str, Any]) -> list[str]:
    """The AdmissionChecks a ClusterQueue names: `spec.admissionChecks` (v1beta1) and `admissionChecksStrategy`."""
    spec = cluster_queue.get("spec") or {}
    names = [str(n) for n in spec.get("admissionChecks") or [] if isinstance(n, str)]
    rules = ((spec.get("admissionChecksStrategy") or {}).get("admissionChecks")) or []
    names += [str(rule.get("name")) for rule in rules if isinstance(rule, dict) and rule.get("name")]
    return names


def multikueue_refusal(queue: str, cluster_queue: str, check: str) -> str:
    """Why a job raybridge follows cannot go to a MultiKueue queue (`submit --no-wait` can: jobs/queued.py)."""
    return (
        f"LocalQueue {queue} -> ClusterQueue {cluster_queue} sends its jobs to worker clusters (MultiKueue admission check "
        f"{check}): Kueue runs the RayJob in a worker cluster, whose Ray dashboard raybridge cannot reach from here and "
        "where its renewals of the orphan bound never arrive (they go to this cluster's copy); queue it with --no-wait, "
        "which KubeRay in the worker runs by itself (status shows what Kueue copies back, the logs stay in the worker), "
        "or use a queue of this cluster"
    )


def _refuse_a_missing_auth_secret(kube: Kube, namespace: str, obj: dict[str, Any]) -> None:
    """BadInput when the object names a token Secret (authOptions.secretName) that does not exist or holds no token:
    KubeRay would not make the cluster (kuberay@v1.6.1 raycluster_controller.go reconcileAuthSecret), and the job
    would wait out its timeout. A user who may not read it gets exit 3 from the read, as submit would later."""
    from raybridge.jobs.dashboard import AUTH_TOKEN_KEY, auth_options

    name = auth_options(obj).get("secretName")
    if name and not read_secret_value(kube, namespace, name, AUTH_TOKEN_KEY):
        raise BadInput(
            f"authSecret: Secret {namespace}/{name} does not exist or holds no {AUTH_TOKEN_KEY}; make it once, e.g. "
            f"`kubectl create secret generic {name} -n {namespace} --from-literal={AUTH_TOKEN_KEY}=$(openssl rand -hex 32)`"
        )


def _names(items: Optional[list[dict[str, Any]]]) -> str:
    if items is None:
        return "(not readable)"
    names = sorted(str((i.get("metadata") or {}).get("name")) for i in items)
    return ", ".join(names) or "none"


def _is_active(queue: dict[str, Any]) -> tuple[bool, str, str]:
    """(active, reason, "reason: message") from a ClusterQueue's or LocalQueue's `Active` condition."""
    for cond in (queue.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Active":
            words = f"{cond.get('reason', '')}: {cond.get('message', '')}".strip(": ")
            return cond.get("status") == "True", str(cond.get("reason") or ""), words
    return True, "", ""  # no status yet: Kueue has not looked at it; do not refuse on that


def _stopped(queue: dict[str, Any]) -> Optional[str]:
    """The stopPolicy of a stopped queue (Hold, HoldAndDrain), None while it runs."""
    policy = (queue.get("spec") or {}).get("stopPolicy") or "None"
    return None if policy == "None" else str(policy)


def preflight(
    kube: Kube,
    namespace: str,
    obj: dict[str, Any],
    nodes: Optional[list[Mapping[str, str]]] = None,
    claim_templates: Optional[Mapping[str, Mapping[str, Decimal]]] = None,
    followed: bool = False,
) -> Preflight:
    """BadInput listing every problem, or what was found; `obj` is the rendered RayJob or RayCluster, and
    `claim_templates` what its pods' ResourceClaimTemplates count as in Kueue's quota (`kueue.fit.ray_podsets`);
    `followed`: raybridge will follow the job (its dashboard, its bound), which a MultiKueue queue does not allow."""
    exists = namespace_exists(kube, namespace)
    if exists is False:
        known = list_namespace_names(kube)
        shown = f"; namespaces: {', '.join(known)}" if known is not None else ""
        raise BadInput(f"namespace {namespace} does not exist{shown}")
    _refuse_a_missing_auth_secret(kube, namespace, obj)
    labels = (obj.get("metadata") or {}).get("labels") or {}
    queue = labels.get(KUEUE_QUEUE_LABEL)
    priority = labels.get(KUEUE_PRIORITY_LABEL)
    versions = served_versions(kube)
    notes: list[str] = []
    if not versions:
        if queue or priority:
            what = "--queue" if queue else "--priority-class"
            raise BadInput(f"{what} names a Kueue object but Kueue is not installed (no kueue.x-k8s.io API on this cluster)")
        return Preflight(notes=("Kueue is not installed: the job is not queued",))
    problems: list[str] = []
    if queue is None:
        default = get_kueue_object(kube, versions, "localqueues", DEFAULT_LOCAL_QUEUE, namespace)
        if default.found is not None:
            queue = DEFAULT_LOCAL_QUEUE
            notes.append(f"no --queue given: Kueue puts the job in namespace {namespace}'s default LocalQueue")
    cluster_queue_name: Optional[str] = None
    multikueue = ""
    if queue is not None:
        local = get_kueue_object(kube, versions, "localqueues", queue, namespace)
        if local.found is None and local.readable:
            existing = list_kueue_objects(kube, versions, "localqueues", namespace)
            problems.append(f"LocalQueue {queue} does not exist in namespace {namespace} (LocalQueues there: {_names(existing)})")
        elif local.found is not None and _stopped(local.found):
            problems.append(
                f"LocalQueue {queue} in namespace {namespace} is stopped (stopPolicy {_stopped(local.found)}): "
                "Kueue admits nothing from it until it is resumed"
            )
        elif local.found is not None:
            cluster_queue_name = (local.found.get("spec") or {}).get("clusterQueue")
            multikueue = _multikueue_check(kube, versions, cluster_queue_name, notes)
            if multikueue and followed:
                raise BadInput(multikueue_refusal(queue, str(cluster_queue_name), multikueue))
            problems += _cluster_queue_problems(kube, versions, queue, cluster_queue_name, obj, nodes, notes, local.found, claim_templates)
        else:
            notes.append(f"LocalQueue {queue} is not readable: not checked")
    if priority is not None:
        klass = get_kueue_object(kube, versions, "workloadpriorityclasses", priority)
        if klass.found is None and klass.readable:
            existing = list_kueue_objects(kube, versions, "workloadpriorityclasses")
            problems.append(f"WorkloadPriorityClass {priority} does not exist (classes: {_names(existing)}); Kueue would never create a Workload for the job")
        elif not klass.readable:
            notes.append(f"WorkloadPriorityClass {priority} is not readable: not checked")
    if problems:
        raise BadInput(*problems)
    return Preflight(queue, cluster_queue_name, tuple(notes), multikueue)


def _multikueue_check(kube: Kube, versions: list[str], cluster_queue: Optional[str], notes: list[str]) -> str:
    """The ClusterQueue's MultiKueue AdmissionCheck, "" when it has none (or it cannot be read: said in `notes`)."""
    if not cluster_queue:
        return ""
    found = get_kueue_object(kube, versions, "clusterqueues", cluster_queue)
    if found.found is None:
        return ""
    for name in admission_check_names(found.found):
        check = get_kueue_object(kube, versions, "admissionchecks", name)
        if not check.readable:
            notes.append(f"AdmissionCheck {name} is not readable: whether ClusterQueue {cluster_queue} sends jobs to worker clusters (MultiKueue) is not checked")
            continue
        if ((check.found or {}).get("spec") or {}).get("controllerName") == MULTIKUEUE_CONTROLLER:
            return name
    return ""


def _cluster_queue_problems(
    kube: Kube, versions: list[str], queue: str, name: Optional[str], obj: dict[str, Any],
    nodes: Optional[list[Mapping[str, str]]], notes: list[str], local_queue: dict[str, Any],
    claim_templates: Optional[Mapping[str, Mapping[str, Decimal]]] = None,
) -> list[str]:  # fmt: skip
    if not name:
        return [f"LocalQueue {queue} names no ClusterQueue"]
    cq = get_kueue_object(kube, versions, "clusterqueues", name)
    if not cq.readable:
        return _judged_by_the_local_queue(queue, name, local_queue, notes)
    if cq.found is None:
        existing = list_kueue_objects(kube, versions, "clusterqueues")
        return [f"LocalQueue {queue} points at ClusterQueue {name}, which does not exist (ClusterQueues: {_names(existing)})"]
    flavor_objects = list_kueue_objects(kube, versions, "resourceflavors")
    flavors = {str((f.get("metadata") or {}).get("name")): f for f in flavor_objects} if flavor_objects is not None else None
    active, reason, why = _is_active(cq.found)
    if not active:
        hint = f" (ResourceFlavors: {_names(flavor_objects)})" if reason == "FlavorNotFound" and flavor_objects is not None else ""
        checks = list_kueue_objects(kube, versions, "admissionchecks") if reason.startswith("AdmissionCheck") else None
        if checks is not None:
            hint = f" (AdmissionChecks: {_names(checks)})"
        return [f"ClusterQueue {name} (behind LocalQueue {queue}) is not active: {why}{hint}; Kueue admits nothing from it until that is fixed"]
    cohort = cohort_of(cq.found)
    everyone: Optional[list[dict[str, Any]]] = []
    cohorts: Optional[list[dict[str, Any]]] = []
    if cohort:
        everyone = list_kueue_objects(kube, versions, "clusterqueues")
        cohorts = list_cohorts(kube, versions)
        unread = [what for what, got in (("ClusterQueues", everyone), ("Cohorts", cohorts)) if got is None]
        if unread:
            notes.append(
                f"{' and '.join(unread)} could not be listed: what cohort {cohort} can lend to ClusterQueue {name} was not checked"
            )
    return admission_problems(
        ray_podsets(obj, claim_templates), cq.found, everyone or [], flavors, nodes, cohorts, members_complete=everyone is not None
    )


def _judged_by_the_local_queue(queue: str, name: str, local_queue: dict[str, Any], notes: list[str]) -> list[str]:
    """A ClusterQueue this user may not read: the LocalQueue's Active condition still says whether it can admit.

    Kueue's LocalQueue controller writes ClusterQueueDoesNotExist or ClusterQueueIsInactive
    (localqueue_controller.go, the same words v0.13 to v0.20).
    """
    active, reason, why = _is_active(local_queue)
    if not active and reason == "ClusterQueueDoesNotExist":
        return [f"LocalQueue {queue} points at ClusterQueue {name}, which does not exist (the LocalQueue's status: {why})"]
    if not active and reason == "ClusterQueueIsInactive":
        return [
            f"ClusterQueue {name} (behind LocalQueue {queue}) is not active (the LocalQueue's status: {why}); "
            "Kueue admits nothing from it until that is fixed, and you may not read the ClusterQueue to see why"
        ]
    notes.append(f"ClusterQueue {name} is not readable (cluster-scoped): its quota was not checked")
    return []
