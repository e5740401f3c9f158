"""The exact packing's two searches, bin completion and branch and bound, and the state they share.

Split from packing.py, which decides when each runs and what its result means (the lower bound, first fit
decreasing, grouping GPUs into nodes). Both searches stop after a budget of steps and return the best found,
so what they find depends on the order they visit states in and on where the budget runs out: anything that
makes them faster visits the same states in the same order and counts the same steps. Pure and deterministic.
"""

from __future__ import annotations

import bisect
import math
from typing import Optional, Sequence


class SearchState:
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



class BranchAndBound:
    """Depth-first branch and bound over the items in FFD order."""

    def __init__(self, order: list[int], sizes: list[int], devices: list[int], capacity: int, node_gpus: int, total: int, best: int, budget: int) -> None:
        self.order, self.sizes, self.devices = order, sizes, devices
        self.capacity, self.total, self.budget = capacity, total, budget
        self.state = SearchState(node_gpus)
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
            for picks in choices(groups, n, state.slots[node]):
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



class BinCompletion:
    """Bin completion (Korf 2002) on GPUs: can the slices fit in `target` GPUs?

    The pieces are counted by kind (integer size); a pod on n devices is n
    slices here, and nodes are left out: this is a relaxation of the real
    problem, so a search that runs out of options proves `target` GPUs too
    few for the real problem too. A packing it finds still has to be grouped
    into nodes (`_group_nodes`). GPUs are filled one at a time: each new GPU
    takes the largest slice left plus a completion, a multiset of smaller or
    equal slices whose unused space keeps the total unused space within what
    `target` GPUs allow (target × capacity − Σ slices). A state (slices left)
    that failed with as much spare space and as many discrepancies is not
    tried again.
    """

    def __init__(self, sizes: list[int], slices: list[int], capacity: int, budget: int, width: int = 1_000_000, one_per_gpu: Sequence[bool] = ()) -> None:
        self.sizes, self.capacity = sizes, capacity
        #: Kinds (multi-device ones) of which a GPU takes at most one slice, so that grouping into nodes is easy;
        #: a cut that makes the search `truncated` (it no longer proves anything when it runs out).
        self.one_per_gpu = list(one_per_gpu) or [False] * len(sizes)
        self.left = list(slices)
        self.budget = budget
        self.steps = 0
        self.aborted = False
        #: GPUs are tried with at most `width` completions each; `truncated` says some had more.
        self.width = width
        self.truncated = False
        self.gpus: list[tuple[int, ...]] = []
        self.failed: dict[tuple, tuple[int, int]] = {}
        self.limited = self.exhausted = False

    def solve(self, target: int) -> Optional[list[tuple[int, ...]]]:
        """GPU contents (slices per kind) in `target` GPUs or fewer, or None.

        Limited discrepancy search: pass d allows the path to leave the
        fullest completion d times in all (the i-th fullest costs i), so a
        poor choice near the top is revisited as early as one near the
        bottom. None with `exhausted` set proves `target` GPUs too few; None
        without it means the step budget ran out (`aborted`).
        """
        spare = target * self.capacity - sum(s * c for s, c in zip(self.sizes, self.left))
        self.truncated = self.exhausted = False
        if spare < 0:
            self.exhausted = True
            return None
        self.failed.clear()
        discrepancies = 0
        while not self.aborted:
            self.limited = False
            if self._fill(spare, discrepancies):
                return list(self.gpus)
            if not self.limited and not self.aborted:
                self.exhausted = not self.truncated
                return None
            discrepancies += 1
        return None

    def _fill(self, spare: int, discrepancies: int) -> bool:
        if self.aborted:
            return False
        first = next((k for k, c in enumerate(self.left) if c), None)
        if first is None:
            return True
        key = tuple(self.left)
        failed_spare, failed_discrepancies = self.failed.get(key, (-1, -1))
        if failed_spare >= spare and failed_discrepancies >= discrepancies:
            return False
        for choice, (load, contents) in enumerate(self._completions(first, spare)):
            if self.aborted:
                return False
            if choice > discrepancies:
                self.limited = True
                break
            for k, c in enumerate(contents):
                self.left[k] -= c
            self.gpus.append(contents)
            if self._fill(spare - (self.capacity - load), discrepancies - choice):
                return True
            self.gpus.pop()
            for k, c in enumerate(contents):
                self.left[k] += c
            if self.aborted:
                return False
        if spare >= failed_spare and discrepancies >= failed_discrepancies:
            self.failed[key] = (spare, discrepancies)
        return False

    def _completions(self, first: int, spare: int) -> list[tuple[int, tuple[int, ...]]]:
        """The `width` fullest maximal ways to fill a GPU holding a slice of kind `first` and others after it.

        Maximal: no slice left over would still fit, since adding it never
        hurts (Korf's dominance, its simplest form). A branch that cannot beat
        the width-th fullest found so far is cut, so this is a bounded
        knapsack search, not a listing; when more than `width` ways exist the
        search below is no longer exhaustive (`truncated`).
        """
        sizes, left, capacity, width = self.sizes, self.left, self.capacity, self.width
        kinds = len(sizes)
        reach = [0] * (kinds + 1)  # reach[k]: the most that kinds k.. could add
        for k in range(kinds - 1, first - 1, -1):
            reach[k] = reach[k + 1] + sizes[k] * left[k]
        floor = capacity - spare
        best: list[tuple[int, tuple[int, ...]]] = []  # fullest first, at most `width`
        counts = [0] * kinds

        def walk(k: int, load: int, smallest_left: int) -> None:
            self.steps += 1
            if self.steps > self.budget:
                self.aborted = True
                return
            if k == kinds:
                if load >= floor and capacity - load < smallest_left:
                    if len(best) == width:
                        best.pop()
                        self.truncated = True
                    bisect.insort(best, (load, tuple(counts)), key=lambda x: -x[0])
                return
            need = best[-1][0] + 1 if len(best) == width else floor
            if load + min(reach[k], capacity - load) < need:
                if len(best) == width:
                    self.truncated = True
                return
            lowest = 1 if k == first else 0
            most = min(left[k], (capacity - load) // sizes[k])
            if most > 1 and self.one_per_gpu[k]:
                most, self.truncated = 1, True
            for c in range(most, lowest - 1, -1):
                counts[k] = c
                walk(k + 1, load + c * sizes[k], sizes[k] if c < left[k] else smallest_left)
                if self.aborted:
                    return
            counts[k] = 0

        walk(first, 0, capacity + 1)
        return best


def choices(groups: list[tuple[int, list[int]]], n: int, slots: int) -> list[list[int]]:
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


