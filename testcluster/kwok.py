"""kwok in a test cluster: every node's kubelet, in a network namespace of its own behind the kubelet gate.

Why: kwok (sigs.k8s.io/kwok v0.8.0) plays every node of the stack (but those labelled NO_KUBELET_LABEL, which have
no kubelet at all): it makes nodes Ready, keeps their leases,
runs pods through their phases (its Stages), and answers the API server's kubelet requests: logs, and the
port-forward of a head pod's dashboard port to the Ray head every head pod stands for (a ClusterPortForward).
Its server checks no client (pkg/kwok/server/server.go `Run`: TLS without client certificates and plain HTTP on
one port), so it runs in a network namespace of its own (netjail.py), where no other process can reach it:
- it reaches the API server at the kubeconfig's 127.0.0.1 address, which leads to the stack's relay;
- its server's port is reached only through the kubelet gate (kubelet_gate.py), the port every node names as its
  kubelet's (`--node-port`), which lets in the API server's kubelet client certificate alone;
- the head pods' dashboard port leads, inside, to 127.0.0.1:RAY_DASHBOARD_PORT, which leads to the stack's door to
  the Ray head (head_front.py), which lets in this namespace's relay and the stack alone.

A head pod's port-forwards end when the pod is deleted (`HeadPodWatch`, the kubelet gate closes them), as a
kubelet's do once it stops the pod's containers: the one Ray head behind every head pod does not stop with any.
Each head pod also gets a kwok PortForward of its own (kwok runs with `--enable-crds=PortForward`, its CRD installed;
kwok takes ClusterPortForwards from its config file beside PortForwards from the API server, as root.go
`checkConfigOrCRD` refuses only one kind from both): a relay per stream (pod_relay.py) that names the pod to the
door, which then holds the stream to the token of the pod's Ray cluster (pod_tokens.py). A pod whose PortForward
is not made yet falls back to the ClusterPortForward, as before: the door then checks no token.

What this does not do: no exec, attach or log rules (nothing here reads a container's output), no metrics.
"""

from __future__ import annotations

import copy
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import yaml

from testcluster.kubelet_gate import KubeletGate
from testcluster.pod_tokens import PodTokens, port_forward
from testcluster.processes import unix_http_ok
from testcluster.sources import module_dir, yaml_documents

if TYPE_CHECKING:
    from testcluster.stack import Stack

__all__ = ["KWOK_SERVER_PORT", "NO_KUBELET_LABEL", "RAY_DASHBOARD_PORT", "HeadPodWatch", "start_kwok"]

#: kwok's server and the Ray dashboard, as seen inside kwok's network namespace (no other process shares its ports).
KWOK_SERVER_PORT = 10250
RAY_DASHBOARD_PORT = 8265
#: The user the API server's kubelet client certificate names (stack.py), the one the gate lets through.
KUBELET_CLIENT = "kube-apiserver-kubelet-client"
#: The pods whose port-forwards are followed to their end: KubeRay's head pods (ray-operator/controllers/ray/utils/
#: constant.go RayNodeTypeLabelKey, value "head"), the only ones the tests port-forward to.
HEAD_POD_SELECTOR = "ray.io/node-type=head"
#: A node with this label has no kubelet: kwok manages every other node (`--manage-nodes-with-label-selector=!KEY`), and
#: leaves this one as a test writes it (a node whose kubelet reports NotReady, or has stopped: the node lifecycle
#: controller then marks and taints it, as on any cluster).
NO_KUBELET_LABEL = "testcluster.raybridge.dev/no-kubelet"
#: Each watch request's bound, and the longest wait before watching again after an error.
WATCH_SECONDS = 60
WATCH_BACKOFF_MAX_SECONDS = 5.0
#: Tries to make or remove a head pod's PortForward before it waits for the next event; each call's bound.
PORT_FORWARD_TRIES = 3
PORT_FORWARD_CALL_SECONDS = 5


#: A pod being deleted is first put in a terminal phase, as the kubelet does once it has stopped its containers
#: (kubernetes@v1.34.4 pkg/kubelet/kubelet_pods.go getPhase: a terminal pod whose containers have all stopped is
#: Failed, Succeeded if they all succeeded; killed ones did not), and only then removed (`_after_termination`).
#: kwok's own pod-delete Stage removes it at once; a pod that waits for its dependents (foreground deletion: a RayJob
#: deleted by `raybridge delete`) then never ends: its ResourceClaims keep their delete protection until the pod is
#: done, which for a scheduled pod means a terminal phase (pkg/controller/resourceclaim/controller.go isPodDone).
TERMINATE_ON_DELETE = {
    "apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Stage", "metadata": {"name": "pod-terminate-on-delete"},
    "spec": {
        "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
        "selector": {"matchExpressions": [
            {"key": ".metadata.deletionTimestamp", "operator": "Exists"},
            {"key": ".status.phase", "operator": "NotIn", "values": ["Succeeded", "Failed"]},
        ]},
        "next": {"statusTemplate": "phase: Failed\n"},
    },
}  # fmt: skip


def _after_termination(stage: dict) -> dict:
    """kwok's pod-delete Stage, for pods already in a terminal phase only (TERMINATE_ON_DELETE puts them there)."""
    if stage.get("kind") != "Stage" or (stage.get("metadata") or {}).get("name") != "pod-delete":
        return stage
    selector = stage["spec"].setdefault("selector", {})
    selector.setdefault("matchExpressions", []).append({"key": ".status.phase", "operator": "In", "values": ["Succeeded", "Failed"]})
    return stage


def kwok_config(stack: "Stack") -> Path:
    """kwok's stages from its module (node-fast, heartbeat with lease, pod-fast without pod-complete),
    and the port-forward of head pods' dashboard port to the stack's door to the Ray head."""

    kwok = stack.programs["kwok"]
    source = module_dir(kwok.upstream_module(), kwok.module_dir) / "kustomize" / "stage"
    stage_files = [
        source / "node" / "fast" / "node-initialize.yaml",
        source / "node" / "heartbeat-with-lease" / "node-heartbeat-with-lease.yaml",
        source / "pod" / "fast" / "pod-ready.yaml",
        source / "pod" / "fast" / "pod-delete.yaml",
    ]
    documents = [_after_termination(doc) for path in stage_files for doc in yaml_documents(path)]
    documents.append(TERMINATE_ON_DELETE)
    if "kai" in stack.options.operators:  # the node-side step of KAI's GPU reservation pods (kai.py)
        from testcluster import kai

        documents.append(kai.reservation_gpu_stage())
    documents += [copy.deepcopy(stage) for stage in stack.options.stages]
    if stack.head_door is not None:
        documents.append({
            "apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "ClusterPortForward", "metadata": {"name": "ray-dashboard"},
            "spec": {"forwards": [{"ports": [8265], "target": {"address": "127.0.0.1", "port": RAY_DASHBOARD_PORT}}]},
        })  # fmt: skip
    path = stack.workdir / "kwok.yaml"
    path.write_text(yaml.safe_dump_all(documents))
    return path


class HeadPodWatch:
    """Tells the kubelet gate of each head pod deleted (or being deleted: its containers stop) and of each one
    created, from a watch of the stack's API server, until `stop()`; with `door` (the door's Unix socket), gives
    each head pod its PortForward and removes it with the pod. A PortForward that could not be made or removed in
    PORT_FORWARD_TRIES is tried again at the next event (a new watch lists every pod again)."""

    def __init__(self, stack: "Stack", gate: KubeletGate, door: Optional[Path] = None) -> None:
        self._stack = stack
        self._gate = gate
        self._door = door
        #: Pods whose PortForward is still to be made (namespace, name) -> uid; or removed: uid None.
        self._pending: dict[tuple[str, str], Optional[str]] = {}
        self._stopped = threading.Event()
        self._watch: Any = None
        self._thread = threading.Thread(target=self._run, name="head-pod-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        if self._watch is not None:
            self._watch.stop()
        self._thread.join(5)

    def _run(self) -> None:
        from kubernetes import client, watch

        api = self._stack.api_client()
        core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
        backoff = 0.25
        while not self._stopped.is_set():
            self._watch = watch.Watch()
            try:
                # Each new watch lists first: ADDED for every pod there now, which says again what is ended.
                for event in self._watch.stream(core.list_pod_for_all_namespaces, label_selector=HEAD_POD_SELECTOR,
                                                timeout_seconds=WATCH_SECONDS, _request_timeout=WATCH_SECONDS + 30):  # fmt: skip
                    meta = event["object"].metadata
                    if event["type"] == "DELETED" or meta.deletion_timestamp is not None:
                        self._gate.end_port_forwards(meta.namespace, meta.name)
                        self._pending[(meta.namespace, meta.name)] = None
                    elif event["type"] == "ADDED":
                        self._gate.pod_started(meta.namespace, meta.name)
                        self._pending[(meta.namespace, meta.name)] = meta.uid
                    self._settle_port_forwards(custom)
                backoff = 0.25
            except Exception:  # noqa: BLE001 - an API server stopping or refusing: watch again after a while
                self._stopped.wait(backoff)
                backoff = min(backoff * 2, WATCH_BACKOFF_MAX_SECONDS)


    def _settle_port_forwards(self, custom: Any) -> None:
        """Make or remove the PortForwards pending, each in a bounded number of tries; what fails stays pending."""
        from kubernetes.client.exceptions import ApiException

        if self._door is None:
            self._pending.clear()
            return
        for (namespace, name), uid in list(self._pending.items()):
            for attempt in range(PORT_FORWARD_TRIES):
                try:
                    if uid is not None:
                        custom.create_namespaced_custom_object("kwok.x-k8s.io", "v1alpha1", namespace, "portforwards",
                                                               port_forward(namespace, name, uid, self._door),
                                                               _request_timeout=PORT_FORWARD_CALL_SECONDS)  # fmt: skip
                    else:
                        custom.delete_namespaced_custom_object("kwok.x-k8s.io", "v1alpha1", namespace, "portforwards", name,
                                                               _request_timeout=PORT_FORWARD_CALL_SECONDS)  # fmt: skip
                except ApiException as exc:
                    if exc.status not in (404, 409):  # gone already, or made already: settled
                        self._stopped.wait(0.2 * (attempt + 1))
                        continue
                except Exception:  # noqa: BLE001 - the API server slow or stopping: tried again later
                    self._stopped.wait(0.2 * (attempt + 1))
                    continue
                del self._pending[(namespace, name)]
                break


def start_kwok(stack: "Stack") -> None:
    """The gate first (its port is what kwok writes into every node), then kwok in its namespace; ready once its
    health check answers through the Unix socket the gate leads to."""
    assert stack.pki is not None
    server = stack.sockets / "kwok-server.sock"
    serving = stack.pki.serving("kubelet", ("127.0.0.1", "localhost"))
    stack.kubelet_gate = KubeletGate(serving.cert, serving.key, stack.pki.ca_file, KUBELET_CLIENT, server)
    if stack.head_door is not None and stack.head_door.unix_path is not None:  # each head pod's own PortForward
        kwok = stack.programs["kwok"]
        crd = module_dir(kwok.upstream_module(), kwok.module_dir) / "kustomize" / "crd" / "bases" / "kwok.x-k8s.io_portforwards.yaml"
        stack.install_crds(list(yaml_documents(crd)))
    argv = [
        str(stack.binaries["kwok"]), f"--kubeconfig={stack.kubeconfig}", f"--config={kwok_config(stack)}",
        f"--manage-nodes-with-label-selector=!{NO_KUBELET_LABEL}", "--node-ip=127.0.0.1", f"--node-port={stack.kubelet_gate.port}",
        f"--server-address=127.0.0.1:{KWOK_SERVER_PORT}", f"--cidr={stack.pod_cidr}", "--node-lease-duration-seconds=40",
    ]  # fmt: skip
    door = stack.head_door.unix_path if stack.head_door is not None else None
    if door is not None:
        argv.append("--enable-crds=PortForward")
    dials = {RAY_DASHBOARD_PORT: stack.head_door.unix_path} if stack.head_door is not None and stack.head_door.unix_path else {}
    process = stack.jailed("kwok", argv, serves={server: KWOK_SERVER_PORT}, dials=dials)
    if stack.head_door is not None:
        assert process.popen is not None
        stack.head_door.admitted.add(process.popen.pid)  # the namespace's relay dials the door (netjail.py)
        stack.head_door.forwarders.add(process.popen.pid)  # kwok, its child, runs a pod_relay.py per PortForward stream
        stack.head_door.pod_token = PodTokens(stack.api_client())
    process.wait_ready(lambda: unix_http_ok(server, "/healthz"), 60)
    if stack.head_door is not None:
        stack.kubelet_gate.pod_watch = HeadPodWatch(stack, stack.kubelet_gate, door)


def completing_stage(name: str, match_labels: dict[str, str]) -> dict:
    """A kwok Stage: a running pod with `match_labels` completes at once, exit code 0 (phase Succeeded), as a pod whose
    one container runs `true` with `restartPolicy: Never` does on a node. kwok's own pod-complete Stage
    (kustomize/stage/pod/fast/pod-complete.yaml at v0.8.0) does the same for Job pods only."""
    return {
        "apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Stage", "metadata": {"name": name},
        "spec": {
            "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
            "selector": {
                "matchLabels": dict(match_labels),
                "matchExpressions": [
                    {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"},
                    {"key": ".status.phase", "operator": "In", "values": ["Running"]},
                ],
            },
            "next": {"statusTemplate": _COMPLETED_STATUS},
        },
    }  # fmt: skip


_COMPLETED_STATUS = """{{ $now := Now }}
containerStatuses:
{{ range $index, $item := .spec.containers }}
- image: {{ $item.image | Quote }}
  name: {{ $item.name | Quote }}
  ready: false
  restartCount: 0
  started: false
  state:
    terminated:
      exitCode: 0
      finishedAt: {{ $now | Quote }}
      reason: Completed
      startedAt: {{ $now | Quote }}
{{ end }}
phase: Succeeded
"""
