"""Names, keys and defaults shared by every layer.

Kept in one place so that the pure core, the adapters and the tests agree on
the spelling of a label or a resource key. Nothing here does anything.
"""

from __future__ import annotations

#: Vendors raybridge knows, mapped to their Kubernetes extended-resource key.
GPU_RESOURCE_KEYS: dict[str, str] = {
    "amd": "amd.com/gpu",
    "nvidia": "nvidia.com/gpu",
}
VENDORS: tuple[str, ...] = tuple(GPU_RESOURCE_KEYS)

#: The seed's default vendor on a cluster that has both.
DEFAULT_VENDOR_ON_MIXED_CLUSTER = "amd"

#: Node labels read for the GPU model and memory, in order of preference.
GPU_PRODUCT_LABELS: dict[str, tuple[str, ...]] = {
    "nvidia": (
        "nvidia.com/gpu.product",
        "cloud.google.com/gke-accelerator",
        "karpenter.k8s.aws/instance-gpu-name",
        "gpu.nvidia.com/class",
    ),
    "amd": (
        "amd.com/gpu.product-name",
        "beta.amd.com/gpu.product-name",
        "amd.com/gpu.device-id",
        "beta.amd.com/gpu.device-id",
    ),
}
#: The label NVIDIA's GPU feature discovery writes a GPU's memory in, in MiB (KAI reads it too: kai/names.py).
NVIDIA_GPU_MEMORY_LABEL = "nvidia.com/gpu.memory"
#: Labels holding GPU memory; GFD uses MiB, the ROCm labeller e.g. "192G".
GPU_MEMORY_LABELS: dict[str, tuple[str, ...]] = {
    "nvidia": (NVIDIA_GPU_MEMORY_LABEL, "karpenter.k8s.aws/instance-gpu-memory"),
    "amd": ("amd.com/gpu.vram", "beta.amd.com/gpu.vram"),
}

# --- Kueue / KAI / raybridge labels -------------------------------------------
#: A pod's GPU vendor for the node-scale-adjuster when its nodes do not say ("amd" or "nvidia").
GPU_VENDOR_ANNOTATION = "raybridge.io/gpu-vendor"

# --- Node-scale-adjuster -----------------------------------------------------------
ADJUSTER_DEFAULT_GRACE_SECONDS = 0
ADJUSTER_DEFAULT_VENDOR = "nvidia"

#: Every object raybridge creates carries this label, so `list` can find them.
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY_VALUE = "raybridge"
#: The name of the raybridge job an object belongs to.
JOB_NAME_LABEL = "raybridge.io/job-name"

# --- Kueue ---------------------------------------------------------------------

# --- KubeRay --------------------------------------------------------------------
K8S_NAME_MAX = 63
WORKER_GROUP_NAME = "workers"

# --- Defaults -------------------------------------------------------------------
DEFAULT_CPUS_PER_GPU = 4
DEFAULT_MEMORY_PER_GPU = "16Gi"
#: Worker resources when a worker holds no whole GPU.
DEFAULT_WORKER_CPU = "2"
DEFAULT_WORKER_MEMORY = "4Gi"
DEFAULT_HEAD_CPU = "2"
DEFAULT_HEAD_MEMORY = "8Gi"
DEFAULT_NAMESPACE = "default"

# --- Environment variables -----------------------------------------------------
#: Set on every Ray container and in every submission's runtime env to what was
#: allocated; a spec's `env` may not set them.
ENV_NUM_GPUS = "NUM_GPUS"
ENV_NUM_REPLICAS = "NUM_REPLICAS"
ENV_NUM_GPUS_PER_REPLICA = "NUM_GPUS_PER_REPLICA"
ALLOCATION_ENV: tuple[str, ...] = (ENV_NUM_GPUS, ENV_NUM_REPLICAS, ENV_NUM_GPUS_PER_REPLICA)


# --- Manifests ---------------------------------------------------------------------
#: How soon after raybridge stops renewing it (it died, or lost the cluster) a RayJob it
#: created fails and frees its cluster and Kueue quota (`jobs/decision/orphan_guard.py`).
ORPHAN_BOUND_SECONDS = 1800

# --- KAI queues ----------------------------------------------------------------------
