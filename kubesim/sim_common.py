"""What kubesim's simulated controllers share: helpers, API access, the polling loop.

Why this module exists: raybridge creates RayJobs and RayClusters and then
watches what Kueue and KubeRay do with them (suspension, Workloads, admission,
quota messages, queue positions, cluster readiness, the dashboard URL, job
status). The real operators run on the real test cluster (testcluster/); without
a cluster, the simulated Kueue (`FakeKueue` in `sim_kueue.py`) plays Kueue
against `kubesim/server.py` for kubesim's own tests, and Kueue's decisions
(`assign_flavors`, `ray_podsets`) are checked as pure functions. This module
holds what the simulations use: conditions as
meta.SetStatusCondition sets them, Kubernetes quantities and pod requests,
owner references, JSON merge patches, `ControllerApi` (dict-in, dict-out access
through the official client) and `PollingController` (the reconcile thread).

How they work: each runs one daemon thread that lists the objects it cares
about every `interval` seconds and reconciles them, talking to the server only
through the official client (`CustomObjectsApi`, `CoreV1Api`). The parts that a
real cluster runs as webhooks or aggregated APIs (Kueue's webhooks and
visibility API, the kubelet side of a port-forward) are registered on the
server with `add_mutating_hook`, `add_handler` and `set_port_forward_target`.
Errors are logged and retried on the next pass; a pass never kills the thread.

What it deliberately does not do: no Kueue decisions (those live in
`sim_kueue.py`), and no registering of hooks itself: a
controller's `_register()` does that. Tests import the controllers through
`controllers.py`.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from datetime import datetime, timezone
from decimal import Decimal
from typing import Any, Callable, Iterable, Mapping, Optional

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

log = logging.getLogger(__name__)

Obj = dict[str, Any]

RAY_GROUP = "ray.io"
RAY_VERSION = "v1"
RAY_API = f"{RAY_GROUP}/{RAY_VERSION}"

REQUEST_TIMEOUT = 5.0


# --------------------------------------------------------------------------
# Small helpers: time, conditions, quantities, owner references, merge patches
# --------------------------------------------------------------------------


def now_rfc3339() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def find_condition(obj: Mapping[str, Any], cond_type: str) -> Optional[Obj]:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == cond_type:
            return cond
    return None


def condition_is_true(obj: Mapping[str, Any], cond_type: str) -> bool:
    cond = find_condition(obj, cond_type)
    return bool(cond and cond.get("status") == "True")


def set_condition(
    conditions: list[Obj], cond_type: str, status: bool, reason: str, message: str, now: Optional[str] = None
) -> list[Obj]:
    """Return `conditions` with one condition set, as meta.SetStatusCondition does.

    lastTransitionTime changes only when the status changes.
    """
    now = now or now_rfc3339()
    value = "True" if status else "False"
    out = [dict(c) for c in conditions]
    for cond in out:
        if cond.get("type") == cond_type:
            if cond.get("status") != value:
                cond["lastTransitionTime"] = now
            cond.update(status=value, reason=reason, message=message)
            return out
    out.append({"type": cond_type, "status": value, "reason": reason, "message": message, "lastTransitionTime": now})
    return out


_QUANTITY = re.compile(
    r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))([eE][+-]?[0-9]+|Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$"
)
_BINARY_SUFFIXES = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}


def parse_quantity(value: Any) -> Decimal:
    """A Kubernetes quantity ("500m", "4Gi", "1e3", 2) as an exact Decimal."""
    if isinstance(value, bool):
        raise ValueError(f"not a quantity: {value!r}")
    if isinstance(value, (int, float)):
        return Decimal(str(value))
    match = _QUANTITY.match(str(value).strip())
    if not match:
        raise ValueError(f"not a quantity: {value!r}")
    number, suffix = Decimal(match.group(1)), match.group(2) or ""
    if suffix in _BINARY_SUFFIXES:
        return number * (1024 ** _BINARY_SUFFIXES[suffix])
    if suffix in _DECIMAL_SUFFIXES:
        return number.scaleb(_DECIMAL_SUFFIXES[suffix])
    return number.scaleb(int(suffix[1:]))


def format_quantity(amount: Decimal) -> str:
    """Quantity text: "4", "500m", "4Gi", "512M" (the shortest of the binary and decimal spellings)."""
    if amount == amount.to_integral_value():
        whole = int(amount)
        candidates = [str(whole)]
        if whole:
            for suffixes, base in ((_BINARY_SUFFIXES, 1024), (_DECIMAL_SUFFIXES, 1000)):
                for suffix, power in sorted(suffixes.items(), key=lambda kv: -kv[1]):
                    step = base ** (power if base == 1024 else power // 3) if power > 0 else 0
                    if step and whole % step == 0:
                        candidates.append(f"{whole // step}{suffix}")
                        break
        return min(candidates, key=len)
    milli = amount * 1000
    if milli == milli.to_integral_value():
        return f"{int(milli)}m"
    return format(amount.normalize(), "f")


def container_requests(container: Mapping[str, Any]) -> dict[str, Decimal]:
    """Requests of one container; a resource with only a limit requests its limit (API defaulting)."""
    resources = container.get("resources") or {}
    merged = dict(resources.get("limits") or {})
    merged.update(resources.get("requests") or {})
    return {name: parse_quantity(value) for name, value in merged.items()}


def pod_requests(pod_spec: Mapping[str, Any]) -> dict[str, Decimal]:
    """Effective requests of a pod: containers and sidecars summed, other init containers as a max."""
    total: dict[str, Decimal] = {}
    init_max: dict[str, Decimal] = {}
    for container in pod_spec.get("initContainers") or []:
        for name, amount in container_requests(container).items():
            if container.get("restartPolicy") == "Always":
                total[name] = total.get(name, Decimal(0)) + amount
            else:
                init_max[name] = max(init_max.get(name, Decimal(0)), amount)
    for container in pod_spec.get("containers") or []:
        for name, amount in container_requests(container).items():
            total[name] = total.get(name, Decimal(0)) + amount
    for name, amount in init_max.items():
        total[name] = max(total.get(name, Decimal(0)), amount)
    return total


def controller_owner(obj: Mapping[str, Any]) -> Optional[Obj]:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return ref
    return None


def owner_reference(obj: Mapping[str, Any]) -> Obj:
    meta = obj["metadata"]
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def merge_patch_for(old: Any, new: Any) -> Any:
    """The JSON merge patch (RFC 7386) that turns `old` into `new`."""
    if not isinstance(old, dict) or not isinstance(new, dict):
        return new
    patch: Obj = {}
    for key in old.keys() - new.keys():
        patch[key] = None
    for key, value in new.items():
        if key not in old:
            patch[key] = value
        elif old[key] != value:
            patch[key] = merge_patch_for(old[key], value)
    return patch


# --------------------------------------------------------------------------
# Talking to the server through the official client
# --------------------------------------------------------------------------


class ControllerApi:
    """Thin dict-in, dict-out wrapper over CustomObjectsApi/CoreV1Api."""

    def __init__(self, api_client: k8s.ApiClient) -> None:
        self.api_client = api_client
        self.custom = k8s.CustomObjectsApi(api_client)
        self.core = k8s.CoreV1Api(api_client)

    # custom objects -------------------------------------------------------
    def list(self, group: str, version: str, plural: str, namespace: Optional[str] = None) -> list[Obj]:
        if namespace:
            result = self.custom.list_namespaced_custom_object(
                group, version, namespace, plural, _request_timeout=REQUEST_TIMEOUT
            )
        else:
            result = self.custom.list_cluster_custom_object(group, version, plural, _request_timeout=REQUEST_TIMEOUT)
        return list(result.get("items") or [])

    def get(self, group: str, version: str, plural: str, name: str, namespace: Optional[str]) -> Optional[Obj]:
        try:
            if namespace:
                return self.custom.get_namespaced_custom_object(
                    group, version, namespace, plural, name, _request_timeout=REQUEST_TIMEOUT
                )
            return self.custom.get_cluster_custom_object(group, version, plural, name, _request_timeout=REQUEST_TIMEOUT)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def create(self, group: str, version: str, plural: str, obj: Obj) -> Obj:
        namespace = obj["metadata"].get("namespace")
        if namespace:
            return self.custom.create_namespaced_custom_object(
                group, version, namespace, plural, obj, _request_timeout=REQUEST_TIMEOUT
            )
        return self.custom.create_cluster_custom_object(group, version, plural, obj, _request_timeout=REQUEST_TIMEOUT)

    def patch(self, group: str, version: str, plural: str, obj: Mapping[str, Any], body: Obj) -> Obj:
        meta = obj["metadata"]
        if meta.get("namespace"):
            return self.custom.patch_namespaced_custom_object(
                group, version, meta["namespace"], plural, meta["name"], body, _request_timeout=REQUEST_TIMEOUT
            )
        return self.custom.patch_cluster_custom_object(
            group, version, plural, meta["name"], body, _request_timeout=REQUEST_TIMEOUT
        )

    def replace(self, group: str, version: str, plural: str, obj: Obj) -> Obj:
        meta = obj["metadata"]
        if meta.get("namespace"):
            return self.custom.replace_namespaced_custom_object(
                group, version, meta["namespace"], plural, meta["name"], obj, _request_timeout=REQUEST_TIMEOUT
            )
        return self.custom.replace_cluster_custom_object(
            group, version, plural, meta["name"], obj, _request_timeout=REQUEST_TIMEOUT
        )

    def patch_status(self, group: str, version: str, plural: str, obj: Obj, new_status: Obj) -> Obj:
        """Merge-patch status from what `obj` has to `new_status`, failing with 409 if `obj` is stale."""
        patch = merge_patch_for(obj.get("status") or {}, new_status)
        if not patch:
            return obj
        meta = obj["metadata"]
        # The resourceVersion makes it a conditional write, as a controller's Status().Update() is.
        body = {"metadata": {"resourceVersion": meta.get("resourceVersion")}, "status": patch}
        if meta.get("namespace"):
            return self.custom.patch_namespaced_custom_object_status(
                group, version, meta["namespace"], plural, meta["name"], body, _request_timeout=REQUEST_TIMEOUT
            )
        return self.custom.patch_cluster_custom_object_status(
            group, version, plural, meta["name"], body, _request_timeout=REQUEST_TIMEOUT
        )

    def delete(self, group: str, version: str, plural: str, name: str, namespace: Optional[str]) -> None:
        try:
            if namespace:
                self.custom.delete_namespaced_custom_object(
                    group,
                    version,
                    namespace,
                    plural,
                    name,
                    propagation_policy="Background",
                    _request_timeout=REQUEST_TIMEOUT,
                )
            else:
                self.custom.delete_cluster_custom_object(
                    group, version, plural, name, propagation_policy="Background", _request_timeout=REQUEST_TIMEOUT
                )
        except ApiException as exc:
            if exc.status != 404:
                raise

    # core -----------------------------------------------------------------
    def _plain(self, model: Any) -> Obj:
        return self.api_client.sanitize_for_serialization(model)

    def list_pods(self, namespace: str, label_selector: str) -> list[Obj]:
        result = self.core.list_namespaced_pod(
            namespace, label_selector=label_selector, _request_timeout=REQUEST_TIMEOUT
        )
        return [self._plain(p) for p in result.items or []]

    def create_pod(self, pod: Obj) -> Obj:
        created = self.core.create_namespaced_pod(
            pod["metadata"]["namespace"], k8s.V1Pod.from_dict(pod), _request_timeout=REQUEST_TIMEOUT
        )
        return self._plain(created)

    def patch_pod_status(self, namespace: str, name: str, status: Obj) -> None:
        self.core.patch_namespaced_pod_status(
            name,
            namespace,
            {"status": status},
            _content_type="application/merge-patch+json",
            _request_timeout=REQUEST_TIMEOUT,
        )

    def delete_pod(self, namespace: str, name: str) -> None:
        try:
            self.core.delete_namespaced_pod(name, namespace, grace_period_seconds=0, _request_timeout=REQUEST_TIMEOUT)
        except ApiException as exc:
            if exc.status != 404:
                raise

    def get_service(self, namespace: str, name: str) -> Optional[Obj]:
        try:
            return self._plain(self.core.read_namespaced_service(name, namespace, _request_timeout=REQUEST_TIMEOUT))
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def create_service(self, service: Obj) -> Obj:
        created = self.core.create_namespaced_service(
            service["metadata"]["namespace"], k8s.V1Service.from_dict(service), _request_timeout=REQUEST_TIMEOUT
        )
        return self._plain(created)

    def patch_service(self, namespace: str, name: str, body: Obj) -> None:
        self.core.patch_namespaced_service(
            name, namespace, body, _content_type="application/merge-patch+json", _request_timeout=REQUEST_TIMEOUT
        )


# --------------------------------------------------------------------------
# The polling loop shared by both controllers
# --------------------------------------------------------------------------


def _ident(item: Any) -> str:
    """namespace/name of the first object in `item` (an object or a tuple holding one)."""
    for candidate in item if isinstance(item, tuple) else (item,):
        if isinstance(candidate, dict) and "metadata" in candidate:
            meta = candidate["metadata"]
            return f"{meta.get('namespace', '')}/{meta.get('name', '')}".lstrip("/")
    return repr(item)[:80]


#: How long a simulated operator goes without a pass while nothing in the store changes. What
#: the real operators do on a timer rather than on an informer event (KubeRay requeues a RayJob
#: every RayJobDefaultRequeueDuration, 3 s at kuberay@v1.3.2 and @v1.5.2 rayjob_controller.go,
#: to poll the Ray job and check deadlines) is seen within this, sooner than upstream.
IDLE_PASS_SECONDS = 0.25


class PollingController:
    """A daemon thread running `_reconcile()` until `stop()`: `interval` seconds after a pass when the
    store changed since that pass began (an informer event), else once IDLE_PASS_SECONDS have passed
    (a requeue timer) or a test waits for passes. An idle operator costs a counter read per interval."""

    name = "controller"

    def __init__(self, server: Any, *, interval: float = 0.05) -> None:
        self._server = server
        self._interval = interval
        self._passes_wanted = 0  # tests in wait_passes: no pass is skipped while any waits
        self._api = ControllerApi(server.api_client())
        self._lock = threading.RLock()
        self._stopping = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._passes = 0
        self._pass_done = threading.Condition()
        self._last_error: Optional[str] = None

    def start(self) -> "PollingController":
        """Start reconciling (again, after `stop()`); idempotent while running."""
        if self._thread is not None and self._thread.is_alive():
            return self
        if self._thread is not None:  # restarted: a stopped controller closed its client
            self._api = ControllerApi(self._server.api_client())
        self._stopping.clear()
        self._register()
        self._thread = threading.Thread(target=self._run, name=f"fake-{self.name}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop reconciling; returns once the current pass has ended (a few seconds at most)."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=REQUEST_TIMEOUT + 1)
        close = getattr(self._api.api_client, "close", None)
        if callable(close):
            try:
                close()
            except Exception:  # pragma: no cover - best effort
                pass

    def __enter__(self) -> "PollingController":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def wait_passes(self, count: int = 2, timeout: float = 10.0) -> None:
        """Block until `count` more full reconcile passes have run (to let state settle)."""
        with self._pass_done:
            target = self._passes + count
            self._passes_wanted += 1
            try:
                if not self._pass_done.wait_for(lambda: self._passes >= target, timeout=timeout):
                    raise TimeoutError(f"fake {self.name} did not complete {count} passes in {timeout}s")
            finally:
                self._passes_wanted -= 1

    @property
    def last_error(self) -> Optional[str]:
        """The last reconcile error, for test diagnostics."""
        return self._last_error

    def _run(self) -> None:
        while not self._stopping.is_set():
            revision = self._store_revision()
            try:
                with self._lock:
                    self._reconcile()
            except Exception as exc:  # never die: log and retry on the next pass
                self._note_error(f"pass failed: {exc!r}")
            with self._pass_done:
                self._passes += 1
                self._pass_done.notify_all()
            self._wait_for_work(revision)

    def _store_revision(self) -> Optional[int]:
        """The in-process store's revision (None for a server without one: never idle)."""
        store = getattr(self._server, "store", None)
        return store.resource_version if store is not None else None

    def _wait_for_work(self, revision: Optional[int]) -> None:
        """Wait `interval`, then on until the store moves past `revision`, a test waits for passes,
        or IDLE_PASS_SECONDS have gone by since the pass."""
        idle_until = time.monotonic() + IDLE_PASS_SECONDS
        self._stopping.wait(self._interval)
        while (
            revision is not None
            and not self._stopping.is_set()
            and not self._passes_wanted
            and self._store_revision() == revision
            and time.monotonic() < idle_until
        ):
            self._stopping.wait(self._interval)

    def _note_error(self, message: str) -> None:
        if message != self._last_error:
            log.warning("fake %s: %s", self.name, message, exc_info=log.isEnabledFor(logging.DEBUG))
        self._last_error = message

    def _each(self, items: Iterable[Any], fn: Callable[[Any], None], what: str) -> None:
        """Run `fn` on every item; one failing item does not stop the others."""
        for item in items:
            try:
                fn(item)
            except ApiException as exc:
                if exc.status in (404, 409):  # gone or changed during the pass; the next pass sees why
                    log.debug("fake %s: %s %s: %s", self.name, what, _ident(item), exc.reason)
                else:
                    self._note_error(f"{what} {_ident(item)}: {exc.status} {exc.reason}: {exc.body}")
            except Exception as exc:
                self._note_error(f"{what} {_ident(item)}: {exc!r}")

    def _register(self) -> None:
        """Register webhooks and aggregated APIs; called by every `start()`."""

    def _reconcile(self) -> None:
        raise NotImplementedError
