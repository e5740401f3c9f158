"""The Job API client's requests share one connection (HTTP keep-alive), whatever their number.

Why: through a port-forward every new connection is a stream of its own through the API server, so a client that
opens one per request (Ray's, ray@2.60 dashboard_sdk.py `_do_request`) costs the cluster one per status poll: about
100 for a minute-long job. Counted here against a local HTTP/1.1 server that keeps connections open, as a Ray
dashboard does; the count on a cluster is tests/e2e/test_cluster_start_trouble.py's.

What it deliberately does not do: the log stream (a WebSocket, one connection of its own) or the port-forward.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator

import pytest


class _Dashboard(BaseHTTPRequestHandler):
    """The Job API endpoints the client calls, on connections kept open (HTTP/1.1)."""

    protocol_version = "HTTP/1.1"
    connections: list[Any] = []

    def setup(self) -> None:
        super().setup()
        type(self).connections.append(self.client_address)

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        if self.path.startswith("/api/version"):
            body = {"version": "4", "ray_version": "2.60.0", "ray_commit": "x"}
        elif self.path.startswith("/api/jobs/"):
            body = {"type": "SUBMISSION", "job_id": None, "submission_id": "job-1", "status": "RUNNING", "entrypoint": "x",
                    "message": None, "error_type": None, "start_time": 1, "end_time": None, "metadata": {}, "runtime_env": {},
                    "driver_info": None, "driver_agent_http_address": None, "driver_node_id": None, "driver_exit_code": None}  # fmt: skip
        else:
            body = {}
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *_args: Any) -> None:
        pass


@pytest.fixture
def dashboard() -> Iterator[tuple[str, list[Any]]]:
    _Dashboard.connections = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Dashboard)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", _Dashboard.connections
    finally:
        server.shutdown()
        server.server_close()


def test_twenty_status_polls_take_one_connection(dashboard: tuple[str, list[Any]]) -> None:
    from raybridge.jobapi.client import RayJobs

    address, connections = dashboard
    jobs = RayJobs(address)
    for _ in range(20):
        assert jobs.status("job-1") == "RUNNING"
    assert len(connections) == 1, f"{len(connections)} connections for the version check and 20 status polls"
