"""Connections checked after they are established and before a byte is sent (jobapi/verified_transport.py).

A plain loopback listener records what reaches it; the check refuses or accepts the connection. Refused, the
request ends in PeerRefused and the listener receives nothing, through requests (every Job API call) and through
aiohttp (the WebSocket log tail) alike, whatever the HTTP stack's retries.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from typing import Any, Optional

import pytest

from raybridge.jobapi.verified_transport import PeerRefused, verified_connector, verified_session


class Recorder:
    """A loopback listener that records every connection's bytes and answers a small HTTP 200."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.received: list[bytes] = []
        self.connections = 0
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            conn.settimeout(2)
            try:
                data = conn.recv(65536)
                if data:
                    self.received.append(data)
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")
            except OSError:
                pass
            conn.close()

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def recorder() -> Any:
    r = Recorder()
    yield r
    r.close()


def _checker(verdict: Optional[str], seen: list[tuple[Any, Any]]) -> Any:
    def check(sock: Any) -> Optional[str]:
        seen.append((sock.getsockname(), sock.getpeername()))
        return verdict

    return check


def test_a_refused_connection_carries_no_request_and_is_not_retried(recorder: Recorder) -> None:
    seen: list[tuple[Any, Any]] = []
    session = verified_session(_checker("not the head's", seen))
    with pytest.raises(PeerRefused, match="not the head's: nothing was sent to it"):
        session.get(f"http://127.0.0.1:{recorder.port}/api/version", headers={"Authorization": "Bearer secret"}, timeout=5)
    assert len(seen) == 1 and seen[0][1][1] == recorder.port  # checked once, on the connection to the listener
    assert recorder.received == []


def test_an_accepted_connection_carries_the_request(recorder: Recorder) -> None:
    seen: list[tuple[Any, Any]] = []
    session = verified_session(_checker(None, seen))
    response = session.get(f"http://127.0.0.1:{recorder.port}/api/version", headers={"Authorization": "Bearer secret"}, timeout=5)
    assert response.status_code == 200 and len(seen) == 1
    assert b"Authorization: Bearer secret" in recorder.received[0]


def test_https_is_refused_before_any_connection(recorder: Recorder) -> None:
    session = verified_session(_checker(None, []))
    with pytest.raises(PeerRefused):
        session.get(f"https://127.0.0.1:{recorder.port}/", timeout=5)
    assert recorder.connections == 0


def test_the_environment_s_proxy_is_not_used(recorder: Recorder, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # the discard port: a proxy in the way would fail the request
    session = verified_session(_checker(None, []))
    assert session.get(f"http://127.0.0.1:{recorder.port}/", timeout=5).status_code == 200


@pytest.mark.parametrize("verdict", ["not the head's", None])
def test_a_websocket_connection_is_checked_before_its_upgrade_request(recorder: Recorder, verdict: Optional[str]) -> None:
    import aiohttp

    seen: list[tuple[Any, Any]] = []

    async def connect() -> None:
        async with aiohttp.ClientSession(headers={"Authorization": "Bearer secret"}, connector=verified_connector(_checker(verdict, seen))) as session:
            await session.ws_connect(f"http://127.0.0.1:{recorder.port}/api/jobs/x/logs/tail")

    with pytest.raises(PeerRefused if verdict else aiohttp.WSServerHandshakeError):
        asyncio.run(connect())
    assert len(seen) == 1
    if verdict:
        assert recorder.received == []
    else:
        assert b"Authorization: Bearer secret" in recorder.received[0]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("gone", ["the local Ray head has exited", None])
def test_a_failed_connection_says_the_peer_s_own_reason_where_it_has_one(gone: Optional[str]) -> None:
    """A head that died between two polls is "has exited", not "connection refused" (the check is asked with None)."""
    import requests

    asked: list[Any] = []

    def check(sock: Any) -> Optional[str]:
        asked.append(sock)
        return gone

    session = verified_session(check)
    with pytest.raises(PeerRefused if gone else requests.ConnectionError, match=gone or "refused"):
        session.get(f"http://127.0.0.1:{_closed_port()}/api/version", timeout=5)
    assert asked and asked[0] is None
