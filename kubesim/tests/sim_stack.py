"""The real cluster kubesim's simulated controllers are tested on: the real kube-apiserver, kube-scheduler and kwok,
with the simulations as its clients (kubesim/real_api.py), and what those tests wait for and clean up.

Why this module exists: the simulated KAI and cluster-autoscaler (sim_gpu.py, sim_autoscaler.py) work with a
scheduler that binds the default scheduler's pods and kubelets that run them; their
tests (test_sim_adjuster_world.py, test_sim_provisioning_requests.py) step a simulation by hand against the real
programs that do both, so what they check is what the real API server, kube-scheduler and kwok make of it. kubesim
imports nothing of raybridge's test suite (test_independence.py), so the waits are testcluster's
(`testcluster.processes.wait_until`, bounded, naming what did not happen).

What it deliberately does not do: run a simulation (each test starts and steps its own), start an operator (the
simulations stand for them), or fault injection (testcluster/fault_proxy.py).
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterable, Iterator, Optional

from kubesim.real_api import RealApi
from kubesim.sim_autoscaler import PR_API
from kubesim.sim_gpu import RESERVATION_NAMESPACE, SCALING_NAMESPACE, register_gpu_node

#: Pods labelled so exit at once once running (a kwok Stage), as a pod whose one container runs `true` does.
EXITS_LABEL = "kubesim.test/exits-at-once"
#: The node every GpuSim adds unless told not to (sim_gpu.py `_system_node`): it stays for the module's tests.
SYSTEM_NODE = "system-0"
#: How long kube-scheduler and kwok get for what they do at once (bind, mark unschedulable, run, end a pod).
ACTING_SECONDS = 30.0
#: The kube-scheduler logs of the stacks this process started, for what a wait that timed out says.
_scheduler_logs: list[Any] = []


@contextlib.contextmanager
def sim_stack(namespaces: Iterable[str]) -> Iterator[Any]:
    """A stack of the real API server, kube-scheduler and kwok (no operator: the simulations stand for them), with
    the ProvisioningRequest CRD of the release the newest Kueue requires, `namespaces`, KAI's scaling namespace, and
    the namespace and service account of KAI's reservation pods as KAI's chart installs them (the API server refuses
    a pod whose service account is missing); skipped where the real cluster cannot run (testcluster/pytest_plugin.py)."""
    from testcluster.pytest_plugin import own_cluster
    from testcluster.stack import StackOptions, completing_stage

    exits = completing_stage("kubesim-exits-at-once", {EXITS_LABEL: "true"})
    with own_cluster(StackOptions(operators=(), crds_only=("autoscaler",), stages=[exits])) as stack:
        _scheduler_logs.extend(process.log for process in stack.processes if process.name == "kube-scheduler")
        names = [*namespaces, SCALING_NAMESPACE, RESERVATION_NAMESPACE]
        stack.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}} for name in names]
                    + [{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": RESERVATION_NAMESPACE, "namespace": RESERVATION_NAMESPACE}}])  # fmt: skip
        yield stack


@contextlib.contextmanager
def real_api(stack: Any, namespaces: Iterable[str]) -> Iterator[RealApi]:
    """The admin's client as the simulations' API (`RealApi`); afterwards every pod, PodTemplate and
    ProvisioningRequest of `namespaces` (and of KAI's) and every node but the system node is gone, not going."""
    from testcluster.client import ClusterClient

    client = ClusterClient(stack.kubeconfig)
    try:
        yield RealApi(client)
    finally:
        try:
            _clean_up(client, [*namespaces, SCALING_NAMESPACE, RESERVATION_NAMESPACE])
        finally:
            client.close()


def _clean_up(client: Any, namespaces: list[str]) -> None:
    from kubernetes import client as k8s
    from testcluster.processes import wait_until

    core = k8s.CoreV1Api(client.api_client())
    for namespace in namespaces:
        core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
        for kind, api in (("ProvisioningRequest", PR_API), ("PodTemplate", "v1")):
            for obj in client.list_objects(api, kind, namespace):
                client.delete_object(api, kind, obj["metadata"]["name"], namespace)
    for node in client.list_objects("v1", "Node"):
        if node["metadata"]["name"] != SYSTEM_NODE:
            client.delete_object("v1", "Node", node["metadata"]["name"])
    wait_until(lambda: not any(client.list_objects("v1", "Pod", ns) for ns in namespaces), 60, "the test's pods gone")
    wait_until(lambda: all(n["metadata"]["name"] == SYSTEM_NODE for n in client.list_objects("v1", "Node")), 60, "the test's nodes gone")


# --- what a test waits for -------------------------------------------------------------------------


def read_pod(api: RealApi, name: str, namespace: str) -> dict[str, Any]:
    found = api.get_object("v1", "Pod", name, namespace)
    assert found is not None, f"pod {namespace}/{name} is gone"
    return found


def scheduled_condition(found: dict[str, Any]) -> Optional[dict[str, Any]]:
    return next((c for c in (found.get("status") or {}).get("conditions") or [] if c.get("type") == "PodScheduled"), None)


def is_unschedulable(found: dict[str, Any]) -> bool:
    """Unbound, `PodScheduled=False/Unschedulable`: what a scheduler writes on a pod it found no node for."""
    condition = scheduled_condition(found) or {}
    return not found["spec"].get("nodeName") and condition.get("status") == "False" and condition.get("reason") == "Unschedulable"


def wait_unschedulable(api: RealApi, *names: str, namespace: str) -> None:
    """Until kube-scheduler has found no node for each pod of `names` (the autoscalers act on that condition alone)."""
    from testcluster.processes import wait_until

    try:
        wait_until(lambda: all(is_unschedulable(read_pod(api, name, namespace)) for name in names), ACTING_SECONDS,
                   f"kube-scheduler marking {', '.join(names)} unschedulable")  # fmt: skip
    except TimeoutError as exc:
        raise TimeoutError(f"{exc}; {_pods_and_scheduler_said(api, names, namespace)}") from exc


def _pods_and_scheduler_said(api: RealApi, names: Iterable[str], namespace: str) -> str:
    """Each pod's node, phase and PodScheduled condition now, and kube-scheduler's log lines naming one of them or an
    error (it logs a failed status write as an error, and at --v=1 little else): what a timed-out wait reports."""
    pods = []
    for name in names:
        found = api.get_object("v1", "Pod", name, namespace) or {}
        pods.append(f"{name}: node {found.get('spec', {}).get('nodeName')!r}, phase {(found.get('status') or {}).get('phase')!r}, "
                    f"PodScheduled {scheduled_condition(found)}" if found else f"{name}: gone")  # fmt: skip
    lines: list[str] = []
    for log in _scheduler_logs[-1:]:
        with contextlib.suppress(OSError):
            text = log.read_text(errors="replace").splitlines()
            lines = [line for line in text if line[:1] == "E" or any(f"{namespace}/{name}" in line for name in names)][-8:]
    return "; ".join(pods) + "; kube-scheduler's log: " + (" | ".join(lines) or "nothing on them")


def wait_bound(api: RealApi, name: str, namespace: str) -> str:
    """The node kube-scheduler (or a simulation) bound the pod to, once it has. A timeout says the pod's state, each
    node's readiness and taints, and kube-scheduler's lines on the pod (a run under load once waited past 30 s for a
    node the autoscaler had just added, with nothing to tell why)."""
    from testcluster.processes import wait_until

    try:
        wait_until(lambda: bool(read_pod(api, name, namespace)["spec"].get("nodeName")), ACTING_SECONDS, f"{namespace}/{name} bound")
    except TimeoutError as exc:
        raise TimeoutError(f"{exc}; {_pods_and_scheduler_said(api, [name], namespace)}; nodes: {_nodes_said(api)}") from exc
    return str(read_pod(api, name, namespace)["spec"]["nodeName"])


def _nodes_said(api: RealApi) -> str:
    """Each node's name, whether it is schedulable (`schedulable`) and its taints' keys."""
    said = []
    for node in api.list_objects("v1", "Node"):
        taints = ",".join(str(t.get("key")) for t in (node.get("spec") or {}).get("taints") or []) or "none"
        said.append(f"{node['metadata']['name']} ({'schedulable' if schedulable(node) else 'not schedulable'}, taints {taints})")
    return "; ".join(said) or "none"


def wait_phase(api: RealApi, name: str, namespace: str, phase: str) -> None:
    """Until kwok has moved the pod to `phase` (Running once bound; Succeeded for a pod labelled EXITS_LABEL)."""
    from testcluster.processes import wait_until

    wait_until(lambda: (read_pod(api, name, namespace).get("status") or {}).get("phase") == phase, ACTING_SECONDS, f"{namespace}/{name} {phase}")


def schedulable(node: dict[str, Any]) -> bool:
    """Ready, and without the `node.kubernetes.io/not-ready` taint the API server's admission (TaintNodesByCondition)
    puts on every node it registers and the node lifecycle controller takes off once the node is Ready."""
    conditions = (node.get("status") or {}).get("conditions") or []
    taints = (node.get("spec") or {}).get("taints") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions) \
        and not any(t.get("key") == "node.kubernetes.io/not-ready" for t in taints)


def wait_schedulable(api: RealApi, name: str) -> None:
    from testcluster.processes import wait_until

    wait_until(lambda: schedulable(api.get_object("v1", "Node", name) or {}), ACTING_SECONDS, f"node {name} schedulable")


def ready_gpu_node(api: RealApi, name: str, **options: Any) -> dict[str, Any]:
    """`register_gpu_node`, once the node is schedulable (kwok keeps it Ready; its not-ready taint gone)."""
    registered = register_gpu_node(api, name, **options)
    wait_schedulable(api, name)
    return registered
