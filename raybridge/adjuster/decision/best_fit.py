"""A best-fit scheduler, placing pods one by one as KAI's bin-packing placement does, simplified: what it leaves
without room, and a run that can be resumed with more nodes.

Why it exists: an exact packing (`packing.py`) can need a placement no greedy scheduler finds; the planner asks
this model which pods the real scheduler would leave over, and adds GPUs for them (`plan.py`); the reconcile core
places waiting pods onto nodes on their way the same way (`reconcile.py`).

What it deliberately does not do: search for the fewest nodes (`packing.py`), or know KAI's scoring beyond best fit
on GPUs within the node's CPU, memory and other resources.
"""

from __future__ import annotations

import bisect
import math
from fractions import Fraction
from typing import Optional, Sequence

from raybridge.adjuster.decision.packing import PackedNode, PackItem, Resources

def greedy_leftovers(items: Sequence[PackItem], node_sizes: Sequence[int],
                     node_resources: Optional[Sequence[Optional[Resources]]] = None) -> list[int]:
    """Which of `items`, placed one by one in the order given, a best-fit scheduler leaves without room.

    The scheduler model (KAI's bin-packing placement, simplified, as
    benchmarks/adjuster_vs_kai.py simulates it): nodes of `node_sizes` empty
    GPUs; a pod goes to the node where its `devices` fullest GPUs with room
    leave the least spare space, on those GPUs (the first such node on a
    tie), among the nodes that still have the pod's CPU, memory and other
    resources (`PackItem.resources` against `node_resources`, the
    scheduler's NodeResourcesFit). An exact packing can need a placement no greedy scheduler finds;
    the planner adds GPUs for what this leaves (`adjuster/decision/plan.py`).
    Returns the positions in `items` of the pods left over.
    """
    return BestFitScheduler(items, node_sizes, node_resources).run()


class BestFitScheduler:
    """`greedy_leftovers` as a run that can be resumed with more nodes, for the planner's rounds.

    Nodes added later come after the first ones and start empty, so the
    scheduler picks one of their GPUs only where no earlier GPU has room:
    a run over more nodes places every pod exactly as the run before did, up
    to that run's first pod left over. `run()` keeps a copy of the state
    there, and `resumed_with(sizes)` goes on from it with the new nodes, so
    each round places only the pods from its predecessor's first leftover on
    rather than all of them again (the same leftovers, in less time).
    """

    def __init__(self, items: Sequence[PackItem], node_sizes: Sequence[int],
                 node_resources: Optional[Sequence[Optional[Resources]]] = None, per_node: Optional[int] = None) -> None:
        """`per_node`: at most this many pods on one node (pods that must not share a host: required pod
        anti-affinity or topology spread by hostname; None: no limit)."""
        self.items = items
        self.per_node = per_node
        #: Per node, the pods placed there (read only where `per_node` is set).
        self.pods_on: list[int] = []
        self.capacity = math.lcm(*{i.size.denominator for i in items}) if items else 1
        self.sizes = [i.size.numerator * (self.capacity // i.size.denominator) for i in items]
        self.smallest = min(self.sizes, default=0)
        #: per node, (free, gpu) ascending; and every GPU as (free, node, gpu), ascending, for a global best fit
        self.by_node: list[list[tuple[int, int]]] = []
        self.slots: list[tuple[int, int, int]] = []
        # Multi-device pods look at the nodes in use that the smallest pod still fits and, of the untouched ones
        # (all alike), only the first of each size: a scan of every node per pod is too slow at thousands of pods.
        self.in_use: list[int] = []
        self.untouched: set[int] = set()
        self.fresh_by_size: dict[tuple[int, Optional[Resources]], list[int]] = {}  # per node shape: [cursor, node, node, ...]
        self.full: set[int] = set()
        self.start = 0
        self.checkpoint: Optional[BestFitScheduler] = None
        #: Per item placed: (node, its GPUs), in the order the nodes were given.
        self.placed: dict[int, tuple[int, tuple[int, ...]]] = {}
        #: Per node, what is left of its other resources (None: not limited); per item, what it needs of them.
        self.resources_left: list[Optional[dict[str, int]]] = []
        self.needs: list[Optional[Resources]] = [i.resources or None for i in items]
        self._add_nodes(node_sizes, node_resources)

    def _add_nodes(self, node_sizes: Sequence[int], node_resources: Optional[Sequence[Optional[Resources]]] = None) -> None:
        capacity = self.capacity
        for position, n in enumerate(node_sizes):
            node = len(self.by_node)
            given = node_resources[position] if node_resources is not None else None
            limit = tuple(sorted(given)) if given is not None else None
            self.by_node.append([(capacity, gpu) for gpu in range(n)])
            self.pods_on.append(0)
            self.resources_left.append(dict(limit) if limit is not None else None)
            # the new node's GPUs are empty and numbered after every other: they sort last
            self.slots.extend((capacity, node, gpu) for gpu in range(n))
            self.untouched.add(node)
            self.fresh_by_size.setdefault((n, limit), [1]).append(node)

    def _copy(self) -> BestFitScheduler:
        twin = BestFitScheduler.__new__(BestFitScheduler)
        twin.items, twin.capacity, twin.sizes, twin.smallest = self.items, self.capacity, self.sizes, self.smallest
        twin.per_node, twin.pods_on = self.per_node, list(self.pods_on)
        twin.by_node = [list(mine) for mine in self.by_node]
        twin.slots = list(self.slots)
        twin.in_use = list(self.in_use)
        twin.untouched = set(self.untouched)
        twin.fresh_by_size = {n: list(nodes) for n, nodes in self.fresh_by_size.items()}
        twin.full = set(self.full)
        twin.start, twin.checkpoint = self.start, None
        twin.placed = dict(self.placed)
        twin.resources_left = [dict(left) if left is not None else None for left in self.resources_left]
        twin.needs = self.needs
        return twin

    def resumed_with(self, node_sizes: Sequence[int], node_resources: Optional[Sequence[Optional[Resources]]] = None) -> BestFitScheduler:
        """The last run's state at its first pod left over, with nodes of `node_sizes` added (run it next)."""
        if self.checkpoint is None:
            raise ValueError("nothing to resume: the last run left no pod over")
        resumed = self.checkpoint
        resumed._add_nodes(node_sizes, node_resources)
        return resumed

    def _room_for(self, node: int, need: Optional[Resources]) -> bool:
        """Whether node `node` has what is left of its other resources for `need` (and room for one more pod
        where `per_node` limits them)."""
        if self.per_node is not None and self.pods_on[node] >= self.per_node:
            return False
        left = self.resources_left[node]
        if need is None or left is None:
            return True
        return all(left.get(name, 0) >= amount for name, amount in need)

    def holds_pods(self, node: int) -> bool:
        """Whether the last run placed any pod on node `node` (in the order the nodes were given)."""
        return node not in self.untouched

    def _take(self, node: int, gpu: int, room: int, size: int) -> None:
        slots = self.slots
        del slots[bisect.bisect_left(slots, (room, node, gpu))]
        bisect.insort(slots, (room - size, node, gpu))
        mine = self.by_node[node]
        del mine[bisect.bisect_left(mine, (room, gpu))]
        bisect.insort(mine, (room - size, gpu))
        if node in self.untouched:
            self.untouched.discard(node)
            bisect.insort(self.in_use, node)
        if mine[-1][0] < self.smallest:
            self.full.add(node)

    def run(self) -> list[int]:
        """Place the pods from where this run starts; the positions (in all the items) of those left over."""
        left: list[int] = []
        sizes = self.sizes
        for index in range(self.start, len(self.items)):
            size, devices, need = sizes[index], self.items[index].devices, self.needs[index]
            chosen = self._single(size, need) if devices == 1 else self._multi(size, devices, need)
            if chosen is None:
                if not left:
                    self.checkpoint = self._copy()
                    self.checkpoint.start = index
                left.append(index)
                continue
            node, fits = chosen
            for room, gpu in fits:
                self._take(node, gpu, room, size)
            self.pods_on[node] += 1
            left_on_node = self.resources_left[node]
            if need is not None and left_on_node is not None:
                for name, amount in need:
                    left_on_node[name] = left_on_node.get(name, 0) - amount
            self.placed[index] = (node, tuple(gpu for _, gpu in fits))
        return left

    def placement(self, keep_empty_gpus: bool = False) -> tuple[PackedNode, ...]:
        """What the last run placed, one `PackedNode` per node that holds a pod, with only the GPUs that hold one
        (`keep_empty_gpus`: all of that node's GPUs).

        Nodes keep the order they were given in, and a node's GPUs theirs. Placed again on these nodes, the
        same pods land the same way: a GPU that stayed empty was never a best fit, so taking it away changes
        no choice (the planner checks that by placing them again).
        """
        pods_on: dict[int, dict[int, list[str]]] = {}
        for index in sorted(self.placed):
            node, gpus = self.placed[index]
            for gpu in gpus:
                pods_on.setdefault(node, {}).setdefault(gpu, []).append(self.items[index].pod)
        capacity = self.capacity
        out = []
        for node in sorted(pods_on):
            rooms = dict((gpu, room) for room, gpu in self.by_node[node])
            gpus = sorted(rooms) if keep_empty_gpus else sorted(pods_on[node])
            out.append(PackedNode(
                gpus=len(gpus),
                pods=tuple(sorted({p for g in gpus for p in pods_on[node][g]})),
                loads=tuple(Fraction(capacity - rooms[g], capacity) for g in gpus),
                gpu_pods=tuple(tuple(sorted(pods_on[node].get(g, ()))) for g in gpus),
            ))  # fmt: skip
        return tuple(out)

    def _single(self, size: int, need: Optional[Resources]) -> Optional[tuple[int, list[tuple[int, int]]]]:
        at = bisect.bisect_left(self.slots, (size, -1, -1))
        while at < len(self.slots):
            room, node, gpu = self.slots[at]
            if (need is None and self.per_node is None) or self._room_for(node, need):
                return node, [(room, gpu)]
            at += 1  # the best-fitting GPU whose node has the pod's CPU, memory, ... left
        return None

    def _multi(self, size: int, devices: int, need: Optional[Resources]) -> Optional[tuple[int, list[tuple[int, int]]]]:
        best: Optional[tuple[int, int, list[tuple[int, int]]]] = None
        if self.full:
            self.in_use = [node for node in self.in_use if node not in self.full]
            self.full.clear()
        firsts = []
        for size_nodes in self.fresh_by_size.values():
            while size_nodes[0] < len(size_nodes) and size_nodes[size_nodes[0]] not in self.untouched:
                size_nodes[0] += 1
            if size_nodes[0] < len(size_nodes):
                firsts.append(size_nodes[size_nodes[0]])
        for node in sorted([*self.in_use, *firsts]):
            mine = self.by_node[node]
            if len(mine) < devices or mine[-devices][0] < size or not self._room_for(node, need):
                continue
            at = bisect.bisect_left(mine, (size, -1))
            if len(mine) - at < devices:
                continue
            fits = mine[at : at + devices]
            slack = sum(room for room, _ in fits) - size * devices
            if best is None or slack < best[0]:
                best = (slack, node, fits)
        return None if best is None else (best[1], best[2])
