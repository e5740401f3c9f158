"""Kueue's Workload as raybridge reads it: which Workload is a job's, its state, why it was stopped.

Pure functions on a Workload object (as the API serves it or kubectl prints it):
the Workload of a RayJob or RayCluster (Kueue's job-uid label, else the owner
reference), its conditions, its state ("pending", "admitted", "evicted",
"deactivated", "finished"), why Kueue deactivated it, its admission checks
and a ProvisioningRequest's state, its pod sets and their requests, a
ClusterQueue's quota totals, and the words the launcher prints after an
eviction (`eviction_summary`).

What a Workload means for a job's wait, flavor by flavor, is
`raybridge.queues.decision.kueue_explain`'s business; the quota arithmetic is
`raybridge.kueue.fit`'s. Nothing here reads the cluster.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Optional, Sequence

from raybridge.core.consts import KUEUE_JOB_UID_LABEL
from raybridge.core.kubeobjects import as_dict, as_list, cluster_queue_usage, owned_by
from raybridge.core.quantity import parse_quantity
from raybridge.kueue.fit import pod_requests

_DEACTIVATED = "Deactivated"  # kueue.WorkloadDeactivated; the Evicted reason is it or "DeactivatedDueTo<cause>"
_PROVISIONING_STATES = (  # the first True condition wins (autoscaling.x-k8s.io/v1 condition types)
    ("Failed", "failed"),
    ("CapacityRevoked", "capacity-revoked"),
    ("BookingExpired", "booking-expired"),
    ("Provisioned", "provisioned"),
    ("Accepted", "accepted"),
)


def workload_of(owner: dict[str, Any], workloads: Sequence[dict[str, Any]]) -> Optional[dict[str, Any]]:
    """The Workload Kueue made for `owner` among `workloads`: by Kueue's job-uid label, else by owner reference."""
    uid = as_dict(owner.get("metadata")).get("uid")
    if not uid:
        return None
    labelled = [w for w in workloads if as_dict(as_dict(w.get("metadata")).get("labels")).get(KUEUE_JOB_UID_LABEL) == uid]
    return next(iter(labelled or [w for w in workloads if owned_by(w, uid)]), None)


def condition(obj: Optional[dict[str, Any]], kind: str) -> Optional[dict[str, Any]]:
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind:
            return cond
    return None


def is_true(obj: Optional[dict[str, Any]], kind: str) -> bool:
    cond = condition(obj, kind)
    return bool(cond and cond.get("status") == "True")


def reason_words(cond: Optional[dict[str, Any]]) -> str:
    if not cond:
        return ""
    reason = cond.get("reason") or ""
    message = cond.get("message") or ""
    return f"{reason}: {message}" if reason and message else reason or message


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


def _deactivation_words(cause: str, reason: str, message: str, workload: dict[str, Any]) -> str:
    limit = (workload.get("spec") or {}).get("maximumExecutionTimeSeconds")
    if cause == "MaximumExecutionTimeExceeded":
        return "the run-time limit was reached" + (f" (maximumExecutionTimeSeconds={limit})" if limit is not None else "")
    if cause == "RequeuingLimitExceeded":
        return "Kueue requeued it more often than its requeuing limit allows (waitForPodsReady.requeuingStrategy)"
    if cause == "AdmissionCheck":
        return f"an admission check rejected it ({message})" if message else "an admission check rejected it"
    if cause == "" and reason in (_DEACTIVATED, ""):
        return "its Workload was deactivated by hand (spec.active: false)"
    return f"deactivated: {reason}: {message}" if message else f"deactivated: {reason}"


def deactivation(workload: Optional[dict[str, Any]]) -> Optional[Deactivation]:
    """Why the Workload is deactivated, or None while Kueue may still admit it (again).

    Deactivated: `spec.active` is false (Kueue sets it once a DeactivationTarget condition
    is True, then evicts with reason `Deactivated` or `DeactivatedDueTo<cause>`, the same
    words in Kueue v0.13 to v0.20), or a DeactivationTarget is True already (the
    deactivation is decided, the write follows). A Workload set active again is not.
    """
    if workload is None or is_true(workload, "Finished"):
        return None
    active = (workload.get("spec") or {}).get("active") is not False
    evicted = condition(workload, "Evicted")
    target = condition(workload, "DeactivationTarget")
    target = target if target and target.get("status") == "True" else None
    if not active and evicted and evicted.get("status") == "True" and str(evicted.get("reason") or "").startswith(_DEACTIVATED):
        reason = str(evicted.get("reason"))
        cause = reason[len(_DEACTIVATED + "DueTo") :] if reason.startswith(_DEACTIVATED + "DueTo") else ""
        message = str(evicted.get("message") or "")
    elif target is not None:
        cause = reason = str(target.get("reason") or "")
        message = str(target.get("message") or "")
    elif not active:
        cause, reason, message = "", _DEACTIVATED, "spec.active is false"
    else:
        return None
    return Deactivation(reason, cause, message, _deactivation_words(cause, reason, message, workload))


def workload_state(workload: Optional[dict[str, Any]]) -> str:
    """admitted | deactivated | evicted | finished | pending | none

    "deactivated" (see `deactivation`): Kueue will not admit it again; "evicted": it lost its
    quota and waits to be admitted again.
    """
    if workload is None:
        return "none"
    if is_true(workload, "Finished"):
        return "finished"
    if deactivation(workload) is not None:
        return "deactivated"
    if is_true(workload, "Evicted") and not is_true(workload, "Admitted"):
        return "evicted"
    if is_true(workload, "Admitted"):
        return "admitted"
    return "pending"


def position_words(position: Optional[dict[str, Any]]) -> str:
    if not position:
        return ""
    parts = []
    if position.get("positionInLocalQueue") is not None:
        parts.append(f"#{int(position['positionInLocalQueue']) + 1} in its LocalQueue")
    if position.get("positionInClusterQueue") is not None:
        parts.append(f"#{int(position['positionInClusterQueue']) + 1} in the ClusterQueue")
    return ", ".join(parts)


def admission_checks(workload: Optional[dict[str, Any]]) -> list[str]:
    checks = ((workload or {}).get("status") or {}).get("admissionChecks") or []
    return [f"{c.get('name')}: {c.get('state')}" + (f" ({c['message']})" if c.get("message") else "") for c in checks]


def podset_requests(workload: Optional[dict[str, Any]]) -> dict[str, Decimal]:
    """Total requests of all pod sets: one pod's requests (as Kueue counts them) times the count."""
    totals: dict[str, Decimal] = {}
    for podset in as_list(as_dict(as_dict(workload).get("spec")).get("podSets")):
        count = _count(as_dict(podset).get("count"))
        for name, amount in pod_requests(as_dict(podset).get("template")).items():
            totals[name] = totals.get(name, Decimal(0)) + amount * count
    return totals


def _count(raw: Any) -> int:
    return raw if isinstance(raw, int) and not isinstance(raw, bool) and raw > 0 else 1


def quota(cluster_queue: Optional[dict[str, Any]]) -> dict[str, tuple[Decimal, Decimal]]:
    """resource -> (nominal quota summed over all flavors, used): a total only; whether a job fits is per flavor
    (`flavor_requests`), as Kueue puts each pod set in one flavor per resource group."""
    nominal: dict[str, Decimal] = {}
    used: dict[str, Decimal] = {}
    spec = (cluster_queue or {}).get("spec") or {}
    for group in spec.get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            for res in flavor.get("resources") or []:
                try:
                    nominal[res["name"]] = nominal.get(res["name"], Decimal(0)) + parse_quantity(res.get("nominalQuota", 0))
                except (KeyError, ValueError):
                    continue
    for (_flavor, resource), amount in cluster_queue_usage(cluster_queue).items():
        used[resource] = used.get(resource, Decimal(0)) + amount
    return {name: (value, used.get(name, Decimal(0))) for name, value in nominal.items()}


def provisioning_state(request: dict[str, Any]) -> tuple[str, str]:
    """(state, reason and message) of a ProvisioningRequest from its conditions."""
    for kind, state in _PROVISIONING_STATES:
        cond = condition(request, kind)
        if cond is not None and cond.get("status") == "True":
            return state, reason_words(cond)
    return "waiting", "the autoscaler has not accepted it yet"


@dataclass(frozen=True)
class PodSet:
    name: str
    count: int
    per_pod: dict[str, Decimal]


def workload_podsets(workload: Optional[dict[str, Any]]) -> list[PodSet]:
    out = []
    for podset in ((workload or {}).get("spec") or {}).get("podSets") or []:
        count = int(podset.get("count") if podset.get("count") is not None else 1)
        out.append(PodSet(str(podset.get("name")), count, pod_requests(podset.get("template"))))
    return out


def eviction_summary(workload: Optional[dict[str, Any]], queue: Optional[str]) -> str:
    """Who evicted the job and from where, in plain words (from the Workload's Evicted and Preempted conditions)."""
    evicted = condition(workload, "Evicted")
    preempted = condition(workload, "Preempted")
    admission = ((workload or {}).get("status") or {}).get("admission") or {}
    where = f"queue {queue}" if queue else "its queue"
    if admission.get("clusterQueue"):
        where += f" (ClusterQueue {admission['clusterQueue']})"
    stopped = deactivation(workload)
    if stopped is not None:
        return f"deactivated in {where}: {stopped.words}; Kueue will not admit it again"
    if preempted is not None and preempted.get("status") == "True":
        return f"preempted in {where}: {reason_words(preempted)}"
    if evicted is not None and evicted.get("status") == "True":
        return f"evicted from {where}: {reason_words(evicted)}"
    return f"suspended in {where} (Kueue took its quota back)"
