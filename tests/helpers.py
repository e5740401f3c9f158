"""Running the CLI as a user would, and finding processes a run left behind."""

from __future__ import annotations

import atexit
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Optional

from tests.cluster_state import leftovers
from tests.waits import wait_for

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


def free_port() -> int:
    """A free loopback port chosen by the kernel (its ephemeral range, outside 10002-19999)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def cli_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "KUBECONFIG")}
    env["HOME"] = env.get("RAYBRIDGE_TEST_HOME", "/nonexistent-home")  # no ~/.kube/config
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


def run_cli(*args: str, env: Optional[dict[str, str]] = None, timeout: float = 180, cwd: Optional[Path] = None) -> subprocess.CompletedProcess[str]:
    """`python -m raybridge ARGS` in a process of its own; stdout, stderr and the exit status come back.

    The process is forked from a `tests/cli_zygote.py` server started with the same environment
    and working directory, which has imported raybridge's dependencies once, when one serves this
    environment (from the second call with it on) and is free; otherwise a fresh interpreter.
    RAYBRIDGE_TEST_FRESH_CLI=1 makes every call a fresh interpreter.
    """
    env, where = env or cli_env(), str(cwd or ROOT)
    if os.environ.get(FRESH_CLI_ENV) != "1":
        served = _zygotes.run(args, env, where, timeout)
        if served is not None:
            return served
    return run_cli_fresh(*args, env=env, timeout=timeout, cwd=cwd)


def run_cli_fresh(*args: str, env: Optional[dict[str, str]] = None, timeout: float = 180, cwd: Optional[Path] = None) -> subprocess.CompletedProcess[str]:
    """`python -m raybridge ARGS` in a fresh interpreter: for tests whose subject is the process start itself."""
    return subprocess.run(
        [sys.executable, "-m", "raybridge", *args],
        capture_output=True, text=True, timeout=timeout, env=env or cli_env(), cwd=str(cwd or ROOT),
    )  # fmt: skip


#: Set to 1 in the test run's environment: every `run_cli` is a fresh interpreter, no zygote.
FRESH_CLI_ENV = "RAYBRIDGE_TEST_FRESH_CLI"
#: Variables a call may set differently from its zygote's: raybridge reads KUBECONFIG only when a
#: command runs (kube/config.py resolves the files and hands them to the client by name), and the
#: kubernetes package's import-time default (kube_config.KUBE_CONFIG_DEFAULT_LOCATION) is not used;
#: pytest sets PYTEST_CURRENT_TEST for each test, and nothing the CLI imports reads it.
CALL_TIME_ENV = frozenset({"KUBECONFIG", "PYTEST_CURRENT_TEST"})


class _Zygote:
    """One `tests/cli_zygote.py` server: its environment and working directory are its calls'."""

    def __init__(self, env: dict[str, str], cwd: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(ROOT / "tests" / "cli_zygote.py")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=cwd,
        )  # fmt: skip
        self.lock = threading.Lock()
        self._pending = b""
        try:
            ready = self._answer(time.monotonic() + 120)
        except BaseException:  # never ready (or not JSON): the caller runs fresh, and no server is left behind
            self.close()
            raise
        # Anything printed at start-up (a sitecustomize, a warning) or while importing: a fresh process shows it.
        self.usable = bool(ready.get("ready")) and not ready.get("noise") and not self._printed_at_start()

    def _printed_at_start(self) -> bytes:
        """What the server wrote to stderr before it said it was ready (written before that answer)."""
        assert self.proc.stderr is not None
        fd = self.proc.stderr.fileno()
        return os.read(fd, 65536) if select.select([fd], [], [], 0)[0] else b""

    def _answer(self, deadline: float) -> dict:
        """The next answer line; TimeoutError at the deadline, EOFError when the server is gone."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._pending:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError
            chunk = os.read(fd, 65536)
            if not chunk:
                raise EOFError
            self._pending += chunk
        line, self._pending = self._pending.split(b"\n", 1)
        return json.loads(line)

    def run(self, args: tuple[str, ...], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
        assert self.proc.stdin is not None
        with tempfile.TemporaryDirectory(prefix="rbcli") as tmp:
            out, err = os.path.join(tmp, "out"), os.path.join(tmp, "err")
            open(out, "w").close()
            open(err, "w").close()
            request = {"args": list(args), "env": env, "stdin": os.devnull, "stdout": out, "stderr": err}
            self.proc.stdin.write((json.dumps(request) + "\n").encode())
            self.proc.stdin.flush()
            pid = self._answer(time.monotonic() + 30)["pid"]  # before this, a failure means nothing ran
            try:
                returncode = self._answer(time.monotonic() + timeout)["returncode"]
            except TimeoutError:
                os.kill(pid, signal.SIGKILL)  # as subprocess.run does at its timeout
                try:
                    self._answer(time.monotonic() + 30)  # reaped
                except (TimeoutError, EOFError):
                    self.close()  # out of step: the next call finds it gone and runs fresh; this one is not run again
                raise subprocess.TimeoutExpired(["raybridge", *args], timeout, _read(out), _read(err)) from None
            except EOFError:
                raise AssertionError(f"the CLI server died while `raybridge {' '.join(args)}` ran") from None
            return subprocess.CompletedProcess(["raybridge", *args], returncode, _read(out), _read(err))

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


def _read(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


class _Zygotes:
    """This test process's zygotes, one per (environment, working directory) seen twice, the last few kept."""

    KEEP = 3

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._servers: dict[tuple, _Zygote] = {}
        self._seen: set[tuple] = set()
        self._refused: set[tuple] = set()
        atexit.register(self.close)

    def run(self, args: tuple[str, ...], env: dict[str, str], cwd: str, timeout: float) -> Optional[subprocess.CompletedProcess[str]]:
        """The call served by a zygote, or None: run it fresh."""
        key = (tuple(sorted((k, v) for k, v in env.items() if k not in CALL_TIME_ENV)), cwd)
        server = self._server_for(key, env, cwd)
        if server is None or not server.lock.acquire(blocking=False):
            return None  # the first call in this environment, or one already running: a fresh process
        try:
            return server.run(args, env, timeout)
        except (EOFError, TimeoutError, OSError, ValueError):
            self._drop(key)
            return None
        finally:
            server.lock.release()

    def _server_for(self, key: tuple, env: dict[str, str], cwd: str) -> Optional[_Zygote]:
        with self._lock:
            if key in self._refused:
                return None
            if key not in self._seen:
                self._seen.add(key)
                return None
            server = self._servers.pop(key, None)
            if server is None:
                try:
                    server = _Zygote(env, cwd)
                except (EOFError, TimeoutError, OSError, ValueError):
                    self._refused.add(key)
                    return None
                if not server.usable:  # its imports printed something: a fresh process shows it
                    server.close()
                    self._refused.add(key)
                    return None
            self._servers[key] = server  # most recently used last
            while len(self._servers) > self.KEEP:
                oldest = next(iter(self._servers))
                if self._servers[oldest].lock.locked():
                    break
                self._servers.pop(oldest).close()
            return server

    def _drop(self, key: tuple) -> None:
        with self._lock:
            server = self._servers.pop(key, None)
            self._refused.add(key)
        if server is not None:
            server.close()

    def close(self) -> None:
        with self._lock:
            servers, self._servers = list(self._servers.values()), {}
        for server in servers:
            server.close()


_zygotes = _Zygotes()


def short_tmpdir() -> str:
    """A short temp dir (Ray's unix socket paths must stay under ~107 characters)."""
    return tempfile.mkdtemp(prefix="rbt", dir="/tmp")


def processes_using(marker: str) -> list[str]:
    """Live processes whose command line or environment mentions `marker` (zombies excluded)."""
    found = []
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
            if state in ("Z", "X"):
                continue
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
            with open(f"/proc/{entry}/environ", "rb") as f:
                environ = f.read().decode(errors="replace")
        except OSError:
            continue
        if marker in cmdline or marker in environ:
            found.append(f"{entry}: {cmdline[:120]}")
    return found


def wait_until_gone(marker: str, timeout: float = 30.0) -> list[str]:
    deadline = time.monotonic() + timeout
    left = processes_using(marker)
    while left and time.monotonic() < deadline:
        time.sleep(0.5)
        left = processes_using(marker)
    return left


def wait_for_output(proc: "subprocess.Popen[str]", text: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    seen = ""
    while time.monotonic() < deadline:
        line = proc.stdout.readline()  # type: ignore[union-attr]
        seen += line
        if text in line:
            return
        if proc.poll() is not None:
            break
    raise AssertionError(f"never saw {text!r}: {seen} {proc.stderr.read() if proc.stderr else ''}")


def status_logs_stop_delete(server: Any, name: str, namespace: str, env: dict[str, str], marker: str) -> None:
    """The lifecycle commands on a running job, as a user runs them: `status` shows it running, `logs` shows
    `marker`, `stop` ends it (the RayJob says STOPPED), `delete` removes it and nothing holds quota after."""
    shown = run_cli("status", name, "-n", namespace, "-o", "json", env=env, timeout=60)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["jobStatus"] in ("PENDING", "RUNNING")
    wait_for(lambda: marker in run_cli("logs", name, "-n", namespace, env=env, timeout=60).stdout, timeout=60, what=f"{marker!r} in the log")
    stopped = run_cli("stop", name, "-n", namespace, env=env, timeout=60)
    assert stopped.returncode == 0, stopped.stderr
    wait_for(lambda: (server.get_object("ray.io/v1", "RayJob", name, namespace) or {}).get("status", {}).get("jobStatus")
             == "STOPPED", timeout=60, what="STOPPED")  # fmt: skip
    assert run_cli("delete", name, "-n", namespace, env=env, timeout=60).returncode == 0
    wait_for(lambda: leftovers(server, namespace) == {}, timeout=60, what="nothing left")


#: A job name whose RayCluster's name (the job's plus 6) passes 50 characters, of which KubeRay's token Secret keeps the last 50.
LONG_TOKEN_JOB_NAME = "locked-" + "x" * 39
#: What the token-protected job prints, for `logs` to show.
TOKEN_JOB_OUTPUT = "behind the token"


def submit_token_job(tmp_path: Path, name: str, namespace: str, queue: str, env: dict[str, str]) -> "subprocess.CompletedProcess[str]":
    """`submit --no-wait` of a job with token authentication (authMode: token) that prints TOKEN_JOB_OUTPUT and sleeps."""
    spec = tmp_path / "locked.yaml"
    spec.write_text(
        f"name: {name}\nauthMode: token\n"
        f"entrypoint: python -c \"import time; print('{TOKEN_JOB_OUTPUT}', flush=True); time.sleep(300)\"\n"
    )
    return run_cli("submit", str(spec), "-n", namespace, "--queue", queue, "--no-wait", env=env, timeout=180)


def wait_job_running(server: Any, name: str, namespace: str, timeout: float = 120) -> dict[str, Any]:
    """RayJob `name` once its Ray job runs (a job queued with `submit --no-wait` starts on its own, later)."""
    return wait_for(lambda: (lambda rayjob: rayjob if (rayjob.get("status") or {}).get("jobStatus") == "RUNNING" else None)(
        server.get_object("ray.io/v1", "RayJob", name, namespace) or {}), timeout=timeout, what=f"RayJob {namespace}/{name}'s job to run")  # fmt: skip


def kuberay_token_secret(server: Any, name: str, namespace: str) -> tuple[str, Optional[dict[str, Any]]]:
    """RayJob `name`'s cluster name and the Secret KubeRay made for its token, None if absent: KubeRay names it
    `utils.CheckName(cluster name)`, which keeps the last 50 characters (kuberay@v1.5.2 and v1.6.1,
    raycluster_controller.go reconcileAuthSecret)."""
    cluster_name = server.get_object("ray.io/v1", "RayJob", name, namespace)["status"]["rayClusterName"]
    return cluster_name, server.get_object("v1", "Secret", cluster_name[-50:], namespace)


def kube_of(api_client: Any, request_timeout: float = 5.0, namespace: str = "default") -> Any:
    """A `raybridge.kube.client.Kube` around a client a test built (a real cluster's, directly or through the fault
    proxy): what `adjuster run` hands its controller, scaler and start-up checks."""
    from raybridge.kube.client import Kube

    return Kube(api_client, namespace, False, request_timeout=request_timeout)


class ControllerThread:
    """`adjuster run`'s controller (raybridge.adjuster.controller.Controller) run in a thread for a `with` block:
    started on entry, stopped on exit (its loop ends once `stop` is set), and never left running."""

    def __init__(self, controller: Any, join_seconds: float = 20.0) -> None:
        self.controller = controller
        self.join_seconds = join_seconds
        self.thread = threading.Thread(target=controller.run, daemon=True)

    def __enter__(self) -> Any:
        self.thread.start()
        return self.controller

    def __exit__(self, *exc: object) -> None:
        self.controller.stop.set()
        self.thread.join(self.join_seconds)
        assert not self.thread.is_alive()
