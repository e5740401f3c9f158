"""The real KAI scheduler (operator "kai") schedules and binds GPU pods onto kwok GPU nodes, a half GPU included.

Why: a stack with "kai" is what judges fractional-GPU workloads, so what it promises is checked here: in a queue
hierarchy of the test's own, a pod with `gpu-fraction: "0.5"` and a whole-GPU pod are bound by KAI (a BindRequest
each, a node, Running through kwok), the half GPU through a GPU reservation pod of KAI's binder on the same node
(the one step kwok plays: testcluster/kai.py `reservation_gpu_stage`), and a pod larger than any node stays pending
with KAI's Unschedulable condition.

What it does not do: test KAI's fair share or preemption, or raybridge (tests/e2e does).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from testcluster.pytest_plugin import _unavailable

pytestmark = [
    pytest.mark.skipif(_unavailable() is not None, reason=str(_unavailable())),
    pytest.mark.realtime,
    pytest.mark.xdist_group("testcluster-kai"),  # one stack for the module's tests
    pytest.mark.timeout(600),
]

NAMESPACE = "team-a"
LEAF = "team-a-queue"
PARENT = "research"
#: Eight 80 GB GPUs: the labels NVIDIA's GPU feature discovery writes, which KAI reads for a GPU's memory and the
#: GPU count (pkg/scheduler/api/node_info/node_info.go at v0.12.0: `nvidia.com/gpu.memory` in MiB, `nvidia.com/gpu.count`).
GPU_LABELS = {"nvidia.com/gpu.count": "8", "nvidia.com/gpu.memory": "81559", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.present": "true"}


def _gpu_node(name: str) -> dict:
    resources = {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": "8"}
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **GPU_LABELS}},
        "status": {"capacity": resources, "allocatable": resources},
    }  # fmt: skip


def _queue(name: str, parent: str | None = None) -> dict:
    unlimited = {"quota": -1, "limit": -1, "overQuotaWeight": 1}
    spec: dict[str, Any] = {"resources": {"cpu": unlimited, "memory": unlimited, "gpu": {"quota": 16, "limit": -1, "overQuotaWeight": 1}}}
    if parent:
        spec["parentQueue"] = parent
    return {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def _pod(name: str, gpus: int = 0, annotations: dict | None = None) -> dict:
    resources: dict[str, dict] = {"requests": {"cpu": "100m", "memory": "128Mi"}}
    if gpus:
        resources["limits"] = {"nvidia.com/gpu": str(gpus)}
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"kai.scheduler/queue": LEAF}, "annotations": annotations or {}},
        "spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "main", "image": "busybox", "resources": resources}]},
    }  # fmt: skip


@pytest.fixture(scope="module")
def stack() -> Iterator[Any]:
    from testcluster.stack import Stack, StackOptions

    started = time.monotonic()
    with Stack(StackOptions(operators=("kai",), nodes=[_gpu_node("gpu-0"), _gpu_node("gpu-1")])) as running:
        print(f"stack with KAI started in {time.monotonic() - started:.1f} s")
        running.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}, _queue(PARENT), _queue(LEAF, PARENT)])
        yield running


@pytest.fixture(scope="module")
def core(stack: Any) -> Iterator[Any]:
    from kubernetes import client

    api = stack.api_client()
    try:
        yield client.CoreV1Api(api), client.CustomObjectsApi(api)
    finally:
        api.close()


def _logs(stack: Any) -> str:
    tails = []
    for path in sorted(Path(stack.workdir, "logs").glob("kai-*.log")):
        tails.append(f"--- {path.name}\n" + "\n".join(path.read_text(errors="replace").splitlines()[-15:]))
    return "\n".join(tails)


def _wait(stack: Any, check: Callable[[], Any], timeout: float, what: str) -> Any:
    """`check()`'s first true value within `timeout` seconds, else a failure with the end of KAI's logs."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"{what} within {timeout:.0f} s\n{_logs(stack)}")
        time.sleep(0.5)


def _read(core: Any, name: str, namespace: str = NAMESPACE) -> dict:
    return json.loads(core[0].read_namespaced_pod(name, namespace, _preload_content=False).data)


def _running_on_a_node(core: Any, name: str) -> Callable[[], dict | None]:
    def check() -> dict | None:
        pod = _read(core, name)
        return pod if pod["spec"].get("nodeName") and pod["status"].get("phase") == "Running" else None

    return check


def test_a_half_gpu_pod_and_a_whole_gpu_pod_are_bound_by_kai_the_half_through_a_reservation_pod(stack: Any, core: Any) -> None:
    pods, custom = core
    pods.create_namespaced_pod(NAMESPACE, _pod("half", annotations={"gpu-fraction": "0.5"}), _preload_content=False)
    pods.create_namespaced_pod(NAMESPACE, _pod("whole", gpus=1), _preload_content=False)

    half = _wait(stack, _running_on_a_node(core, "half"), 120, "the half-GPU pod was not bound and Running")
    whole = _wait(stack, _running_on_a_node(core, "whole"), 120, "the whole-GPU pod was not bound and Running")
    assert {half["spec"]["nodeName"], whole["spec"]["nodeName"]} <= {"gpu-0", "gpu-1"}

    # KAI bound them: its scheduler wrote a BindRequest for each, which its binder carried out.
    requests = custom.list_namespaced_custom_object("scheduling.run.ai", "v1alpha2", NAMESPACE, "bindrequests")["items"]
    bound = {r["spec"]["podName"]: r for r in requests}
    assert {"half", "whole"} <= set(bound), requests
    assert bound["half"]["spec"]["selectedNode"] == half["spec"]["nodeName"]
    assert bound["half"]["spec"]["receivedResourceType"] == "Fraction", bound["half"]
    # The half GPU: a GPU group on the pod, and the binder's reservation pod for that group on the same node,
    # holding one whole nvidia.com/gpu and carrying the GPU's id (written by the kwok Stage playing NVML).
    group = half["metadata"]["labels"].get("runai-gpu-group")
    assert group, half["metadata"]
    reservations = json.loads(pods.list_namespaced_pod("kai-resource-reservation", label_selector=f"runai-gpu-group={group}", _preload_content=False).data)["items"]
    assert len(reservations) == 1, reservations
    reservation = reservations[0]
    assert reservation["metadata"]["name"].startswith(f"gpu-reservation-{half['spec']['nodeName']}-")
    assert reservation["spec"]["nodeName"] == half["spec"]["nodeName"]
    assert reservation["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert reservation["metadata"]["annotations"]["run.ai/reserve_for_gpu_index"].startswith("GPU-")
    # KAI's admission webhook gave the GPU pods the GPU runtime class and the shared pod its config maps.
    assert half["spec"].get("runtimeClassName") == whole["spec"].get("runtimeClassName") == "nvidia"
    assert half["metadata"]["annotations"].get("runai/shared-gpu-configmap"), half["metadata"]["annotations"]


def test_a_pod_larger_than_any_node_stays_pending_with_kais_reason(stack: Any, core: Any) -> None:
    pods, _ = core
    pods.create_namespaced_pod(NAMESPACE, _pod("too-large", gpus=16), _preload_content=False)

    def unschedulable() -> dict | None:
        conditions = _read(core, "too-large")["status"].get("conditions") or []
        return next((c for c in conditions if c["type"] == "PodScheduled" and c["status"] == "False"), None)

    condition = _wait(stack, unschedulable, 120, "the 16-GPU pod was not marked unschedulable")
    assert condition["reason"] == "Unschedulable"
    assert "gpu" in condition.get("message", "").lower(), condition
    time.sleep(3)  # a few of KAI's scheduling cycles (1 s each): still not bound
    pod = _read(core, "too-large")
    assert not pod["spec"].get("nodeName") and pod["status"]["phase"] == "Pending"


def test_a_burst_of_half_gpu_pods_keeps_every_pod_and_one_reservation_pod_per_shared_gpu(stack: Any, core: Any) -> None:
    # Many binds onto one node at once: KAI v0.12.0's binder deleted a reservation pod whose group label its cache did
    # not show yet on the pod just bound there, then deleted that running pod as unreserved (kai-scheduler issue
    # 1103). The build carries the upstream fix (testcluster/programs.py KAI_BINDER_EDITS).
    pods, _ = core
    names = [f"burst-{i}" for i in range(24)]
    for name in names:
        pods.create_namespaced_pod(NAMESPACE, _pod(name, annotations={"gpu-fraction": "0.5"}), _preload_content=False)

    def burst() -> list[dict]:
        found = json.loads(pods.list_namespaced_pod(NAMESPACE, _preload_content=False).data)["items"]
        return [p for p in found if p["metadata"]["name"] in names]

    _wait(stack, lambda: sum(1 for p in burst() if p["status"].get("phase") == "Running") == len(names), 180, "the 24 half-GPU pods running")
    time.sleep(3)  # the binder's clean-ups after the last binds
    running = burst()
    assert sorted(p["metadata"]["name"] for p in running if p["status"].get("phase") == "Running") == sorted(names)
    groups = {p["metadata"]["labels"]["runai-gpu-group"] for p in running}
    reserved = json.loads(pods.list_namespaced_pod("kai-resource-reservation", _preload_content=False).data)["items"]
    reserved_groups = [r["metadata"]["labels"]["runai-gpu-group"] for r in reserved if r["metadata"]["labels"]["runai-gpu-group"] in groups]
    assert sorted(reserved_groups) == sorted(groups), (sorted(reserved_groups), sorted(groups))
