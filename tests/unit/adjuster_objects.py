"""Pod and Node JSON builders for the node-scale-adjuster tests, shaped as `kubectl get -o json` prints them."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any, Optional

NOW = datetime(2025, 6, 1, 12, 0, 0, tzinfo=timezone.utc)


def ago(seconds: float) -> str:
    return (NOW - timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def pod(
    name: str,
    fraction: Optional[str] = None,
    *,
    memory: Optional[str] = None,
    devices: Optional[str] = None,
    namespace: str = "team",
    waited: Optional[float] = 60,
    message: Optional[str] = None,
    reason: str = "Unschedulable",
    status: str = "False",
    scheduler: Optional[str] = "kai-scheduler",
    phase: str = "Pending",
    node_name: Optional[str] = None,
    annotations: Optional[dict[str, Any]] = None,
    conditions: Optional[list[Any]] = None,
    **spec: Any,
) -> dict[str, Any]:
    """A pending pod; `waited` seconds since PodScheduled turned False/Unschedulable (None: no timestamp)."""
    ann: dict[str, Any] = dict(annotations or {})
    if fraction is not None:
        ann["gpu-fraction"] = fraction
    if memory is not None:
        ann["gpu-memory"] = memory
    if devices is not None:
        ann["gpu-fraction-num-devices"] = devices
    cond: dict[str, Any] = {"type": "PodScheduled", "status": status, "reason": reason}
    if waited is not None:
        cond["lastTransitionTime"] = ago(waited)
    if message is not None:
        cond["message"] = message
    body: dict[str, Any] = {"containers": [{"name": "main", "image": "ubuntu"}], **spec}
    if scheduler is not None:
        body["schedulerName"] = scheduler
    if node_name:
        body["nodeName"] = node_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "annotations": ann},
        "spec": body,
        "status": {"phase": phase, "conditions": [cond] if conditions is None else conditions},
    }


def node(name: str, gpus: int = 8, vendor: str = "nvidia", memory: Optional[str] = "81559", labels: Optional[dict[str, str]] = None, taints: Optional[list[dict[str, str]]] = None) -> dict[str, Any]:
    key = {"nvidia": "nvidia.com/gpu", "amd": "amd.com/gpu"}[vendor]
    memory_label = {"nvidia": "nvidia.com/gpu.memory", "amd": "amd.com/gpu.vram"}[vendor]
    all_labels = dict(labels or {})
    if memory is not None:
        all_labels[memory_label] = memory
    spec: dict[str, Any] = {}
    if taints:
        spec["taints"] = taints
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": all_labels},
        "spec": spec,
        "status": {
            "allocatable": {key: str(gpus), "cpu": "96", "memory": "1Ti"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }
