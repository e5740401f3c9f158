"""tests/builders.py's GPU nodes are labelled as NVIDIA GPU Feature Discovery and the ROCm node labeller label them.

Why: every tier builds its GPU nodes there, and raybridge reads these labels (product, memory) to choose GPUs.
What it deliberately does not do: check the DRA builders (the DRA tests use them against raybridge's readers).
"""

from __future__ import annotations

import pytest

from tests.builders import gpu_node, h100_node


def test_gpu_nodes_are_labelled_like_gfd_and_rocm() -> None:
    nvidia = h100_node("h100-0")
    amd = gpu_node("mi300x-0", vendor="amd", product="AMD_Instinct_MI300X_OAM", memory_mib=196608,
                   taints=({"key": "amd.com/gpu", "value": "present", "effect": "NoSchedule"},))  # fmt: skip
    assert nvidia["metadata"]["labels"]["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert nvidia["metadata"]["labels"]["nvidia.com/gpu.memory"] == "81559"
    assert nvidia["status"]["allocatable"]["nvidia.com/gpu"] == "8"
    assert amd["metadata"]["labels"]["amd.com/gpu.vram"] == amd["metadata"]["labels"]["beta.amd.com/gpu.vram"] == "192G"
    assert amd["status"]["allocatable"]["amd.com/gpu"] == "8"
    assert amd["spec"]["taints"][0]["key"] == "amd.com/gpu"


def test_a_node_without_device_plugin_gpus_has_no_gpu_resource() -> None:
    assert "nvidia.com/gpu" not in gpu_node("dra-0", 0)["status"]["allocatable"]
    assert gpu_node("dra-0", 0, extra_resources={"nvidia.com/gpu": "0"})["status"]["allocatable"]["nvidia.com/gpu"] == "0"


def test_an_unknown_vendor_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown GPU vendor 'intel'"):
        gpu_node("x", vendor="intel")
