"""A Kubernetes API server for tests that only a fake can be: releases not served, simulated controllers inside.

Why it exists: the end-to-end tests run on the real kube-apiserver (testcluster), and faults come from the fault
proxy in front of it (testcluster/fault_proxy.py). This server is for what that cannot do: serve the CRDs of
a KubeRay or Kueue release the Go module proxy does not serve (`release=`/`kuberay=`/
`kueue=`, see kubesim/schemas.py) to the simulated operators of those releases, and host
the node-scale-adjuster's simulated world (KAI, the autoscalers) until those run for real.

`KubeApiServer` serves the Kubernetes REST API over plain HTTP on 127.0.0.1 (a
kernel-chosen port): discovery, CRUD/list/watch/patch/delete on built-in kinds (core/v1,
apps/v1 Deployments, batch/v1 Jobs, Leases, PriorityClasses, RBAC) and on the chosen
CRDs, serving exactly the versions those CRDs mark served and converting Kueue objects
between them (conversion.py). Status subresources, pod logs, pod port-forwarding over
WebSocket (a pod that is not Running fails as on a real cluster), TokenRequest and
SelfSubjectAccessReview. What it accepts, a real API server of that release accepts too,
with the same status codes and `Status` bodies: see store.py (write pipeline, paging,
garbage collection), kinds.py and podspec.py (per-kind behaviour and pod validation),
validation.py (schemas), cel.py (CRD CEL rules), auth.py (tokens and RBAC). Field
validation defaults to Warn as on a real server (unknown fields dropped with a `Warning`
header); Strict and Ignore when the request asks.

Tests drive it two ways: through HTTP with `kubernetes.client` (via `api_client(token)` or
`write_kubeconfig(path, token=...)`; the default token is the admin's,
`service_account_token(ns, name)` mints a ServiceAccount's), and directly through
`create_object`/`get_object`/`list_objects`/`update_status`/`delete_object`, which take
the same path through the store (defaults, hooks, validation, watch events; no
authorization) without HTTP. Extension points simulate webhooks (`add_mutating_hook`) and
aggregated APIs (`add_handler`).

What this does not do: what the real API server of testcluster is for. No TLS, no client
certificates, no kubeconfig forms beyond a bearer token, no OpenAPI documents, no
`meta.k8s.io` Tables, no server-side apply or managedFields (a real `kubectl` runs against
testcluster: tests/e2e/test_kubectl_client.py), no protobuf or CBOR (415), no exec/attach,
no SPDY (port-forward is WebSocket only), no kubelet or controllers beyond the garbage
collector, the namespace controller and the ServiceAccount controller's `default` account.
It never listens on anything but loopback. kubesim/README.md lists where it still differs
from a real server.
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

from kubesim import schemas

from .auth import ANONYMOUS, RBAC_GROUP, Attributes, Identity, Tokens, attributes, authorize, bootstrap_objects, checked_attributes, forbidden
from .errors import (
    AdmissionDenied,
    ApiError,
    FieldError,
    bad_request,
    invalid,
    method_not_allowed,
    unknown_path,
    unsupported_media_type,
)
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
_BODY_MEDIA_TYPES = ("application/json", "application/yaml", "text/yaml", "application/x-yaml", "*/*")
_TRUE = ("1", "t", "T", "true", "TRUE", "True")


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
        release: str | None = None,
        kuberay: str | None = None,
        kueue: str | None = None,
        history_limit: int = 2000,
        default_field_validation: str = "Warn",
    ) -> None:
        """Which CRDs to serve: `crds` as given, or those of a release combination.

        `release` is one id of `kubesim.schemas.RELEASES` (the other project at
        its newest); `kuberay`/`kueue` name each project's release (newest by
        default). Only the versions each CRD marks `served` are served.

        `default_field_validation` is what a request without `fieldValidation`
        gets: Warn, as on a real server (unknown fields dropped with a warning).
        """
        if release is not None:
            if kuberay is not None or kueue is not None:
                raise ValueError("pass either release or kuberay/kueue, not both")
            kuberay, kueue = schemas.release_pair(release)
        self.kuberay = kuberay or schemas.KUBERAY_NEWEST
        self.kueue = kueue or schemas.KUEUE_NEWEST
        chosen = list(schemas.crds(self.kuberay, self.kueue).values()) if crds is None else list(crds)
        self.registry = ResourceRegistry([*BUILTIN_TYPES, *(from_crd(c) for c in chosen)])
        self.store = Store(self.registry, history_limit)
        self.default_field_validation = default_field_validation
        self.request_log: list[tuple[str, str]] = []
        self.internal_errors: list[str] = []
        self._handlers: list[tuple[str, re.Pattern[str], Handler]] = []
        self._port_forward_target: PortForwardTarget = self._pod_ip_target
        self._config_lock = threading.Lock()
        self._httpd: _HttpServer | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._sockets: set[socket.socket] = set()
        self._sockets_lock = threading.Lock()
        self.tokens = Tokens(TOKEN)
        # Requests without credentials to paths served by `add_handler` skip authorization.
        # Not what a real server does (it would answer 403); kept True only until the test
        # helpers that call such handlers without a token send one. Set False for the real behaviour.
        self.anonymous_handler_calls_as_admin = True
        for namespace in INITIAL_NAMESPACES:
            self.create_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        for obj in bootstrap_objects():
            self.create_object(obj)
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

    def write_kubeconfig(self, path: str | Path, namespace: str = "default", context: str = "raybridge-test", *,
                         token: str | None = None) -> Path:
        """A kubeconfig for this server; `token` (e.g. from `service_account_token`) instead of the admin token."""
        path = Path(path)
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": context, "cluster": {"server": self.url}}],
            "users": [{"name": context, "user": {"token": token or TOKEN}}],
            "contexts": [{"name": context, "context": {"cluster": context, "user": context, "namespace": namespace}}],
            "current-context": context,
        }
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        return path

    def api_client(self, token: str | None = None, *, retries: bool | None = None) -> kubernetes.client.ApiClient:
        """An official-client ApiClient; `token` defaults to the admin token.

        `retries=False` turns off urllib3's own retries (by default it retries
        reads that fail, and idempotent requests answered 429/503 with Retry-After).
        """
        configuration = kubernetes.client.Configuration()
        configuration.host = self.url
        if retries is not None:
            configuration.retries = retries
        configuration.api_key = {"authorization": token or TOKEN}
        configuration.api_key_prefix = {"authorization": "Bearer"}
        return kubernetes.client.ApiClient(configuration)

    def service_account_token(self, namespace: str, name: str, *, expiration_seconds: int = 3600) -> str:
        """A bearer token for an existing ServiceAccount, as TokenRequest mints it (LookupError if absent)."""
        account = self.get_object("v1", "ServiceAccount", name, namespace)
        if account is None:
            raise LookupError(f"no ServiceAccount {namespace}/{name}")
        token, _ = self.tokens.mint(namespace, name, account["metadata"]["uid"], expiration_seconds)
        return token

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

    def wait_for_garbage_collection(self, timeout: float = 5.0) -> None:
        """Block until the garbage collector has acted on every write so far (TimeoutError otherwise).

        The collector runs on its own thread, as on a real cluster: a background
        DELETE answers before the dependents are gone.
        """
        if not self.store.wait_for_garbage_collection(timeout):
            raise TimeoutError("the garbage collector did not settle")

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
        result, _, _ = self.store.patch(
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

    def _authenticate(self, header: str | None) -> Identity:
        def account_uid(namespace: str, name: str) -> str | None:
            account = self.get_object("v1", "ServiceAccount", name, namespace)
            return account["metadata"]["uid"] if account else None

        return self.tokens.identify(header, account_uid)

    def _authorize(self, identity: Identity, method: str, path: str, query: dict[str, list[str]]) -> None:
        for attrs in checked_attributes(attributes(method, path, query)):
            allowed, reason = self.can(identity, attrs)
            if not allowed:
                raise forbidden(identity, attrs, reason)

    def can(self, identity: Identity, attrs: Attributes) -> tuple[bool, str]:
        """(allowed, reason) of the RBAC authorizer for these request attributes."""
        store = self.store

        def find(kind: str, name: str, namespace: str | None) -> dict[str, Any] | None:
            return store.find(RBAC_GROUP, kind, name, namespace)

        with store.lock:
            return authorize(find, lambda kind: store.find_all(RBAC_GROUP, kind), identity, attrs)

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

    def verify_request(self, request: Any, client_address: Any) -> bool:
        """Serve this user's sockets alone: the fake API server answers with an admin's rights (and port-forwards
        head pods to the tests' Ray head), so another local user's connection is closed unanswered. The kernel's
        socket table says whose the connecting socket is (testcluster/loopback.py)."""
        from testcluster.loopback import peer_is_this_user

        if not Path("/proc/net/tcp").exists():
            return True  # no Linux socket table to ask: loopback is the only protection there
        return peer_is_this_user(self.server_address[1], client_address[1])

    def handle_error(self, request: object, client_address: tuple[str, int]) -> None:
        """A client that hung up mid-request (a killed controller, a dropped watch) is routine, not a traceback."""
        if isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            return
        super().handle_error(request, client_address)


class _RequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HttpServer
    _identity: Identity | None = None

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
            self._identity = self.api._authenticate(self.headers.get("Authorization"))
            found = self.api._find_handler(method, path)
            if not (found is not None and self._identity is ANONYMOUS and self.api.anonymous_handler_calls_as_admin):
                self.api._authorize(self._identity, method, path, query)
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
            if path in ("/version", "/version/"):
                major, minor, _ = K8S_SCHEMA_VERSION.split(".", 2)
                self._send_json(200, {"major": major, "minor": minor, "gitVersion": f"v{K8S_SCHEMA_VERSION}",
                                      "gitCommit": "0" * 40, "gitTreeState": "clean",
                                      "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.25.0",
                                      "compiler": "gc", "platform": "linux/amd64"})
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

    @staticmethod
    def _paging(query: dict[str, list[str]]) -> dict[str, Any]:
        limit_text = (query.get("limit") or [""])[0]
        try:
            limit = int(limit_text) if limit_text else None
        except ValueError:
            raise bad_request(f"invalid limit: {limit_text}") from None
        return {"limit": limit if limit and limit > 0 else None,
                "continue_token": (query.get("continue") or [""])[0] or None}

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

    def _send_answer(self, route: _Route, answer: dict[str, Any], query: dict[str, list[str]]) -> None:
        """A GET's object or list (never a meta.k8s.io Table: no kubectl talks to this server)."""
        self._send_json(200, answer)

    def _send_bytes(self, code: int, data: bytes, content_type: str, headers: dict[str, str] | None = None) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _body_json(self, body: bytes | None, *, allow_empty: bool = False) -> Any:
        if not body:
            if allow_empty:
                return None
            raise bad_request("the body of the request was empty")
        content_type = (self.headers.get("Content-Type") or "application/json").split(";")[0].strip().lower()
        if content_type not in _BODY_MEDIA_TYPES:
            # kubectl's typed commands (`kubectl create configmap`) send protobuf: not decoded here.
            raise unsupported_media_type(content_type, ["application/json", "application/yaml"])
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
        if resource.create_only:
            if method != "POST" or name is not None:
                raise method_not_allowed()
            self._send_json(201, self._access_review(self._body_json(body)))
            return
        if name is None:
            if method == "GET":
                selection = self._selection(route, query)
                if is_watch:
                    self._serve_watch(route, selection, query)
                else:
                    self._send_answer(route, store.list(resource, version, selection, **self._paging(query)), query)
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
        if sub == "token" and resource.group == "" and resource.kind == "ServiceAccount":
            if method != "POST":
                raise method_not_allowed()
            self._send_json(201, self._token_request(namespace or "", name or "", self._body_json(body, allow_empty=True)))
            return
        if sub is None:
            if method == "GET":
                self._send_answer(route, store.get(resource, version, namespace, name), query)
            elif method == "PUT":
                obj, warnings, created = store.replace(resource, version, namespace, name, self._body_json(body),
                                                       dry_run=dry_run, field_validation=self._field_validation(query))
                self._send_json(201 if created else 200, obj, warnings=warnings)
            elif method == "PATCH":
                obj, warnings, created = store.patch(
                    resource, version, namespace, name, self.headers.get("Content-Type", ""), body or b"",
                    dry_run=dry_run, field_validation=self._field_validation(query))
                self._send_json(201 if created else 200, obj, warnings=warnings)
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
                obj, warnings, _ = store.patch(resource, version, namespace, name, self.headers.get("Content-Type", ""),
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

    # --- tokens and access reviews ---------------------------------------------------

    def _token_request(self, namespace: str, name: str, body: Any) -> dict[str, Any]:
        account = self.api.store.get(self.api._resource("v1", "ServiceAccount"), "v1", namespace, name)
        spec = dict((body or {}).get("spec") or {})
        seconds = spec.get("expirationSeconds", 3600)
        if not isinstance(seconds, int) or seconds < 600:
            raise invalid("authentication.k8s.io", "TokenRequest", "", [FieldError(
                "spec.expirationSeconds", "FieldValueInvalid",
                f"Invalid value: {seconds}: may not specify a duration less than 10 minutes")])
        if seconds > 2**32:
            raise invalid("authentication.k8s.io", "TokenRequest", "", [FieldError(
                "spec.expirationSeconds", "FieldValueInvalid",
                f"Invalid value: {seconds}: may not specify a duration larger than 2^32 seconds")])
        token, expires = self.api.tokens.mint(namespace, name, account["metadata"]["uid"], seconds)
        spec.setdefault("audiences", ["https://kubernetes.default.svc.cluster.local"])
        spec["expirationSeconds"] = seconds
        stamp = dt.datetime.fromtimestamp(int(expires), dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        return {"kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1",
                "metadata": {"name": name, "namespace": namespace, "creationTimestamp": None},
                "spec": spec, "status": {"token": token, "expirationTimestamp": stamp}}

    def _access_review(self, body: Any) -> dict[str, Any]:
        spec = (body or {}).get("spec") if isinstance(body, dict) else None
        if not isinstance(spec, dict):
            spec = {}
        resource_attrs, non_resource = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
        if bool(resource_attrs) == bool(non_resource):
            raise invalid("authorization.k8s.io", "SelfSubjectAccessReview", "", [FieldError(
                "spec.resourceAttributes", "FieldValueInvalid",
                'Invalid value: "null": exactly one of nonResourceAttributes or resourceAttributes must be specified')])
        if resource_attrs:
            attrs = Attributes(resource_attrs.get("verb", ""), "", True, resource_attrs.get("group", ""),
                               resource_attrs.get("resource", ""), resource_attrs.get("subresource", ""),
                               resource_attrs.get("namespace", ""), resource_attrs.get("name", ""))
        else:
            attrs = Attributes(non_resource.get("verb", ""), non_resource.get("path", ""), False)
        assert self._identity is not None
        allowed, reason = self.api.can(self._identity, attrs)
        status: dict[str, Any] = {"allowed": allowed}
        if reason:
            status["reason"] = reason
        return {"kind": "SelfSubjectAccessReview", "apiVersion": "authorization.k8s.io/v1",
                "metadata": {"creationTimestamp": None}, "spec": spec, "status": status}

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
        status = pod.get("status") or {}
        if status.get("phase") in (None, "", "Pending"):
            if not spec.get("nodeName"):
                # LogLocation: no node yet, so nothing to stream (an empty answer).
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            waiting = next((((c.get("state") or {}).get("waiting") or {}).get("reason")
                            for c in (status.get("containerStatuses") or []) + (status.get("initContainerStatuses") or [])
                            if c.get("name") == container), None)
            raise bad_request(f'container "{container}" in pod "{name}" is waiting to start: '
                              f"{waiting or 'ContainerCreating'}")
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
        meta, phase = pod["metadata"], (pod.get("status") or {}).get("phase")
        if phase != "Running":
            if not (pod.get("spec") or {}).get("nodeName"):
                # PortForwardLocation: an unscheduled pod has no kubelet to forward to.
                raise bad_request(f"pod {meta['name']} does not have a host assigned")
            # The kubelet finds no running sandbox and answers the upgrade with a 500.
            self._send_text(500, f"failed to find sandboxID for pod {meta['name']}_{meta['namespace']}({meta['uid']})")
            return
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
