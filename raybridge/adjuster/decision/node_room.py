"""The room a node has left for pods, GPU by GPU, as the pods bound there (KAI's shared GPUs included) leave it.

Why it exists: the reconcile core credits each placeholder that got a node with the room that node has left, and
places waiting pods into that room and into nodes still on their way; both read the room here, one way. A GPU's
room is a fraction: whole-GPU pods take free GPUs, a KAI reservation pod marks the one GPU its group's shared pods
fill, and sharing pods whose group is not recorded yet are packed as tightly as they allow. Filling (`fill`) places
demand pieces first fit, largest first, within the node's CPU and memory and the kinds it may still take.

What it deliberately does not do: decide what a placeholder is credited with or which pods it covers
(`reconcile.py`), read the cluster, or know the clock.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any, Iterable, Mapping, Optional, Sequence

from raybridge.adjuster.decision.demand import DemandPiece
from raybridge.core.inventory import named_nodes, node_allocatable_resources, node_gpus_by_vendor, pod_gpu_requests, resource_requests_of
from raybridge.core.views import Node, Pod, pod_fact
from raybridge.kai.names import KAI_GPU_GROUP_LABEL, KAI_RESERVATION_APP, KAI_UTILITY_APP_LABEL
from raybridge.kai.share import kai_gpu_memory_mib, landed_share

# --- KAI's GPU sharing on a node, as its binder records it ----------------------------------
# Binding a pod to a share of a GPU, KAI's binder creates a reservation pod for that GPU, once per
# shared GPU: `gpu-reservation-<node>-<random>` in namespace `kai-resource-reservation`, labels
# `app: kai-resource-reservation` and `runai-gpu-group: <group>`, `nodeName` set, requesting one whole
# `nvidia.com/gpu` (kai-scheduler@v0.13.0 pkg/binder/binding/resourcereservation/resource_reservation.go,
# createGPUReservationPod, createResourceReservationPod). The shared pods carry the same group as the
# label `runai-gpu-group: <group>`, or, spanning several GPUs, one label `runai-gpu-group/<group>: <group>`
# per GPU (updatePodGPUGroup; pkg/common/resources/gpu_sharing.go GetMultiFractionGpuGroupLabel). So the
# reservation pod is the whole GPU the shared pods sit on: counted once, not again for each share.
KAI_RESERVATION_APP_LABEL = KAI_UTILITY_APP_LABEL


def gpu_groups_of(labels: Mapping[str, Any]) -> list[str]:
    """The shared GPUs (KAI's GPU groups) a pod's labels say it sits on."""
    groups = []
    single = labels.get(KAI_GPU_GROUP_LABEL)
    if isinstance(single, str) and single:
        groups.append(single)
    prefix = KAI_GPU_GROUP_LABEL + "/"
    groups += [str(value) for key, value in labels.items() if isinstance(key, str) and key.startswith(prefix) and value]
    return groups


def node_gpus(nodes: Optional[Iterable[Node]]) -> tuple[dict[str, list[Fraction]], dict[str, Optional[int]]]:
    """Per node: a whole room for each of its GPUs (any vendor), and the MiB per GPU its labels give (None: unknown).

    Read by `core/inventory.py` `node_gpus_by_vendor`, as demand.py reads the nodes a pod may land on, so a
    pod's share counts the same waiting and landed (allocatable, else capacity; NVIDIA's MiB and AMD's "192G").
    """
    rooms: dict[str, list[Fraction]] = {}
    memory: dict[str, Optional[int]] = {}
    warnings: list[str] = []  # what the inventory could not read is said by the demand's reading of the same nodes
    for node in named_nodes(nodes or (), warnings):
        gpus = node_gpus_by_vendor(node, warnings)
        rooms[node.name] = [Fraction(1)] * sum(count for count, _ in gpus.values())
        memory[node.name] = next((kai_gpu_memory_mib(mib, vendor) for vendor, (_, mib) in gpus.items() if mib), None)
    return rooms, memory


def node_rooms(nodes: Optional[Iterable[Node]], pods: Sequence[Pod], claimed: Optional[Mapping[str, int]] = None) -> dict[str, list[Fraction]]:
    """Per node: the room left on each GPU (any vendor) once the pods bound there and not finished are placed, and
    the GPUs its DRA devices allocated to claims are (`claimed`: the same GPUs the device plugin counts, taken whole).

    A KAI reservation pod marks one GPU as shared: its room is what the shared pods of its GPU group
    leave (the reservation's own whole-GPU request is that same GPU, not another). Other whole-GPU pods
    take free GPUs. GPU-sharing pods whose group has no reservation pod here (not recorded yet) are
    packed first fit, largest first, into what is left: never more room than is really free on a node
    packed as well, and a node filled by any pods (not only a placeholder's own) shows no room.
    """
    rooms, memory = node_gpus(nodes)
    bound: list[tuple[str, Pod, Mapping[str, Any]]] = []  # (node, pod, labels)
    for pod in pods:
        if pod.node_name not in rooms or pod.finished:
            continue
        bound.append((pod.node_name, pod, pod.meta.labels))
    shared = kai_shared_gpus(bound, rooms)
    for node_name, count in (claimed or {}).items():
        room = rooms.get(node_name)
        if room is None:
            continue
        taken = {i for (n, _), i in shared.items() if n == node_name}
        for i in [i for i in range(len(room)) if i not in taken][:count]:
            room[i] = Fraction(0)
    # GPUs are numbered here, not as the device plugin does: the shared ones first, then the others.
    sharing: dict[str, list[tuple[Fraction, int]]] = {}
    for node_name, pod, labels in bound:
        room = rooms[node_name]
        if labels.get(KAI_RESERVATION_APP_LABEL) == KAI_RESERVATION_APP and (node_name, labels.get(KAI_GPU_GROUP_LABEL)) in shared:
            continue  # its GPU is the shared one its group's pods fill
        whole = sum(pod_gpu_requests(pod).values())
        taken = {i for (n, _), i in shared.items() if n == node_name}
        for _ in range(whole):
            free = next((i for i, r in enumerate(room) if r == 1 and i not in taken), None)
            if free is None:
                break
            room[free] = Fraction(0)
        share = landed_share(pod.meta.annotations, memory.get(node_name))
        if share is None:
            continue
        on = [shared[(node_name, g)] for g in gpu_groups_of(labels) if (node_name, g) in shared]
        if on:
            for i in on:
                room[i] = max(Fraction(0), room[i] - share[0])
        else:
            sharing.setdefault(node_name, []).append(share)
    for node_name, shares in sharing.items():
        pack_shares(rooms[node_name], shares)
    return rooms


def kai_shared_gpus(bound: Sequence[tuple[str, Pod, Mapping[str, Any]]],
                     rooms: Mapping[str, list[Fraction]]) -> dict[tuple[str, str], int]:
    """(node, KAI GPU group) -> the index of the GPU its reservation pod marks as shared: one GPU per group."""
    shared: dict[tuple[str, str], int] = {}
    for node_name, _pod, labels in bound:
        group = labels.get(KAI_GPU_GROUP_LABEL)
        if labels.get(KAI_RESERVATION_APP_LABEL) != KAI_RESERVATION_APP or not isinstance(group, str) or not group:
            continue
        index = len([k for k in shared if k[0] == node_name])
        if index < len(rooms[node_name]) and (node_name, group) not in shared:
            shared[(node_name, group)] = index
    return shared


def pack_shares(room: list[Fraction], shares: list[tuple[Fraction, int]]) -> None:
    """Lower `room` by GPU-sharing pods whose GPU group is not recorded yet: first fit, largest first, best fit."""
    for fraction, devices in sorted(shares, key=lambda s: (-s[0] * s[1], -s[1])):
        chosen = sorted((i for i, r in enumerate(room) if r >= fraction), key=lambda i: (room[i], i))[:devices]
        for i in chosen:
            room[i] -= fraction
        # Not placeable as packed here (it landed, so the scheduler packed it otherwise): take the emptiest.
        for i in sorted(range(len(room)), key=lambda i: -room[i])[: devices - len(chosen)]:
            room[i] = max(Fraction(0), room[i] - fraction)


def with_room(room: list[Fraction]) -> list[int]:
    """The GPUs of a node that have room left."""
    return [i for i, r in enumerate(room) if r > 0]


def credit(room: list[Fraction], gpus: int) -> list[int]:
    """The placeholder's share of its node: up to `gpus` GPUs with room, the emptiest first."""
    return sorted(with_room(room), key=lambda i: (-room[i], i))[: max(gpus, 0)]


def fill_at(pieces: Sequence[DemandPiece], room: list[Fraction], indices: list[int], resources_left: Optional[dict[str, int]] = None,
             kinds_left: Optional[dict[str, int]] = None, gpu_memory: Optional[int] = None) -> set[str]:
    """`fill` into the GPUs `indices` of `room`, lowering `room` (and `resources_left`, `kinds_left`) in place."""
    part = [room[i] for i in indices]
    fitting = fill(pieces, part, resources_left, kinds_left, gpu_memory)
    for i, left in zip(indices, part):
        room[i] = left
    return fitting


def fill(pieces: Sequence[DemandPiece], free: list[Fraction], resources_left: Optional[dict[str, int]] = None,
          kinds_left: Optional[dict[str, int]] = None, gpu_memory: Optional[int] = None) -> set[str]:
    """Place what fits into `free` (room per GPU, lowered in place) and `resources_left` (the node's CPU, memory,
    ...; None: not limited): first fit, largest first. A pod whose GPU share fits but whose CPU or memory does
    not is not held: the node it waits for could never take it; nor is a pod whose kind the node already holds
    as many of as it may (`kinds_left`, by group: host_spread.py). A gpu-memory pod's share is of this node's own
    GPUs (`gpu_memory`, KAI's reading; `DemandPiece.share_on`): none where they are too small for it."""
    fitting: set[str] = set()
    shares = [(share, piece) for piece in pieces if (share := piece.share_on(gpu_memory)) is not None]
    for share, piece in sorted(shares, key=lambda s: (-s[0] * s[1].devices, s[1].pod)):
        chosen = [i for i, room in enumerate(free) if room >= share][: piece.devices]
        if len(chosen) < piece.devices:
            continue
        kind = piece.group.base_id if kinds_left is not None and piece.group.host_spread_json else None
        if kind is not None and kinds_left.get(kind, 0) < 1:  # type: ignore[union-attr]
            continue
        if resources_left is not None:
            if any(resources_left.get(name, 0) < amount for name, amount in piece.resources):
                continue
            for name, amount in piece.resources:
                resources_left[name] -= amount
        if kind is not None:
            kinds_left[kind] -= 1  # type: ignore[index]
        for i in chosen:
            free[i] -= share
        fitting.add(piece.pod)
    return fitting


def node_resources_left(nodes: Optional[Iterable[Node]], pods: Sequence[Pod]) -> dict[str, dict[str, int]]:
    """Per node: its allocatable CPU, memory, ... (thousandths) less what the pods bound there and not finished request."""
    left: dict[str, dict[str, int]] = {}
    for node in nodes or ():
        if node.name:
            left[node.name] = dict(node_allocatable_resources(node))
    for pod in pods:
        mine = left.get(pod.node_name)
        if mine is None or pod.finished:
            continue
        for name, amount in pod_fact(pod, resource_requests_of):
            mine[name] = mine.get(name, 0) - amount
    return left
