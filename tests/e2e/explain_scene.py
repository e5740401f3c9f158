"""The objects of `explain`'s scene on the session's real cluster: a Kueue cohort, a holder and a pending RayJob.

Why a module of its own: test_explain.py (whose docstring tells the scene) and test_svg_pictures.py both explain
it, through the `explain_scene` fixture of tests/e2e/conftest.py, which puts it on the cluster; the tests read
the names and helpers here. What it does not do: start or stop anything (the fixture does).
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any

from tests.waits import wait_for

KUEUE = "kueue.x-k8s.io/v1beta2"
GPU = "nvidia.com/gpu"
H100 = "NVIDIA-H100-80GB-HBM3"
A100 = "NVIDIA-A100-SXM4-40GB"
LQ = "team-a"


@dataclass(frozen=True)
class Scene:
    """The admin's client and kubeconfig, and this module's names (unique on the shared cluster)."""

    client: Any
    kubeconfig: str
    ns: str
    cq_a: str
    cq_b: str
    cohort: str
    a100: str
    h100: str
    check: str

    @classmethod
    def named(cls, client: Any, kubeconfig: str) -> "Scene":
        suffix = uuid.uuid4().hex[:6]
        names = [f"{prefix}-{suffix}" for prefix in ("ml", "team-a", "team-b", "gpu", "a100", "h100", "dws-prov")]
        return cls(client, kubeconfig, *names)


def gpu_flavor(name: str, gpu: str, gpu_limits: dict[str, str]) -> dict[str, Any]:
    return {"name": name, "resources": [{"name": "cpu", "nominalQuota": "64"}, {"name": "memory", "nominalQuota": "512Gi"},
                                        {"name": GPU, "nominalQuota": gpu, **gpu_limits}]}  # fmt: skip


def cluster_queue(scene: Scene, name: str, flavors: list[dict[str, Any]], checks: tuple[str, ...] = ()) -> dict[str, Any]:
    spec: dict[str, Any] = {"cohortName": scene.cohort, "namespaceSelector": {},
                            "resourceGroups": [{"coveredResources": ["cpu", "memory", GPU], "flavors": flavors}]}  # fmt: skip
    if checks:
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": check} for check in checks]}
    return {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def kueue_objects(scene: Scene) -> list[dict[str, Any]]:
    return [
        {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": scene.a100}, "spec": {"nodeLabels": {"nvidia.com/gpu.product": A100}}},
        {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": scene.h100}, "spec": {"nodeLabels": {"nvidia.com/gpu.product": H100}}},
        {"apiVersion": KUEUE, "kind": "ProvisioningRequestConfig", "metadata": {"name": scene.check},
         "spec": {"provisioningClassName": "queued-provisioning.gke.io", "managedResources": [GPU]}},
        {"apiVersion": KUEUE, "kind": "AdmissionCheck", "metadata": {"name": scene.check},
         "spec": {"controllerName": "kueue.x-k8s.io/provisioning-request",
                  "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig", "name": scene.check}}},
        cluster_queue(scene, scene.cq_a, [gpu_flavor(scene.a100, "4", {"borrowingLimit": "0"}), gpu_flavor(scene.h100, "8", {"borrowingLimit": "4"})],
                      (scene.check,)),
        cluster_queue(scene, scene.cq_b, [gpu_flavor(scene.a100, "4", {}), gpu_flavor(scene.h100, "8", {"lendingLimit": "2"})]),
        {"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": LQ, "namespace": scene.ns}, "spec": {"clusterQueue": scene.cq_a}},
    ]  # fmt: skip


def holder(scene: Scene) -> dict[str, Any]:
    """A Workload of one pod with 6 GPUs: Kueue reserves it h100 quota (a100 may not borrow), 6 of the 8."""
    requests = {"cpu": "1", "memory": "1Gi", GPU: "6"}
    template = {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox", "resources": {"requests": requests}}]}}
    return {"apiVersion": KUEUE, "kind": "Workload", "metadata": {"name": "holder", "namespace": scene.ns},
            "spec": {"queueName": LQ, "podSets": [{"name": "main", "count": 1, "template": template}]}}  # fmt: skip


def mark_active(client: Any, check: str) -> None:
    """What the admission check's controller would write: Active=True (read again on a conflict: Kueue adds its finalizer)."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    active = {"conditions": [{"type": "Active", "status": "True", "reason": "Active", "message": "", "lastTransitionTime": now}]}

    def written() -> bool:
        try:
            client.update_status({**client.get_object(KUEUE, "AdmissionCheck", check), "status": active})
        except Exception as exc:  # noqa: BLE001 - only a conflict is read again
            if getattr(exc, "status", None) != 409:
                raise
            return False
        return True

    wait_for(written, timeout=30, what=f"AdmissionCheck {check} marked Active")


def condition(obj: dict[str, Any] | None, kind: str) -> dict[str, Any] | None:
    return next((c for c in ((obj or {}).get("status") or {}).get("conditions") or [] if c["type"] == kind), None)


def reserved_gpus(client: Any, scene: Scene) -> str | None:
    """What the ClusterQueue's status says is reserved of flavor h100's GPUs."""
    status = client.get_object(KUEUE, "ClusterQueue", scene.cq_a).get("status") or {}
    for flavor in status.get("flavorsReservation") or []:
        if flavor["name"] == scene.h100:
            return next((r["total"] for r in flavor["resources"] if r["name"] == GPU), None)
    return None


def workload_of(client: Any, namespace: str, owner: str) -> dict[str, Any] | None:
    return next((w for w in client.list_objects(KUEUE, "Workload", namespace) if any(o["name"] == owner for o in w["metadata"].get("ownerReferences") or [])), None)
