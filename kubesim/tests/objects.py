"""Objects kubesim's own tests hand to Kueue's pure pod sets and flavor assignment: a RayJob shaped like raybridge's.

Why here and not in tests/builders.py: kubesim imports nothing of raybridge or its test suite
(test_independence.py), its own tests included; raybridge's tests build their objects with tests/builders.py.
What it deliberately does not do: no pytest fixtures, no cluster (test_controllers.py's tests are pure).
"""

from __future__ import annotations

from typing import Any, Optional


RAY_API = "ray.io/v1"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
RAY_IMAGE = "rayproject/ray:2.55.1"


def _pod_template(cpu: str, memory: str, gpus: int, vendor_key: str, container: str) -> dict:
    amounts: dict[str, Any] = {"cpu": cpu, "memory": memory}
    if gpus:
        amounts[vendor_key] = str(gpus)
    return {
        "spec": {
            "containers": [
                {
                    "name": container,
                    "image": RAY_IMAGE,
                    "resources": {"requests": dict(amounts), "limits": dict(amounts)},
                }
            ]
        }
    }


def ray_cluster_spec(
    *, workers: int = 1, gpus_per_worker: int = 0, vendor_key: str = "nvidia.com/gpu", group: str = "workers"
) -> dict:
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
) -> dict:
    """A RayJob as raybridge submits it (InteractiveMode, shutdownAfterJobFinishes, queue label)."""
    labels = {QUEUE_LABEL: queue} if queue else {}
    spec: dict[str, Any] = {
        "entrypoint": entrypoint,
        "submissionMode": submission_mode,
        "shutdownAfterJobFinishes": True,
        "rayClusterSpec": ray_cluster_spec(workers=workers, gpus_per_worker=gpus_per_worker, vendor_key=vendor_key),
    }
    spec.update(spec_overrides)
    return {
        "apiVersion": RAY_API,
        "kind": "RayJob",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": spec,
    }


