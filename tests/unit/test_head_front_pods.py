"""The door to the Ray head, for a connection that names its head pod: the pod's cluster's token demanded.

Table-driven checks of the line a pod's relay sends first, of the token check (Ray's 401 and 403), of KubeRay's
Secret name; then the real door on a Unix socket with the real relay (testcluster/pod_relay.py) run as a child of
this process, which the door is told is a forwarder (as kwok is on the test cluster), in front of a small HTTP
server that says which Authorization it got."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Iterator, Optional

import pytest

from testcluster.head_front import HeadFront, parse_preface, token_refusal
from testcluster.pod_relay import preface
from testcluster.pod_tokens import RELAY, check_name, port_forward
from tests.unit.echo_head import AuthorizationEcho, echo_head

PREFACES = [
    ("a pod named", b"POD team-a/locked-abc12-head-x7k2p\n", ("team-a", "locked-abc12-head-x7k2p")),
    ("what the relay writes", preface("ns/p"), ("ns", "p")),
    ("no newline", b"POD team-a/pod", None),
    ("a carriage return", b"POD team-a/pod\r\n", None),
    ("another word", b"POST team-a/pod\n", None),
    ("an HTTP request line", b"GET / HTTP/1.1\r\n", None),
    ("no namespace", b"POD pod\n", None),
    ("two slashes", b"POD a/b/c\n", None),
    ("upper case", b"POD Team/pod\n", None),
    ("a namespace over 63 characters", b"POD " + b"a" * 64 + b"/pod\n", None),
    ("an empty name", b"POD team-a/\n", None),
]


@pytest.mark.parametrize("case, line, pod", PREFACES, ids=[row[0] for row in PREFACES])
def test_the_line_that_names_the_pod(case: str, line: bytes, pod: Optional[tuple[str, str]]) -> None:
    assert parse_preface(line) == pod, case


# (case, request head, the status Ray's dashboard answers it with: None when it passes)
CHECKS = [
    ("no token", "GET /api/version HTTP/1.1\r\nHost: h\r\n\r\n", 401),
    ("an empty Authorization", "GET /api/version HTTP/1.1\r\nAuthorization: \r\n\r\n", 401),
    ("another token", "GET /api/version HTTP/1.1\r\nAuthorization: Bearer wrong\r\n\r\n", 403),
    ("the token without Bearer", "GET /api/version HTTP/1.1\r\nAuthorization: sekrit\r\n\r\n", 403),
    ("the token", "GET /api/version HTTP/1.1\r\nAuthorization: Bearer sekrit\r\n\r\n", None),
    ("the token, header name in lower case", "POST /api/jobs/ HTTP/1.1\r\nauthorization: Bearer sekrit\r\nContent-Length: 2\r\n\r\n", None),
    ("the token in the proxies' header", "GET /api/jobs/ HTTP/1.1\r\nX-Ray-Authorization: Bearer sekrit\r\n\r\n", None),
    ("Authorization wins over the proxies' header", "GET /api/jobs/ HTTP/1.1\r\nAuthorization: Bearer no\r\nX-Ray-Authorization: Bearer sekrit\r\n\r\n", 403),
    ("a job's log tail without it", "GET /api/jobs/raysubmit_1/logs/tail HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n", 401),
    ("a public path", "GET /api/healthz HTTP/1.1\r\n\r\n", None),
    ("a public path with a query", "GET /api/authentication_mode?x=1 HTTP/1.1\r\n\r\n", None),
    ("a static asset", "GET /static/js/main.js HTTP/1.1\r\n\r\n", None),
    ("a path that only starts like a public one", "GET /api/healthz/x HTTP/1.1\r\n\r\n", 401),
]


@pytest.mark.parametrize("case, head, status", CHECKS, ids=[row[0] for row in CHECKS])
def test_a_request_is_held_to_its_clusters_token_as_ray_holds_it(case: str, head: str, status: Optional[int]) -> None:
    answer = token_refusal(head.encode(), "sekrit")
    if status is None:
        assert answer is None, case
        return
    assert answer is not None, case
    text = {401: "Unauthorized: Missing authentication token", 403: "Forbidden: Invalid authentication token"}[status]
    assert answer.startswith(f"HTTP/1.1 {status} ".encode()) and answer.endswith(text.encode()), (case, answer)
    assert f"Content-Length: {len(text)}\r\n".encode() in answer


@pytest.mark.parametrize("name, secret", [
    ("locked-abc12", "locked-abc12"),
    ("x" * 50, "x" * 50),
    ("a" * 10 + "b" * 45, "a" * 5 + "b" * 45),
    ("a" * 5 + "9" + "b" * 49, "r" + "b" * 49),
    ("a" * 5 + "-" + "b" * 49, "r" + "b" * 49),
])  # fmt: skip
def test_the_secret_is_named_as_kuberay_names_it(name: str, secret: str) -> None:
    assert check_name(name) == secret


def test_a_pods_port_forward_runs_the_relay_naming_the_pod_and_goes_with_the_pod() -> None:
    made = port_forward("team-a", "head-x", "uid-1", Path("/run/door.sock"))
    assert made["metadata"] == {"name": "head-x", "namespace": "team-a",
                                "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "head-x", "uid": "uid-1"}]}  # fmt: skip
    [forward] = made["spec"]["forwards"]
    assert forward["ports"] == [8265] and forward["command"][1:] == ["-I", str(RELAY), "/run/door.sock", "team-a/head-x"]


TOKENS = {("team-a", "locked-head"): "sekrit", ("team-a", "open-head"): None}


def _token_of(namespace: str, pod: str) -> Optional[str]:
    if (namespace, pod) not in TOKENS:
        raise LookupError("no such pod")
    return TOKENS[(namespace, pod)]


@pytest.fixture(params=["tok", None], ids=["door-adds-its-token", "door-without-a-token"])
def door(request: pytest.FixtureRequest) -> Iterator[HeadFront]:
    with echo_head() as port:
        directory = Path(tempfile.mkdtemp(prefix="door-", dir="/tmp"))
        front = HeadFront(f"127.0.0.1:{port}", request.param, directory / "door.sock")
        front.forwarders.add(os.getpid())  # the relays below are this process's children, as kwok's are kwok's
        front.pod_token = _token_of
        try:
            yield front
        finally:
            front.close()
            shutil.rmtree(directory)


def _through_relay(door: HeadFront, pod: str, request: str, turned_away: bool = False) -> bytes:
    """What a port-forward stream of `pod` gets back for `request`, through the real relay (which, `turned_away`,
    may find the door closed before it has named the pod: exit 3)."""
    ran = subprocess.run([sys.executable, "-I", str(RELAY), str(door.unix_path), pod], input=request.encode(),
                         capture_output=True, timeout=30)  # fmt: skip
    assert ran.returncode in ((0, 3) if turned_away else (0,)), ran.stderr
    return ran.stdout


def test_a_pods_stream_without_its_token_is_refused_before_the_head(door: HeadFront) -> None:
    got = _through_relay(door, "team-a/locked-head", "GET /api/version HTTP/1.1\r\nHost: h\r\n\r\n")
    assert got.startswith(b"HTTP/1.1 401 ") and got.endswith(b"Missing authentication token"), got
    got = _through_relay(door, "team-a/locked-head", "GET /api/version HTTP/1.1\r\nAuthorization: Bearer tok\r\n\r\n")
    assert got.startswith(b"HTTP/1.1 403 "), got  # the head's own token is not this cluster's
    assert AuthorizationEcho.seen == [] and door.token_refusals == 2


def test_a_pods_stream_with_its_token_reaches_the_head(door: HeadFront) -> None:
    got = _through_relay(door, "team-a/locked-head", "GET /api/version HTTP/1.1\r\nAuthorization: Bearer sekrit\r\n\r\n")
    assert b" 200 " in got.split(b"\r\n", 1)[0], got
    assert AuthorizationEcho.seen == ["Bearer tok" if door.token else "Bearer sekrit"]


def test_a_pod_of_a_cluster_without_token_auth_is_let_through(door: HeadFront) -> None:
    got = _through_relay(door, "team-a/open-head", "GET /api/version HTTP/1.1\r\nHost: h\r\n\r\n")
    assert b" 200 " in got.split(b"\r\n", 1)[0], got
    assert AuthorizationEcho.seen == (["Bearer tok"] if door.token else [""])


def test_a_pod_whose_token_cannot_be_told_gets_503_and_nothing_reaches_the_head(door: HeadFront) -> None:
    got = _through_relay(door, "team-a/unknown-head", "GET /api/version HTTP/1.1\r\nHost: h\r\n\r\n")
    assert got.startswith(b"HTTP/1.1 503 ") and b"team-a/unknown-head" in got, got
    assert AuthorizationEcho.seen == []


def test_a_forwarders_child_that_names_no_pod_is_turned_away(door: HeadFront) -> None:
    """kwok's children are let in only to name a pod: one that sends a request straight away gets nothing through."""
    script = ("import socket,sys; s=socket.socket(socket.AF_UNIX); s.settimeout(20); s.connect(sys.argv[1]); "
              "s.sendall(b'GET /api/version HTTP/1.1\\r\\nHost: h\\r\\n\\r\\n'); print(repr(s.recv(100)))")  # fmt: skip
    ran = subprocess.run([sys.executable, "-I", "-c", script, str(door.unix_path)], capture_output=True, text=True, timeout=30)
    assert ran.stdout.strip() == "b''", ran
    assert AuthorizationEcho.seen == []


def test_a_process_that_is_no_forwarders_child_is_turned_away(door: HeadFront) -> None:
    door.forwarders.clear()
    got = _through_relay(door, "team-a/locked-head", "GET /api/version HTTP/1.1\r\nAuthorization: Bearer sekrit\r\n\r\n", turned_away=True)
    assert got == b"" and AuthorizationEcho.seen == [] and door.refused == 1
