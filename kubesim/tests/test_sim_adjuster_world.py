"""The node-scale-adjuster's simulated world behaves as the upstream components do (FIDELITY.md, "The node-scale-adjuster's world").

Why this module exists: KAI's scheduler and binder past v0.12 and cluster-autoscaler run simulated
(sim_gpu.py, sim_autoscaler.py) beside the real kube-apiserver, kube-scheduler and kwok; each test
here checks one behaviour read in the upstream source, on one real stack for the module (sim_stack.py). A test steps
the simulation by hand (no thread; delays and intervals 0), and waits, bounded, for what the real programs do
between steps: kube-scheduler binds the default scheduler's pods or marks them unschedulable (the autoscaler acts on
that condition alone), kwok runs bound pods and ends those labelled to exit.

What it deliberately does not do: play kube-scheduler or a kubelet (the real ones do, and the tests check what they
make of the simulation's nodes and reservation pods), or run raybridge (tests/e2e/test_adjuster_ca_on_real_api.py runs `adjuster run` in this world).
"""

from __future__ import annotations

from typing import Any, Iterator, Optional

import pytest

from kubesim.real_api import RealApi
from kubesim.sim_autoscaler import NODE_GROUP_LABEL, NodeGroup
from kubesim.sim_nodes import GPU_KEY
from kubesim.sim_gpu import RESERVATION_NAMESPACE, SCALING_NAMESPACE, GpuSim, fraction_pod
from kubesim.tests.sim_stack import (EXITS_LABEL, is_unschedulable, read_pod, ready_gpu_node, real_api, sim_stack, wait_bound, wait_phase,
                                     wait_unschedulable)  # fmt: skip

pytestmark = [
    pytest.mark.realtime,
    pytest.mark.xdist_group("kubesim-sim-adjuster-world"),  # one stack for the module's tests
    pytest.mark.timeout(600),
]

WORK = "work"


@pytest.fixture(scope="module")
def stack() -> Iterator[Any]:
    with sim_stack([WORK]) as running:
        yield running


@pytest.fixture
def api(stack: Any) -> Iterator[RealApi]:
    with real_api(stack, [WORK]) as started:
        yield started


def _sim(api: RealApi, **extra: Any) -> GpuSim:
    return GpuSim(api, provisioning_delay=0, scan_interval=0, **extra)


def _steps(sim: GpuSim, n: int = 3) -> None:
    for _ in range(n):
        sim.step()


def _pod(api: RealApi, name: str, namespace: str = WORK) -> dict[str, Any]:
    return read_pod(api, name, namespace)


def _whole_gpu_pod(name: str, gpus: int = 1, *, namespace: str = WORK, priority: Optional[int] = None, cpu: str = "1",
                   memory: str = "1Gi", node_selector: Optional[dict[str, str]] = None,
                   tolerations: Optional[list[dict[str, str]]] = None, command: str = "sleep") -> dict[str, Any]:
    """A default-scheduler pod of whole GPUs; `command="true"` ends at once once running (kwok's Stage plays it)."""
    resources = {"requests": {"nvidia.com/gpu": str(gpus), "cpu": cpu, "memory": memory}, "limits": {"nvidia.com/gpu": str(gpus)}}
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox", "command": [command], "resources": resources}]}
    if priority is not None:  # through a PriorityClass, as the Priority admission plugin demands (_create makes it)
        spec["priorityClassName"] = f"test-priority{priority}"
    if node_selector:
        spec["nodeSelector"] = node_selector
    if tolerations:
        spec["tolerations"] = tolerations
    labels = {EXITS_LABEL: "true"} if command == "true" else {}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace, "labels": labels}, "spec": spec}


def _create(api: RealApi, pod: dict[str, Any]) -> dict[str, Any]:
    """Create the pod, and first the PriorityClass it names (value from its name), as a cluster would have it (the
    class known to the API server's Priority admission before the pod is made: testcluster/client.py)."""
    name = pod["spec"].get("priorityClassName")
    if name and api.get_object("scheduling.k8s.io/v1", "PriorityClass", name) is None:
        api.client.create_priority_class(name, int(name.removeprefix("test-priority")), namespace=pod["metadata"]["namespace"])
    return api.create_object(pod)


def _waiting(api: RealApi, pod: dict[str, Any]) -> dict[str, Any]:
    """Create the pod and wait until kube-scheduler has found no node for it."""
    created = _create(api, pod)
    wait_unschedulable(api, pod["metadata"]["name"], namespace=pod["metadata"]["namespace"])
    return created


def _reservations(api: RealApi) -> list[dict[str, Any]]:
    return api.list_objects("v1", "Pod", RESERVATION_NAMESPACE)


def _wait_no_reservation(api: RealApi) -> None:
    from testcluster.processes import wait_until

    wait_until(lambda: not _reservations(api), 30, "the reservation pod gone")


# --- KAI's binder: reservation pods --------------------------------------------------------------


def test_a_share_on_a_free_gpu_gets_a_reservation_pod_that_later_shares_reuse_and_the_last_one_ends(api: RealApi) -> None:
    ready_gpu_node(api, "n1", gpus=2)
    sim = _sim(api)
    api.create_object(fraction_pod("a", WORK, fraction="0.5"))
    api.create_object(fraction_pod("b", WORK, fraction="0.5"))
    _steps(sim)
    (reservation,) = _reservations(api)
    group = reservation["metadata"]["labels"]["runai-gpu-group"]
    assert reservation["metadata"]["name"].startswith("gpu-reservation-n1-")
    assert reservation["metadata"]["labels"]["app"] == "kai-resource-reservation"
    assert reservation["spec"]["nodeName"] == "n1"
    assert reservation["spec"]["containers"][0]["resources"]["requests"] == {"nvidia.com/gpu": "1"}
    assert reservation["metadata"]["annotations"]["karpenter.sh/do-not-disrupt"] == "true"
    assert [_pod(api, n)["metadata"]["labels"]["runai-gpu-group"] for n in ("a", "b")] == [group, group]
    assert [_pod(api, n)["spec"]["nodeName"] for n in ("a", "b")] == ["n1", "n1"]  # through the binding subresource
    wait_phase(api, reservation["metadata"]["name"], RESERVATION_NAMESPACE, "Running")  # the API server took it: kwok runs it
    api.delete_object("v1", "Pod", "a", WORK)
    _steps(sim)
    assert [r["metadata"]["name"] for r in _reservations(api)] == [reservation["metadata"]["name"]]  # b still holds it
    assert not _reservations(api)[0]["metadata"].get("deletionTimestamp")
    api.delete_object("v1", "Pod", "b", WORK)
    _steps(sim)
    _wait_no_reservation(api)  # the binder deleted it (nothing else does): kwok ends it and it goes


def test_a_multi_device_share_gets_one_group_label_per_gpu(api: RealApi) -> None:
    ready_gpu_node(api, "n1", gpus=2)
    sim = _sim(api)
    api.create_object(fraction_pod("a", WORK, fraction="0.5", devices=2))
    _steps(sim)
    labels = _pod(api, "a")["metadata"]["labels"]
    groups = sorted(r["metadata"]["labels"]["runai-gpu-group"] for r in _reservations(api))
    assert len(groups) == 2 and sorted(v for k, v in labels.items() if k.startswith("runai-gpu-group/")) == groups


def test_the_binder_reserves_no_gpu_while_a_scaling_pod_is_unscheduled_but_fills_shared_ones(api: RealApi) -> None:
    ready_gpu_node(api, "n1", gpus=2)
    sim = _sim(api, node_groups=[])
    api.create_object(fraction_pod("first", WORK, fraction="0.5"))
    _steps(sim)
    _waiting(api, _whole_gpu_pod("waiting", 8, namespace=SCALING_NAMESPACE))  # fits no node: kube-scheduler says so
    api.create_object(fraction_pod("shares", WORK, fraction="0.5"))  # fits the shared GPU
    api.create_object(fraction_pod("needs-a-gpu", WORK, fraction="0.75"))  # needs a new reservation
    _steps(sim)
    assert _pod(api, "shares")["spec"].get("nodeName") == "n1"
    assert not _pod(api, "needs-a-gpu")["spec"].get("nodeName")
    assert sim.held_by_scaling == [f"{WORK}/needs-a-gpu"]
    assert len(_reservations(api)) == 1
    api.delete_object("v1", "Pod", "waiting", SCALING_NAMESPACE)  # unbound: the API server deletes it at once
    _steps(sim)
    assert _pod(api, "needs-a-gpu")["spec"].get("nodeName") == "n1"


def test_whole_gpu_pods_and_reservations_share_a_node_s_gpus(api: RealApi) -> None:
    """kube-scheduler counts the reservation pod's whole GPU: of two 1-GPU pods on the 2-GPU node, one lands."""
    from testcluster.processes import wait_until

    ready_gpu_node(api, "n1", gpus=2)
    sim = _sim(api, node_groups=[])
    api.create_object(fraction_pod("share", WORK, fraction="0.25"))
    _steps(sim)
    assert len(_reservations(api)) == 1
    api.create_object(_whole_gpu_pod("one", 1))
    api.create_object(_whole_gpu_pod("two", 1))

    def outcome() -> list[str]:
        found = [_pod(api, n) for n in ("one", "two")]
        return sorted(p["spec"].get("nodeName") or ("unschedulable" if is_unschedulable(p) else "pending") for p in found)

    wait_until(lambda: outcome() == ["n1", "unschedulable"], 30, "one of the two bound to n1, the other unschedulable")
    waiting = next(p for p in (_pod(api, n) for n in ("one", "two")) if is_unschedulable(p))
    message = next(c for c in waiting["status"]["conditions"] if c["type"] == "PodScheduled")["message"]
    assert "Insufficient nvidia.com/gpu" in message, message  # the reservation holds the other GPU


# --- kube-scheduler: CPU and memory ---------------------------------------------------------------


def test_a_whole_gpu_pod_needs_the_node_s_cpu_and_memory_too(api: RealApi) -> None:
    """The CPU and memory a registered GPU node has (register_gpu_node) are what kube-scheduler counts."""
    ready_gpu_node(api, "n1", gpus=8, cpu="8", memory="64Gi")
    for too_big in (_whole_gpu_pod("big-cpu", 1, cpu="9"), _whole_gpu_pod("big-memory", 1, memory="65Gi")):
        _waiting(api, too_big)
    api.create_object(_whole_gpu_pod("fits", 1, cpu="8", memory="64Gi"))
    assert wait_bound(api, "fits", WORK) == "n1"
    assert [is_unschedulable(_pod(api, n)) for n in ("big-cpu", "big-memory")] == [True, True]


# --- cluster-autoscaler -------------------------------------------------------------------------


@pytest.mark.parametrize("pod, nodes", [
    # one row per case: the pod, the nodes the autoscaler adds for it from one 8-GPU, 128-CPU, 1 TiB group (labels pool=a)
    (_whole_gpu_pod("fits", 8), 1),
    (_whole_gpu_pod("other-pool", 1, node_selector={"pool": "b"}), 0),  # no group's template has pool=b: none invented
    (_whole_gpu_pod("too-much-cpu", 1, cpu="129"), 0),
    (_whole_gpu_pod("too-much-memory", 1, memory="1025Gi"), 0),
    (_whole_gpu_pod("too-many-gpus", 9), 0),
    (_whole_gpu_pod("expendable", 1, priority=-11), 0),  # below the default cutoff -10
    (_whole_gpu_pod("at-the-cutoff", 1, priority=-10), 1),
])
def test_the_autoscaler_adds_a_node_only_from_a_group_whose_template_takes_the_pod(api: RealApi, pod: dict[str, Any], nodes: int) -> None:
    sim = _sim(api, node_groups=[NodeGroup("a", labels={"pool": "a"})])
    _waiting(api, pod)
    _steps(sim)
    assert len(sim.added_nodes) == nodes, sim.added_nodes
    if nodes:  # kube-scheduler puts the pod on the node that came for it
        assert wait_bound(api, pod["metadata"]["name"], WORK) == sim.added_nodes[0][0]


def test_a_tainted_group_is_for_tolerating_pods_only(api: RealApi) -> None:
    taint = {"key": "gpu", "value": "h100", "effect": "NoSchedule"}
    sim = _sim(api, node_groups=[NodeGroup("tainted", taints=(taint,))])
    _waiting(api, _whole_gpu_pod("plain", 1))
    _steps(sim)
    assert sim.added_nodes == []
    _waiting(api, _whole_gpu_pod("tolerating", 1, tolerations=[{"key": "gpu", "operator": "Equal", "value": "h100", "effect": "NoSchedule"}]))
    _steps(sim)
    assert [pods for _, pods in sim.added_nodes] == [("tolerating",)]
    assert wait_bound(api, "tolerating", WORK) == sim.added_nodes[0][0]
    assert is_unschedulable(_pod(api, "plain"))  # the node's taint keeps it off


def test_the_estimator_packs_by_cpu_and_memory_as_well_as_gpus(api: RealApi) -> None:
    sim = _sim(api, node_groups=[NodeGroup("a", cpu="128", memory="1024Gi")])
    for i in range(3):  # 3 GPUs, but 3 x 60 CPUs: two per node at most
        _create(api, _whole_gpu_pod(f"p{i}", 1, cpu="60"))
    wait_unschedulable(api, "p0", "p1", "p2", namespace=WORK)
    _steps(sim)
    assert sorted(len(pods) for _, pods in sim.added_nodes) == [1, 2]
    assert {wait_bound(api, f"p{i}", WORK) for i in range(3)} == {name for name, _ in sim.added_nodes}  # and they hold the three


def test_the_group_that_takes_the_pods_is_chosen_and_other_groups_stay(api: RealApi) -> None:
    sim = _sim(api, node_groups=[NodeGroup("small", cpu="16"), NodeGroup("large", cpu="128")])
    _waiting(api, _whole_gpu_pod("needs-64", 1, cpu="64"))
    _steps(sim)
    assert len(sim.added_nodes) == 1
    node = api.get_object("v1", "Node", sim.added_nodes[0][0])
    assert node is not None and node["metadata"]["labels"][NODE_GROUP_LABEL] == "large"
    assert node["status"]["allocatable"]["cpu"] == "128"
    assert wait_bound(api, "needs-64", WORK) == sim.added_nodes[0][0]


def test_a_kai_pod_that_fits_a_node_by_its_requests_adds_no_node(api: RealApi) -> None:
    # Its GPU share is an annotation the autoscaler cannot read: FilterOutSchedulable drops it.
    ready_gpu_node(api, "full", gpus=1)
    sim = _sim(api)
    api.create_object(_whole_gpu_pod("holder", 1))
    assert wait_bound(api, "holder", WORK) == "full"
    api.create_object(fraction_pod("share", WORK, fraction="0.5"))
    _steps(sim)
    assert is_unschedulable(_pod(api, "share"))  # KAI found no GPU for it
    assert sim.added_nodes == []


def test_a_pod_fitting_a_node_already_coming_adds_no_other(api: RealApi) -> None:
    sim = GpuSim(api, provisioning_delay=3600, scan_interval=0)
    _waiting(api, _whole_gpu_pod("first", 4))
    _steps(sim)
    _waiting(api, _whole_gpu_pod("second", 4))
    _steps(sim)
    assert len(sim.autoscaler.upcoming) == 1


# --- A node still starting: the autoscaler's reading alone, no server ------------------------------

NOT_READY = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}


class _NoObjects:
    """The API as the autoscaler's loop reads it beside the pods and nodes it is handed: no node of a group, no
    ProvisioningRequest."""

    def list_objects(self, api_version: str, kind: str, namespace: Optional[str] = None) -> list[dict[str, Any]]:
        return []


@pytest.mark.parametrize("case, taints, ready, new_nodes", [
    ("registered, not-ready taint still on (the API server's admission puts it there)", [NOT_READY], "True", 0),
    ("registered, Ready=False", [], "False", 0),
    ("registered and ready: the pod fits it", [], "True", 0),
])  # fmt: skip
def test_a_node_it_added_that_is_still_starting_counts_as_upcoming(case: str, taints: list[dict[str, str]], ready: str, new_nodes: int) -> None:
    # clusterstate.go GetUpcomingNodes counts a registered node that is not ready yet as upcoming, and
    # utils/kubernetes/ready.go reads the not-ready taint as not ready: the pod it was for is not scaled up for again
    from kubesim.sim_autoscaler import ClusterAutoscaler

    added: list[str] = []

    def add_node(group: NodeGroup, pods: tuple[str, ...]) -> str:
        added.append(f"node-{len(added)}")
        return added[-1]

    autoscaler = ClusterAutoscaler(_NoObjects(), add_node, node_groups=[NodeGroup("gpu-8x")], provisioning_delay=0, scan_interval=0)
    pod = _whole_gpu_pod("first", 8)
    pod["status"] = {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}
    autoscaler.run_once([pod], [])
    autoscaler.register_due()
    assert added == ["node-0"]
    node = {"metadata": {"name": "node-0", "labels": {}}, "spec": {"taints": taints},
            "status": {"allocatable": {"cpu": "128", "memory": "1024Gi", "pods": "110", GPU_KEY: "8"},
                       "conditions": [{"type": "Ready", "status": ready}]}}  # fmt: skip
    autoscaler.run_once([pod], [node])
    assert len(autoscaler.upcoming) == new_nodes, case


class _CountedLists(_NoObjects):
    """An empty cluster that counts what is listed, by kind."""

    def __init__(self) -> None:
        self.listed: dict[str, int] = {}

    def list_objects(self, api_version: str, kind: str, namespace: Optional[str] = None) -> list[dict[str, Any]]:
        self.listed[kind] = self.listed.get(kind, 0) + 1
        return []


def test_a_step_lists_the_cluster_for_the_autoscaler_only_when_its_loop_scans() -> None:
    # KAI's session runs every step (0.05 s); the autoscaler's loop every scan interval (0.5 s): its lists of every
    # pod and node were fetched at each step and thrown away in 9 steps of 10, 4 in 10 of the simulations' requests
    now = [0.0]
    server = _CountedLists()
    sim = GpuSim(server, system_node=False, scan_interval=0.5, autoscaler_clock=lambda: now[0])
    for _ in range(20):  # 1 s: the loop scans at 0 and 0.5 s
        sim.step()
        now[0] += 0.05
    scans = 2
    assert server.listed["Pod"] == 20 + scans and server.listed["Node"] == 20 + scans, server.listed
    sim.autoscaler.scan_interval = 0.0  # a test's autoscaler with no interval scans at every step, as before
    sim.step()
    assert server.listed["Pod"] == 20 + scans + 2, server.listed


class _UnpausedMidStep(_NoObjects):
    """One ready GPU node and one pending KAI pod; listing the pods ends the sim's pause, as a test's thread may while
    a step runs. Records the binds asked for."""

    def __init__(self) -> None:
        self.sim: Optional[GpuSim] = None
        self.bound: list[str] = []
        self.node: dict[str, Any] = {}
        self.pod = fraction_pod("late", WORK, fraction="0.5")

    def create_object(self, obj: dict[str, Any]) -> dict[str, Any]:
        if obj["kind"] == "Node":
            self.node = obj
        return obj

    def get_object(self, api_version: str, kind: str, name: str, namespace: Optional[str] = None) -> Optional[dict[str, Any]]:
        return {"metadata": {"name": name}}  # the reservation namespace is there

    def list_objects(self, api_version: str, kind: str, namespace: Optional[str] = None) -> list[dict[str, Any]]:
        if kind == "Pod":
            assert self.sim is not None
            self.sim.kai_paused = False
            return [] if self.bound else [self.pod]
        return [self.node] if kind == "Node" else []

    def bind(self, pod: dict[str, Any], node: str, labels: dict[str, str]) -> None:
        self.bound.append(pod["metadata"]["name"])


def test_a_session_whose_snapshot_was_taken_while_paused_does_not_run() -> None:
    # A test pauses KAI while kube-scheduler binds a rival pod to a new node, then ends the pause. A step that listed the
    # pods before that bind but read the pause after it placed KAI's pods on the node the rival had taken (CI: 8 GPUs
    # of shares and a whole-8-GPU pod on one 8-GPU node). The session runs only when it was not paused at its snapshot.
    from kubesim.sim_gpu import register_gpu_node

    server = _UnpausedMidStep()
    register_gpu_node(server, "gpu-0")
    sim = GpuSim(server, system_node=False, scan_interval=3600.0)
    server.sim = sim
    sim.kai_paused = True
    sim.step()
    assert server.bound == [] and sim.reservations == [], "a session ran on a snapshot taken while paused"
    sim.step()  # the next session's snapshot is taken unpaused
    assert server.bound == ["late"] and len(sim.reservations) == 1


def test_a_pod_that_is_not_bound_in_time_is_said_with_the_nodes(api: RealApi, monkeypatch: pytest.MonkeyPatch) -> None:
    """A wait for a binding that times out says why it might not have come: the pod's condition and each node."""
    from kubesim.tests import sim_stack as helpers

    ready_gpu_node(api, "n1", gpus=1)
    _waiting(api, _whole_gpu_pod("too-many", 2))
    monkeypatch.setattr(helpers, "ACTING_SECONDS", 0.5)
    with pytest.raises(TimeoutError) as raised:
        wait_bound(api, "too-many", WORK)
    said = str(raised.value)
    assert f"{WORK}/too-many bound" in said and "PodScheduled" in said and "Unschedulable" in said, said
    assert "nodes: n1 (schedulable, taints none)" in said, said
