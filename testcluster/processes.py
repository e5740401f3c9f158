"""Starting, watching and stopping the stack's processes.

Why: a test cluster is a dozen long-lived processes; each must log to a file of its
own, be waited for until it answers, and die with the stack, even when the Python
process that started it is killed (`PR_SET_PDEATHSIG`: the kernel sends SIGKILL to
the child when its starting thread ends, so a stack is started and stopped on one
thread that lives as long as it does).

What this does not do: no restarts (a program that exits is an error the stack
reports), no log rotation.
"""

from __future__ import annotations

import ctypes
import http.client
import os
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional, Sequence

__all__ = ["GO_RUNTIME_DEFAULTS", "Process", "StartError", "UnixHTTPConnection", "free_port", "http_ok", "unix_http_ok", "wait_until",
           "with_go_runtime_defaults"]

_PR_SET_PDEATHSIG = 1


class StartError(RuntimeError):
    """A program exited or did not become ready; the message ends with its log's last lines."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 free now (the kernel's ephemeral range, outside 10002-19999)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _die_with_parent() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _log_tail(path: Path, lines: int = 25) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.strip().splitlines()[-lines:])


#: The Go runtime's settings for the stack's programs, where the environment sets none: the garbage collector runs at
#: a quarter of its default rate until a program's heap nears 1.2 GiB. A test stack lives minutes and holds little,
#: and on the 2-core machine the collector was a third of the API server's start: 10.4 CPU-s to ready at the default,
#: 7.4 with these (the default stack, measured 2026-11-30), at 1.19 GB resident instead of 0.75. Behaviour is the
#: same; only when memory is reclaimed changes. GOGC=100 in the environment gives the default back.
GO_RUNTIME_DEFAULTS = {"GOGC": "400", "GOMEMLIMIT": "1200MiB"}


def with_go_runtime_defaults(env: Optional[dict[str, str]] = None) -> dict[str, str]:
    """`env` (this process's environment where None) with GO_RUNTIME_DEFAULTS for each setting it lacks."""
    base = dict(os.environ if env is None else env)
    return {**{k: v for k, v in GO_RUNTIME_DEFAULTS.items() if k not in base}, **base}


@dataclass
class Process:
    """One program of the stack: its command, environment and log file."""

    name: str
    argv: Sequence[str]
    log: Path
    env: Optional[dict[str, str]] = None
    cwd: Optional[Path] = None
    popen: Optional[subprocess.Popen] = field(default=None, repr=False)

    def start(self) -> "Process":
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as out:
            self.popen = subprocess.Popen(
                list(self.argv), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                env=self.env, cwd=self.cwd, start_new_session=True, preexec_fn=_die_with_parent,
            )  # fmt: skip
        return self

    def running(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def failure(self, why: str) -> StartError:
        return StartError(f"{self.name} {why}; the end of its log ({self.log}):\n{_log_tail(self.log)}")

    def wait_ready(self, ready: Callable[[], bool], timeout: float) -> None:
        """Until `ready()` is true; a StartError if the process exits or `timeout` passes first."""
        deadline = time.monotonic() + timeout
        delay = 0.05
        while True:
            if not self.running():
                code = self.popen.returncode if self.popen else None
                raise self.failure(f"exited with status {code} before it was ready")
            if ready():
                return
            if time.monotonic() > deadline:
                raise self.failure(f"was not ready within {timeout:.0f} s")
            time.sleep(delay)
            delay = min(delay * 1.5, 0.5)

    def pause(self) -> None:
        """SIGSTOP to its process group: every thread of it stops where it is until `resume()`."""
        if self.running():
            _signal_group(self, signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT to its process group (after `pause()`)."""
        if self.running():
            _signal_group(self, signal.SIGCONT)

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM to its process group, SIGKILL after `grace` seconds."""
        if self.popen is None:
            return
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
            if self.popen.poll() is not None:
                break
            try:
                os.killpg(self.popen.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.popen.wait(wait)
            except subprocess.TimeoutExpired:
                continue
        try:
            os.killpg(self.popen.pid, signal.SIGKILL)  # whatever it started in its group
        except (ProcessLookupError, PermissionError):
            pass


#: How long the whole stack gets to stop after SIGTERM, all its programs at once, before SIGKILL.
STOP_GRACE_SECONDS = 10.0


def stop_all(processes: Sequence["Process"], grace: float = STOP_GRACE_SECONDS) -> list[str]:
    """Stop every process at once: SIGTERM to each process group, one shared `grace` for all of them, then SIGKILL
    to what is left. Stopped one after another, each with a grace of its own, a stack of a dozen programs could
    take minutes to end after Ctrl-C; this takes at most `grace` plus a few seconds, whatever hangs. Returns the
    names of those still running after the grace (killed)."""
    running = [p for p in processes if p.popen is not None and p.popen.poll() is None]
    for process in running:
        _signal_group(process, signal.SIGTERM)
    deadline = time.monotonic() + grace
    killed = []
    for process in running:
        try:
            process.popen.wait(max(0.0, deadline - time.monotonic()))  # type: ignore[union-attr]
        except subprocess.TimeoutExpired:
            killed.append(process.name)
    for process in processes:
        if process.popen is not None:
            _signal_group(process, signal.SIGKILL)  # what is left, and whatever each started in its group
    for process in running:
        try:
            process.popen.wait(5.0)  # type: ignore[union-attr]
        except subprocess.TimeoutExpired:
            pass
    return killed


def _signal_group(process: "Process", sig: int) -> None:
    try:
        os.killpg(process.popen.pid, sig)  # type: ignore[union-attr]
    except (ProcessLookupError, PermissionError):
        pass


def http_ok(url: str, context: Optional[ssl.SSLContext] = None, expect: Optional[str] = None, timeout: float = 2.0) -> bool:
    """True when `url` answers 200 (and its body contains `expect`, if given)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout, context=context) as answer:  # noqa: S310 - loopback only
            body = answer.read().decode(errors="replace")
            return answer.status == 200 and (expect is None or expect in body)
    except (urllib.error.URLError, OSError, ValueError):
        return False


class UnixHTTPConnection(http.client.HTTPConnection):
    """HTTP over the Unix socket at `path` (a program in a network namespace of its own, netjail.py)."""

    def __init__(self, path: Path, timeout: float = 2.0) -> None:
        super().__init__("localhost", timeout=timeout)
        self.socket_path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(str(self.socket_path))
        except OSError:
            sock.close()
            raise
        self.sock = sock


def unix_http_ok(path: Path, url_path: str, expect: Optional[str] = None, timeout: float = 2.0) -> bool:
    """True when GET `url_path` over the Unix socket `path` answers 200 (and its body contains `expect`, if given)."""
    connection = UnixHTTPConnection(path, timeout)
    try:
        connection.request("GET", url_path)
        answer = connection.getresponse()
        body = answer.read().decode(errors="replace")
        return answer.status == 200 and (expect is None or expect in body)
    except (OSError, http.client.HTTPException):
        return False
    finally:
        connection.close()


def wait_until(check: Callable[[], bool], timeout: float, what: str) -> None:
    """Until `check()` is true, or a TimeoutError naming `what`."""
    deadline = time.monotonic() + timeout
    delay = 0.05
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} within {timeout:.0f} s")
        time.sleep(delay)
        delay = min(delay * 1.5, 0.5)
