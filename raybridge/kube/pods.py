"""Raw calls on pods, a node's metadata, PodTemplates and Events, for a caller that retries and judges the answers itself.

The adjuster's act step (`adjuster/scaler.py`) and start-up checks (`adjuster/preflight.py`)
make these calls; each takes the `Kube` and the request timeout the caller uses, and
returns the API server's answer as it came: for a write, the undecoded response
(`_preload_content=False`: the caller reads the created or patched object from its body);
for a label-selected list, the items as plain JSON.

What it does not do: retry (the bounded client does, unless the call is made inside
`kube.retry.calls_tried_once()`, where the caller retries), or map failures: an error
status is the client's `ApiException`, a failed connection urllib3's or the OS's error,
a body that is not JSON a `ValueError`, each left for the caller to classify (the
scaler's retry loop reads the status) or to map through `kube.calls.api_call`. It
decides nothing and builds no object but the request.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from raybridge.kube.calls import decode_json
from raybridge.kube.client import Kube


def create_pod(kube: Kube, namespace: str, manifest: Mapping[str, Any], timeout: float) -> Any:
    return kube.core().create_namespaced_pod(namespace, manifest, _preload_content=False, _request_timeout=(timeout, timeout))


def delete_pod(kube: Kube, namespace: str, name: str, timeout: float, grace_period_seconds: int = 0, uid: Optional[str] = None) -> Any:
    """`uid`: only that object (DeleteOptions preconditions): a pod made since under the same name answers 409 Conflict."""
    body = {"preconditions": {"uid": uid}} if uid else None
    return kube.core().delete_namespaced_pod(
        name, namespace, grace_period_seconds=grace_period_seconds, body=body, _preload_content=False, _request_timeout=(timeout, timeout)
    )


def list_pods_by_label(kube: Kube, selector: str, timeout: float) -> list[Any]:
    """The pods of every namespace that match a label selector, as plain JSON (camelCase keys)."""
    listed = kube.core().list_pod_for_all_namespaces(label_selector=selector, _request_timeout=(timeout, timeout), _preload_content=False)
    data = decode_json(f"listing pods labelled {selector}", listed.data or b"{}", kube.server)
    return (data.get("items") or []) if isinstance(data, dict) else []


def merge_patch_node(kube: Kube, name: str, patch: Mapping[str, Any], timeout: float) -> Any:
    """A JSON merge patch of node `name` (RFC 7386: a key set to None is removed)."""
    return kube.core().patch_node(
        name, patch, _content_type="application/merge-patch+json", _preload_content=False, _request_timeout=(timeout, timeout)
    )


def create_pod_template(kube: Kube, namespace: str, manifest: Mapping[str, Any], timeout: float) -> Any:
    return kube.core().create_namespaced_pod_template(namespace, manifest, _preload_content=False, _request_timeout=(timeout, timeout))


def delete_pod_template(kube: Kube, namespace: str, name: str, timeout: float) -> Any:
    return kube.core().delete_namespaced_pod_template(name, namespace, _preload_content=False, _request_timeout=(timeout, timeout))


def create_event(kube: Kube, namespace: str, body: Mapping[str, Any], timeout: float) -> Any:
    """A core/v1 Event, as `kubectl describe` shows it; what it says and about what is the caller's `body`."""
    return kube.core().create_namespaced_event(namespace, body, _preload_content=False, _request_timeout=(timeout, timeout))
