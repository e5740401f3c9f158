"""The three PATCH dialects the API server speaks, on plain JSON values.

* JSON merge patch (RFC 7386): objects merge, `null` deletes, lists replace.
* JSON patch (RFC 6902): add/remove/replace/move/copy/test with JSON pointers.
* Strategic merge patch, for built-in kinds only: like a merge patch, but lists
  that Kubernetes declares mergeable (containers by `name`, volumeMounts by
  `mountPath`, conditions by `type`, ...) merge element-wise, primitive lists
  with the merge strategy (finalizers) are unioned, and the `$patch`,
  `$retainKeys`, `$deleteFromPrimitiveList/` and `$setElementOrder/` directives
  are understood.

What this does not do: the strategic merge keys come from a table keyed by
field name (built from the Go struct tags of core/apps/batch), not from an
OpenAPI document; `$setElementOrder` is accepted and ignored. Server-side apply
lives in ssa.py (it uses the same merge-key table for built-in kinds).
"""

from __future__ import annotations

import copy
from typing import Any

from .errors import bad_request, unprocessable_patch

_MISSING = object()


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


# --- RFC 6902 ----------------------------------------------------------------


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise unprocessable_patch(f"JSON pointer {path!r} must start with '/'")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _index(container: list[Any], token: str, *, allow_end: bool) -> int:
    if token == "-" and allow_end:
        return len(container)
    if not token.isdigit() or (len(token) > 1 and token.startswith("0")):
        raise unprocessable_patch(f"invalid array index: {token}")
    index = int(token)
    limit = len(container) if allow_end else len(container) - 1
    if index > limit:
        raise unprocessable_patch(f"array index out of bounds: {index}")
    return index


def _parent(document: Any, tokens: list[str], path: str) -> Any:
    current = document
    for token in tokens[:-1]:
        if isinstance(current, dict) and token in current:
            current = current[token]
        elif isinstance(current, list):
            current = current[_index(current, token, allow_end=False)]
        else:
            raise unprocessable_patch(f"doc is missing path: {path!r}")
    return current


def _get(document: Any, path: str) -> Any:
    current = document
    for token in _pointer(path):
        if isinstance(current, dict) and token in current:
            current = current[token]
        elif isinstance(current, list):
            current = current[_index(current, token, allow_end=False)]
        else:
            raise unprocessable_patch(f"doc is missing path: {path!r}")
    return current


def _add(document: Any, path: str, value: Any) -> Any:
    tokens = _pointer(path)
    if not tokens:
        return value
    parent = _parent(document, tokens, path)
    if isinstance(parent, dict):
        parent[tokens[-1]] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, tokens[-1], allow_end=True), value)
    else:
        raise unprocessable_patch(f"doc is missing path: {path!r}")
    return document


def _remove(document: Any, path: str) -> tuple[Any, Any]:
    tokens = _pointer(path)
    if not tokens:
        raise unprocessable_patch("unable to remove the whole document")
    parent = _parent(document, tokens, path)
    if isinstance(parent, dict):
        if tokens[-1] not in parent:
            raise unprocessable_patch(f"unable to remove nonexistent key: {tokens[-1]}: missing value")
        return document, parent.pop(tokens[-1])
    if isinstance(parent, list):
        return document, parent.pop(_index(parent, tokens[-1], allow_end=False))
    raise unprocessable_patch(f"doc is missing path: {path!r}")


def json_patch(document: Any, operations: Any) -> Any:
    """RFC 6902 JSON patch; a malformed patch is 400, one that does not apply is 422."""
    if not isinstance(operations, list):
        raise bad_request("json: cannot unmarshal object into Go value of type jsonpatch.Patch")
    result = copy.deepcopy(document)
    for operation in operations:
        if not isinstance(operation, dict) or "op" not in operation:
            raise bad_request("json: cannot unmarshal into Go value of type jsonpatch.Operation")
        op, path = operation["op"], operation.get("path")
        if not isinstance(path, str):
            raise unprocessable_patch(f"Unable to {op}: missing path")
        if op in ("add", "replace", "test") and "value" not in operation:
            raise unprocessable_patch(f"Unable to {op} {path}: missing value")
        value = copy.deepcopy(operation.get("value"))
        if op == "add":
            result = _add(result, path, value)
        elif op == "remove":
            result, _ = _remove(result, path)
        elif op == "replace":
            _get(result, path)  # must exist
            if _pointer(path):
                result, _ = _remove(result, path)
            result = _add(result, path, value) if _pointer(path) else value
        elif op in ("move", "copy"):
            source = operation.get("from")
            if not isinstance(source, str):
                raise unprocessable_patch(f"Unable to {op}: missing from")
            if op == "move":
                result, moved = _remove(result, source)
            else:
                moved = copy.deepcopy(_get(result, source))
            result = _add(result, path, moved)
        elif op == "test":
            if _get(result, path) != value:
                raise unprocessable_patch(f"testing value {path} failed: test failed")
        else:
            raise unprocessable_patch(f"Unexpected kind: {op}")
    return result


# --- strategic merge patch ---------------------------------------------------

# Field name -> merge key, for lists declared `patchStrategy:"merge"` with a
# `patchMergeKey` in k8s.io/api (core/v1, apps/v1, batch/v1).
_MERGE_KEYS: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "imagePullSecrets": "name",
    "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey",
    "resourceClaims": "name",
    "schedulingGates": "name",
    "conditions": "type",
    "addresses": "type",
    "ownerReferences": "uid",
    "podIPs": "ip",
    "hostIPs": "ip",
    "taints": "key",
}
# Lists of scalars with patchStrategy merge: the patch list is unioned in.
_PRIMITIVE_MERGE = {"finalizers"}
_SET_ORDER = "$setElementOrder/"
_DELETE_FROM = "$deleteFromPrimitiveList/"


def merge_key_for(field: str, items: list[Any]) -> str | None:
    if field == "ports":
        # Container ports merge by containerPort, Service ports by port.
        sample = next((i for i in items if isinstance(i, dict)), {})
        return "containerPort" if "containerPort" in sample else "port"
    return _MERGE_KEYS.get(field)


def strategic_merge_patch(original: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        raise bad_request("strategic merge patch must be a JSON object")
    result = _smp_map(original if isinstance(original, dict) else {}, patch)
    return {} if result is _MISSING else result


def _smp_map(original: dict[str, Any], patch: dict[str, Any]) -> Any:
    directive = patch.get("$patch")
    if directive == "delete":
        return _MISSING
    if directive == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if not k.startswith("$")}
    if directive not in (None, "merge"):
        raise bad_request(f"Unknown patch type: {directive}")
    result = copy.deepcopy(original)
    retain = patch.get("$retainKeys")
    for key, value in patch.items():
        if key in ("$patch", "$retainKeys") or key.startswith(_SET_ORDER):
            continue
        if key.startswith(_DELETE_FROM):
            field = key[len(_DELETE_FROM) :]
            if isinstance(result.get(field), list) and isinstance(value, list):
                result[field] = [item for item in result[field] if item not in value]
            continue
        if value is None:
            result.pop(key, None)
            continue
        current = result.get(key, _MISSING)
        if isinstance(value, dict):
            merged = _smp_map(current if isinstance(current, dict) else {}, value)
            if merged is _MISSING:
                result.pop(key, None)
            else:
                result[key] = merged
        elif isinstance(value, list):
            result[key] = _smp_list(key, current if isinstance(current, list) else [], value)
        else:
            result[key] = copy.deepcopy(value)
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain}
    return result


def _smp_list(field: str, original: list[Any], patch: list[Any]) -> list[Any]:
    if any(isinstance(i, dict) and i.get("$patch") == "replace" for i in patch):
        return [copy.deepcopy(i) for i in patch if not (isinstance(i, dict) and i.get("$patch") == "replace")]
    if field in _PRIMITIVE_MERGE and all(not isinstance(i, (dict, list)) for i in patch):
        merged = list(original)
        for item in patch:
            if item not in merged:
                merged.append(item)
        return merged
    key = merge_key_for(field, patch + original)
    if key is None or not all(isinstance(i, dict) for i in patch):
        return [copy.deepcopy(i) for i in patch]
    merged = copy.deepcopy(original)
    for item in patch:
        if key not in item:
            raise bad_request(f"map: {item} does not contain declared merge key: {key}")
        position = next(
            (n for n, existing in enumerate(merged) if isinstance(existing, dict) and existing.get(key) == item[key]),
            None,
        )
        if item.get("$patch") == "delete":
            if position is not None:
                merged.pop(position)
            continue
        if position is None:
            merged.append({k: copy.deepcopy(v) for k, v in item.items() if not k.startswith("$")})
        else:
            updated = _smp_map(merged[position], item)
            if updated is _MISSING:
                merged.pop(position)
            else:
                merged[position] = updated
    return merged
