"""A second local user cannot take the private head's ports and receive raybridge's token.

The attack, as it was found: the head's ports were chosen by raybridge, closed, and passed on
`ray start`'s command line, which every local user reads in /proc/PID/cmdline; a squatter bound
the dashboard port in the seconds before the dashboard did, received `Authorization: Bearer
<token>` and the working dir, and answered the job submission, so raybridge reported a job that
never ran as succeeded. Here a real squatter process (as user nobody where the tests run as root,
else as this user in a session of its own) watches /proc for the head's `ray start` and binds every
port it names, recording whatever reaches it; `raybridge submit` runs a job that prints a marker.
The job must really run on raybridge's own head, and nothing may reach the squatter.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.helpers import cli_env, run_cli_fresh

NOBODY = 65534

SQUATTER = textwrap.dedent(
    """
    import os, select, socket, sys, time
    if len(sys.argv) > 1:
        os.setgid(int(sys.argv[1])); os.setuid(int(sys.argv[1]))
    PORT_FLAGS = ("--port", "--dashboard-port", "--dashboard-agent-listen-port", "--metrics-export-port")
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
            if "ray.scripts.scripts" not in argv or "--head" not in argv:
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
