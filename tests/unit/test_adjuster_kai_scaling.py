"""`adjuster plan --policy kai` costs in proportion to the pods (was quadratic: 100,000 pods took
174 s), and the linear pass decides exactly what the rule as KAI states it decides.

Cost is counted in Python steps (tests/unit/step_count.py), never timed.
"""

from __future__ import annotations

import random
from typing import Any, Optional

import pytest

from raybridge.kai.node_scale_adjuster import _key, kai_pass, num_devices, scaling_pod_name
from tests.unit.step_count import growth
from tests.unit.test_adjuster_kai import SCALING_NS, frac, scaling, unschedulable


def _burst(n: int) -> list[dict[str, Any]]:
    """n pending half-GPU pods, every tenth on 2 devices, and a few scaling pods already there."""
    pods = [frac("work", f"p{i:06d}", "0.5", 2 if i % 10 == 0 else 1) for i in range(n)]
    return pods + [scaling("work", f"p{i:06d}", 1) for i in range(0, n, 50)]


def _pass(pods: list[dict[str, Any]]) -> Any:
    return kai_pass(pods, "kai-scheduler", 0.1, SCALING_NS)


def test_a_kai_pass_costs_in_proportion_to_the_pods() -> None:
    result = _pass(_burst(2000))
    assert len(result.created) > 500 and result.kept  # the loop that was quadratic runs over many scaling pods
    ratio = growth(_burst, _pass, small=500)
    assert ratio < 6, f"4x the pods cost {ratio:.1f}x the steps (linear: about 4, quadratic: about 16)"


def _rule_as_kai_states_it(pods: list[dict[str, Any]], kept: list[Any], counted: list[dict[str, Any]], need: int) -> list[tuple[str, str]]:
    """The creation loop as KAI's createNewScalingPods reads: for each pod, the largest and the sum
    over every scaling pod so far. Returns (pod, scaling pod name) created, in order."""
    existing = {s.name for s in kept} | {_key(p)[1] for p in pods if _key(p)[0] == SCALING_NS}
    current = [(s.name, s.target, s.devices) for s in kept]
    created = []
    for pod in counted:
        namespace, name = _key(pod)
        scaling_name = scaling_pod_name(namespace, name)
        if scaling_name in existing:
            continue
        devices = num_devices(pod)
        largest = max((d for _, _, d in current), default=0)
        provisioned = sum(d for _, _, d in current)
        if not (need > provisioned or devices > largest) or devices < 0 or len(name) > 63:
            continue
        current.append((scaling_name, f"{namespace}/{name}", devices))
        created.append((f"{namespace}/{name}", scaling_name))
        existing.add(scaling_name)
    return created


def _random_cluster(rng: random.Random) -> list[dict[str, Any]]:
    pods: list[dict[str, Any]] = []
    for i in range(rng.randint(0, 40)):
        devices = rng.choice([1, 1, 1, 2, 3, 0, -1, 8])
        annotations = {"gpu-fraction": rng.choice(["0.1", "0.25", "0.5", "0.75", "1", "1.5", "-0.5", "0.33"])}
        if devices != 1:
            annotations["gpu-fraction-num-devices"] = str(devices)
        pods.append(unschedulable(rng.choice(["a", "b", "c-a", "c"]), rng.choice([f"p{i}", "a-b", "b"]), annotations))
    for i in range(rng.randint(0, 6)):
        target = rng.choice(pods) if pods and rng.random() < 0.7 else unschedulable("gone", f"g{i}", {})
        namespace, name = _key(target)
        pods.append(scaling(namespace, name, rng.choice([0, 1, 2, 4, -2])))
    rng.shuffle(pods)
    return pods


@pytest.mark.parametrize("seed", range(300))
def test_the_linear_pass_creates_what_the_rule_as_kai_states_it_creates(seed: int) -> None:
    from raybridge.kai.node_scale_adjuster import is_candidate, needed_devices

    pods = _random_cluster(random.Random(seed))
    result = _pass(pods)
    if result.in_cooldown or result.need == 0:
        assert result.created == ()
        return
    candidates = sorted((p for p in pods if is_candidate(p, "kai-scheduler")), key=_key)
    need, counted, _ = needed_devices(candidates, 0.1)
    assert [(s.target, s.name) for s in result.created] == _rule_as_kai_states_it(pods, list(result.kept), counted, need)
