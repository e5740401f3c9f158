"""Keeps a private local Ray head tied to the raybridge process that started it.

Run as `python -m raybridge.jobs.head_supervisor [--temp-dir DIR] -- ray start --head ...`
in a new session (its own process group). It makes itself a child subreaper,
starts the head as its child, then blocks on stdin; when stdin closes
(raybridge exited, crashed or was killed with SIGKILL), or the head exits
on its own (it failed to start, or died), it terminates the
whole process group and every descendant: the head, the raylet, the
dashboard, every worker, the job's entrypoint and whatever the entrypoint
left running in the background (orphans are re-parented to the subreaper,
so they stay in its tree). Then it removes the head's temp dir (unless the
head exited on its own while raybridge still holds stdin: raybridge quotes its log, then removes it;
the supervisor writes `HEAD_EXITED_MARKER` in the dir first, so that whichever of the two sees the
other's step last removes it, and a release racing the head's death leaves nothing). That is
what makes "nothing left behind" hold even when raybridge cannot run its
own clean-up. With a temp dir it first starts `head_guard`, which ends the head should the
supervisor itself be killed (with raybridge, say), and it gives the head's process the kernel's
parent-death signal.

It does not talk to Ray; it only starts and kills processes.
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import sys
import time
from typing import Optional

from raybridge.jobs.head_guard import DONE, die_with_parent, start_time

#: Written in the temp dir the moment the head is seen to exit on its own: raybridge, releasing the head after
#: closing stdin, removes the dir when it finds this (the supervisor may have looked at stdin before it closed).
HEAD_EXITED_MARKER = "raybridge-head-exited"


def _processes() -> dict[int, tuple[int, int, str]]:
    """pid -> (parent pid, process group, state) for every process."""
    table: dict[int, tuple[int, int, str]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        table[int(entry)] = (int(fields[1]), int(fields[2]), fields[0])
    return table


def _family(root: int, pgid: int, spare: frozenset[int] = frozenset()) -> set[int]:
    """The process group plus every descendant of `root`, wherever they moved, less `spare` (the guard).

    Ray runs a job's entrypoint in a session of its own, so the process group
    alone misses it; the parent links still lead there.
    """
    table = _processes()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found = {pid for pid, (_, group, _) in table.items() if group == pgid}
    stack = [root, *found]
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in found:
                found.add(child)
                stack.append(child)
    found.discard(root)
    found -= spare
    return {pid for pid in found if table.get(pid, (0, 0, "Z"))[2] not in ("Z", "X")}


def _signal_all(pids: set[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


#: Ended after the rest of the head (`/proc/PID/comm`): a raylet told to stop while the GCS stops too waits about
#: 10 s for it before exiting; with the GCS still up it exits at once (an idle head: 10.3 s to stop, now 0.9 s).
ENDED_LAST_COMMANDS = frozenset({"gcs_server"})


def _command(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def _kill_family(grace: float = 10.0, rounds: int = 5, spare: frozenset[int] = frozenset()) -> None:
    """SIGTERM the family in two waves, SIGKILL what is left after `grace` (half for each wave); again for whatever
    was re-parented meanwhile. The second wave is the GCS (`ENDED_LAST_COMMANDS`): the raylet stops at once only while
    it still runs. (`ray start` itself goes in the first wave: held back with the GCS, it outlived 5 s.)"""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    me, pgid = os.getpid(), os.getpgid(0)
    for _ in range(rounds):
        family = _family(me, pgid, spare)  # snapshot before anything dies and gets re-parented
        if not family:
            return
        ended_last = {pid for pid in family if _command(pid) in ENDED_LAST_COMMANDS}
        for wave in (family - ended_last, ended_last):
            _signal_all(wave, signal.SIGTERM)
            deadline = time.monotonic() + grace / 2
            while time.monotonic() < deadline and any(_alive(pid) for pid in wave):
                time.sleep(0.05)
        _signal_all(family | _family(me, pgid, spare), signal.SIGKILL)
        _reap()


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


#: prctl(2) option: orphaned descendants are re-parented to this process instead of init.
PR_SET_CHILD_SUBREAPER = 36


def _become_subreaper() -> None:
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: descendants that leave the tree may escape, as before


def main(argv: list[str]) -> int:
    temp_dir = None
    if "--temp-dir" in argv:
        i = argv.index("--temp-dir")
        temp_dir = argv[i + 1] if i + 1 < len(argv) else None
    if "--" in argv:
        argv = argv[argv.index("--") + 1 :]
    if not argv:
        sys.stderr.write("usage: head_supervisor [--temp-dir DIR] -- COMMAND...\n")
        return 2
    _become_subreaper()
    guard = _start_guard(temp_dir) if temp_dir else None
    child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, preexec_fn=die_with_parent)
    head_exited = False
    try:
        head_exited = _wait_for_eof_or_exit(child)
        if head_exited and temp_dir:
            _mark_head_exited(temp_dir)
    except (OSError, KeyboardInterrupt):
        pass
    finally:
        _kill_family(spare=frozenset({guard[0].pid}) if guard else frozenset())
        child.poll()
        _reap()
        # A head that exited on its own leaves its log for raybridge to quote, unless raybridge has closed
        # stdin meanwhile; raybridge removes the dir then (or, were it gone too, the next run's sweep).
        if temp_dir and (not head_exited or _stdin_closed()):
            shutil.rmtree(temp_dir, ignore_errors=True)
        if guard is not None:
            _release_guard(*guard)
    return 0


#: How long a supervisor that ends normally waits for its guard to exit.
GUARD_EXIT_SECONDS = 5.0


def _start_guard(temp_dir: str) -> Optional[tuple["subprocess.Popen[bytes]", int]]:
    """`head_guard` in a session of its own, its stdin a pipe whose write end (returned) only this process holds."""
    read_end, write_end = os.pipe()  # not inheritable: the head never holds the write end
    owner = os.getppid()
    try:
        guard = subprocess.Popen(
            [sys.executable, "-m", "raybridge.jobs.head_guard", "--temp-dir", temp_dir, "--owner", f"{owner}:{start_time(owner)}"],
            stdin=read_end, stdout=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
    except OSError:
        os.close(write_end)
        return None
    finally:
        os.close(read_end)
    return guard, write_end


def _release_guard(guard: "subprocess.Popen[bytes]", write_end: int) -> None:
    """Tell the guard the head was ended here (it exits without a sweep) and wait for it, bounded."""
    try:
        os.write(write_end, DONE)
    except OSError:
        pass
    os.close(write_end)
    try:
        guard.wait(GUARD_EXIT_SECONDS)
    except subprocess.TimeoutExpired:
        guard.kill()
        guard.wait()


#: How often the head's own exit is checked while waiting for raybridge's stdin to close.
CHILD_POLL_SECONDS = 0.5


def _wait_for_eof_or_exit(child: "subprocess.Popen[bytes]") -> bool:
    """Return when stdin closes (raybridge is gone or done: False) or the head exits on its own (True).

    A head that dies while starting (a port taken, a bad flag) thus ends the
    supervisor at once, and raybridge sees that instead of waiting out its timeout.
    """
    stdin = sys.stdin.buffer
    while child.poll() is None:
        readable, _, _ = select.select([stdin], [], [], CHILD_POLL_SECONDS)
        if readable and not os.read(stdin.fileno(), 4096):
            return False  # raybridge writes nothing; EOF means it is gone or done
    return True


def _mark_head_exited(temp_dir: str) -> None:
    try:
        with open(os.path.join(temp_dir, HEAD_EXITED_MARKER), "w"):
            pass
    except OSError:
        pass  # the dir is gone already


def _stdin_closed() -> bool:
    """True once raybridge has closed stdin (it writes nothing, so anything readable is EOF); never blocks."""
    try:
        readable, _, _ = select.select([sys.stdin.buffer], [], [], 0)
        return bool(readable) and not os.read(sys.stdin.fileno(), 4096)
    except (OSError, ValueError):
        return True


def _reap() -> None:
    """Collect the exit status of every child (the subreaper inherits orphans, and their zombies)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C belongs to raybridge, which then closes our stdin
    sys.exit(main(sys.argv[1:]))
