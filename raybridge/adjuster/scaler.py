"""Acting on the decision: create and delete placeholder pods, post Events, through the official client.

Every call carries a timeout and is retried with backoff on what a busy or
flaky API server answers (409 conflicts, 429 with Retry-After, 5xx, dropped
connections, bodies that are not JSON). Creating a name that exists counts as
done (the names are deterministic, so a retried or repeated create adopts);
deleting one that is gone counts as done. Nothing here raises: each call
returns an `Outcome` the controller logs and counts. It decides nothing.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable, Mapping, Optional

log = logging.getLogger("raybridge.adjuster.scaler")

#: Statuses worth trying again (a conflict, throttling, the server's trouble).
RETRIABLE = frozenset({409, 429, 500, 502, 503, 504})
#: The longest Retry-After honoured; a longer one waits this long and tries again.
MAX_RETRY_AFTER_SECONDS = 10.0


@dataclass(frozen=True)
class Outcome:
    ok: bool
    #: "created", "exists", "deleted", "gone", "failed"
    result: str
    detail: str = ""
    obj: Optional[dict[str, Any]] = None
    attempts: int = 1


class Scaler:
    def __init__(
        self,
        api_client: Any,
        *,
        request_timeout: float,
        attempts: int = 5,
        backoff: float = 0.1,
        max_backoff: float = 2.0,
        stop: tuple[threading.Event, ...] = (),
        on_api_error: Callable[[str, str], None] = lambda operation, code: None,
    ) -> None:
        from kubernetes import client

        self.core = client.CoreV1Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)
        self.timeout = request_timeout
        self.attempts = attempts
        self.backoff = backoff
        self.max_backoff = max_backoff
        #: Any of these set: stop retrying at once (shutdown, or the Lease lost).
        self.stop = stop
        self.on_api_error = on_api_error

    # --- the calls -------------------------------------------------------------------------

    def create_pod(self, manifest: Mapping[str, Any]) -> Outcome:
        meta = manifest["metadata"]

        def call() -> Any:
            return self.core.create_namespaced_pod(
                meta["namespace"], manifest, _preload_content=False, _request_timeout=(self.timeout, self.timeout)
            )

        return self._retry("create pod", call, done_on={409: "exists"}, success="created", already_exists_only=True)

    def delete_pod(self, namespace: str, name: str) -> Outcome:
        def call() -> Any:
            return self.core.delete_namespaced_pod(
                name, namespace, grace_period_seconds=0, _preload_content=False, _request_timeout=(self.timeout, self.timeout)
            )

        return self._retry("delete pod", call, done_on={404: "gone"}, success="deleted")

    def patch_node(self, name: str, patch: Mapping[str, Any]) -> Outcome:
        """A JSON merge patch of a node's metadata; a node that is gone counts as done."""
        return self._retry("patch node", lambda: self.core.patch_node(
            name, patch, _content_type="application/merge-patch+json", _preload_content=False,
            _request_timeout=(self.timeout, self.timeout),
        ), done_on={404: "gone"}, success="patched")  # fmt: skip

    def create_template(self, manifest: Mapping[str, Any]) -> Outcome:
        meta = manifest["metadata"]
        return self._retry("create podtemplate", lambda: self.core.create_namespaced_pod_template(
            meta["namespace"], manifest, _preload_content=False, _request_timeout=(self.timeout, self.timeout),
        ), done_on={409: "exists"}, success="created", already_exists_only=True)  # fmt: skip

    def delete_template(self, namespace: str, name: str) -> Outcome:
        return self._retry("delete podtemplate", lambda: self.core.delete_namespaced_pod_template(
            name, namespace, _preload_content=False, _request_timeout=(self.timeout, self.timeout),
        ), done_on={404: "gone"}, success="deleted")  # fmt: skip

    def create_request(self, manifest: Mapping[str, Any]) -> Outcome:
        from raybridge.adjuster import consts

        meta = manifest["metadata"]
        return self._retry("create provisioningrequest", lambda: self.custom.create_namespaced_custom_object(
            consts.PROVISIONING_GROUP, consts.PROVISIONING_VERSION, meta["namespace"], consts.PROVISIONING_PLURAL, manifest,
            _preload_content=False, _request_timeout=(self.timeout, self.timeout),
        ), done_on={409: "exists"}, success="created", already_exists_only=True)  # fmt: skip

    def delete_request(self, namespace: str, name: str) -> Outcome:
        from raybridge.adjuster import consts

        return self._retry("delete provisioningrequest", lambda: self.custom.delete_namespaced_custom_object(
            consts.PROVISIONING_GROUP, consts.PROVISIONING_VERSION, namespace, consts.PROVISIONING_PLURAL, name,
            _preload_content=False, _request_timeout=(self.timeout, self.timeout),
        ), done_on={404: "gone"}, success="deleted")  # fmt: skip

    def post_event(self, pod: Mapping[str, Any], reason: str, message: str, event_type: str = "Normal") -> Outcome:
        """A core/v1 Event on `pod`, as `kubectl describe pod` shows it (one attempt fewer: Events are best effort)."""
        meta = pod.get("metadata") or {}
        now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        namespace = meta.get("namespace") or "default"
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{(meta.get('name') or 'pod')[:200]}.", "namespace": namespace},
            "involvedObject": {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": meta.get("name"),
                "namespace": namespace,
                "uid": meta.get("uid"),
                "resourceVersion": meta.get("resourceVersion"),
            },
            "reason": reason,
            "message": message[:1024],
            "type": event_type,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
            "source": {"component": "raybridge-adjuster"},
            "reportingComponent": "raybridge-adjuster",
        }

        def call() -> Any:
            return self.core.create_namespaced_event(namespace, body, _preload_content=False, _request_timeout=(self.timeout, self.timeout))

        return self._retry("create event", call, done_on={}, success="created", attempts=2)

    # --- retries ---------------------------------------------------------------------------

    def _retry(
        self,
        operation: str,
        call: Callable[[], Any],
        *,
        done_on: Mapping[int, str],
        success: str,
        attempts: Optional[int] = None,
        already_exists_only: bool = False,
    ) -> Outcome:
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError as Urllib3Error

        attempts = attempts or self.attempts
        delay = self.backoff
        detail = ""
        for attempt in range(1, attempts + 1):
            wait = delay
            try:
                response = call()
                data = getattr(response, "data", b"")
                try:
                    obj = json.loads(data) if data else None
                except (ValueError, UnicodeDecodeError):
                    obj = None
                    raise _NotJson(repr(data[:60]))
                return Outcome(True, success, obj=obj if isinstance(obj, dict) else None, attempts=attempt)
            except ApiException as exc:
                status = exc.status or 0
                reason = _status_reason(exc)
                if status in done_on and (not already_exists_only or status != 409 or reason == "AlreadyExists"):
                    return Outcome(True, done_on[status], attempts=attempt)
                self.on_api_error(operation, str(status))
                detail = f"{operation}: HTTP {status} {reason}".strip()
                if status not in RETRIABLE:
                    return Outcome(False, "failed", detail, attempts=attempt)
                retry_after = _retry_after(exc)
                if retry_after is not None:
                    wait = min(retry_after, MAX_RETRY_AFTER_SECONDS)
            except _NotJson as exc:
                self.on_api_error(operation, "not-json")
                detail = f"{operation}: the API answered something that is not JSON ({exc})"
            except (Urllib3Error, OSError) as exc:
                self.on_api_error(operation, "connection")
                detail = f"{operation}: {type(exc).__name__}: {str(exc)[:160]}"
            log.warning("%s (attempt %d of %d)", detail, attempt, attempts)
            if attempt < attempts and self._wait(wait):
                break
            delay = min(delay * 2, self.max_backoff)
        return Outcome(False, "failed", detail, attempts=attempts)


    def _wait(self, seconds: float) -> bool:
        """Sleep up to `seconds`; True when told to stop."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if any(event.is_set() for event in self.stop):
                return True
            time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))
        return any(event.is_set() for event in self.stop)


class _NotJson(Exception):
    pass


def _status_reason(exc: Any) -> str:
    try:
        body = json.loads(exc.body or "{}")
        return str(body.get("reason") or exc.reason or "") if isinstance(body, dict) else str(exc.reason or "")
    except (ValueError, TypeError):
        return str(getattr(exc, "reason", "") or "")


def _retry_after(exc: Any) -> Optional[float]:
    headers = getattr(exc, "headers", None) or {}
    value = headers.get("Retry-After") if hasattr(headers, "get") else None
    try:
        seconds = float(value) if value is not None else None
    except ValueError:
        return None
    return seconds if seconds is not None and seconds >= 0 else None
