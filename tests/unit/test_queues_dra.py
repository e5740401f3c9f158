"""`queues generate` on clusters whose GPUs are DRA devices (queues/decision/configs.py)."""

from __future__ import annotations

from typing import Any

from raybridge.core.dra import GPU_DRIVERS
from raybridge.core.inventory import DeviceSources
from raybridge.queues.decision.configs import KueueOptions, device_class_mappings, kueue_configs, kueue_summary, node_pools
from tests.builders import device_class, dra_device, gpu_node, resource_slice

CLASSES = [device_class(d.device_class, d.class_selector) for d in GPU_DRIVERS.values()]


def _pools(nodes: list[dict[str, Any]], slices: list[dict[str, Any]]) -> Any:
    return node_pools(nodes, DeviceSources.read(slices, CLASSES))


def test_dra_gpus_are_a_pool_and_their_class_is_mapped_to_the_quota_s_resource() -> None:
    nodes = [gpu_node(f"dra-{i}", gpus=0) for i in range(2)] + [gpu_node("mi-0", gpus=0, vendor="amd")]
    slices = [resource_slice(f"dra-{i}", [dra_device(f"gpu-{j}") for j in range(8)]) for i in range(2)]
    slices.append(resource_slice("mi-0", [dra_device(f"gpu-{j}", driver="gpu.amd.com") for j in range(8)], driver="gpu.amd.com"))
    pools = _pools(nodes, slices)
    assert [(p.resource_key, p.gpus, p.device_classes) for p in pools.gpu_pools] == [
        ("amd.com/gpu", 8, ("gpu.amd.com",)), ("nvidia.com/gpu", 16, ("gpu.nvidia.com",))
    ]
    assert device_class_mappings(pools) == [
        {"name": "amd.com/gpu", "deviceClassNames": ["gpu.amd.com"]},
        {"name": "nvidia.com/gpu", "deviceClassNames": ["gpu.nvidia.com"]},
    ]
    summary = kueue_summary(pools, KueueOptions())
    assert any("deviceClassMappings: [{name: amd.com/gpu, deviceClassNames: [gpu.amd.com]}, {name: nvidia.com/gpu" in line for line in summary)
    quotas = [o for o in kueue_configs(pools, KueueOptions()) if o["kind"] == "ClusterQueue"][0]["spec"]["resourceGroups"][0]
    assert "nvidia.com/gpu" in quotas["coveredResources"]  # the mapped name, the same as the device plugin's


def test_a_device_plugin_cluster_has_no_mapping() -> None:
    pools = _pools([gpu_node("h-0", gpus=8, product="NVIDIA-H100-80GB-HBM3")], [])
    assert device_class_mappings(pools) == []
    assert not any("deviceClassMappings" in line for line in kueue_summary(pools, KueueOptions()))


def test_two_pools_whose_names_would_be_one_get_two_flavors() -> None:
    """The same model from a node label and from DRA devices on unlabelled nodes: before, two ResourceFlavors of one
    name were written, and the second overwrote the first on apply."""
    nodes = [gpu_node("dra-0", gpus=0), gpu_node("h-0", gpus=8, product="NVIDIA-H100-80GB-HBM3")]
    pools = _pools(nodes, [resource_slice("dra-0", [dra_device(f"gpu-{j}") for j in range(8)])])
    flavors = [o["metadata"]["name"] for o in kueue_configs(pools, KueueOptions()) if o["kind"] == "ResourceFlavor"]
    assert len(flavors) == len(set(flavors)) == 2, flavors
