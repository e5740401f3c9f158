"""KAI's PodGroups and the scheduler's reasons, as raybridge reads them.

A KAI pod belongs to the PodGroup its `pod-group-name` annotation names; the PodGroup's
`spec.queue` (else the pod's queue label) is its queue. When KAI cannot schedule it, the
PodGroup's `status.schedulingConditions[]` carry the reasons (per node pool), and the pod's
PodScheduled message repeats them. KAI writes the same PodScheduled=False/Unschedulable
condition whether a pod waits for nodes or for its queue
(kai-scheduler@v0.12.0 pkg/scheduler/cache/status_updater/default_status_updater.go,
markTaskUnschedulable and recordUnschedulablePodsEvents). A queue-capacity refusal is a job fit
error whose reason is one of the UnschedulableReasons in
pkg/apis/scheduling/v2alpha2/podgroup_types.go (OverLimit, NonPreemptibleOverQuota,
QueueDoesNotExist); the pod's message is "<reason>: <message>." (JobFitErrorsToMessage,
pkg/scheduler/api/common_info/job_errors.go), with the messages of
pkg/scheduler/api/unschedule_info.go ("... quota has reached the allowable limit of ...",
"Non-preemptible workload is over quota. ...") and an optional "Node-Pool 'x': " prefix. A
preemptible pod over its fair share is not refused this way: KAI lets it use free capacity and
reclaims it later, so when it waits, it waits for nodes.

Pure: objects in, names and reasons out. What the reasons mean for the adjuster
(`adjuster/decision/demand.py`) and for `explain` (`queues/decision/kai_explain.py`) is theirs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Optional

from raybridge.kai.names import KAI_POD_GROUP_ANNOTATION, KAI_QUEUE_LABEL
from raybridge.core.kubeobjects import as_dict, as_list
from raybridge.core.views import Meta, Pod, is_object, read_meta

#: The UnschedulableReasons of a queue's capacity: the pod waits for its queue, not for nodes.
QUOTA_REASONS = ("OverLimit", "NonPreemptibleOverQuota", "QueueDoesNotExist")
#: What a pod's PodScheduled message holds when KAI refused it for its queue's capacity.
QUOTA_MESSAGE_MARKERS = (
    *QUOTA_REASONS,
    "quota has reached the allowable limit",
    "Non-preemptible workload is over quota",
)
_QUOTA_PATTERN = re.compile("|".join(re.escape(m) for m in QUOTA_MESSAGE_MARKERS))


@dataclass(frozen=True)
class SchedulingReason:
    """One reason KAI gives for not scheduling a PodGroup, on one node pool."""

    reason: str
    message: str
    node_pool: str = ""

    def to_dict(self) -> dict[str, str]:
        return {"reason": self.reason, "message": self.message, "nodePool": self.node_pool}


def pod_group_name(pod: Pod) -> Optional[str]:
    """The PodGroup a KAI pod belongs to (its `pod-group-name` annotation), or None."""
    name = pod.meta.annotations.get(KAI_POD_GROUP_ANNOTATION)
    return name if isinstance(name, str) and name else None


def queue_name(pod: Optional[Pod], pod_group: Optional[PodGroup]) -> Optional[str]:
    """The PodGroup's `spec.queue`, else the pod's queue label."""
    queue = pod_group.queue if pod_group is not None else ""
    if not queue and pod is not None:
        queue = pod.meta.label(KAI_QUEUE_LABEL)
    return queue or None


@dataclass(frozen=True)
class PodGroup:
    """A PodGroup, read once (`read_pod_group`); "" or None where a field is absent or of the wrong type."""

    obj: Mapping[str, Any]
    meta: Meta
    #: `spec.queue`: the KAI Queue its pods are scheduled from.
    queue: str
    #: `spec.minMember` as written (shown, not computed with).
    min_member: Any
    phase: str
    #: `status.conditions` entries that are objects, as written (shown whole).
    conditions: tuple[Mapping[str, Any], ...]
    #: The reasons of its scheduling conditions in force (`scheduling_reasons`).
    reasons: tuple[SchedulingReason, ...]

    @property
    def quota_reason(self) -> Optional[str]:
        """The first reason that is its queue's capacity (QUOTA_REASONS), or None."""
        return next((r.reason for r in self.reasons if r.reason in QUOTA_REASONS), None)


def read_pod_group(obj: Any) -> PodGroup:
    """The view of a PodGroup object (of anything: a non-object reads as a PodGroup that says nothing)."""
    obj = obj if is_object(obj) else {}
    spec, status = as_dict(obj.get("spec")), as_dict(obj.get("status"))
    queue = spec.get("queue")
    return PodGroup(
        obj=obj,
        meta=read_meta(obj),
        queue=queue if isinstance(queue, str) else "",
        min_member=spec.get("minMember"),
        phase=status.get("phase") if isinstance(status.get("phase"), str) else "",
        conditions=tuple(c for c in as_list(status.get("conditions")) if is_object(c)),
        reasons=scheduling_reasons(status),
    )


def index_pod_groups(pod_groups: Iterable[Any]) -> dict[tuple[str, str], PodGroup]:
    """(namespace, name) -> PodGroup view, for finding a pod's; objects without a name are left out."""
    index = {}
    for obj in pod_groups:
        pod_group = read_pod_group(obj)
        if pod_group.meta.name:
            index[(pod_group.meta.namespace_or_default, pod_group.meta.name)] = pod_group
    return index


def pod_group_of(pod: Pod, index: Mapping[tuple[str, str], PodGroup]) -> Optional[PodGroup]:
    """The pod's PodGroup from `index_pod_groups`, or None."""
    name = pod_group_name(pod)
    if name is None or not index:
        return None
    return index.get((pod.meta.namespace_or_default, name))


def scheduling_reasons(status: Mapping[str, Any]) -> tuple[SchedulingReason, ...]:
    """The reasons of a PodGroup's `status.schedulingConditions` in force (a condition's own reason when it lists none)."""
    out = []
    for sc in as_list(status.get("schedulingConditions")):
        if not is_object(sc) or sc.get("status") not in (None, "True"):
            continue
        reasons = [r for r in as_list(sc.get("reasons")) if is_object(r)]
        if not reasons and (sc.get("reason") or sc.get("message")):
            reasons = [{"reason": sc.get("reason") or "", "message": sc.get("message") or ""}]
        for r in reasons:
            out.append(SchedulingReason(str(r.get("reason") or ""), str(r.get("message") or ""), str(sc.get("nodePool") or "")))
    return tuple(out)


def says_queue_capacity(message: Any) -> bool:
    """Whether a pod's PodScheduled message is a refusal for its queue's capacity."""
    return isinstance(message, str) and bool(_QUOTA_PATTERN.search(message))
