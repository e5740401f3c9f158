"""The local backend: a private Ray head on this machine, or a Ray cluster at an address.

With no address, it starts a private head (its own temp dir, free ports,
dashboard on loopback) under `head_supervisor`, so the head dies with
raybridge however raybridge ends. With an address (`--address` or
`RAY_ADDRESS`) it only submits there and leaves that cluster alone.

It does not size anything (`raybridge.core.sizing` does) and does not print
(the CLI does); it returns a `JobHandle`.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Callable, Optional

from raybridge.errors import InfraError

START_TIMEOUT = 120.0


def free_port() -> int:
    """A port the kernel hands out now (ephemeral range, outside Ray's worker ports)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PrivateRayHead:
    """A Ray head that belongs to one raybridge run."""

    def __init__(self, num_cpus: Optional[int] = None, num_gpus: Optional[int] = None) -> None:
        self.num_cpus = num_cpus
        self.num_gpus = num_gpus
        self.temp_dir: Optional[Path] = None
        self.dashboard_url: Optional[str] = None
        self.gcs_address: Optional[str] = None
        self._supervisor: Optional[subprocess.Popen[bytes]] = None
        self._log_path: Optional[Path] = None

    def start(self, progress: Callable[[str], None] = lambda _: None, timeout: float = START_TIMEOUT) -> str:
        self.temp_dir = Path(tempfile.mkdtemp(prefix="raybridge-"))
        gcs, dashboard = free_port(), free_port()
        command = [
            sys.executable, "-m", "ray.scripts.scripts", "start", "--head", "--block",
            "--node-ip-address", "127.0.0.1",
            "--port", str(gcs),
            "--dashboard-host", "127.0.0.1",
            "--dashboard-port", str(dashboard),
            "--ray-client-server-port", str(free_port()),
            "--dashboard-agent-listen-port", str(free_port()),
            "--metrics-export-port", str(free_port()),
            "--temp-dir", str(self.temp_dir),
            "--include-dashboard", "true",
            "--disable-usage-stats",
        ]  # fmt: skip
        if self.num_cpus is not None:
            command += ["--num-cpus", str(self.num_cpus)]
        if self.num_gpus is not None:
            command += ["--num-gpus", str(self.num_gpus)]
        self._log_path = self.temp_dir / "raybridge-head.log"
        log = open(self._log_path, "wb")
        env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
        env.pop("RAY_ADDRESS", None)
        # The job's `python` is the one raybridge runs under, activated or not.
        env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
        self._supervisor = subprocess.Popen(
            [sys.executable, "-m", "raybridge.launch.head_supervisor", "--", *command],
            stdin=subprocess.PIPE,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
        )
        log.close()
        self.gcs_address = f"127.0.0.1:{gcs}"
        self.dashboard_url = f"http://127.0.0.1:{dashboard}"
        progress(f"starting a private local Ray head (dashboard {self.dashboard_url})")
        self._wait_ready(timeout)
        return self.dashboard_url

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        assert self._supervisor is not None and self.dashboard_url is not None
        while time.monotonic() < deadline:
            if self._supervisor.poll() is not None:
                raise InfraError(f"the local Ray head exited while starting: {self.log_tail()}")
            if _answers(f"{self.dashboard_url}/api/version") and _answers(f"{self.dashboard_url}/api/jobs/"):
                return
            time.sleep(0.25)
        self.stop()
        raise InfraError(f"the local Ray head did not start within {timeout:.0f}s: {self.log_tail()}")

    def log_tail(self, lines: int = 5) -> str:
        try:
            text = self._log_path.read_text(errors="replace") if self._log_path else ""
        except OSError:
            return "(no log)"
        return " | ".join(text.strip().splitlines()[-lines:]) or "(empty log)"

    def stop(self, timeout: float = 20.0) -> None:
        """Close the supervisor's stdin; it ends the head's whole process group."""
        proc, self._supervisor = self._supervisor, None
        if proc is not None:
            try:
                if proc.stdin:
                    proc.stdin.close()
            except OSError:
                pass
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(proc.pid, 9)
                except OSError:
                    pass
                proc.wait(timeout=5)
        if self.temp_dir is not None:
            shutil.rmtree(self.temp_dir, ignore_errors=True)
            self.temp_dir = None


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(200 <= response.status < 300)
    except Exception:
        return False
