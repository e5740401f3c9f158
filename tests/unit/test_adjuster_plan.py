"""plan_placeholders: groups packed apart, placeholders that fit one node, the cap, the JSON contract."""

from __future__ import annotations

from fractions import Fraction

import pytest

from raybridge.adjuster.decision.settings import AdjusterSettings
from raybridge.adjuster.decision.plan import plan_placeholders
from raybridge.core.quantity import format_fraction
from tests.unit.adjuster_objects import NOW, node, pod

SETTINGS = AdjusterSettings()


def plan(pods, nodes=None, **settings):
    return plan_placeholders(pods, nodes, AdjusterSettings(**settings), NOW)


def test_groups_are_packed_apart_and_placeholders_copy_their_constraints():
    pods = [
        pod("a1", "0.5", nodeSelector={"pool": "a"}),
        pod("b1", "0.5", nodeSelector={"pool": "b"}),
        pod("t1", "0.5", tolerations=[{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}]),
        pod("m1", "0.5", annotations={"raybridge.io/gpu-vendor": "amd"}),
    ]
    result = plan(pods)
    assert result.total_gpus == 3  # three halves that may not share a GPU; KAI shares no AMD GPU
    by_pod = {p.pods[0]: p for p in result.placeholders}
    assert by_pod["team/a1"].node_selector == {"pool": "a"}
    assert by_pod["team/t1"].tolerations == ({"effect": "NoSchedule", "key": "spot", "operator": "Exists"},)
    assert by_pod["team/b1"].resource_key == "nvidia.com/gpu"
    assert [(i.pod, i.code) for i in result.ignored] == [("team/m1", "vendor-not-shared")]


def test_placeholders_never_exceed_one_node_of_the_group():
    nodes = [node(f"n{i}", 4) for i in range(3)]
    pods = [pod(f"p{i}", "0.9") for i in range(10)]
    result = plan(pods, nodes)
    assert result.total_gpus == 10
    assert [p.gpus for p in result.placeholders] == [4, 4, 2]
    assert result.groups[0].node_gpus == 4 and result.groups[0].node_gpus_source == "nodes"


def test_node_gpus_flag_where_no_node_is_known():
    result = plan([pod(f"p{i}", "0.9") for i in range(10)], node_gpus=8)
    assert [p.gpus for p in result.placeholders] == [8, 2]
    assert result.groups[0].node_gpus_source == "flag"
    unknown = plan([pod(f"p{i}", "0.9") for i in range(3)])
    assert [p.gpus for p in unknown.placeholders] == [1, 1, 1]
    assert any("no known node" in n for n in unknown.notes)


def test_placeholders_are_as_few_as_the_group_s_nodes_allow():
    # An exact packing of these 14 pods in 8 GPUs groups them as nodes of 2, 2 and 4 GPUs; the autoscaler would
    # add a node for each such placeholder where one node holds them all (the 4-device pod's GPUs together).
    specs = [("0.5", 1), ("0.5", 2), ("0.1", 1), ("0.33", 1), ("0.3", 4), ("0.1", 1), ("0.33", 1), ("0.5", 2),
             ("0.5", 1), ("0.5", 2), ("0.5", 1), ("0.1", 1), ("0.5", 1), ("0.33", 1)]
    pods = [pod(f"p{i:02d}", size, devices=str(devices)) for i, (size, devices) in enumerate(specs)]
    result = plan(pods, node_gpus=8)
    # 8 packed, and 1 more for the scheduler's own placement: two placeholders, not the packing's 2 + 2 + 4 and 1
    assert (result.groups[0].packed_gpus, result.total_gpus) == (8, 9)
    assert [p.gpus for p in result.placeholders] == [8, 1]


# (case, max GPUs, kept GPUs, cut GPUs, cut pods, trimmed (planned, kept) per placeholder)
CAP_ROWS = [
    ("no cap", None, 6, None, None, []),
    ("cap above demand", 10, 6, None, None, []),
    ("cap cuts the newest waiters", 4, 4, 2, ["team/new-0", "team/new-1"], []),
    ("cap between placeholders: the next one is trimmed", 3, 3, 3, ["team/new-0", "team/new-1", "team/old-3"], [(2, 1)]),
    ("cap zero", 0, 0, 6, None, []),
]


@pytest.mark.parametrize("case,cap,kept,cut,cut_pods,trimmed", CAP_ROWS, ids=[r[0] for r in CAP_ROWS])
def test_cap(case, cap, kept, cut, cut_pods, trimmed):
    nodes = [node("n", 2)]
    pods = [pod(f"old-{i}", "0.9", waited=600 - i) for i in range(4)] + [pod(f"new-{i}", "0.9", waited=20) for i in range(2)]
    result = plan(pods, nodes, max_total_gpus=cap)
    assert result.total_gpus == kept
    if cut is None:
        assert result.cap is None
    else:
        assert result.cap.cut_gpus == cut and result.cap.requested == 6 and result.cap.limit == cap
        assert [(planned, k) for _, planned, k in result.cap.trimmed] == trimmed
        if cut_pods:
            assert list(result.cap.cut_pods) == cut_pods


# (case, pods, node GPUs, cap, kept GPUs per placeholder, cut pods)
TRIM_ROWS = [
    ("8 pods of 0.9 under a cap of 5 ask for 5", [pod(f"p{i}", "0.9", waited=100 - i) for i in range(8)], 8, 5, [5], ["team/p5", "team/p6", "team/p7"]),
    ("a cap below one node still scales up", [pod(f"p{i}", "0.6", waited=50) for i in range(3)], 8, 1, [1], ["team/p1", "team/p2"]),
    ("a multi-device pod keeps all its GPUs or none", [pod("wide", "0.9", devices="4", waited=90), pod("one", "0.9", waited=10)], 8, 3, [1], ["team/wide"]),
    ("longest-waiting pods keep their GPUs", [pod("new", "0.9", waited=11), pod("old", "0.9", waited=900)], 8, 1, [1], ["team/new"]),
]


@pytest.mark.parametrize("case,pods,node_gpus,cap,kept,cut_pods", TRIM_ROWS, ids=[r[0] for r in TRIM_ROWS])
def test_cap_trims_the_last_placeholder(case, pods, node_gpus, cap, kept, cut_pods):
    result = plan(pods, [node("n", node_gpus)], max_total_gpus=cap)
    assert [p.gpus for p in result.placeholders] == kept
    assert result.total_gpus == sum(kept) <= cap
    assert list(result.cap.cut_pods) == cut_pods
    assert not set(cut_pods) & {q for p in result.placeholders for q in p.pods}
    assert result.cap.cut_gpus == result.cap.requested - result.total_gpus
    assert result.cap.to_dict()["trimmed"][0]["kept"] == sum(kept)


# (case, (fraction, seconds waited) per pod, GPUs the packing needs, GPUs asked for)
GREEDY_PLAN_ROWS = [
    ("the scheduler places the small ones first and strands a 0.7: one GPU more", [("0.3", 100), ("0.3", 90), ("0.7", 80), ("0.7", 70)], 2, 3),
    ("the large ones first: the packing is what the scheduler finds", [("0.7", 100), ("0.7", 90), ("0.3", 80), ("0.3", 70)], 2, 2),
]


@pytest.mark.parametrize("case,specs,packed,asked", GREEDY_PLAN_ROWS, ids=[r[0] for r in GREEDY_PLAN_ROWS])
def test_plan_adds_what_a_greedy_scheduler_needs(case, specs, packed, asked):
    result = plan([pod(f"p{i}", f, waited=w) for i, (f, w) in enumerate(specs)], [node("n", 8)])
    [group] = result.groups
    assert (group.packed_gpus, group.gpus, result.total_gpus) == (packed, asked, asked)
    assert group.to_dict()["packedGpus"] == packed
    assert any("need 1 GPU(s) more than the packing's 2" in n for n in result.notes) == (asked > packed)


def test_the_greedy_check_follows_creation_order_first():
    def created(name, fraction, stamp):
        p = pod(name, fraction, waited=60)
        p["metadata"]["creationTimestamp"] = stamp
        return p

    # the same wait; created large first: the scheduler's best fit finds the packing, no extra GPU
    pods = [created("z-small-1", "0.3", "2025-06-01T11:50:03Z"), created("z-small-2", "0.3", "2025-06-01T11:50:04Z"),
            created("a-large-1", "0.7", "2025-06-01T11:50:01Z"), created("a-large-2", "0.7", "2025-06-01T11:50:02Z")]  # fmt: skip
    assert plan(pods, [node("n", 8)]).total_gpus == 2
    pods[2]["metadata"]["creationTimestamp"] = pods[3]["metadata"]["creationTimestamp"] = "2025-06-01T11:50:09Z"
    assert plan(pods, [node("n", 8)]).total_gpus == 3  # small ones first now: one 0.7 is stranded


def test_to_dict_is_the_documented_camel_case_contract():
    data = plan([pod("a", "0.6"), pod("b", "0.6"), pod("c", "0.6"), pod("x", "NaN")], [node("n", 8)]).to_dict()
    assert set(data) >= {"totalGpus", "placeholders", "ignored", "groups", "demandByVendor", "capped", "notes", "warnings", "skipped"}
    assert data["totalGpus"] == 3
    placeholder = data["placeholders"][0]
    assert set(placeholder) >= {"gpus", "resourceKey", "nodeSelector", "tolerations", "pods"}
    assert placeholder["pods"] == ["team/a", "team/b", "team/c"]
    assert data["ignored"] == [{"pod": "team/x", "code": "bad-annotation", "reason": "gpu-fraction 'NaN' is NaN or infinite"}]
    assert data["demandByVendor"] == {"nvidia": 1.8}
    assert (data["groups"][0]["demand"], data["groups"][0]["demandExact"]) == (1.8, "1.8")
    assert data["groups"][0]["lowerBound"] == 3 and data["groups"][0]["method"] == "exact"


def test_exact_sum_is_never_inflated_by_floats():
    pods = [pod("a", "0.33"), pod("b", "0.56"), pod("c", "0.11")] + [pod(f"t{i}", "0.1", nodeSelector={"pool": "t"}) for i in range(10)]
    result = plan(pods)
    assert result.total_gpus == 2
    assert result.demand_by_vendor == {"nvidia": Fraction(2)}


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="--grace-period"):
        plan_placeholders([], None, AdjusterSettings(grace_period_seconds=float("nan")), NOW)
    with pytest.raises(ValueError, match="GPU cap"):
        plan_placeholders([], None, AdjusterSettings(max_total_gpus=-1), NOW)


@pytest.mark.parametrize("value,text", [(Fraction(9, 5), "1.8"), (Fraction(2), "2"), (Fraction(1, 3), "1/3"), (Fraction(1, 40), "0.025"), (Fraction(-1, 2), "-0.5"), (Fraction(0), "0")])
def test_format_fraction(value, text):
    assert format_fraction(value) == text


@pytest.mark.parametrize("given,expected", [(0.1, Fraction(1, 10)), ("0.25", Fraction(1, 4)), (Fraction(1, 3), Fraction(1, 3)), (1, Fraction(1))])
def test_memory_fallback_fraction_accepts_plain_numbers(given, expected):
    assert AdjusterSettings(memory_fallback_fraction=given).memory_fallback_fraction == expected


@pytest.mark.parametrize("given", [float("nan"), float("inf"), "x", 0, 1.5, True, None])
def test_memory_fallback_fraction_refuses_the_rest(given):
    assert any("memory fallback fraction" in p for p in AdjusterSettings(memory_fallback_fraction=given).problems())


def _created_in_order(fractions, **spec):
    pods = []
    for i, fraction in enumerate(fractions):
        p = pod(f"p{i:02d}", fraction, **spec)
        p["metadata"]["creationTimestamp"] = f"2025-06-01T11:50:{i:02d}Z"
        pods.append(p)
    return pods


def test_the_scheduler_check_s_leftovers_stand_in_one_placeholder_only():
    # The packing fits these twelve pods in 8 GPUs; placed one by one in creation order, best fit, the last
    # (0.68) finds no room and gets a GPU of its own. It stands in that placeholder only, not also in the first.
    fractions = "0.2 0.7 0.47 0.2 0.5 0.48 0.51 0.75 0.75 0.73 0.9 0.68".split()
    result = plan(_created_in_order(fractions), [node("n", 8)])
    assert [(p.gpus, p.pods) for p in result.placeholders] == [
        (8, tuple(f"team/p{i:02d}" for i in range(11))),
        (1, ("team/p11",)),
    ]


def _placed_as_planned(result, pods):
    """Each counted pod in exactly one placeholder, and the scheduler, placing them oldest first, best fit,
    onto the placeholders' GPUs, puts each pod in its own placeholder and leaves no GPU empty."""
    from raybridge.adjuster.decision.plan import scheduling_order
    from raybridge.adjuster.decision.best_fit import BestFitScheduler
    from raybridge.adjuster.decision.packing import PackItem

    listed = [q for p in result.placeholders for q in p.pods]
    assert sorted(listed) == sorted(piece.pod for piece in result.pieces), "each counted pod in exactly one placeholder"
    ordered = sorted(result.pieces, key=scheduling_order)
    check = BestFitScheduler([PackItem(p.pod, p.fraction, p.devices) for p in ordered], [p.gpus for p in result.placeholders])
    assert check.run() == []
    placed = check.placement()
    assert [(n.gpus, n.pods) for n in placed] == [(p.gpus, tuple(sorted(p.pods))) for p in result.placeholders]


def test_the_plan_is_the_scheduler_s_placement_on_random_bursts():
    import random

    rng = random.Random(16)
    for _ in range(150):
        count = rng.randint(1, 30)
        fractions = [str(rng.choice([1, 2, 5, 10, 20, 25, 30, 47, 48, 50, 51, 68, 70, 73, 75, 90])/100) for _ in range(count)]
        pods = _created_in_order(fractions)
        for p in pods:
            if rng.random() < 0.15:
                p["metadata"]["annotations"]["gpu-fraction-num-devices"] = str(rng.choice([2, 4]))
        result = plan(pods, [node("n", rng.choice([4, 8]))])
        _placed_as_planned(result, pods)


def whole(name: str, gpus: int, node_name: str) -> dict:
    """A running pod of the default scheduler holding whole GPUs of a node."""
    body = pod(name, scheduler=None, node_name=node_name, phase="Running")
    body["spec"]["containers"][0]["resources"] = {"requests": {"nvidia.com/gpu": str(gpus)}, "limits": {"nvidia.com/gpu": str(gpus)}}
    return body


# (case, nodes, running pods, the note's "where" or None for no note)
FREE_ROOM_ROWS = [
    ("free GPUs on a node the pods may use", [node("n0", 8)], [whole("r", 5, "n0")], "n0 (3 free)"),
    ("the node is full", [node("n0", 8)], [whole("r", 8, "n0")], None),
    ("the node's taint keeps the pods off", [node("n0", 8, taints=[{"key": "x", "value": "y", "effect": "NoSchedule"}])], [], None),
    ("another vendor's free GPUs", [node("n0", 8, vendor="amd"), node("n1", 8)], [whole("r", 8, "n1")], None),
    ("two nodes with room", [node("n0", 8), node("n1", 8)], [whole("r", 7, "n0")], "n0 (1 free), n1 (8 free)"),
]  # fmt: skip


@pytest.mark.parametrize("case,nodes,running,where", FREE_ROOM_ROWS, ids=[r[0] for r in FREE_ROOM_ROWS])
def test_the_plan_says_when_waiting_pods_stand_beside_free_gpus_they_may_use(case, nodes, running, where):
    result = plan([pod("w1", "0.5"), pod("w2", "0.5"), *running], nodes)
    assert result.total_gpus == 1  # asked for all the same: the scheduler saw that room and left the pods waiting
    said = [n for n in result.notes if "may use the free" in n]
    if where is None:
        assert said == []
    else:
        assert len(said) == 1 and f"its 2 waiting pod(s) may use the free nvidia.com/gpu of {where}, yet the scheduler" in said[0]
