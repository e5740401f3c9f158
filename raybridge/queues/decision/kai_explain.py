"""Plain words and numbers for "why is my pod waiting?" under KAI-Scheduler.

Pure: from a pod and/or its PodGroup (`scheduling.run.ai/v2alpha2`), the
cluster's KAI Queues and the fair-share division that
`raybridge.kai.fairshare` computed on the live queues, nodes and KAI pods,
to data (`KaiExplanation`) and sentences: the pod group's phase, conditions
and scheduling conditions (with KAI's unschedulable reasons, such as
`OverLimit` or `NonPreemptibleOverQuota`), and for its queue and every
ancestor the quota, limit, over-quota weight, priority, fair share and
allocation, e.g. "queue team-a is over its fair share of 12 GPUs: 14
allocated".

Allocation is the Queue's `status.allocated` (KAI's queue controller sums
its pod groups' and child queues' allocations there, as Kubernetes
quantities) when present, else the requests of the queue's bound KAI pods
counted here. It does not read anything, decide scheduling, or model node
pools, reclaim or KAI's historical usage.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

from raybridge.core.consts import GPU_RESOURCE_KEYS
from raybridge.core.kubeobjects import as_dict, as_list
from raybridge.core.views import Pod
from raybridge.core.quantity import parse_quantity
from raybridge.kai.fairshare import UNLIMITED, Amounts, FairShareResult, number, to_queue_units
from raybridge.kai.pod_group import PodGroup, SchedulingReason, pod_group_name, queue_name
from raybridge.kai.queue import KaiQueue

RESOURCES = ("gpu", "cpu", "memory")
_UNITS = {"gpu": "GPUs", "cpu": "millicores", "memory": "MB"}


def _fmt(value: float) -> str:
    shown = number(value)
    if isinstance(shown, float):
        return f"{shown:.3f}".rstrip("0").rstrip(".")
    return str(shown)


def _amount(resource: str, value: float) -> str:
    return f"{_fmt(value)} {_UNITS[resource]}"


def allocated_from_status(queue: KaiQueue) -> Optional[Amounts]:
    """A Queue's `status.allocated` in KAI's internal units (millicores, bytes, devices); None when absent."""
    allocated = queue.allocated
    if not allocated:
        return None

    def q(key: str) -> float:
        try:
            return float(parse_quantity(allocated.get(key, 0)))
        except (ValueError, TypeError):
            return 0.0

    gpus = sum(q(key) for key in {*GPU_RESOURCE_KEYS.values(), "gpu"} if key in allocated)
    return Amounts(cpu=q("cpu") * 1000, memory=q("memory"), gpu=gpus)


@dataclass(frozen=True)
class QueueFacts:
    """One queue (the pod's own, or an ancestor) as KAI sees it, per resource in the queue's units."""

    name: str
    parent: Optional[str]
    priority: int
    #: resource -> quota, limit, overQuotaWeight, request, fairShare, allocated
    resources: Mapping[str, Mapping[str, Any]]
    allocation_source: str  # "queue status" | "bound pods" | "unknown"

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "parent": self.parent,
            "priority": self.priority,
            "allocationSource": self.allocation_source,
            "resources": {r: dict(v) for r, v in self.resources.items()},
        }

    def sentences(self, terms_shown: bool = True) -> list[str]:
        """Per resource, whether the queue is over or within its fair share; with the queue's terms unless a picture shows them."""
        out = []
        for resource in RESOURCES:
            facts = self.resources.get(resource) or {}
            quota, limit, weight = facts.get("quota"), facts.get("limit"), facts.get("overQuotaWeight")
            fair, allocated = facts.get("fairShare"), facts.get("allocated")
            if not facts.get("configured") and resource != "gpu":
                continue  # the Queue says nothing about it: its numbers stay in to_dict()
            terms = (
                f"quota {'unlimited' if quota == UNLIMITED else _amount(resource, quota or 0)}, "
                f"limit {'none' if limit == UNLIMITED else _amount(resource, limit or 0)}, over-quota weight {_fmt(weight or 0)}"
            )
            if fair is None:
                out.append(f"queue {self.name} ({resource}): {terms}; fair share unknown" if terms_shown else f"queue {self.name} ({resource}): fair share unknown")
                continue
            if allocated is None:
                given = f"queue {self.name} is given a fair share of {_amount(resource, fair)}"
                out.append(f"{given} ({terms}); its allocation is unknown" if terms_shown else f"{given}; its allocation is unknown")
                continue
            if allocated > fair and not _close(allocated, fair):
                verdict = f"queue {self.name} is over its fair share of {_amount(resource, fair)}: {_fmt(allocated)} allocated"
            else:
                verdict = (
                    f"queue {self.name} is within its fair share of {_amount(resource, fair)}: {_fmt(allocated)} allocated, "
                    f"{_fmt(max(0.0, fair - allocated))} to go"
                )
            if limit not in (None, UNLIMITED) and allocated >= (limit or 0) and (limit or 0) > 0:
                verdict += f"; at its limit of {_amount(resource, limit)}"
            out.append(f"{verdict} ({terms})" if terms_shown else verdict)
        return out


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))


#: KAI's queue-capacity reasons, in words a user acts on.
_REASON_WORDS = {
    "OverLimit": "scheduling it would take its queue over the queue's limit",
    "NonPreemptibleOverQuota": "it is non-preemptible, and scheduling it would take its queue's non-preemptible use over the quota",
    "QueueDoesNotExist": "its queue does not exist",
}


@dataclass(frozen=True)
class KaiExplanation:
    """What `explain` knows about a KAI-scheduled pod or pod group; `lines()` says it in words."""

    namespace: str
    pod: Optional[str]
    pod_phase: Optional[str]
    pod_scheduled: Optional[Mapping[str, Any]]
    pod_group: Optional[str]
    pod_group_phase: Optional[str]
    min_member: Optional[int]
    queue: Optional[str]
    conditions: tuple[Mapping[str, Any], ...] = ()
    reasons: tuple[SchedulingReason, ...] = ()
    queues: tuple[QueueFacts, ...] = ()
    queue_exists: bool = True
    notes: tuple[str, ...] = ()
    #: Every queue of the cluster with the same facts, parents before children (for the picture; not in `to_dict`).
    tree: tuple[QueueFacts, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "scheduler": "kai",
            "namespace": self.namespace,
            "pod": self.pod,
            "podPhase": self.pod_phase,
            "podScheduled": dict(self.pod_scheduled) if self.pod_scheduled else None,
            "podGroup": self.pod_group,
            "podGroupPhase": self.pod_group_phase,
            "minMember": self.min_member,
            "queue": self.queue,
            "queueExists": self.queue_exists,
            "conditions": [dict(c) for c in self.conditions],
            "unschedulableReasons": [r.to_dict() for r in self.reasons],
            "units": "the queues' own: gpu in devices, cpu in millicores, memory in MB (10^6 bytes)",
            "queues": [q.to_dict() for q in self.queues],
            "notes": list(self.notes),
        }

    def lines(self) -> list[str]:
        """Everything in words: the pod's and PodGroup's state, the scheduler's reasons, each queue's numbers."""
        return self.standing() + self.verdicts()

    def verdicts(self, terms_shown: bool = True) -> list[str]:
        """Each queue of the pod's chain against its fair share, the priorities, and the notes."""
        lines = []
        for queue in self.queues:
            for sentence in queue.sentences(terms_shown):
                lines.append(f"  {sentence}")
        if self.queues:
            lines.append(f"  priority: {', '.join(f'{q.name} {q.priority}' for q in self.queues)} (higher is offered over-quota resources first)")
        lines.extend(f"  note: {n}" for n in self.notes)
        return lines

    def standing(self) -> list[str]:
        """The pod's and PodGroup's state, the queue, the conditions and the scheduler's reasons (no queue numbers)."""
        lines = []
        if self.pod:
            cond = self.pod_scheduled or {}
            scheduled = f"PodScheduled={cond.get('status')}" + (f" ({cond.get('reason')}: {cond.get('message')})" if cond.get("reason") else "") if cond else "not yet looked at by the scheduler"
            lines.append(f"Pod {self.namespace}/{self.pod}: {self.pod_phase or 'Pending'}; {scheduled}")
        if self.pod_group:
            size = f", minMember {self.min_member}" if self.min_member else ""
            lines.append(f"PodGroup {self.namespace}/{self.pod_group}: {self.pod_group_phase or 'no phase yet'}{size}")
        else:
            lines.append("  no PodGroup found (KAI's pod-grouper makes one per workload; is KAI running?)")
        lines.append(f"  queue: {self.queue or 'none'}" + ("" if self.queue_exists else " (no such KAI Queue: KAI will not schedule it)"))
        for cond in self.conditions:
            text = f"    {cond.get('type')}={cond.get('status')}"
            if cond.get("reason") or cond.get("message"):
                text += f" ({cond.get('reason', '')}: {cond.get('message', '')})"
            lines.append(text)
        for reason in self.reasons:
            where = f" on node pool {reason.node_pool}" if reason.node_pool else ""
            words = _REASON_WORDS.get(reason.reason)
            lines.append(f"  unschedulable{where}: {reason.reason}" + (f" -- {words}" if words else "") + (f" ({reason.message.strip()})" if reason.message else ""))
        return lines


def explain_kai(
    namespace: str,
    pod: Optional[Pod],
    pod_group: Optional[PodGroup],
    queues: Sequence[KaiQueue],
    fair_share: Optional[FairShareResult],
    pod_allocations: Optional[Mapping[str, Amounts]] = None,
    notes: Sequence[str] = (),
) -> KaiExplanation:
    """The KAI picture: `queues` are the cluster's Queues (nameless ones left out); `pod_allocations` each queue's own
    bound-pod requests (KAI units), used where a Queue has no `status.allocated`."""
    by_name = {q.name: q for q in queues if q.name}
    queue = queue_name(pod, pod_group)
    chain: list[QueueFacts] = []
    seen: set[str] = set()
    current = queue
    while current and current in by_name and current not in seen:
        seen.add(current)
        chain.append(_queue_facts(current, by_name, fair_share, pod_allocations))
        current = by_name[current].parent
    scheduled = next((c for c in as_list(pod.status.get("conditions")) if as_dict(c).get("type") == "PodScheduled"), None) if pod else None
    return KaiExplanation(
        namespace=namespace,
        pod=pod.meta.name or None if pod else None,
        pod_phase=pod.phase or None if pod else None,
        pod_scheduled=scheduled,
        pod_group=pod_group.meta.name or None if pod_group is not None else (pod_group_name(pod) if pod is not None else None),
        pod_group_phase=pod_group.phase or None if pod_group is not None else None,
        min_member=pod_group.min_member if pod_group is not None else None,
        queue=queue,
        conditions=pod_group.conditions if pod_group is not None else (),
        reasons=pod_group.reasons if pod_group is not None else (),
        queues=tuple(chain),
        queue_exists=queue is None or queue in by_name,
        notes=tuple(notes),
        tree=tuple(_queue_facts(n, by_name, fair_share, pod_allocations) for n in _tree_order(by_name)),
    )


def _tree_order(by_name: Mapping[str, KaiQueue]) -> list[str]:
    """Queue names depth first, parents before children, siblings by name; queues in a parent cycle last."""
    children: dict[str, list[str]] = {}
    for name, queue in by_name.items():
        children.setdefault(queue.parent if queue.parent in by_name else "", []).append(name)
    order: list[str] = []
    pending = sorted(children.get("", []), reverse=True)
    while pending:
        name = pending.pop()
        if name in order:
            continue
        order.append(name)
        pending.extend(sorted(children.get(name, []), reverse=True))
    return order + sorted(set(by_name) - set(order))


def _queue_facts(
    name: str,
    by_name: Mapping[str, KaiQueue],
    fair_share: Optional[FairShareResult],
    pod_allocations: Optional[Mapping[str, Amounts]],
) -> QueueFacts:
    queue = by_name[name]
    share = None
    if fair_share is not None:
        try:
            share = fair_share.queue(name)
        except KeyError:
            share = None
    allocated = allocated_from_status(queue)
    source = "queue status"
    if allocated is None and pod_allocations is not None:
        allocated = _subtree_allocation(name, by_name, pod_allocations)
        source = "bound pods"
    elif allocated is None:
        source = "unknown"
    resources: dict[str, dict[str, Any]] = {}
    for resource in RESOURCES:
        entry: dict[str, Any] = {
            "configured": queue.configured(resource),
            "quota": number(queue.term(resource, "quota")),
            "limit": number(queue.term(resource, "limit")),
            "overQuotaWeight": number(queue.term(resource, "overQuotaWeight")),
        }
        if share is not None:
            rs = share.resource(resource)
            entry["request"] = None if rs.request is None else number(rs.request)
            entry["deserved"] = number(rs.deserved)
            entry["fairShare"] = number(rs.fair_share)
        else:
            entry["fairShare"] = None
        entry["allocated"] = None if allocated is None else number(to_queue_units(resource, allocated.get(resource)))
        resources[resource] = entry
    return QueueFacts(name, queue.parent or None, queue.priority, resources, source)


def _subtree_allocation(
    name: str, by_name: Mapping[str, KaiQueue], own: Mapping[str, Amounts], seen: frozenset[str] = frozenset()
) -> Amounts:
    """The queue's own bound pods plus its descendants' (as KAI's queue controller sums them); cycles cut."""
    total = own.get(name, Amounts())
    for child, queue in sorted(by_name.items()):
        if queue.parent == name and child not in seen | {name}:
            total = total.plus(_subtree_allocation(child, by_name, own, seen | {name}))
    return total
