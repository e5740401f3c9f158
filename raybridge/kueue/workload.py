"""Kueue's Workload as raybridge reads it: which Workload is a job's, its state, why it was stopped.

Why it exists: a Workload reaches raybridge from the API server, from `kubectl get -o json|yaml`
and from files users wrote, and each caller asks several facts of it (its state, its queue, its
ClusterQueue, its pod sets). `read_workload` reads one once into a typed view (`Workload`),
checking each field's type as it goes: a field of the wrong type reads as absent, never raises
(as `raybridge.core.views` does for Pods and Nodes, whose `Meta` and `Condition` it uses).

The view gives a Workload's conditions, its state ("pending", "admitted", "evicted",
"deactivated", "finished"), why Kueue deactivated it, its queue and ClusterQueue, its admission
checks, its pod sets and their requests, and the words the launcher prints after an eviction
(`eviction_summary`). The module's functions (`workload_state`, `deactivation`, ...) take the view
or the object (read on the spot); a caller that asks several facts reads the object once
(`workload_view`) and passes the view on. Also here, as safely read: which Workload is a job's
(`workload_of`: Kueue's job-uid label, else the owner reference) and a ClusterQueue's quota totals.
A ProvisioningRequest's state is cluster-autoscaler's API: `raybridge.autoscalers.provisioning_request`.

What it deliberately does not do: say what a Workload means for a job's wait, flavor by flavor
(`raybridge.queues.decision.kueue_explain`'s business), the quota arithmetic
(`raybridge.kueue.fit`'s), read the cluster, or change the object it reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Mapping, Optional, Sequence, Union

from raybridge.kueue.names import KUEUE_JOB_UID_LABEL
from raybridge.core.kubeobjects import as_dict, as_list, cluster_queue_usage, quantity_or_none
from raybridge.core.views import Condition, Meta, conditions_of, find_condition, read_condition, read_meta
from raybridge.kueue.cluster_queue import read_quota_holder
from raybridge.kueue.fit import pod_requests

_DEACTIVATED = "Deactivated"  # kueue.WorkloadDeactivated; the Evicted reason is it or "DeactivatedDueTo<cause>"


#: A pod set's or pod set assignment's name when it has none (kueue@v0.13.10 apis/kueue/v1beta1/workload_types.go:
#: PodSet.Name and PodSetAssignment.Name, `+kubebuilder:default=main`).
DEFAULT_POD_SET = "main"
_EMPTY: Mapping[str, Any] = {}


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _integer(value: Any) -> Optional[int]:
    """`value` if it is a whole number (not a bool), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class PodSet:
    """One of `spec.podSets`: its name, its pod count and one pod's requests (as Kueue counts them)."""

    name: str
    count: int
    per_pod: dict[str, Decimal]


@dataclass(frozen=True, slots=True)
class PodSetAssignment:
    """One of `status.admission.podSetAssignments`: the flavor Kueue assigned per resource, and what it reserved."""

    name: str
    #: resource -> flavor name (entries whose flavor is not text are left out).
    flavors: Mapping[str, str]
    #: resource -> the quantity as written (`core/kubeobjects.quantity_or_none` reads it).
    resource_usage: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class AdmissionCheck:
    """One of `status.admissionChecks` ("" where a field is absent or not text)."""

    name: str
    state: str
    message: str

    def words(self) -> str:
        """"name: state (message)"."""
        return f"{self.name}: {self.state}" + (f" ({self.message})" if self.message else "")


@dataclass(frozen=True)
class Deactivation:
    """Why Kueue deactivated a Workload (or is about to): it will not be admitted again.

    `reason` and `message` are Kueue's (the Evicted condition's, e.g.
    `DeactivatedDueToMaximumExecutionTimeExceeded`, or the DeactivationTarget's before
    the eviction is written); `cause` is what led to it (MaximumExecutionTimeExceeded,
    RequeuingLimitExceeded, AdmissionCheck, "" when someone set `spec.active: false`);
    `words` says it to a user.
    """

    reason: str
    cause: str
    message: str
    words: str


@dataclass(frozen=True, slots=True)
class Workload:
    """A Workload, read once (`read_workload`); what each fact means is in its property."""

    obj: Mapping[str, Any]
    meta: Meta
    conditions: tuple[Condition, ...]
    #: `spec.active` is not false: Kueue may admit it.
    active: bool
    #: `spec.maximumExecutionTimeSeconds`, None where absent or not a whole number.
    maximum_execution_time_seconds: Optional[int]
    #: `spec.podSets` entries that are objects.
    pod_sets: tuple[PodSet, ...]
    #: `spec.queueName`: the LocalQueue.
    queue_name: str
    #: `status.admission.clusterQueue`: the ClusterQueue that reserved its quota ("" before).
    cluster_queue: str
    #: `status.admission.podSetAssignments` entries that are objects.
    assignments: tuple[PodSetAssignment, ...]
    #: `status.admissionChecks` entries that are objects.
    admission_checks: tuple[AdmissionCheck, ...]
    #: `status.clusterName`: the MultiKueueCluster whose worker runs the job, once MultiKueue dispatched it ("" before,
    #: and for a job this cluster runs; kueue@v0.13.10 and later apis/kueue/v1beta1/workload_types.go ClusterName).
    cluster_name: str = ""

    def condition(self, kind: str) -> Optional[Condition]:
        return find_condition(self.conditions, kind)

    def is_true(self, kind: str) -> bool:
        cond = self.condition(kind)
        return cond is not None and cond.true

    def condition_entry(self, kind: str) -> Optional[Mapping[str, Any]]:
        """The first condition of type `kind` as written (every field of it), for output that shows it whole."""
        for entry in as_list(as_dict(self.obj.get("status")).get("conditions")):
            if isinstance(entry, Mapping) and entry.get("type") == kind:
                return entry
        return None

    @property
    def deactivation(self) -> Optional[Deactivation]:
        """Why the Workload is deactivated, or None while Kueue may still admit it (again).

        Deactivated: `spec.active` is false (Kueue sets it once a DeactivationTarget condition
        is True, then evicts with reason `Deactivated` or `DeactivatedDueTo<cause>`, the same
        words in Kueue v0.13 to v0.20), or a DeactivationTarget is True already (the
        deactivation is decided, the write follows). A Workload set active again is not.
        """
        if self.is_true("Finished"):
            return None
        evicted = self.condition("Evicted")
        target = self.condition("DeactivationTarget")
        if not self.active and evicted is not None and evicted.true and evicted.reason.startswith(_DEACTIVATED):
            reason = evicted.reason
            cause = reason[len(_DEACTIVATED + "DueTo") :] if reason.startswith(_DEACTIVATED + "DueTo") else ""
            message = evicted.message
        elif target is not None and target.true:
            cause = reason = target.reason
            message = target.message
        elif not self.active:
            cause, reason, message = "", _DEACTIVATED, "spec.active is false"
        else:
            return None
        return Deactivation(reason, cause, message, _deactivation_words(cause, reason, message, self.maximum_execution_time_seconds))

    @property
    def state(self) -> str:
        """admitted | deactivated | evicted | finished | pending

        "deactivated" (see `deactivation`): Kueue will not admit it again; "evicted": it lost its
        quota and waits to be admitted again.
        """
        if self.is_true("Finished"):
            return "finished"
        if self.deactivation is not None:
            return "deactivated"
        if self.is_true("Evicted") and not self.is_true("Admitted"):
            return "evicted"
        if self.is_true("Admitted"):
            return "admitted"
        return "pending"

    def requests(self) -> dict[str, Decimal]:
        """Total requests of all pod sets: one pod's requests (as Kueue counts them) times the count; a pod set of
        count 0 asks for nothing (kueue@v0.17.0 pkg/workload/workload.go totalRequestsFromPodSets: `Mul(count)`)."""
        totals: dict[str, Decimal] = {}
        for podset in self.pod_sets:
            for name, amount in podset.per_pod.items():
                totals[name] = totals.get(name, Decimal(0)) + amount * podset.count
        return totals

    def eviction_summary(self, queue: Optional[str]) -> str:
        """Who evicted the job and from where, in plain words (from the Evicted and Preempted conditions)."""
        where = f"queue {queue}" if queue else "its queue"
        if self.cluster_queue:
            where += f" (ClusterQueue {self.cluster_queue})"
        stopped = self.deactivation
        if stopped is not None:
            return f"deactivated in {where}: {stopped.words}; Kueue will not admit it again"
        preempted = self.condition("Preempted")
        if preempted is not None and preempted.true:
            return f"preempted in {where}: {preempted.words()}"
        evicted = self.condition("Evicted")
        if evicted is not None and evicted.true:
            return f"evicted from {where}: {evicted.words()}"
        return f"suspended in {where} (Kueue took its quota back)"


#: What the module's functions take: a view, a Workload object (read on the spot), or None (no Workload).
WorkloadLike = Union[Workload, Mapping[str, Any], None]


def _pod_set(entry: Mapping[str, Any]) -> PodSet:
    # A count that is absent or not a whole number >= 0 reads as Kueue's default, 1
    # (kueue@v0.13.10 apis/kueue/v1beta1/workload_types.go PodSet.Count: default 1, minimum 0).
    count = _integer(entry.get("count"))
    return PodSet(_text(entry.get("name")) or DEFAULT_POD_SET, count if count is not None and count >= 0 else 1,
                  pod_requests(as_dict(entry.get("template"))))


def _counted_totals(status: Mapping[str, Any], admission: Mapping[str, Any]) -> dict[str, dict[str, Decimal]]:
    """pod set -> resource -> what Kueue itself counted for all its pods: `status.resourceRequests` of a Workload it
    considered and did not admit, else `resourceUsage` of its admission (kueue@v0.19.2 apis/kueue/v1beta2
    workload_types.go: "resourceRequests ... If admission is non-null, resourceRequests will be empty").

    These hold what a pod's template does not show: DRA devices counted under the resource the Configuration maps
    their DeviceClass to (pkg/workload/workload.go PropagateResourceRequests, from the DRA-preprocessed requests)."""
    found: dict[str, dict[str, Decimal]] = {}
    entries = [(as_dict(e).get("name"), as_dict(e).get("resources")) for e in as_list(status.get("resourceRequests"))]
    entries += [(as_dict(e).get("name"), as_dict(e).get("resourceUsage")) for e in as_list(admission.get("podSetAssignments"))]
    for name, amounts in entries:
        podset = _text(name) or DEFAULT_POD_SET
        for resource, raw in as_dict(amounts).items():
            amount = quantity_or_none(raw)
            if isinstance(resource, str) and amount is not None and amount > 0:
                found.setdefault(podset, {}).setdefault(resource, amount)
    return found


def _with_counted(podset: PodSet, counted: Mapping[str, Mapping[str, Decimal]]) -> PodSet:
    """The pod set, with each resource Kueue counted for it and its template does not request (a DRA job's GPUs)
    added per pod (Kueue's total over the count)."""
    extra = {r: total / podset.count for r, total in (counted.get(podset.name) or {}).items() if podset.count > 0 and r not in podset.per_pod}
    if not extra:
        return podset
    return PodSet(podset.name, podset.count, {**podset.per_pod, **extra})


def _assignment(entry: Mapping[str, Any]) -> PodSetAssignment:
    flavors = {str(resource): flavor for resource, flavor in as_dict(entry.get("flavors")).items() if isinstance(flavor, str)}
    return PodSetAssignment(_text(entry.get("name")) or DEFAULT_POD_SET, flavors, as_dict(entry.get("resourceUsage")))


def read_workload(obj: Any) -> Workload:
    """The view of a Workload object (of anything: a non-object reads as a Workload that says nothing)."""
    if not isinstance(obj, Mapping):
        obj = _EMPTY
    spec, status = as_dict(obj.get("spec")), as_dict(obj.get("status"))
    admission = as_dict(status.get("admission"))
    counted = _counted_totals(status, admission)
    return Workload(
        obj=obj,
        meta=read_meta(obj),
        conditions=conditions_of(status),
        active=spec.get("active") is not False,
        maximum_execution_time_seconds=_integer(spec.get("maximumExecutionTimeSeconds")),
        pod_sets=tuple(_with_counted(_pod_set(entry), counted) for entry in as_list(spec.get("podSets")) if isinstance(entry, Mapping)),
        queue_name=_text(spec.get("queueName")),
        cluster_queue=_text(admission.get("clusterQueue")),
        assignments=tuple(_assignment(entry) for entry in as_list(admission.get("podSetAssignments")) if isinstance(entry, Mapping)),
        admission_checks=tuple(
            AdmissionCheck(_text(entry.get("name")), _text(entry.get("state")), _text(entry.get("message")))
            for entry in as_list(status.get("admissionChecks")) if isinstance(entry, Mapping)
        ),
        cluster_name=_text(status.get("clusterName")),
    )  # fmt: skip


def workload_view(workload: WorkloadLike) -> Optional[Workload]:
    """`workload` read once: itself when it is a view already, None for no Workload."""
    if workload is None or isinstance(workload, Workload):
        return workload
    return read_workload(workload)


def _deactivation_words(cause: str, reason: str, message: str, limit: Optional[int]) -> str:
    if cause == "MaximumExecutionTimeExceeded":
        return "the run-time limit was reached" + (f" (maximumExecutionTimeSeconds={limit})" if limit is not None else "")
    if cause == "RequeuingLimitExceeded":
        return "Kueue requeued it more often than its requeuing limit allows (waitForPodsReady.requeuingStrategy)"
    if cause == "AdmissionCheck":
        return f"an admission check rejected it ({message})" if message else "an admission check rejected it"
    if cause == "" and reason in (_DEACTIVATED, ""):
        return "its Workload was deactivated by hand (spec.active: false)"
    return f"deactivated: {reason}: {message}" if message else f"deactivated: {reason}"


def cluster_queue_name(workload: Workload, local_queue: Any) -> Optional[str]:
    """The ClusterQueue a Workload is in: the one that reserved its quota (`status.admission.clusterQueue`), else
    the one its LocalQueue points at (`spec.clusterQueue`), else None."""
    named = as_dict(as_dict(local_queue).get("spec")).get("clusterQueue")
    return workload.cluster_queue or (named if isinstance(named, str) and named else None)


def workload_of(owner: Any, workloads: Sequence[dict[str, Any]]) -> Optional[dict[str, Any]]:
    """The Workload Kueue made for `owner` among `workloads`: by Kueue's job-uid label, else by owner reference."""
    uid = read_meta(owner).uid
    if not uid:
        return None
    metas = [(workload, read_meta(workload)) for workload in workloads]
    labelled = [workload for workload, meta in metas if meta.labels.get(KUEUE_JOB_UID_LABEL) == uid]
    return next(iter(labelled or [workload for workload, meta in metas if any(ref.uid == uid for ref in meta.owners)]), None)


def reason_words(cond: Union[Condition, Mapping[str, Any], None]) -> str:
    """"reason: message" of a condition (a view, or an entry as written), or whichever of the two it has."""
    if isinstance(cond, Mapping):
        cond = read_condition(cond)
    return cond.words() if isinstance(cond, Condition) else ""


def deactivation(workload: WorkloadLike) -> Optional[Deactivation]:
    """Why the Workload is deactivated, or None while Kueue may still admit it (again): `Workload.deactivation`."""
    view = workload_view(workload)
    return view.deactivation if view is not None else None


def workload_state(workload: WorkloadLike) -> str:
    """admitted | deactivated | evicted | finished | pending (`Workload.state`) | none (no Workload)"""
    view = workload_view(workload)
    return view.state if view is not None else "none"


def position_words(position: Any) -> str:
    """Where a pending Workload stands in its queues (the visibility API's answer), in words; "" when unknown."""
    position = as_dict(position)
    parts = []
    local, cluster = _integer(position.get("positionInLocalQueue")), _integer(position.get("positionInClusterQueue"))
    if local is not None:
        parts.append(f"#{local + 1} in its LocalQueue")
    if cluster is not None:
        parts.append(f"#{cluster + 1} in the ClusterQueue")
    return ", ".join(parts)


def eviction_summary(workload: WorkloadLike, queue: Optional[str]) -> str:
    """Who evicted the job and from where, in plain words: `Workload.eviction_summary` (no Workload: "suspended")."""
    return (workload_view(workload) or read_workload(None)).eviction_summary(queue)


def quota(cluster_queue: Any) -> dict[str, tuple[Decimal, Decimal]]:
    """resource -> (nominal quota summed over all flavors, used): a total only; whether a job fits is per flavor
    (`flavor_requests`), as Kueue puts each pod set in one flavor per resource group.

    Read through `kueue/cluster_queue.py`: entries that are not objects and resources without a name are left out,
    a malformed quantity counts as 0."""
    nominal: dict[str, Decimal] = {}
    used: dict[str, Decimal] = {}
    for (_flavor, resource), quota_of in read_quota_holder(cluster_queue).quotas.items():
        nominal[resource] = nominal.get(resource, Decimal(0)) + quota_of.nominal
    for (_flavor, resource), amount in cluster_queue_usage(cluster_queue).items():
        used[resource] = used.get(resource, Decimal(0)) + amount
    return {name: (value, used.get(name, Decimal(0))) for name, value in nominal.items()}


@dataclass(frozen=True)
class QuotaHolder:
    """A Workload holding quota in a ClusterQueue now: whose job it is, its priority, what it reserved."""

    namespace: str
    owner: str  # "RayJob train" (the Workload's owner), or the Workload's own name
    cluster_queue: str
    priority: Optional[int]
    usage: dict[str, Decimal]

    def words(self, resources: Sequence[str]) -> str:
        held = ", ".join(f"{_plain(self.usage[r])} {r}" for r in resources if self.usage.get(r))
        priority = f", priority {self.priority}" if self.priority is not None else ""
        return f"{self.namespace}/{self.owner} ({self.cluster_queue}{priority}): {held or 'nothing of what it asks for'}"


def _plain(value: Decimal) -> str:
    return str(value.normalize()) if value == value.to_integral_value() else str(value)


def quota_holders(workloads: Sequence[Any], cluster_queues: Sequence[str], resources: Sequence[str], exclude: str = "") -> list[QuotaHolder]:
    """The Workloads holding quota (QuotaReserved, not finished) in `cluster_queues` and reserving any of `resources`,
    largest first: who holds what a pending job waits for (Kueue's own accounting: `status.admission`)."""
    found = []
    for obj in workloads:
        view = read_workload(obj)
        if view.meta.name == exclude or view.cluster_queue not in cluster_queues:
            continue
        if not view.is_true("QuotaReserved") or view.is_true("Finished"):
            continue
        usage: dict[str, Decimal] = {}
        for assignment in view.assignments:
            for resource, amount in assignment.resource_usage.items():
                value = quantity_or_none(amount)
                if value is not None:
                    usage[resource] = usage.get(resource, Decimal(0)) + value
        if not any(usage.get(r) for r in resources):
            continue
        owners = view.meta.owners
        owner = f"{owners[0].kind} {owners[0].name}" if owners else f"Workload {view.meta.name}"
        found.append(QuotaHolder(view.meta.namespace, owner, view.cluster_queue, _integer(as_dict(view.obj.get("spec")).get("priority")), usage))
    return sorted(found, key=lambda h: (-sum(h.usage.get(r, Decimal(0)) for r in resources), h.namespace, h.owner))
