"""Could Kueue ever admit this job? Kueue's potential availability, table-driven."""

from __future__ import annotations

from decimal import Decimal

import pytest

from raybridge.core.kueue_fit import PodSetRequest, admission_problems, potential_available, ray_podsets


def cq(name, flavors, cohort=None, version="v1beta2"):
    """flavors: {flavor: {resource: (nominal, borrowingLimit, lendingLimit)}} in one resource group per distinct resource set."""
    groups: dict[tuple, list] = {}
    for flavor, resources in flavors.items():
        key = tuple(sorted(resources))
        groups.setdefault(key, []).append({
            "name": flavor,
            "resources": [
                {k: v for k, v in {"name": r, "nominalQuota": q[0], "borrowingLimit": q[1], "lendingLimit": q[2]}.items() if v is not None}
                for r, q in resources.items()
            ],
        })  # fmt: skip
    spec = {"resourceGroups": [{"coveredResources": list(k), "flavors": fl} for k, fl in groups.items()]}
    if cohort:
        spec["cohortName" if version == "v1beta2" else "cohort"] = cohort
    return {"metadata": {"name": name}, "spec": spec}


GPU = "nvidia.com/gpu"
ALONE = cq("a", {"h100": {GPU: ("8", None, None), "cpu": ("64", None, None)}})
IN_COHORT = cq("a", {"h100": {GPU: ("8", None, None)}}, cohort="c")
LENDER = cq("b", {"h100": {GPU: ("8", None, "2")}}, cohort="c")
LENDER_V1BETA1 = cq("b", {"h100": {GPU: ("8", None, None)}}, cohort="c", version="v1beta1")
CAPPED = cq("a", {"h100": {GPU: ("8", "1", None)}}, cohort="c")

# (case, queue, cohort members, flavor, expected potential)
POTENTIAL_ROWS = [
    ("no cohort: the nominal quota", ALONE, [], "h100", 8),
    ("cohort lends min(nominal, lendingLimit)", IN_COHORT, [IN_COHORT, LENDER], "h100", 10),
    ("a v1beta1 cohort member lends all its nominal", IN_COHORT, [IN_COHORT, LENDER_V1BETA1], "h100", 16),
    ("borrowingLimit caps it", CAPPED, [CAPPED, LENDER], "h100", 9),
    ("a flavor the queue does not have", ALONE, [], "mi300x", 0),
]


@pytest.mark.parametrize("case,queue,members,flavor,expected", POTENTIAL_ROWS, ids=[r[0] for r in POTENTIAL_ROWS])
def test_potential_available(case, queue, members, flavor, expected):
    assert potential_available(queue, members, flavor, GPU) == Decimal(expected)


def workers(count, gpus, cpu="4", key=GPU):
    return [PodSetRequest("head", 1, {"cpu": Decimal(2)}), PodSetRequest("workers", count, {key: Decimal(gpus), "cpu": Decimal(cpu)})]


def gpu_workers(count, gpus):
    return [PodSetRequest("workers", count, {GPU: Decimal(gpus)})]


FLAVOR_H100 = {"h100": {"spec": {"nodeLabels": {"nvidia.com/gpu.product": "H100"}}}}

# (case, podsets, queue, members, flavors, node labels, expected fragments ([] = may fit))
PROBLEM_ROWS = [
    ("fits the nominal quota", workers(1, 8), ALONE, [], None, None, []),
    ("one pod set above any flavor", workers(2, 8), ALONE, [], None, None, ["pod set workers asks for 16 nvidia.com/gpu (2 x 8)", "flavor h100: 8"]),
    ("cpu in all above the quota", workers(2, 4, cpu="32"), ALONE, [], None, None, ["the job asks for 66 cpu in all"]),
    ("fits with what the cohort lends", gpu_workers(2, 5), IN_COHORT, [LENDER], None, None, []),
    ("above even what the cohort lends", gpu_workers(3, 4), IN_COHORT, [LENDER], None, None, ["asks for 12 nvidia.com/gpu", "flavor h100: 10"]),
    ("a queue without cpu quota cannot take a pod asking cpu", workers(1, 1), IN_COHORT, [LENDER], None, None, ["does not cover cpu"]),
    ("a resource the queue does not cover", workers(1, 1, key="amd.com/gpu"), ALONE, [], None, None, ["does not cover amd.com/gpu"]),
    ("a flavor no node has", workers(1, 1), ALONE, [], FLAVOR_H100, [{"nvidia.com/gpu.product": "A100"}], ["no node has the labels of any flavor"]),
    ("a flavor some node has", workers(1, 1), ALONE, [], FLAVOR_H100, [{"nvidia.com/gpu.product": "H100"}], []),
    ("nodes unknown: not refused", workers(1, 1), ALONE, [], FLAVOR_H100, None, []),
]


@pytest.mark.parametrize("case,podsets,queue,members,flavors,nodes,fragments", PROBLEM_ROWS, ids=[r[0] for r in PROBLEM_ROWS])
def test_admission_problems(case, podsets, queue, members, flavors, nodes, fragments):
    problems = admission_problems(podsets, queue, members, flavors, nodes)
    text = " | ".join(problems)
    if not fragments:
        assert problems == []
    for fragment in fragments:
        assert fragment in text


def test_ray_podsets_follow_kueue():
    rayjob = {
        "kind": "RayJob",
        "spec": {"rayClusterSpec": {
            "headGroupSpec": {"template": {"spec": {"containers": [{"resources": {"requests": {"cpu": "2", "memory": "8Gi"}}}]}}},
            "workerGroupSpecs": [{"groupName": "w", "replicas": 3, "numOfHosts": 2, "template": {"spec": {"containers": [
                {"resources": {"limits": {"nvidia.com/gpu": "1", "cpu": "4"}}}, {"resources": {"requests": {"cpu": "500m"}}}]}}}],
        }},
    }  # fmt: skip
    head, worker = ray_podsets(rayjob)
    assert (head.name, head.count, head.requests["memory"]) == ("head", 1, Decimal(8 * 2**30))
    assert (worker.name, worker.count, worker.requests["cpu"], worker.requests[GPU]) == ("w", 6, Decimal("4.5"), Decimal(1))
