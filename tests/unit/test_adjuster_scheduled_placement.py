"""A group's placement is kept between passes, and only ever answers for the very inputs it was placed from.

Why: a controller pass places every group again, and at 1,239 groups that was a fifth of a pass that packed
nothing new. A kept placement answering for other inputs would be a wrong plan that no time measurement shows: each
row below changes one input after a first placement, and the answer must be what placing afresh gives.
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction
from typing import Callable, Optional

import pytest

from raybridge.adjuster.decision import scheduled_placement as placement
from raybridge.adjuster.decision.packing import PackedNode, Packing, PackItem, Resources, pack

ROOM: Resources = (("cpu", 8000), ("memory", 64 << 30))


def _items() -> list[PackItem]:
    shares = (Fraction(1, 2), Fraction(3, 4), Fraction(1, 2), Fraction(1, 4), Fraction(3, 4), Fraction(1, 2))
    return [PackItem(f"p{i}", share, 2 if i == 1 else 1, (("cpu", 2000),)) for i, share in enumerate(shares)]


Inputs = tuple[Packing, list[PackItem], int, Optional[Resources], Optional[int]]


def _inputs() -> Inputs:
    items = _items()
    return pack(items, 4), items, 4, ROOM, None


def _with_items(change: Callable[[list[PackItem]], list[PackItem]]) -> Callable[[Inputs], Inputs]:
    return lambda given: (given[0], change(list(given[1])), *given[2:])  # type: ignore[return-value]


CHANGES: list[tuple[str, Callable[[Inputs], Inputs]]] = [
    ("the same inputs, the items a new list", _with_items(lambda items: items)),
    ("the scheduler's order", _with_items(lambda items: items[::-1])),
    ("a pod's name", _with_items(lambda items: [replace(items[0], pod="q0"), *items[1:]])),
    ("a pod's share, another numerator", _with_items(lambda items: [replace(items[3], size=Fraction(3, 4)) if i == 3 else it for i, it in enumerate(items)])),
    ("a pod's share, another denominator", _with_items(lambda items: [replace(items[0], size=Fraction(1, 3)), *items[1:]])),
    ("a pod's devices", _with_items(lambda items: [replace(items[3], devices=3) if i == 3 else it for i, it in enumerate(items)])),
    ("a pod's requests", _with_items(lambda items: [replace(it, resources=(("cpu", 5000),)) for it in items])),
    ("a pod fewer", _with_items(lambda items: items[:-1])),
    ("a node's room", lambda given: (*given[:3], (("cpu", 4000), ("memory", 64 << 30)), given[4])),  # type: ignore[misc]
    ("the room unknown", lambda given: (*given[:3], None, given[4])),  # type: ignore[misc]
    ("the node size", lambda given: (pack(given[1], 2), given[1], 2, *given[3:])),
    ("the node size alone, the packing the same", lambda given: (*given[:2], 8, *given[3:])),
    ("pods that must not share a host", lambda given: (*given[:4], 1)),  # type: ignore[misc]
    ("another packing, equal to the first", lambda given: (replace(given[0]), *given[1:])),
    ("another packing, of smaller nodes", lambda given: (replace(given[0], nodes=(PackedNode(2, (), ()), *[PackedNode(1, (), ())] * 5)), *given[1:])),
]


@pytest.mark.parametrize("change", [c for _, c in CHANGES], ids=[name for name, _ in CHANGES])
def test_a_kept_placement_answers_only_for_its_own_inputs(change: Callable[[Inputs], Inputs], monkeypatch: pytest.MonkeyPatch) -> None:
    placement._placements.clear()
    first = _inputs()
    before = placement.scheduled_placement(*first)
    changed = change(first)
    placement._placements.clear()
    afresh = placement.scheduled_placement(*changed)
    placement._placements.clear()
    placement.scheduled_placement(*first)
    assert placement.scheduled_placement(*changed) == afresh
    assert placement.scheduled_placement(*first) == before


def test_a_group_placed_again_is_not_placed_again(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = placement._place
    monkeypatch.setattr(placement, "_place", lambda packing, items, *rest: calls.append(len(items)) or real(packing, items, *rest))
    placement._placements.clear()
    packing, items, node_gpus, room, per_node = _inputs()
    first = placement.scheduled_placement(packing, items, node_gpus, room, per_node)
    assert placement.scheduled_placement(packing, list(items), node_gpus, room, per_node) is first
    assert calls == [6]
    placement.scheduled_placement(packing, items[:5], node_gpus, room, per_node)
    assert calls == [6, 5]


def test_at_most_the_last_placements_are_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(placement, "PLACEMENTS_KEPT", 3)
    placement._placements.clear()

    def place(name: str) -> None:
        items = [PackItem(name, Fraction(1, 2))]
        placement.scheduled_placement(pack(items, 8), items, 8, None)

    for i in range(5):
        place(f"p{i}")
    place("p2")  # used again: the newest
    place("p9")
    assert [key[1][0][0] for key in placement._placements] == ["p4", "p2", "p9"]
