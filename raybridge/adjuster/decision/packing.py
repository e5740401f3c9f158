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
  `exact_max_slices` GPU slices, bin completion (`exact_search.BinCompletion`, after Korf
  2002): GPU by GPU, the largest slice left plus one of the fullest ways to
  fill the rest, within the spare space the target allows, in limited
  discrepancy order. It runs on the slices alone (a relaxation), so when it
  runs out of options the target is proven too few and the lower bound
  rises by one; a packing it finds is grouped into nodes so that every
  multi-device pod has its GPUs on one node (`_group_nodes`), a multi-device
  kind at most once per GPU to keep that easy;
* then, if still undecided, a depth-first branch and bound over the pieces
  themselves (identical pieces placed in non-decreasing GPU order, GPUs with
  equal free space tried once, a wasted-space bound), on a tenth of the budget.

Both searches stop after `budget` steps with the best packing found, and say so
("heuristic", between the bound and that count). The budget bounds the time:
about a second of CPU per group at the default.

Arithmetic is exact: sizes are Fractions scaled to integers over their common
denominator, so 0.33 + 0.56 + 0.11 is exactly one GPU. Pure and deterministic (`pack` keeps
its last results, which changes nothing but the time); nothing here knows about pods beyond a name.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any, Optional, Sequence, TypeVar

from raybridge.adjuster.decision.searches import BinCompletion, BranchAndBound, SearchState

COMPLETION_WIDTH = 4  # completions tried per GPU, fullest first (see exact_search.BinCompletion)
FFD_BOUND = "first-fit-decreasing: at most 11/9·OPT + 6/9 GPUs for single-device pieces (Dósa 2007)"


#: A node's or a pod's other resources (CPU, memory, ...): (name, amount in thousandths of its unit), sorted.
Resources = tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class PackItem:
    """A pod's need: `size` (0 < size <= 1) of a GPU on each of `devices` distinct GPUs of one node, and
    `resources` of that node besides (the exact packing looks at GPUs only; `BestFitScheduler` at both)."""

    pod: str
    size: Fraction
    devices: int = 1
    resources: Resources = ()


@dataclass(frozen=True)
class PackedNode:
    """One node's worth of GPUs: how many, which pods use them, each GPU's load and each GPU's pods."""

    gpus: int
    pods: tuple[str, ...]
    loads: tuple[Fraction, ...]
    #: Per GPU, the pods with a slice on it (a multi-device pod appears on `devices` of them).
    gpu_pods: tuple[tuple[str, ...], ...] = ()


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


#: The dual feasible functions u^(k) tried for the lower bound: k = 1 .. this.
DFF_MAX_K = 100


def lower_bound(sizes: Sequence[int], capacity: int) -> int:
    """A lower bound on the bins of `capacity` that integer `sizes` need: the best of Martello and Toth's L2
    and the bounds of Fekete and Schepers' dual feasible functions (2001), which prove many packings one bin
    above L2 optimal (on these fractions, where L2 is the plain sum rounded up)."""
    if not sizes:
        return 0
    return max(_l2_bound(sizes, capacity), _dff_bound(sizes, capacity))


def _dff_bound(sizes: Sequence[int], capacity: int) -> int:
    """max over dual feasible functions u of ceil(sum u(size)): any packing's bins still hold at most 1 each.

    u^(k)(x) = x where (k+1)x is whole, else floor((k+1)x)/k; and u_t, which counts an item above 1 - t as a
    whole bin and one below t as nothing (t every size up to half a bin). Worked on the distinct sizes.
    """
    counts: dict[int, int] = {}
    for size in sizes:
        counts[size] = counts.get(size, 0) + 1
    best = 0
    for k in range(1, DFF_MAX_K + 1):
        # in units of 1/(k * capacity): a whole item is s * k, a rounded one floor((k+1) s / capacity) * capacity
        total = sum(n * (s * k if ((k + 1) * s) % capacity == 0 else ((k + 1) * s // capacity) * capacity) for s, n in counts.items())
        best = max(best, -(-total // (k * capacity)))
    # u_t for every t at once: over the sizes in order, prefix sums of the counts and of count x size, so each
    # t costs two bisections (the bound is linear in the distinct sizes, not quadratic).
    keys = sorted(counts)
    items_from = [0] * (len(keys) + 1)  # items_from[i]: how many items have a size in keys[i:]
    weight_to = [0] * (len(keys) + 1)  # weight_to[i]: the sum of the sizes in keys[:i], each times its count
    for i in range(len(keys) - 1, -1, -1):
        items_from[i] = items_from[i + 1] + counts[keys[i]]
    for i, size in enumerate(keys):
        weight_to[i + 1] = weight_to[i] + counts[size] * size
    for t in keys:
        if 2 * t > capacity:
            break
        whole = bisect.bisect_right(keys, capacity - t)  # keys[whole:] are above 1 - t: a bin each
        kept = bisect.bisect_left(keys, t)  # keys[kept:whole] count as themselves; below t, nothing
        total = items_from[whole] * capacity + weight_to[whole] - weight_to[kept]
        best = max(best, -(-total // capacity))
    return best


def _l2_bound(sizes: Sequence[int], capacity: int) -> int:
    """Martello and Toth's L2 bound."""
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


class LeftmostAtLeast:
    """A growing list of integers that finds the leftmost one at least a given value in O(log n)
    (a max tree over the positions), so first fit costs n log n, not a scan of every bin per piece."""

    def __init__(self) -> None:
        self.values: list[int] = []
        self.width = 1
        self.tree: list[Optional[int]] = [None, None]  # tree[width + i] is values[i]; tree[k] the max of its children

    def __len__(self) -> int:
        return len(self.values)

    def append(self, value: int) -> None:
        self.values.append(value)
        if len(self.values) > self.width:
            self.width *= 2
            self.tree = [None] * (2 * self.width)
            for i, v in enumerate(self.values):
                self.tree[self.width + i] = v
            for k in range(self.width - 1, 0, -1):
                self.tree[k] = self._max(self.tree[2 * k], self.tree[2 * k + 1])
        else:
            self.set(len(self.values) - 1, value)

    def set(self, position: int, value: int) -> None:
        self.values[position] = value
        k = self.width + position
        self.tree[k] = value
        k //= 2
        while k:
            self.tree[k] = self._max(self.tree[2 * k], self.tree[2 * k + 1])
            k //= 2

    def leftmost(self, at_least: int) -> Optional[int]:
        """The first position whose value is >= `at_least`, or None."""
        top = self.tree[1]
        if top is None or top < at_least:
            return None
        k = 1
        while k < self.width:
            left = self.tree[2 * k]
            k = 2 * k if left is not None and left >= at_least else 2 * k + 1
        return k - self.width

    @staticmethod
    def _max(a: Optional[int], b: Optional[int]) -> Optional[int]:
        if a is None:
            return b
        return a if b is None or a >= b else b


def _ffd(order: Sequence[int], sizes: Sequence[int], devices: Sequence[int], capacity: int, node_gpus: int) -> tuple[SearchState, list[list[int]]]:
    """First-fit-decreasing, a run of identical pieces at a time (the same placements as one by one).

    A single-device piece goes to the lowest-numbered GPU with room, else a new GPU in the first
    node with a free slot, else a new node. A multi-device piece goes to the first node with
    `devices` distinct GPUs with room (counting unopened slots). The next identical piece cannot
    fit anywhere before where the previous one went, so each run resumes from there.
    """
    state = SearchState(node_gpus)
    free = state.free
    room = LeftmostAtLeast()  # mirrors `free`: the first GPU with room for a piece

    def sync(gpu: int) -> None:
        while len(room) <= gpu:
            room.append(free[len(room)])
        room.set(gpu, free[gpu])

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
            k = 0
            while k < len(run):
                gpu = room.leftmost(s)
                if gpu is None:
                    while first_with_slot < len(state.slots) and state.slots[first_with_slot] == 0:
                        first_with_slot += 1
                    node = first_with_slot if first_with_slot < len(state.slots) else state.open_node()
                    gpu = state.open_gpu(node, capacity)
                take = min(len(run) - k, free[gpu] // s)
                for item in run[k : k + take]:
                    placed[item] = [gpu]
                free[gpu] -= take * s
                sync(gpu)
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
                sync(gpu)
            placed[item] = chosen
    return state, placed


def _balanced(slices: dict[int, list[int]], devices: Sequence[int]) -> int:
    """How far a node's multi-device slices are from forming whole pieces: 0 when they do.

    Per kind with n devices: the slices must be a multiple of n, and no GPU may
    hold more than count/n of them (each piece needs n distinct GPUs).
    """
    short = 0
    for k, on in slices.items():
        n, total = devices[k], sum(on)
        short += (-total) % n + max(0, max(on, default=0) * n - total)
    return short


def _group_nodes(contents: list[tuple[int, ...]], devices: Sequence[int], node_gpus: int) -> Optional[list[list[int]]]:
    """Group GPUs into nodes of at most `node_gpus` so that every multi-device piece can sit on one node.

    Greedy: a node starts from the first GPU left with multi-device slices and
    takes, one at a time, the GPU that brings it closest to whole pieces,
    until it has them; GPUs with single-device slices only fill nodes up.
    None when a node would need more GPUs than one has (the caller falls back).
    """
    multi = [k for k, n in enumerate(devices) if n > 1]
    with_multi = [g for g, gpu in enumerate(contents) if any(gpu[k] for k in multi)]
    plain = [g for g, gpu in enumerate(contents) if not any(gpu[k] for k in multi)]
    nodes: list[list[int]] = []
    left = list(with_multi)
    while left:
        node = [left.pop(0)]
        on = {k: [contents[node[0]][k]] for k in multi}
        while _balanced(on, devices):
            if len(node) == node_gpus or not left:
                return None
            best = min(left, key=lambda g: (_balanced({k: on[k] + [contents[g][k]] for k in multi}, devices), g))
            left.remove(best)
            node.append(best)
            for k in multi:
                on[k].append(contents[best][k])
        nodes.append(node)
    for node in nodes:
        while plain and len(node) < node_gpus:
            node.append(plain.pop(0))
    nodes.extend(plain[i : i + node_gpus] for i in range(0, len(plain), node_gpus))
    return nodes


def _realise(contents: list[tuple[int, ...]], node_members: list[list[int]], kind_items: list[list[int]], kind_sizes: list[int], kind_devices: list[int], capacity: int, items: int) -> tuple[list[int], list[list[int]]]:
    """GPU contents by kind and GPUs per node -> (free space per GPU, GPUs per item).

    A multi-device kind's slices on a node are dealt out round-robin over
    count/n of its pieces, GPU by GPU: since no GPU holds more than count/n of
    them (`_balanced`), each piece lands on n distinct GPUs.
    """
    free = [capacity - sum(c * kind_sizes[k] for k, c in enumerate(gpu)) for gpu in contents]
    placed: list[list[int]] = [[] for _ in range(items)]
    queues = [list(reversed(members)) for members in kind_items]
    for members in node_members:
        for k, n in enumerate(kind_devices):
            slices = [g for g in members for _ in range(contents[g][k])]
            if not slices:
                continue
            pieces = [queues[k].pop() for _ in range(len(slices) // n)]
            for j, g in enumerate(slices):
                placed[pieces[j % len(pieces)]].append(g)
    return free, placed

def _nodes(free: Sequence[int], node_members: Sequence[Sequence[int]], placed: Sequence[Sequence[int]], pods: Sequence[str], capacity: int) -> tuple[PackedNode, ...]:
    pods_on: dict[int, set[str]] = {}
    for item, gpus in enumerate(placed):
        for g in gpus:
            pods_on.setdefault(g, set()).add(pods[item])
    out = []
    load_of: dict[int, Fraction] = {}  # per free space: GPUs share a few
    for members in node_members:
        if not members:
            continue
        names = sorted({p for g in members for p in pods_on.get(g, ())})
        for g in members:
            if free[g] not in load_of:
                load_of[free[g]] = Fraction(capacity - free[g], capacity)
        loads = tuple(load_of[free[g]] for g in members)
        per_gpu = tuple(tuple(sorted(pods_on.get(g, ()))) for g in members)
        out.append(PackedNode(gpus=len(members), pods=tuple(names), loads=loads, gpu_pods=per_gpu))
    return tuple(out)


@dataclass(frozen=True)
class _Problem:
    """The items of one `pack` call on the integers: each size in 1/`capacity` of a GPU, and the lower bound."""

    capacity: int
    sizes: list[int]
    devices: list[int]
    pods: list[str]
    #: The items largest first (size, then devices, then name): FFD's order and the searches'.
    order: list[int]
    #: One size per GPU slice: an item of `devices` GPUs is that many slices.
    slices: list[int]
    bound: int
    size_of_node: int

    def nodes(self, free: Sequence[int], node_members: Sequence[Sequence[int]], placed: Sequence[Sequence[int]]) -> tuple[PackedNode, ...]:
        return _nodes(free, node_members, placed, self.pods, self.capacity)


#: How many packings `pack` keeps (each a group's pods as the pass asked for them).
PACKINGS_KEPT = 4096
_packings: dict[tuple[Any, ...], Packing] = {}


def pack(items: Sequence[PackItem], node_gpus: Optional[int] = None, exact_max_slices: int = 400, budget: int = 200_000) -> Packing:
    """Pack `items` into the fewest GPUs, nodes of `node_gpus` GPUs (None: the largest device count).

    The result is a function of the pods' names, shares and devices and of the arguments alone, and the searches can
    take a good part of a second for one group: the last `PACKINGS_KEPT` used are kept, so that a controller's next
    pass packs again only the groups whose pods changed (and a pass that plans a group twice, all its pods and then
    those no pending placeholder holds, packs it once): `keep_recent`."""
    key = (tuple((i.pod, i.size.numerator, i.size.denominator, i.devices) for i in items), node_gpus, exact_max_slices, budget)
    found = _packings.pop(key, None)
    return keep_recent(_packings, key, found if found is not None else _pack(items, node_gpus, exact_max_slices, budget), PACKINGS_KEPT)


Kept = TypeVar("Kept")


def keep_recent(store: dict[Any, Kept], key: Any, value: Kept, limit: int) -> Kept:
    """`value` stored under `key` as the newest of `store` (the caller popped it, if there), the least recently used
    dropped beyond `limit`; `value` returned. Each step on the map is one the interpreter makes whole, and a step that
    finds the map changed under it (another thread) only keeps less."""
    store[key] = value  # the newest last
    while len(store) > limit:
        try:
            del store[next(iter(store))]  # the least recently used
        except (KeyError, StopIteration, RuntimeError):
            break
    return value


def _pack(items: Sequence[PackItem], node_gpus: Optional[int], exact_max_slices: int, budget: int) -> Packing:
    if not items:
        return Packing(gpus=0, lower_bound=0, method="exact", proof="nothing to pack", node_gpus=node_gpus or 0)
    problem = _integer_problem(items, node_gpus)
    size_of_node = problem.size_of_node
    state, placed = _ffd(problem.order, problem.sizes, problem.devices, problem.capacity, size_of_node)
    best = len(state.free)
    if best != problem.bound:  # the dual feasible functions' bound, where L2 does not prove FFD right (it is at most FFD's)
        problem = replace(problem, bound=max(problem.bound, _dff_bound(problem.slices, problem.capacity)))
    bound = problem.bound
    if best == bound:
        return Packing(best, bound, "exact", "first-fit-decreasing meets the lower bound",
                       problem.nodes(state.free, state.node_members, placed), size_of_node)  # fmt: skip
    if len(problem.slices) > exact_max_slices or budget <= 0:
        return Packing(best, bound, "heuristic", f"{FFD_BOUND}; {len(problem.slices)} GPU slices is more than the exact search takes ({exact_max_slices})",
                       problem.nodes(state.free, state.node_members, placed), size_of_node)  # fmt: skip
    found, proven, ungroupable, steps = _bin_completion(problem, best, budget)
    if found is not None:
        return found
    if proven == best:
        proof = f"first-fit-decreasing; bin completion proved that {best - 1} GPUs cannot hold these pieces"
        return Packing(best, proven, "exact", proof, problem.nodes(state.free, state.node_members, placed), size_of_node, steps)
    return _branch_and_bound(problem, state, placed, proven, budget, steps, ungroupable)


def _integer_problem(items: Sequence[PackItem], node_gpus: Optional[int]) -> _Problem:
    """The items checked and scaled to integers over their common denominator, with L2's lower bound (`lower_bound` less
    the dual feasible functions, which `_pack` adds only where first fit decreasing does not meet this one: they are
    most of the bound's time, and never above a packing's count)."""
    largest = max(i.devices for i in items)
    size_of_node = node_gpus or largest
    ratios = [(i.size.numerator, i.size.denominator) for i in items]  # tuples hash fast, Fractions do not
    for item, (num, den) in zip(items, ratios):  # 0 < size <= 1 on the integers (denominators are positive)
        if not 0 < num <= den or item.devices < 1 or item.devices > size_of_node:
            raise ValueError(f"cannot pack {item}: size must be in (0, 1] and devices in [1, {size_of_node}]")
    capacity = math.lcm(*{d for _, d in ratios})
    scaled = {(n, d): n * (capacity // d) for n, d in set(ratios)}
    sizes = [scaled[ratio] for ratio in ratios]
    devices = [i.devices for i in items]
    pods = [i.pod for i in items]
    order = sorted(range(len(items)), key=lambda i: (-sizes[i], -devices[i], pods[i]))
    slices = [sizes[i] for i in range(len(items)) for _ in range(devices[i])]
    bound = max(_l2_bound(slices, capacity), largest)
    return _Problem(capacity, sizes, devices, pods, order, slices, bound, size_of_node)


def _bin_completion(problem: _Problem, best: int, budget: int) -> tuple[Optional[Packing], int, bool, int]:
    """Bin completion from the bound up to FFD's `best`: each target either met or proven unreachable.

    Returns the packing it found that groups into nodes (or None), the GPUs proven needed, whether
    a packing it found could not be grouped into nodes, and the steps it took.
    """
    capacity, size_of_node = problem.capacity, problem.size_of_node
    kinds: dict[tuple[int, int], list[int]] = {}
    for i in problem.order:
        kinds.setdefault((problem.sizes[i], problem.devices[i]), []).append(i)
    kind_keys = list(kinds)  # order is by size, then devices, descending
    kind_sizes, kind_devices = [s for s, _ in kind_keys], [n for _, n in kind_keys]
    # Multi-device kinds go at most once per GPU, so that the packing groups into nodes easily (a second attempt
    # without that rule on more budget proved no better on benchmarks/adjuster_packing_exactness.py).
    completion = BinCompletion(kind_sizes, [len(kinds[k]) * n for k, n in zip(kind_keys, kind_devices)], capacity, budget,
                             width=COMPLETION_WIDTH, one_per_gpu=[n > 1 for n in kind_devices])  # fmt: skip
    proven = problem.bound
    while proven < best:
        found = completion.solve(proven)
        if found is not None:
            members = _group_nodes(found, kind_devices, size_of_node)
            if members is None:
                return None, proven, True, completion.steps
            free, placed_by = _realise(found, members, [kinds[k] for k in kind_keys], kind_sizes, kind_devices, capacity, len(problem.sizes))
            proof = "bin completion found a packing that meets the lower bound" if proven == problem.bound else f"bin completion: {proven - 1} GPUs cannot hold these pieces, {proven} can"
            packing = Packing(len(found), proven, "exact", proof, problem.nodes(free, members, placed_by), size_of_node, completion.steps)
            return packing, proven, False, completion.steps
        if not completion.exhausted:
            break
        proven += 1
    return None, proven, False, completion.steps


def _branch_and_bound(
    problem: _Problem, state: SearchState, placed: list[list[int]], proven: int, budget: int, steps: int, ungroupable: bool
) -> Packing:
    """Branch and bound on a tenth of the budget, from FFD's packing (`state`, `placed`) down to `proven` GPUs."""
    best = len(state.free)
    search = BranchAndBound(problem.order, problem.sizes, problem.devices, problem.capacity, problem.size_of_node, sum(problem.slices), best, max(1, budget // 10))
    search.target = proven
    search.run()
    visited = steps + search.visited
    if search.best_state is not None and search.best_placed is not None:
        free, _, members = search.best_state
        nodes = problem.nodes(free, members, search.best_placed)
    else:
        nodes = problem.nodes(state.free, state.node_members, placed)
    size_of_node = problem.size_of_node
    if not search.aborted:
        proof = "branch and bound: the search completed" + ("" if search.best == proven else f" (the lower bound {proven} is not reachable)")
        return Packing(search.best, search.best, "exact", proof, nodes, size_of_node, visited)
    if search.best == proven:
        return Packing(search.best, proven, "exact", "branch and bound found a packing that meets the lower bound", nodes, size_of_node, visited)
    why = "bin completion's packing could not be grouped into nodes" if ungroupable else f"bin completion stopped after {budget} steps"
    proof = f"{why}, branch and bound after {max(1, budget // 10)} search nodes; between {proven} and {search.best} GPUs are needed ({FFD_BOUND})"
    return Packing(search.best, proven, "heuristic", proof, nodes, size_of_node, visited)


def fewest_nodes(nodes: Sequence[PackedNode], node_gpus: int) -> tuple[PackedNode, ...]:
    """The same GPUs, with the same pods on each, regrouped into as few nodes of `node_gpus` GPUs as they go.

    A packing fills GPUs; which GPUs share a node is free but for multi-device pods, whose GPUs must
    stay on one node. So the GPUs a pod spans form one part (parts chain through pods that share a
    GPU), single GPUs are parts of one, and the parts go first fit, largest first, into nodes. The
    autoscaler adds a node per placeholder it cannot fit in a node already coming, so nodes of 7, 7
    and 2 GPUs cost three nodes where 8 and 8 cost two. `nodes` is returned as it is when that is no
    fewer, or when a node does not say which pods each of its GPUs holds.
    """
    total = sum(n.gpus for n in nodes)
    if len(nodes) <= max(1, -(-total // max(node_gpus, 1))) or any(len(n.gpu_pods) != n.gpus or len(n.loads) != n.gpus for n in nodes):
        return tuple(nodes)
    parts: list[list[tuple[tuple[str, ...], Fraction]]] = []
    for node in nodes:
        parent = list(range(node.gpus))

        def root(g: int) -> int:
            while parent[g] != g:
                parent[g] = parent[parent[g]]
                g = parent[g]
            return g

        first_gpu: dict[str, int] = {}
        for g, pods in enumerate(node.gpu_pods):
            for pod in pods:
                if pod in first_gpu:
                    parent[root(g)] = root(first_gpu[pod])
                else:
                    first_gpu[pod] = g
        members: dict[int, list[int]] = {}
        for g in range(node.gpus):
            members.setdefault(root(g), []).append(g)
        parts.extend([(node.gpu_pods[g], node.loads[g]) for g in gpus] for gpus in members.values())
    bins: list[list[tuple[tuple[str, ...], Fraction]]] = []
    room = LeftmostAtLeast()  # per bin, the GPUs it can still take: the first bin with room for a part
    for part in sorted(parts, key=len, reverse=True):  # stable: equal parts keep the plan's order
        home = room.leftmost(len(part))
        if home is None:
            bins.append(list(part))
            room.append(node_gpus - len(part))
        else:
            bins[home].extend(part)
            room.set(home, node_gpus - len(bins[home]))
    if len(bins) >= len(nodes):
        return tuple(nodes)
    return tuple(
        PackedNode(gpus=len(b), pods=tuple(sorted({p for pods, _ in b for p in pods})), loads=tuple(load for _, load in b),
                   gpu_pods=tuple(pods for pods, _ in b))
        for b in bins
    )  # fmt: skip
