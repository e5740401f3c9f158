"""Races between kube-scheduler, the kubelets and cluster-autoscaler that could cost a burst a node, on the real
kube-apiserver, kube-scheduler and kwok, with the simulated cluster-autoscaler and KAI past v0.12 as their clients
(tests/e2e/ca_on_real_api.py).

What a platform admin on cluster-autoscaler would check: placeholders created slowly within a burst still get it
exactly its nodes; a placeholder that kube-scheduler binds to the GPUs another placeholder brought up costs a new
placeholder, not a node; a node the adjuster holds (its label) does not stop cluster-autoscaler from growing the
node's group (its template is a live node, labels and all).
The kubelet's moment is the test's to choose: kwok, which plays every kubelet, is held back (SIGSTOP, Stack.paused)
while a placeholder must stay bound and not yet run; the API server keeps binding meanwhile, as a real one does for a
node whose kubelet is slow.

What it deliberately does not do: the same with Karpenter (test_adjuster_karpenter_real.py, on the real one), or
the decisions themselves row by row (tests/unit/test_adjuster_reconcile.py).
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta, timezone
from typing import Any, Iterator, Optional

import pytest

from raybridge.adjuster.controller import Controller
from testcluster.pytest_plugin import _unavailable
from tests.adjuster_world import NS, WORK, burst, deleted_by_reason, placeholders, running, unschedulable
from tests.e2e.ca_on_real_api import (XDIST_GROUP, asked_gpus, clean_up, placeholder_log, running_controller, settings, simulated, state_on_timeout,
                                      wait_unschedulable)
from tests.helpers import ControllerThread, kube_of
from tests.waits import wait_for

pytestmark = [
    pytest.mark.skipif(_unavailable() is not None, reason=str(_unavailable())),
    pytest.mark.realtime,
    pytest.mark.xdist_group(XDIST_GROUP),  # the stack of test_adjuster_ca_on_real_api.py
    pytest.mark.timeout(600),
]

HOLD_LABEL = "raybridge.io/adjuster-hold"


def _hold_label(client: Any, node: str) -> Optional[str]:
    found = client.get_object("v1", "Node", node)
    return ((found or {}).get("metadata", {}).get("labels") or {}).get(HOLD_LABEL)  # what an admin lists


def _node_of(client: Any, name: str, namespace: str = NS) -> Optional[str]:
    return ((client.get_object("v1", "Pod", name, namespace) or {}).get("spec") or {}).get("nodeName")


@pytest.fixture
def proxied(ca_stack: Any, tmp_path: Any) -> Iterator[tuple[Any, Any]]:
    """(the fault proxy, an admin's ApiClient through it) in front of the shared stack's API server."""
    from tests.kai_karpenter_world import through_fault_proxy

    with through_fault_proxy(ca_stack, tmp_path) as found:
        yield found


#: How many times the burst below runs on the one stack (`RAYBRIDGE_RACE_RUNS=60`): a race seen once in 30 runs is
#: measured by running it many times, not by running it once.
RACE_RUNS = int(os.environ.get("RAYBRIDGE_RACE_RUNS", "1"))


@pytest.mark.parametrize("attempt", range(RACE_RUNS))
def test_a_burst_of_pods_needing_a_gpu_each_gets_exactly_the_nodes_they_need(ca_stack: Any, proxied: tuple[Any, Any], attempt: int) -> None:
    # 30 x 0.6: no two share a GPU, so 30 GPUs = 4 nodes of 8. The placeholders are created within the burst's second
    # and slowly (the proxy holds each create 0.2 s), which gives kube-scheduler the chance to bind a pending one to the
    # free GPUs of a node just added for an earlier one (which exited once scheduled). A guard: the decision it guards
    # is pinned in tests/unit/test_adjuster_reconcile.py (TAKEN_ROWS).
    proxy, api_client = proxied
    slow = proxy.arm("POST", f"/api/v1/namespaces/{NS}/pods", code=None, delay=0.2, times=None)  # passed on, 0.2 s late
    with simulated(ca_stack, provisioning_delay=1.0) as (client, sim), placeholder_log(client) as created:
        run = settings(provision_timeout=120.0)
        with ControllerThread(Controller(run, kube_of(api_client, run.request_timeout)), join_seconds=10) as controller:
            burst(client, 30, "0.6", f"each{attempt}" if attempt else "each")  # a name of its own per run
            with state_on_timeout(client, sim, controller, created):
                wait_for(lambda: running(client) == 30, timeout=120, what="all 30 pods running")
            wait_for(lambda: not placeholders(client), timeout=30, what="the placeholders deleted")
        assert slow.hits >= 4, slow.hits  # every placeholder's create went through the delay
        gpus = [asked_gpus(p) for p in created.objects]
        # 4 nodes, or 5. A fifth comes when one autoscaler loop sees placeholders that are already needless beside the
        # ones still needed: it fits pods of one priority onto the nodes coming in any order (in name order here), so a
        # needless one can take the node coming for a needed one, which then gets a node of its own. Two ways to a
        # needless placeholder were found: a pass that read the cluster before a node came up created one for pods that
        # node's room held (a pass now stops creating once the nodes offer other than it read, which narrows that window
        # to the node cache's delay: raybridge/adjuster/nodes_as_read.py, tests/unit/test_adjuster_nodes_as_read.py);
        # and a node that had just come up still had the NotReady taint every new node is born with, so its room was not
        # counted (now it is: brought_up.fill_new_nodes, the startup-taint rows of test_adjuster_reconcile.py). 2 runs of
        # 68 got 5 before both, 3 of 257 after the first, 0 of 60 after both (docs/benchmarks.md;
        # RAYBRIDGE_RACE_RUNS=60 runs this test 60 times on one stack). On the real Karpenter the same burst gets
        # exactly 4 (test_adjuster_karpenter_real.py).
        assert 4 <= len(sim.added_nodes) <= 5, (sim.added_nodes, gpus, deleted_by_reason(controller))


def test_a_placeholder_bound_to_the_gpus_another_brought_up_costs_a_new_placeholder_not_a_node(ca_stack: Any) -> None:
    # Placeholder A (8 GPUs) is bound to the node added for it; before A has run (kwok held back), a later wave's
    # placeholder B (2 GPUs) is pending, and the autoscaler decides a node for it. Once A exits, kube-scheduler binds B
    # to A's free GPUs (it binds at once, KAI's session comes later), where A's pods are about to land. Nothing keeps B
    # off: the node's room is credited to A first, B is counted for nothing there and deleted, its pods are asked for
    # again, and the autoscaler puts that placeholder onto the node already on its way for B. Two nodes, as without
    # the race. The simulations run no thread here: each `step()` is one round of the autoscaler and KAI.
    from kubesim.sim_gpu import RESERVATION_NAMESPACE, GpuSim
    from testcluster.client import ClusterClient
    from tests.sims_on_real_api import RealApi

    client = ClusterClient(ca_stack.kubeconfig)
    sim = GpuSim(RealApi(client), provisioning_delay=0.0, scan_interval=0.0)  # a node comes at the step after its decision
    clock = lambda: datetime.now(timezone.utc) + timedelta(seconds=30)  # noqa: E731 - past every grace period
    try:
        burst(client, 16, "0.5", "a")
        sim.step()  # no GPU node: KAI finds the 16 unschedulable
        wait_unschedulable(client, sim, 16)  # the controller sees them all at once
        with placeholder_log(client) as created, running_controller(client, settings(provision_timeout=600.0), clock=clock) as controller:
            # every wait below says the whole cluster's state when it runs out
            with state_on_timeout(client, sim, controller, created):
                wait_for(lambda: len(placeholders(client)) == 1, timeout=30, what="placeholder A")
                a = placeholders(client)[0]["metadata"]["name"]
                with ca_stack.paused("kwok"):  # A's node is slow to start A's container
                    wait_for(lambda: _unschedulable_placeholder(client, a), timeout=30, what="kube-scheduler finding no node for A")
                    sim.step()  # the autoscaler decides a node for A
                    # The node registers. KAI's session comes a second later (its schedule period), kube-scheduler binds
                    # A at once: KAI sits this step out, else, with kube-scheduler slow under load, its session in the
                    # same step as the registration put A's pods on the node first (they landed: no race to test).
                    # kube-scheduler is held back through the step, as the slowest it may be.
                    sim.kai_paused = True
                    with ca_stack.paused("kube-scheduler"):
                        sim.step()
                    first = sim.added_nodes[0][0]
                    wait_for(lambda: _node_of(client, a) == first, timeout=30, what="A bound to its node")
                    sim.kai_paused = False
                    burst(client, 4, "0.5", "b")
                    # the new node's GPUs are A's: KAI finds the 4 unschedulable. The autoscaler sits this round out: KAI
                    # marks them one status write at a time, so the controller may ask for part of the wave first (a 1-GPU
                    # placeholder, grown to 2 once it sees all 4), and a node decided here for that part would register
                    # before the race below and take B.
                    sim.step(autoscaler=False)
                    wait_for(lambda: sorted(asked_gpus(p) for p in placeholders(client)) == [2, 8], timeout=30, what="placeholder B for the whole wave")
                    wait_for(lambda: _hold_label(client, first) == "both", timeout=30, what="A's node held")
                    (b,) = [p["metadata"]["name"] for p in placeholders(client) if p["metadata"]["name"] != a]
                    wait_for(lambda: _unschedulable_placeholder(client, b), timeout=30, what="kube-scheduler finding no room for B")
                    # the autoscaler's loops until it decides a node for B (which registers at the step after)
                    wait_for(lambda: (sim.step(), sim.autoscaler.upcoming)[1], timeout=30, interval=0.1, what="a node decided for B")
                    assert len(sim.autoscaler.upcoming) == 1 and len(sim.added_nodes) == 1, (sim.autoscaler.upcoming, sim.added_nodes)
                # kwok runs A, which exits: kube-scheduler binds B to A's free GPUs before the next step (the race)
                def settled() -> bool:
                    sim.step()
                    return running(client) == 20 and not placeholders(client)

                wait_for(lambda: _node_of(client, b) == first, timeout=30, what="B bound to A's node")
                wait_for(settled, timeout=90, interval=0.1, what="all 20 pods running and the placeholders gone")
        assert len(sim.added_nodes) == 2, (sim.added_nodes, [p["metadata"]["name"] for p in created.objects])
        gpus = [asked_gpus(p) for p in created.objects]
        # B's pods are asked for again until KAI's pods fill A's node: no more nodes. (The first B may be for part of
        # the wave: KAI marks the four unschedulable one status write at a time, and a pass may fall between.)
        assert gpus[0] == 8 and set(gpus[1:]) <= {1, 2} and len(gpus) >= 2, gpus
        deleted = deleted_by_reason(controller)
        assert deleted.get("node-already-counted", 0) + deleted.get("capacity-taken", 0) >= 1, deleted
        assert sim.errors == []
    finally:
        clean_up(client, (WORK, NS, RESERVATION_NAMESPACE))
        client.close()


def _unschedulable_placeholder(client: Any, name: str) -> bool:
    found = client.get_object("v1", "Pod", name, NS) or {}
    return any(c.get("reason") == "Unschedulable" for c in (found.get("status") or {}).get("conditions") or [])


def test_a_held_node_does_not_stop_its_group_from_growing(ca_stack: Any) -> None:
    # cluster-autoscaler's template for a group is one of its live nodes, labels and all: while the adjuster holds the
    # group's only node (its label), a placeholder that required the label absent matched no template, and the second
    # burst got no node until the first one's pods had landed and the hold was gone.
    with simulated(ca_stack) as (client, sim), placeholder_log(client) as created:
        with running_controller(client, settings(provision_timeout=120.0)):
            with ca_stack.paused("kwok"):  # the first placeholder does not run: its node stays held, its GPUs taken
                burst(client, 16, "0.5", "a")
                wait_for(lambda: len(sim.added_nodes) == 1, timeout=30, what="the first node")
                first = sim.added_nodes[0][0]
                wait_for(lambda: _hold_label(client, first) == "both", timeout=30, what="the first node held")
                burst(client, 16, "0.5", "b")
                wait_for(lambda: unschedulable(client) >= 16, timeout=30, what="the second burst unschedulable")
                wait_for(lambda: len(sim.added_nodes) == 2, timeout=30, what="a second node while the first is held")
            wait_for(lambda: running(client) == 32, timeout=120, what="all 32 pods running")
            wait_for(lambda: not placeholders(client), timeout=30, what="the placeholders deleted")
        assert len(sim.added_nodes) == 2, (sim.added_nodes, [p["metadata"]["name"] for p in created.objects])
