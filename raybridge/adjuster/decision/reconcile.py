"""Desired placeholders against the ones that exist: what to create, keep and delete.

The in-cluster node-scale-adjuster calls `reconcile(...)` on every pass. It
exists so the controller's whole decision is a pure function, table-tested
offline, and so one burst of pending pods yields one scale-up:

* A placeholder that got a node ("provided": bound, or finished on a node)
  brought up capacity for the pods it was made for; what it is credited, and
  what the room on its node and on nodes that just came up holds, is
  `brought_up.py`'s.
* The remaining pods are planned (`adjuster/decision/plan.plan_placeholders`). The
  pending placeholders (not on a node yet) of a group stand for the nodes the
  autoscaler adds for them: it packs them onto whole nodes of the group, as
  it will (`_nodes_on_their_way`), and the group's waiting pods, oldest
  first, best fit, are placed on those nodes as the scheduler will place them
  when they come (the pods each was made for and pods that came later alike,
  so pods arriving in waves fill the room earlier ones leave and cost no
  extra GPU, and what is counted is a placement the scheduler really makes,
  not a tighter packing it would not find). Where they use more of a node's
  GPUs than its placeholders ask for, those are replaced by one placeholder
  that asks for all of them (`grown`): the autoscaler sees only what
  placeholders ask for, so counting the rest of a node for later pods without
  asking promised those GPUs twice (it put the next placeholder into them: a
  1-GPU wave, then 10 pods of 0.9, got one node where two were needed). One
  placeholder per node on its way, not a top-up beside the first:
  cluster-autoscaler hints pending pods onto its upcoming nodes in no set
  order (filter_out_schedulable.go sorts by priority only, `sort.Slice`), and
  several placeholders per node, taken smallest first, left a large one
  without room and added a node; one per node fits in any order. The node
  on its way takes the larger one (same template: cluster-autoscaler's
  upcoming node, Karpenter's NodeClaim where its type holds it), so a burst
  seen in two passes costs no more nodes than seen at once (5 GPUs asked,
  then 25 more pods: 8 in place of the 5, and 22 in new placeholders, 4
  nodes of 8, not 5). The pods those nodes hold are covered; a pending
  placeholder on a node that holds no pod is deleted; one that holds pods
  is kept, even when the pods it was made for are gone. Pods no pending
  placeholder holds are planned again on their own and get new placeholders.
  Once a placeholder is provided, the room its node has left covers those later pods until they
  land (the node exists; its room is read from it).
  A node that came up within NEW_NODE_SECONDS with room left holds the waiting pods that fit it, for groups with
  no placeholder still pending (`brought_up.fill_new_nodes`).
  Two placeholders may land on one new node, as the autoscaler packed them:
  each is credited the room left after the one before (the ledger above), so
  a placeholder that took the GPUs another one brought up is counted for
  nothing there and its pods are asked for again, and the autoscaler puts
  that new placeholder onto the node still on its way for the first.
* A placeholder being deleted (stuck terminating) counts for nothing and
  blocks nothing: new names skip every name in use.
* Placeholders left by an earlier instance are the same objects (found by
  label by the caller), so they are adopted, never duplicated.

Pure: plain data in and out, no clock, no I/O, no kubernetes import. How a
placeholder pod is read from and written to the API is the
`raybridge.adjuster` package's business.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Iterable, Mapping, Optional, Sequence

from raybridge.adjuster.decision.placeholders import (
    DELETE_DEMAND_GONE,
    DELETE_GROWN,
    DELETE_HELD_ELSEWHERE,
    DELETE_PODS_LANDED,
    ExistingPlaceholder,
    PlannedPlaceholder,
    Reconcile,
    placeholder_name,
    waiting_pod_keys,
)
from raybridge.adjuster.decision.batch_window import BatchWindow, still_arriving
from raybridge.adjuster.decision.brought_up import credit_provided, fill_new_nodes, fill_provided_slack
from raybridge.adjuster.decision.pass_state import PassState, by_state
from raybridge.adjuster.decision.plan import (
    AdjusterPlan,
    Placeholder,
    plan_in,
    scheduling_order,
    summed_resources,
)
from raybridge.adjuster.decision.settings import AdjusterSettings
from raybridge.adjuster.decision.demand import ClusterSnapshot, ConstraintGroup, DemandPiece
from raybridge.adjuster.decision.host_spread import HOSTNAME_KEY
from raybridge.core.inventory import named_nodes
from raybridge.core.views import Node, Pod
from raybridge.adjuster.decision.best_fit import BestFitScheduler
from raybridge.adjuster.decision.packing import PackItem


def _capped(settings: AdjusterSettings, already: int) -> AdjusterSettings:
    if settings.max_total_gpus is None or not already:
        return settings
    return replace(settings, max_total_gpus=max(0, settings.max_total_gpus - already))


def _nodes_on_their_way(placeholders: list[ExistingPlaceholder], node_gpus: int) -> list[list[ExistingPlaceholder]]:
    """The pending placeholders of a group as the autoscaler packs them onto new nodes of `node_gpus` GPUs:
    largest first, each onto the first node it fits (cluster-autoscaler's binpacking estimator orders pods by
    size, estimator/decreasing_pod_orderer.go, and places each on the first new node it fits,
    estimator/binpacking_estimator.go; Karpenter packs its queue, largest first, onto its NodeClaims)."""
    nodes: list[tuple[int, list[ExistingPlaceholder]]] = []
    for ph in sorted(placeholders, key=lambda p: (-p.gpus, p.name)):
        for index, (used, members) in enumerate(nodes):
            if used + ph.gpus <= node_gpus:
                nodes[index] = (used + ph.gpus, members + [ph])
                break
        else:
            nodes.append((ph.gpus, [ph]))
    return [members for _, members in nodes]


@dataclass
class _PendingPlacement:
    """What the pending placeholders hold: the pods, and the placeholders to add so the autoscaler sees the GPUs
    that the rest of their nodes will give those pods."""

    held: set[str] = field(default_factory=set)
    grown: list[Placeholder] = field(default_factory=list)


def _place_on_pending(state: PassState, pending: list[ExistingPlaceholder], plan: AdjusterPlan) -> _PendingPlacement:
    """The pods the pending placeholders hold; keeps those that hold some and deletes the others.

    The autoscaler packs a group's pending placeholders onto whole nodes of the group (`_nodes_on_their_way`).
    When those nodes come, the scheduler places the group's waiting pods on them oldest first, best fit: the
    pods each placeholder was made for and the pods that came after it alike (so pods arriving in waves fill the
    room the earlier ones leave, and the count is what the scheduler will really do, not a packing it will not
    find). Where they use more of a node's GPUs than its placeholders ask for, one placeholder asking for all of
    them replaces those (deleted `grown`): the autoscaler sees only what placeholders ask for, and counting the
    rest of the node without asking promised those GPUs twice (a 1-GPU wave, then 10 pods of 0.9, got one node
    where two were needed). One per node, so that cluster-autoscaler, which hints pending pods onto its upcoming
    nodes in no set order, fits them all in any order. A node of unknown size (no node of the group, no
    --node-gpus) and a ProvisioningRequest count their own GPUs only. A pending placeholder on a node that holds
    no pod is deleted.
    """
    counted = {piece.pod for piece in plan.pieces}
    found = _PendingPlacement()
    pending_by_group: dict[str, list[ExistingPlaceholder]] = {}
    for ph in pending:
        pending_by_group.setdefault(ph.group, []).append(ph)
    pieces_by_group: dict[str, list[DemandPiece]] = {}
    for piece in plan.pieces:
        pieces_by_group.setdefault(piece.group.id, []).append(piece)
    shapes = {g.group.id: g for g in plan.groups if g.node_size_known}
    room_to_grow = None if state.settings.max_total_gpus is None else state.settings.max_total_gpus - state.provided_gpus - sum(p.gpus for p in pending)
    for group_id, placeholders in pending_by_group.items():
        ordered = sorted(pieces_by_group.get(group_id, ()), key=scheduling_order)
        shape = shapes.get(group_id)
        per_node = ordered[0].group.per_node if ordered else None
        if shape is not None and per_node is None and all(ph.packed_onto_nodes for ph in placeholders):
            nodes = _nodes_on_their_way(placeholders, shape.node_gpus)
            sizes = [max(shape.node_gpus, sum(ph.gpus for ph in members)) for members in nodes]
            rooms = [shape.node_resources] * len(nodes)  # None (not limited) where no node of the group is known
        else:
            nodes = [[ph] for ph in placeholders]
            sizes = [ph.gpus for ph in placeholders]
            rooms = [ph.resources for ph in placeholders]
        scheduler = BestFitScheduler([PackItem(p.pod, p.fraction, p.devices, p.resources) for p in ordered], sizes, rooms, per_node=per_node)
        left = set(scheduler.run())
        on_node: dict[int, list[int]] = {}
        for index, (node, _gpus) in scheduler.placed.items():
            on_node.setdefault(node, []).append(index)
        for node, members in enumerate(nodes):
            placed = on_node.get(node, [])
            asked = sum(ph.gpus for ph in members)
            used = len({gpu for i in placed for gpu in scheduler.placed[i][1]})
            if used > asked:
                if room_to_grow is None or used - asked <= room_to_grow:
                    elsewhere = {k for other in placeholders if other not in members for k in other.pods}
                    found.grown.append(_grown(ordered[0].group, [ordered[i] for i in placed if ordered[i].pod not in elsewhere], used))
                    state.delete.extend((ph.name, DELETE_GROWN) for ph in members)
                    if room_to_grow is not None:
                        room_to_grow -= used - asked
                    continue
                theirs = {k for ph in members for k in ph.pods}  # over the cap: the later pods are planned under it
                later = [i for i in placed if ordered[i].pod not in theirs]
                left.update(later)
                placed = [i for i in placed if i not in set(later)]
            # The latest go first where the others ask for all the GPUs the node's pods use (none where it holds none).
            for ph in sorted(members, key=lambda p: p.name, reverse=True):
                if placed and asked - ph.gpus < used:
                    state.keep.append(ph.name)
                    state.pending_gpus += ph.gpus
                    continue
                asked -= ph.gpus
                if counted.intersection(ph.pods):
                    state.delete.append((ph.name, DELETE_HELD_ELSEWHERE))
                else:
                    state.delete.append((ph.name, DELETE_DEMAND_GONE if state.waiting.intersection(ph.pods) else DELETE_PODS_LANDED))
        found.held.update(p.pod for i, p in enumerate(ordered) if i not in left)
    return found


def _grown(group: ConstraintGroup, placed: list[DemandPiece], gpus: int) -> Placeholder:
    """The placeholder that replaces a node's pending ones: `gpus` GPUs for the `placed` pods of `group` (those
    another pending placeholder was made for stand in that one)."""
    return Placeholder(gpus=gpus, resource_key=group.resource_key, pods=tuple(sorted(p.pod for p in placed)),
                       resources=summed_resources(p.resources for p in placed), node_selector=group.node_selector,
                       affinity=group.affinity, tolerations=tuple(group.tolerations), group=group.id)


def _landed_nodes(existing: Sequence[ExistingPlaceholder], nodes: Optional[Iterable[Node]]) -> dict[str, set[str]]:
    """Per group, the hostnames (`kubernetes.io/hostname`, else the node's name) of the nodes its placeholders
    landed on. A placeholder exits (one that keeps apart after consts.KEEP_APART_SECONDS), and kube-scheduler
    forgets a finished pod (its informer leaves out Succeeded and Failed pods), so the anti-affinity that kept a
    group's placeholders apart no longer holds against one that finished: a later one can land on the same node
    before the pod it was made for does, and be counted for nothing there. Its replacement is kept off those nodes by hostname: Karpenter refuses a node selector term
    with `matchFields` (provisioner.go validateNodeSelectorTerm), and its nodes' hostname is their NodeClaim's name,
    not theirs."""
    landed: dict[str, set[str]] = {}
    for ph in existing:
        if ph.node:
            landed.setdefault(ph.group, set()).add(ph.node)
    if landed and nodes is not None:
        hostnames = {}
        for node in named_nodes(nodes, []):  # what the node list cannot give is said by the demand's reading
            hostname = node.meta.labels.get(HOSTNAME_KEY)
            if isinstance(hostname, str) and hostname:
                hostnames[node.name] = hostname
        landed = {group: {hostnames.get(name, name) for name in names} for group, names in landed.items()}
    return landed


def _kind_nodes(state: PassState, groups: Sequence[ConstraintGroup]) -> dict[str, set[str]]:
    """Per group of pods that must not share a host, the hostnames of the nodes where pods of its kind run (bound, not
    finished): its placeholders are kept off them by hostname, not by the pods' own anti-affinity, which would keep
    the pods off a placeholder's node as long as it runs (inter-pod anti-affinity is symmetric: kube-scheduler and
    KAI both refuse a pod that an existing pod's required term selects)."""
    if not groups or state.nodes is None:
        return {}
    hostnames = {}
    for node in named_nodes(state.nodes, []):
        hostname = node.meta.labels.get(HOSTNAME_KEY)
        hostnames[node.name] = hostname if isinstance(hostname, str) and hostname else node.name
    bound = [p for p in state.pods if p.node_name in hostnames and not p.finished]
    found: dict[str, set[str]] = {}
    for group in groups:
        spread = group.host_spread
        if spread is None:
            continue
        on = {hostnames[p.node_name] for p in bound if spread.is_one_of(p)}
        if on:
            found[group.id] = on
    return found


def _new_placeholders(state: PassState, demand_pods: list[Pod], plan: AdjusterPlan, on_pending: _PendingPlacement, name_prefix: str) -> list[PlannedPlaceholder]:
    """The grown placeholders, and placeholders for the pods no placeholder holds, each named after the names in use."""
    counted = {piece.pod for piece in plan.pieces}
    held_by_pending = on_pending.held
    state.pending_gpus += sum(p.gpus for p in on_pending.grown)
    if not held_by_pending:
        new_plan: Optional[AdjusterPlan] = plan
    elif counted <= held_by_pending:
        new_plan = None
    else:
        uncovered = counted - held_by_pending
        new_plan = plan_in(state.snapshot, _capped(state.settings, state.provided_gpus + state.pending_gpus),
                           [p for p in demand_pods if p.key in uncovered])
    taken = {ph.name for ph in state.existing}
    landed = _landed_nodes(state.existing, state.nodes)
    if new_plan is not None:
        for group, hostnames in _kind_nodes(state, [g.group for g in new_plan.groups if g.group.per_node is not None]).items():
            landed.setdefault(group, set()).update(hostnames)
    create: list[PlannedPlaceholder] = []
    for wanted in [*on_pending.grown, *(new_plan.placeholders if new_plan is not None else ())]:
        if wanted.keep_apart and landed.get(wanted.group or "default"):
            wanted = replace(wanted, avoid_nodes=tuple(sorted(landed[wanted.group or "default"])))
        name = placeholder_name(name_prefix, wanted.group or "default", wanted.gpus, taken)
        taken.add(name)
        create.append(PlannedPlaceholder(name, wanted))
    return create


def _hold_back(state: PassState, create: list[PlannedPlaceholder], on_pending: _PendingPlacement, held_back: Mapping[str, str],
               notes: list[str]) -> list[PlannedPlaceholder]:
    """`create` less the placeholders of groups held back: a new one would be refused as the last was, and one bound
    to GPUs another brought up is counted for nothing and made again, round after round. The pending placeholders
    such a new one would have grown stay as they are (the autoscaler is asked by them still)."""
    withheld = [p for p in create if (p.placeholder.group or "default") in held_back]
    if not withheld:
        return create
    groups = {p.placeholder.group or "default" for p in withheld}
    group_of = {ph.name: ph.group or "default" for ph in state.existing}
    regrown = [name for name, reason in state.delete if reason == DELETE_GROWN and group_of.get(name) in groups]
    state.delete = [(name, reason) for name, reason in state.delete if name not in regrown]
    state.keep.extend(regrown)
    grown = [p for p in withheld if any(p.placeholder is g for g in on_pending.grown)]
    state.pending_gpus += sum(ph.gpus for ph in state.existing if ph.name in regrown) - sum(p.placeholder.gpus for p in grown)
    for group in sorted(groups):
        asked = sum(p.placeholder.gpus for p in withheld if (p.placeholder.group or "default") == group)
        notes.append(f"group {group}: no new placeholder for {asked} GPUs: {held_back[group]}")
    return [p for p in create if (p.placeholder.group or "default") not in groups]


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
    batch: Optional[BatchWindow] = None,
    dra: Optional[Mapping[str, Any]] = None,
    held_back: Optional[Mapping[str, str]] = None,
) -> Reconcile:
    """Decide one pass. `pods` are the cluster's pods without the placeholders themselves; `batch`: new placeholders
    wait while a burst is still arriving (None: they are made at once); `dra`: the `slices`, `classes` and `claims`
    of `ClusterSnapshot.read`."""
    snapshot = ClusterSnapshot.read(pods, nodes, now, pod_groups, **(dra or {}))
    return reconcile_in(snapshot, existing, settings, provision_timeout_seconds=provision_timeout_seconds, name_prefix=name_prefix,
                        batch=batch, held_back=held_back)


def reconcile_in(
    snapshot: ClusterSnapshot,
    existing: Sequence[ExistingPlaceholder],
    settings: AdjusterSettings,
    *,
    provision_timeout_seconds: float,
    name_prefix: str,
    batch: Optional[BatchWindow] = None,
    held_back: Optional[Mapping[str, str]] = None,
) -> Reconcile:
    """`reconcile` on a pass's snapshot, whose pods are the cluster's without the placeholders themselves. `held_back`:
    groups (by id) that get no new placeholder this pass, and why (the autoscaler refused one of theirs: refusals.py)."""
    now, pods = snapshot.now, snapshot.pods
    state = PassState(snapshot, existing, settings, provision_timeout_seconds, waiting_pod_keys(pods))
    pending, provided = by_state(state)
    rooms = credit_provided(state, provided)
    fill_provided_slack(state, rooms)
    fill_new_nodes(state, rooms)
    demand_pods = [p for p in pods if p.key not in state.covered] if state.covered else list(pods)
    plan = plan_in(state.snapshot, _capped(settings, state.provided_gpus), demand_pods)
    on_pending = _place_on_pending(state, pending, plan)
    create = _new_placeholders(state, demand_pods, plan, on_pending, name_prefix)
    notes = []
    if held_back and create:
        create = _hold_back(state, create, on_pending, held_back, notes)
    arriving = still_arriving(batch, plan, create, existing, pods, state.waiting, settings, now) if create and batch is not None else None
    if arriving is not None:  # nothing made this pass: the placeholders it would have grown stay as they are
        notes.append(arriving)
        create = []
        grown = [name for name, reason in state.delete if reason == DELETE_GROWN]
        state.delete = [(name, reason) for name, reason in state.delete if reason != DELETE_GROWN]
        state.keep.extend(grown)
        state.pending_gpus += sum(ph.gpus for ph in existing if ph.name in grown) - sum(p.gpus for p in on_pending.grown)
    kept = set(state.keep)
    if state.covered:
        notes.append(f"{len(state.covered)} pending pods wait for {state.provided_gpus} GPUs that placeholders already brought up")
    return Reconcile(
        create=tuple(create),
        delete=tuple(state.delete),
        keep=tuple(sorted(state.keep)),
        covered_pods=frozenset(state.covered),
        provided_gpus=state.provided_gpus,
        pending_gpus=state.pending_gpus,
        plan=plan,
        notes=tuple(notes),
        held_nodes=frozenset(ph.node for ph in provided if ph.node and ph.name in kept),
    )
