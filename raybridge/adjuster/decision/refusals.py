"""What the autoscaler said of our pending placeholders: the Events that say no node comes for one, and why.

Why: a placeholder the autoscaler cannot serve (a Karpenter NodePool at its `limits`, a node group at its maximum
size, a cluster at its total) stays pending, and nothing said so: on the real stack a NodePool limited to 16 GPUs
left 8 of 24 pods pending, and meanwhile the placeholder the limit kept out was bound to GPUs another one had
brought up and made again (`node-already-counted`), twice, before it settled pending for good. Both autoscalers do
say it, as an Event on the pod:

* Karpenter (v1.14.1) a Warning `FailedScheduling`, "Failed to schedule pod, ..." (pkg/controllers/provisioning/
  scheduling/events.go PodFailedToScheduleEvent), published for every pod its scheduling run cannot place
  (scheduler.go Results.Record). A NodePool at its limits reads "all available instance types exceed limits for
  nodepool" or "node limits have been exhausted for nodepool", or, where the limit leaves only types without the
  resource (a GPU limit met, a CPU type still allowed), "no instance type has enough resources"
  (scheduler.go addToNewNodeClaim, filterByRemainingResources; nodeclaim.go);
* cluster-autoscaler a `NotTriggerScaleUp`, "pod didn't trigger scale-up: ..." with each node group's reason
  ("max node group size reached", "exceeded quota: ...", "max total nodes in cluster reached";
  cluster-autoscaler-1.36.1 processors/status/eventing_scale_up_processor.go, core/scaleup/orchestrator/
  skippedreasons.go).

kube-scheduler's own `FailedScheduling` (every pending placeholder gets it) is not one: only the autoscaler's say
that no node comes. A Karpenter NodePool's `spec.limits` against its `status.resources` says which limit binds
(`limits_reached`), where the NodePools can be read.

Pure: Event and NodePool objects in, plain data out; which refusals still hold back a group is the caller's
clock's business (`held_back`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Iterable, Mapping, Optional

from raybridge.core.kubeobjects import as_dict, parse_rfc3339
from raybridge.core.quantity import parse_quantity

#: (reporting component, reason) of the Events that say the autoscaler brings no node for a pod.
REFUSING = {("karpenter", "FailedScheduling"): "Karpenter", ("cluster-autoscaler", "NotTriggerScaleUp"): "cluster-autoscaler"}


@dataclass(frozen=True)
class Refusal:
    """The autoscaler's last word on one of our pending placeholders: it brings no node for it."""

    placeholder: str
    #: The placeholder pod's uid (one made again under the same name is another).
    uid: str
    group: str
    autoscaler: str
    message: str
    at: datetime

    def sentence(self, limits: Iterable[str] = ()) -> str:
        said = f"{self.autoscaler} brings no node for placeholder {self.placeholder}: {self.message}"
        limits = list(limits)
        return said + (f" ({'; '.join(limits)})" if limits else "")


def _when(event: Mapping[str, Any]) -> Optional[datetime]:
    """When the Event last happened: its series' last observation, its last timestamp, its event time, its creation."""
    series = as_dict(event.get("series"))
    for stamp in (series.get("lastObservedTime"), event.get("lastTimestamp"), event.get("eventTime"),
                  as_dict(event.get("metadata")).get("creationTimestamp")):
        found = parse_rfc3339(stamp) if isinstance(stamp, str) else None
        if found is not None:
            return found
    return None


def refusals(events: Iterable[Any], pending: Mapping[str, tuple[str, str]]) -> dict[str, Refusal]:
    """Per group, the latest refusal of one of its `pending` placeholders (name -> (uid, group)): an autoscaler's
    Event about that very pod (a placeholder made again under the same name is another pod: its uid tells)."""
    found: dict[str, Refusal] = {}
    for event in events:
        if not isinstance(event, Mapping):
            continue
        regarding = as_dict(event.get("involvedObject"))
        name = regarding.get("name")
        if regarding.get("kind") != "Pod" or not isinstance(name, str) or name not in pending:
            continue
        uid, group = pending[name]
        if regarding.get("uid") not in (None, "", uid):
            continue
        component = as_dict(event.get("source")).get("component") or event.get("reportingComponent")
        autoscaler = REFUSING.get((component, event.get("reason")))
        at = _when(event)
        if autoscaler is None or at is None:
            continue
        message = event.get("message") if isinstance(event.get("message"), str) else ""
        if group not in found or at > found[group].at:
            found[group] = Refusal(name, uid, group, autoscaler, " ".join(message.split())[:400], at)
    return found


def limits_reached(node_pools: Iterable[Any], resource: str, wanted: int) -> list[str]:
    """The Karpenter NodePools whose `spec.limits` of `resource` leave less than `wanted` of it (what one placeholder
    asks for), each as a short sentence: the limit, what its nodes have, what is left."""
    said = []
    for pool in node_pools:
        if not isinstance(pool, Mapping):
            continue
        limit = _amount(as_dict(as_dict(pool.get("spec")).get("limits")).get(resource))
        used = _amount(as_dict(as_dict(pool.get("status")).get("resources")).get(resource)) or 0
        name = as_dict(pool.get("metadata")).get("name")
        if limit is None or not isinstance(name, str) or limit - used >= wanted:
            continue
        said.append(f"NodePool {name} is at its limits: {used:g} of its {limit:g} {resource} are in use, {max(limit - used, 0):g} left, "
                    f"and the placeholder asks for {wanted}")
    return said


def _amount(value: Any) -> Optional[float]:
    if value is None:
        return None
    try:
        return float(parse_quantity(str(value)))
    except (ValueError, TypeError):
        return None


def held_back(found: Mapping[str, Refusal], now: datetime, seconds: float) -> dict[str, Refusal]:
    """The refusals at most `seconds` old: their groups get no new placeholder until then."""
    return {group: r for group, r in found.items() if 0 <= (now - r.at).total_seconds() < seconds}


__all__ = ["REFUSING", "Refusal", "held_back", "limits_reached", "refusals"]
