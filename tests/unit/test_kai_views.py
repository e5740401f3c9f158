"""KAI's PodGroups and Queues read once into views: what a malformed object reads as, one row per case."""

from __future__ import annotations

from typing import Any

import pytest

from raybridge.core.views import read_pod
from raybridge.kai.pod_group import index_pod_groups, pod_group_of, queue_name, read_pod_group
from raybridge.kai.queue import read_kai_queue

POD_GROUP_ROWS: list[tuple[str, Any, dict[str, Any]]] = [
    # (case, object, fields expected; reasons as (reason, node pool))
    ("not an object", "pg", {"queue": "", "phase": "", "conditions": (), "reasons": (), "quota_reason": None}),
    ("queue and phase", {"metadata": {"name": "pg"}, "spec": {"queue": "team-a", "minMember": 2}, "status": {"phase": "Pending"}},
     {"queue": "team-a", "min_member": 2, "phase": "Pending"}),
    ("queue not text", {"spec": {"queue": ["team-a"]}}, {"queue": ""}),
    ("status a list", {"status": ["Pending"]}, {"phase": "", "reasons": ()}),
    ("conditions: objects only", {"status": {"conditions": [{"type": "Scheduled"}, "x"]}}, {"conditions": ({"type": "Scheduled"},)}),
    ("a reason in force, per node pool", {"status": {"schedulingConditions": [
        {"nodePool": "default", "reasons": [{"reason": "OverLimit", "message": "m"}, "junk"]}]}},
     {"reasons": (("OverLimit", "default"),), "quota_reason": "OverLimit"}),
    ("a condition no longer in force", {"status": {"schedulingConditions": [{"status": "False", "reasons": [{"reason": "OverLimit"}]}]}},
     {"reasons": (), "quota_reason": None}),
    ("a condition's own reason when it lists none", {"status": {"schedulingConditions": [{"reason": "NotEnoughResources"}]}},
     {"reasons": (("NotEnoughResources", ""),), "quota_reason": None}),
    ("schedulingConditions an object", {"status": {"schedulingConditions": {"reason": "OverLimit"}}}, {"reasons": ()}),
]


@pytest.mark.parametrize("case,obj,expected", POD_GROUP_ROWS, ids=[r[0] for r in POD_GROUP_ROWS])
def test_pod_group_view(case: str, obj: Any, expected: dict[str, Any]) -> None:
    view = read_pod_group(obj)
    found = {name: getattr(view, name) for name in expected}
    if "reasons" in found:
        found["reasons"] = tuple((r.reason, r.node_pool) for r in view.reasons)
    assert found == expected


def test_a_pod_finds_its_pod_group_in_its_own_namespace_and_its_queue_from_it() -> None:
    index = index_pod_groups([
        {"metadata": {"name": "pg", "namespace": "ml"}, "spec": {"queue": "team-a"}},
        {"metadata": {"name": "pg"}, "spec": {"queue": "default-ns"}},
        {"metadata": {"namespace": "ml"}},  # no name: left out
        "junk",
    ])
    assert sorted(index) == [("default", "pg"), ("ml", "pg")]
    pod = read_pod({"metadata": {"name": "p", "namespace": "ml", "annotations": {"pod-group-name": "pg"}, "labels": {"kai.scheduler/queue": "label-q"}}})
    pod_group = pod_group_of(pod, index)
    assert pod_group is not None and queue_name(pod, pod_group) == "team-a"
    assert queue_name(pod, None) == "label-q"


QUEUE_ROWS: list[tuple[str, Any, dict[str, Any]]] = [
    ("not an object", None, {"name": "", "parent": "", "priority": 100, "resources": {}, "allocated": {}}),
    ("a child queue", {"metadata": {"name": "a"}, "spec": {"parentQueue": "root", "priority": 5}}, {"name": "a", "parent": "root", "priority": 5}),
    ("parent not text", {"metadata": {"name": "a"}, "spec": {"parentQueue": 3}}, {"parent": ""}),
    ("priority not a whole number", {"spec": {"priority": "high"}}, {"priority": 100}),
    ("priority a bool", {"spec": {"priority": True}}, {"priority": 100}),
    ("resources a list", {"spec": {"resources": ["gpu"]}}, {"resources": {}}),
    ("allocated", {"status": {"allocated": {"nvidia.com/gpu": "3"}}}, {"allocated": {"nvidia.com/gpu": "3"}}),
]


@pytest.mark.parametrize("case,obj,expected", QUEUE_ROWS, ids=[r[0] for r in QUEUE_ROWS])
def test_kai_queue_view(case: str, obj: Any, expected: dict[str, Any]) -> None:
    view = read_kai_queue(obj)
    assert {name: getattr(view, name) for name in expected} == expected


@pytest.mark.parametrize("terms,key,expected", [
    ({"quota": 4, "limit": -1, "overQuotaWeight": 2}, "quota", 4.0),
    ({"quota": 4, "limit": -1, "overQuotaWeight": 2}, "limit", -1.0),
    ({"quota": "x"}, "quota", 0.0),
    ({}, "overQuotaWeight", 0.0),
    ("gpu", "quota", 0.0),
])
def test_a_queue_s_term_reads_as_a_number_or_zero(terms: Any, key: str, expected: float) -> None:
    view = read_kai_queue({"metadata": {"name": "a"}, "spec": {"resources": {"gpu": terms}}})
    assert view.configured("gpu") and view.term("gpu", key) == expected
