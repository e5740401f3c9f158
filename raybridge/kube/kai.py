"""KAI-Scheduler's Queue objects as raybridge reads them.

Read-only: lists the cluster's `scheduling.run.ai/v2` Queues through the
official client's CustomObjectsApi, as plain dicts. What they mean is
`raybridge.core.kai_queue`'s business; errors become raybridge errors through
`api_call`; a cluster without the Queue CRD (404) is told apart. Calls get
the client's default request timeout (`connect`).
"""

from __future__ import annotations

from typing import Any

from raybridge.core.consts import KAI_QUEUE_GROUP, KAI_QUEUE_VERSION
from raybridge.errors import InfraError
from raybridge.kube.client import Kube, api_call


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
