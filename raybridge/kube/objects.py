"""Small reads every command shares: nodes, all pods, namespaces, a Secret's value, a raw GET.

Each goes through `kube.calls.api_call` (bounded, retried, errors mapped) and returns plain
JSON (camelCase keys), each item checked to be an object; a read the user may not make is
None where the caller can go on without it. Per-resource modules (`rayapi`, `kueue`, `kai`,
`provisioning`, and for the adjuster `pods` and `scheduling`) hold the rest.
"""

from __future__ import annotations

from typing import Any, Optional

from raybridge.kube.calls import PermissionDenied, api_call, decode_json, unexpected_object
from raybridge.kube.client import Kube


def list_nodes(kube: Kube) -> list[dict[str, Any]]:
    result = api_call("listing nodes", kube.core().list_node, _preload_content=False)
    return list_items("listing nodes", result, kube.server)


def list_pods_all_namespaces(kube: Kube) -> Optional[list[dict[str, Any]]]:
    """Every pod, or None when we may not list them (free GPUs are then unknown)."""
    try:
        result = api_call("listing pods", kube.core().list_pod_for_all_namespaces, _preload_content=False)
    except PermissionDenied:
        return None
    return list_items("listing pods", result, kube.server)


def list_namespaced_pods(kube: Kube, namespace: str, selector: str) -> list[dict[str, Any]]:
    """The pods of `namespace` that match a label selector (PermissionDenied where the user may not list them)."""
    what = f"listing pods labelled {selector} in {namespace}"
    result = api_call(what, kube.core().list_namespaced_pod, namespace, label_selector=selector, _preload_content=False)
    return [item for item in list_items(what, result, kube.server) if isinstance(item, dict)]


def list_items(what: str, response: Any, server: str = "") -> list[Any]:
    """Raw JSON items from a `_preload_content=False` list (plain dicts, camelCase keys); each item's shape is the reader's business."""
    data = decode_json(what, response.data, server)
    items = data.get("items", ()) if isinstance(data, dict) else ()
    if items is None:
        return []  # `"items": null`, how Go writes an empty list
    if not isinstance(items, list):
        raise unexpected_object(what, "not a list of objects", server)
    return items


def raw_get(kube: Kube, path: str, timeout: Optional[float] = None, retry: bool = True) -> Any:
    """GET a path the typed APIs do not cover (aggregated APIs): the decoded JSON.

    ApiException on HTTP errors, ValueError on a body that is not JSON: call it through `api_call`.
    Bounded like every other call (`BoundedApiClient`); retried unless `retry` is False (an
    optional API that is failing is not worth waiting for).
    """
    import json

    api = kube.api_client
    bound = timeout if timeout is not None else kube.request_timeout
    if hasattr(api, "param_serialize"):  # kubernetes >= 33 (the pydantic-generated client)
        from raybridge.kube.core_api import send

        return json.loads(send(api, "GET", path, timeout=bound, **({} if retry else {"_retry": False})).data)
    response = api.call_api(
        path, "GET", header_params={"Accept": "application/json"}, auth_settings=["BearerToken"],
        _preload_content=False, _return_http_data_only=True, _request_timeout=bound,
    )  # fmt: skip
    return json.loads(response.data)


def namespace_exists(kube: Kube, namespace: str) -> Optional[bool]:
    """True or False; None when the API will not say (no permission to read namespaces)."""
    try:
        found = api_call(f"reading namespace {namespace}", kube.core().read_namespace, namespace, not_found_ok=True, _preload_content=False)
    except PermissionDenied:
        return None
    return found is not None


def list_namespace_names(kube: Kube) -> Optional[list[str]]:
    """Every namespace's name, or None when we may not list them."""
    try:
        result = api_call("listing namespaces", kube.core().list_namespace, _preload_content=False)
    except PermissionDenied:
        return None
    items = list_items("listing namespaces", result, kube.server)
    return sorted(str((n.get("metadata") or {}).get("name")) for n in items if isinstance(n, dict))


def read_secret_value(kube: Kube, namespace: str, name: str, key: str) -> Optional[str]:
    """One decoded value of a Secret; None when the Secret or the key is absent."""
    import base64

    what = f"reading Secret {namespace}/{name}"
    result = api_call(what, kube.core().read_namespaced_secret, name, namespace, not_found_ok=True, _preload_content=False)
    if result is None:
        return None
    data = decode_json(what, result.data, kube.server)
    if not isinstance(data, dict):
        raise unexpected_object(what, "not an object", kube.server)
    values, plain_values = data.get("data") or {}, data.get("stringData") or {}
    encoded = values.get(key) if isinstance(values, dict) else None
    if encoded is None:
        plain = plain_values.get(key) if isinstance(plain_values, dict) else None
        return plain if isinstance(plain, str) else None
    try:
        return base64.b64decode(encoded).decode("utf-8").strip()
    except (ValueError, TypeError, UnicodeDecodeError):
        return None
