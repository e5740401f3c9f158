"""A group's placeholders as the scheduler would place its pods: `scheduled_placement`.

The exact packing (`packing.py`) says how few GPUs hold a group's pods; the scheduler places them one by one (oldest
first, best fit: `best_fit.py`), so a group's placeholders are that placement: over the packed nodes, with GPUs added
until it leaves no pod without room, regrouped into fewer nodes where that still holds every pod, and each node with
only the GPUs its pods land on. Pods that must not share a host are placed at most `per_node` to a node.

The placement is a function of the group's packing, its pods in the scheduler's order (names, shares, devices,
requests), the node size, a node's room and `per_node`. The last `PLACEMENTS_KEPT` are kept, as `pack` keeps its
packings, so that a controller's pass places again only the groups whose pods changed: a fifth of a pass that packs
nothing new at 1,239 groups.

What this deliberately does not do: pack, choose the order (`plan.scheduling_order`), or know what a placeholder
is (`plan.py` makes them from the nodes returned here).
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

from raybridge.adjuster.decision.best_fit import BestFitScheduler
from raybridge.adjuster.decision.packing import PackedNode, Packing, PackItem, Resources, fewest_nodes, keep_recent, pack

__all__ = ["PLACEMENTS_KEPT", "scheduled_placement"]

#: How many placements `scheduled_placement` keeps (each a group's as a pass asked for it).
PLACEMENTS_KEPT = 4096
#: Per key, the packing it was placed from (held, so that no other packing takes its id while the key is kept) and
#: the placement.
_placements: dict[tuple[Any, ...], tuple[Packing, tuple[PackedNode, ...]]] = {}


def scheduled_placement(
    packing: Packing, ordered_items: Sequence[PackItem], node_gpus: int, room: Optional[Resources], per_node: Optional[int] = None
) -> tuple[PackedNode, ...]:
    """The nodes the scheduler places `ordered_items` on (its order), each with the pods it places there and only the
    GPUs they land on, from the group's `packing` (`per_node` set: at most that many pods on a node, a node each at
    worst, the packing not used). `room`: what one node has besides GPUs (None: unknown)."""
    key = (
        id(packing),  # the packing is held with the placement: no other object has this id while the key is kept
        tuple((i.pod, i.size.numerator, i.size.denominator, i.devices, i.resources) for i in ordered_items),
        node_gpus,
        room,
        per_node,
    )
    kept = _placements.pop(key, None)
    placed = kept[1] if kept is not None else _place(packing, list(ordered_items), node_gpus, room, per_node)
    return keep_recent(_placements, key, (packing, placed), PLACEMENTS_KEPT)[1]


def _place(packing: Packing, ordered_items: list[PackItem], node_gpus: int, room: Optional[Resources], per_node: Optional[int]) -> tuple[PackedNode, ...]:
    if per_node is not None:
        # Pods that must not share a host: the scheduler's placement with at most `per_node` on a node (a node
        # per pod at worst), each node's placeholder only the GPUs its pods land on.
        capped = BestFitScheduler(ordered_items, [node_gpus] * len(ordered_items), _rooms(room, len(ordered_items)), per_node=per_node)
        capped.run()
        return capped.placement()
    check = _placement_with_room_for_all(list(packing.nodes), ordered_items, node_gpus, room)
    # The placeholders are the scheduler's placement itself, not the packing: each pod in the one
    # placeholder whose GPUs it will land on, and no GPU that no pod lands on.
    return _scheduled_nodes(check, ordered_items, room)


def _rooms(room: Optional[Resources], count: int) -> Optional[list[Optional[Resources]]]:
    """What each of `count` nodes has room for besides GPUs (None: unknown)."""
    return None if room is None else [room] * count


def _placement_with_room_for_all(
    planned_nodes: list[PackedNode], ordered_items: list[PackItem], node_gpus: int, room: Optional[Resources]
) -> BestFitScheduler:
    """A best-fit run over the packed nodes, plus nodes where it left pods over, regrouped where that still fits all."""
    # The scheduler places pods one by one, not as the exact packing does: add GPUs until a best-fit
    # placement in its order (KAI's within a queue: oldest first) also finds room for every pod (each
    # round places at least the first pod the last one left: it fits an empty node on its own).
    check = BestFitScheduler(ordered_items, [n.gpus for n in planned_nodes], _rooms(room, len(planned_nodes)))
    while True:
        left = check.run()
        if not left:
            break
        extra = pack([ordered_items[i] for i in left], node_gpus, exact_max_slices=0, budget=0)
        planned_nodes.extend(extra.nodes)
        # the same placements up to the first leftover
        check = check.resumed_with([n.gpus for n in extra.nodes], _rooms(room, len(extra.nodes)))
    # Fewer, fuller placeholders where the GPUs regroup into fewer nodes (the autoscaler adds a node for
    # each it cannot fit): kept only where the scheduler's placement still finds room for every pod.
    regrouped = fewest_nodes(planned_nodes, node_gpus)
    if len(regrouped) < len(planned_nodes):
        regrouped_check = BestFitScheduler(ordered_items, [n.gpus for n in regrouped], _rooms(room, len(regrouped)))
        if not regrouped_check.run():
            check = regrouped_check
    return check


def _scheduled_nodes(check: BestFitScheduler, ordered_items: list[PackItem], room: Optional[Resources]) -> tuple[PackedNode, ...]:
    """The nodes of a run that left no pod over, with only the GPUs its pods land on.

    Those GPUs alone give the same placement again (an empty GPU was never a best fit); where they
    would not, the nodes are kept whole, so a pod is never left without its placeholder.
    """
    placed = check.placement()
    again = BestFitScheduler(ordered_items, [n.gpus for n in placed], None if room is None else [room] * len(placed))
    if again.run() or again.placement() != placed:
        return check.placement(keep_empty_gpus=True)
    return placed
