"""`submit --backend local`: a private head or an existing one, real Ray, nothing left behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from typing import Any

import pytest

from raybridge.jobs.private_head import _start_time
from tests.helpers import ROOT, cli_env, processes_using, run_cli, short_tmpdir, wait_for_output, wait_until_gone
from tests.waits import wait_for


@pytest.mark.fresh_head
def test_main_command_runs_the_example_on_a_private_head():
    """The README's main command, as a newcomer runs it: no kubeconfig, embedded local Ray."""
    tmp = short_tmpdir()
    out = run_cli("submit", "examples/hello.yaml", env=cli_env(TMPDIR=tmp), timeout=240)
    assert out.returncode == 0, out.stderr
    assert "backend: local (no kubeconfig" in out.stderr
    assert "sum of squares: 285" in out.stdout
    assert "NUM_GPUS=0 NUM_REPLICAS=1" in out.stdout
    assert wait_until_gone(tmp) == [], "the private head left processes behind"


@pytest.mark.fresh_head
def test_a_ray_auth_token_in_home_does_not_lock_raybridge_out_of_its_own_head(tmp_path):
    """Ray turns token auth on by itself when ~/.ray/auth_token exists; the private head must still answer."""
    home = tmp_path / "home"
    (home / ".ray").mkdir(parents=True)
    (home / ".ray" / "auth_token").write_text("a" * 64)
    tmp = short_tmpdir()
    out = run_cli("submit", "examples/hello.yaml", env=cli_env(TMPDIR=tmp, HOME=str(home)), timeout=240)
    assert out.returncode == 0, out.stderr
    assert "sum of squares: 285" in out.stdout
    assert wait_until_gone(tmp) == []


def test_existing_head_with_json_result(ray_head):
    out = run_cli("submit", "--address", ray_head.dashboard_url, "-o", "json", "--", "python", "-c", "print('hi from ray')")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["status"] == "SUCCEEDED" and result["backend"] == "local"
    assert "hi from ray" in out.stderr  # logs go to stderr when stdout carries JSON


def test_failing_job_exits_1(ray_head):
    out = run_cli("submit", "--address", ray_head.dashboard_url, "--", "python", "-c", "import sys; print('boom'); sys.exit(3)")
    assert out.returncode == 1
    assert "boom" in out.stdout and "failed" in out.stderr


def test_ray_address_env_selects_local_backend(ray_head):
    out = run_cli("submit", "--", "python", "-c", "print(40 + 2)", env=cli_env(RAY_ADDRESS=ray_head.dashboard_url))
    assert out.returncode == 0, out.stderr
    assert "backend: local (a Ray address is set)" in out.stderr and "42" in out.stdout


# (case, argv, fragment)
REFUSED = [
    ("more GPUs than this machine has", ["submit", "--backend", "local", "--gpus", "2", "--", "python", "-c", "1"], "this machine has no GPUs"),
    ("no entrypoint", ["submit", "--backend", "local"], "a RayJob needs a command to run"),
    ("working dir that is not there", ["submit", "--backend", "local", "--working-dir", "/nonexistent", "--", "python", "x.py"], "is not a directory"),
    ("RayCluster kind locally", ["submit", "--backend", "local", "--kind", "RayCluster"], "needs the kubernetes backend"),
]


@pytest.mark.parametrize("case,argv,fragment", REFUSED, ids=[r[0] for r in REFUSED])
def test_refused_before_anything_starts(case, argv, fragment):
    tmp = short_tmpdir()
    out = run_cli(*argv, env=cli_env(TMPDIR=tmp))
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert fragment in out.stderr and "Traceback" not in out.stderr
    assert processes_using(tmp) == []


def _start_long_job(tmp: str) -> subprocess.Popen[str]:
    # Started with SIGINT ignored, as a parent that ignores it (a test runner's worker, `nohup`) starts it:
    # Python then keeps it ignored, and Ctrl-C must still stop the job (it hung before submit handled it).
    return subprocess.Popen(
        [sys.executable, "-m", "raybridge", "submit", "--backend", "local", "--", "python", "-c",
         "import time; print('started', flush=True); time.sleep(600)"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env(TMPDIR=tmp), cwd=str(ROOT),
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )  # fmt: skip


@pytest.mark.fresh_head
@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 130)], ids=["ctrl-c", "sigterm"])
def test_interrupt_stops_the_job_and_the_head(sig, code):
    tmp = short_tmpdir()
    proc = _start_long_job(tmp)
    try:
        wait_for_output(proc, "started")
        proc.send_signal(sig)
        assert proc.wait(timeout=60) == code
        assert "interrupted: stopping the job" in proc.stderr.read()  # type: ignore[union-attr]
    finally:
        proc.kill()
    assert wait_until_gone(tmp) == []


@pytest.mark.fresh_head
def test_sigkill_of_raybridge_still_takes_the_head_down():
    """raybridge cannot clean up after SIGKILL; the head's supervisor must."""
    tmp = short_tmpdir()
    proc = _start_long_job(tmp)
    try:
        wait_for_output(proc, "started")
        assert processes_using(tmp), "the head should be running"
        proc.kill()
        proc.wait(timeout=10)
    finally:
        proc.kill()
    assert wait_until_gone(tmp, timeout=40) == []


@pytest.mark.fresh_head
def test_sigkill_takes_the_jobs_background_grandchildren_and_the_temp_dir_down_too():
    """A job that leaves processes in the background (even in a session of their own) must not outlive the run."""
    tmp = short_tmpdir()
    proc = subprocess.Popen(
        [sys.executable, "-m", "raybridge", "submit", "--backend", "local", "--",
         "sh", "-c", "sleep 600 & setsid sleep 601 & (sleep 602 &) ; echo started; sleep 600"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env(TMPDIR=tmp), cwd=str(ROOT),
    )  # fmt: skip
    try:
        wait_for_output(proc, "started")
        _wait_for_a_session_of_its_own("sleep 601", tmp)
        time.sleep(1)
        assert any("sleep 602" in p for p in processes_using(tmp)), "the orphaned grandchild should be running"
        proc.kill()
        proc.wait(timeout=10)
    finally:
        proc.kill()
    assert wait_until_gone(tmp, timeout=60) == []
    assert [p for p in os.listdir(tmp) if p.startswith("raybridge-")] == []


@pytest.mark.fresh_head
def test_stale_temp_dirs_of_runs_that_are_gone_are_removed_at_start(tmp_path):
    tmp = short_tmpdir()
    stale = os.path.join(tmp, "raybridge-stale0")
    live = os.path.join(tmp, "raybridge-live00")
    for path, owner in ((stale, "999999999 1"), (live, f"{os.getpid()} {_start_time(os.getpid())}")):
        os.makedirs(path)
        with open(os.path.join(path, "raybridge-owners"), "w") as f:
            f.write(owner + "\n")
    out = run_cli("submit", "--backend", "local", "--", "python", "-c", "print('fresh')", env=cli_env(TMPDIR=tmp), timeout=240)
    assert out.returncode == 0, out.stderr
    assert not os.path.exists(stale) and os.path.exists(live)
    assert wait_until_gone(tmp) == []


def test_python_api_submit_wait_logs(ray_head):
    import raybridge

    spec = raybridge.build_spec({"name": "api", "entrypoint": "python -c \"print('from the api')\""})
    with raybridge.submit(spec, backend="local", address=ray_head.dashboard_url, progress=lambda message: None) as job:
        assert job.wait(timeout=120) == "SUCCEEDED"
        assert "from the api" in job.logs()
        assert job.submission_id.startswith("api-")


def test_python_api_stop(ray_head):
    import raybridge

    spec = raybridge.build_spec({"entrypoint": "python -c \"import time; time.sleep(300)\""})
    job = raybridge.submit(spec, backend="local", address=ray_head.dashboard_url, progress=lambda message: None)
    try:
        deadline = time.monotonic() + 60
        while job.status() == "PENDING" and time.monotonic() < deadline:
            time.sleep(0.2)
        job.stop()
        assert job.wait(timeout=60) == "STOPPED"
    finally:
        job.close()


def test_output_that_is_not_utf8_is_shown_with_replacement_characters(ray_head):
    code = "import sys; sys.stdout.buffer.write(b'before \\xff\\xfe after\\n'); sys.stdout.flush(); print('still here')"
    out = run_cli("submit", "--address", ray_head.dashboard_url, "--", "python", "-c", code)
    assert out.returncode == 0, out.stderr
    assert "before \ufffd\ufffd after" in out.stdout and "still here" in out.stdout


def test_a_failed_job_shows_rays_message_and_the_exit_code(ray_head):
    out = run_cli("submit", "--address", ray_head.dashboard_url, "-o", "json", "--", "python", "-c", "import sys; sys.exit(7)")
    assert out.returncode == 1
    result = json.loads(out.stdout)
    assert result["status"] == "FAILED" and result["exitCode"] == 7
    assert "exit code 7" in result["message"]
    text = run_cli("submit", "--address", ray_head.dashboard_url, "--", "python", "-c", "import sys; sys.exit(7)")
    assert "failed (exit code 7): Job entrypoint command failed with exit code 7" in text.stderr


def test_stderr_carries_raybridges_messages_only_unless_verbose(ray_head):
    out = run_cli("submit", "--address", ray_head.dashboard_url, "--", "python", "-c", "print('hi')")
    assert out.returncode == 0
    noise = [line for line in out.stderr.splitlines() if " INFO " in line or "Warning" in line]
    assert noise == [], out.stderr
    loud = run_cli("submit", "--address", ray_head.dashboard_url, "-v", "--", "python", "-c", "print('hi')")
    assert loud.returncode == 0


@pytest.mark.fresh_head
def test_local_timeout_stops_waiting_for_the_head_and_cleans_up():
    """--timeout bounds the local backend too: past it, exit 3 with one line and nothing left behind."""
    tmp = short_tmpdir()
    out = run_cli("submit", "--backend", "local", "--timeout", "0.5", "--", "python", "-c", "print('never')", env=cli_env(TMPDIR=tmp), timeout=120)
    assert out.returncode == 3, out.stderr
    assert "gave up waiting for the local Ray head to start: --timeout 0.5s has passed" in out.stderr
    assert "Traceback" not in out.stderr and "never" not in out.stdout
    assert wait_until_gone(tmp) == []
    assert not [d for d in os.listdir(tmp) if d.startswith("raybridge-")], "the head's temp dir was left behind"


def _wait_for_a_session_of_its_own(program: str, tmp: str, timeout: float = 30.0) -> None:
    """Wait until `program` (started by the job as `setsid program &`) leads a session of its own. The job echoes its
    marker as soon as it has forked, and a kill that comes before the child's setsid() takes the child down with the
    job's process group, so the test would not be testing what escapes Ray."""
    wait_for(lambda: _leads_a_session(program, tmp), timeout=timeout, what=f"{program!r} leading a session of its own")


def _leads_a_session(program: str, tmp: str) -> bool:
    """Whether a process under `tmp` that runs exactly `program` is its session's leader (session id = its pid)."""
    for line in processes_using(tmp):
        pid, cmdline = line.split(": ", 1)
        if cmdline.strip() != program:
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                if int(f.read().rsplit(")", 1)[1].split()[3]) == int(pid):
                    return True
        except (OSError, ValueError, IndexError):
            continue
    return False


def _kill_at_once(pids: list[int]) -> None:
    """SIGKILL several processes as one event: each is stopped first, so none of them runs its clean-up between two
    kills (raybridge killed first, its supervisor could otherwise see stdin close and end the head before its own
    SIGKILL came, on a busy machine)."""
    try:
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
    finally:  # a process stopped and then left stopped would outlive the test
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _pids_of(module: str, tmp: str) -> list[int]:
    """The processes running `module` for a head under `tmp`."""
    return [int(p.split()[0]) for p in _pids_and_cmdlines() if module in p and tmp in p]


@pytest.mark.fresh_head
def test_sigkill_of_raybridge_and_its_supervisor_together_takes_the_head_and_the_job_down():
    """SIGKILL of raybridge and the head's supervisor at once (by hand, by the OOM killer): the supervisor's guard
    ends every process of the head, the job and what it left in a session of its own included, and removes the
    head's dir. Before, about 20 processes of the head, the job's among them, ran on until the next run."""
    tmp = short_tmpdir()
    proc = subprocess.Popen(
        [sys.executable, "-m", "raybridge", "submit", "--backend", "local", "--",
         "sh", "-c", "setsid sleep 601 & echo started; sleep 600"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env(TMPDIR=tmp), cwd=str(ROOT),
    )  # fmt: skip
    try:
        wait_for_output(proc, "started")
        supervisors = _pids_of("raybridge.jobs.head_supervisor", tmp)
        assert supervisors, "the head's supervisor should be running"
        _wait_for_a_session_of_its_own("sleep 601", tmp)
        _kill_at_once([proc.pid, *supervisors])
        proc.wait(timeout=10)
    finally:
        proc.kill()
    assert wait_until_gone(tmp, timeout=30) == []
    deadline = time.monotonic() + 10
    while [p for p in os.listdir(tmp) if p.startswith("raybridge-")] and time.monotonic() < deadline:
        time.sleep(0.2)
    assert [p for p in os.listdir(tmp) if p.startswith("raybridge-")] == []


@pytest.mark.fresh_head
def test_a_head_whose_raybridge_supervisor_and_guard_were_killed_together_is_ended_by_the_next_run():
    """SIGKILL of raybridge, the supervisor and its guard at once: the head's own process gets the kernel's
    parent-death signal and Ray stops its daemons and the job, but what the job started in a session of its own
    runs on. The next run finds the dead run's temp dir, ends the processes still running in it, then removes it
    (it used to remove the dir, token and logs, from under the running head)."""
    tmp = short_tmpdir()
    proc = subprocess.Popen(
        [sys.executable, "-m", "raybridge", "submit", "--backend", "local", "--",
         "sh", "-c", "setsid sleep 601 & echo started; sleep 600"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env(TMPDIR=tmp), cwd=str(ROOT),
    )  # fmt: skip
    try:
        wait_for_output(proc, "started")
        _wait_for_a_session_of_its_own("sleep 601", tmp)
        supervisors = _pids_of("raybridge.jobs.head_supervisor", tmp)
        guards = _pids_of("raybridge.jobs.head_guard", tmp)
        assert supervisors and guards, "the head's supervisor and its guard should be running"
        _kill_at_once([proc.pid, *supervisors, *guards])
        proc.wait(timeout=10)
        time.sleep(2)
        assert any("sleep 601" in p for p in processes_using(tmp)), "what escaped Ray outlives a kill of all three"
    finally:
        proc.kill()
    out = run_cli("submit", "--backend", "local", "--", "python", "-c", "print('next run')", env=cli_env(TMPDIR=tmp), timeout=240)
    assert out.returncode == 0, out.stderr
    assert "next run" in out.stdout
    assert wait_until_gone(tmp, timeout=60) == []
    assert [p for p in os.listdir(tmp) if p.startswith("raybridge-")] == []


def _pids_and_cmdlines() -> list[str]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    found.append(f"{entry} " + f.read().replace(b"\0", b" ").decode(errors="replace"))
            except OSError:
                continue
    return found


@pytest.mark.fresh_head
def test_a_run_leaves_nothing_in_tmpdir_and_a_long_tmpdir_still_runs():
    """Ray's Unix socket paths (and Python's forkserver socket) under a long TMPDIR exceed 107 bytes: the head's
    dir goes to /tmp then, and the head's processes keep their temp files (multiprocessing's `pymp-*`) in the
    head's own dir, removed with it."""
    short = short_tmpdir()
    out = run_cli("submit", "--backend", "local", "--", "python", "-c", "print('short tmpdir')", env=cli_env(TMPDIR=short), timeout=240)
    assert out.returncode == 0, out.stderr
    assert wait_until_gone(short) == []
    assert os.listdir(short) == [], os.listdir(short)  # no raybridge-* dir, no pymp-* dir
    long = os.path.join(short_tmpdir(), "x" * 90)
    os.makedirs(long)
    out = run_cli("submit", "--backend", "local", "--", "python", "-c", "print('long tmpdir')", env=cli_env(TMPDIR=long), timeout=240)
    assert out.returncode == 0, out.stderr
    assert "long tmpdir" in out.stdout
    assert os.listdir(long) == []


def test_a_multi_line_entrypoint_is_not_echoed_into_the_jobs_output(ray_head, tmp_path):
    """Ray's job supervisor echoes the entrypoint before the driver's output ("Running entrypoint for job X: ...",
    job_supervisor.py): an entrypoint of several lines (a spec's `entrypoint: |` block) echoed its later lines into
    the job's output."""
    spec = tmp_path / "job.yaml"
    spec.write_text("name: lines\nentrypoint: |\n  python -c 'print(\"first\")'\n  python -c 'print(\"second\")'\n")
    out = run_cli("submit", str(spec), "--address", ray_head.dashboard_url)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["first", "second"], out.stdout


class _DroppingProxy:
    """A TCP proxy to the shared head that closes the first log stream (a WebSocket to /logs/tail) after
    `drop_after` seconds, as a proxy or a port-forward closing it would; every other connection is passed on."""

    def __init__(self, target: str, drop_after: float) -> None:
        import socket
        import threading

        host, port = target.rsplit(":", 1)
        self.target, self.drop_after, self.dropped = (host, int(port)), drop_after, False
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        import threading

        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: Any) -> None:
        import select
        import socket
        import time

        upstream = socket.create_connection(self.target)
        first = client.recv(65536)
        drop_at = None
        if b"/logs/tail" in first.split(b"\r\n", 1)[0] and not self.dropped:
            self.dropped, drop_at = True, time.monotonic() + self.drop_after
        upstream.sendall(first)
        try:
            while drop_at is None or time.monotonic() < drop_at:
                readable, _, _ = select.select([client, upstream], [], [], 0.2)
                for source in readable:
                    data = source.recv(65536)
                    if not data:
                        return
                    (upstream if source is client else client).sendall(data)
        except OSError:
            return
        finally:
            client.close()
            upstream.close()

    def close(self) -> None:
        self.listener.close()


def test_a_log_stream_that_drops_mid_job_goes_on_as_the_job_prints(ray_head):
    """Issue 40, point 6: when the log stream dropped mid-job (a proxy, a port-forward), nothing more was printed
    until the job ended. The stream is opened again, and what was printed already is not printed twice."""
    from urllib.parse import urlparse

    proxy = _DroppingProxy(urlparse(ray_head.dashboard_url).netloc, drop_after=3.0)
    script = "import time\nfor i in range(14):\n    print('tick', i, flush=True)\n    time.sleep(1)\n"
    proc = subprocess.Popen([sys.executable, "-m", "raybridge", "submit", "--address", proxy.address, "--", "python", "-c", script],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env(), cwd=str(ROOT))  # fmt: skip
    try:
        arrived: dict[str, float] = {}
        assert proc.stdout is not None
        for line in proc.stdout:
            arrived.setdefault(line.strip(), time.monotonic())
        code = proc.wait(timeout=120)
        ended = time.monotonic()
    finally:
        proc.kill()
        proxy.close()
    assert code == 0, proc.stderr.read() if proc.stderr else ""
    assert proxy.dropped
    assert [k for k in arrived if k.startswith("tick")] == [f"tick {i}" for i in range(14)]
    # tick 9 is printed some 6 s after the drop: it must show before the job ends, not with everything at the end
    assert ended - arrived["tick 9"] > 2.0, {k: round(ended - t, 1) for k, t in arrived.items()}
