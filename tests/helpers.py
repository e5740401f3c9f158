"""Running the CLI as a user would, and finding processes a run left behind."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


def cli_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "KUBECONFIG")}
    env["HOME"] = env.get("RAYBRIDGE_TEST_HOME", "/nonexistent-home")  # no ~/.kube/config
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


def run_cli(*args: str, env: Optional[dict[str, str]] = None, timeout: float = 180, cwd: Optional[Path] = None) -> subprocess.CompletedProcess[str]:
    """`python -m raybridge ARGS` in a fresh process; stdout, stderr and the exit status come back."""
    return subprocess.run(
        [sys.executable, "-m", "raybridge", *args],
        capture_output=True, text=True, timeout=timeout, env=env or cli_env(), cwd=str(cwd or ROOT),
    )  # fmt: skip


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
