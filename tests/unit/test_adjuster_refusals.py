"""A placeholder the autoscaler says it brings no node for is said, and its group is not asked for again meanwhile.

Why: on the real stack a Karpenter NodePool limited to 16 GPUs left 8 of 24 pods of 0.6 GPU pending: the third
placeholder was bound to GPUs another had brought up, counted for nothing and made again, twice, then pending for
good, and nothing said why. Karpenter says it (a Warning FailedScheduling on the placeholder; at a GPU limit that
leaves only CPU types, "no instance type has enough resources"), cluster-autoscaler too (NotTriggerScaleUp, "max
node group size reached"); kube-scheduler's own FailedScheduling, which every pending placeholder gets, says nothing
of new nodes. These rows are Events as those programs write them (core/v1, source.component).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Optional

from raybridge.adjuster.decision.plan import plan_placeholders
from raybridge.adjuster.decision.placeholders import DELETE_GROWN, PENDING, ExistingPlaceholder
from raybridge.adjuster.decision.reconcile import reconcile
from raybridge.adjuster.decision.refusals import held_back, limits_reached, refusals
from raybridge.adjuster.decision.settings import AdjusterSettings
from tests.unit.adjuster_objects import NOW, node, pod

KARPENTER_AT_LIMIT = ("Failed to schedule pod, no instance type has enough resources, requirements=karpenter.sh/nodepool In [default], "
                      'kubernetes.io/os In [linux], resources={"cpu":"8m","memory":"8Mi","nvidia.com/gpu":"8","pods":"1"}')


def event(name: str, reason: str, component: str, *, uid: str = "u1", seconds_ago: float = 10, message: str = "no") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Event", "metadata": {"name": f"{name}.1", "namespace": "raybridge-adjuster"},
            "involvedObject": {"kind": "Pod", "namespace": "raybridge-adjuster", "name": name, "uid": uid},
            "reason": reason, "message": message, "source": {"component": component},
            "lastTimestamp": (NOW - timedelta(seconds=seconds_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")}  # fmt: skip


PENDING_PLACEHOLDERS = {"rb-g-8g-2": ("u1", "nvidia-g")}


def test_karpenter_and_cluster_autoscaler_refusals_are_read_and_the_scheduler_s_are_not() -> None:
    said = refusals([
        event("rb-g-8g-2", "FailedScheduling", "default-scheduler", seconds_ago=1, message="0/3 nodes are available: 3 Insufficient nvidia.com/gpu."),
        event("rb-g-8g-2", "FailedScheduling", "karpenter", seconds_ago=20, message=KARPENTER_AT_LIMIT),
    ], PENDING_PLACEHOLDERS)
    assert list(said) == ["nvidia-g"] and said["nvidia-g"].autoscaler == "Karpenter"
    assert said["nvidia-g"].message.startswith("Failed to schedule pod, no instance type has enough resources")
    ca = refusals([event("rb-g-8g-2", "NotTriggerScaleUp", "cluster-autoscaler", message="pod didn't trigger scale-up: 1 max node group size reached")],
                  PENDING_PLACEHOLDERS)
    assert ca["nvidia-g"].autoscaler == "cluster-autoscaler" and "max node group size reached" in ca["nvidia-g"].sentence()


def test_a_refusal_of_another_pod_of_the_same_name_or_of_a_pod_not_ours_is_not_read() -> None:
    assert refusals([event("rb-g-8g-2", "FailedScheduling", "karpenter", uid="an-earlier-one")], PENDING_PLACEHOLDERS) == {}
    assert refusals([event("someone-else", "FailedScheduling", "karpenter")], PENDING_PLACEHOLDERS) == {}
    assert refusals(["not an object", {"involvedObject": "nor this"}], PENDING_PLACEHOLDERS) == {}


def test_a_refusal_holds_its_group_back_for_a_while_after_it_was_last_said() -> None:
    found = refusals([event("rb-g-8g-2", "FailedScheduling", "karpenter", seconds_ago=100)], PENDING_PLACEHOLDERS)
    assert list(held_back(found, NOW, 330)) == ["nvidia-g"]
    assert held_back(found, NOW, 60) == {}


def test_the_nodepool_limits_that_leave_too_little_are_named() -> None:
    pools = [{"metadata": {"name": "default"}, "spec": {"limits": {"nvidia.com/gpu": "16"}}, "status": {"resources": {"nvidia.com/gpu": "16"}}},
             {"metadata": {"name": "roomy"}, "spec": {"limits": {"nvidia.com/gpu": "64"}}, "status": {"resources": {"nvidia.com/gpu": "8"}}},
             {"metadata": {"name": "unlimited"}, "spec": {}, "status": {"resources": {"nvidia.com/gpu": "80"}}}]
    said = limits_reached(pools, "nvidia.com/gpu", 8)
    assert said == ["NodePool default is at its limits: 16 of its 16 nvidia.com/gpu are in use, 0 left, and the placeholder asks for 8"]
    assert limits_reached([{"metadata": {"name": "x"}, "spec": {"limits": {"nvidia.com/gpu": "not a quantity"}}}], "nvidia.com/gpu", 1) == []


def sixes(n: int, prefix: str = "p") -> list[dict[str, Any]]:
    return [pod(f"{prefix}{i}", "0.6") for i in range(n)]


GROUP = plan_placeholders([pod("x", "0.6")], [node("n0", 8)], AdjusterSettings(), NOW).groups[0].group.id


def _pass(pods: list[dict[str, Any]], existing: list[ExistingPlaceholder], held: Optional[dict[str, str]]) -> Any:
    return reconcile(pods, [node("n0", 8)], existing, AdjusterSettings(), NOW, provision_timeout_seconds=600, name_prefix="rb",
                     held_back=held)


def test_a_group_held_back_gets_no_new_placeholder_and_says_why() -> None:
    pods = sixes(8)
    assert sum(p.placeholder.gpus for p in _pass(pods, [], None).create) == 8
    result = _pass(pods, [], {GROUP: "Karpenter brings no node for placeholder rb-x: ..."})
    assert result.create == ()
    assert any(note.startswith(f"group {GROUP}: no new placeholder for 8 GPUs: Karpenter brings no node") for note in result.notes)
    assert _pass(pods, [], {"another-group": "..."}).create != ()


def test_the_pending_placeholder_a_held_back_group_would_have_grown_stays() -> None:
    """Its pods and 4 more: the node on its way holds them all, so the pass grows it (a delete and a bigger create);
    held back, the one pending stays as it is (the autoscaler is still asked by it)."""
    existing = [ExistingPlaceholder("rb-a", GROUP, 4, PENDING, tuple(f"team/p{i}" for i in range(4)), packed_onto_nodes=True)]
    pods = sixes(8)
    grown = _pass(pods, existing, None)
    assert ("rb-a", DELETE_GROWN) in grown.delete and grown.create
    held = _pass(pods, existing, {GROUP: "..."})
    assert held.delete == () and held.create == () and held.keep == ("rb-a",) and held.pending_gpus == 4
