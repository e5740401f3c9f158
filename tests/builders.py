"""Object builders shared by every tier of the tests: Nodes and the DRA objects of GPU drivers, as plain dicts.

Like Kueue's `pkg/util/testing` wrappers: one place that knows what a GPU node or a driver's ResourceSlice looks
like, so a unit table, an offline CLI test and a real-cluster test build the same objects. Pure: no cluster, no
kubesim, no kubernetes package (a pure unit test imports neither).

The DRA shapes follow NVIDIA's k8s-dra-driver-gpu v0.4.0 (`cmd/gpu-kubelet-plugin/deviceinfo.go`: attributes
`type`, `productName`, ...; capacity `memory` in bytes; one pool per node named after it) and ROCm's
k8s-gpu-dra-driver v1.0 (`type` `amdgpu`, `productName` with underscores).
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

VENDOR_KEYS = {"nvidia": "nvidia.com/gpu", "amd": "amd.com/gpu"}


def gpu_node(
    name: str,
    gpus: int = 8,
    vendor: str = "nvidia",
    *,
    product: Optional[str] = None,
    memory_mib: Optional[int] = None,
    labels: Optional[Mapping[str, str]] = None,
    taints: tuple[Mapping[str, str], ...] = (),
    cpu: str = "128",
    memory: str = "1024Gi",
) -> dict[str, Any]:
    """A Ready Node with `gpus` of the vendor's device-plugin resource (none with 0: a DRA-only or CPU node),
    labelled as GPU Feature Discovery (NVIDIA) or the ROCm labeller (AMD) would when `product` is given."""
    allocatable = {"cpu": cpu, "memory": memory, "pods": "110"}
    if gpus:
        allocatable[VENDOR_KEYS[vendor]] = str(gpus)
    node_labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}
    if product and vendor == "nvidia":
        node_labels.update({"nvidia.com/gpu.product": product, "nvidia.com/gpu.count": str(gpus)})
        if memory_mib:
            node_labels["nvidia.com/gpu.memory"] = str(memory_mib)
    elif product and vendor == "amd":
        node_labels["amd.com/gpu.product-name"] = product
        if memory_mib:
            node_labels["amd.com/gpu.vram"] = f"{round(memory_mib / 1024)}G"
    node_labels.update(labels or {})
    spec: dict[str, Any] = {"taints": [dict(t) for t in taints]} if taints else {}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": node_labels},
        "spec": spec,
        "status": {
            "capacity": dict(allocatable),
            "allocatable": allocatable,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
            "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}, {"type": "Hostname", "address": name}],
        },
    }


def dra_device(
    name: str,
    *,
    driver: str = "gpu.nvidia.com",
    kind: Optional[str] = None,
    product: Optional[str] = None,
    memory: Optional[str] = None,
    extra: Optional[Mapping[str, Any]] = None,
) -> dict[str, Any]:
    """One device of a GPU driver's ResourceSlice: a whole GPU unless `kind` says otherwise ("mig",
    "amdgpu-partition", "vfio")."""
    nvidia = driver == "gpu.nvidia.com"
    attributes: dict[str, Any] = {
        "type": {"string": kind or ("gpu" if nvidia else "amdgpu")},
        "productName": {"string": product or ("NVIDIA H100 80GB HBM3" if nvidia else "AMD_Instinct_MI300X")},
    }
    attributes.update(extra or {})
    return {"name": name, "attributes": attributes, "capacity": {"memory": {"value": memory or ("81559Mi" if nvidia else "192Gi")}}}


def resource_slice(
    node: Optional[str],
    devices: list[dict[str, Any]],
    *,
    driver: str = "gpu.nvidia.com",
    generation: int = 1,
    all_nodes: bool = False,
    name: Optional[str] = None,
) -> dict[str, Any]:
    """The ResourceSlice a driver's kubelet plugin publishes for `node`: one pool named after the node."""
    spec: dict[str, Any] = {"driver": driver, "pool": {"name": node or "shared", "generation": generation, "resourceSliceCount": 1},
                            "devices": devices}  # fmt: skip
    if all_nodes:
        spec["allNodes"] = True
    else:
        spec["nodeName"] = node
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name or f"{node or 'all'}-{driver}-{generation}"},
        "spec": spec,
    }


def device_class(name: str, *selectors: str, extended_resource_name: Optional[str] = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": s}} for s in selectors]}
    if extended_resource_name:
        spec["extendedResourceName"] = extended_resource_name
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name}, "spec": spec}


def resource_claim(
    name: str,
    namespace: str,
    device_class_name: str = "gpu.nvidia.com",
    count: int = 1,
    *,
    all_devices: bool = False,
    alternatives: bool = False,
    allocated_on: Optional[str] = None,
) -> dict[str, Any]:
    """A ResourceClaim asking for `count` devices of a class (or all of them, or the first of alternatives); with
    `allocated_on` a node, the status the scheduler writes once it allocated them there."""
    exactly: dict[str, Any] = {"deviceClassName": device_class_name}
    exactly.update({"allocationMode": "All"} if all_devices else {"allocationMode": "ExactCount", "count": count})
    request: dict[str, Any] = {"name": "gpus"}
    if alternatives:
        request["firstAvailable"] = [{"name": "first", **exactly}, {"name": "second", "deviceClassName": device_class_name}]
    else:
        request["exactly"] = exactly
    claim: dict[str, Any] = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name, "namespace": namespace},
                             "spec": {"devices": {"requests": [request]}}}  # fmt: skip
    if allocated_on:
        results = [{"request": "gpus", "driver": "gpu.nvidia.com", "pool": allocated_on, "device": f"gpu-{i}"} for i in range(count)]
        claim["status"] = {"allocation": {"devices": {"results": results}}}
    return claim
