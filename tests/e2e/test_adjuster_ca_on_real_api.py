"""`adjuster run` with the simulated cluster-autoscaler and KAI (kubesim/sim_gpu.py) as clients of the real
kube-apiserver, beside the real kube-scheduler and kwok's kubelets (tests/sims_on_real_api.py).

What a platform team on cluster-autoscaler would check: a burst of fractional pods gets the planned GPUs once, the
pods land, the placeholders go, whether the burst is seen in one pass or two, arrives over seconds or meets node
groups of two sizes; in `--mode provisioning-request` one request carries the groups and is cleaned up, a failed
one (or one whose PodTemplate is gone) is asked for again after the backoff, one short of capacity is kept, one
brings the node type that holds its pods' CPU, and a waiting one is replaced when its group's demand grows.
Here the placeholders are bound by the real kube-scheduler and run (their `true` exits) by kwok, the API is the real
one (its validation, its binding subresource, its watches), and only what cannot be built runs simulated:
cluster-autoscaler (the module proxy refuses it) and KAI's scheduler and binder past v0.12.

What it deliberately does not do: the same scenarios with Karpenter (test_adjuster_real.py runs the real one), or
what the adjuster holds back, refuses or says (test_adjuster_guards_on_real_api.py, on the same stack: conftest.py
`ca_stack`, tests/e2e/ca_on_real_api.py).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.request
from datetime import datetime, timezone
from typing import Any, Iterator, Optional

import pytest

from raybridge.adjuster.decision import consts
from testcluster.pytest_plugin import _unavailable
from tests.helpers import ROOT, free_port
from tests.adjuster_world import (GRACE_PERIOD, NS, SLIM_ADJUSTER, WORK, burst, deleted_by_reason, placeholders, request_pods,
                                  requests, running, templates)
from tests.waits import ShiftedClock, wait_for
from tests.e2e.ca_on_real_api import (XDIST_GROUP, asked_gpus, placeholder_log, placeholder_priority, request_log, running_controller, settings,
                                      simulated, state_on_timeout, wait_unschedulable)

pytestmark = [
    pytest.mark.skipif(_unavailable() is not None, reason=str(_unavailable())),
    pytest.mark.realtime,
    pytest.mark.xdist_group(XDIST_GROUP),  # one stack for this and test_adjuster_guards_on_real_api.py
    pytest.mark.timeout(600),
]


@pytest.fixture
def stack(ca_stack: Any) -> Any:
    """The worker's shared stack (conftest.py `ca_stack`, tests/e2e/ca_on_real_api.py)."""
    return ca_stack


@pytest.fixture
def cluster(ca_stack: Any) -> Iterator[tuple[Any, Any]]:
    """`simulated` with the default node group: 8-GPU nodes of 128 CPUs."""
    with simulated(ca_stack) as started:
        yield started


def test_a_burst_gets_the_planned_gpus_once_the_pods_land_and_the_placeholders_go(cluster: tuple[Any, Any]) -> None:
    client, sim = cluster
    with placeholder_log(client) as created:
        burst(client, 20, "0.5", "burst")  # 10 GPUs: one 8-GPU placeholder and one of 2
        wait_unschedulable(client, sim, 20)
        with running_controller(client, settings()) as controller:
            wait_for(lambda: running(client) == 20, timeout=90, what="all 20 pods running")
            wait_for(lambda: not placeholders(client), timeout=30, what="the placeholders deleted")
            assert controller.passes > 0
    gpus = [asked_gpus(p) for p in created.objects]
    # One 8 and one 2; a placeholder bound to the GPUs another brought up (the real kube-scheduler binds at once, KAI
    # a session later) is asked for again, 2 GPUs each time.
    assert sorted(gpus[:2]) == [2, 8] and set(gpus[2:]) <= {2}, gpus
    # ceil(10 / 8) = 2 nodes, and at most one more per placeholder asked for again: with the real scheduler, such a
    # placeholder lives a few hundred milliseconds before it is found counted for nothing, and an autoscaler loop
    # in that time scales up for it (2 to 4 nodes seen; test_adjuster_races_on_real_api.py, which steps the
    # simulations by hand and holds kwok back to fix the order, gets exactly 2: test_a_placeholder_bound_to_the_gpus_...).
    assert 2 <= len(sim.added_nodes) <= len(gpus), (sim.added_nodes, gpus)


def test_provisioning_request_mode_asks_once_per_group_and_cleans_up(cluster: tuple[Any, Any]) -> None:
    client, sim = cluster
    with request_log(client) as created:
        burst(client, 20, "0.5", "request")  # 10 GPUs: podSets of one 8-GPU and one 2-GPU placeholder
        wait_unschedulable(client, sim, 20)
        with running_controller(client, settings(mode="provisioning-request")):
            wait_for(lambda: running(client) == 20, timeout=90, what="all 20 pods running")
            wait_for(lambda: not requests(client) and not templates(client), timeout=30, what="the request and its templates deleted")
    assert len(created.objects) == 1, [c["metadata"]["name"] for c in created.objects]
    spec = created.objects[0]["spec"]
    assert spec["provisioningClassName"] == consts.DEFAULT_PROVISIONING_CLASS
    assert sorted(p["count"] for p in spec["podSets"]) == [1, 1] and created.objects[0]["metadata"]["labels"][consts.GPUS_LABEL] == "10"
    assert len(sim.added_nodes) == 2, sim.added_nodes
    assert not placeholders(client)  # no placeholder pods in this mode


def test_a_burst_seen_in_two_passes_fills_the_first_placeholders_node_before_asking_for_more(cluster: tuple[Any, Any]) -> None:
    # The CI failure behind the rule: the burst crossed a second boundary, the first pass asked for 5 GPUs and
    # the next, with that placeholder still waiting for its node, for 8+8+8+1 more: 5 nodes for 30 GPUs.
    client, sim = cluster
    sim.autoscaler.clock.pause()  # the first node is still on its way when the second wave is planned
    with placeholder_log(client) as created:
        with running_controller(client, settings(provision_timeout=120.0)) as controller:
            burst(client, 5, "0.6", "first")
            wait_for(lambda: created.objects, timeout=20, what="the first placeholder")
            asked = sum(asked_gpus(p) for p in created.objects)
            assert asked < 8, asked  # asked for part of a node: the rest of the burst comes next
            burst(client, 25, "0.6", "second")
            wait_unschedulable(client, sim, 30)
            passes = controller.passes
            wait_for(lambda: controller.passes >= passes + 2, timeout=20, what="two passes after the second wave")
            sim.autoscaler.clock.resume()
            wait_for(lambda: running(client) == 30, timeout=90, what="all 30 pods running")
            wait_for(lambda: not placeholders(client), timeout=30, what="the placeholders deleted")
    assert len(sim.added_nodes) == 4, (sim.added_nodes, deleted_by_reason(controller))


def test_pods_arriving_over_seconds_get_one_scale_up(cluster: tuple[Any, Any]) -> None:
    client, sim = cluster
    with running_controller(client, settings(), clock=lambda: datetime.now(timezone.utc)) as controller:
        for wave in range(4):
            burst(client, 5, "0.5", f"wave{wave}")
            time.sleep(0.4)
        wait_for(lambda: running(client) == 20, timeout=90, what="all 20 pods running")
        wait_for(lambda: not placeholders(client), timeout=30, what="the placeholders deleted")
    assert "demand-gone" not in deleted_by_reason(controller)  # a placeholder goes only when it grows or its pods land
    assert len(sim.added_nodes) == 2, sim.added_nodes


#: cluster-autoscaler's node groups: 4 GPUs and 48 CPUs, 8 GPUs and 96 CPUs.
TWO_GROUPS_OF_SIZES = (("gpu-4x", 4, "48", "384Gi"), ("gpu-8x", 8, "96", "768Gi"))


@pytest.mark.parametrize("count,nodes,groups", [(20, 2, None), (6, 1, ["gpu-4x"]), (32, 2, ["gpu-8x", "gpu-8x"])],
                         ids=["10-gpus", "3-gpus", "16-gpus"])  # fmt: skip
def test_two_node_groups_of_different_sizes_get_the_nodes_the_burst_needs(stack: Any, count: int, nodes: int, groups: Any) -> None:
    """cluster-autoscaler's default expander since 1.33 is least-waste (expander/waste/waste.go), which weighs CPU and
    memory only: for placeholders that ask for almost none, options differ by millionths (10 GPUs as 8 + 2 may come
    as an 8- and a 4-GPU node or as two 8-GPU nodes). The plan splits placeholders at the largest node and credits
    each the room its node really has, so whichever comes, the pods get their GPUs in one round."""
    from kubesim.sim_autoscaler import NODE_GROUP_LABEL, NodeGroup

    two_groups = [NodeGroup(name, gpus=gpus, cpu=cpu, memory=memory) for name, gpus, cpu, memory in TWO_GROUPS_OF_SIZES]
    with simulated(stack, node_groups=two_groups) as (client, sim):
        burst(client, count, "0.5", f"sizes{count}")
        wait_unschedulable(client, sim, count)  # one burst, seen in one pass
        with running_controller(client, settings(provision_timeout=60.0)) as controller, state_on_timeout(client, sim, controller):
            wait_for(lambda: running(client) == count, timeout=90, what=f"all {count} pods running")
            wait_for(lambda: not placeholders(client), timeout=30, what="the placeholders deleted")
        added = sorted(((client.get_object("v1", "Node", name) or {}).get("metadata", {}).get("labels") or {}).get(NODE_GROUP_LABEL, "?")
                       for name, _ in sim.added_nodes)  # fmt: skip
        assert len(added) == nodes and (groups is None or added == groups), (added, deleted_by_reason(controller), sim.added_nodes)
        assert "provision-timeout" not in deleted_by_reason(controller)


# --- --mode provisioning-request ------------------------------------------------------------------


def _conditions(client: Any) -> list[dict[str, Any]]:
    return [c for r in requests(client) for c in (r.get("status") or {}).get("conditions") or []]


def test_a_failed_request_is_asked_for_again_after_the_backoff(cluster: tuple[Any, Any]) -> None:
    client, sim = cluster
    sim.fail_requests = True
    with request_log(client) as created:
        burst(client, 4, "0.5", "failing")
        wait_unschedulable(client, sim, 4)
        clock = ShiftedClock(ahead=1 + GRACE_PERIOD)  # past_grace, moved on past the backoff below instead of waiting it out
        with running_controller(client, settings(mode="provisioning-request", failed_backoff=60.0, provision_timeout=600.0), clock=clock) as controller:
            wait_for(lambda: any(c.get("type") == "Failed" for c in _conditions(client)), timeout=30, what="the request Failed")
            passes = controller.passes
            wait_for(lambda: controller.passes >= passes + 3, timeout=20, what="passes within the backoff")
            assert len(created.objects) == 1  # within the backoff, nothing new
            sim.fail_requests = False
            clock.ahead += 60.0
            wait_for(lambda: running(client) == 4, timeout=90, what="all pods running")
            wait_for(lambda: not requests(client) and not templates(client), timeout=30, what="cleaned up")
    assert len(created.objects) == 2, [c["metadata"]["name"] for c in created.objects]
    assert len(sim.added_nodes) == 1


def test_a_request_whose_pod_template_is_gone_fails_and_is_asked_for_again(cluster: tuple[Any, Any]) -> None:
    """cluster-autoscaler marks a request it cannot build pods for Failed, reason FailedToCreatePods
    (processors/provreq/injector.go): a PodTemplate someone deleted. The adjuster asks again after its backoff."""
    client, sim = cluster
    sim.autoscaler.clock.pause()
    with request_log(client) as created:
        burst(client, 4, "0.5", "orphaned")
        wait_unschedulable(client, sim, 4)
        with running_controller(client, settings(mode="provisioning-request", failed_backoff=0.5)):
            wait_for(lambda: templates(client) and requests(client), timeout=30, what="the request and its template")
            for template in templates(client):
                client.delete_object("v1", "PodTemplate", template["metadata"]["name"], NS)
            sim.autoscaler.clock.resume()
            # read from the watch: with a backoff of 0.5 s the failed request may be replaced between two polls
            failed = wait_for(lambda: [c for r in created.versions for c in (r.get("status") or {}).get("conditions") or []
                                       if c.get("type") == "Failed"], timeout=30, what="the request Failed")  # fmt: skip
            assert failed[0]["reason"] == "FailedToCreatePods", failed
            wait_for(lambda: running(client) == 4, timeout=90, what="all pods running")
    assert len(created.objects) == 2, [c["metadata"]["name"] for c in created.objects]


def test_a_request_short_of_capacity_is_kept_until_the_autoscaler_finds_it(cluster: tuple[Any, Any]) -> None:
    """A shortage is Provisioned=False/CapacityIsNotFound, which the autoscaler retries: not a failure to replace."""
    client, sim = cluster
    sim.shortage = True
    with request_log(client) as created:
        burst(client, 4, "0.5", "short")
        wait_unschedulable(client, sim, 4)
        with running_controller(client, settings(mode="provisioning-request", failed_backoff=0.5)) as controller:
            wait_for(lambda: any(c.get("reason") == "CapacityIsNotFound" for c in _conditions(client)), timeout=30,
                     what="the request short of capacity")  # fmt: skip
            passes = controller.passes
            wait_for(lambda: controller.passes > passes + 3, timeout=20, what="a few passes")
            assert len(created.objects) == 1 and len(requests(client)) == 1
            sim.shortage = False
            wait_for(lambda: running(client) == 4, timeout=90, what="all pods running")
    assert len(created.objects) == 1 and len(sim.added_nodes) == 1


#: Two GPU node types alike but for their CPU: the lean one first by name, which the least-waste expander's tie goes
#: to where a request asks for GPUs alone.
LEAN_AND_ROOMY = (("a-lean", "16", "128Gi"), ("b-roomy", "128", "1024Gi"))


def test_a_request_brings_the_node_type_that_holds_its_pods_cpu(stack: Any) -> None:
    """cluster-autoscaler serves a request and ordinary pods in alternate loops, so KAI's pods are never sized with
    the request (a placeholder pod and KAI's pods are, in one loop): the request's pods carry the CPU and memory of
    the pods they are for, or the node type it brings may hold their GPUs but not their CPU. 8 halves of 10 CPUs
    (80 CPUs, 4 GPUs) on a cluster whose CPU node has room for them in the autoscaler's eyes: one node, the roomy one."""
    from kubesim.sim_autoscaler import NODE_GROUP_LABEL, NodeGroup
    from kubesim.sim_gpu import fraction_pod, register_gpu_node
    from tests.sims_on_real_api import RealApi

    groups = [NodeGroup(name, gpus=8, cpu=cpu, memory=memory) for name, cpu, memory in LEAN_AND_ROOMY]
    with simulated(stack, node_groups=groups) as (client, sim):
        register_gpu_node(RealApi(client), "sim-gpu-node-cpu-pool", gpus=0, cpu="256", memory="1024Gi")  # the CPU pool
        for i in range(8):
            client.create_object(fraction_pod(f"cpu-{i}", WORK, fraction="0.5", cpu="10", memory="8Gi"))
        wait_unschedulable(client, sim, 8)
        with running_controller(client, settings(mode="provisioning-request")):
            wait_for(lambda: running(client) == 8, timeout=90, what="all 8 pods running")
            wait_for(lambda: not requests(client), timeout=30, what="the request deleted")
        added = [client.get_object("v1", "Node", name)["metadata"]["labels"][NODE_GROUP_LABEL] for name, _ in sim.added_nodes]
        assert added == ["b-roomy"], added


def test_a_waiting_request_is_replaced_when_its_groups_demand_grows(cluster: tuple[Any, Any]) -> None:
    client, sim = cluster
    sim.autoscaler.clock.pause()  # the first request still waits when the second wave comes
    with request_log(client) as created:
        burst(client, 4, "0.5", "a")
        wait_unschedulable(client, sim, 4)
        with running_controller(client, settings(mode="provisioning-request")) as controller:
            wait_for(lambda: len(created.objects) == 1, timeout=30, what="the first request")
            burst(client, 4, "0.5", "b")
            # The second wave's pods may pass their grace period a second apart (lastTransitionTime has whole
            # seconds): one replacement for all four, or one for the first ones and another for the rest; and
            # where the first three come first, the request for 7 halves asks for 4 GPUs, whose half left
            # over holds the last pod: no third request.
            wait_for(lambda: created.objects and created.objects[-1]["metadata"]["labels"][consts.GPUS_LABEL] == "4", timeout=30,
                     what="a request for the 4 GPUs all 8 pods need")  # fmt: skip
            passes = controller.passes
            wait_for(lambda: controller.passes > passes + 3, timeout=20, what="a few passes")
            sim.autoscaler.clock.resume()
            last = created.objects[-1]["metadata"]["name"]
            wait_for(lambda: len(requests(client)) == 1 and {t["metadata"]["labels"][consts.REQUEST_LABEL] for t in templates(client)} == {last},
                     timeout=20, what="the replaced requests and their templates deleted")  # fmt: skip
            live = requests(client)
            assert [r["metadata"]["name"] for r in live] == [last]
            assert live[0]["metadata"]["labels"][consts.GPUS_LABEL] == "4"
            assert len(request_pods(live[0])) >= 7 and {f"{WORK}/a-{i}" for i in range(4)} <= set(request_pods(live[0]))
            wait_for(lambda: running(client) == 8, timeout=90, what="all 8 pods running")
            wait_for(lambda: not requests(client) and not templates(client), timeout=30, what="cleaned up")
    sizes = [len(request_pods(c)) for c in created.objects]
    assert len(created.objects) in (2, 3) and sizes == sorted(set(sizes)) and sizes[0] == 4, sizes  # each replacement for more pods
    assert len(sim.added_nodes) == 1, sim.added_nodes  # 4 GPUs: one node, not one per request
    registry = controller.metrics.registry
    assert registry.get_sample_value("raybridge_adjuster_placeholder_actions_total", {"action": "delete", "reason": "replaced"}) == len(created.objects) - 1


# --- waves, CPU, priorities -----------------------------------------------------------------------


def test_waves_grow_the_placeholder_of_the_node_they_will_share(cluster: tuple[Any, Any]) -> None:
    client, sim = cluster
    sim.autoscaler.clock.pause()  # every placeholder still pending when the last wave comes
    # Waves that each come after the batch window closed (which `batch_idle=0` makes of every wave).
    with running_controller(client, settings(batch_idle=0.0)) as controller:
        for wave in range(4):
            burst(client, 5, "0.5", f"grow{wave}")
            # Each wave is its own pass: the next comes once the controller has seen this one's pods waiting.
            wait_unschedulable(client, sim, 5 * (wave + 1))
            passes = controller.passes
            wait_for(lambda: controller.passes >= passes + 2, timeout=20, what=f"two passes after wave {wave}")
        asked = sorted(asked_gpus(p) for p in placeholders(client))
        assert not sim.added_nodes  # still all pending: what the waves asked for, before any node came
        sim.autoscaler.clock.resume()
        wait_for(lambda: running(client) == 20, timeout=90, what="all 20 pods running")
        wait_for(lambda: not placeholders(client), timeout=30, what="the placeholders deleted")
    registry = controller.metrics.registry
    assert not registry.get_sample_value("raybridge_adjuster_placeholder_actions_total", {"action": "delete", "reason": "demand-gone"})
    # 20 halves in 4 waves: each wave's pods fill the node an earlier wave's placeholder is on its way for (that one
    # grows), so what the autoscaler sees when it looks is the 10 GPUs the 20 need, and it adds two nodes.
    assert sum(asked) == 10, asked
    assert len(sim.added_nodes) == 2, sim.added_nodes


def test_the_pods_cpu_is_asked_for_once(stack: Any) -> None:
    """4 pods of 0.5 GPU and 20 CPU in a pool of 8-GPU, 96-CPU nodes: one node holds them. The autoscaler places the
    waiting pods (CPU, no GPU) itself as well as the placeholder, so a placeholder that asked for the 80 CPU again
    got two nodes."""
    from kubesim.sim_autoscaler import NodeGroup
    from kubesim.sim_gpu import fraction_pod

    with simulated(stack, node_groups=[NodeGroup("gpu-8x", gpus=8, cpu="96", memory="512Gi")]) as (client, sim):
        for i in range(4):
            client.create_object(fraction_pod(f"cpu20-{i}", WORK, fraction="0.5", cpu="20"))
        wait_unschedulable(client, sim, 4)
        with running_controller(client, settings()):
            wait_for(lambda: running(client) == 4, timeout=90, what="all pods running")
            time.sleep(2 * sim.scan_interval + sim.provisioning_delay)  # a second node would have been decided by now
        assert len(sim.added_nodes) == 1, sim.added_nodes


def test_the_shipped_priority_class_is_one_the_autoscaler_scales_up_for(cluster: tuple[Any, Any]) -> None:
    """The simulated autoscaler ignores pods below its --expendable-pods-priority-cutoff (-10), as the real one; the
    shipped class is above it (the API server's Priority admission gives each placeholder its value)."""
    import yaml

    client, sim = cluster
    shipped = next(d for path in sorted((ROOT / "configs" / "adjuster").glob("*.yaml")) for d in yaml.safe_load_all(path.read_text())
                   if d and d["kind"] == "PriorityClass")  # fmt: skip
    with placeholder_priority(client, shipped["value"]):
        burst(client, 4, "0.5", "shipped")
        wait_unschedulable(client, sim, 4)
        with running_controller(client, settings()):
            wait_for(lambda: running(client) == 4, timeout=90, what="all pods running")
    assert len(sim.added_nodes) == 1, sim.added_nodes


def test_placeholders_below_the_cutoff_never_add_a_node(cluster: tuple[Any, Any]) -> None:
    client, sim = cluster
    with placeholder_priority(client, -1000):
        burst(client, 4, "0.5", "expendable")
        wait_unschedulable(client, sim, 4)
        with running_controller(client, settings()):
            placeholder = wait_for(lambda: placeholders(client), timeout=30, what="the placeholder")
            assert placeholder[0]["spec"]["priority"] == -1000  # the API server's Priority admission
            time.sleep(2 * sim.scan_interval + sim.provisioning_delay + 0.5)  # the simulated autoscaler's loops: no scale-up
    assert sim.added_nodes == [] and running(client) == 0


@pytest.mark.parametrize("mode", ["placeholder", "provisioning-request"])
def test_a_bad_pod_is_reported_and_does_not_stop_the_others(cluster: tuple[Any, Any], mode: str) -> None:
    """Both modes share one act step: each posts ScaleUpIgnored on a pod it does not count."""
    from kubesim.sim_gpu import fraction_pod

    client, sim = cluster
    bad = f"bad-{mode}"
    client.create_object(fraction_pod(bad, WORK, fraction="1.5"))  # more than a GPU: not a GPU-sharing request
    burst(client, 2, "0.5", f"good-{mode}")
    with running_controller(client, settings(mode=mode), clock=lambda: datetime.now(timezone.utc)) as controller:
        wait_for(lambda: running(client) == 2, timeout=90, what="the good pods running")
        wait_for(lambda: [e for e in client.list_objects("v1", "Event", WORK) if e["reason"] == "ScaleUpIgnored"],
                 timeout=30, what="an event on the bad pod")  # fmt: skip
        samples = {s.labels["reason"]: s.value for m in controller.metrics.registry.collect()
                   if m.name == "raybridge_adjuster_ignored_pods" for s in m.samples}  # fmt: skip
    ignored = [e for e in client.list_objects("v1", "Event", WORK) if e["reason"] == "ScaleUpIgnored"]
    assert [e["involvedObject"]["name"] for e in ignored] == [bad]
    assert ignored[0]["type"] == "Warning" and "does not count this pod" in ignored[0]["message"]
    assert sum(samples.values()) == 1, samples


# --- the CLI: metrics, health, leader election on the real API server's Leases ---------------------


def _adjuster(stack: Any, *args: str) -> "subprocess.Popen[str]":
    return subprocess.Popen([sys.executable, "-c", SLIM_ADJUSTER, "adjuster", "run", "--kubeconfig", str(stack.kubeconfig), "--grace-period", "0.2",
                             "--node-gpus", "8", "--resync", "0.2", *args], cwd=ROOT, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip


def _http_status(port: int, path: str) -> int:
    try:
        return urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2).status
    except OSError as exc:
        return getattr(exc, "code", 0) or 0


def _metric(port: int, name: str) -> str:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    return "\n".join(line for line in text.splitlines() if line.startswith(name))


def _lease(client: Any) -> dict[str, Any]:
    return (client.get_object("coordination.k8s.io/v1", "Lease", consts.DEFAULT_LEASE_NAME, NS) or {}).get("spec") or {}


def _lease_time(client: Any, field: str) -> datetime:
    """spec.renewTime or spec.acquireTime of the adjuster's Lease (RFC 3339 with microseconds)."""
    return datetime.fromisoformat(_lease(client)[field].replace("Z", "+00:00"))


def _terminate(*procs: "Optional[subprocess.Popen[str]]") -> None:
    """SIGTERM each replica still running and wait for it (the replica releases its Lease on the way out)."""
    for proc in procs:
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.communicate(timeout=60)


def test_the_cli_runs_reports_metrics_and_health_and_stops_on_sigterm(stack: Any, cluster: tuple[Any, Any]) -> None:
    client, sim = cluster
    port = free_port()
    burst(client, 4, "0.5", "cli")
    wait_unschedulable(client, sim, 4)
    time.sleep(1 + GRACE_PERIOD)  # the adjuster's clock is the real one: the condition's whole second and the grace period
    proc = _adjuster(stack, "--leader-election", "false", "--metrics-port", str(port), "--log-format", "json")
    try:
        wait_for(lambda: _http_status(port, "/readyz") == 200, timeout=30, what="/readyz")
        assert _http_status(port, "/healthz") == 200
        wait_for(lambda: running(client) == 4, timeout=90, what="all pods running")
        wait_for(lambda: not placeholders(client), timeout=30, what="the placeholders deleted")
        assert 'action="create"' in _metric(port, "raybridge_adjuster_placeholder_actions_total")
        assert "raybridge_adjuster_leader 1.0" in _metric(port, "raybridge_adjuster_leader")
        assert 'raybridge_adjuster_pending_fractional_gpus{vendor="nvidia"}' in _metric(port, "raybridge_adjuster_pending_fractional_gpus")
        assert _metric(port, "raybridge_adjuster_reconcile_duration_seconds_count")
        assert 'raybridge_adjuster_placeholder_gpus{state="pending"}' in _metric(port, "raybridge_adjuster_placeholder_gpus")
        events = client.list_objects("v1", "Event", WORK)
        assert any(e["reason"] == "ScaleUpRequested" and "asked for 2 nvidia.com/gpu for this pod and 3 others" in e["message"]
                   for e in events), [e["message"] for e in events]  # fmt: skip
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    lines = [json.loads(line) for line in err.splitlines() if line.strip()]
    assert any(entry["msg"].startswith("created placeholder") for entry in lines), err


def test_a_standby_takes_over_when_the_leader_dies(stack: Any, cluster: tuple[Any, Any]) -> None:
    client, sim = cluster
    # Lease timings with room for a loaded machine: a renewal late by more than the renew deadline would hand the
    # Lease over before the leader is killed (seen with 3 s and 2 s when the suite ran beside other work)
    lease, renew_deadline, retry = 6, 4, 1
    common = ["--metrics-port", "0", "--lease-duration", str(lease), "--renew-deadline", str(renew_deadline), "--retry-period", str(retry)]
    leader = _adjuster(stack, *common, "--identity", "replica-a")
    standby = None
    try:
        wait_for(lambda: _lease(client).get("holderIdentity") == "replica-a", timeout=30, what="replica-a leading")
        standby = _adjuster(stack, *common, "--identity", "replica-b")
        time.sleep(3)
        assert _lease(client).get("holderIdentity") == "replica-a"  # the standby waits while the lease is renewed
        leader.kill()  # no goodbye: the lease simply stops being renewed
        leader.communicate(timeout=10)
        last_renewed = _lease_time(client, "renewTime")
        wait_for(lambda: _lease(client).get("holderIdentity") == "replica-b", timeout=30, what="replica-b taking over")
        # Read from the Lease the replicas wrote (not from this test's polling): never before the lease expired,
        # and within a retry period and slack after.
        waited = (_lease_time(client, "acquireTime") - last_renewed).total_seconds()
        assert lease <= waited < lease + retry + 4, waited
        burst(client, 4, "0.5", "standby")
        wait_for(lambda: running(client) == 4, timeout=90, what="the new leader acting")
    finally:
        _terminate(leader, standby)


def test_a_leader_stopped_with_sigterm_hands_the_lease_over_at_once(stack: Any, cluster: tuple[Any, Any]) -> None:
    client, sim = cluster
    lease_duration = 60
    common = ["--metrics-port", "0", "--lease-duration", str(lease_duration), "--renew-deadline", "10", "--retry-period", "1"]
    leader = _adjuster(stack, *common, "--identity", "replica-a")
    standby = None
    try:
        wait_for(lambda: _lease(client).get("holderIdentity") == "replica-a", timeout=30, what="replica-a leading")
        standby = _adjuster(stack, *common, "--identity", "replica-b")
        time.sleep(3)
        assert _lease(client).get("holderIdentity") == "replica-a"
        leader.send_signal(signal.SIGTERM)
        _, err = leader.communicate(timeout=60)
        assert leader.returncode == 0, err
        assert _lease(client).get("holderIdentity") in (None, "", "replica-b")  # released on the way out, not left to expire
        # Taken over well within the 60 s lease: through the release, not its expiry.
        wait_for(lambda: _lease(client).get("holderIdentity") == "replica-b", timeout=lease_duration / 2, what="replica-b taking over")
        burst(client, 4, "0.5", "sigterm")
        wait_for(lambda: running(client) == 4, timeout=90, what="the new leader acting")
    finally:
        _terminate(leader, standby)


# --- a wave beside a pending placeholder -------------------------------------------------------------


def test_a_wave_beside_a_pending_placeholder_gets_the_nodes_it_needs(cluster: tuple[Any, Any]) -> None:
    # A 1-GPU wave, then 10 pods of 0.9 (a GPU each) while the first node is on its way: 11 GPUs, two nodes of 8.
    # Counting the first node's 7 other GPUs for 7 of the 10 asked the autoscaler for 3 more GPUs, which it
    # packed beside the first placeholder: one node, and 3 pods waited for a second scale-up.
    from kubesim.sim_gpu import fraction_pod

    client, sim = cluster
    sim.autoscaler.clock.pause()
    with placeholder_log(client) as created:
        # A second wave after the batch window closed (which `batch_idle=0` makes of it).
        with running_controller(client, settings(provision_timeout=120.0, batch_idle=0.0)) as controller:
            client.create_object(fraction_pod("beside-first", WORK, fraction="0.9"))
            wait_for(lambda: created.objects, timeout=30, what="the first placeholder")
            burst(client, 10, "0.9", "beside")
            wait_unschedulable(client, sim, 11)
            passes = controller.passes
            wait_for(lambda: controller.passes >= passes + 2, timeout=20, what="two passes after the second wave")
            asked = sorted(asked_gpus(p) for p in placeholders(client))
            assert sum(asked) == 11, asked  # what the autoscaler sees when it looks: every GPU the 11 need
            sim.autoscaler.clock.resume()
            wait_for(lambda: running(client) == 11, timeout=90, what="all 11 pods running")
            wait_for(lambda: not placeholders(client), timeout=30, what="the placeholders deleted")
    assert len(sim.added_nodes) == 2, (sim.added_nodes, deleted_by_reason(controller))
    assert "provision-timeout" not in deleted_by_reason(controller)
