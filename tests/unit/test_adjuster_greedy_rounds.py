"""The planner's greedy rounds resumed from the first pod left over give what full reruns give.

`BestFitScheduler.resumed_with` skips re-placing the pods before the last
run's first leftover; these tests hold it to `greedy_leftovers` run again on
every node, round after round, on hand-made and random cases.
"""

from __future__ import annotations

import random
from fractions import Fraction

import pytest

from raybridge.adjuster.decision.best_fit import BestFitScheduler, greedy_leftovers
from raybridge.adjuster.decision.packing import PackItem


def items(*specs):
    """specs: "0.6" or ("0.5", devices)."""
    return [
        PackItem(f"ns/p{i}", Fraction(spec if isinstance(spec, str) else spec[0]), 1 if isinstance(spec, str) else spec[1])
        for i, spec in enumerate(specs)
    ]


def rounds_by_rerun(pods, node_sizes, added):
    """Leftovers per round when every round places every pod again, on the nodes so far."""
    sizes, out = list(node_sizes), []
    for extra in [*added, None]:
        out.append(greedy_leftovers(pods, sizes))
        if extra is None or not out[-1]:
            break
        sizes.extend(extra)
    return out


def rounds_by_resuming(pods, node_sizes, added):
    """Leftovers per round the way the planner runs them: resumed with the added nodes."""
    check, out = BestFitScheduler(pods, node_sizes), []
    for extra in [*added, None]:
        out.append(check.run())
        if extra is None or not out[-1]:
            break
        check = check.resumed_with(extra)
    return out


# (case, pods in the scheduler's order, node sizes, nodes added per round, leftovers per round)
ROWS = [
    ("nothing left: one round", items("0.5", "0.5"), [1], [[1]], [[]]),
    ("a strand, then room on a new GPU", items("0.3", "0.3", "0.7", "0.7"), [2], [[1]], [[3], []]),
    ("a wide pod on a new node", items(("0.6", 2), ("0.6", 2)), [2], [[2]], [[1], []]),
    ("too small an addition: another round", items("0.9", "0.9", "0.9"), [1], [[1], [1]], [[1, 2], [2], []]),
    ("pods after the first leftover land elsewhere", items("0.6", "0.6", "0.3", "0.3", "0.3"), [1], [[1]], [[1, 3, 4], [4]]),
]


@pytest.mark.parametrize("case,pods,node_sizes,added,expected", ROWS, ids=[r[0] for r in ROWS])
def test_resumed_rounds(case, pods, node_sizes, added, expected):
    assert rounds_by_resuming(pods, node_sizes, added) == expected
    assert rounds_by_rerun(pods, node_sizes, added) == expected


def test_resumed_rounds_match_full_reruns_on_random_cases():
    rng = random.Random(9)
    for _ in range(300):
        node_gpus = rng.choice([1, 2, 4, 8])
        node_sizes = [rng.randint(1, node_gpus) for _ in range(rng.randint(0, 5))]
        pods = [
            PackItem(f"ns/p{i}", Fraction(rng.randint(1, 20), 20), rng.choice([1, 1, 1, 2, node_gpus]) if node_gpus > 1 else 1)
            for i in range(rng.randint(1, 40))
        ]
        added = [[rng.randint(1, node_gpus) for _ in range(rng.randint(1, 3))] for _ in range(3)]
        assert rounds_by_resuming(pods, node_sizes, added) == rounds_by_rerun(pods, node_sizes, added), (pods, node_sizes, added)


def test_resuming_a_run_that_left_nothing_is_refused():
    check = BestFitScheduler(items("0.5"), [1])
    assert check.run() == []
    with pytest.raises(ValueError, match="nothing to resume"):
        check.resumed_with([1])
