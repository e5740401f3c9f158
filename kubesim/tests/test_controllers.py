"""Tests of Kueue's pod sets and flavor assignment as kubesim computes them, and of kubesim's shared helpers.

Why this module exists: the test of the shipped queue configs (tests/unit/test_configs.py) trusts these pure
functions to decide as Kueue does (quota fit, Kueue's messages), so they are pinned here, with the helpers the
simulations share (quantities, pod requests, the GPU node a simulation registers). Neither KubeRay nor Kueue is
simulated: the end-to-end tests run the real operators on the real test cluster (testcluster/).

What it deliberately does not do: start an API server or a cluster (every test here is a pure function's; the
simulations' behaviour on the real API server is test_sim_adjuster_world.py's), or exercise raybridge.
"""

from __future__ import annotations

import copy
from decimal import Decimal
from typing import Any

import pytest

from kubesim import controllers as ctl
from kubesim.sim_gpu import register_gpu_node
from kubesim.tests.objects import rayjob_manifest


# --------------------------------------------------------------------------
# Pure decision logic
# --------------------------------------------------------------------------


def test_quantities_parse_and_format_like_kubernetes() -> None:
    assert ctl.parse_quantity("500m") == Decimal("0.5")
    assert ctl.parse_quantity("4Gi") == 4 * 2**30
    assert ctl.parse_quantity("1e3") == 1000
    assert ctl.parse_quantity(2) == 2
    assert ctl.format_quantity(Decimal(4)) == "4"
    assert ctl.format_quantity(Decimal("0.5")) == "500m"
    assert ctl.format_quantity(Decimal(16 * 2**30)) == "16Gi"
    assert ctl.format_quantity(Decimal(512 * 10**6)) == "512M"
    assert ctl.format_quantity(Decimal(0)) == "0"
    with pytest.raises(ValueError):
        ctl.parse_quantity("four")


def test_pod_requests_fall_back_to_limits_and_take_the_init_container_max() -> None:
    spec = {
        "initContainers": [{"name": "init", "resources": {"requests": {"cpu": "3"}}}],
        "containers": [
            {"name": "a", "resources": {"limits": {"cpu": "1", "nvidia.com/gpu": "2"}}},
            {"name": "b", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": "2"}}},
        ],
    }
    assert ctl.pod_requests(spec) == {"cpu": Decimal(3), "nvidia.com/gpu": Decimal(2), "memory": Decimal(2**30)}


def _job(name: str = "train", **kwargs: Any) -> dict:
    job = rayjob_manifest(name, **kwargs)
    job["metadata"]["uid"] = "uid-" + name
    return job


def test_podsets_are_head_plus_groups_times_hosts_and_submitter_only_in_k8sjobmode() -> None:
    job = _job(workers=3, gpus_per_worker=4)
    job["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["numOfHosts"] = 2
    podsets = ctl.ray_podsets("RayJob", job)
    assert [(p["name"], p["count"]) for p in podsets] == [("head", 1), ("workers", 6)]
    assert podsets[1]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "4"

    k8s_mode = _job(submission_mode="K8sJobMode")
    assert [p["name"] for p in ctl.ray_podsets("RayJob", k8s_mode)] == ["head", "workers", "submitter"]


def _cq(gpus: int = 8, cpu: str = "64", memory: str = "512Gi", flavors: tuple[str, ...] = ("default-flavor",)) -> dict:
    return {
        "metadata": {"name": "cq"},
        "spec": {
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
                    "flavors": [
                        {
                            "name": name,
                            "resources": [
                                {"name": "cpu", "nominalQuota": cpu},
                                {"name": "memory", "nominalQuota": memory},
                                {"name": "nvidia.com/gpu", "nominalQuota": str(gpus)},
                            ],
                        }
                        for name in flavors
                    ],
                }
            ]
        },
    }


def test_assign_flavors_admits_within_quota_with_kueue_shaped_assignments() -> None:
    fit = ctl.assign_flavors(_cq(), ctl.ray_podsets("RayJob", _job(workers=2, gpus_per_worker=4)), used={})
    assert fit.fits
    assert fit.pod_set_assignments == [
        {
            "name": "head",
            "flavors": {"cpu": "default-flavor", "memory": "default-flavor"},
            "resourceUsage": {"cpu": "1", "memory": "2Gi"},
            "count": 1,
        },
        {
            "name": "workers",
            "flavors": {"cpu": "default-flavor", "memory": "default-flavor", "nvidia.com/gpu": "default-flavor"},
            "resourceUsage": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "8"},
            "count": 2,
        },
    ]
    assert fit.usage[("default-flavor", "nvidia.com/gpu")] == 8


def test_assign_flavors_reports_unused_quota_in_kueue_words() -> None:
    used = {("default-flavor", "nvidia.com/gpu"): Decimal(4)}
    fit = ctl.assign_flavors(_cq(), ctl.ray_podsets("RayJob", _job(workers=2, gpus_per_worker=4)), used)
    assert not fit.fits
    assert fit.reason == "WaitingForQuota"
    assert fit.message == (
        "couldn't assign flavors to pod set workers: "
        "insufficient unused quota for nvidia.com/gpu in flavor default-flavor, 4 more needed"
    )


def test_assign_flavors_reports_requests_above_the_nominal_quota() -> None:
    fit = ctl.assign_flavors(_cq(), ctl.ray_podsets("RayJob", _job(workers=4, gpus_per_worker=4)), used={})
    assert fit.reason == "ExceedsMaxQuota"
    assert fit.message == (
        "couldn't assign flavors to pod set workers: insufficient quota for nvidia.com/gpu in flavor default-flavor, "
        "previously considered podsets requests (0) + current podset request (16) > maximum capacity (8)"
    )


def test_assign_flavors_rejects_resources_the_queue_does_not_cover() -> None:
    fit = ctl.assign_flavors(_cq(), ctl.ray_podsets("RayJob", _job(gpus_per_worker=1, vendor_key="amd.com/gpu")), {})
    assert fit.reason == "NoMatchingFlavor"
    assert fit.message == "couldn't assign flavors to pod set workers: resource amd.com/gpu unavailable in ClusterQueue"


def test_assign_flavors_tries_flavors_in_order_and_honours_node_selectors() -> None:
    cq = _cq(gpus=4, flavors=("h100", "a100"))
    job = _job(workers=1, gpus_per_worker=4)
    used = {("h100", "nvidia.com/gpu"): Decimal(4)}
    fit = ctl.assign_flavors(cq, ctl.ray_podsets("RayJob", job), used)
    assert fit.pod_set_assignments[1]["flavors"]["nvidia.com/gpu"] == "a100"

    labels = {"h100": {"gpu": "h100"}, "a100": {"gpu": "a100"}}
    job["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]["spec"]["nodeSelector"] = {"gpu": "h100"}
    fit = ctl.assign_flavors(cq, ctl.ray_podsets("RayJob", job), used, labels)
    assert not fit.fits
    assert fit.message == (
        "couldn't assign flavors to pod set workers: insufficient unused quota for nvidia.com/gpu in flavor h100, "
        "4 more needed, flavor a100 doesn't match node affinity"
    )


# --------------------------------------------------------------------------
# The nodes the simulations register
# --------------------------------------------------------------------------


class _Registry:
    """Takes the Node `register_gpu_node` writes and hands it back, as an API server answers a create."""

    def create_object(self, obj: dict[str, Any]) -> dict[str, Any]:
        return copy.deepcopy(obj)


def test_a_registered_gpu_node_is_labelled_like_gfd() -> None:
    nvidia = register_gpu_node(_Registry(), "h100-0", taints=[{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}])
    assert nvidia["metadata"]["labels"]["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert nvidia["status"]["allocatable"]["nvidia.com/gpu"] == "8"
    assert nvidia["spec"]["taints"][0]["key"] == "nvidia.com/gpu"
