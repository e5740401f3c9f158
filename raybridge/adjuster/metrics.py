"""The adjuster's Prometheus metrics and its /healthz and /readyz, on one HTTP port.

Each controller gets its own `CollectorRegistry`, so two in one process (tests,
a standby beside a leader) never share counters. The server answers
`/metrics`, `/healthz` (the process and its loops are alive) and `/readyz` (the
caches are synced, or the replica is a healthy standby). It computes nothing.

The server is bounded: a connection that sends nothing for `REQUEST_TIMEOUT_SECONDS` is closed,
and beyond `MAX_CONNECTIONS` at once a new one is closed at once, so idle or half-sent requests
cannot pin threads without end (configs/adjuster/50-networkpolicy.yaml keeps the port to the
monitoring namespace).
"""

from __future__ import annotations

import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Optional

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.pending_demand = Gauge("raybridge_adjuster_pending_fractional_gpus", "Pending fractional GPU demand (sum of fraction x devices)", ["vendor"], registry=r)
        self.placeholder_gpus = Gauge("raybridge_adjuster_placeholder_gpus", "GPUs asked for by placeholders, by state", ["state"], registry=r)
        self.ignored_pods = Gauge("raybridge_adjuster_ignored_pods", "GPU-sharing pods not counted, by reason code", ["reason"], registry=r)
        self.reconcile_seconds = Histogram("raybridge_adjuster_reconcile_duration_seconds", "Time of one reconcile pass", registry=r,
                                           buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))
        self.api_errors = Counter("raybridge_adjuster_api_errors", "Kubernetes API errors, by operation and code", ["operation", "code"], registry=r)
        self.actions = Counter("raybridge_adjuster_placeholder_actions", "Placeholders created and deleted", ["action", "reason"], registry=r)
        self.leader = Gauge("raybridge_adjuster_leader", "1 while this replica leads", registry=r)
        self.kai_adjuster_running = Gauge("raybridge_adjuster_kai_adjuster_running", "1 while KAI's own node-scale-adjuster "
                                          "is seen at work (nothing is created meanwhile)", registry=r)
        self.podgroups_unavailable = Gauge("raybridge_adjuster_podgroups_unavailable", "1 while KAI PodGroups (their quota verdicts) "
                                           "cannot be read: the cluster serves none (404) or RBAC forbids them (403)", registry=r)
        self._ignored_seen: set[str] = set()
        self._vendors_seen: set[str] = set()

    def set_ignored(self, counts: dict[str, int]) -> None:
        for reason in self._ignored_seen - set(counts):
            self.ignored_pods.labels(reason).set(0)
        for reason, n in counts.items():
            self.ignored_pods.labels(reason).set(n)
        self._ignored_seen |= set(counts)

    def set_demand(self, by_vendor: dict[str, float]) -> None:
        for vendor in self._vendors_seen - set(by_vendor):
            self.pending_demand.labels(vendor).set(0)
        for vendor, value in by_vendor.items():
            self.pending_demand.labels(vendor).set(value)
        self._vendors_seen |= set(by_vendor)

    def render(self) -> bytes:
        return generate_latest(self.registry)


#: Seconds a connection may stay silent (a half-sent request) before it is closed.
REQUEST_TIMEOUT_SECONDS = 5.0
#: Connections served at once; more are closed at once (a scrape and two probes need three).
MAX_CONNECTIONS = 16


class _BoundedServer(ThreadingHTTPServer):
    """A thread per connection, at most MAX_CONNECTIONS of them."""

    daemon_threads = True
    request_queue_size = 64  # the listen backlog: connections beyond the bound are accepted and closed, not left waiting

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        super().__init__(*args, **kwargs)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self.shutdown_request(request)  # full: the client sees the connection closed and tries again
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()


class _IPv6Server(_BoundedServer):
    address_family = socket.AF_INET6


class HealthServer:
    """/metrics, /healthz and /readyz on `host`:`port` (port 0: an ephemeral port, see `.port`;
    host '': every IPv4 interface; an IPv6 literal binds IPv6)."""

    def __init__(self, metrics: Metrics, port: int, healthy: Callable[[], bool], ready: Callable[[], bool], host: str = "") -> None:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            timeout = REQUEST_TIMEOUT_SECONDS  # the connection's socket timeout (StreamRequestHandler.setup)

            def do_GET(self) -> None:  # noqa: N802 - the base class's name
                path = self.path.split("?")[0]
                if path == "/metrics":
                    self._send(200, outer.metrics.render(), CONTENT_TYPE_LATEST)
                elif path == "/healthz":
                    ok = outer.healthy()
                    self._send(200 if ok else 503, b"ok\n" if ok else b"unhealthy\n", "text/plain")
                elif path == "/readyz":
                    ok = outer.ready()
                    self._send(200 if ok else 503, b"ok\n" if ok else b"not ready\n", "text/plain")
                else:
                    self._send(404, b"not found\n", "text/plain")

            def _send(self, code: int, body: bytes, content_type: str) -> None:
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

        self.metrics = metrics
        self.healthy = healthy
        self.ready = ready
        server_class = _IPv6Server if ":" in host else _BoundedServer
        self._server = server_class((host, port), Handler)
        self.port = self._server.server_address[1]
        self._thread: Optional[threading.Thread] = None

    def start(self) -> "HealthServer":
        self._thread = threading.Thread(target=self._server.serve_forever, name="adjuster-health", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
