"""The cluster autoscaler's ProvisioningRequests (autoscaling.x-k8s.io/v1) as raybridge reads and writes them.

Two callers. `explain` lists them in one namespace to say what the autoscaler
did for a Workload's ProvisioningRequest admission check
(`list_provisioning_requests`): a cluster that serves no ProvisioningRequests
(no CRD: no cluster autoscaler with them, so none exists, whatever the
Workload's admission checks are) gets an empty list; a user who may not list
them gets None ("not known"), never an error: the explanation says what it can
see. Those calls get the client's default request timeout (`connect`) and go
through `api_call`.

The adjuster (`--mode provisioning-request`) asks whether the API is served at
start (`provisioning_requests_served`) and creates and deletes its requests
(`create_provisioning_request`, `delete_provisioning_request`), each with the
request timeout it passes. Those calls are raw: an error status is the
client's `ApiException`, a failed connection urllib3's error, left to the
caller, whose retry loop reads the status (`adjuster/scaler.py`) or whose
`api_call` maps it; a write returns the undecoded response. What this module
does not do: retry on its own (the bounded client does, unless the caller
made the call inside `calls_tried_once()`), or decide what to ask for.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from raybridge.autoscalers.provisioning_request import GROUP, PLURAL, VERSION
from raybridge.errors import InfraError
from raybridge.kube.calls import api_call
from raybridge.kube.client import Kube

__all__ = ["GROUP", "PLURAL", "VERSION", "create_provisioning_request", "delete_provisioning_request",
           "list_provisioning_requests", "provisioning_requests_served"]


def list_provisioning_requests(kube: Kube, namespace: str) -> Optional[list[dict[str, Any]]]:
    """Every ProvisioningRequest in `namespace` ([] where the cluster serves none); None when forbidden to say."""
    try:
        result = api_call(
            "listing ProvisioningRequests", kube.custom().list_namespaced_custom_object,
            GROUP, VERSION, namespace, PLURAL, not_found_ok=True,
        )  # fmt: skip
    except InfraError as exc:
        if "permission denied" in str(exc):
            return None
        raise
    if result is None:  # 404: the resource is not served, so there are none
        return []
    return list(result.get("items") or [])


def provisioning_requests_served(kube: Kube, namespace: str, timeout: float) -> Optional[bool]:
    """Whether the cluster serves v1 ProvisioningRequests (one listed at most; a 404 is False); None when forbidden to say (403).

    Any other error status raises the client's ApiException."""
    from kubernetes.client.exceptions import ApiException

    try:
        kube.custom().list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, limit=1, _request_timeout=(timeout, timeout))
    except ApiException as exc:
        if exc.status == 404:
            return False
        if exc.status == 403:
            return None
        raise
    return True


def create_provisioning_request(kube: Kube, namespace: str, manifest: Mapping[str, Any], timeout: float) -> Any:
    return kube.custom().create_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, manifest, _preload_content=False, _request_timeout=(timeout, timeout)
    )


def delete_provisioning_request(kube: Kube, namespace: str, name: str, timeout: float) -> Any:
    return kube.custom().delete_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, name, _preload_content=False, _request_timeout=(timeout, timeout)
    )
