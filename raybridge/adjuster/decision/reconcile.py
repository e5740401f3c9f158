"""Desired placeholders against the ones that exist: what to create, keep and delete.

The in-cluster node-scale-adjuster calls `reconcile(...)` on every pass. It
exists so the controller's whole decision is a pure function, table-tested
offline, and so one burst of pending pods yields one scale-up:

* A placeholder that got a node ("provided": bound, or finished on a node)
  brought up capacity for the pods it was made for. Those pods are left out
  of the demand until they land (bound, or gone) or `provision_timeout`
  passes; then it is deleted. Its GPUs also count against the cap. The
  credit is the room its node has left, not the GPUs it asked for: a
  placeholder exits once scheduled, so another placeholder can land on the
  same free GPUs, and any pod (another placeholder's, a stranger's) can
  take them. So the room left on each node is worked out from every pod
  bound there (whole GPUs, and GPU-sharing pods packed as tightly as they
  allow), earlier placeholders on the node are credited first, and a
  placeholder covers only the pods of its own that this room holds as
  planned now (a node's GPU memory may be known only once the node exists).
  Its other pods are planned again on this pass; one that holds none is
  deleted ("node-already-counted" when an earlier placeholder was credited
  on its node, else "capacity-taken"). Crediting the GPUs asked for
  instead held its pods until the timeout while other pods filled its node.
  What room its node has left after that (the whole node, not only the
  GPUs it asked for: the node came up whole) holds other waiting pods of
  its group, which land there within seconds; a placeholder whose own pods
  all landed stays (until the timeout) only while that room holds some.
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
  A node that came up within NEW_NODE_SECONDS with room left (its placeholder was bound to another node's
  GPUs while the autoscaler was adding it) holds the waiting pods that fit it, for groups with no placeholder
  still pending (`_fill_new_nodes`).
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
from fractions import Fraction
from typing import Any, Iterable, Mapping, Optional, Sequence

from raybridge.adjuster.decision.placeholders import (
    DELETE_CAPACITY_TAKEN,
    DELETE_DEMAND_GONE,
    DELETE_DOUBLE_COUNTED,
    DELETE_FINISHED,
    DELETE_GROWN,
    DELETE_HELD_ELSEWHERE,
    DELETE_NODE_GONE,
    DELETE_PODS_LANDED,
    DELETE_TIMED_OUT,
    ExistingPlaceholder,
    FINISHED,
    PENDING,
    PROVIDED,
    PlannedPlaceholder,
    Reconcile,
    TERMINATING,
    placeholder_name,
    waiting_pod_keys,
)
from raybridge.adjuster.decision.batch_window import BatchWindow, still_arriving
from raybridge.adjuster.decision.node_room import credit, fill_at, node_gpus, node_resources_left, node_rooms, with_room
from raybridge.adjuster.decision.plan import (
    NEW_NODE_SECONDS,
    AdjusterPlan,
    Placeholder,
    plan_in,
    scheduling_order,
    summed_resources,
)
from raybridge.adjuster.decision.settings import AdjusterSettings
from raybridge.adjuster.decision.demand import ClusterSnapshot, ConstraintGroup, DemandPiece, base_group_id, demand_in
from raybridge.adjuster.decision.host_spread import HOSTNAME_KEY
from raybridge.core.inventory import DeviceSources, named_nodes
from raybridge.core.placement import STARTUP_TAINT_KEYS
from raybridge.core.views import Node, Pod
from raybridge.adjuster.decision.best_fit import BestFitScheduler
from raybridge.adjuster.decision.packing import PackItem

def _capped(settings: AdjusterSettings, already: int) -> AdjusterSettings:
    if settings.max_total_gpus is None or not already:
        return settings
    return replace(settings, max_total_gpus=max(0, settings.max_total_gpus - already))


@dataclass
class _Pass:
    """What one pass has decided so far; each step below adds to it."""

    #: The pass's pods (without the placeholders), nodes and PodGroups, read once for every demand this pass asks for.
    snapshot: ClusterSnapshot
    existing: Sequence[ExistingPlaceholder]
    settings: AdjusterSettings
    provision_timeout_seconds: float
    waiting: set[str]
    delete: list[tuple[str, str]] = field(default_factory=list)
    keep: list[str] = field(default_factory=list)
    covered: set[str] = field(default_factory=set)
    provided_gpus: int = 0
    pending_gpus: int = 0

    @property
    def uncapped(self) -> AdjusterSettings:
        return replace(self.settings, max_total_gpus=None)

    @property
    def pods(self) -> list[Pod]:
        return self.snapshot.pods

    @property
    def nodes(self) -> Optional[list[Node]]:
        return self.snapshot.nodes

    @property
    def now(self) -> datetime:
        return self.snapshot.now

    def demand(self, pods: Sequence[Pod]) -> Sequence[DemandPiece]:
        """The demand pieces of `pods`, without the cap (what capacity already brought up holds is not capped)."""
        return demand_in(self.snapshot, self.uncapped, pods).pieces


def _by_state(state: _Pass) -> tuple[list[ExistingPlaceholder], list[ExistingPlaceholder]]:
    """(pending, provided) placeholders, by name; finished ones are deleted, terminating ones ignored."""
    pending: list[ExistingPlaceholder] = []
    provided: list[ExistingPlaceholder] = []
    for ph in sorted(state.existing, key=lambda p: p.name):
        if ph.state == TERMINATING:
            continue
        if ph.state == FINISHED:
            state.delete.append((ph.name, DELETE_FINISHED))
        elif ph.state == PROVIDED:
            provided.append(ph)
        else:
            pending.append(ph)
    return pending, provided


@dataclass
class _Rooms:
    """The room each node has left, in GPUs and in its other resources, as the provided placeholders are credited."""

    gpus: dict[str, list[Fraction]]
    resources: dict[str, dict[str, int]]
    #: Per node, the MiB of its GPUs as KAI reads them (None: unknown).
    memory: dict[str, Optional[int]] = field(default_factory=dict)
    #: Provided placeholders kept with room left on their node: (placeholder, its node's room, the GPUs credited).
    slack: list[tuple[ExistingPlaceholder, list[Fraction], list[int]]] = field(default_factory=list)
    #: Provided placeholders whose own pods all landed: kept only while their node's room holds other waiting pods.
    landed: list[ExistingPlaceholder] = field(default_factory=list)
    #: Per node, per group of pods that must not share a host: how many more of them it may take (`kinds_on`).
    kinds: dict[str, dict[str, int]] = field(default_factory=dict)
    bound: Optional[dict[str, list[Pod]]] = None

    def kinds_on(self, node: Optional[str], pieces: Sequence[DemandPiece], pods: Sequence[Pod]) -> Optional[dict[str, int]]:
        """What node `node` may still take of each kind among `pieces` (host_spread.py): its limit less the pods of
        the kind bound there and not finished; None where the node is not known."""
        if node is None:
            return None
        if self.bound is None:
            self.bound = {}
            for pod in pods:
                if pod.node_name and not pod.finished:
                    self.bound.setdefault(pod.node_name, []).append(pod)
        mine = self.kinds.setdefault(node, {})
        for piece in pieces:
            spread = piece.group.host_spread if piece.group.base_id not in mine else None
            if spread is not None:
                mine[piece.group.base_id] = spread.per_node - sum(1 for pod in self.bound.get(node, ()) if spread.is_one_of(pod))
        return mine


def _read_rooms(state: _Pass) -> _Rooms:
    """Every node's room as the pods bound there leave it, in GPUs and in its other resources, and the MiB of its GPUs
    as KAI reads them, of which a waiting gpu-memory pod's share is taken there."""
    return _Rooms(node_rooms(state.nodes, state.pods, _claimed_gpus(state.snapshot.devices)), node_resources_left(state.nodes, state.pods),
                  node_gpus(state.nodes)[1])


def _claimed_gpus(devices: DeviceSources) -> dict[str, int]:
    """Per node, its whole GPUs that DRA devices allocated to claims hold (none where claims are not known)."""
    if not devices.allocated:
        return {}
    found: dict[str, int] = {}
    for node, gpus in devices.by_node.items():
        count = sum(1 for g in gpus if g.whole and (g.driver, g.pool, g.device) in devices.allocated)
        if count:
            found[node] = count
    return found


def _credit_provided(state: _Pass, provided: list[ExistingPlaceholder]) -> _Rooms:
    """Capacity brought up, oldest first.

    A placeholder exits once scheduled, so the next one can land on the same free GPUs, and any pod may take the
    GPUs it brought up: it is credited only the room its node has left (after every pod bound there and every
    earlier placeholder's credit), and covers only the pods that room holds, planned with what is known now (a
    node's GPU memory, say). Pods it cannot hold are planned again at once, not after the timeout.
    """
    rooms = _read_rooms(state) if provided else _Rooms({}, {})
    by_key = {p.key: p for p in state.pods} if provided else {}
    credited_nodes: set[str] = set()
    for ph in sorted(provided, key=lambda p: (p.provided_at or state.now, p.name)):
        still_waiting = state.waiting.intersection(ph.pods)
        age = (state.now - ph.provided_at).total_seconds() if ph.provided_at else 0.0
        if not still_waiting:
            if ph.node and ph.node in rooms.gpus and age < state.provision_timeout_seconds:
                rooms.landed.append(ph)
            else:
                state.delete.append((ph.name, DELETE_PODS_LANDED))
            if ph.node:
                credited_nodes.add(ph.node)
            continue
        if age >= state.provision_timeout_seconds:
            state.delete.append((ph.name, DELETE_TIMED_OUT))
            continue
        if ph.node and state.nodes is not None and ph.node not in rooms.gpus and age >= NEW_NODE_SECONDS:
            state.delete.append((ph.name, DELETE_NODE_GONE))
            continue
        # Bound within NEW_NODE_SECONDS to a node the node list lacks: one the nodes' watch has not delivered yet (the
        # pods' and the nodes' watches are separate streams, and a dropped one is listed again later), not one gone.
        node_room = rooms.gpus.get(ph.node) if ph.node else None
        if node_room is None:  # where the capacity is, is not known (a ProvisioningRequest, a node not seen yet): its whole GPUs
            node_room = [Fraction(1)] * max(ph.gpus, 0)
        share = credit(node_room, ph.gpus)
        own = [by_key[k] for k in sorted(still_waiting) if k in by_key]
        node_resources = rooms.resources.get(ph.node) if ph.node else None
        pieces = state.demand(own) if own and share else ()
        held = (fill_at(pieces, node_room, share, node_resources, rooms.kinds_on(ph.node, pieces, state.pods), rooms.memory.get(ph.node or ""))
                if pieces else set())
        if not held and ph.node is not None:
            reason = DELETE_DOUBLE_COUNTED if ph.node in credited_nodes else DELETE_CAPACITY_TAKEN
            state.delete.append((ph.name, reason))
            continue
        if ph.node:
            credited_nodes.add(ph.node)
        state.keep.append(ph.name)
        state.provided_gpus += ph.gpus
        state.covered |= held
        if any(room > 0 for room in node_room):
            rooms.slack.append((ph, node_room, share))
    return rooms


def _unclaimed_waiting(state: _Pass) -> list[Pod]:
    """The waiting pods no pending placeholder was made for and no capacity already holds."""
    claimed = {k for ph in state.existing if ph.state == PENDING for k in ph.pods} | state.covered
    return [p for p in state.pods if p.key in state.waiting and p.key not in claimed]


def _fill_provided_slack(state: _Pass, rooms: _Rooms) -> None:
    """The room left on a provided placeholder's node holds other waiting pods of its group.

    Every GPU of the node, not only those it asked for: the node came up whole, and the group's waiting pods will
    land in that room within seconds; asking again for them would add a node the room makes needless. It holds
    later pods, and pods of another provided placeholder whose node had no room for them (pods land wherever the
    scheduler puts them). Where the node is not known (a ProvisioningRequest), only the GPUs it asked for. A
    placeholder whose own pods all landed stays while that room holds such pods (they were about to be asked for
    again, and the new placeholder would only land in that room); else it is deleted.
    """
    if not rooms.slack and not rooms.landed:
        return
    others = _unclaimed_waiting(state)
    pieces = state.demand(others) if others else ()

    def fill(group: str, node_room: list[Fraction], where: list[int], node: Optional[str]) -> set[str]:
        # Pods of its constraints whatever their GPU memory: the node is there, and each holds only what its own
        # GPUs fit (`fill`, `DemandPiece.share_on`).
        base = base_group_id(group)
        wanted = [piece for piece in pieces if piece.group.base_id == base and piece.pod not in state.covered]
        return fill_at(wanted, node_room, where, rooms.resources.get(node) if node else None, rooms.kinds_on(node, wanted, state.pods),
                        rooms.memory.get(node) if node else None)

    for ph, node_room, share in rooms.slack:
        state.covered |= fill(ph.group, node_room, with_room(node_room) if ph.node else share, ph.node)
    for ph in rooms.landed:
        assert ph.node is not None  # only placeholders on a known node are kept for their room
        held = fill(ph.group, rooms.gpus[ph.node], with_room(rooms.gpus[ph.node]), ph.node)
        if held:
            state.keep.append(ph.name)
            state.provided_gpus += ph.gpus
            state.covered |= held
        else:
            state.delete.append((ph.name, DELETE_PODS_LANDED))


#: How long a node counts as new: one whose room the scheduler has not had its cycles to fill yet (KAI binds in
#: sessions of a second; kube-scheduler at once). Its room holds the waiting pods that fit it (`_fill_new_nodes`).


def _new_nodes(state: _Pass) -> list[Node]:
    """Each node that came up within NEW_NODE_SECONDS, oldest first."""
    found: list[tuple[datetime, str, Node]] = []
    for node in named_nodes(state.nodes or (), []):
        created = node.meta.created_at
        if created is not None and 0 <= (state.now - created).total_seconds() < NEW_NODE_SECONDS:
            found.append((created, node.name, node))
    return [node for _, _, node in sorted(found, key=lambda f: (f[0], f[1]))]


def _fill_new_nodes(state: _Pass, rooms: _Rooms) -> None:
    """The room on a node that has just come up holds the waiting pods that fit it, which the scheduler places there
    within its next cycles: asking for them again would add a node the room makes needless.

    A placeholder exits once scheduled, so the scheduler may bind the next pending placeholder to the GPUs the first
    one brought up; the node the autoscaler was already adding for that second placeholder then comes up with no
    placeholder on it, and nothing else of this pass counts its room (the second placeholder is counted for nothing:
    node-already-counted). Only nodes younger than NEW_NODE_SECONDS: a pod still waiting beside an older node's room
    does not fit there for a reason this model does not see. Only groups with no placeholder pending. The taints a
    node is born with and loses once it is up (`placement.STARTUP_TAINT_KEYS`: every new node has kube-apiserver's
    NotReady taint for its first moments) do not keep the pods off: counted, a pass made placeholders for pods that
    landed there a second later.
    """
    others = _unclaimed_waiting(state)
    new = _new_nodes(state) if others else []
    if not new:
        return
    if not rooms.gpus:  # no placeholder on a node this pass: the rooms were not read yet
        rooms = _read_rooms(state)
    # A group with a placeholder still pending may be the one a new node came up for: its nodes on their way
    # already hold its waiting pods (`_place_on_pending`), and counting the node here too would count it twice.
    waiting_for_nodes = {ph.group for ph in state.existing if ph.state == PENDING}
    pieces = [piece for piece in state.demand(others) if piece.group.id not in waiting_for_nodes]
    for node in new:
        room = rooms.gpus.get(node.name)
        if not room or not any(r > 0 for r in room):
            continue
        admitted: dict[ConstraintGroup, bool] = {}  # asked once per group, not per pod
        for piece in pieces:
            if piece.group not in admitted:
                admitted[piece.group] = piece.group.admits_node(node, ignoring_taints=STARTUP_TAINT_KEYS)
        wanted = [piece for piece in pieces if piece.pod not in state.covered and admitted[piece.group]]
        if wanted:
            state.covered |= fill_at(wanted, room, with_room(room), rooms.resources.get(node.name), rooms.kinds_on(node.name, wanted, state.pods),
                                      rooms.memory.get(node.name))


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


def _place_on_pending(state: _Pass, pending: list[ExistingPlaceholder], plan: AdjusterPlan) -> _PendingPlacement:
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


def _kind_nodes(state: _Pass, groups: Sequence[ConstraintGroup]) -> dict[str, set[str]]:
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


def _new_placeholders(state: _Pass, demand_pods: list[Pod], plan: AdjusterPlan, on_pending: _PendingPlacement, name_prefix: str) -> list[PlannedPlaceholder]:
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


def _hold_back(state: _Pass, create: list[PlannedPlaceholder], on_pending: _PendingPlacement, held_back: Mapping[str, str],
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
    state = _Pass(snapshot, existing, settings, provision_timeout_seconds, waiting_pod_keys(pods))
    pending, provided = _by_state(state)
    rooms = _credit_provided(state, provided)
    _fill_provided_slack(state, rooms)
    _fill_new_nodes(state, rooms)
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
