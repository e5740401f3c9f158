"""Server-side printing: the `meta.k8s.io` Table that `kubectl get` asks for, for custom resources.

`kubectl get` sends `Accept: application/json;as=Table;v=v1;g=meta.k8s.io,
...,application/json` and prints the columns the server chose. For a custom
resource kube-apiserver builds them from the CRD version's
`additionalPrinterColumns` (only `Age` when it has none): a `Name` column,
then one per printer column, each cell the first result of the column's
JSONPath, typed by the column (`string` printed as kubectl's JSONPath prints,
`integer`, `number`, `boolean`, `date` as an age such as `5m`); every row
carries the object's metadata as a `PartialObjectMetadata` unless
`includeObject` says otherwise.

Written from apiextensions-apiserver@v0.33.1 pkg/apiserver/helpers.go
(getColumnsForVersion, serveDefaultColumnsIfEmpty),
pkg/registry/customresource/tableconvertor/tableconvertor.go (New,
ConvertToTable, cellForJSONValue), apimachinery@v0.33.1 pkg/api/meta/table
(MetaToTableRow) and pkg/util/duration (HumanDuration), and apiserver@v0.33.1
pkg/endpoints/handlers/response.go (asTable) and rest.go
(AllowsMediaTypeTransform: Table only as JSON or YAML).

What this does not do: built-in kinds get no Table (their printers are Go
code in kubernetes/pkg/printers; the server answers the plain list, which
kubectl accepts from the same Accept header and prints as NAME and AGE); no
Table over watch; JSONPath covers what printer columns use: fields, list
indexes, `[*]` and `[?(@.field=='value')]` filters.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

from .errors import bad_request
from .resources import ResourceType

__all__ = ["wants_table", "to_table", "human_duration"]

_META_VERSIONS = ("v1", "v1beta1")
_OBJECT_META_DESCRIPTIONS = {
    "name": "Name must be unique within a namespace. Is required when creating resources, although some resources "
            "may allow a client to request the generation of an appropriate name automatically. Name is primarily "
            "intended for creation idempotence and configuration definition. Cannot be updated. More info: "
            "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names",
    "creationTimestamp": "CreationTimestamp is a timestamp representing the server time when this object was "
                         "created. It is not guaranteed to be set in happens-before order across separate "
                         "operations. Clients may not set this value. It is represented in RFC3339 form and is in "
                         "UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: "
                         "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata",
}


def wants_table(accept: str | None) -> str | None:
    """The meta.k8s.io version of the Table the Accept header asks for first (None: it asks for no Table first)."""
    for clause in (accept or "").split(","):
        parts = [p.strip() for p in clause.split(";")]
        media, params = parts[0].lower(), dict(p.split("=", 1) for p in parts[1:] if "=" in p)
        if params.get("as") == "Table" and params.get("g") == "meta.k8s.io" and media == "application/json":
            if params.get("v") in _META_VERSIONS:
                return params["v"]
            continue
        if params.get("as"):
            continue  # another transformation (PartialObjectMetadata): not served here
        if media in ("application/json", "application/*", "*/*", "application/yaml"):
            return None
    return None


def _columns(resource: ResourceType, version: str) -> list[dict[str, Any]]:
    assert resource.crd is not None
    for served in resource.crd["spec"]["versions"]:
        if served["name"] == version:
            columns = served.get("additionalPrinterColumns") or []
            if columns:
                return columns
    return [{"name": "Age", "type": "date", "description": _OBJECT_META_DESCRIPTIONS["creationTimestamp"],
             "jsonPath": ".metadata.creationTimestamp"}]


def to_table(resource: ResourceType, version: str, answer: dict[str, Any], meta_version: str,
             include_object: str) -> dict[str, Any]:
    """The Table of a list or of one object of a custom resource (ConvertToTable, then asTable)."""
    if include_object not in ("", "Metadata", "Object", "None"):
        raise bad_request(f'unrecognized includeObject value: "{include_object}"')
    columns = _columns(resource, version)
    definitions = [{"name": "Name", "type": "string", "format": "name",
                    "description": _OBJECT_META_DESCRIPTIONS["name"], "priority": 0}]
    for column in columns:
        definitions.append({
            "name": column["name"], "type": column.get("type", "string"), "format": column.get("format", ""),
            "description": column.get("description")
            or f"Custom resource definition column (in JSONPath format): {column['jsonPath']}",
            "priority": column.get("priority", 0),
        })
    is_list = "items" in answer and answer.get("kind", "").endswith("List")
    items = (answer.get("items") or []) if is_list else [answer]
    metadata: dict[str, Any] = {"resourceVersion": (answer.get("metadata") or {}).get("resourceVersion", "")}
    if is_list:
        for key in ("continue", "remainingItemCount"):
            if (answer.get("metadata") or {}).get(key) is not None:
                metadata[key] = answer["metadata"][key]
    rows = []
    for item in items:
        cells: list[Any] = [(item.get("metadata") or {}).get("name", "")]
        for column in columns:
            cells.append(_cell(column, item))
        row: dict[str, Any] = {"cells": cells}
        if include_object in ("", "Metadata"):
            row["object"] = {"kind": "PartialObjectMetadata", "apiVersion": f"meta.k8s.io/{meta_version}",
                             "metadata": item.get("metadata") or {}}
        elif include_object == "Object":
            row["object"] = item
        rows.append(row)
    return {"kind": "Table", "apiVersion": f"meta.k8s.io/{meta_version}", "metadata": metadata,
            "columnDefinitions": definitions, "rows": rows}


def _cell(column: dict[str, Any], obj: dict[str, Any]) -> Any:
    """One cell: the first JSONPath result, by the column's type (cellForJSONValue)."""
    try:
        results = json_path(column.get("jsonPath", ""), obj)
    except ValueError:
        return None
    if not results:
        return None
    value, kind = results[0], column.get("type", "string")
    if kind == "string":
        return go_print(value)
    if value is None:
        return None
    if kind == "integer" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return int(value)
    if kind == "number" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if kind == "boolean" and isinstance(value, bool):
        return value
    if kind == "date" and isinstance(value, str):
        try:
            stamp = dt.datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.timezone.utc)
        except ValueError:
            return "<invalid>"
        return human_duration((dt.datetime.now(dt.timezone.utc) - stamp).total_seconds())
    return None


def go_print(value: Any) -> str:
    """How client-go's JSONPath prints a value (fmt.Fprint of the decoded JSON)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "<nil>"
    if isinstance(value, float) and value == int(value) and abs(value) < 1e21:
        return str(int(value))
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{go_print(v)}" for k, v in sorted(value.items())) + "]"
    if isinstance(value, list):
        return "[" + " ".join(go_print(v) for v in value) + "]"
    return str(value)


_STEP = re.compile(r"""\.([^.\[]+)|\[(\d+|\*)\]|\[\?\(@\.([\w.-]+)\s*==\s*(['"])(.*?)\4\)\]""")


def json_path(path: str, obj: Any) -> list[Any]:
    """The results of a printer column's JSONPath (missing keys give no result, as AllowMissingKeys does)."""
    path = path.strip()
    if path.startswith("{") and path.endswith("}"):
        path = path[1:-1]
    position, current = 0, [obj]
    while position < len(path):
        match = _STEP.match(path, position)
        if match is None:
            raise ValueError(f"unrecognized column definition {path!r}")
        position = match.end()
        key, index, filter_key, _, filter_value = match.groups()
        found: list[Any] = []
        for value in current:
            if key is not None and isinstance(value, dict) and key in value:
                found.append(value[key])
            elif index == "*" and isinstance(value, list):
                found += value
            elif index is not None and index != "*" and isinstance(value, list) and int(index) < len(value):
                found.append(value[int(index)])
            elif filter_key is not None and isinstance(value, list):
                for item in value:
                    target = item
                    for part in filter_key.split("."):
                        target = target.get(part) if isinstance(target, dict) else None
                    if target is not None and go_print(target) == filter_value:
                        found.append(item)
        current = found
    return current


def human_duration(seconds: float) -> str:
    """duration.HumanDuration."""
    whole = int(seconds)
    if whole < -1:
        return "<invalid>"
    if whole < 0:
        return "0s"
    if whole < 120:
        return f"{whole}s"
    minutes = whole // 60
    if minutes < 10:
        rest = whole % 60
        return f"{minutes}m" if rest == 0 else f"{minutes}m{rest}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = whole // 3600
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h" if rest == 0 else f"{hours}h{rest}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rest = hours % 24
        return f"{hours // 24}d" if rest == 0 else f"{hours // 24}d{rest}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        rest = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if rest == 0 else f"{hours // 24 // 365}y{rest}d"
    return f"{hours // 24 // 365}y"
