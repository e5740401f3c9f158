"""Whose listener is on a port: the kernel's socket table and /proc, on real sockets (head_listener.py)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from raybridge.jobs.head_listener import dashboard_port_in, exposed_listeners, gcs_address_in, listener_problem

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
