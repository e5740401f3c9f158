"""A second local user cannot take the private head's ports and receive raybridge's token.

The attack, as it was found: the head's ports were chosen by raybridge, closed, and passed on
`ray start`'s command line, which every local user reads in /proc/PID/cmdline; a squatter bound
the dashboard port in the seconds before the dashboard did, received `Authorization: Bearer
<token>` and the working dir, and answered the job submission, so raybridge reported a job that
never ran as succeeded. Here a real squatter process (as user nobody where the tests run as root,
else as this user in a session of its own) watches /proc for the head's `ray start` and binds every
port it names, recording whatever reaches it; `raybridge submit` runs a job that prints a marker.
The job must really run on raybridge's own head, and nothing may reach the squatter.

The same squatter also waits for a port the head frees while raybridge polls it: the head's
dashboard (or the whole head) is killed mid-job, the squatter binds the freed dashboard port at
once and answers every request with a forged "SUCCEEDED". raybridge must send it nothing (no
token, no request), end with exit 3 and one line saying the dashboard is not the head's, report
no success, and leave no head process or temp dir behind.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Optional

import pytest

from raybridge.jobs.head_listener import dashboard_port_in
from tests.helpers import cli_env, run_cli_fresh

NOBODY = 65534

SQUATTER = textwrap.dedent(
    """
    import os, select, socket, sys, time
    if len(sys.argv) > 1:
        os.setgid(int(sys.argv[1])); os.setuid(int(sys.argv[1]))
    PORT_FLAGS = ("--port", "--dashboard-port", "--dashboard-agent-listen-port", "--metrics-export-port",
                  "--ray-client-server-port", "--node-manager-port", "--object-manager-port", "--runtime-env-agent-port")
    taken, sockets = set(), []
    def note(text):
        print(text, flush=True)
    note("watching")
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                argv = open(f"/proc/{pid}/cmdline", "rb").read().decode(errors="replace").split("\\0")
            except OSError:
                continue
            if "start" not in argv or "--head" not in argv:
                continue
            for flag in PORT_FLAGS:
                if flag in argv:
                    port = int(argv[argv.index(flag) + 1])
                    if port and port not in taken:
                        taken.add(port)
                        try:
                            s = socket.socket(); s.bind(("127.0.0.1", port)); s.listen(); s.setblocking(False)
                            sockets.append(s); note(f"bound {port}")
                        except OSError as exc:
                            note(f"could not bind {port}: {exc}")
        readable, _, _ = select.select(sockets, [], [], 0.02) if sockets else ([], [], [])
        for s in readable:
            try:
                conn, _ = s.accept()
                conn.settimeout(2)
                data = conn.recv(65536)
                note("RECEIVED " + repr(data[:300]))
                conn.sendall(b"HTTP/1.1 200 OK\\r\\nContent-Length: 2\\r\\n\\r\\n{}")
                conn.close()
            except OSError:
                pass
    """
)


@pytest.mark.fresh_head
def test_a_squatter_on_the_ports_of_ray_start_receives_nothing_and_the_job_really_runs(tmp_path: Path) -> None:
    as_other_user = [str(NOBODY)] if os.geteuid() == 0 else []
    squatter = subprocess.Popen([sys.executable, "-c", SQUATTER, *as_other_user], start_new_session=True, cwd="/",
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)  # fmt: skip
    try:
        out = run_cli_fresh("submit", "--", "python", "-c", "print('ran on raybridge head')", env=cli_env(), cwd=tmp_path, timeout=240)
    finally:
        squatter.kill()
        seen, _ = squatter.communicate(timeout=10)
    assert "watching" in seen
    assert "RECEIVED" not in seen, seen  # no token, no working dir, no request of any kind
    assert out.returncode == 0, out.stderr[-2000:]
    assert "ran on raybridge head" in out.stdout, (out.stdout[-1000:], seen)


#: Binds the port named on its first line of input as soon as it is free, then answers every request with a forged
#: job status, recording what reaches it.
FREED_PORT_SQUATTER = textwrap.dedent(
    """
    import json, os, select, socket, sys, time
    if len(sys.argv) > 1:
        os.setgid(int(sys.argv[1])); os.setuid(int(sys.argv[1]))
    print("ready", flush=True)
    port = int(sys.stdin.readline())
    deadline = time.monotonic() + 60
    listener = None
    while listener is None and time.monotonic() < deadline:
        s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port)); s.listen(64); listener = s
        except OSError:
            s.close(); time.sleep(0.001)
    print("bound" if listener else "never bound", flush=True)
    forged = json.dumps({"status": "SUCCEEDED", "job_id": "x", "submission_id": "x", "entrypoint": "x", "type": "SUBMISSION",
                         "message": "forged", "driver_exit_code": 0}).encode()
    while listener is not None and time.monotonic() < deadline:
        readable, _, _ = select.select([listener], [], [], 0.05)
        if not readable:
            continue
        conn, _ = listener.accept()
        conn.settimeout(2)
        try:
            data = conn.recv(65536)
            if not data:
                print("a connection, closed with nothing sent", flush=True)
                conn.close()
                continue
            print("RECEIVED " + repr(data[:300]), flush=True)
            conn.sendall(b"HTTP/1.1 200 OK\\r\\nContent-Type: application/json\\r\\nContent-Length: %d\\r\\n\\r\\n" % len(forged) + forged)
        except OSError:
            pass
        conn.close()
    """
)

JOB = "import time; print('job started', flush=True); time.sleep(120); print('job finished', flush=True)"


def _cmdline(pid: int) -> bytes:
    """A process's command line; empty once it has ended (a head's short-lived worker can end between the listing
    and the read: the test failed once on such a pid with FileNotFoundError)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def test_a_process_that_has_ended_has_an_empty_command_line() -> None:
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()  # reaped: its pid names no process
    assert _cmdline(ended.pid) == b"" and b"python" in _cmdline(os.getpid())


def _head_processes(temp_dir: Path) -> list[int]:
    """Processes that run in the head's temp dir (command line or environment), as private_head._orphans_of finds them."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "cmdline").read_bytes() + (entry / "environ").read_bytes()
        except OSError:
            continue
        if str(temp_dir).encode() in text:
            found.append(int(entry.name))
    return found


def _wait_for_line(proc: subprocess.Popen[str], wanted: str, timeout: float) -> list[str]:
    """Lines of `proc`'s merged output until one holds `wanted`."""
    assert proc.stdout is not None
    seen: list[str] = []
    selector = selectors.DefaultSelector()
    selector.register(proc.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if selector.select(timeout=0.5):
            line = proc.stdout.readline()
            if not line:
                break
            seen.append(line)
            if wanted in line:
                return seen
    raise AssertionError(f"no line with {wanted!r} within {timeout}s: {seen[-20:]}")


def _head_dir(seen: list[str]) -> Path:
    """The head's temp dir, found through the dashboard port raybridge printed."""
    port = next(int(line.rsplit(":", 1)[1].rstrip(")\n")) for line in seen if "private local Ray head ready" in line)
    for candidate in Path("/tmp").glob("raybridge-*"):
        try:
            if dashboard_port_in((candidate / "raybridge-head.log").read_text(errors="replace")) == port:
                return candidate
        except OSError:
            continue
    raise AssertionError(f"no head dir for dashboard port {port}")


def _kill(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


@pytest.mark.fresh_head
@pytest.mark.realtime
@pytest.mark.parametrize("what_dies", ["the dashboard", "the whole head"])
def test_a_port_the_head_frees_mid_job_receives_nothing_and_no_success_is_forged(what_dies: str, tmp_path: Path) -> None:
    as_other_user = [str(NOBODY)] if os.geteuid() == 0 else []
    squatter = subprocess.Popen([sys.executable, "-c", FREED_PORT_SQUATTER, *as_other_user], start_new_session=True, cwd="/",
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)  # fmt: skip
    assert squatter.stdout is not None and squatter.stdin is not None
    assert squatter.stdout.readline().strip() == "ready"
    submit = subprocess.Popen([sys.executable, "-m", "raybridge", "submit", "--", "python", "-c", JOB], env=cli_env(), cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)  # fmt: skip
    head_dir: Optional[Path] = None
    try:
        seen = _wait_for_line(submit, "job started", timeout=180)
        head_dir = _head_dir(seen)
        port = dashboard_port_in((head_dir / "raybridge-head.log").read_text(errors="replace"))
        squatter.stdin.write(f"{port}\n")
        squatter.stdin.flush()
        head = _head_processes(head_dir)
        dashboard = [pid for pid in head if b"dashboard/dashboard.py" in _cmdline(pid)]
        assert dashboard, "the head's dashboard process was not found"
        supervisor = [pid for pid in head if b"head_supervisor" in _cmdline(pid)]
        _kill(dashboard if what_dies == "the dashboard" else [pid for pid in head if pid not in supervisor])
        rest, _ = submit.communicate(timeout=60)
    finally:
        if submit.poll() is None:
            os.killpg(submit.pid, signal.SIGKILL)
            submit.wait(timeout=10)
        squatter.kill()
        heard, _ = squatter.communicate(timeout=10)
    output = "".join(seen) + rest
    assert "RECEIVED" not in heard, (heard, output[-2000:])  # no token, no request of any kind
    assert submit.returncode == 3, output[-2000:]
    assert "succeeded" not in output and "job finished" not in output, output[-2000:]
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and ("not the head's own" in errors[0] or "has exited" in errors[0]), output[-2000:]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and (head_dir.exists() or _head_processes(head_dir)):
        time.sleep(0.2)
    assert not _head_processes(head_dir), "processes of the head are left"
    assert not head_dir.exists(), "the head's temp dir is left"
