"""CPU, memory and the other resources the pods request, next to their GPU shares.

A placeholder that asks for GPUs alone brings up a node with the GPUs but
maybe not the CPU or memory its pods need; those pods then wait for the
same node's free GPUs forever. These rows hold the plan, the reconcile and
the placeholder pod to what a node can really take.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from raybridge.adjuster.decision import consts
from raybridge.adjuster.decision.scale_adjuster import placeholder_manifest, read_placeholder
from raybridge.adjuster.decision.settings import RunSettings
from raybridge.adjuster.decision.settings import AdjusterSettings
from raybridge.adjuster.decision.plan import Placeholder, plan_placeholders
from raybridge.core.inventory import pod_resource_requests
from raybridge.core.views import read_pod
from raybridge.adjuster.decision.placeholders import PROVIDED, ExistingPlaceholder, PlannedPlaceholder
from raybridge.adjuster.decision.reconcile import reconcile
from tests.unit.adjuster_objects import NOW, node, pod

SETTINGS = AdjusterSettings(node_gpus=8)


def asking(name: str, fraction: str, cpu: str = "0", memory: str = "0", **kw: Any) -> dict[str, Any]:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v != "0"}
    return pod(name, fraction, containers=[{"name": "main", "image": "ubuntu", "resources": {"requests": requests}}], **kw)


# (case, containers, init containers, pod-level requests, overhead, expected {name: thousandths})
REQUEST_ROWS = [
    ("containers add up", [{"cpu": "500m", "memory": "1Gi"}, {"cpu": "2"}], [], None, None, {"cpu": 2500, "memory": 2**30 * 1000}),
    ("an init container alone needs more", [{"cpu": "1"}], [({"cpu": "4"}, None)], None, None, {"cpu": 4000}),
    ("a sidecar runs beside the containers and the later init containers",
     [{"cpu": "1"}], [({"cpu": "1"}, "Always"), ({"cpu": "3"}, None)], None, None, {"cpu": 4000}),
    ("pod-level requests replace the containers' cpu and memory", [{"cpu": "1", "memory": "1Gi"}], [], {"cpu": "3"}, None,
     {"cpu": 3000, "memory": 2**30 * 1000}),
    ("the runtime's overhead is added", [{"cpu": "1"}], [], None, {"cpu": "250m"}, {"cpu": 1250}),
    ("GPUs are not carried, other extended resources are", [{"nvidia.com/gpu": "1", "example.com/nic": "2"}], [], None, None,
     {"example.com/nic": 2000}),
]


@pytest.mark.parametrize("case,containers,inits,pod_level,overhead,expected", REQUEST_ROWS, ids=[r[0] for r in REQUEST_ROWS])
def test_pod_requests_are_counted_as_the_scheduler_counts_them(case, containers, inits, pod_level, overhead, expected):
    spec: dict[str, Any] = {"containers": [{"name": f"c{i}", "resources": {"requests": r}} for i, r in enumerate(containers)]}
    spec["initContainers"] = [{"name": f"i{i}", "resources": {"requests": r}, **({"restartPolicy": p} if p else {})} for i, (r, p) in enumerate(inits)]
    if pod_level:
        spec["resources"] = {"requests": pod_level}
    if overhead:
        spec["overhead"] = overhead
    assert dict(pod_resource_requests(spec)) == expected


def test_pods_that_need_more_cpu_than_a_node_has_beside_their_gpus_get_nodes_for_it():
    # Eight pods of a quarter GPU and 40 CPUs each: two GPUs' worth, but a 96-CPU node holds two of them.
    pods = [asking(f"p{i}", "0.25", cpu="40") for i in range(8)]
    result = plan_placeholders(pods, [node("n", 8)], AdjusterSettings(), NOW)
    assert [(p.gpus, dict(p.resources)["cpu"], len(p.pods)) for p in result.placeholders] == [(1, 80_000, 2)] * 4
    assert sorted(q for p in result.placeholders for q in p.pods) == sorted(f"team/p{i}" for i in range(8))


def test_a_pod_no_node_of_its_group_can_hold_is_ignored_with_the_reason():
    result = plan_placeholders([asking("huge", "0.5", memory="2Ti"), asking("fits", "0.5", memory="1Gi")], [node("n", 8)], AdjusterSettings(), NOW)
    assert [p.pods for p in result.placeholders] == [("team/fits",)]
    [ignored] = result.ignored
    assert ignored.code == "too-large" and "2Ti memory" in ignored.reason and "1Ti" in ignored.reason


def test_daemon_set_pods_on_a_node_of_the_group_take_their_share_of_every_new_node():
    daemon = pod("agent", None, node_name="n", phase="Running", scheduler=None,
                 containers=[{"name": "a", "image": "x", "resources": {"requests": {"cpu": "17"}}}])
    daemon["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "uid": "u", "controller": True}]
    pods = [asking(f"p{i}", "0.25", cpu="40") for i in range(4)]
    result = plan_placeholders([daemon, *pods], [node("n", 8)], AdjusterSettings(), NOW)
    assert [len(p.pods) for p in result.placeholders] == [1] * 4  # 96 - 17 = 79 CPUs: two pods of 40 no longer fit one node


def test_a_provided_placeholder_does_not_hold_pods_its_node_has_no_cpu_for():
    """Its node has 6 GPUs free but 16 CPUs: the 6 pods of 40 CPUs it was made for are asked for again at once."""
    landed = [asking(f"p{i}", "0.25", cpu="40", node_name="n1", phase="Running") for i in range(2)]
    waiting = [asking(f"p{i}", "0.25", cpu="40") for i in range(2, 8)]
    provided = ExistingPlaceholder("a", plan_placeholders(waiting, None, SETTINGS, NOW).placeholders[0].group, 2, PROVIDED,
                                   tuple(f"team/p{i}" for i in range(8)), NOW - timedelta(seconds=5), "n1")
    result = reconcile([*landed, *waiting], [node("n1", 8)], [provided], SETTINGS, NOW, provision_timeout_seconds=300, name_prefix="rb")
    assert result.covered_pods == frozenset()
    assert sorted(len(p.placeholder.pods) for p in result.create) == [2, 2, 2]


def test_the_placeholder_asks_for_gpus_alone_and_records_its_pods_requests():
    """The autoscalers see the pods' CPU and memory on the pods themselves: asked for again, they were doubled. What
    the pods need beside their GPU shares is recorded on the placeholder and read back as its room."""
    placeholder = Placeholder(gpus=2, resource_key="nvidia.com/gpu", pods=("team/a", "team/b"),
                              resources=(("cpu", 80_000), ("example.com/nic", 2000), ("memory", 64 * 2**30 * 1000)))
    manifest = placeholder_manifest(PlannedPlaceholder("rb-x", placeholder), RunSettings())
    resources = manifest["spec"]["containers"][0]["resources"]
    assert resources == {
        "requests": {"nvidia.com/gpu": "2", "cpu": "2m", "memory": "8Mi"},
        "limits": {"nvidia.com/gpu": "2", "cpu": "10m", "memory": "16Mi"},
    }
    assert read_placeholder(read_pod(manifest)).resources == placeholder.resources
    small = placeholder_manifest(PlannedPlaceholder("rb-y", Placeholder(gpus=1, resource_key="nvidia.com/gpu", pods=("team/a",))), RunSettings())
    assert small["spec"]["containers"][0]["resources"]["requests"] == {"nvidia.com/gpu": "1", "cpu": "1m", "memory": "8Mi"}
    assert read_placeholder(read_pod(small)).resources == ()


def test_larger_placeholders_ask_for_more_cpu_so_the_autoscalers_pack_them_largest_first():
    """cluster-autoscaler orders pending pods by their CPU and memory before packing them onto new nodes
    (estimator/decreasing_pod_orderer.go), Karpenter by CPU then memory (scheduling/queue.go): equal requests
    left the order to chance, and smallest first took a node more."""
    def cpu(gpus: int) -> tuple[str, str]:
        manifest = placeholder_manifest(PlannedPlaceholder("rb-z", Placeholder(gpus=gpus, resource_key="nvidia.com/gpu", pods=("team/a",))), RunSettings())
        resources = manifest["spec"]["containers"][0]["resources"]
        return resources["requests"]["cpu"], resources["limits"]["cpu"]

    assert [cpu(g) for g in (1, 2, 8, 16)] == [("1m", "10m"), ("2m", "10m"), ("8m", "10m"), ("16m", "16m")]


# (case, the recorded annotation, the room read back): our own annotation, read without trusting it
RECORDED = [
    ("absent: a placeholder made before the pods' requests were recorded asked for them", None, (("cpu", 80_000),)),
    ("not JSON", "{cpu", (("cpu", 80_000),)),
    ("not a mapping", "[1, 2]", (("cpu", 80_000),)),
    ("amounts that are no counts are dropped", '{"cpu": 4000, "memory": "8Gi", "x": true, "y": -1}', (("cpu", 4000),)),
]


@pytest.mark.parametrize("case, recorded, expected", RECORDED, ids=[r[0] for r in RECORDED])
def test_the_recorded_pod_requests_are_read_without_trusting_them(case: str, recorded: str | None, expected: tuple) -> None:
    old = placeholder_manifest(PlannedPlaceholder("rb-old", Placeholder(gpus=1, resource_key="nvidia.com/gpu", pods=("team/a",))), RunSettings())
    old["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "80"  # as the earlier placeholders asked
    annotations = old["metadata"]["annotations"]
    annotations.pop(consts.POD_REQUESTS_ANNOTATION)
    if recorded is not None:
        annotations[consts.POD_REQUESTS_ANNOTATION] = recorded
    got = dict(read_placeholder(read_pod(old)).resources)
    assert {k: v for k, v in got.items() if k == "cpu" or k in dict(expected)} == dict(expected), case
