"""What the node-scale-adjuster holds back, refuses or says, on the real kube-apiserver beside the real kube-scheduler
and kwok, with the simulated cluster-autoscaler and KAI past v0.12 as its clients (tests/e2e/ca_on_real_api.py).

What a platform admin would check before trusting it with their autoscaler:
- a PriorityClass below cluster-autoscaler's expendable cutoff: the CLI refuses, naming the cutoff it assumes, or runs
  with the cutoff the admin names;
- KAI's own node-scale-adjuster running: the CLI refuses; appearing later: no new placeholder until it goes;
- a placeholder stuck terminating (a finalizer) blocks nothing;
- a waiting ProvisioningRequest is replaced by a smaller one when its group's demand shrinks;
- a pod whose KAI PodGroup is over quota gets no placeholder until the verdict goes, and an Event says why;
- a placeholder the autoscaler refuses (Karpenter's Event at a NodePool's limits) is said on each pod it was for, and
  its group is not asked for again at once;
- a pod of higher priority that takes the node decided for a placeholder costs one more node and nothing waits (the
  real scheduler's priority queue decides who gets the node);
- a pod past its grace period with nothing changing on it is served on the controller's timer.

What it deliberately does not do: the bursts, `--mode provisioning-request`'s requests, the CLI's metrics and leader
election (test_adjuster_ca_on_real_api.py, on the same stack), the shipped RBAC, or Karpenter itself (the real one is
in test_adjuster_real.py; here its refusal Event is written as Karpenter v1.14.1 writes it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timezone
from typing import Any, Iterator

import pytest

from raybridge.adjuster.decision import consts
from raybridge.adjuster.decision.plan import plan_placeholders
from raybridge.adjuster.decision.settings import AdjusterSettings
from testcluster.pytest_plugin import _unavailable
from tests.adjuster_world import NS, SLIM_ADJUSTER, WORK, burst, deleted_by_reason, placeholders, request_pods, requests, running, templates
from tests.e2e.ca_on_real_api import (POD_GROUP_API, XDIST_GROUP, CollectedStderr, asked_gpus, cluster_state, placeholder_log, placeholder_priority,
                                      request_log, running_controller, settings, simulated, wait_unschedulable)
from tests.helpers import ROOT
from tests.waits import ShiftedClock, wait_for

pytestmark = [
    pytest.mark.skipif(_unavailable() is not None, reason=str(_unavailable())),
    pytest.mark.realtime,
    pytest.mark.xdist_group(XDIST_GROUP),  # the stack of test_adjuster_ca_on_real_api.py
    pytest.mark.timeout(600),
]


@pytest.fixture
def cluster(ca_stack: Any) -> Iterator[tuple[Any, Any]]:
    with simulated(ca_stack) as started:
        yield started


def _events(client: Any, reason: str) -> list[dict[str, Any]]:
    return [e for e in client.list_objects("v1", "Event", WORK) if e.get("reason") == reason]


def _delete_now(client: Any, namespace: str, name: str) -> None:
    """Delete a pod with no grace period and wait until it is gone."""
    from kubernetes import client as k8s

    with client.api_client() as api:
        try:
            k8s.CoreV1Api(api).delete_namespaced_pod(name, namespace, grace_period_seconds=0)
        except k8s.ApiException as exc:
            if exc.status != 404:
                raise
    wait_for(lambda: client.get_object("v1", "Pod", name, namespace) is None, timeout=30, what=f"pod {namespace}/{name} gone")


# --- the CLI's refusals -----------------------------------------------------------------------------------


def _cli(stack: Any, *args: str) -> "subprocess.Popen[str]":
    return subprocess.Popen([sys.executable, "-c", SLIM_ADJUSTER, "adjuster", "run", "--kubeconfig", str(stack.kubeconfig),
                             "--leader-election", "false", "--metrics-port", "0", *args],
                            cwd=ROOT, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=dict(os.environ))  # fmt: skip


def test_the_cli_refuses_a_priority_class_below_the_cutoff_and_says_the_cutoff_it_assumes(ca_stack: Any, cluster: Any) -> None:
    client, _ = cluster
    with placeholder_priority(client, -1000):
        proc = _cli(ca_stack)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 2, err
        assert "value -1000, below the cluster autoscaler's --expendable-pods-priority-cutoff (-10)" in err and "Traceback" not in err
        assert placeholders(client) == []
        run = CollectedStderr(_cli(ca_stack, "--expendable-pods-priority-cutoff", "-1000"))  # the admin's autoscaler runs with this cutoff
        try:
            wait_for(lambda: "cutoff is -1000" in run.text, timeout=30, what="the cutoff said")
        finally:
            assert run.stop() == 0, run.text
    assert run.text.count("--expendable-pods-priority-cutoff is -1000") == 1, run.text


KAI_NAMESPACE = "kai-scheduler"


def _kai_adjuster_pod(client: Any) -> dict[str, Any]:
    """The pod of KAI's own node-scale-adjuster (its operator's Deployment `node-scale-adjuster`, label app=node-scale-adjuster)."""
    if client.get_object("v1", "Namespace", KAI_NAMESPACE) is None:
        client.create_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": KAI_NAMESPACE}})
    return client.create_object({"apiVersion": "v1", "kind": "Pod",
                                 "metadata": {"name": "node-scale-adjuster-7f9c", "namespace": KAI_NAMESPACE, "labels": {"app": "node-scale-adjuster"}},
                                 "spec": {"containers": [{"name": "nsa", "image": "kai/nodescaleadjuster"}]}})  # fmt: skip


def test_the_cli_refuses_to_run_beside_kai_s_own_node_scale_adjuster(ca_stack: Any, cluster: Any) -> None:
    client, _ = cluster
    kai = _kai_adjuster_pod(client)
    try:
        proc = _cli(ca_stack)
        _, err = proc.communicate(timeout=60)
    finally:
        _delete_now(client, KAI_NAMESPACE, kai["metadata"]["name"])
    assert proc.returncode == 2, err
    assert "KAI's own node-scale-adjuster is running (kai-scheduler/node-scale-adjuster-7f9c)" in err
    assert "global.clusterAutoscaling=false" in err and "Traceback" not in err


def test_kai_s_adjuster_appearing_later_stops_new_placeholders_until_it_goes(cluster: Any) -> None:
    client, sim = cluster
    with placeholder_log(client) as created, running_controller(client, settings()) as controller:
        wait_for(lambda: controller.passes > 0, timeout=20, what="a first pass")
        kai = _kai_adjuster_pod(client)
        try:
            wait_for(lambda: controller.metrics.kai_adjuster_running._value.get() == 1, timeout=20, what="KAI's adjuster seen")
            burst(client, 4, "0.5", "beside-kai")
            wait_unschedulable(client, sim, 4)
            passes = controller.passes
            wait_for(lambda: controller.passes > passes + 2, timeout=20, what="passes with the pods past their grace period")
            assert created.objects == [] and placeholders(client) == []
        finally:
            _delete_now(client, KAI_NAMESPACE, kai["metadata"]["name"])
        wait_for(lambda: running(client) == 4, timeout=90, what="all pods running once it is gone")
    assert len(created.objects) == 1, [p["metadata"]["name"] for p in created.objects]


# --- placeholders and requests the adjuster finds in its way ------------------------------------------


def test_a_placeholder_stuck_terminating_blocks_nothing(cluster: Any) -> None:
    client, sim = cluster
    burst(client, 4, "0.5", "stuck")
    wait_unschedulable(client, sim, 4)
    group = plan_placeholders(client.list_objects("v1", "Pod", WORK), None, AdjusterSettings(grace_period_seconds=0),
                              datetime.now(timezone.utc)).placeholders[0].group  # fmt: skip
    stuck = f"{consts.NAME_PREFIX}-{group}-2g-0"  # the very name the adjuster would pick first
    client.create_object({"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": stuck, "namespace": NS, "finalizers": ["example.com/hold"],
        "labels": {consts.MANAGED_BY_LABEL: consts.MANAGED_BY_VALUE, consts.COMPONENT_LABEL: consts.PLACEHOLDER_COMPONENT,
                   consts.GROUP_LABEL: group, consts.GPUS_LABEL: "2"},
        "annotations": {consts.PODS_ANNOTATION: json.dumps([f"{WORK}/stuck-{i}" for i in range(4)])}},
        "spec": {"nodeSelector": {"no-such-node": "true"}, "containers": [{"name": "c", "image": "busybox"}]}})  # fmt: skip
    client.delete_object("v1", "Pod", stuck, NS)
    try:
        assert (client.get_object("v1", "Pod", stuck, NS) or {}).get("metadata", {}).get("deletionTimestamp")
        with running_controller(client, settings()):
            wait_for(lambda: running(client) == 4, timeout=90, what="all pods running")
            wait_for(lambda: [p["metadata"]["name"] for p in placeholders(client)] == [stuck], timeout=30, what="only the stuck one left")
        assert client.get_object("v1", "Pod", stuck, NS)["metadata"].get("deletionTimestamp")
    finally:
        from kubernetes import client as k8s

        with client.api_client() as api:
            k8s.CoreV1Api(api).patch_namespaced_pod(stuck, NS, {"metadata": {"finalizers": None}})


def test_a_waiting_request_is_replaced_by_a_smaller_one_when_its_groups_demand_shrinks(cluster: Any) -> None:
    client, sim = cluster
    sim.autoscaler.clock.pause()  # the first request still waits when half of its pods go
    burst(client, 24, "0.5", "shrink")  # 12 GPUs: two nodes of 8
    wait_unschedulable(client, sim, 24)
    with request_log(client) as log, running_controller(client, settings(mode="provisioning-request")) as controller:
        created = log.objects
        wait_for(lambda: len(created) == 1, timeout=20, what="the first request")
        assert created[0]["metadata"]["labels"][consts.GPUS_LABEL] == "12"
        for i in range(12, 24):
            client.delete_object("v1", "Pod", f"shrink-{i}", WORK)
        # A pass may see only some of the pods gone (a step on the way down), but it ends at the smaller demand.
        wait_for(lambda: created[-1]["metadata"]["labels"][consts.GPUS_LABEL] == "6", timeout=30, what="a request for 6 GPUs")
        last = created[-1]["metadata"]["name"]
        wait_for(lambda: [r["metadata"]["name"] for r in requests(client)] == [last], timeout=20, what="the replaced request deleted")
        wait_for(lambda: {t["metadata"]["labels"][consts.REQUEST_LABEL] for t in templates(client)} == {last},
                 timeout=20, what="the replaced request's templates deleted")  # fmt: skip
        assert request_pods(requests(client)[0]) == sorted(f"{WORK}/shrink-{i}" for i in range(12))
        sim.autoscaler.clock.resume()
        wait_for(lambda: running(client) == 12, timeout=90, what="the 12 pods left running")
        wait_for(lambda: not requests(client) and not templates(client), timeout=30, what="cleaned up")
    asked = [asked_gpus(c) for c in created]
    assert asked[0] == 12 and asked[-1] == 6 and all(a > b for a, b in zip(asked, asked[1:])), asked  # each one smaller
    assert len(sim.added_nodes) == 1, sim.added_nodes  # 6 GPUs: one node, not the two the first request asked for
    replaced = controller.metrics.registry.get_sample_value("raybridge_adjuster_placeholder_actions_total", {"action": "delete", "reason": "replaced"})
    assert replaced == len(created) - 1, (replaced, asked)


# --- KAI PodGroups: a queue over quota is no reason to add nodes --------------------------------------


def _over_limit_pod_group(client: Any, name: str) -> None:
    """A PodGroup as KAI writes it when the queue is out of quota (the pod's own condition only says 'no nodes'); its
    status through the status subresource, as KAI's scheduler writes it."""
    client.create_object({"apiVersion": POD_GROUP_API, "kind": "PodGroup", "metadata": {"name": name, "namespace": WORK},
                          "spec": {"minMember": 1, "queue": "q"}})  # fmt: skip
    found = client.get_object(POD_GROUP_API, "PodGroup", name, WORK)
    found["status"] = {"phase": "Pending", "schedulingConditions": [
        {"type": "UnschedulableOnNodePool", "nodePool": "default", "status": "True",
         "lastTransitionTime": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
         "reasons": [{"reason": "OverLimit", "message": "q quota has reached the allowable limit of GPUs"}]}]}  # fmt: skip
    client.update_status(found)


def test_a_pod_whose_pod_group_is_over_quota_gets_no_placeholder_until_the_quota_verdict_goes(cluster: Any) -> None:
    from kubesim.sim_gpu import fraction_pod

    client, sim = cluster
    _over_limit_pod_group(client, "pg-a")
    pod = fraction_pod("a", WORK, fraction="0.5")
    pod["metadata"]["annotations"]["pod-group-name"] = "pg-a"
    client.create_object(pod)
    wait_unschedulable(client, sim, 1)
    message = client.get_object("v1", "Pod", "a", WORK)["status"]["conditions"][0]["message"]
    assert "OverLimit" not in message and "quota" not in message  # only the PodGroup tells
    with placeholder_log(client) as created, running_controller(client, settings()) as controller:
        wait_for(lambda: _events(client, "ScaleUpIgnored"), timeout=20, what="an event on the quota-blocked pod")
        passes = controller.passes
        wait_for(lambda: controller.passes >= passes + 5, timeout=20, what="five more passes")
        assert created.objects == [] and not placeholders(client)
        registry = controller.metrics.registry
        assert registry.get_sample_value("raybridge_adjuster_ignored_pods", {"reason": "quota-blocked"}) == 1
        assert registry.get_sample_value("raybridge_adjuster_podgroups_unavailable") == 0
        client.delete_object(POD_GROUP_API, "PodGroup", "pg-a", WORK)  # the same pod, no over-quota PodGroup
        wait_for(lambda: created.objects, timeout=20, what="a placeholder once the PodGroup is gone")
        wait_for(lambda: running(client) == 1, timeout=90, what="the pod running")
    assert [json.loads(p["metadata"]["annotations"][consts.PODS_ANNOTATION]) for p in created.objects] == [[f"{WORK}/a"]]
    ignored = _events(client, "ScaleUpIgnored")
    assert [e["involvedObject"]["name"] for e in ignored] == ["a"]
    assert "out of quota" in ignored[0]["message"] and "pg-a: OverLimit" in ignored[0]["message"], ignored[0]["message"]


# --- the autoscaler says no ---------------------------------------------------------------------------


def _refusal(placeholder: dict[str, Any]) -> dict[str, Any]:
    """The Event Karpenter v1.14.1 posts on a pod it cannot place, here at a NodePool's GPU limit that leaves only a CPU
    type (pkg/controllers/provisioning/scheduling/events.go PodFailedToScheduleEvent; nodeclaim.go)."""
    meta = placeholder["metadata"]
    now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"apiVersion": "v1", "kind": "Event", "metadata": {"name": f"{meta['name']}.karpenter", "namespace": NS},
            "involvedObject": {"kind": "Pod", "apiVersion": "v1", "namespace": NS, "name": meta["name"], "uid": meta["uid"]},
            "reason": "FailedScheduling", "type": "Warning", "source": {"component": "karpenter"}, "count": 1,
            "message": "Failed to schedule pod, no instance type has enough resources, requirements=karpenter.sh/nodepool In [default]",
            "firstTimestamp": now, "lastTimestamp": now}  # fmt: skip


@pytest.fixture
def nodepool_at_its_limits(cluster: Any) -> Iterator[None]:
    """NodePool `default` with a 16-GPU limit, all 16 in use (its status as Karpenter writes it); deleted after."""
    from testcluster.karpenter import nodepool

    client, _ = cluster
    pool = nodepool("default")
    pool["spec"]["limits"] = {"nvidia.com/gpu": "16"}
    client.create_object(pool)
    try:
        found = client.get_object("karpenter.sh/v1", "NodePool", "default")
        found["status"] = {"resources": {"nvidia.com/gpu": "16"}}
        client.update_status(found)
        yield
    finally:
        client.delete_object("karpenter.sh/v1", "NodePool", "default")


def test_a_placeholder_the_autoscaler_refuses_is_said_and_its_group_is_not_asked_for_again(cluster: Any, nodepool_at_its_limits: None) -> None:
    """The autoscaler says no node comes for a placeholder (a NodePool at its limits): a ScaleUpRefused Warning on each
    pod it was for, the gauge of refused groups, and no new placeholder for the group while the refusal is recent (the
    placeholder gone, its pods are not asked for again at once, round after round); the NodePool's limits, where they
    can be read, are named."""
    client, sim = cluster
    sim.autoscaler.clock.pause()  # no node comes
    burst(client, 8, "0.6", "refused")
    wait_unschedulable(client, sim, 8)
    with running_controller(client, settings()) as controller:
        first = wait_for(lambda: placeholders(client), timeout=20, what="a placeholder")[0]
        client.create_object(_refusal(first))
        # The controller posts one Event per pod, one after another: wait for all eight, not the first.
        refused = wait_for(lambda: _events(client, "ScaleUpRefused")[7:] and _events(client, "ScaleUpRefused"), timeout=30,
                           what="ScaleUpRefused on the eight pods")  # fmt: skip
        assert len(refused) == 8 and all(e["type"] == "Warning" for e in refused), refused
        message = refused[0]["message"]
        assert f"Karpenter brings no node for placeholder {first['metadata']['name']}: Failed to schedule pod" in message, message
        assert "NodePool default is at its limits: 16 of its 16 nvidia.com/gpu are in use, 0 left" in message, message
        assert controller.metrics.refused_groups._value.get() == 1
        _delete_now(client, NS, first["metadata"]["name"])  # gone (deleted, or counted for nothing on another's node)
        passes = controller.passes
        wait_for(lambda: controller.passes >= passes + 5, timeout=20, what="five passes")
        assert placeholders(client) == []
        assert len(_events(client, "ScaleUpRefused")) == 8  # said once


# --- the scheduler and the autoscaler have their say -------------------------------------------------


@pytest.fixture
def rival_priority(cluster: Any) -> Iterator[None]:
    client, _ = cluster
    client.create_priority_class("rival", 100)
    try:
        yield
    finally:
        client.delete_object("scheduling.k8s.io/v1", "PriorityClass", "rival")


def test_a_higher_priority_pod_that_takes_the_new_node_first_costs_one_more_node_and_nothing_waits(cluster: Any, rival_priority: None) -> None:
    # The placeholders stay out of KAI's scaling namespace (its binder reserves no GPU anywhere while a pod there is
    # unscheduled, so one placeholder no node group can serve would stall all GPU sharing). A pod of higher priority
    # pending when the node comes is bound first (kube-scheduler's PrioritySort, here the real one) and the
    # autoscaler counts it first (FilterOutSchedulable sorts by priority): the placeholder, at -1 above the cutoff, is
    # still unschedulable, gets a node of its own, and is never replaced.
    client, sim = cluster
    sim.provisioning_delay = 600.0  # the node comes when the test moves the autoscaler's clock on
    burst(client, 16, "0.5", "rivalled")  # 8 GPUs: one placeholder of 8
    wait_unschedulable(client, sim, 16)
    rival = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "rival", "namespace": WORK},
             "spec": {"priorityClassName": "rival", "containers": [{"name": "c", "image": "busybox", "command": ["sleep", "1d"],
                      "resources": {"requests": {"nvidia.com/gpu": "8"}, "limits": {"nvidia.com/gpu": "8"}}}]}}  # fmt: skip
    with placeholder_log(client) as created, running_controller(client, settings(provision_timeout=120.0)) as controller:
        wait_for(lambda: sim.autoscaler.upcoming, timeout=20, what="a node decided for the placeholder")
        client.create_object(rival)  # before that node comes
        wait_for(lambda: any(c.get("reason") == "Unschedulable" for c in ((client.get_object("v1", "Pod", "rival", WORK) or {}).get("status") or {}).get("conditions") or []),
                 timeout=20, what="the rival pending")  # fmt: skip
        sim.provisioning_delay = 0.5  # for the placeholder's own node, later
        # Two schedulers race for the new node: KAI for the burst and kube-scheduler for the rival and the placeholder
        # (kwok admits whatever is bound, where a kubelet would refuse the loser). KAI's session is held until the
        # node is taken, the order this test is about; kube-scheduler's own queue puts the rival before the placeholder.
        sim.kai_paused = True
        sim.autoscaler.clock.jump(600.0)
        wait_for(lambda: ((client.get_object("v1", "Pod", "rival", WORK) or {}).get("spec") or {}).get("nodeName"), timeout=60,
                 what="the rival bound")  # fmt: skip
        sim.kai_paused = False
        wait_for(lambda: running(client) == 17, timeout=90, what="the burst and the rival running")
        wait_for(lambda: not placeholders(client), timeout=30, what="the placeholders deleted")
    assert len(sim.added_nodes) == 2, cluster_state(client, sim, controller, created)
    first, _ = sim.added_nodes
    rival_node = (client.get_object("v1", "Pod", "rival", WORK) or {})["spec"].get("nodeName")
    assert rival_node == first[0], (rival_node, sim.added_nodes)  # the rival took the node decided for the placeholder
    gpus = [asked_gpus(p) for p in created.objects]
    # One placeholder, never replaced by the adjuster. Where the placeholder's scheduling backoff ended before the
    # rival's (both were waiting when the node came), kube-scheduler bound the placeholder first and the rival then
    # preempted it (-1 against 100; the scheduler says `Preempted` on the victim): it is made again for the same pods
    # (about one run in seven). kwok then, in about half of those, writes the preempted pod's Running and Failed onto
    # the new one of its name, unbound (a kubelet skips a pod whose uid changed: status_manager.go syncPod;
    # kubesim/FIDELITY.md), and the adjuster replaces that one too (finished without a node). Either way the nodes are
    # the two above.
    preempted = [e for e in client.list_objects("v1", "Event", NS) if e.get("reason") == "Preempted"]
    replaced = deleted_by_reason(controller).get("finished-without-node", 0)
    assert len(preempted) <= 1 and replaced <= len(preempted) and gpus == [8] * (1 + len(preempted) + replaced), (
        gpus, deleted_by_reason(controller), preempted)


def test_a_pod_past_its_grace_period_gets_its_placeholder_with_no_event_to_wake_the_controller(cluster: Any) -> None:
    """The controller passes on every change and on its `resync` timer: a pod that became Unschedulable while it was in
    its grace period, and on which nothing changes after, is served once the (controller's) clock passes the grace
    period and the batch window. The clock is moved on only when the pod has settled, so no API event can be what
    brings its placeholder."""
    from kubesim.sim_gpu import fraction_pod

    client, sim = cluster
    clock = ShiftedClock(ahead=0.0)
    planner = AdjusterSettings(grace_period_seconds=60.0, node_gpus=8)
    with placeholder_log(client) as created, running_controller(client, settings(planner=planner, resync=consts.DEFAULT_RESYNC_SECONDS, provision_timeout=600.0),
                                                                clock=clock) as controller:  # fmt: skip
        client.create_object(fraction_pod("late", WORK, fraction="0.25"))
        wait_unschedulable(client, sim, 1)
        passes = controller.passes
        wait_for(lambda: controller.passes >= passes + 3, timeout=30, what="three passes within the grace period")
        assert created.objects == []
        clock.ahead = 60.0 + consts.DEFAULT_BATCH_IDLE_SECONDS + 2.0  # past the grace period and the batch window
        wait_for(lambda: created.objects, timeout=30, what="a placeholder on the controller's timer")
        wait_for(lambda: running(client) == 1, timeout=90, what="the pod running")
    assert [asked_gpus(p) for p in created.objects] == [1]
