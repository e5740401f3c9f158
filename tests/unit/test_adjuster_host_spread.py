"""adjuster/decision/host_spread.py and its use: pods that must not share a host get a node each (or `maxSkew` per
node), their placeholders keep apart, and a node's room covers no more of them than it may take.

Replicas with a required pod anti-affinity by hostname got one 2-GPU placeholder; after its node came, its room
"covered" the replica KAI refused there until the provision timeout.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any, Optional

import pytest

from raybridge.adjuster.decision import consts
from raybridge.adjuster.decision.host_spread import host_spread
from raybridge.adjuster.decision.plan import plan_placeholders
from raybridge.adjuster.decision.placeholders import PROVIDED, ExistingPlaceholder, PlannedPlaceholder
from raybridge.adjuster.decision.reconcile import reconcile
from raybridge.adjuster.decision.scale_adjuster import placeholder_manifest
from raybridge.adjuster.decision.settings import AdjusterSettings, RunSettings
from raybridge.core.views import read_pod
from tests.unit.adjuster_objects import NOW, node, pod

SETTINGS = AdjusterSettings(node_gpus=8)
APP = {"app": "trainer"}


def anti(selector: Optional[dict[str, Any]] = None, key: str = "kubernetes.io/hostname") -> dict[str, Any]:
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": selector if selector is not None else APP}, "topologyKey": key}]}}


def spread(skew: int, when: str = "DoNotSchedule", key: str = "kubernetes.io/hostname") -> list[dict[str, Any]]:
    return [{"maxSkew": skew, "topologyKey": key, "whenUnsatisfiable": when, "labelSelector": {"matchLabels": APP}}]


def replica(name: str, fraction: str = "0.5", labels: Optional[dict[str, str]] = None, **spec: Any) -> dict[str, Any]:
    made = pod(name, fraction, **spec)
    made["metadata"]["labels"] = dict(APP if labels is None else labels)
    return made


# (case, the pod, its limit per node: None for none)
LIMIT_ROWS = [
    ("no rules: no limit", replica("a"), None),
    ("anti-affinity by hostname against its own kind: one per node", replica("a", affinity=anti()), 1),
    ("anti-affinity against other pods only: no limit on its own kind", replica("a", affinity=anti({"app": "db"})), None),
    ("anti-affinity by zone: a new node's zone is the autoscaler's choice, not counted", replica("a", affinity=anti(key="topology.kubernetes.io/zone")), None),
    ("a hard spread by hostname, maxSkew 2: two per node", replica("a", topologySpreadConstraints=spread(2)), 2),
    ("a soft spread (ScheduleAnyway): no limit", replica("a", topologySpreadConstraints=spread(1, "ScheduleAnyway")), None),
    ("both: the tighter", replica("a", affinity=anti(), topologySpreadConstraints=spread(3)), 1),
    ("a selector with expressions", replica("a", affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["trainer", "x"]}]}, "topologyKey": "kubernetes.io/hostname"}]}}), 1),
    ("malformed rules are no limit, never an error", replica("a", affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": ["x", {"topologyKey": 3}]}},
                                                             topologySpreadConstraints=[{"maxSkew": "1", "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule"}]), None),
]


@pytest.mark.parametrize("case,the_pod,limit", LIMIT_ROWS, ids=[r[0] for r in LIMIT_ROWS])
def test_a_pods_limit_per_node_comes_from_its_own_rules(case, the_pod, limit):
    found = host_spread(read_pod(the_pod))
    assert (found.per_node if found else None) == limit


def test_replicas_that_must_not_share_a_host_get_a_placeholder_each_that_keeps_apart():
    pods = [replica(f"r{i}", affinity=anti()) for i in range(3)] + [pod(f"p{i}", "0.5") for i in range(4)]
    plan = plan_placeholders(pods, None, SETTINGS, NOW)
    apart = [p for p in plan.placeholders if p.keep_apart]
    assert sorted((p.gpus, len(p.pods)) for p in apart) == [(1, 1), (1, 1), (1, 1)]  # one node each, not one 2-GPU placeholder
    assert [(p.gpus, len(p.pods)) for p in plan.placeholders if not p.keep_apart] == [(2, 4)]
    manifest = placeholder_manifest(PlannedPlaceholder("rb-x", apart[0]), RunSettings())
    terms = manifest["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    # Each other alone: not the replicas' own terms, which would keep the replica off its placeholder's node while the
    # placeholder runs (required anti-affinity is checked both ways; the nodes the replicas run on are kept off by
    # hostname, below).
    assert terms == [{"labelSelector": {"matchLabels": {consts.MANAGED_BY_LABEL: consts.MANAGED_BY_VALUE, consts.GROUP_LABEL: apart[0].group}},
                      "topologyKey": "kubernetes.io/hostname"}]


def test_a_placeholder_keeps_the_replicas_terms_against_other_kinds():
    """Only the replicas' terms against their own kind are left out: one against another kind (no replica on a node of
    `app=db` pods) still keeps the placeholder off such a node, where its replica could not follow."""
    both = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        *anti()["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"],
        *anti({"app": "db"})["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]]}}
    plan = plan_placeholders([replica(f"r{i}", affinity=both) for i in range(2)], None, SETTINGS, NOW)
    manifest = placeholder_manifest(PlannedPlaceholder("rb-x", plan.placeholders[0]), RunSettings())
    terms = manifest["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert {"labelSelector": {"matchLabels": {"app": "db"}}, "namespaces": ["team"], "topologyKey": "kubernetes.io/hostname"} in terms
    assert not any(t["labelSelector"] == {"matchLabels": APP} for t in terms) and len(terms) == 2


def test_the_placeholder_of_a_replica_is_kept_off_the_nodes_its_kind_already_runs_on():
    """On the real stack a placeholder carrying the replicas' own anti-affinity kept its replica off its node for the
    20 s it runs (4 anti-affine replicas took 25 s instead of 5): the nodes where replicas of the kind run are named
    instead, by hostname, as those an earlier placeholder of the group landed on are."""
    running = replica("r0", affinity=anti(), node_name="n1", phase="Running")
    waiting = [replica("r1", affinity=anti()), replica("r2", affinity=anti())]
    nodes = [node("n1", 4, labels={"kubernetes.io/hostname": "claim-1"}), node("n2", 4)]
    result = reconcile([running, *waiting], nodes, [], SETTINGS, NOW, provision_timeout_seconds=300.0, name_prefix="rb")
    assert [p.placeholder.avoid_nodes for p in result.create] == [("claim-1",), ("claim-1",)]
    other = reconcile([replica("x", labels={"app": "db"}, node_name="n1", phase="Running"), *waiting], nodes, [], SETTINGS, NOW,
                      provision_timeout_seconds=300.0, name_prefix="rb")
    assert [p.placeholder.avoid_nodes for p in other.create] == [(), ()]  # not of the kind: no matter


def test_a_placeholder_that_keeps_apart_runs_until_its_replica_is_there_and_the_others_exit_at_once():
    """Running, a placeholder's anti-affinity keeps the group's next placeholder off its node; exited, kube-scheduler
    forgets it and the next may be bound there before the replica lands, counted for nothing (4 anti-affine replicas
    got 5 and 6 GPU nodes on Karpenter). So it sleeps consts.KEEP_APART_SECONDS; a placeholder of pods that may share
    a node still runs `true`."""
    pods = [replica(f"r{i}", affinity=anti()) for i in range(2)] + [pod("p0", "0.5")]
    plan = plan_placeholders(pods, None, SETTINGS, NOW)
    made = {p.keep_apart: placeholder_manifest(PlannedPlaceholder("rb-x", p), RunSettings()) for p in plan.placeholders}
    assert made[True]["spec"]["containers"][0]["command"] == ["/bin/sleep", str(consts.KEEP_APART_SECONDS)]
    assert made[True]["metadata"]["labels"][consts.KEEP_APART_LABEL] == "true"
    assert made[False]["spec"]["containers"][0]["command"] == ["/bin/true"]
    assert consts.KEEP_APART_LABEL not in made[False]["metadata"]["labels"]


def test_a_hard_spread_puts_max_skew_on_a_node():
    plan = plan_placeholders([replica(f"r{i}", "0.25", topologySpreadConstraints=spread(2)) for i in range(5)], None, SETTINGS, NOW)
    assert sorted(len(p.pods) for p in plan.placeholders) == [1, 2, 2]


def keys(*names: str) -> tuple[str, ...]:
    return tuple(f"team/{n}" for n in names)


# (case, pods besides the two waiting replicas, covered pods, created GPUs)
ROOM_ROWS = [
    ("a node brought up for two anti-affine replicas holds one; the other is asked for at once", [], 1, [1]),
    ("a replica already runs there: it holds none", [replica("running", node_name="n1", phase="Running", affinity=anti())], 0, [1, 1]),
    ("a finished replica there does not count", [replica("done", node_name="n1", phase="Succeeded", affinity=anti())], 1, [1]),
]


@pytest.mark.parametrize("case,others,covered,created", ROOM_ROWS, ids=[r[0] for r in ROOM_ROWS])
def test_a_nodes_room_covers_no_more_of_a_kind_than_it_may_take(case, others, covered, created):
    waiting = [replica("r0", affinity=anti()), replica("r1", affinity=anti())]
    group = plan_placeholders(waiting, None, SETTINGS, NOW).placeholders[0].group
    placeholder = ExistingPlaceholder("a", group, 2, PROVIDED, keys("r0", "r1"), NOW - timedelta(seconds=5), "n1")
    result = reconcile(waiting + others, [node("n1", 8)], [placeholder], SETTINGS, NOW, provision_timeout_seconds=300.0, name_prefix="rb")
    assert len(result.covered_pods) == covered
    assert sorted((p.placeholder.gpus for p in result.create), reverse=True) == created


def test_a_placeholder_that_landed_where_its_group_already_had_one_is_replaced_by_one_kept_off_that_node():
    # Two replicas, a placeholder each. The first landed on n1 and exited; kube-scheduler forgets finished pods, so the
    # second landed on n1 too before the replica did, and n1 holds one replica only: it is counted for nothing there.
    # Its replacement must not land on n1 again (it did, under load, and a third node came).
    waiting = [replica("r0", affinity=anti()), replica("r1", affinity=anti())]
    group = plan_placeholders(waiting, None, SETTINGS, NOW).placeholders[0].group
    first = ExistingPlaceholder("a", group, 1, PROVIDED, keys("r0"), NOW - timedelta(seconds=5), "n1")
    second = ExistingPlaceholder("b", group, 1, PROVIDED, keys("r1"), NOW - timedelta(seconds=4), "n1")
    # By its hostname label, which is not always its name (Karpenter's: its NodeClaim's name), and not matchFields,
    # which Karpenter refuses.
    n1 = node("n1", 4, labels={"kubernetes.io/hostname": "claim-1"})
    result = reconcile(waiting, [n1], [first, second], SETTINGS, NOW, provision_timeout_seconds=300.0, name_prefix="rb")
    assert ("b", "node-already-counted") in result.delete
    [replacement] = result.create
    assert replacement.placeholder.avoid_nodes == ("claim-1",)
    affinity = placeholder_manifest(replacement, RunSettings())["spec"]["affinity"]
    assert affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] == [
        {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "NotIn", "values": ["claim-1"]}]}]


def test_kept_off_nodes_are_added_to_every_node_selector_term_of_the_pods():
    required = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a"]}]},
                                      {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["b"]}]}]}
    waiting = [replica(f"r{i}", affinity={**anti(), "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}) for i in range(2)]
    [ph, *_] = plan_placeholders(waiting, None, SETTINGS, NOW).placeholders
    manifest = placeholder_manifest(PlannedPlaceholder("rb-x", replace(ph, avoid_nodes=("n1", "n2"))), RunSettings())
    terms = manifest["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    avoid = {"key": "kubernetes.io/hostname", "operator": "NotIn", "values": ["n1", "n2"]}
    assert [t["matchExpressions"] for t in terms] == [[{"key": "pool", "operator": "In", "values": ["a"]}, avoid],
                                                      [{"key": "pool", "operator": "In", "values": ["b"]}, avoid]]
    assert ph.affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == required  # the plan's own value untouched
