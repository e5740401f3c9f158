"""KAI's fair-share division, checked against the assertions of KAI's own tests.

Every row cites the KAI test it was written from: the file under
`pkg/scheduler/plugins/proportion/` (KAI-Scheduler commit 72de64fc) and the
Ginkgo context and case name. KAI's tests build queues with priority 0 (their
struct's zero value), kValue 0 and, unless they say otherwise, no limit (-1);
the rows do the same. Rows marked "derived" are not asserted by KAI's tests:
they follow from reading its code (notes/kai-facts.md 1.3) and pin down the
surprises the notes explain.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from raybridge.kai.fairshare import (
    UNLIMITED,
    Amounts,
    DivisionEntry,
    QueueSpec,
    ResourceTerms,
    divide_fair_share,
    divide_resource,
    hierarchy_problems,
    requestable,
)

RD = "resource_division/resource_division_test.go"
PP = "proportion_test.go"
RS = "resource_share/resource_share_test.go"
QA = "resource_share/queue_attributes_test.go"

T0 = datetime(2025, 1, 1, tzinfo=timezone.utc)
LATER = T0 + timedelta(seconds=1)


def q(name, deserved, weight, request, max_allowed=UNLIMITED, priority=0, created=T0):
    """One queue at one level, in KAI units (the fields of KAI's ResourceShare)."""
    return DivisionEntry(
        name=name, deserved=deserved, max_allowed=max_allowed, weight=weight, request=request,
        priority=priority, created=created,
    )  # fmt: skip


# --- one level, one resource: setResourceShare ------------------------------------------------
# (source, case, total, queues, expected fair shares, expected remaining)
# KAI's "single queue over quota" cases call divideOverQuotaResource(X) on a queue whose fair
# share is preset to its quota of 3; the same state is reached here by dividing 3 + X, whose
# deserved phase grants that quota first.
ONE_LEVEL = [
    # setResourceShare - GPU / single queue within quota (sanity): deserved 3, weight 0, request 2
    (RD, "single queue within quota: gives requested GPUs - no remaining", 2, [q("1", 3, 0, 2)], {"1": 2}, 0),
    (RD, "single queue within quota: gives requested GPUs with remaining", 3, [q("1", 3, 0, 2)], {"1": 2}, 1),
    (RD, "single queue within quota: doesn't give more GPUs than allowed", 3, [q("1", 3, 0, 2, max_allowed=2)], {"1": 2}, 1),
    (RD, "single queue within quota: gives up to deserved when over subscribed", 1, [q("1", 3, 0, 2)], {"1": 2}, 0),
    (RD, "single queue within quota: gives up to full quota", 7, [q("1", 3, 0, 5)], {"1": 3}, 4),
    (RD, "single queue within quota: gives with fraction, if stated in deserved", 2, [q("1", 1.5, 0, 2)], {"1": 1.5}, 0.5),
    (RD, "single queue within quota: gives with fraction, if stated in request", 2, [q("1", 3, 0, 1.5)], {"1": 1.5}, 0.5),
    (RD, "single queue within quota: doesn't give if deserved is zero", 2, [q("1", 0, 0, 2)], {"1": 0}, 2),
    # setResourceShare - GPU / single queue over quota (sanity): deserved 3 (preset), weight 1, request 5
    (RD, "single queue over quota: gives requested GPUs no remaining", 3 + 2, [q("1", 3, 1, 5)], {"1": 5}, 0),
    (RD, "single queue over quota: gives requested GPUs with remaining", 3 + 3, [q("1", 3, 1, 5)], {"1": 5}, 1),
    (RD, "single queue over quota: doesn't give more GPUs than allowed", 3 + 2, [q("1", 3, 1, 5, max_allowed=4)], {"1": 4}, 1),
    (RD, "single queue over quota: doesn't give when over quota weight is zero (2)", 3 + 2, [q("1", 3, 0, 5)], {"1": 3}, 2),
    (RD, "single queue over quota: gives with fraction if requested", 3 + 2, [q("1", 3, 1, 4.5)], {"1": 4.5}, 0.5),
    (RD, "single queue over quota: gives remainder fraction", 3 + 0.5, [q("1", 3, 1, 5)], {"1": 3.5}, 0),
    (RD, "single queue over quota: gives when deserved is zero", 0 + 6, [q("1", 0, 1, 5)], {"1": 5}, 1),
    (RD, "single queue over quota: doesn't break when there are zero resources to divide", 3 + 0, [q("1", 3, 1, 5)], {"1": 3}, 0),
    (RD, "single queue over quota: doesn't give when over quota weight is zero (10)", 3 + 10, [q("1", 3, 0, 5)], {"1": 3}, 10),
    # setResourceShare - GPU / two queues over quota (sanity)
    (RD, "two queues over quota: doesn't give when over quota weight is zero", 3 + 3 + 10,
     [q("1", 3, 0, 5), q("2", 3, 1, 3)], {"1": 3, "2": 3}, 10),
    # setResourceShare - GPU / two queues (DescribeTable): deserved 2, weight 2, request 6; queue 1 created first
    (RD, "two queues: allocates many available gpus", 15,
     [q("1", 2, 2, 6), q("2", 2, 2, 6, created=LATER)], {"1": 6, "2": 6}, 3),
    (RD, "two queues: allocates exact requested amount gpus", 12,
     [q("1", 2, 2, 6), q("2", 2, 2, 6, created=LATER)], {"1": 6, "2": 6}, 0),
    (RD, "two queues: allocates GPUs proportionally", 8,
     [q("1", 2, 1, 6), q("2", 2, 3, 6, created=LATER)], {"1": 3, "2": 5}, 0),
    (RD, "two queues: doesn't allocate more than allowed", 12,
     [q("1", 2, 2, 6, max_allowed=5), q("2", 2, 2, 6, created=LATER)], {"1": 5, "2": 6}, 1),
    (RD, "two queues: distributes remainder between queues based on largest remaining", 11,
     [q("1", 2, 1, 10), q("2", 2, 4, 10, created=LATER)], {"1": 3, "2": 8}, 0),
    (RD, "two queues: distributes remainder between queues based on creation time", 11,
     [q("1", 2, 2, 6), q("2", 2, 2, 6, created=LATER)], {"1": 6, "2": 5}, 0),
    (RD, "two queues: priority doesn't affect deserved", 4,
     [q("1", 2, 2, 6, priority=1), q("2", 2, 2, 6, priority=2, created=LATER)], {"1": 2, "2": 2}, 0),
    (RD, "two queues: priority does affect over-quota", 6,
     [q("1", 2, 2, 6, priority=1), q("2", 2, 2, 6, priority=2, created=LATER)], {"1": 2, "2": 4}, 0),
    (RD, "two queues: priority does affect over-quota, even when overQuotaWeight is set", 6,
     [q("1", 2, 100, 6, priority=1), q("2", 2, 1, 6, priority=2, created=LATER)], {"1": 2, "2": 4}, 0),
    (RD, "divides the remainder even when using priorities", 5,
     [q("1", 2, 2, 5, priority=2), q("2", 2, 2, 5, priority=2, created=LATER), q("3", 1, 2, 0, priority=1, created=LATER)],
     {"1": 3, "2": 2, "3": 0}, 0),
    # setResourceShare - CPU and - memory (the same cases, the same numbers, for each resource)
    (RD, "CPU/memory one queue: gives requested CPUs (memory) to queue", 3000, [q("1", 3000, 3000, 2000)], {"1": 2000}, 1000),
    (RD, "CPU/memory one queue: gives deserved in over subscription", 1000, [q("1", 3000, 3000, 2000)], {"1": 2000}, 0),
    (RD, "CPU/memory two queues: queue 2 has no deserved CPU (memory): reclaims all resources of queue 2", 10000,
     [q("1", 5000, 5000, 10000), q("2", 0, 0, 5000)], {"1": 10000, "2": 0}, 0),
    (RD, "CPU/memory three queues: all queues get their deserved fairShare - over subscription", 10000,
     [q("1", 5000, 5000, 5000), q("2", 5000, 5000, 5000), q("3", 5000, 5000, 5000)], {"1": 5000, "2": 5000, "3": 5000}, 0),
    (RD, "CPU/memory three queues: all queues get their deserved fairShare - over quota", 18000,
     [q("1", 5000, 5000, 6000), q("2", 5000, 5000, 6000), q("3", 5000, 5000, 6000)], {"1": 6000, "2": 6000, "3": 6000}, 0),
    (RD, "CPU/memory three queues: one queue request more than it deserves: reclaims unneeded resources ...", 10000,
     [q("1", 5000, 5000, 7000), q("2", 5000, 5000, 2000), q("3", 5000, 5000, 2000)], {"1": 6000, "2": 2000, "3": 2000}, 0),
    (RD, "CPU/memory three queues: one queue request more than it deserves: reclaims from both allocated queues ...", 10000,
     [q("1", 5000, 5000, 7000), q("2", 5000, 5000, 5000), q("3", 5000, 5000, 2000)], {"1": 5000, "2": 5000, "3": 2000}, 0),
    (RD, "CPU/memory three queues: one queue request more than it deserves and allowed", 10000,
     [q("1", 5000, 5000, 7000, max_allowed=7000), q("2", 5000, 5000, 2000), q("3", 5000, 5000, 2000)],
     {"1": 6000, "2": 2000, "3": 2000}, 0),
    (RD, "CPU/memory three queues: q2 has no deserved but is allowed OQ: reclaims all resources of queue 2 ...", 10000,
     [q("1", 5000, 5000, 5000), q("2", 0, 5000, 5000), q("3", 5000, 5000, 5000)], {"1": 5000, "2": 0, "3": 5000}, 0),
    (RD, "CPU/memory all resources allocated between 2 queues: they get deserved and compete (allocation is no input)", 10000,
     [q("1", 5000, 5000, 5000), q("2", 5000, 5000, 5000), q("3", 5000, 5000, 5000)], {"1": 5000, "2": 5000, "3": 5000}, 0),
    (RD, "CPU/memory all resources allocated: q1,q3 request more than they deserve: reclaims all resources of queue 2", 10000,
     [q("1", 5000, 5000, 10000), q("2", 0, 5000, 5000), q("3", 5000, 5000, 10000)], {"1": 5000, "2": 0, "3": 5000}, 0),
    # SetResourcesShare / advanced scenarios
    (RD, "SetResourcesShare advanced: fractional fair share", 45,
     [q("1", 12, 12, 32.54999999999996), q("2", 7, 7, 9.5), q("3", 2, 2, 1.65, max_allowed=2)],
     {"1": 32.54999999999996, "2": 9.5, "3": 1.65}, None),
    (RD, "SetResourcesShare advanced: divide last remaining GPU based to similar queues (same creation time)", 5,
     [q("queue-1", 2, 2, 3), q("queue-2", 2, 2, 3)], {"queue-1": 3, "queue-2": 2}, None),
    # derived: creation time goes before the name in the remainder order
    ("derived", "remainder: the older queue wins over the name order", 5,
     [q("a", 2, 2, 3, created=LATER), q("b", 2, 2, 3)], {"a": 2, "b": 3}, 0),
    # derived (notes 1.3): fractional shares floored to 0 leave a unit that flows down a priority level
    ("derived", "priority inversion of fractional leftovers", 5,
     [q("q1", 2, 2, 5, priority=2), q("q2", 2, 2, 5, priority=2), q("q3", 0, 1, 5, priority=1)],
     {"q1": 2, "q2": 2, "q3": 1}, 0),
    # derived (notes 1.3): the remainder handout checks neither request nor limit
    # (2.3 and 2.3 floored to 2; q1 gets what is left, 4.6 - 2 - 2 = 0.5999999999999996 in float64)
    ("derived", "remainder above a fractional request", 4.6,
     [q("q1", 0, 1, 2.5), q("q2", 0, 1, 10)], {"q1": 2 + (4.6 - 2 - 2), "q2": 2}, 0),
    ("derived", "remainder above a fractional limit", 4.6,
     [q("q1", 0, 1, 10, max_allowed=2.5), q("q2", 0, 1, 10)], {"q1": 2 + (4.6 - 2 - 2), "q2": 2}, 0),
    # derived: weight 0 leaves what is left unassigned even though the queue wants it
    ("derived", "weight 0 wastes the leftover", 10, [q("q1", 2, 0, 10)], {"q1": 2}, 8),
    # derived: two queues with quota -1 both get the whole capacity in the deserved phase
    ("derived", "two quota -1 queues oversubscribe", 10,
     [q("q1", UNLIMITED, 1, 8), q("q2", UNLIMITED, 1, 8)], {"q1": 8, "q2": 8}, 0),
    # derived: limit 0 (the CRD default) is a hard zero, quota included
    ("derived", "limit 0 grants not even the quota", 10, [q("q1", 4, 1, 8, max_allowed=0)], {"q1": 0}, 10),
]


@pytest.mark.parametrize(
    "source,case,total,queues,expected,remaining", ONE_LEVEL, ids=[f"{r[0].split('/')[-1]}: {r[1]}" for r in ONE_LEVEL]
)
def test_one_level(source, case, total, queues, expected, remaining):
    division = divide_resource(total, queues)
    assert dict(division.fair_share) == expected
    if remaining is not None:
        assert division.remaining == remaining


# --- one level, every resource: SetResourcesShare --------------------------------------------
# (case, totals, {queue: {resource: (deserved, weight, request[, maxAllowed])}}, {queue: {resource: share}})
def _r(deserved, weight, request, max_allowed=UNLIMITED):
    return (deserved, weight, request, max_allowed)


EACH_RESOURCE = [
    ("one queue: Enough resources - should gets all request", {"gpu": 10, "cpu": 2500, "memory": 1000},
     {"1": {"gpu": _r(1, 1, 1), "cpu": _r(200, 1, 500), "memory": _r(1000, 1, 500)}},
     {"1": {"gpu": 1, "cpu": 500, "memory": 500}}),
    ("one queue: Not enough resources - should gets all cluster", {"gpu": 1, "cpu": 1000, "memory": 3000},
     {"1": {"gpu": _r(2, 1, 3), "cpu": _r(20000, 1, 2500), "memory": _r(1000, 1, 5000)}},
     {"1": {"gpu": 2, "cpu": 2500, "memory": 3000}}),
    ("two queues: Enough resources - should gets all request", {"gpu": 10, "cpu": 2500, "memory": 1000},
     {n: {"gpu": _r(1, 1, 1), "cpu": _r(200, 1, 500), "memory": _r(1000, 1, 500)} for n in ("1", "2")},
     {n: {"gpu": 1, "cpu": 500, "memory": 500} for n in ("1", "2")}),
    ("two queues: Request more than total with same Over Quota and deserved - divide evenly",
     {"gpu": 10, "cpu": 3000, "memory": 1000},
     {n: {"gpu": _r(1, 1, 8), "cpu": _r(2000, 1, 3000), "memory": _r(1000, 1, 5000)} for n in ("1", "2")},
     {n: {"gpu": 5, "cpu": 2000, "memory": 1000} for n in ("1", "2")}),
    ("two queues: Request more than total with different Over Quota", {r: 1000 for r in ("gpu", "cpu", "memory")},
     {"1": {r: _r(250, 1, 5000) for r in ("gpu", "cpu", "memory")}, "2": {r: _r(150, 2, 5000) for r in ("gpu", "cpu", "memory")}},
     {"1": {r: 450 for r in ("gpu", "cpu", "memory")}, "2": {r: 550 for r in ("gpu", "cpu", "memory")}}),
    ("two queues: Request more than total with different Over Quota and max allowed", {r: 1000 for r in ("gpu", "cpu", "memory")},
     {"1": {r: _r(250, 1, 5000) for r in ("gpu", "cpu", "memory")},
      "2": {r: _r(150, 2, 5000, 400) for r in ("gpu", "cpu", "memory")}},
     {"1": {r: 600 for r in ("gpu", "cpu", "memory")}, "2": {r: 400 for r in ("gpu", "cpu", "memory")}}),
    ("three queues: divide resource evenly queues", {r: 9999 for r in ("gpu", "cpu", "memory")},
     {n: {r: _r(1000, 1, 10000) for r in ("gpu", "cpu", "memory")} for n in ("1", "2", "3")},
     {n: {r: 3333 for r in ("gpu", "cpu", "memory")} for n in ("1", "2", "3")}),
    ("three queues: divide resource between queues with different over quota", {r: 9999 for r in ("gpu", "cpu", "memory")},
     {n: {r: _r(0, w, 10000) for r in ("gpu", "cpu", "memory")} for n, w in (("1", 6), ("2", 2), ("3", 1))},
     {n: {r: s for r in ("gpu", "cpu", "memory")} for n, s in (("1", 6666), ("2", 2222), ("3", 1111))}),
]  # fmt: skip


@pytest.mark.parametrize("case,totals,queues,expected", EACH_RESOURCE, ids=[f"SetResourcesShare: {r[0]}" for r in EACH_RESOURCE])
def test_each_resource(case, totals, queues, expected):
    """From resource_division_test.go, Describe("SetResourcesShare"): each resource divided on its own."""
    for resource, total in totals.items():
        entries = [q(name, *terms[resource]) for name, terms in queues.items()]
        division = divide_resource(total, entries)
        assert {n: division.fair_share[n] for n in expected} == {n: s[resource] for n, s in expected.items()}, resource


# --- requestable: GetRequestableShare ---------------------------------------------------------
REQUESTABLE = [
    (RS, "TestGetRequestedShareLimited", 17, 10, 10),
    (RS, "TestGetRequestedShareUnlimited", 17, UNLIMITED, 17),
    (QA, "GetRequestedResource: maxAllowed > requested", 5, 6, 5),
    (QA, "GetRequestedResource: maxAllowed = requested", 5, 5, 5),
    (QA, "GetRequestedResource: maxAllowed < requested and not UnlimitedResourceQuantity", 5, 3, 3),
    (QA, "GetRequestedResource: maxAllowed is UnlimitedResourceQuantity", 5, UNLIMITED, 5),
]


@pytest.mark.parametrize("source,case,wanted,max_allowed,expected", REQUESTABLE, ids=[f"{r[0].split('/')[-1]}: {r[1]}" for r in REQUESTABLE])
def test_requestable(source, case, wanted, max_allowed, expected):
    assert requestable(wanted, max_allowed) == expected


# --- the hierarchy: setFairShare ------------------------------------------------------------
def gq(name, parent=None, quota=0, weight=0, limit=UNLIMITED, priority=0):
    """A queue with GPU terms only (cpu/memory zero, as KAI's tests leave them)."""
    return QueueSpec(name=name, parent=parent, priority=priority, created=T0, gpu=ResourceTerms(quota, limit, weight))


def simplified(d1=2, q1=2, d2=2, q2=2, w1=1, w2=1, p1=0, p2=0):
    """proportion_test.go's getBaseQueues: departments d1, d2, one queue each, request 100."""
    return [
        gq("d1", quota=d1, weight=w1, priority=p1), gq("q1", "d1", quota=q1, weight=1),
        gq("d2", quota=d2, weight=w2, priority=p2), gq("q2", "d2", quota=q2, weight=1),
    ]  # fmt: skip


# (case, queues, leaf requests in GPUs, capacity in GPUs, expected fair shares)
HIERARCHY = [
    ("multi hierarchy: simple scenario with single top queue",
     [gq("top-queue", quota=3), gq("mid-queue", "top-queue", quota=3),
      gq("leaf-queue-1", "mid-queue", quota=2), gq("leaf-queue-2", "mid-queue", quota=1)],
     {"leaf-queue-1": 2, "leaf-queue-2": 1}, 3,
     {"top-queue": 3, "mid-queue": 3, "leaf-queue-1": 2, "leaf-queue-2": 1}),
    ("multi hierarchy: two top parent queues",
     [gq("top-queue-1", quota=2), gq("child-queue-1", "top-queue-1", quota=1), gq("child-queue-2", "top-queue-1", quota=1),
      gq("top-queue-2", quota=2), gq("child-queue-3", "top-queue-2", quota=0), gq("child-queue-4", "top-queue-2", quota=1, weight=1)],
     {"child-queue-1": 1, "child-queue-2": 1, "child-queue-3": 0, "child-queue-4": 2}, 4,
     {"top-queue-1": 2, "child-queue-1": 1, "child-queue-2": 1, "top-queue-2": 2, "child-queue-3": 0, "child-queue-4": 2}),
    ("2 hierarchy - simplified: two top parent queues - sanity", simplified(), {"q1": 100, "q2": 100}, 4,
     {"d1": 2, "q1": 2, "d2": 2, "q2": 2}),
    ("2 hierarchy - simplified: two top parent queues - deserved department quota", simplified(d1=3, d2=1),
     {"q1": 100, "q2": 100}, 4, {"d1": 3, "q1": 3, "d2": 1, "q2": 2}),
    ("2 hierarchy - simplified: two top parent queues - over-quota", simplified(d1=3, d2=1),
     {"q1": 100, "q2": 100}, 12, {"d1": 7, "q1": 7, "d2": 5, "q2": 5}),
    ("2 hierarchy - simplified: two top parent queues - over-quota weight", simplified(d1=3, d2=1, w1=1, w2=7),
     {"q1": 100, "q2": 100}, 12, {"d1": 4, "q1": 4, "d2": 8, "q2": 8}),
    ("2 hierarchy - simplified: two top parent queues - over-quota weight - reversed", simplified(d1=3, d2=1, w1=7, w2=1),
     {"q1": 100, "q2": 100}, 12, {"d1": 10, "q1": 10, "d2": 2, "q2": 2}),
    ("2 hierarchy - simplified: two top parent queues - priority", simplified(1, 1, 1, 1, w1=7, w2=1, p1=1, p2=2),
     {"q1": 100, "q2": 100}, 12, {"d1": 1, "q1": 1, "d2": 11, "q2": 11}),
    ("2 hierarchy - simplified: two top parent queues - priority - reversed", simplified(1, 1, 1, 1, w1=1, w2=7, p1=2, p2=1),
     {"q1": 100, "q2": 100}, 12, {"d1": 11, "q1": 11, "d2": 1, "q2": 1}),
]  # fmt: skip


@pytest.mark.parametrize("case,queues,requests,gpus,expected", HIERARCHY, ids=[f"proportion_test.go: {r[0]}" for r in HIERARCHY])
def test_hierarchy(case, queues, requests, gpus, expected):
    """From proportion_test.go, Describe("Set Fair Share in Proportion"), with kValue 0 as there."""
    result = divide_fair_share(queues, Amounts(gpu=gpus), {n: Amounts(gpu=g) for n, g in requests.items()}, k_value=0)
    assert {x.name: x.gpu.fair_share for x in result.queues} == expected


def test_requests_propagate_to_every_ancestor():
    queues = [gq("top"), gq("mid", "top"), gq("leaf-a", "mid"), gq("leaf-b", "mid"), gq("other", "top")]
    result = divide_fair_share(queues, Amounts(gpu=10), {"leaf-a": Amounts(gpu=2), "leaf-b": Amounts(gpu=3.5)})
    assert {x.name: x.gpu.request for x in result.queues} == {"top": 5.5, "mid": 5.5, "leaf-a": 2, "leaf-b": 3.5, "other": 0}


# --- the worked example of seed 003, through the hierarchy and in every unit -------------------
def seed_003_queues():
    """Node pool A, 40 GPUs: projects with quotas 14, 6 and 0 (20 unused) and weights 2, 3, 1."""
    terms = lambda quota, weight: ResourceTerms(quota=quota, limit=-1, over_quota_weight=weight)  # noqa: E731
    return [
        QueueSpec("department-a", gpu=terms(40, 1), cpu=terms(-1, 1), memory=terms(-1, 1)),
        QueueSpec("project-1", "department-a", gpu=terms(14, 2), cpu=terms(16000, 2), memory=terms(128000, 2)),
        QueueSpec("project-2", "department-a", gpu=terms(6, 3), cpu=terms(8000, 3), memory=terms(64000, 3)),
        QueueSpec("project-3", "department-a", gpu=terms(0, 1), cpu=terms(0, 1), memory=terms(0, 1)),
    ]


def test_seed_003_project_2_gets_10_over_quota_and_16_in_all():
    result = divide_fair_share(seed_003_queues(), Amounts(gpu=40, cpu=64000, memory=512e9))
    project_2 = result.queue("project-2").gpu
    assert (project_2.deserved, project_2.over_quota, project_2.fair_share) == (6, 10, 16)
    # 20 unused: 20*2/6 = 6.67 and 20*1/6 = 3.33 are floored; the spare GPU goes to the larger fraction
    assert result.queue("project-1").gpu.fair_share == 14 + 6 + 1
    assert result.queue("project-3").gpu.fair_share == 3
    # memory is divided in bytes and reported in MB: 512000 - 192000 = 320000 MB unused, weights 2:3:1
    assert result.queue("project-2").memory.fair_share == 64000 + 160000
    assert result.to_dict()["queues"]["project-2"]["gpu"] == {
        "quota": 6, "limit": -1, "overQuotaWeight": 3, "deserved": 6, "overQuota": 10, "fairShare": 16,
    }  # fmt: skip


def test_memory_quota_goes_through_bytes_as_in_kai():
    """createQueueResourceAttrs: max(-1, quota * 1e6); a quota of -1 stays -1 (the whole capacity)."""
    queues = [QueueSpec("a", memory=ResourceTerms(quota=-1, limit=-1, over_quota_weight=1))]
    result = divide_fair_share(queues, Amounts(memory=1500 * 2**30), {"a": Amounts(memory=2**41)})
    assert result.queue("a").memory.fair_share == 1500 * 2**30 / 1e6  # 1610612.736 MB


# --- notes: where KAI's number is arguably wrong -------------------------------------------------
def kinds(result):
    return sorted((n.queue, n.resource, n.kind) for n in result.notes)


# (case, queues, capacity GPUs, leaf requests or None, expected (queue, resource, kind) notes)
NOTES = [
    ("plain division: no notes", simplified(), 12, None, []),
    ("child above its parent (proportion_test.go: deserved department quota)", simplified(d1=3, d2=1), 4,
     {"q1": 100, "q2": 100}, [("d2", "gpu", "oversubscribed")]),
    ("top level oversubscribed (resource_division_test.go: gives up to deserved when over subscribed)",
     [gq("a", quota=3)], 1, {"a": 2}, [("<top>", "gpu", "oversubscribed")]),
    ("remainder above request (derived)", [gq("q1", weight=1), gq("q2", weight=1)], 4.6,
     {"q1": 2.5, "q2": 10}, [("q1", "gpu", "above-request")]),
    ("remainder above limit (derived)", [gq("q1", weight=1, limit=2.5), gq("q2", weight=1)], 4.6,
     None, [("q1", "gpu", "above-limit")]),
    ("weight 0 leaves capacity unassigned (derived)", [gq("q1", quota=2, weight=0)], 10, None,
     [("<top>", "gpu", "unassigned")]),
    ("limit 0 with a quota (derived)", [gq("q1", quota=4, weight=1, limit=0), gq("q2", weight=1)], 10, None,
     [("q1", "gpu", "limit-zero")]),
    ("priority inversion (derived)",
     [gq("q1", quota=2, weight=2, priority=2), gq("q2", quota=2, weight=2, priority=2), gq("q3", weight=1, priority=1)],
     5, None, [("q3", "gpu", "priority-inversion")]),
]  # fmt: skip


@pytest.mark.parametrize("case,queues,gpus,requests,expected", NOTES, ids=[r[0] for r in NOTES])
def test_notes(case, queues, gpus, requests, expected):
    demand = None if requests is None else {n: Amounts(gpu=g) for n, g in requests.items()}
    result = divide_fair_share(queues, Amounts(gpu=gpus), demand)
    assert kinds(result) == sorted(expected)


# --- hierarchy problems: what KAI drops ----------------------------------------------------------
def test_orphans_and_their_children_are_left_out_as_kai_does():
    queues = [gq("a", quota=1), gq("b", "missing", quota=1), gq("c", "b", quota=1)]
    result = divide_fair_share(queues, Amounts(gpu=4))
    assert [x.name for x in result.queues] == ["a"]
    assert dict(result.dropped) == {"b": "parentQueue missing does not exist", "c": "its parent b is left out"}


PROBLEMS = [
    ("missing parent", [gq("a", "nope")], ["queue a: parentQueue nope does not exist"]),
    ("cycle", [gq("a", "b"), gq("b", "a"), gq("c")], ["queues a -> b -> a form a parent cycle"]),
    ("self parent", [gq("a", "a")], ["queues a -> a form a parent cycle"]),
    ("duplicate", [gq("a"), gq("a")], ["queue a is defined 2 times"]),
    ("fine", [gq("a"), gq("b", "a")], []),
]


@pytest.mark.parametrize("case,queues,expected", PROBLEMS, ids=[r[0] for r in PROBLEMS])
def test_hierarchy_problems(case, queues, expected):
    problems = hierarchy_problems(queues)
    assert len(problems) == len(expected)
    for fragment, problem in zip(expected, problems):
        assert fragment in problem


def test_cycle_members_are_reported_not_computed():
    result = divide_fair_share([gq("a", "b"), gq("b", "a"), gq("c", weight=1)], Amounts(gpu=2))
    assert [x.name for x in result.queues] == ["c"]
    assert [name for name, _ in result.dropped] == ["a", "b"]


# --- historical usage and kValue (time-based fair share) ------------------------------------------
def test_usage_moves_over_quota_away_from_the_heavy_user():
    """calcShareWeights: w' = max(0, w_n + k (w_n - usage)); k=1, usages 0.5 and 0 -> 0.5 : 1."""
    queues = [gq("heavy", weight=1), gq("light", weight=1)]
    plain = divide_fair_share(queues, Amounts(gpu=12), k_value=1.0)
    assert (plain.queue("heavy").gpu.fair_share, plain.queue("light").gpu.fair_share) == (6, 6)
    used = divide_fair_share(queues, Amounts(gpu=12), usage={"heavy": Amounts(gpu=0.5)}, k_value=1.0)
    assert (used.queue("heavy").gpu.fair_share, used.queue("light").gpu.fair_share) == (4, 8)


@pytest.mark.parametrize("case,queues,requests,gpus,expected", HIERARCHY, ids=[f"kValue 1: {r[0]}" for r in HIERARCHY])
def test_the_default_kvalue_changes_nothing_without_usage(case, queues, requests, gpus, expected):
    """KAI's default kValue is 1; with zero usage w + 1*(w - 0) = 2w normalises back to w, bit for bit."""
    demand = {n: Amounts(gpu=g) for n, g in requests.items()}
    assert divide_fair_share(queues, Amounts(gpu=gpus), demand) == divide_fair_share(queues, Amounts(gpu=gpus), demand, k_value=0)
