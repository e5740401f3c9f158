"""Desired placeholders against the ones that exist: what to create, keep and delete.

The in-cluster node-scale-adjuster calls `reconcile(...)` on every pass. It
exists so the controller's whole decision is a pure function, table-tested
offline, and so one burst of pending pods yields one scale-up:

* A placeholder that got a node ("provided": bound, or finished on a node)
  brought up capacity for the pods it was made for. Those pods are left out
  of the demand until they land (bound, or gone) or `provision_timeout`
  passes; then it is deleted. Its GPUs also count against the cap. Two
  guards keep that credit honest: a node's GPUs are credited once (a
  placeholder exits once scheduled, so the next can land on the same free
  GPUs; the later one is deleted), and a placeholder covers only the pods
  its GPUs hold as planned now (a node's GPU memory may be known only once
  the node exists).
* The remaining pods are planned (`core/adjuster.plan_placeholders`). A
  pending placeholder (not on a node yet) is kept, unchanged, while any pod
  it was made for still counts as demand. It covers those of its pods its
  GPUs hold as they are planned now, and then, in the room they leave on
  its whole GPUs, pods of its group that came later (so pods arriving in
  waves do not cost up to half a GPU extra per wave). Pods no pending
  placeholder covers are planned again on their own and get new
  placeholders. Pending placeholders none of whose pods count any more are
  deleted.
  Why a pending placeholder is never replaced by a bigger one: a pod's
  resources are immutable, so resizing is delete + create of a pod every
  wave, and whether the autoscaler matches the new pod to the node it is
  already adding for the old one is its own business (it is new demand to
  it), so the scale-up in flight is not guaranteed to be kept. Filling the
  slack gives the same GPU count with nothing deleted. A later pod that
  does not fit the slack gets its own placeholder. Once the placeholder
  is provided, the same slack covers those later pods until they land.
* A placeholder being deleted (stuck terminating) counts for nothing and
  blocks nothing: new names skip every name in use.
* Placeholders left by an earlier instance are the same objects (found by
  label by the caller), so they are adopted, never duplicated.

Pure: plain data in and out, no clock, no I/O, no kubernetes import. How a
placeholder pod is read from and written to the API is the
`raybridge.adjuster` package's business.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from datetime import datetime
from fractions import Fraction
from typing import Any, Iterable, Mapping, Optional, Sequence

from raybridge.core.adjuster import AdjusterPlan, Placeholder, plan_placeholders
from raybridge.core.consts import GPU_RESOURCE_KEYS, KAI_GPU_DEVICES_ANNOTATION, KAI_GPU_FRACTION_ANNOTATION
from raybridge.core.demand import AdjusterSettings, DemandPiece, parse_fraction, parse_whole, pod_key, select_demand
from raybridge.core.inventory import pod_gpu_requests

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

    @property
    def changes(self) -> int:
        return len(self.create) + len(self.delete)


def waiting_pod_keys(pods: Iterable[Any]) -> set[str]:
    """Pods that have not landed: unbound, not finished, not being deleted."""
    keys = set()
    for pod in pods:
        if not isinstance(pod, Mapping):
            continue
        spec = pod.get("spec") if isinstance(pod.get("spec"), Mapping) else {}
        status = pod.get("status") if isinstance(pod.get("status"), Mapping) else {}
        meta = pod.get("metadata") if isinstance(pod.get("metadata"), Mapping) else {}
        if spec.get("nodeName") or meta.get("deletionTimestamp") or status.get("phase") in ("Succeeded", "Failed"):
            continue
        keys.add(pod_key(pod))
    return keys


def placeholder_name(prefix: str, group: str, gpus: int, taken: set[str]) -> str:
    """`<prefix>-<group>-<gpus>g-<n>` with the lowest n not in `taken` (group ids are short digests)."""
    n = 0
    while True:
        name = f"{prefix}-{group}-{gpus}g-{n}"
        if name not in taken:
            return name
        n += 1


def _free_whole_gpus(nodes: Optional[Iterable[Any]], pods: Sequence[Any]) -> dict[str, int]:
    """Per node: allocatable GPUs (any vendor) minus the whole GPUs of the pods bound there and not finished."""
    free: dict[str, int] = {}
    for node in nodes or ():
        if not isinstance(node, Mapping):
            continue
        name = (node.get("metadata") or {}).get("name") if isinstance(node.get("metadata"), Mapping) else None
        allocatable = (node.get("status") or {}).get("allocatable") if isinstance(node.get("status"), Mapping) else None
        if not isinstance(name, str) or not isinstance(allocatable, Mapping):
            continue
        total = 0
        for key in GPU_RESOURCE_KEYS.values():
            try:
                total += int(str(allocatable.get(key, "0")))
            except ValueError:
                pass
        free[name] = total
    for pod in pods:
        spec = pod.get("spec") if isinstance(pod, Mapping) and isinstance(pod.get("spec"), Mapping) else {}
        node_name = spec.get("nodeName")
        status = pod.get("status") if isinstance(pod.get("status"), Mapping) else {}
        if node_name in free and status.get("phase") not in ("Succeeded", "Failed"):
            free[node_name] -= sum(pod_gpu_requests(pod).values())
    return free


def _landed_gpus(ph: ExistingPlaceholder, by_key: Mapping[str, Any]) -> int:
    """Whole GPUs the placeholder's own GPU-sharing pods hold on its node: at least the sum of their fractions."""
    used = Fraction(0)
    for key in ph.pods:
        pod = by_key.get(key)
        spec = pod.get("spec") if isinstance(pod, Mapping) and isinstance(pod.get("spec"), Mapping) else {}
        if pod is not None and spec.get("nodeName") == ph.node:
            used += _shared_gpus(pod)
    return math.ceil(used)


def _shared_gpus(pod: Mapping[str, Any]) -> Fraction:
    """gpu-fraction x devices of a GPU-sharing pod (0 for gpu-memory pods and anything unreadable)."""
    meta = pod.get("metadata") if isinstance(pod.get("metadata"), Mapping) else {}
    annotations = meta.get("annotations") if isinstance(meta.get("annotations"), Mapping) else {}
    fraction, _ = parse_fraction(annotations.get(KAI_GPU_FRACTION_ANNOTATION)) if annotations.get(KAI_GPU_FRACTION_ANNOTATION) else (None, None)
    if fraction is None:
        return Fraction(0)
    devices, _ = parse_whole(annotations.get(KAI_GPU_DEVICES_ANNOTATION, "1"), "devices", 1)
    return fraction * (devices or 1)


def _fitting_pieces(pieces: Sequence[DemandPiece], gpus: int) -> set[str]:
    return _fill(pieces, [Fraction(1)] * gpus)


def _fill(pieces: Sequence[DemandPiece], free: list[Fraction]) -> set[str]:
    """Place what fits into `free` (room per GPU, lowered in place): first fit, largest first."""
    fitting: set[str] = set()
    for piece in sorted(pieces, key=lambda p: (-p.fraction * p.devices, p.pod)):
        chosen = [i for i, room in enumerate(free) if room >= piece.fraction][: piece.devices]
        if len(chosen) < piece.devices:
            continue
        for i in chosen:
            free[i] -= piece.fraction
        fitting.add(piece.pod)
    return fitting


def _capped(settings: AdjusterSettings, already: int) -> AdjusterSettings:
    if settings.max_total_gpus is None or not already:
        return settings
    return replace(settings, max_total_gpus=max(0, settings.max_total_gpus - already))


def reconcile(
    pods: Sequence[Any],
    nodes: Optional[Iterable[Any]],
    existing: Sequence[ExistingPlaceholder],
    settings: AdjusterSettings,
    now: datetime,
    *,
    provision_timeout_seconds: float,
    name_prefix: str,
    pod_groups: Iterable[Any] = (),
) -> Reconcile:
    """Decide one pass. `pods` are the cluster's pods without the placeholders themselves."""
    waiting = waiting_pod_keys(pods)
    delete: list[tuple[str, str]] = []
    keep: list[str] = []
    covered: set[str] = set()
    provided_gpus = 0
    pending: list[ExistingPlaceholder] = []
    provided: list[ExistingPlaceholder] = []
    for ph in sorted(existing, key=lambda p: p.name):
        if ph.state == TERMINATING:
            continue
        if ph.state == FINISHED:
            delete.append((ph.name, DELETE_FINISHED))
        elif ph.state == PROVIDED:
            provided.append(ph)
        else:
            pending.append(ph)

    # Capacity brought up, oldest first. A placeholder exits once scheduled, so the next one can
    # land on the same free GPUs: a node's GPUs are credited once. And what its pods need is
    # planned again with what is known now (a node's GPU memory, say): it covers only the pods
    # its GPUs can hold.
    uncapped = replace(settings, max_total_gpus=None)
    provided_slack: list[tuple[ExistingPlaceholder, list[Fraction]]] = []
    budget = _free_whole_gpus(nodes, pods) if provided else {}
    by_key = {pod_key(p): p for p in pods} if provided else {}
    for ph in sorted(provided, key=lambda p: (p.provided_at or now, p.name)):
        still_waiting = waiting.intersection(ph.pods)
        age = (now - ph.provided_at).total_seconds() if ph.provided_at else 0.0
        room = budget.get(ph.node) if ph.node else None
        if not still_waiting:
            delete.append((ph.name, DELETE_PODS_LANDED))
            if room is not None and ph.node:
                # Its pods fill (part of) the node it brought up: a later placeholder there found
                # those GPUs free only because the pods had not landed yet.
                budget[ph.node] = room - _landed_gpus(ph, by_key)
        elif age >= provision_timeout_seconds:
            delete.append((ph.name, DELETE_TIMED_OUT))
        elif room is not None and room < ph.gpus:
            delete.append((ph.name, DELETE_DOUBLE_COUNTED))
        else:
            if room is not None and ph.node:
                budget[ph.node] = room - ph.gpus
            keep.append(ph.name)
            provided_gpus += ph.gpus
            own = [by_key[k] for k in sorted(still_waiting) if k in by_key]
            free = [Fraction(1)] * max(ph.gpus, 0)
            if own:
                covered |= _fill(select_demand(own, nodes, uncapped, now, pod_groups).pieces, free)
            if any(room > 0 for room in free):
                provided_slack.append((ph, free))
    # The room its own pods leave on a provided placeholder's GPUs holds later pods of its group
    # (those that filled its slack while it was pending), as long as they belong to no pending one.
    if provided_slack:
        claimed = {k for ph in existing if ph.state in (PENDING, PROVIDED) for k in ph.pods}
        others = [p for p in pods if pod_key(p) in waiting and pod_key(p) not in claimed]
        pieces = select_demand(others, nodes, uncapped, now, pod_groups).pieces if others else ()
        for ph, free in provided_slack:
            covered |= _fill([piece for piece in pieces if piece.group.id == ph.group and piece.pod not in covered], free)

    demand_pods = [p for p in pods if pod_key(p) not in covered] if covered else list(pods)
    plan = plan_placeholders(demand_pods, nodes, _capped(settings, provided_gpus), now, pod_groups)
    counted = {piece.pod for piece in plan.pieces}

    # A pending placeholder stays while any pod it was made for still counts: the autoscaler
    # may be adding a node for it already, so it is neither resized nor replaced.
    pending_gpus = 0
    waiting_for_pending: set[str] = set()
    pieces_by_pod = {piece.pod: piece for piece in plan.pieces}
    slack: list[tuple[ExistingPlaceholder, list[Fraction]]] = []
    for ph in pending:
        still = counted.intersection(ph.pods)
        free = [Fraction(1)] * max(ph.gpus, 0)
        held = _fill([pieces_by_pod[k] for k in sorted(still)], free) if still else set()
        if held:
            keep.append(ph.name)
            waiting_for_pending |= held
            pending_gpus += ph.gpus
            slack.append((ph, free))
        else:
            reason = DELETE_DEMAND_GONE if waiting.intersection(ph.pods) else DELETE_PODS_LANDED
            delete.append((ph.name, reason))
    # Pods that came after a pending placeholder of their group fill the room its own pods leave
    # (it asked for whole GPUs): a wave costs no extra GPU where the last one's slack holds it. The
    # placeholder itself is neither resized nor replaced (see the module docstring for why).
    if slack and counted - waiting_for_pending:
        newcomers = [piece for piece in plan.pieces if piece.pod not in waiting_for_pending]
        for ph, free in slack:
            if any(room > 0 for room in free):
                of_group = [piece for piece in newcomers if piece.group.id == ph.group and piece.pod not in waiting_for_pending]
                waiting_for_pending |= _fill(of_group, free)
    if not waiting_for_pending:
        new_plan = plan
    elif counted <= waiting_for_pending:
        new_plan = None
    else:
        uncovered = counted - waiting_for_pending
        new_plan = plan_placeholders(
            [p for p in demand_pods if pod_key(p) in uncovered], nodes, _capped(settings, provided_gpus + pending_gpus), now, pod_groups
        )
    taken = {ph.name for ph in existing}
    create: list[PlannedPlaceholder] = []
    for wanted in new_plan.placeholders if new_plan is not None else ():
        name = placeholder_name(name_prefix, wanted.group or "default", wanted.gpus, taken)
        taken.add(name)
        create.append(PlannedPlaceholder(name, wanted))
    notes = []
    if covered:
        notes.append(f"{len(covered)} pending pods wait for {provided_gpus} GPUs that placeholders already brought up")
    return Reconcile(
        create=tuple(create),
        delete=tuple(delete),
        keep=tuple(sorted(keep)),
        covered_pods=frozenset(covered),
        provided_gpus=provided_gpus,
        pending_gpus=pending_gpus,
        plan=plan,
        notes=tuple(notes),
    )
