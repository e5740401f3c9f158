"""KubeRay's `ray.io/v1` objects through `CustomObjectsApi`: the one small module for them.

The KubeRay python client is not published, so raybridge talks to the CRDs
directly: create, get, list, merge-patch and delete RayJobs and RayClusters.
Errors come back as raybridge errors (see `kube.calls.api_call`); an answer
that is not a Kubernetes object of the kind asked for is exit 3 naming it
(`kube.calls.checked_object`), never a KeyError further up.

A create is not blindly repeated: one that failed in a way that may have
happened anyway (a timeout, a dropped answer, a 5xx) is re-read first and
taken as done when the object there is ours. Reads, lists and deletes are
retried by the client's policy (`kube.retry.RetryPolicy`).
"""

from __future__ import annotations

import time
from email.utils import parsedate_to_datetime
from typing import Any, Optional

from raybridge.core.consts import MANAGED_BY_LABEL
from raybridge.kuberay.names import RAY_API_GROUP, RAY_API_VERSION
from raybridge.errors import BadInput, ClusterUnreachable, RaybridgeError
from raybridge.kube.calls import NoAnswer, api_call, checked_items, checked_object
from raybridge.kube.client import Kube

PLURALS = {"RayJob": "rayjobs", "RayCluster": "rayclusters"}


def is_ours(existing: dict[str, Any], sent: dict[str, Any]) -> bool:
    """True when `existing` is the object `sent` created: same kind, raybridge's labels, same entrypoint."""
    if existing.get("kind") != sent.get("kind"):
        return False
    labels = (existing.get("metadata") or {}).get("labels") or {}
    sent_labels = (sent.get("metadata") or {}).get("labels") or {}
    if MANAGED_BY_LABEL not in sent_labels or any(labels.get(k) != v for k, v in sent_labels.items()):
        return False
    return (existing.get("spec") or {}).get("entrypoint") == (sent.get("spec") or {}).get("entrypoint")


#: The longest a clean-up watches for a create that went unanswered to land late. The server's own request timeout
#: bounds it (kube-apiserver's --request-timeout, 60 s by default); within that, three times the client's own
#: request timeout (the user's word on how long a request may take) and at least 10 s.
LATE_CREATE_WINDOW_SECONDS = 60.0
LATE_CREATE_TIMEOUTS = 3
LATE_CREATE_MIN_SECONDS = 10.0


def _server_time(headers: Any) -> Optional[float]:
    """The time an HTTP `Date` header gives (whole seconds, so rounded up to the end of its second), or None."""
    try:
        value = headers.get("Date") or headers.get("date") if headers is not None else None
        return parsedate_to_datetime(value).timestamp() + 1.0 if value else None
    except (TypeError, ValueError, AttributeError):
        return None


class RayObjects:
    def __init__(self, kube: Kube) -> None:
        self.api = kube.custom()
        self.server = kube.server
        self.late_create_window = min(LATE_CREATE_WINDOW_SECONDS, max(LATE_CREATE_MIN_SECONDS, LATE_CREATE_TIMEOUTS * kube.request_timeout))
        #: (kind, namespace, name) -> (when, what was sent) of creates whose answer never came: one may still land.
        self.unanswered_creates: dict[tuple[str, str, str], tuple[float, dict[str, Any]]] = {}

    def create(self, obj: dict[str, Any], field_validation: str = "Strict") -> dict[str, Any]:
        """Create with `fieldValidation=Strict`: a field this KubeRay release does not know is refused (400),
        never dropped with a warning, so nothing is created that differs from what was asked.

        After a failure that may hide a create that happened, the object is re-read: ours
        is the answer, absent means one more try, someone else's is the original error."""
        kind, meta = obj["kind"], obj["metadata"]
        sent_at = time.monotonic()
        try:
            return self._create_once(obj, field_validation)
        except ClusterUnreachable as first:
            existing = self.get(kind, meta["name"], meta["namespace"])
            if existing is not None:
                if is_ours(existing, obj):
                    return existing  # the unanswered create landed: nothing of it is still on its way
                raise first from None
            unanswered = isinstance(first, NoAnswer)
        try:
            created = self._create_once(obj, field_validation)
            if unanswered:  # the first may still be on its way and land once this object is gone: sweep_late_create
                self.unanswered_creates[(kind, meta["namespace"], meta["name"])] = (sent_at, obj)
            return created
        except BadInput as exc:
            # AlreadyExists now: the first create, still on its way when we looked, landed after all.
            existing = self.get(kind, meta["name"], meta["namespace"]) if "already exists" in str(exc) else None
            if existing is not None and is_ours(existing, obj):
                return existing
            raise

    def _create_once(self, obj: dict[str, Any], field_validation: str) -> dict[str, Any]:
        kind, meta = obj["kind"], obj["metadata"]
        what = f"creating {kind} {meta['namespace']}/{meta['name']}"
        result = api_call(
            what, self.api.create_namespaced_custom_object,
            RAY_API_GROUP, RAY_API_VERSION, meta["namespace"], PLURALS[kind], obj,
            field_validation=field_validation,
        )  # fmt: skip
        return checked_object(what, result, kind, self.server)

    def dry_run_create(self, obj: dict[str, Any]) -> dict[str, Any]:
        """The object as the API server would store it, admission webhooks' defaults included (`dryRun=All`): nothing
        is created."""
        kind, meta = obj["kind"], obj["metadata"]
        what = f"trying a create of {kind} {meta['namespace']}/{meta['name']} (dry run)"
        result = api_call(
            what, self.api.create_namespaced_custom_object,
            RAY_API_GROUP, RAY_API_VERSION, meta["namespace"], PLURALS[kind], obj, dry_run="All",
        )  # fmt: skip
        return checked_object(what, result, kind, self.server)

    def get(self, kind: str, name: str, namespace: str) -> Optional[dict[str, Any]]:
        return self.get_dated(kind, name, namespace)[0]

    def get_dated(self, kind: str, name: str, namespace: str) -> tuple[Optional[dict[str, Any]], Optional[float]]:
        """`get`, with the API server's clock at the answer (its `Date` header, epoch seconds; None without one)."""
        what = f"reading {kind} {namespace}/{name}"
        answer = api_call(
            what, self.api.get_namespaced_custom_object_with_http_info,
            RAY_API_GROUP, RAY_API_VERSION, namespace, PLURALS[kind], name,
            not_found_ok=True,
        )  # fmt: skip
        if answer is None:
            return None, None
        if isinstance(answer, tuple):  # (data, status, headers)
            data, headers = answer[0], answer[2] if len(answer) > 2 else None
        else:  # an ApiResponse
            data, headers = getattr(answer, "data", answer), getattr(answer, "headers", None)
        return checked_object(what, data, kind, self.server), _server_time(headers)

    def list(self, kind: str, namespace: Optional[str], label_selector: str = "") -> list[dict[str, Any]]:
        what = f"listing {kind}s" + (f" in {namespace}" if namespace else "")
        if namespace:
            result = api_call(
                what, self.api.list_namespaced_custom_object,
                RAY_API_GROUP, RAY_API_VERSION, namespace, PLURALS[kind], label_selector=label_selector,
            )  # fmt: skip
        else:
            result = api_call(
                what, self.api.list_cluster_custom_object,
                RAY_API_GROUP, RAY_API_VERSION, PLURALS[kind], label_selector=label_selector,
            )  # fmt: skip
        return checked_items(what, result, kind, self.server)

    def patch(self, kind: str, name: str, namespace: str, patch: dict[str, Any], field_validation: Optional[str] = None) -> dict[str, Any]:
        """A JSON merge patch (what the client sends for a dict body); with `field_validation="Strict"` a
        field this release does not know is refused (400), not dropped."""
        what = f"updating {kind} {namespace}/{name}"
        extra = {"field_validation": field_validation} if field_validation else {}
        result = api_call(
            what, self.api.patch_namespaced_custom_object,
            RAY_API_GROUP, RAY_API_VERSION, namespace, PLURALS[kind], name, patch, **extra,
        )  # fmt: skip
        return checked_object(what, result, kind, self.server)

    def delete(self, kind: str, name: str, namespace: str) -> Optional[dict[str, Any]]:
        """Delete with foreground propagation; the object as the server answered (its uid tells what it owns),
        None if absent.

        Foreground: the object stays (with `deletionTimestamp`) until the garbage collector has deleted what
        it owns with `blockOwnerDeletion` (a RayJob's RayCluster and pods, its Kueue Workload), so once it is
        gone (`wait_gone`) nothing of it holds GPUs or quota. With background propagation the RayJob vanished
        at once and its RayCluster and Workload lived on until the collector reached them."""
        from kubernetes import client

        result = api_call(
            f"deleting {kind} {namespace}/{name}",
            self.api.delete_namespaced_custom_object,
            RAY_API_GROUP, RAY_API_VERSION, namespace, PLURALS[kind], name,
            body=client.V1DeleteOptions(propagation_policy="Foreground"),
            not_found_ok=True,
        )  # fmt: skip
        if result is None:
            return None
        return result if isinstance(result, dict) else {}

    def sweep_late_create(self, kind: str, name: str, namespace: str) -> bool:
        """After a clean-up: if a create of this object once went unanswered, the server may still carry it out and
        bring the object back; watch for it (until `late_create_window` after that request) and delete it if it
        comes and is ours. True when such an object was found and deleted."""
        unanswered = self.unanswered_creates.pop((kind, namespace, name), None)
        if unanswered is None:
            return False
        sent_at, sent = unanswered
        deadline = sent_at + self.late_create_window
        while time.monotonic() < deadline:
            try:
                existing = self.get(kind, name, namespace)
            except RaybridgeError:
                existing = None
            if existing is not None and is_ours(existing, sent) and not (existing.get("metadata") or {}).get("deletionTimestamp"):
                self.delete(kind, name, namespace)
                return True
            time.sleep(0.5)
        return False

    def wait_gone(self, kind: str, name: str, namespace: str, wait: float = 30.0) -> bool:
        """True once the object is gone (its finalizers done), False if it is still there after `wait` seconds
        or can no longer be read (the delete was accepted; only whether it has finished is unknown)."""
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                if self.get(kind, name, namespace) is None:
                    return True
            except RaybridgeError:  # unreadable now: the delete was accepted, that is all we know
                return False
            time.sleep(0.2)
        return False
