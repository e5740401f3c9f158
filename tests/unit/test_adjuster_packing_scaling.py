"""Packing many distinct fractions costs in proportion to them (was quadratic: 20,000 distinct
fractions took 19 s): the lower bound, first-fit-decreasing and the regrouping into nodes.

Cost is counted in Python steps (tests/unit/step_count.py), never timed; the packings themselves
are pinned by tests/unit/test_adjuster_packing.py.
"""

from __future__ import annotations

from fractions import Fraction

from raybridge.adjuster.decision.settings import AdjusterSettings
from raybridge.adjuster.decision.plan import plan_placeholders
from raybridge.adjuster.decision import packing, scheduled_placement
from raybridge.adjuster.decision.packing import PackItem, lower_bound, pack
from tests.unit.adjuster_objects import NOW, pod
from tests.unit.step_count import growth


def _distinct(n: int) -> list[PackItem]:
    """n single-GPU pieces, each a different fraction of a GPU."""
    return [PackItem(f"p{i:06d}", Fraction(i + 1, n + 1)) for i in range(n)]


def test_packing_distinct_fractions_costs_in_proportion_to_them() -> None:
    ratio = growth(_distinct, lambda items: pack(items, node_gpus=8), small=400)
    assert ratio < 6, f"4x the fractions cost {ratio:.1f}x the steps (linear: about 4, quadratic: about 16)"


def test_the_lower_bound_over_distinct_sizes_costs_in_proportion_to_them() -> None:
    capacity = 1 << 20

    def sizes(n: int) -> list[int]:
        return [capacity * (i + 1) // (n + 1) for i in range(n)]

    ratio = growth(sizes, lambda s: lower_bound(s, capacity), small=400)
    assert ratio < 6, f"4x the sizes cost {ratio:.1f}x the steps"


def _pods(n: int) -> list[dict]:
    return [pod(f"p{i:06d}", f"{(i + 1) / (n + 1):.6f}") for i in range(n)]


def test_adjuster_plan_over_distinct_fractions_costs_in_proportion_to_them() -> None:
    settings = AdjusterSettings(node_gpus=8)
    plan = plan_placeholders(_pods(400), None, settings, NOW)
    assert plan.total_gpus >= 200 and len({p for ph in plan.placeholders for p in ph.pods}) == 400

    def planned_afresh(pods: list[dict]) -> object:  # each size packed and placed, none taken from an earlier plan
        packing._packings.clear()
        scheduled_placement._placements.clear()
        return plan_placeholders(pods, None, settings, NOW)

    ratio = growth(_pods, planned_afresh, small=400)
    assert ratio < 6, f"4x the pods cost {ratio:.1f}x the steps"



def _dff_bound_as_written(sizes: list[int], capacity: int) -> int:
    """Fekete and Schepers' bounds straight from their definitions, every size summed for each function."""
    best = 0
    for k in range(1, 101):
        total = sum(s * k if ((k + 1) * s) % capacity == 0 else ((k + 1) * s // capacity) * capacity for s in sizes)
        best = max(best, -(-total // (k * capacity)))
    for t in {s for s in sizes if 2 * s <= capacity}:
        total = sum(capacity if s > capacity - t else (0 if s < t else s) for s in sizes)
        best = max(best, -(-total // capacity))
    return best


def test_the_bound_with_prefix_sums_is_the_bound_as_defined() -> None:
    import random

    from raybridge.adjuster.decision.packing import _dff_bound

    for seed in range(300):
        rng = random.Random(seed)
        capacity = rng.choice([10, 12, 100, 81559])
        sizes = [rng.choice([rng.randint(1, capacity), capacity // 2, capacity // 3 + 1]) for _ in range(rng.randint(1, 30))]
        assert _dff_bound(sizes, capacity) == _dff_bound_as_written(sizes, capacity), (capacity, sizes)
