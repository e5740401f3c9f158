"""The cluster autoscaler's ProvisioningRequests (autoscaling.x-k8s.io/v1) as raybridge reads them.

Read-only: lists them in one namespace so `explain` can say what the
autoscaler did for a Workload's ProvisioningRequest admission check. A
cluster that serves no ProvisioningRequests (no CRD: no cluster autoscaler
with them, so none exists, whatever the Workload's admission checks are) gets
an empty list; a user who may not list them gets None ("not known"), never an
error: the explanation says what it can see. Calls get the client's default
request timeout (`connect`).
"""

from __future__ import annotations

from typing import Any, Optional

from raybridge.core.consts import PROVISIONING_GROUP, PROVISIONING_VERSION
from raybridge.errors import InfraError
from raybridge.kube.calls import api_call
from raybridge.kube.client import Kube

GROUP = PROVISIONING_GROUP
VERSION = PROVISIONING_VERSION


def list_provisioning_requests(kube: Kube, namespace: str) -> Optional[list[dict[str, Any]]]:
    """Every ProvisioningRequest in `namespace` ([] where the cluster serves none); None when forbidden to say."""
    try:
        result = api_call(
            "listing ProvisioningRequests", kube.custom().list_namespaced_custom_object,
            GROUP, VERSION, namespace, "provisioningrequests", not_found_ok=True,
        )  # fmt: skip
    except InfraError as exc:
        if "permission denied" in str(exc):
            return None
        raise
    if result is None:  # 404: the resource is not served, so there are none
        return []
    return list(result.get("items") or [])
