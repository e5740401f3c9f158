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

import contextlib
import os
import shutil
import subprocess
import sys
import time
import types
from pathlib import Path
from typing import Any, Iterator

import pytest

from raybridge.jobs import private_head
from tests.helpers import processes_using, short_tmpdir

SUPERVISOR = [sys.executable, "-m", "raybridge.jobs.head_supervisor"]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False



@contextlib.contextmanager
def _supervising(tmp_path: Path, head: str) -> Iterator[tuple["subprocess.Popen[bytes]", Path]]:
    """(the supervisor, the head's temp dir) of a stand-in head `sh -c head` run in `tmp_path`, stdin a pipe the test
    holds; the supervisor's group is killed after, if it still runs."""
    temp_dir = tmp_path / "raybridge-head"
    temp_dir.mkdir()
    supervisor = subprocess.Popen([*SUPERVISOR, "--temp-dir", str(temp_dir), "--", "sh", "-c", head],
                                  stdin=subprocess.PIPE, cwd=tmp_path, start_new_session=True)  # fmt: skip
    try:
        yield supervisor, temp_dir
    finally:
        if supervisor.poll() is None:
            os.killpg(supervisor.pid, 9)


def _wait_until_exists(path: Path, timeout: float = 20) -> bool:
    deadline = time.monotonic() + timeout
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return path.exists()

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
    with _supervising(tmp_path, head) as (supervisor, temp_dir):
        grandchild = _wait_for_file(tmp_path / "grandchild")
        if close_stdin:
            assert supervisor.stdin is not None
            supervisor.stdin.close()
        assert supervisor.wait(timeout=20) == 0, case
    deadline = time.monotonic() + 5
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(grandchild), case
    assert temp_dir.exists() == temp_dir_kept, case
    assert processes_using(str(temp_dir)) == [], case  # the guard too: told the head was ended, it exits at once


#: A stand-in head whose processes carry the head's temp dir in their environment (TMPDIR), as Ray's do: one in its
#: own session (as Ray runs the job), its pid written down. `exec sleep` so the head's process is `sleep` itself.
HEAD_WITH_A_JOB = "setsid sleep 300 & echo $! > job; exec sleep 301"

#: The owner (raybridge's part): starts the supervisor with a pipe on its stdin, writes the supervisor's pid, waits.
#: The head's temp dir comes in a file, so that the owner, like raybridge, has it neither in its command line nor
#: in its environment.
OWNER = (
    "import os, subprocess, sys, time\n"
    "temp_dir = open('temp_dir').read()\n"
    "command = [sys.executable, '-m', 'raybridge.jobs.head_supervisor', '--temp-dir', temp_dir, '--', *sys.argv[1:]]\n"
    "s = subprocess.Popen(command, stdin=subprocess.PIPE, start_new_session=True, env={**os.environ, 'TMPDIR': temp_dir})\n"
    "open('supervisor', 'w').write(str(s.pid)); time.sleep(300)\n"
)


def _wait_for_file(path: Path, timeout: float = 20) -> int:
    deadline = time.monotonic() + timeout
    while not (path.exists() and path.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return int(path.read_text())


@pytest.mark.realtime
@pytest.mark.parametrize("owner_killed", [True, False], ids=["with raybridge", "alone"])
def test_a_supervisor_killed_with_sigkill_takes_the_head_and_its_job_down(tmp_path: Path, owner_killed: bool) -> None:
    """SIGKILL of the supervisor (with raybridge, or alone): its guard ends every process running in the head's temp
    dir, the one in a session of its own too; the dir goes when raybridge is gone too, else raybridge removes it."""
    temp_dir = Path(short_tmpdir()) / "raybridge-head"
    temp_dir.mkdir()
    (tmp_path / "temp_dir").write_text(str(temp_dir))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    owner = subprocess.Popen([sys.executable, "-c", OWNER, "sh", "-c", HEAD_WITH_A_JOB], cwd=tmp_path, env=env)
    try:
        supervisor = _wait_for_file(tmp_path / "supervisor")
        job = _wait_for_file(tmp_path / "job")
        assert _alive(job)
        for pid in [owner.pid] if owner_killed else []:
            os.kill(pid, 9)
        os.kill(supervisor, 9)
        deadline = time.monotonic() + 20
        while processes_using(str(temp_dir)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert processes_using(str(temp_dir)) == []  # before: the head and its job ran on until the next run
        assert not _alive(job)
        deadline = time.monotonic() + 5
        while temp_dir.exists() and owner_killed and time.monotonic() < deadline:
            time.sleep(0.05)
        assert temp_dir.exists() != owner_killed
    finally:
        owner.kill()
        owner.wait()
        for pid in processes_using(str(temp_dir)):
            os.kill(int(pid.split(":")[0]), 9)


#: A head that exits on its own, leaving a process that outlives SIGTERM (it writes `got_term` and goes on): the
#: supervisor has seen the head's exit once `got_term` appears, and lingers in its grace period before SIGKILL. The
#: head exits only once that process has set its trap: a TERM sent before it killed the process with nothing written
#: (a whole run on a loaded machine).
HEAD_DYING_SLOWLY = ("sh -c \"trap 'echo > got_term' TERM; echo > trapped; while :; do sleep 0.1; done\" & "
                     "while [ ! -e trapped ]; do sleep 0.01; done; exit 0")


@pytest.mark.realtime
def test_a_release_racing_the_heads_own_exit_leaves_no_temp_dir(tmp_path: Path) -> None:
    """raybridge releases the head while the supervisor, having seen the head exit, still ends its family: the
    dir goes all the same (before, each left it to the other: the supervisor to raybridge, which quotes a dead
    head's log, and raybridge to a supervisor it found still running)."""
    with _supervising(tmp_path, HEAD_DYING_SLOWLY) as (supervisor, temp_dir):
        assert _wait_until_exists(tmp_path / "got_term"), "the supervisor never began ending the head's family"
        head = private_head.PrivateRayHead(num_gpus=0)
        head._supervisor, head.temp_dir = supervisor, temp_dir
        head.release()
        assert supervisor.wait(timeout=30) == 0
    assert not temp_dir.exists()
    assert processes_using(str(temp_dir)) == []


#: A stand-in head: a "GCS" (a copy of `sleep` named gcs_server, as /proc/PID/comm names Ray's) and a "raylet" that,
#: half a second after SIGTERM, writes down whether the GCS still runs, then exits.
HEAD_WITH_A_GCS = (
    "./gcs_server 300 & echo $! > gcs; "
    "sh -c 'trap \"sleep 0.5; grep -q \\\"^[0-9]* (gcs_server) [^ZX]\\\" /proc/$(cat gcs)/stat && echo running > seen || echo gone > seen; exit 0\" TERM; "
    "echo > raylet_up; while :; do sleep 0.1; done' & wait"
)


@pytest.mark.realtime
def test_the_gcs_is_ended_after_the_rest_of_the_head(tmp_path: Path) -> None:
    """Ray's raylet, told to stop while the GCS stops too, waited about 10 s for it (every private head took 10 s to
    end); the supervisor ends the GCS once the rest has gone."""
    shutil.copy(shutil.which("sleep") or "/bin/sleep", tmp_path / "gcs_server")
    with _supervising(tmp_path, HEAD_WITH_A_GCS) as (supervisor, _):
        _wait_for_file(tmp_path / "gcs")
        _wait_until_exists(tmp_path / "raylet_up")
        assert supervisor.stdin is not None
        supervisor.stdin.close()
        assert supervisor.wait(timeout=30) == 0
    assert (tmp_path / "seen").read_text().strip() == "running"


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
