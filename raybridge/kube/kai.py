"""KAI-Scheduler's Queue and PodGroup objects (and a pod) as raybridge reads them.

Read-only: lists the cluster's `scheduling.run.ai/v2` Queues and reads one
`scheduling.run.ai/v2alpha2` PodGroup or Pod through the official client, as
plain dicts. What they mean is `raybridge.kai.queue`'s and
`raybridge.queues.decision.kai_explain`'s business; errors become raybridge errors through
`api_call`; a cluster without the Queue CRD (404) is told apart. Calls get
the client's default request timeout (`connect`).
"""

from __future__ import annotations

from typing import Any, Optional

from raybridge.kai.names import KAI_POD_GROUP_GROUP, KAI_POD_GROUP_PLURAL, KAI_POD_GROUP_VERSION, KAI_QUEUE_GROUP, KAI_QUEUE_VERSION
from raybridge.errors import InfraError
from raybridge.kube.calls import PermissionDenied, api_call
from raybridge.kube.client import Kube


def list_queues(kube: Kube) -> list[dict[str, Any]]:
    """Every KAI Queue in the cluster (they are cluster-scoped)."""
    result = api_call(
        "listing KAI queues",
        kube.custom().list_cluster_custom_object,
        KAI_QUEUE_GROUP,
        KAI_QUEUE_VERSION,
        "queues",
        not_found_ok=True,
    )
    if result is None:
        raise InfraError(
            f"listing KAI queues: the cluster serves no {KAI_QUEUE_GROUP}/{KAI_QUEUE_VERSION} Queue resource "
            "(is KAI-Scheduler installed?)"
        )
    return list(result.get("items") or [])


def list_pod_groups(kube: Kube) -> list[dict[str, Any]]:
    """Every KAI PodGroup ([] where KAI serves none, or this user may not list them: its quota verdicts are then unknown)."""
    try:
        result = api_call(
            "listing KAI PodGroups", kube.custom().list_cluster_custom_object,
            KAI_POD_GROUP_GROUP, KAI_POD_GROUP_VERSION, KAI_POD_GROUP_PLURAL, not_found_ok=True,
        )  # fmt: skip
    except PermissionDenied:
        return []
    items = (result or {}).get("items") if isinstance(result, dict) else None
    return [item for item in items if isinstance(item, dict)] if isinstance(items, list) else []


def get_pod_group(kube: Kube, namespace: str, name: str) -> Optional[dict[str, Any]]:
    """The KAI PodGroup `name` in `namespace`, or None (no such PodGroup, or the cluster serves no PodGroup CRD)."""
    return api_call(
        f"reading PodGroup {namespace}/{name}",
        kube.custom().get_namespaced_custom_object,
        KAI_POD_GROUP_GROUP,
        KAI_POD_GROUP_VERSION,
        namespace,
        KAI_POD_GROUP_PLURAL,
        name,
        not_found_ok=True,
    )


def get_pod(kube: Kube, namespace: str, name: str) -> Optional[dict[str, Any]]:
    """The Pod as plain JSON (camelCase keys), or None when there is none."""
    import json

    response = api_call(f"reading pod {namespace}/{name}", kube.core().read_namespaced_pod, name, namespace, _preload_content=False, not_found_ok=True)
    if response is None:
        return None
    try:
        data = json.loads(response.data)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise InfraError(f"reading pod {namespace}/{name}: the Kubernetes API answered something that is not JSON (or nested too deeply)") from None
    return data if isinstance(data, dict) else None
