"""The front of the test session's shared Ray head: this user's processes in, with the token; anyone else out.

A real listener and a real upstream (a small HTTP server that says which Authorization it got), connected to
from this process and, where the tests run as root, from a child that has become user `nobody`."""

from __future__ import annotations

import json
import os
import socket
import urllib.request
from typing import Iterator, Optional

import pytest

from testcluster.head_front import HeadFront, body_length, with_token
from tests.unit.echo_head import AuthorizationEcho, echo_head

NOBODY = 65534

# (case, request head sent, request head passed on, body bytes framed after it: None when the rest is unframed)
HEADS = [
    ("a plain GET gets the token, its connection kept",
     "GET /api/version HTTP/1.1\r\nHost: h\r\n\r\n",
     "GET /api/version HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer tok\r\n\r\n", 0),
    ("a client's own Authorization is replaced",
     "POST /api/jobs/ HTTP/1.1\r\nauthorization: Bearer theirs\r\nContent-Length: 2\r\n\r\n",
     "POST /api/jobs/ HTTP/1.1\r\nContent-Length: 2\r\nAuthorization: Bearer tok\r\n\r\n", 2),
    ("a client's Connection header is its own",
     "GET / HTTP/1.1\r\nConnection: close\r\n\r\n",
     "GET / HTTP/1.1\r\nConnection: close\r\nAuthorization: Bearer tok\r\n\r\n", 0),
    ("a chunked body is the connection's last request",
     "POST /api/jobs/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n",
     "POST /api/jobs/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\nAuthorization: Bearer tok\r\nConnection: close\r\n\r\n", None),
    ("a WebSocket upgrade keeps its Connection header",
     "GET /api/jobs/x/logs/tail HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
     "GET /api/jobs/x/logs/tail HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nAuthorization: Bearer tok\r\n\r\n", None),
    ("two lengths that disagree frame nothing",
     "POST / HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n",
     "POST / HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 3\r\nAuthorization: Bearer tok\r\n\r\n", None),
]


@pytest.mark.parametrize("case, sent, passed, framed", HEADS, ids=[row[0] for row in HEADS])
def test_the_front_adds_the_token_to_a_request_head(case: str, sent: str, passed: str, framed: Optional[int]) -> None:
    assert with_token(sent.encode(), "tok") == passed.encode(), case
    assert body_length(sent.encode()) == framed, case


@pytest.mark.parametrize("head", [b"GET / HTTP/1.1\r\nHost: h\r\n", b"NONSENSE\r\n\r\n", b"GET / HTTP/1.1\r\nno colon\r\n\r\n"])
def test_what_is_no_request_head_is_not_passed_on(head: bytes) -> None:
    assert with_token(head, "tok") is None


@pytest.fixture
def front() -> Iterator[HeadFront]:
    with echo_head() as port:
        door = HeadFront(f"127.0.0.1:{port}", "tok")
        try:
            yield door
        finally:
            door.close()


def test_this_user_gets_through_with_the_token(front: HeadFront) -> None:
    for _ in range(3):  # a connection each
        with urllib.request.urlopen(f"http://{front.netloc}/api/version", timeout=10) as answer:
            assert json.loads(answer.read()) == {"authorization": "Bearer tok"}
    assert AuthorizationEcho.seen == ["Bearer tok"] * 3 and front.refused == 0


def test_requests_on_one_kept_connection_each_get_the_token_and_stay_one_connection(front: HeadFront) -> None:
    """Issue 40: through a port-forward each connection is a stream through the API server, so the door keeps a
    client's connection as the head does (HTTP/1.1 keep-alive), bodies included, whatever their number."""
    import http.client

    AuthorizationEcho.protocol_version = "HTTP/1.1"
    try:
        host, port = front.netloc.rsplit(":", 1)
        connection = http.client.HTTPConnection(host, int(port), timeout=10)
        for index in range(5):
            body = json.dumps({"n": index}).encode()
            connection.request("POST", "/api/jobs/", body=body, headers={"Authorization": "Bearer theirs"})
            answer = connection.getresponse()
            assert json.loads(answer.read()) == {"authorization": "Bearer tok", "body": {"n": index}}
        connection.close()
    finally:
        AuthorizationEcho.protocol_version = "HTTP/1.0"
    assert AuthorizationEcho.seen == ["Bearer tok"] * 5 and len(AuthorizationEcho.peers) == 1, AuthorizationEcho.peers


def _as_nobody(netloc: str, request: str = "GET /api/version HTTP/1.1\r\nHost: x\r\n\r\n") -> str:
    """What another local user gets from the front: run in a child with uid and gid `nobody`."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        try:
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            host, port = netloc.rsplit(":", 1)
            with socket.create_connection((host, int(port)), timeout=10) as conn:
                conn.sendall(request.encode())
                got = conn.recv(65536)
            result = "answered" if got else "closed unanswered"
        except OSError as exc:
            result = type(exc).__name__
        os.write(write_end, result.encode())
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end) as f:
        text = f.read()
    os.waitpid(pid, 0)
    return text


@pytest.mark.skipif(os.geteuid() != 0, reason="connecting as another user needs root to switch users")
def test_another_user_is_turned_away_before_anything_reaches_the_head(front: HeadFront) -> None:
    assert _as_nobody(front.netloc) in ("closed unanswered", "ConnectionResetError")
    assert AuthorizationEcho.seen == [] and front.refused == 1


def test_the_dashboard_proxy_kuberay_dials_serves_this_user_alone() -> None:
    """testcluster's forward proxy (KubeRay's HTTP_PROXY) reaches the head too: the same door, the same rule."""
    from testcluster.dashboard_proxy import DashboardProxy

    with echo_head() as port:
        proxy = DashboardProxy(("127.0.0.1", port)).start()
        try:
            netloc = proxy.url.split("://", 1)[1]
            service = "http://head-svc.team-a.svc.cluster.local:8265/api/version"
            opener = urllib.request.build_opener(urllib.request.ProxyHandler({"http": proxy.url}))
            with opener.open(service, timeout=10) as answer:
                assert answer.status == 200
            assert len(AuthorizationEcho.seen) == 1
            if os.geteuid() == 0:
                assert _as_nobody(netloc, f"GET {service} HTTP/1.1\r\nHost: x\r\n\r\n") in ("closed unanswered", "ConnectionResetError")
                assert len(AuthorizationEcho.seen) == 1
        finally:
            proxy.stop()
