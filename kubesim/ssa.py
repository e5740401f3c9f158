"""Server-side apply and `metadata.managedFields` for the test API server.

Every write records which manager owns which fields, as kube-apiserver's
field manager does: a non-apply write (create, update, patch; the manager
is `fieldManager` or the User-Agent's first segment) takes the fields it
changed (operation `Update`), an apply (`PATCH` with
`application/apply-patch+yaml`, `fieldManager` required) owns exactly the
fields of its configuration (operation `Apply`). Ownership is per field:
object properties and map keys, items of `x-kubernetes-list-type: map`
lists by their keys (built-in kinds: the strategic-merge keys, e.g.
containers by `name`), values of `set` lists; atomic lists and scalars are
owned whole. Applying a field another manager owns with a different value is
a 409 Conflict with the real message (`Apply failed with 1 conflict:
conflict with "other" using v1: .spec.x`) unless `force=true`, which takes
the field over. Applying merges the configuration into the live object by
the same list rules, and fields the manager applied before but no longer
applies are removed when nobody else owns them. An apply to an object that
does not exist creates it. Writes to the main resource ignore `status` and
writes to `/status` own only `status`, as the reset fields of the real
strategies do.

What this does not do (differences from structured-merge-diff): `.` entries
are written only for list items, not for maps and objects a manager
created; the order of merged list items is the live order with new items
appended (the real merge puts the applier's items in its order); a field
removed by an applier is deleted even when a non-apply manager later changed
it; `x-kubernetes-map-type: atomic` is honoured but structs are always
granular; managedFields sent by a client are ignored (the server keeps its
own); no unions; a key field an item leaves out takes the schema's
`default` (built-in kinds: only ports' `protocol: TCP`); built-in list
types come from the strategic-merge key table in patches.py, not OpenAPI.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
from dataclasses import dataclass
from typing import Any, Iterable

from .errors import ApiError
from .patches import merge_key_for

Path = tuple[tuple[str, str], ...]
_MISSING = object()
IGNORED_META = frozenset({"name", "namespace", "creationTimestamp", "selfLink", "uid", "generation", "managedFields",
                          "resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds"})


# --- shapes: what the schema says about lists and maps -------------------------------


@dataclass(frozen=True)
class Shape:
    """A schema node (CRD) or a field name (built-in kinds) telling how lists and maps merge."""

    schema: Any = None  # the CRD schema node, or None for built-in kinds
    field: str = ""
    builtin: bool = False

    def child(self, key: str) -> "Shape":
        if self.builtin:
            return Shape(None, key, True)
        node = self.schema or {}
        properties = node.get("properties") or {}
        if key in properties:
            return Shape(properties[key])
        extra = node.get("additionalProperties")
        return Shape(extra if isinstance(extra, dict) else None)

    def item(self) -> "Shape":
        if self.builtin:
            return Shape(None, "", True)
        items = (self.schema or {}).get("items")
        return Shape(items if isinstance(items, dict) else None)

    def list_kind(self, items: list[Any]) -> tuple[str, tuple[str, ...]]:
        if self.builtin:
            if self.field == "finalizers":
                return "set", ()
            key = merge_key_for(self.field, items)
            if key and all(isinstance(i, dict) for i in items):
                return "map", (key,) if key != "containerPort" else ("containerPort", "protocol")
            return "atomic", ()
        node = self.schema or {}
        kind = node.get("x-kubernetes-list-type", "atomic")
        return kind, tuple(node.get("x-kubernetes-list-map-keys") or ())

    def key_defaults(self) -> dict[str, Any]:
        """Defaults of a map list's item fields (`protocol: TCP` of ports; a CRD's `default:` values)."""
        if self.builtin:
            return {"protocol": "TCP"} if self.field == "ports" else {}
        items = (self.schema or {}).get("items")
        properties = (items.get("properties") or {}) if isinstance(items, dict) else {}
        return {k: v["default"] for k, v in properties.items() if isinstance(v, dict) and "default" in v}

    @property
    def atomic_map(self) -> bool:
        return not self.builtin and (self.schema or {}).get("x-kubernetes-map-type") == "atomic"


def _key(item: dict[str, Any], keys: tuple[str, ...], defaults: dict[str, Any] | None = None) -> str:
    """An item's key in a `map` list; a key field it leaves out takes the schema's default, as
    structured-merge-diff does (sigs.k8s.io/structured-merge-diff/v4 typed/helpers.go,
    keyedAssociativeListItemToPathElement, getAssociativeKeyDefault)."""
    defaults = defaults or {}
    fields = {k: item[k] if k in item else defaults[k] for k in keys if k in item or k in defaults}
    return json.dumps(fields, sort_keys=True, separators=(",", ":"))


def _value(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


# --- field sets ------------------------------------------------------------------------


def field_set(obj: Any, shape: Shape, prefix: Path = ()) -> set[Path]:
    """The owned paths of a value: leaves, list-map items, set values."""
    out: set[Path] = set()
    if isinstance(obj, dict) and not shape.atomic_map:
        if not obj and prefix:
            out.add(prefix)
        for key, value in obj.items():
            if not prefix and key in ("apiVersion", "kind"):
                continue
            if prefix == (("f", "metadata"),) and key in IGNORED_META:
                continue
            out |= field_set(value, shape.child(key), prefix + (("f", key),))
        return out
    if isinstance(obj, list):
        kind, keys = shape.list_kind(obj)
        if kind == "map" and keys:
            for item in obj:
                if isinstance(item, dict):
                    item_path = prefix + (("k", _key(item, keys, shape.key_defaults())),)
                    out.add(item_path)
                    out |= field_set(item, shape.item(), item_path) - {item_path}
            return out
        if kind == "set":
            return {prefix + (("v", _value(item)),) for item in obj}
    out.add(prefix)
    return out


def value_at(obj: Any, path: Path, shape: Shape) -> Any:
    current: Any = obj
    for kind, name in path:
        if kind == "f":
            if not isinstance(current, dict) or name not in current:
                return _MISSING
            shape, current = shape.child(name), current[name]
        elif kind == "k":
            if not isinstance(current, list):
                return _MISSING
            _, keys = shape.list_kind(current)
            current = next((i for i in current if isinstance(i, dict) and _key(i, keys, shape.key_defaults()) == name),
                           _MISSING)
            shape = shape.item()
            if current is _MISSING:
                return _MISSING
        else:  # "v"
            if not isinstance(current, list) or all(_value(i) != name for i in current):
                return _MISSING
            return json.loads(name)
    return current


def _leaf_equal(a: Any, b: Any) -> bool:
    return _value(a) == _value(b) if a is not _MISSING and b is not _MISSING else a is b


def path_text(path: Path) -> str:
    """A path as structured-merge-diff prints it: `.spec.containers[name="c"].image`."""
    text = ""
    for kind, name in path:
        if kind == "f":
            text += f".{name}"
        elif kind == "k":
            pairs = json.loads(name)
            text += "[" + ",".join(f"{k}={json.dumps(v)}" for k, v in pairs.items()) + "]"
        else:
            text += f"[{name}]"
    return text


# --- FieldsV1 ----------------------------------------------------------------------------


def to_fields_v1(paths: Iterable[Path]) -> dict[str, Any]:
    tree: dict[str, Any] = {}
    for path in sorted(paths):
        node = tree
        for index, (kind, name) in enumerate(path):
            node = node.setdefault(f"{kind}:{name}", {})
            if kind == "k" and index == len(path) - 1:
                node.setdefault(".", {})
    return tree


def from_fields_v1(tree: dict[str, Any], prefix: Path = ()) -> set[Path]:
    out: set[Path] = set()
    for key, child in tree.items():
        if key == ".":
            out.add(prefix)
            continue
        kind, _, name = key.partition(":")
        path = prefix + ((kind, name),)
        if not child:
            out.add(path)
        else:
            out |= from_fields_v1(child, path)
    return out


# --- managedFields bookkeeping -------------------------------------------------------------


@dataclass
class Entry:
    manager: str
    operation: str  # Apply | Update
    api_version: str
    subresource: str
    paths: set[Path]
    time: str

    def render(self) -> dict[str, Any]:
        out: dict[str, Any] = {"manager": self.manager, "operation": self.operation, "apiVersion": self.api_version,
                               "time": self.time, "fieldsType": "FieldsV1", "fieldsV1": to_fields_v1(self.paths)}
        if self.subresource:
            out["subresource"] = self.subresource
        return out

    @property
    def identity(self) -> tuple[str, str, str]:
        return self.manager, self.operation, self.subresource


def read_entries(obj: dict[str, Any] | None) -> list[Entry]:
    entries = []
    for raw in ((obj or {}).get("metadata") or {}).get("managedFields") or []:
        entries.append(Entry(raw.get("manager", ""), raw.get("operation", "Update"), raw.get("apiVersion", ""),
                             raw.get("subresource", ""), from_fields_v1(raw.get("fieldsV1") or {}),
                             raw.get("time", "")))
    return entries


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _scoped(paths: set[Path], subresource: str) -> set[Path]:
    """Main-resource writes never own status; status writes own only status."""
    if subresource == "status":
        return {p for p in paths if p[:1] == (("f", "status"),)}
    return {p for p in paths if p[:1] != (("f", "status"),)}


def _store_entries(obj: dict[str, Any], entries: list[Entry]) -> None:
    kept = [e.render() for e in entries if e.paths]
    if kept:
        obj["metadata"]["managedFields"] = kept
    else:
        obj["metadata"].pop("managedFields", None)


def track_update(old: dict[str, Any] | None, new: dict[str, Any], shape: Shape, manager: str, subresource: str) -> None:
    """Record a non-apply write in new's managedFields (kept from old, the manager takes what changed)."""
    entries = read_entries(old)
    new_paths = _scoped(field_set(_strip(new), shape), subresource)
    old_paths = _scoped(field_set(_strip(old), shape), subresource) if old is not None else set()
    changed = {p for p in new_paths if old is None or not _leaf_equal(value_at(new, p, shape), value_at(old, p, shape))}
    removed = old_paths - new_paths
    for entry in entries:
        entry.paths -= changed | removed
    if changed:
        identity = (manager, "Update", subresource)
        mine = next((e for e in entries if e.identity == identity), None)
        if mine is None:
            mine = Entry(manager, "Update", new.get("apiVersion", ""), subresource, set(), _now())
            entries.append(mine)
        mine.paths |= changed
        mine.time, mine.api_version = _now(), new.get("apiVersion", "")
    _store_entries(new, entries)


def _strip(obj: dict[str, Any] | None) -> dict[str, Any]:
    return obj or {}


def keep_time_if_unchanged(old: dict[str, Any], new: dict[str, Any]) -> None:
    """A no-op apply leaves the object as it was (its managedFields times included)."""
    def content(obj: dict[str, Any]) -> Any:
        meta = {k: v for k, v in obj.get("metadata", {}).items() if k != "managedFields"}
        return {**obj, "metadata": meta}

    if content(old) != content(new):
        return
    before = {(e.manager, e.operation, e.subresource): e for e in read_entries(old)}
    after = read_entries(new)
    if all(e.identity in before and before[e.identity].paths == e.paths for e in after) and len(after) == len(before):
        if "managedFields" in old.get("metadata", {}):
            new["metadata"]["managedFields"] = copy.deepcopy(old["metadata"]["managedFields"])


def apply(live: dict[str, Any] | None, config: dict[str, Any], shape: Shape, manager: str, subresource: str,
          force: bool, group: str, resource: str, name: str) -> dict[str, Any]:
    """The object after `manager` applies `config` to `live` (None: create); 409 on conflicts unless forced."""
    entries = read_entries(live)
    applied = _scoped(field_set(config, shape), subresource)
    identity = (manager, "Apply", subresource)
    mine = next((e for e in entries if e.identity == identity), None)
    previously = mine.paths if mine else set()
    base = copy.deepcopy(live) if live is not None else {"metadata": {}}
    conflicts: list[tuple[Entry, Path]] = []
    for entry in entries:
        if entry is mine:
            continue
        for path in sorted(entry.paths & applied):
            if not _leaf_equal(value_at(base, path, shape), value_at(config, path, shape)):
                conflicts.append((entry, path))
    if conflicts and not force:
        raise conflict_error(conflicts, group, resource, name)
    for entry, path in conflicts:
        entry.paths.discard(path)
    merged = merge(base, config, shape)
    owned_by_others = set().union(*(e.paths for e in entries if e is not mine)) if entries else set()
    for path in sorted(previously - applied - owned_by_others, key=len, reverse=True):
        remove(merged, path, shape)
    if mine is None:
        mine = Entry(manager, "Apply", config.get("apiVersion", ""), subresource, set(), _now())
        entries.append(mine)
    mine.paths, mine.time, mine.api_version = applied, _now(), config.get("apiVersion", "")
    _store_entries(merged, entries)
    return merged


def merge(live: Any, config: Any, shape: Shape) -> Any:
    if isinstance(config, dict) and isinstance(live, dict) and not shape.atomic_map:
        out = copy.deepcopy(live)
        for key, value in config.items():
            out[key] = merge(live.get(key, _MISSING), value, shape.child(key))
        return out
    if isinstance(config, list) and isinstance(live, list):
        kind, keys = shape.list_kind(config + live)
        if kind == "map" and keys:
            out, defaults = copy.deepcopy(live), shape.key_defaults()
            for item in config:
                if not isinstance(item, dict):
                    continue
                index = next((n for n, old in enumerate(out) if isinstance(old, dict)
                              and _key(old, keys, defaults) == _key(item, keys, defaults)), None)
                if index is None:
                    out.append(copy.deepcopy(item))
                else:
                    out[index] = merge(out[index], item, shape.item())
            return out
        if kind == "set":
            out = copy.deepcopy(live)
            for item in config:
                if item not in out:
                    out.append(copy.deepcopy(item))
            return out
    return copy.deepcopy(config)


def remove(obj: Any, path: Path, shape: Shape) -> None:
    """Delete the value at `path` from obj, in place (nothing when absent)."""
    if not path:
        return
    parent: Any = obj
    for kind, name in path[:-1]:
        if kind == "f":
            if not isinstance(parent, dict) or name not in parent:
                return
            shape, parent = shape.child(name), parent[name]
        elif kind == "k":
            if not isinstance(parent, list):
                return
            _, keys = shape.list_kind(parent)
            parent = next((i for i in parent if isinstance(i, dict) and _key(i, keys, shape.key_defaults()) == name),
                          None)
            shape = shape.item()
            if parent is None:
                return
        else:
            return
    kind, name = path[-1]
    if kind == "f" and isinstance(parent, dict):
        parent.pop(name, None)
    elif kind == "k" and isinstance(parent, list):
        _, keys = shape.list_kind(parent)
        parent[:] = [i for i in parent if not (isinstance(i, dict) and _key(i, keys, shape.key_defaults()) == name)]
    elif kind == "v" and isinstance(parent, list):
        parent[:] = [i for i in parent if _value(i) != name]


def _describe_manager(entry: Entry) -> str:
    text = json.dumps(entry.manager)
    if entry.subresource:
        text += f' with subresource "{entry.subresource}"'
    if entry.operation == "Update":
        text += f" using {entry.api_version}"
    return text


def conflict_error(conflicts: list[tuple[Entry, Path]], group: str, resource: str, name: str) -> ApiError:
    causes = [{"reason": "FieldManagerConflict", "message": f"conflict with {_describe_manager(e)}",
               "field": path_text(p)} for e, p in conflicts]
    if len(conflicts) == 1:
        entry, path = conflicts[0]
        message = f"Apply failed with 1 conflict: conflict with {_describe_manager(entry)}: {path_text(path)}"
    else:
        lines: list[str] = []
        by_manager: dict[str, list[Path]] = {}
        order: list[str] = []
        for entry, path in conflicts:
            label = _describe_manager(entry)
            if label not in by_manager:
                order.append(label)
            by_manager.setdefault(label, []).append(path)
        for label in sorted(order):
            lines.append(f"conflicts with {label}:")
            lines += [f"- {path_text(p)}" for p in by_manager[label]]
        message = f"Apply failed with {len(conflicts)} conflicts: " + "\n".join(lines)
    details: dict[str, Any] = {"name": name}
    if group:
        details["group"] = group
    details["kind"] = resource
    details["causes"] = causes
    return ApiError(409, "Conflict", message, details)
