"""The adjuster's metrics server is bounded: half-sent requests neither pin a thread each nor stay open for ever.

A reviewer held 1,000 idle half-sent requests open against the old server and it ran 1,002 threads.
Here real sockets do the same against a real HealthServer on loopback.
"""

from __future__ import annotations

import socket
import threading
import time
import urllib.request

import pytest

from raybridge.adjuster import metrics as metrics_module
from raybridge.adjuster.metrics import MAX_CONNECTIONS, HealthServer, Metrics


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(metrics_module, "REQUEST_TIMEOUT_SECONDS", 1.0)
    health = HealthServer(Metrics(), 0, healthy=lambda: True, ready=lambda: True, host="127.0.0.1").start()
    yield health
    health.stop()


def _half_sent(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: adjuster\r\n")  # no blank line: the request never ends
    return sock


def test_two_hundred_half_sent_requests_hold_no_more_threads_than_the_bound(server: HealthServer) -> None:
    before = threading.active_count()
    sockets = [_half_sent(server.port) for _ in range(200)]
    try:
        time.sleep(0.3)
        assert threading.active_count() - before <= MAX_CONNECTIONS
    finally:
        for sock in sockets:
            sock.close()


def test_a_silent_connection_is_closed_after_the_request_timeout(server: HealthServer) -> None:
    sock = _half_sent(server.port)
    started = time.monotonic()
    try:
        assert sock.recv(1) == b""  # the server hung up
    finally:
        sock.close()
    assert time.monotonic() - started < 4


def test_probes_answer_again_once_the_idle_connections_are_gone(server: HealthServer) -> None:
    sockets = [_half_sent(server.port) for _ in range(MAX_CONNECTIONS * 2)]
    time.sleep(1.5)  # past the request timeout: the server closed the ones it held
    for sock in sockets:
        sock.close()
    with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/healthz", timeout=5) as answer:
        assert answer.status == 200 and answer.read() == b"ok\n"
