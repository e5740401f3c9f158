"""KAI-Scheduler's names: its APIs, the pod annotations and labels it reads, its node-scale-adjuster's defaults.

Why it exists: the fair share, `explain`, the launcher's GPU sharing and the node-scale-adjuster all spell
KAI's names; they read them here, each written once, with where in KAI's source it comes from
(kai-scheduler@v0.12.0 pkg/common/constants/constants.go, pkg/nodescaleadjuster/consts/consts.go). What it
does not do: hold a rule (`share.py`, `queue.py`, `fairshare.py` do).
"""

from __future__ import annotations

from raybridge.core.consts import NVIDIA_GPU_MEMORY_LABEL

#: The node label KAI reads a GPU's memory from, in MiB (kai-scheduler@v0.12.0 pkg/scheduler/api/node_info/node_info.go
#: GpuMemoryLabel).
KAI_GPU_MEMORY_LABEL = NVIDIA_GPU_MEMORY_LABEL
KAI_QUEUE_LABEL = "kai.scheduler/queue"
KAI_SCHEDULER_NAME = "kai-scheduler"
KAI_GPU_FRACTION_ANNOTATION = "gpu-fraction"
#: KAI GPU sharing by memory (MiB per device) and on several devices (pkg/common/constants/constants.go).
KAI_GPU_MEMORY_ANNOTATION = "gpu-memory"
KAI_GPU_DEVICES_ANNOTATION = "gpu-fraction-num-devices"
#: The annotation that names a pod's KAI PodGroup.
KAI_POD_GROUP_ANNOTATION = "pod-group-name"
#: KAI's --gpu-memory-to-fraction-ratio default (pkg/nodescaleadjuster/consts/consts.go).
ADJUSTER_DEFAULT_MEMORY_FRACTION = "0.1"
#: KAI's scaling-pod namespace, labels and cooldown (pkg/nodescaleadjuster/consts/consts.go,
#: pkg/common/constants/constants.go).
KAI_SCALE_ADJUST_NAMESPACE = "kai-scale-adjust"
KAI_SCALING_POD_NAME_LABEL = "shared-gpu-pod-name"
KAI_SCALING_POD_NAMESPACE_LABEL = "shared-gpu-pod-namespace"
KAI_COOLDOWN_SECONDS = 60
#: The KAI queue used for GPU sharing when the spec names no queue.
KAI_DEFAULT_QUEUE = "default-queue"
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
#: The `app` of KAI's GPU-reservation pods (pkg/binder/binding/resourcereservation/resource_reservation.go).
KAI_RESERVATION_APP = "kai-resource-reservation"
KAI_UTILITY_APP_VALUES = (KAI_RESERVATION_APP, "scaling-pod")
#: The label that names the GPU group a shared pod and its reservation pod sit on (updatePodGPUGroup; with
#: several GPUs one label `runai-gpu-group/<group>` each: pkg/common/resources/gpu_sharing.go).
KAI_GPU_GROUP_LABEL = "runai-gpu-group"
