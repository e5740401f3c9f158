"""`adjuster run` on a GPU pool of two node types whose GPUs differ in memory, against the real KAI scheduler and the
real Karpenter (testcluster: KAI v0.12.0, Karpenter v1.14.1 with its kwok provider).

The case: one NodePool with an 80 GB GPU type and a cheaper 40 GB one, 8 pods of `gpu-memory` 60 GiB beside 8 of
20 GiB (two ReplicaSets). KAI fits a gpu-memory pod by the GPU memory of the node it looks at (kai-scheduler@v0.12.0
pkg/scheduler/api/node_info/node_info.go, MemoryOfEveryGpuOnNode from the node's `nvidia.com/gpu.memory` label), so a
60 GiB pod runs on the 80 GB type alone. Before: the adjuster asked for GPUs with no word on their memory, Karpenter
launched the cheaper 40 GB type, the adjuster then took the smallest GPU memory of the group's nodes for all of them,
called every 60 GiB pod too large for any GPU, and 8 of the 16 pods waited for good. The placeholders now require
the memory their pods need (`nvidia.com/gpu.memory Gt ...`), which Karpenter reads as a requirement on the instance
types' labels (kwok/cloudprovider/helpers.go newInstanceType makes every offering requirement key a well-known
label; scheduling/nodeclaim.go filterInstanceTypesByRequirements keeps the types with a compatible offering).

Played by the harness, because no container runs: the placeholder's `true` exiting (a kwok Stage) and KAI's
reservation pod naming its GPU (testcluster/kai.py).
"""

from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Any, Iterator

import pytest

from raybridge.adjuster.decision import consts
from raybridge.adjuster.controller import Controller
from raybridge.adjuster.decision.settings import AdjusterSettings, RunSettings
from testcluster.pytest_plugin import _unavailable
from tests.helpers import ControllerThread, kube_of

pytestmark = [
    pytest.mark.skipif(_unavailable() is not None, reason=str(_unavailable())),
    pytest.mark.realtime,
    pytest.mark.xdist_group("testcluster-adjuster-memory"),  # a stack of its own: its own instance types
    pytest.mark.timeout(900),
]

QUEUE = "default-queue"
GIB = 1024
SYSTEM = {"cpu": "16", "memory": "64Gi", "pods": "110"}
#: Seconds within which all 16 pods must run (the first launch round, then at most two more).
BOUND = 300
BIG_GPU = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB", "nvidia.com/gpu.memory": "81920"}
SMALL_GPU = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB", "nvidia.com/gpu.memory": "40960"}


def _instance_types() -> list[dict[str, Any]]:
    from testcluster.karpenter import gpu_instance_type, instance_type

    return [
        instance_type("cpu-16x", "16", "64Gi", 0.8),
        gpu_instance_type("a100-80gb-4x", 4, "48", "384Gi", 32.0, BIG_GPU),
        gpu_instance_type("a100-40gb-4x", 4, "48", "384Gi", 16.0, SMALL_GPU),  # cheaper: Karpenter's pick where both fit
    ]


@pytest.fixture(scope="module")
def stack() -> Iterator[Any]:
    from testcluster.stack import Stack, StackOptions, completing_stage

    placeholders_exit = completing_stage("placeholder-exits", {consts.MANAGED_BY_LABEL: consts.MANAGED_BY_VALUE,
                                                               consts.COMPONENT_LABEL: consts.PLACEHOLDER_COMPONENT})
    system = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "system-0", "labels": {"kubernetes.io/hostname": "system-0"}},
              "status": {"capacity": SYSTEM, "allocatable": SYSTEM}}
    options = StackOptions(operators=("kai", "karpenter"), nodes=[system], stages=[placeholders_exit], karpenter_instance_types=_instance_types())
    with Stack(options) as running:
        running.apply([
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": consts.DEFAULT_NAMESPACE}},
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "work"}},
            {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": consts.DEFAULT_PRIORITY_CLASS},
             "value": -1, "preemptionPolicy": "Never"},
        ])  # fmt: skip
        yield running


def _replica_set(kind: str, mib: int) -> dict[str, Any]:
    """8 replicas of a pod of `mib` MiB of GPU memory: a controller, as every workload has, recreates a pod that KAI's
    consolidation evicts to pack its nodes (a bare pod would be gone)."""
    labels = {"app": kind, "kai.scheduler/queue": QUEUE}
    template = {
        "metadata": {"labels": labels, "annotations": {"gpu-memory": str(mib)}},
        "spec": {"schedulerName": "kai-scheduler", "terminationGracePeriodSeconds": 0,
                 "containers": [{"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]},
    }  # fmt: skip
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": kind, "namespace": "work"},
            "spec": {"replicas": 8, "selector": {"matchLabels": {"app": kind}}, "template": template}}


def _state(core: Any, custom: Any) -> tuple[int, list[str], list[str]]:
    """(pods running, NodeClaims as name:type, pods not running with KAI's reason)."""
    pods = [p for p in core.list_namespaced_pod("work").items if not p.metadata.deletion_timestamp]
    running = sum(1 for p in pods if p.status.phase == "Running" and p.spec.node_name)
    claims = sorted(f"{c['metadata']['name']}:{(c['metadata'].get('labels') or {}).get('node.kubernetes.io/instance-type', '?')}"
                    for c in custom.list_cluster_custom_object("karpenter.sh", "v1", "nodeclaims")["items"])
    waiting = []
    for p in pods:
        if p.status.phase != "Running":
            scheduled = next((c for c in p.status.conditions or () if c.type == "PodScheduled"), None)
            waiting.append(f"{p.metadata.name} ({(scheduled.message or scheduled.reason or '')[:140] if scheduled else 'no PodScheduled'})")
    return running, claims, waiting


def test_a_burst_of_two_memory_sizes_gets_nodes_whose_gpus_hold_every_pod(stack: Any) -> None:
    from kubernetes import client

    with stack.api_client() as api_client:
        core, custom = client.CoreV1Api(api_client), client.CustomObjectsApi(api_client)
        settings = RunSettings(planner=AdjusterSettings(grace_period_seconds=0.5, node_gpus=4), provision_timeout=120.0,
                               resync=0.5, debounce=0.1, request_timeout=5.0, leader_election=False, metrics_port=0)
        controller = Controller(settings, kube_of(api_client, settings.request_timeout), clock=lambda: datetime.now(timezone.utc))
        apps = client.AppsV1Api(api_client)
        with ControllerThread(controller):
            started = time.monotonic()
            apps.create_namespaced_replica_set("work", _replica_set("big", 60 * GIB))
            apps.create_namespaced_replica_set("work", _replica_set("small", 20 * GIB))
            running, claims, waiting = _state(core, custom)
            while running < 16 and time.monotonic() - started < BOUND:
                time.sleep(2)
                running, claims, waiting = _state(core, custom)
            seconds = time.monotonic() - started
        print(f"\n{running}/16 pods running after {seconds:.0f} s; NodeClaims: {', '.join(claims)}")
        assert running == 16, (f"{running}/16 pods running after {BOUND} s; NodeClaims: {claims}; waiting: {waiting}\n"
                               + (stack.workdir / "logs" / "karpenter.log").read_text(errors="replace")[-3000:])
