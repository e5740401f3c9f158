"""Each head pod's own way to the Ray head, and the token its Ray cluster demands.

Why: every head pod of the test cluster stands for one shared Ray head, so the door to it (head_front.py) must learn
from elsewhere which pod a port-forward stream is for and what that pod's own head would demand. Two pieces:
- `port_forward`: the kwok PortForward (kwok.x-k8s.io/v1alpha1, named and namespaced as the pod: it wins over the
  stack's ClusterPortForward, sigs.k8s.io/kwok v0.8.0 pkg/kwok/server/debugging_port_forword.go `getPodsForward`)
  whose command, run per stream, is pod_relay.py naming the pod to the door; owned by the pod, so the garbage
  collector removes it with the pod;
- `PodTokens`: the token a pod's RayCluster demands, as the real KubeRay v1.6.1 sets it up: token authentication
  when `spec.authOptions.mode` is `token` (ray-operator utils/util.go IsAuthEnabled), the token under key
  `auth_token` (utils/constant.go RAY_AUTH_TOKEN_SECRET_KEY) of the Secret `authOptions.secretName`, or else the
  one KubeRay makes, named `CheckName(cluster name)` (raycluster_controller.go reconcileAuthSecret).

What this does not do: KubeRay's Kubernetes token authentication (`enableK8sTokenAuth`: no Secret, the API server
checks a ServiceAccount token), which nothing here uses; watch Secrets (an answer is kept CACHE_SECONDS).
"""

from __future__ import annotations

import base64
import sys
import threading
import time
import unicodedata
from pathlib import Path
from typing import Any, Callable, Optional

__all__ = ["PodTokens", "check_name", "port_forward"]

#: The head pods' dashboard port, the one port-forward their PortForward serves (as the stack's ClusterPortForward).
DASHBOARD_PORT = 8265
#: How long an answer is kept, and each API call's bound.
CACHE_SECONDS = 30.0
REQUEST_TIMEOUT_SECONDS = 5.0
RELAY = Path(__file__).resolve().parent / "pod_relay.py"


def check_name(name: str) -> str:
    """kuberay@v1.6.1 ray-operator/controllers/ray/utils/util.go CheckName: over 50 characters keeps its last 50;
    one then starting with a digit or punctuation gets an 'r' in place of its first character."""
    if len(name) > 50:
        name = name[len(name) - 50 :]
    if name and (name[0].isdigit() or unicodedata.category(name[0]).startswith("P")):
        name = "r" + name[1:]
    return name


def port_forward(namespace: str, pod: str, uid: str, door: Path) -> dict[str, Any]:
    """The PortForward that sends pod `namespace/pod`'s dashboard port-forwards to the door, naming the pod."""
    return {
        "apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "PortForward",
        "metadata": {"name": pod, "namespace": namespace,
                     "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pod, "uid": uid}]},
        "spec": {"forwards": [{"ports": [DASHBOARD_PORT], "command": [sys.executable, "-I", str(RELAY), str(door), f"{namespace}/{pod}"]}]},
    }  # fmt: skip


class PodTokens:
    """`tokens(namespace, pod)`: the token pod's Ray cluster demands, None when it demands none; raises LookupError
    (or the client's error) when it cannot tell. Answers are kept CACHE_SECONDS per pod; calls are thread-safe."""

    def __init__(self, api_client: Any, clock: Callable[[], float] = time.monotonic) -> None:
        from kubernetes import client

        self._api_client = api_client
        self._core = client.CoreV1Api(api_client)
        self._custom = client.CustomObjectsApi(api_client)
        self._clock = clock
        self._lock = threading.Lock()
        self._known: dict[tuple[str, str], tuple[float, Optional[str]]] = {}

    def close(self) -> None:
        self._api_client.close()

    def __call__(self, namespace: str, pod: str) -> Optional[str]:
        with self._lock:
            known = self._known.get((namespace, pod))
        if known is not None and self._clock() - known[0] < CACHE_SECONDS:
            return known[1]
        token = self._look_up(namespace, pod)
        with self._lock:
            self._known[(namespace, pod)] = (self._clock(), token)
        return token

    def _look_up(self, namespace: str, pod: str) -> Optional[str]:
        found = self._core.read_namespaced_pod(pod, namespace, _request_timeout=REQUEST_TIMEOUT_SECONDS)
        cluster_name = (found.metadata.labels or {}).get("ray.io/cluster")
        if not cluster_name:
            raise LookupError(f"pod {namespace}/{pod} has no ray.io/cluster label")
        cluster = self._custom.get_namespaced_custom_object("ray.io", "v1", namespace, "rayclusters", cluster_name,
                                                            _request_timeout=REQUEST_TIMEOUT_SECONDS)  # fmt: skip
        options = (cluster.get("spec") or {}).get("authOptions") or {}
        if options.get("mode") != "token":
            return None
        secret_name = options.get("secretName") or check_name(cluster_name)
        secret = self._core.read_namespaced_secret(secret_name, namespace, _request_timeout=REQUEST_TIMEOUT_SECONDS)
        encoded = (secret.data or {}).get("auth_token")
        if not encoded:
            raise LookupError(f"Secret {namespace}/{secret_name} holds no auth_token")
        return base64.b64decode(encoded).decode()
