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
#: The node label KAI reads a GPU's memory from, in MiB (kai-scheduler@v0.12.0 pkg/scheduler/api/node_info/node_info.go
#: GpuMemoryLabel).
KAI_GPU_MEMORY_LABEL = "nvidia.com/gpu.memory"
#: Labels holding GPU memory; GFD uses MiB, the ROCm labeller e.g. "192G".
GPU_MEMORY_LABELS: dict[str, tuple[str, ...]] = {
    "nvidia": ("nvidia.com/gpu.memory", "karpenter.k8s.aws/instance-gpu-memory"),
    "amd": ("amd.com/gpu.vram", "beta.amd.com/gpu.vram"),
}

# --- Kueue / KAI / raybridge labels -------------------------------------------
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
KUEUE_PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
KUEUE_JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
#: Kueue evicts a Workload whose job carries it after that many seconds of admitted time.
KUEUE_MAX_EXEC_TIME_LABEL = "kueue.x-k8s.io/max-exec-time-seconds"
KAI_QUEUE_LABEL = "kai.scheduler/queue"
KAI_SCHEDULER_NAME = "kai-scheduler"
KAI_GPU_FRACTION_ANNOTATION = "gpu-fraction"
#: KAI GPU sharing by memory (MiB per device) and on several devices (pkg/common/constants/constants.go).
KAI_GPU_MEMORY_ANNOTATION = "gpu-memory"
KAI_GPU_DEVICES_ANNOTATION = "gpu-fraction-num-devices"
#: The annotation that names a pod's KAI PodGroup.
KAI_POD_GROUP_ANNOTATION = "pod-group-name"
#: A pod's GPU vendor for the node-scale-adjuster when its nodes do not say ("amd" or "nvidia").
GPU_VENDOR_ANNOTATION = "raybridge.io/gpu-vendor"

# --- Node-scale-adjuster -----------------------------------------------------------
ADJUSTER_DEFAULT_GRACE_SECONDS = 0
#: KAI's --gpu-memory-to-fraction-ratio default (pkg/nodescaleadjuster/consts/consts.go).
ADJUSTER_DEFAULT_MEMORY_FRACTION = "0.1"
ADJUSTER_DEFAULT_VENDOR = "nvidia"
#: KAI's scaling-pod namespace, labels and cooldown (pkg/nodescaleadjuster/consts/consts.go,
#: pkg/common/constants/constants.go).
KAI_SCALE_ADJUST_NAMESPACE = "kai-scale-adjust"
KAI_SCALING_POD_NAME_LABEL = "shared-gpu-pod-name"
KAI_SCALING_POD_NAMESPACE_LABEL = "shared-gpu-pod-namespace"
KAI_COOLDOWN_SECONDS = 60

#: Every object raybridge creates carries this label, so `list` can find them.
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY_VALUE = "raybridge"
#: The name of the raybridge job an object belongs to.
JOB_NAME_LABEL = "raybridge.io/job-name"

# --- Kueue ---------------------------------------------------------------------
KUEUE_GROUP = "kueue.x-k8s.io"

# --- KubeRay --------------------------------------------------------------------
RAY_API_GROUP = "ray.io"
RAY_API_VERSION = "v1"
#: The longest RayJob name every supported KubeRay can run. KubeRay v1.3 names the job's cluster
#: `<job>-raycluster-<5>` (kuberay@v1.3.2 ray-operator/controllers/ray/utils/util.go GenerateRayClusterName,
#: `<job>-<5>` from v1.4.0), and that name is the `ray.io/cluster` label of its pods and head Service: at most
#: 63 characters, so 46 for the job. v1.4 and later refuse names over 47 (MaxRayJobNameLength).
RAYJOB_NAME_MAX = 46
RAYCLUSTER_NAME_MAX = 53
K8S_NAME_MAX = 63
DASHBOARD_PORT = 8265
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
#: KubeRay's default head ports (utils/constant.go), by port name.
GCS_PORT = 6379
CLIENT_PORT = 10001
#: The KAI queue used for GPU sharing when the spec names no queue.
KAI_DEFAULT_QUEUE = "default-queue"

# --- KAI queues ----------------------------------------------------------------------
KAI_QUEUE_API_VERSION = "scheduling.run.ai/v2"
KAI_QUEUE_GROUP = "scheduling.run.ai"
KAI_QUEUE_VERSION = "v2"
#: KAI's PodGroup API (pkg/apis/scheduling/v2alpha2).
KAI_POD_GROUP_GROUP = "scheduling.run.ai"
KAI_POD_GROUP_VERSION = "v2alpha2"
KAI_POD_GROUP_PLURAL = "podgroups"
#: Pods of other schedulers with this `app` label do not reduce KAI's capacity
#: (`IsKaiUtilityPod`: resource-reservation and scaling pods).
KAI_UTILITY_APP_LABEL = "app"
KAI_UTILITY_APP_VALUES = ("kai-resource-reservation", "scaling-pod")
