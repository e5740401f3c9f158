"""The simulated cluster-autoscaler serves ProvisioningRequests as cluster-autoscaler's loop does (issue 41, point 2).

Each row is one rule read from kubernetes/autoscaler (cluster-autoscaler/): one request a loop
(processors/provreq/injector.go), requests and ordinary pods in alternate loops
(provisioningrequest/orchestrator/wrapper_orchestrator.go), pods that fit need no scale-up and the rest all or
nothing through the expander (provisioningrequest/besteffortatomic/provisioning_class.go), capacity booked for 10
minutes or until consumed (processors/provreq/processor.go), a live node's labels on a template only once it has
been Ready a minute (processors/nodeinfosprovider/mixed_nodeinfos_processor.go).

Why this module exists: the requests, their PodTemplates, the pods and the nodes are the real kube-apiserver's (its
CRD schema, its status subresource, one real stack for the module: sim_stack.py), and an ordinary pod is unschedulable
when the real kube-scheduler says so. Each test steps the simulation by hand: with `scan_interval=0` one step is one
loop; `provisioning_delay` is an hour, so a decided node stays upcoming and no node registers unasked.

What it deliberately does not do: run raybridge's adjuster in `--mode provisioning-request`
(tests/e2e/test_adjuster_ca_on_real_api.py does), or the requests' other provisioning classes.
"""

from __future__ import annotations

from typing import Any, Iterator, Optional

import pytest

from kubesim.real_api import RealApi
from kubesim.sim_autoscaler import PR_API, NodeGroup
from kubesim.sim_gpu import GpuSim
from kubesim.tests.sim_stack import ready_gpu_node, real_api, sim_stack, wait_schedulable, wait_unschedulable

pytestmark = [
    pytest.mark.realtime,
    pytest.mark.xdist_group("kubesim-sim-provisioning-requests"),  # one stack for the module's tests
    pytest.mark.timeout(600),
]

NS = "adjuster"
WORK = "work"


@pytest.fixture(scope="module")
def stack() -> Iterator[Any]:
    with sim_stack([NS, WORK]) as running:
        yield running


@pytest.fixture
def api(stack: Any) -> Iterator[RealApi]:
    with real_api(stack, [NS, WORK]) as started:
        yield started


class _Clock:
    """The autoscaler's clock, moved by the test."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _sim(api: RealApi, clock: Optional[_Clock] = None, **extra: Any) -> GpuSim:
    return GpuSim(api, provisioning_delay=3600, scan_interval=0, system_node=False, autoscaler_clock=clock or _Clock(), **extra)


def _request(api: RealApi, name: str, gpus: int = 8, count: int = 1, cpu: str = "1") -> None:
    resources = {"requests": {"nvidia.com/gpu": str(gpus), "cpu": cpu, "memory": "1Gi"}, "limits": {"nvidia.com/gpu": str(gpus)}}
    api.create_object({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": f"{name}-t", "namespace": NS},
                       "template": {"spec": {"containers": [{"name": "c", "image": "x", "resources": resources}]}}})  # fmt: skip
    api.create_object({"apiVersion": PR_API, "kind": "ProvisioningRequest", "metadata": {"name": name, "namespace": NS},
                       "spec": {"provisioningClassName": "best-effort-atomic-scale-up.autoscaling.x-k8s.io",
                                "podSets": [{"podTemplateRef": {"name": f"{name}-t"}, "count": count}]}})  # fmt: skip


def _state(api: RealApi, name: str) -> dict[str, tuple[str, str]]:
    """The request's conditions: type -> (status, reason)."""
    request = api.get_object(PR_API, "ProvisioningRequest", name, NS)
    assert request is not None
    return {c["type"]: (c["status"], c["reason"]) for c in (request.get("status") or {}).get("conditions") or []}


def _pending_pod(api: RealApi, name: str, cpu: str = "1", gpus: int = 1) -> None:
    """An ordinary pod no node takes yet, once kube-scheduler has marked it unschedulable."""
    resources = {"requests": {"nvidia.com/gpu": str(gpus), "cpu": cpu}, "limits": {"nvidia.com/gpu": str(gpus)}}
    api.create_object({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": WORK},
                       "spec": {"containers": [{"name": "c", "image": "x", "resources": resources}]}})  # fmt: skip
    wait_unschedulable(api, name, namespace=WORK)


def _upcoming_for(sim: GpuSim) -> list[tuple[str, ...]]:
    """What each node decided and not yet registered was for (pod names)."""
    return [pods for _, _, pods in sim.autoscaler.upcoming]


def test_one_request_is_served_a_loop(api: RealApi) -> None:
    sim = _sim(api)
    _request(api, "first")
    _request(api, "second")
    sim.step()
    assert _state(api, "first")["Provisioned"] == ("True", "CapacityIsProvisioned")
    assert "Accepted" not in _state(api, "second")  # not taken this loop
    sim.step()
    assert _state(api, "second")["Provisioned"] == ("True", "CapacityIsProvisioned")
    assert len(sim.autoscaler.upcoming) == 2 and sim.added_nodes == []  # upcoming nodes, not added at once


def test_a_request_and_ordinary_pods_are_served_in_alternate_loops(api: RealApi) -> None:
    sim = _sim(api)
    _pending_pod(api, "ordinary")
    sim.step()  # ordinary pods alone: served, and the next loop is the requests' turn
    assert _upcoming_for(sim) == [("ordinary",)]
    _pending_pod(api, "another", gpus=8)  # more GPUs than the node coming has left
    _request(api, "req", gpus=8)
    sim.step()
    assert _state(api, "req")["Provisioned"] == ("True", "CapacityIsProvisioned")
    assert _upcoming_for(sim) == [("ordinary",), ("req-0",)]  # the request's loop: nothing for "another"
    sim.step()
    # The ordinary pods' loop: "another" is hinted onto the node the request brought (FilterOutSchedulable runs
    # before the booking is placed), so no node for it.
    assert _upcoming_for(sim) == [("ordinary",), ("req-0",)]


def test_a_request_whose_pods_fit_needs_no_node_and_its_booking_keeps_the_room_from_the_next(api: RealApi) -> None:
    ready_gpu_node(api, "free", gpus=8)
    sim = _sim(api)
    _request(api, "fits")
    _request(api, "next")
    sim.step()
    assert _state(api, "fits")["Provisioned"] == ("True", "CapacityIsFound") and sim.autoscaler.upcoming == []
    sim.step()  # the first request's 8 GPUs are booked on the free node: the second needs a node of its own
    assert _state(api, "next")["Provisioned"] == ("True", "CapacityIsProvisioned")
    assert _upcoming_for(sim) == [("next-0",)]


def test_a_booking_expires_after_ten_minutes(api: RealApi) -> None:
    clock = _Clock()
    sim = _sim(api, clock)
    _request(api, "booked")
    sim.step()
    clock.now += 599
    sim.step()
    assert "BookingExpired" not in _state(api, "booked")
    clock.now += 2
    sim.step()
    assert _state(api, "booked")["BookingExpired"] == ("True", "CapacityReservationTimeExpired")


def test_a_request_is_served_all_or_nothing_through_the_expander(api: RealApi) -> None:
    # Two groups take a pod of 2 GPUs and 80 CPUs: one cannot by its CPU, the other holds one node only.
    groups = [NodeGroup("a-lean", cpu="16"), NodeGroup("b-roomy", cpu="128", max_size=1)]
    sim = _sim(api, node_groups=groups)
    _request(api, "wide", gpus=2, count=2, cpu="80")  # two pods, a node each: more than b-roomy may grow
    sim.step()
    assert _state(api, "wide")["Provisioned"] == ("False", "CapacityIsNotFound") and sim.autoscaler.upcoming == []
    _request(api, "one", gpus=2, count=1, cpu="80")
    sim.step()  # "wide" again (a Provisioned=False request is taken at once), then...
    sim.step()
    assert _state(api, "one")["Provisioned"] == ("True", "CapacityIsProvisioned")
    assert [group.name for _, group, _ in sim.autoscaler.upcoming] == ["b-roomy"]


@pytest.mark.parametrize("stabilization, grows", [(0.0, True), (3600.0, False)], ids=["ready-a-while", "just-ready"])
def test_a_live_nodes_labels_are_on_its_groups_template_only_once_it_has_been_ready_a_minute(api: RealApi, stabilization: float, grows: bool) -> None:
    sim = _sim(api)
    sim.autoscaler.template_stabilization = stabilization
    live = sim._add_node(sim.autoscaler.node_groups[0], ("setup",))  # a node of the group, its GPUs taken
    wait_schedulable(api, live)
    api.patch_object("v1", "Node", live, {"metadata": {"labels": {"team": "x"}}})
    api.create_object({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "holder", "namespace": WORK},
                       "spec": {"nodeName": live, "containers": [{"name": "c", "image": "x", "resources": {
                           "requests": {"nvidia.com/gpu": "8"}, "limits": {"nvidia.com/gpu": "8"}}}]}})  # fmt: skip
    api.create_object({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "for-team-x", "namespace": WORK},
                       "spec": {"nodeSelector": {"team": "x"}, "containers": [{"name": "c", "image": "x", "resources": {
                           "requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}}]}})  # fmt: skip
    wait_unschedulable(api, "for-team-x", namespace=WORK)  # the live node's GPUs are all the holder's
    sim.step()
    sim.step()
    assert (_upcoming_for(sim) == [("for-team-x",)]) is grows, _upcoming_for(sim)
