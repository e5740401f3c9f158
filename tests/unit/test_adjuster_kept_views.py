"""The controller keeps its pods' views from one pass to the next while the cache keeps the object, and a pass reads
each fact of an unchanged pod once.

Why: every pass reads all 10,000 pods of a large cluster, and most are the objects the last pass read; reading each
pod's requests, constraints, share and PodScheduled condition again was half of a pass that packed nothing new
(docs/benchmarks.md). A view kept for an object that changed would be a decision on what the pod was: a view is
kept only for the very object, and a changed pod is a new object in the cache (kube/informer.py).
"""

from __future__ import annotations

import copy
import threading
from typing import Any

import pytest

from raybridge.adjuster import controller as controller_module
from raybridge.adjuster.controller import Controller
from raybridge.adjuster.decision.demand import ClusterSnapshot
from raybridge.adjuster.decision.scale_adjuster import decide
from raybridge.adjuster.decision.settings import RunSettings
from raybridge.adjuster.kept_views import KeptPodViews
from raybridge.core import inventory
from raybridge.core.views import pod_fact, read_pod, read_pods, scheduled_condition
from tests.adjuster_world import run_settings
from tests.unit.adjuster_objects import NOW, node, pod
from tests.unit.controller_pass import DECISION_OF_MODE, Decided, cache_holding, pass_to_the_decision


def test_a_fact_is_read_once_per_view_and_again_for_a_new_view() -> None:
    reads: list[str] = []

    def name_of(view: Any, *helpers: Any) -> str:
        reads.append(view.meta.name)
        return view.meta.name

    obj = pod("a", "0.5")
    view = read_pod(obj)
    assert [pod_fact(view, name_of), pod_fact(view, name_of, {"a cache": 1})] == ["a", "a"] and reads == ["a"]
    assert pod_fact(read_pod(obj), name_of) == "a" and reads == ["a", "a"]  # a new view reads it again


def test_a_fact_that_reads_as_none_is_read_once() -> None:
    view = read_pod(pod("a", "0.5", conditions=[]))
    reads: list[Any] = []

    def condition(v: Any) -> Any:
        reads.append(1)
        return scheduled_condition(v)

    assert pod_fact(view, condition) is None and pod_fact(view, condition) is None and len(reads) == 1


def test_views_are_kept_for_the_same_objects_only() -> None:
    kept = KeptPodViews()
    a, b, c = pod("a", "0.5"), pod("b", "0.5"), pod("c", "0.5")
    first = kept.pods([a, b, "not an object", c])
    assert [v.meta.name for v in first] == ["a", "b", "c"]
    b_again = copy.deepcopy(b)  # what the cache holds after a watch event changed b: another object, maybe equal
    second = kept.pods([a, b_again, None])
    assert second[0] is first[0] and second[1] is not first[1] and second[1].obj is b_again
    assert len(kept) == 2  # c is gone from the cache: its view with it
    assert kept.pods([c])[0] is not first[2]


def test_an_object_changed_in_place_with_a_new_resource_version_is_read_again() -> None:
    """The cache never changes an object in place; were something to apply a watch event so, the new
    resourceVersion that comes with every change makes it a new view rather than a decision on what the pod was."""
    kept = KeptPodViews()
    obj = pod("a", "0.5")
    obj["metadata"]["resourceVersion"] = "10"
    first = kept.pods([obj])[0]
    assert kept.pods([obj])[0] is first  # unchanged: the same view
    obj["metadata"]["resourceVersion"] = "11"
    obj["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "3"}}
    again = kept.pods([obj])[0]
    assert again is not first and again.obj is obj
    assert kept.pods([obj])[0] is again  # and kept from then on


def _cluster() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    pods = [pod(f"p{i}", ("0.5", "0.25", "0.75")[i % 3], nodeSelector={"pool": ("a", "b")[i % 2]},
                containers=[{"name": "main", "resources": {"requests": {"cpu": "1", "memory": "2Gi"}}}]) for i in range(12)]
    busy = [pod(f"busy-{i}", node_name=f"n{i}", phase="Running", scheduler=None, conditions=[],
                containers=[{"name": "main", "resources": {"requests": {"nvidia.com/gpu": "8", "cpu": "2"}}}]) for i in range(4)]
    nodes = [node(f"n{i}", labels={"pool": ("a", "b")[i % 2]}) for i in range(4)]
    return pods + busy, nodes


def test_a_pass_on_kept_views_reads_an_unchanged_pods_requests_once_and_decides_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    reads: list[str] = []
    real = inventory.pod_resource_requests
    monkeypatch.setattr(inventory, "pod_resource_requests", lambda spec: reads.append(spec["containers"][0]["name"]) or real(spec))
    pods, nodes = _cluster()
    kept = KeptPodViews()
    first = decide(ClusterSnapshot.read(pods, nodes, NOW, pod_views=kept.pods), RunSettings())
    reads_first = len(reads)
    assert reads_first >= 12
    again = decide(ClusterSnapshot.read(pods, nodes, NOW, pod_views=kept.pods), RunSettings())
    assert len(reads) == reads_first  # nothing read again
    changed = copy.deepcopy(pods[0])
    changed["spec"]["containers"][0]["name"] = "changed"
    changed["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "3"
    after = decide(ClusterSnapshot.read([changed, *pods[1:]], nodes, NOW, pod_views=kept.pods), RunSettings())
    assert reads[reads_first:] == ["changed"]
    fresh = decide(ClusterSnapshot.read([changed, *pods[1:]], nodes, NOW, pod_views=read_pods), RunSettings())
    assert again.decision == first.decision and after.decision == fresh.decision
    assert after.decision != first.decision  # the change is seen: the pod asks for more CPU
    assert first.decision.create


@pytest.mark.parametrize("mode", ["placeholder", "provisioning-request"])
def test_the_controller_keeps_the_views_of_the_objects_its_cache_kept(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    snapshots: list[ClusterSnapshot] = []

    def decision(snapshot: ClusterSnapshot, *_: Any, **__: Any) -> Any:
        snapshots.append(snapshot)
        raise Decided

    monkeypatch.setattr(controller_module, DECISION_OF_MODE[mode], decision)
    controller = Controller(run_settings(), kube=None)  # type: ignore[arg-type] - the pass stops before any API call
    objects, node_objects = _cluster()
    pods, nodes = cache_holding(*objects), cache_holding(*node_objects)

    def one_pass() -> dict[str, Any]:
        pass_to_the_decision(controller, mode, pods, nodes)
        return {v.meta.name: v for v in snapshots[-1].pods}

    first = one_pass()
    changed = copy.deepcopy(objects[1])
    changed["metadata"]["annotations"]["gpu-fraction"] = "0.3"
    pods._apply("MODIFIED", changed)
    pods._apply("DELETED", objects[2])
    second = one_pass()
    assert second["p0"] is first["p0"] and second["p1"] is not first["p1"] and "p2" not in second
    assert second["p1"].meta.annotations["gpu-fraction"] == "0.3"


def test_a_term_that_ends_lets_go_of_its_caches_and_the_views_it_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """A replica that stops leading keeps running as a standby: it held every pod of the cluster, twice, until the
    next term replaced them."""
    from types import SimpleNamespace

    controller = Controller(run_settings(), kube=None)  # type: ignore[arg-type] - nothing reaches the API here
    objects, _ = _cluster()
    cache = cache_holding(*objects)
    cache.thread = threading.Thread(target=lambda: None)  # it lists nothing: the objects are in it already
    monkeypatch.setattr(controller, "_caches", lambda halt, changed: SimpleNamespace(all=[cache]))
    during: list[tuple[int, int]] = []

    def reconcile(*_: Any) -> None:
        controller._pod_views.pods(cache.snapshot())
        during.append((len(controller._informers), len(controller._pod_views)))

    monkeypatch.setattr(controller, "_reconcile_until_stopped", reconcile)
    controller._lead_term(threading.Event())
    assert during == [(1, len(objects))]
    assert controller._informers == [] and len(controller._pod_views) == 0 and not controller.leading.is_set()
