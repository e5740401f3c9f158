"""A real Ray head on loopback for kubesim's KubeRay tests: `ray start --head`, every port chosen free.

Why it exists: the simulated KubeRay runs its RayJobs' entrypoints on a real Ray head's Job API, so its tests
start one. What it deliberately does not do: token authentication (it stands for an unauthenticated dashboard),
GPUs, or workers on other nodes.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Optional

from kubesim.tests.objects import wait_for


def free_port() -> int:
    """A free loopback port chosen by the kernel (its ephemeral range, outside 10002-19999)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class RayHead:
    """`ray start --head --block` in its own session, every port chosen free, workers on OS-chosen ports.

    `stop()` ends the whole process group it started (and only that), then
    removes its temporary directory. Usable as a context manager.
    """

    def __init__(self, num_cpus: int = 2, startup_timeout: float = 90.0) -> None:
        self.num_cpus = num_cpus
        self.startup_timeout = startup_timeout
        self.dashboard_port = 0
        self.session_id = 0  # the process group and session of `ray start`
        self._process: Optional[subprocess.Popen] = None
        self._temp_dir: Optional[str] = None

    @property
    def dashboard_address(self) -> str:
        return f"127.0.0.1:{self.dashboard_port}"

    @property
    def dashboard_url(self) -> str:
        return f"http://{self.dashboard_address}"

    def start(self, attempts: int = 3) -> "RayHead":
        """Start the head; a start that fails (a port taken between choosing and binding it, a dashboard
        that never answers) is stopped whole and tried again on fresh ports, up to `attempts` times."""
        failures: list[str] = []
        for _ in range(attempts):
            try:
                return self._start_once()
            except (TimeoutError, RuntimeError) as exc:
                failures.append(str(exc))
        raise TimeoutError(f"the Ray head did not start in {attempts} attempts: " + " || ".join(failures))

    def _start_once(self) -> "RayHead":
        ray = Path(sys.executable).with_name("ray")
        self._temp_dir = tempfile.mkdtemp(prefix="rbray-", dir="/tmp")  # short: Ray puts unix sockets here
        self.dashboard_port = free_port()
        ports = {
            "port": free_port(),
            "ray-client-server-port": free_port(),
            "dashboard-agent-listen-port": free_port(),
            "dashboard-agent-grpc-port": free_port(),
            "runtime-env-agent-port": free_port(),
            "metrics-export-port": free_port(),
            "node-manager-port": free_port(),
            "object-manager-port": free_port(),
        }
        command = [
            str(ray),
            "start",
            "--head",
            "--block",
            "--disable-usage-stats",
            "--node-ip-address=127.0.0.1",
            "--dashboard-host=127.0.0.1",
            "--include-dashboard=true",
            f"--dashboard-port={self.dashboard_port}",
            f"--num-cpus={self.num_cpus}",
            "--num-gpus=0",
            "--min-worker-port=0",
            "--max-worker-port=0",
            f"--temp-dir={self._temp_dir}",
        ] + [f"--{flag}={port}" for flag, port in ports.items()]
        log_file = open(os.path.join(self._temp_dir, "ray-start.log"), "w")
        # Ray 2.52+ turns token authentication on for a head when ~/.ray/auth_token exists (a plain local
        # `ray.init()` writes one) or RAY_AUTH_MODE=token is inherited; this head is a test double of an
        # unauthenticated dashboard, so it says so explicitly.
        env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", RAY_AUTH_MODE="disabled")
        self._process = subprocess.Popen(
            command, stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True, env=env
        )
        log_file.close()
        self.session_id = self._process.pid
        try:
            wait_for(self._dashboard_up, timeout=self.startup_timeout, interval=0.3, what="the Ray dashboard")
        except (TimeoutError, RuntimeError) as exc:
            tail = self.log_tail()  # before stop() removes the temp dir with the logs
            self.stop()
            raise type(exc)(f"{exc}; {tail}") from exc
        except BaseException:
            self.stop()
            raise
        return self

    def log_tail(self, lines: int = 8) -> str:
        """The last lines of `ray start`'s output and of the dashboard's log, for a failure message."""
        if not self._temp_dir:
            return "(no logs)"
        parts = []
        for path in [Path(self._temp_dir) / "ray-start.log", *Path(self._temp_dir).glob("session_latest/logs/dashboard.*")]:
            try:
                text = path.read_text(errors="replace").strip().splitlines()[-lines:]
            except OSError:
                continue
            parts.append(f"{path.name}: " + " | ".join(text))
        return " ;; ".join(parts) or "(empty logs)"

    def _dashboard_up(self) -> bool:
        if self._process is not None and self._process.poll() is not None:
            raise RuntimeError(f"ray start exited with {self._process.returncode}; see {self._temp_dir}/ray-start.log")
        try:
            with urllib.request.urlopen(f"{self.dashboard_url}/api/version", timeout=1) as response:
                return response.status == 200
        except OSError:
            return False

    def stop(self) -> None:
        """SIGTERM the process group of `ray start`, SIGKILL what is left after 5 s; wait until it is gone."""
        process, self._process = self._process, None
        if process is not None:
            for sig, grace in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 10.0)):
                try:
                    os.killpg(process.pid, sig)
                except ProcessLookupError:
                    break
                deadline = time.monotonic() + grace
                while time.monotonic() < deadline:
                    process.poll()  # reap `ray start` itself so it does not linger as a zombie
                    if not self.leftover_pids(process.pid):
                        break
                    time.sleep(0.2)
                else:
                    continue
                break
            process.poll()
        if self._temp_dir:
            shutil.rmtree(self._temp_dir, ignore_errors=True)
            self._temp_dir = None

    @staticmethod
    def leftover_pids(session_id: int) -> list[int]:
        """Processes still in the session that `ray start` led."""
        out = subprocess.run(["ps", "-o", "pid=", "-s", str(session_id)], capture_output=True, text=True).stdout
        return [int(pid) for pid in out.split()]

    def __enter__(self) -> "RayHead":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
