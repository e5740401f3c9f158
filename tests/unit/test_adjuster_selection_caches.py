"""Selection remembers what it parsed per distinct text (pods repeat them); a remembered answer must never leak
into a pod it does not apply to. Each row judges several pods in one selection and checks every verdict."""

from __future__ import annotations

from fractions import Fraction

import pytest

from raybridge.adjuster.decision.settings import AdjusterSettings
from raybridge.adjuster.decision.demand import select_demand
from tests.unit.adjuster_objects import NOW, node, pod

SETTINGS = AdjusterSettings(grace_period_seconds=10)  # the grace period rows; shipped: 0
H100 = node("h100-0", 8, memory="81559")
QUOTA = "OverLimit: team quota has reached the allowable limit of GPUs."
PG_OVER_LIMIT = {
    "kind": "PodGroup",
    "metadata": {"name": "pg-b", "namespace": "team"},
    "status": {"schedulingConditions": [{"type": "UnschedulableOnNodePool", "status": "True", "reasons": [{"reason": "OverLimit"}]}]},
}


def verdicts(pods, nodes=None, pod_groups=()):
    selection = select_demand(pods, nodes, SETTINGS, NOW, pod_groups)
    found = {p.pod: ("piece", p.fraction, p.devices, p.waiting_seconds) for p in selection.pieces}
    found.update({i.pod: ("ignored", i.code, i.reason) for i in selection.ignored})
    return found


# (case, pods, nodes, pod groups, expected verdict per pod)
ROWS = [
    ("the same text as gpu-memory and as a device count: each keeps its own message",
     [pod("a", memory="abc"), pod("b", "0.5", devices="abc")], None, (),
     {"team/a": ("ignored", "bad-annotation", "gpu-memory (MiB) 'abc' is not a whole number"),
      "team/b": ("ignored", "bad-annotation", "gpu-fraction-num-devices 'abc' is not a whole number")}),
    ("the same text as a device count and as gpu-memory: the count is no memory",
     [pod("a", "0.5", devices="2"), pod("b", memory="2")], [H100], (),
     {"team/a": ("piece", Fraction(1, 2), 2, 60.0), "team/b": ("piece", Fraction(2, 81500), 1, 60.0)}),
    ("one transition time, two pods: the same wait for both",
     [pod("a", "0.5", waited=30), pod("b", "0.25", waited=30), pod("c", "0.25", waited=5)], None, (),
     {"team/a": ("piece", Fraction(1, 2), 1, 30.0), "team/b": ("piece", Fraction(1, 4), 1, 30.0),
      "team/c": ("ignored", "grace-period", "unschedulable for 5.0 s, under the 10 s grace period")}),
    ("one message, only the second pod's PodGroup is over quota",
     [pod("a", "0.5"), pod("b", "0.5", annotations={"pod-group-name": "pg-b"}), pod("c", "0.5")], None, [PG_OVER_LIMIT],
     {"team/a": ("piece", Fraction(1, 2), 1, 60.0),
      "team/b": ("ignored", "quota-blocked", "its queue is out of quota, not out of nodes (PodGroup pg-b: OverLimit)"),
      "team/c": ("piece", Fraction(1, 2), 1, 60.0)}),
    ("a quota message blocks every pod that carries it, and only those",
     [pod("a", "0.5", message=QUOTA), pod("b", "0.5"), pod("c", "0.5", message=QUOTA)], None, (),
     {"team/a": ("ignored", "quota-blocked", f"its queue is out of quota, not out of nodes (KAI: {QUOTA})"),
      "team/b": ("piece", Fraction(1, 2), 1, 60.0),
      "team/c": ("ignored", "quota-blocked", f"its queue is out of quota, not out of nodes (KAI: {QUOTA})")}),
    ("gpu-memory at, and one MiB over, the GPU's memory",
     [pod("a", memory="81500"), pod("b", memory="81501")], [H100], (),
     {"team/a": ("piece", Fraction(1), 1, 60.0),
      "team/b": ("ignored", "memory-exceeds-gpu", "asks for 81501 MiB per GPU, but the GPUs of the nodes it may land on have at most 81500 MiB (as KAI reads their nvidia.com/gpu.memory label)")}),
    ("equal constraints spelled apart, then a malformed one: separate verdicts",
     [pod("a", "0.5", nodeSelector={"pool": "x"}), pod("b", "0.5", nodeSelector={"pool": 1}), pod("c", "0.5", nodeSelector={"pool": "x"})], None, (),
     {"team/a": ("piece", Fraction(1, 2), 1, 60.0),
      "team/b": ("ignored", "bad-constraints", "spec.nodeSelector is not a map of strings"),
      "team/c": ("piece", Fraction(1, 2), 1, 60.0)}),
    ("toleration values of equal number but other types, then strings: the same verdict per kind",
     [pod("a", "0.5", tolerations=[{"key": "k", "value": 1}]), pod("b", "0.5", tolerations=[{"key": "k", "value": True}]),
      pod("c", "0.5", tolerations=[{"key": "k", "value": "1"}])], None, (),
     {"team/a": ("ignored", "bad-constraints", "spec.tolerations[0].value is not a string"),
      "team/b": ("ignored", "bad-constraints", "spec.tolerations[0].value is not a string"),
      "team/c": ("piece", Fraction(1, 2), 1, 60.0)}),
    ("shapes that are not maps or lists of maps",
     [pod("a", "0.5", tolerations=["k"]), pod("b", "0.5", nodeSelector=["pool"]), pod("c", "0.5", tolerations=[{"key": ["k"]}]),
      pod("d", "0.5", tolerations=[])], None, (),
     {"team/a": ("ignored", "bad-constraints", "spec.tolerations[0] is not an object"),
      "team/b": ("ignored", "bad-constraints", "spec.nodeSelector is not a map of strings"),
      "team/c": ("ignored", "bad-constraints", "spec.tolerations[0].key is not a string"),
      "team/d": ("piece", Fraction(1, 2), 1, 60.0)}),
]  # fmt: skip


@pytest.mark.parametrize("case, pods, nodes, pod_groups, expected", ROWS, ids=[r[0] for r in ROWS])
def test_remembered_answers_stay_with_their_pods(case, pods, nodes, pod_groups, expected):
    assert verdicts(pods, nodes, pod_groups) == expected
