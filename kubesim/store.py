"""The object store behind the test API server: REST semantics without HTTP.

One lock guards everything. Every write goes through the same pipeline as on
kube-apiserver: decode (unknown fields per `fieldValidation`), defaulting,
admission (namespace lifecycle, built-in admission, then the registered
mutating hooks), validation (schemas and CEL rules), optimistic concurrency
on `resourceVersion`, conversion to the CRD's storage
version, storage, and a watch event. There is a single global
resourceVersion counter (like etcd's revision); each stored change bumps it
once and is kept in a bounded event history that watches replay and that
paged lists use to serve every page at the first page's resourceVersion
(`limit`/`continue`, `remainingItemCount`, 410 Expired once the history is
compacted past the token).

The garbage collector and the namespace controller run on their own thread
after writes, as kube-controller-manager does: a Background DELETE removes
the owner at once and its dependents a little later; Foreground keeps the
owner (`deletionTimestamp`, `foregroundDeletion` finalizer) until the
dependents whose reference has `blockOwnerDeletion` are gone; Orphan keeps
the owner (`orphan` finalizer) until the dependents' references to it are
removed. Dependents whose owners are all gone are deleted (also when an
owner never existed), references to some gone owners are removed, and a
deleted namespace takes its content with it before it disappears.
`wait_for_garbage_collection` lets a test wait for the collector.

What this does not do: no server-side apply and no managedFields (kubectl's
apply is tested on the real API server, testcluster), no kubelet (pods are
deleted at once, graceful termination is not simulated), no other controllers, no
`resourceVersionMatch` semantics (lists serve the latest state or a paged
snapshot), no watch bookmarks.
"""

from __future__ import annotations

import base64
import copy
import datetime as dt
import json
import random
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from .errors import (
    AdmissionDenied,
    ApiError,
    FieldError,
    STALE_OBJECT,
    bad_request,
    conflict,
    expired,
    forbidden_error,
    internal,
    invalid,
    not_found,
    not_supported,
    unsupported_media_type,
)
from .conversion import convert
from .kinds import Strategy, strategy_for
from .patches import json_patch, merge_patch, strategic_merge_patch
from .resources import ResourceRegistry, ResourceType
from .selectors import FieldSelector, LabelSelector, field_value
from .validation import handle_unknown_fields, validate_immutable_meta, validate_object_meta

MutatingHook = Callable[[dict[str, Any], str], None]

SYSTEM_META = ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation", "selfLink")
JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"
INITIAL_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


def now_rfc3339() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class StoredEvent:
    resource_version: int
    type: str  # ADDED, MODIFIED, DELETED
    resource: ResourceType
    obj: dict[str, Any]
    previous: dict[str, Any] | None


@dataclass
class WatchFilter:
    namespace: str | None = None
    labels: LabelSelector = field(default_factory=LabelSelector)
    fields: FieldSelector = field(default_factory=FieldSelector)

    def matches(self, resource: ResourceType, obj: dict[str, Any] | None) -> bool:
        if obj is None:
            return False
        meta = obj.get("metadata") or {}
        if self.namespace is not None and meta.get("namespace") != self.namespace:
            return False
        if not self.labels.matches(meta.get("labels")):
            return False
        return self.fields.matches(lambda label: field_value(obj, label))


@dataclass
class DeleteOptions:
    propagation_policy: str | None = None
    precondition_uid: str | None = None
    precondition_resource_version: str | None = None
    dry_run: bool = False

    @classmethod
    def parse(cls, query: dict[str, list[str]], body: dict[str, Any] | None) -> "DeleteOptions":
        body = body or {}
        policy = _first(query, "propagationPolicy") or body.get("propagationPolicy")
        orphan = _first(query, "orphanDependents")
        if orphan is None and "orphanDependents" in body:
            orphan = "true" if body["orphanDependents"] else "false"
        if orphan is not None and policy is None:
            policy = "Orphan" if orphan == "true" else "Background"
        if policy is not None and policy not in ("Foreground", "Background", "Orphan"):
            raise invalid(
                "meta.k8s.io",
                "DeleteOptions",
                "",
                [not_supported("propagationPolicy", policy, ["Foreground", "Background", "Orphan"])],
            )
        preconditions = body.get("preconditions") or {}
        dry_run = bool(query.get("dryRun") or body.get("dryRun"))
        return cls(policy, preconditions.get("uid"), preconditions.get("resourceVersion"), dry_run)


def _first(query: dict[str, list[str]], key: str) -> str | None:
    values = query.get(key)
    return values[0] if values else None


@dataclass
class PodLog:
    entries: list[tuple[str, str]] = field(default_factory=list)  # (RFC 3339 time, text)
    closed: bool = False


class Store:
    """All objects, the event history, hooks and pod logs, behind one lock."""

    def __init__(self, registry: ResourceRegistry, history_limit: int = 2000) -> None:
        self.registry = registry
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self._objects: dict[tuple[str, str], dict[tuple[str, str], dict[str, Any]]] = {
            (r.group, r.plural): {} for r in registry.types
        }
        self._strategies: dict[tuple[str, str], Strategy] = {(r.group, r.plural): strategy_for(r) for r in registry.types}
        self._revision = 0
        self._history: deque[StoredEvent] = deque()
        self._history_limit = history_limit
        self._history_floor = 0
        self._hooks: dict[tuple[str, str], list[MutatingHook]] = {}
        self._next_ip = 10 * 256 + 1
        self._next_node_port = 30000
        self._logs: dict[tuple[str, str, str | None], PodLog] = {}
        self.closed = False
        self._gc_dirty = False
        self._gc_thread = threading.Thread(target=self._collect_garbage, name="kubeapi-gc", daemon=True)
        self._gc_thread.start()

    # --- StoreView for strategies -------------------------------------------

    def find(self, group: str, kind: str, name: str, namespace: str | None) -> dict[str, Any] | None:
        resource = self._resource_by_group_kind(group, kind)
        if resource is None:
            return None
        return self._objects[(resource.group, resource.plural)].get((namespace or "", name))

    def find_all(self, group: str, kind: str) -> list[dict[str, Any]]:
        resource = self._resource_by_group_kind(group, kind)
        return list(self._objects[(resource.group, resource.plural)].values()) if resource else []

    def allocate_cluster_ip(self) -> str:
        used = {
            (o.get("spec") or {}).get("clusterIP") for o in self._objects[("", "services")].values()
        }
        while True:
            address = f"10.96.{self._next_ip // 256}.{self._next_ip % 256}"
            self._next_ip += 1
            if address not in used and self._next_ip % 256 not in (0, 255):
                return address

    def allocate_node_port(self) -> int:
        port = self._next_node_port
        self._next_node_port += 1
        return port

    def _resource_by_group_kind(self, group: str, kind: str) -> ResourceType | None:
        for resource in self.registry.types:
            if resource.group == group and resource.kind == kind:
                return resource
        return None

    # --- helpers ---------------------------------------------------------------

    @property
    def resource_version(self) -> int:
        with self.lock:
            return self._revision

    def add_hook(self, group: str, kind: str, hook: MutatingHook) -> None:
        with self.lock:
            self._hooks.setdefault((group, kind), []).append(hook)

    def _bucket(self, resource: ResourceType) -> dict[tuple[str, str], dict[str, Any]]:
        return self._objects[(resource.group, resource.plural)]

    def _strategy(self, resource: ResourceType) -> Strategy:
        return self._strategies[(resource.group, resource.plural)]

    @staticmethod
    def render(resource: ResourceType, obj: dict[str, Any], version: str) -> dict[str, Any]:
        """A stored object as a client of `version` sees it (converted, for multi-version CRDs)."""
        out = copy.deepcopy(obj)
        if resource.crd is not None:
            out.setdefault("apiVersion", resource.api_version(resource.storage_version))
            converted = convert(resource.group, resource.kind, out, version)
            if converted is not out:
                out = converted
                handle_unknown_fields(out, "Ignore", resource.crd)
        out["apiVersion"] = resource.api_version(version)
        out["kind"] = resource.kind
        return out

    @staticmethod
    def _to_storage(resource: ResourceType, obj: dict[str, Any]) -> None:
        """Convert a custom object to the CRD's storage version, in place (then prune, as the server does)."""
        if resource.crd is None:
            return
        converted = convert(resource.group, resource.kind, obj, resource.storage_version)
        if converted is not obj:
            obj.clear()
            obj.update(converted)
            handle_unknown_fields(obj, "Ignore", resource.crd)
        obj["apiVersion"] = resource.api_version(resource.storage_version)

    def _record(self, kind: str, resource: ResourceType, obj: dict[str, Any], previous: dict[str, Any] | None) -> None:
        # Stored objects are never changed in place (every write stores a new dict),
        # so the history can share them with the buckets.
        self._history.append(StoredEvent(self._revision, kind, resource, obj, previous))
        while len(self._history) > self._history_limit:
            self._history_floor = self._history.popleft().resource_version
        self.changed.notify_all()

    def compact(self) -> None:
        """Forget the event history: a watch from any older resourceVersion now gets 410 Expired."""
        with self.lock:
            self._history.clear()
            self._history_floor = self._revision
            self.changed.notify_all()

    def close(self) -> None:
        with self.lock:
            self.closed = True
            self.changed.notify_all()

    def _check_type(self, resource: ResourceType, version: str, obj: dict[str, Any]) -> None:
        expected = resource.api_version(version)
        api_version, kind = obj.get("apiVersion"), obj.get("kind")
        if resource.is_custom and (not api_version or not kind):
            summary = json.dumps(obj, separators=(",", ":"))[:60]
            raise bad_request(f"Object 'Kind' is missing in '{summary}'" if not kind else f"Object 'apiVersion' is missing in '{summary}'")
        if api_version and api_version != expected:
            raise bad_request(
                f"the API version in the data ({api_version}) does not match the expected API version ({expected})"
            )
        if kind and kind != resource.kind:
            raise bad_request(f"the kind in the data ({kind}) does not match the expected kind ({resource.kind})")
        obj["apiVersion"], obj["kind"] = expected, resource.kind
        meta = obj.get("metadata", {})
        if not isinstance(meta, dict):
            raise bad_request(f"{resource.kind} in version \"{version}\" cannot be handled as a {resource.kind}: metadata must be an object")
        obj["metadata"] = meta

    def _check_namespace(self, resource: ResourceType, obj: dict[str, Any], namespace: str | None) -> None:
        meta = obj["metadata"]
        if not resource.namespaced:
            meta.pop("namespace", None)
            return
        given = meta.get("namespace")
        if given and given != namespace:
            raise bad_request("the namespace of the provided object does not match the namespace sent on the request")
        meta["namespace"] = namespace

    def _admit_namespace(self, resource: ResourceType, namespace: str | None, name: str) -> None:
        if not resource.namespaced:
            return
        ns = self._objects[("", "namespaces")].get(("", namespace or ""))
        if ns is None:
            raise not_found("", "namespaces", namespace or "")
        if ns["metadata"].get("deletionTimestamp"):
            raise forbidden_error(
                resource.group,
                resource.plural,
                name,
                f"unable to create new content in namespace {namespace} because it is being terminated",
                [{"reason": "NamespaceTerminating", "message": f"namespace {namespace} is being terminated",
                  "field": "metadata.namespace"}],
            )

    def _run_hooks(self, resource: ResourceType, obj: dict[str, Any], operation: str) -> None:
        hooks = self._hooks.get((resource.group, resource.kind), [])
        if not hooks:
            return
        for hook in hooks:
            try:
                hook(obj, operation)
            except AdmissionDenied as denied:
                raise denied.to_api_error() from None
            except ApiError:
                raise
            except Exception as error:  # a broken webhook is an internal error for the client
                raise internal(f"failed calling webhook for {resource.qualified_kind}: {error!r}") from error
        self._strategy(resource).after_hooks(obj)

    def _validate(
        self, resource: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None, *, status_only: bool = False,
    ) -> list[str]:
        """Raise 422 Invalid with every field error; returns the warnings (ratcheted rule failures)."""
        meta = obj["metadata"]
        errors = validate_object_meta(meta, name_rule=resource.name_rule, namespaced=resource.namespaced)
        if old is not None:
            errors += validate_immutable_meta(meta, old["metadata"])
        strategy = self._strategy(resource)
        errors += [e for e in strategy.schema_errors(obj) if e not in errors]
        if not status_only:
            errors += [e for e in strategy.validate(obj, old) if e not in errors]
        rule_errors, warnings = strategy.rule_errors(obj, old, errors)
        errors += rule_errors
        if errors:
            raise invalid(resource.group, resource.kind, meta.get("name") or meta.get("generateName", ""), errors)
        return warnings

    # --- create ------------------------------------------------------------------

    def create(
        self,
        resource: ResourceType,
        version: str,
        namespace: str | None,
        body: Any,
        *,
        dry_run: bool = False,
        field_validation: str = "Strict",
    ) -> tuple[dict[str, Any], list[str]]:
        """POST."""
        if resource.read_only:
            raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource", {})
        if not isinstance(body, dict):
            raise bad_request(f"{resource.kind} in version \"{version}\" cannot be handled as a {resource.kind}: body must be an object")
        obj = copy.deepcopy(body)
        with self.lock:
            self._check_type(resource, version, obj)
            self._check_namespace(resource, obj, namespace)
            strategy = self._strategy(resource)
            warnings = strategy.decode(obj, field_validation)
            meta = obj["metadata"]
            if meta.get("resourceVersion"):
                raise internal("resourceVersion should not be set on objects to be created")
            for key in SYSTEM_META:
                meta.pop(key, None)
            if not meta.get("name") and meta.get("generateName"):
                meta["name"] = self._generate_name(resource, namespace, str(meta["generateName"]))
            strategy.default(obj)
            self._admit_namespace(resource, namespace, meta.get("name", ""))
            meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = now_rfc3339()
            if resource.tracks_generation:
                meta["generation"] = 1
            strategy.prepare_create(obj, self)
            status = copy.deepcopy(obj.get("status"))
            self._run_hooks(resource, obj, "CREATE")
            if resource.has_status:
                if status is None:
                    obj.pop("status", None)
                else:
                    obj["status"] = status
            warnings += self._validate(resource, obj, None)
            key = (meta.get("namespace", "") if resource.namespaced else "", meta["name"])
            if key in self._bucket(resource):
                raise _already_exists(resource, meta["name"])
            if dry_run:
                return self.render(resource, obj, version), warnings
            self._store(resource, obj, "ADDED", None)
            if resource.group == "" and resource.kind == "Namespace":
                self._namespace_created(obj)
            self._collect_later()
            return self.render(resource, obj, version), warnings

    def _generate_name(self, resource: ResourceType, namespace: str | None, prefix: str) -> str:
        base = prefix[:58]
        bucket = self._bucket(resource)
        for _ in range(8):
            name = base + "".join(random.choice(_NAME_CHARS) for _ in range(5))
            if (namespace or "" if resource.namespaced else "", name) not in bucket:
                return name
        raise _already_exists(resource, name)

    def _store(self, resource: ResourceType, obj: dict[str, Any], event: str, previous: dict[str, Any] | None) -> None:
        self._to_storage(resource, obj)
        self._revision += 1
        obj["metadata"]["resourceVersion"] = str(self._revision)
        meta = obj["metadata"]
        key = (meta.get("namespace", "") if resource.namespaced else "", meta["name"])
        self._bucket(resource)[key] = obj
        self._record(event, resource, obj, previous)

    def _namespace_created(self, namespace: dict[str, Any]) -> None:
        """The service-account controller's part: every namespace gets a `default` ServiceAccount."""
        accounts = self.registry.by_kind("v1", "ServiceAccount")
        assert accounts is not None
        name = namespace["metadata"]["name"]
        if ((name, "default")) not in self._bucket(accounts):
            account = {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": "default", "namespace": name, "uid": str(uuid.uuid4()),
                             "creationTimestamp": now_rfc3339()},
            }
            self._store(accounts, account, "ADDED", None)

    def seed(self, resource: ResourceType, obj: dict[str, Any]) -> None:
        """Store an object as it is (read-only kinds such as CRDs), with fresh system metadata."""
        with self.lock:
            meta = obj.setdefault("metadata", {})
            meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = now_rfc3339()
            meta["generation"] = 1
            self._store(resource, obj, "ADDED", None)

    # --- read --------------------------------------------------------------------

    def get(self, resource: ResourceType, version: str, namespace: str | None, name: str) -> dict[str, Any]:
        with self.lock:
            obj = self._bucket(resource).get((namespace or "" if resource.namespaced else "", name))
            if obj is None:
                raise _not_found(resource, name)
            return self.render(resource, obj, version)

    def list(
        self, resource: ResourceType, version: str, selection: WatchFilter, *, limit: int | None = None,
        continue_token: str | None = None,
    ) -> dict[str, Any]:
        """A list, or one page of it: `limit` items from `continue_token` on, at the token's resourceVersion.

        As on a real server, every page of a paged list shows the state at the
        first page's resourceVersion (rebuilt here from the event history), and
        a token older than the compacted history is 410 Expired.
        """
        with self.lock:
            revision, start = self._revision, ""
            if continue_token:
                revision, start = _decode_continue(continue_token)
                if revision == -1:  # an inconsistent continuation, as handed out with a 410
                    revision = self._revision
                elif revision < self._history_floor or revision > self._revision:
                    raise ApiError(410, "Expired", _CONTINUE_EXPIRED, None, {},
                                   {"continue": _encode_continue(-1, start)})
            state = self._bucket_at(resource, revision)
            keys = sorted(k for k in state if _key_text(resource, k) > start) if start else sorted(state)
            items, last_key, remaining = [], None, 0
            for index, key in enumerate(keys):
                obj = state[key]
                if not selection.matches(resource, obj):
                    continue
                if limit and len(items) >= limit:
                    remaining = sum(1 for k in keys[index:] if selection.matches(resource, state[k]))
                    break
                items.append(self._list_item(resource, obj, version))
                last_key = key
            metadata: dict[str, Any] = {"resourceVersion": str(revision)}
            if remaining and last_key is not None:
                metadata["continue"] = _encode_continue(revision, _key_text(resource, last_key))
                if selection.labels.empty and selection.fields.empty:
                    metadata["remainingItemCount"] = remaining
            return {
                "apiVersion": resource.api_version(version),
                "kind": f"{resource.kind}List",
                "metadata": metadata,
                "items": items,
            }

    def _bucket_at(self, resource: ResourceType, revision: int) -> dict[tuple[str, str], dict[str, Any]]:
        """The objects of one resource as they were at `revision` (undoing later events)."""
        state = dict(self._bucket(resource))
        if revision >= self._revision:
            return state
        for event in reversed(self._history):
            if event.resource_version <= revision:
                break
            if event.resource is not resource:
                continue
            meta = event.obj["metadata"]
            key = (meta.get("namespace", "") if resource.namespaced else "", meta["name"])
            if event.previous is None:
                state.pop(key, None)
            else:
                state[key] = event.previous
        return state

    def _list_item(self, resource: ResourceType, obj: dict[str, Any], version: str) -> dict[str, Any]:
        item = self.render(resource, obj, version)
        if not resource.is_custom:
            # Typed lists leave apiVersion/kind off their items; unstructured (CRD) lists keep them.
            item.pop("apiVersion", None)
            item.pop("kind", None)
        return item

    # --- update ------------------------------------------------------------------

    def replace(
        self,
        resource: ResourceType,
        version: str,
        namespace: str | None,
        name: str,
        body: Any,
        *,
        subresource: str | None = None,
        dry_run: bool = False,
        field_validation: str = "Strict",
    ) -> tuple[dict[str, Any], list[str], bool]:
        """PUT; returns (object, warnings, created)."""
        if resource.read_only:
            raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource", {})
        if not isinstance(body, dict):
            raise bad_request(f"{resource.kind} in version \"{version}\" cannot be handled as a {resource.kind}: body must be an object")
        obj = copy.deepcopy(body)
        with self.lock:
            self._check_type(resource, version, obj)
            meta = obj["metadata"]
            if meta.get("name") and meta["name"] != name:
                raise bad_request(f"the name of the object ({meta['name']}) does not match the name on the URL ({name})")
            meta["name"] = name
            self._check_namespace(resource, obj, namespace)
            key = (namespace or "" if resource.namespaced else "", name)
            old = self._bucket(resource).get(key)
            if old is None:
                if not resource.allow_create_on_update or subresource is not None:
                    raise _not_found(resource, name)
                if meta.get("resourceVersion"):
                    # A precondition on an object that does not exist cannot hold.
                    raise conflict(resource.group, resource.plural, name, STALE_OBJECT)
                created, warnings = self.create(resource, version, namespace, obj, dry_run=dry_run,
                                                field_validation=field_validation)
                return created, warnings, True
            if resource.is_custom and not meta.get("resourceVersion"):
                # Custom resources do not allow unconditional updates (AllowUnconditionalUpdate is false).
                raise invalid(resource.group, resource.plural, name, [
                    FieldError("metadata.resourceVersion", "FieldValueInvalid",
                               "Invalid value: 0x0: must be specified for an update")])
            warnings = self._strategy(resource).decode(obj, field_validation)
            result, more = self._update(resource, version, obj, old, subresource=subresource, dry_run=dry_run)
            return result, warnings + more, False

    def _update(
        self,
        resource: ResourceType,
        version: str,
        obj: dict[str, Any],
        old: dict[str, Any],
        *,
        subresource: str | None,
        dry_run: bool,
    ) -> tuple[dict[str, Any], list[str]]:
        stored_old = old
        if resource.crd is not None:
            old = self.render(resource, old, version)  # compare and validate in the request's version
        meta, old_meta = obj["metadata"], old["metadata"]
        name = old_meta["name"]
        given_version = meta.get("resourceVersion")
        if given_version and given_version != old_meta["resourceVersion"]:
            raise conflict(resource.group, resource.plural, name, STALE_OBJECT)
        if meta.get("uid") and meta["uid"] != old_meta["uid"]:
            raise conflict(resource.group, resource.plural, name,
                           f"Precondition failed: UID in precondition: {meta['uid']}, UID in object meta: {old_meta['uid']}")
        strategy = self._strategy(resource)
        if subresource == "status":
            obj = strategy.status_update(obj, old)
        elif subresource == "finalize":
            finalizers = (obj.get("spec") or {}).get("finalizers") or []
            obj = copy.deepcopy(old)
            obj.setdefault("spec", {})["finalizers"] = finalizers
        elif resource.has_status:
            if "status" in old:
                obj["status"] = copy.deepcopy(old["status"])
            else:
                obj.pop("status", None)
        meta = obj["metadata"]
        for key in SYSTEM_META:
            if key in old_meta:
                meta[key] = copy.deepcopy(old_meta[key])
            else:
                meta.pop(key, None)
        meta["resourceVersion"] = old_meta["resourceVersion"]
        if resource.namespaced:
            meta["namespace"] = old_meta.get("namespace")
        strategy.default(obj)
        if subresource is None:
            strategy.prepare_update(obj, old, self)
            status = copy.deepcopy(obj.get("status"))
            self._run_hooks(resource, obj, "UPDATE")
            if resource.has_status:
                if status is None:
                    obj.pop("status", None)
                else:
                    obj["status"] = status
        warnings = self._validate(resource, obj, old, status_only=subresource is not None)
        if subresource is None and resource.tracks_generation and strategy.generation_changed(obj, old):
            meta["generation"] = old_meta.get("generation", 1) + 1
        result = self.render(resource, obj, version)
        comparable_old = self.render(resource, old, version)
        if result == comparable_old or dry_run:
            return (comparable_old if result == comparable_old else result), warnings
        is_namespace = resource.group == "" and resource.kind == "Namespace"  # finished by _finish_namespace
        if old_meta.get("deletionTimestamp") and not meta.get("finalizers") and not is_namespace:
            self._to_storage(resource, obj)
            self._remove(resource, obj)
            self._collect_later()
            return result, warnings
        self._store(resource, obj, "MODIFIED", stored_old)
        self._collect_later()
        return self.render(resource, obj, version), warnings

    def patch(
        self,
        resource: ResourceType,
        version: str,
        namespace: str | None,
        name: str,
        content_type: str,
        patch_body: bytes,
        *,
        subresource: str | None = None,
        dry_run: bool = False,
        field_validation: str = "Strict",
    ) -> tuple[dict[str, Any], list[str], bool]:
        """PATCH in one of the three dialects; server-side apply (`application/apply-patch+yaml`) is not served
        (415): what applies objects (kubectl) runs against the real API server of testcluster.

        Returns (object, warnings, created); never created."""
        if resource.read_only:
            raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource", {})
        media = content_type.split(";")[0].strip().lower()
        accepted = [JSON_PATCH, MERGE_PATCH] if resource.is_custom else [JSON_PATCH, MERGE_PATCH, STRATEGIC_PATCH]
        if media not in accepted:
            raise unsupported_media_type(media, accepted)
        try:
            patch = json.loads(patch_body or b"null")
        except ValueError as error:
            raise bad_request(f"error decoding patch: {error}") from None
        with self.lock:
            key = (namespace or "" if resource.namespaced else "", name)
            old = self._bucket(resource).get(key)
            if old is None:
                raise _not_found(resource, name)
            current = self.render(resource, old, version)
            if media == JSON_PATCH:
                patched = json_patch(current, patch)
            elif media == MERGE_PATCH:
                if not isinstance(patch, dict):
                    raise bad_request("json: cannot unmarshal into Go value of type map[string]interface {}")
                patched = merge_patch(current, patch)
            else:
                patched = strategic_merge_patch(current, patch)
            if not isinstance(patched, dict):
                raise bad_request("the patched object is not a JSON object")
            self._check_type(resource, version, patched)
            if patched["metadata"].get("name") != name:
                raise bad_request(f"the name of the object ({patched['metadata'].get('name')}) does not match the name on the URL ({name})")
            warnings = self._strategy(resource).decode(patched, field_validation)
            result, more = self._update(resource, version, patched, old, subresource=subresource, dry_run=dry_run)
            return result, warnings + more, False

    # --- delete ------------------------------------------------------------------

    def delete(
        self, resource: ResourceType, version: str, namespace: str | None, name: str, options: DeleteOptions
    ) -> dict[str, Any]:
        if resource.read_only:
            raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource", {})
        with self.lock:
            key = (namespace or "" if resource.namespaced else "", name)
            obj = self._bucket(resource).get(key)
            if obj is None:
                raise _not_found(resource, name)
            meta = obj["metadata"]
            if options.precondition_uid and options.precondition_uid != meta["uid"]:
                raise conflict(resource.group, resource.plural, name,
                               f"Precondition failed: UID in precondition: {options.precondition_uid}, UID in object meta: {meta['uid']}")
            if options.precondition_resource_version and options.precondition_resource_version != meta["resourceVersion"]:
                raise conflict(
                    resource.group, resource.plural, name,
                    f"Precondition failed: ResourceVersion in precondition: {options.precondition_resource_version}, "
                    f"ResourceVersion in object meta: {meta['resourceVersion']}",
                )
            if options.dry_run:
                return self._deleted_answer(resource, obj, version)
            result = self._delete_locked(resource, obj, options.propagation_policy)
            self._collect_later()
            if result is None:
                return self._deleted_answer(resource, obj, version)
            return self.render(resource, result, version)

    def _deleted_answer(self, resource: ResourceType, obj: dict[str, Any], version: str) -> dict[str, Any]:
        if resource.returns_deleted_object:
            return self.render(resource, obj, version)
        details: dict[str, Any] = {"name": obj["metadata"]["name"]}
        if resource.group:
            details["group"] = resource.group
        details["kind"] = resource.plural
        details["uid"] = obj["metadata"]["uid"]
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}

    def _delete_locked(self, resource: ResourceType, obj: dict[str, Any], policy: str | None) -> dict[str, Any] | None:
        """Delete now, or mark for deletion; returns the object still stored (None when gone)."""
        meta = obj["metadata"]
        if meta.get("deletionTimestamp"):
            return obj
        policy = policy or ("Orphan" if resource.orphan_by_default else "Background")
        if resource.group == "" and resource.kind == "Namespace":
            policy = "Background"
        finalizers = list(meta.get("finalizers") or [])
        if policy == "Orphan" and "orphan" not in finalizers and self._has_dependents(meta["uid"]):
            finalizers.append("orphan")  # the collector strips the dependents' references, then this
        if policy == "Foreground" and "foregroundDeletion" not in finalizers:
            finalizers.append("foregroundDeletion")
        pending = bool(finalizers) or (resource.group == "" and resource.kind == "Namespace")
        if not pending:
            self._remove(resource, obj)
            return None
        updated = copy.deepcopy(obj)
        updated["metadata"]["deletionTimestamp"] = now_rfc3339()
        updated["metadata"]["deletionGracePeriodSeconds"] = 0
        if finalizers:
            updated["metadata"]["finalizers"] = finalizers
        if resource.group == "" and resource.kind == "Namespace":
            updated.setdefault("status", {})["phase"] = "Terminating"
        self._store(resource, updated, "MODIFIED", obj)
        return updated

    def _remove(self, resource: ResourceType, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        key = (meta.get("namespace", "") if resource.namespaced else "", meta["name"])
        previous = self._bucket(resource).pop(key, None)
        self._revision += 1
        gone = copy.deepcopy(obj)
        gone["metadata"]["resourceVersion"] = str(self._revision)
        self._record("DELETED", resource, gone, previous)
        if resource.group == "" and resource.kind == "Pod":
            for log_key in [k for k in self._logs if k[:2] == (meta.get("namespace"), meta["name"])]:
                self._logs.pop(log_key)

    def _has_dependents(self, owner_uid: str) -> bool:
        return any(any(r.get("uid") == owner_uid for r in obj["metadata"].get("ownerReferences") or [])
                   for _, obj in self._all_objects())

    def _orphan_dependents(self, owner_uid: str) -> None:
        for resource, obj in self._all_objects():
            references = obj["metadata"].get("ownerReferences") or []
            if any(r.get("uid") == owner_uid for r in references):
                updated = copy.deepcopy(obj)
                kept = [r for r in references if r.get("uid") != owner_uid]
                if kept:
                    updated["metadata"]["ownerReferences"] = kept
                else:
                    updated["metadata"].pop("ownerReferences")
                self._store(resource, updated, "MODIFIED", obj)

    def _all_objects(self) -> list[tuple[ResourceType, dict[str, Any]]]:
        found = []
        for resource in self.registry.types:
            found += [(resource, obj) for obj in self._bucket(resource).values()]
        return found

    def delete_collection(
        self, resource: ResourceType, version: str, selection: WatchFilter, options: DeleteOptions
    ) -> dict[str, Any]:
        with self.lock:
            listed = self.list(resource, version, selection)
            items = []
            for item in listed["items"]:
                meta = item["metadata"]
                obj = self._bucket(resource).get((meta.get("namespace", ""), meta["name"]))
                if obj is None:
                    continue
                remaining = obj if options.dry_run else self._delete_locked(resource, obj, options.propagation_policy)
                items.append(self.render(resource, remaining or obj, version))
            self._collect_later()
            listed["items"] = items
            listed["metadata"]["resourceVersion"] = str(self._revision)
            return listed

    # --- garbage collector and namespace controller ---------------------------

    def _collect_later(self) -> None:
        """A write happened: the collector thread looks at ownership and deletions again, soon."""
        self._gc_dirty = True
        self.changed.notify_all()

    def _collect_garbage(self) -> None:
        """The garbage collector and namespace controller: a thread acting after writes, as kube-controller-manager does."""
        with self.lock:
            while not self.closed:
                if not self._gc_dirty:
                    self.changed.wait(0.5)
                    continue
                self._gc_dirty = False
                try:
                    for _ in range(10000):
                        if self.closed or not self._sweep_once():
                            break
                except Exception:  # never let the collector die; the next write retries
                    import traceback

                    traceback.print_exc()
                self.changed.notify_all()

    def wait_for_garbage_collection(self, timeout: float = 5.0) -> bool:
        """Wait until the collector has acted on every write so far (True) or the timeout passed."""
        deadline = time.monotonic() + timeout
        with self.lock:
            while self._gc_dirty:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self.closed:
                    return False
                self.changed.wait(min(remaining, 0.05))
            return True

    def _sweep_once(self) -> bool:
        everything = self._all_objects()
        by_uid = {obj["metadata"]["uid"]: (resource, obj) for resource, obj in everything}

        def dependents(uid: str) -> list[tuple[ResourceType, dict[str, Any]]]:
            return [(r, o) for r, o in everything if any(x.get("uid") == uid for x in o["metadata"].get("ownerReferences") or [])]

        for resource, obj in everything:
            meta = obj["metadata"]
            if not meta.get("deletionTimestamp"):
                continue
            if resource.group == "" and resource.kind == "Namespace":
                if self._finish_namespace(obj):
                    return True
            if "orphan" in (meta.get("finalizers") or []):
                self._orphan_dependents(meta["uid"])
                self._drop_finalizer(resource, obj, "orphan")
                return True
            if "foregroundDeletion" in (meta.get("finalizers") or []):
                waiting = dependents(meta["uid"])
                started = False
                for dep_resource, dep in waiting:
                    if dep["metadata"].get("deletionTimestamp"):
                        continue
                    others = [r for r in dep["metadata"].get("ownerReferences") or []
                              if r.get("uid") != meta["uid"] and r.get("uid") in by_uid
                              and not by_uid[r["uid"]][1]["metadata"].get("deletionTimestamp")]
                    if others:  # another owner still holds it: only this owner's reference goes
                        updated = copy.deepcopy(dep)
                        updated["metadata"]["ownerReferences"] = [
                            r for r in dep["metadata"]["ownerReferences"] if r.get("uid") != meta["uid"]]
                        self._store(dep_resource, updated, "MODIFIED", dep)
                    else:
                        self._delete_locked(dep_resource, dep,
                                            "Foreground" if dependents(dep["metadata"]["uid"]) else "Background")
                    started = True
                if started:
                    return True
                blocking = [d for _, d in waiting if any(
                    r.get("uid") == meta["uid"] and r.get("blockOwnerDeletion")
                    for r in d["metadata"].get("ownerReferences") or [])]
                if not blocking:
                    self._drop_finalizer(resource, obj, "foregroundDeletion")
                    return True
        for resource, obj in everything:
            meta = obj["metadata"]
            references = meta.get("ownerReferences") or []
            if not references or meta.get("deletionTimestamp"):
                continue
            present = []
            for reference in references:
                owner = by_uid.get(reference.get("uid"))
                if owner is None:
                    continue
                owner_namespaced = owner[0].namespaced
                if owner_namespaced and owner[1]["metadata"].get("namespace") != meta.get("namespace"):
                    continue
                present.append(reference)
            if len(present) == len(references):
                continue
            if present:
                updated = copy.deepcopy(obj)
                updated["metadata"]["ownerReferences"] = present
                self._store(resource, updated, "MODIFIED", obj)
            else:
                self._delete_locked(resource, obj, "Background")
            return True
        return False

    def _drop_finalizer(self, resource: ResourceType, obj: dict[str, Any], finalizer: str) -> None:
        updated = copy.deepcopy(obj)
        finalizers = [f for f in updated["metadata"].get("finalizers") or [] if f != finalizer]
        if finalizers:
            updated["metadata"]["finalizers"] = finalizers
            self._store(resource, updated, "MODIFIED", obj)
        else:
            updated["metadata"].pop("finalizers", None)
            self._remove(resource, updated)

    def _finish_namespace(self, namespace: dict[str, Any]) -> bool:
        name = namespace["metadata"]["name"]
        remaining = [(r, o) for r, o in self._all_objects() if r.namespaced and o["metadata"].get("namespace") == name]
        started = False
        for resource, obj in remaining:
            if not obj["metadata"].get("deletionTimestamp"):
                self._delete_locked(resource, obj, "Background")
                started = True
        if started:
            return True
        if remaining:
            return False
        spec_finalizers = (namespace.get("spec") or {}).get("finalizers") or []
        if "kubernetes" in spec_finalizers:
            updated = copy.deepcopy(namespace)
            updated["spec"]["finalizers"] = [f for f in spec_finalizers if f != "kubernetes"]
            self._store(self.registry.by_kind("v1", "Namespace"), updated, "MODIFIED", namespace)  # type: ignore[arg-type]
            return True
        if not spec_finalizers and not namespace["metadata"].get("finalizers"):
            self._remove(self.registry.by_kind("v1", "Namespace"), namespace)  # type: ignore[arg-type]
            return True
        return False

    # --- watch -------------------------------------------------------------------

    def watch(
        self,
        resource: ResourceType,
        version: str,
        selection: WatchFilter,
        resource_version: str | None,
        timeout_seconds: float,
        stop: threading.Event,
    ) -> Iterator[dict[str, Any]]:
        """Watch events as dicts; ends at the timeout, on `stop`, or when the store closes."""
        deadline = time.monotonic() + timeout_seconds
        with self.lock:
            if resource_version in (None, "", "0"):
                initial = [
                    {"type": "ADDED", "object": self.render(resource, obj, version)}
                    for _, obj in sorted(self._bucket(resource).items())
                    if selection.matches(resource, obj)
                ]
                cursor = self._revision
            else:
                try:
                    cursor = int(resource_version)  # type: ignore[arg-type]
                except ValueError:
                    raise bad_request(f"invalid resource version: {resource_version}") from None
                initial = []
                if cursor < self._history_floor:
                    initial = [_expired_event(cursor, self._history_floor)]
                    cursor = -1
        yield from initial
        if cursor < 0:
            return
        while True:
            with self.lock:
                while True:
                    if self.closed or stop.is_set():
                        return
                    if cursor < self._history_floor:
                        yield_expired = _expired_event(cursor, self._history_floor)
                        break
                    if self._history and self._history[-1].resource_version > cursor:
                        yield_expired = None
                        break
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return
                    self.changed.wait(min(remaining, 0.5))
                if yield_expired is None:
                    fresh = [e for e in self._history if e.resource_version > cursor]
                    cursor = fresh[-1].resource_version
            if yield_expired is not None:
                yield yield_expired
                return
            for event in fresh:
                translated = _translate(event, resource, version, selection)
                if translated is not None:
                    yield translated

    # --- pod logs ----------------------------------------------------------------

    def set_pod_log(self, namespace: str, pod: str, text: str, container: str | None, closed: bool) -> None:
        with self.lock:
            self._logs[(namespace, pod, container)] = PodLog(_log_entries(text), closed)
            self.changed.notify_all()

    def append_pod_log(self, namespace: str, pod: str, text: str, container: str | None) -> None:
        with self.lock:
            log = self._logs.setdefault((namespace, pod, container), PodLog())
            log.entries += _log_entries(text)
            self.changed.notify_all()

    def close_pod_log(self, namespace: str, pod: str, container: str | None) -> None:
        with self.lock:
            self._logs.setdefault((namespace, pod, container), PodLog()).closed = True
            self.changed.notify_all()

    def pod_log(self, namespace: str, pod: str, container: str | None) -> PodLog | None:
        with self.lock:
            return self._logs.get((namespace, pod, container)) or self._logs.get((namespace, pod, None))


_CONTINUE_EXPIRED = (
    "The provided continue parameter is too old to display a consistent list result. You can start a new list "
    "without the continue parameter, or use the continue token in this response to retrieve the remainder of the "
    "results. Continuing with the provided token results in an inconsistent list - objects that were created, "
    "modified, or deleted between the time the first chunk was returned and now may show up in the list."
)


def _key_text(resource: ResourceType, key: tuple[str, str]) -> str:
    return f"{key[0]}/{key[1]}" if resource.namespaced else key[1]


def _encode_continue(revision: int, last_key: str) -> str:
    token = json.dumps({"v": "meta.k8s.io/v1", "rv": revision, "start": last_key + "\x00"}, separators=(",", ":"))
    return base64.urlsafe_b64encode(token.encode()).decode().rstrip("=")


def _decode_continue(token: str) -> tuple[int, str]:
    try:
        data = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        revision, start = int(data["rv"]), str(data["start"])
        if data.get("v") != "meta.k8s.io/v1" or revision == 0 or revision < -1:
            raise ValueError
    except (ValueError, KeyError, TypeError):
        raise bad_request("continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)") from None
    return revision, start.rstrip("\x00")


def _log_entries(text: str) -> list[tuple[str, str]]:
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return [(stamp, line) for line in text.splitlines(keepends=True)]


def _translate(
    event: StoredEvent, resource: ResourceType, version: str, selection: WatchFilter
) -> dict[str, Any] | None:
    """A stored change as this watcher sees it: objects entering or leaving the selection turn into ADDED/DELETED."""
    if event.resource is not resource:
        return None
    now_matches = selection.matches(resource, event.obj)
    kind = event.type
    if kind == "MODIFIED":
        before = selection.matches(resource, event.previous)
        if now_matches and not before:
            kind = "ADDED"
        elif before and not now_matches:
            kind = "DELETED"
        elif not now_matches:
            return None
    elif not now_matches:
        return None
    return {"type": kind, "object": Store.render(resource, event.obj, version)}


def _expired_event(requested: int, floor: int) -> dict[str, Any]:
    return {"type": "ERROR", "object": expired(f"too old resource version: {requested} ({floor})").status()}


def _not_found(resource: ResourceType, name: str) -> ApiError:
    return not_found(resource.group, resource.plural, name)


def _already_exists(resource: ResourceType, name: str) -> ApiError:
    from .errors import already_exists

    return already_exists(resource.group, resource.plural, name)
