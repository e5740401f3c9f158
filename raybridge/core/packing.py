"""Exact bin packing of GPU fractions into whole GPUs, and of those GPUs into nodes.

Summing fractions and rounding up under-asks: three pods of 0.6 need three
GPUs, not two. This module packs instead. Each item is a pod that needs
`size` of a GPU on each of `devices` distinct GPUs of one node; GPUs hold
1 each; a node holds `node_gpus` GPUs. The result minimises the number of
GPUs and says how it knows:

* a lower bound: the larger of Martello and Toth's L2 bound on the GPU slices
  and the largest device count (valid for the node-constrained problem too,
  since it relaxes it);
* first-fit-decreasing over GPUs, with a multi-device pod placed on the first
  node that has `devices` distinct GPUs with room. For single-device pieces
  FFD uses at most 11/9·OPT + 6/9 GPUs (Dósa, 2007);
* when FFD does not meet the bound and the group has at most
  `exact_max_slices` GPU slices, a depth-first branch and bound (identical
  pieces placed in non-decreasing GPU order, GPUs with equal free space tried
  once, a wasted-space bound) proves the optimum, or stops after `budget`
  search nodes with the best packing found.

Arithmetic is exact: sizes are Fractions scaled to integers over their common
denominator, so 0.33 + 0.56 + 0.11 is exactly one GPU. Pure and deterministic;
nothing here knows about pods beyond a name.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Optional, Sequence

FFD_BOUND = "first-fit-decreasing: at most 11/9·OPT + 6/9 GPUs for single-device pieces (Dósa 2007)"


@dataclass(frozen=True)
class PackItem:
    """A pod's need: `size` (0 < size <= 1) of a GPU on each of `devices` distinct GPUs of one node."""

    pod: str
    size: Fraction
    devices: int = 1


@dataclass(frozen=True)
class PackedNode:
    """One node's worth of GPUs: how many, which pods use them, and each GPU's load."""

    gpus: int
    pods: tuple[str, ...]
    loads: tuple[Fraction, ...]


@dataclass(frozen=True)
class Packing:
    gpus: int
    lower_bound: int
    #: "exact" when `gpus` is proven minimal, else "heuristic".
    method: str
    #: How the method is known: the bound met, the search completed, or why it stopped.
    proof: str
    nodes: tuple[PackedNode, ...] = field(default=())
    #: The node size packed into: the group's known GPUs per node, or the largest device count when unknown.
    node_gpus: int = 0
    search_nodes: int = 0


def lower_bound(sizes: Sequence[int], capacity: int) -> int:
    """Martello and Toth's L2 bound for bin packing of integer `sizes` into bins of `capacity`."""
    if not sizes:
        return 0
    ordered = sorted(sizes)
    prefix = [0]
    for s in ordered:
        prefix.append(prefix[-1] + s)
    half_hi = bisect.bisect_right(ordered, capacity // 2)  # ordered[:half_hi] are <= capacity/2
    best = 0
    for k in sorted({0, *ordered[:half_hi]}):
        big = bisect.bisect_right(ordered, capacity - k)  # ordered[big:] are > capacity - k
        j1 = len(ordered) - big
        j2 = max(0, big - half_hi)
        sum_j2 = prefix[big] - prefix[half_hi] if big > half_hi else 0
        small = bisect.bisect_left(ordered, k)  # ordered[small:half_hi] are in [k, capacity/2]
        sum_j3 = prefix[half_hi] - prefix[small]
        spare = j2 * capacity - sum_j2
        best = max(best, j1 + j2 + max(0, -((spare - sum_j3) // capacity)))
    return best


class _State:
    """GPUs (free space, node) and nodes (GPU list, unopened slots), with an undo-free copy for the best."""

    def __init__(self, node_gpus: int) -> None:
        self.node_gpus = node_gpus
        self.free: list[int] = []
        self.node_of: list[int] = []
        self.node_members: list[list[int]] = []
        self.slots: list[int] = []

    def open_node(self) -> int:
        self.node_members.append([])
        self.slots.append(self.node_gpus)
        return len(self.slots) - 1

    def open_gpu(self, node: int, capacity: int) -> int:
        self.free.append(capacity)
        self.node_of.append(node)
        self.node_members[node].append(len(self.free) - 1)
        self.slots[node] -= 1
        return len(self.free) - 1

    def close_gpu(self) -> None:
        gpu = len(self.free) - 1
        node = self.node_of.pop()
        self.free.pop()
        self.node_members[node].pop()
        self.slots[node] += 1
        if not self.node_members[node] and node == len(self.slots) - 1:
            self.node_members.pop()
            self.slots.pop()
        del gpu


def _ffd(order: Sequence[int], sizes: Sequence[int], devices: Sequence[int], capacity: int, node_gpus: int) -> tuple[_State, list[list[int]]]:
    """First-fit-decreasing, a run of identical pieces at a time (the same placements as one by one).

    A single-device piece goes to the lowest-numbered GPU with room, else a new GPU in the first
    node with a free slot, else a new node. A multi-device piece goes to the first node with
    `devices` distinct GPUs with room (counting unopened slots). The next identical piece cannot
    fit anywhere before where the previous one went, so each run resumes from there.
    """
    state = _State(node_gpus)
    free = state.free
    placed: list[list[int]] = [[] for _ in sizes]
    first_with_slot = 0
    i = 0
    while i < len(order):
        s, n = sizes[order[i]], devices[order[i]]
        j = i
        while j < len(order) and sizes[order[j]] == s and devices[order[j]] == n:
            j += 1
        run = order[i:j]
        i = j
        if n == 1:
            gpu = k = 0
            while k < len(run):
                while gpu < len(free) and free[gpu] < s:
                    gpu += 1
                if gpu == len(free):
                    while first_with_slot < len(state.slots) and state.slots[first_with_slot] == 0:
                        first_with_slot += 1
                    node = first_with_slot if first_with_slot < len(state.slots) else state.open_node()
                    gpu = state.open_gpu(node, capacity)
                take = min(len(run) - k, free[gpu] // s)
                for item in run[k : k + take]:
                    placed[item] = [gpu]
                free[gpu] -= take * s
                k += take
            continue
        node = 0
        for item in run:
            while True:
                if node == len(state.slots):
                    state.open_node()
                fits = [g for g in state.node_members[node] if free[g] >= s][:n]
                if len(fits) + state.slots[node] >= n:
                    chosen = fits + [state.open_gpu(node, capacity) for _ in range(n - len(fits))]
                    break
                node += 1
            for gpu in chosen:
                free[gpu] -= s
            placed[item] = chosen
    return state, placed


class _Search:
    """Depth-first branch and bound over the items in FFD order."""

    def __init__(self, order: list[int], sizes: list[int], devices: list[int], capacity: int, node_gpus: int, total: int, best: int, budget: int) -> None:
        self.order, self.sizes, self.devices = order, sizes, devices
        self.capacity, self.total, self.budget = capacity, total, budget
        self.state = _State(node_gpus)
        self.best = best
        self.best_placed: Optional[list[list[int]]] = None
        self.best_state: Optional[tuple[list[int], list[int], list[list[int]]]] = None
        self.visited = 0
        self.aborted = False
        self.target = 0
        self.stop = False
        self.smallest = min(sizes)
        self.waste = 0
        self.placed: list[list[int]] = [[] for _ in sizes]
        # multi[k]: some item at position >= k needs several devices (node structure matters)
        self.multi = [False] * (len(order) + 1)
        for k in range(len(order) - 1, -1, -1):
            self.multi[k] = self.multi[k + 1] or devices[order[k]] > 1
        self.same_as_previous = [k > 0 and (sizes[order[k]], devices[order[k]]) == (sizes[order[k - 1]], devices[order[k - 1]]) for k in range(len(order))]

    def _take(self, gpu: int, s: int) -> None:
        old = self.state.free[gpu]
        new = old - s
        if old < self.smallest:
            self.waste -= old
        if new < self.smallest:
            self.waste += new
        self.state.free[gpu] = new

    def _give(self, gpu: int, s: int) -> None:
        old = self.state.free[gpu]
        new = old + s
        if old < self.smallest:
            self.waste -= old
        if new < self.smallest:
            self.waste += new
        self.state.free[gpu] = new

    def run(self) -> None:
        self._visit(0)

    def _bound(self) -> int:
        return max(len(self.state.free), math.ceil((self.total + self.waste) / self.capacity))

    def _record(self) -> None:
        self.best = len(self.state.free)
        self.best_placed = [list(p) for p in self.placed]
        self.best_state = (list(self.state.free), list(self.state.node_of), [list(m) for m in self.state.node_members])

    def _visit(self, k: int) -> None:
        if self.stop:
            return
        self.visited += 1
        if self.visited > self.budget:
            self.aborted = self.stop = True
            return
        if k == len(self.order):
            if len(self.state.free) < self.best:
                self._record()
                self.stop = self.best <= self.target
            return
        if self._bound() >= self.best:
            return
        item = self.order[k]
        s, n = self.sizes[item], self.devices[item]
        floor_gpu = self.placed[self.order[k - 1]][0] if self.same_as_previous[k] else 0
        if n == 1:
            self._visit_single(k, item, s, floor_gpu)
        else:
            floor_node = self.state.node_of[floor_gpu] if self.same_as_previous[k] else 0
            self._visit_multi(k, item, s, n, floor_node)

    def _visit_single(self, k: int, item: int, s: int, floor_gpu: int) -> None:
        state = self.state
        by_node = self.multi[k + 1]
        seen: set = set()
        options = []
        for gpu in range(floor_gpu, len(state.free)):
            free = state.free[gpu]
            if free < s:
                continue
            key = (state.node_of[gpu], free) if by_node else free
            if key in seen:
                continue
            seen.add(key)
            options.append((free, gpu))
        options.sort()  # best fit first
        for _, gpu in options:
            self._take(gpu, s)
            self.placed[item] = [gpu]
            self._visit(k + 1)
            self._give(gpu, s)
            if self.stop:
                return
        # a new GPU: in an existing node with a free slot, or in a new node
        targets: list[Optional[int]] = []
        if by_node:
            signatures = set()
            for node, slots in enumerate(state.slots):
                if slots > 0:
                    sig = (tuple(sorted(state.free[g] for g in state.node_members[node])), slots)
                    if sig not in signatures:
                        signatures.add(sig)
                        targets.append(node)
            targets.append(None)
        else:
            targets = [next((node for node, slots in enumerate(state.slots) if slots > 0), None)]
        for node in targets:
            if len(state.free) + 1 >= self.best:
                return
            target = state.open_node() if node is None else node
            gpu = state.open_gpu(target, self.capacity)
            self._take(gpu, s)
            self.placed[item] = [gpu]
            self._visit(k + 1)
            self._give(gpu, s)
            state.close_gpu()
            if self.stop:
                return

    def _visit_multi(self, k: int, item: int, s: int, n: int, floor_node: int) -> None:
        state = self.state
        signatures: set = set()
        for node in range(floor_node, len(state.slots)):
            members = state.node_members[node]
            sig = (tuple(sorted(state.free[g] for g in members)), state.slots[node])
            if sig in signatures:
                continue
            signatures.add(sig)
            classes: dict[int, list[int]] = {}
            for g in members:
                if state.free[g] >= s:
                    classes.setdefault(state.free[g], []).append(g)
            groups = sorted(classes.items())
            for picks in _choices(groups, n, state.slots[node]):
                fresh = n - len(picks)
                if len(state.free) + fresh >= self.best:
                    continue
                new = [state.open_gpu(node, self.capacity) for _ in range(fresh)]
                chosen = picks + new
                for g in chosen:
                    self._take(g, s)
                self.placed[item] = chosen
                self._visit(k + 1)
                for g in chosen:
                    self._give(g, s)
                for _ in new:
                    state.close_gpu()
                if self.stop:
                    return
        if n <= state.node_gpus and len(state.free) + n < self.best:
            node = state.open_node()
            chosen = [state.open_gpu(node, self.capacity) for _ in range(n)]
            for g in chosen:
                self._take(g, s)
            self.placed[item] = chosen
            self._visit(k + 1)
            for g in chosen:
                self._give(g, s)
            for _ in chosen:
                state.close_gpu()


def _choices(groups: list[tuple[int, list[int]]], n: int, slots: int) -> list[list[int]]:
    """Ways to take up to n GPUs from classes of equal free space, leaving at most `slots` to open."""
    out: list[list[int]] = []

    def walk(i: int, picked: list[int]) -> None:
        if len(picked) > n:
            return
        if i == len(groups):
            if n - len(picked) <= slots:
                out.append(list(picked))
            return
        gpus = groups[i][1]
        for take in range(min(len(gpus), n - len(picked)), -1, -1):
            walk(i + 1, picked + gpus[:take])

    walk(0, [])
    return out


def _nodes(free: Sequence[int], node_members: Sequence[Sequence[int]], placed: Sequence[Sequence[int]], pods: Sequence[str], capacity: int) -> tuple[PackedNode, ...]:
    pods_on: dict[int, set[str]] = {}
    for item, gpus in enumerate(placed):
        for g in gpus:
            pods_on.setdefault(g, set()).add(pods[item])
    out = []
    for members in node_members:
        if not members:
            continue
        names = sorted({p for g in members for p in pods_on.get(g, ())})
        loads = tuple(Fraction(capacity - free[g], capacity) for g in members)
        out.append(PackedNode(gpus=len(members), pods=tuple(names), loads=loads))
    return tuple(out)


def pack(items: Sequence[PackItem], node_gpus: Optional[int] = None, exact_max_slices: int = 400, budget: int = 20_000) -> Packing:
    """Pack `items` into the fewest GPUs, nodes of `node_gpus` GPUs (None: the largest device count)."""
    if not items:
        return Packing(gpus=0, lower_bound=0, method="exact", proof="nothing to pack", node_gpus=node_gpus or 0)
    largest = max(i.devices for i in items)
    size_of_node = node_gpus or largest
    for item in items:
        if not 0 < item.size <= 1 or item.devices < 1 or item.devices > size_of_node:
            raise ValueError(f"cannot pack {item}: size must be in (0, 1] and devices in [1, {size_of_node}]")
    ratios = {(i.size.numerator, i.size.denominator) for i in items}  # tuples hash fast, Fractions do not
    capacity = math.lcm(*{d for _, d in ratios})
    scaled = {(n, d): n * (capacity // d) for n, d in ratios}
    sizes = [scaled[(i.size.numerator, i.size.denominator)] for i in items]
    devices = [i.devices for i in items]
    pods = [i.pod for i in items]
    order = sorted(range(len(items)), key=lambda i: (-sizes[i], -devices[i], pods[i]))
    slices = [sizes[i] for i in range(len(items)) for _ in range(devices[i])]
    bound = max(lower_bound(slices, capacity), largest)

    state, placed = _ffd(order, sizes, devices, capacity, size_of_node)
    best = len(state.free)
    if best == bound:
        return Packing(best, bound, "exact", "first-fit-decreasing meets the lower bound",
                       _nodes(state.free, state.node_members, placed, pods, capacity), size_of_node)  # fmt: skip
    if len(slices) > exact_max_slices or budget <= 0:
        return Packing(best, bound, "heuristic", f"{FFD_BOUND}; {len(slices)} GPU slices is more than the exact search takes ({exact_max_slices})",
                       _nodes(state.free, state.node_members, placed, pods, capacity), size_of_node)  # fmt: skip
    search = _Search(order, sizes, devices, capacity, size_of_node, sum(slices), best, budget)
    search.target = bound
    search.run()
    if search.best_state is not None and search.best_placed is not None:
        free, _, members = search.best_state
        nodes = _nodes(free, members, search.best_placed, pods, capacity)
    else:
        nodes = _nodes(state.free, state.node_members, placed, pods, capacity)
    if not search.aborted:
        proof = "branch and bound: the search completed" + ("" if search.best == bound else f" (the lower bound {bound} is not reachable)")
        return Packing(search.best, bound, "exact", proof, nodes, size_of_node, search.visited)
    if search.best == bound:
        return Packing(search.best, bound, "exact", "branch and bound found a packing that meets the lower bound", nodes, size_of_node, search.visited)
    proof = f"branch and bound stopped after {budget} search nodes; between {bound} and {search.best} GPUs are needed ({FFD_BOUND})"
    return Packing(search.best, bound, "heuristic", proof, nodes, size_of_node, search.visited)
