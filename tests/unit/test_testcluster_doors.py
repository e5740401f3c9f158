"""The test cluster's doors let in what the stack names and nothing else.

Real sockets and processes, no cluster: the stack's Unix door to the Ray head (kwok's port-forwards and the dashboard
proxy reach the head through it) admits the processes it names, not another process of this same user; the
dashboard proxy, once told the operator's process, serves that process alone; the kubelet gate completes its TLS
handshake only with a client certificate of the stack's CA and lets through only the API server's kubelet client; a
program in a network namespace of its own (netjail.py) cannot be reached from outside but through the sockets the
stack made, and reaches only what it is given.
"""

from __future__ import annotations

import json
import os
import socket
import socketserver
import ssl
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Callable, Iterator

import pytest

from testcluster.head_front import HeadFront
from testcluster.netjail import Relay, jail_argv, unix_connect, unix_listener
from testcluster.processes import UnixHTTPConnection, unix_http_ok
from tests.unit.echo_head import AuthorizationEcho, echo_head



@pytest.fixture
def upstream() -> Iterator[int]:
    with echo_head() as port:
        yield port


def _get_over_unix(path: Path) -> str:
    connection = UnixHTTPConnection(path, timeout=10)
    try:
        connection.request("GET", "/api/version")
        return connection.getresponse().read().decode()
    except (OSError, ConnectionError) as exc:
        return type(exc).__name__
    finally:
        connection.close()


def _in_child(action: Callable[[], str]) -> str:
    """`action()`'s answer, run in a forked child: another process of this same user."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        try:
            answer = action()
        except BaseException as exc:  # noqa: BLE001 - reported to the parent
            answer = f"{type(exc).__name__}: {exc}"
        os.write(write_end, answer.encode())
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end) as f:
        text = f.read()
    os.waitpid(pid, 0)
    return text


def test_the_stacks_door_to_the_head_admits_the_processes_it_names_and_no_other_of_this_user(upstream: int, tmp_path: Path) -> None:
    door = HeadFront(f"127.0.0.1:{upstream}", "tok", tmp_path / "door.sock")
    try:
        door.admitted.add(os.getpid())
        assert json.loads(_get_over_unix(tmp_path / "door.sock")) == {"authorization": "Bearer tok"}
        other = _in_child(lambda: _get_over_unix(tmp_path / "door.sock"))  # this user, another process
        assert other in ("", "RemoteDisconnected", "ConnectionResetError", "BrokenPipeError"), other  # closed unanswered
        assert AuthorizationEcho.seen == ["Bearer tok"] and door.refused == 1
        assert (tmp_path / "door.sock").stat().st_mode & 0o777 == 0o600
    finally:
        door.close()


def test_the_dashboard_proxy_serves_the_operators_process_alone_once_named(upstream: int) -> None:
    from testcluster.dashboard_proxy import DashboardProxy

    proxy = DashboardProxy(("127.0.0.1", upstream)).start()
    service = "http://head-svc.team-a.svc.cluster.local:8265/api/version"
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({"http": proxy.url}))
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        proxy.serve_only(sleeper.pid)  # the operator's process: not this one
        with pytest.raises((urllib.error.URLError, ConnectionError)):
            opener.open(service, timeout=10)
        proxy.serve_only(os.getpid())
        with opener.open(service, timeout=10) as answer:
            assert answer.status == 200
        assert len(AuthorizationEcho.seen) == 1
    finally:
        sleeper.kill()
        sleeper.wait()
        proxy.stop()


@pytest.fixture
def gate(tmp_path: Path) -> Iterator[tuple[object, object]]:
    """A kubelet gate in front of a plain HTTP server on a Unix socket (kwok's place), with the stack's CA."""
    from testcluster.kubelet_gate import KubeletGate
    from testcluster.pki import Pki

    pki = Pki(tmp_path / "pki")
    behind = tmp_path / "kwok.sock"
    AuthorizationEcho.seen = []

    class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
        daemon_threads = True

    server = _Server(str(behind), AuthorizationEcho)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    serving = pki.serving("kubelet", ("127.0.0.1",))
    door = KubeletGate(serving.cert, serving.key, pki.ca_file, "kube-apiserver-kubelet-client", behind)
    try:
        yield door, pki
    finally:
        door.close()
        server.shutdown()
        server.server_close()


def _through_gate(port: int, pki: object, identity: object) -> str:
    context = ssl.create_default_context(cafile=str(pki.ca_file))  # type: ignore[attr-defined]
    if identity is not None:
        context.load_cert_chain(identity.cert, identity.key)  # type: ignore[attr-defined]
    try:
        with urllib.request.urlopen(f"https://127.0.0.1:{port}/healthz", timeout=10, context=context) as answer:
            return f"HTTP {answer.status}"
    except (urllib.error.URLError, OSError, ssl.SSLError) as exc:
        return type(getattr(exc, "reason", exc)).__name__


def test_the_kubelet_gate_lets_through_the_api_servers_kubelet_client_alone(gate: tuple[object, object]) -> None:
    door, pki = gate
    kubelet_client = pki.client("apiserver-kubelet-client", "kube-apiserver-kubelet-client", ("system:masters",))  # type: ignore[attr-defined]
    admin = pki.client("admin", "testcluster-admin", ("system:masters",))  # type: ignore[attr-defined]
    port = door.port  # type: ignore[attr-defined]
    assert _through_gate(port, pki, kubelet_client) == "HTTP 200"
    assert _through_gate(port, pki, None) != "HTTP 200"  # no certificate: no handshake
    assert _through_gate(port, pki, admin) != "HTTP 200"  # the stack's CA, another name: closed
    with socket.create_connection(("127.0.0.1", port), timeout=10) as plain:  # kwok's plain HTTP: not here
        plain.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert not plain.recv(4096).startswith(b"HTTP/1.1 200")
    assert AuthorizationEcho.seen == [""]


# (request line the API server sends the kubelet, the pod it port-forwards to)
REQUEST_LINES = [
    (b"POST /portForward/team-a/job-head-x7k2q?port=8265 HTTP/1.1\r\n", ("team-a", "job-head-x7k2q")),
    (b"GET /portForward/default/head HTTP/1.1\r\n", ("default", "head")),
    (b"GET /containerLogs/default/head/ray-head HTTP/1.1\r\n", None),
    (b"GET /portForward/default HTTP/1.1\r\n", None),
    (b"nonsense\r\n", None),
]


@pytest.mark.parametrize("line, pod", REQUEST_LINES, ids=[row[0].decode().strip() for row in REQUEST_LINES])
def test_the_kubelet_gate_knows_the_pod_a_request_port_forwards_to(line: bytes, pod: object) -> None:
    from testcluster.kubelet_gate import port_forwarded_pod

    assert port_forwarded_pod(line) == pod


def _waited(check: Callable[[], bool], seconds: float = 10.0) -> bool:
    import time

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return check()


def test_a_deleted_pods_port_forwards_end_and_new_ones_are_turned_away_until_the_name_is_used_again(gate: tuple[object, object]) -> None:
    """A kubelet stops a deleted pod's containers, which ends its port-forwards; the test cluster's head pods all lead
    to one Ray head that stops with none, so the gate ends them (a kept stream outlived its pod before)."""
    door, pki = gate
    kubelet_client = pki.client("apiserver-kubelet-client", "kube-apiserver-kubelet-client", ("system:masters",))  # type: ignore[attr-defined]
    context = ssl.create_default_context(cafile=str(pki.ca_file))  # type: ignore[attr-defined]
    context.load_cert_chain(kubelet_client.cert, kubelet_client.key)

    def open_stream(pod: str) -> ssl.SSLSocket:
        """A port-forward held open: its request line sent, its head never finished."""
        raw = socket.create_connection(("127.0.0.1", door.port), timeout=10)  # type: ignore[attr-defined]
        stream = context.wrap_socket(raw, server_hostname="127.0.0.1")
        stream.sendall(f"POST /portForward/team-a/{pod}?port=8265 HTTP/1.1\r\nHost: x\r\n".encode())
        return stream

    def ended(stream: ssl.SSLSocket) -> bool:
        stream.settimeout(5)
        try:
            return stream.recv(4096) == b""
        except socket.timeout:  # still open
            return False
        except (OSError, ssl.SSLError):  # reset
            return True

    first, other = open_stream("head-1"), open_stream("head-2")
    assert _waited(lambda: door.port_forwarded_pods() == {("team-a", "head-1"), ("team-a", "head-2")})  # type: ignore[attr-defined]
    door.end_port_forwards("team-a", "head-1")  # type: ignore[attr-defined]
    assert ended(first)
    assert _waited(lambda: door.port_forwarded_pods() == {("team-a", "head-2")})  # type: ignore[attr-defined]
    assert ended(open_stream("head-1"))  # turned away: the pod is gone
    door.pod_started("team-a", "head-1")  # type: ignore[attr-defined]
    again = open_stream("head-1")
    assert _waited(lambda: ("team-a", "head-1") in door.port_forwarded_pods())  # type: ignore[attr-defined]
    for stream in (again, other):
        stream.close()


def _unshare_works() -> bool:
    return subprocess.run(jail_argv(["true"], {}, {}), capture_output=True, timeout=30).returncode == 0


INSIDE = """
import socket, sys, urllib.request
server = socket.create_server(("0.0.0.0", 7000))  # every interface, as KAI's plugin server binds
print(urllib.request.urlopen("http://127.0.0.1:7001/api/version", timeout=10).read().decode(), flush=True)
while True:
    conn, _ = server.accept()
    conn.sendall(b"inside"); conn.close()
"""


def test_a_jailed_program_is_reached_through_the_stacks_sockets_alone(upstream: int, tmp_path: Path) -> None:
    if not _unshare_works():
        pytest.skip("no network namespaces here (unshare --net refused)")
    outside = tmp_path / "out.sock"
    relay = Relay(unix_listener(outside), lambda: socket.create_connection(("127.0.0.1", upstream), timeout=10))
    served = tmp_path / "in.sock"
    jail = subprocess.Popen(jail_argv([sys.executable, "-c", INSIDE], {7001: outside}, {served: 7000}), stdout=subprocess.PIPE, text=True)
    try:
        assert jail.stdout is not None
        assert json.loads(jail.stdout.readline()) == {"authorization": None}  # it dialled out through the stack's socket
        with unix_connect(served) as connection:
            assert connection.recv(100) == b"inside"
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", 7000), timeout=2).close()
        assert served.stat().st_mode & 0o777 == 0o600
        assert not unix_http_ok(tmp_path / "absent.sock", "/")
    finally:
        jail.terminate()
        jail.wait(10)
        relay.close()
