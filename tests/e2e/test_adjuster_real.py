"""`adjuster run` against the real KAI scheduler and the real Karpenter (testcluster: KAI v0.12.0, Karpenter v1.14.1
with its kwok provider), on the real kube-apiserver and kube-scheduler.

What a platform team would check before trusting the adjuster with its GPU bill: a burst of fractional pods gets
the nodes it needs from Karpenter, KAI binds every pod onto them through its own reservation pods, and the
placeholders go; and the pods' CPU, which Karpenter sees on KAI's pending pods itself, is not asked for again by
the placeholders (4 pods of half a GPU and 20 CPUs fit one 96-CPU node, and got two while placeholders repeated
their CPU); and the API faults the adjuster meets on its own requests (a create refused, dropped or answered 409,
a list that is not JSON, a watch cut or ended 410 Gone, a DELETE answered 503), injected by the fault proxy in front
of the API server (testcluster/fault_proxy.py) while Karpenter and KAI talk to it directly. More Karpenter scenarios
(the cheapest types, a burst in two passes, the hold through consolidation) are test_adjuster_karpenter_real.py's;
the stack and what the tests count, tests/kai_karpenter_world.py. cluster-autoscaler is not served by the module
proxy: test_adjuster_ca_on_real_api.py and the modules on its stack (tests/e2e/ca_on_real_api.py) run the same
scenarios against its simulation (kubesim/FIDELITY.md).

Played by the harness, because no container runs: the placeholder's `true` exiting, and the `sleep` of a placeholder
of replicas that must not share a host (kwok Stages, `benchmarks/adjuster_burst_real.py` `placeholder_stages`), and
KAI's reservation pod naming its GPU (testcluster/kai.py).
"""

from __future__ import annotations

import contextlib
import time
from typing import Any, Iterator

import pytest

from raybridge.adjuster.decision import consts
from testcluster.pytest_plugin import _unavailable
from tests.adjuster_world import deleted_by_reason
from tests.kai_karpenter_world import (WORK, PlaceholderLog, admin_api, adjuster, asked, burst, claims_described, clean_up, gpu_nodes, instance_types,
                                       kai_karpenter_stack, kai_pod, node_claims, placeholders, running, through_fault_proxy,
                                       unschedulable, wait)

pytestmark = [
    pytest.mark.skipif(_unavailable() is not None, reason=str(_unavailable())),
    pytest.mark.realtime,
    pytest.mark.xdist_group("testcluster-kai-karpenter"),  # one stack for the module's tests
    pytest.mark.timeout(900),
]


@pytest.fixture(scope="module")
def stack() -> Iterator[Any]:
    with kai_karpenter_stack() as running_stack:
        yield running_stack


@pytest.fixture
def api(stack: Any) -> Iterator[tuple[Any, Any, Any]]:
    with admin_api(stack) as apis:
        yield apis


def test_a_burst_gets_its_nodes_from_karpenter_and_kai_binds_every_pod(stack: Any, api: Any) -> None:
    api_client, core, _ = api
    with PlaceholderLog(core) as log, adjuster(api_client) as controller:
        burst(core, 20, "0.5", prefix="burst")  # 10 GPUs: placeholders of 8 and 2
        wait(stack, lambda: running(core) == 20, 240, "all 20 pods running")
        wait(stack, lambda: not placeholders(core), 120, "the placeholders deleted")
    # One 8 and one 2; a 2-GPU placeholder bound to the first node's GPUs after the 8 exited (kube-scheduler binds at
    # once, KAI a session later) is asked for again, onto the node on its way (no node more). KAI marks the pods
    # unschedulable one status write at a time: on a loaded machine a pass may come before the last of them (a
    # placeholder of 7 GPUs for 14 pods, grown to the 8 and 2 once the rest were seen; or, after the 8, one of 1 GPU
    # for 2 of the last 4 pods, grown to 2: seen once in a whole-suite run). The nodes below are the test.
    whole = log.gpus.index(8) if 8 in log.gpus else len(log.gpus)
    assert log.gpus.count(8) == 1 and 2 in log.gpus and set(log.gpus[whole + 1:]) <= {1, 2}, log.created
    assert all(gpus < 8 for gpus in log.gpus[:whole]), log.created  # before the whole burst: a part of it
    # Karpenter launches the cheapest type that holds each: an 8-GPU node for the 8, a 4-GPU node for the 2.
    assert instance_types(core) == ["gpu-4x", "gpu-8x"], instance_types(core)
    shared = core.list_namespaced_pod("kai-resource-reservation").items
    assert len(shared) == 10, [p.metadata.name for p in shared]  # KAI's own reservation pods: one per shared GPU
    # The pods landed on the nodes the first placeholders brought up: none waited out its provisioning timeout.
    assert "provision-timeout" not in deleted_by_reason(controller), deleted_by_reason(controller)


def test_the_pods_cpu_is_asked_for_once(stack: Any, api: Any) -> None:
    # 4 pods of half a GPU and 20 CPUs: Karpenter provisions for KAI's pending pods' CPU itself; a placeholder of
    # 2 GPUs that asked for the 80 CPUs again found no room on the node launched for them and got a second one.
    api_client, core, custom = api
    with adjuster(api_client):
        with stack.paused("karpenter"):  # it decides on the 4 pods and the placeholder together, however slowly they come
            burst(core, 4, "0.5", cpu="20", prefix="cpu")
            wait(stack, lambda: unschedulable(core) == 4 and asked(core) == 2, 60, "a placeholder of 2 GPUs for the 4")
        wait(stack, lambda: running(core) == 4, 240, "all 4 pods running")
        wait(stack, lambda: not placeholders(core), 120, "the placeholders deleted")
    assert instance_types(core) == ["gpu-8x"], instance_types(core)
    assert len(node_claims(custom)) == 1, [c["metadata"]["name"] for c in node_claims(custom)]  # no CPU node for the pods either


def test_a_wave_beside_a_pending_placeholder_gets_the_nodes_it_needs(stack: Any, api: Any) -> None:
    # A pod of 0.9 GPU, then 10 more while its placeholder still waits: 11 GPUs. Counting the rest of the first
    # node for 7 of the 10 without asking left Karpenter 1 + 3 GPUs to launch for (one 4-GPU node), and the pods
    # it could not hold waited for another round. A top-up placeholder asks for those 7.
    api_client, core, custom = api
    with adjuster(api_client) as controller:
        with stack.paused("karpenter"):
            burst(core, 1, "0.9", prefix="first")
            wait(stack, lambda: len(placeholders(core)) == 1, 60, "the first placeholder")
            burst(core, 10, "0.9", prefix="wave")
            wait(stack, lambda: unschedulable(core) == 11, 60, "KAI finding no room for the 11")
            # What Karpenter will see when it wakes: every GPU the 11 pods need, not 1 + 3.
            wait(stack, lambda: asked(core) == 11, 30, "placeholders asking for the 11 GPUs")
        wait(stack, lambda: running(core) == 11, 240, "all 11 pods running")
        claims = claims_described(custom)
        wait(stack, lambda: not placeholders(core), 120, "the placeholders deleted")
    assert len(claims) == 2, (claims, deleted_by_reason(controller))  # one launch, no second round
    assert sum(int(t.split("-")[1].rstrip("x")) for t in instance_types(core)) >= 11, instance_types(core)
    assert "provision-timeout" not in deleted_by_reason(controller), deleted_by_reason(controller)


def test_replicas_that_must_not_share_a_host_get_a_node_each(stack: Any, api: Any) -> None:
    # Two replicas of half a GPU with a required anti-affinity by hostname: one 1-GPU placeholder brought one
    # node, KAI put one replica there and refused the other, whose GPUs the node's room "covered" until the
    # provision timeout. Now a placeholder each, kept apart: two nodes, both replicas running.
    api_client, core, _ = api
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "trainer"}}, "topologyKey": "kubernetes.io/hostname"}]}}
    with adjuster(api_client) as controller:
        with stack.paused("karpenter"):  # it decides on the replicas and both placeholders together
            for i in range(2):
                replica = kai_pod(f"r-{i}", "0.5")
                replica["metadata"]["labels"]["app"] = "trainer"
                replica["spec"]["affinity"] = anti
                core.create_namespaced_pod(WORK, replica)
            wait(stack, lambda: unschedulable(core) == 2 and len(placeholders(core)) == 2, 60, "a placeholder for each replica")
        wait(stack, lambda: running(core) == 2, 90, "both replicas running")
        wait(stack, lambda: not placeholders(core), 120, "the placeholders deleted")
    nodes = {p.spec.node_name for p in core.list_namespaced_pod(WORK).items}
    # Two GPU nodes. (Karpenter also launches for the second replica itself, which fits no node beside the first: a
    # CPU node where that NodeClaim holds the replica alone.) The second placeholder may land on the first's node
    # once the first has exited (kube-scheduler forgets finished pods) and be replaced by one kept off that node:
    # a placeholder more, never a node more.
    created = controller.metrics.registry.get_sample_value("raybridge_adjuster_placeholder_actions_total", {"action": "create", "reason": "demand"})
    assert len(nodes) == 2 and len(gpu_nodes(core)) == 2 and created in (2, 3), (nodes, created, instance_types(core))


def test_four_replicas_that_must_not_share_a_host_get_four_gpu_nodes_run_after_run(stack: Any, api: Any) -> None:
    """4 anti-affine replicas of half a GPU got 7 to 9 NodeClaims: 3 CPU ones Karpenter launched for the replicas it
    sees pending, which the placeholders' copy of their anti-affinity kept off the GPU NodeClaims (a required term is
    checked both ways), and in 2 of 4 bursts a GPU node more, when a placeholder, bound to a node whose placeholder had
    exited before its replica landed, was counted for nothing. Now a placeholder of such replicas runs until its
    replica is there (its `sleep`), without the replicas' own-kind terms, and keeps off the nodes of the kind by
    hostname: 4 GPU NodeClaims in each of 4 bursts, the replicas on 4 of them (the numbers per burst are printed;
    docs/adjuster.md has them per run)."""
    api_client, core, custom = api
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "trainer"}}, "topologyKey": "kubernetes.io/hostname"}]}}
    bursts = []
    for attempt in range(4):
        with adjuster(api_client) as controller:
            started = time.monotonic()
            for i in range(4):
                replica = kai_pod(f"r-{i}", "0.5")
                replica["metadata"]["labels"]["app"] = "trainer"
                replica["spec"]["affinity"] = anti
                core.create_namespaced_pod(WORK, replica)
            wait(stack, lambda: running(core) == 4, 120, f"burst {attempt}: the 4 replicas running")
            seconds = time.monotonic() - started
            wait(stack, lambda: not placeholders(core), 120, f"burst {attempt}: the placeholders deleted")
            claims = node_claims(custom)
            types = sorted((c["metadata"].get("labels") or {}).get("node.kubernetes.io/instance-type", "?") for c in claims)
            actions = {f"{s.labels['action']}:{s.labels['reason']}": int(s.value) for metric in controller.metrics.registry.collect()
                       if metric.name == "raybridge_adjuster_placeholder_actions" for s in metric.samples
                       if s.name.endswith("_total") and s.value}
        hosts = {p.spec.node_name for p in core.list_namespaced_pod(WORK).items}
        bursts.append({"gpu_claims": sum(1 for t in types if t.startswith("gpu")), "other_claims": sum(1 for t in types if not t.startswith("gpu")),
                       "types": types, "replica_nodes": len(hosts), "placeholders": actions, "seconds": round(seconds, 1)})
        print(f"burst {attempt}: {bursts[-1]}")
        clean_up(stack, api_client)
    # Each burst exactly its GPU nodes. CPU NodeClaims, where they come, are Karpenter's own for replicas it sees
    # pending before any placeholder; a placeholder more (one replaced) may come, never a node more.
    assert all(b["gpu_claims"] == 4 and b["replica_nodes"] == 4 for b in bursts), "\n".join(map(str, bursts))


# --- faults: the adjuster's requests through the fault proxy, Karpenter's and KAI's straight to the API server -----


@pytest.fixture(scope="module")
def proxy(stack: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Any]]:
    """A fault proxy in front of the stack's API server (testcluster/fault_proxy.py) and the admin's client through it."""
    with through_fault_proxy(stack, tmp_path_factory.mktemp("adjuster-faults")) as proxied:
        yield proxied


PODS_IN_NS = rf"/api/v1/namespaces/{consts.DEFAULT_NAMESPACE}/pods"
FAULTS = [
    pytest.param(dict(method="POST", path=PODS_IN_NS, code=409, reason="Conflict"), id="409-on-create"),
    pytest.param(dict(method="POST", path=PODS_IN_NS, code=429, retry_after=1), id="429-retry-after"),
    pytest.param(dict(method="POST", path=PODS_IN_NS, code=500, times=3), id="500-three-times"),
    pytest.param(dict(method="POST", path=PODS_IN_NS, drop=True), id="dropped-create"),
    pytest.param(dict(method="GET", path=r"/api/v1/pods", code=200, body='{"kind": "PodList', content_type="application/json"), id="non-json-list"),
    pytest.param(dict(method="GET", path=r"/api/v1/pods", after_events=1, drop=True, times=2), id="dropped-watch"),
    pytest.param(dict(method="GET", path=r"/api/v1/pods", code=410, after_events=1), id="watch-410-gone"),
    pytest.param(dict(method="DELETE", path=PODS_IN_NS + "/.*", code=503, times=2), id="503-on-delete"),
]


@pytest.mark.parametrize("fault", FAULTS)
def test_api_faults_are_survived(stack: Any, api: Any, proxy: tuple[Any, Any], fault: dict[str, Any]) -> None:
    """The adjuster meets each fault on its own requests and still gets the burst its one node, once."""
    _, core, _ = api
    fault_proxy, through = proxy
    spec = dict(fault)
    burst(core, 6, "0.5")  # 3 GPUs: one placeholder
    injected = fault_proxy.arm(spec.pop("method"), spec.pop("path"), **spec)
    try:
        with adjuster(through) as controller:
            wait(stack, lambda: running(core) == 6, 240, "all 6 pods running")
            wait(stack, lambda: not placeholders(core), 120, "the placeholders deleted")
            assert controller.leading.is_set()
    finally:
        fault_proxy.clear()
    assert injected.hits >= 1
    assert len(gpu_nodes(core)) == 1, instance_types(core)


def test_a_restart_mid_reconcile_adopts_leaks_nothing_and_duplicates_nothing(stack: Any, api: Any, proxy: tuple[Any, Any]) -> None:
    """An adjuster whose second create keeps failing (the fault proxy lets the first through, then answers 503) stops
    while it retries; the next one adopts the placeholder the first made (the same object, not a copy), makes the
    one missing, and the burst gets its nodes: nothing leaked, nothing created twice. Karpenter is held back until
    the restart, so the nodes come for the second adjuster's placeholders."""
    api_client, core, _ = api
    fault_proxy, through = proxy
    with PlaceholderLog(core) as log, contextlib.ExitStack() as held:
        held.enter_context(stack.paused("karpenter"))
        burst(core, 20, "0.5", prefix="restart")  # 10 GPUs: placeholders of 8 and 2
        wait(stack, lambda: unschedulable(core) == 20, 60, "the burst unschedulable")
        failing = fault_proxy.arm("POST", PODS_IN_NS, code=503, times=None, passes=1)
        try:
            with adjuster(through):  # stops while retrying its second create
                wait(stack, lambda: failing.hits >= 2, 60, "the second create failing, retried")
        finally:
            fault_proxy.clear()
        adopted = {p.metadata.name: p.metadata.uid for p in placeholders(core)}
        assert len(adopted) == 1, adopted
        with adjuster(api_client):
            wait(stack, lambda: len(placeholders(core)) == 2, 60, "the missing placeholder made")
            survivors = {p.metadata.name: p.metadata.uid for p in placeholders(core)}
            assert all(survivors.get(name) == uid for name, uid in adopted.items()), (adopted, survivors)  # adopted
            held.close()  # Karpenter runs again
            wait(stack, lambda: running(core) == 20, 240, "all 20 pods running")
            wait(stack, lambda: not placeholders(core), 120, "the placeholders deleted")
    names = [name for name, _, _ in log.created]
    # The adopted one and the missing one, each once; the 2-GPU one is asked for again each time it is bound to the
    # GPUs the 8-GPU one brought up, until KAI's pods fill them (test_adjuster_races_on_real_api.py,
    # test_a_placeholder_bound_to_the_gpus_another_brought_up_...): how often is the race's, the nodes are not.
    assert len(names) == len(set(names)) and sorted(log.gpus[:2]) == [2, 8] and set(log.gpus[2:]) <= {2}, log.created
    assert instance_types(core) == ["gpu-4x", "gpu-8x"], instance_types(core)
