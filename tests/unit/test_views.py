"""The typed views read each field once, checked for type: what a malformed object reads as, one row per case."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pytest

from raybridge.core.views import find_condition, read_meta, read_node, read_pod

POD_ROWS: list[tuple[str, Any, dict[str, Any]]] = [
    # (case, object, fields expected)
    ("not an object", ["a"], {"key": "default/?", "has_spec": False, "bound": False, "waiting": True, "scheduler_name": "default-scheduler"}),
    ("bare pod", {"metadata": {"name": "p"}, "spec": {}}, {"key": "default/p", "has_spec": True, "phase": "", "waiting": True}),
    ("namespaced, bound", {"metadata": {"name": "p", "namespace": "ml"}, "spec": {"nodeName": "n1"}},
     {"key": "ml/p", "node_name": "n1", "bound": True, "waiting": False}),
    ("nodeName not text: bound, no name", {"metadata": {"name": "p"}, "spec": {"nodeName": 7}}, {"node_name": "", "bound": True}),
    ("finished", {"metadata": {"name": "p"}, "spec": {}, "status": {"phase": "Failed"}}, {"finished": True, "waiting": False}),
    ("being deleted", {"metadata": {"name": "p", "deletionTimestamp": "2026-01-01T00:00:00Z"}, "spec": {}}, {"waiting": False}),
    ("spec a list", {"metadata": {"name": "p"}, "spec": []}, {"has_spec": False, "spec": {}}),
    ("name not text", {"metadata": {"name": 5, "namespace": ["x"]}}, {"key": "default/?"}),
    ("scheduler named", {"metadata": {"name": "p"}, "spec": {"schedulerName": "kai-scheduler"}}, {"scheduler_name": "kai-scheduler"}),
    ("scheduler not text", {"metadata": {"name": "p"}, "spec": {"schedulerName": 3}}, {"scheduler_name": "default-scheduler"}),
    ("status a string", {"metadata": {"name": "p"}, "status": "Running"}, {"phase": "", "status": {}}),
]


@pytest.mark.parametrize("case,obj,expected", POD_ROWS, ids=[r[0] for r in POD_ROWS])
def test_pod_view(case: str, obj: Any, expected: dict[str, Any]) -> None:
    pod = read_pod(obj)
    assert {name: getattr(pod, name) for name in expected} == expected


def test_the_view_shares_the_objects_mappings_and_keeps_the_object() -> None:
    obj = {"metadata": {"name": "p", "labels": {"a": "1"}}, "spec": {"containers": []}}
    pod = read_pod(obj)
    assert pod.obj is obj and pod.spec is obj["spec"] and pod.meta.labels is obj["metadata"]["labels"]


CONDITION_ROWS: list[tuple[str, Any, Any]] = [
    ("none", {}, None),
    ("conditions not a list", {"conditions": {"type": "PodScheduled"}}, None),
    ("entry not an object", {"conditions": ["PodScheduled"]}, None),
    ("found, fields typed", {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": 4}]},
     ("False", "Unschedulable", "")),
    ("first of two", {"conditions": [{"type": "PodScheduled", "status": "True"}, {"type": "PodScheduled", "status": "False"}]},
     ("True", "", "")),
]


@pytest.mark.parametrize("case,status,expected", CONDITION_ROWS, ids=[r[0] for r in CONDITION_ROWS])
def test_condition_read_by_type(case: str, status: Any, expected: Any) -> None:
    pod = read_pod({"metadata": {"name": "p"}, "status": status})
    found = pod.condition("PodScheduled")
    assert (None if found is None else (found.status, found.reason, found.message)) == expected
    listed = find_condition(pod.conditions, "PodScheduled")
    assert (None if listed is None else (listed.status, listed.reason, listed.message)) == expected


def test_meta_times_and_owners() -> None:
    meta = read_meta({"metadata": {"creationTimestamp": "2026-11-27T10:00:00Z",
                                   "ownerReferences": [{"kind": "DaemonSet", "name": "d", "uid": "u", "controller": True}, "junk"]}})
    assert meta.created == "2026-11-27T10:00:00Z"
    assert meta.created_at == datetime(2026, 11, 27, 10, tzinfo=timezone.utc)
    assert [(o.kind, o.name, o.uid, o.controller) for o in meta.owners] == [("DaemonSet", "d", "u", True)]
    assert meta.owned_by_kind("DaemonSet") and not meta.owned_by_kind("ReplicaSet")
    yaml_time = read_meta({"metadata": {"creationTimestamp": datetime(2026, 1, 1)}})
    assert yaml_time.created is None and yaml_time.created_at == datetime(2026, 1, 1, tzinfo=timezone.utc)


NODE_ROWS: list[tuple[str, Any, dict[str, Any]]] = [
    ("not an object", None, {"name": "", "cordoned": False, "taints": (), "allocatable": {}}),
    ("allocatable", {"metadata": {"name": "n"}, "status": {"allocatable": {"nvidia.com/gpu": "8"}, "capacity": {"nvidia.com/gpu": "9"}}},
     {"allocatable": {"nvidia.com/gpu": "8"}}),
    ("capacity when no allocatable", {"metadata": {"name": "n"}, "status": {"capacity": {"cpu": "4"}}}, {"allocatable": {"cpu": "4"}}),
    ("cordoned", {"metadata": {"name": "n"}, "spec": {"unschedulable": True}}, {"cordoned": True}),
    ("unschedulable as text is not cordoned", {"metadata": {"name": "n"}, "spec": {"unschedulable": "false"}}, {"cordoned": False}),
    ("taints: objects only", {"metadata": {"name": "n"}, "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}, "x"]}},
     {"taints": ({"key": "k", "effect": "NoSchedule"},)}),
    ("text labels only", {"metadata": {"name": "n", "labels": {"a": "1", "b": 2}}}, {"text_labels": {"a": "1"}}),
]


@pytest.mark.parametrize("case,obj,expected", NODE_ROWS, ids=[r[0] for r in NODE_ROWS])
def test_node_view(case: str, obj: Any, expected: dict[str, Any]) -> None:
    node = read_node(obj)
    assert {name: getattr(node, name) for name in expected} == expected


@pytest.mark.parametrize("conditions,expected", [
    ([{"type": "Ready", "status": "True"}], None),
    ([{"type": "Ready", "status": "Unknown"}], "not Ready"),
    ([], "not Ready (no Ready condition)"),
    ("Ready", "not Ready (no Ready condition)"),
])
def test_node_readiness(conditions: Any, expected: Any) -> None:
    assert read_node({"metadata": {"name": "n"}, "status": {"conditions": conditions}}).not_ready_reason() == expected


def test_a_label_is_read_as_text_or_not_at_all() -> None:
    meta = read_meta({"metadata": {"labels": {"text": "a", "list": ["a"], "map": {"a": 1}, "number": 7, "empty": ""}}})
    assert [meta.label(k) for k in ("text", "list", "map", "number", "empty", "absent")] == ["a", "", "", "", "", ""]
    assert read_meta({"metadata": {"labels": ["a=b"]}}).label("a") == ""
