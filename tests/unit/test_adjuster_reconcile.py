"""adjuster/decision/reconcile.py and adjuster/decision/scale_adjuster.py: desired against existing placeholders, offline.

One row per situation the controller meets: what it creates, keeps and
deletes, and why. The e2e tests show the same rules against a real API server: with the simulated
cluster-autoscaler and KAI (tests/e2e/test_adjuster_ca_on_real_api.py and the modules on its stack), and with the
real KAI and Karpenter (test_adjuster_real.py, test_adjuster_karpenter_real.py).
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta
from typing import Any, Optional

import pytest

from raybridge.adjuster.decision import consts
from raybridge.adjuster.decision.demand import ClusterSnapshot
from raybridge.core.views import read_node, read_pod
from raybridge.adjuster.decision.scale_adjuster import decide, decide_requests, placeholder_manifest, read_placeholder
from raybridge.adjuster.decision.settings import RunSettings
from raybridge.adjuster.decision.settings import AdjusterSettings
from raybridge.adjuster.decision.plan import Placeholder, plan_placeholders
from raybridge.core.names import label_value_problem, name_problem
from raybridge.adjuster.decision.batch_window import BatchWindow
from raybridge.adjuster.decision.placeholders import DELETE_CAPACITY_TAKEN, DELETE_DEMAND_GONE, DELETE_DOUBLE_COUNTED, DELETE_FINISHED, DELETE_GROWN, DELETE_HELD_ELSEWHERE, DELETE_PODS_LANDED, DELETE_TIMED_OUT, FINISHED, PENDING, PROVIDED, TERMINATING, ExistingPlaceholder, PlannedPlaceholder
from raybridge.adjuster.decision.reconcile import reconcile
from tests.unit.adjuster_objects import NOW, node, pod

SETTINGS = AdjusterSettings(node_gpus=8)
GROUP = plan_placeholders([pod("x", "0.5")], None, SETTINGS, NOW).placeholders[0].group
PREFIX = "rb"
TIMEOUT = 300.0


def halves(n: int, start: int = 0, **kw: Any) -> list[dict[str, Any]]:
    return [pod(f"p{i}", "0.5", **kw) for i in range(start, start + n)]


def sixes(n: int, start: int = 0, **kw: Any) -> list[dict[str, Any]]:
    return [pod(f"p{i}", "0.6", **kw) for i in range(start, start + n)]


def keys(n: int, start: int = 0) -> tuple[str, ...]:
    return tuple(f"team/p{i}" for i in range(start, start + n))


def ph(name: str, gpus: int, state: str, pods: tuple[str, ...], provided_ago: float | None = None) -> ExistingPlaceholder:
    at = NOW - timedelta(seconds=provided_ago) if provided_ago is not None else None
    return ExistingPlaceholder(name, GROUP, gpus, state, pods, at)


# (case, pods, existing, max GPUs, created GPUs, deleted {name: reason}, kept, covered pods)
ROWS = [
    ("a burst with nothing yet: the plan is created", halves(20), [], None, [8, 2], {}, [], 0),
    ("pending placeholders for the same pods: kept, nothing more", halves(20),
     [ph("a", 8, PENDING, keys(16)), ph("b", 2, PENDING, keys(4, 16))], None, [], {}, ["a", "b"], 0),
    ("new pods beside a pending placeholder get their own, it is not resized", halves(6),
     [ph("a", 2, PENDING, keys(4))], None, [1], {}, ["a"], 0),
    ("a pending placeholder whose pods all landed or went: deleted", [],
     [ph("a", 1, PENDING, ("team/gone",))], None, [], {"a": DELETE_PODS_LANDED}, [], 0),
    ("its pods went, but newer pods of its group fit the GPU it asked for: kept for them, none created", halves(2),
     [ph("a", 1, PENDING, ("team/gone",))], None, [], {}, ["a"], 0),
    ("its pods land, best fit and oldest first, in the room an older placeholder's GPUs leave: deleted, none created", halves(2),
     [ph("a", 2, PENDING, keys(1)), ph("b", 1, PENDING, keys(1, 1))], None, [], {"b": DELETE_HELD_ELSEWHERE}, ["a"], 0),
    ("waves: each wave's pods fill the room the earlier ones leave, then the rest get one new placeholder",
     [pod(f"p{i}", "0.3") for i in range(7)],
     [ph("a", 1, PENDING, keys(2)), ph("b", 1, PENDING, keys(2, 2))], None, [1], {}, ["a", "b"], 0),
    ("a pending placeholder whose pods wait but count no more (quota): deleted",
     [pod("q0", "0.5", message="OverLimit: queue quota has reached the allowable limit")],
     [ph("a", 1, PENDING, ("team/q0",))], None, [], {"a": DELETE_DEMAND_GONE}, [], 0),
    ("capacity brought up counts against its waiting pods: no second scale-up", halves(16),
     [ph("a", 8, PROVIDED, keys(16), provided_ago=5)], None, [], {}, ["a"], 16),
    ("brought up, but its pods did not land in time: deleted, the pods planned again", halves(16),
     [ph("a", 8, PROVIDED, keys(16), provided_ago=TIMEOUT + 1)], None, [8], {"a": DELETE_TIMED_OUT}, [], 0),
    ("brought up and its pods landed: deleted", halves(4, node_name="n1"),
     [ph("a", 2, PROVIDED, keys(4), provided_ago=5)], None, [], {"a": DELETE_PODS_LANDED}, [], 0),
    ("ended without a node: deleted", [], [ph("a", 1, FINISHED, ())], None, [], {"a": DELETE_FINISHED}, [], 0),
    ("stuck terminating: ignored, and its name is skipped", halves(4),
     [ph(f"{PREFIX}-{GROUP}-2g-0", 2, TERMINATING, keys(4))], None, [2], {}, [], 0),
    ("the cap counts GPUs already brought up: 8 up, 1 more under a cap of 9", halves(20),
     [ph("a", 8, PROVIDED, keys(16), provided_ago=5)], 9, [1], {}, ["a"], 16),
    ("a cap reached by GPUs already brought up: nothing more", halves(20),
     [ph("a", 8, PROVIDED, keys(16), provided_ago=5)], 8, [], {}, ["a"], 16),
    ("the cap leaves room: the rest is asked for", halves(20),
     [ph("a", 8, PROVIDED, keys(16), provided_ago=5)], 10, [2], {}, ["a"], 16),
    ("pending and provided together: only uncovered pods get more", halves(22),
     [ph("a", 8, PROVIDED, keys(16), provided_ago=5), ph("b", 2, PENDING, keys(4, 16))], None, [1], {}, ["a", "b"], 16),
    # Pods arriving in waves: the room a pending placeholder's pods leave on its whole GPUs holds later pods.
    ("a later pod fits the slack of a pending placeholder: nothing more", halves(6),
     [ph("a", 3, PENDING, keys(5))], None, [], {}, ["a"], 0),
    ("a later wave bigger than the slack: only the rest is asked for", halves(10),
     [ph("a", 3, PENDING, keys(5))], None, [2], {}, ["a"], 0),
    ("pods of another group do not fill the slack", halves(5) + [pod("s0", "0.5", nodeSelector={"pool": "other"})],
     [ph("a", 3, PENDING, keys(5))], None, [1], {}, ["a"], 0),
    ("once provided, the slack still covers the later pods until they land", halves(6),
     [ph("a", 3, PROVIDED, keys(5), provided_ago=5)], None, [], {}, ["a"], 6),
    ("a provided slack holds no pod another pending placeholder was made for", halves(7),
     [ph("a", 3, PROVIDED, keys(5), provided_ago=5), ph("b", 1, PENDING, keys(2, 5))], None, [], {}, ["a", "b"], 5),
]


@pytest.mark.parametrize("case,pods,existing,cap,created,deleted,kept,covered", ROWS, ids=[r[0] for r in ROWS])
def test_reconcile(case, pods, existing, cap, created, deleted, kept, covered):
    settings = AdjusterSettings(node_gpus=8, max_total_gpus=cap)
    result = reconcile(pods, None, existing, settings, NOW, provision_timeout_seconds=TIMEOUT, name_prefix=PREFIX)
    assert sorted((p.placeholder.gpus for p in result.create), reverse=True) == created
    assert dict(result.delete) == deleted
    assert list(result.keep) == kept
    assert len(result.covered_pods) == covered
    names = [p.name for p in result.create] + [e.name for e in existing]
    assert len(names) == len(set(names))  # never a name in use, terminating ones included


def pending(name: str, gpus: int, pods: tuple[str, ...], resources: Any = None) -> ExistingPlaceholder:
    """A pending placeholder pod, as `read_placeholder` reads one: the autoscaler packs it onto a node."""
    return ExistingPlaceholder(name, GROUP, gpus, PENDING, pods, resources=resources, packed_onto_nodes=True)


def cpu_pods(n: int, cpu: str) -> list[dict[str, Any]]:
    return [pod(f"p{i}", "0.5", containers=[{"name": "main", "image": "ubuntu", "resources": {"requests": {"cpu": cpu}}}])
            for i in range(n)]


# (case, pods, existing, node GPUs (None: not known), nodes, created GPUs, deleted, kept)
# The autoscaler sees only what placeholders ask for: when later pods will use more of a pending placeholder's node,
# one placeholder asking for all of them replaces it (one per node on its way: any hinting order fits them).
PENDING_ROWS = [
    ("a burst seen in two passes: 8 in place of the first 5, 22 more GPUs in new placeholders (4 nodes)",
     sixes(30), [pending("a", 5, keys(5))], 8, None, [8, 8, 8, 6], {"a": DELETE_GROWN}, []),
    ("a 1-GPU wave, then 10 pods of 0.9: 8 in place of the 1, 3 more; counted without asking, the autoscaler "
     "packed the 3 beside the 1 (one node where two were needed)",
     [pod(f"p{i}", "0.9") for i in range(11)], [pending("a", 1, keys(1))], 8, None, [8, 3], {"a": DELETE_GROWN}, []),
    ("a later pod fits the GPUs the placeholder asked for: nothing more", halves(4), [pending("a", 2, keys(3))], 8, None, [], {}, ["a"]),
    ("two on one node: the later pods land on the older one's GPUs, the later one asks for nothing more and goes",
     halves(4), [pending("a", 2, keys(2)), pending("b", 1, keys(2, 2))], 8, None, [], {"b": DELETE_HELD_ELSEWHERE}, ["a"]),
    ("two on one node that holds more than both ask for: one placeholder for all replaces both",
     halves(10), [pending("a", 2, keys(4)), pending("b", 1, keys(2, 4))], 8, None, [5], {"a": DELETE_GROWN, "b": DELETE_GROWN}, []),
    ("two that do not share a node (5 and 5 of 8): the scheduler fills the first node first, which grows to 8",
     sixes(12), [pending("a", 5, keys(5)), pending("b", 5, keys(5, 5))], 8, None, [8], {"a": DELETE_GROWN}, ["b"]),
    ("a cap leaves no room to grow: the later pods are planned under it", halves(8), [pending("a", 2, keys(4))], 8, None, [], {}, ["a"]),
    ("the node's size not known (no node, no --node-gpus): its own GPUs only", halves(6), [pending("a", 2, keys(4))], None, None, [1], {}, ["a"]),
    ("a known node of the group limits the other resources: 96 CPUs hold 6 pods of 16, the rest gets a node",
     cpu_pods(8, "16"), [pending("a", 1, keys(2))], None, [node("n1", 8)], [3, 1], {"a": DELETE_GROWN}, []),
    ("a ProvisioningRequest: credited as the GPUs it asked for", halves(6),
     [ph("a", 2, PENDING, keys(4))], 8, None, [1], {}, ["a"]),
]


@pytest.mark.parametrize("case,pods,existing,node_gpus,nodes,created,deleted,kept", PENDING_ROWS, ids=[r[0] for r in PENDING_ROWS])
def test_a_pending_placeholder_stands_for_the_gpus_it_asks_for(case, pods, existing, node_gpus, nodes, created, deleted, kept):
    settings = AdjusterSettings(node_gpus=node_gpus, max_total_gpus=2 if "cap" in case else None)
    result = reconcile(pods, nodes, existing, settings, NOW, provision_timeout_seconds=TIMEOUT, name_prefix=PREFIX)
    assert sorted((p.placeholder.gpus for p in result.create), reverse=True) == created
    assert dict(result.delete) == deleted
    assert list(result.keep) == kept
    covered = {k for p in result.create for k in p.placeholder.pods}
    assert not covered & {k for ph in existing if ph.name in kept for k in ph.pods}  # a pod stands in one placeholder


def test_a_nodes_gpus_are_credited_once():
    """Placeholders exit once scheduled, so a second can land on the GPUs the first brought up."""
    nodes = [node("n1", 8)]
    first = ExistingPlaceholder("a", GROUP, 8, PROVIDED, keys(16), NOW - timedelta(seconds=10), "n1")
    second = ExistingPlaceholder("b", GROUP, 2, PROVIDED, keys(4, 16), NOW - timedelta(seconds=5), "n1")
    result = reconcile(halves(20), nodes, [second, first], SETTINGS, NOW, provision_timeout_seconds=TIMEOUT, name_prefix=PREFIX)
    assert dict(result.delete) == {"b": DELETE_DOUBLE_COUNTED}
    assert result.keep == ("a",) and len(result.covered_pods) == 16
    assert [p.placeholder.gpus for p in result.create] == [2]  # the other pods are asked for again


def test_a_node_with_room_credits_both():
    nodes = [node("n1", 8)]
    both = [ExistingPlaceholder("a", GROUP, 4, PROVIDED, keys(8), NOW - timedelta(seconds=10), "n1"),
            ExistingPlaceholder("b", GROUP, 4, PROVIDED, keys(8, 8), NOW - timedelta(seconds=5), "n1")]
    result = reconcile(halves(16), nodes, both, SETTINGS, NOW, provision_timeout_seconds=TIMEOUT, name_prefix=PREFIX)
    assert result.delete == () and result.create == () and len(result.covered_pods) == 16


def whole_gpu_pod(name: str, gpus: int, node_name: str) -> dict[str, Any]:
    return pod(name, scheduler=None, node_name=node_name, phase="Running",
               containers=[{"name": "main", "image": "ubuntu", "resources": {"requests": {"nvidia.com/gpu": str(gpus)}}}])


# (case, pods bound to n1 (not the placeholder's), created GPUs, deleted {name: reason}, kept, covered pods)
# One placeholder "a" (8 GPUs, provided on the 8-GPU node n1) for 8 waiting pods of 0.6 GPU, which need a GPU each.
TAKEN_ROWS = [
    ("its node is free: its pods wait for it", [], [], {}, ["a"], 8),
    ("other pods filled its node: its pods are asked for again at once",
     sixes(8, 100, node_name="n1", phase="Running"), [8], {"a": DELETE_CAPACITY_TAKEN}, [], 0),
    ("other pods took 5 of its GPUs: the 3 left hold 3 pods, the other 5 are asked for again",
     sixes(5, 100, node_name="n1", phase="Running"), [5], {}, ["a"], 3),
    ("finished pods hold nothing", sixes(8, 100, node_name="n1", phase="Succeeded"), [], {}, ["a"], 8),
    ("a whole-GPU pod took 6 of its GPUs", [whole_gpu_pod("big", 6, "n1")], [6], {}, ["a"], 2),
    ("a whole-GPU pod took all of its GPUs", [whole_gpu_pod("big", 8, "n1")], [8], {"a": DELETE_CAPACITY_TAKEN}, [], 0),
]


@pytest.mark.parametrize("case,landed,created,deleted,kept,covered", TAKEN_ROWS, ids=[r[0] for r in TAKEN_ROWS])
def test_a_provided_placeholder_is_credited_only_the_room_its_node_has_left(case, landed, created, deleted, kept, covered):
    """A placeholder exits once scheduled: any pod may then take the GPUs it brought up."""
    provided = ExistingPlaceholder("a", GROUP, 8, PROVIDED, keys(8), NOW - timedelta(seconds=5), "n1")
    result = reconcile([*landed, *sixes(8)], [node("n1", 8)], [provided], SETTINGS, NOW,
                       provision_timeout_seconds=TIMEOUT, name_prefix=PREFIX)
    assert sorted((p.placeholder.gpus for p in result.create), reverse=True) == created
    assert dict(result.delete) == deleted
    assert list(result.keep) == kept
    assert len(result.covered_pods) == covered


# (case, pods on its node besides its own 4 (landed), newcomers waiting, kept, deleted, covered, GPUs asked for)
LANDED_ROWS = [
    ("its pods landed, newer pods of its group fit the room on its node: kept for them, none asked for",
     [], 3, ["a"], {}, 3, 0),
    ("its pods landed and nothing else waits: deleted", [], 0, [], {"a": DELETE_PODS_LANDED}, 0, 0),
    ("its pods landed, its node is full: deleted, the newer pods asked for", [whole_gpu_pod("big", 4, "n1")], 3,
     [], {"a": DELETE_PODS_LANDED}, 0, 3),
]


@pytest.mark.parametrize("case,others,newcomers,kept,deleted,covered,asked", LANDED_ROWS, ids=[r[0] for r in LANDED_ROWS])
def test_a_placeholder_whose_pods_landed_holds_newer_pods_its_node_has_room_for(case, others, newcomers, kept, deleted, covered, asked):
    own = sixes(4, node_name="n1", phase="Running")
    provided = ExistingPlaceholder("a", GROUP, 4, PROVIDED, keys(4), NOW - timedelta(seconds=5), "n1")
    result = reconcile([*own, *others, *sixes(newcomers, 10)], [node("n1", 8)], [provided], SETTINGS, NOW,
                       provision_timeout_seconds=TIMEOUT, name_prefix=PREFIX)
    assert list(result.keep) == kept and dict(result.delete) == deleted
    assert len(result.covered_pods) == covered
    assert sum(p.placeholder.gpus for p in result.create) == asked


# (case, pods already on its node, pods covered, GPUs asked for again)
AS_KNOWN_NOW_ROWS = [
    ("the node it brought up has room for all of them: all wait for it, none asked for", [], 4, 0),
    ("a whole-GPU pod took 6 of the node's 8 GPUs: 2 wait for it, 2 asked for again", [whole_gpu_pod("big", 6, "n1")], 2, 2),
    ("the node is full: its pods asked for again, it is deleted", [whole_gpu_pod("big", 8, "n1")], 0, 4),
]


@pytest.mark.parametrize("case,landed,covered,asked", AS_KNOWN_NOW_ROWS, ids=[r[0] for r in AS_KNOWN_NOW_ROWS])
def test_a_placeholder_covers_the_pods_its_node_holds_as_known_now(case, landed, covered, asked):
    """Asked for when GPU memory was unknown (0.1 each: one GPU for 4 pods); the node says 80 GiB: each pod needs
    just over half a GPU, so one GPU each; the room of the whole node it brought up counts, not only its one GPU."""
    nodes = [node("n1", 8, memory="81559")]
    pods = [*landed, *(pod(f"m{i}", memory="40960") for i in range(4))]
    provided = ExistingPlaceholder("a", GROUP, 1, PROVIDED, tuple(f"team/m{i}" for i in range(4)), NOW - timedelta(seconds=5), "n1")
    result = reconcile(pods, nodes, [provided], SETTINGS, NOW, provision_timeout_seconds=TIMEOUT, name_prefix=PREFIX)
    assert len(result.covered_pods) == covered
    assert sum(p.placeholder.gpus for p in result.create) == asked
    assert result.keep == (("a",) if covered else ())


def test_the_same_state_twice_decides_the_same():
    """Idempotence: what one pass creates, the next pass (seeing it pending) keeps."""
    first = reconcile(halves(20), None, [], SETTINGS, NOW, provision_timeout_seconds=TIMEOUT, name_prefix=PREFIX)
    existing = [ExistingPlaceholder(p.name, p.placeholder.group or "", p.placeholder.gpus, PENDING, p.placeholder.pods)
                for p in first.create]
    second = reconcile(halves(20), None, existing, SETTINGS, NOW, provision_timeout_seconds=TIMEOUT, name_prefix=PREFIX)
    assert second.create == () and second.delete == ()
    assert sorted(second.keep) == sorted(e.name for e in existing)


def placeholder_pod(name: str = "rb-x", *, labels: dict[str, str] | None = None, node: str | None = None,
                    phase: str = "Pending", deleting: bool = False, pods: str = '["team/p0"]') -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name, "namespace": consts.DEFAULT_NAMESPACE,
        "labels": {consts.MANAGED_BY_LABEL: consts.MANAGED_BY_VALUE, consts.COMPONENT_LABEL: consts.PLACEHOLDER_COMPONENT,
                   consts.GROUP_LABEL: GROUP, consts.GPUS_LABEL: "2", **(labels or {})},
        "annotations": {consts.PODS_ANNOTATION: pods},
        "creationTimestamp": "2025-06-01T11:59:00Z",
    }
    if deleting:
        meta["deletionTimestamp"] = "2025-06-01T11:59:30Z"
    spec = {"nodeName": node} if node else {}
    conditions = [{"type": "PodScheduled", "status": "True", "lastTransitionTime": "2025-06-01T11:59:50Z"}] if node else []
    return {"metadata": meta, "spec": spec, "status": {"phase": phase, "conditions": conditions}}


# (case, pod, state, gpus, pods)
READ_ROWS = [
    ("unscheduled", placeholder_pod(), PENDING, 2, ("team/p0",)),
    ("bound and running", placeholder_pod(node="n1", phase="Running"), PROVIDED, 2, ("team/p0",)),
    ("finished on its node", placeholder_pod(node="n1", phase="Succeeded"), PROVIDED, 2, ("team/p0",)),
    ("failed without a node", placeholder_pod(phase="Failed"), FINISHED, 2, ("team/p0",)),
    ("being deleted", placeholder_pod(node="n1", deleting=True), TERMINATING, 2, ("team/p0",)),
    ("garbage annotation and label", placeholder_pod(labels={consts.GPUS_LABEL: "x"}, pods="{nope"), PENDING, 0, ()),
]


@pytest.mark.parametrize("case,obj,state,gpus,pods", READ_ROWS, ids=[r[0] for r in READ_ROWS])
def test_read_placeholder(case, obj, state, gpus, pods):
    found = read_placeholder(read_pod(obj))
    assert (found.state, found.gpus, found.pods) == (state, gpus, pods)


@pytest.mark.parametrize("node,phase,deleting", [(None, "Pending", False), ("n1", "Running", False), (None, "Failed", False), (None, "Pending", True)],
                         ids=["pending", "provided", "finished", "terminating"])  # fmt: skip
def test_every_state_carries_the_uid_the_controller_deletes_by(node, phase, deleting):
    obj = placeholder_pod(node=node, phase=phase, deleting=deleting)
    obj["metadata"]["uid"] = "uid-of-this-one"
    found = read_placeholder(read_pod(obj))
    assert found.uid == "uid-of-this-one"
    assert found == replace(found, uid="")  # not part of the decision: rows built without it still compare equal


def test_provided_time_is_when_it_was_scheduled():
    found = read_placeholder(read_pod(placeholder_pod(node="n1")))
    assert found.provided_at == NOW - timedelta(seconds=10)


def test_decide_tells_placeholders_from_workload_by_label_and_namespace():
    settings = RunSettings(planner=SETTINGS)
    mine = placeholder_pod("rb-mine", pods='["team/p0","team/p1","team/p2","team/p3"]')
    stranger = dict(placeholder_pod("rb-other"), metadata=dict(placeholder_pod("rb-other")["metadata"], namespace="elsewhere"))
    result = decide(ClusterSnapshot.read([*halves(4), mine, stranger], None, NOW), settings)
    assert [p.name for p in result.placeholders] == ["rb-mine"]
    assert result.decision.keep == ("rb-mine",) and result.decision.create == ()


def test_the_placeholder_pod_is_small_safe_and_below_every_workload():
    long_ns = "n" * 63
    planned = PlannedPlaceholder(
        f"{PREFIX}-{GROUP}-8g-0",
        Placeholder(gpus=8, resource_key="amd.com/gpu", pods=(f"{long_ns}/{'p' * 250}",), node_selector={"pool": "a"},
                    affinity={"nodeAffinity": {"x": 1}}, tolerations=({"key": "gpu", "operator": "Exists"},), group=GROUP),
    )
    manifest = placeholder_manifest(planned, RunSettings(priority_class="low", namespace="adj"))
    spec, meta = manifest["spec"], manifest["metadata"]
    container = spec["containers"][0]
    assert container["resources"]["requests"]["amd.com/gpu"] == container["resources"]["limits"]["amd.com/gpu"] == "8"
    assert spec["nodeSelector"] == {"pool": "a"} and spec["tolerations"] == [{"key": "gpu", "operator": "Exists"}]
    assert spec["affinity"] == {"nodeAffinity": {"x": 1}}
    assert spec["priorityClassName"] == "low" and spec["automountServiceAccountToken"] is False
    assert spec["securityContext"]["runAsNonRoot"] is True and container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    # a read-only root makes the NVIDIA toolkit's CDI hook fail the container's create on some toolkit versions (1.20.0)
    assert not container["securityContext"].get("readOnlyRootFilesystem")
    assert meta["namespace"] == "adj" and name_problem("Pod", meta["name"]) is None
    assert all(label_value_problem(v) is None for v in meta["labels"].values())


POOL_A = {"key": "pool", "operator": "In", "values": ["a"]}
ZONE = {"key": "zone", "operator": "Exists"}
PREFERRED = [{"weight": 1, "preference": {"matchExpressions": [ZONE]}}]


def required(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}


# (case, the group's affinity, the placeholder's affinity)
AFFINITY_ROWS = [
    ("no affinity: none", None, None),
    ("one term", {"nodeAffinity": required({"matchExpressions": [POOL_A]})}, {"nodeAffinity": required({"matchExpressions": [POOL_A]})}),
    ("two terms (ORed)", {"nodeAffinity": required({"matchExpressions": [POOL_A]}, {"matchExpressions": [ZONE]})},
     {"nodeAffinity": required({"matchExpressions": [POOL_A]}, {"matchExpressions": [ZONE]})}),
    ("preferred terms and pod affinity stay as they are", {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": PREFERRED},
                                                           "podAffinity": {"x": 1}},
     {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": PREFERRED}, "podAffinity": {"x": 1}}),
]


@pytest.mark.parametrize("case,group_affinity,expected", AFFINITY_ROWS, ids=[r[0] for r in AFFINITY_ROWS])
def test_a_placeholder_requires_nothing_of_a_node_that_a_node_groups_template_lacks(case, group_affinity, expected):
    """cluster-autoscaler builds a group's template from a live node and copies its labels (the adjuster's hold
    label too): a placeholder that required the hold label absent matched no template while a node of the
    group was held, and the group got no scale-up. The placeholder asks for what its pods ask for, no more."""
    planned = PlannedPlaceholder(f"{PREFIX}-{GROUP}-2g-0", Placeholder(gpus=2, resource_key="nvidia.com/gpu", pods=("team/p0",),
                                                                        affinity=group_affinity, group=GROUP))
    spec = placeholder_manifest(planned, RunSettings())["spec"]
    assert spec.get("affinity") == expected
    assert consts.HOLD_LABEL not in json.dumps(spec)
    assert planned.placeholder.affinity == group_affinity  # the plan's own value is not changed


@pytest.mark.realtime
def test_ten_thousand_pending_pods_reconcile_within_the_bound_of_a_plan():
    """The steady pass (every pod already has its pending placeholder) costs one plan, no more."""
    import time

    fractions = ["0.1", "0.25", "0.5", "0.3", "0.7"]
    pods = [pod(f"p{i}", fractions[i % 5], namespace=f"ns{i % 50}") for i in range(10_000)]

    def fastest(fn, runs=3):
        # This process's CPU time, not the wall clock: the parallel workers and the test clusters beside it
        # take the cores for seconds at a time, and a ratio of wall times then measures them.
        best = float("inf")
        for _ in range(runs):
            started = time.process_time()
            result = fn()
            best = min(best, time.process_time() - started)
        return best, result

    plan_time, _ = fastest(lambda: plan_placeholders(pods, None, SETTINGS, NOW))
    first_time, first = fastest(lambda: reconcile(pods, None, [], SETTINGS, NOW, provision_timeout_seconds=TIMEOUT, name_prefix=PREFIX))
    existing = [ExistingPlaceholder(p.name, p.placeholder.group or "", p.placeholder.gpus, PENDING, p.placeholder.pods) for p in first.create]
    steady_time, steady = fastest(lambda: reconcile(pods, None, existing, SETTINGS, NOW, provision_timeout_seconds=TIMEOUT, name_prefix=PREFIX))
    assert steady.create == () and len(steady.keep) == len(existing)
    assert first_time < 2 * plan_time + 0.5, (first_time, plan_time)
    assert steady_time < 2 * plan_time + 0.5, (steady_time, plan_time)


def test_gpus_filled_by_an_earlier_placeholders_pods_are_not_credited_again():
    """The first placeholder's pods landed on its node; a later one found those GPUs free before they did."""
    nodes = [node("n1", 8)]
    landed = [pod(f"s{i}", "0.6", node_name="n1", phase="Running") for i in range(8)]  # 8 x 0.6: 5 GPUs at least
    first = ExistingPlaceholder("a", GROUP, 8, PROVIDED, tuple(f"team/s{i}" for i in range(8)), NOW - timedelta(seconds=10), "n1")
    later = ExistingPlaceholder("b", GROUP, 6, PROVIDED, keys(12), NOW - timedelta(seconds=5), "n1")
    result = reconcile([*landed, *halves(12)], nodes, [first, later], SETTINGS, NOW, provision_timeout_seconds=TIMEOUT, name_prefix=PREFIX)
    assert dict(result.delete) == {"a": DELETE_PODS_LANDED, "b": DELETE_DOUBLE_COUNTED}
    assert sum(p.placeholder.gpus for p in result.create) == 6  # asked for again


# --- --mode provisioning-request: one waiting request per group, replaced when the demand changes ---------

REQUEST_SETTINGS = RunSettings(planner=SETTINGS, mode="provisioning-request", failed_backoff=60.0)


def request(name: str, pods: tuple[str, ...], *conditions: tuple[str, float]) -> dict[str, Any]:
    """A ProvisioningRequest of ours for `pods`, with (type, seconds ago) conditions set True."""
    return {
        "apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest",
        "metadata": {"name": name, "namespace": REQUEST_SETTINGS.namespace, "uid": name,
                     "labels": {consts.MANAGED_BY_LABEL: consts.MANAGED_BY_VALUE, consts.COMPONENT_LABEL: consts.REQUEST_COMPONENT,
                                consts.GROUP_LABEL: GROUP, consts.GPUS_LABEL: str(-(-len(pods) // 2))},
                     "annotations": {consts.PODS_ANNOTATION: json.dumps(sorted(pods))}},
        "spec": {"provisioningClassName": consts.DEFAULT_PROVISIONING_CLASS, "podSets": []},
        "status": {"conditions": [{"type": kind, "status": "True", "reason": kind, "message": "",
                                   "lastTransitionTime": (NOW - timedelta(seconds=ago)).strftime("%Y-%m-%dT%H:%M:%SZ")}
                                  for kind, ago in conditions]},
    }  # fmt: skip


# (case, pods, existing requests, created (pods, replaces), superseded, deleted)
REQUEST_ROWS = [
    ("nothing yet: one request for the group", halves(4), [], [(4, ())], [], []),
    ("the same demand: the waiting request is kept", halves(4), [request("old", keys(4))], [], [], []),
    ("more pods: one request for all of them replaces the waiting one", halves(6),
     [request("old", keys(4), ("Accepted", 1))], [(6, ("old",))], [], []),
    ("a crash between create and delete: the one matching the demand stays, the other goes", halves(6),
     [request("old", keys(4)), request("new", keys(6))], [], [], ["old"]),  # "new" holds every pod: "old" holds none
    ("the same crash, the old one first by name: both hold pods, the one matching the demand stays", halves(6),
     [request("a-old", keys(4)), request("b-new", keys(6))], [], ["a-old"], []),
    ("failed, within the backoff: neither replaced nor joined", halves(6),
     [request("old", keys(4), ("Failed", 5))], [], [], []),
    ("provisioned: its capacity counts; only the newcomers are asked for, nothing replaced", halves(10),
     [request("old", keys(8), ("Provisioned", 5))], [(2, ())], [], []),
    ("provisioned longer ago than the provision timeout: the scale-up was only requested then, it still counts", halves(4),
     [request("old", keys(4), ("Provisioned", 400))], [], [], []),
    ("short of capacity (Provisioned=False, CapacityIsNotFound): the autoscaler retries it, it still counts", halves(4),
     [request("old", keys(4), ("Accepted", 600))], [], [], []),
    ("booking expired: spent; its waiting pods are asked for again", halves(4),
     [request("old", keys(4), ("Provisioned", 700), ("BookingExpired", 100))], [(4, ())], [], ["old"]),
    ("capacity revoked: the same", halves(4),
     [request("old", keys(4), ("Provisioned", 30), ("CapacityRevoked", 1))], [(4, ())], [], ["old"]),
    ("fewer pods, fewer GPUs: a request for the smaller demand replaces the waiting one", halves(4),
     [request("old", keys(8), ("Accepted", 1))], [(4, ("old",))], [], []),
    ("fewer pods, the same GPUs: the waiting request is kept", halves(3), [request("old", keys(4))], [], [], []),
    ("other pods, the same GPUs: the waiting request is kept", halves(4), [request("old", keys(3))], [], [], []),
    ("a crash while shrinking: the one matching the demand stays, the bigger one goes", halves(4),
     [request("old", keys(8)), request("new", keys(4))], [], [], ["old"]),
    ("provisioned, and fewer pods: its capacity is up, nothing replaced", halves(4),
     [request("old", keys(8), ("Provisioned", 5))], [], [], []),
]


@pytest.mark.parametrize("case,pods,requests,created,superseded,deleted", REQUEST_ROWS, ids=[r[0] for r in REQUEST_ROWS])
def test_decide_requests(case, pods, requests, created, superseded, deleted):
    result = decide_requests(ClusterSnapshot.read(pods, None, NOW), requests, [], REQUEST_SETTINGS)
    assert [(len(p.pods), p.replaces) for p in result.create] == created
    assert list(result.superseded) == superseded
    assert [name for name, _ in result.decision.delete] == deleted
    for planned in result.create:
        assert planned.name not in {r["metadata"]["name"] for r in requests}


def _with_cpu(name: str, cpu: str, memory: str = "4Gi") -> dict[str, Any]:
    return pod(name, "0.5", containers=[{"name": "main", "image": "ubuntu", "resources": {"requests": {"cpu": cpu, "memory": memory}}}])


def test_a_requests_pods_ask_for_the_cpu_and_memory_of_the_pods_they_are_for():
    """cluster-autoscaler serves a request's pods and ordinary pods in alternate loops, so KAI's pods are never sized
    with the request: its PodTemplates carry their CPU and memory, so that the node type the request brings holds
    them (docs/adjuster.md). 20 halves of 10 CPUs: one 8-GPU placeholder for 16 pods, one of 2 GPUs for 4."""
    pods = [_with_cpu(f"p{i}", "10") for i in range(20)]
    result = decide_requests(ClusterSnapshot.read(pods, None, NOW), [], [], REQUEST_SETTINGS)
    [planned] = result.create
    asked = {t["metadata"]["name"].rsplit("-", 1)[-1]: t["template"]["spec"]["containers"][0]["resources"] for t in planned.templates}
    assert asked["8g"]["requests"] == {"nvidia.com/gpu": "8", "cpu": "160", "memory": "64Gi"}, asked
    assert asked["2g"]["requests"] == {"nvidia.com/gpu": "2", "cpu": "40", "memory": "16Gi"}, asked
    assert all(r["limits"]["cpu"] == r["requests"]["cpu"] and r["limits"]["memory"] == r["requests"]["memory"] for r in asked.values())


def test_placeholders_of_one_size_whose_pods_ask_for_different_cpu_are_pod_sets_of_their_own():
    """Two 8-GPU placeholders of one group, for pods of 10 CPUs and of 2: a template each, named apart."""
    pods = [_with_cpu(f"p{i:02d}", "10" if i < 16 else "2") for i in range(32)]
    result = decide_requests(ClusterSnapshot.read(pods, None, NOW), [], [], REQUEST_SETTINGS)
    [planned] = result.create
    asked = {t["metadata"]["name"]: t["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] for t in planned.templates}
    assert sorted(asked.values()) == ["160", "32"], asked
    assert sorted(name.split("-8g")[-1] for name in asked) == ["", "-2"], asked
    assert sorted(s["count"] for s in planned.request["spec"]["podSets"]) == [1, 1]


# --- KAI PodGroups: both modes pass them to the decision ----------------------------------------------


def pod_group(name: str, *reasons: str, namespace: str = "team") -> dict[str, Any]:
    conditions = [{"type": "UnschedulableOnNodePool", "status": "True", "reasons": [{"reason": r} for r in reasons]}] if reasons else []
    return {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup", "metadata": {"name": name, "namespace": namespace},
            "status": {"schedulingConditions": conditions}}


def grouped(name: str, group: str) -> dict[str, Any]:
    return pod(name, "0.5", annotations={"pod-group-name": group})


# (case, pods, PodGroups, pods asked for, quota-blocked pods)
POD_GROUP_ROWS = [
    ("no PodGroups read: every pod counts", [grouped("a", "pg-a"), pod("b", "0.5")], [], ["team/a", "team/b"], []),
    ("its PodGroup is over limit: left out", [grouped("a", "pg-a"), pod("b", "0.5")], [pod_group("pg-a", "OverLimit")], ["team/b"], ["team/a"]),
    ("its queue is gone: left out", [grouped("a", "pg-a")], [pod_group("pg-a", "QueueDoesNotExist")], [], ["team/a"]),
    ("a PodGroup with no quota verdict: counts", [grouped("a", "pg-a")], [pod_group("pg-a")], ["team/a"], []),
    ("a PodGroup of that name in another namespace: counts", [grouped("a", "pg-a")],
     [pod_group("pg-a", "OverLimit", namespace="other")], ["team/a"], []),
]


@pytest.mark.parametrize("case,pods,pod_groups,asked,blocked", POD_GROUP_ROWS, ids=[r[0] for r in POD_GROUP_ROWS])
def test_both_modes_leave_out_pods_their_pod_group_says_are_over_quota(case, pods, pod_groups, asked, blocked):
    snapshot = ClusterSnapshot.read(pods, None, NOW, pod_groups)
    placeholders = decide(snapshot, RunSettings(planner=SETTINGS))
    requests = decide_requests(snapshot, [], [], REQUEST_SETTINGS)
    assert sorted(p for c in placeholders.decision.create for p in c.placeholder.pods) == asked
    assert sorted(p for c in requests.create for p in c.pods) == asked
    for decision in (placeholders.decision, requests.decision):
        assert sorted(i.pod for i in decision.plan.ignored if i.code == "quota-blocked") == blocked


def reservation_pod(group: str, node_name: str) -> dict[str, Any]:
    """KAI's binder's reservation pod for one shared GPU (resource_reservation.go, createResourceReservationPod)."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"gpu-reservation-{node_name}-{group[:5]}", "namespace": "kai-resource-reservation",
                         "labels": {"app": "kai-resource-reservation", "runai-gpu-group": group},
                         "annotations": {"karpenter.sh/do-not-disrupt": "true"}},
            "spec": {"nodeName": node_name, "containers": [{"name": "resource-reservation", "image": "kai/resource-reservation",
                     "resources": {"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}}]},
            "status": {"phase": "Running", "conditions": [{"type": "PodScheduled", "status": "True"}]}}  # fmt: skip


def shared_pod(name: str, fraction: str, node_name: str, *groups: str) -> dict[str, Any]:
    """A GPU-sharing pod KAI bound: its GPU group label(s) as the binder writes them (updatePodGPUGroup)."""
    p = pod(name, fraction, node_name=node_name, phase="Running", devices=str(len(groups)) if len(groups) > 1 else None)
    p["metadata"]["labels"] = {"runai-gpu-group": groups[0]} if len(groups) == 1 else {f"runai-gpu-group/{g}": g for g in groups}
    return p


# (case, pods bound to an 8-GPU node, free room per GPU, largest first)
KAI_SHARED_ROWS = [
    ("one shared GPU with two halves: 7 GPUs free, the shared one full",
     [reservation_pod("g1", "n1"), shared_pod("s0", "0.5", "n1", "g1"), shared_pod("s1", "0.5", "n1", "g1")], [1] * 7 + [0]),
    ("one shared GPU with one half: 7 free and a half", [reservation_pod("g1", "n1"), shared_pod("s0", "0.5", "n1", "g1")],
     [1] * 7 + ["1/2"]),
    ("a pod on two shared GPUs", [reservation_pod("g1", "n1"), reservation_pod("g2", "n1"), shared_pod("w", "0.25", "n1", "g1", "g2")],
     [1] * 6 + ["3/4", "3/4"]),
    ("a reservation pod whose pod is still being bound: its GPU is free for shares", [reservation_pod("g1", "n1")], [1] * 8),
    ("shared pods without a reservation pod yet: packed as before", [shared_pod("s0", "0.5", "n1", "g9"), shared_pod("s1", "0.5", "n1", "g9")],
     [1] * 7 + [0]),
    ("a whole-GPU pod and a shared GPU", [whole_gpu_pod("big", 3, "n1"), reservation_pod("g1", "n1"), shared_pod("s0", "0.3", "n1", "g1")],
     [1] * 4 + ["7/10", 0, 0, 0]),
]


@pytest.mark.parametrize("case,bound,free", KAI_SHARED_ROWS, ids=[r[0] for r in KAI_SHARED_ROWS])
def test_kai_s_reservation_pod_and_the_shares_on_it_count_one_gpu(case, bound, free):
    from fractions import Fraction

    from raybridge.adjuster.decision.node_room import node_rooms as _node_rooms

    rooms = _node_rooms([read_node(node("n1", 8))], [read_pod(p) for p in bound])
    assert sorted(rooms["n1"], reverse=True) == [Fraction(f) for f in free]


def test_a_landed_placeholder_is_not_replaced_while_its_node_s_shared_gpu_leaves_room():
    """An 8-GPU placeholder for 16 halves; two landed on one shared GPU (KAI's reservation pod beside them): the
    7 GPUs left hold the other 14, so nothing is deleted and nothing asked for again."""
    landed = [reservation_pod("g1", "n1"), shared_pod("p0", "0.5", "n1", "g1"), shared_pod("p1", "0.5", "n1", "g1")]
    provided = ExistingPlaceholder("a", GROUP, 8, PROVIDED, keys(16), NOW - timedelta(seconds=5), "n1")
    result = reconcile([*landed, *halves(14, 2)], [node("n1", 8)], [provided], SETTINGS, NOW,
                       provision_timeout_seconds=TIMEOUT, name_prefix=PREFIX)
    assert (result.delete, result.keep, len(result.covered_pods)) == ((), ("a",), 14)
    assert result.create == ()


def unseen(name: str, created_ago: float, **kw: Any) -> dict[str, Any]:
    """A GPU-sharing pod its scheduler has not looked at: no PodScheduled condition yet."""
    created = pod(name, "0.5", conditions=[], **kw)
    created["metadata"]["creationTimestamp"] = (NOW - timedelta(seconds=created_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return created


# The batch window (reconcile.BatchWindow, idle 1 s, at most 10 s): new placeholders wait while a burst still arrives.
BATCH = BatchWindow(idle_seconds=1.0, max_seconds=10.0)


def created(pods: list[dict[str, Any]], ago: float) -> list[dict[str, Any]]:
    for each in pods:
        each["metadata"]["creationTimestamp"] = (NOW - timedelta(seconds=ago)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return pods


# (case, pods, existing placeholders, created GPUs, deleted {name: reason}, held back)
BATCH_ROWS = [
    ("pods created this second, all looked at: the burst may still grow, nothing is made yet",
     halves(10, waited=5) + created(halves(2, start=10, waited=0), 0), [], [], {}, True),
    ("a second since the last pod came: the whole burst gets its placeholders",
     halves(10, waited=5) + created(halves(2, start=10, waited=0), 1), [], [6], {}, False),
    ("pods keep coming, but the first has waited 10 s: made now",
     halves(10, waited=10) + created(halves(2, start=10, waited=0), 0), [], [6], {}, False),
    ("a wave beside a pending placeholder still arriving: the placeholder is not grown yet",
     halves(4, waited=30) + created(halves(8, start=4, waited=0), 0), [pending("a", 2, keys(4))], [], {}, True),
    ("and once it settled: grown to the node's worth, the rest asked for",
     halves(4, waited=30) + created(halves(8, start=4, waited=2), 3), [pending("a", 2, keys(4))], [6], {"a": "grown"}, False),
    ("pods of a pending placeholder alone, one created this second: nothing new to make, nothing held",
     created(halves(3, waited=0), 0), [pending("a", 2, keys(3))], [], {}, False),
    ("pods of the burst KAI has not looked at yet: the others wait for them",
     halves(10, waited=5) + [unseen(f"q{i}", created_ago=2) for i in range(4)], [], [], {}, True),
    ("one created long ago and never looked at is not a burst arriving",
     halves(10, waited=5) + [unseen("q0", created_ago=60)], [], [5], {}, False),
    ("nor is a pod of another scheduler", halves(10, waited=5) + [unseen("q0", created_ago=2, scheduler="default-scheduler")], [], [5], {}, False),
]


@pytest.mark.parametrize("case,pods,existing,created,deleted,held", BATCH_ROWS, ids=[r[0] for r in BATCH_ROWS])
def test_new_placeholders_wait_for_a_burst_to_settle(case, pods, existing, created, deleted, held):
    result = reconcile(pods, None, existing, SETTINGS, NOW, provision_timeout_seconds=TIMEOUT, name_prefix=PREFIX, batch=BATCH)
    assert sorted((p.placeholder.gpus for p in result.create), reverse=True) == created
    assert dict(result.delete) == deleted
    assert any("still arriving" in note for note in result.notes) == held
    # The GPUs pending placeholders ask for: those that exist, while nothing is made or grown.
    if held:
        assert result.pending_gpus == sum(ph.gpus for ph in existing if ph.state == PENDING)
    if held:  # what is held back is made once it settles, never dropped: without the window it is made now
        at_once = reconcile(pods, None, existing, SETTINGS, NOW, provision_timeout_seconds=TIMEOUT, name_prefix=PREFIX)
        assert at_once.create


def made(name: str, seconds_ago: float, gpus: int = 8, taints: Optional[list[dict[str, str]]] = None) -> dict[str, Any]:
    """A node created `seconds_ago` before NOW."""
    found = node(name, gpus, taints=taints)
    found["metadata"]["creationTimestamp"] = (NOW - timedelta(seconds=seconds_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return found


# (case, the second node, more existing placeholders, GPUs asked for again, pods covered)
# "a" brought up n1 and was credited there; "b" was bound to n1's GPUs too (a exited), though the autoscaler was
# already adding n2 for it: b counts for nothing on n1, and its 8 pods (0.6 GPU each) are waiting.
NEW_NODE_ROWS = [
    ("n2 just came up for b: its room holds b's pods, nothing asked again", made("n2", 5), [], [], 16),
    ("n2 came up a minute ago and the pods still wait: they do not fit there, asked again", made("n2", 60), [], [8], 8),
    ("n2 has no room left", made("n2", 5, gpus=0), [], [8], 8),
    ("a placeholder of the group still pending may be n2's: n2 not counted twice", made("n2", 5),
     [ExistingPlaceholder("c", GROUP, 8, PENDING, keys(8, 16))], [8], 8),
    # Every new Node has kube-apiserver's NotReady taint until the node lifecycle controller sees it Ready; counted, a
    # pass asked again for pods that landed there a second later (tests/e2e/test_adjuster_races_on_real_api.py).
    ("n2 just came up with the NotReady taint every new node has: its room holds b's pods",
     made("n2", 1, taints=[{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]), [], [], 16),
    ("n2 just came up, not yet initialized by its cloud provider: the same",
     made("n2", 1, taints=[{"key": "node.cloudprovider.kubernetes.io/uninitialized", "value": "true", "effect": "NoSchedule"}]), [], [], 16),
    ("n2 just came up, not yet registered with Karpenter: the same", made("n2", 1, taints=[{"key": "karpenter.sh/unregistered", "effect": "NoExecute"}]), [], [], 16),
    ("n2 just came up tainted for a team the pods do not tolerate: asked again", made("n2", 1, taints=[{"key": "team", "value": "a", "effect": "NoSchedule"}]), [], [8], 8),
    ("n2 came up a minute ago and is still NotReady-tainted: asked again",
     made("n2", 60, taints=[{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]), [], [8], 8),
]  # fmt: skip


@pytest.mark.parametrize("case,second,more,asked,covered", NEW_NODE_ROWS, ids=[r[0] for r in NEW_NODE_ROWS])
def test_a_node_that_came_up_for_a_placeholder_bound_elsewhere_holds_the_waiting_pods(case, second, more, asked, covered):
    a = ExistingPlaceholder("a", GROUP, 8, PROVIDED, keys(8), NOW - timedelta(seconds=10), "n1")
    b = ExistingPlaceholder("b", GROUP, 8, PROVIDED, keys(8, 8), NOW - timedelta(seconds=5), "n1")
    pods = sixes(24 if more else 16)
    result = reconcile(pods, [made("n1", 20), second], [a, b, *more], SETTINGS, NOW, provision_timeout_seconds=TIMEOUT, name_prefix=PREFIX)
    assert dict(result.delete).get("b") == DELETE_DOUBLE_COUNTED
    assert [p.placeholder.gpus for p in result.create] == asked
    assert len(result.covered_pods) == covered
