"""The exact packing's two searches, bin completion and branch and bound, and the state they share.

Split from packing.py, which decides when each runs and what its result means (the lower bound, first fit
decreasing, grouping GPUs into nodes). Both searches stop after a budget of steps and return the best found,
so what they find depends on the order they visit states in and on where the budget runs out: anything that
makes them faster visits the same states in the same order and counts the same steps. Pure and deterministic.

setup.py compiles this module with mypyc where the install can (`searches.py` chooses which build runs), so it
imports nothing of raybridge's and its annotations are exact: mypy checks them before compiling, and a wrong one
makes the install fall back to this source, interpreted.
"""

from __future__ import annotations

import bisect
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
    """Depth-first branch and bound over the items in FFD order.

    Written for speed, visiting the same states in the same order as the plain search: each node's signature (its
    GPUs' free space, sorted, and its unopened slots), by which nodes alike are tried once, is kept until one of its
    GPUs changes rather than sorted again at every visit; the ways to take a multi-device piece's GPUs from a node's
    classes of equal free space are worked out once per shape of classes.
    """

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
        #: per node, (its GPUs' free space sorted, its unopened slots), or None where it changed since
        self._signatures: list[Optional[tuple[tuple[int, ...], int]]] = []
        #: per node, its GPUs with room for a piece of each size, as classes of equal free space (`_classes`), or None
        #: where it changed since
        self._classes: list[Optional[dict[int, tuple[list[tuple[int, list[int]]], tuple[int, ...]]]]] = []
        #: (GPUs per class, GPUs wanted, slots) -> how many to take of each class and in all, in `choices`'s order
        self._ways: dict[tuple[tuple[int, ...], int, int], list[tuple[tuple[int, ...], int]]] = {}

    def _take(self, gpu: int, s: int) -> None:
        free = self.state.free
        old = free[gpu]
        new = old - s
        if old < self.smallest:
            self.waste -= old
        if new < self.smallest:
            self.waste += new
        free[gpu] = new
        node = self.state.node_of[gpu]
        self._signatures[node] = self._classes[node] = None

    def _give(self, gpu: int, s: int) -> None:
        free = self.state.free
        old = free[gpu]
        new = old + s
        if old < self.smallest:
            self.waste -= old
        if new < self.smallest:
            self.waste += new
        free[gpu] = new
        node = self.state.node_of[gpu]
        self._signatures[node] = self._classes[node] = None

    def _open_node(self) -> int:
        self._signatures.append(None)
        self._classes.append(None)
        return self.state.open_node()

    def _open_gpu(self, node: int) -> int:
        self._signatures[node] = self._classes[node] = None
        return self.state.open_gpu(node, self.capacity)

    def _close_gpu(self) -> None:
        state = self.state
        node = state.node_of[-1]
        self._signatures[node] = self._classes[node] = None
        state.close_gpu()
        del self._signatures[len(state.slots):]
        del self._classes[len(state.slots):]

    def _classes_of(self, node: int, s: int) -> tuple[list[tuple[int, list[int]]], tuple[int, ...]]:
        """The node's GPUs with room for `s` as classes of equal free space (ascending, each class's GPUs in order),
        and how many GPUs each class has."""
        mine = self._classes[node]
        if mine is None:
            mine = {}
            self._classes[node] = mine
        found = mine.get(s)
        if found is None:
            free = self.state.free
            classes: dict[int, list[int]] = {}
            for g in self.state.node_members[node]:
                if free[g] >= s:
                    classes.setdefault(free[g], []).append(g)
            groups = sorted(classes.items())
            found = mine[s] = (groups, tuple(len(gpus) for _, gpus in groups))
        return found

    def _signature(self, node: int) -> tuple[tuple[int, ...], int]:
        found = self._signatures[node]
        if found is None:
            state = self.state
            free = state.free
            found = self._signatures[node] = (tuple(sorted([free[g] for g in state.node_members[node]])), state.slots[node])
        return found

    def _ways_for(self, shape: tuple[int, ...], n: int, slots: int) -> list[tuple[tuple[int, ...], int]]:
        """The ways to take up to n GPUs from a node's classes of equal free space (`shape`: the GPUs of each),
        leaving at most `slots` to open: how many of each class and in all, worked out once per shape."""
        key = (shape, n, slots)
        ways = self._ways.get(key)
        if ways is None:
            ways = self._ways[key] = [(way, sum(way)) for way in _ways_to_take(shape, n, slots)]
        return ways

    def run(self) -> None:
        self._visit(0)

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
        free = self.state.free
        if k == len(self.order):
            if len(free) < self.best:
                self._record()
                self.stop = self.best <= self.target
            return
        if max(len(free), -(-(self.total + self.waste) // self.capacity)) >= self.best:
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
        free, node_of = state.free, state.node_of
        by_node = self.multi[k + 1]
        # (node, room) and (room, GPU) as one int each: GPUs' free space is at most `capacity`, GPU numbers below `count`
        seen: set[int] = set()
        options: list[int] = []
        count, span = len(free), self.capacity + 1
        for gpu in range(floor_gpu, count):
            room = free[gpu]
            if room < s:
                continue
            key = node_of[gpu] * span + room if by_node else room
            if key in seen:
                continue
            seen.add(key)
            options.append(room * count + gpu)
        options.sort()  # best fit first, then the lowest GPU
        placed = self.placed
        for option in options:
            gpu = option % count
            self._take(gpu, s)
            placed[item] = [gpu]
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
                    sig = self._signature(node)
                    if sig not in signatures:
                        signatures.add(sig)
                        targets.append(node)
            targets.append(None)
        else:
            targets = [next((node for node, slots in enumerate(state.slots) if slots > 0), None)]
        for existing in targets:
            if len(free) + 1 >= self.best:
                return
            target = self._open_node() if existing is None else existing
            gpu = self._open_gpu(target)
            self._take(gpu, s)
            placed[item] = [gpu]
            self._visit(k + 1)
            self._give(gpu, s)
            self._close_gpu()
            if self.stop:
                return

    def _descend(self, k: int, item: int, s: int, chosen: list[int]) -> None:
        """Place a multi-GPU `item` of share `s` on the GPUs `chosen`, search the items after it, and take it back."""
        for g in chosen:
            self._take(g, s)
        self.placed[item] = chosen
        self._visit(k + 1)
        for g in chosen:
            self._give(g, s)

    def _visit_multi(self, k: int, item: int, s: int, n: int, floor_node: int) -> None:
        state = self.state
        free, slots_of = state.free, state.slots
        signatures: set = set()
        for node in range(floor_node, len(slots_of)):
            sig = self._signatures[node] or self._signature(node)
            if sig in signatures:
                continue
            signatures.add(sig)
            groups, shape = self._classes_of(node, s)
            for way, taken in self._ways_for(shape, n, slots_of[node]):
                fresh = n - taken
                if len(free) + fresh >= self.best:
                    continue
                picks = [g for take, (_, gpus) in zip(way, groups) for g in gpus[:take]]
                new = [self._open_gpu(node) for _ in range(fresh)]
                self._descend(k, item, s, picks + new)
                for _ in new:
                    self._close_gpu()
                if self.stop:
                    return
        if n <= state.node_gpus and len(free) + n < self.best:
            node = self._open_node()
            chosen = [self._open_gpu(node) for _ in range(n)]
            self._descend(k, item, s, chosen)
            for _ in chosen:
                self._close_gpu()


def _fullest_first(completion: tuple[int, tuple[int, ...]]) -> int:
    return -completion[0]


def _ways_to_take(classes: tuple[int, ...], n: int, slots: int) -> list[tuple[int, ...]]:
    """How many GPUs to take of each class (of `classes` GPUs each): up to n in all, leaving at most `slots` to open;
    class by class, the most first (the order the search tries them in: a picked GPU is the class's first ones)."""
    out: list[tuple[int, ...]] = []
    takes: list[int] = []

    def walk(i: int, picked: int) -> None:
        if i == len(classes):
            if n - picked <= slots:
                out.append(tuple(takes))
            return
        for take in range(min(classes[i], n - picked), -1, -1):
            takes.append(take)
            walk(i + 1, picked + take)
            takes.pop()

    walk(0, 0)
    return out


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
        #: (slices left, spare space) -> (steps, truncated, completions) of `_completions`
        self._known: dict[tuple[tuple[int, ...], int], tuple[int, bool, list[tuple[int, tuple[int, ...]]]]] = {}

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

        The search passes its discrepancies again over the same states, so each state's completions (slices left and
        spare space: `first` follows from them) are kept with the steps they took, and asked again they count those
        steps once more: the budget runs out where it would have. A search that ran out is not kept.
        """
        key = (tuple(self.left), spare)
        known = self._known.get(key)
        if known is not None:
            steps, truncated, best = known
            if self.steps + steps > self.budget:
                # it would run out on the way: where exactly no longer matters (the search ends, the caller drops `best`)
                self.steps, self.aborted = self.budget + 1, True
                return best
            self.steps += steps
            self.truncated = self.truncated or truncated
            return best
        before = self.steps
        best, truncated = self._walk(first, spare)
        self.truncated = self.truncated or truncated
        if not self.aborted:
            self._known[key] = (self.steps - before, truncated, best)
        return best

    def _walk(self, first: int, spare: int) -> tuple[list[tuple[int, tuple[int, ...]]], bool]:
        """`_completions` searched, and whether it cut a way (`truncated`): depth first over the kinds from `first`, each
        count of a kind from the most that fits down, one step per kind looked at. Counted as ever, done with fewer
        calls: a kind's bound is checked before going down to it, and a run of kinds with no slice left is passed in
        one go (each would only pass its load on)."""
        sizes, left, capacity, width, one_per_gpu = self.sizes, self.left, self.capacity, self.width, self.one_per_gpu
        kinds = len(sizes)
        reach = [0] * (kinds + 1)  # reach[k]: the most that kinds k.. could add
        for k in range(kinds - 1, first - 1, -1):
            reach[k] = reach[k + 1] + sizes[k] * left[k]
        nonzero = [kinds] * (kinds + 1)  # nonzero[k]: the first kind from k on with slices left (kinds: none)
        for k in range(kinds - 1, first - 1, -1):
            nonzero[k] = k if left[k] else nonzero[k + 1]
        floor = capacity - spare
        best: list[tuple[int, tuple[int, ...]]] = []  # fullest first, at most `width`
        counts = [0] * kinds
        budget = self.budget
        steps = self.steps
        truncated = aborted = False

        fullest_first = _fullest_first

        def expand(k: int, load: int, smallest_left: int) -> None:
            """Kind k (with slices left) at `load`, its step counted and its bound passed: each count of it, and below."""
            nonlocal steps, truncated, aborted
            size, here = sizes[k], left[k]
            most = min(here, (capacity - load) // size)
            if most > 1 and one_per_gpu[k]:
                most, truncated = 1, True
            after = k + 1
            below = nonzero[after]
            skip = below - after  # kinds with no slice left: each passes the load on, at a step each
            for c in range(most, (1 if k == first else 0) - 1, -1):
                counts[k] = c
                smallest = size if c < here else smallest_left
                total = load + c * size
                if skip:  # the first of them does the bound check below would do (the same numbers), the rest only count
                    steps += 1
                    if steps > budget:
                        aborted = True
                        return
                    if total + min(reach[after], capacity - total) < (best[-1][0] + 1 if len(best) == width else floor):
                        if len(best) == width:
                            truncated = True
                        continue
                    if steps + skip - 1 > budget:
                        steps, aborted = budget + 1, True
                        return
                    steps += skip - 1
                steps += 1  # the step of kind `below`, or of the end
                if steps > budget:
                    aborted = True
                    return
                if below == kinds:
                    if total >= floor and capacity - total < smallest:
                        if len(best) == width:
                            best.pop()
                            truncated = True
                        bisect.insort(best, (total, tuple(counts)), key=fullest_first)
                    continue
                if total + min(reach[below], capacity - total) < (best[-1][0] + 1 if len(best) == width else floor):
                    if len(best) == width:
                        truncated = True
                    continue
                expand(below, total, smallest)
                if aborted:
                    return
            counts[k] = 0

        steps += 1  # the step of kind `first`
        if steps > budget:
            aborted = True
        elif min(reach[first], capacity) >= floor:
            expand(first, 0, capacity + 1)
        elif len(best) == width:
            truncated = True
        self.steps, self.aborted = steps, self.aborted or aborted
        return best, truncated
