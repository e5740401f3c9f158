"""Which of many nodes admit a pod's constraints, for many constraints at once: `core/placement.py`'s rules, by sets.

Why: the node-scale-adjuster asks, for every constraint group of a pass, which nodes the group's pods may land on.
Asked node by node (`placement.admits`), that is groups x nodes evaluations: a shared cluster of 2,000 nodes whose
pending pods carry 1,200 distinct constraint sets made 2.5 million calls, most of the pass. Nodes share their
label values (a pool, a zone, a team) and their taints (a handful of sets), so each rule is evaluated here once per
distinct label value, or per distinct set of taints, and the nodes that pass are kept as a bit set (a Python int,
bit i for node i): a node selector is an AND of the sets of its values, a term an AND of its expressions, the terms
an OR, the tolerations the OR of the taint sets they tolerate.

It gives exactly `placement.admits`'s answers: every rule is decided by placement's own functions
(`expression_matches`, `untolerated_taints`), on each distinct value instead of each node; a value that cannot
be told apart by hashing (a list or a map, in a malformed node) is its own class. What it deliberately does not do:
read GPUs, cordons or readiness (the callers' filters), or remember anything between passes.
"""

from __future__ import annotations

from typing import Any, Iterator, Mapping, Optional, Sequence

from raybridge.core.placement import expression_matches, untolerated_taints


def bits_of(positions: Iterator[int]) -> int:
    """The bit set of `positions`."""
    bits = 0
    for position in positions:
        bits |= 1 << position
    return bits


def positions_of(bits: int) -> Iterator[int]:
    """The positions set in `bits`, lowest first."""
    while bits:
        low = bits & -bits
        yield low.bit_length() - 1
        bits ^= low


class _KeyClasses:
    """One label key over the nodes: the nodes without it, and the nodes of each distinct value."""

    __slots__ = ("absent", "by_value", "odd")

    def __init__(self, key: str, labels: Sequence[Mapping[str, Any]]) -> None:
        self.absent = 0
        #: hashable value -> the nodes that have it
        self.by_value: dict[Any, int] = {}
        #: (value, node) for values that are not hashable
        self.odd: list[tuple[Any, int]] = []
        missing = object()
        for position, mine in enumerate(labels):
            value = mine.get(key, missing)
            if value is missing:
                self.absent |= 1 << position
                continue
            try:
                self.by_value[value] = self.by_value.get(value, 0) | (1 << position)
            except TypeError:
                self.odd.append((value, 1 << position))

    def classes(self) -> Iterator[tuple[Any, bool, int]]:
        """(value, present, nodes) for each class of the key."""
        if self.absent:
            yield None, False, self.absent
        for value, nodes in self.by_value.items():
            yield value, True, nodes
        for value, node in self.odd:
            yield value, True, node


class NodeIndex:
    """The nodes `labels[i]`, `names[i]`, `taints[i]` (bit i), asked which of them admit a set of constraints."""

    def __init__(self, labels: Sequence[Mapping[str, Any]], names: Sequence[str], taints: Sequence[Sequence[Any]]) -> None:
        self.labels = labels
        self.names = names
        self.all = (1 << len(labels)) - 1
        self._keys: dict[str, _KeyClasses] = {}
        #: each distinct set of taints (by its repr, which equal taints written alike share) and its nodes
        self._taint_sets: list[tuple[Sequence[Any], int]] = []
        by_text: dict[str, int] = {}
        for position, mine in enumerate(taints):
            text = repr(mine)
            index = by_text.get(text)
            if index is None:
                by_text[text] = len(self._taint_sets)
                self._taint_sets.append((list(mine), 1 << position))
            else:
                kept, nodes = self._taint_sets[index]
                self._taint_sets[index] = (kept, nodes | (1 << position))
        self._tolerated: dict[tuple[str, int], bool] = {}

    def _key(self, key: str) -> _KeyClasses:
        found = self._keys.get(key)
        if found is None:
            found = self._keys[key] = _KeyClasses(key, self.labels)
        return found

    def _selected(self, selector: Mapping[str, Any]) -> int:
        """`placement.matches_node_selector`: every key's value equal to the selector's."""
        bits = self.all
        for key, wanted in selector.items():
            if isinstance(key, str) and isinstance(wanted, str):
                bits &= self._key(key).by_value.get(wanted, 0)  # only a text value equals a text (str hashes alike)
            else:
                bits &= bits_of(i for i, mine in enumerate(self.labels) if mine.get(key) == wanted)
            if not bits:
                return 0
        return bits

    def _expression(self, expr: Mapping[str, Any]) -> int:
        key = expr.get("key")
        if not isinstance(key, str):
            return bits_of(i for i, mine in enumerate(self.labels) if expression_matches(expr, mine.get(key), key in mine))
        matched = 0
        for value, present, nodes in self._key(key).classes():
            if expression_matches(expr, value, present):
                matched |= nodes
        return matched

    def _field(self, expr: Mapping[str, Any]) -> int:
        if expr.get("key") != "metadata.name":
            return 0
        return bits_of(i for i, name in enumerate(self.names) if expression_matches(expr, name, True))

    def _term(self, term: Mapping[str, Any]) -> int:
        """`placement._term_matches`: every expression and field matches; an empty term matches no node."""
        expressions = term.get("matchExpressions") or []
        fields = term.get("matchFields") or []
        if not expressions and not fields:
            return 0
        bits = self.all
        for expr in expressions:
            bits &= self._expression(expr)
            if not bits:
                return 0
        for expr in fields:
            bits &= self._field(expr)
            if not bits:
                return 0
        return bits

    def _tolerating(self, tolerations: Sequence[Mapping[str, Any]], among: int, tolerations_key: Optional[str]) -> int:
        """The nodes of `among` whose blocking taints `tolerations` all tolerate (`tolerations_key`: the same tolerations
        asked again under this key give the same answer)."""
        bits = 0
        for index, (taints, nodes) in enumerate(self._taint_sets):
            if not nodes & among:
                continue
            cached = self._tolerated.get((tolerations_key, index)) if tolerations_key is not None else None
            if cached is None:
                cached = not untolerated_taints(taints, tolerations)
                if tolerations_key is not None:
                    self._tolerated[(tolerations_key, index)] = cached
            if cached:
                bits |= nodes
        return bits & among

    def admitting(self, selector: Mapping[str, Any], terms: Sequence[Mapping[str, Any]], tolerations: Sequence[Mapping[str, Any]],
                  tolerations_key: Optional[str] = None, among: Optional[int] = None) -> int:
        """The nodes (of `among`; all by default) that `placement.admits` admits for these constraints."""
        bits = self.all if among is None else among
        bits &= self._selected(selector)
        if bits and terms:
            any_term = 0
            for term in terms:
                any_term |= self._term(term)
            bits &= any_term
        if bits:
            bits = self._tolerating(tolerations, bits, tolerations_key)
        return bits
