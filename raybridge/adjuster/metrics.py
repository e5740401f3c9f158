"""The adjuster's Prometheus metrics, and the HTTP servers that answer /metrics, /healthz and /readyz.

Each controller gets its own `CollectorRegistry`, so two in one process (tests,
a standby beside a leader) never share counters. Two servers answer, each on
its own port: the metrics server (`/metrics`, for Prometheus; `/healthz` and
`/readyz` too, for manifests that probe it there) and the probe server
(`/healthz`: the process and its loops are alive; `/readyz`: the caches are
synced, or the replica is a healthy standby), which the kubelet alone reaches.
Probes have a port of their own so that whatever connects to the metrics port
cannot take the slots the liveness probe needs: a probe that finds no slot fails,
and three failures restart the pod. The servers compute nothing.

Each server is bounded: a connection has `REQUEST_DEADLINE_SECONDS` in all, from
its first byte read to the last byte of the answer (however often its bytes
come: a request dripped a byte at a time is cut off there), and beyond
`MAX_CONNECTIONS` at once a new one is closed at once, so idle, half-sent or
dripped requests can neither pin threads without end nor hold a slot beyond
the deadline. configs/adjuster/50-networkpolicy.yaml keeps the metrics port to
the monitoring namespace and the probe port to no other pod.

It does not authenticate (the ports are for the pod's network and the
kubelet) and serves no request body, keep-alive or TLS.
"""

from __future__ import annotations

import io
import logging
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Mapping, Optional

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

log = logging.getLogger(__name__)


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
        self.refused_groups = Gauge("raybridge_adjuster_refused_groups", "Constraint groups whose placeholder the autoscaler "
                                    "said it brings no node for (a NodePool at its limits, a node group at its maximum): they "
                                    "get no new placeholder for a while", registry=r)
        self.search_build = Gauge("raybridge_adjuster_exact_search_build", "1 for the build of the exact packing's searches "
                                  "this replica runs: compiled (mypyc) or interpreted (three to five times the CPU of a "
                                  "pass that packs anew)", ["build"], registry=r)
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


#: Seconds one connection may take in all, from accepting it to the last byte of the answer: a request sent
#: a byte at a time is cut off here, however often its bytes come (a per-read timeout would let it run for ever).
#: The kubelet's probe gives up after its timeoutSeconds (1 by default); Prometheus scrapes in well under this.
REQUEST_DEADLINE_SECONDS = 5.0
#: Connections served at once per server; more are closed at once (a scrape and two probes need three).
MAX_CONNECTIONS = 16

#: What a path answers: (status, body, content type), computed when asked.
Answer = tuple[int, bytes, str]
Route = Callable[[], Answer]


class _DeadlineReader(io.RawIOBase):
    """A connection's bytes, each read allowed only what is left of the connection's deadline.

    `socket.settimeout` bounds one read; setting it to the time left before every read bounds them all together.
    """

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        super().__init__()
        self._sock = sock
        self._deadline = deadline

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        _left_until(self._sock, self._deadline)
        return self._sock.recv_into(buffer)


def _left_until(sock: socket.socket, deadline: float) -> None:
    """Set the socket's timeout to the time left; TimeoutError (which the request handler turns into a closed
    connection: BaseHTTPRequestHandler.handle_one_request) when none is."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError(f"the request took more than {REQUEST_DEADLINE_SECONDS:g} s in all")
    sock.settimeout(left)


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

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that resets or vanishes mid-answer is its own business: one debug line, not a traceback on stderr."""
        log.debug("connection from %s ended with an error", client_address, exc_info=True)


class _IPv6Server(_BoundedServer):
    address_family = socket.AF_INET6


class EndpointServer:
    """GET of `routes`' paths on `host`:`port` (port 0: an ephemeral port, see `.port`; host '': every IPv4
    interface; an IPv6 literal binds IPv6); every other path is 404. OSError when it cannot bind."""

    def __init__(self, routes: Mapping[str, Route], port: int, host: str = "", name: str = "adjuster-http") -> None:
        known = dict(routes)

        class Handler(BaseHTTPRequestHandler):
            timeout = REQUEST_DEADLINE_SECONDS  # the socket's own, until setup() bounds the whole request

            def setup(self) -> None:
                self.deadline = time.monotonic() + REQUEST_DEADLINE_SECONDS
                super().setup()
                self.rfile.close()  # the socket's own reader: its reads are bounded one at a time only
                self.rfile = io.BufferedReader(_DeadlineReader(self.connection, self.deadline))

            def do_GET(self) -> None:  # noqa: N802 - the base class's name
                route = known.get(self.path.split("?")[0])
                code, body, content_type = route() if route is not None else (404, b"not found\n", "text/plain")
                _left_until(self.connection, self.deadline)  # the answer, too, is written within the deadline
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

        server_class = _IPv6Server if ":" in host else _BoundedServer
        self._server = server_class((host, port), Handler)
        self.port: int = self._server.server_address[1]
        self._name = name
        self._thread: Optional[threading.Thread] = None

    def start(self) -> "EndpointServer":
        self._thread = threading.Thread(target=self._server.serve_forever, name=self._name, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def probe_routes(healthy: Callable[[], bool], ready: Callable[[], bool]) -> dict[str, Route]:
    """/healthz and /readyz: 200 "ok", else 503."""

    def healthz() -> Answer:
        ok = healthy()
        return (200, b"ok\n", "text/plain") if ok else (503, b"unhealthy\n", "text/plain")

    def readyz() -> Answer:
        ok = ready()
        return (200, b"ok\n", "text/plain") if ok else (503, b"not ready\n", "text/plain")

    return {"/healthz": healthz, "/readyz": readyz}


def metrics_server(metrics: Metrics, healthy: Callable[[], bool], ready: Callable[[], bool], port: int, host: str = "") -> EndpointServer:
    """/metrics, and /healthz and /readyz for manifests that probe the metrics port (they share its slots)."""
    routes: dict[str, Route] = {"/metrics": lambda: (200, metrics.render(), CONTENT_TYPE_LATEST), **probe_routes(healthy, ready)}
    return EndpointServer(routes, port, host, name="adjuster-metrics")


def probe_server(healthy: Callable[[], bool], ready: Callable[[], bool], port: int, host: str = "") -> EndpointServer:
    """/healthz and /readyz alone, on a port whose slots no metrics client takes."""
    return EndpointServer(probe_routes(healthy, ready), port, host, name="adjuster-probes")
