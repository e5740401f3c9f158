"""The OpenAPI v3 documents the test API server publishes, for clients such as kubectl.

kubectl reads `/openapi/v3` before it writes: `apply`, `create` and
`replace` look in a group-version's document for the PATCH operation of the
object's kind and, when it lists the `fieldValidation` query parameter, leave
validation to the server (`--validate=strict` becomes `fieldValidation=Strict`;
cli-runtime@v0.33.1 pkg/resource/query_param_verifier_v3.go,
supportsQueryParamV3); a client-side `apply` that updates a built-in object
computes its strategic merge patch from the document's schemas when the PATCH
operation accepts `application/strategic-merge-patch+json`
(kubectl@v0.33.1 pkg/cmd/apply/patcher.go, gvkSupportsPatchOpenAPIV3).

What is served, as kube-apiserver v1.33 serves it:
* `/openapi/v3`: `{"paths": {"api/v1": {"serverRelativeURL":
  "/openapi/v3/api/v1?hash=<SHA-512>"}, "apis/<group>/<version>": ...}}`, one
  entry per served group-version (kube-openapi pkg/handler3/handler.go,
  HandleDiscovery, constructServerRelativeURL, computeETag);
* `/openapi/v3/<gv>`: JSON (406 when the client accepts neither JSON nor
  anything), an `Etag`, and with the current `hash` `Cache-Control: public,
  immutable`; another hash is a 301 to the current one (HandleGroupVersion).
  Each document has the resource paths (collection, item, status) with the
  operations kube-apiserver routes (apiserver@v0.33.1 pkg/endpoints/installer.go
  registerResourceHandlers: operation ids, `x-kubernetes-action`,
  `x-kubernetes-group-version-kind`, the Create/Update/Patch/Delete/List
  options as query parameters, the patch media types: built-in kinds take
  strategic merge patch, custom resources do not, as
  apiextensions-apiserver@v0.33.1 pkg/controller/openapi/builder/builder.go
  buildRoute has it) and the schemas they reference: built-in kinds from
  Kubernetes' own definitions (the `kubernetes-validate` package, converted
  back to OpenAPI v3: nullable type lists collapsed, references into
  `#/components/schemas/`), custom resources from their CRD's
  `openAPIV3Schema` with `apiVersion`, `kind` and `metadata` added and named
  `io.ray.v1.RayJob` (builder.go buildKubeNative, ToRESTFriendlyName).

What this does not do: no protobuf and no `/openapi/v2` (client-go asks for
v2 in protobuf only and falls back to it only when v3 fails); no watch or
connect paths, no descriptions on operations, and the built-in schemas are
those of the newest Kubernetes the `kubernetes-validate` package knows.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
from typing import Any, Iterable

from .resources import ResourceRegistry, ResourceType
from .validation import builtin_definitions, served_schema

__all__ = ["OpenApiV3"]

_PREFIX = "#/components/schemas/"
_META = "io.k8s.apimachinery.pkg.apis.meta.v1."
_JSON_PATCH, _MERGE_PATCH = "application/json-patch+json", "application/merge-patch+json"
_STRATEGIC_PATCH, _APPLY_PATCH = "application/strategic-merge-patch+json", "application/apply-patch+yaml"

_STRING = {"type": "string"}
_QUERY_OPTIONS: dict[str, list[tuple[str, dict[str, Any]]]] = {
    "get": [("resourceVersion", _STRING)],
    "list": [("allowWatchBookmarks", {"type": "boolean"}), ("continue", _STRING), ("fieldSelector", _STRING),
             ("labelSelector", _STRING), ("limit", {"type": "integer"}), ("resourceVersion", _STRING),
             ("resourceVersionMatch", _STRING), ("sendInitialEvents", {"type": "boolean"}),
             ("timeoutSeconds", {"type": "integer"}), ("watch", {"type": "boolean"})],
    "post": [("dryRun", _STRING), ("fieldManager", _STRING), ("fieldValidation", _STRING)],
    "put": [("dryRun", _STRING), ("fieldManager", _STRING), ("fieldValidation", _STRING)],
    "patch": [("dryRun", _STRING), ("fieldManager", _STRING), ("fieldValidation", _STRING),
              ("force", {"type": "boolean"})],
    "delete": [("dryRun", _STRING), ("gracePeriodSeconds", {"type": "integer"}),
               ("ignoreStoreReadErrorWithClusterBreakingPotential", {"type": "boolean"}),
               ("orphanDependents", {"type": "boolean"}), ("propagationPolicy", _STRING)],
}
_QUERY_OPTIONS["deletecollection"] = _QUERY_OPTIONS["delete"] + _QUERY_OPTIONS["list"]


def gv_path(group: str, version: str) -> str:
    """The key of a group-version in `/openapi/v3`: `api/v1`, `apis/ray.io/v1`."""
    return f"apis/{group}/{version}" if group else f"api/{version}"


def _etag(data: bytes) -> str:
    return hashlib.sha512(data).hexdigest().upper()


class OpenApiV3:
    """The `/openapi/v3` discovery document and one document per served group-version, made once."""

    def __init__(self, registry: ResourceRegistry) -> None:
        self.registry = registry
        self._documents: dict[str, tuple[bytes, str]] = {}
        self._discovery: bytes | None = None

    def discovery(self) -> bytes:
        if self._discovery is None:
            paths = {}
            for group, version in sorted(self.registry.group_versions()):
                key = gv_path(group, version)
                _, etag = self.document(key) or (b"", "")
                paths[key] = {"serverRelativeURL": f"/openapi/v3/{key}?hash={etag}"}
            self._discovery = json.dumps({"paths": paths}).encode()
        return self._discovery

    def document(self, key: str) -> tuple[bytes, str] | None:
        """(JSON bytes, etag) of one group-version's document; None when that group-version is not served."""
        if key in self._documents:
            return self._documents[key]
        parts = key.split("/")
        if parts[:1] == ["api"] and len(parts) == 2:
            group, version = "", parts[1]
        elif parts[:1] == ["apis"] and len(parts) == 3:
            group, version = parts[1], parts[2]
        else:
            return None
        if (group, version) not in self.registry.group_versions():
            return None
        resources = [r for r in self.registry.types if r.group == group and version in r.versions]
        data = json.dumps(_document(group, version, resources)).encode()
        self._documents[key] = (data, _etag(data))
        return self._documents[key]


# --- the document of one group-version -----------------------------------------------------------


def _document(group: str, version: str, resources: list[ResourceType]) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    schemas: dict[str, Any] = {}
    roots = [f"{_META}{name}" for name in ("Status", "Patch", "DeleteOptions", "ObjectMeta", "ListMeta")]
    for resource in sorted(resources, key=lambda r: r.plural):
        if resource.crd is not None:
            kind_name, list_name = _custom_schemas(resource, version, schemas)
        else:
            kind_name = _builtin_name(group, version, resource.kind)
            list_name = _builtin_name(group, version, f"{resource.kind}List")
            roots += [n for n in (kind_name, list_name) if n]
        if kind_name:
            paths.update(_resource_paths(resource, group, version, kind_name, list_name))
    _add_builtin(roots, schemas)
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "unversioned"},
        "paths": paths,
        "components": {"schemas": dict(sorted(schemas.items()))},
    }


def _group_words(group: str) -> list[str]:
    """The words of a group as operation ids spell them (".k8s.io" dropped, "" is "core")."""
    stem = group[: -len(".k8s.io")] if group.endswith(".k8s.io") else group or "core"
    return [w for part in stem.split(".") for w in part.split("-") if w]


def _operation_id(verb: str, group: str, version: str, rest: str) -> str:
    """GetOperationIDAndTags (apiserver@v0.33.1 pkg/endpoints/openapi/openapi.go): the verb, the group and
    version capitalised, then the rest (`deletecollection` splits as `delete` + `Collection...`)."""
    if verb == "deletecollection":
        verb, rest = "delete", "Collection" + rest
    words = [*_group_words(group), version]
    return verb + "".join(w[:1].upper() + w[1:] for w in words) + rest


def _tag(group: str, version: str) -> str:
    words = _group_words(group)
    return words[0] + "".join(w[:1].upper() + w[1:] for w in words[1:]) + "_" + version


def _ref(name: str) -> dict[str, Any]:
    return {"$ref": _PREFIX + name}


def _content(name: str) -> dict[str, Any]:
    return {"application/json": {"schema": _ref(name)}, "application/yaml": {"schema": _ref(name)}}


def _operation(resource: ResourceType, group: str, version: str, action: str, verb: str, answer: str,
               subresource: str = "", *, all_namespaces: bool = False) -> dict[str, Any]:
    scope = "Namespaced" if resource.namespaced and not all_namespaces else ""
    suffix = "ForAllNamespaces" if all_namespaces else ""
    operation: dict[str, Any] = {
        "tags": [_tag(group, version)],
        "operationId": _operation_id(verb, group, version, f"{scope}{resource.kind}{subresource.title()}{suffix}"),
        "parameters": [{"name": name, "in": "query", "schema": schema, "uniqueItems": True}
                       for name, schema in _QUERY_OPTIONS.get(action, [])],
        "responses": {"200": {"description": "OK", "content": _content(answer)}},
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": {"group": group, "version": version, "kind": resource.kind},
    }
    if action == "patch":
        media = [_JSON_PATCH, _MERGE_PATCH] + ([] if resource.crd is not None else [_STRATEGIC_PATCH]) + [_APPLY_PATCH]
        operation["requestBody"] = {"content": {m: {"schema": _ref(f"{_META}Patch")} for m in media}, "required": True}
        operation["responses"]["201"] = {"description": "Created", "content": _content(answer)}
    elif action in ("post", "put"):
        operation["requestBody"] = {"content": {"*/*": {"schema": _ref(answer)}}, "required": True}
        operation["responses"]["201"] = {"description": "Created", "content": _content(answer)}
        if action == "post":
            operation["responses"]["202"] = {"description": "Accepted", "content": _content(answer)}
    elif action in ("delete", "deletecollection"):
        operation["requestBody"] = {"content": {"*/*": {"schema": _ref(f"{_META}DeleteOptions")}}}
    return operation


def _resource_paths(resource: ResourceType, group: str, version: str, kind_name: str,
                    list_name: str | None) -> dict[str, Any]:
    """The collection, item and status paths of a resource, with the operations its verbs allow."""
    root = f"/apis/{group}/{version}" if group else f"/api/{version}"
    scope = f"{root}/namespaces/{{namespace}}" if resource.namespaced else root
    collection, item = f"{scope}/{resource.plural}", f"{scope}/{resource.plural}/{{name}}"
    path_params = [{"name": "pretty", "in": "query", "schema": _STRING, "uniqueItems": True}]
    scoped = ([{"name": "namespace", "in": "path", "required": True, "schema": _STRING, "uniqueItems": True}]
              if resource.namespaced else [])
    named = [{"name": "name", "in": "path", "required": True, "schema": _STRING, "uniqueItems": True}]
    listing = list_name or kind_name
    status = f"{_META}Status"
    paths: dict[str, Any] = {}
    if resource.create_only:
        paths[collection] = {"post": _operation(resource, group, version, "post", "create", kind_name),
                             "parameters": path_params}
        return paths
    read_only = resource.read_only
    collection_ops: dict[str, Any] = {"get": _operation(resource, group, version, "list", "list", listing)}
    if not read_only:
        collection_ops["post"] = _operation(resource, group, version, "post", "create", kind_name)
        collection_ops["delete"] = _operation(resource, group, version, "deletecollection", "deletecollection", status)
    paths[collection] = {**collection_ops, "parameters": scoped + path_params}
    item_ops: dict[str, Any] = {"get": _operation(resource, group, version, "get", "read", kind_name)}
    if not read_only:
        item_ops["put"] = _operation(resource, group, version, "put", "replace", kind_name)
        item_ops["patch"] = _operation(resource, group, version, "patch", "patch", kind_name)
        item_ops["delete"] = _operation(resource, group, version, "delete", "delete", status)
    paths[item] = {**item_ops, "parameters": named + scoped + path_params}
    if resource.has_status:
        status_ops: dict[str, Any] = {"get": _operation(resource, group, version, "get", "read", kind_name, "status")}
        if not read_only:
            status_ops["put"] = _operation(resource, group, version, "put", "replace", kind_name, "status")
            status_ops["patch"] = _operation(resource, group, version, "patch", "patch", kind_name, "status")
        paths[f"{item}/status"] = {**status_ops, "parameters": named + scoped + path_params}
    if resource.namespaced:
        paths[f"{root}/{resource.plural}"] = {
            "get": _operation(resource, group, version, "list", "list", listing, all_namespaces=True),
            "parameters": path_params,
        }
    return paths


# --- schemas -----------------------------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def _builtin_index() -> dict[tuple[str, str, str], str]:
    """(group, version, kind) -> definition name, from the definitions' x-kubernetes-group-version-kind."""
    index: dict[tuple[str, str, str], str] = {}
    for name, definition in builtin_definitions().items():
        for gvk in definition.get("x-kubernetes-group-version-kind") or []:
            index.setdefault((gvk.get("group", ""), gvk.get("version", ""), gvk.get("kind", "")), name)
    return index


def _builtin_name(group: str, version: str, kind: str) -> str | None:
    return _builtin_index().get((group, version, kind))


@functools.lru_cache(maxsize=None)
def _converted(name: str) -> tuple[dict[str, Any], tuple[str, ...]]:
    """A Kubernetes definition in OpenAPI v3 form, and the definitions it references."""
    references: list[str] = []
    return _to_openapi(builtin_definitions()[name], references), tuple(references)


def _to_openapi(node: Any, references: list[str]) -> Any:
    """Undo the JSON-Schema conversion of the kubernetes-validate package: type lists with null, `$defs`
    references, `additionalProperties: false` and the apiVersion/kind enums it adds."""
    if isinstance(node, list):
        return [_to_openapi(item, references) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "$ref" and isinstance(value, str):
            name = value.rpartition("/")[2]
            references.append(name)
            out[key] = _PREFIX + name
        elif key == "type" and isinstance(value, list):
            kinds = [t for t in value if t != "null"]
            out[key] = kinds[0] if len(kinds) == 1 else kinds
        elif key == "enum" or (key == "additionalProperties" and value is False):
            continue
        elif key == "properties" and isinstance(value, dict):
            out[key] = {k: _to_openapi(v, references) for k, v in value.items()}
        else:
            out[key] = _to_openapi(value, references)
    return out


def _add_builtin(roots: Iterable[str], schemas: dict[str, Any]) -> None:
    """Add `roots` and every definition they reference, transitively."""
    pending = [r for r in roots if r in builtin_definitions()]
    while pending:
        name = pending.pop()
        if name in schemas:
            continue
        schema, references = _converted(name)
        schemas[name] = schema
        pending += [r for r in references if r not in schemas]


def rest_friendly_name(group: str, version: str, kind: str) -> str:
    """util.ToRESTFriendlyName of `group/version/kind`: the group's domain reversed (`io.ray.v1.RayJob`)."""
    return ".".join([*reversed(group.split(".")), version, kind])


def _custom_schemas(resource: ResourceType, version: str, schemas: dict[str, Any]) -> tuple[str, str]:
    """The object and list schemas of a custom resource (buildKubeNative, buildListSchema)."""
    assert resource.crd is not None
    names = resource.crd["spec"]["names"]
    gvk = [{"group": resource.group, "version": version, "kind": resource.kind}]
    kind_name = rest_friendly_name(resource.group, version, resource.kind)
    list_kind = names.get("listKind") or f"{resource.kind}List"
    list_name = rest_friendly_name(resource.group, version, list_kind)
    schema = copy.deepcopy(served_schema(resource.crd, version)) or {"type": "object"}
    properties = schema.setdefault("properties", {})
    properties["apiVersion"] = {"type": "string", "description": "APIVersion defines the versioned schema of this "
                                                                  "representation of an object."}
    properties["kind"] = {"type": "string", "description": "Kind is a string value representing the REST resource "
                                                            "this object represents."}
    properties["metadata"] = {"allOf": [_ref(f"{_META}ObjectMeta")],
                              "description": "Standard object's metadata."}
    schema["x-kubernetes-group-version-kind"] = gvk
    schemas[kind_name] = schema
    schemas[list_name] = {
        "type": "object",
        "required": ["items"],
        "properties": {
            "apiVersion": properties["apiVersion"],
            "items": {"type": "array", "items": _ref(kind_name),
                      "description": f"List of {names['plural']}. More info: "
                                     "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md"},
            "kind": properties["kind"],
            "metadata": {"allOf": [_ref(f"{_META}ListMeta")], "description": "Standard list metadata."},
        },
        "x-kubernetes-group-version-kind": [{"group": resource.group, "version": version, "kind": list_kind}],
    }
    return kind_name, list_name


# --- /openapi/v2: an empty document, for kubectl 1.27 and 1.28 -----------------------------------

V2_PROTOBUF = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
_V2_ACCEPTED = {"application/json": "application/json",
                "application/com.github.proto-openapi.spec.v2@v1.0+protobuf": V2_PROTOBUF,
                V2_PROTOBUF: V2_PROTOBUF}


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field (wire type 2); payloads here are shorter than 128 bytes."""
    assert len(payload) < 128
    return bytes([number << 3 | 2, len(payload)]) + payload


def openapi_v2(accept: str | None, version: str) -> tuple[bytes, str] | None:
    """The `/openapi/v2` document in the first acceptable form (None: 406), with no paths and no definitions.

    kubectl 1.27 and 1.28 download it (in protobuf only: client-go's
    OpenAPISchema asks for gnostic's openapi_v2.Document) before they check
    `fieldValidation` support in v3, and fail without it (kubectl@v0.27.16
    pkg/cmd/util/factory_client_access.go, Validator); later kubectl versions
    read v2 only when v3 fails. What they do with it here: nothing (v3
    answers first); a client that wants schemas from v2 finds none, and
    kubectl then computes strategic merge patches from its compiled-in types.
    Media types as kube-openapi pkg/handler/handler.go serves them.
    """
    for clause in (accept or "*/*").split(","):
        media = clause.split(";")[0].strip().lower()
        if media in ("*/*", "application/*"):
            media = "application/json"
        if media not in _V2_ACCEPTED:
            continue
        if _V2_ACCEPTED[media] == "application/json":
            document = {"swagger": "2.0", "info": {"title": "Kubernetes", "version": version}, "paths": {}}
            return json.dumps(document).encode(), "application/json"
        info = _field(1, b"Kubernetes") + _field(2, version.encode())
        return _field(1, b"2.0") + _field(2, info) + _field(8, b""), V2_PROTOBUF
    return None
