"""KubeRay's `ray.io/v1` objects through `CustomObjectsApi`: the one small module for them.

The KubeRay python client is not published, so raybridge talks to the CRDs
directly: create, get, list, merge-patch and delete RayJobs and RayClusters.
Errors come back as raybridge errors (see `kube.client.api_call`).
"""

from __future__ import annotations

from typing import Any, Optional

from raybridge.core.consts import RAY_API_GROUP, RAY_API_VERSION
from raybridge.kube.client import Kube, api_call

PLURALS = {"RayJob": "rayjobs", "RayCluster": "rayclusters"}


class RayObjects:
    def __init__(self, kube: Kube) -> None:
        self.api = kube.custom()

    def create(self, obj: dict[str, Any], field_validation: str = "Strict") -> dict[str, Any]:
        """Create with `fieldValidation=Strict`: a field this KubeRay release does not know is refused (400),
        never dropped with a warning, so nothing is created that differs from what was asked."""
        kind, meta = obj["kind"], obj["metadata"]
        return api_call(
            f"creating {kind} {meta['namespace']}/{meta['name']}",
            self.api.create_namespaced_custom_object,
            RAY_API_GROUP, RAY_API_VERSION, meta["namespace"], PLURALS[kind], obj,
            field_validation=field_validation,
        )  # type: ignore[return-value]  # fmt: skip

    def get(self, kind: str, name: str, namespace: str) -> Optional[dict[str, Any]]:
        return api_call(
            f"reading {kind} {namespace}/{name}",
            self.api.get_namespaced_custom_object,
            RAY_API_GROUP, RAY_API_VERSION, namespace, PLURALS[kind], name,
            not_found_ok=True,
        )  # fmt: skip

    def list(self, kind: str, namespace: Optional[str], label_selector: str = "") -> list[dict[str, Any]]:
        if namespace:
            result = api_call(
                f"listing {kind}s", self.api.list_namespaced_custom_object,
                RAY_API_GROUP, RAY_API_VERSION, namespace, PLURALS[kind], label_selector=label_selector,
            )  # fmt: skip
        else:
            result = api_call(
                f"listing {kind}s", self.api.list_cluster_custom_object,
                RAY_API_GROUP, RAY_API_VERSION, PLURALS[kind], label_selector=label_selector,
            )  # fmt: skip
        return list((result or {}).get("items") or [])

    def patch(self, kind: str, name: str, namespace: str, patch: dict[str, Any]) -> dict[str, Any]:
        """A JSON merge patch (what the client sends for a dict body)."""
        return api_call(
            f"updating {kind} {namespace}/{name}",
            self.api.patch_namespaced_custom_object,
            RAY_API_GROUP, RAY_API_VERSION, namespace, PLURALS[kind], name, patch,
        )  # type: ignore[return-value]  # fmt: skip

    def delete(self, kind: str, name: str, namespace: str) -> bool:
        """Delete with background propagation (the RayCluster and Workload follow); False if absent."""
        from kubernetes import client

        result = api_call(
            f"deleting {kind} {namespace}/{name}",
            self.api.delete_namespaced_custom_object,
            RAY_API_GROUP, RAY_API_VERSION, namespace, PLURALS[kind], name,
            body=client.V1DeleteOptions(propagation_policy="Background"),
            not_found_ok=True,
        )  # fmt: skip
        return result is not None
