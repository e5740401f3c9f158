"""A cache of one Kubernetes resource kept current by list then watch: `Informer`.

It lists the resource once (paged), then watches it from that
resourceVersion with the official client's `kubernetes.watch.Watch`, relisting
on 410 Gone (the resourceVersion fell out of the server's window) and backing
off (`LIST_WATCH_POLICY`) on any other failure (dropped streams, garbage
lines, 5xx), so a bad answer never kills its thread. This loop is the one level
that retries: its calls run inside `calls_tried_once()`. An optional resource
(one a cluster may not serve, or RBAC may not let us list) that answers 404 or
403 leaves an empty, synced cache, one warning, and is asked for again every
few minutes.

What it does not do: decide anything from what it caches, or act; a service
reads `snapshot()` and is woken through the `changed` event.
"""

from __future__ import annotations

import json
import logging
import threading
from typing import Any, Callable, Mapping, Optional

from raybridge.kube.retry import RetryPolicy, calls_tried_once, pause

log = logging.getLogger(__name__)

#: How long one watch request lasts on the server before it is made again (the server's timeoutSeconds).
WATCH_TIMEOUT_SECONDS = 60
#: How often an optional resource found missing (404) or forbidden (403) is asked for again.
UNAVAILABLE_RETRY_SECONDS = 300.0
#: The answers that make an optional resource unavailable rather than failing.
UNAVAILABLE_CODES = (403, 404)
#: The wait after a failed list or watch: 0.1 s doubled up to 5 s, asked again for ever (an informer never gives up).
LIST_WATCH_POLICY = RetryPolicy(first_backoff=0.1, max_backoff=5.0)


def object_key(obj: Mapping[str, Any]) -> str:
    """"namespace/name" of an object (namespace empty for a cluster-scoped one): the cache's key."""
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"


def _seen_already(written: Mapping[str, Any], cached: Optional[Mapping[str, Any]]) -> bool:
    """Whether `cached` (from list or watch) is the same object as `written` at the same or a later version.

    kube-apiserver's resourceVersions are positive integers without leading zeros, compared as such
    (k8s.io/apimachinery pkg/util/resourceversion CompareResourceVersion); where one is not (another API server's
    opaque version), the copy the watch brought stands. So does a cached object against our own manifest (no uid: a
    create answered 409 AlreadyExists), which lacks whatever the server and the controllers wrote into it."""
    if cached is None:
        return False
    ours, theirs = written.get("metadata") or {}, cached.get("metadata") or {}
    if not ours.get("uid"):
        return True
    if ours.get("uid") != theirs.get("uid"):
        return False
    mine, seen = str(ours.get("resourceVersion") or ""), str(theirs.get("resourceVersion") or "")
    if not (_well_formed(mine) and _well_formed(seen)):
        return True
    return (len(seen), seen) >= (len(mine), mine)


def _well_formed(version: str) -> bool:
    return version.isdigit() and version.isascii() and not version.startswith("0")


def one_line_error(exc: BaseException) -> str:
    """An error on one line, at most 200 characters (its type when it has no text)."""
    return " ".join(str(exc).split())[:200] or type(exc).__name__


class Informer:
    """A cache of one resource kept current by list + watch; `changed` is set on every change."""

    def __init__(self, name: str, list_fn: Callable[..., Any], *, request_timeout: float, stop: threading.Event,
                 changed: threading.Event, on_error: Callable[[str, str], None] = lambda op, code: None,
                 page_size: int = 500, watch_timeout: int = WATCH_TIMEOUT_SECONDS,
                 optional: bool = False, on_available: Callable[[bool], None] = lambda available: None,
                 unavailable_retry: float = UNAVAILABLE_RETRY_SECONDS, unavailable_note: str = "",
                 logger: logging.Logger = log) -> None:
        """`optional`: a 404 or 403 empties the cache and counts as synced (one warning, `on_available(False)`),
        and the resource is asked for again every `unavailable_retry` seconds (`on_available(True)` once it answers).
        `logger`: where its lines go (the service's own logger, so they appear with the service's)."""
        self.log = logger
        self.name = name
        self.list_fn = list_fn
        self.timeout = request_timeout
        self.stop = stop
        self.changed = changed
        self.on_error = on_error
        self.page_size = page_size
        self.watch_timeout = watch_timeout
        self.synced = threading.Event()
        self.lock = threading.Lock()
        self.items: dict[str, dict[str, Any]] = {}
        #: Raised by one at each change of `items` (never lowered): a reader that saw the same number saw the same
        #: objects, and need not read them again.
        self.revision = 0
        #: UIDs we deleted ourselves: a late event for them must not bring them back.
        self._tombstones: set[str] = set()
        self._watch: Any = None
        self.relists = 0
        self.optional = optional
        self.on_available = on_available
        self.unavailable_retry = unavailable_retry
        self.unavailable_note = unavailable_note
        #: Why an optional resource is not read ("404 Not Found", "403 Forbidden"), None while it is.
        self.unavailable: Optional[str] = None
        self.thread = threading.Thread(target=self._run, name=f"informer-{name}", daemon=True)

    def start(self) -> "Informer":
        self.thread.start()
        return self

    def snapshot(self) -> list[dict[str, Any]]:
        with self.lock:
            return list(self.items.values())

    def put(self, obj: Mapping[str, Any]) -> None:
        """The API's answer to our own write, so the next pass sees it before the watch brings it; kept out where the
        watch already brought this object (same uid) at that version or a later one. A create's answer arrives after
        the request's round trip: meanwhile the watch may have brought the object bound, run and finished, and writing
        the answer over that held a placeholder pending in the cache, and its pods waiting, until the next event for
        it, which for a finished pod never came."""
        with self.lock:
            key = object_key(obj)
            if not _seen_already(obj, self.items.get(key)):
                self.items[key] = dict(obj)
                self.revision += 1

    def forget(self, key: str, uid: Optional[str] = None) -> None:
        """We deleted the object at `key` (the one of `uid`, where given: another one cached there since stays)."""
        with self.lock:
            cached = self.items.get(key)
            cached_uid = ((cached or {}).get("metadata") or {}).get("uid")
            if uid is None or cached_uid == uid:
                self.items.pop(key, None)
                self.revision += 1
            uid = uid or cached_uid
            if uid:
                self._tombstones.add(uid)

    def halt(self) -> None:
        watch = self._watch
        if watch is not None:
            watch.stop()

    def _run(self) -> None:
        # This loop is the one level that retries the list and the watch: the client tries each call once.
        with calls_tried_once():
            self._list_and_watch()

    def _list_and_watch(self) -> None:
        failures = 0
        resource_version: Optional[str] = None
        while not self.stop.is_set():
            try:
                if resource_version is None:
                    resource_version = self._relist()
                    failures = 0
                resource_version = self._watch_from(resource_version)
            except _Gone:
                self.log.info("%s watch expired (410 Gone): listing again", self.name)
                resource_version = None
                continue
            except Exception as exc:  # noqa: BLE001 - any failure: back off, never die
                code = str(getattr(exc, "status", "") or type(exc).__name__)
                self.on_error(f"watch {self.name}", code)
                if self.optional and getattr(exc, "status", None) in UNAVAILABLE_CODES:
                    self._go_without(exc)
                    if self.stop.wait(self.unavailable_retry):
                        return
                    resource_version = None
                    continue
                failures += 1
                backoff = LIST_WATCH_POLICY.backoff(failures)
                self.log.warning("%s list/watch failed (%s): retrying in %.1fs", self.name, one_line_error(exc), backoff)
                if pause(backoff, (self.stop,)):
                    return
                if not self.synced.is_set():
                    resource_version = None

    def _go_without(self, exc: BaseException) -> None:
        """An optional resource the cluster does not serve or we may not list: an empty, synced cache."""
        status = getattr(exc, "status", "")
        why = f"{status} {getattr(exc, 'reason', '') or ''}".strip()
        with self.lock:
            self.items = {}
            self._tombstones.clear()
            self.revision += 1
        if self.unavailable is None:
            self.log.warning("cannot read %s (%s): going on without them%s; asking again every %.0fs", self.name, why,
                        f" ({self.unavailable_note})" if self.unavailable_note else "", self.unavailable_retry,
                        extra={"resource": self.name, "code": status})
            self.on_available(False)
        self.unavailable = why
        self.synced.set()
        self.changed.set()

    def _relist(self) -> str:
        items: dict[str, dict[str, Any]] = {}
        token: Optional[str] = None
        resource_version = ""
        while True:
            kwargs: dict[str, Any] = {"limit": self.page_size, "_preload_content": False,
                                      "_request_timeout": (self.timeout, self.timeout)}
            if token:
                kwargs["_continue"] = token
            response = self.list_fn(**kwargs)
            try:
                data = json.loads(response.data)
            except (ValueError, UnicodeDecodeError, RecursionError):
                raise RuntimeError(f"listing {self.name}: the API answered something that is not JSON (or nested too deeply)") from None
            if not isinstance(data, dict) or not isinstance(data.get("items"), list):
                raise RuntimeError(f"listing {self.name}: the API answered JSON that is not a list")
            for item in data["items"]:
                if isinstance(item, dict):
                    items[object_key(item)] = item
            meta = data.get("metadata") or {}
            resource_version = meta.get("resourceVersion") or resource_version
            token = meta.get("continue")
            if not token:
                break
        with self.lock:
            self.items = items
            self._tombstones.clear()
            self.revision += 1
        if self.unavailable is not None:
            self.log.info("reading %s again", self.name, extra={"resource": self.name})
            self.unavailable = None
        if self.optional:
            self.on_available(True)
        self.relists += 1
        self.synced.set()
        self.changed.set()
        return resource_version

    def _watch_from(self, resource_version: str) -> Optional[str]:
        from kubernetes import watch
        from kubernetes.client.exceptions import ApiException

        w = watch.Watch(return_type="object")
        self._watch = w
        try:
            for event in w.stream(self.list_fn, resource_version=resource_version, timeout_seconds=self.watch_timeout,
                                  allow_watch_bookmarks=True, _request_timeout=(self.timeout, self.watch_timeout + self.timeout)):
                if self.stop.is_set():
                    break
                if not isinstance(event, dict):
                    continue
                kind = event.get("type")
                obj = event.get("raw_object")
                if not isinstance(obj, dict):
                    continue
                if kind == "ERROR":
                    if obj.get("code") == 410:
                        raise _Gone()
                    raise RuntimeError(f"watch error {obj.get('code')}: {obj.get('message')}")
                rv = (obj.get("metadata") or {}).get("resourceVersion")
                if rv:
                    resource_version = rv
                if kind == "BOOKMARK":
                    continue
                self._apply(kind, obj)
        except ApiException as exc:
            if exc.status == 410:
                raise _Gone() from None
            raise
        finally:
            self._watch = None
        return resource_version

    def _apply(self, kind: Optional[str], obj: dict[str, Any]) -> None:
        key = object_key(obj)
        uid = (obj.get("metadata") or {}).get("uid")
        with self.lock:
            if kind == "DELETED":
                self.items.pop(key, None)
                self._tombstones.discard(uid)
            elif uid not in self._tombstones:
                self.items[key] = obj
            self.revision += 1
        self.changed.set()


class _Gone(Exception):
    """The watch's resourceVersion is too old (410 Gone): list again."""
