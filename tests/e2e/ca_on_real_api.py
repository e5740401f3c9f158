"""The real-API-server cluster of the adjuster's cluster-autoscaler tests, and what those tests do to it and read back.

Why this module exists: test_adjuster_ca_on_real_api.py (bursts, `--mode provisioning-request`, the CLI, leader
election) and test_adjuster_guards_on_real_api.py (what the adjuster holds back, refuses or says) run on one stack: the
real kube-apiserver, kube-scheduler and kwok, with kubesim's simulated cluster-autoscaler and KAI past v0.12 as its
clients (tests/sims_on_real_api.py). The stack is started once per test worker (`ca_stack` in conftest.py; both
modules are in one xdist_group); `simulated` starts the simulations on it for one test and leaves nothing behind.
What it deliberately does not do: hold tests, or helpers that only one of the modules uses.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import threading
from typing import Any, Iterator

from raybridge.adjuster.controller import Controller
from raybridge.adjuster.decision import consts
from raybridge.adjuster.decision.settings import RunSettings
from tests.adjuster_world import NS, PR_API, WORK, past_grace, run_settings, unschedulable
from tests.helpers import ROOT, ControllerThread, kube_of
from tests.waits import PausableClock, wait_for

#: The xdist_group of every module on the shared stack: one worker, one stack.
XDIST_GROUP = "adjuster-ca-on-real-api"


#: The CRDs of every API the adjuster reads or writes beside the core ones, installed with no operator of theirs
#: (testcluster/sources.py CRDS_ONLY): the ProvisioningRequest of the release Kueue requires, KAI's (PodGroups),
#: Karpenter's (a NodePool whose limits it names).
ADJUSTER_CRDS = ("autoscaler", "kai", "karpenter")


def reservation_objects() -> list[dict[str, Any]]:
    """The namespace and service account of KAI's reservation pods, as KAI's chart installs them (the API server refuses
    a pod whose service account is missing)."""
    from kubesim.sim_gpu import RESERVATION_NAMESPACE

    return [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": RESERVATION_NAMESPACE}},
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": RESERVATION_NAMESPACE, "namespace": RESERVATION_NAMESPACE}}]  # fmt: skip


@contextlib.contextmanager
def started_stack() -> Iterator[Any]:
    """The real API server, kube-scheduler and kwok; placeholders' `true` exits at once (a kwok Stage); ADJUSTER_CRDS,
    the adjuster's and the work namespace, KAI's reservation objects, the adjuster's PriorityClass."""
    from testcluster.stack import Stack, StackOptions

    with Stack(StackOptions(operators=(), crds_only=ADJUSTER_CRDS, stages=placeholder_stages())) as running:
        running.apply([
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": WORK}},
            *reservation_objects(),
            {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": consts.DEFAULT_PRIORITY_CLASS},
             "value": -1, "preemptionPolicy": "Never"},
        ])  # fmt: skip
        yield running


def placeholder_stages() -> Any:
    """kwok's Stages with the placeholders' `true` exiting at once (benchmarks/adjuster_burst_real.py)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from adjuster_burst_real import placeholder_stages as stages

    return stages()


@contextlib.contextmanager
def simulated(stack: Any, **options: Any) -> Iterator[tuple[Any, Any]]:
    """(the admin's client, a running GpuSim with `options`) on `stack`: the autoscaler's clock pausable, nodes 0.5 s
    after the decision; afterwards no GPU node and no pod is left for the next test."""
    from kubesim.sim_gpu import RESERVATION_NAMESPACE, GpuSim
    from testcluster.client import ClusterClient
    from tests.sims_on_real_api import RealApi

    client = ClusterClient(stack.kubeconfig)
    try:
        with GpuSim(RealApi(client), **{"provisioning_delay": 0.5, "autoscaler_clock": PausableClock(), **options}) as sim:
            yield client, sim
        assert sim.errors == []
    finally:
        clean_up(client, (WORK, NS, RESERVATION_NAMESPACE))
        client.close()


def clean_up(client: Any, namespaces: tuple[str, ...]) -> None:
    """Every pod and Event of `namespaces`, the adjuster's requests, templates and Lease, the PodGroups of the work
    namespace, the nodes the autoscaler added: gone, not going."""
    from kubernetes import client as k8s

    api = client.api_client()
    try:
        core = k8s.CoreV1Api(api)
        for namespace in namespaces:
            core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
            core.delete_collection_namespaced_event(namespace)
    finally:
        api.close()
    for kind, api, namespace in (("ProvisioningRequest", PR_API, NS), ("PodTemplate", "v1", NS), ("PodGroup", POD_GROUP_API, WORK)):
        for obj in client.list_objects(api, kind, namespace):
            client.delete_object(api, kind, obj["metadata"]["name"], namespace)
    if client.get_object("coordination.k8s.io/v1", "Lease", consts.DEFAULT_LEASE_NAME, NS) is not None:
        client.delete_object("coordination.k8s.io/v1", "Lease", consts.DEFAULT_LEASE_NAME, NS)
    for node in client.list_objects("v1", "Node"):
        if node["metadata"]["name"].startswith("sim-gpu-node-"):
            client.delete_object("v1", "Node", node["metadata"]["name"])
    wait_for(lambda: not any(client.list_objects("v1", "Pod", ns) for ns in namespaces), timeout=60,
             what="the test's pods gone")  # fmt: skip
    wait_for(lambda: not [n for n in client.list_objects("v1", "Node") if n["metadata"]["name"].startswith("sim-gpu-node-")],
             timeout=60, what="the autoscaler's nodes gone")  # fmt: skip


#: KAI's PodGroup API (the CRD of the served release, installed by `started_stack`).
POD_GROUP_API = "scheduling.run.ai/v2alpha2"


class Created:
    """Every object the API server reports ADDED, from the test's start (a watch of `list_call`'s objects), until
    `stop()` or the end of its `with` block; `objects` stays readable after. `versions`: every version the watch
    brought (ADDED and MODIFIED), for a state a poll could miss on a loaded machine."""

    def __init__(self, list_call: Any, *args: Any, **kwargs: Any) -> None:
        from kubernetes import watch

        self.objects: list[dict[str, Any]] = []
        self.versions: list[dict[str, Any]] = []
        self._watch = watch.Watch()
        self._stream = self._watch.stream(list_call, *args, timeout_seconds=300, _request_timeout=330, **kwargs)
        self._thread = threading.Thread(target=self._record, daemon=True)
        self._thread.start()

    def _record(self) -> None:
        try:
            for event in self._stream:
                if event["type"] == "ADDED":
                    self.objects.append(event["raw_object"])
                if event["type"] in ("ADDED", "MODIFIED"):
                    self.versions.append(event["raw_object"])
        except Exception:  # noqa: BLE001 - the stream ends when the test stops it
            pass

    def stop(self) -> None:
        self._watch.stop()

    def __enter__(self) -> "Created":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def settings(**extra: Any) -> RunSettings:
    """run_settings with a minute's provision timeout: the real scheduler and kwok take longer than the simulation."""
    return run_settings(**{"provision_timeout": 60.0, **extra})


def running_controller(client: Any, settings: RunSettings, clock: Any = past_grace) -> ControllerThread:
    """A controller against `client`'s cluster in a thread, stopped at the end of its `with` block."""
    return ControllerThread(Controller(settings, kube_of(client.api_client(retries=False), settings.request_timeout), clock=clock),
                            join_seconds=10)  # fmt: skip


def placeholder_log(client: Any) -> Created:
    """Every placeholder the API server reports created, from now on."""
    from kubernetes import client as k8s

    return Created(k8s.CoreV1Api(client.api_client()).list_namespaced_pod, NS, label_selector=consts.PLACEHOLDER_SELECTOR)


def request_log(client: Any) -> Created:
    """Every ProvisioningRequest the API server reports created, from now on."""
    from kubernetes import client as k8s

    group, version = PR_API.split("/")
    return Created(k8s.CustomObjectsApi(client.api_client()).list_namespaced_custom_object, group, version, NS, "provisioningrequests")


def wait_unschedulable(client: Any, sim: Any, count: int) -> None:
    """Wait until `count` of the test's pods are Unschedulable; on a timeout, say which pods are not and why."""
    try:
        wait_for(lambda: unschedulable(client) == count, timeout=30, what="the burst unschedulable")
    except TimeoutError as exc:
        listed = client.list_objects("v1", "Pod", WORK)
        pods = [(p["metadata"]["name"], p["spec"].get("nodeName"), (p.get("status") or {}).get("phase"), (p.get("status") or {}).get("conditions"))
                for p in listed if not any(c.get("reason") == "Unschedulable" for c in (p.get("status") or {}).get("conditions") or [])]
        pods.insert(0, len(listed))
        nodes = [n["metadata"]["name"] for n in client.list_objects("v1", "Node")]
        raise AssertionError(f"{exc}: pods {pods[:4]}, nodes {nodes}, sim errors {sim.errors[-2:]}") from exc


@contextlib.contextmanager
def placeholder_priority(client: Any, value: int) -> Iterator[None]:
    """The adjuster's PriorityClass at `value` (its value cannot change: deleted and made again), the stack's back after."""
    def make(priority: int) -> None:
        client.delete_object("scheduling.k8s.io/v1", "PriorityClass", consts.DEFAULT_PRIORITY_CLASS)
        client.create_priority_class(consts.DEFAULT_PRIORITY_CLASS, priority, preemptionPolicy="Never")  # the old value gone from admission too

    make(value)
    try:
        yield
    finally:
        make(-1)


def asked_gpus(placeholder: dict[str, Any]) -> int:
    """The GPUs a placeholder (or a ProvisioningRequest) asks for, as its label says."""
    return int(placeholder["metadata"]["labels"][consts.GPUS_LABEL])


def cluster_state(client: Any, sim: Any, controller: Any = None, created: Any = None) -> str:
    """What the pods, the nodes and the simulations show (and what the controller deleted, which placeholders it
    created), for a failed wait's message."""
    from kubesim.sim_gpu import RESERVATION_NAMESPACE
    from tests.adjuster_world import deleted_by_reason

    def conditions(obj: dict[str, Any]) -> list[Any]:
        return (obj.get("status") or {}).get("conditions") or []

    pods = [(p["metadata"]["namespace"], p["metadata"]["name"], p["spec"].get("nodeName"), (p.get("status") or {}).get("phase"),
             [c.get("reason") for c in conditions(p)]) for ns in (WORK, NS, RESERVATION_NAMESPACE) for p in client.list_objects("v1", "Pod", ns)]  # fmt: skip
    nodes = [(n["metadata"]["name"], [(c.get("type"), c.get("status")) for c in conditions(n)],
              [t.get("key") for t in (n.get("spec") or {}).get("taints") or []]) for n in client.list_objects("v1", "Node")]  # fmt: skip
    found = (f"pods {pods}; nodes {nodes}; nodes added {sim.added_nodes}; upcoming {sim.autoscaler.upcoming}; "
             f"sim errors {sim.errors[-3:]}")
    if controller is not None:
        found += f"; deleted {deleted_by_reason(controller)}"
    if created is not None:
        found += f"; created {[(p['metadata']['name'], p['metadata']['creationTimestamp']) for p in created.objects]}"
    return found


@contextlib.contextmanager
def state_on_timeout(client: Any, sim: Any, controller: Any = None, created: Any = None) -> Iterator[None]:
    """A wait's TimeoutError raised again with `cluster_state` in its message."""
    try:
        yield
    except TimeoutError as exc:
        raise AssertionError(f"{exc}: {cluster_state(client, sim, controller, created)}") from exc


class CollectedStderr:
    """A CLI process whose stderr is read on a thread, so a test can wait for a line; `stop()` sends SIGTERM and gives
    its exit status."""

    def __init__(self, proc: "subprocess.Popen[str]") -> None:
        self.proc = proc
        self.lines: list[str] = []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)

    @property
    def text(self) -> str:
        return "".join(self.lines)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=60)
        self.thread.join(5)
        return code
