"""Nodes a placeholder brought up are held from voluntary disruption until its pods land, and released after.

Karpenter consolidates an empty node once `consolidateAfter` has passed and
does not touch one annotated `karpenter.sh/do-not-disrupt: "true"`
(karpenter@v1.14.1 pkg/controllers/state/statenode.go ValidateNodeDisruptable).
A placeholder exits once scheduled, so its node is empty until KAI binds the
pods: `reconcile` says which nodes to hold, `node_holds` what to patch.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from raybridge.adjuster import consts
from raybridge.adjuster.decision.scale_adjuster import hold_patch, node_holds
from raybridge.core.views import read_node
from raybridge.adjuster.decision.settings import AdjusterSettings
from raybridge.adjuster.decision.plan import plan_placeholders
from raybridge.adjuster.decision.reconcile import DELETE_NODE_GONE, PENDING, PROVIDED, ExistingPlaceholder, reconcile
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
    result = reconcile(halves(4), [node("other", 8, labels={})], [placeholder(PROVIDED)], SETTINGS, NOW,
                       provision_timeout_seconds=TIMEOUT, name_prefix="rb")
    assert dict(result.delete) == {"a": DELETE_NODE_GONE}
    assert sum(p.placeholder.gpus for p in result.create) == 2 and not result.covered_pods and not result.held_nodes


def _node(name: str, *, ours: bool = False, annotated: bool = False, label: str = "true") -> dict[str, Any]:
    found = node(name)
    if ours:
        found["metadata"]["labels"][consts.HOLD_LABEL] = label
    if annotated:
        found["metadata"]["annotations"] = {consts.DO_NOT_DISRUPT_ANNOTATION: "true"}
    return found


# (case, the node, whether a placeholder wants it held, held, released, of those the label alone changes)
PATCH_ROWS = [
    ("wanted and not held: held", _node("n"), True, ["n"], [], []),
    ("wanted and held by us: nothing to do", _node("n", ours=True, annotated=True), True, [], [], []),
    ("wanted, annotated by someone else (a NodePool template): our label alone, which keeps placeholders off",
     _node("n", annotated=True), True, ["n"], [], ["n"]),
    ("wanted, our label beside someone else's annotation: nothing to do", _node("n", ours=True, annotated=True, label="label-only"), True, [], [], []),
    ("not wanted and held by us: released", _node("n", ours=True, annotated=True), False, [], ["n"], []),
    ("not wanted, our label without the annotation: released (the label removed too)", _node("n", ours=True), False, [], ["n"], []),
    ("not wanted, our label beside someone else's annotation: the label alone removed",
     _node("n", ours=True, annotated=True, label="label-only"), False, [], ["n"], ["n"]),
    ("not wanted and annotated by someone else: not ours to release", _node("n", annotated=True), False, [], [], []),
    ("not wanted, never held: nothing to do", _node("n"), False, [], [], []),
]


@pytest.mark.parametrize("case,found,wanted,held,released,label_only", PATCH_ROWS, ids=[r[0] for r in PATCH_ROWS])
def test_only_the_hold_we_set_is_set_and_released(case: str, found: dict[str, Any], wanted: bool, held: list[str], released: list[str],
                                                  label_only: list[str]) -> None:
    holds = node_holds([read_node(found)], {"n"} if wanted else set())
    assert (list(holds.hold), list(holds.release), sorted(holds.label_only)) == (held, released, label_only)


def test_the_patch_sets_and_removes_the_annotation_and_the_label_together() -> None:
    assert hold_patch(True) == {"metadata": {"labels": {"raybridge.io/adjuster-hold": "true"},
                                             "annotations": {"karpenter.sh/do-not-disrupt": "true"}}}
    assert hold_patch(False) == {"metadata": {"labels": {"raybridge.io/adjuster-hold": None},
                                              "annotations": {"karpenter.sh/do-not-disrupt": None}}}


def test_beside_someone_else_s_annotation_the_patch_touches_the_label_alone() -> None:
    assert hold_patch(True, label_only=True) == {"metadata": {"labels": {"raybridge.io/adjuster-hold": "label-only"}}}
    assert hold_patch(False, label_only=True) == {"metadata": {"labels": {"raybridge.io/adjuster-hold": None}}}
