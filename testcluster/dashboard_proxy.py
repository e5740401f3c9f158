"""The forward proxy that lets the real KubeRay operator reach a local Ray head.

Why: kwok's pods run no containers, so a RayCluster's head is a real local Ray
head standing in for the head pod. KubeRay reaches a head's dashboard (to submit,
poll and stop jobs) at `<head-service>.<namespace>.svc.<cluster domain>:8265`
(ray-operator `controllers/ray/utils/util.go` FetchHeadServiceURL) with Go's
`http.Client`, whose default transport honours `HTTP_PROXY` for every host that is
not loopback. The operator is started with `HTTP_PROXY` naming this proxy, which
sends each request for a head service's dashboard port to the local head, and
answers 502 for any other destination: nothing the operator asks for leaves
loopback.

What this does not do: no CONNECT (KubeRay speaks plain HTTP to the dashboard), no
per-cluster heads (every RayCluster's service maps to the one head, as one head
stands for every head pod), no token checks (the head's own, or the door's behind it). It serves the operator's
process alone once the stack names it (`serve_only`), this user's processes until then: any other connection is
closed unanswered.
"""

from __future__ import annotations

import http.client
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Optional, Union
from urllib.parse import urlsplit

from testcluster.loopback import peer_is_held_by, peer_is_this_user
from testcluster.processes import UnixHTTPConnection

__all__ = ["DashboardProxy"]

#: The dashboard port KubeRay dials on a head service (ray-operator utils/constant.go DefaultDashboardPort).
DASHBOARD_PORT = 8265
_HOP_BY_HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "proxy-connection", "te", "trailers", "transfer-encoding", "upgrade"}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: "_Server"

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
        self.server.requests.append(f"{self.command} {self.path}")

    def _refuse(self, why: str) -> None:
        body = why.encode()
        self.send_response(502)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _forward(self) -> None:
        target = urlsplit(self.path)
        host = target.hostname or ""
        if target.scheme != "http" or not host.endswith(self.server.service_suffix) or (target.port or 80) != DASHBOARD_PORT:
            self._refuse(f"testcluster dashboard proxy: no route to {self.path}")
            return
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP and k.lower() != "host"}
        path = target.path + (f"?{target.query}" if target.query else "")
        backend = self.server.backend
        if isinstance(backend, Path):
            connection: http.client.HTTPConnection = UnixHTTPConnection(backend, timeout=60)
        else:
            connection = http.client.HTTPConnection(backend[0], backend[1], timeout=60)
        try:
            connection.request(self.command, path or "/", body=body, headers=headers)
            answer = connection.getresponse()
            data = answer.read()
        except OSError as exc:
            where = backend if isinstance(backend, Path) else f"{backend[0]}:{backend[1]}"
            self._refuse(f"testcluster dashboard proxy: the Ray head at {where} did not answer: {exc}")
            return
        finally:
            connection.close()
        self.send_response(answer.status, answer.reason)
        for key, value in answer.getheaders():
            if key.lower() not in _HOP_BY_HOP and key.lower() != "content-length":
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = _forward


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    backend: Union[tuple[str, int], Path]
    service_suffix: str
    requests: list[str]
    client_pid: Optional[int]

    def verify_request(self, request: object, client_address: object) -> bool:
        """The operator's process alone, once named (`client_pid`), else this user's processes: the door behind adds
        the head's token, and neither another local user nor a process of this one that forwards for others may
        reach it through here (the kernel's socket table and /proc/PID/fd say who connected)."""
        port = client_address[1] if isinstance(client_address, tuple) else -1
        if self.client_pid is not None:
            return peer_is_held_by(self.server_address[1], port, self.client_pid)
        return peer_is_this_user(self.server_address[1], port)

    def handle_error(self, request: object, client_address: object) -> None:
        """A client that drops its kept-alive connection (Go's transport closes idle ones) is no error to print."""
        import sys

        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            super().handle_error(request, client_address)


class DashboardProxy:
    """A forward proxy on 127.0.0.1 that sends head-service dashboard requests to `backend` ((host, port), or the
    path of a Unix socket: the stack's door to the head)."""

    def __init__(self, backend: Union[tuple[str, int], Path], cluster_domain: str = "cluster.local") -> None:
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.backend = backend
        self._server.service_suffix = f".svc.{cluster_domain}"
        self._server.requests = []
        self._server.client_pid = None
        self._thread: Optional[threading.Thread] = None

    def serve_only(self, pid: int) -> None:
        """From now on, let in connections from process `pid` alone (the operator's)."""
        self._server.client_pid = pid

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def requests(self) -> list[str]:
        """Every request seen, as `METHOD URL`."""
        return list(self._server.requests)

    def start(self) -> "DashboardProxy":
        self._thread = threading.Thread(target=self._server.serve_forever, name="dashboard-proxy", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(10)
        self._server.server_close()
