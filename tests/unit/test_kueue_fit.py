"""Could Kueue ever admit this job? Kueue's potential availability, table-driven."""

from __future__ import annotations

from decimal import Decimal

import pytest

from raybridge.kueue.fit import PodSetRequest, admission_problems, potential_available, ray_podsets


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


def cohort(name, gpus=None, parent=None, borrowing=None, lending=None):
    """A Cohort object: its own GPU quota in flavor h100 (None: none) and its parent."""
    spec = cq(name, {"h100": {GPU: (gpus, borrowing, lending)}})["spec"] if gpus is not None else {}
    if parent:
        spec["parentName"] = parent
    return {"metadata": {"name": name}, "spec": spec}


IN_TEAM = cq("a", {"h100": {GPU: ("4", None, None)}}, cohort="team")
CAPPED_IN_TEAM = cq("a", {"h100": {GPU: ("4", "3", None)}}, cohort="team")
SIBLING = cq("b", {"h100": {GPU: ("2", None, None)}}, cohort="org")

# (case, queue, other ClusterQueues, Cohort objects (None: not readable), expected potential)
FOREST_ROWS = [
    ("a Cohort object's own quota", IN_TEAM, [], [cohort("team", "2")], 6),
    ("no Cohort object for the name: nothing more", IN_TEAM, [], [], 4),
    ("the parent's quota and its other children's", IN_TEAM, [SIBLING], [cohort("team", "2", parent="org"), cohort("org", "4")], 12),
    ("a parent named but missing adds nothing", IN_TEAM, [], [cohort("team", "2", parent="gone")], 6),
    ("a Cohort's borrowingLimit caps what it takes from its parent", IN_TEAM, [],
     [cohort("team", "0", parent="org", borrowing="1"), cohort("org", "8")], 5),
    ("a child Cohort's lendingLimit keeps the rest from the parent", SIBLING, [IN_TEAM],
     [cohort("team", "4", parent="org", lending="1"), cohort("org")], 3),
    ("Cohorts not readable: unknown", IN_TEAM, [], None, Decimal("Infinity")),
    ("Cohorts not readable: the queue's own borrowingLimit still caps it", CAPPED_IN_TEAM, [], None, 7),
]  # fmt: skip


@pytest.mark.parametrize("case,queue,others,cohorts,expected", FOREST_ROWS, ids=[r[0] for r in FOREST_ROWS])
def test_potential_available_over_cohort_objects_and_their_parents(case, queue, others, cohorts, expected):
    assert potential_available(queue, others, "h100", GPU, cohorts) == Decimal(expected)


def split_queue(name, a, b, groups=1):
    """Flavors a and b with (cpu, GPUs) each, in one resource group (or cpu and GPUs in two groups)."""
    if groups == 1:
        return cq(name, {"a": {"cpu": (a[0], None, None), GPU: (a[1], None, None)}, "b": {"cpu": (b[0], None, None), GPU: (b[1], None, None)}})
    return cq(name, {"a": {"cpu": (a[0], None, None)}, "b": {GPU: (b[1], None, None)}})


A_CPU_B_GPU = split_queue("team", ("64", "4"), ("8", "16"))
TAINTED = {"a": {"spec": {"nodeLabels": {"pool": "a"}}}, "b": {"spec": {"nodeLabels": {"pool": "b"}, "nodeTaints": [{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}]}}}


def big_workers(**placement):
    return [PodSetRequest("head", 1, {"cpu": Decimal(1)}), PodSetRequest("workers", 2, {"cpu": Decimal(16), GPU: Decimal(4)}, **placement)]


# (case, podsets, queue, Cohort objects, flavors, expected fragments ([] = may fit))
GROUP_ROWS = [
    ("cpu fits only a, GPUs only b: one flavor per resource group", big_workers(), A_CPU_B_GPU, [], None,
     ["pod set workers asks for 32 cpu (2 x 16), 8 nvidia.com/gpu (2 x 4) and no flavor of ClusterQueue team can ever take it",
      "flavor a: nvidia.com/gpu 8 > 4 it can ever hold", "flavor b: cpu 32 > 8 it can ever hold",
      "one flavor for all of cpu, nvidia.com/gpu"]),
    ("the same quotas in two resource groups fit", big_workers(), split_queue("team", ("64", "0"), ("0", "16"), groups=2), [], None, []),
    ("the nodeSelector rules out one flavor, the taint the other", big_workers(node_selector={"pool": "a"}),
     split_queue("team", ("64", "4"), ("64", "16")), [], TAINTED,
     ["flavor a: nvidia.com/gpu 8 > 4 it can ever hold", "flavor b: nodeSelector pool=a does not match its node labels, untolerated taint dedicated=ml:NoSchedule"]),
    ("a toleration opens the tainted flavor", big_workers(tolerations=({"key": "dedicated", "operator": "Exists"},)),
     split_queue("team", ("64", "4"), ("64", "16")), [], TAINTED, []),
    ("a selector on a key no flavor labels is no constraint", big_workers(node_selector={"zone": "x"}),
     split_queue("team", ("64", "4"), ("64", "16")), [], TAINTED, ["untolerated taint"]),
]  # fmt: skip


@pytest.mark.parametrize("case,podsets,queue,cohorts,flavors,fragments", GROUP_ROWS, ids=[r[0] for r in GROUP_ROWS])
def test_a_pod_set_needs_one_flavor_for_its_whole_resource_group(case, podsets, queue, cohorts, flavors, fragments):
    problems = admission_problems(podsets, queue, [], flavors, None, cohorts)
    text = " | ".join(problems)
    if not fragments:
        assert problems == []
    for fragment in fragments:
        assert fragment in text


def test_a_cohort_object_s_quota_makes_a_job_fit():
    team = cq("team", {"h100": {GPU: ("4", None, None)}}, cohort="pool")
    assert admission_problems(gpu_workers(2, 4), team, [], cohorts=[cohort("pool", "4")]) == []
    assert admission_problems(gpu_workers(2, 4), team, [], cohorts=[]) != []


def test_a_loop_of_cohort_parents_admits_nothing():
    team = cq("team", {"h100": {GPU: ("8", None, None)}}, cohort="x")
    problems = admission_problems(gpu_workers(1, 1), team, [], cohorts=[cohort("x", parent="y"), cohort("y", parent="x")])
    assert problems == ["the cohorts above ClusterQueue team form a loop of parents (x -> y -> x): Kueue admits nothing from it until the loop is broken"]
