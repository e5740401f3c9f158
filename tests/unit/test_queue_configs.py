"""Kueue and KAI queue configs sized from node pools: quotas, Kueue's rules, and every schema release."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest
import yaml

from raybridge.kai.fairshare import Amounts, divide_fair_share
from raybridge.kai.queue import queue_specs
from raybridge.core.quantity import parse_quantity
from raybridge.queues.decision.configs import (
    PRIORITY_CLASSES,
    KaiOptions,
    KueueOptions,
    kai_configs,
    kueue_configs,
    node_pools,
    split_evenly,
)
from testcluster.crd_schemas import MODULE_RELEASES, SHARED_RELEASES, is_crd_kind, release_schema_errors, release_serves, schema_errors
from tests.unit.k8s_schemas import K8S_VERSIONS, k8s_schema_errors

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_NODES = json.loads((ROOT / "examples" / "cluster" / "nodes.json").read_text())["items"]


def gpu_node(name, vendor, gpus, product, cpu="64", memory="512Gi", **spec):
    key = {"nvidia": "nvidia.com/gpu", "amd": "amd.com/gpu"}[vendor]
    label = {"nvidia": "nvidia.com/gpu.product", "amd": "amd.com/gpu.product-name"}[vendor]
    labels = {label: product} if product else {}
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
        "status": {
            "allocatable": {"cpu": cpu, "memory": memory, key: str(gpus)},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def cpu_node(name, cpu="32", memory="128Gi"):
    return {
        "metadata": {"name": name},
        "status": {"allocatable": {"cpu": cpu, "memory": memory}, "conditions": [{"type": "Ready", "status": "True"}]},
    }


# --- pools ----------------------------------------------------------------------------------------
def test_example_cluster_pools_leave_out_unschedulable_nodes():
    pools = node_pools(EXAMPLE_NODES)
    assert [(p.flavor_name, p.gpus, p.nodes) for p in pools.pools] == [
        ("cpu-nodes", 0, ("cpu-0",)),
        ("amd-instinct-mi300x-oam", 24, ("mi300x-0", "mi300x-1", "mi300x-2")),
        ("nvidia-h100-80gb-hbm3", 8, ("h100-0",)),
    ]
    assert pools.pools[1].cpu_millicores == 3 * 96_000 and pools.pools[1].memory_bytes == 3 * 1500 * 2**30
    assert pools.pools[1].label == ("amd.com/gpu.product-name", "AMD_Instinct_MI300X_OAM")
    assert any("h100-1" in n and "cordoned" in n for n in pools.notes)
    assert any("h100-2" in n and "maintenance" in n for n in pools.notes)


def test_two_models_of_one_vendor_are_two_pools_and_unlabelled_nodes_a_third():
    nodes = [
        gpu_node("a", "nvidia", 8, "NVIDIA-H100-80GB-HBM3"),
        gpu_node("b", "nvidia", 4, "NVIDIA-A100-SXM4-40GB"),
        gpu_node("c", "nvidia", 2, None),
    ]
    pools = node_pools(nodes)
    assert sorted((p.flavor_name, p.gpus) for p in pools.pools) == [
        ("nvidia-a100-sxm4-40gb", 4), ("nvidia-gpu", 2), ("nvidia-h100-80gb-hbm3", 8),
    ]  # fmt: skip
    assert any("no GPU product label" in n for n in pools.notes)


SPLITS = [(16, 3, [6, 5, 5]), (12, 2, [6, 6]), (0, 2, [0, 0]), (1, 3, [1, 0, 0]), (288_000, 2, [144_000, 144_000])]


@pytest.mark.parametrize("total,parts,expected", SPLITS)
def test_split_evenly_adds_up(total, parts, expected):
    assert split_evenly(total, parts) == expected
    assert sum(split_evenly(total, parts)) == total


# --- Kueue: quotas add up, the resource group rule, Kueue's webhook rules ---------------------------
def cluster_queues(objects):
    return [o for o in objects if o["kind"] == "ClusterQueue"]


def kueue_webhook_problems(cq):
    """The checks of Kueue's ClusterQueue webhook and CEL rules (clusterqueue_webhook.go) the schema misses."""
    problems = []
    seen_resources, seen_flavors = set(), set()
    spec = cq["spec"]
    cohort = spec.get("cohortName") or spec.get("cohort")
    for group in spec["resourceGroups"]:
        covered = group["coveredResources"]
        problems += [f"resource {r} in two groups" for r in covered if r in seen_resources]
        seen_resources.update(covered)
        for flavor in group["flavors"]:
            if flavor["name"] in seen_flavors:
                problems.append(f"flavor {flavor['name']} in two groups")
            seen_flavors.add(flavor["name"])
            if [r["name"] for r in flavor["resources"]] != covered:
                problems.append(f"flavor {flavor['name']}: resources must match coveredResources in order")
            for r in flavor["resources"]:
                for key in ("nominalQuota", "borrowingLimit", "lendingLimit"):
                    if key in r and parse_quantity(r[key]) < 0:
                        problems.append(f"{flavor['name']} {r['name']} {key} negative")
                if "borrowingLimit" in r and not cohort:
                    problems.append("borrowingLimit must be nil when cohort is empty")
    return problems


def nominal(cq, flavor, resource):
    for group in cq["spec"]["resourceGroups"]:
        for f in group["flavors"]:
            if f["name"] == flavor:
                for r in f["resources"]:
                    if r["name"] == resource:
                        return parse_quantity(r["nominalQuota"])
    raise KeyError((flavor, resource))


@pytest.mark.parametrize("count", [1, 2, 3, 7])
def test_nominal_quotas_add_up_to_each_pool(count):
    pools = node_pools(EXAMPLE_NODES)
    objects = kueue_configs(pools, KueueOptions(names=tuple(f"q{i}" for i in range(count))))
    cqs = cluster_queues(objects)
    assert len(cqs) == count
    for pool in pools.pools:
        totals = {
            "cpu": Decimal(pool.cpu_millicores) / 1000,
            "memory": Decimal(pool.memory_bytes),
            "amd.com/gpu": pool.gpus if pool.vendor == "amd" else 0,
            "nvidia.com/gpu": pool.gpus if pool.vendor == "nvidia" else 0,
        }
        for resource, total in totals.items():
            assert sum(nominal(cq, pool.flavor_name, resource) for cq in cqs) == total, (pool.flavor_name, resource)


def test_cpu_and_memory_share_the_resource_group_of_every_gpu():
    """Kueue gives a pod set one flavor per resource group: a GPU flavor must carry its own cpu and memory."""
    objects = kueue_configs(node_pools(EXAMPLE_NODES), KueueOptions())
    for cq in cluster_queues(objects):
        assert kueue_webhook_problems(cq) == []
        [group] = cq["spec"]["resourceGroups"]
        assert group["coveredResources"] == ["cpu", "memory", "amd.com/gpu", "nvidia.com/gpu"]
        assert [f["name"] for f in group["flavors"]] == ["cpu-nodes", "amd-instinct-mi300x-oam", "nvidia-h100-80gb-hbm3"]
        assert nominal(cq, "amd-instinct-mi300x-oam", "cpu") == 144 and nominal(cq, "amd-instinct-mi300x-oam", "nvidia.com/gpu") == 0
        assert nominal(cq, "nvidia-h100-80gb-hbm3", "memory") == 750 * 2**30
        assert cq["spec"]["admissionChecksStrategy"]["admissionChecks"] == [
            {"name": "gpu-provisioning", "onFlavors": ["amd-instinct-mi300x-oam", "nvidia-h100-80gb-hbm3"]}
        ]


def test_flavors_take_the_nodes_own_labels():
    objects = kueue_configs(node_pools(EXAMPLE_NODES), KueueOptions())
    flavors = {o["metadata"]["name"]: o["spec"].get("nodeLabels") for o in objects if o["kind"] == "ResourceFlavor"}
    assert flavors == {
        "cpu-nodes": None,
        "amd-instinct-mi300x-oam": {"amd.com/gpu.product-name": "AMD_Instinct_MI300X_OAM"},
        "nvidia-h100-80gb-hbm3": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
    }


def test_priority_classes_of_seed_003():
    objects = kueue_configs(node_pools(EXAMPLE_NODES), KueueOptions())
    classes = {o["metadata"]["name"]: o["value"] for o in objects if o["kind"] == "WorkloadPriorityClass"}
    assert classes == {"inference": 125, "build": 100, "interactive-preemptible": 75, "train": 50}
    assert {n for n, _, preemptible, _ in PRIORITY_CLASSES if preemptible} == {"interactive-preemptible", "train"}


def test_admission_check_points_at_the_provisioning_config():
    objects = kueue_configs(node_pools(EXAMPLE_NODES), KueueOptions())
    [check] = [o for o in objects if o["kind"] == "AdmissionCheck"]
    [config] = [o for o in objects if o["kind"] == "ProvisioningRequestConfig"]
    assert check["spec"]["controllerName"] == "kueue.x-k8s.io/provisioning-request"
    assert check["spec"]["parameters"] == {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig", "name": config["metadata"]["name"]}
    assert config["spec"]["managedResources"] == ["amd.com/gpu", "nvidia.com/gpu"]


@pytest.mark.parametrize("percent,expected", [(100, 12), (50, 6), (0, 0)])
def test_borrowing_limit_is_a_share_of_the_others_quota(percent, expected):
    objects = kueue_configs(node_pools(EXAMPLE_NODES), KueueOptions(borrowing_percent=percent))
    cq = cluster_queues(objects)[0]
    [flavor] = [f for f in cq["spec"]["resourceGroups"][0]["flavors"] if f["name"] == "amd-instinct-mi300x-oam"]
    [gpu] = [r for r in flavor["resources"] if r["name"] == "amd.com/gpu"]
    assert parse_quantity(gpu["borrowingLimit"]) == expected


def test_no_gpu_nodes_is_an_error():
    with pytest.raises(ValueError, match="no schedulable GPU nodes"):
        kueue_configs(node_pools([cpu_node("c")]), KueueOptions())


# --- every generated object against the CRD schemas of every release -------------------------------
def generated(api_version, **options):
    return kueue_configs(node_pools(EXAMPLE_NODES), KueueOptions(api_version=api_version, **options))


VARIANTS = [
    ("v1beta2", {}),
    ("v1beta1", {}),
    ("v1beta2", {"provisioning": False, "names": ("solo",)}),
]
CASES = [
    (f"{api}{'-' + '-'.join(sorted(opts)) if opts else ''}:{obj['kind']}:{obj['metadata']['name']}", obj)
    for api, opts in VARIANTS
    for obj in generated(api, **opts)
]


def assert_valid_on(obj: dict, releases: list[str]) -> None:
    """`obj` is schema-valid on each of `releases` that serves its version; Kueue 0.13 alone may not serve it."""
    for release in releases:
        served = release_serves(release, obj["apiVersion"], obj["kind"])
        if served:
            assert release_schema_errors(obj, release) == [], release
        elif served is False:
            # Kueue 0.13 serves only v1beta1: v1beta2 output is not for it, v1beta1 output must be.
            assert (release, obj["apiVersion"].rpartition("/")[2]) == ("kueue-v0.13.10", "v1beta2")


@pytest.mark.parametrize("where,obj", CASES, ids=[c[0] for c in CASES])
def test_generated_objects_validate_now_and_on_every_release_the_test_cluster_builds(where, obj):
    if not is_crd_kind(obj["apiVersion"], obj["kind"]):
        assert obj["kind"] == "Namespace"
        for version in K8S_VERSIONS:
            assert k8s_schema_errors(obj, version) == []
        return
    assert schema_errors(obj) == []
    assert_valid_on(obj, list(MODULE_RELEASES))


@pytest.mark.parametrize("where,obj", CASES, ids=[c[0] for c in CASES])
def test_generated_objects_validate_on_the_releases_read_from_beside_the_clone(where, obj):
    """KubeRay v1.5.2 and Kueue v0.15.8, which the Go module proxy does not serve (skipped where ../shared is absent)."""
    if obj["kind"] != "Namespace":
        assert_valid_on(obj, list(SHARED_RELEASES))


def test_v1beta1_output_is_what_kueue_0_13_serves():
    assert release_serves("kueue-v0.13.10", "kueue.x-k8s.io/v1beta2", "ClusterQueue") is False
    for obj in generated("v1beta1"):
        if obj["apiVersion"].startswith("kueue.x-k8s.io/"):
            assert release_schema_errors(obj, "kueue-v0.13.10") == []
    cq = cluster_queues(generated("v1beta1"))[0]
    assert cq["spec"]["cohort"] == "gpu" and "cohortName" not in cq["spec"]
    assert cluster_queues(generated("v1beta2"))[0]["spec"]["cohortName"] == "gpu"


# --- KAI -------------------------------------------------------------------------------------------------
def test_kai_hierarchy_quotas_add_up_and_validate():
    pools = node_pools(EXAMPLE_NODES)
    objects = kai_configs(pools, KaiOptions(departments=("research", "product"), projects_per_department=3))
    assert all(schema_errors(o) == [] for o in objects)
    specs = queue_specs(objects)
    departments = [s for s in specs if s.parent is None]
    assert [d.name for d in departments] == ["research", "product"]
    assert sum(d.gpu.quota for d in departments) == 24 + 8
    assert sum(d.cpu.quota for d in departments) == (32 + 288 + 96) * 1000
    assert sum(d.memory.quota for d in departments) == (128 + 4500 + 1500) * 2**30 // 10**6
    for department in departments:
        projects = [s for s in specs if s.parent == department.name]
        assert len(projects) == 3
        for resource in ("gpu", "cpu", "memory"):
            assert sum(p.terms(resource).quota for p in projects) == department.terms(resource).quota
        assert all(p.terms(r).limit == -1 for p in projects for r in ("gpu", "cpu", "memory"))


def test_kai_projects_get_their_quota_as_fair_share_when_everyone_wants_more():
    """Quotas that add up to the capacity leave nothing over quota: each fair share is the quota."""
    pools = node_pools(EXAMPLE_NODES)
    specs = queue_specs(kai_configs(pools, KaiOptions(departments=("d1", "d2"), projects_per_department=2)))
    capacity = Amounts(gpu=32, cpu=416_000, memory=sum(d.memory.quota for d in specs if d.parent is None) * 1e6)
    result = divide_fair_share(specs, capacity)
    for share in result.queues:
        assert share.gpu.fair_share == share.gpu.quota
    assert result.notes == ()


# --- the checked-in configs are what the generator writes ---------------------------------------
CHECKED_IN = [
    ("configs/kueue/example-cluster.yaml", []),
    ("configs/kai/departments.yaml", ["--kai", "--departments", "2"]),
]


@pytest.mark.parametrize("path,flags", CHECKED_IN, ids=[c[0] for c in CHECKED_IN])
def test_checked_in_configs_are_current(path, flags):
    from tests.helpers import run_cli

    result = run_cli("queues", "generate", "--nodes", "examples/cluster/nodes.json", *flags)
    assert result.returncode == 0, result.stderr
    assert (ROOT / path).read_text() == result.stdout, f"regenerate {path}: see the README"
    assert [d for d in yaml.safe_load_all(result.stdout) if d]
