"""The private head's supervisor and start-up settings, without Ray.

Why this module exists: the supervisor must end the head's whole family both when
raybridge closes its stdin (done, crashed, SIGKILLed: then it removes the temp dir too) and
when the head exits on its own (a failed start must be seen at once, not after the start
timeout, with the head's log still there to quote). The
private head must start only what a Job API submission needs, leaving the user's own
settings alone. Stand-in commands (`sh`, `sleep`) play the head.

What it deliberately does not do: start a real Ray head (tests/e2e/test_local_submit.py does).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import types
from pathlib import Path
from typing import Any

import pytest

from raybridge.jobs import private_head
from tests.helpers import short_tmpdir

SUPERVISOR = [sys.executable, "-m", "raybridge.jobs.head_supervisor"]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


@pytest.mark.parametrize(
    "case, head, close_stdin, temp_dir_kept",
    [
        ("raybridge closes stdin", "sleep 300 & echo $! > grandchild; wait", True, False),
        # the log stays for raybridge to quote; raybridge removes the dir
        ("the head exits on its own, status 0", "sleep 300 & echo $! > grandchild; exit 0", False, True),
        ("the head fails to start, status 3", "sleep 300 & echo $! > grandchild; exit 3", False, True),
    ],
)
def test_the_supervisor_ends_the_family_at_once(
    tmp_path: Path, case: str, head: str, close_stdin: bool, temp_dir_kept: bool
) -> None:
    temp_dir = tmp_path / "raybridge-head"
    temp_dir.mkdir()
    supervisor = subprocess.Popen(
        [*SUPERVISOR, "--temp-dir", str(temp_dir), "--", "sh", "-c", head],
        stdin=subprocess.PIPE, cwd=tmp_path, start_new_session=True,
    )  # fmt: skip
    pid_file = tmp_path / "grandchild"
    deadline = time.monotonic() + 20
    while not (pid_file.exists() and pid_file.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.05)
    grandchild = int(pid_file.read_text())
    if close_stdin:
        assert supervisor.stdin is not None
        supervisor.stdin.close()
    try:
        assert supervisor.wait(timeout=20) == 0, case
    finally:
        if supervisor.poll() is None:
            os.killpg(supervisor.pid, 9)
    deadline = time.monotonic() + 5
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(grandchild), case
    assert temp_dir.exists() == temp_dir_kept, case


class _FakeSupervisor:
    pid = 0
    stdin = None

    def poll(self) -> None:
        return None


@pytest.mark.parametrize(
    "case, user_env, prestart",
    [
        ("no idle workers prestarted for the job agent's driver", {}, "0"),
        ("the user's own setting wins", {"RAY_prestart_worker_first_driver": "1"}, "1"),
    ],
)
def test_the_private_head_starts_only_what_a_job_submission_needs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, case: str, user_env: dict[str, str], prestart: str
) -> None:
    started: dict[str, Any] = {}

    def popen(command: list[str], **kwargs: Any) -> _FakeSupervisor:
        started.update(command=command, env=kwargs["env"])
        kwargs["stdout"].write(b"  RAY_API_SERVER_ADDRESS='http://127.0.0.1:45678' ray job submit -- python x.py\n")  # as ray start says it
        return _FakeSupervisor()

    fake_subprocess = types.SimpleNamespace(Popen=popen, PIPE=subprocess.PIPE, STDOUT=subprocess.STDOUT)
    monkeypatch.setattr(private_head, "subprocess", fake_subprocess)
    monkeypatch.setattr(private_head.PrivateRayHead, "_answers", lambda self, path: True)
    monkeypatch.setattr(private_head, "listener_holder", lambda port, session: (None, None))  # no real listener here
    monkeypatch.setattr(private_head, "exposed_listeners", lambda session: [])
    monkeypatch.setattr(private_head, "_import_job_client", lambda: None)
    monkeypatch.setattr(private_head, "_start_time", lambda pid: "1")
    monkeypatch.setenv("TMPDIR", short_tmpdir())  # short: the head's dir stays in it, and so does its stale-dir sweep
    monkeypatch.setattr(private_head.tempfile, "tempdir", None)
    monkeypatch.delenv("RAY_prestart_worker_first_driver", raising=False)
    for name, value in user_env.items():
        monkeypatch.setenv(name, value)
    private_head.PrivateRayHead(num_gpus=0).start()
    ray_start = started["command"][started["command"].index("--") + 1 :]
    assert "--no-monitor" in ray_start, case
    # No port is chosen before the head binds it: Ray's client server (which takes no port 0) is not started at all.
    assert ray_start[1:3] == ["-m", "raybridge.jobs.head_start"] and "--ray-client-server-port" not in ray_start, case
    assert all(ray_start[i + 1] == "0" for i, arg in enumerate(ray_start) if arg.endswith("-port")), case
    assert ray_start[ray_start.index("--include-dashboard") + 1] == "true", case  # the Job API lives there
    assert started["env"]["RAY_prestart_worker_first_driver"] == prestart, case


@pytest.mark.realtime
def test_a_head_that_fails_to_start_is_reported_at_once_with_its_log(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A stand-in `ray start` that prints an error and exits: InfraError quoting it, long before the timeout."""
    real_popen = subprocess.Popen

    def popen(command: list[str], **kwargs: Any) -> "subprocess.Popen[bytes]":
        head = ["sh", "-c", "echo 'ValueError: ray_client_server_port must be an integer'; exit 1"]
        return real_popen([*command[: command.index("--") + 1], *head], **kwargs)

    fake_subprocess = types.SimpleNamespace(Popen=popen, PIPE=subprocess.PIPE, STDOUT=subprocess.STDOUT)
    monkeypatch.setattr(private_head, "subprocess", fake_subprocess)
    monkeypatch.setattr(private_head, "_import_job_client", lambda: None)
    monkeypatch.setenv("TMPDIR", short_tmpdir())  # short: the head's dir stays in it, and so does its stale-dir sweep
    monkeypatch.setattr(private_head.tempfile, "tempdir", None)
    head = private_head.PrivateRayHead(num_gpus=0)
    start = time.monotonic()
    with pytest.raises(private_head.InfraError, match="exited while starting: .*ray_client_server_port must be"):
        head.start(timeout=60)
    assert time.monotonic() - start < 15
    head.stop()
    assert not [p for p in Path(os.environ["TMPDIR"]).iterdir() if p.name.startswith(private_head.TEMP_PREFIX)]
