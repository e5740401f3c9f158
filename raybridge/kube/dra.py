"""Reading a cluster's DRA objects: the ResourceSlices its GPU drivers publish, its DeviceClasses, its ResourceClaims.

Why it exists: a node's GPUs may be DRA devices (`core/dra.py`), so the inventory of a cluster reads these three
lists beside its Nodes and Pods. A cluster that does not serve `resource.k8s.io/v1` (before Kubernetes 1.34, or
with the group off) has no DRA GPUs: the lists are empty. One that forbids reading them leaves DRA GPUs unknown,
which the inventory says in a note.

It also creates, owns and deletes a job's ResourceClaimTemplate (the one object raybridge makes of this group).

What it deliberately does not do: interpret the objects (`core/dra.py` and `core/inventory.py` do).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from raybridge.core.dra import RESOURCE_GROUP, RESOURCE_VERSION
from raybridge.kube.calls import PermissionDenied, api_call, checked_object
from raybridge.kube.client import Kube
from raybridge.kube.objects import list_items


CLAIM_TEMPLATES = "resourceclaimtemplates"


@dataclass(frozen=True)
class DraObjects:
    """A cluster's ResourceSlices, DeviceClasses and ResourceClaims (claims None: not readable), and what could not
    be read, in words."""

    slices: list[dict[str, Any]]
    classes: list[dict[str, Any]]
    claims: Optional[list[dict[str, Any]]]
    notes: tuple[str, ...] = ()


def _list(kube: Kube, plural: str) -> Optional[list[Any]]:
    """Every object of `plural` (cluster-wide), [] where the API is not served, None where it may not be read."""
    what = f"listing {plural}"
    try:
        result = api_call(
            what, kube.custom().list_cluster_custom_object, RESOURCE_GROUP, RESOURCE_VERSION, plural,
            not_found_ok=True, _preload_content=False,
        )  # fmt: skip
    except PermissionDenied:
        return None
    if result is None:
        return []  # the cluster does not serve resource.k8s.io/v1
    return list_items(what, result, kube.server)


def list_dra_objects(kube: Kube) -> DraObjects:
    slices = _list(kube, "resourceslices")
    classes = _list(kube, "deviceclasses")
    claims = _list(kube, "resourceclaims") if slices else []
    notes = tuple(
        f"DRA GPUs unknown: no permission to list {plural} ({RESOURCE_GROUP})"
        for plural, found in (("resourceslices", slices), ("deviceclasses", classes))
        if found is None
    )
    if slices and claims is None:
        notes += (f"free DRA GPUs unknown: no permission to list resourceclaims ({RESOURCE_GROUP})",)
    return DraObjects(slices=slices or [], classes=classes or [], claims=claims, notes=notes)


def create_claim_template(kube: Kube, obj: dict[str, Any]) -> dict[str, Any]:
    """Create a job's ResourceClaimTemplate (strict field validation: nothing is dropped); the stored object."""
    meta = obj["metadata"]
    what = f"creating ResourceClaimTemplate {meta['namespace']}/{meta['name']}"
    result = api_call(
        what, kube.custom().create_namespaced_custom_object, RESOURCE_GROUP, RESOURCE_VERSION, meta["namespace"], CLAIM_TEMPLATES, obj,
        field_validation="Strict",
    )  # fmt: skip
    return checked_object(what, result, "ResourceClaimTemplate", kube.server)


def own_claim_template(kube: Kube, name: str, namespace: str, owner: dict[str, Any]) -> None:
    """Make `owner` (the job's workload, as stored) the template's owner, so deleting the job deletes it too, however
    the job ends (the garbage collector follows ownerReferences)."""
    meta = owner["metadata"]
    reference = {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": meta["name"], "uid": meta["uid"]}
    api_call(
        f"updating ResourceClaimTemplate {namespace}/{name}", kube.custom().patch_namespaced_custom_object,
        RESOURCE_GROUP, RESOURCE_VERSION, namespace, CLAIM_TEMPLATES, name, {"metadata": {"ownerReferences": [reference]}},
    )  # fmt: skip


def delete_claim_template(kube: Kube, name: str, namespace: str) -> None:
    """Delete it; absent already is fine."""
    api_call(
        f"deleting ResourceClaimTemplate {namespace}/{name}", kube.custom().delete_namespaced_custom_object,
        RESOURCE_GROUP, RESOURCE_VERSION, namespace, CLAIM_TEMPLATES, name, not_found_ok=True,
    )  # fmt: skip
