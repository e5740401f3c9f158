"""Nodes a placeholder brought up are held from voluntary disruption until its pods land, and released after.

Karpenter consolidates an empty node once `consolidateAfter` has passed and
does not touch one annotated `karpenter.sh/do-not-disrupt: "true"`
(karpenter@v1.14.1 pkg/controllers/state/statenode.go ValidateNodeDisruptable);
cluster-autoscaler scales down an unneeded node but not one annotated
`cluster-autoscaler.kubernetes.io/scale-down-disabled: "true"`.
A placeholder exits once scheduled, so its node is empty until KAI binds the
pods: `reconcile` says which nodes to hold, `node_holds` what to patch.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from raybridge.adjuster.decision import consts
from raybridge.adjuster.decision.scale_adjuster import hold_patch, node_holds
from raybridge.core.views import read_node
from raybridge.adjuster.decision.settings import AdjusterSettings
from raybridge.adjuster.decision.plan import NEW_NODE_SECONDS, plan_placeholders
from raybridge.adjuster.decision.placeholders import DELETE_NODE_GONE, PENDING, PROVIDED, ExistingPlaceholder
from raybridge.adjuster.decision.reconcile import reconcile
from tests.unit.adjuster_objects import NOW, node, pod

SETTINGS = AdjusterSettings(node_gpus=8)
GROUP = plan_placeholders([pod("x", "0.5")], None, SETTINGS, NOW).placeholders[0].group
TIMEOUT = 300.0


def halves(n: int, **kw: Any) -> list[dict[str, Any]]:
    return [pod(f"p{i}", "0.5", **kw) for i in range(n)]


def placeholder(state: str, *, seconds_ago: float = 5, node_name: str | None = "n1") -> ExistingPlaceholder:
    at = NOW - timedelta(seconds=seconds_ago) if state == PROVIDED else None
    return ExistingPlaceholder("a", GROUP, 2, state, tuple(f"team/p{i}" for i in range(4)), at, node_name if state == PROVIDED else None)


# (case, pods, the placeholder, the nodes held)
HELD_ROWS = [
    ("landed, its pods still wait: its node is held", halves(4), placeholder(PROVIDED), {"n1"}),
    ("landed, its pods are all on the node: released", halves(4, node_name="n1", phase="Running"), placeholder(PROVIDED), set()),
    ("landed past the provision timeout: released", halves(4), placeholder(PROVIDED, seconds_ago=TIMEOUT + 1), set()),
    ("still pending: no node to hold", halves(4), placeholder(PENDING), set()),
]


@pytest.mark.parametrize("case,pods,existing,held", HELD_ROWS, ids=[r[0] for r in HELD_ROWS])
def test_the_node_of_a_placeholder_still_covering_its_pods_is_held(case: str, pods: list[dict[str, Any]], existing: ExistingPlaceholder,
                                                                   held: set[str]) -> None:
    result = reconcile(pods, [node("n1", 8)], [existing], SETTINGS, NOW, provision_timeout_seconds=TIMEOUT, name_prefix="rb")
    assert set(result.held_nodes) == held


def test_a_placeholder_whose_node_is_gone_covers_nothing_and_its_pods_are_asked_for_again() -> None:
    gone_since = NEW_NODE_SECONDS + 1  # bound that long ago, and its node is still not listed
    result = reconcile(halves(4), [node("other", 8, labels={})], [placeholder(PROVIDED, seconds_ago=gone_since)], SETTINGS, NOW,
                       provision_timeout_seconds=TIMEOUT, name_prefix="rb")
    assert dict(result.delete) == {"a": DELETE_NODE_GONE}
    assert sum(p.placeholder.gpus for p in result.create) == 2 and not result.covered_pods and not result.held_nodes


def test_a_placeholder_bound_just_now_to_a_node_not_listed_yet_still_covers_its_pods() -> None:
    """The pods' and the nodes' watches are separate streams: the placeholder's bind can come before its node does
    (a nodes' watch dropped and listed again, a slow stream). Taking that node for gone asked for its pods again and
    cost a node: a 30 x 0.6 GPU burst got six nodes for four (the second and third for one placeholder,
    test_adjuster_races_on_real_api.py, on a loaded machine)."""
    result = reconcile(halves(4), [node("other", 8, labels={})], [placeholder(PROVIDED, seconds_ago=2)], SETTINGS, NOW,
                       provision_timeout_seconds=TIMEOUT, name_prefix="rb")
    assert not result.delete and not result.create
    assert set(result.covered_pods) == {f"team/p{i}" for i in range(4)}


DND, SDD = consts.DO_NOT_DISRUPT_ANNOTATION, consts.SCALE_DOWN_DISABLED_ANNOTATION


def _node(name: str, *, label: str | None = None, annotated: tuple[str, ...] = ()) -> dict[str, Any]:
    """A node with our hold label (`label`: its value) and the hold annotations `annotated` set to "true"."""
    found = node(name)
    if label is not None:
        found["metadata"]["labels"][consts.HOLD_LABEL] = label
    if annotated:
        found["metadata"]["annotations"] = {a: "true" for a in annotated}
    return found


# (case, the node, whether a placeholder wants it held, held, released, the annotations ours to set or remove)
PATCH_ROWS = [
    ("wanted and not held: held, both annotations ours", _node("n"), True, ["n"], [], (DND, SDD)),
    ("wanted and held by us: nothing to do", _node("n", label="both", annotated=(DND, SDD)), True, [], [], None),
    ("wanted, do-not-disrupt someone else's (a NodePool template): scale-down-disabled alone is ours",
     _node("n", annotated=(DND,)), True, ["n"], [], (SDD,)),
    ("wanted, both someone else's: our label alone", _node("n", annotated=(DND, SDD)), True, ["n"], [], ()),
    ("wanted, our label beside someone else's annotations: nothing to do", _node("n", label="label-only", annotated=(DND, SDD)), True, [], [], None),
    ("wanted, held before scale-down-disabled existed: it is added", _node("n", label="true", annotated=(DND,)), True, ["n"], [], (DND, SDD)),
    ("not wanted and held by us: released, both removed", _node("n", label="both", annotated=(DND, SDD)), False, [], ["n"], (DND, SDD)),
    ("not wanted, held before scale-down-disabled existed: do-not-disrupt alone removed",
     _node("n", label="true", annotated=(DND, SDD)), False, [], ["n"], (DND,)),
    ("not wanted, our label without the annotations: released (the label removed too)", _node("n", label="both"), False, [], ["n"], (DND, SDD)),
    ("not wanted, our label beside someone else's annotations: the label alone removed",
     _node("n", label="label-only", annotated=(DND, SDD)), False, [], ["n"], ()),
    ("not wanted, our scale-down-disabled beside someone else's do-not-disrupt: ours alone removed",
     _node("n", label="scale-down", annotated=(DND, SDD)), False, [], ["n"], (SDD,)),
    ("not wanted and annotated by someone else: not ours to release", _node("n", annotated=(DND, SDD)), False, [], [], None),
    ("not wanted, a hold label of a value not ours: left alone", _node("n", label="maybe"), False, [], [], None),
    ("not wanted, never held: nothing to do", _node("n"), False, [], [], None),
]


@pytest.mark.parametrize("case,found,wanted,held,released,ours", PATCH_ROWS, ids=[r[0] for r in PATCH_ROWS])
def test_only_the_hold_we_set_is_set_and_released(case: str, found: dict[str, Any], wanted: bool, held: list[str], released: list[str],
                                                  ours: tuple[str, ...] | None) -> None:
    holds = node_holds([read_node(found)], {"n"} if wanted else set())
    assert (list(holds.hold), list(holds.release), holds.ours.get("n")) == (held, released, ours)


def test_the_patch_sets_and_removes_both_annotations_and_the_label_together() -> None:
    """Karpenter's do-not-disrupt and cluster-autoscaler's scale-down-disabled (cluster-autoscaler-1.36.1
    core/scaledown/eligibility/eligibility.go: a node annotated so is not eligible for scale-down)."""
    assert hold_patch(True) == {"metadata": {"labels": {"raybridge.io/adjuster-hold": "both"},
                                             "annotations": {"karpenter.sh/do-not-disrupt": "true",
                                                             "cluster-autoscaler.kubernetes.io/scale-down-disabled": "true"}}}
    assert hold_patch(False) == {"metadata": {"labels": {"raybridge.io/adjuster-hold": None},
                                              "annotations": {"karpenter.sh/do-not-disrupt": None,
                                                              "cluster-autoscaler.kubernetes.io/scale-down-disabled": None}}}


def test_beside_someone_else_s_annotations_the_patch_touches_ours_alone() -> None:
    assert hold_patch(True, ()) == {"metadata": {"labels": {"raybridge.io/adjuster-hold": "label-only"}}}
    assert hold_patch(False, ()) == {"metadata": {"labels": {"raybridge.io/adjuster-hold": None}}}
    assert hold_patch(True, (SDD,)) == {"metadata": {"labels": {"raybridge.io/adjuster-hold": "scale-down"}, "annotations": {SDD: "true"}}}
    assert hold_patch(False, (DND,)) == {"metadata": {"labels": {"raybridge.io/adjuster-hold": None}, "annotations": {DND: None}}}
