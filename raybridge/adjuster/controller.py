"""The adjuster's event wiring: caches fed by list-then-watch, a debounced reconcile loop, leader election.

`Informer` lists a resource once (paged), then watches it from that
resourceVersion with the official client's `kubernetes.watch.Watch`, relisting
on 410 Gone and backing off on any other failure (dropped streams, garbage
lines, 5xx), so a bad answer never kills the process. KAI's PodGroups (whose
scheduling conditions say when a pod's queue is over quota) are read the same
way but are optional: where the cluster serves no PodGroup API (404) or RBAC
forbids listing it (403), one warning is logged, the `podgroups_unavailable`
gauge is 1 and the adjuster goes on without them (a pod is then quota-blocked
only when its own condition says so), asking again every few minutes.
`Controller` reconciles on events (debounced, so a burst is one pass) and on a
timer (so a pod's grace period ending is noticed within `resync` seconds), calls the pure
decision (`scale_adjuster.decide`) and hands the actions to the `Scaler`. With
leader election on, only the holder of a coordination.k8s.io Lease acts
(`kubernetes.leaderelection`); a standby keeps nothing but its health server.
On a clean stop the leader stops acting, then clears the Lease's holder so a
standby takes over at its next retry instead of after a lease duration.

It renders nothing: the CLI sets up logging and exit statuses.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
import uuid
from collections import Counter as Tally
from datetime import datetime, timezone
from functools import partial
from typing import Any, Callable, Mapping, Optional

from raybridge.adjuster import consts
from raybridge.adjuster.metrics import Metrics
from raybridge.adjuster.preflight import kai_adjuster_pods, kai_adjuster_verdict
from raybridge.adjuster.decision.scale_adjuster import (
    Pass,
    RequestPass,
    decide,
    decide_requests,
    hold_patch,
    node_holds,
    placeholder_manifest,
    request_conditions,
    request_state,
)
from raybridge.adjuster.scaler import Scaler
from raybridge.adjuster.decision.settings import RunSettings
from raybridge.core.consts import KAI_POD_GROUP_GROUP, KAI_POD_GROUP_PLURAL, KAI_POD_GROUP_VERSION

log = logging.getLogger("raybridge.adjuster")

#: Why a waiting ProvisioningRequest is deleted when its group's demand changed (a new one asks for it all).
REPLACED = "replaced"
#: How often an optional resource found missing (404) or forbidden (403) is asked for again.
UNAVAILABLE_RETRY_SECONDS = 300.0
#: The answers that make an optional resource unavailable rather than failing.
UNAVAILABLE_CODES = (403, 404)
#: Events posted per reconcile pass at most (one per pod acted for; the rest wait for the next pass).
MAX_EVENTS_PER_PASS = 50
#: Why a GPU-sharing pod is not counted, worth a Warning Event on it (once): what its owner can fix.
#: Passing states (not yet Unschedulable, inside the grace period, bound, finished) get none.
REPORTED_IGNORED_CODES = frozenset({
    "bad-annotation", "bad-constraints", "too-many-devices", "memory-exceeds-gpu", "quota-blocked",
    "other-scheduler", "whole-gpu-request",
})


def _key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"


class Informer:
    """A cache of one resource kept current by list + watch; `changed` is set on every change."""

    def __init__(self, name: str, list_fn: Callable[..., Any], *, request_timeout: float, stop: threading.Event,
                 changed: threading.Event, on_error: Callable[[str, str], None] = lambda op, code: None,
                 page_size: int = 500, watch_timeout: int = consts.WATCH_TIMEOUT_SECONDS,
                 optional: bool = False, on_available: Callable[[bool], None] = lambda available: None,
                 unavailable_retry: float = UNAVAILABLE_RETRY_SECONDS, unavailable_note: str = "") -> None:
        """`optional`: a 404 or 403 empties the cache and counts as synced (one warning, `on_available(False)`),
        and the resource is asked for again every `unavailable_retry` seconds (`on_available(True)` once it answers)."""
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
        with self.lock:
            self.items[_key(obj)] = dict(obj)

    def forget(self, key: str) -> None:
        with self.lock:
            obj = self.items.pop(key, None)
            uid = ((obj or {}).get("metadata") or {}).get("uid")
            if uid:
                self._tombstones.add(uid)

    def halt(self) -> None:
        watch = self._watch
        if watch is not None:
            watch.stop()

    def _run(self) -> None:
        backoff = 0.1
        resource_version: Optional[str] = None
        while not self.stop.is_set():
            try:
                if resource_version is None:
                    resource_version = self._relist()
                    backoff = 0.1
                resource_version = self._watch_from(resource_version)
            except _Gone:
                log.info("%s watch expired (410 Gone): listing again", self.name)
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
                log.warning("%s list/watch failed (%s): retrying in %.1fs", self.name, _one_line(exc), backoff)
                if self.stop.wait(backoff):
                    return
                backoff = min(backoff * 2, 5.0)
                if not self.synced.is_set():
                    resource_version = None

    def _go_without(self, exc: BaseException) -> None:
        """An optional resource the cluster does not serve or we may not list: an empty, synced cache."""
        status = getattr(exc, "status", "")
        why = f"{status} {getattr(exc, 'reason', '') or ''}".strip()
        with self.lock:
            self.items = {}
            self._tombstones.clear()
        if self.unavailable is None:
            log.warning("cannot read %s (%s): going on without them%s; asking again every %.0fs", self.name, why,
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
            except (ValueError, UnicodeDecodeError):
                raise RuntimeError(f"listing {self.name}: the API answered something that is not JSON") from None
            if not isinstance(data, dict) or not isinstance(data.get("items"), list):
                raise RuntimeError(f"listing {self.name}: the API answered JSON that is not a list")
            for item in data["items"]:
                if isinstance(item, dict):
                    items[_key(item)] = item
            meta = data.get("metadata") or {}
            resource_version = meta.get("resourceVersion") or resource_version
            token = meta.get("continue")
            if not token:
                break
        with self.lock:
            self.items = items
            self._tombstones.clear()
        if self.unavailable is not None:
            log.info("reading %s again", self.name, extra={"resource": self.name})
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
        key = _key(obj)
        uid = (obj.get("metadata") or {}).get("uid")
        with self.lock:
            if kind == "DELETED":
                self.items.pop(key, None)
                self._tombstones.discard(uid)
            elif uid not in self._tombstones:
                self.items[key] = obj
        self.changed.set()


class _Gone(Exception):
    pass


def _releasable_lease_lock(settings: RunSettings, identity: str, api_client: Any) -> Any:
    """The official LeaseLock, plus `release`: after it, this replica writes the Lease no more."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException
    from kubernetes.leaderelection.resourcelock.leaselock import LeaseLock

    class ReleasableLeaseLock(LeaseLock):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__(settings.lease_name, settings.lease_namespace or settings.namespace, identity)
            self.api_instance = client.CoordinationV1Api(api_client)
            self.released = False
            self.writing = threading.Lock()

        def create(self, name: str, namespace: str, election_record: Any) -> bool:
            with self.writing:
                return False if self.released else super().create(name, namespace, election_record)

        def update(self, name: str, namespace: str, updated_record: Any) -> bool:
            with self.writing:
                return False if self.released else super().update(name, namespace, updated_record)

        def release(self, timeout: float) -> bool:
            """Stop renewing; if the Lease is still ours, clear its holder (True when cleared).

            An empty holderIdentity is what client-go writes on release: a standby of either
            library takes it on its next retry instead of waiting for the lease to expire. The
            replace carries the resourceVersion read, so a Lease taken meanwhile is left alone."""
            with self.writing:
                self.released = True
                try:
                    lease = self.api_instance.read_namespaced_lease(self.name, self.namespace, _request_timeout=(timeout, timeout))
                    if lease.spec is None or lease.spec.holder_identity != self.identity:
                        return False
                    lease.spec.holder_identity = None
                    lease.spec.lease_duration_seconds = 1
                    lease.spec.renew_time = datetime.now(timezone.utc)
                    self.api_instance.replace_namespaced_lease(self.name, self.namespace, lease, _request_timeout=(timeout, timeout))
                    return True
                except (ApiException, OSError) as exc:
                    log.warning("could not release the Lease %s (%s): it expires in its own time", self.name, _one_line(exc))
                    return False
                except Exception as exc:  # noqa: BLE001 - urllib3 errors and the like: never fail the shutdown
                    log.warning("could not release the Lease %s (%s): it expires in its own time", self.name, _one_line(exc))
                    return False

    return ReleasableLeaseLock()


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:200] or type(exc).__name__


class Controller:
    def __init__(self, settings: RunSettings, api_client: Any, metrics: Optional[Metrics] = None,
                 clock: Callable[[], datetime] = lambda: datetime.now(timezone.utc)) -> None:
        from kubernetes import client

        self.settings = settings
        self.api_client = api_client
        self.metrics = metrics or Metrics()
        self.clock = clock
        self.stop = threading.Event()
        self.leading = threading.Event()
        self.last_loop = time.monotonic()
        self.passes = 0
        self._notified: set[str] = set()
        #: Nodes whose hold or release failed (said once until it works).
        self._hold_failed: set[str] = set()
        self._request_states: dict[str, str] = {}
        self._kai_seen = False
        self._lead_lock = threading.Lock()
        self._informers: list[Informer] = []
        self._term = self.stop
        self.core = client.CoreV1Api(api_client)
        self.identity = settings.identity or f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"

    # --- health -----------------------------------------------------------------------------

    def healthy(self) -> bool:
        if not self.leading.is_set():
            return not self.stop.is_set()
        return time.monotonic() - self.last_loop < max(30.0, 10 * self.settings.resync)

    def ready(self) -> bool:
        if not self.leading.is_set():
            return not self.stop.is_set()  # a standby is ready to take over
        return all(i.synced.is_set() for i in self._informers) and bool(self._informers)

    # --- running ------------------------------------------------------------------------------

    def run(self) -> None:
        """Until `stop` is set: lead (directly, or whenever the Lease is ours)."""
        if not self.settings.leader_election:
            self._lead(self.stop)
            return
        lock = _releasable_lease_lock(self.settings, self.identity, self.api_client)
        thread = threading.Thread(target=self._elect, args=(lock,), name="adjuster-election", daemon=True)
        thread.start()
        self.stop.wait()
        # The official module has no cancel: its thread is a daemon and ends with the process. Once
        # this replica has stopped acting, it gives the Lease up so that a standby need not wait a
        # whole lease duration (client-go's ReleaseOnCancel; the Python module has no such option).
        if self._lead_lock.acquire(timeout=max(10.0, 2 * self.settings.request_timeout)):
            self._lead_lock.release()
            released = lock.release(self.settings.request_timeout)
            log.info("released the Lease %s" if released else "did not hold the Lease %s: nothing to release",
                     self.settings.lease_name)
        else:
            log.warning("still acting after the stop: leaving the Lease %s to expire", self.settings.lease_name)

    def _elect(self, lock: Any) -> None:
        from kubernetes.leaderelection import electionconfig, leaderelection

        s = self.settings
        while not self.stop.is_set():
            term = threading.Event()

            def started() -> None:
                self._lead(term)

            def stopped() -> None:
                log.warning("lost the Lease %s: standing by", s.lease_name)
                term.set()

            config = electionconfig.Config(lock, s.lease_duration, s.renew_deadline, s.retry_period, started, stopped)
            try:
                leaderelection.LeaderElection(config).run()
            except Exception as exc:  # noqa: BLE001 - an election round failed: try again
                log.warning("leader election failed (%s): retrying", _one_line(exc))
            term.set()
            self.stop.wait(s.retry_period)

    def _lead(self, term: threading.Event) -> None:
        """Act until `term` or `stop` is set; a new term waits until the last one has finished acting."""
        with self._lead_lock:
            if not (term.is_set() or self.stop.is_set()):
                self._lead_term(term)

    def _lead_term(self, term: threading.Event) -> None:
        from kubernetes import client

        log.info("leading: reconciling placeholders in namespace %s", self.settings.namespace)
        self._term = term
        self.leading.set()
        self.metrics.leader.set(1)
        changed = threading.Event()
        halt = threading.Event()
        on_error = lambda op, code: self.metrics.api_errors.labels(op, code).inc()  # noqa: E731
        pods = Informer("pods", self.core.list_pod_for_all_namespaces, request_timeout=self.settings.request_timeout,
                        stop=halt, changed=changed, on_error=on_error)
        nodes = Informer("nodes", self.core.list_node, request_timeout=self.settings.request_timeout,
                         stop=halt, changed=changed, on_error=on_error)
        custom = client.CustomObjectsApi(self.api_client)
        pod_groups = Informer(
            "podgroups", partial(custom.list_cluster_custom_object, KAI_POD_GROUP_GROUP, KAI_POD_GROUP_VERSION, KAI_POD_GROUP_PLURAL),
            request_timeout=self.settings.request_timeout, stop=halt, changed=changed, on_error=on_error, optional=True,
            on_available=lambda available: self.metrics.podgroups_unavailable.set(0 if available else 1),
            unavailable_note="a pod then counts as quota-blocked only where its own condition says so",
        )  # fmt: skip
        self._informers = [pods, nodes, pod_groups]
        requests = templates = None
        if self.settings.mode == "provisioning-request":
            requests = Informer("provisioningrequests", partial(
                custom.list_namespaced_custom_object, consts.PROVISIONING_GROUP, consts.PROVISIONING_VERSION,
                self.settings.namespace, consts.PROVISIONING_PLURAL, label_selector=consts.REQUEST_SELECTOR,
            ), request_timeout=self.settings.request_timeout, stop=halt, changed=changed, on_error=on_error)  # fmt: skip
            templates = Informer("podtemplates", partial(
                self.core.list_namespaced_pod_template, self.settings.namespace, label_selector=consts.REQUEST_SELECTOR,
            ), request_timeout=self.settings.request_timeout, stop=halt, changed=changed, on_error=on_error)  # fmt: skip
            self._informers += [requests, templates]
        scaler = Scaler(self.api_client, request_timeout=self.settings.request_timeout, stop=(halt, term, self.stop),
                        on_api_error=on_error)
        for informer in self._informers:
            informer.start()
        try:
            while not (term.is_set() or self.stop.is_set()):
                self.last_loop = time.monotonic()
                changed.wait(self.settings.resync)
                if term.is_set() or self.stop.is_set():
                    break
                if changed.is_set() and self.settings.debounce:
                    time.sleep(self.settings.debounce)
                changed.clear()
                if not all(informer.synced.is_set() for informer in self._informers):
                    continue
                try:
                    if requests is not None and templates is not None:
                        self.reconcile_requests_once(pods, nodes, requests, templates, scaler, pod_groups)
                    else:
                        self.reconcile_once(pods, nodes, scaler, pod_groups)
                except Exception as exc:  # noqa: BLE001 - a bad pass must not stop the next
                    log.exception("reconcile failed: %s", _one_line(exc))
        finally:
            halt.set()
            for informer in self._informers:
                informer.halt()
            # Their threads end at their next check of `halt`: waited for (bounded), so that none still logs
            # while the process exits (a daemon thread holding stderr then aborts the interpreter's shutdown).
            for informer in self._informers:
                informer.thread.join(max(1.0, self.settings.request_timeout))
            self.leading.clear()
            self.metrics.leader.set(0)
            log.info("stopped leading")

    # --- one pass -----------------------------------------------------------------------------

    def _kai_adjuster_running(self, all_pods: list[dict[str, Any]]) -> bool:
        """Whether KAI's own node-scale-adjuster is at work (its pods or its scaling pods): then nothing is created,
        as both would ask for nodes for the same pods. Said once when it appears and once when it goes."""
        found = kai_adjuster_pods(all_pods)
        self.metrics.kai_adjuster_running.set(1 if found else 0)
        if found and not self._kai_seen:
            log.error("%s; creating nothing while it runs", kai_adjuster_verdict(found).problems[0])
        elif not found and self._kai_seen:
            log.info("KAI's node-scale-adjuster is gone: creating placeholders again")
        self._kai_seen = bool(found)
        return self._kai_seen

    def reconcile_once(self, pods: Informer, nodes: Informer, scaler: Scaler, pod_groups: Optional[Informer] = None) -> Pass:
        started = time.perf_counter()
        all_pods = pods.snapshot()
        result = decide(all_pods, nodes.snapshot(), self.settings, self.clock(),
                        pod_groups=pod_groups.snapshot() if pod_groups is not None else ())
        decision = result.decision
        # First, before any create or delete: a node a placeholder was just bound to is held while that
        # placeholder has not run yet, so no other placeholder is bound to its GPUs once it exits.
        self._hold_nodes(nodes, scaler, decision.held_nodes)
        by_name = {(p.get("metadata") or {}).get("name"): p for p in all_pods
                   if (p.get("metadata") or {}).get("namespace") == self.settings.namespace}
        for name, reason in decision.delete:
            if self._stopping():
                break
            outcome = scaler.delete_pod(self.settings.namespace, name)
            if outcome.ok:
                pods.forget(f"{self.settings.namespace}/{name}")
                self.metrics.actions.labels("delete", reason).inc()
                log.info("deleted placeholder %s (%s)", name, reason, extra={"placeholder": name, "reason": reason})
            else:
                log.warning("could not delete placeholder %s: %s", name, outcome.detail)
        pods_by_key = {_key(p): p for p in all_pods}
        events = 0
        for planned in () if self._kai_adjuster_running(all_pods) else decision.create:
            if self._stopping():
                break
            manifest = placeholder_manifest(planned, self.settings)
            outcome = scaler.create_pod(manifest)
            if not outcome.ok:
                log.warning("could not create placeholder %s: %s", planned.name, outcome.detail)
                continue
            if outcome.obj:
                pods.put(outcome.obj)
            ph = planned.placeholder
            self.metrics.actions.labels("create", "demand").inc()
            log.info("created placeholder %s: %d %s for %d pods", planned.name, ph.gpus, ph.resource_key, len(ph.pods),
                     extra={"placeholder": planned.name, "gpus": ph.gpus, "pods": len(ph.pods)})
            for pod_name in ph.pods:
                pod = pods_by_key.get(pod_name)
                if pod is None or events >= MAX_EVENTS_PER_PASS:
                    continue
                others = len(ph.pods) - 1
                message = f"asked for {ph.gpus} {ph.resource_key} for this pod" + (f" and {others} others" if others else "") + f" (placeholder {self.settings.namespace}/{planned.name})"
                self._event(scaler, pod, "ScaleUpRequested", message)
                events += 1
        reported = [i for i in decision.plan.ignored if i.code in REPORTED_IGNORED_CODES]
        self._notified &= {i.pod for i in reported}  # a pod that recovers and fails again is told again
        for ignored in reported:
            if ignored.pod in self._notified or events >= MAX_EVENTS_PER_PASS:
                continue
            pod = pods_by_key.get(ignored.pod)
            if pod is not None:
                self._notified.add(ignored.pod)
                self._event(scaler, pod, "ScaleUpIgnored", f"the node-scale-adjuster does not count this pod: {ignored.reason}", "Warning")
                events += 1
        self._record(result, by_name)
        self.passes += 1
        self.metrics.reconcile_seconds.observe(time.perf_counter() - started)
        return result

    def _hold_nodes(self, nodes: Informer, scaler: Scaler, held: frozenset[str]) -> None:
        """Keep the nodes placeholders brought up from voluntary disruption until their pods land (consts.HOLD_LABEL)."""
        holds = node_holds(nodes.snapshot(), held)
        for name, hold in [(n, True) for n in holds.hold] + [(n, False) for n in holds.release]:
            if self._stopping():
                break
            outcome = scaler.patch_node(name, hold_patch(hold))
            if outcome.ok:
                self._hold_failed.discard(name)
                if outcome.obj:
                    nodes.put(outcome.obj)
                log.info("%s node %s", "holding" if hold else "released", name, extra={"node": name})
            elif name not in self._hold_failed:  # said once per node until it works
                self._hold_failed.add(name)
                log.warning("could not %s node %s: %s", "hold" if hold else "release", name, outcome.detail)

    def reconcile_requests_once(self, pods: Informer, nodes: Informer, requests: Informer, templates: Informer,
                                scaler: Scaler, pod_groups: Optional[Informer] = None) -> RequestPass:
        """--mode provisioning-request: one ProvisioningRequest (and its PodTemplates) per group and round."""
        started = time.perf_counter()
        all_pods = pods.snapshot()
        request_objects = requests.snapshot()
        for obj in request_objects:  # follow and report the autoscaler's answer
            meta = obj.get("metadata") or {}
            state = request_state(obj)
            key = f"{meta.get('name')}:{meta.get('uid')}"
            if self._request_states.get(key) != state:
                self._request_states[key] = state
                condition = next((c for c in request_conditions(obj).values() if c.get("status") == "True"
                                  and request_state({"status": {"conditions": [c]}}) == state), {})
                log.info("ProvisioningRequest %s is %s%s", meta.get("name"), state,
                         f": {condition.get('reason')}: {condition.get('message')}" if condition else "",
                         extra={"request": meta.get("name"), "state": state})
        ns = self.settings.namespace
        result = decide_requests(all_pods, nodes.snapshot(), request_objects, templates.snapshot(), self.settings, self.clock(),
                                 pod_groups=pod_groups.snapshot() if pod_groups is not None else ())
        for name, reason in [*result.decision.delete, *((name, REPLACED) for name in result.superseded)]:
            if self._stopping():
                break
            self._delete_request(scaler, requests, templates, name, reason)
        for name in result.orphan_templates:
            if not self._stopping():
                self._delete_template(scaler, templates, name)
        pods_by_key = {_key(p): p for p in all_pods}
        events = 0
        for planned in () if self._kai_adjuster_running(all_pods) else result.create:
            if self._stopping():
                break
            created = [scaler.create_template(t) for t in planned.templates]
            if not all(o.ok for o in created):
                log.warning("could not create the PodTemplates of %s: %s", planned.name, "; ".join(o.detail for o in created if not o.ok))
                continue
            for outcome in created:
                if outcome.obj:
                    templates.put(outcome.obj)
            outcome = scaler.create_request(planned.request)
            if not outcome.ok:
                log.warning("could not create ProvisioningRequest %s: %s", planned.name, outcome.detail)
                continue
            requests.put(outcome.obj or planned.request)
            self.metrics.actions.labels("create", "demand").inc()
            log.info("created ProvisioningRequest %s: %d %s for %d pods", planned.name, planned.gpus, planned.resource_key,
                     len(planned.pods), extra={"request": planned.name, "gpus": planned.gpus, "pods": len(planned.pods)})
            for old in planned.replaces:  # the new request exists: the one it replaces goes
                self._delete_request(scaler, requests, templates, old, REPLACED)
            for pod_name in planned.pods:
                pod = pods_by_key.get(pod_name)
                if pod is None or events >= MAX_EVENTS_PER_PASS:
                    continue
                others = len(planned.pods) - 1
                message = (f"asked for {planned.gpus} {planned.resource_key} for this pod" + (f" and {others} others" if others else "")
                           + f" (ProvisioningRequest {ns}/{planned.name})")
                self._event(scaler, pod, "ScaleUpRequested", message)
                events += 1
        plan = result.decision.plan
        self.metrics.set_demand({v: float(d) for v, d in plan.demand_by_vendor.items()})
        self.metrics.set_ignored(dict(Tally(i.code for i in plan.ignored)))
        states: dict[str, int] = {"pending": sum(p.gpus for p in result.create), "provided": 0}
        for request in result.requests:
            if request.state in states:
                states[request.state] += request.gpus
        for state, gpus in states.items():
            self.metrics.placeholder_gpus.labels(state).set(gpus)
        self.passes += 1
        self.metrics.reconcile_seconds.observe(time.perf_counter() - started)
        return result

    def _delete_request(self, scaler: Scaler, requests: Informer, templates: Informer, name: str, reason: str) -> None:
        ns = self.settings.namespace
        outcome = scaler.delete_request(ns, name)
        if not outcome.ok:
            log.warning("could not delete ProvisioningRequest %s: %s", name, outcome.detail)
            return
        requests.forget(f"{ns}/{name}")
        self.metrics.actions.labels("delete", reason).inc()
        log.info("deleted ProvisioningRequest %s (%s)", name, reason, extra={"request": name, "reason": reason})
        for template in templates.snapshot():
            if ((template.get("metadata") or {}).get("labels") or {}).get(consts.REQUEST_LABEL) == name:
                self._delete_template(scaler, templates, template["metadata"]["name"])

    def _delete_template(self, scaler: Scaler, templates: Informer, name: str) -> None:
        outcome = scaler.delete_template(self.settings.namespace, name)
        if outcome.ok:
            templates.forget(f"{self.settings.namespace}/{name}")
        else:
            log.warning("could not delete PodTemplate %s: %s", name, outcome.detail)

    @staticmethod
    def _event(scaler: Scaler, pod: Mapping[str, Any], reason: str, message: str, event_type: str = "Normal") -> None:
        outcome = scaler.post_event(pod, reason, message, event_type)
        if not outcome.ok:
            log.warning("could not post a %s event on %s: %s", reason, _key(pod), outcome.detail)

    def _stopping(self) -> bool:
        return self.stop.is_set() or self._term.is_set()

    def _record(self, result: Pass, by_name: Mapping[Any, Any]) -> None:
        plan = result.decision.plan
        self.metrics.set_demand({v: float(d) for v, d in plan.demand_by_vendor.items()})
        self.metrics.set_ignored(dict(Tally(i.code for i in plan.ignored)))
        states: dict[str, int] = {"pending": 0, "provided": 0}
        for ph in result.placeholders:
            if ph.state in states:
                states[ph.state] += ph.gpus
        for planned in result.decision.create:
            states["pending"] += planned.placeholder.gpus
        for state, gpus in states.items():
            self.metrics.placeholder_gpus.labels(state).set(gpus)
