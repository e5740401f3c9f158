"""What the adjuster's tests on the real KAI scheduler and the real Karpenter do to their cluster and read back.

Why this module exists: tests/e2e/test_adjuster_real.py and test_adjuster_karpenter_real.py run `adjuster run`'s
controller on the same stack (testcluster: the real kube-apiserver, kube-scheduler and kwok, KAI v0.12.0, Karpenter
v1.14.1 with its kwok provider): the stack, a burst of KAI GPU-sharing pods in KAI's default queue, the controller
with the admin's client, and the pods, placeholders, nodes and NodeClaims they count. A failed wait says what the
cluster shows and the end of Karpenter's and KAI's logs.

What it deliberately does not do: assert anything, or time anything; the simulated controllers' world is
tests/adjuster_world.py.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator, Optional, TypeVar

import pytest

from raybridge.adjuster.controller import Controller
from raybridge.adjuster.decision import consts
from raybridge.adjuster.decision.settings import AdjusterSettings, RunSettings
from tests.helpers import ROOT, ControllerThread, kube_of
from tests.waits import wait_for

T = TypeVar("T")

#: The namespace of the tests' pods.
WORK = "work"
#: The queue KAI's chart creates (testcluster/kai.py); pods name it with KAI's queue label.
QUEUE = "default-queue"
#: A CPU node beside the GPU pools, as every cluster has: KAI's pods ask for their GPU share by annotation, so
#: Karpenter sees them fit there by their requests (else it would launch a CPU node for them).
SYSTEM_NODE_RESOURCES = {"cpu": "16", "memory": "64Gi", "pods": "110"}
#: The programs whose logs end a failed wait's message.
LOGGED = ("karpenter", "kai-scheduler", "kai-binder")


def system_node(name: str = "system-0") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"capacity": SYSTEM_NODE_RESOURCES, "allocatable": SYSTEM_NODE_RESOURCES}}


@contextlib.contextmanager
def kai_karpenter_stack(system_node_name: str = "system-0") -> Iterator[Any]:
    """The stack with KAI and Karpenter, the system node, the placeholders' kwok Stages (their `true` exits), the
    adjuster's namespace and PriorityClass; stopped on exit."""
    from testcluster.stack import Stack, StackOptions

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from adjuster_burst_real import placeholder_stages

    options = StackOptions(operators=("kai", "karpenter"), nodes=[system_node(system_node_name)], stages=placeholder_stages())
    with Stack(options) as running:
        running.apply([
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": consts.DEFAULT_NAMESPACE}},
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": WORK}},
            {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": consts.DEFAULT_PRIORITY_CLASS},
             "value": -1, "preemptionPolicy": "Never"},
        ])  # fmt: skip
        yield running


@contextlib.contextmanager
def admin_api(stack: Any) -> Iterator[tuple[Any, Any, Any]]:
    """(the admin's ApiClient, its CoreV1Api, its CustomObjectsApi); afterwards the test's pods and GPU nodes gone."""
    from kubernetes import client

    api_client = stack.api_client()
    try:
        yield api_client, client.CoreV1Api(api_client), client.CustomObjectsApi(api_client)
    finally:
        clean_up(stack, api_client)
        api_client.close()


def clean_up(stack: Any, api_client: Any) -> None:
    """Each test starts with no GPU node: its pods, then Karpenter's NodeClaims and their nodes, let go of at once.

    Karpenter's own termination would take 5 s or more per test: once it has asked the kwok provider to delete the
    instance it looks again only 5 s later (karpenter@v1.14.1 pkg/controllers/node/termination/controller.go
    awaitInstanceTermination, RequeueAfter 5 s). What the tests check ends with the test, so the clean-up deletes the
    nodes itself and removes the finalizers of what is being deleted."""
    from kubernetes import client

    core, custom = client.CoreV1Api(api_client), client.CustomObjectsApi(api_client)
    for namespace in (WORK, consts.DEFAULT_NAMESPACE):
        core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
    for claim in node_claims(custom):
        _quietly(lambda: custom.delete_cluster_custom_object("karpenter.sh", "v1", "nodeclaims", claim["metadata"]["name"]))
    for node in _launched_or_gpu_nodes(core):
        _quietly(lambda: core.delete_node(node.metadata.name))

    def gone() -> bool:
        claims, nodes = node_claims(custom), _launched_or_gpu_nodes(core)
        for claim in claims:
            if claim["metadata"].get("deletionTimestamp") and claim["metadata"].get("finalizers"):
                _quietly(lambda: custom.patch_cluster_custom_object(
                    "karpenter.sh", "v1", "nodeclaims", claim["metadata"]["name"], {"metadata": {"finalizers": None}}))
        for node in nodes:
            if node.metadata.deletion_timestamp and node.metadata.finalizers:
                _quietly(lambda: core.patch_node(node.metadata.name, {"metadata": {"finalizers": None}}))
        return not claims and not nodes  # what was let go of now is gone at the next look

    wait(stack, gone, 120, "the GPU nodes gone after the test")


def _launched_or_gpu_nodes(core: Any) -> list[Any]:
    """The GPU nodes and the nodes Karpenter launched (its CPU nodes too): all but the stack's system node."""
    return [n for n in core.list_node().items if (n.metadata.labels or {}).get("karpenter.sh/nodepool") or _has_gpus(n)]


def _quietly(call: Callable[[], Any]) -> None:
    """`call()`, where an object already gone (404) or changed meanwhile (409) is what the clean-up wants anyway."""
    from kubernetes.client.exceptions import ApiException

    try:
        call()
    except ApiException as exc:
        if exc.status not in (404, 409):
            raise


def node_claims(custom: Any) -> list[dict[str, Any]]:
    return custom.list_cluster_custom_object("karpenter.sh", "v1", "nodeclaims")["items"]


def claims_described(custom: Any) -> list[str]:
    """Each NodeClaim as a line a failed assertion can show: name, instance type, when made, what it was made for."""
    lines = []
    for claim in node_claims(custom):
        meta = claim["metadata"]
        kind = (meta.get("labels") or {}).get("node.kubernetes.io/instance-type", "?")
        lines.append(f"{meta['name']} {kind} made {meta.get('creationTimestamp')} for {((claim.get('spec') or {}).get('resources') or {}).get('requests')}")
    return lines


def gpu_nodes(core: Any) -> list[Any]:
    return [n for n in core.list_node().items if _has_gpus(n)]


def _has_gpus(node: Any) -> bool:
    return (node.status.allocatable or {}).get("nvidia.com/gpu") not in (None, "0")


def wait(stack: Any, check: Callable[[], T], timeout: float, what: str) -> T:
    """`check()`'s first truthy value (polled every quarter second); a failed test saying what the cluster shows and the
    end of Karpenter's and KAI's logs if none comes within `timeout` seconds."""
    try:
        return wait_for(check, timeout, interval=0.25, what=what)
    except TimeoutError as exc:
        pytest.fail(f"{exc}\n{cluster_state(stack)}")


def cluster_state(stack: Any) -> str:
    """What a failed wait needs explained: the pods not running and why, the placeholders, the GPU nodes, KAI's
    reservation pods, and the last lines of Karpenter's and KAI's logs."""
    from kubernetes import client

    with stack.api_client() as api_client:
        core = client.CoreV1Api(api_client)
        lines = []
        for pod in core.list_namespaced_pod(WORK).items:
            if pod.status.phase != "Running":
                scheduled = next((c for c in pod.status.conditions or () if c.type == "PodScheduled"), None)
                why = f"{scheduled.reason}: {(scheduled.message or '')[:160]}" if scheduled is not None else "no PodScheduled"
                lines.append(f"pod {pod.metadata.name} {pod.status.phase} on {pod.spec.node_name} ({why})")
        for ph in placeholders(core):
            lines.append(f"placeholder {ph.metadata.name} {ph.metadata.labels.get(consts.GPUS_LABEL)} GPUs {ph.status.phase} on {ph.spec.node_name}")
        lines.append(f"GPU nodes: {instance_types(core)}; "
                     f"reservation pods: {len(core.list_namespaced_pod('kai-resource-reservation').items)}")
    for name in LOGGED:
        log = stack.workdir / "logs" / f"{name}.log"
        if log.exists():
            lines.append(f"--- {name}\n" + "\n".join(line[:400] for line in log.read_text(errors="replace").splitlines()[-12:]))
    return "\n".join(lines)


def kai_pod(name: str, fraction: str, cpu: str = "100m") -> dict[str, Any]:
    """A pod for KAI's scheduler in its default queue, asking for `fraction` of a GPU (`gpu-fraction`)."""
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": WORK, "labels": {"kai.scheduler/queue": QUEUE}, "annotations": {"gpu-fraction": fraction}},
        "spec": {"schedulerName": "kai-scheduler",
                 "containers": [{"name": "main", "image": "busybox", "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}]},
    }  # fmt: skip


def burst(core: Any, count: int, fraction: str, cpu: str = "100m", prefix: str = "p") -> None:
    """`count` KAI pods, `prefix`-0 to `prefix`-(count-1). Each test names its own prefix where a test before it
    used the same: kube-controller-manager's pod GC, acting late on a deleted pod, marks a new pod of its name Failed."""
    for i in range(count):
        core.create_namespaced_pod(WORK, kai_pod(f"{prefix}-{i}", fraction, cpu))


def adjuster(api_client: Any, node_gpus: int = 8, clock: Optional[Callable[[], datetime]] = None, **extra: Any) -> ControllerThread:
    """`adjuster run`'s controller with `api_client` (the admin's, or one through a fault proxy), in a thread for the
    block: grace period 0.5 s, a provision timeout of 2 minutes, `extra` settings over those."""
    values: dict[str, Any] = dict(planner=AdjusterSettings(grace_period_seconds=0.5, node_gpus=node_gpus), provision_timeout=120.0,
                                  resync=0.5, debounce=0.1, request_timeout=5.0, leader_election=False, metrics_port=0)  # fmt: skip
    values.update(extra)
    settings = RunSettings(**values)
    now = clock or (lambda: datetime.now(timezone.utc))
    return ControllerThread(Controller(settings, kube_of(api_client, settings.request_timeout), clock=now))


def running(core: Any) -> int:
    return sum(1 for p in core.list_namespaced_pod(WORK).items if p.status.phase == "Running" and p.spec.node_name)


def unschedulable(core: Any) -> int:
    return sum(1 for p in core.list_namespaced_pod(WORK).items
               if any(c.type == "PodScheduled" and c.reason == "Unschedulable" for c in p.status.conditions or ()))


def placeholders(core: Any) -> list[Any]:
    return core.list_namespaced_pod(consts.DEFAULT_NAMESPACE, label_selector=consts.PLACEHOLDER_SELECTOR).items


def asked(core: Any) -> int:
    """The GPUs the placeholders ask for."""
    return sum(int(p.metadata.labels[consts.GPUS_LABEL]) for p in placeholders(core))


def instance_types(core: Any) -> list[str]:
    return sorted((n.metadata.labels or {}).get("node.kubernetes.io/instance-type", "?") for n in gpu_nodes(core))


class PlaceholderLog:
    """Every placeholder the API server reports created (name, uid, GPUs asked for), from the block's start to its end:
    a watch, started before the controller acts."""

    def __init__(self, core: Any) -> None:
        from kubernetes import watch

        self.created: list[tuple[str, str, int]] = []
        self._core = core
        self._watch = watch.Watch()
        self._thread = threading.Thread(target=self._record, daemon=True)

    def _record(self) -> None:
        try:
            for event in self._watch.stream(self._core.list_namespaced_pod, consts.DEFAULT_NAMESPACE, label_selector=consts.PLACEHOLDER_SELECTOR,
                                            timeout_seconds=900, _request_timeout=960):  # fmt: skip
                if event["type"] == "ADDED":
                    meta = event["object"].metadata
                    self.created.append((meta.name, meta.uid, int(meta.labels[consts.GPUS_LABEL])))
        except Exception:  # noqa: BLE001 - the stream is cut when the block ends
            pass

    @property
    def gpus(self) -> list[int]:
        return [g for _, _, g in self.created]

    def __enter__(self) -> "PlaceholderLog":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._watch.stop()


@contextlib.contextmanager
def through_fault_proxy(stack: Any, directory: Path) -> Iterator[tuple[Any, Any]]:
    """A fault proxy in front of the stack's API server (testcluster/fault_proxy.py) and an admin's client through it."""
    from kubernetes import config

    from testcluster.fault_proxy import FaultProxy

    with FaultProxy.in_front_of(stack.kubeconfig, stack.pki.directory, directory / "proxy") as running_proxy:
        api_client = config.new_client_from_config(str(running_proxy.write_kubeconfig(stack.kubeconfig, directory / "kubeconfig")))
        try:
            yield running_proxy, api_client
        finally:
            api_client.close()
