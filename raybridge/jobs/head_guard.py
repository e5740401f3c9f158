"""Ends a private Ray head whose supervisor was killed: the last line of "the head dies with raybridge".

The supervisor (`head_supervisor`) ends the head when raybridge closes its stdin, even after
raybridge's SIGKILL; nothing ended it when the supervisor was SIGKILLed too (by hand, by the
OOM killer, with raybridge): the head and its job ran on until the next run swept them. So the
supervisor starts this guard first, as its child in a session of its own (a kill of the
supervisor's process group leaves it), reading a pipe whose other end the supervisor alone
holds. The kernel closes that end when the supervisor dies however it dies; a supervisor that
ends normally writes `DONE` first. On EOF without `DONE` the guard ends every process of this
user that runs in the head's temp dir (its path on the command line, in the environment, or as
the working dir: Ray hands the head's TMPDIR and token path down to every worker and to the
job), SIGTERM first, SIGKILL after a grace, and removes the temp dir unless raybridge still runs
(raybridge then removes it). The scan by temp dir, not by process tree, is what finds the job:
Ray runs it in a session of its own under a worker, which is re-parented to init once the
supervisor is gone.

The supervisor also gives the head's own process the kernel's parent-death signal
(`PR_SET_PDEATHSIG`, SIGTERM): should the guard be killed with it, `ray start --block` still
stops Ray's daemons, and Ray kills the job's process group when its job supervisor dies. What
escapes that (a process the job started in another session) is ended by the next run
(`private_head.remove_stale_temp_dirs`, which uses the same scan).

It does not talk to Ray, start anything, or look at processes of other users.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import Iterable, Optional

#: What a supervisor that ends normally writes before it closes the guard's pipe: the guard then exits at once.
DONE = b"D"
#: prctl(2) option: the signal the kernel sends a process when the thread that created it exits.
PR_SET_PDEATHSIG = 1
#: How long the head's processes get to stop after SIGTERM, and how long SIGKILL rounds go on after that.
GRACE_SECONDS = 5.0
KILL_SECONDS = 10.0


def processes_in(temp_dir: Path, spare: Iterable[int] = ()) -> list[int]:
    """This user's processes that run in `temp_dir` (its path on their command line or in their environment: the
    head's TMPDIR and token path, which Ray hands down to its workers and the job's processes; or their working dir
    in it), this process and `spare` left out."""
    marker, found, left_out = str(temp_dir), [], {os.getpid(), *spare}
    proc = Path("/proc")
    for entry in proc.iterdir() if proc.is_dir() else ():
        if not entry.name.isdigit() or int(entry.name) in left_out:
            continue
        try:
            if entry.stat().st_uid != os.getuid() or _state(entry) in ("Z", "X"):
                continue
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            environ = (entry / "environ").read_bytes().decode(errors="replace")
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if marker in cmdline or marker in environ or cwd == marker or cwd.startswith(marker + os.sep):
            found.append(int(entry.name))
    return found


def _state(entry: Path) -> str:
    return (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]


def _signal(pids: Iterable[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except OSError:
            pass


def end_processes_in(temp_dir: Path, grace: float = 0.0, wait: float = 5.0, spare: Iterable[int] = ()) -> list[int]:
    """End what runs in `temp_dir` (`processes_in`): SIGTERM and up to `grace` seconds to stop (none with 0), then
    SIGKILL, again for what appears meanwhile, for up to `wait` seconds. What is still there then (none, normally)."""
    spared = tuple(spare)
    found = processes_in(temp_dir, spared)
    if found and grace > 0:
        _signal(found, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while found and time.monotonic() < deadline:
            time.sleep(0.1)
            found = processes_in(temp_dir, spared)
    deadline = time.monotonic() + wait
    while found and time.monotonic() < deadline:
        _signal(found, signal.SIGKILL)
        time.sleep(0.1)
        found = processes_in(temp_dir, spared)
    return found


def die_with_parent(sig: int = signal.SIGTERM) -> None:
    """In a child before it runs its program (`preexec_fn`): the kernel sends it `sig` when its parent dies."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: the guard alone ends the head


def start_time(pid: int) -> Optional[str]:
    """The kernel's start time of `pid` (a reused pid is not taken for the process), or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return None if fields[0] in ("Z", "X") else fields[19]


def _wait_for_the_supervisor() -> bool:
    """Block until the supervisor's end of stdin closes: True when it ended normally (it wrote DONE first)."""
    said = b""
    while True:
        try:
            chunk = os.read(0, 64)
        except InterruptedError:
            continue
        except OSError:
            return False
        if not chunk:
            return DONE in said
        said += chunk


def main(argv: list[str]) -> int:
    if len(argv) != 4 or argv[0] != "--temp-dir" or argv[2] != "--owner":
        sys.stderr.write("usage: head_guard --temp-dir DIR --owner PID:STARTTIME\n")
        return 2
    temp_dir = Path(argv[1])
    owner_pid, _, owner_started = argv[3].partition(":")
    if _wait_for_the_supervisor():
        return 0
    owner = int(owner_pid) if owner_pid.isdigit() and start_time(int(owner_pid)) == owner_started else None
    end_processes_in(temp_dir, grace=GRACE_SECONDS, wait=KILL_SECONDS, spare=[owner] if owner else [])
    if owner is None or start_time(owner) != owner_started:  # raybridge is gone too: nothing else will remove the head's directory (but the next run)
        shutil.rmtree(temp_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C belongs to raybridge
    sys.exit(main(sys.argv[1:]))
