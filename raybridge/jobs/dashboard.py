"""Reaching a KubeRay cluster's Ray dashboard (the Job API), and the auth token it may demand.

The address: `--dashboard-address` if given; the head service when running in
the cluster; the `dashboardURL` if it answers from here; else a port-forward
to the head pod through the Kubernetes API. The token: with KubeRay's
`authOptions.mode: token` the dashboard refuses calls without
`Authorization: Bearer <token>`; the token is in the Secret KubeRay made
(named after the RayCluster, or `authOptions.secretName`), key `auth_token`.

It returns what it found; the caller closes the port-forward.
"""

from __future__ import annotations

import socket
from typing import Any, Callable, Optional
from urllib.parse import urlparse

from raybridge.kuberay.names import DASHBOARD_PORT
from raybridge.kuberay.names import kuberay_derived_name
from raybridge.errors import InfraError
from raybridge.kube.calls import api_call
from raybridge.kube.client import Kube
from raybridge.kube.objects import read_secret_value

#: The Secret key KubeRay stores the token under (utils/constant.go RAY_AUTH_TOKEN_SECRET_KEY).
AUTH_TOKEN_KEY = "auth_token"


def auth_options(obj: dict[str, Any]) -> dict[str, Any]:
    """The RayCluster `authOptions` of a RayCluster or of a RayJob's cluster spec."""
    spec = obj.get("spec") or {}
    cluster = spec.get("rayClusterSpec") if obj.get("kind") == "RayJob" else spec
    return dict((cluster or {}).get("authOptions") or {})


def auth_headers(kube: Kube, namespace: str, obj: dict[str, Any], cluster_name: str) -> dict[str, str]:
    """The header the Job API needs for this object's cluster: none unless token auth is on."""
    options = auth_options(obj)
    if options.get("mode", "token" if options else "disabled") != "token":
        return {}
    # KubeRay names the Secret after the cluster, cut as it cuts derived names (from v1.6.0 also authOptions.secretName).
    secret = options.get("secretName") or kuberay_derived_name(cluster_name)
    token = read_secret_value(kube, namespace, secret, AUTH_TOKEN_KEY)
    if not token:
        raise InfraError(
            f"the Ray cluster {namespace}/{cluster_name} requires a token, but Secret {namespace}/{secret} "
            f"has no {AUTH_TOKEN_KEY} (yet)"
        )
    return {"Authorization": f"Bearer {token}"}


def _reachable(address: str, timeout: float = 1.0) -> bool:
    parsed = urlparse(address if "://" in address else f"http://{address}")
    try:
        with socket.create_connection((parsed.hostname or "", parsed.port or 80), timeout=timeout):
            return True
    except OSError:
        return False


def head_pod(kube: Kube, namespace: str, cluster_name: str) -> str:
    """The running head pod of a Ray cluster, or InfraError naming the cluster."""
    pods = api_call(
        "finding the Ray head pod",
        kube.core().list_namespaced_pod,
        namespace,
        label_selector=f"ray.io/cluster={cluster_name},ray.io/node-type=head",
    )
    running = [p for p in pods.items if (p.status.phase or "") == "Running"] if pods else []
    if not running:
        raise InfraError(f"no running head pod for Ray cluster {namespace}/{cluster_name} to port-forward to")
    return str(running[0].metadata.name)


def connect_dashboard(
    kube: Kube, namespace: str, cluster_name: str, dashboard_url: Optional[str], explicit: Optional[str], progress: Callable[[str], None]
) -> tuple[str, Optional[Any]]:
    """(dashboard address, port-forward to close later or None)."""
    if explicit:
        return (explicit if "://" in explicit else f"http://{explicit}"), None
    if dashboard_url:
        url = dashboard_url if "://" in dashboard_url else f"http://{dashboard_url}"
        if kube.in_cluster or _reachable(url):
            return url, None
    from raybridge.kube.portforward import PortForward

    pod = head_pod(kube, namespace, cluster_name)
    forward = PortForward(kube, namespace, pod, DASHBOARD_PORT)
    port = forward.start()
    progress(f"port-forwarding 127.0.0.1:{port} -> pod {pod}:{DASHBOARD_PORT}")
    return f"http://127.0.0.1:{port}", forward
