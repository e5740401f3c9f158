"""A node's GPUs as DRA devices (core/dra.py) and in the one inventory (core/inventory.py), one row per case.

The slices are shaped as NVIDIA's k8s-dra-driver-gpu v0.4.0 and ROCm's k8s-gpu-dra-driver v1.0 publish them:
one pool per node named after it, whole GPUs of type `gpu`/`amdgpu`, partitions of type `mig`/`amdgpu-partition`,
memory as a `memory` capacity in bytes.
"""

from __future__ import annotations

from typing import Any, Optional

import pytest

from raybridge.core.dra import (
    DeviceRequest,
    claim_gpu_requests,
    dra_gpus_by_node,
    gpu_classes_of,
    gpu_device_class,
    read_claim_spec,
    read_device_class,
    read_resource_slice,
    GPU_DRIVERS,
)
from raybridge.core.inventory import DeviceSources, inventory_from_nodes
from tests.builders import dra_device, device_class, gpu_node, resource_slice


def test_a_slice_is_read_with_its_attributes_in_the_driver_s_domain() -> None:
    s = read_resource_slice(resource_slice("n1", [dra_device("gpu-0", product="NVIDIA H100 80GB HBM3", memory="81559Mi",
                                                             extra={"gpu.nvidia.com/uuid": {"string": "GPU-1"}})]))  # fmt: skip
    assert (s.driver, s.pool, s.node_name, s.generation, s.slice_count) == ("gpu.nvidia.com", "n1", "n1", 1, 1)
    device = s.devices[0]
    assert device.attributes["productName"] == "NVIDIA H100 80GB HBM3" and device.attributes["uuid"] == "GPU-1"
    assert device.capacity["memory"] == 81559 * 2**20


# (case, slice objects, node -> (whole GPUs, partitions), warnings that must appear)
SLICE_ROWS: list[tuple[str, list[dict[str, Any]], dict[str, tuple[int, int]], list[str]]] = [
    ("eight H100s on one node", [resource_slice("n1", [dra_device(f"gpu-{i}") for i in range(8)])], {"n1": (8, 0)}, []),
    ("MIG partitions apart from whole GPUs",
     [resource_slice("n1", [dra_device("gpu-0"), dra_device("gpu-1-mig-1g10gb-19-0", kind="mig")])], {"n1": (1, 1)}, []),
    ("VFIO devices are not GPUs to run on", [resource_slice("n1", [dra_device("gpu-vfio-0", kind="vfio")])], {},
     ["device gpu-vfio-0 is of type 'vfio', not a GPU: not counted"]),
    ("an older generation of a pool is being replaced",
     [resource_slice("n1", [dra_device("gpu-0")], generation=1), resource_slice("n1", [dra_device("gpu-0"), dra_device("gpu-1")], generation=2)],
     {"n1": (2, 0)}, []),
    ("a slice for every node is no node's own", [resource_slice(None, [dra_device("gpu-0")], all_nodes=True)], {},
     ["devices not local to one node"]),
    ("another driver's devices are not GPUs", [resource_slice("n1", [dra_device("nic-0")], driver="net.example.com")], {}, []),
    ("AMD whole GPUs and partitions", [resource_slice("m1", [dra_device("gpu-1-128", driver="gpu.amd.com", kind="amdgpu"),
                                                             dra_device("gpu-2-136", driver="gpu.amd.com", kind="amdgpu-partition")],
                                                      driver="gpu.amd.com")], {"m1": (1, 1)}, []),  # fmt: skip
    ("a device published twice counts once", [resource_slice("n1", [dra_device("gpu-0"), dra_device("gpu-0")])], {"n1": (1, 0)},
     ["published twice"]),
    ("malformed devices read as absent", [{"spec": {"driver": "gpu.nvidia.com", "pool": {"name": "n1"}, "nodeName": "n1",
                                                    "devices": [None, 3, {"name": 7}, {"name": "gpu-0", "attributes": "x", "capacity": []}]}}],
     {}, ["type None, not a GPU"]),  # fmt: skip
]


@pytest.mark.parametrize("case, slices, expected, said", SLICE_ROWS, ids=[r[0] for r in SLICE_ROWS])
def test_each_node_s_gpu_devices_are_read_from_the_newest_slices(case: str, slices: list[dict[str, Any]],
                                                                  expected: dict[str, tuple[int, int]], said: list[str]) -> None:  # fmt: skip
    warnings: list[str] = []
    found = dra_gpus_by_node(slices, warnings)
    assert {node: (sum(g.whole for g in gpus), sum(not g.whole for g in gpus)) for node, gpus in found.items()} == expected, case
    for text in said:
        assert any(text in w for w in warnings), (case, warnings)


# (case, DeviceClass objects, the class a claim names for NVIDIA's GPUs)
CLASS_ROWS: list[tuple[str, list[dict[str, Any]], Optional[str]]] = [
    ("the chart's own class", [device_class("gpu.nvidia.com", GPU_DRIVERS["gpu.nvidia.com"].class_selector)], "gpu.nvidia.com"),
    ("another name with the chart's selector, other quotes",
     [device_class("h100", 'device.driver == "gpu.nvidia.com" && device.attributes["gpu.nvidia.com"].type == "gpu"')], "h100"),
    ("the MIG class is not whole GPUs",
     [device_class("mig.nvidia.com", "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'")], None),
    ("no class at all", [], None),
    ("a class of another selector is not read", [device_class("fast", "device.attributes['gpu.nvidia.com'].productName == 'x'")], None),
]


@pytest.mark.parametrize("case, classes, expected", CLASS_ROWS, ids=[r[0] for r in CLASS_ROWS])
def test_the_device_class_for_whole_gpus(case: str, classes: list[dict[str, Any]], expected: Optional[str]) -> None:
    assert gpu_device_class([read_device_class(c) for c in classes], GPU_DRIVERS["gpu.nvidia.com"]) == expected, case


def test_claim_specs_are_read_and_counted_per_vendor() -> None:
    spec = {"devices": {"requests": [
        {"name": "gpus", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 4,
                                     "selectors": [{"cel": {"expression": "device.attributes['gpu.nvidia.com'].productName == 'x'"}}]}},
        {"name": "one", "exactly": {"deviceClassName": "gpu.nvidia.com"}},
        {"name": "any", "firstAvailable": [{"name": "a", "deviceClassName": "gpu.amd.com", "count": 2}]},
        {"name": "nic", "exactly": {"deviceClassName": "nic.example.com", "count": 3}},
        {"name": "bad", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": "many"}},
    ]}}  # fmt: skip
    requests = read_claim_spec(spec)
    assert requests[0] == DeviceRequest("gpus", "gpu.nvidia.com", 4, False, ("device.attributes['gpu.nvidia.com'].productName == 'x'",))
    assert requests[2].alternatives and requests[2].count == 2
    classes = gpu_classes_of([read_device_class(device_class(d.device_class, d.class_selector)) for d in GPU_DRIVERS.values()])
    assert classes == {"gpu.nvidia.com": "nvidia", "gpu.amd.com": "amd"}
    assert claim_gpu_requests(requests, classes) == {"nvidia": 6, "amd": 2}  # a count that is no number reads as 1


def _inventory(nodes: list[dict[str, Any]], slices: list[dict[str, Any]], classes: Optional[list[dict[str, Any]]] = None,
               claims: Optional[list[dict[str, Any]]] = None, pods: Optional[list[dict[str, Any]]] = None) -> Any:  # fmt: skip
    if classes is None:
        classes = [device_class(d.device_class, d.class_selector) for d in GPU_DRIVERS.values()]
    return inventory_from_nodes(nodes, pods, devices=DeviceSources.read(slices, classes, claims))


def test_a_dra_only_node_has_its_gpus_with_model_memory_and_class() -> None:
    inventory = _inventory([gpu_node("n1", gpus=0)], [resource_slice("n1", [dra_device(f"gpu-{i}", memory="40Gi") for i in range(4)])])
    (node,) = inventory.nodes
    assert (node.vendor, node.gpus, node.model, node.memory_mib) == ("nvidia", 4, "NVIDIA H100 80GB HBM3", 40 * 1024)
    assert node.sources == ("dra",) and node.device_class == "gpu.nvidia.com" and node.eligible
    assert inventory.capacity("nvidia").total == 4


def test_a_node_with_plugin_and_dra_counts_each_gpu_once() -> None:
    inventory = _inventory([gpu_node("n1", gpus=8)], [resource_slice("n1", [dra_device(f"gpu-{i}") for i in range(8)])])
    (node,) = inventory.nodes
    assert node.gpus == 8 and node.sources == ("device-plugin", "dra")


def test_dra_gpus_no_class_selects_are_not_capacity() -> None:
    inventory = _inventory([gpu_node("n1", gpus=0)], [resource_slice("n1", [dra_device("gpu-0")])], classes=[])
    (node,) = inventory.nodes
    assert not node.eligible and "no DeviceClass selects its gpu.nvidia.com GPUs" in node.reasons[0]


def test_devices_allocated_to_claims_are_not_free() -> None:
    claim = {"metadata": {"name": "c"}, "status": {"allocation": {"devices": {"results": [
        {"request": "gpus", "driver": "gpu.nvidia.com", "pool": "n1", "device": "gpu-0"},
        {"request": "gpus", "driver": "gpu.nvidia.com", "pool": "n1", "device": "gpu-1"}]}}}}  # fmt: skip
    slices = [resource_slice("n1", [dra_device(f"gpu-{i}") for i in range(4)])]
    assert _inventory([gpu_node("n1", gpus=0)], slices, claims=[claim]).nodes[0].free == 2
    assert _inventory([gpu_node("n1", gpus=0)], slices).nodes[0].free is None  # claims not read: unknown


def test_a_pod_s_gpus_are_totalled_by_the_scheduler_s_rule_as_its_other_requests_are() -> None:
    """A GPU sidecar (a restartable init container) runs beside the app containers: 1 + 1 GPUs, as kube-scheduler
    and kubeobjects.pod_requests count it; the inventory counted 1 (the larger of the two)."""
    from decimal import Decimal

    from raybridge.core.inventory import pod_gpu_requests
    from raybridge.core.kubeobjects import pod_requests
    from raybridge.core.views import read_pod

    one = {"limits": {"nvidia.com/gpu": "1"}}
    spec = {"containers": [{"name": "app", "resources": one}],
            "initContainers": [{"name": "sidecar", "restartPolicy": "Always", "resources": one}]}  # fmt: skip
    pod = read_pod({"metadata": {"name": "p", "namespace": "n"}, "spec": spec})
    assert pod_gpu_requests(pod) == {"nvidia.com/gpu": 2} == {k: int(v) for k, v in pod_requests(spec).items()}
    # An init container before the sidecar runs alone and needs more than the two together.
    spec["initContainers"].insert(0, {"name": "setup", "resources": {"limits": {"nvidia.com/gpu": "4"}}})
    assert pod_gpu_requests(read_pod({"metadata": {"name": "p"}, "spec": spec})) == {"nvidia.com/gpu": 4}
    assert pod_requests(spec)["nvidia.com/gpu"] == Decimal(4)
