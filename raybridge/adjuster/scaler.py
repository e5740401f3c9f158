"""Acting on the decision: create and delete placeholder pods, post Events, through `kube/`'s calls.

Each call is one of `kube/`'s (`kube/pods.py`: pods, node holds, PodTemplates,
Events; `kube/provisioning.py`: ProvisioningRequests), made with the `Kube`
that `adjuster run` connected; they hand back the API server's answer as it
came, error statuses included. Every call carries a timeout and is retried
here, and only here, with the one retry policy (`kube.retry.RetryPolicy`,
`ACT_POLICY`) on what a busy or flaky API server answers (429 with
Retry-After, 5xx, dropped connections, bodies that are not JSON): the calls
run inside `calls_tried_once()`, so the client does not repeat them too, and
a wait between tries ends at once when a stop event is set. A 409 is not
retried: creating a name that exists (AlreadyExists) counts as done, since
the names are deterministic and a repeated create adopts; any other conflict
fails the call and the next pass decides again. Deleting what is gone counts
as done. Nothing here raises: each call returns an `Outcome` the controller
logs and counts. It decides nothing, and builds no client API object of its
own.
"""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable, Mapping, Optional

from raybridge.kube import pods, provisioning
from raybridge.kube.client import Kube
from raybridge.kube.retry import TRANSIENT_STATUSES, RetryPolicy, calls_tried_once, pause, retry_after_seconds

log = logging.getLogger("raybridge.adjuster.scaler")

#: The adjuster's writes: five quick tries, then the next pass (a resync later) decides again.
#: A Retry-After longer than `max_retry_after` is left to that next pass too.
ACT_POLICY = RetryPolicy(attempts=5, first_backoff=0.1, max_backoff=2.0, max_retry_after=10.0)
#: Events are best effort: one retry.
EVENT_POLICY = RetryPolicy(attempts=2, first_backoff=0.1, max_backoff=2.0, max_retry_after=10.0)


@dataclass(frozen=True)
class Outcome:
    ok: bool
    #: "created", "exists", "deleted", "gone", "replaced" (a delete of one uid met another object of its name), "failed"
    result: str
    detail: str = ""
    obj: Optional[dict[str, Any]] = None
    attempts: int = 1
    #: The API server's HTTP status when it refused (0: it answered yes, or not at all).
    status: int = 0


class Scaler:
    def __init__(
        self,
        kube: Kube,
        *,
        request_timeout: float,
        policy: RetryPolicy = ACT_POLICY,
        stop: tuple[threading.Event, ...] = (),
        on_api_error: Callable[[str, str], None] = lambda operation, code: None,
    ) -> None:
        self.kube = kube
        self.timeout = request_timeout
        self.policy = policy
        #: Any of these set: stop retrying at once (shutdown, or the Lease lost).
        self.stop = stop
        self.on_api_error = on_api_error

    # --- the calls -------------------------------------------------------------------------

    def create_pod(self, manifest: Mapping[str, Any]) -> Outcome:
        meta = manifest["metadata"]
        return self._retry("create pod", lambda: pods.create_pod(self.kube, meta["namespace"], manifest, self.timeout),
                           done_on={409: "exists"}, success="created", already_exists_only=True)

    def delete_pod(self, namespace: str, name: str, uid: Optional[str] = None) -> Outcome:
        """`uid`: only that pod; one made since under its name is left alone (409 Conflict: "replaced", nothing deleted)."""
        return self._retry("delete pod", lambda: pods.delete_pod(self.kube, namespace, name, self.timeout, grace_period_seconds=0, uid=uid),
                           done_on={404: "gone", 409: "replaced"} if uid else {404: "gone"}, success="deleted")

    def patch_node(self, name: str, patch: Mapping[str, Any]) -> Outcome:
        """A JSON merge patch of a node's metadata; a node that is gone counts as done."""
        return self._retry("patch node", lambda: pods.merge_patch_node(self.kube, name, patch, self.timeout),
                           done_on={404: "gone"}, success="patched")

    def create_template(self, manifest: Mapping[str, Any]) -> Outcome:
        meta = manifest["metadata"]
        return self._retry("create podtemplate", lambda: pods.create_pod_template(self.kube, meta["namespace"], manifest, self.timeout),
                           done_on={409: "exists"}, success="created", already_exists_only=True)

    def delete_template(self, namespace: str, name: str) -> Outcome:
        return self._retry("delete podtemplate", lambda: pods.delete_pod_template(self.kube, namespace, name, self.timeout),
                           done_on={404: "gone"}, success="deleted")

    def create_request(self, manifest: Mapping[str, Any]) -> Outcome:
        meta = manifest["metadata"]
        return self._retry("create provisioningrequest",
                           lambda: provisioning.create_provisioning_request(self.kube, meta["namespace"], manifest, self.timeout),
                           done_on={409: "exists"}, success="created", already_exists_only=True)

    def delete_request(self, namespace: str, name: str) -> Outcome:
        return self._retry("delete provisioningrequest",
                           lambda: provisioning.delete_provisioning_request(self.kube, namespace, name, self.timeout),
                           done_on={404: "gone"}, success="deleted")

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

        return self._retry("create event", lambda: pods.create_event(self.kube, namespace, body, self.timeout),
                           done_on={}, success="created", policy=EVENT_POLICY)

    # --- retries ---------------------------------------------------------------------------

    def _retry(
        self,
        operation: str,
        call: Callable[[], Any],
        *,
        done_on: Mapping[int, str],
        success: str,
        policy: Optional[RetryPolicy] = None,
        already_exists_only: bool = False,
    ) -> Outcome:
        """`call` tried per `policy` (this level only: the client tries each once); an `Outcome`, never an exception."""
        policy = policy or self.policy
        attempt = 0
        while True:
            attempt += 1
            outcome, retry_after = self._try(operation, call, done_on, success, already_exists_only, attempt)
            if outcome.ok or outcome.result != "retry":
                return outcome
            wait = policy.wait_before_retry(attempt, "status", None, retry_after)
            log.warning("%s (attempt %d of %d)", outcome.detail, attempt, policy.attempts)
            if wait is None or pause(wait, self.stop):
                return Outcome(False, "failed", outcome.detail, attempts=attempt, status=outcome.status)

    def _try(
        self, operation: str, call: Callable[[], Any], done_on: Mapping[int, str], success: str,
        already_exists_only: bool, attempt: int,
    ) -> tuple[Outcome, Optional[float]]:
        """One try: its `Outcome` ("retry" when worth another, with the server's Retry-After)."""
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError as Urllib3Error

        try:
            with calls_tried_once():
                response = call()
        except ApiException as exc:
            status = exc.status or 0
            reason = _status_reason(exc)
            if status in done_on and (not already_exists_only or status != 409 or reason == "AlreadyExists"):
                return Outcome(True, done_on[status], attempts=attempt), None
            self.on_api_error(operation, str(status))
            detail = f"{operation}: HTTP {status} {reason}".strip()
            if status not in TRANSIENT_STATUSES:
                return Outcome(False, "failed", detail, attempts=attempt, status=status), None
            return Outcome(False, "retry", detail, attempts=attempt, status=status), retry_after_seconds(getattr(exc, "headers", None) or {})
        except (Urllib3Error, OSError) as exc:
            # Timeouts too: the adjuster has no command bound, and a create that got through is adopted (409).
            self.on_api_error(operation, "connection")
            return Outcome(False, "retry", f"{operation}: {type(exc).__name__}: {str(exc)[:160]}", attempts=attempt), None
        data = getattr(response, "data", b"")
        try:
            obj = json.loads(data) if data else None
        except (ValueError, UnicodeDecodeError, RecursionError):
            self.on_api_error(operation, "not-json")
            detail = f"{operation}: the API answered something that is not JSON ({data[:60]!r})"
            return Outcome(False, "retry", detail, attempts=attempt), None
        return Outcome(True, success, obj=obj if isinstance(obj, dict) else None, attempts=attempt), None


def _status_reason(exc: Any) -> str:
    try:
        body = json.loads(exc.body or "{}")
        return str(body.get("reason") or exc.reason or "") if isinstance(body, dict) else str(exc.reason or "")
    except (ValueError, TypeError, RecursionError):
        return str(getattr(exc, "reason", "") or "")
