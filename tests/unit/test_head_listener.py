"""Whose listener is on a port: the kernel's socket table and /proc, on real sockets (head_listener.py)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from raybridge.jobs.head_listener import connection_problem, dashboard_port_in, exposed_listeners, gcs_address_in, listener_problem

LINUX = Path("/proc/net/tcp").exists()
needs_linux = pytest.mark.skipif(not LINUX, reason="the socket table is Linux's /proc/net/tcp")

LISTENER = textwrap.dedent(
    """
    import os, socket, sys
    host = os.environ.get("BIND", "127.0.0.1")
    if len(sys.argv) > 1:
        os.setgid(int(sys.argv[1])); os.setuid(int(sys.argv[1]))
    s = socket.socket(); s.bind((host, 0)); s.listen()
    print(s.getsockname()[1], flush=True)
    sys.stdin.read()
    """
)


def _listener(*args: str, new_session: bool = True, bind: str = "127.0.0.1") -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen([sys.executable, "-c", LISTENER, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            start_new_session=new_session, env={**os.environ, "BIND": bind})  # fmt: skip
    assert proc.stdout is not None
    return proc, int(proc.stdout.readline())


def _end(proc: subprocess.Popen[str]) -> None:
    assert proc.stdin is not None
    proc.stdin.close()
    proc.wait(timeout=10)


@needs_linux
def test_a_listener_of_the_head_s_session_is_the_head_s_own() -> None:
    proc, port = _listener()
    try:
        assert listener_problem(port, session=proc.pid) is None  # a new session's id is its leader's pid
    finally:
        _end(proc)


@needs_linux
def test_a_listener_of_another_session_of_this_user_is_not() -> None:
    proc, port = _listener()
    try:
        assert listener_problem(port, session=os.getsid(0)) == f"the listener on 127.0.0.1:{port} is held by no process of the head raybridge started"
    finally:
        _end(proc)


@needs_linux
@pytest.mark.skipif(os.geteuid() != 0, reason="binding as another user needs root to become that user")
def test_a_listener_of_another_user_is_not_even_in_the_head_s_session() -> None:
    proc, port = _listener("65534", new_session=True)
    try:
        problem = listener_problem(port, session=proc.pid)
        assert problem == f"the listener on 127.0.0.1:{port} belongs to user id 65534, not to this user ({os.getuid()})"
    finally:
        _end(proc)


@needs_linux
def test_nothing_listening_is_said() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, never listening
    assert listener_problem(port, session=os.getsid(0)) == f"nothing listens on 127.0.0.1:{port}"


def test_without_a_socket_table_nothing_can_be_checked(tmp_path: Path) -> None:
    assert listener_problem(8265, session=1, proc=tmp_path) is None


# (case, the head's log so far, the port read)
LOG_ROWS = [
    ("not up yet", "Local node IP: 127.0.0.1\n", None),
    ("the Job API line", "To submit a Ray job:\n  RAY_API_SERVER_ADDRESS='http://127.0.0.1:37293' ray job submit -- x\n", 37293),
    ("colours around it", "\x1b[1m  RAY_API_SERVER_ADDRESS='http://127.0.0.1:8265' ray job submit\x1b[22m", 8265),
    ("another host is not the private head's", "RAY_API_SERVER_ADDRESS='http://10.0.0.5:8265'", None),
    ("port 0 or beyond 65535", "RAY_API_SERVER_ADDRESS='http://127.0.0.1:0' RAY_API_SERVER_ADDRESS='http://127.0.0.1:70000'", None),
]


@pytest.mark.parametrize("case, log, port", LOG_ROWS, ids=[r[0] for r in LOG_ROWS])
def test_the_dashboard_port_is_read_from_the_head_s_log(case: str, log: str, port: int | None) -> None:
    assert dashboard_port_in(log) == port, case


def test_the_gcs_address_is_read_from_the_head_s_temp_dir(tmp_path: Path) -> None:
    assert gcs_address_in(tmp_path) is None
    (tmp_path / "ray_current_cluster").write_text("127.0.0.1:46743")
    assert gcs_address_in(tmp_path) == "127.0.0.1:46743"
    (tmp_path / "ray_current_cluster").write_text("10.1.2.3:6379")
    assert gcs_address_in(tmp_path) is None


@needs_linux
def test_a_listener_of_the_head_s_session_on_every_interface_is_exposed() -> None:
    everywhere, port = _listener(bind="0.0.0.0")
    loopback, _ = _listener()
    try:
        assert exposed_listeners(everywhere.pid) == [f"0.0.0.0:{port}"]
        assert exposed_listeners(loopback.pid) == []  # its own listener is on 127.0.0.1
    finally:
        _end(everywhere)
        _end(loopback)


ACCEPTER = textwrap.dedent(
    """
    import os, socket, sys
    if len(sys.argv) > 1:
        os.setgid(int(sys.argv[1])); os.setuid(int(sys.argv[1]))
    s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
    print(s.getsockname()[1], flush=True)
    held = []
    while sys.stdin.readline():
        conn, _ = s.accept(); held.append(conn)
        print("accepted", flush=True)
    """
)


def _accepter(*args: str) -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen([sys.executable, "-c", ACCEPTER, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    return proc, int(proc.stdout.readline())


def _connect_and_accept(proc: subprocess.Popen[str], port: int, accept: bool = True) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    if accept:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write("accept\n")
        proc.stdin.flush()
        assert proc.stdout.readline().strip() == "accepted"
    return sock


def _ends(sock: socket.socket) -> tuple[tuple[str, int], tuple[str, int]]:
    local, peer = sock.getsockname(), sock.getpeername()
    return (local[0], local[1]), (peer[0], peer[1])


@needs_linux
def test_a_connection_accepted_by_the_dashboard_process_reaches_the_head() -> None:
    proc, port = _accepter()
    try:
        with _connect_and_accept(proc, port) as sock:
            assert connection_problem(*_ends(sock), holder=proc.pid) is None
    finally:
        _end(proc)


@needs_linux
def test_a_connection_accepted_by_another_process_of_this_user_is_refused() -> None:
    proc, port = _accepter()
    other, _ = _listener()
    try:
        with _connect_and_accept(proc, port) as sock:
            problem = connection_problem(*_ends(sock), holder=other.pid)
            assert problem == f"the connection to 127.0.0.1:{port} was accepted by a process other than the head's dashboard (pid {other.pid})"
    finally:
        _end(proc)
        _end(other)


@needs_linux
@pytest.mark.skipif(os.geteuid() != 0, reason="listening as another user needs root to become that user")
def test_a_connection_to_another_user_s_listener_is_refused_before_it_is_accepted() -> None:
    proc, port = _accepter("65534")
    try:
        with _connect_and_accept(proc, port, accept=False) as sock:
            waited: list[float] = []
            problem = connection_problem(*_ends(sock), holder=os.getpid(), sleep=waited.append)
            assert problem == f"the connection to 127.0.0.1:{port} was accepted by user id 65534, not by this user ({os.getuid()})"
            assert waited == []  # the owner is in the table at once: no waiting for accept()
    finally:
        _end(proc)


@needs_linux
def test_a_connection_never_accepted_is_refused_once_the_wait_is_over() -> None:
    proc, port = _accepter()
    try:
        with _connect_and_accept(proc, port, accept=False) as sock:
            now = [0.0]
            problem = connection_problem(*_ends(sock), holder=proc.pid, accept_wait=1.0, clock=lambda: now[0],
                                         sleep=lambda s: now.__setitem__(0, now[0] + 0.25))  # fmt: skip
            assert problem == f"the listener on 127.0.0.1:{port} did not accept the connection within 1s"
    finally:
        _end(proc)


def test_without_a_socket_table_no_connection_can_be_checked(tmp_path: Path) -> None:
    assert connection_problem(("127.0.0.1", 50000), ("127.0.0.1", 8265), holder=1, proc=tmp_path) is None


@needs_linux
def test_a_connection_nobody_accepted_is_said(tmp_path: Path) -> None:
    (tmp_path / "net").mkdir()
    (tmp_path / "net" / "tcp").write_text("  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n")
    problem = connection_problem(("127.0.0.1", 50000), ("127.0.0.1", 8265), holder=1, proc=tmp_path)
    assert problem == "no socket of this machine accepted the connection to 127.0.0.1:8265"
