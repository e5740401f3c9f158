"""A small Kubernetes API server for tests, spoken to by the official client.

`KubeApiServer` serves the Kubernetes REST API over plain HTTP on 127.0.0.1
(a kernel-chosen port): discovery, CRUD/list/watch/patch/delete on built-in
kinds (core/v1, apps/v1 Deployments, batch/v1 Jobs, Leases, PriorityClasses)
and on every CRD in `tests.schemas.crds()`, status subresources, pod logs and
pod port-forwarding over WebSocket. What it accepts, a real API server would
accept too, with the same status codes and `Status` bodies (see store.py for
the semantics, kinds.py for per-kind behaviour, validation.py for schemas).
One deliberate difference in defaults: a request without `fieldValidation`
is treated as Strict (unknown fields are a 400), where a real server warns
and drops them; pass `fieldValidation=Warn` to get the real default.

Tests drive it two ways: through HTTP with `kubernetes.client` (via
`api_client()` or `write_kubeconfig()`), and directly through
`create_object`/`get_object`/`list_objects`/`update_status`/`delete_object`,
which take the same path through the store (defaults, hooks, garbage
collection, watch events) without HTTP. Extension points simulate webhooks
(`add_mutating_hook`), aggregated APIs (`add_handler`) and failures
(`fail_next`).

What this does not do: no TLS, no authentication or authorization (any
bearer token is accepted), no protobuf or CBOR, no server-side apply, no
exec/attach, no SPDY (port-forward is WebSocket only), no kubelet or
controllers beyond the garbage collector and namespace cleanup. It never
listens on anything but loopback.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import socket
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator
from urllib.parse import parse_qs, unquote, urlsplit

import kubernetes.client
import yaml

from tests import schemas

from .errors import AdmissionDenied, ApiError, bad_request, method_not_allowed, unknown_path
from .resources import BUILTIN_TYPES, ResourceRegistry, ResourceType, from_crd
from .selectors import parse_field_selector, parse_label_selector
from .store import INITIAL_NAMESPACES, DeleteOptions, MutatingHook, Store, WatchFilter, now_rfc3339
from .validation import K8S_SCHEMA_VERSION
from .websocket import WebSocketConnection, accept_key, choose_protocol

__all__ = ["KubeApiServer", "AdmissionDenied", "ApiError"]

HandlerResult = tuple[int, "dict[str, Any] | str"]
Handler = Callable[["re.Match[str]", dict[str, list[str]], "bytes | None"], HandlerResult]
PortForwardTarget = Callable[[str, str, int], tuple[str, int]]

TOKEN = "raybridge-test-token"
PORT_FORWARD_PROTOCOL = "v4.channel.k8s.io"
DEFAULT_WATCH_TIMEOUT = 1800.0
CLOSE_GRACE_SECONDS = 2.0
_TRUE = ("1", "t", "T", "true", "TRUE", "True")


@dataclass
class _Failure:
    method: str
    pattern: re.Pattern[str]
    code: int
    reason: str
    message: str
    remaining: int


@dataclass
class _Route:
    resource: ResourceType
    version: str
    namespace: str | None
    name: str | None
    subresource: str | None
    watch_path: bool


class KubeApiServer:
    """An in-process Kubernetes API server on 127.0.0.1 for tests."""

    def __init__(
        self,
        *,
        crds: Iterable[dict[str, Any]] | None = None,
        history_limit: int = 2000,
        default_field_validation: str = "Strict",
    ) -> None:
        """`crds`: the CRDs to serve (default: all of `tests.schemas.crds()`).

        `default_field_validation` is what a request without `fieldValidation`
        gets. Real servers default to Warn (drop unknown fields, add a warning);
        this one defaults to Strict so that a typo in a manifest fails the test.
        """
        chosen = list(schemas.crds().values()) if crds is None else list(crds)
        self.registry = ResourceRegistry([*BUILTIN_TYPES, *(from_crd(c) for c in chosen)])
        self.store = Store(self.registry, history_limit)
        self.default_field_validation = default_field_validation
        self.request_log: list[tuple[str, str]] = []
        self.internal_errors: list[str] = []
        self._handlers: list[tuple[str, re.Pattern[str], Handler]] = []
        self._failures: list[_Failure] = []
        self._port_forward_target: PortForwardTarget = self._pod_ip_target
        self._config_lock = threading.Lock()
        self._httpd: _HttpServer | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._sockets: set[socket.socket] = set()
        self._sockets_lock = threading.Lock()
        for namespace in INITIAL_NAMESPACES:
            self.create_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        for crd in chosen:
            self._seed_crd(crd)

    # --- lifecycle -------------------------------------------------------------

    def start(self) -> "KubeApiServer":
        if self._httpd is not None:
            return self
        self._httpd = _HttpServer(("127.0.0.1", 0), _RequestHandler, self)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="kubeapi-server", daemon=True
        )
        self._thread.start()
        return self

    @property
    def url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("the server is not started")
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def stop(self) -> None:
        """Stop serving and end every open watch, log stream and port-forward."""
        self._stopping.set()
        self.store.close()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        with self._sockets_lock:
            open_sockets = list(self._sockets)
        for sock in open_sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = None

    def __enter__(self) -> "KubeApiServer":
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def write_kubeconfig(self, path: str | Path, namespace: str = "default", context: str = "raybridge-test") -> Path:
        path = Path(path)
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": context, "cluster": {"server": self.url}}],
            "users": [{"name": context, "user": {"token": TOKEN}}],
            "contexts": [{"name": context, "context": {"cluster": context, "user": context, "namespace": namespace}}],
            "current-context": context,
        }
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        return path

    def api_client(self) -> kubernetes.client.ApiClient:
        configuration = kubernetes.client.Configuration()
        configuration.host = self.url
        configuration.api_key = {"authorization": TOKEN}
        configuration.api_key_prefix = {"authorization": "Bearer"}
        return kubernetes.client.ApiClient(configuration)

    # --- extension points ----------------------------------------------------

    def add_mutating_hook(self, group: str, kind: str, fn: MutatingHook) -> None:
        """`fn(obj, "CREATE"|"UPDATE")` mutates writes of group/kind in place before validation.

        Called for creates, updates and patches of the main resource (not for
        /status writes or deletes), after defaulting, like a mutating webhook.
        It runs with the store lock held: use the direct methods of this object
        inside it, not HTTP. Raise `AdmissionDenied` to reject the request.
        """
        self.store.add_hook(group, kind, fn)

    def add_handler(self, method: str, path_regex: str, fn: Handler) -> None:
        """Answer `method` requests whose whole path matches `path_regex` with `fn(match, query, body)`."""
        with self._config_lock:
            self._handlers.append((method.upper(), re.compile(path_regex), fn))

    def fail_next(
        self, method: str, path_regex: str, code: int = 500, times: int = 1, reason: str = "InternalError",
        message: str | None = None,
    ) -> None:
        """Make the next `times` requests whose method (or "*") and whole decoded path match fail with this Status."""
        if message is None:
            message = "Internal error occurred: injected failure" if reason == "InternalError" else "injected failure"
        with self._config_lock:
            self._failures.append(_Failure(method.upper(), re.compile(path_regex), code, reason, message, times))

    def set_port_forward_target(self, fn: PortForwardTarget) -> None:
        """Where port-forwards connect: `fn(namespace, pod, port) -> (host, port)`."""
        self._port_forward_target = fn

    def set_pod_log(self, namespace: str, pod: str, text: str, *, container: str | None = None,
                    closed: bool = False) -> None:
        """The log of a pod (container None: every container). Open logs keep `follow` streams waiting."""
        self.store.set_pod_log(namespace, pod, text, container, closed)

    def append_pod_log(self, namespace: str, pod: str, text: str, *, container: str | None = None) -> None:
        self.store.append_pod_log(namespace, pod, text, container)

    def close_pod_log(self, namespace: str, pod: str, *, container: str | None = None) -> None:
        """The container has exited: `follow` streams end after the last line."""
        self.store.close_pod_log(namespace, pod, container)

    def compact(self) -> None:
        """Drop the watch history; watches from older resourceVersions get 410 Expired."""
        self.store.compact()

    # --- direct store access -------------------------------------------------

    def _resource(self, api_version: str, kind: str) -> ResourceType:
        resource = self.registry.by_kind(api_version, kind)
        if resource is None:
            raise LookupError(f"the server does not serve {kind} in {api_version}")
        return resource

    @staticmethod
    def _version(api_version: str) -> str:
        return api_version.rpartition("/")[2]

    def create_object(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Create as a POST would; a `status` given for a kind with a status subresource is
        then written through /status (a create alone would drop it). Raises ApiError."""
        resource = self._resource(obj.get("apiVersion", ""), obj.get("kind", ""))
        version = self._version(obj["apiVersion"])
        namespace = (obj.get("metadata") or {}).get("namespace") or "default" if resource.namespaced else None
        created, _ = self.store.create(resource, version, namespace, obj, field_validation="Strict")
        if resource.has_status and obj.get("status") is not None and resource.kind != "Node":
            status_body = dict(created, status=obj["status"])
            created, _, _ = self.store.replace(resource, version, namespace, created["metadata"]["name"],
                                               status_body, subresource="status")
        return created

    def get_object(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        resource = self._resource(api_version, kind)
        try:
            return self.store.get(resource, self._version(api_version), namespace if resource.namespaced else None, name)
        except ApiError as error:
            if error.code == 404:
                return None
            raise

    def list_objects(
        self, api_version: str, kind: str, namespace: str | None = None, label_selector: str | None = None
    ) -> list[dict[str, Any]]:
        resource = self._resource(api_version, kind)
        selection = WatchFilter(namespace if resource.namespaced else None, parse_label_selector(label_selector))
        items = self.store.list(resource, self._version(api_version), selection)["items"]
        return [dict(item, apiVersion=api_version, kind=kind) for item in items]

    def replace_object(self, obj: dict[str, Any]) -> dict[str, Any]:
        """PUT the object (status changes are ignored where there is a status subresource;
        custom resources need metadata.resourceVersion)."""
        resource = self._resource(obj.get("apiVersion", ""), obj.get("kind", ""))
        meta = obj.get("metadata") or {}
        namespace = meta.get("namespace") or "default" if resource.namespaced else None
        result, _, _ = self.store.replace(resource, self._version(obj["apiVersion"]), namespace, meta["name"], obj)
        return result

    def update_status(self, obj: dict[str, Any]) -> dict[str, Any]:
        """PUT .../status with obj's status.

        metadata.resourceVersion, when given, must be current; custom resources
        require it, as their PUTs are never unconditional on a real server.
        """
        resource = self._resource(obj.get("apiVersion", ""), obj.get("kind", ""))
        if not resource.has_status:
            raise LookupError(f"{resource.qualified_kind} has no status subresource")
        meta = obj.get("metadata") or {}
        namespace = meta.get("namespace") or "default" if resource.namespaced else None
        result, _, _ = self.store.replace(
            resource, self._version(obj["apiVersion"]), namespace, meta["name"], obj, subresource="status"
        )
        return result

    def patch_object(
        self, api_version: str, kind: str, name: str, patch: Any, namespace: str | None = None,
        *, content_type: str = "application/merge-patch+json", subresource: str | None = None,
    ) -> dict[str, Any]:
        resource = self._resource(api_version, kind)
        result, _ = self.store.patch(
            resource, self._version(api_version), namespace if resource.namespaced else None, name, content_type,
            json.dumps(patch).encode(), subresource=subresource,
        )
        return result

    def delete_object(
        self, api_version: str, kind: str, name: str, namespace: str | None = None, propagation_policy: str | None = None
    ) -> dict[str, Any]:
        """DELETE; returns what the HTTP DELETE would (the object, or a Success Status)."""
        resource = self._resource(api_version, kind)
        return self.store.delete(
            resource, self._version(api_version), namespace if resource.namespaced else None, name,
            DeleteOptions(propagation_policy=propagation_policy),
        )

    # --- internals -------------------------------------------------------------

    def _seed_crd(self, crd: dict[str, Any]) -> None:
        resource = self.registry.by_kind("apiextensions.k8s.io/v1", "CustomResourceDefinition")
        assert resource is not None
        names = crd["spec"]["names"]
        # Shallow: the cached CRD's spec is shared, and stored objects are never changed in place.
        obj = dict(crd)
        obj["metadata"] = dict(crd.get("metadata") or {})
        obj["metadata"].setdefault("name", f"{names['plural']}.{crd['spec']['group']}")
        obj["status"] = {
            "acceptedNames": names,
            "conditions": [
                {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
                 "message": "no conflicts found", "lastTransitionTime": now_rfc3339()},
                {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
                 "message": "the initial names have been accepted", "lastTransitionTime": now_rfc3339()},
            ],
            "storedVersions": [v["name"] for v in crd["spec"]["versions"] if v.get("storage")],
        }
        self.store.seed(resource, obj)

    def _pod_ip_target(self, namespace: str, pod: str, port: int) -> tuple[str, int]:
        obj = self.get_object("v1", "Pod", pod, namespace)
        address = ((obj or {}).get("status") or {}).get("podIP")
        if not address:
            raise OSError(f"pod {namespace}/{pod} has no status.podIP")
        return address, port

    def _take_failure(self, method: str, path: str) -> _Failure | None:
        with self._config_lock:
            for failure in self._failures:
                if failure.remaining > 0 and failure.method in (method, "*") and failure.pattern.fullmatch(path):
                    failure.remaining -= 1
                    return failure
        return None

    def _find_handler(self, method: str, path: str) -> tuple[Handler, re.Match[str]] | None:
        with self._config_lock:
            for handler_method, pattern, fn in self._handlers:
                match = pattern.fullmatch(path)
                if match and handler_method in (method, "*"):
                    return fn, match
        return None

    def _track(self, sock: socket.socket, add: bool) -> None:
        with self._sockets_lock:
            if add:
                self._sockets.add(sock)
            else:
                self._sockets.discard(sock)


class _HttpServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], api: KubeApiServer) -> None:
        self.api = api
        super().__init__(address, handler)


class _RequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HttpServer

    # --- plumbing ------------------------------------------------------------------

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in separate writes; without this, Nagle's algorithm and the
        # client's delayed ACK add ~40 ms to every response.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.api._track(self.connection, True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.api._track(self.connection, False)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        return

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_PATCH(self) -> None:
        self._dispatch("PATCH")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def do_HEAD(self) -> None:
        self._dispatch("HEAD")

    def do_OPTIONS(self) -> None:
        self._dispatch("OPTIONS")

    @property
    def api(self) -> KubeApiServer:
        return self.server.api

    def _read_body(self) -> bytes | None:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else None

    def _send_json(self, code: int, body: Any, headers: dict[str, str] | None = None, warnings: list[str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Cache-Control", "no-cache, private")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        for warning in warnings or []:
            self.send_header("Warning", '299 - "' + warning.replace("\\", "\\\\").replace('"', '\\"') + '"')
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _send_text(self, code: int, text: str) -> None:
        data = text.encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _send_error(self, error: ApiError) -> None:
        self._send_json(error.code, error.status(), error.headers)

    def _start_chunked(self, content_type: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Cache-Control", "no-cache, private")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()

    def _chunk(self, data: bytes) -> bool:
        try:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()
            return True
        except OSError:
            self.close_connection = True
            return False

    def _end_chunked(self) -> None:
        try:
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:
            self.close_connection = True

    # --- dispatch ------------------------------------------------------------------

    def _dispatch(self, method: str) -> None:
        split = urlsplit(self.path)
        path = unquote(split.path)  # Go's URL.Path is decoded too: "a%2Fb" routes as "a/b"
        query = parse_qs(split.query, keep_blank_values=True)
        self.api.request_log.append((method, path))
        try:
            body = self._read_body()
            failure = self.api._take_failure(method, path)
            if failure is not None:
                headers = {"Retry-After": "1"} if failure.code == 429 else {}
                details = {"retryAfterSeconds": 1} if failure.code == 429 else None
                raise ApiError(failure.code, failure.reason, failure.message, details, headers)
            found = self.api._find_handler(method, path)
            if found is not None:
                fn, match = found
                code, answer = fn(match, query, body)
                if isinstance(answer, str):
                    self._send_text(code, answer)
                else:
                    self._send_json(code, answer)
                return
            self._route(method, path, query, body)
        except ApiError as error:
            self._send_error(error)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception as error:  # answered as a real server would, and kept for the test to see
            self.api.internal_errors.append(traceback.format_exc())
            print(traceback.format_exc(), file=sys.stderr)
            try:
                self._send_error(ApiError(500, "InternalError", f"Internal error occurred: {error}"))
            except OSError:
                self.close_connection = True

    def _route(self, method: str, path: str, query: dict[str, list[str]], body: bytes | None) -> None:
        registry = self.api.registry
        segments = [s for s in path.split("/") if s]
        if method in ("GET", "HEAD"):
            if path in ("/healthz", "/livez", "/readyz"):
                self._send_text(200, "ok")
                return
            if path == "/version":
                major, minor, _ = K8S_SCHEMA_VERSION.split(".", 2)
                self._send_json(200, {"major": major, "minor": minor, "gitVersion": f"v{K8S_SCHEMA_VERSION}",
                                      "platform": "linux/amd64"})
                return
            if segments == ["api"]:
                host, port = self.server.server_address[:2]
                self._send_json(200, registry.api_versions(f"{host}:{port}"))
                return
            if segments == ["apis"]:
                self._send_json(200, registry.api_group_list())
                return
            if len(segments) == 2 and segments[0] == "apis":
                group_doc = registry.api_group(segments[1])
                if group_doc is None:
                    raise unknown_path()
                self._send_json(200, group_doc)
                return
            if (len(segments) == 2 and segments[0] == "api") or (len(segments) == 3 and segments[0] == "apis"):
                group = "" if segments[0] == "api" else segments[1]
                resources = registry.api_resource_list(group, segments[-1])
                if resources is None:
                    raise unknown_path()
                self._send_json(200, resources)
                return
        route = self._parse_route(segments)
        self._serve_resource(method, route, query, body)

    def _parse_route(self, segments: list[str]) -> _Route:
        registry = self.api.registry
        if len(segments) >= 3 and segments[0] == "api":
            group, version, rest = "", segments[1], segments[2:]
        elif len(segments) >= 4 and segments[0] == "apis":
            group, version, rest = segments[1], segments[2], segments[3:]
        else:
            raise unknown_path()
        watch_path = False
        if rest and rest[0] == "watch":
            watch_path, rest = True, rest[1:]
        namespace: str | None = None
        if len(rest) >= 3 and rest[0] == "namespaces":
            candidate = registry.by_plural(group, version, rest[2])
            if candidate is not None and candidate.namespaced:
                namespace, rest = rest[1], rest[2:]
        if not rest or len(rest) > 3:
            raise unknown_path()
        resource = registry.by_plural(group, version, rest[0])
        if resource is None or (namespace is not None and not resource.namespaced):
            raise unknown_path()
        name = rest[1] if len(rest) > 1 else None
        subresource = rest[2] if len(rest) > 2 else None
        if resource.namespaced and name is not None and namespace is None:
            raise unknown_path()
        return _Route(resource, version, namespace, name, subresource, watch_path)

    def _field_validation(self, query: dict[str, list[str]]) -> str:
        value = (query.get("fieldValidation") or [self.api.default_field_validation])[0]
        if value not in ("Strict", "Warn", "Ignore"):
            raise bad_request(f'fieldValidation: Unsupported value: "{value}": supported values: "Ignore", "Strict", "Warn"')
        return value

    def _selection(self, route: _Route, query: dict[str, list[str]]) -> WatchFilter:
        resource = route.resource
        labels = parse_label_selector((query.get("labelSelector") or [""])[0])
        fields = parse_field_selector(
            (query.get("fieldSelector") or [""])[0], resource.supports_field, resource.unsupported_field_message
        )
        if route.watch_path and route.name is not None:
            fields = parse_field_selector(
                ",".join(filter(None, [f"metadata.name={route.name}", (query.get("fieldSelector") or [""])[0]])),
                resource.supports_field, resource.unsupported_field_message,
            )
        return WatchFilter(route.namespace if resource.namespaced else None, labels, fields)

    def _body_json(self, body: bytes | None, *, allow_empty: bool = False) -> Any:
        if not body:
            if allow_empty:
                return None
            raise bad_request("the body of the request was empty")
        content_type = (self.headers.get("Content-Type") or "application/json").split(";")[0].strip().lower()
        try:
            if content_type in ("application/yaml", "text/yaml", "application/x-yaml"):
                return yaml.safe_load(body)
            return json.loads(body)
        except (ValueError, yaml.YAMLError) as error:
            raise bad_request(f"couldn't get version/kind; json parse error: {error}") from None

    def _serve_resource(self, method: str, route: _Route, query: dict[str, list[str]], body: bytes | None) -> None:
        store = self.api.store
        resource, version, namespace, name = route.resource, route.version, route.namespace, route.name
        dry_run = bool(query.get("dryRun"))
        is_watch = route.watch_path or (query.get("watch") or [""])[0] in _TRUE
        if name is None:
            if method == "GET":
                selection = self._selection(route, query)
                if is_watch:
                    self._serve_watch(route, selection, query)
                else:
                    self._send_json(200, store.list(resource, version, selection))
                return
            if method == "POST" and (namespace is not None or not resource.namespaced):
                obj, warnings = store.create(resource, version, namespace, self._body_json(body), dry_run=dry_run,
                                             field_validation=self._field_validation(query))
                self._send_json(201, obj, warnings=warnings)
                return
            if method == "DELETE" and (namespace is not None or not resource.namespaced) and not resource.read_only:
                options = DeleteOptions.parse(query, self._body_json(body, allow_empty=True))
                self._send_json(200, store.delete_collection(resource, version, self._selection(route, query), options))
                return
            raise method_not_allowed()
        if route.watch_path:
            if method != "GET":
                raise method_not_allowed()
            self._serve_watch(route, self._selection(route, query), query)
            return
        sub = route.subresource
        if sub is None:
            if method == "GET":
                self._send_json(200, store.get(resource, version, namespace, name))
            elif method == "PUT":
                obj, warnings, created = store.replace(resource, version, namespace, name, self._body_json(body),
                                                       dry_run=dry_run, field_validation=self._field_validation(query))
                self._send_json(201 if created else 200, obj, warnings=warnings)
            elif method == "PATCH":
                obj, warnings = store.patch(resource, version, namespace, name, self.headers.get("Content-Type", ""),
                                            body or b"", dry_run=dry_run, field_validation=self._field_validation(query))
                self._send_json(200, obj, warnings=warnings)
            elif method == "DELETE":
                options = DeleteOptions.parse(query, self._body_json(body, allow_empty=True))
                self._send_json(200, store.delete(resource, version, namespace, name, options))
            else:
                raise method_not_allowed()
            return
        if sub == "status" and resource.has_status:
            if method == "GET":
                self._send_json(200, store.get(resource, version, namespace, name))
            elif method == "PUT" and not resource.read_only:
                obj, warnings, _ = store.replace(resource, version, namespace, name, self._body_json(body),
                                                 subresource="status", dry_run=dry_run,
                                                 field_validation=self._field_validation(query))
                self._send_json(200, obj, warnings=warnings)
            elif method == "PATCH" and not resource.read_only:
                obj, warnings = store.patch(resource, version, namespace, name, self.headers.get("Content-Type", ""),
                                            body or b"", subresource="status", dry_run=dry_run,
                                            field_validation=self._field_validation(query))
                self._send_json(200, obj, warnings=warnings)
            else:
                raise method_not_allowed()
            return
        if sub == "finalize" and resource.group == "" and resource.kind == "Namespace":
            if method != "PUT":
                raise method_not_allowed()
            obj, _, _ = store.replace(resource, version, None, name, self._body_json(body), subresource="finalize")
            self._send_json(200, obj)
            return
        if resource.group == "" and resource.kind == "Pod" and sub in ("log", "portforward"):
            pod = store.get(resource, version, namespace, name)
            if sub == "log":
                if method != "GET":
                    raise method_not_allowed()
                self._serve_log(pod, query)
            else:
                if method not in ("GET", "POST"):
                    raise method_not_allowed()
                self._serve_port_forward(pod, query)
            return
        raise unknown_path()

    # --- watch ---------------------------------------------------------------------

    def _serve_watch(self, route: _Route, selection: WatchFilter, query: dict[str, list[str]]) -> None:
        timeout = DEFAULT_WATCH_TIMEOUT
        if query.get("timeoutSeconds"):
            try:
                timeout = float(query["timeoutSeconds"][0])
            except ValueError:
                raise bad_request(f"invalid timeoutSeconds: {query['timeoutSeconds'][0]}") from None
        resource_version = (query.get("resourceVersion") or [None])[0]
        if resource_version and not resource_version.isdigit():
            raise bad_request(f"invalid resource version: {resource_version}")
        events: Iterator[dict[str, Any]] = self.api.store.watch(
            route.resource, route.version, selection, resource_version, timeout, self.api._stopping
        )
        self._start_chunked("application/json")
        try:
            for event in events:
                if not self._chunk(json.dumps(event).encode() + b"\n"):
                    return
            self._end_chunked()
        finally:
            events.close()

    # --- pod logs --------------------------------------------------------------------

    def _serve_log(self, pod: dict[str, Any], query: dict[str, list[str]]) -> None:
        meta, spec = pod["metadata"], pod.get("spec") or {}
        name, namespace = meta["name"], meta["namespace"]
        containers = [c.get("name") for c in spec.get("containers") or []]
        init_containers = [c.get("name") for c in spec.get("initContainers") or []]
        container = (query.get("container") or [None])[0]
        if not container:
            if len(containers) != 1:
                message = f"a container name must be specified for pod {name}, choose one of: [{' '.join(containers)}]"
                if init_containers:
                    message += f" or one of the init containers: [{' '.join(init_containers)}]"
                raise bad_request(message)
            container = containers[0]
        elif container not in containers + init_containers:
            raise bad_request(f"container {container} is not valid for pod {name}")
        if (query.get("previous") or ["false"])[0] in _TRUE:
            raise bad_request(f'previous terminated container "{container}" in pod "{name}" not found')
        follow = (query.get("follow") or ["false"])[0] in _TRUE
        timestamps = (query.get("timestamps") or ["false"])[0] in _TRUE
        tail = int(query["tailLines"][0]) if query.get("tailLines") else None
        limit = int(query["limitBytes"][0]) if query.get("limitBytes") else None
        since = float(query["sinceSeconds"][0]) if query.get("sinceSeconds") else None
        store = self.api.store

        def render(entries: list[tuple[str, str]]) -> bytes:
            if since is not None:
                cutoff = time.time() - since
                entries = [e for e in entries if _epoch(e[0]) >= cutoff]
            return "".join((f"{stamp} {line}" if timestamps else line) for stamp, line in entries).encode()

        log = store.pod_log(namespace, name, container)
        entries = list(log.entries) if log else []
        if tail is not None:
            entries = entries[-tail:] if tail > 0 else []
        if not follow:
            data = render(entries)
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            data = data[:limit] if limit is not None else data
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        self._start_chunked("text/plain")
        sent_bytes = 0
        sent_entries = len(log.entries) if log else 0
        pending = render(entries)
        uid = meta["uid"]
        while True:
            if pending:
                if limit is not None:
                    pending = pending[: max(0, limit - sent_bytes)]
                if pending and not self._chunk(pending):
                    return
                sent_bytes += len(pending)
                if limit is not None and sent_bytes >= limit:
                    break
            with store.changed:
                while True:
                    current = store.pod_log(namespace, name, container)
                    alive = store.find("", "Pod", name, namespace)
                    if self.api._stopping.is_set() or alive is None or alive["metadata"]["uid"] != uid:
                        current = None
                        break
                    if current is not None and (len(current.entries) > sent_entries or current.closed):
                        break
                    store.changed.wait(0.5)
                if current is None:
                    break
                new_entries = current.entries[sent_entries:]
                sent_entries = len(current.entries)
                closed = current.closed
            pending = render(new_entries)
            if closed and not pending:
                break
        self._end_chunked()

    # --- port-forward ----------------------------------------------------------------

    def _serve_port_forward(self, pod: dict[str, Any], query: dict[str, list[str]]) -> None:
        if self.headers.get("Upgrade", "").lower() != "websocket":
            raise bad_request("Upgrade request required")
        ports: list[int] = []
        for value in query.get("ports") or []:
            for item in value.split(","):
                try:
                    port = int(item)
                except ValueError:
                    raise bad_request(f'unable to parse "{item}" as a port: invalid syntax') from None
                if not 0 < port < 65536:
                    raise bad_request(f"port {port} must be > 0 and < 65536")
                ports.append(port)
        if not ports:
            raise bad_request("at least 1 port must be specified")
        key = self.headers.get("Sec-WebSocket-Key")
        if not key or self.headers.get("Sec-WebSocket-Version") != "13":
            raise bad_request("websocket: not a websocket handshake: 'Sec-WebSocket-Key' or version missing")
        protocol = choose_protocol(self.headers.get("Sec-WebSocket-Protocol"), [PORT_FORWARD_PROTOCOL])
        if protocol is None:
            raise bad_request(
                f"requested protocol(s) are not supported: {self.headers.get('Sec-WebSocket-Protocol')}; "
                f"supports {[PORT_FORWARD_PROTOCOL]}"
            )
        self.send_response(101, "Switching Protocols")
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept_key(key))
        self.send_header("Sec-WebSocket-Protocol", protocol)
        self.end_headers()
        self.wfile.flush()
        self.close_connection = True
        _PortForwardSession(self.api, WebSocketConnection(self.rfile, self.connection), self.connection, pod, ports).run()


class _PortForwardSession:
    """One port-forward WebSocket: a TCP connection per requested port, pumped both ways."""

    def __init__(
        self, api: KubeApiServer, ws: WebSocketConnection, sock: socket.socket, pod: dict[str, Any], ports: list[int]
    ) -> None:
        self.api = api
        self.ws = ws
        self.sock = sock
        self.namespace = pod["metadata"]["namespace"]
        self.pod = pod["metadata"]["name"]
        self.uid = pod["metadata"]["uid"]
        self.ports = ports
        self.targets: dict[int, socket.socket] = {}
        self.open_count = 0
        self.lock = threading.Lock()

    def run(self) -> None:
        for index, port in enumerate(self.ports):
            prefix = port.to_bytes(2, "little")
            self.ws.send_binary(bytes([2 * index]) + prefix)
            self.ws.send_binary(bytes([2 * index + 1]) + prefix)
        readers = []
        for index, port in enumerate(self.ports):
            try:
                host, target_port = self.api._port_forward_target(self.namespace, self.pod, port)
                target = socket.create_connection((host, target_port), timeout=5)
                target.settimeout(None)
            except OSError as error:
                self.ws.send_binary(
                    bytes([2 * index + 1])
                    + f"error forwarding port {port} to pod {self.pod}, uid {self.uid}: {error}".encode()
                )
                continue
            self.api._track(target, True)
            self.targets[index] = target
            self.open_count += 1
            reader = threading.Thread(target=self._pump_from_target, args=(index, target), daemon=True,
                                      name=f"port-forward {self.pod}:{port}")
            readers.append(reader)
        if not self.targets:
            self.ws.send_close()
            return
        for reader in readers:
            reader.start()
        try:
            while True:
                message = self.ws.receive()
                if message is None:
                    break
                _, data = message
                if not data:
                    continue
                channel, payload = data[0], data[1:]
                target = self.targets.get(channel // 2)
                if channel % 2 == 0 and target is not None and payload:
                    try:
                        target.sendall(payload)
                    except OSError:
                        pass
        finally:
            for target in self.targets.values():
                try:
                    target.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            for reader in readers:
                reader.join(timeout=5)
            for target in self.targets.values():
                self.api._track(target, False)
                target.close()
            self.ws.send_close()

    def _pump_from_target(self, index: int, target: socket.socket) -> None:
        channel = bytes([2 * index])
        while True:
            try:
                data = target.recv(65536)
            except OSError:
                data = b""
            if not data:
                break
            if not self.ws.send_binary(channel + data):
                break
        with self.lock:
            self.open_count -= 1
            finished = self.open_count == 0
        if finished:
            # Every forwarded connection ended: close the WebSocket, as the kubelet does,
            # and stop waiting for the client's close reply after a grace period.
            self.ws.send_close()
            timer = threading.Timer(CLOSE_GRACE_SECONDS, self._stop_reading)
            timer.daemon = True
            timer.start()

    def _stop_reading(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RD)
        except OSError:
            pass


def _epoch(stamp: str) -> float:
    return dt.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=dt.timezone.utc).timestamp()
