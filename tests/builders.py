"""Object builders shared by every tier of the tests: Nodes, Kueue's queues, RayJobs and RayClusters shaped like
raybridge's, and the DRA objects of GPU drivers, as plain dicts.

Like Kueue's `pkg/util/testing` wrappers: one place that knows what a GPU node, a ClusterQueue or a driver's
ResourceSlice looks like, so a unit table, an offline CLI test and a real-cluster test build the same objects.
Pure: no cluster, no kubesim, no kubernetes package (a pure unit test imports neither); tests/cluster_state.py
creates these objects on a cluster. The clock is read once, for a Node's heartbeat.

GPU node labels are those NVIDIA GPU Feature Discovery and the ROCm node labeller write. The DRA shapes follow
NVIDIA's k8s-dra-driver-gpu v0.4.0 (`cmd/gpu-kubelet-plugin/deviceinfo.go`: attributes `type`, `productName`, ...;
capacity `memory` in bytes; one pool per node named after it) and ROCm's k8s-gpu-dra-driver v1.0 (`type` `amdgpu`,
`productName` with underscores).
"""

from __future__ import annotations

import time
from typing import Any, Mapping, Optional

KUEUE_API = "kueue.x-k8s.io/v1beta2"
RAY_API = "ray.io/v1"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
RAY_IMAGE = "rayproject/ray:2.55.1"
VENDOR_KEYS = {"nvidia": "nvidia.com/gpu", "amd": "amd.com/gpu"}
#: The GPU of the nodes most tests run on, as GPU Feature Discovery labels it.
H100 = "NVIDIA-H100-80GB-HBM3"
H100_MEMORY_MIB = 81559


# --------------------------------------------------------------------------
# Nodes
# --------------------------------------------------------------------------


#: A Node's `status.nodeInfo` as a kubelet reports it.
NODE_INFO = {
    "architecture": "amd64",
    "bootID": "",
    "containerRuntimeVersion": "containerd://1.7.0",
    "kernelVersion": "6.8.0",
    "kubeProxyVersion": "",
    "kubeletVersion": "v1.33.0",
    "machineID": "",
    "operatingSystem": "linux",
    "osImage": "Ubuntu 24.04 LTS",
    "systemUUID": "",
}


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
    ready: bool = True,
    unschedulable: bool = False,
    extra_resources: Optional[Mapping[str, str]] = None,
) -> dict[str, Any]:
    """A Node with `gpus` of the vendor's device-plugin resource (none with 0: a DRA-only or CPU node),
    labelled as GPU Feature Discovery (NVIDIA) or the ROCm labeller (AMD) would when `product` is given.

    `extra_resources`: more entries of capacity and allocatable (`{"nvidia.com/gpu": "0"}`: a device plugin that
    registered and counts none)."""
    if vendor not in VENDOR_KEYS:
        raise ValueError(f"unknown GPU vendor {vendor!r}; expected one of {sorted(VENDOR_KEYS)}")
    allocatable = {"cpu": cpu, "memory": memory, "pods": "110"}
    if gpus:
        allocatable[VENDOR_KEYS[vendor]] = str(gpus)
    allocatable.update(extra_resources or {})
    node_labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}
    if product and vendor == "nvidia":
        node_labels.update({"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": product, "nvidia.com/gpu.count": str(gpus)})
        if memory_mib:
            node_labels["nvidia.com/gpu.memory"] = str(memory_mib)
    elif product and vendor == "amd":
        vram = {"amd.com/gpu.vram": f"{round(memory_mib / 1024)}G"} if memory_mib else {}
        node_labels.update({"amd.com/gpu.product-name": product, **vram})
        node_labels.update({"beta.amd.com/gpu.product-name": product, **{f"beta.{k}": v for k, v in vram.items()}})
    node_labels.update(labels or {})
    spec: dict[str, Any] = {"unschedulable": True} if unschedulable else {}
    if taints:
        spec["taints"] = [dict(t) for t in taints]
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    ready_condition = {
        "type": "Ready",
        "status": "True" if ready else "False",
        "reason": "KubeletReady" if ready else "KubeletNotReady",
        "message": "kubelet is posting ready status" if ready else "container runtime is down",
        "lastHeartbeatTime": now,
        "lastTransitionTime": now,
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": node_labels},
        "spec": spec,
        "status": {
            "capacity": dict(allocatable),
            "allocatable": allocatable,
            "conditions": [ready_condition],
            "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}, {"type": "Hostname", "address": name}],
            "nodeInfo": dict(NODE_INFO),
        },
    }


def h100_node(name: str, gpus: int = 8, **kwargs: Any) -> dict[str, Any]:
    """A GPU node of H100s (80 GB), labelled as GPU Feature Discovery labels it (the arguments are `gpu_node`'s)."""
    kwargs.setdefault("product", H100)
    kwargs.setdefault("memory_mib", H100_MEMORY_MIB)
    return gpu_node(name, gpus, **kwargs)


# --------------------------------------------------------------------------
# Kueue queues
# --------------------------------------------------------------------------


def resource_flavor(name: str = "default-flavor", node_labels: Optional[Mapping[str, str]] = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"nodeLabels": dict(node_labels)} if node_labels else {}
    return {"apiVersion": KUEUE_API, "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": spec}


def cluster_queue(
    name: str = "cq",
    gpus: int = 8,
    vendor_key: str = "nvidia.com/gpu",
    cpu: str = "64",
    memory: str = "512Gi",
    flavor: str = "default-flavor",
    *,
    queueing_strategy: Optional[str] = None,
    preemption: Optional[Mapping[str, Any]] = None,
) -> dict[str, Any]:
    """A ClusterQueue with one resource group (cpu, memory and the GPU key) in one flavor.

    `gpus=0` leaves the GPU key out of the queue. `preemption`: the queue's `spec.preemption`
    (e.g. `{"withinClusterQueue": "LowerPriority"}`).
    """
    covered = ["cpu", "memory"]
    resources = [{"name": "cpu", "nominalQuota": cpu}, {"name": "memory", "nominalQuota": memory}]
    if gpus and vendor_key:
        covered.append(vendor_key)
        resources.append({"name": vendor_key, "nominalQuota": str(gpus)})
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "resourceGroups": [{"coveredResources": covered, "flavors": [{"name": flavor, "resources": resources}]}],
    }
    if queueing_strategy:
        spec["queueingStrategy"] = queueing_strategy
    if preemption:
        spec["preemption"] = dict(preemption)
    return {"apiVersion": KUEUE_API, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def local_queue(name: str = "lq", namespace: str = "default", cluster_queue: str = "cq") -> dict[str, Any]:
    return {"apiVersion": KUEUE_API, "kind": "LocalQueue", "metadata": {"name": name, "namespace": namespace},
            "spec": {"clusterQueue": cluster_queue}}  # fmt: skip


def workload_priority_class(name: str, value: int) -> dict[str, Any]:
    return {"apiVersion": KUEUE_API, "kind": "WorkloadPriorityClass", "metadata": {"name": name}, "value": value}


# --------------------------------------------------------------------------
# Ray objects shaped like raybridge's
# --------------------------------------------------------------------------


def _pod_template(cpu: str, memory: str, gpus: int, vendor_key: str, container: str) -> dict[str, Any]:
    amounts: dict[str, Any] = {"cpu": cpu, "memory": memory}
    if gpus:
        amounts[vendor_key] = str(gpus)
    return {"spec": {"containers": [{"name": container, "image": RAY_IMAGE,
                                     "resources": {"requests": dict(amounts), "limits": dict(amounts)}}]}}  # fmt: skip


def ray_cluster_spec(
    *, workers: int = 1, gpus_per_worker: int = 0, vendor_key: str = "nvidia.com/gpu", group: str = "workers"
) -> dict[str, Any]:
    """A RayCluster spec: a small head and one fixed-size worker group."""
    spec: dict[str, Any] = {
        "rayVersion": "2.55.1",
        "headGroupSpec": {
            "rayStartParams": {"dashboard-host": "0.0.0.0"},
            "template": _pod_template("1", "2Gi", 0, vendor_key, "ray-head"),
        },
        "workerGroupSpecs": [],
    }
    if workers:
        worker_params = {"num-gpus": str(gpus_per_worker)} if gpus_per_worker else {}
        spec["workerGroupSpecs"].append(
            {
                "groupName": group,
                "replicas": workers,
                "minReplicas": workers,
                "maxReplicas": workers,
                "rayStartParams": worker_params,
                "template": _pod_template("4", "16Gi", gpus_per_worker, vendor_key, "ray-worker"),
            }
        )
    return spec


def rayjob_manifest(
    name: str,
    *,
    namespace: str = "default",
    queue: Optional[str] = "lq",
    workers: int = 1,
    gpus_per_worker: int = 0,
    vendor_key: str = "nvidia.com/gpu",
    submission_mode: str = "InteractiveMode",
    entrypoint: str = "python -c 'print(42)'",
    **spec_overrides: Any,
) -> dict[str, Any]:
    """A RayJob as raybridge submits it (InteractiveMode, shutdownAfterJobFinishes, queue label)."""
    labels = {QUEUE_LABEL: queue} if queue else {}
    spec: dict[str, Any] = {
        "entrypoint": entrypoint,
        "submissionMode": submission_mode,
        "shutdownAfterJobFinishes": True,
        "rayClusterSpec": ray_cluster_spec(workers=workers, gpus_per_worker=gpus_per_worker, vendor_key=vendor_key),
    }
    spec.update(spec_overrides)
    return {"apiVersion": RAY_API, "kind": "RayJob", "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": spec}  # fmt: skip


def raycluster_manifest(
    name: str,
    *,
    namespace: str = "default",
    queue: Optional[str] = "lq",
    workers: int = 1,
    gpus_per_worker: int = 0,
    vendor_key: str = "nvidia.com/gpu",
) -> dict[str, Any]:
    labels = {QUEUE_LABEL: queue} if queue else {}
    return {"apiVersion": RAY_API, "kind": "RayCluster", "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": ray_cluster_spec(workers=workers, gpus_per_worker=gpus_per_worker, vendor_key=vendor_key)}  # fmt: skip


# --------------------------------------------------------------------------
# DRA
# --------------------------------------------------------------------------


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
