"""Before anything is created on a cluster: does everything the job names exist, and could it ever run?

A real Kueue never creates a Workload for a missing WorkloadPriorityClass,
leaves a job for a missing LocalQueue or an inactive ClusterQueue pending
forever, and never admits one that asks for more than its ClusterQueue can
ever hold. Each of those would make the user wait out the whole timeout in
silence; here each is one line and exit 2, listing what does exist. A
namespace that does not exist is said as such.

What the API does not let this user read (ClusterQueues are cluster-scoped)
is skipped with a note, never guessed. It creates nothing and prints
nothing; the caller reports the notes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

from raybridge.core.consts import KUEUE_PRIORITY_LABEL, KUEUE_QUEUE_LABEL
from raybridge.core.kueue_fit import admission_problems, cohort_of, ray_podsets
from raybridge.errors import BadInput
from raybridge.kube.client import Kube, list_namespace_names, namespace_exists
from raybridge.kube.kueue import get_kueue_object, list_kueue_objects, served_versions

#: Kueue's name for the LocalQueue it puts unlabelled jobs into (LocalQueue defaulting).
DEFAULT_LOCAL_QUEUE = "default"


@dataclass(frozen=True)
class Preflight:
    """What the checks found: Kueue's served versions, the queue the job will land in, and notes."""

    queue: Optional[str] = None
    cluster_queue: Optional[str] = None
    notes: tuple[str, ...] = field(default=())


def _names(items: Optional[list[dict[str, Any]]]) -> str:
    if items is None:
        return "(not readable)"
    names = sorted(str((i.get("metadata") or {}).get("name")) for i in items)
    return ", ".join(names) or "none"


def _is_active(cq: dict[str, Any]) -> tuple[bool, str]:
    for cond in (cq.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Active":
            return cond.get("status") == "True", f"{cond.get('reason', '')}: {cond.get('message', '')}".strip(": ")
    return True, ""  # no status yet: Kueue has not looked at it; do not refuse on that


def preflight(kube: Kube, namespace: str, obj: dict[str, Any], nodes: Optional[list[Mapping[str, str]]] = None) -> Preflight:
    """BadInput listing every problem, or what was found; `obj` is the rendered RayJob or RayCluster."""
    exists = namespace_exists(kube, namespace)
    if exists is False:
        known = list_namespace_names(kube)
        shown = f"; namespaces: {', '.join(known)}" if known is not None else ""
        raise BadInput(f"namespace {namespace} does not exist{shown}")
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
    if queue is not None:
        local = get_kueue_object(kube, versions, "localqueues", queue, namespace)
        if local.found is None and local.readable:
            existing = list_kueue_objects(kube, versions, "localqueues", namespace)
            problems.append(f"LocalQueue {queue} does not exist in namespace {namespace} (LocalQueues there: {_names(existing)})")
        elif local.found is not None:
            cluster_queue_name = (local.found.get("spec") or {}).get("clusterQueue")
            problems += _cluster_queue_problems(kube, versions, queue, cluster_queue_name, obj, nodes, notes)
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
    return Preflight(queue, cluster_queue_name, tuple(notes))


def _cluster_queue_problems(
    kube: Kube, versions: list[str], queue: str, name: Optional[str], obj: dict[str, Any],
    nodes: Optional[list[Mapping[str, str]]], notes: list[str],
) -> list[str]:  # fmt: skip
    if not name:
        return [f"LocalQueue {queue} names no ClusterQueue"]
    cq = get_kueue_object(kube, versions, "clusterqueues", name)
    if not cq.readable:
        notes.append(f"ClusterQueue {name} is not readable (cluster-scoped): its quota was not checked")
        return []
    if cq.found is None:
        existing = list_kueue_objects(kube, versions, "clusterqueues")
        return [f"LocalQueue {queue} points at ClusterQueue {name}, which does not exist (ClusterQueues: {_names(existing)})"]
    active, why = _is_active(cq.found)
    if not active:
        return [f"ClusterQueue {name} (behind LocalQueue {queue}) is not active: {why}"]
    cohort = cohort_of(cq.found)
    members: list[dict[str, Any]] = []
    if cohort:
        everyone = list_kueue_objects(kube, versions, "clusterqueues") or []
        members = [c for c in everyone if cohort_of(c) == cohort]
    flavor_objects = list_kueue_objects(kube, versions, "resourceflavors")
    flavors = {str((f.get("metadata") or {}).get("name")): f for f in flavor_objects} if flavor_objects is not None else None
    return admission_problems(ray_podsets(obj), cq.found, members, flavors, nodes)
