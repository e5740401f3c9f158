"""A pass stops creating once the nodes no longer offer what it read (raybridge/adjuster/nodes_as_read.py, the
controller's `_act`), and what of a node counts (`scale_adjuster.node_capacity`).

Seen on the real kube-scheduler with the simulated cluster-autoscaler (tests/e2e/test_adjuster_races_on_real_api.py):
a pass read the cluster, deleted four placeholders and created two more for 14 waiting pods, a second or so of round
trips. Meanwhile the node brought up for one of the deleted placeholders registered with 8 free GPUs, so the second
placeholder (6 GPUs) was needless and the next pass deleted it; but one autoscaler loop in between took it first
(pods of one priority come in any order there), fitted it on the node coming for the first placeholder, and added a
fifth node for that one.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import pytest

from raybridge.adjuster.controller import Controller, _Acts, _Creation
from raybridge.adjuster.decision import consts
from raybridge.adjuster.decision.scale_adjuster import hold_patch, node_capacity
from raybridge.adjuster.nodes_as_read import NodesAsRead
from raybridge.core.views import read_node
from tests.adjuster_world import run_settings
from tests.builders import gpu_node
from tests.unit.controller_pass import cache_holding


def _with_uid(node: dict[str, Any], uid: str) -> dict[str, Any]:
    node["metadata"]["uid"] = uid
    return node


def _labelled(node: dict[str, Any]) -> dict[str, Any]:
    node["metadata"]["labels"].update(hold_patch(True)["metadata"]["labels"])  # the adjuster's own hold
    return node


def _ready(node: dict[str, Any], ready: bool) -> dict[str, Any]:
    node["status"]["conditions"][0]["status"] = "True" if ready else "False"
    return node


#: (case, what the watch brings while the pass creates, or None for the node "a" gone; whether the rest is created)
CASES: list[tuple[str, Optional[Callable[[], dict[str, Any]]], bool]] = [
    ("nothing changes", lambda: _with_uid(gpu_node("a"), "a1"), True),
    ("the adjuster's hold label on a node", lambda: _labelled(_with_uid(gpu_node("a"), "a1")), True),
    ("a node comes up", lambda: _with_uid(gpu_node("b"), "b1"), False),
    ("a node's device plugin registers its GPUs", lambda: _with_uid(gpu_node("a", gpus=8, extra_resources={"nvidia.com/gpu": "16"}), "a1"), False),
    ("a node turns Ready", lambda: _with_uid(gpu_node("c", ready=True), "c1"), False),
    ("a node is cordoned", lambda: _with_uid(gpu_node("a", unschedulable=True), "a1"), False),
    ("a node is replaced under its name", lambda: _with_uid(gpu_node("a"), "a2"), False),
    ("a node goes", None, False),
]


def _acts(names: list[str], on_first: Callable[[], None]) -> tuple[_Acts, list[str]]:
    made: list[str] = []

    def create(name: str) -> bool:
        made.append(name)
        if len(made) == 1:
            on_first()  # the watch brings the change while the first create is on its way
        return True

    acts = _Acts("placeholder", "placeholder")
    acts.creations = [_Creation(name, 8, "nvidia.com/gpu", (), create=lambda name=name: create(name)) for name in names]
    return acts, made


@pytest.mark.parametrize("case,brought,all_created", CASES, ids=[c[0] for c in CASES])
def test_a_pass_stops_creating_once_the_nodes_offer_other_than_it_read(case: str, brought: Any, all_created: bool) -> None:
    nodes = cache_holding(_with_uid(gpu_node("a"), "a1"), _with_uid(gpu_node("c", ready=False), "c1"))
    revision = nodes.revision
    listed = [read_node(n) for n in nodes.snapshot()]

    def change() -> None:
        if brought is None:
            nodes._apply("DELETED", gpu_node("a"))
        else:
            nodes._apply("MODIFIED", brought())

    acts, made = _acts(["p-0", "p-1", "p-2"], change)
    controller = Controller(run_settings(), kube=None)  # type: ignore[arg-type] - `_act` makes no API call of its own
    controller._act(acts, [], [], scaler=None, nodes_as_read=NodesAsRead(nodes, revision, listed))  # type: ignore[arg-type]
    assert made == (["p-0", "p-1", "p-2"] if all_created else ["p-0"])


def test_after_passes_cut_short_in_a_row_the_next_creates_all_it_decided() -> None:
    nodes = cache_holding(_with_uid(gpu_node("a"), "a1"))
    controller = Controller(run_settings(), kube=None)  # type: ignore[arg-type]
    made_per_pass = []
    for n in range(consts.PASSES_CUT_SHORT_IN_A_ROW + 2):
        revision, listed = nodes.revision, [read_node(x) for x in nodes.snapshot()]
        acts, made = _acts(["p-0", "p-1"], lambda n=n: nodes._apply("ADDED", _with_uid(gpu_node(f"new-{n}"), f"u{n}")))
        controller._act(acts, [], [], scaler=None, nodes_as_read=NodesAsRead(nodes, revision, listed))  # type: ignore[arg-type]
        made_per_pass.append(len(made))
    # cut short PASSES_CUT_SHORT_IN_A_ROW times, then one pass whole, then cut short again (the count starts over)
    assert made_per_pass == [1] * consts.PASSES_CUT_SHORT_IN_A_ROW + [2, 1]


def test_the_nodes_are_read_again_only_when_their_cache_changed() -> None:
    nodes = cache_holding(_with_uid(gpu_node("a"), "a1"))
    reads = []
    snapshot = nodes.snapshot
    nodes.snapshot = lambda: (reads.append(1), snapshot())[1]  # type: ignore[method-assign]
    as_read = NodesAsRead(nodes, nodes.revision, [read_node(n) for n in snapshot()])
    assert all(as_read.unchanged() for _ in range(5)) and reads == []
    nodes._apply("MODIFIED", _labelled(_with_uid(gpu_node("a"), "a1")))
    assert all(as_read.unchanged() for _ in range(5)) and len(reads) == 1


def test_the_informer_revision_moves_with_every_change_of_its_cache() -> None:
    nodes = cache_holding()
    seen = [nodes.revision]
    nodes._apply("ADDED", dict(gpu_node("a"), metadata={"name": "a", "uid": "a1", "resourceVersion": "5"}))
    seen.append(nodes.revision)
    nodes.put(dict(gpu_node("a"), metadata={"name": "a", "uid": "a1", "resourceVersion": "9"}))  # our own write's answer, later
    seen.append(nodes.revision)
    nodes.forget("/a")
    seen.append(nodes.revision)
    assert seen == sorted(set(seen)), seen


@pytest.mark.parametrize("node", [None, "text", {"metadata": "x"}, {"status": {"allocatable": None, "conditions": "x"}}])
def test_a_malformed_node_reads_as_one_that_offers_nothing(node: Any) -> None:
    assert node_capacity(node) == ("", "", False, False, ())


def test_only_the_nodes_the_cache_replaced_are_read_again(monkeypatch: pytest.MonkeyPatch) -> None:
    import raybridge.adjuster.nodes_as_read as module

    nodes = cache_holding(*(_with_uid(gpu_node(f"n-{i}"), f"u{i}") for i in range(50)))
    as_read = NodesAsRead(nodes, nodes.revision, [read_node(n) for n in nodes.snapshot()])
    read: list[Any] = []

    def counted(node: Any) -> Any:
        read.append(node)
        return node_capacity(node)

    monkeypatch.setattr(module, "node_capacity", counted)
    nodes._apply("MODIFIED", _labelled(_with_uid(gpu_node("n-7"), "u7")))
    assert as_read.unchanged()
    assert len(read) == 50 + 1  # the pass's own 50 views once, then the one object the cache replaced
    read.clear()
    nodes._apply("MODIFIED", _with_uid(gpu_node("n-9", unschedulable=True), "u9"))
    assert not as_read.unchanged() and len(read) == 1
