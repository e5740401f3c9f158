"""A fault-injecting TLS proxy in front of the stack's real kube-apiserver.

Why: what a client does when the API server fails (a request refused with 500, 503, 429 and its Retry-After, 409 or
403, an answer that comes late or never, an answer that is not JSON or is cut short, a connection dropped, a watch
closed after a few events) is tested against the real API server, not a fake one. The test's kubeconfig names this
proxy instead of the API server; each request either meets a fault armed for its method and path (`arm`), or is
passed on to the API server as it came and its answer passed back as it comes (watches and other streams chunk by
chunk; an `Upgrade` request, a port-forward or exec, byte for byte after its 101). Only the client the test aims
goes through it: the controllers (KubeRay, Kueue, the scheduler) keep talking to the API server directly, so no
fault is spent on them.

Who gets in, as the stack's other doors (kubelet_gate.py): it listens on 127.0.0.1 only, serves a certificate of the
stack's CA, and completes the TLS handshake only with a client certificate of that CA whose common name is the one
of the identity it forwards with (`identity`): a client gets through it no right that its own certificate does not
already give it. The API server then sees that identity (the proxy holds its key, as the kubeconfig that names the
proxy does); a request's own `Authorization` header passes on unchanged, so a bearer token still acts as its owner.

Bounded: the client's handshake, every read from a client and every call upstream has a timeout (a watch's is its
`timeoutSeconds` and a margin); a delay ends at once when the proxy stops.

What it deliberately does not do: HTTP/2 (ALPN offers HTTP/1.1 alone, which every Kubernetes client falls back to),
count the events of a protobuf watch (`after_events` reads JSON watch events, a line each, as raybridge asks for
them), rewrite or inspect what passes, fault a stream already upgraded, or speak for more than one identity.
"""

from __future__ import annotations

import json
import re
import select
import socket
import ssl
import threading
import uuid
from dataclasses import dataclass, field
from http.client import HTTPException, HTTPResponse, HTTPSConnection
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Optional
from urllib.parse import parse_qs, urlsplit

__all__ = ["FaultProxy", "ProxyFault", "HTML_ERROR_PAGE", "QuietHTTPServer", "client_common_name"]

#: How long a client may take over its TLS handshake, and over sending a request on a kept-alive connection.
HANDSHAKE_TIMEOUT_SECONDS = 10.0
CLIENT_IDLE_SECONDS = 120.0
#: Every plain request upstream: connect, send, and each read of the answer.
UPSTREAM_TIMEOUT_SECONDS = 60.0
#: A watch upstream: its own timeoutSeconds and this margin, or this cap where it names none.
WATCH_MARGIN_SECONDS = 30.0
WATCH_CAP_SECONDS = 1800.0
#: An upgraded stream (port-forward, exec) is closed after this long without a byte either way.
STREAM_IDLE_SECONDS = 600.0
_HOP_BY_HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "proxy-connection", "te", "trailer", "trailers", "transfer-encoding", "upgrade"}
_TRUE = ("1", "t", "T", "true", "TRUE", "True")
#: What kube-apiserver answers for each status a fault refuses with: its Status reason and a message in its words
#: (k8s.io/apimachinery pkg/api/errors/errors.go: NewInternalError, NewConflict, NewTooManyRequests, NewForbidden,
#: NewServiceUnavailable, NewResourceExpired).
_STATUS_WORDS = {
    400: ("BadRequest", "injected failure"),
    403: ("Forbidden", "injected failure"),
    404: ("NotFound", "the server could not find the requested resource"),
    409: ("Conflict", "Operation cannot be fulfilled: the object has been modified; please apply your changes to the latest version and try again"),
    410: ("Expired", "too old resource version: 1 (2)"),
    429: ("TooManyRequests", "Too many requests, please try again later."),
    500: ("InternalError", "Internal error occurred: injected failure"),
    503: ("ServiceUnavailable", "the server is currently unable to handle the request"),
    504: ("Timeout", "the server was unable to return a response in the time allotted, but may still be processing the request"),
}  # fmt: skip
#: The page a load balancer in front of an API server answers when it has no backend: not JSON.
HTML_ERROR_PAGE = (
    b"<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>"
    b"\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"
)


@dataclass
class ProxyFault:
    """One armed fault (`FaultProxy.arm`); `clear()` ends it, `hits` counts the requests it met."""

    method: str
    pattern: re.Pattern[str]
    code: Optional[int]
    reason: str
    message: str
    remaining: Optional[int]  # None: every matching request until cleared
    delay: float = 0.0
    drop: bool = False
    body: Optional[bytes] = None
    content_type: str = "text/html"
    retry_after: Optional[int] = None
    after_events: Optional[int] = None
    #: Matching requests still to let through unharmed before the fault meets one.
    passes: int = 0
    hits: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def clear(self) -> None:
        self.remaining = 0

    def take(self, method: str, path: str) -> bool:
        """Whether this fault meets a request of `method` for `path` (the whole path, no query); counted if so."""
        with self._lock:
            if self.remaining is not None and self.remaining <= 0:
                return False
            if self.method not in (method, "*") or not self.pattern.fullmatch(path):
                return False
            if self.passes > 0:
                self.passes -= 1
                return False
            if self.remaining is not None:
                self.remaining -= 1
            self.hits += 1
            return True

    def status(self) -> dict[str, Any]:
        """The `Status` object kube-apiserver answers a refusal with."""
        assert self.code is not None
        status: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                  "message": self.message, "reason": self.reason, "code": self.code}  # fmt: skip
        if self.retry_after is not None:
            status["details"] = {"retryAfterSeconds": self.retry_after}
        return status


def client_common_name(certificate: dict[str, Any]) -> Optional[str]:
    """The common name of a peer certificate as `SSLSocket.getpeercert()` gives it."""
    names = [value for entry in certificate.get("subject", ()) for key, value in entry if key == "commonName"]
    return names[0] if len(names) == 1 else None


class QuietHTTPServer(ThreadingHTTPServer):
    """A threading HTTP server for which a client gone mid-answer, or refused at the TLS handshake, is no error to
    print: the proxy's own, and the stand-in API servers behind it in its tests, whose connections a fault drops."""

    def handle_error(self, request: object, client_address: object) -> None:
        import sys

        if not isinstance(sys.exc_info()[1], OSError):  # ssl.SSLError, BrokenPipeError, ConnectionResetError
            super().handle_error(request, client_address)


class _Server(QuietHTTPServer):
    daemon_threads = True
    proxy: "FaultProxy"

    def get_request(self) -> tuple[socket.socket, Any]:
        connection, address = self.socket.accept()
        wrapped = self.proxy._serving.wrap_socket(connection, server_side=True, do_handshake_on_connect=False)
        return wrapped, address


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server
    timeout = CLIENT_IDLE_SECONDS

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
        pass

    def handle(self) -> None:
        """The TLS handshake first, on this connection's own thread; a client the proxy does not serve is closed."""
        connection = self.request
        assert isinstance(connection, ssl.SSLSocket)
        connection.settimeout(HANDSHAKE_TIMEOUT_SECONDS)
        try:
            connection.do_handshake()
        except (OSError, ssl.SSLError):
            self.server.proxy._count_refused()
            self.close_connection = True
            return
        if client_common_name(connection.getpeercert() or {}) != self.server.proxy.identity_name:
            self.server.proxy._count_refused()
            self.close_connection = True
            return
        connection.settimeout(CLIENT_IDLE_SECONDS)
        try:
            super().handle()
        except (OSError, HTTPException):  # the client or the API server went away mid-answer: the connection just ends
            self.close_connection = True

    def _any(self) -> None:
        proxy = self.server.proxy
        target = urlsplit(self.path)
        body = self._request_body()
        fault = proxy._take(self.command, target.path)
        if fault is not None and fault.delay and proxy._stopping.wait(fault.delay):
            self._drop()
            return
        query = parse_qs(target.query)
        watch = (query.get("watch") or [""])[0] in _TRUE or "/watch/" in target.path
        if fault is not None and not (watch and (fault.after_events is not None or fault.code == 410)):
            if self._refuse(fault):
                return
            fault = None  # a delay alone: served after it
        if "upgrade" in (self.headers.get("Connection") or "").lower():
            self._splice(body)
            return
        self._forward(body, watch, query, fault)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _any

    # -- the request ---------------------------------------------------------------------------------------------
    def _request_body(self) -> Optional[bytes]:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            parts = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(parts)
                parts.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else None

    def _upstream_headers(self, body: Optional[bytes]) -> dict[str, str]:
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP and k.lower() not in ("host", "content-length")}
        if body is not None:
            headers["Content-Length"] = str(len(body))
        return headers

    # -- faults --------------------------------------------------------------------------------------------------
    def _refuse(self, fault: ProxyFault) -> bool:
        """Answer the request as `fault` says; False when it says nothing but its delay (the request is served)."""
        if fault.drop:
            self._drop()
            return True
        if fault.body is not None:
            self._answer(fault.code or 502, fault.content_type, fault.body)
            return True
        if fault.code is not None:
            extra = {"Retry-After": str(fault.retry_after)} if fault.retry_after is not None else {}
            self._answer(fault.code, "application/json", json.dumps(fault.status()).encode(), extra)
            return True
        return False

    def _answer(self, code: int, content_type: str, data: bytes, extra: Optional[dict[str, str]] = None) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        for key, value in (extra or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _drop(self) -> None:
        """Close the connection without an answer (or in the middle of one)."""
        self.close_connection = True
        try:
            self.wfile.flush()
        except OSError:
            pass
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    # -- passing on ----------------------------------------------------------------------------------------------
    def _forward(self, body: Optional[bytes], watch: bool, query: dict[str, list[str]], fault: Optional[ProxyFault]) -> None:
        proxy = self.server.proxy
        timeout = UPSTREAM_TIMEOUT_SECONDS
        if watch:
            asked = (query.get("timeoutSeconds") or [""])[0]
            timeout = min(float(asked) + WATCH_MARGIN_SECONDS, WATCH_CAP_SECONDS) if asked.isdigit() else WATCH_CAP_SECONDS
        upstream = HTTPSConnection(proxy.upstream[0], proxy.upstream[1], context=proxy._upstream_tls, timeout=timeout)
        try:
            try:
                upstream.request(self.command, self.path, body=body, headers=self._upstream_headers(body))
                answer = upstream.getresponse()
            except (OSError, ssl.SSLError) as exc:
                self._answer(502, "text/plain", f"testcluster fault proxy: the API server did not answer: {exc}\n".encode())
                return
            if answer.getheader("Content-Length") is not None or self.command == "HEAD" or answer.status in (204, 304):
                try:
                    data = answer.read()
                except (OSError, ssl.SSLError):
                    self._drop()
                    return
                self._start(answer, {"Content-Length": str(len(data))})
                self.wfile.write(data)
                return
            self._stream(answer, fault)
        finally:
            upstream.close()

    def _start(self, answer: HTTPResponse, extra: dict[str, str]) -> None:
        self.send_response(answer.status, answer.reason)
        for key, value in answer.getheaders():
            if key.lower() not in _HOP_BY_HOP and key.lower() != "content-length":
                self.send_header(key, value)
        for key, value in extra.items():
            self.send_header(key, value)
        self.end_headers()

    def _stream(self, answer: HTTPResponse, fault: Optional[ProxyFault]) -> None:
        """A body of unknown length (a watch, a followed log), chunk by chunk; a watch fault's budget of events
        counted in lines, then the stream dropped or ended with the fault's ERROR event."""
        self._start(answer, {"Transfer-Encoding": "chunked"})
        budget = None if fault is None else (fault.after_events or 0)
        pending = b""
        try:
            while budget != 0:
                data = answer.read1(65536)
                if not data:
                    break
                if budget is not None:
                    pending += data
                    data = b""
                    while budget > 0 and b"\n" in pending:
                        line, pending = pending.split(b"\n", 1)
                        data += line + b"\n"
                        budget -= 1
                if data:
                    self._chunk(data)
            if fault is not None and budget == 0:
                if fault.code is not None and not fault.drop:
                    self._chunk(json.dumps({"type": "ERROR", "object": fault.status()}).encode() + b"\n")
                else:
                    self._drop()
                    return
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (OSError, ssl.SSLError):
            self._drop()

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):X}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _splice(self, body: Optional[bytes]) -> None:
        """An upgrade (port-forward, exec, attach): the request passed on as it came, then bytes both ways, unread,
        until either side closes or neither sends for STREAM_IDLE_SECONDS."""
        proxy = self.server.proxy
        self.close_connection = True
        head = [f"{self.command} {self.path} HTTP/1.1", f"Host: {proxy.upstream[0]}:{proxy.upstream[1]}"]
        head += [f"{k}: {v}" for k, v in self.headers.items() if k.lower() != "host"]
        try:
            raw = socket.create_connection(proxy.upstream, timeout=UPSTREAM_TIMEOUT_SECONDS)
            upstream = proxy._upstream_tls.wrap_socket(raw, server_hostname=proxy.upstream[0])
            upstream.sendall("\r\n".join(head).encode() + b"\r\n\r\n" + (body or b""))
        except (OSError, ssl.SSLError) as exc:
            self._answer(502, "text/plain", f"testcluster fault proxy: the API server did not answer: {exc}\n".encode())
            return
        client = self.connection  # the client waits for the 101 before it sends a frame: nothing is left in rfile
        try:
            ends = {client: upstream, upstream: client}
            while not proxy._stopping.is_set():
                ready = [s for s in ends if isinstance(s, ssl.SSLSocket) and s.pending()]
                if not ready:
                    ready, _, _ = select.select(list(ends), [], [], STREAM_IDLE_SECONDS)
                    if not ready:
                        return
                for source in ready:
                    data = source.recv(65536)
                    if not data:
                        return
                    ends[source].sendall(data)
        except (OSError, ssl.SSLError):
            return
        finally:
            upstream.close()


def _write_private(path: Path, data: bytes) -> Path:
    """`data` in a new file only this user may read (O_EXCL and O_NOFOLLOW: nothing there may be followed or reused)."""
    import os

    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(descriptor, "wb") as file:
        file.write(data)
    return path


class FaultProxy:
    """TLS on 127.0.0.1 (a port the kernel picks) in front of the API server at `upstream` (host, port).

    `serving_cert`/`serving_key`: its certificate, of the stack's CA `ca_file`, naming 127.0.0.1; `identity_cert`/
    `identity_key`: the client certificate it calls the API server with, whose common name a client's certificate
    must also have."""

    def __init__(self, upstream: tuple[str, int], ca_file: Path, serving_cert: Path, serving_key: Path,
                 identity_cert: Path, identity_key: Path) -> None:  # fmt: skip
        from cryptography import x509
        from cryptography.x509.oid import NameOID

        self.upstream = upstream
        subject = x509.load_pem_x509_certificate(identity_cert.read_bytes()).subject
        self.identity_name = subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value
        self.refused = 0
        self._faults: list[ProxyFault] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._serving = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(ca_file))
        self._serving.load_cert_chain(str(serving_cert), str(serving_key))
        self._serving.verify_mode = ssl.CERT_REQUIRED
        self._serving.set_alpn_protocols(["http/1.1"])
        self._upstream_tls = ssl.create_default_context(cafile=str(ca_file))
        self._upstream_tls.load_cert_chain(str(identity_cert), str(identity_key))
        self._upstream_tls.set_alpn_protocols(["http/1.1"])
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.proxy = self
        self._thread: Optional[threading.Thread] = None

    @classmethod
    def in_front_of(cls, kubeconfig: Path, pki_directory: Path, workdir: Path) -> "FaultProxy":
        """A proxy for the API server and the client certificate of `kubeconfig` (a stack's admin kubeconfig), serving
        a certificate issued from the stack's CA in `pki_directory`; its key files go in `workdir`, made owner-only
        (it must not exist yet: no other user can have made it, or put a file in it)."""
        import base64

        import yaml

        from testcluster.pki import Pki

        config = yaml.safe_load(kubeconfig.read_text())
        server = urlsplit(config["clusters"][0]["cluster"]["server"])
        user = config["users"][0]["user"]
        workdir.mkdir(mode=0o700)
        identity_cert = _write_private(workdir / "identity.crt", base64.b64decode(user["client-certificate-data"]))
        identity_key = _write_private(workdir / "identity.key", base64.b64decode(user["client-key-data"]))
        # a name of its own in the stack's directory: proxies of several test workers are made side by side
        serving = Pki.load(pki_directory).serving(f"fault-proxy-{uuid.uuid4().hex}", ("127.0.0.1", "localhost"))
        assert server.hostname is not None and server.port is not None
        return cls((server.hostname, server.port), pki_directory / "ca.crt", serving.cert, serving.key, identity_cert, identity_key)

    def write_kubeconfig(self, source: Path, path: Path) -> Path:
        """`source` (the kubeconfig the proxy was made from) with every cluster's server this proxy, written
        owner-only to `path` (which must not exist yet)."""
        import yaml

        config = yaml.safe_load(source.read_text())
        for cluster in config["clusters"]:
            cluster["cluster"]["server"] = self.url
        return _write_private(path, yaml.safe_dump(config).encode())

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def start(self) -> "FaultProxy":
        self._thread = threading.Thread(target=self._server.serve_forever, name="fault-proxy", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(10)
        self._server.server_close()

    def __enter__(self) -> "FaultProxy":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def arm(
        self, method: str, path_regex: str, code: Optional[int] = 500, times: Optional[int] = 1, reason: Optional[str] = None,
        message: Optional[str] = None, *, delay: float = 0.0, drop: bool = False, body: "bytes | str | None" = None,
        content_type: str = "text/html", retry_after: Optional[int] = None, after_events: Optional[int] = None,
        passes: int = 0,
    ) -> ProxyFault:  # fmt: skip
        """A fault for the next `times` requests (None: every one, until cleared) whose method (or "*") is `method`
        and whose whole path (no query) matches `path_regex`. What the client gets, in this order:

        * `delay` seconds of silence first (longer than the client's timeout: a hang);
        * `drop=True`: the connection closed without an answer;
        * `body`: an answer of status `code` (502 if None) with this raw body (an HTML page, JSON cut short...);
        * `code` (403, 409, 429, 500, 503...): kube-apiserver's `Status` for it (`reason`/`message` override its
          words); `retry_after` adds `Retry-After` (429 and 503 default to 1 second, as kube-apiserver's own);
        * `code=None` and none of the above: the request is then passed on (a delay alone).
        A watch: `after_events=N` passes N events on, then drops the stream (`drop=True` or no `code`) or ends it with
        an ERROR event of the `code` Status (410 Expired: a watch that fell behind); `code=410` alone, at once.
        `passes=N`: the first N matching requests go through unharmed (a create that succeeds, then one that fails).
        """
        words = _STATUS_WORDS.get(code or 0, ("InternalError", "injected failure"))
        if retry_after is None and code in (429, 503):
            retry_after = 1
        fault = ProxyFault(
            method.upper(), re.compile(path_regex), code, reason or words[0], message or words[1], times, delay, drop,
            body.encode() if isinstance(body, str) else body, content_type, retry_after, after_events, passes,
        )  # fmt: skip
        with self._lock:
            self._faults.append(fault)
        return fault

    def clear(self) -> None:
        """End every armed fault."""
        with self._lock:
            for fault in self._faults:
                fault.clear()
            self._faults.clear()

    def _take(self, method: str, path: str) -> Optional[ProxyFault]:
        with self._lock:
            faults = list(self._faults)
        for fault in faults:
            if fault.take(method, path):
                return fault
        return None

    def _count_refused(self) -> None:
        with self._lock:
            self.refused += 1
