"""The adjuster's metrics and probe servers are bounded, and no metrics client can starve the liveness probe.

A reviewer held 1,000 idle half-sent requests open against an earlier server and it ran 1,002 threads;
a later one timed out each read alone, so 16 clients sending one byte every 4 s held all 16 of its slots
for ever and failed 30 of 30 /healthz probes (the kubelet would have restarted the adjuster in a loop).
Here real sockets do the same against real servers on loopback: each connection has one deadline for
the whole request, and the probes have a port of their own.
"""

from __future__ import annotations

import socket
import threading
import time
import urllib.error
import urllib.request
from typing import Iterator

import pytest

from raybridge.adjuster import metrics as metrics_module
from raybridge.adjuster.metrics import MAX_CONNECTIONS, EndpointServer, Metrics, metrics_server, probe_server

DEADLINE = 1.0


@pytest.fixture
def short_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metrics_module, "REQUEST_DEADLINE_SECONDS", DEADLINE)


@pytest.fixture
def server(short_deadline: None) -> Iterator[EndpointServer]:
    health = metrics_server(Metrics(), healthy=lambda: True, ready=lambda: True, port=0, host="127.0.0.1").start()
    yield health
    health.stop()


@pytest.fixture
def probes(short_deadline: None) -> Iterator[EndpointServer]:
    health = probe_server(healthy=lambda: True, ready=lambda: True, port=0, host="127.0.0.1").start()
    yield health
    health.stop()


def _half_sent(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: adjuster\r\n")  # no blank line: the request never ends
    return sock


def _get(port: int, path: str, timeout: float = 5) -> tuple[int, bytes]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as answer:
        return answer.status, answer.read()


@pytest.mark.realtime
def test_two_hundred_half_sent_requests_hold_no_more_threads_than_the_bound(server: EndpointServer) -> None:
    before = threading.active_count()
    sockets = [_half_sent(server.port) for _ in range(200)]
    try:
        time.sleep(0.3)
        assert threading.active_count() - before <= MAX_CONNECTIONS
    finally:
        for sock in sockets:
            sock.close()


def test_a_silent_connection_is_closed_after_the_deadline(server: EndpointServer) -> None:
    sock = _half_sent(server.port)
    started = time.monotonic()
    try:
        assert sock.recv(1) == b""  # the server hung up
    finally:
        sock.close()
    assert time.monotonic() - started < 4


@pytest.mark.realtime
def test_a_request_dripped_a_byte_at_a_time_is_cut_off_at_the_deadline_whatever_its_pace(server: EndpointServer) -> None:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    started = time.monotonic()
    closed_after = None
    try:
        for byte in (b"GET /healthz HTTP/1.1\r\nX-Slow: " + b"a" * 200):  # 200 bytes at 0.1 s apart: 20 s if let run
            try:
                sock.sendall(bytes([byte]))
            except OSError:
                closed_after = time.monotonic() - started
                break
            if _closed(sock):
                closed_after = time.monotonic() - started
                break
            time.sleep(0.1)
    finally:
        sock.close()
    assert closed_after is not None and closed_after < DEADLINE + 1.0, closed_after


def _closed(sock: socket.socket) -> bool:
    """Whether the server has hung up (a read that finds the end, or a reset), without waiting."""
    sock.setblocking(False)
    try:
        return sock.recv(1) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True
    finally:
        sock.setblocking(True)
        sock.settimeout(5)


def test_probes_answer_again_once_the_idle_connections_are_gone(server: EndpointServer) -> None:
    sockets = [_half_sent(server.port) for _ in range(MAX_CONNECTIONS * 2)]
    time.sleep(DEADLINE + 0.5)  # past the deadline: the server closed the ones it held
    for sock in sockets:
        sock.close()
    assert _get(server.port, "/healthz") == (200, b"ok\n")


class Drippers:
    """`count` clients that each hold a connection to `port` sending one byte every `pace` seconds, and connect
    again as soon as the server closes theirs: every slot of the server stays taken."""

    def __init__(self, port: int, count: int, pace: float) -> None:
        self.port, self.pace = port, pace
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._drip, daemon=True) for _ in range(count)]

    def __enter__(self) -> "Drippers":
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(10)

    def _drip(self) -> None:
        while not self.stop.is_set():
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=5) as sock:
                    sock.sendall(b"G")
                    next_byte = time.monotonic() + self.pace
                    while not self.stop.wait(0.02) and not _closed(sock):  # a closed connection is replaced at once
                        if time.monotonic() >= next_byte:
                            sock.sendall(b"E")
                            next_byte += self.pace
            except OSError:
                time.sleep(0.005)


@pytest.mark.realtime
def test_the_liveness_probe_answers_every_time_while_slow_clients_hold_every_metrics_slot(
        server: EndpointServer, probes: EndpointServer) -> None:
    with Drippers(server.port, MAX_CONNECTIONS + 16, pace=0.3):
        time.sleep(0.5)
        with pytest.raises(OSError):  # the attack works: the metrics port has no slot left
            for _ in range(20):
                _get(server.port, "/metrics", timeout=1)
                time.sleep(0.05)
        answers = []
        for _ in range(20):
            started = time.monotonic()
            answers.append((_get(probes.port, "/healthz", timeout=1), _get(probes.port, "/readyz", timeout=1)))
            assert time.monotonic() - started < 1.0
            time.sleep(0.1)
    assert answers == [((200, b"ok\n"), (200, b"ok\n"))] * 20


def test_the_probe_server_answers_only_the_probes() -> None:
    server = probe_server(healthy=lambda: False, ready=lambda: True, port=0, host="127.0.0.1").start()
    try:
        assert _get(server.port, "/readyz") == (200, b"ok\n")
        with pytest.raises(urllib.error.HTTPError) as unhealthy:
            _get(server.port, "/healthz")
        assert unhealthy.value.code == 503
        with pytest.raises(urllib.error.HTTPError) as metrics:
            _get(server.port, "/metrics")
        assert metrics.value.code == 404
    finally:
        server.stop()
