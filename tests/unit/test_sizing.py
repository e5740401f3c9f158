"""Sizing: every row of seed 000's summary table, and the edge cases around it."""

from __future__ import annotations

import pytest

from raybridge.core.inventory import Inventory, NodeGpus
from raybridge.jobs.decision.sizing import SizingRequest, even_splits, size_workload
from raybridge.errors import BadInput


def cluster(*counts: int, vendor: str = "amd") -> Inventory:
    return Inventory(nodes=tuple(NodeGpus(name=f"n{i}", vendor=vendor, gpus=c) for i, c in enumerate(counts)), source="test")


EIGHT_BY_FOUR = cluster(8, 8, 8, 8)  # C = 32, m = 8
MIXED_SIZES = cluster(8, 4, 4)  # C = 16, m = 4

# (case, inventory, request kwargs, replicas, gpusPerReplica, calculated, warning substrings)
RAY_ROWS = [
    ("row 1: replicas and gpusPerReplica fit -> as given", EIGHT_BY_FOUR, dict(replicas=2, gpus_per_replica=4), 2, 4, False, []),
    ("row 2: gpus only -> calculated to fill nodes", EIGHT_BY_FOUR, dict(gpus=16), 2, 8, True, []),
    ("row 2: gpus with remainder", EIGHT_BY_FOUR, dict(gpus=18), 3, 6, True, []),
    ("row 3: replicas and gpus -> user replicas ignored", EIGHT_BY_FOUR, dict(replicas=5, gpus=16), 2, 8, True, ["replicas=5 ignored"]),
    ("row 4: gpusPerReplica and gpus -> user gpusPerReplica ignored", EIGHT_BY_FOUR, dict(gpus_per_replica=2, gpus=16), 2, 8, True, ["gpusPerReplica=2 ignored"]),
    ("row 5: all three, fits -> as given, gpus ignored", EIGHT_BY_FOUR, dict(replicas=4, gpus_per_replica=2, gpus=16), 4, 2, False, ["gpus=16 is ignored"]),
    ("row 5: all three, too big -> calculated from gpus", EIGHT_BY_FOUR, dict(replicas=10, gpus_per_replica=8, gpus=16), 2, 8, True, ["exceeds the 32 amd GPUs"]),
    ("row 6: nothing set", EIGHT_BY_FOUR, dict(), 1, 0, False, []),
    ("row 6: only the vendor", EIGHT_BY_FOUR, dict(gpu_vendor="amd"), 1, 0, False, []),
    ("gpus above capacity -> capped, warned", EIGHT_BY_FOUR, dict(gpus=40), 4, 8, True, ["capped at 32"]),
    ("replicas x gpusPerReplica above capacity, no gpus -> from the product, capped", EIGHT_BY_FOUR, dict(replicas=5, gpus_per_replica=8), 4, 8, True, ["capped at 32"]),
    ("smallest node sets the split", MIXED_SIZES, dict(gpus=8), 2, 4, True, []),
    ("uneven: 10 on 4-GPU nodes loses GPUs, says so", MIXED_SIZES, dict(gpus=10), 3, 3, True, ["9 GPUs, 1 fewer", "5 x 2 = 10"]),
    ("poor fit 25 on 4-GPU nodes (Kaiwo's own table)", cluster(4, 4, 4, 4, 4, 4, 4), dict(gpus=25), 7, 3, True, ["21 GPUs, 4 fewer"]),
    ("gpusPerReplica larger than any node -> as given, warned", cluster(8, 8), dict(replicas=1, gpus_per_replica=16), 1, 16, False, ["can never be scheduled"]),
    ("gpusPerReplica alone allocates nothing, warned", EIGHT_BY_FOUR, dict(gpus_per_replica=4), 1, 0, False, ["gpusPerReplica=4 with replicas unset and gpus=0 allocates no GPUs"]),
    ("replicas alone: that many CPU workers", EIGHT_BY_FOUR, dict(replicas=3), 3, 0, False, []),
    ("replicas alone on a cluster without GPUs", Inventory(nodes=(NodeGpus(name="cpu", vendor=None, gpus=0),), source="test"), dict(replicas=3), 3, 0, False, []),
    ("fractional GPU sharing fits -> as given", cluster(1, 1, vendor="nvidia"), dict(replicas=3, gpus_per_replica=0.5), 3, 0.5, False, []),
]


@pytest.mark.parametrize("case,inventory,kwargs,replicas,per,calculated,warnings", RAY_ROWS, ids=[r[0] for r in RAY_ROWS])
def test_ray_sizing(case, inventory, kwargs, replicas, per, calculated, warnings):
    decision = size_workload(SizingRequest(**kwargs), inventory)
    assert (decision.replicas, decision.gpus_per_replica, decision.calculated) == (replicas, per, calculated)
    assert decision.total_gpus == replicas * per
    joined = " | ".join(decision.warnings)
    for fragment in warnings:
        assert fragment in joined
    if not warnings:
        assert decision.warnings == ()


def test_never_silently_loses_gpus():
    """Any request whose allocation falls short must carry a warning with both numbers."""
    for counts in [(8,), (4, 4), (8, 4, 4), (2, 2, 2), (6, 6)]:
        inv = cluster(*counts)
        for gpus in range(1, sum(counts) + 4):
            decision = size_workload(SizingRequest(gpus=gpus), inv)
            if decision.total_gpus < gpus:
                assert decision.warnings, (counts, gpus)
                assert any(str(decision.total_gpus) in w or "capped" in w for w in decision.warnings)


# (case, inventory, request, vendor, note fragment)
VENDOR_ROWS = [
    ("single vendor chosen when unset", cluster(8, vendor="nvidia"), dict(gpus=4), "nvidia", "only vendor"),
    ("mixed cluster defaults to amd with a note", Inventory((NodeGpus("a", "amd", 8), NodeGpus("n", "nvidia", 8)), "test"), dict(gpus=4), "amd", "mixed cluster"),
    ("explicit vendor on mixed cluster", Inventory((NodeGpus("a", "amd", 8), NodeGpus("n", "nvidia", 4)), "test"), dict(gpus=4, gpu_vendor="nvidia"), "nvidia", None),
]


@pytest.mark.parametrize("case,inventory,kwargs,vendor,note", VENDOR_ROWS, ids=[r[0] for r in VENDOR_ROWS])
def test_vendor_choice(case, inventory, kwargs, vendor, note):
    decision = size_workload(SizingRequest(**kwargs), inventory)
    assert decision.gpu_vendor == vendor
    assert decision.resource_key == f"{vendor}.com/gpu"
    if note:
        assert any(note in n for n in decision.notes)


MIXED = Inventory((NodeGpus("a", "amd", 8), NodeGpus("n", "nvidia", 8)), "test")

# (case, inventory, request kwargs, vendor of the decision): a job without GPUs has no vendor unless it names one
NO_GPU_VENDOR_ROWS = [
    ("no GPUs on a mixed cluster", MIXED, dict(), None),
    ("no GPUs on a one-vendor cluster", cluster(8, vendor="nvidia"), dict(), None),
    ("no GPUs, Ray replicas only", MIXED, dict(replicas=3), None),
    ("no GPUs, a plain job", MIXED, dict(ray=False, kind="job"), None),
    ("no GPUs, vendor named", MIXED, dict(gpu_vendor="nvidia"), "nvidia"),
]


@pytest.mark.parametrize("case,inventory,kwargs,vendor", NO_GPU_VENDOR_ROWS, ids=[r[0] for r in NO_GPU_VENDOR_ROWS])
def test_a_job_without_gpus_gets_no_vendor_and_no_vendor_note(case, inventory, kwargs, vendor):
    decision = size_workload(SizingRequest(**kwargs), inventory)
    assert (decision.gpu_vendor, decision.total_gpus) == (vendor, 0)
    assert not [n for n in decision.notes if "gpuVendor" in n]


def test_absent_vendor_names_the_vendors_present():
    with pytest.raises(BadInput) as err:
        size_workload(SizingRequest(gpus=2, gpu_vendor="nvidia"), cluster(8, vendor="amd"))
    assert "no nvidia GPUs" in str(err.value) and "amd (8 GPUs)" in str(err.value)


def test_no_gpus_anywhere():
    empty = Inventory((NodeGpus("cpu-node", None, 0),), "test")
    with pytest.raises(BadInput, match="no GPUs"):
        size_workload(SizingRequest(gpus=1), empty)
    assert size_workload(SizingRequest(), empty).gpus_per_replica == 0


def test_ineligible_nodes_do_not_count_and_are_explained():
    inv = Inventory((NodeGpus("n0", "amd", 8, eligible=False, reasons=("cordoned",)),), "test")
    with pytest.raises(BadInput, match="n0: cordoned"):
        size_workload(SizingRequest(gpus=2), inv)
    half = Inventory((NodeGpus("n0", "amd", 8), NodeGpus("n1", "amd", 8, eligible=False, reasons=("not Ready",))), "test")
    assert size_workload(SizingRequest(gpus=16), half).total_gpus == 8


# (case, request, replicas, per pod, warning fragment)
PLAIN_ROWS = [
    ("job: one pod, gpus", dict(ray=False, kind="job", gpus=4), 1, 4, None),
    ("job: replicas ignored", dict(ray=False, kind="job", gpus=2, replicas=3), 1, 2, "replicas=3 is ignored"),
    ("job: gpusPerReplica wins over gpus", dict(ray=False, kind="job", gpus=4, gpus_per_replica=2), 1, 2, "gpus=4 is ignored"),
    ("service: replicas kept", dict(ray=False, kind="service", replicas=3, gpus_per_replica=1), 3, 1, None),
    ("service: gpus per pod when no gpusPerReplica", dict(ray=False, kind="service", replicas=2, gpus=1), 2, 1, None),
    ("service: default one replica", dict(ray=False, kind="service"), 1, 0, None),
    ("job: pod bigger than any node", dict(ray=False, kind="job", gpus=16), 1, 16, "can never be scheduled"),
]


@pytest.mark.parametrize("case,kwargs,replicas,per,warning", PLAIN_ROWS, ids=[r[0] for r in PLAIN_ROWS])
def test_plain_workloads(case, kwargs, replicas, per, warning):
    decision = size_workload(SizingRequest(**kwargs), EIGHT_BY_FOUR)
    assert (decision.replicas, decision.gpus_per_replica, decision.calculated) == (replicas, per, False)
    if warning:
        assert any(warning in w for w in decision.warnings)


@pytest.mark.parametrize(
    "total,per_node,cap,expected",
    [
        (10, 4, 16, ["5 x 2 = 10", "10 x 1 = 10", "2 x 4 = 8", "3 x 4 = 12"]),
        (9, 4, 9, ["3 x 3 = 9", "9 x 1 = 9", "2 x 4 = 8"]),
        (8, 4, 8, ["2 x 4 = 8", "4 x 2 = 8"]),
    ],
)
def test_even_splits(total, per_node, cap, expected):
    assert even_splits(total, per_node, cap) == expected


# (case, request kwargs, replicas, gpusPerReplica): a Ray cluster at an address sizes the work itself
UNSIZED_ROWS = [
    ("nothing", dict(), 1, 0),
    ("replicas alone", dict(replicas=3), 3, 0),
    ("gpus alone: one replica holds them", dict(gpus=4), 1, 4),
    ("replicas and gpusPerReplica", dict(replicas=2, gpus_per_replica=2), 2, 2),
    ("gpusPerReplica alone: one replica", dict(gpus_per_replica=0.5), 1, 0.5),
]


@pytest.mark.parametrize("case,kwargs,replicas,per", UNSIZED_ROWS, ids=[r[0] for r in UNSIZED_ROWS])
def test_unsized_decision_passes_the_request_on(case, kwargs, replicas, per):
    from raybridge.jobs.decision.sizing import unsized_decision

    decision = unsized_decision(SizingRequest(**kwargs))
    assert (decision.replicas, decision.gpus_per_replica) == (replicas, per)


# (case, request kwargs): an explicit replica count is honoured or refused, never made the default
ZERO_REPLICA_ROWS = [
    ("zero replicas alone", dict(replicas=0)),
    ("zero replicas with GPUs per replica", dict(replicas=0, gpus_per_replica=2)),
    ("zero replicas with gpus", dict(replicas=0, gpus=4)),
    ("negative replicas", dict(replicas=-1)),
]


@pytest.mark.parametrize("case,kwargs", ZERO_REPLICA_ROWS, ids=[r[0] for r in ZERO_REPLICA_ROWS])
def test_fewer_than_one_replica_is_refused(case, kwargs):
    with pytest.raises(BadInput, match="replicas: must be at least 1"):
        SizingRequest(**kwargs)
