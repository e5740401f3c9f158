"""A placeholder as the reconcile core sees it: one that exists (its state, its pods, its node), one to create, and
what a pass decides (`Reconcile`), with the words for its states and for why one is deleted.

Why it exists: the controller, `adjuster plan --manifests`, the ProvisioningRequest mode and the reconcile core's
steps (`reconcile.py`, `batch_window.py`) share these types; defined apart from the decision, no step imports
another to name them.

What it deliberately does not do: decide anything (`reconcile.py` does), or read or write a pod or a request
(`scale_adjuster.py` reads them into these).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Iterable, Optional

from raybridge.adjuster.decision.packing import Resources
from raybridge.adjuster.decision.plan import AdjusterPlan, Placeholder
from raybridge.core.views import Pod

#: States of an existing placeholder.
PENDING = "pending"  # not on a node yet: the scale-up signal
PROVIDED = "provided"  # on a node (running or finished there): capacity is up
FINISHED = "finished"  # ended without a node (failed, evicted): nothing to wait for
TERMINATING = "terminating"  # being deleted: ignored

#: Why a placeholder is deleted.
DELETE_DEMAND_GONE = "demand-gone"  # its pods still wait, but count no more (ignored, quota-blocked)
DELETE_PODS_LANDED = "pods-landed"  # none of its pods waits any more (bound, finished or deleted)
DELETE_TIMED_OUT = "provision-timeout"
DELETE_FINISHED = "finished-without-node"
DELETE_DOUBLE_COUNTED = "node-already-counted"  # its node's GPUs were already counted for earlier placeholders
DELETE_CAPACITY_TAKEN = "capacity-taken"  # other pods took the GPUs it brought up: its pods are asked for again
DELETE_HELD_ELSEWHERE = "held-elsewhere"  # its pods still count, but fit the GPUs other pending placeholders ask for
DELETE_NODE_GONE = "node-gone"  # the node it brought up is gone (consolidated, failed; not listed 30 s after the bind): its pods are asked for again
DELETE_GROWN = "grown"  # still waiting, its node will hold more pods than it asks for: replaced by one asking for all


@dataclass(frozen=True)
class ExistingPlaceholder:
    """A placeholder the API has, reduced to what the decision needs."""

    name: str
    group: str
    gpus: int
    state: str
    pods: tuple[str, ...] = ()
    #: When it got its node (PROVIDED only); the provision timeout runs from here.
    provided_at: Optional[datetime] = None
    #: The node it was bound to (placeholder pods; None for ProvisioningRequests).
    node: Optional[str] = None
    #: What it asks for besides GPUs (CPU, memory, ...; thousandths), the room its pods have on its node;
    #: None where not known (a ProvisioningRequest): GPUs only.
    resources: Optional[Resources] = None
    #: A pending placeholder pod: the autoscaler packs the pending ones onto whole nodes of the group
    #: (`_place_on_pending`). False for a ProvisioningRequest, whose nodes are its own: its GPUs alone.
    packed_onto_nodes: bool = False
    #: The object's uid, where it is read from one: what the controller deletes (never another made since under its
    #: name). Not part of the decision, so not of equality.
    uid: str = field(default="", compare=False)


@dataclass(frozen=True)
class PlannedPlaceholder:
    """A placeholder to create: its name and the plan's shape."""

    name: str
    placeholder: Placeholder


@dataclass(frozen=True)
class Reconcile:
    create: tuple[PlannedPlaceholder, ...]
    delete: tuple[tuple[str, str], ...]  # (name, reason)
    keep: tuple[str, ...]
    #: Pending pods left out of the demand because a provided placeholder brought capacity for them.
    covered_pods: frozenset[str]
    #: GPUs of provided placeholders still counted against the demand and the cap.
    provided_gpus: int
    #: GPUs of the pending placeholders kept.
    pending_gpus: int
    #: The plan over every pod not covered by a provided placeholder (demand, ignored pods, groups).
    plan: AdjusterPlan
    notes: tuple[str, ...] = field(default_factory=tuple)
    #: The nodes of the provided placeholders kept: capacity brought up for pods that have not all landed
    #: (or for waiting pods its room holds). Kept from voluntary disruption until then (an autoscaler that
    #: removes empty nodes would take them while the placeholder has exited and the pods are not there yet).
    held_nodes: frozenset[str] = frozenset()

    @property
    def changes(self) -> int:
        return len(self.create) + len(self.delete)


def waiting_pod_keys(pods: Iterable[Pod]) -> set[str]:
    """Pods that have not landed: unbound, not finished, not being deleted."""
    return {pod.key for pod in pods if pod.waiting}


def placeholder_name(prefix: str, group: str, gpus: int, taken: set[str]) -> str:
    """`<prefix>-<group>-<gpus>g-<n>` with the lowest n not in `taken` (group ids are short digests)."""
    n = 0
    while True:
        name = f"{prefix}-{group}-{gpus}g-{n}"
        if name not in taken:
            return name
        n += 1
