"""The node-scale-adjuster's simulated world behaves as the upstream components do (FIDELITY.md, "The node-scale-adjuster's world").

Each test steps the simulation by hand (no thread, no clock: delays and
intervals are 0) and checks one behaviour read in the upstream source.
"""

from __future__ import annotations

from typing import Any, Iterator, Optional

import pytest

from kubesim.server import KubeApiServer
from kubesim.sim_autoscaler import NodeGroup
from kubesim.sim_nodes import GPU_KEY
from kubesim.sim_gpu import RESERVATION_NAMESPACE, SCALING_NAMESPACE, GpuSim, fraction_pod, register_gpu_node

WORK = "work"


@pytest.fixture
def server() -> Iterator[KubeApiServer]:
    with KubeApiServer() as server:
        for name in (WORK, SCALING_NAMESPACE):
            server.create_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        yield server


def _sim(server: KubeApiServer, **extra: Any) -> GpuSim:
    return GpuSim(server, provisioning_delay=0, scan_interval=0, **extra)


def _steps(sim: GpuSim, n: int = 3) -> None:
    for _ in range(n):
        sim.step()
    assert sim.errors == []


def _pod(server: KubeApiServer, name: str, namespace: str = WORK) -> dict[str, Any]:
    found = server.get_object("v1", "Pod", name, namespace)
    assert found is not None
    return found


def _whole_gpu_pod(name: str, gpus: int = 1, *, namespace: str = WORK, priority: Optional[int] = None, cpu: str = "1",
                   memory: str = "1Gi", node_selector: Optional[dict[str, str]] = None,
                   tolerations: Optional[list[dict[str, str]]] = None, command: str = "sleep") -> dict[str, Any]:
    resources = {"requests": {"nvidia.com/gpu": str(gpus), "cpu": cpu, "memory": memory}, "limits": {"nvidia.com/gpu": str(gpus)}}
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox", "command": [command], "resources": resources}]}
    if priority is not None:  # through a PriorityClass, as the Priority admission plugin demands (_create makes it)
        spec["priorityClassName"] = f"test-priority{priority}"
    if node_selector:
        spec["nodeSelector"] = node_selector
    if tolerations:
        spec["tolerations"] = tolerations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def _create(server: KubeApiServer, pod: dict[str, Any]) -> dict[str, Any]:
    """Create the pod, and first the PriorityClass it names (value from its name), as a cluster would have it."""
    name = pod["spec"].get("priorityClassName")
    if name and server.get_object("scheduling.k8s.io/v1", "PriorityClass", name) is None:
        value = int(name.removeprefix("test-priority"))
        server.create_object({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value})
    return server.create_object(pod)


def _reservations(server: KubeApiServer) -> list[dict[str, Any]]:
    return server.list_objects("v1", "Pod", RESERVATION_NAMESPACE)


# --- KAI's binder: reservation pods --------------------------------------------------------------


def test_a_share_on_a_free_gpu_gets_a_reservation_pod_that_later_shares_reuse_and_the_last_one_ends(server: KubeApiServer) -> None:
    register_gpu_node(server, "n1", gpus=2)
    sim = _sim(server)
    server.create_object(fraction_pod("a", WORK, fraction="0.5"))
    server.create_object(fraction_pod("b", WORK, fraction="0.5"))
    _steps(sim)
    (reservation,) = _reservations(server)
    group = reservation["metadata"]["labels"]["runai-gpu-group"]
    assert reservation["metadata"]["name"].startswith("gpu-reservation-n1-")
    assert reservation["metadata"]["labels"]["app"] == "kai-resource-reservation"
    assert reservation["spec"]["nodeName"] == "n1"
    assert reservation["spec"]["containers"][0]["resources"]["requests"] == {"nvidia.com/gpu": "1"}
    assert reservation["metadata"]["annotations"]["karpenter.sh/do-not-disrupt"] == "true"
    assert [_pod(server, n)["metadata"]["labels"]["runai-gpu-group"] for n in ("a", "b")] == [group, group]
    server.delete_object("v1", "Pod", "a", WORK)
    _steps(sim)
    assert [r["metadata"]["name"] for r in _reservations(server)] == [reservation["metadata"]["name"]]  # b still holds it
    server.delete_object("v1", "Pod", "b", WORK)
    _steps(sim)
    assert _reservations(server) == []


def test_a_multi_device_share_gets_one_group_label_per_gpu(server: KubeApiServer) -> None:
    register_gpu_node(server, "n1", gpus=2)
    sim = _sim(server)
    server.create_object(fraction_pod("a", WORK, fraction="0.5", devices=2))
    _steps(sim)
    labels = _pod(server, "a")["metadata"]["labels"]
    groups = sorted(r["metadata"]["labels"]["runai-gpu-group"] for r in _reservations(server))
    assert len(groups) == 2 and sorted(v for k, v in labels.items() if k.startswith("runai-gpu-group/")) == groups


def test_the_binder_reserves_no_gpu_while_a_scaling_pod_is_unscheduled_but_fills_shared_ones(server: KubeApiServer) -> None:
    register_gpu_node(server, "n1", gpus=2)
    sim = _sim(server, node_groups=[])
    server.create_object(fraction_pod("first", WORK, fraction="0.5"))
    _steps(sim)
    scaling = server.create_object(_whole_gpu_pod("waiting", 8, namespace=SCALING_NAMESPACE))  # fits no node: unschedulable
    sim.step()
    assert _pod(server, "waiting", SCALING_NAMESPACE)["status"]["conditions"][0]["status"] == "False"
    server.create_object(fraction_pod("shares", WORK, fraction="0.5"))  # fits the shared GPU
    server.create_object(fraction_pod("needs-a-gpu", WORK, fraction="0.75"))  # needs a new reservation
    _steps(sim)
    assert _pod(server, "shares")["spec"].get("nodeName") == "n1"
    assert not _pod(server, "needs-a-gpu")["spec"].get("nodeName")
    assert sim.held_by_scaling == [f"{WORK}/needs-a-gpu"]
    server.delete_object("v1", "Pod", scaling["metadata"]["name"], SCALING_NAMESPACE)
    _steps(sim)
    assert _pod(server, "needs-a-gpu")["spec"].get("nodeName") == "n1"


def test_whole_gpu_pods_and_reservations_share_a_node_s_gpus(server: KubeApiServer) -> None:
    register_gpu_node(server, "n1", gpus=2)
    sim = _sim(server, node_groups=[])
    server.create_object(fraction_pod("share", WORK, fraction="0.25"))
    _steps(sim)
    server.create_object(_whole_gpu_pod("one", 1))
    server.create_object(_whole_gpu_pod("two", 1))
    _steps(sim)
    assert _pod(server, "one")["spec"].get("nodeName") == "n1"
    assert not _pod(server, "two")["spec"].get("nodeName")  # the reservation holds the other GPU


# --- kube-scheduler: CPU and memory ---------------------------------------------------------------


def test_a_whole_gpu_pod_needs_the_node_s_cpu_and_memory_too(server: KubeApiServer) -> None:
    register_gpu_node(server, "n1", gpus=8, cpu="8", memory="64Gi")
    sim = _sim(server, node_groups=[])
    server.create_object(_whole_gpu_pod("big-cpu", 1, cpu="9"))
    server.create_object(_whole_gpu_pod("big-memory", 1, memory="65Gi"))
    server.create_object(_whole_gpu_pod("fits", 1, cpu="8", memory="64Gi"))
    _steps(sim)
    assert [bool(_pod(server, n)["spec"].get("nodeName")) for n in ("big-cpu", "big-memory", "fits")] == [False, False, True]


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
def test_the_autoscaler_adds_a_node_only_from_a_group_whose_template_takes_the_pod(server: KubeApiServer, pod: dict[str, Any], nodes: int) -> None:
    sim = _sim(server, node_groups=[NodeGroup("a", labels={"pool": "a"})])
    _create(server, pod)
    _steps(sim)
    assert len(sim.added_nodes) == nodes, sim.added_nodes


def test_a_tainted_group_is_for_tolerating_pods_only(server: KubeApiServer) -> None:
    taint = {"key": "gpu", "value": "h100", "effect": "NoSchedule"}
    sim = _sim(server, node_groups=[NodeGroup("tainted", taints=(taint,))])
    server.create_object(_whole_gpu_pod("plain", 1))
    _steps(sim)
    assert sim.added_nodes == []
    server.create_object(_whole_gpu_pod("tolerating", 1, tolerations=[{"key": "gpu", "operator": "Equal", "value": "h100", "effect": "NoSchedule"}]))
    _steps(sim)
    assert [pods for _, pods in sim.added_nodes] == [("tolerating",)]
    assert _pod(server, "tolerating")["spec"].get("nodeName") == sim.added_nodes[0][0]


def test_the_estimator_packs_by_cpu_and_memory_as_well_as_gpus(server: KubeApiServer) -> None:
    sim = _sim(server, node_groups=[NodeGroup("a", cpu="128", memory="1024Gi")])
    for i in range(3):  # 3 GPUs, but 3 x 60 CPUs: two per node at most
        server.create_object(_whole_gpu_pod(f"p{i}", 1, cpu="60"))
    _steps(sim)
    assert sorted(len(pods) for _, pods in sim.added_nodes) == [1, 2]


def test_the_group_that_takes_the_pods_is_chosen_and_other_groups_stay(server: KubeApiServer) -> None:
    sim = _sim(server, node_groups=[NodeGroup("small", cpu="16"), NodeGroup("large", cpu="128")])
    server.create_object(_whole_gpu_pod("needs-64", 1, cpu="64"))
    _steps(sim)
    assert len(sim.added_nodes) == 1
    node = server.get_object("v1", "Node", sim.added_nodes[0][0])
    assert node is not None and node["metadata"]["labels"]["sim.autoscaler/node-group"] == "large"
    assert node["status"]["allocatable"]["cpu"] == "128"


def test_a_kai_pod_that_fits_a_node_by_its_requests_adds_no_node(server: KubeApiServer) -> None:
    # Its GPU share is an annotation the autoscaler cannot read: FilterOutSchedulable drops it.
    register_gpu_node(server, "full", gpus=1)
    sim = _sim(server)
    server.create_object(_whole_gpu_pod("holder", 1))
    server.create_object(fraction_pod("share", WORK, fraction="0.5"))
    _steps(sim)
    assert not _pod(server, "share")["spec"].get("nodeName")
    assert sim.added_nodes == []


def test_a_pod_fitting_a_node_already_coming_adds_no_other(server: KubeApiServer) -> None:
    sim = GpuSim(server, provisioning_delay=3600, scan_interval=0)
    server.create_object(_whole_gpu_pod("first", 4))
    _steps(sim)
    server.create_object(_whole_gpu_pod("second", 4))
    _steps(sim)
    assert len(sim.autoscaler.upcoming) == 1


# --- A node still starting ------------------------------------------------------------------------

NOT_READY = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}


@pytest.mark.parametrize("case, taints, ready, new_nodes", [
    ("registered, not-ready taint still on (the API server's admission puts it there)", [NOT_READY], "True", 0),
    ("registered, Ready=False", [], "False", 0),
    ("registered and ready: the pod fits it", [], "True", 0),
])  # fmt: skip
def test_a_node_it_added_that_is_still_starting_counts_as_upcoming(server: KubeApiServer, case: str, taints: list[dict[str, str]], ready: str,
                                                                   new_nodes: int) -> None:
    # clusterstate.go GetUpcomingNodes counts a registered node that is not ready yet as upcoming, and
    # utils/kubernetes/ready.go reads the not-ready taint as not ready: the pod it was for is not scaled up for again
    from kubesim.sim_autoscaler import ClusterAutoscaler

    added: list[str] = []

    def add_node(group: NodeGroup, pods: tuple[str, ...]) -> str:
        added.append(f"node-{len(added)}")
        return added[-1]

    autoscaler = ClusterAutoscaler(server, add_node, node_groups=[NodeGroup("gpu-8x")], provisioning_delay=0, scan_interval=0)
    pod = _whole_gpu_pod("first", 8)
    pod["metadata"]["namespace"] = WORK
    pod["status"] = {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}
    autoscaler.run_once([pod], [])
    autoscaler.register_due()
    assert added == ["node-0"]
    node = {"metadata": {"name": "node-0", "labels": {}}, "spec": {"taints": taints},
            "status": {"allocatable": {"cpu": "128", "memory": "1024Gi", "pods": "110", GPU_KEY: "8"},
                       "conditions": [{"type": "Ready", "status": ready}]}}  # fmt: skip
    autoscaler.run_once([pod], [node])
    assert len(autoscaler.upcoming) == new_nodes, case
