"""Which resources the test API server serves, and its discovery documents.

A `ResourceType` says what the REST layer needs to know about one resource:
group, served versions, kind, plural, scope, whether it has a status
subresource, and the few per-resource switches the real registry has (name
rule, whether DELETE returns the object, whether PUT may create, the default
deletion propagation, the field selectors it indexes). Built-in types come
from a fixed table; custom resources from CRD objects (scope, names, served
versions and status subresource are read from the CRD).

What this does not do: no scale subresource, no aggregated discovery
(`apidiscovery.k8s.io/v2`), no OpenAPI documents, and CustomResourceDefinitions
themselves are served read-only (the set of CRDs is fixed when the server is
built).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
READ_VERBS = ("get", "list", "watch")


@dataclass(frozen=True)
class ResourceType:
    group: str  # "" for the core group
    versions: tuple[str, ...]  # served versions
    storage_version: str
    kind: str
    plural: str
    singular: str
    namespaced: bool
    has_status: bool
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    field_labels: frozenset[str] = frozenset()
    name_rule: str = "subdomain"
    returns_deleted_object: bool = False
    allow_create_on_update: bool = False
    tracks_generation: bool = False
    orphan_by_default: bool = False
    read_only: bool = False
    create_only: bool = False  # reviews: POST only, nothing stored
    crd: dict[str, Any] | None = field(default=None, compare=False, hash=False, repr=False)
    # (subresource name, kind, verbs) beyond "status", for discovery.
    extra_subresources: tuple[tuple[str, str, tuple[str, ...]], ...] = ()

    @property
    def is_custom(self) -> bool:
        return self.crd is not None

    def api_version(self, version: str) -> str:
        return f"{self.group}/{version}" if self.group else version

    @property
    def storage_api_version(self) -> str:
        return self.api_version(self.storage_version)

    @property
    def qualified_kind(self) -> str:
        return f"{self.kind}.{self.group}" if self.group else self.kind

    def supports_field(self, label: str) -> bool:
        return label in ("metadata.name", "metadata.namespace") or label in self.field_labels

    def unsupported_field_message(self, label: str) -> str:
        if self.is_custom:
            known = ", ".join(f'"{f}"' for f in ["metadata.name", "metadata.namespace", *sorted(self.field_labels)])
            return f'"{label}" is not a known field selector: only {known}'
        return f"field label not supported: {label}"


_POD_FIELDS = frozenset(
    {
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "spec.hostNetwork",
        "status.phase",
        "status.podIP",
        "status.nominatedNodeName",
    }
)
_EVENT_FIELDS = frozenset(
    {
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    }
)


def _core(kind: str, plural: str, namespaced: bool, has_status: bool, **extra: Any) -> ResourceType:
    return ResourceType("", ("v1",), "v1", kind, plural, kind.lower(), namespaced, has_status, **extra)


BUILTIN_TYPES: tuple[ResourceType, ...] = (
    _core("Namespace", "namespaces", False, True, short_names=("ns",), name_rule="label",
          field_labels=frozenset({"status.phase"}), extra_subresources=(("finalize", "Namespace", ("update",)),)),
    _core("Node", "nodes", False, True, short_names=("no",), field_labels=frozenset({"spec.unschedulable"})),
    _core("Pod", "pods", True, True, short_names=("po",), categories=("all",), field_labels=_POD_FIELDS,
          returns_deleted_object=True, tracks_generation=True,
          extra_subresources=(("log", "Pod", ("get",)), ("portforward", "PodPortForwardOptions", ("create", "get")))),
    _core("Service", "services", True, True, short_names=("svc",), categories=("all",), name_rule="dns1035",
          returns_deleted_object=True, field_labels=frozenset({"spec.clusterIP", "spec.type"})),
    _core("Endpoints", "endpoints", True, False, short_names=("ep",), allow_create_on_update=True),
    _core("Event", "events", True, False, short_names=("ev",), field_labels=_EVENT_FIELDS, allow_create_on_update=True),
    _core("ConfigMap", "configmaps", True, False, short_names=("cm",)),
    _core("PodTemplate", "podtemplates", True, False),
    _core("Secret", "secrets", True, False, field_labels=frozenset({"type"})),
    _core("ServiceAccount", "serviceaccounts", True, False, short_names=("sa",), returns_deleted_object=True,
          extra_subresources=(("token", "TokenRequest", ("create",)),)),
    ResourceType("apps", ("v1",), "v1", "Deployment", "deployments", "deployment", True, True,
                 short_names=("deploy",), categories=("all",), tracks_generation=True),
    ResourceType("batch", ("v1",), "v1", "Job", "jobs", "job", True, True, categories=("all",),
                 field_labels=frozenset({"status.successful"}), tracks_generation=True, orphan_by_default=True),
    ResourceType("coordination.k8s.io", ("v1",), "v1", "Lease", "leases", "lease", True, False,
                 allow_create_on_update=True),
    ResourceType("scheduling.k8s.io", ("v1",), "v1", "PriorityClass", "priorityclasses", "priorityclass", False,
                 False, short_names=("pc",)),
    ResourceType("rbac.authorization.k8s.io", ("v1",), "v1", "Role", "roles", "role", True, False, name_rule="path"),
    ResourceType("rbac.authorization.k8s.io", ("v1",), "v1", "RoleBinding", "rolebindings", "rolebinding", True, False,
                 name_rule="path"),
    ResourceType("rbac.authorization.k8s.io", ("v1",), "v1", "ClusterRole", "clusterroles", "clusterrole", False,
                 False, name_rule="path"),
    ResourceType("rbac.authorization.k8s.io", ("v1",), "v1", "ClusterRoleBinding", "clusterrolebindings",
                 "clusterrolebinding", False, False, name_rule="path"),
    ResourceType("authorization.k8s.io", ("v1",), "v1", "SelfSubjectAccessReview", "selfsubjectaccessreviews",
                 "selfsubjectaccessreview", False, False, create_only=True),
    ResourceType("apiextensions.k8s.io", ("v1",), "v1", "CustomResourceDefinition", "customresourcedefinitions",
                 "customresourcedefinition", False, True, short_names=("crd", "crds"), read_only=True),
)


def from_crd(crd: dict[str, Any]) -> ResourceType:
    spec = crd["spec"]
    names = spec["names"]
    served = [v for v in spec["versions"] if v.get("served", True)]
    storage = next((v["name"] for v in spec["versions"] if v.get("storage")), served[0]["name"])
    field_labels = {
        selectable["jsonPath"].lstrip(".") for v in served for selectable in v.get("selectableFields") or []
    }
    return ResourceType(
        group=spec["group"],
        versions=tuple(v["name"] for v in served),
        storage_version=storage,
        kind=names["kind"],
        plural=names["plural"],
        singular=names.get("singular", names["kind"].lower()),
        namespaced=spec.get("scope", "Namespaced") == "Namespaced",
        has_status=any("status" in (v.get("subresources") or {}) for v in served),
        short_names=tuple(names.get("shortNames") or ()),
        categories=tuple(names.get("categories") or ()),
        field_labels=frozenset(field_labels),
        tracks_generation=True,
        crd=crd,
    )


_VERSION = re.compile(r"^v(\d+)(?:(alpha|beta)(\d+))?$")


def version_priority(version: str) -> tuple[int, int, int, str]:
    """Sort key for Kubernetes version names: v2 > v1 > v1beta2 > v1beta1 > v1alpha1 > others."""
    match = _VERSION.match(version)
    if not match:
        return (3, 0, 0, version)
    major, stage, minor = match.groups()
    rank = {None: 0, "beta": 1, "alpha": 2}[stage]
    return (rank, -int(major), -int(minor or 0), version)


class ResourceRegistry:
    """The served resource types, looked up by URL parts or by (apiVersion, kind)."""

    def __init__(self, types: Iterable[ResourceType]) -> None:
        self._by_plural: dict[tuple[str, str], ResourceType] = {}
        self._by_kind: dict[tuple[str, str], ResourceType] = {}
        for resource in types:
            self._by_plural[(resource.group, resource.plural)] = resource
            self._by_kind[(resource.group, resource.kind)] = resource

    @property
    def types(self) -> list[ResourceType]:
        return list(self._by_plural.values())

    def by_plural(self, group: str, version: str, plural: str) -> ResourceType | None:
        resource = self._by_plural.get((group, plural))
        return resource if resource and version in resource.versions else None

    def by_kind(self, api_version: str, kind: str) -> ResourceType | None:
        group, _, version = api_version.rpartition("/")
        resource = self._by_kind.get((group, kind))
        return resource if resource and version in resource.versions else None

    def groups(self) -> dict[str, list[str]]:
        """group -> served versions, preferred first (core group excluded)."""
        found: dict[str, set[str]] = {}
        for resource in self._by_plural.values():
            if resource.group:
                found.setdefault(resource.group, set()).update(resource.versions)
        return {group: sorted(versions, key=version_priority) for group, versions in sorted(found.items())}

    def group_versions(self) -> set[tuple[str, str]]:
        return {(r.group, v) for r in self._by_plural.values() for v in r.versions}

    # --- discovery documents -------------------------------------------------

    def api_versions(self, server_address: str) -> dict[str, Any]:
        return {
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
        }

    def _group_entry(self, group: str, versions: list[str]) -> dict[str, Any]:
        listed = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
        return {"name": group, "versions": listed, "preferredVersion": listed[0]}

    def api_group_list(self) -> dict[str, Any]:
        return {
            "kind": "APIGroupList",
            "apiVersion": "v1",
            "groups": [self._group_entry(g, v) for g, v in self.groups().items()],
        }

    def api_group(self, group: str) -> dict[str, Any] | None:
        versions = self.groups().get(group)
        if not versions:
            return None
        return {"kind": "APIGroup", "apiVersion": "v1", **self._group_entry(group, versions)}

    def api_resource_list(self, group: str, version: str) -> dict[str, Any] | None:
        if (group, version) not in self.group_versions():
            return None
        resources: list[dict[str, Any]] = []
        for resource in sorted(self._by_plural.values(), key=lambda r: r.plural):
            if resource.group != group or version not in resource.versions:
                continue
            entry: dict[str, Any] = {
                "name": resource.plural,
                "singularName": resource.singular,
                "namespaced": resource.namespaced,
                "kind": resource.kind,
                "verbs": ["create"] if resource.create_only else list(READ_VERBS if resource.read_only else ALL_VERBS),
            }
            if resource.short_names:
                entry["shortNames"] = list(resource.short_names)
            if resource.categories:
                entry["categories"] = list(resource.categories)
            resources.append(entry)
            if resource.has_status:
                resources.append(
                    {
                        "name": f"{resource.plural}/status",
                        "singularName": "",
                        "namespaced": resource.namespaced,
                        "kind": resource.kind,
                        "verbs": ["get"] if resource.read_only else ["get", "patch", "update"],
                    }
                )
            for sub, kind, verbs in resource.extra_subresources:
                resources.append(
                    {
                        "name": f"{resource.plural}/{sub}",
                        "singularName": "",
                        "namespaced": resource.namespaced,
                        "kind": kind,
                        "verbs": list(verbs),
                    }
                )
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": f"{group}/{version}" if group else version,
            "resources": resources,
        }
