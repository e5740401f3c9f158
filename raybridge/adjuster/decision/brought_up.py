"""The capacity placeholders have already brought up, credited to the pods it holds: `credit_provided`,
`fill_provided_slack`, `fill_new_nodes`.

Split from reconcile.py, which runs these three first on every pass and plans what they leave.

A placeholder that got a node ("provided": bound, or finished on a node)
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

A node that came up within NEW_NODE_SECONDS with room left (its placeholder was bound to another node's GPUs while
the autoscaler was adding it) holds the waiting pods that fit it, for groups with no placeholder still pending,
whatever the taints every new node is born with say (`fill_new_nodes`).

Pure: plain data in and out, no clock, no I/O. What it deliberately does not do: plan new placeholders or place pods
on pending ones (reconcile.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from fractions import Fraction
from typing import Optional, Sequence

from raybridge.adjuster.decision.demand import ConstraintGroup, DemandPiece, base_group_id
from raybridge.adjuster.decision.node_room import credit, fill_at, node_gpus, node_resources_left, node_rooms, with_room
from raybridge.adjuster.decision.pass_state import PassState
from raybridge.adjuster.decision.placeholders import (
    DELETE_CAPACITY_TAKEN,
    DELETE_DOUBLE_COUNTED,
    DELETE_NODE_GONE,
    DELETE_PODS_LANDED,
    DELETE_TIMED_OUT,
    PENDING,
    ExistingPlaceholder,
)
from raybridge.adjuster.decision.plan import NEW_NODE_SECONDS
from raybridge.core.inventory import DeviceSources, named_nodes
from raybridge.core.placement import STARTUP_TAINT_KEYS
from raybridge.core.views import Node, Pod


@dataclass
class Rooms:
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


def read_rooms(state: PassState) -> Rooms:
    """Every node's room as the pods bound there leave it, in GPUs and in its other resources, and the MiB of its GPUs
    as KAI reads them, of which a waiting gpu-memory pod's share is taken there."""
    return Rooms(node_rooms(state.nodes, state.pods, _claimed_gpus(state.snapshot.devices)), node_resources_left(state.nodes, state.pods),
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


def credit_provided(state: PassState, provided: list[ExistingPlaceholder]) -> Rooms:
    """Capacity brought up, oldest first.

    A placeholder exits once scheduled, so the next one can land on the same free GPUs, and any pod may take the
    GPUs it brought up: it is credited only the room its node has left (after every pod bound there and every
    earlier placeholder's credit), and covers only the pods that room holds, planned with what is known now (a
    node's GPU memory, say). Pods it cannot hold are planned again at once, not after the timeout.
    """
    rooms = read_rooms(state) if provided else Rooms({}, {})
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


def unclaimed_waiting(state: PassState) -> list[Pod]:
    """The waiting pods no pending placeholder was made for and no capacity already holds."""
    claimed = {k for ph in state.existing if ph.state == PENDING for k in ph.pods} | state.covered
    return [p for p in state.pods if p.key in state.waiting and p.key not in claimed]


def fill_provided_slack(state: PassState, rooms: Rooms) -> None:
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
    others = unclaimed_waiting(state)
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


# A node counts as new for NEW_NODE_SECONDS (plan.py): one whose room the scheduler has not had its cycles to fill yet
# (KAI binds in sessions of a second; kube-scheduler at once). Its room holds the waiting pods that fit it (`fill_new_nodes`).


def _new_nodes(state: PassState) -> list[Node]:
    """Each node that came up within NEW_NODE_SECONDS, oldest first."""
    found: list[tuple[datetime, str, Node]] = []
    for node in named_nodes(state.nodes or (), []):
        created = node.meta.created_at
        if created is not None and 0 <= (state.now - created).total_seconds() < NEW_NODE_SECONDS:
            found.append((created, node.name, node))
    return [node for _, _, node in sorted(found, key=lambda f: (f[0], f[1]))]


def fill_new_nodes(state: PassState, rooms: Rooms) -> None:
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
    others = unclaimed_waiting(state)
    new = _new_nodes(state) if others else []
    if not new:
        return
    if not rooms.gpus:  # no placeholder on a node this pass: the rooms were not read yet
        rooms = read_rooms(state)
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
